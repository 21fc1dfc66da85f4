//! GEMM kernels: `C = act(alpha · A·B + beta · C + bias) + residual`, f32 in and out, as one
//! core template whose pieces are separate helpers:
//!
//! - **loaders** (`load_rows` and its shared-memory stores) bring a
//!   `BM × BK` tile of A and a `BK × BN` tile of B into shared memory, both k-major (element
//!   `(k, i)` at `k * BM + i`), so that the math reads a column of A and a row of B as whole
//!   vectors (each group of 4 rows of K skewed by [`SKEW`] elements, which keeps the
//!   transposing stores free of bank conflicts). A is `[M, K]` row-major; B is `[K, N]`
//!   row-major (`BT` false) or `[N, K]` row-major (`BT` true, the engine layout of weights
//!   `[n_out, n_in]`, `y = x · Wᵀ`). Edge tiles are zero-filled; 16-byte loads where the
//!   operand allows them, per element elsewhere, and without bounds tests from addresses
//!   set up once for K steps inside the matrices. Registers stage the next tile while the
//!   current one is multiplied (two shared buffers, one barrier per K step);
//! - **math** (`mma_f32`): per thread an `8 × 8` register micro-tile, FFMA with exact f32
//!   products, the rows `ty·4 .. +4` and `BM/2 + ty·4 .. +4`, likewise the columns, so that the
//!   shared reads of a warp are conflict-free 16-byte vectors;
//! - **epilogue** (`epilogue`): the accumulators go through shared memory half a tile at a
//!   time, and the shared `core::write_rows` walks each half in row order: 16-byte coalesced
//!   reads of `C` and the residual (a group of them in flight), the bias per column, the
//!   activation (a uniform runtime choice, the shared activation library), 16-byte stores
//!   where the row allows them.
//!
//! The tensor-core kernel's pieces (its `cp.async` loader, TF32 and f16 / bf16 steps, the
//! padded output tile) and the epilogue that every kernel shares (`write_rows`, `store_out`), with
//! [`GemmParams`], are the helper library `lib/gemm_core.rs` (`core::` here), which the tests'
//! mutants of these kernels read as well.
//!
//! A launch is a grid of `(⌈N / BN⌉, ⌈M / BM⌉, batch)` blocks; [`crate::ops::gemm`] validates
//! the views and fills in [`GemmParams`].

use crate::act::{Act, ActElement};
use crate::ptx_kernel;

ptx_kernel! {
    #[path = "src/kernels/lib/act_math.rs"]
    mod math;
    #[path = "src/kernels/lib/gemm_core.rs"]
    mod core;
    #[path = "src/kernels/lib/dequant.rs"]
    mod dq;

    /// The activation codes of [`GemmParams::act`] (see [`act_code`]).
    pub const ACT_IDENTITY: u32 = core::ACT_IDENTITY;
    pub const ACT_RELU: u32 = core::ACT_RELU;
    pub const ACT_RELU6: u32 = core::ACT_RELU6;
    pub const ACT_LEAKY_RELU: u32 = core::ACT_LEAKY_RELU;
    pub const ACT_GELU: u32 = core::ACT_GELU;
    pub const ACT_GELU_TANH: u32 = core::ACT_GELU_TANH;
    pub const ACT_SILU: u32 = core::ACT_SILU;
    pub const ACT_SIGMOID: u32 = core::ACT_SIGMOID;
    pub const ACT_TANH: u32 = core::ACT_TANH;
    pub const ACT_HARD_SWISH: u32 = core::ACT_HARD_SWISH;
    pub const ACT_HARD_SIGMOID: u32 = core::ACT_HARD_SIGMOID;

    /// The bytes of a row of the tensor-core kernels' `[rows, BK]` stage tiles: 128 bytes of
    /// K (`BK` = 32 f32 or 64 16-bit elements) and 16 of padding, which put the 8 rows × 16
    /// bytes of a fragment read on 32 different banks.
    pub const TC_ROW: u32 = core::TC_ROW;
    /// Their pipeline depth: K steps in flight.
    pub const STAGES: u32 = core::STAGES;
    /// The buffers of the `wgmma` kernel's pipeline (`gemm_wgmma`).
    pub const WG_STAGES: u32 = core::WG_STAGES;
    /// The stages of the TMA kernel's pipeline (`gemm_tma`).
    pub const TMA_STAGES: u32 = core::TMA_STAGES;
    /// The stages of the 3xTF32 TMA kernel's pipeline (`gemm_tma_x3`), each holding the
    /// boxes' TF32 heads and tails.
    pub const TMA_X3_STAGES: u32 = core::TMA_X3_STAGES;
    /// The elements between rows of the TMA kernels' epilogue chunks: their shared memory is
    /// `BM` rows of it, in f32, past the stages.
    pub const TMA_EPI_LD: u32 = core::TMA_EPI_LD;
    /// The most warps of a 3xTF32 block of `gemm_mma`: its threads take 255 registers each.
    pub const X3_MAX_WARPS: u32 = 8;
    /// The most outputs of a `gemm_mma` warp tile whose threads live in 128 registers (64 ×
    /// 32, two blocks to a multiprocessor). Larger warp tiles (64 × 64: half the fragment
    /// reads per `mma`) take up to 255, and are built for TF32, f16 and bf16 only: 3xTF32's
    /// second fragments would not fit beside their accumulators.
    pub const SMALL_WARP_TILE: u32 = core::SMALL_WARP_TILE;

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual`, f32 FFMA on `BM × BN` tiles
    /// (threads `BM/8 × BN/TN`, each an `8 × TN` micro-tile: 8 × 16 on 128 × 128, whose
    /// 128 threads make 21 FFMAs per shared-memory read, 8 × 8 on the smaller tiles). The K
    /// steps of tiles that lie inside the matrices load without bounds tests, which makes the
    /// launch `unsafe`.
    ///
    /// # Safety
    ///
    /// `p` describes the operands as [`crate::ops::gemm`] fills it in from a validated
    /// [`crate::Gemm`]: every element of every matrix of A and B (`batch` matrices of
    /// `m × k` at `lda`, `batch_a` apart; `n × k` or `k × n` at `ldb`, `batch_b` apart) lies
    /// inside `a` and `b`; `vec_a` / `vec_b` only where the rows and batch strides are
    /// multiples of 16 bytes and the slice starts 16-byte aligned; `kc` a multiple of `BK`;
    /// the grid's z extent `batch · splits`.
    #[target(sm_80)]
    #[variants((BM, BN, TN) in [(128, 128, 16), (128, 64, 8), (64, 64, 8), (32, 128, 8)], BT in [false, true], (T, O) in [(f32, f32)])]
    #[launch(block = (BM / 8) * (BN / TN), max_regs = if TN == 16 { 255 } else { 168 })]
    pub fn gemm_f32<T: ActElement, O: ActElement, const BM: u32, const BN: u32, const TN: u32, const BT: bool>(
        p: GemmParams,
        a: &[T],
        b: &[T],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        // The two buffers of A and B, and over them (after the last K step) the epilogue's
        // half tile: the dynamic shared memory of [`shared_bytes`].
        let a_s: Shared<[f32; 2 * (BK * BM + BK / 4 * SKEW)]> = dyn_shared(0);
        let b_s: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]> = dyn_shared(2 * (BK * BM + BK / 4 * SKEW) * 4);
        let t_s: Shared<[f32; BM / 2 * BN]> = dyn_shared(0);
        ffma_tiles::<T, DENSE, BM, BN, TN, BT>(p, a, b, bias, res, c, ws, a_s, b_s, t_s);
    }

    /// `y = act(alpha · x · Wᵀ + beta · y + bias[col]) + residual` with the weights `W`
    /// `[n_out, n_in]` in the GGUF / ggml format `FMT` (`dq::FMT_*`; rows of `p.ldb` bytes,
    /// read as they are): [`gemm_f32`]'s tiles with B `[N, K]`, whose loader dequantizes each
    /// weight to f32 on its way into shared memory (`dq::dequant4`, the value of ggml's
    /// dequantization), so that the products are exact and the sums f32, as SGEMM on the
    /// dequantized weights. The prefill path of [`crate::ops::quant::qgemm`].
    ///
    /// # Safety
    ///
    /// As for [`gemm_f32`], for `x` (`a`): `p` describes it as [`crate::ops::quant`] fills it
    /// in from a validated [`crate::Gemm`] (every element of the `m × k` rows at `lda`
    /// inside `a`, `vec_a` only where the rows are multiples of 16 bytes and the slice starts
    /// 16-byte aligned, `vec_b` true), `kc` a multiple of `BK`, the grid's z extent
    /// `splits`. The weights are read with bounds and alignment checks.
    #[target(sm_80)]
    #[variants(FMT in [0, 1, 2, 3, 4], (BM, BN, TN) in [(128, 128, 16), (128, 64, 8), (64, 64, 8), (32, 128, 8)])]
    #[launch(block = (BM / 8) * (BN / TN), max_regs = if TN == 16 { 255 } else { 168 })]
    pub fn gemm_f32_q<const FMT: u32, const BM: u32, const BN: u32, const TN: u32>(
        p: GemmParams,
        a: &[f32],
        w: &[u8],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
        ws: Option<&mut [f32]>,
    ) {
        let a_s: Shared<[f32; 2 * (BK * BM + BK / 4 * SKEW)]> = dyn_shared(0);
        let b_s: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]> = dyn_shared(2 * (BK * BM + BK / 4 * SKEW) * 4);
        let t_s: Shared<[f32; BM / 2 * BN]> = dyn_shared(0);
        ffma_tiles::<u8, FMT, BM, BN, TN, true>(p, a, w, bias, res, c, ws, a_s, b_s, t_s);
    }

    /// The second pass of a split-K GEMM: `C = epilogue(Σ_s ws[s])`, 4 consecutive columns of
    /// a row per thread and turn of a grid-stride loop.
    #[variants(O in [f32, f16, bf16])]
    #[launch(block = 256)]
    pub fn gemm_splitk_reduce<O: ActElement>(
        p: GemmParams,
        ws: &[f32],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
    ) {
        let groups = p.ldw / 4;
        let total = p.batch as u64 * p.m as u64 * groups as u64;
        let mut t = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
        let step = (grid_dim_x() * block_dim_x()) as u64;
        let plane = p.batch as u64 * p.m as u64 * p.ldw as u64;
        while t < total {
            let row_all = t / groups as u64;
            let col = (t % groups as u64) as u32 * 4;
            let z = row_all / p.m as u64;
            let row = (row_all % p.m as u64) as u32;
            let base = row_all * p.ldw as u64 + col as u64;
            let mut v = [0.0f32; 4];
            let mut s = 0u32;
            while s < p.splits {
                let w = ws.load4_nc(s as u64 * plane + base);
                #[unroll]
                for l in 0..4 {
                    v[l] = v[l] + w[l];
                }
                s += 1;
            }
            core::store_out::<O>(p, bias, res, c, z, row, col, v);
            t += step;
        }
    }

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual` on tensor cores with f32
    /// accumulators, on `BM × BN` tiles of `WM × WN` warps (a warp `BM/WM × BN/WN` outputs,
    /// `MT × NT` mma tiles of 16 × 8): f32 inputs in TF32 (`mma.sync.m16n8k8`; with `X3`
    /// each operand is split into a TF32 head and the TF32 rounding of its remainder, and
    /// three products, small · big, big · small and big · big, recover f32 accuracy:
    /// 3xTF32), f16 and bf16 inputs as they are (`m16n8k16`). C and the residual are `O`:
    /// f32, or the inputs' 16-bit type (each output rounded once, to nearest even).
    ///
    /// The loaders copy K steps of `BK` elements (128 bytes of each row) of A (`[BM, BK]`)
    /// and B (`[BN, BK]`, or `[BK, BN]` in rows of `BN + 8`) with `cp.async` into `STAGES`
    /// shared buffers, rows padded by 16 bytes (`BK / 8` elements) so that the fragment reads
    /// of a warp hit 32 different banks; edge chunks are zero-filled by the copy's source
    /// size, rows that are not 16-byte aligned are copied per element. The K steps of tiles
    /// that lie inside the matrices copy without bounds tests, which makes the launch
    /// `unsafe`.
    ///
    /// # Safety
    ///
    /// `p` describes the operands as [`crate::ops::gemm`] fills it in from a validated
    /// [`crate::Gemm`]: every element of every matrix of A and B (`batch` matrices of
    /// `m × k` at `lda`, `batch_a` apart; `n × k` or `k × n` at `ldb`, `batch_b` apart) lies
    /// inside `a` and `b`; `vec_a` / `vec_b` only where the rows and batch strides are
    /// multiples of 16 bytes and the slice starts 16-byte aligned; `kc` a multiple of `BK`;
    /// the grid's z extent `batch · splits`.
    #[target(sm_80)]
    #[variants(
        (BM, BN, WM, WN) in [(256, 128, 4, 2), (128, 128, 2, 4), (128, 64, 4, 2), (64, 64, 2, 2)],
        BT in [false, true],
        (T, O, BK, X3) in [
            (f32, f32, 32, false), (f32, f32, 32, true),
            (f16, f32, 64, false), (f16, f16, 64, false),
            (bf16, f32, 64, false), (bf16, bf16, 64, false)
        ],
        where !(X3 && (WM * WN > X3_MAX_WARPS || BM / WM * (BN / WN) > SMALL_WARP_TILE))
    )]
    #[launch(block = WM * WN * 32, max_regs = if X3 || BM / WM * (BN / WN) > SMALL_WARP_TILE { 255 } else { 128 })]
    pub fn gemm_mma<T: ActElement, O: ActElement, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool>(
        p: GemmParams,
        a: &[T],
        b: &[T],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        let a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]> = dyn_shared(0);
        let b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]> = dyn_shared(STAGES * BM * TC_ROW);
        // 3xTF32's remainders, beside the stages (`mma_shared_bytes`); the other precisions
        // never touch them, and name the stages again, inside their shared memory.
        let al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]> = dyn_shared(if X3 { STAGES * (BM + BN) * TC_ROW } else { 0 });
        let bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]> = dyn_shared(if X3 { STAGES * (2 * BM + BN) * TC_ROW } else { STAGES * BM * TC_ROW });
        let t_s: Shared<[f32; BM * (BN + 4)]> = dyn_shared(0);
        let zs = block_idx_z();
        let z = (zs / p.splits) as u64;
        let kbeg = (zs % p.splits) * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let tid = thread_idx_x();
        // The epilogue's lines of the residual and C start toward L2 now, so that they have
        // landed by the end of the main loop.
        core::epi_prefetch::<O, BM, BN, { WM * WN * 32 }>(p, res, c, z, m0, n0, tid);
        let acc = core::tc_mainloop::<T, BM, BN, WM, WN, BT, BK, X3, { BK + BK / 8 }, true>(a_s, b_s, al_s, bl_s, a, b, p, a_off, b_off, m0, n0, kbeg, kend, tid);
        cp_async_wait_all();
        sync_threads();
        // The accumulators to the padded tile (over the pipeline's buffers), then the rows
        // through the epilogue, `BK² / 1024` runs of 4 outputs at a time: 1 for TF32 (whose
        // main loop on 128-register tiles spills with more), 4 for 16-bit inputs.
        core::acc_to_shared::<BM, BN, WM, WN>(acc, t_s);
        sync_threads();
        core::write_rows::<O, BM, BN, { BN + 4 }, { WM * WN * 32 }, { BK * BK / 1024 }, { BM * (BN + 4) }>(t_s, 0, p, bias, res, c, ws, zs as u64, z, m0, n0, tid);
    }

    /// The K step of [`gemm_mma_q`]: 128 bytes of each row of its 16-bit stages.
    pub const Q_BK: u32 = 64;
    /// The words per row of a stage of the prefill kernels' rings of raw weight bytes
    /// ([`gemm_mma_q`], [`gemm_wgmma_q`]): the most of any format (`dq::q_step_stride`, BF16
    /// and F16's 32 words and one more).
    pub const Q_RING_ROW: u32 = 33;

    /// `x` (`m` rows of `k` f32 at `lda`) rounded to nearest even into `T` (f16 or bf16),
    /// rows `ldh` apart (elements `k .. ldh` of a row left as they are): the activations of
    /// [`gemm_mma_q`]. Each thread takes 8 consecutive elements of a row per turn of a
    /// grid-stride loop (one 16-byte store where the row allows it).
    #[variants(T in [f16, bf16])]
    #[launch(block = 256)]
    pub fn x_to_half<T: ActElement>(m: u32, k: u32, lda: u32, ldh: u32, x: &[f32], h: &mut [T]) {
        let per_row = (k + 7) / 8;
        let total = m as u64 * per_row as u64;
        let mut t = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
        let step = (grid_dim_x() * block_dim_x()) as u64;
        while t < total {
            let row = t / per_row as u64;
            let c = (t % per_row as u64) as u32 * 8;
            let src = row * lda as u64 + c as u64;
            let dst = row * ldh as u64 + c as u64;
            let mut v = [0.0f32 as T; 8];
            #[unroll]
            for l in 0..8 {
                if c + l < k {
                    v[l] = x.load_nc(src + l as u64) as T;
                }
            }
            if (c + 8 <= k) & (ldh % 8 == 0) {
                h.store_vec::<16>(dst, v);
            } else {
                #[unroll]
                for l in 0..8 {
                    if c + l < k {
                        h[dst + l as u64] = v[l];
                    }
                }
            }
            t += step;
        }
    }

    /// `y = act(alpha · x · Wᵀ + beta · y + bias[col]) + residual` on tensor cores with f32
    /// accumulators, the weights `W` `[n_out, n_in]` in the GGUF / ggml format `FMT`
    /// (`dq::FMT_*`; rows of `p.ldb` bytes, read as they are) and the activations `x` in `T`
    /// (f16 or bf16, rounded from f32 by [`x_to_half`]): [`gemm_mma`]'s `BM × BN` tiles of
    /// `WM × WN` warps and its `mma` steps (`core::tc_step`) on stages of [`Q_BK`] of K. A is
    /// copied as in [`gemm_mma`] (`cp.async`, [`STAGES`] deep); the weights' bytes of each K
    /// step are copied as they lie in the rows (`cp.async`, one step further ahead than A)
    /// into a ring of [`STAGES`] stages past A and B (rows of [`Q_RING_ROW`] words), from
    /// where each thread dequantizes a run of 32 weights of one row of the next step to `T`
    /// (each the f32 value of ggml's dequantization rounded once, `dq::q_pairs`) after the
    /// step's `mma`s. The prefill path of [`crate::ops::quant::qgemm_tc`].
    ///
    /// # Safety
    ///
    /// As for [`gemm_mma`], for `x` (`a`, `T`): `p` describes it (every element of the `m ×
    /// k` rows at `lda` inside `a`, `vec_a` only where the rows are multiples of 16 bytes and
    /// the slice starts 16-byte aligned), `kc` a multiple of [`Q_BK`], the grid's z extent
    /// `splits`. The weights are read with bounds and alignment checks.
    #[target(sm_80)]
    #[variants(
        FMT in [0, 1, 2, 3, 4],
        T in [f16, bf16],
        (BM, BN, WM, WN) in [(128, 128, 2, 4), (64, 64, 2, 2)]
    )]
    #[launch(block = WM * WN * 32, max_regs = 128)]
    pub fn gemm_mma_q<T: ActElement, const FMT: u32, const BM: u32, const BN: u32, const WM: u32, const WN: u32>(
        p: GemmParams,
        a: &[T],
        w: &[u8],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
        ws: Option<&mut [f32]>,
    ) {
        let a_s: Shared<[T; STAGES * BM * (Q_BK + Q_BK / 8)]> = dyn_shared(0);
        let b_s: Shared<[T; STAGES * BN * (Q_BK + Q_BK / 8)]> = dyn_shared(STAGES * BM * TC_ROW);
        // The stages of B as words, for the loader's 16-byte stores of pairs.
        let b_w: Shared<[u32; STAGES * BN * (Q_BK + Q_BK / 8) / 2]> = dyn_shared(STAGES * BM * TC_ROW);
        let ring: Shared<[u32; STAGES * BN * Q_RING_ROW]> = dyn_shared(STAGES * (BM + BN) * TC_ROW);
        let t_s: Shared<[f32; BM * (BN + 4)]> = dyn_shared(0);
        let zs = block_idx_z();
        let kbeg = zs * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let tid = thread_idx_x();
        core::epi_prefetch::<f32, BM, BN, { WM * WN * 32 }>(p, res, c, 0, m0, n0, tid);
        let acc = q_mainloop::<T, FMT, BM, BN, WM, WN>(a_s, b_s, b_w, ring, a, w, p, m0, n0, kbeg, kend, tid);
        cp_async_wait_all();
        sync_threads();
        core::acc_to_shared::<BM, BN, WM, WN>(acc, t_s);
        sync_threads();
        core::write_rows::<f32, BM, BN, { BN + 4 }, { WM * WN * 32 }, 4, { BM * (BN + 4) }>(t_s, 0, p, bias, res, c, ws, zs as u64, 0, m0, n0, tid);
    }

    /// The main loop of [`gemm_mma_q`] over the K steps of `kbeg..kend`: A through the
    /// `cp.async` pipeline (`core::tc_load`'s copies of A), the weights' bytes through a ring
    /// of [`STAGES`] stages of raw weights (`q_ring_copy`, one step further ahead than A),
    /// thread `tid` dequantizing one run of 32 weights of one row of each step (`q_lane`;
    /// the tiles have `2 · BN` threads). Copy group `g` holds A of step `g` and the weights
    /// of step `g + 1` (the first also step 0's). Step `kt`: its copies waited for, the
    /// barrier (which also shows B of `kt`, dequantized during the step before), the copies
    /// of A of step `kt + STAGES - 1` and of the weights of `kt + STAGES` (into the ring
    /// stage step `kt - 1` dequantized from), the `mma`s, then the weights of step `kt + 1`
    /// dequantized into their stage of B (last read by step `kt + 1 - STAGES`, before the
    /// barrier).
    fn q_mainloop<T, const FMT: u32, const BM: u32, const BN: u32, const WM: u32, const WN: u32>(
        a_s: Shared<[T; STAGES * BM * (Q_BK + Q_BK / 8)]>,
        b_s: Shared<[T; STAGES * BN * (Q_BK + Q_BK / 8)]>,
        b_w: Shared<[u32; STAGES * BN * (Q_BK + Q_BK / 8) / 2]>,
        ring: Shared<[u32; STAGES * BN * Q_RING_ROW]>,
        a: &[T],
        w: &[u8],
        p: GemmParams,
        m0: u32,
        n0: u32,
        kbeg: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
        let mut acc = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
        let mut span = 0u32;
        if kend > kbeg {
            span = kend - kbeg;
        }
        let ktiles = (span + (Q_BK - 1)) / Q_BK;
        let inner = (m0 + BM <= p.m) & p.vec_a;
        let al4 = p.ldb % 4 == 0;
        #[unroll]
        for s in 0..STAGES - 1 {
            let k0 = kbeg + s * Q_BK;
            if s < ktiles {
                q_load_a::<T, BM, WM, WN>(a_s, s, a, p, m0, k0, kend, inner & (k0 + Q_BK <= kend), tid);
            }
            if (s == 0) & (ktiles > 0) {
                q_ring_copy::<FMT, BN, { STAGES * BN * Q_RING_ROW }>(ring, 0, w, p, n0, kbeg, kend, al4, tid);
            }
            if s + 1 < ktiles {
                q_ring_copy::<FMT, BN, { STAGES * BN * Q_RING_ROW }>(ring, s + 1, w, p, n0, k0 + Q_BK, kend, al4, tid);
            }
            cp_async_commit();
        }
        // This thread's row of W and run of each step (`q_lane`).
        let lane = q_lane(tid);
        let ok = (n0 + lane[0] < p.n) & (tid < 2 * BN);
        let kq = kbeg + 32 * lane[1];
        let st = lane[0] * ((Q_BK + Q_BK / 8) / 2) + 16 * lane[1];
        cp_async_wait(STAGES - 2);
        sync_threads();
        if ktiles > 0 {
            q_store::<T, FMT, BN>(b_w, st, q_ring_pairs::<T, FMT, BN, { STAGES * BN * Q_RING_ROW }>(ring, 0, lane[0], kq, kend, ok));
        }
        let reads = core::tc_reads::<T, BM, BN, WM, WN, true, { Q_BK + Q_BK / 8 }>(tid);
        let a_end = core::tc_a_end::<T, BM, WM, true, Q_BK, { Q_BK + Q_BK / 8 }>();
        let b_end = core::tc_b_end::<T, BN, WN, true, Q_BK, { Q_BK + Q_BK / 8 }>();
        let mut kt = 0u32;
        let mut stage = 0u32;
        while kt < ktiles {
            cp_async_wait(STAGES - 2);
            sync_threads();
            let next = kt + STAGES - 1;
            // The stage before this one: A's of step `kt + STAGES - 1`.
            let ns = if stage == 0 { STAGES - 1 } else { stage - 1 };
            if next < ktiles {
                let k0 = kbeg + next * Q_BK;
                q_load_a::<T, BM, WM, WN>(a_s, ns, a, p, m0, k0, kend, inner & (k0 + Q_BK <= kend), tid);
            }
            if next + 1 < ktiles {
                q_ring_copy::<FMT, BN, { STAGES * BN * Q_RING_ROW }>(ring, stage, w, p, n0, kbeg + (next + 1) * Q_BK, kend, al4, tid);
            }
            cp_async_commit();
            let ao = reads[0] + stage * (BM * (Q_BK + Q_BK / 8));
            let bo = reads[1] + stage * (BN * (Q_BK + Q_BK / 8));
            if (((ao as u64) + a_end as u64) <= (a_s.len() as u64)) & (((bo as u64) + b_end as u64) <= (b_s.len() as u64)) {
                acc = core::tc_step::<T, BM, BN, WM, WN, true, Q_BK, { Q_BK + Q_BK / 8 }, false>(acc, a_s, b_s, a_s, b_s, ao, bo, 0);
            }
            stage = if stage == STAGES - 1 { 0 } else { stage + 1 };
            if kt + 1 < ktiles {
                let v = q_ring_pairs::<T, FMT, BN, { STAGES * BN * Q_RING_ROW }>(ring, stage, lane[0], kq + (kt + 1) * Q_BK, kend, ok);
                q_store::<T, FMT, BN>(b_w, st + stage * (BN * (Q_BK + Q_BK / 8) / 2), v);
            }
            kt += 1;
        }
        acc
    }

    /// The copies of A of one K step at `k0` into stage `stage` (`core::copy_rows`, as
    /// `core::tc_load` issues them; `fast`: the step lies inside A and its rows are 16-byte
    /// aligned).
    fn q_load_a<T, const BM: u32, const WM: u32, const WN: u32>(
        a_s: Shared<[T; STAGES * BM * (Q_BK + Q_BK / 8)]>,
        stage: u32,
        a: &[T],
        p: GemmParams,
        m0: u32,
        k0: u32,
        kend: u32,
        fast: bool,
        tid: u32,
    ) {
        if fast {
            core::copy_rows::<T, BM, Q_BK, { Q_BK + Q_BK / 8 }, { WM * WN * 32 }, { STAGES * BM * (Q_BK + Q_BK / 8) }, true>(a_s, stage * BM * (Q_BK + Q_BK / 8), a, 0, m0, p.m, k0, kend, p.lda, p.vec_a, tid);
        } else {
            core::copy_rows::<T, BM, Q_BK, { Q_BK + Q_BK / 8 }, { WM * WN * 32 }, { STAGES * BM * (Q_BK + Q_BK / 8) }, false>(a_s, stage * BM * (Q_BK + Q_BK / 8), a, 0, m0, p.m, k0, kend, p.lda, p.vec_a, tid);
        }
    }

    /// Which run of the weights' steps thread `tid` loads: `[row, half]`, row `row` of the
    /// tile and weights `32 · half ..` of each step. A warp takes one half of 32 rows, so that
    /// the half (odd or even block of Q8_0 and Q4_0, read from different places of their
    /// pair's words: `dq::q_ring`) is the same across it; warps `2i` and `2i + 1` take the two
    /// halves of rows `32 i ..`.
    fn q_lane(tid: u32) -> [u32; 2] {
        [tid / 64 * 32 + tid % 32, tid / 32 % 2]
    }

    /// A thread's 32 weights as pairs (`dq::q_pairs`) into the words of a stage of B from
    /// word `at` (its row's run: four 16-byte stores; threads past `2 · BN` have none).
    fn q_store<T, const FMT: u32, const BN: u32>(b_w: Shared<[u32; STAGES * BN * (Q_BK + Q_BK / 8) / 2]>, at: u32, v: [u32; 16]) {
        if (thread_idx_x() < 2 * BN) & ((at as u64) + 16 <= b_w.len() as u64) {
            #[unroll]
            for j in 0..4 {
                b_w.store4(at + 4 * j, [v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]]);
            }
        }
    }

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual` on Hopper's warpgroup tensor
    /// cores (`wgmma`, sm_90a), f16 and bf16 inputs, B `[N, K]`, f32 accumulators: `BM / 64`
    /// warpgroups, each `64 × BN` outputs. The loaders copy K steps of 128 bytes of each row
    /// of A and B with `cp.async` into `WG_STAGES` buffers laid out as `wgmma`'s 128-byte
    /// swizzle reads them (`core::wg_copy`), edges zero-filled; `core::wg_mainloop` keeps one
    /// step's `wgmma`s in flight while the next is issued. The epilogue is the core's
    /// (`write_rows`) over the accumulators' padded tile. The K steps of tiles that lie inside
    /// the matrices copy without bounds tests, which makes the launch `unsafe`.
    ///
    /// # Safety
    ///
    /// As for [`gemm_mma`] with B `[N, K]`: `p` describes the operands as
    /// [`crate::ops::gemm`] fills it in from a validated [`crate::Gemm`], `kc` a multiple of
    /// the K step (64), the grid's z extent `batch · splits`.
    #[target(sm_90a)]
    #[variants(
        (BM, BN) in [(128, 128), (128, 256)],
        (T, O) in [(f16, f32), (f16, f16), (bf16, f32), (bf16, bf16)]
    )]
    #[launch(block = BM / 64 * 128, max_regs = if BN > 128 { 255 } else { 168 })]
    pub fn gemm_wgmma<T: ActElement, O: ActElement, const BM: u32, const BN: u32>(
        p: GemmParams,
        a: &[T],
        b: &[T],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        let a_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]> = dyn_shared(0);
        let b_s: Shared<[T; WG_STAGES * BN * (128 / size_of::<T>())]> = dyn_shared(WG_STAGES * BM * 128);
        let t_s: Shared<[f32; BM * (BN + 4)]> = dyn_shared(0);
        let zs = block_idx_z();
        let z = (zs / p.splits) as u64;
        let kbeg = (zs % p.splits) * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let tid = thread_idx_x();
        core::epi_prefetch::<O, BM, BN, { BM / 64 * 128 }>(p, res, c, z, m0, n0, tid);
        let acc = core::wg_mainloop::<T, BM, BN>(a_s, b_s, a, b, p, a_off, b_off, m0, n0, kbeg, kend, tid);
        cp_async_wait_all();
        sync_threads();
        core::wg_to_shared::<BM, BN>(acc, t_s);
        sync_threads();
        core::write_rows::<O, BM, BN, { BN + 4 }, { BM / 64 * 128 }, 4, { BM * (BN + 4) }>(t_s, 0, p, bias, res, c, ws, zs as u64, z, m0, n0, tid);
    }

    /// `y = act(alpha · x · Wᵀ + beta · y + bias[col]) + residual` on Hopper's warpgroup
    /// tensor cores (`wgmma`, sm_90a) with the weights as the product's A operand, taken from
    /// registers: the block computes `yᵀ` for `BN` rows of W (`BN / 64` consumer warpgroups
    /// of 64 rows) and `BM` tokens (the `wgmma`s' N), with a producer warpgroup beside them.
    /// The producer's first warp has the tensor memory accelerator copy x (in `T`, rounded
    /// from f32 by [`x_to_half`]; `wgmma`'s B) as boxes of `BM` tokens × 128 bytes of K
    /// (`tx`: `[K, tokens]`, 128-byte swizzle, zero-filled past the matrix) into
    /// [`WG_STAGES`] buffers (`wq_produce_x`); its other three warps copy the weights' bytes
    /// as they lie in the rows into a ring of chunks of K (`dq::q_chunk_steps`;
    /// [`Q_RING_WORDS`] words per row in all; `wq_produce_w`). Each buffer and ring slot is
    /// announced on an `mbarrier` when it has landed and released on another when every
    /// consumer is done with it, so the warps run out of step, with no barrier of the whole
    /// block in the main loop. Each consumer thread dequantizes its share of `wgmma`'s A
    /// fragments straight from the ring into registers (`dq::q_frag`, each weight the f32 of
    /// ggml's dequantization rounded once to `T`) while the step before is multiplied
    /// (`wq_consume`). The results go through shared memory transposed (tokens × rows) to
    /// the shared epilogue. The prefill path of [`crate::ops::quant::qgemm_tc`] on compute
    /// capability 9.0.
    ///
    /// # Safety
    ///
    /// `p` describes the operands as for [`gemm_mma_q`] (its fields of A aside: `tx` holds
    /// x), with `kc` a multiple of 256 (a chunk of K of every format) and the grid's z extent
    /// `splits`.
    #[target(sm_90a)]
    #[variants(
        FMT in [0, 1, 2, 3, 4],
        T in [f16, bf16],
        (BM, BN) in [(128, 128)]
    )]
    #[launch(block = BN / 64 * 128 + 128, max_regs = 168)]
    pub fn gemm_wgmma_q<T: ActElement, const FMT: u32, const BM: u32, const BN: u32>(
        p: GemmParams,
        tx: TensorMap<T, { 128 / size_of::<T>() }, BM, 1>,
        w: &[u8],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
        ws: Option<&mut [f32]>,
    ) {
        let x_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]> = dyn_shared(0);
        let ring: Shared<[u32; BN * Q_RING_WORDS]> = dyn_shared(WG_STAGES * BM * 128);
        let t_s: Shared<[f32; BM * (BN + 4)]> = dyn_shared(0);
        let full: Shared<[u64; WG_STAGES]>;
        let empty: Shared<[u64; WG_STAGES]>;
        let landed: Shared<[u64; Q_RING_SLOTS]>;
        let freed: Shared<[u64; Q_RING_SLOTS]>;
        let zs = block_idx_z();
        let kbeg = zs * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let tid = thread_idx_x();
        let consumers = BN / 64 * 128;
        let mut span = 0u32;
        if kend > kbeg {
            span = kend - kbeg;
        }
        let ktiles = (span + (Q_BK - 1)) / Q_BK;
        if tid == 0 {
            prefetch_tensormap(tx);
            #[unroll]
            for s in 0..WG_STAGES {
                full.mbar_init(s, 1);
                empty.mbar_init(s, consumers / 32);
            }
            #[unroll]
            for s in 0..Q_RING_SLOTS {
                landed.mbar_init(s, WQ_COPIERS);
                freed.mbar_init(s, consumers);
            }
        }
        fence_proxy_async();
        sync_threads();
        let mut acc = [0.0f32; BM / 2];
        if tid < consumers {
            acc = wq_consume::<T, FMT, BM, BN>(x_s, full, empty, ring, landed, freed, ktiles, tid);
        } else if tid == consumers {
            wq_produce_x::<T, BM>(x_s, full, empty, tx, kbeg, ktiles, m0);
        } else if tid >= consumers + 32 {
            wq_produce_w::<FMT, BN>(ring, landed, freed, w, p, n0, kbeg, kend, ktiles, tid - consumers - 32);
        }
        sync_threads();
        if tid < consumers {
            wq_to_shared::<BM, BN>(acc, t_s);
        }
        sync_threads();
        if tid < consumers {
            core::write_rows::<f32, BM, BN, { BN + 4 }, { BN / 64 * 128 }, 4, { BM * (BN + 4) }>(t_s, 0, p, bias, res, c, ws, zs as u64, 0, m0, n0, tid);
        }
    }

    /// The words per row of W of [`gemm_wgmma_q`]'s ring of raw weights: its slots of chunks
    /// of K (`dq::q_ring_slots` × `dq::q_chunk_row`), the most of any format (Q8_0: 2 × 68;
    /// BF16 / F16 3 × 36; Q4_0 and Q4_K 2 × 36).
    pub const Q_RING_WORDS: u32 = 136;

    /// The most slots of [`gemm_wgmma_q`]'s ring of any format (`dq::q_ring_slots`).
    const Q_RING_SLOTS: u32 = 3;

    /// The threads of [`gemm_wgmma_q`] that copy the weights into the ring: the producer
    /// warpgroup's last three warps.
    const WQ_COPIERS: u32 = 96;

    /// The K steps of one turn of [`wq_consume`]'s loop: once around the stages of x, a chunk
    /// of the block formats, and an even count, so that the two sets of fragment registers
    /// alternate in place. Step `i` of turn `t` (`kt = WQ_UNROLL · t + i`) thus uses x's stage
    /// `i`, the phase of parity `t % 2`, and is step `i` of chunk `t` of the block formats:
    /// all but `t` constants of the unrolled code.
    const WQ_UNROLL: u32 = WG_STAGES;

    /// A consumer thread of [`gemm_wgmma_q`] (warpgroup `tid / 128`, rows `64 (tid / 128) ..`
    /// of the block's W by its `BM` tokens), K steps `0 .. ktiles`. The A fragments of step
    /// `kt` are in one of two sets of registers (`fa` for even steps, `fb` for odd ones):
    /// step `kt`'s `wgmma`s (`wq_mma`) read one set while step `kt + 1`'s weights are
    /// dequantized into the other (`wq_next`), whose `wgmma`s, step `kt - 1`'s, the
    /// `wgmma_wait(1)` between them has completed. That wait also frees x of step `kt - 1`:
    /// each warp's lane 0 then arrives on its buffer's `empty` barrier.
    fn wq_consume<T, const FMT: u32, const BM: u32, const BN: u32>(
        x_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]>,
        full: Shared<[u64; WG_STAGES]>,
        empty: Shared<[u64; WG_STAGES]>,
        ring: Shared<[u32; BN * Q_RING_WORDS]>,
        landed: Shared<[u64; Q_RING_SLOTS]>,
        freed: Shared<[u64; Q_RING_SLOTS]>,
        ktiles: u32,
        tid: u32,
    ) -> [f32; BM / 2] {
        // The thread's rows of W (`r0`, `r0 + 8`) and column pair in the A fragments.
        let warp = tid / 32;
        let r0 = warp / 4 * 64 + warp % 4 * 16 + tid % 32 / 4;
        let lane = dq::q_frag_lane::<FMT>(tid % 4);
        let mut acc = [0.0f32; BM / 2];
        let mut fa = [0u32; 16];
        let mut fb = [0u32; 16];
        if ktiles > 0 {
            fa = wq_next::<T, FMT, BN>(ring, landed, freed, 0, 0, r0, lane);
        }
        let mut turn = 0u32;
        while turn * WQ_UNROLL < ktiles {
            let kt = turn * WQ_UNROLL;
            #[unroll]
            for i in 0..WQ_UNROLL {
                if kt + i < ktiles {
                    if i % 2 == 0 {
                        acc = wq_mma::<T, BM>(acc, fa, x_s, full, i, turn % 2);
                    } else {
                        acc = wq_mma::<T, BM>(acc, fb, x_s, full, i, turn % 2);
                    }
                    wgmma_wait(1);
                    // x of the step before: stage `i - 1`, or the last one of the turn before.
                    if ((turn > 0) | (i > 0)) & (tid % 32 == 0) {
                        empty.mbar_arrive((i + WG_STAGES - 1) % WG_STAGES);
                    }
                    if kt + i + 1 < ktiles {
                        // The next step: step `i + 1` of this turn, or the first of the next.
                        let nt = turn + (i + 1) / WQ_UNROLL;
                        let ni = (i + 1) % WQ_UNROLL;
                        if i % 2 == 0 {
                            fb = wq_next::<T, FMT, BN>(ring, landed, freed, nt, ni, r0, lane);
                        } else {
                            fa = wq_next::<T, FMT, BN>(ring, landed, freed, nt, ni, r0, lane);
                        }
                    }
                }
            }
            turn += 1;
        }
        wgmma_wait(0);
        acc
    }

    /// The `wgmma`s of a step on x's stage `s` with the A fragments `f`: the wait for the
    /// stage (its `full` barrier, phase of parity `parity`), then 4 `wgmma`s of 16 of K, one
    /// commit group.
    fn wq_mma<T, const BM: u32>(acc: [f32; BM / 2], f: [u32; 16], x_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]>, full: Shared<[u64; WG_STAGES]>, s: u32, parity: u32) -> [f32; BM / 2] {
        let mut d = acc;
        let xb = s * BM * Q_BK;
        // Always true (`s < WG_STAGES`): proves the barrier and the descriptors.
        if (s < WG_STAGES) & (((xb as u64) + (BM * Q_BK) as u64) <= (x_s.len() as u64)) {
            full.mbar_wait(s, parity);
            wgmma_fence();
            #[unroll]
            for ks in 0..4 {
                let fr = [f[4 * ks], f[4 * ks + 1], f[4 * ks + 2], f[4 * ks + 3]];
                if T == bf16 {
                    d = wgmma_bf16(d, fr, x_s.wgmma_desc(xb, ks * (Q_BK / 4), BM), true);
                } else {
                    d = wgmma_f16(d, fr, x_s.wgmma_desc(xb, ks * (Q_BK / 4), BM), true);
                }
            }
            wgmma_commit();
        }
        d
    }

    /// The A fragments (`wq_frag`) of step `i` of turn `turn` (`i` a constant of the unrolled
    /// turn): its chunk and its step in the chunk (`turn` and `i` for the block formats, whose
    /// chunks are turns; step `WQ_UNROLL · turn + i` and 0 for the float ones, a step a
    /// chunk). At the first step of a chunk, first the wait for the chunk to land in its slot
    /// (`landed`, parity `chunk / slots % 2`); after the chunk's last step, the thread's
    /// release of the slot (`freed`).
    fn wq_next<T, const FMT: u32, const BN: u32>(ring: Shared<[u32; BN * Q_RING_WORDS]>, landed: Shared<[u64; Q_RING_SLOTS]>, freed: Shared<[u64; Q_RING_SLOTS]>, turn: u32, i: u32, r0: u32, lane: [u32; 4]) -> [u32; 16] {
        let cs = dq::q_chunk_steps::<FMT>();
        let mut ch = turn;
        let mut sc = i;
        if cs != WQ_UNROLL {
            ch = (WQ_UNROLL * turn + i) / cs;
            sc = (WQ_UNROLL * turn + i) % cs;
        }
        let slots = dq::q_ring_slots::<FMT>();
        let slot = ch % slots;
        let mut f = [0u32; 16];
        // Always true (`dq::q_ring_slots` ≤ `Q_RING_SLOTS`): proves the barriers.
        if slot < Q_RING_SLOTS {
            if sc == 0 {
                landed.mbar_wait(slot, ch / slots % 2);
            }
            f = wq_frag::<T, FMT, BN>(ring, slot, sc, r0, lane);
            if sc == cs - 1 {
                freed.mbar_arrive(slot);
            }
        }
        f
    }

    /// The producer of x of [`gemm_wgmma_q`] (one thread): step `kt`'s box waits until its
    /// buffer `kt % WG_STAGES` is free (`empty`: every consumer warp is done with step `kt -
    /// WG_STAGES`, the phase of parity `(kt / WG_STAGES + 1) % 2`; at once in the first
    /// round), then has the tensor memory accelerator copy `BM` tokens from `m0` by 128 bytes
    /// of K at `kbeg + 64 kt` (zero-filled past the matrix, 128-byte swizzled: `wgmma`'s B),
    /// announced on the buffer's `full` barrier by its bytes.
    fn wq_produce_x<T, const BM: u32>(x_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]>, full: Shared<[u64; WG_STAGES]>, empty: Shared<[u64; WG_STAGES]>, tx: TensorMap<T, { 128 / size_of::<T>() }, BM, 1>, kbeg: u32, ktiles: u32, m0: u32) {
        let mut kt = 0u32;
        while kt < ktiles {
            let s = kt % WG_STAGES;
            let xi = s * (BM * Q_BK);
            // Always true (`s < WG_STAGES`): proves the box and the barriers.
            if (s < WG_STAGES) & (((xi as u64) + (BM * Q_BK) as u64) <= (x_s.len() as u64)) {
                empty.mbar_wait(s, (kt / WG_STAGES + 1) % 2);
                full.mbar_arrive_expect_tx(s, BM * 128);
                x_s.tma_load(xi, tx, (kbeg + kt * Q_BK) as i32, m0 as i32, 0, full, s);
            }
            kt += 1;
        }
    }

    /// A producer thread of the weights of [`gemm_wgmma_q`] (copier `ct` of [`WQ_COPIERS`]):
    /// chunk `ch` waits until its slot `ch % dq::q_ring_slots` is free (`freed`: every
    /// consumer thread is done with the chunk `dq::q_ring_slots` before, the phase of parity
    /// `(ch / slots + 1) % 2`; at once in the first round), then the thread copies its share
    /// (`wq_chunk`) and arrives on the slot's `landed` barrier once its copies have landed.
    fn wq_produce_w<const FMT: u32, const BN: u32>(
        ring: Shared<[u32; BN * Q_RING_WORDS]>,
        landed: Shared<[u64; Q_RING_SLOTS]>,
        freed: Shared<[u64; Q_RING_SLOTS]>,
        w: &[u8],
        p: GemmParams,
        n0: u32,
        kbeg: u32,
        kend: u32,
        ktiles: u32,
        ct: u32,
    ) {
        let cs = dq::q_chunk_steps::<FMT>();
        let slots = dq::q_ring_slots::<FMT>();
        let al = [(p.ldb % 16 == 0) & w.is_aligned(0, 16), (p.ldb % 4 == 0) & w.is_aligned(0, 4)];
        let chunks = (ktiles + cs - 1) / cs;
        let mut ch = 0u32;
        while ch < chunks {
            let slot = ch % slots;
            // Always true (`slots` ≤ `Q_RING_SLOTS`): proves the barriers.
            if slot < Q_RING_SLOTS {
                freed.mbar_wait(slot, (ch / slots + 1) % 2);
                wq_chunk::<FMT, BN>(ring, ch, w, p, n0, kbeg, kend, al, ct);
                if al[1] {
                    landed.mbar_arrive_cp_async(slot);
                } else {
                    // The 2-byte path stores through registers: a plain arrival releases them.
                    landed.mbar_arrive(slot);
                }
            }
            ch += 1;
        }
    }

    /// The thread's A fragments of step `sc` of the chunk in ring slot `slot`: four words for
    /// each 16 of K, `wgmma`'s order (rows `r0` and `r0 + 8` of the block's W, K `2 c ..` and
    /// `2 c + 8 ..` of the 16; `dq::q_frag`).
    fn wq_frag<T, const FMT: u32, const BN: u32>(ring: Shared<[u32; BN * Q_RING_WORDS]>, slot: u32, sc: u32, r0: u32, lane: [u32; 4]) -> [u32; 16] {
        let row = dq::q_chunk_row::<FMT>();
        let at = (slot * BN + r0) * row;
        let lo = dq::q_frag::<FMT, T, { BN * Q_RING_WORDS }>(ring, at, sc, lane);
        let hi = dq::q_frag::<FMT, T, { BN * Q_RING_WORDS }>(ring, at + 8 * row, sc, lane);
        let mut f = [0u32; 16];
        #[unroll]
        for ks in 0..4 {
            f[4 * ks] = lo[2 * ks];
            f[4 * ks + 1] = hi[2 * ks];
            f[4 * ks + 2] = lo[2 * ks + 1];
            f[4 * ks + 3] = hi[2 * ks + 1];
        }
        f
    }

    /// Copier `tid`'s copies of chunk `ch` of K (from `kbeg`; `dq::q_chunk_steps` steps) of the
    /// rows `n0 .. n0 + BN` of W into its slot of the ring (`ch % dq::q_ring_slots`, rows of
    /// `dq::q_chunk_row` words). Where the rows are 16-byte aligned (`al[0]`) and the chunk
    /// lies before `kend`, the thread copies whole rows' chunks (rows `tid + q ·
    /// WQ_COPIERS`), its 16-byte pieces unrolled, each row proven inside W by one test (rows
    /// past `n` zero-filled). Else the slot's pieces are shared out one by one, piece `i =
    /// tid + q · WQ_COPIERS` of the slot piece `i % pieces` of row `i / pieces`; each copy
    /// is shrunk to the bytes of the row before `kend` (and to none past `n`: the copies
    /// zero-fill the rest); rows that are not 16-byte aligned go by 4-byte copies (`al[1]`),
    /// else by 2-byte reads stored through registers (rows of these formats are whole 2-byte
    /// units).
    fn wq_chunk<const FMT: u32, const BN: u32>(
        ring: Shared<[u32; BN * Q_RING_WORDS]>,
        ch: u32,
        w: &[u8],
        p: GemmParams,
        n0: u32,
        kbeg: u32,
        kend: u32,
        al: [bool; 2],
        tid: u32,
    ) {
        let pieces = dq::q_chunk_bytes::<FMT>() / 16;
        let k0 = kbeg + ch * dq::q_chunk_steps::<FMT>() * Q_BK;
        let span = dq::q_chunk_span::<FMT>(k0, kend);
        let from = dq::q_row_byte::<FMT>(k0);
        let slot = ch % dq::q_ring_slots::<FMT>() * BN;
        if al[0] & (span == dq::q_chunk_bytes::<FMT>()) {
            let mut r = tid;
            while r < BN {
                let at = (slot + r) * dq::q_chunk_row::<FMT>();
                let e = (n0 + r) as u64 * p.ldb as u64 + from as u64;
                // `e` first below the length, so that `e + bytes` cannot wrap: the test proves
                // every copy of the row inside W.
                if (n0 + r < p.n) & (e < w.len()) & (e + dq::q_chunk_bytes::<FMT>() as u64 <= w.len()) & w.is_aligned(e, 16) & (((at as u64) + (4 * pieces) as u64) <= (ring.len() as u64)) {
                    #[unroll]
                    for pc in 0..dq::q_chunk_bytes::<FMT>() / 16 {
                        ring.cp_async16(at + 4 * pc, w, e + (16 * pc) as u64);
                    }
                } else if ((at as u64) + (4 * pieces) as u64) <= (ring.len() as u64) {
                    #[unroll]
                    for pc in 0..dq::q_chunk_bytes::<FMT>() / 16 {
                        ring.cp_async16_partial(at + 4 * pc, w, 0u64, 0);
                    }
                }
                r += WQ_COPIERS;
            }
            return;
        }
        // A loop, not unrolled: its body is there once (the copies of one piece).
        let mut i = tid;
        while i < BN * pieces {
            let r = i / pieces;
            let pc = i % pieces;
            let at = (slot + r) * dq::q_chunk_row::<FMT>() + 4 * pc;
            let mut nb = 0u32;
            if (n0 + r < p.n) & (16 * pc < span) {
                nb = (span - 16 * pc).min(16);
            }
            let e = (n0 + r) as u64 * p.ldb as u64 + (from + 16 * pc) as u64;
            if al[0] {
                ring.cp_async16_partial(at, w, if nb == 0 { 0u64 } else { e }, nb);
            } else if al[1] {
                #[unroll]
                for j in 0..4 {
                    let mut n = 0u32;
                    if nb > 4 * j {
                        n = (nb - 4 * j).min(4);
                    }
                    ring.cp_async4_partial(at + j, w, if n == 0 { 0u64 } else { e + (4 * j) as u64 }, n);
                }
            } else {
                #[unroll]
                for j in 0..4 {
                    let mut v = 0u32;
                    if nb > 4 * j {
                        v = w.read::<u16>(e + (4 * j) as u64) as u32;
                    }
                    if nb > 4 * j + 2 {
                        v |= (w.read::<u16>(e + (4 * j + 2) as u64) as u32) << 16;
                    }
                    ring[at + j] = v;
                }
            }
            i += WQ_COPIERS;
        }
    }

    /// The accumulators of [`gemm_wgmma_q`] (rows of W by tokens) to the padded tile of
    /// tokens × rows `BM × (BN + 4)`: thread `(q, g, t)` (warp `q` of warpgroup `w`, lane `4 g
    /// + t`) holds, in registers `4 j .. 4 j + 4`, rows `64 w + 16 q + g` and `+ 8` of W,
    /// tokens `8 j + 2 t` and `+ 1`.
    fn wq_to_shared<const BM: u32, const BN: u32>(acc: [f32; BM / 2], t_s: Shared<[f32; BM * (BN + 4)]>) {
        let lane = lane_id();
        let warp = warp_id();
        let to = (lane % 4) * 2 * (BN + 4) + warp / 4 * 64 + warp % 4 * 16 + lane / 4;
        if ((to as u64) + ((BM - 7) * (BN + 4) + 9) as u64) <= (t_s.len() as u64) {
            #[unroll]
            for j in 0..BM / 8 {
                // Each index `to + (a constant)`, the form the range above proves.
                t_s[to + j * 8 * (BN + 4)] = acc[4 * j];
                t_s[to + (j * 8 + 1) * (BN + 4)] = acc[4 * j + 1];
                t_s[to + (j * 8 * (BN + 4) + 8)] = acc[4 * j + 2];
                t_s[to + ((j * 8 + 1) * (BN + 4) + 8)] = acc[4 * j + 3];
            }
        }
    }
    /// The copies of the weights' bytes of rows `n0 .. n0 + BN` (those inside W) of the K
    /// step at `k0` into stage `stage` of a prefill kernel's ring of raw weights, `2 · BN`
    /// threads: thread `tid` copies part `tid / BN` of row `tid % BN` (`dq::q_step_src`:
    /// word `j` of the part at `(stage · BN + row) · dq::q_step_stride + part ·
    /// dq::q_part_words + j`). Where the rows are 4-byte aligned (`al4`) and the part lies
    /// inside W and the step inside K, its words go by `cp.async` of 4 bytes from one run of
    /// the row; else word by word, each `cp.async` shrunk to the bytes inside the step (or,
    /// without `al4`, read 2 bytes at a time and stored: rows of these formats are whole
    /// 2-byte units).
    fn q_ring_copy<const FMT: u32, const BN: u32, const LEN: u32>(
        ring: Shared<[u32; LEN]>,
        stage: u32,
        w: &[u8],
        p: GemmParams,
        n0: u32,
        k0: u32,
        kend: u32,
        al4: bool,
        tid: u32,
    ) {
        let r = tid % BN;
        let part = tid / BN;
        let words = dq::q_part_words::<FMT>();
        let at = (stage * BN + r) * dq::q_step_stride::<FMT>() + part * words;
        let row_ok = (n0 + r < p.n) & (part < 2);
        let first = dq::q_step_src::<FMT>(k0, kend, part, 0);
        let e = (n0 + r) as u64 * p.ldb as u64 + first[0] as u64;
        let whole = al4 & row_ok & (k0 + Q_BK <= kend);
        // (`e` first below the length, so that `e + 4 · words` cannot wrap: the test proves
        // the copies inside `w`.)
        if whole & (e < w.len()) & (e + (4 * words) as u64 <= w.len()) & w.is_aligned(e, 4) & ((at as u64) + words as u64 <= ring.len() as u64) {
            #[unroll]
            for j in 0..16 {
                // (Known after unrolling: only the format's words remain.)
                if j >= words {
                    break;
                }
                ring.cp_async4(at + j, w, e + (4 * j) as u64);
            }
        } else {
            #[unroll]
            for j in 0..16 {
                if j >= words {
                    break;
                }
                let mut src = dq::q_step_src::<FMT>(k0, kend, part, j);
                if !row_ok {
                    src[1] = 0;
                }
                let ej = (n0 + r) as u64 * p.ldb as u64 + src[0] as u64;
                if al4 {
                    ring.cp_async4_partial(at + j, w, if src[1] == 0 { 0u64 } else { ej }, src[1]);
                } else {
                    let mut v = 0u32;
                    if src[1] > 0 {
                        v = w.read::<u16>(ej) as u32;
                    }
                    if src[1] > 2 {
                        v |= (w.read::<u16>(ej + 2) as u32) << 16;
                    }
                    ring[at + j] = v;
                }
            }
        }
    }

    /// The 32 weights at `k` of row `row` of ring stage `stage` as 16 pairs of `T`
    /// (`dq::q_pairs`; 0 where not `ok` or past `kend`).
    fn q_ring_pairs<T, const FMT: u32, const BN: u32, const LEN: u32>(ring: Shared<[u32; LEN]>, stage: u32, row: u32, k: u32, kend: u32, ok: bool) -> [u32; 16] {
        let mut v = [0u32; 16];
        if ok & (k < kend) {
            let at = (stage * BN + row) * dq::q_step_stride::<FMT>();
            v = dq::q_pairs::<FMT, T>(dq::q_ring::<FMT, LEN>(ring, at, k), k);
        }
        v
    }

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual` on Hopper with the tensor
    /// memory accelerator, f16 / bf16 inputs or f32 in TF32, B `[N, K]`, persistent (a grid of at most one
    /// block per multiprocessor walks the tiles of every matrix and slice of K): warpgroup 0
    /// is the producer, whose one thread has the TMA copy the boxes of A (`ta`: 128 bytes of
    /// K × `BM` rows, `tb`: × `BN` rows, 128-byte swizzled, zero-filled past the matrices)
    /// into [`TMA_STAGES`] stages, each announced on an `mbarrier` (`full`) by its bytes, one
    /// pipeline across the block's tiles; the other `BM / 64` warpgroups are the consumers,
    /// which wait on a stage's `full` barrier, multiply it with `wgmma`, release it on its
    /// `empty` barrier and write their rows of the tile through the core's epilogue, a chunk
    /// of columns at a time laid out in shared memory past the stages, while the producer
    /// loads the next tile (`core::tma_gemm`). No barrier
    /// of the whole block after the barriers' initialization. Every access is proven or
    /// checked, so the launch is safe: the tensor maps describe the matrices (K, rows,
    /// batch).
    #[target(sm_90a)]
    #[variants(
        (BM, BN) in [(128, 128), (128, 256)],
        (T, O) in [(f16, f32), (f16, f16), (bf16, f32), (bf16, bf16), (f32, f32)]
    )]
    #[launch(block = BM / 64 * 128 + 128, max_regs = 168)]
    pub fn gemm_tma<T: ActElement, O: ActElement, const BM: u32, const BN: u32>(
        p: GemmParams,
        ta: TensorMap<T, { 128 / size_of::<T>() }, BM, 1>,
        tb: TensorMap<T, { 128 / size_of::<T>() }, BN, 1>,
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        core::tma_gemm::<T, O, BM, BN, TMA_STAGES, false, 0, 0, true>(p, ta, tb, bias, res, c, ws);
    }

    /// [`gemm_tma`] for f32 inputs in 3xTF32 (f32-accurate on tensor cores): the producer
    /// loads [`TMA_X3_STAGES`] stages of f32 boxes; the consumer warpgroups split each landed
    /// stage, one step ahead of their `wgmma`s, replacing each f32 by its TF32 head and
    /// writing its TF32 tail beside it (byte `TMA_X3_STAGES · (BM + BN) · 128` on), and
    /// multiply each 32 bytes of K three times, tails by heads, heads by tails and heads by
    /// heads, each step's sums added in f32 to the accumulators (`core::tma_gemm` with
    /// `X3`). Safe like `gemm_tma`.
    #[target(sm_90a)]
    #[variants((BM, BN) in [(128, 128)], (T, O) in [(f32, f32)])]
    #[launch(block = BM / 64 * 128 + 128, max_regs = 168)]
    pub fn gemm_tma_x3<T: ActElement, O: ActElement, const BM: u32, const BN: u32>(
        p: GemmParams,
        ta: TensorMap<T, 32, BM, 1>,
        tb: TensorMap<T, 32, BN, 1>,
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        core::tma_gemm::<T, O, BM, BN, TMA_X3_STAGES, true, { TMA_X3_STAGES * (BM + BN) * 128 }, 0, true>(p, ta, tb, bias, res, c, ws);
    }

    /// The decode path, `M ≤ MT ≤ 8` rows against weights `[N, K]` (`B` in the `NK`
    /// layout), inputs f32, f16 or bf16: each block takes [`GEMV_COLUMNS`] consecutive
    /// columns (rows of W) and its 8 warps split K between them, in chunks that each lane
    /// reads as 16-byte vectors (every weight read once per call, whatever the row count).
    /// f32 inputs are exact FFMA: warp `w` takes 4 of the 16 rows of W and every other
    /// chunk of K (`w / 4`), keeping each vector of A in registers across its 4 rows; the
    /// lanes' sums meet in warp shuffles. f16 and bf16 inputs go through tensor cores
    /// (`mma.m16n8k16`, exact products, f32 accumulators): a warp's 16 rows of W are the
    /// fragment A and up to 8 rows of A the fragment B, each lane holding 16 consecutive
    /// bytes of K of its rows (a permutation of K that the two fragments share), so that A
    /// costs half the weight traffic at any row count. Each warp's sums go to shared
    /// memory, and 32 threads add the parts (in a fixed order) and write 4 columns of a row
    /// each through the GEMM epilogue, or, split along K (`p.splits > 1`, blocks `y =
    /// z · splits + s` taking `kc` elements of K each), their raw sums to the workspace
    /// that `gemm_splitk_reduce` finishes. Grid `(⌈N / 16⌉, batch · splits)`.
    ///
    /// # Safety
    ///
    /// `p` describes the operands as [`crate::ops::gemm`] fills it in from a validated
    /// [`crate::Gemm`]: every element of every matrix of A (`batch` matrices of `m × k` at
    /// `lda`, `batch_a` apart) and of B (`n × k` at `ldb`, `batch_b` apart) lies inside `a`
    /// and `b`; `vec_a` / `vec_b` only where the rows and batch strides are multiples of 16
    /// bytes and the slice starts 16-byte aligned; `kc` a multiple of 8; the grid's y
    /// extent `batch · splits`; `ws` (with `splits > 1`) holds `[splits, batch, m, ldw]`.
    #[variants(
        MT in [1, 2, 4, 8],
        (T, O) in [(f32, f32), (f16, f32), (f16, f16), (bf16, f32), (bf16, bf16)]
    )]
    #[launch(block = 256, max_regs = 128)]
    pub fn gemv<T: ActElement, O: ActElement, const MT: u32>(
        p: GemmParams,
        a: &[T],
        b: &[T],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
    ) {
        // The warps' sums: `[part][row of C][column of the block]`.
        let part: Shared<[f32; 8 * 8 * GEMV_COLUMNS]>;
        let ys = block_idx_y();
        let z = (ys / p.splits) as u64;
        let kbeg = (ys % p.splits) * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let n0 = block_idx_x() * GEMV_COLUMNS;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        // 16-byte rows and every row of W of the block inside N: chunks without edge tests.
        let fast = p.vec_a & p.vec_b & (n0 + GEMV_COLUMNS <= p.n);
        if T == f32 {
            if MT >= 8 {
                gemv_ffma::<MT, 1>(part, a, b, p, a_off, b_off, n0, kbeg, kend, fast);
            } else {
                gemv_ffma::<MT, GEMV_UNROLL_F32>(part, a, b, p, a_off, b_off, n0, kbeg, kend, fast);
            }
        } else {
            gemv_mma::<T, GEMV_UNROLL_16>(part, a, b, p, a_off, b_off, n0, kbeg, kend, fast);
        }
        sync_threads();
        let tid = thread_idx_x();
        let row = tid / 4;
        let col = n0 + (tid % 4) * 4;
        if (tid < 32) & (row < MT) & (row < p.m) & (col < p.n) {
            let mut v = [0.0f32; 4];
            if T == f32 {
                v = gemv_parts::<2>(part, row * GEMV_COLUMNS + (tid % 4) * 4);
            } else {
                v = gemv_parts::<8>(part, row * GEMV_COLUMNS + (tid % 4) * 4);
            }
            if let Some(w) = ws {
                // Block `ys` is slice `ys % splits` of matrix `z`: its plane is
                // `(ys % splits) · batch + z`.
                let plane = (ys % p.splits) as u64 * p.batch as u64 + z;
                w.store4((plane * p.m as u64 + row as u64) * p.ldw as u64 + col as u64, v);
            } else {
                core::store_out::<O>(p, bias, res, c, z, row, col, v);
            }
        }
    }

    /// The sum of the first `P` parts of `part` at `i` (4 columns), in part order.
    fn gemv_parts<const P: u32>(part: Shared<[f32; 8 * 8 * GEMV_COLUMNS]>, i: u32) -> [f32; 4] {
        let mut v = [0.0f32; 4];
        #[unroll]
        for s in 0..P {
            let w = part.load4(s * 8 * GEMV_COLUMNS + i);
            #[unroll]
            for l in 0..4 {
                v[l] = v[l] + w[l];
            }
        }
        v
    }

    /// The f32 decode path: warp `w` takes rows `r0 = n0 + 4 (w % 4) .. r0 + 4` of W and the
    /// chunks `w / 4`, `w / 4 + 2`, .. of `128 · U` elements of K from `kbeg`; in a chunk,
    /// lane `l` takes the vectors at `4 l + 128 u` (`u < U`), all `4 · U` of W loaded
    /// before the first FFMA (`gemv_w`, `gemv_fma`). The warp's sums go to `part[w / 4][m][4 (w % 4) + j]`.
    fn gemv_ffma<const MT: u32, const U: u32>(
        part: Shared<[f32; 8 * 8 * GEMV_COLUMNS]>,
        a: &[f32],
        b: &[f32],
        p: GemmParams,
        a_off: u64,
        b_off: u64,
        n0: u32,
        kbeg: u32,
        kend: u32,
        fast: bool,
    ) {
        let lane = lane_id();
        let warp = warp_id();
        let r0 = n0 + 4 * (warp % 4);
        let ch = 128 * U;
        let mut k0 = kbeg + (warp / 4) * ch;
        let wrow = b_off + r0 as u64 * p.ldb as u64;
        let ldb = p.ldb as u64;
        let lda = p.lda as u64;
        let mut acc = [[0.0f32; 4]; MT];
        if fast {
            while k0 + ch <= kend {
                let w = gemv_w::<U>(b, wrow, ldb, k0 + 4 * lane);
                acc = gemv_fma::<MT, U>(acc, w, a, p, a_off, lda, (k0 + 4 * lane) as u64);
                k0 += 2 * ch;
            }
        }
        // The rest of the slice (all of it without 16-byte rows or at the edge of N): each
        // vector through the edge loads, zero past `kend` and past the rows of W and A.
        while k0 < kend {
            for u in 0..U {
                let kv = k0 + 4 * lane + 128 * u;
                let mut w = [[0.0f32; 4]; 4];
                #[unroll]
                for j in 0..4 {
                    w[j] = core::load4_edge::<f32, true>(b, wrow + j as u64 * ldb + kv as u64, r0 + j < p.n, kv, kend, p.vec_b);
                }
                #[unroll]
                for m in 0..MT {
                    let x = core::load4_edge::<f32, true>(a, a_off + m as u64 * lda + kv as u64, m < p.m, kv, kend, p.vec_a);
                    #[unroll]
                    for j in 0..4 {
                        #[unroll]
                        for l in 0..4 {
                            acc[m][j] = x[l].mul_add(w[j][l], acc[m][j]);
                        }
                    }
                }
            }
            k0 += 2 * ch;
        }
        #[unroll]
        for m in 0..MT {
            #[unroll]
            for j in 0..4 {
                let mut v = acc[m][j];
                v = v + shfl_xor(v, 16);
                v = v + shfl_xor(v, 8);
                v = v + shfl_xor(v, 4);
                v = v + shfl_xor(v, 2);
                v = v + shfl_xor(v, 1);
                acc[m][j] = v;
            }
        }
        if lane == 0 {
            let o = (warp / 4) * 8 * GEMV_COLUMNS + 4 * (warp % 4);
            #[unroll]
            for m in 0..MT {
                part.store4(o + m * GEMV_COLUMNS, acc[m]);
            }
        }
    }

    /// The `4 · U` vectors of W of a lane of `gemv_ffma`'s fast loop: rows `j < 4` (`ldb`
    /// apart from element `wrow`) at K `kl + 128 u` (`u < U`), vector `4 u + j`.
    fn gemv_w<const U: u32>(b: &[f32], wrow: u64, ldb: u64, kl: u32) -> [[f32; 4]; 4 * U] {
        let mut w = [[0.0f32; 4]; 4 * U];
        #[unroll]
        for u in 0..U {
            #[unroll]
            for j in 0..4 {
                // SAFETY: the caller's rows lie below n and its chunk inside K (`fast`: whole
                // chunks below `kend`), 16-byte aligned (`vec_b`, `kbeg` a multiple of 8).
                w[4 * u + j] = unsafe { b.load4_nc_unchecked(wrow + j as u64 * ldb + kl as u64 + (128 * u) as u64) };
            }
        }
        w
    }

    /// `acc[m][j] += x_m · w_j` over a lane's `4 · U` elements of K from `kl` (`gemv_w`'s
    /// vectors), `x_m` row `m` of A (rows past `p.m` read the last row again: no branch
    /// between the loads; their sums are never written).
    fn gemv_fma<const MT: u32, const U: u32>(acc: [[f32; 4]; MT], w: [[f32; 4]; 4 * U], a: &[f32], p: GemmParams, a_off: u64, lda: u64, kl: u64) -> [[f32; 4]; MT] {
        let mut r = acc;
        #[unroll]
        for u in 0..U {
            // All of A's vectors of this `u` before the first FFMA, so that the chunk waits
            // for memory once.
            let mut x = [[0.0f32; 4]; MT];
            #[unroll]
            for m in 0..MT {
                let xm = a_off + m.min(p.m - 1) as u64 * lda;
                // SAFETY: a row below p.m of A, the caller's K range (`vec_a`).
                x[m] = unsafe { a.load4_nc_unchecked(xm + kl + (128 * u) as u64) };
            }
            #[unroll]
            for m in 0..MT {
                #[unroll]
                for j in 0..4 {
                    #[unroll]
                    for l in 0..4 {
                        r[m][j] = x[m][l].mul_add(w[4 * u + j][l], r[m][j]);
                    }
                }
            }
        }
        r
    }

    /// The 16-bit decode path: all 8 warps take the block's 16 rows of W, warp `w` the
    /// chunks `w`, `w + 8`, .. of `32 · U` elements of K from `kbeg`. Lane `(g, t) = (l / 4,
    /// l % 4)` loads, at `k = 32 u + 8 t` of a chunk, 8 elements of rows `g` and `g + 8` of
    /// W and of row `g` of A: the fragments of two `m16n8k16` products (elements 0-3, 4-7),
    /// whose K order the A and B fragments share. The accumulators (rows `g`, `g + 8` of W,
    /// rows `2 t`, `2 t + 1` of A) go to `part[w]`.
    fn gemv_mma<T, const U: u32>(
        part: Shared<[f32; 8 * 8 * GEMV_COLUMNS]>,
        a: &[T],
        b: &[T],
        p: GemmParams,
        a_off: u64,
        b_off: u64,
        n0: u32,
        kbeg: u32,
        kend: u32,
        fast: bool,
    ) {
        let lane = lane_id();
        let warp = warp_id();
        let g = lane / 4;
        let t = lane % 4;
        let ch = 32 * U;
        let mut k0 = kbeg + warp * ch;
        let wg = b_off + (n0 + g) as u64 * p.ldb as u64;
        let wg8 = wg + 8 * p.ldb as u64;
        let xg = a_off + g as u64 * p.lda as u64;
        let xok = g < p.m;
        let mut acc = [0.0f32; 4];
        if fast {
            while k0 + ch <= kend {
                let kl = (k0 + 8 * t) as u64;
                let mut e = [[0u32; 4]; U];
                let mut f = [[0u32; 4]; U];
                let mut x = [[0u32; 4]; U];
                #[unroll]
                for u in 0..U {
                    // SAFETY: rows n0 + g, n0 + g + 8 < n and k0 + ch <= k (`fast`), 16-byte
                    // aligned (`vec_b`, `kbeg` a multiple of 8).
                    e[u] = pack8::<T>(unsafe { b.load_vec_nc_unchecked::<16>(wg + kl + (32 * u) as u64) });
                    f[u] = pack8::<T>(unsafe { b.load_vec_nc_unchecked::<16>(wg8 + kl + (32 * u) as u64) });
                }
                #[unroll]
                for u in 0..U {
                    if xok {
                        // SAFETY: row g < p.m of A, the same K range (`vec_a`).
                        x[u] = pack8::<T>(unsafe { a.load_vec_nc_unchecked::<16>(xg + kl + (32 * u) as u64) });
                    }
                }
                #[unroll]
                for u in 0..U {
                    acc = mma16::<T>([e[u][0], f[u][0], e[u][1], f[u][1]], [x[u][0], x[u][1]], acc);
                    acc = mma16::<T>([e[u][2], f[u][2], e[u][3], f[u][3]], [x[u][2], x[u][3]], acc);
                }
                k0 += 8 * ch;
            }
        }
        // The rest of the slice through the edge loads (zero past `kend`, N and M).
        while k0 < kend {
            for u in 0..U {
                let kv = k0 + 8 * t + 32 * u;
                let e = load8_edge::<T>(b, wg + kv as u64, n0 + g < p.n, kv, kend, p.vec_b);
                let f = load8_edge::<T>(b, wg8 + kv as u64, n0 + g + 8 < p.n, kv, kend, p.vec_b);
                let x = load8_edge::<T>(a, xg + kv as u64, xok, kv, kend, p.vec_a);
                acc = mma16::<T>([e[0], f[0], e[1], f[1]], [x[0], x[1]], acc);
                acc = mma16::<T>([e[2], f[2], e[3], f[3]], [x[2], x[3]], acc);
            }
            k0 += 8 * ch;
        }
        let o = warp * 8 * GEMV_COLUMNS + 2 * t * GEMV_COLUMNS + g;
        part[o] = acc[0];
        part[o + GEMV_COLUMNS] = acc[1];
        part[o + 8] = acc[2];
        part[o + GEMV_COLUMNS + 8] = acc[3];
    }

    /// `d + a · b` on tensor cores for 16-bit `T`.
    fn mma16<T>(a: [u32; 4], b: [u32; 2], d: [f32; 4]) -> [f32; 4] {
        let mut r = d;
        if T == f16 {
            r = mma_m16n8k16_f16(a, b, d);
        } else {
            r = mma_m16n8k16_bf16(a, b, d);
        }
        r
    }

    /// 8 16-bit elements as the 4 words of an mma fragment (element `2 i` in the low half of
    /// word `i`).
    fn pack8<T>(v: [T; 8]) -> [u32; 4] {
        let mut r = [0u32; 4];
        #[unroll]
        for i in 0..4 {
            if T == f16 {
                r[i] = f16x2::new(v[2 * i], v[2 * i + 1]).to_bits();
            } else {
                r[i] = bf16x2::new(v[2 * i], v[2 * i + 1]).to_bits();
            }
        }
        r
    }

    /// `x[e..e + 8]` packed (see `pack8`) where `row_ok` and the run `j..j + 8` lies below
    /// `lim`; elements past `lim` (or all, without `row_ok`) are 0. One 16-byte load when
    /// `vec` and the run is whole.
    fn load8_edge<T>(x: &[T], e: u64, row_ok: bool, j: u32, lim: u32, vec: bool) -> [u32; 4] {
        let mut r = [0u32; 4];
        if row_ok {
            if vec & (j + 8 <= lim) {
                r = pack8::<T>(x.load_vec_nc::<16>(e));
            } else {
                let mut h = [0u32; 8];
                #[unroll]
                for l in 0..8 {
                    if j + l < lim {
                        h[l] = x.load_nc(e + l as u64).to_bits() as u32;
                    }
                }
                #[unroll]
                for i in 0..4 {
                    r[i] = h[2 * i] | (h[2 * i + 1] << 16);
                }
            }
        }
        r
    }

    /// Columns of C (rows of W) per block of the decode kernel `gemv`.
    pub const GEMV_COLUMNS: u32 = 16;
    /// The 16-byte vectors of each row of W that a lane of `gemv` loads at once, f32 inputs
    /// below 8 rows of A (at 8 rows: 1, for the accumulators' registers): 16 KB in flight
    /// per warp.
    pub const GEMV_UNROLL_F32: u32 = 4;
    /// The same for 16-bit inputs (two rows of W per lane): 4 KB per warp (8 measured slower
    /// on an H200: 71.5% of the copy bandwidth at 1 × 4096 × 4096 bf16 against 77.4%).
    pub const GEMV_UNROLL_16: u32 = 4;

    /// The K step of every tile.
    pub const BK: u32 = 16;

    /// The FFMA kernel's shared tiles of A (and of B `[N, K]`) are k-major, element `(k, r)`
    /// at `k · ROWS + (k / 4) · SKEW + r`: each group of 4 rows of K lies `SKEW` elements
    /// further than the last, so that the transposing stores of a warp (8 rows × 4 groups)
    /// fall on 32 different banks while the math still reads 16-byte vectors at constant
    /// offsets.
    pub const SKEW: u32 = 8;
    /// The most 4-element chunks a thread loads per tile and operand (`BM · BK / (4 ·
    /// threads)`: 4 for 128 × 128 and for 64 × 64, 8 for B of 32 × 128); the arrays that carry
    /// them have this many entries, the ones a variant does not use fold away.
    const CHUNKS: u32 = 8;

    /// B as it is: the `FMT` of [`gemm_f32`]'s B (f32 elements), beside the weight formats of
    /// `gemm_f32_q` (`dq::FMT_*`).
    const DENSE: u32 = 255;

    /// The FFMA tiles of [`gemm_f32`] (B f32, `FMT` `DENSE`) and [`gemm_f32_q`] (B `[N, K]`
    /// weights of format `FMT`, bytes): the K steps of the block's slice, each loaded into
    /// registers while the last one is multiplied, then the epilogue.
    fn ffma_tiles<W, const FMT: u32, const BM: u32, const BN: u32, const TN: u32, const BT: bool>(
        p: GemmParams,
        a: &[f32],
        b: &[W],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
        ws: Option<&mut [f32]>,
        a_s: Shared<[f32; 2 * (BK * BM + BK / 4 * SKEW)]>,
        b_s: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]>,
        t_s: Shared<[f32; BM / 2 * BN]>,
    ) {
        let zs = block_idx_z();
        let z = (zs / p.splits) as u64;
        let kbeg = (zs % p.splits) * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let tid = thread_idx_x();
        let mut acc = [[0.0f32; TN]; 8];
        // This thread's first chunk of each operand at k = 0 (`load_rows`): of A and B `[N,
        // K]`, row `tid / 4` of the tile and 4 elements at `4 (tid % 4)` of a K step; of B
        // `[K, N]`, row `tid / (BN / 4)` of a K step and 4 columns at `4 (tid % (BN / 4))`.
        let a_e = a_off + (m0 + tid / 4) as u64 * p.lda as u64 + (tid % 4 * 4) as u64;
        let mut b_e = 0u64;
        if BT {
            b_e = b_off + (n0 + tid / 4) as u64 * p.ldb as u64 + (tid % 4 * 4) as u64;
        } else {
            b_e = b_off + (tid / (BN / 4)) as u64 * p.ldb as u64 + (n0 + tid % (BN / 4) * 4) as u64;
        }

        // A block whose tile lies inside M × N with 16-byte rows loads whole K steps without
        // edge tests (a uniform choice per step).
        let inner = (m0 + BM <= p.m) & (n0 + BN <= p.n) & p.vec_a & p.vec_b;
        let mut ra = [[0.0f32; 4]; CHUNKS];
        let mut rb = [[0.0f32; 4]; CHUNKS];
        if inner & (kbeg + BK <= kend) {
            ra = load_a::<BM, BN, TN, true>(a, p, a_e, m0, kbeg, kend, tid);
            rb = load_b_any::<W, FMT, BM, BN, TN, BT, true>(b, p, b_e, n0, kbeg, kend, tid);
        } else {
            ra = load_a::<BM, BN, TN, false>(a, p, a_e, m0, kbeg, kend, tid);
            rb = load_b_any::<W, FMT, BM, BN, TN, BT, false>(b, p, b_e, n0, kbeg, kend, tid);
        }
        store_k_major::<BM, BN, TN, BM>(a_s, 0, ra, tid);
        store_b::<BM, BN, TN, BT>(b_s, 0, rb, tid);
        sync_threads();
        // `k0`: the K step in buffer `buf`; the next one loads while it is multiplied.
        let mut k0 = kbeg;
        let mut buf = 0u32;
        while k0 < kend {
            let kn = k0 + BK;
            let more = kn < kend;
            if more {
                if inner & (kn + BK <= kend) {
                    ra = load_a::<BM, BN, TN, true>(a, p, a_e, m0, kn, kend, tid);
                    rb = load_b_any::<W, FMT, BM, BN, TN, BT, true>(b, p, b_e, n0, kn, kend, tid);
                } else {
                    ra = load_a::<BM, BN, TN, false>(a, p, a_e, m0, kn, kend, tid);
                    rb = load_b_any::<W, FMT, BM, BN, TN, BT, false>(b, p, b_e, n0, kn, kend, tid);
                }
            }
            acc = mma_f32::<BM, BN, TN, BT>(acc, a_s, b_s, buf, tid);
            if more {
                store_k_major::<BM, BN, TN, BM>(a_s, (buf ^ 1) * (BK * BM + BK / 4 * SKEW), ra, tid);
                store_b::<BM, BN, TN, BT>(b_s, (buf ^ 1) * (BK * BN + BK / 4 * SKEW), rb, tid);
            }
            sync_threads();
            buf = buf ^ 1;
            k0 = kn;
        }
        epilogue::<BM, BN, TN>(acc, t_s, p, bias, res, c, ws, zs as u64, z, m0, n0, tid);
    }

    /// This thread's part of B's tile at `k0`: `load_b` for f32 B (`FMT` `DENSE`), `load_qb`
    /// for weights of a format.
    fn load_b_any<W, const FMT: u32, const BM: u32, const BN: u32, const TN: u32, const BT: bool, const FAST: bool>(
        b: &[W],
        p: GemmParams,
        e: u64,
        n0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        let mut v = [[0.0f32; 4]; CHUNKS];
        if FMT == DENSE {
            v = load_b::<BM, BN, TN, BT, FAST>(b, p, e, n0, k0, kend, tid);
        } else {
            v = load_qb::<FMT, BM, BN, TN>(b, p, n0, k0, kend, tid);
        }
        v
    }

    /// This thread's part of the tile at `k0` of weights `[N, K]` in format `FMT` (rows
    /// `p.ldb` bytes apart), dequantized: the chunks of `load_rows` for B `[N, K]` (row
    /// `tid / 4` of the tile and those `threads / 4` below it, elements `4 (tid % 4) .. +4`
    /// of the step), 0 outside `p.n × kend`.
    fn load_qb<const FMT: u32, const BM: u32, const BN: u32, const TN: u32>(
        w: &[u8],
        p: GemmParams,
        n0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        let threads = (BM / 8) * (BN / TN);
        let mut v = [[0.0f32; 4]; CHUNKS];
        let k = k0 + tid % 4 * 4;
        #[unroll]
        for q in 0..BN * BK / (4 * threads) {
            let row = n0 + tid / 4 + q * (threads / 4);
            if row < p.n {
                v[q] = dq::dequant4::<FMT>(w, row as u64 * p.ldb as u64, k, kend);
            }
        }
        v
    }

    /// This thread's part of A's tile at `k0`, from `e` (`a_e` of `gemm_f32`).
    fn load_a<const BM: u32, const BN: u32, const TN: u32, const FAST: bool>(
        a: &[f32],
        p: GemmParams,
        e: u64,
        m0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        load_rows::<BM, BN, TN, BM, BK, FAST>(a, e + k0 as u64, m0 + tid / 4, p.m, k0 + tid % 4 * 4, kend, p.lda, p.vec_a)
    }

    /// This thread's part of B's tile at `k0`, from `e` (`b_e` of `gemm_f32`): for `[N, K]`
    /// as A's (rows along N), for `[K, N]` rows of the K step.
    fn load_b<const BM: u32, const BN: u32, const TN: u32, const BT: bool, const FAST: bool>(
        b: &[f32],
        p: GemmParams,
        e: u64,
        n0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        let mut v = [[0.0f32; 4]; CHUNKS];
        if BT {
            v = load_rows::<BM, BN, TN, BN, BK, FAST>(b, e + k0 as u64, n0 + tid / 4, p.n, k0 + tid % 4 * 4, kend, p.ldb, p.vec_b);
        } else {
            v = load_rows::<BM, BN, TN, BK, BN, FAST>(b, e + k0 as u64 * p.ldb as u64, k0 + tid / (BN / 4), kend, n0 + tid % (BN / 4) * 4, p.n, p.ldb, p.vec_b);
        }
        v
    }

    /// Stores B's part to the k-major tile.
    fn store_b<const BM: u32, const BN: u32, const TN: u32, const BT: bool>(
        t: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        if BT {
            store_k_major::<BM, BN, TN, BN>(t, base, v, tid);
        } else {
            store_n_major::<BM, BN, TN>(t, base, v, tid);
        }
    }

    /// A thread's chunks of a `ROWS × RUN` tile of a row-major matrix (`RUN` elements of
    /// each row): with `i = tid + q·threads`, chunk `q` is row `i / (RUN / 4)` of the tile,
    /// elements `4·(i % (RUN / 4)) .. +4` of it, zero outside `rows × cols`. The threads
    /// cover whole rows per turn (`threads` a multiple of `RUN / 4`), so chunk `q` lies `q ·
    /// threads / (RUN / 4)` rows below chunk 0: element `e` of `x`, row `r`, columns `c ..
    /// c + 4`. A and B `[N, K]` have rows along K (`RUN = BK`), B `[K, N]` rows along N
    /// (`ROWS = BK`, `RUN = BN`). `FAST`: the tile lies inside the matrix (the launch's
    /// contract), its rows 16-byte aligned.
    fn load_rows<const BM: u32, const BN: u32, const TN: u32, const ROWS: u32, const RUN: u32, const FAST: bool>(
        x: &[f32],
        e: u64,
        r: u32,
        rows: u32,
        c: u32,
        cols: u32,
        ld: u32,
        vec: bool,
    ) -> [[f32; 4]; CHUNKS] {
        let threads = (BM / 8) * (BN / TN);
        let mut v = [[0.0f32; 4]; CHUNKS];
        #[unroll]
        for q in 0..ROWS * RUN / (4 * (BM / 8) * (BN / TN)) {
            let below = q * (threads / (RUN / 4));
            let eq = e + below as u64 * ld as u64;
            if FAST {
                // SAFETY: the launch's contract (see `gemm_f32`) and the caller's choice:
                // the tile lies inside the matrix, its rows 16-byte aligned.
                v[q] = unsafe { x.load4_nc_unchecked(eq) };
            } else {
                v[q] = core::load4_edge::<f32, true>(x, eq, r + below < rows, c, cols, vec);
            }
        }
        v
    }

    /// Stores the chunks of `load_rows` transposed: element `l` of chunk `q` (row `r`, k
    /// `kq + l`) to `(kq + l, r)` of the k-major tile at `base`. A thread's `kq` is the same
    /// for all its chunks (`threads` is a multiple of 4), and chunk `q` lies `q · threads /
    /// 4` rows below chunk 0: one offset, checked once.
    fn store_k_major<const BM: u32, const BN: u32, const TN: u32, const ROWS: u32>(
        t: Shared<[f32; 2 * (BK * ROWS + BK / 4 * SKEW)]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        let threads = (BM / 8) * (BN / TN);
        let chunks = ROWS * BK / (4 * threads);
        // k = 4 (tid % 4) + l, whose group of 4 rows lies `(tid % 4) · SKEW` further.
        let st = base + (tid % 4) * (4 * ROWS + SKEW) + tid / 4;
        if ((st as u64) + ((chunks - 1) * (threads / 4) + 3 * ROWS) as u64) < (t.len() as u64) {
            #[unroll]
            for q in 0..chunks {
                #[unroll]
                for l in 0..4 {
                    t[st + q * (threads / 4) + l * ROWS] = v[q][l];
                }
            }
        }
    }

    /// Stores the chunks of `load_rows` as they are: row `i / (BN / 4)` of the tile,
    /// columns `4·(i % (BN / 4)) .. +4`, chunk `q` `q · threads / (BN / 4)` rows below chunk 0.
    fn store_n_major<const BM: u32, const BN: u32, const TN: u32>(
        t: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        let threads = (BM / 8) * (BN / TN);
        let chunks = BN * BK / (4 * threads);
        let st = base + tid / (BN / 4) * BN + tid % (BN / 4) * 4;
        if ((st as u64) + ((chunks - 1) * (threads / (BN / 4)) * BN + 4) as u64) <= (t.len() as u64) {
            #[unroll]
            for q in 0..chunks {
                t.store4(st + q * (threads / (BN / 4)) * BN, v[q]);
            }
        }
    }

    /// One K step on the shared tiles of buffer `buf`: `acc[i][j] += a[row i] · b[col j]`
    /// for each of the `BK` values of k, one fma each (exact products, f32 sums). A thread's
    /// 8 rows are two runs of 4, `BM / 2` apart, and its `TN` columns `TN / 4` runs, `BN /
    /// (TN / 4)` apart: each run one 16-byte read, a warp's reads of a run on 32 banks.
    fn mma_f32<const BM: u32, const BN: u32, const TN: u32, const BT: bool>(
        acc: [[f32; TN]; 8],
        a_s: Shared<[f32; 2 * (BK * BM + BK / 4 * SKEW)]>,
        b_s: Shared<[f32; 2 * (BK * BN + BK / 4 * SKEW)]>,
        buf: u32,
        tid: u32,
    ) -> [[f32; TN]; 8] {
        let mut d = acc;
        let ao = buf * (BK * BM + BK / 4 * SKEW) + (tid / (BN / TN)) * 4;
        let bo = buf * (BK * BN + BK / 4 * SKEW) + (tid % (BN / TN)) * 4;
        // B `[K, N]` is stored as it is, without the groups' skew.
        let bskew = if BT { SKEW } else { 0 };
        // Proves every read below in bounds (the offsets are constants from here).
        if (((ao as u64) + ((BK - 1) * BM + (BK / 4 - 1) * SKEW + BM / 2 + 4) as u64) <= (a_s.len() as u64))
            & (((bo as u64) + ((BK - 1) * BN + (BK / 4 - 1) * bskew + (TN / 4 - 1) * (BN / (TN / 4)) + 4) as u64) <= (b_s.len() as u64))
        {
            #[unroll]
            for kk in 0..BK {
                let a0 = a_s.load4(ao + kk * BM + kk / 4 * SKEW);
                let a1 = a_s.load4(ao + kk * BM + kk / 4 * SKEW + BM / 2);
                let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
                let mut bv = [0.0f32; TN];
                #[unroll]
                for r in 0..TN / 4 {
                    let x = b_s.load4(bo + kk * BN + kk / 4 * bskew + r * (BN / (TN / 4)));
                    #[unroll]
                    for l in 0..4 {
                        bv[4 * r + l] = x[l];
                    }
                }
                #[unroll]
                for i in 0..8 {
                    #[unroll]
                    for j in 0..TN {
                        d[i][j] = av[i].mul_add(bv[j], d[i][j]);
                    }
                }
            }
        }
        d
    }

    /// Writes the tile: per half of its rows, the threads' accumulators to shared memory,
    /// then the half through the shared epilogue (`core::write_rows`).
    fn epilogue<const BM: u32, const BN: u32, const TN: u32>(
        acc: [[f32; TN]; 8],
        t_s: Shared<[f32; BM / 2 * BN]>,
        p: GemmParams,
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
        ws: Option<&mut [f32]>,
        zs: u64,
        z: u64,
        m0: u32,
        n0: u32,
        tid: u32,
    ) {
        let ty = tid / (BN / TN);
        let tx = tid % (BN / TN);
        #[unroll]
        for h in 0..2 {
            let o = ty * 4 * BN + tx * 4;
            if ((o as u64) + (3 * BN + (TN / 4 - 1) * (BN / (TN / 4)) + 4) as u64) <= (t_s.len() as u64) {
                #[unroll]
                for i in 0..4 {
                    let r = acc[4 * h + i];
                    #[unroll]
                    for q in 0..TN / 4 {
                        t_s.store4(o + i * BN + q * (BN / (TN / 4)), [r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]]);
                    }
                }
            }
            sync_threads();
            core::write_rows::<f32, { BM / 2 }, BN, BN, { (BM / 8) * (BN / TN) }, 2, { BM / 2 * BN }>(t_s, 0, p, bias, res, c, ws, zs, z, m0 + h * (BM / 2), n0, tid);
            sync_threads();
        }
    }

}

/// The code of an activation in [`GemmParams::act`].
pub fn act_code(act: Act) -> u32 {
    match act {
        Act::Identity => ACT_IDENTITY,
        Act::Relu => ACT_RELU,
        Act::Relu6 => ACT_RELU6,
        Act::LeakyRelu => ACT_LEAKY_RELU,
        Act::Gelu => ACT_GELU,
        Act::GeluTanh => ACT_GELU_TANH,
        Act::Silu => ACT_SILU,
        Act::Sigmoid => ACT_SIGMOID,
        Act::Tanh => ACT_TANH,
        Act::HardSwish => ACT_HARD_SWISH,
        Act::HardSigmoid => ACT_HARD_SIGMOID,
    }
}

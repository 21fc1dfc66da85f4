//! GEMM kernels: `C = act(alpha · A·B + beta · C + bias) + residual`, f32 in and out, as one
//! core template whose pieces are separate helpers:
//!
//! - **loaders** (`load_rows` and its shared-memory stores) bring a
//!   `BM × BK` tile of A and a `BK × BN` tile of B into shared memory, both k-major (element
//!   `(k, i)` at `k * BM + i`), so that the math reads a column of A and a row of B as whole
//!   vectors. A is `[M, K]` row-major; B is `[K, N]` row-major (`BT` false) or `[N, K]`
//!   row-major (`BT` true, the engine layout of weights `[n_out, n_in]`, `y = x · Wᵀ`). Edge
//!   tiles are zero-filled; 16-byte loads where the operand allows them, per element
//!   elsewhere. Registers stage the next tile while the current one is multiplied (two
//!   shared buffers, one barrier per K step);
//! - **math** (`mma_f32`): per thread an `8 × 8` register micro-tile, FFMA with exact f32
//!   products, the rows `ty·4 .. +4` and `BM/2 + ty·4 .. +4`, likewise the columns, so that the
//!   shared reads of a warp are conflict-free 16-byte vectors;
//! - **epilogue** (`epilogue`): the accumulators go through shared memory half a tile at a
//!   time, and the threads then walk the half in row order: 16-byte coalesced reads of `C` and
//!   the residual, the bias per column, the activation (a uniform runtime choice, the shared
//!   activation library), 16-byte stores where the row allows them.
//!
//! A launch is a grid of `(⌈N / BN⌉, ⌈M / BM⌉, batch)` blocks; [`crate::ops::gemm`] validates
//! the views and fills in [`GemmParams`].

use crate::act::{Act, ActElement};
use crate::ptx_kernel;

ptx_kernel! {
    #[path = "src/kernels/lib/act_math.rs"]
    mod math;

    /// The activation codes of [`GemmParams::act`] (see [`act_code`]).
    pub const ACT_IDENTITY: u32 = 0;
    pub const ACT_RELU: u32 = 1;
    pub const ACT_RELU6: u32 = 2;
    pub const ACT_LEAKY_RELU: u32 = 3;
    pub const ACT_GELU: u32 = 4;
    pub const ACT_GELU_TANH: u32 = 5;
    pub const ACT_SILU: u32 = 6;
    pub const ACT_SIGMOID: u32 = 7;
    pub const ACT_TANH: u32 = 8;
    pub const ACT_HARD_SWISH: u32 = 9;
    pub const ACT_HARD_SIGMOID: u32 = 10;

    /// The scalars of one GEMM launch (filled in by [`crate::ops::gemm`]).
    pub struct GemmParams {
        /// Rows of A and C.
        pub m: u32,
        /// Columns of B and C.
        pub n: u32,
        /// The reduction length.
        pub k: u32,
        /// The leading dimensions (elements between rows) of A, B, C and the residual.
        pub lda: u32,
        pub ldb: u32,
        pub ldc: u32,
        pub ldr: u32,
        /// The elements between consecutive matrices of a batch (grid z).
        pub batch_a: u64,
        pub batch_b: u64,
        pub batch_c: u64,
        pub batch_r: u64,
        pub alpha: f32,
        /// `C` is read only where `beta` is not 0.
        pub beta: f32,
        /// The negative slope of the leaky relu.
        pub slope: f32,
        /// The activation ([`act_code`]).
        pub act: u32,
        /// Slices of K: blocks `z · splits + s` take K elements `s · kc .. (s + 1) · kc` and,
        /// with `splits > 1`, write their raw sums to the workspace (`[splits, batch, M,
        /// ldw]`), which `gemm_splitk_reduce` sums and passes through the epilogue.
        pub splits: u32,
        pub kc: u32,
        /// The workspace's row length (`N` rounded up to 4).
        pub ldw: u32,
        /// Matrices in the batch.
        pub batch: u32,
        /// Whether rows of A, B, C and the residual may be accessed as 16-byte vectors
        /// (leading dimension and batch stride multiples of 4, base 16-byte aligned).
        pub vec_a: bool,
        pub vec_b: bool,
        pub vec_c: bool,
        pub vec_r: bool,
    }

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual`, f32 FFMA on `BM × BN` tiles
    /// (threads `BM/8 × BN/8`, each an `8 × 8` micro-tile).
    // sm_80: at 128 registers the sm_70 allocation of the 128 × 128 tile spills.
    #[target(sm_80)]
    #[variants((BM, BN) in [(128, 128), (128, 64), (64, 64), (32, 128)], BT in [false, true], (T, O) in [(f32, f32)])]
    #[launch(block = (BM / 8) * (BN / 8), max_regs = if BM * BN >= 128 * 128 { 128 } else { 168 })]
    pub fn gemm_f32<T: ActElement, O: ActElement, const BM: u32, const BN: u32, const BT: bool>(
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
        let a_s: Shared<[f32; 2 * BK * BM]> = dyn_shared(0);
        let b_s: Shared<[f32; 2 * BK * BN]> = dyn_shared(2 * BK * BM * 4);
        let t_s: Shared<[f32; BM / 2 * BN]> = dyn_shared(0);
        let zs = block_idx_z();
        let z = (zs / p.splits) as u64;
        let kbeg = (zs % p.splits) * p.kc;
        let kend = (kbeg + p.kc).min(p.k);
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let tid = thread_idx_x();
        let mut ktiles = 0u32;
        if kend > kbeg {
            ktiles = (kend - kbeg + (BK - 1)) / BK;
        }
        let mut acc = [[0.0f32; 8]; 8];

        // A block whose tile lies inside M × N with 16-byte rows loads whole K steps without
        // edge tests (a uniform choice per step).
        let inner = (m0 + BM <= p.m) & (n0 + BN <= p.n) & p.vec_a & p.vec_b;
        let mut ra = [[0.0f32; 4]; CHUNKS];
        let mut rb = [[0.0f32; 4]; CHUNKS];
        if inner & (kbeg + BK <= kend) {
            ra = load_a::<BM, BN, true>(a, p, a_off, m0, kbeg, kend, tid);
            rb = load_b::<BM, BN, BT, true>(b, p, b_off, n0, kbeg, kend, tid);
        } else {
            ra = load_a::<BM, BN, false>(a, p, a_off, m0, kbeg, kend, tid);
            rb = load_b::<BM, BN, BT, false>(b, p, b_off, n0, kbeg, kend, tid);
        }
        store_k_major::<BM, BN, BM>(a_s, 0, ra, tid);
        store_b::<BM, BN, BT>(b_s, 0, rb, tid);
        sync_threads();
        let mut kt = 0u32;
        while kt < ktiles {
            let buf = kt & 1;
            let more = kt + 1 < ktiles;
            if more {
                let k0 = kbeg + (kt + 1) * BK;
                if inner & (k0 + BK <= kend) {
                    ra = load_a::<BM, BN, true>(a, p, a_off, m0, k0, kend, tid);
                    rb = load_b::<BM, BN, BT, true>(b, p, b_off, n0, k0, kend, tid);
                } else {
                    ra = load_a::<BM, BN, false>(a, p, a_off, m0, k0, kend, tid);
                    rb = load_b::<BM, BN, BT, false>(b, p, b_off, n0, k0, kend, tid);
                }
            }
            acc = mma_f32::<BM, BN>(acc, a_s, b_s, buf, tid);
            if more {
                store_k_major::<BM, BN, BM>(a_s, (buf ^ 1) * BK * BM, ra, tid);
                store_b::<BM, BN, BT>(b_s, (buf ^ 1) * BK * BN, rb, tid);
            }
            sync_threads();
            kt += 1;
        }
        epilogue::<BM, BN>(acc, t_s, p, bias, res, c, ws, zs as u64, z, m0, n0, tid);
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
            store_out::<O>(p, bias, res, c, z, row, col, v);
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
        (BM, BN, WM, WN) in [(128, 128, 2, 4), (128, 64, 4, 2), (64, 64, 2, 2)],
        BT in [false, true],
        (T, O, BK, X3) in [
            (f32, f32, 32, false), (f32, f32, 32, true),
            (f16, f32, 64, false), (f16, f16, 64, false),
            (bf16, f32, 64, false), (bf16, bf16, 64, false)
        ]
    )]
    #[launch(block = WM * WN * 32, max_regs = if X3 { 255 } else { 128 })]
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
        let mut ktiles = 0u32;
        if kend > kbeg {
            ktiles = (kend - kbeg + (BK - 1)) / BK;
        }
        let mut acc = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
        // A block whose tile lies inside M × N with 16-byte rows copies whole K steps without
        // edge arithmetic (a uniform choice per step).
        let inner = (m0 + BM <= p.m) & (n0 + BN <= p.n) & p.vec_a & p.vec_b;
        // The first `STAGES - 1` steps in flight, one commit group each (empty past the end).
        #[unroll]
        for s in 0..STAGES - 1 {
            let k0 = kbeg + s * BK;
            if s < ktiles {
                if inner & (k0 + BK <= kend) {
                    tc_load::<T, BM, BN, WM, WN, BT, BK, true>(a_s, b_s, s, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
                } else {
                    tc_load::<T, BM, BN, WM, WN, BT, BK, false>(a_s, b_s, s, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
                }
            }
            cp_async_commit();
        }
        let mut kt = 0u32;
        let mut stage = 0u32;
        while kt < ktiles {
            // Step `kt` has landed (at most `STAGES - 2` younger groups pending), and every
            // warp is done with the buffer that the next load overwrites.
            cp_async_wait(STAGES - 2);
            sync_threads();
            let next = kt + STAGES - 1;
            if next < ktiles {
                let ns = if stage == 0 { STAGES - 1 } else { stage - 1 };
                let k0 = kbeg + next * BK;
                if inner & (k0 + BK <= kend) {
                    tc_load::<T, BM, BN, WM, WN, BT, BK, true>(a_s, b_s, ns, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
                } else {
                    tc_load::<T, BM, BN, WM, WN, BT, BK, false>(a_s, b_s, ns, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
                }
            }
            cp_async_commit();
            if T == f32 {
                acc = tf32_step::<BM, BN, WM, WN, BT, BK, X3>(acc, a_s, b_s, stage, tid);
            } else {
                acc = h16_step::<T, BM, BN, WM, WN, BT, BK>(acc, a_s, b_s, stage, tid);
            }
            stage = if stage == STAGES - 1 { 0 } else { stage + 1 };
            kt += 1;
        }
        cp_async_wait_all();
        sync_threads();
        // The accumulators to the padded tile (over the pipeline's buffers), then the rows
        // through the epilogue.
        let lane = lane_id();
        let warp = warp_id();
        let to = (warp / WN * (BM / WM) + lane / 4) * (BN + 4) + warp % WN * (BN / WN) + (lane % 4) * 2;
        if ((to as u64) + ((BM / WM - 16 + 8) * (BN + 4) + BN / WN - 8 + 2) as u64) <= (t_s.len() as u64) {
            #[unroll]
            for mi in 0..BM / WM / 16 {
                #[unroll]
                for ni in 0..BN / WN / 8 {
                    let d = acc[mi * (BN / WN / 8) + ni];
                    let o = to + mi * 16 * (BN + 4) + ni * 8;
                    t_s.store2(o, [d[0], d[1]]);
                    t_s.store2(o + 8 * (BN + 4), [d[2], d[3]]);
                }
            }
        }
        sync_threads();
        write_rows::<O, BM, BN, { BN + 4 }, { WM * WN * 32 }>(t_s, p, bias, res, c, ws, zs as u64, z, m0, n0, tid);
    }

    /// Issues the copies of one K step at `k0` into buffer `stage`: `BM × BK` of A, and of B
    /// `BN × BK` (`[N, K]`) or `BK × BN` (`[K, N]`, rows `BN + 8` long).
    fn tc_load<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const FAST: bool>(
        a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
        b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
        stage: u32,
        a: &[T],
        b: &[T],
        p: GemmParams,
        a_off: u64,
        b_off: u64,
        m0: u32,
        n0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) {
        copy_rows::<T, BM, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BM * (BK + BK / 8) }, FAST>(a_s, stage * BM * (BK + BK / 8), a, a_off, m0, p.m, k0, kend, p.lda, p.vec_a, tid);
        if BT {
            copy_rows::<T, BN, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }, FAST>(b_s, stage * BN * (BK + BK / 8), b, b_off, n0, p.n, k0, kend, p.ldb, p.vec_b, tid);
        } else {
            copy_rows::<T, BK, BN, { BN + 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }, FAST>(b_s, stage * BN * (BK + BK / 8), b, b_off, k0, kend, n0, p.n, p.ldb, p.vec_b, tid);
        }
    }

    /// Copies a `ROWS × RUN` tile of a row-major matrix (rows `r0..`, elements `c0..` of
    /// each) to shared memory at `base`, rows `LDS` apart: chunks of 16 bytes, chunk `i =
    /// tid + q · THREADS` at row `i / (RUN / chunk)`. Outside `rows × cols` the copy's source
    /// size shrinks (to 0), which zero-fills; without `vec` each element is copied on its own
    /// (f32 by a 4-byte `cp.async`, 16-bit elements through registers, 0 outside).
    /// `FAST`: the tile lies inside the matrix and its rows are 16-byte aligned.
    fn copy_rows<T, const ROWS: u32, const RUN: u32, const LDS: u32, const THREADS: u32, const LEN: u32, const FAST: bool>(
        t: Shared<[T; LEN]>,
        base: u32,
        x: &[T],
        off: u64,
        r0: u32,
        rows: u32,
        c0: u32,
        cols: u32,
        ld: u32,
        vec: bool,
        tid: u32,
    ) {
        #[unroll]
        for q in 0..ROWS * RUN * size_of::<T>() / (16 * THREADS) {
            let i = tid + q * THREADS;
            let r = i / (RUN * size_of::<T>() / 16);
            let cc = (i % (RUN * size_of::<T>() / 16)) * (16 / size_of::<T>());
            let s = base + r * LDS + cc;
            let row_ok = r0 + r < rows;
            let col = c0 + cc;
            let e = off + (r0 + r) as u64 * ld as u64 + col as u64;
            if FAST {
                // SAFETY: the launch's contract (see `gemm_mma`): the rows `r0 .. r0 + ROWS`
                // and elements `c0 .. c0 + RUN` of the matrix at `off` lie inside `x`, its rows
                // 16-byte aligned; the destination lies in the stage by the tile's constants.
                unsafe {
                    t.cp_async16_unchecked(s, x, e);
                }
            } else if vec {
                let mut nb = 0u32;
                if row_ok & (col < cols) {
                    nb = (cols - col).min(16 / size_of::<T>()) * size_of::<T>();
                }
                t.cp_async16_partial(s, x, if nb == 0 { 0u64 } else { e }, nb);
            } else if T == f32 {
                #[unroll]
                for l in 0..4 {
                    let ok = row_ok & (col + l < cols);
                    t.cp_async4_partial(s + l, x, if ok { e + l as u64 } else { 0u64 }, if ok { 4u32 } else { 0u32 });
                }
            } else {
                #[unroll]
                for l in 0..16 / size_of::<T>() {
                    let mut v = 0.0f32 as T;
                    if row_ok & (col + l < cols) {
                        v = x.load_nc(e + l as u64);
                    }
                    t[s + l] = v;
                }
            }
        }
    }

    /// One K step of f32 inputs in TF32 (`BK / 8` mma steps) on buffer `stage`. Lane `(g, t)
    /// = (lane / 4, lane % 4)` holds A at rows `g`, `g + 8` and columns `t`, `t + 4` of each
    /// 16 × 8 fragment, B at column `g` and rows `t`, `t + 4`. `ldmatrix` reads them as 8 × 4
    /// matrices of 32-bit elements (rows of 16 bytes, on 32 banks with rows of `BK + 4`): one
    /// `x4` per fragment of A, one per two fragments of B `[N, K]`; B `[K, N]` is read per
    /// element (rows of `BN + 8`: 32 banks). Each element is rounded to TF32 (and, with `X3`,
    /// its remainder as well); with `X3` the step's products go to a fresh accumulator that is
    /// then added to `acc` in f32: the tensor cores' adders truncate, and a running sum over
    /// all of K would collect one truncation of its full magnitude per `mma`.
    fn tf32_step<const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool>(
        acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
        a_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
        b_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
        stage: u32,
        tid: u32,
    ) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
        let mut d = acc;
        if X3 {
            d = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
        }
        let ldk = BK + BK / 8;
        let lane = tid % 32;
        let warp = tid / 32;
        let g = lane / 4;
        let t = lane % 4;
        // The row this lane addresses for `ldmatrix`: matrix `q = lane / 8`, its row `lane % 8`.
        let q = lane / 8;
        let i8 = lane % 8;
        // A: matrices (rows 0-7, k 0-3), (8-15, 0-3), (0-7, 4-7), (8-15, 4-7) → a0..a3; with
        // B [K, N] element (row g, k t) and its neighbours, per element (the addresses of
        // `ldmatrix` next to B's per-element reads cost the registers that sm_80 lacks).
        let ao = if BT {
            stage * BM * ldk + (warp / WN * (BM / WM) + i8 + 8 * (q % 2)) * ldk + 4 * (q / 2)
        } else {
            stage * BM * ldk + (warp / WN * (BM / WM) + g) * ldk + t
        };
        // B [N, K]: matrices (columns 0-7, k 0-3), (0-7, 4-7), (8-15, 0-3), (8-15, 4-7) →
        // b0, b1 of two fragments; B [K, N]: element (k = t, n = g).
        let bo = if BT {
            stage * BN * ldk + (warp % WN * (BN / WN) + i8 + 8 * (q / 2)) * ldk + 4 * (q % 2)
        } else {
            stage * BN * ldk + t * (BN + 8) + warp % WN * (BN / WN) + g
        };
        // Proves every read below in bounds (the offsets are constants from here).
        let a_end = if BT {
            (BM / WM - 16) * ldk + BK - 8 + 4
        } else {
            (BM / WM - 8) * ldk + BK - 3
        };
        let b_end = if BT {
            (BN / WN - 16) * ldk + BK - 8 + 4
        } else {
            (BK - 4) * (BN + 8) + BN / WN - 7
        };
        if (((ao as u64) + a_end as u64) <= (a_s.len() as u64))
            & (((bo as u64) + b_end as u64) <= (b_s.len() as u64))
        {
            #[unroll]
            for kk in 0..BK / 8 {
                let mut ah = [[0u32; 4]; BM / WM / 16];
                let mut al = [[0u32; 4]; BM / WM / 16];
                #[unroll]
                for mi in 0..BM / WM / 16 {
                    let mut x = [0u32; 4];
                    if BT {
                        x = a_s.ldmatrix_x4(ao + mi * 16 * ldk + kk * 8);
                    } else {
                        #[unroll]
                        for r in 0..4 {
                            x[r] = a_s[ao + (mi * 16 + (r % 2) * 8) * ldk + kk * 8 + (r / 2) * 4].to_bits();
                        }
                    }
                    #[unroll]
                    for r in 0..4 {
                        let v = f32::from_bits(x[r]);
                        ah[mi][r] = v.to_tf32();
                        if X3 {
                            al[mi][r] = (v - f32::from_bits(ah[mi][r])).to_tf32();
                        }
                    }
                }
                let mut bh = [[0u32; 2]; BN / WN / 8];
                let mut bl = [[0u32; 2]; BN / WN / 8];
                #[unroll]
                for np in 0..BN / WN / 16 {
                    let mut y = [0.0f32; 4];
                    if BT {
                        let w = b_s.ldmatrix_x4(bo + np * 16 * ldk + kk * 8);
                        y = [f32::from_bits(w[0]), f32::from_bits(w[1]), f32::from_bits(w[2]), f32::from_bits(w[3])];
                    } else {
                        #[unroll]
                        for r in 0..4 {
                            y[r] = b_s[bo + (kk * 8 + (r % 2) * 4) * (BN + 8) + (2 * np + r / 2) * 8];
                        }
                    }
                    #[unroll]
                    for r in 0..4 {
                        let ni = 2 * np + r / 2;
                        bh[ni][r % 2] = y[r].to_tf32();
                        if X3 {
                            bl[ni][r % 2] = (y[r] - f32::from_bits(bh[ni][r % 2])).to_tf32();
                        }
                    }
                }
                #[unroll]
                for mi in 0..BM / WM / 16 {
                    #[unroll]
                    for ni in 0..BN / WN / 8 {
                        let i = mi * (BN / WN / 8) + ni;
                        if X3 {
                            d[i] = mma_m16n8k8_tf32(al[mi], bh[ni], d[i]);
                            d[i] = mma_m16n8k8_tf32(ah[mi], bl[ni], d[i]);
                        }
                        d[i] = mma_m16n8k8_tf32(ah[mi], bh[ni], d[i]);
                    }
                }
            }
        }
        if X3 {
            #[unroll]
            for i in 0..(BM / WM / 16) * (BN / WN / 8) {
                #[unroll]
                for r in 0..4 {
                    d[i][r] = acc[i][r] + d[i][r];
                }
            }
        }
        d
    }

    /// One K step of f16 or bf16 inputs (`BK / 16` mma steps of `m16n8k16`) on buffer
    /// `stage`. Lane `(g, t) = (lane / 4, lane % 4)` holds A at rows `g`, `g + 8` and the
    /// column pairs `2t`, `2t + 8` of each 16 × 16 fragment, B at column `g` and the row pairs
    /// `2t`, `2t + 8`; `ldmatrix.x4` reads them as 8 × 8 matrices (rows of 16 bytes, on 32
    /// banks with rows of `BK + 8` or `BN + 8` elements): one per fragment of A, one per two
    /// fragments of B, transposed for B `[K, N]`.
    fn h16_step<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32>(
        acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
        a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
        b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
        stage: u32,
        tid: u32,
    ) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
        let mut d = acc;
        let ldk = BK + BK / 8;
        let lane = tid % 32;
        let warp = tid / 32;
        let q = lane / 8;
        let i8 = lane % 8;
        // A: matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) → a0..a3.
        let ao = stage * BM * ldk + (warp / WN * (BM / WM) + i8 + 8 * (q % 2)) * ldk + 8 * (q / 2);
        // B [N, K]: matrices (columns 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15);
        // B [K, N], transposed: (k 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15):
        // b0, b1 of two fragments either way.
        let bo = if BT {
            stage * BN * ldk + (warp % WN * (BN / WN) + i8 + 8 * (q / 2)) * ldk + 8 * (q % 2)
        } else {
            stage * BN * ldk + (i8 + 8 * (q % 2)) * (BN + 8) + warp % WN * (BN / WN) + 8 * (q / 2)
        };
        // Proves every read below in bounds (the offsets are constants from here).
        let a_end = (BM / WM - 16) * ldk + BK - 16 + 8;
        let b_end = if BT {
            (BN / WN - 16) * ldk + BK - 16 + 8
        } else {
            (BK - 16) * (BN + 8) + BN / WN - 16 + 8
        };
        if (((ao as u64) + a_end as u64) <= (a_s.len() as u64))
            & (((bo as u64) + b_end as u64) <= (b_s.len() as u64))
        {
            #[unroll]
            for kk in 0..BK / 16 {
                let mut af = [[0u32; 4]; BM / WM / 16];
                #[unroll]
                for mi in 0..BM / WM / 16 {
                    af[mi] = a_s.ldmatrix_x4(ao + mi * 16 * ldk + kk * 16);
                }
                let mut bf = [[0u32; 2]; BN / WN / 8];
                #[unroll]
                for np in 0..BN / WN / 16 {
                    let mut w = [0u32; 4];
                    if BT {
                        w = b_s.ldmatrix_x4(bo + np * 16 * ldk + kk * 16);
                    } else {
                        w = b_s.ldmatrix_x4_trans(bo + kk * 16 * (BN + 8) + np * 16);
                    }
                    bf[2 * np] = [w[0], w[1]];
                    bf[2 * np + 1] = [w[2], w[3]];
                }
                #[unroll]
                for mi in 0..BM / WM / 16 {
                    #[unroll]
                    for ni in 0..BN / WN / 8 {
                        let i = mi * (BN / WN / 8) + ni;
                        if T == f16 {
                            d[i] = mma_m16n8k16_f16(af[mi], bf[ni], d[i]);
                        } else {
                            d[i] = mma_m16n8k16_bf16(af[mi], bf[ni], d[i]);
                        }
                    }
                }
            }
        }
        d
    }

    /// The bytes of a row of the tensor-core kernels' `[rows, BK]` stage tiles: 128 bytes of
    /// K (`BK` = 32 f32 or 64 16-bit elements) and 16 of padding, which put the 8 rows × 16
    /// bytes of a fragment read on 32 different banks.
    pub const TC_ROW: u32 = 144;
    /// Their pipeline depth: K steps in flight.
    pub const STAGES: u32 = 3;

    /// The epilogue's second half, shared by the kernels: a tile of `ROWS × BN` results in
    /// shared memory (rows `LDT` apart) goes to C (or the split-K workspace) 4 consecutive
    /// elements of a row per thread and turn, rows `m0..` and columns `n0..` of matrix `z`.
    fn write_rows<O, const ROWS: u32, const BN: u32, const LDT: u32, const THREADS: u32>(
        t_s: Shared<[f32; ROWS * LDT]>,
        p: GemmParams,
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        ws: Option<&mut [f32]>,
        zs: u64,
        z: u64,
        m0: u32,
        n0: u32,
        tid: u32,
    ) {
        let mut e = tid * 4;
        while e < ROWS * BN {
            let row = m0 + e / BN;
            let col = n0 + e % BN;
            if (row < p.m) & (col < p.n) {
                let v = t_s.load4(e / BN * LDT + e % BN);
                if let Some(w) = ws {
                    // Block `zs` is split `zs % splits` of matrix `z`: its plane is
                    // `s · batch + z`, i.e. `(zs % splits) · batch + zs / splits`.
                    let plane = (zs % p.splits as u64) * p.batch as u64 + z;
                    w.store4((plane * p.m as u64 + row as u64) * p.ldw as u64 + col as u64, v);
                } else {
                    store_out::<O>(p, bias, res, c, z, row, col, v);
                }
            }
            e += THREADS * 4;
        }
    }

    /// The decode path, `M ≤ MT ≤ 8` rows against weights `[N, K]` (`B` in the `NK`
    /// layout): each block takes 4 consecutive columns (4 rows of W) and its 8 warps split K
    /// between them, each lane striding along its part with 16-byte loads of W (each weight
    /// read once per call, whatever the row count) and of the few rows of A. The sums meet in
    /// warp reductions, then across the warps through shared memory; lane `m` of warp 0
    /// writes row `m` through the GEMM epilogue. Grid `(⌈N / 4⌉, batch)`: enough warps to
    /// keep the weight bytes in flight that a pass at memory speed needs.
    #[variants(MT in [1, 2, 4, 8], (T, O) in [(f32, f32)])]
    #[launch(block = 256, max_regs = 128)]
    pub fn gemv_f32<T: ActElement, O: ActElement, const MT: u32>(
        p: GemmParams,
        a: &[T],
        b: &[T],
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
    ) {
        let part: Shared<[[f32; 4 * MT]; 8]>;
        let z = block_idx_y() as u64;
        let lane = lane_id();
        let warp = warp_id();
        let n0 = block_idx_x() * 4;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let mut acc = [[0.0f32; 4]; MT];
        let writes = (warp == 0) & (lane < MT) & (lane < p.m) & (n0 < p.n);
        // Thread `t` of the block starts at element 4 t (vectors) or t (elements).
        let t = warp * 32 + lane;
        let mut k = t * 4;
        let vec = p.vec_a & p.vec_b;
        if vec {
            while k + 4 <= p.k {
                let mut w = [[0.0f32; 4]; 4];
                #[unroll]
                for j in 0..4 {
                    if n0 + j < p.n {
                        w[j] = b.load4_nc(b_off + (n0 + j) as u64 * p.ldb as u64 + k as u64);
                    }
                }
                acc = gemv_step::<MT>(acc, w, a, p, a_off, k);
                k += 1024;
            }
            // The last K % 4 elements, one per thread of the first warp.
            k = p.k;
            if warp == 0 {
                k = (p.k / 4 * 4 + lane).min(p.k);
            }
        } else {
            k = t;
        }
        let step = if vec { p.k } else { 256 };
        while k < p.k {
            #[unroll]
            for m in 0..MT {
                if m < p.m {
                    let x = a.load_nc(a_off + m as u64 * p.lda as u64 + k as u64);
                    #[unroll]
                    for j in 0..4 {
                        if n0 + j < p.n {
                            let w = b.load_nc(b_off + (n0 + j) as u64 * p.ldb as u64 + k as u64);
                            acc[m][j] = x.mul_add(w, acc[m][j]);
                        }
                    }
                }
            }
            k += step;
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
            #[unroll]
            for m in 0..MT {
                #[unroll]
                for j in 0..4 {
                    part[warp][4 * m + j] = acc[m][j];
                }
            }
        }
        sync_threads();
        if writes {
            // Lane `m` sums row `m` over the warps, in warp order.
            let mut v = [0.0f32; 4];
            #[unroll]
            for w in 0..8 {
                #[unroll]
                for j in 0..4 {
                    v[j] = v[j] + part[w][4 * lane + j];
                }
            }
            store_out::<f32>(p, bias, res, c, z, lane, n0, v);
        }
    }

    /// `acc[m][j] += A[m][k..k + 4] · w[j]` for the rows below `p.m`.
    fn gemv_step<const MT: u32>(
        acc: [[f32; 4]; MT],
        w: [[f32; 4]; 4],
        a: &[f32],
        p: GemmParams,
        a_off: u64,
        k: u32,
    ) -> [[f32; 4]; MT] {
        let mut d = acc;
        #[unroll]
        for m in 0..MT {
            if m < p.m {
                let x = a.load4_nc(a_off + m as u64 * p.lda as u64 + k as u64);
                #[unroll]
                for j in 0..4 {
                    #[unroll]
                    for l in 0..4 {
                        d[m][j] = x[l].mul_add(w[j][l], d[m][j]);
                    }
                }
            }
        }
        d
    }

    /// The K step of every tile.
    pub const BK: u32 = 16;

    /// The most 4-element chunks a thread loads per tile and operand (`BM · BK / (4 ·
    /// threads)`: 2 for 128 × 128, 4 for 64 × 64, 8 for B of 32 × 128); the arrays that carry
    /// them have this many entries, the ones a variant does not use fold away.
    const CHUNKS: u32 = 8;

    /// This thread's part of A's tile at `k0`: row `r` of the tile, elements `kq..kq + 4`
    /// of it, for each chunk.
    fn load_a<const BM: u32, const BN: u32, const FAST: bool>(
        a: &[f32],
        p: GemmParams,
        off: u64,
        m0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        load_rows::<BM, BN, BM, BK, FAST>(a, off, m0, p.m, k0, kend, p.lda, p.vec_a, tid)
    }

    /// This thread's part of B's tile at `k0`: for `[N, K]` as A's (rows along N), for
    /// `[K, N]` rows of 4 consecutive columns.
    fn load_b<const BM: u32, const BN: u32, const BT: bool, const FAST: bool>(
        b: &[f32],
        p: GemmParams,
        off: u64,
        n0: u32,
        k0: u32,
        kend: u32,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        let mut v = [[0.0f32; 4]; CHUNKS];
        if BT {
            v = load_rows::<BM, BN, BN, BK, FAST>(b, off, n0, p.n, k0, kend, p.ldb, p.vec_b, tid);
        } else {
            v = load_rows::<BM, BN, BK, BN, FAST>(b, off, k0, kend, n0, p.n, p.ldb, p.vec_b, tid);
        }
        v
    }

    /// Stores B's part to the k-major tile.
    fn store_b<const BM: u32, const BN: u32, const BT: bool>(
        t: Shared<[f32; 2 * BK * BN]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        if BT {
            store_k_major::<BM, BN, BN>(t, base, v, tid);
        } else {
            store_n_major::<BM, BN>(t, base, v, tid);
        }
    }

    /// Chunk `q` of a thread in a `ROWS × RUN` tile of a row-major matrix (`RUN` elements of
    /// each row): with `i = tid + q·threads`, row `r0 + i / (RUN / 4)`, elements `c0 + 4·(i %
    /// (RUN / 4)) .. +4`, zero outside `rows × cols`. A and B `[N, K]` have rows along K
    /// (`RUN = BK`), B `[K, N]` rows along N (`ROWS = BK`, `RUN = BN`).
    fn load_rows<const BM: u32, const BN: u32, const ROWS: u32, const RUN: u32, const FAST: bool>(
        x: &[f32],
        off: u64,
        r0: u32,
        rows: u32,
        c0: u32,
        cols: u32,
        ld: u32,
        vec: bool,
        tid: u32,
    ) -> [[f32; 4]; CHUNKS] {
        let threads = (BM / 8) * (BN / 8);
        let mut v = [[0.0f32; 4]; CHUNKS];
        #[unroll]
        for q in 0..ROWS * RUN / (4 * (BM / 8) * (BN / 8)) {
            let i = tid + q * threads;
            let r = r0 + i / (RUN / 4);
            let cc = c0 + (i % (RUN / 4)) * 4;
            let e = off + r as u64 * ld as u64 + cc as u64;
            if FAST {
                v[q] = x.load4_nc(e);
            } else {
                v[q] = load4_edge::<f32, true>(x, e, r < rows, cc, cols, vec);
            }
        }
        v
    }

    /// `x[e..e + 4]` where `row_ok` and the run `j..j + 4` lies below `lim`; elements past
    /// `lim` (or all, without `row_ok`) are 0. One 16-byte load when `vec` and the run is whole.
    fn load4_edge<T, const NC: bool>(x: &[T], e: u64, row_ok: bool, j: u32, lim: u32, vec: bool) -> [f32; 4] {
        let mut v = [0.0f32; 4];
        if row_ok {
            if vec & (j + 4 <= lim) {
                let w = if NC { x.load4_nc(e) } else { x.load4(e) };
                v = [w[0] as f32, w[1] as f32, w[2] as f32, w[3] as f32];
            } else {
                #[unroll]
                for l in 0..4 {
                    if j + l < lim {
                        v[l] = if NC { x.load_nc(e + l as u64) } else { x[e + l as u64] } as f32;
                    }
                }
            }
        }
        v
    }

    /// Stores the chunks of `load_rows` transposed: element `l` of chunk `q` (row `r`,
    /// k `kq + l`) to `t[base + (kq + l) · ROWS + r]`.
    fn store_k_major<const BM: u32, const BN: u32, const ROWS: u32>(
        t: Shared<[f32; 2 * BK * ROWS]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        let threads = (BM / 8) * (BN / 8);
        #[unroll]
        for q in 0..ROWS * BK / (4 * (BM / 8) * (BN / 8)) {
            let i = tid + q * threads;
            let s = base + (i % (BK / 4)) * 4 * ROWS + i / (BK / 4);
            if ((s as u64) + (3 * ROWS) as u64) < (t.len() as u64) {
                #[unroll]
                for l in 0..4 {
                    t[s + l * ROWS] = v[q][l];
                }
            }
        }
    }

    /// Stores the chunks of `load_rows` as they are: row `i / (BN / 4)` of the tile,
    /// columns `4·(i % (BN / 4)) .. +4`.
    fn store_n_major<const BM: u32, const BN: u32>(
        t: Shared<[f32; 2 * BK * BN]>,
        base: u32,
        v: [[f32; 4]; CHUNKS],
        tid: u32,
    ) {
        let threads = (BM / 8) * (BN / 8);
        #[unroll]
        for q in 0..BN * BK / (4 * (BM / 8) * (BN / 8)) {
            let i = tid + q * threads;
            t.store4(base + (i / (BN / 4)) * BN + (i % (BN / 4)) * 4, v[q]);
        }
    }

    /// One K step on the shared tiles of buffer `buf`: `acc[i][j] += a[row i] · b[col j]`
    /// for each of the `BK` values of k, one fma each (exact products, f32 sums).
    fn mma_f32<const BM: u32, const BN: u32>(
        acc: [[f32; 8]; 8],
        a_s: Shared<[f32; 2 * BK * BM]>,
        b_s: Shared<[f32; 2 * BK * BN]>,
        buf: u32,
        tid: u32,
    ) -> [[f32; 8]; 8] {
        let mut d = acc;
        let ao = buf * BK * BM + (tid / (BN / 8)) * 4;
        let bo = buf * BK * BN + (tid % (BN / 8)) * 4;
        // Proves every read below in bounds (the offsets are constants from here).
        if (((ao as u64) + ((BK - 1) * BM + BM / 2 + 4) as u64) <= (a_s.len() as u64))
            & (((bo as u64) + ((BK - 1) * BN + BN / 2 + 4) as u64) <= (b_s.len() as u64))
        {
            #[unroll]
            for kk in 0..BK {
                let a0 = a_s.load4(ao + kk * BM);
                let a1 = a_s.load4(ao + kk * BM + BM / 2);
                let b0 = b_s.load4(bo + kk * BN);
                let b1 = b_s.load4(bo + kk * BN + BN / 2);
                let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
                let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
                #[unroll]
                for i in 0..8 {
                    #[unroll]
                    for j in 0..8 {
                        d[i][j] = av[i].mul_add(bv[j], d[i][j]);
                    }
                }
            }
        }
        d
    }

    /// Writes the tile: per half of its rows, the threads' accumulators to shared memory,
    /// then each thread takes 4 consecutive elements of a row at a time.
    fn epilogue<const BM: u32, const BN: u32>(
        acc: [[f32; 8]; 8],
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
        let threads = (BM / 8) * (BN / 8);
        let ty = tid / (BN / 8);
        let tx = tid % (BN / 8);
        #[unroll]
        for h in 0..2 {
            let o = ty * 4 * BN + tx * 4;
            if ((o as u64) + (3 * BN + BN / 2 + 4) as u64) <= (t_s.len() as u64) {
                #[unroll]
                for i in 0..4 {
                    let r = acc[4 * h + i];
                    t_s.store4(o + i * BN, [r[0], r[1], r[2], r[3]]);
                    t_s.store4(o + i * BN + BN / 2, [r[4], r[5], r[6], r[7]]);
                }
            }
            sync_threads();
            let mut e = tid * 4;
            while ((e as u64) + 4) <= (t_s.len() as u64) {
                let row = m0 + h * (BM / 2) + e / BN;
                let col = n0 + e % BN;
                if (row < p.m) & (col < p.n) {
                    let v = t_s.load4(e);
                    if let Some(w) = ws {
                        // Block `zs` is split `zs % splits` of matrix `z`: its plane is
                        // `s · batch + z`, i.e. `(zs % splits) · batch + zs / splits`.
                        let plane = (zs % p.splits as u64) * p.batch as u64 + z;
                        w.store4((plane * p.m as u64 + row as u64) * p.ldw as u64 + col as u64, v);
                    } else {
                        store_out::<f32>(p, bias, res, c, z, row, col, v);
                    }
                }
                e += threads * 4;
            }
            sync_threads();
        }
    }

    /// The epilogue of 4 consecutive outputs of one row from column `col` (those past `n`
    /// are left alone).
    fn store_out<O>(
        p: GemmParams,
        bias: Option<&[f32]>,
        res: Option<&[O]>,
        c: &mut [O],
        z: u64,
        row: u32,
        col: u32,
        acc: [f32; 4],
    ) {
        let ci = z * p.batch_c + row as u64 * p.ldc as u64 + col as u64;
        let whole = col + 4 <= p.n;
        let mut v = [0.0f32; 4];
        #[unroll]
        for l in 0..4 {
            v[l] = p.alpha * acc[l];
        }
        if p.beta != 0.0 {
            let old = load4_edge::<O, false>(c, ci, true, col, p.n, p.vec_c);
            #[unroll]
            for l in 0..4 {
                v[l] = p.beta.mul_add(old[l], v[l]);
            }
        }
        if let Some(bs) = bias {
            let bv = load4_edge::<f32, true>(bs, col as u64, true, col, p.n, false);
            #[unroll]
            for l in 0..4 {
                v[l] = v[l] + bv[l];
            }
        }
        if p.act != ACT_IDENTITY {
            #[unroll]
            for l in 0..4 {
                v[l] = act_any(p.act, v[l], p.slope);
            }
        }
        if let Some(rs) = res {
            let ri = z * p.batch_r + row as u64 * p.ldr as u64 + col as u64;
            let rv = load4_edge::<O, true>(rs, ri, true, col, p.n, p.vec_r);
            #[unroll]
            for l in 0..4 {
                v[l] = v[l] + rv[l];
            }
        }
        if p.vec_c & whole {
            c.store4(ci, [v[0] as O, v[1] as O, v[2] as O, v[3] as O]);
        } else {
            #[unroll]
            for l in 0..4 {
                if col + l < p.n {
                    c[ci + l as u64] = v[l] as O;
                }
            }
        }
    }

    /// The activation of code `code` (a uniform branch chain).
    fn act_any(code: u32, x: f32, slope: f32) -> f32 {
        let mut y = x;
        if code == ACT_RELU {
            y = math::act::<Act::Relu>(x, slope);
        } else if code == ACT_RELU6 {
            y = math::act::<Act::Relu6>(x, slope);
        } else if code == ACT_LEAKY_RELU {
            y = math::act::<Act::LeakyRelu>(x, slope);
        } else if code == ACT_GELU {
            y = math::act::<Act::Gelu>(x, slope);
        } else if code == ACT_GELU_TANH {
            y = math::act::<Act::GeluTanh>(x, slope);
        } else if code == ACT_SILU {
            y = math::act::<Act::Silu>(x, slope);
        } else if code == ACT_SIGMOID {
            y = math::act::<Act::Sigmoid>(x, slope);
        } else if code == ACT_TANH {
            y = math::act::<Act::Tanh>(x, slope);
        } else if code == ACT_HARD_SWISH {
            y = math::act::<Act::HardSwish>(x, slope);
        } else if code == ACT_HARD_SIGMOID {
            y = math::act::<Act::HardSigmoid>(x, slope);
        }
        y
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

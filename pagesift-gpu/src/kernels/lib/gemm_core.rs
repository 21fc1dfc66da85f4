//! The pieces of the tensor-core GEMM and the epilogue of every GEMM kernel, in the kernel
//! language: a helper library of `ptx_kernel!`, read by the GEMM kernels
//! (`kernels/gemm.rs`: `#[path = "src/kernels/lib/gemm_core.rs"] mod core;`) and by the
//! tests' mutants of them (`tests/tests/gemm_mutants.rs`), so that a mutant is built from
//! the very loader, math and epilogue that the crate runs. The including invocation also
//! reads the activation library as `math` (`act_runs` calls `math::act_as`: for f16 and bf16
//! outputs the activation's 16-bit forms).
//!
//! - **loader**: `tc_load` issues one K step of A and B as `cp.async` copies (`copy_rows`)
//!   into one of `STAGES` shared buffers, rows padded to `TC_ROW` bytes, edges zero-filled
//!   by the copy's source size; `tc_copy_fast` (`copy_fast`) the same for a step inside the
//!   matrices from addresses set up once;
//! - **main loop**: `tc_mainloop` runs the pipeline over a block's K steps, `tc_fast_loop`
//!   for a block inside M × N with whole K steps (stages unrolled, no branches in a step),
//!   `tc_edge_loop` for the others;
//! - **math**: `tc_step` multiplies one buffer into a warp's accumulators with `mma.sync`,
//!   in `TC_KSTEPS` steps of `tf32_kstep` (f32 inputs in TF32, optionally 3xTF32) or
//!   `h16_kstep` (f16 and bf16); the fast loop sends the next step's copies out between
//!   them, a part before each; for f32 inputs
//!   `tc_prepare_stage` first rounds each thread's own copies of a stage to TF32 in place
//!   (and for 3xTF32 writes their remainders' roundings to a second set of buffers), on the
//!   tiles with registers to spare (`tc_prep_ahead`) during the step before, in parts
//!   between its `mma` steps (`tc_prepare_at`);
//! - **epilogue**: `epi_prefetch` sends the tile's lines of the residual and C toward L2
//!   before the main loop; `acc_to_shared` lays the accumulators out as a padded tile, `write_rows`
//!   walks it in row order, groups of runs of 4 outputs at a time: `epi_sum` applies alpha /
//!   beta and the bias, `act_group` the activation (one uniform branch for the group),
//!   `epi_store` the residual and the store (`load4_edge` reads C, the bias and the
//!   residual at the edges); `store_out` is the same for one run of 4, whose activation is
//!   a call of `act_code` (one `.func` per module, so that the kernels that store from
//!   registers, many runs per thread, carry the activation family's code once).
//!
//! `GemmParams` is the launches' struct: the including crate emits it on the host, or names
//! the host type that another crate emitted with `use` (see the macro's "Helper libraries").

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

/// The activation codes of `GemmParams::act` (the host's `act_code`).
const ACT_IDENTITY: u32 = 0;
const ACT_RELU: u32 = 1;
const ACT_RELU6: u32 = 2;
const ACT_LEAKY_RELU: u32 = 3;
const ACT_GELU: u32 = 4;
const ACT_GELU_TANH: u32 = 5;
const ACT_SILU: u32 = 6;
const ACT_SIGMOID: u32 = 7;
const ACT_TANH: u32 = 8;
const ACT_HARD_SWISH: u32 = 9;
const ACT_HARD_SIGMOID: u32 = 10;

/// The bytes of a row of the tensor-core kernels' `[rows, BK]` stage tiles: 128 bytes of
/// K (`BK` = 32 f32 or 64 16-bit elements) and 16 of padding, which put the 8 rows × 16
/// bytes of a fragment read on 32 different banks.
const TC_ROW: u32 = 144;
/// Their pipeline depth: K steps in flight.
const STAGES: u32 = 3;
/// The most outputs of a warp tile whose threads live in 128 registers (64 × 32, two blocks
/// of 8 warps to a multiprocessor). Larger warp tiles (64 × 64: half the fragment reads per
/// `mma`) take up to 255.
const SMALL_WARP_TILE: u32 = 2048;

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
    // Chunks per row; where the threads cover whole rows per turn, a thread's chunks lie in
    // one column of chunks, `THREADS / CPR` rows apart: one address, stepped.
    let cpr = RUN * size_of::<T>() / 16;
    if FAST & (THREADS % (RUN * size_of::<T>() / 16) == 0) {
        let et = off + (r0 + tid / cpr) as u64 * ld as u64 + (c0 + tid % cpr * (16 / size_of::<T>())) as u64;
        let st = base + tid / cpr * LDS + tid % cpr * (16 / size_of::<T>());
        copy_fast::<T, ROWS, RUN, LDS, THREADS, LEN>(t, st, x, et, (THREADS / cpr) as u64 * ld as u64, 0, 1);
        return;
    }
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

/// One `mma` step (8 of K, at `kk · 8` of the K step) of f32 inputs in TF32 on buffer
/// `s`, added to the warp's accumulators `d`, each lane reading from its offsets `ao` and
/// `bo` of `tc_reads` (stage 0; the caller proves the reads in bounds). Lane `(g, t) =
/// (lane / 4, lane % 4)` holds A at rows `g`, `g + 8` and columns `t`, `t + 4` of each
/// 16 × 8 fragment, B at column `g` and rows `t`, `t + 4`. `ldmatrix` reads them as 8 × 4
/// matrices of 32-bit elements (rows of 16 bytes, on 32 banks with rows of `BK + 4`): one
/// `x4` per fragment of A, one per two fragments of B `[N, K]`; B `[K, N]` is read per
/// element (rows of `BN + 8`: 32 banks). The stage is as `tc_prepare_stage` left it: rounded
/// to TF32, and with `X3` the TF32 rounding of each remainder at the same place of `al_s` and
/// `bl_s`, read alike (`tc_open` and `tc_close` keep 3xTF32's sums of a K step apart). `LDK`
/// is the pitch (in elements) of the stage rows of A and of B `[N, K]` as `tc_load` wrote
/// them, `BK + BK / 8`.
fn tf32_kstep<const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const LDK: u32, const X3: bool>(
    acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    a_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    ao: u32,
    bo: u32,
    s: u32,
    kk: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut d = acc;
    let ldk = LDK;
    let mut ah = [[0u32; 4]; BM / WM / 16];
    let mut al = [[0u32; 4]; BM / WM / 16];
    #[unroll]
    for mi in 0..BM / WM / 16 {
        if BT {
            ah[mi] = a_s.ldmatrix_x4(ao + s * (BM * LDK) + mi * 16 * ldk + kk * 8);
            if X3 {
                al[mi] = al_s.ldmatrix_x4(ao + s * (BM * LDK) + mi * 16 * ldk + kk * 8);
            }
        } else {
            #[unroll]
            for r in 0..4 {
                ah[mi][r] = a_s[ao + s * (BM * LDK) + (mi * 16 + (r % 2) * 8) * ldk + kk * 8 + (r / 2) * 4].to_bits();
                if X3 {
                    al[mi][r] = al_s[ao + s * (BM * LDK) + (mi * 16 + (r % 2) * 8) * ldk + kk * 8 + (r / 2) * 4].to_bits();
                }
            }
        }
    }
    let mut bh = [[0u32; 2]; BN / WN / 8];
    let mut bl = [[0u32; 2]; BN / WN / 8];
    #[unroll]
    for np in 0..BN / WN / 16 {
        let mut y = [0u32; 4];
        let mut yl = [0u32; 4];
        if BT {
            y = b_s.ldmatrix_x4(bo + s * (BN * LDK) + np * 16 * ldk + kk * 8);
            if X3 {
                yl = bl_s.ldmatrix_x4(bo + s * (BN * LDK) + np * 16 * ldk + kk * 8);
            }
        } else {
            #[unroll]
            for r in 0..4 {
                y[r] = b_s[bo + s * (BN * LDK) + (kk * 8 + (r % 2) * 4) * (BN + 8) + (2 * np + r / 2) * 8].to_bits();
                if X3 {
                    yl[r] = bl_s[bo + s * (BN * LDK) + (kk * 8 + (r % 2) * 4) * (BN + 8) + (2 * np + r / 2) * 8].to_bits();
                }
            }
        }
        #[unroll]
        for r in 0..4 {
            bh[2 * np + r / 2][r % 2] = y[r];
            bl[2 * np + r / 2][r % 2] = yl[r];
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
    d
}

/// The sums that a K step's `mma`s start from: the accumulators, or for 3xTF32 (`X3`) a
/// fresh zero, which `tc_close` adds to them in f32 once the step is done: the tensor cores'
/// adders truncate, and a running sum over all of K would collect one truncation of its full
/// magnitude per `mma`.
fn tc_open<const N: u32, const X3: bool>(acc: [[f32; 4]; N]) -> [[f32; 4]; N] {
    let mut d = acc;
    if X3 {
        d = [[0.0f32; 4]; N];
    }
    d
}

/// The accumulators after a K step whose `mma`s summed into `d` from `tc_open(acc)`.
fn tc_close<const N: u32, const X3: bool>(acc: [[f32; 4]; N], d: [[f32; 4]; N]) -> [[f32; 4]; N] {
    let mut r = d;
    if X3 {
        #[unroll]
        for i in 0..N {
            #[unroll]
            for l in 0..4 {
                r[i][l] = acc[i][l] + d[i][l];
            }
        }
    }
    r
}

/// One `mma` step (16 of K, at `kk · 16` of the K step) of f16 or bf16 inputs on buffer
/// `s`, reading from `ao` and `bo` as `tf32_kstep` does. Lane `(g, t) = (lane / 4, lane % 4)`
/// holds A at rows `g`, `g + 8` and the column pairs `2t`, `2t + 8` of each 16 × 16
/// fragment, B at column `g` and the row pairs `2t`, `2t + 8`; `ldmatrix.x4` reads them as
/// 8 × 8 matrices (rows of 16 bytes, on 32 banks with rows of `BK + 8` or `BN + 8`
/// elements): one per fragment of A, one per two fragments of B, transposed for B `[K, N]`.
/// `LDK` as for `tf32_kstep`.
fn h16_kstep<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const LDK: u32>(
    acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    ao: u32,
    bo: u32,
    s: u32,
    kk: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut d = acc;
    let ldk = LDK;
    let mut af = [[0u32; 4]; BM / WM / 16];
    #[unroll]
    for mi in 0..BM / WM / 16 {
        af[mi] = a_s.ldmatrix_x4(ao + s * (BM * LDK) + mi * 16 * ldk + kk * 16);
    }
    let mut bf = [[0u32; 2]; BN / WN / 8];
    #[unroll]
    for np in 0..BN / WN / 16 {
        let mut w = [0u32; 4];
        if BT {
            w = b_s.ldmatrix_x4(bo + s * (BN * LDK) + np * 16 * ldk + kk * 16);
        } else {
            w = b_s.ldmatrix_x4_trans(bo + s * (BN * LDK) + kk * 16 * (BN + 8) + np * 16);
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
    d
}

/// Where lane `tid % 32` of warp `tid / 32` reads its fragments in stage 0 of A and of B
/// (`[a, b]`, elements; stage `s` lies `s · BM · LDK` and `s · BN · LDK` further), as
/// `tf32_kstep` and `h16_kstep` describe.
fn tc_reads<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const LDK: u32>(tid: u32) -> [u32; 2] {
    let lane = tid % 32;
    let warp = tid / 32;
    let g = lane / 4;
    let t = lane % 4;
    // The row this lane addresses for `ldmatrix`: matrix `q = lane / 8`, its row `lane % 8`.
    let q = lane / 8;
    let i8 = lane % 8;
    let wm = warp / WN * (BM / WM);
    let wn = warp % WN * (BN / WN);
    let mut r = [0u32; 2];
    if T == f32 {
        if BT {
            r[0] = (wm + i8 + 8 * (q % 2)) * LDK + 4 * (q / 2);
            r[1] = (wn + i8 + 8 * (q / 2)) * LDK + 4 * (q % 2);
        } else {
            r[0] = (wm + g) * LDK + t;
            r[1] = t * (BN + 8) + wn + g;
        }
    } else {
        r[0] = (wm + i8 + 8 * (q % 2)) * LDK + 8 * (q / 2);
        if BT {
            r[1] = (wn + i8 + 8 * (q / 2)) * LDK + 8 * (q % 2);
        } else {
            r[1] = (i8 + 8 * (q % 2)) * (BN + 8) + wn + 8 * (q / 2);
        }
    }
    r
}

/// The elements past its stage-0 offset of `tc_reads` that a lane's reads of A in one
/// stage reach (the last read's end).
fn tc_a_end<T, const BM: u32, const WM: u32, const BT: bool, const BK: u32, const LDK: u32>() -> u32 {
    if T != f32 {
        (BM / WM - 16) * LDK + BK - 16 + 8
    } else if BT {
        (BM / WM - 16) * LDK + BK - 8 + 4
    } else {
        (BM / WM - 8) * LDK + BK - 3
    }
}

/// As `tc_a_end`, for B.
fn tc_b_end<T, const BN: u32, const WN: u32, const BT: bool, const BK: u32, const LDK: u32>() -> u32 {
    if BT {
        if T == f32 {
            (BN / WN - 16) * LDK + BK - 8 + 4
        } else {
            (BN / WN - 16) * LDK + BK - 16 + 8
        }
    } else if T == f32 {
        (BK - 4) * (BN + 8) + BN / WN - 7
    } else {
        (BK - 16) * (BN + 8) + BN / WN - 16 + 8
    }
}

/// The `mma` steps of one K step: 128 bytes of K, `TC_KSTEPS` of them whatever the type.
const TC_KSTEPS: u32 = 4;

/// The math of one K step in stage `s`, reading from `ao` and `bo` (`tc_reads`, proven in
/// bounds by the caller for that stage).
fn tc_step<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const LDK: u32, const X3: bool>(
    acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    ao: u32,
    bo: u32,
    s: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut d = tc_open::<{ (BM / WM / 16) * (BN / WN / 8) }, X3>(acc);
    #[unroll]
    for kk in 0..TC_KSTEPS {
        d = tc_kstep::<T, BM, BN, WM, WN, BT, BK, LDK, X3>(d, a_s, b_s, al_s, bl_s, ao, bo, s, kk);
    }
    tc_close::<{ (BM / WM / 16) * (BN / WN / 8) }, X3>(acc, d)
}

/// `mma` step `kk` of a K step in stage `s` (`tf32_kstep` or `h16_kstep`).
fn tc_kstep<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const LDK: u32, const X3: bool>(
    d: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    ao: u32,
    bo: u32,
    s: u32,
    kk: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    if T == f32 {
        tf32_kstep::<BM, BN, WM, WN, BT, BK, LDK, X3>(d, a_s, b_s, al_s, bl_s, ao, bo, s, kk)
    } else {
        h16_kstep::<T, BM, BN, WM, WN, BT, BK, LDK>(d, a_s, b_s, ao, bo, s, kk)
    }
}

/// The main loop of the tensor-core kernels: the K steps of `kbeg..kend` through the
/// `STAGES`-deep `cp.async` pipeline into the warps' accumulators, every copy group waited
/// for but the last (the caller's `cp_async_wait_all`). A block whose tile lies inside
/// M × N, with 16-byte rows and whole K steps, runs `tc_fast_loop`; the others
/// `tc_edge_loop`. `LDK` is the pitch of the fragment reads (`BK + BK / 8`, as `tc_load`
/// writes them) and `WAIT` whether steps wait for their copies: both are there for the
/// mutants of the tests.
fn tc_mainloop<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool, const LDK: u32, const WAIT: bool>(
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_off: u64,
    b_off: u64,
    m0: u32,
    n0: u32,
    kbeg: u32,
    kend: u32,
    tid: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut span = 0u32;
    if kend > kbeg {
        span = kend - kbeg;
    }
    let ktiles = (span + (BK - 1)) / BK;
    // (And the threads cover whole rows of the copied tiles: `copy_fast`.)
    let rows_a = WM * WN * 32 % (BK * size_of::<T>() / 16) == 0;
    let rows_b = WM * WN * 32 % (if BT { BK } else { BN } * size_of::<T>() / 16) == 0;
    let fast = (m0 + BM <= p.m) & (n0 + BN <= p.n) & p.vec_a & p.vec_b & (span % BK == 0) & rows_a & rows_b;
    if fast {
        tc_fast_loop::<T, BM, BN, WM, WN, BT, BK, X3, LDK, WAIT>(a_s, b_s, al_s, bl_s, a, b, p, a_off, b_off, m0, n0, kbeg, ktiles, tid)
    } else {
        tc_edge_loop::<T, BM, BN, WM, WN, BT, BK, X3, LDK, WAIT>(a_s, b_s, al_s, bl_s, a, b, p, a_off, b_off, m0, n0, kbeg, kend, ktiles, tid)
    }
}

/// The main loop of a block with edges, a partial K step or 3xTF32: each step's copies
/// chosen by `tc_load` (edge arithmetic where the step needs it), its fragment reads proven
/// in bounds per step.
fn tc_edge_loop<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool, const LDK: u32, const WAIT: bool>(
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_off: u64,
    b_off: u64,
    m0: u32,
    n0: u32,
    kbeg: u32,
    kend: u32,
    ktiles: u32,
    tid: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut acc = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
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
    let a_end = tc_a_end::<T, BM, WM, BT, BK, LDK>();
    let b_end = tc_b_end::<T, BN, WN, BT, BK, LDK>();
    let mut kt = 0u32;
    let mut stage = 0u32;
    while kt < ktiles {
        // Step `kt` has landed (at most `STAGES - 2` younger groups pending), and every
        // warp is done with the buffer that the next load overwrites.
        if WAIT {
            cp_async_wait(STAGES - 2);
        }
        if T == f32 {
            tc_prepare_stage::<BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, al_s, bl_s, stage, tid);
        }
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
        let reads = tc_reads::<T, BM, BN, WM, WN, BT, LDK>(tid);
        let ao = reads[0] + stage * (BM * LDK);
        let bo = reads[1] + stage * (BN * LDK);
        if (((ao as u64) + a_end as u64) <= (a_s.len() as u64)) & (((bo as u64) + b_end as u64) <= (b_s.len() as u64)) {
            acc = tc_step::<T, BM, BN, WM, WN, BT, BK, LDK, X3>(acc, a_s, b_s, al_s, bl_s, ao, bo, 0);
        }
        stage = if stage == STAGES - 1 { 0 } else { stage + 1 };
        kt += 1;
    }
    acc
}

/// The main loop of a block inside M × N with whole K steps: copies without edge
/// arithmetic from addresses set up once (a thread's chunks one element offset apart, see
/// `copy_fast`), the fragment reads proven in bounds once for every stage, and the steps
/// unrolled `STAGES` at a time, so that each stage's offsets are constants and a step's
/// copies, reads and `mma`s are one stretch of code without branches.
fn tc_fast_loop<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool, const LDK: u32, const WAIT: bool>(
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_off: u64,
    b_off: u64,
    m0: u32,
    n0: u32,
    kbeg: u32,
    ktiles: u32,
    tid: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let mut acc = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
    // A thread's first chunk of A (and of B `[N, K]`): row `tid / cpr` of the tile, 16 bytes
    // at `(tid % cpr) · 16` of its K step; of B `[K, N]`: row `tid / cpr_b` of the K step.
    let vec = 16 / size_of::<T>();
    let cpr = BK * size_of::<T>() / 16;
    let cpr_b = if BT { cpr } else { BN * size_of::<T>() / 16 };
    let ldb_s = if BT { BK + BK / 8 } else { BN + 8 };
    let a_st = tid / cpr * (BK + BK / 8) + tid % cpr * vec;
    let b_st = tid / cpr_b * ldb_s + tid % cpr_b * vec;
    let a_e = a_off + (m0 + tid / cpr) as u64 * p.lda as u64 + (kbeg + tid % cpr * vec) as u64;
    let mut b_e = 0u64;
    if BT {
        b_e = b_off + (n0 + tid / cpr_b) as u64 * p.ldb as u64 + (kbeg + tid % cpr_b * vec) as u64;
    } else {
        b_e = b_off + (kbeg + tid / cpr_b) as u64 * p.ldb as u64 + (n0 + tid % cpr_b * vec) as u64;
    }
    #[unroll]
    for s in 0..STAGES - 1 {
        if s < ktiles {
            tc_copy_fast::<T, BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, s, a, b, p, a_st, b_st, a_e, b_e, s, 0, true);
        }
        cp_async_commit();
    }
    let reads = tc_reads::<T, BM, BN, WM, WN, BT, LDK>(tid);
    let ao = reads[0];
    let bo = reads[1];
    let a_end = (STAGES - 1) * (BM * LDK) + tc_a_end::<T, BM, WM, BT, BK, LDK>();
    let b_end = (STAGES - 1) * (BN * LDK) + tc_b_end::<T, BN, WN, BT, BK, LDK>();
    // The chunks that f32 inputs prepare a step ahead (`tc_prep_ahead`, `tc_prepare_at`),
    // proven in bounds for every stage with the fragment reads. Elsewhere they are 0 and
    // `tc_prepare_stage` finds and checks its chunks itself, so that the 128-register tiles
    // hold no more registers through the loop. Immutable, so that the proof holds there.
    let ahead = (T == f32) & tc_prep_ahead::<BM, BN, WM, WN, X3>();
    let prep = tc_prep_offsets::<T, BM, BN, WM, WN, BT, BK>(tid);
    let pa = if ahead { prep[0] } else { 0 };
    let pb = if ahead { prep[1] } else { 0 };
    let pa_end = (STAGES - 1) * (BM * (BK + BK / 8)) + tc_prep_a_end::<T, BM, WM, WN, BK>();
    let pb_end = (STAGES - 1) * (BN * (BK + BK / 8)) + tc_prep_b_end::<T, BN, WM, WN, BT, BK>();
    if (((ao as u64) + a_end as u64) <= (a_s.len() as u64))
        & (((bo as u64) + b_end as u64) <= (b_s.len() as u64))
        & (((pa as u64) + pa_end as u64) <= (a_s.len() as u64))
        & (((pb as u64) + pb_end as u64) <= (b_s.len() as u64))
    {
        // f32 inputs: the first step prepared here, each later one during the step before
        // it (`tc_fast_step`).
        if T == f32 {
            if ahead & (ktiles > 0) {
                if WAIT {
                    cp_async_wait(STAGES - 2);
                }
                tc_prepare_at::<BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, al_s, bl_s, pa, pb, 0, 0, 1);
            }
        }
        let mut kt = 0u32;
        // Whole turns of `STAGES` steps whose copies all lie inside K.
        while kt + 2 * STAGES - 1 <= ktiles {
            #[unroll]
            for s in 0..STAGES {
                acc = tc_fast_step::<T, BM, BN, WM, WN, BT, BK, X3, LDK, WAIT>(acc, a_s, b_s, al_s, bl_s, a, b, p, a_st, b_st, a_e, b_e, ao, bo, pa, pb, s, kt + s + STAGES - 1, true, true, tid);
            }
            kt += STAGES;
        }
        // The last `STAGES - 1` to `2 · STAGES - 2` steps, copying while there are steps left.
        #[unroll]
        for s in 0..2 * STAGES - 2 {
            if kt + s < ktiles {
                let next = kt + s + STAGES - 1;
                acc = tc_fast_step::<T, BM, BN, WM, WN, BT, BK, X3, LDK, WAIT>(acc, a_s, b_s, al_s, bl_s, a, b, p, a_st, b_st, a_e, b_e, ao, bo, pa, pb, s % STAGES, next, next < ktiles, kt + s + 1 < ktiles, tid);
            }
        }
    }
    acc
}

/// Whether `tc_fast_loop` prepares the stages of f32 inputs a step ahead: where its threads
/// have 255 registers (3xTF32, and warp tiles larger than `SMALL_WARP_TILE`) and room left in
/// them, which 3xTF32 on `SMALL_WARP_TILE` warp tiles has not (its registers hold the
/// accumulators twice, `tc_open`), nor the 128-register tiles. Those prepare each stage
/// before its barrier.
fn tc_prep_ahead<const BM: u32, const BN: u32, const WM: u32, const WN: u32, const X3: bool>() -> bool {
    if X3 {
        BM / WM * (BN / WN) < SMALL_WARP_TILE
    } else {
        BM / WM * (BN / WN) > SMALL_WARP_TILE
    }
}

/// One step of `tc_fast_loop`, in stage `s`: its copies waited for (and, for f32 inputs,
/// prepared), the barrier, the copies of step `next` into the stage that the last step read
/// (where `load`), and the step's math. Where `tc_prep_ahead`, f32 inputs are instead
/// waited for and prepared in the step before: the next step's stage (where `prep`) in
/// `TC_KSTEPS - 1` parts, one after each `mma` step but the last, the first after a wait
/// for its copies (those of `STAGES - 2` steps ago: of the groups committed before this
/// step, all but the last `STAGES - 3`). `tc_prepare_stage`'s rounding then overlaps the
/// tensor cores' work instead of standing between the steps.
fn tc_fast_step<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool, const LDK: u32, const WAIT: bool>(
    acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_st: u32,
    b_st: u32,
    a_e: u64,
    b_e: u64,
    ao: u32,
    bo: u32,
    pa: u32,
    pb: u32,
    s: u32,
    next: u32,
    load: bool,
    prep: bool,
    tid: u32,
) -> [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)] {
    let ahead = tc_prep_ahead::<BM, BN, WM, WN, X3>();
    if WAIT & ((T != f32) | !ahead) {
        cp_async_wait(STAGES - 2);
    }
    if T == f32 {
        if !ahead {
            tc_prepare_stage::<BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, al_s, bl_s, s, tid);
        }
    }
    sync_threads();
    // The copies go out a part before each `mma` step, so that the warps' copies do not all
    // queue at once behind the barrier while the tensor cores wait.
    let mut d = tc_open::<{ (BM / WM / 16) * (BN / WN / 8) }, X3>(acc);
    #[unroll]
    for kk in 0..TC_KSTEPS {
        if load {
            tc_copy_fast::<T, BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, (s + STAGES - 1) % STAGES, a, b, p, a_st, b_st, a_e, b_e, next, kk, false);
        }
        d = tc_kstep::<T, BM, BN, WM, WN, BT, BK, LDK, X3>(d, a_s, b_s, al_s, bl_s, ao, bo, s, kk);
        if T == f32 {
            if ahead & (kk + 1 < TC_KSTEPS) & prep {
                if WAIT & (kk == 0) {
                    cp_async_wait(STAGES - 3);
                }
                tc_prepare_at::<BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, al_s, bl_s, pa, pb, (s + 1) % STAGES, kk, TC_KSTEPS - 1);
            }
        }
    }
    cp_async_commit();
    tc_close::<{ (BM / WM / 16) * (BN / WN / 8) }, X3>(acc, d)
}

/// Prepares stage `stage` of f32 inputs for the `mma`s, in place, from the chunks that this
/// thread copied (`tc_load`'s chunks: chunk `i = tid + q · THREADS` of each tile), once its
/// copies have landed and before the barrier that shows them to the other warps: each element
/// rounded to TF32 and, with `X3`, the TF32 rounding of its remainder at the same place of
/// `al_s` / `bl_s` (3xTF32's split). Each element is rounded once per block rather than once
/// per warp that reads it. The chunks are proven in bounds here, for this stage; see
/// `tc_prepare_at` for the work.
fn tc_prepare_stage<const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool>(
    a_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    stage: u32,
    tid: u32,
) {
    let prep = tc_prep_offsets::<f32, BM, BN, WM, WN, BT, BK>(tid);
    let pa = prep[0] + stage * (BM * (BK + BK / 8));
    let pb = prep[1] + stage * (BN * (BK + BK / 8));
    let pa_end = tc_prep_a_end::<f32, BM, WM, WN, BK>();
    let pb_end = tc_prep_b_end::<f32, BN, WM, WN, BT, BK>();
    if (((pa as u64) + pa_end as u64) <= (a_s.len() as u64)) & (((pb as u64) + pb_end as u64) <= (b_s.len() as u64)) {
        tc_prepare_at::<BM, BN, WM, WN, BT, BK, X3>(a_s, b_s, al_s, bl_s, pa, pb, 0, 0, 1);
    }
}

/// The work of `tc_prepare_stage` in stage `stage` from this thread's stage-0 chunk offsets
/// `pa` and `pb` (`tc_prep_offsets`), which the caller proves in bounds for that stage
/// (`tc_prep_a_end`, `tc_prep_b_end`): part `part` of `parts` (constants once unrolled) of
/// each operand's chunks, the `part`-th of `parts` runs as even as they come.
fn tc_prepare_at<const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool>(
    a_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    al_s: Shared<[f32; STAGES * BM * (BK + BK / 8)]>,
    bl_s: Shared<[f32; STAGES * BN * (BK + BK / 8)]>,
    pa: u32,
    pb: u32,
    stage: u32,
    part: u32,
    parts: u32,
) {
    split_rows::<BM, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BM * (BK + BK / 8) }, X3>(a_s, al_s, pa, stage * BM * (BK + BK / 8), part, parts);
    if BT {
        split_rows::<BN, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }, X3>(b_s, bl_s, pb, stage * BN * (BK + BK / 8), part, parts);
    } else {
        split_rows::<BK, BN, { BN + 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }, X3>(b_s, bl_s, pb, stage * BN * (BK + BK / 8), part, parts);
    }
}

/// Where this thread's first chunk of A and of B lies in stage 0 (`[a, b]`, elements) for
/// `tc_prepare_at`: chunk `tid` of each tile as `tc_load` copies it (`split_start`), rows
/// `BK + BK / 8` apart (B `[K, N]`: `BN + 8`). 0 for 16-bit inputs, which are not prepared.
fn tc_prep_offsets<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32>(tid: u32) -> [u32; 2] {
    let mut r = [0u32; 2];
    if T == f32 {
        r[0] = split_start::<BK, { BK + BK / 8 }>(tid);
        if BT {
            r[1] = split_start::<BK, { BK + BK / 8 }>(tid);
        } else {
            r[1] = split_start::<BN, { BN + 8 }>(tid);
        }
    }
    r
}

/// How far past its `tc_prep_offsets` offset a thread's last chunk of A in one stage
/// reaches (elements, `split_span`; 0 for 16-bit inputs).
fn tc_prep_a_end<T, const BM: u32, const WM: u32, const WN: u32, const BK: u32>() -> u32 {
    if T == f32 {
        split_span::<BM, BK, { BK + BK / 8 }, { WM * WN * 32 }>()
    } else {
        0
    }
}

/// As `tc_prep_a_end`, for B.
fn tc_prep_b_end<T, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32>() -> u32 {
    if T != f32 {
        0
    } else if BT {
        split_span::<BN, BK, { BK + BK / 8 }, { WM * WN * 32 }>()
    } else {
        split_span::<BK, BN, { BN + 8 }, { WM * WN * 32 }>()
    }
}

/// Where thread `tid`'s first chunk of `split_rows` lies in its tile (elements): 4 elements
/// at `4 (tid % (RUN / 4))` of row `tid / (RUN / 4)`, rows `LDS` apart.
fn split_start<const RUN: u32, const LDS: u32>(tid: u32) -> u32 {
    tid / (RUN / 4) * LDS + tid % (RUN / 4) * 4
}

/// How far past `split_start` a thread's last chunk of `split_rows` reaches (elements).
fn split_span<const ROWS: u32, const RUN: u32, const LDS: u32, const THREADS: u32>() -> u32 {
    (ROWS * RUN / (4 * THREADS) - 1) * (THREADS / (RUN / 4)) * LDS + 4
}

/// Rounds to TF32 a thread's 16-byte chunks of a `ROWS × RUN` f32 tile at `base` of `t` (rows
/// `LDS` apart), laid out as `copy_rows` copies them, and with `X3` writes the TF32 rounding of
/// each remainder to the same place of `tl`: the chunks of part `part` of `parts`
/// (`q · parts / chunks == part`). The threads cover whole rows per turn (`THREADS` a
/// multiple of the chunks per row, `RUN / 4`), so chunk `q` lies `q · THREADS / (RUN / 4)`
/// rows below chunk 0, at `st` (the caller proves `st + base` and the last chunk in bounds).
fn split_rows<const ROWS: u32, const RUN: u32, const LDS: u32, const THREADS: u32, const LEN: u32, const X3: bool>(
    t: Shared<[f32; LEN]>,
    tl: Shared<[f32; LEN]>,
    st: u32,
    base: u32,
    part: u32,
    parts: u32,
) {
    let chunks = ROWS * RUN / (4 * THREADS);
    #[unroll]
    for q in 0..ROWS * RUN / (4 * THREADS) {
        if q * parts / chunks == part {
            let x = tf32_split4(t.load4(st + base + q * (THREADS / (RUN / 4)) * LDS));
            t.store4(st + base + q * (THREADS / (RUN / 4)) * LDS, x[0]);
            if X3 {
                tl.store4(st + base + q * (THREADS / (RUN / 4)) * LDS, x[1]);
            }
        }
    }
}

/// The copies of K step `kt` (of a block inside the matrices) into stage `stage`: A from
/// element `a_e` of the thread's first chunk of step 0 (`tc_fast_loop`), B from `b_e`; a
/// thread's later chunks lie whole rows apart. The strides are computed here from `p`
/// (kernel parameters, which need no registers across the loop). With `all` every copy;
/// otherwise those that go out before `mma` step `kk` of a step (`tc_fast_step`): a quarter
/// of each operand's before each step, or A's before step 0 and B's before step 2 for the
/// kernels whose 128 registers hold no more addresses at once (16-bit inputs and 3xTF32 on
/// warp tiles of at most `SMALL_WARP_TILE` outputs: `ptxas` spills the spread schedule there,
/// and this one elsewhere).
fn tc_copy_fast<T, const BM: u32, const BN: u32, const WM: u32, const WN: u32, const BT: bool, const BK: u32, const X3: bool>(
    a_s: Shared<[T; STAGES * BM * (BK + BK / 8)]>,
    b_s: Shared<[T; STAGES * BN * (BK + BK / 8)]>,
    stage: u32,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_st: u32,
    b_st: u32,
    a_e: u64,
    b_e: u64,
    kt: u32,
    kk: u32,
    all: bool,
) {
    let spread = !all & ((BM / WM * (BN / WN) > SMALL_WARP_TILE) | ((T == f32) & !X3));
    let parts = if spread { TC_KSTEPS } else { 1u32 };
    let part = if spread { kk } else { 0u32 };
    let a_go = all | spread | (kk == 0);
    let b_go = all | spread | (kk == TC_KSTEPS / 2);
    let cpr = BK * size_of::<T>() / 16;
    let cpr_b = if BT { cpr } else { BN * size_of::<T>() / 16 };
    let a_step = (WM * WN * 32 / cpr) as u64 * p.lda as u64;
    let b_step = (WM * WN * 32 / cpr_b) as u64 * p.ldb as u64;
    if a_go {
        copy_fast::<T, BM, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BM * (BK + BK / 8) }>(a_s, stage * BM * (BK + BK / 8) + a_st, a, a_e + (kt * BK) as u64, a_step, part, parts);
    }
    if b_go {
        if BT {
            copy_fast::<T, BN, BK, { BK + BK / 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }>(b_s, stage * BN * (BK + BK / 8) + b_st, b, b_e + (kt * BK) as u64, b_step, part, parts);
        } else {
            copy_fast::<T, BK, BN, { BN + 8 }, { WM * WN * 32 }, { STAGES * BN * (BK + BK / 8) }>(b_s, stage * BN * (BK + BK / 8) + b_st, b, b_e + (kt * BK) as u64 * p.ldb as u64, b_step, part, parts);
        }
    }
}

/// The 16-byte copies of a thread's chunks of a `ROWS × RUN` tile whose rows the threads
/// cover whole (`THREADS` a multiple of the chunks per row, `RUN · size / 16`): chunk `q`
/// from element `e + q · step` of `x` to `st + q · (THREADS / cpr) · LDS` of `t`.
fn copy_fast<T, const ROWS: u32, const RUN: u32, const LDS: u32, const THREADS: u32, const LEN: u32>(
    t: Shared<[T; LEN]>,
    st: u32,
    x: &[T],
    e: u64,
    step: u64,
    part: u32,
    parts: u32,
) {
    let n = ROWS * RUN * size_of::<T>() / (16 * THREADS);
    #[unroll]
    for q in 0..ROWS * RUN * size_of::<T>() / (16 * THREADS) {
        if q * parts / n == part {
            // SAFETY: the launch's contract (see `gemm_mma`) and the caller's choice: the
            // tile lies inside the matrix, its rows 16-byte aligned; the destination lies in
            // the stage by the tile's constants.
            unsafe {
                t.cp_async16_unchecked(st + q * (THREADS / (RUN * size_of::<T>() / 16)) * LDS, x, e + q as u64 * step);
            }
        }
    }
}

/// The accumulators of every warp to the padded f32 tile `BM × (BN + 4)` (rows `BN + 4`
/// apart, so that the lanes' stores fall on different banks), at their places in the
/// `mma` fragments: lane `(g, t)` holds rows `g`, `g + 8` and columns `2t`, `2t + 1` of
/// each 16 × 8 tile.
fn acc_to_shared<const BM: u32, const BN: u32, const WM: u32, const WN: u32>(
    acc: [[f32; 4]; (BM / WM / 16) * (BN / WN / 8)],
    t_s: Shared<[f32; BM * (BN + 4)]>,
) {
    let lane = lane_id();
    let warp = warp_id();
    let to = (warp / WN * (BM / WM) + lane / 4) * (BN + 4) + warp % WN * (BN / WN) + (lane % 4) * 2;
    if ((to as u64) + ((BM / WM - 16 + 8) * (BN + 4) + BN / WN - 8 + 2) as u64) <= (t_s.len() as u64) {
        #[unroll]
        for mi in 0..BM / WM / 16 {
            #[unroll]
            for ni in 0..BN / WN / 8 {
                // Each index `to + (a constant)`, the form the range above proves.
                let d = acc[mi * (BN / WN / 8) + ni];
                t_s.store2(to + (mi * 16 * (BN + 4) + ni * 8), [d[0], d[1]]);
                t_s.store2(to + (mi * 16 * (BN + 4) + ni * 8 + 8 * (BN + 4)), [d[2], d[3]]);
            }
        }
    }
}

/// The epilogue's second half, shared by the kernels: a tile of `ROWS × BN` results in
/// shared memory (from element `t0` of `t_s`, rows `LDT` apart) goes to C (or the split-K
/// workspace) 4 consecutive elements of a row per thread and turn, rows `m0..` and columns
/// `n0..` of matrix `z`, through [`write_groups`]. Every caller's turns fill whole groups
/// (`ROWS · BN` a multiple of `G · THREADS · 4`, asserted for each variant). A tile wholly
/// inside C, with C (and the residual) aligned for 4-element accesses, is `whole`: its
/// reads and stores go without a test of rows, columns or alignment per run. (Not with `G`
/// 1, a kernel short of registers: there the second form of the reads and stores cost the
/// main loop of `gemm_mma`'s TF32 tile of 128 × 128 a spill.)
fn write_rows<O, const ROWS: u32, const BN: u32, const LDT: u32, const THREADS: u32, const G: u32, const LEN: u32>(
    t_s: Shared<[f32; LEN]>,
    t0: u32,
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
    assert!(ROWS * BN % (G * THREADS * 4) == 0, "a tile's groups of runs end with the tile (`epi_group_reads` tests no run against its end)");
    if let Some(w) = ws {
        let mut e0 = tid * 4;
        while e0 < ROWS * BN {
            #[unroll]
            for u in 0..G {
                let e = e0 + u * THREADS * 4;
                let [row, col] = group_run::<BN, THREADS>(m0, n0, e0, u);
                if (e < ROWS * BN) & (row < p.m) & (col < p.n) {
                    // Block `zs` is split `zs % splits` of matrix `z`: its plane is
                    // `s · batch + z`, i.e. `(zs % splits) · batch + zs / splits`.
                    let plane = (zs % p.splits as u64) * p.batch as u64 + z;
                    w.store4((plane * p.m as u64 + row as u64) * p.ldw as u64 + col as u64, t_s.load4(t0 + e / BN * LDT + e % BN));
                }
            }
            e0 += G * THREADS * 4;
        }
    } else {
        let whole = (G > 1) & (m0 + ROWS <= p.m) & (n0 + BN <= p.n) & p.vec_c & (p.vec_r | res.is_none());
        write_groups::<O, ROWS, BN, LDT, THREADS, G, LEN>(t_s, t0, p, bias, res, c, z, m0, n0, tid, whole);
    }
}

/// [`write_rows`]' turns to C, in groups of `G`: first the group's reads of C and the
/// residual (`epi_group_reads`), then its sums (`epi_sum`), one activation of all `4 · G` of
/// them (`act_group`, whose chains interleave), and its outputs (`epi_group_stores`), so
/// that `G` reads per operand are in flight instead of one (`G` as the kernel's registers
/// allow). Where a turn steps whole rows (`THREADS · 4` a multiple of `BN`) a thread keeps
/// its columns, and reads their bias once. Where `whole` (the tile inside C, `ROWS · BN` a
/// multiple of `G · THREADS · 4`, C and the residual aligned for 4-element accesses:
/// [`write_rows`] checks) every run of every group is whole, and the reads and stores go
/// untested (their `WHOLE` forms; the activation's code is there once for both).
fn write_groups<O, const ROWS: u32, const BN: u32, const LDT: u32, const THREADS: u32, const G: u32, const LEN: u32>(
    t_s: Shared<[f32; LEN]>,
    t0: u32,
    p: GemmParams,
    bias: Option<&[f32]>,
    res: Option<&[O]>,
    c: &mut [O],
    z: u64,
    m0: u32,
    n0: u32,
    tid: u32,
    whole: bool,
) {
    let bv = bias4(p, bias, n0 + (tid * 4) % BN);
    let mut e0 = tid * 4;
    while e0 < ROWS * BN {
        let r = if whole { epi_group_reads::<O, BN, THREADS, G, true>(p, res, c, z, m0, n0, e0) } else { epi_group_reads::<O, BN, THREADS, G, false>(p, res, c, z, m0, n0, e0) };
        group_out::<O, ROWS, BN, LDT, THREADS, G, LEN>(t_s, t0, p, bias, res.is_some(), c, z, m0, n0, e0, r, bv, whole);
        e0 += G * THREADS * 4;
    }
}

/// A group of [`write_groups`] from element `e0`, after its reads `r` ([`epi_group_reads`]):
/// its sums (`epi_sum`, the bias `bv` of the thread's columns where a turn steps whole rows,
/// each run's own elsewhere), one activation of all of them (`act_group`) and its outputs
/// (`epi_group_stores`; untested where `whole`).
fn group_out<O, const ROWS: u32, const BN: u32, const LDT: u32, const THREADS: u32, const G: u32, const LEN: u32>(
    t_s: Shared<[f32; LEN]>,
    t0: u32,
    p: GemmParams,
    bias: Option<&[f32]>,
    has_res: bool,
    c: &mut [O],
    z: u64,
    m0: u32,
    n0: u32,
    e0: u32,
    r: [[f32; 4]; 2 * G],
    bv_cols: [f32; 4],
    whole: bool,
) {
    let mut bv = bv_cols;
    let mut v = [[0.0f32; 4]; G];
    #[unroll]
    for u in 0..G {
        let e = e0 + u * THREADS * 4;
        if whole | (e < ROWS * BN) {
            if (THREADS * 4) % BN != 0 {
                bv = bias4(p, bias, n0 + e % BN);
            }
            v[u] = epi_sum(p, bias.is_some(), bv, r[2 * u], t_s.load4(t0 + e / BN * LDT + e % BN));
        }
    }
    if p.act != ACT_IDENTITY {
        v = act_group::<O, G>(p.act, v, p.slope);
    }
    if whole {
        epi_group_stores::<O, BN, THREADS, G, true>(p, has_res, r, c, z, m0, n0, e0, v);
    } else {
        epi_group_stores::<O, BN, THREADS, G, false>(p, has_res, r, c, z, m0, n0, e0, v);
    }
}

/// The reads (`epi_reads`) of a group of [`write_groups`] from element `e0` of its `ROWS ×
/// BN` tile: run `u`'s old C at `2 u`, its residual at `2 u + 1`; with `WHOLE` every run
/// untested. Runs are tested against `p.m` and `p.n` only, not against the tile's end:
/// [`write_rows`] asserts `ROWS · BN` a multiple of `G · THREADS · 4` (its groups end with the
/// tile), so no run of a group lies in the rows below the tile, another tile's.
fn epi_group_reads<O, const BN: u32, const THREADS: u32, const G: u32, const WHOLE: bool>(
    p: GemmParams,
    res: Option<&[O]>,
    c: &mut [O],
    z: u64,
    m0: u32,
    n0: u32,
    e0: u32,
) -> [[f32; 4]; 2 * G] {
    let mut r = [[0.0f32; 4]; 2 * G];
    #[unroll]
    for u in 0..G {
        let [row, col] = group_run::<BN, THREADS>(m0, n0, e0, u);
        if WHOLE | ((row < p.m) & (col < p.n)) {
            let x = epi_reads::<O, WHOLE>(p, res, c, z, row, col);
            r[2 * u] = x[0];
            r[2 * u + 1] = x[1];
        }
    }
    r
}

/// The row and column of C where run `u` of the group from element `e0` of a tile at
/// (`m0`, `n0`) of `BN` columns starts (runs `THREADS · 4` elements apart).
fn group_run<const BN: u32, const THREADS: u32>(m0: u32, n0: u32, e0: u32, u: u32) -> [u32; 2] {
    let e = e0 + u * THREADS * 4;
    [m0 + e / BN, n0 + e % BN]
}

/// The outputs (`epi_store`) of a group of [`write_groups`] from element `e0`: run `u`'s
/// activation `v[u]` plus its residual `r[2 u + 1]`; with `WHOLE` every run untested (runs
/// tested as in [`epi_group_reads`], which holds only where the groups end with the tile).
fn epi_group_stores<O, const BN: u32, const THREADS: u32, const G: u32, const WHOLE: bool>(
    p: GemmParams,
    has_res: bool,
    r: [[f32; 4]; 2 * G],
    c: &mut [O],
    z: u64,
    m0: u32,
    n0: u32,
    e0: u32,
    v: [[f32; 4]; G],
) {
    #[unroll]
    for u in 0..G {
        let [row, col] = group_run::<BN, THREADS>(m0, n0, e0, u);
        if WHOLE | ((row < p.m) & (col < p.n)) {
            epi_store::<O, WHOLE>(p, has_res, r[2 * u + 1], c, z, row, col, v[u]);
        }
    }
}

/// Brings the rows `m0..m0 + ROWS`, columns `n0..n0 + BN` of the residual and of C (where
/// `beta` is not 0) of matrix `z` into L2 ahead of `write_rows`, one 128-byte line per
/// thread and turn, unless K is split (the blocks then write raw sums, and
/// `gemm_splitk_reduce` reads both). Called before a tile's main loop, so that its reads
/// find the lines in L2 instead of waiting for memory once per group of `write_rows`' turns.
fn epi_prefetch<O, const ROWS: u32, const BN: u32, const THREADS: u32>(p: GemmParams, res: Option<&[O]>, c: &mut [O], z: u64, m0: u32, n0: u32, tid: u32) {
    let per_line = 128 / size_of::<O>();
    let lpr = (BN + per_line - 1) / per_line;
    if (res.is_some() | (p.beta != 0.0)) & (p.splits == 1) {
        #[unroll]
        for q in 0..(ROWS * ((BN + 128 / size_of::<O>() - 1) / (128 / size_of::<O>())) + THREADS - 1) / THREADS {
            let li = tid + q * THREADS;
            let row = m0 + li / lpr;
            let col = n0 + li % lpr * per_line;
            if (li < ROWS * lpr) & (row < p.m) & (col < p.n) {
                // Checked (a hint past the slice is dropped), so that safe kernels may call it.
                if let Some(rs) = res {
                    rs.prefetch_l2(z * p.batch_r + row as u64 * p.ldr as u64 + col as u64);
                }
                if p.beta != 0.0 {
                    c.prefetch_l2(z * p.batch_c + row as u64 * p.ldc as u64 + col as u64);
                }
            }
        }
    }
}

/// The epilogue of 4 consecutive outputs of one row from column `col` (those past `n`
/// are left alone): its reads, `epi_sum`, the activation and `epi_store`.
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
    let bv = bias4(p, bias, col);
    let r = epi_reads::<O, false>(p, res, c, z, row, col);
    let mut v = epi_sum(p, bias.is_some(), bv, r[0], acc);
    if p.act != ACT_IDENTITY {
        #[unroll]
        for l in 0..4 {
            v[l] = act_code::<O>(p.act, v[l], p.slope);
        }
    }
    epi_store::<O, false>(p, res.is_some(), r[1], c, z, row, col, v);
}

/// The bias of the 4 columns from `col` (0 past `n`, and without a bias).
fn bias4(p: GemmParams, bias: Option<&[f32]>, col: u32) -> [f32; 4] {
    let mut bv = [0.0f32; 4];
    if let Some(bs) = bias {
        bv = load4_edge::<f32, true>(bs, col as u64, true, col, p.n, false);
    }
    bv
}

/// The epilogue's reads of 4 outputs of one row from `col`: the old C (where `beta` is
/// not 0) and the residual (where there is one), 0 otherwise and past `n`. With `WHOLE`
/// the 4 lie below `n` and C and the residual are aligned for them (`p.vec_c`, `p.vec_r`):
/// one vector load each, untested.
fn epi_reads<O, const WHOLE: bool>(p: GemmParams, res: Option<&[O]>, c: &mut [O], z: u64, row: u32, col: u32) -> [[f32; 4]; 2] {
    let mut r = [[0.0f32; 4]; 2];
    if p.beta != 0.0 {
        let ci = z * p.batch_c + row as u64 * p.ldc as u64 + col as u64;
        r[0] = if WHOLE { load4_f32::<O, false>(c, ci) } else { load4_edge::<O, false>(c, ci, true, col, p.n, p.vec_c) };
    }
    if let Some(rs) = res {
        let ri = z * p.batch_r + row as u64 * p.ldr as u64 + col as u64;
        r[1] = if WHOLE { load4_f32::<O, true>(rs, ri) } else { load4_edge::<O, true>(rs, ri, true, col, p.n, p.vec_r) };
    }
    r
}

/// `alpha · acc + beta · old + bias` for 4 outputs: the activation's argument, from the old
/// C of `epi_reads` (`old`) and `bias4` (`bv`, added where `has_bias`).
fn epi_sum(p: GemmParams, has_bias: bool, bv: [f32; 4], old: [f32; 4], acc: [f32; 4]) -> [f32; 4] {
    let mut v = [0.0f32; 4];
    #[unroll]
    for l in 0..4 {
        v[l] = p.alpha * acc[l];
    }
    if p.beta != 0.0 {
        #[unroll]
        for l in 0..4 {
            v[l] = p.beta.mul_add(old[l], v[l]);
        }
    }
    if has_bias {
        #[unroll]
        for l in 0..4 {
            v[l] = v[l] + bv[l];
        }
    }
    v
}

/// `C = v + residual` for 4 outputs of one row from `col` (those past `n` are left alone),
/// `v` the activation of `epi_sum`'s sums, the residual from `epi_reads` (`rv`, added where
/// `has_res`). With `WHOLE` the 4 lie below `n` and C is aligned for them (`p.vec_c`).
fn epi_store<O, const WHOLE: bool>(p: GemmParams, has_res: bool, rv: [f32; 4], c: &mut [O], z: u64, row: u32, col: u32, v: [f32; 4]) {
    let ci = z * p.batch_c + row as u64 * p.ldc as u64 + col as u64;
    let mut o = v;
    if has_res {
        #[unroll]
        for l in 0..4 {
            o[l] = o[l] + rv[l];
        }
    }
    if WHOLE | (p.vec_c & (col + 4 <= p.n)) {
        c.store4(ci, [o[0] as O, o[1] as O, o[2] as O, o[3] as O]);
    } else {
        #[unroll]
        for l in 0..4 {
            if col + l < p.n {
                c[ci + l as u64] = o[l] as O;
            }
        }
    }
}

/// `x[e..e + 4]` where `row_ok` and the run `j..j + 4` lies below `lim`; elements past
/// `lim` (or all, without `row_ok`) are 0. One 16-byte load when `vec` and the run is whole.
fn load4_edge<T, const NC: bool>(x: &[T], e: u64, row_ok: bool, j: u32, lim: u32, vec: bool) -> [f32; 4] {
    let mut v = [0.0f32; 4];
    if row_ok {
        if vec & (j + 4 <= lim) {
            v = load4_f32::<T, NC>(x, e);
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

/// `x[e..e + 4]` as f32 in one vector load (through the read-only cache with `NC`).
fn load4_f32<T, const NC: bool>(x: &[T], e: u64) -> [f32; 4] {
    let w = if NC { x.load4_nc(e) } else { x.load4(e) };
    [w[0] as f32, w[1] as f32, w[2] as f32, w[3] as f32]
}

/// The activation of code `code` on `G` runs of 4 outputs of type `O` (a uniform branch
/// chain on the code; `act_runs`): the chain taken once, each branch over all of them, so that their chains of dependent instructions interleave (the tile
/// kernels' epilogues run while the multiprocessor has few other warps to switch to: one
/// block of 8 warps for the widest).
fn act_group<O, const G: u32>(code: u32, x: [[f32; 4]; G], slope: f32) -> [[f32; 4]; G] {
    let mut y = x;
    if code == ACT_RELU {
        y = act_runs::<O, Act::Relu, G>(x, slope);
    } else if code == ACT_RELU6 {
        y = act_runs::<O, Act::Relu6, G>(x, slope);
    } else if code == ACT_LEAKY_RELU {
        y = act_runs::<O, Act::LeakyRelu, G>(x, slope);
    } else if code == ACT_GELU {
        y = act_runs::<O, Act::Gelu, G>(x, slope);
    } else if code == ACT_GELU_TANH {
        y = act_runs::<O, Act::GeluTanh, G>(x, slope);
    } else if code == ACT_SILU {
        y = act_runs::<O, Act::Silu, G>(x, slope);
    } else if code == ACT_SIGMOID {
        y = act_runs::<O, Act::Sigmoid, G>(x, slope);
    } else if code == ACT_TANH {
        y = act_runs::<O, Act::Tanh, G>(x, slope);
    } else if code == ACT_HARD_SWISH {
        y = act_runs::<O, Act::HardSwish, G>(x, slope);
    } else if code == ACT_HARD_SIGMOID {
        y = act_runs::<O, Act::HardSigmoid, G>(x, slope);
    }
    y
}

/// The activation of code `code` (`ACT_*`, not the identity) on `x`, bound for an output of
/// type `O` (`math::act_as`): a function called, not inlined, so that a kernel holds the
/// family's code once however many stores call it.
#[noinline]
fn act_code<O>(code: u32, x: f32, slope: f32) -> f32 {
    if code == ACT_RELU {
        math::act_as::<O, Act::Relu>(x, slope)
    } else if code == ACT_RELU6 {
        math::act_as::<O, Act::Relu6>(x, slope)
    } else if code == ACT_LEAKY_RELU {
        math::act_as::<O, Act::LeakyRelu>(x, slope)
    } else if code == ACT_GELU {
        math::act_as::<O, Act::Gelu>(x, slope)
    } else if code == ACT_GELU_TANH {
        math::act_as::<O, Act::GeluTanh>(x, slope)
    } else if code == ACT_SILU {
        math::act_as::<O, Act::Silu>(x, slope)
    } else if code == ACT_SIGMOID {
        math::act_as::<O, Act::Sigmoid>(x, slope)
    } else if code == ACT_TANH {
        math::act_as::<O, Act::Tanh>(x, slope)
    } else if code == ACT_HARD_SWISH {
        math::act_as::<O, Act::HardSwish>(x, slope)
    } else if code == ACT_HARD_SIGMOID {
        math::act_as::<O, Act::HardSigmoid>(x, slope)
    } else {
        x
    }
}

/// Activation `A` on each of `G` runs of 4 values bound for outputs of type `O`
/// (`math::act_as`: the 16-bit forms for f16 and bf16).
fn act_runs<O, const A: Act, const G: u32>(x: [[f32; 4]; G], slope: f32) -> [[f32; 4]; G] {
    let mut y = x;
    #[unroll]
    for u in 0..G {
        #[unroll]
        for l in 0..4 {
            y[u][l] = math::act_as::<O, A>(x[u][l], slope);
        }
    }
    y
}

/// The pipeline depth of the `wgmma` kernels: `WG_STAGES - 2` K steps in flight ahead of the
/// one multiplied, while the `wgmma`s of the step before may still read theirs.
const WG_STAGES: u32 = 4;

/// Copies a `ROWS × 128`-byte tile (one K step) of a row-major matrix (rows `r0..`, elements
/// `k0..` of each) into shared memory at `base` in the layout `wgmma` reads with 128-byte
/// swizzle: rows of 128 bytes, 16-byte chunk `ch` of row `r` at chunk `ch ^ (r % 8)`.
/// Chunk `i = tid + q · THREADS` is row `i / 8`, chunk `i % 8`. `FAST`: the tile lies inside
/// the matrix and its rows are 16-byte aligned; otherwise outside `rows` × `kend` the copy's
/// source size shrinks (to 0), which zero-fills, and without `vec` each element is copied on
/// its own through registers.
fn wg_copy<T, const ROWS: u32, const THREADS: u32, const LEN: u32, const FAST: bool>(
    t: Shared<[T; LEN]>,
    base: u32,
    x: &[T],
    off: u64,
    r0: u32,
    rows: u32,
    k0: u32,
    kend: u32,
    ld: u32,
    vec: bool,
    tid: u32,
) {
    let epc = 16 / size_of::<T>();
    #[unroll]
    for q in 0..ROWS * 8 / THREADS {
        let i = tid + q * THREADS;
        let r = i / 8;
        let ch = i % 8;
        let s = base + r * (8 * epc) + (ch ^ (r % 8)) * epc;
        let col = k0 + ch * epc;
        let e = off + (r0 + r) as u64 * ld as u64 + col as u64;
        if FAST {
            // SAFETY: the launch's contract (see `gemm_wgmma`): the rows `r0 .. r0 + ROWS`
            // and elements `k0 .. k0 + 8 · epc` of the matrix at `off` lie inside `x`, its
            // rows 16-byte aligned; the destination lies in the stage by the tile's constants.
            unsafe {
                t.cp_async16_unchecked(s, x, e);
            }
        } else if vec {
            let mut nb = 0u32;
            if (r0 + r < rows) & (col < kend) {
                nb = (kend - col).min(epc) * size_of::<T>();
            }
            t.cp_async16_partial(s, x, if nb == 0 { 0u64 } else { e }, nb);
        } else {
            #[unroll]
            for l in 0..16 / size_of::<T>() {
                let mut v = 0.0f32 as T;
                if (r0 + r < rows) & (col + l < kend) {
                    v = x.load_nc(e + l as u64);
                }
                t[s + l] = v;
            }
        }
    }
}

/// Issues the copies of the K step at `k0` into buffer `stage`: `BM` rows of A and `BN` of
/// B `[N, K]`, each row 128 bytes of K.
fn wg_load<T, const BM: u32, const BN: u32, const FAST: bool>(
    a_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]>,
    b_s: Shared<[T; WG_STAGES * BN * (128 / size_of::<T>())]>,
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
    let row = 128 / size_of::<T>();
    wg_copy::<T, BM, { BM / 64 * 128 }, { WG_STAGES * BM * (128 / size_of::<T>()) }, FAST>(a_s, stage * BM * row, a, a_off, m0, p.m, k0, kend, p.lda, p.vec_a, tid);
    wg_copy::<T, BN, { BM / 64 * 128 }, { WG_STAGES * BN * (128 / size_of::<T>()) }, FAST>(b_s, stage * BN * row, b, b_off, n0, p.n, k0, kend, p.ldb, p.vec_b, tid);
}

/// The `wgmma` main loop of one block: warpgroup `w` (warps `4w .. 4w + 4`) multiplies rows
/// `64 w .. 64 w + 64` of the A tile by the whole `BN` columns of B, each K step in
/// `128 / 32` `wgmma`s of 32 bytes of K, into `BN / 2` accumulators per thread. Step `kt`
/// waits for its copies (`cp.async` group), makes them visible to the asynchronous proxy
/// that `wgmma` reads through (`fence_proxy_async`), meets the other warps at the barrier,
/// issues the copies of step `kt + WG_STAGES - 2` into the buffer that step `kt - 2` read
/// (whose `wgmma`s every warp has waited for), then its own `wgmma`s, and waits for those
/// of step `kt - 1` (`wgmma_wait(1)`), leaving its own in flight.
fn wg_mainloop<T, const BM: u32, const BN: u32>(
    a_s: Shared<[T; WG_STAGES * BM * (128 / size_of::<T>())]>,
    b_s: Shared<[T; WG_STAGES * BN * (128 / size_of::<T>())]>,
    a: &[T],
    b: &[T],
    p: GemmParams,
    a_off: u64,
    b_off: u64,
    m0: u32,
    n0: u32,
    kbeg: u32,
    kend: u32,
    tid: u32,
) -> [f32; BN / 2] {
    let row = 128 / size_of::<T>();
    let mut acc = [0.0f32; BN / 2];
    let mut span = 0u32;
    if kend > kbeg {
        span = kend - kbeg;
    }
    let ktiles = (span + (row - 1)) / row;
    let inner = (m0 + BM <= p.m) & (n0 + BN <= p.n) & p.vec_a & p.vec_b;
    #[unroll]
    for s in 0..WG_STAGES - 2 {
        let k0 = kbeg + s * row;
        if s < ktiles {
            if inner & (k0 + row <= kend) {
                wg_load::<T, BM, BN, true>(a_s, b_s, s, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
            } else {
                wg_load::<T, BM, BN, false>(a_s, b_s, s, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
            }
        }
        cp_async_commit();
    }
    // The warpgroup (bounded by the block's size, which proves the descriptors' ranges).
    let wg = tid / 128;
    let mut kt = 0u32;
    while kt < ktiles {
        // Immutable, so that the bounds of the descriptors below are proven.
        let stage = kt % WG_STAGES;
        cp_async_wait(WG_STAGES - 3);
        fence_proxy_async();
        sync_threads();
        let next = kt + WG_STAGES - 2;
        if next < ktiles {
            let ns = next % WG_STAGES;
            let k0 = kbeg + next * row;
            if inner & (k0 + row <= kend) {
                wg_load::<T, BM, BN, true>(a_s, b_s, ns, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
            } else {
                wg_load::<T, BM, BN, false>(a_s, b_s, ns, a, b, p, a_off, b_off, m0, n0, k0, kend, tid);
            }
        }
        cp_async_commit();
        let ab = (stage * BM + wg * 64) * row;
        let bb = stage * BN * row;
        // The stage's rows, tested once (always true: `stage < WG_STAGES`, `wg < BM / 64`),
        // which proves every descriptor below.
        if (((ab as u64) + (64 * row) as u64) <= (a_s.len() as u64)) & (((bb as u64) + (BN * row) as u64) <= (b_s.len() as u64)) {
            wgmma_fence();
            #[unroll]
            for ks in 0..4 {
                if T == bf16 {
                    acc = wgmma_bf16(acc, a_s.wgmma_desc(ab, ks * (row / 4), 64), b_s.wgmma_desc(bb, ks * (row / 4), BN), true);
                } else if T == f16 {
                    acc = wgmma_f16(acc, a_s.wgmma_desc(ab, ks * (row / 4), 64), b_s.wgmma_desc(bb, ks * (row / 4), BN), true);
                }
            }
            wgmma_commit();
        }
        wgmma_wait(1);
        kt += 1;
    }
    wgmma_wait(0);
    acc
}

/// The stages of the TMA pipeline (`gemm_tma`): the producer runs up to `TMA_STAGES` K steps
/// ahead of the `wgmma`s.
const TMA_STAGES: u32 = 4;

/// The stages of the 3xTF32 TMA pipeline (`gemm_tma_x3`), each twice the size of
/// `gemm_tma`'s: the boxes as loaded (then their TF32 heads) and their TF32 tails.
const TMA_X3_STAGES: u32 = 3;

/// The registers per thread of `gemm_tma`'s warpgroups (`setmaxnreg`): the launch gives
/// each thread 168 (`max_regs`, 384 threads in the 64 K of a multiprocessor); warpgroup 0,
/// which only issues copies, hands 128 of its threads' to the two consumer warpgroups,
/// whose 128 accumulators (192 with `X3`'s two step sums) then leave room for the epilogue:
/// `128 · 40 + 256 · 232 = 384 · 168`.
const TMA_PRODUCER_REGS: u32 = 40;
const TMA_CONSUMER_REGS: u32 = 232;

/// The tile rows that `gemm_tma`'s tile order walks down before moving to the next tile
/// column: the blocks resident at once then share a few row panels of A and column panels
/// of B in L2.
const TMA_GROUP_ROWS: u32 = 8;

/// Tile `tile` of `gemm_tma`'s persistent order (tiles of `BM × BN` of every matrix and
/// slice of K, a plane of tiles per slice `zs`, each plane walked in groups of
/// [`TMA_GROUP_ROWS`] tile rows, down a group's rows and then across its columns):
/// `[zs, z, m0, n0, kbeg, ktiles]`, the slice index, the matrix, the tile's first row and
/// column, its first K element and its K steps of 128 bytes.
fn tma_tile<T, const BM: u32, const BN: u32>(p: GemmParams, tile: u32) -> [u32; 6] {
    let row = 128 / size_of::<T>();
    let tiles_m = (p.m + BM - 1) / BM;
    let tiles_n = (p.n + BN - 1) / BN;
    let plane = tiles_m * tiles_n;
    let zs = tile / plane;
    let r = tile % plane;
    let span = TMA_GROUP_ROWS * tiles_n;
    let first = r / span * TMA_GROUP_ROWS;
    let rows = (tiles_m - first).min(TMA_GROUP_ROWS);
    let m0 = (first + r % span % rows) * BM;
    let n0 = r % span / rows * BN;
    let kbeg = (zs % p.splits) * p.kc;
    let kend = (kbeg + p.kc).min(p.k);
    let mut len = 0u32;
    if kend > kbeg {
        len = kend - kbeg;
    }
    [zs, zs / p.splits, m0, n0, kbeg, (len + (row - 1)) / row]
}

/// The producer of `gemm_tma` (one thread), for one tile whose K steps are the pipeline's
/// steps `it0 ..`: step `it` waits until stage `it % ST` is free (its `empty` barrier: every
/// consumer warp released the step `ST` before, the phase of parity `(it / ST + 1) % 2`; at
/// once in the first round), announces its bytes on the stage's `full` barrier and has the
/// tensor memory accelerator copy the boxes of A (`BM` rows) and B (`BN` rows), 128 bytes
/// of K each, at `(k, row, z)`. Boxes past the matrices are zero-filled by the hardware.
fn tma_produce<T, const BM: u32, const BN: u32, const ST: u32>(
    a_s: Shared<[T; ST * BM * (128 / size_of::<T>())]>,
    b_s: Shared<[T; ST * BN * (128 / size_of::<T>())]>,
    full: Shared<[u64; ST]>,
    empty: Shared<[u64; ST]>,
    ta: TensorMap<T, { 128 / size_of::<T>() }, BM, 1>,
    tb: TensorMap<T, { 128 / size_of::<T>() }, BN, 1>,
    it0: u32,
    kbeg: u32,
    ktiles: u32,
    m0: u32,
    n0: u32,
    z: u32,
) {
    let row = 128 / size_of::<T>();
    let mut kt = 0u32;
    while kt < ktiles {
        let it = it0 + kt;
        let s = it % ST;
        let ai = s * (BM * row);
        let bi = s * (BN * row);
        // Always true (`s < ST`): proves the boxes and the barriers.
        if (s < ST) & (((ai as u64) + (BM * row) as u64) <= (a_s.len() as u64)) & (((bi as u64) + (BN * row) as u64) <= (b_s.len() as u64)) {
            empty.mbar_wait(s, (it / ST + 1) % 2);
            full.mbar_arrive_expect_tx(s, (BM + BN) * 128);
            let k = (kbeg + kt * row) as i32;
            a_s.tma_load(ai, ta, k, m0 as i32, z as i32, full, s);
            b_s.tma_load(bi, tb, k, n0 as i32, z as i32, full, s);
        }
        kt += 1;
    }
}

/// 4 f32 as their TF32 heads (rounded to nearest) and the TF32 roundings of the remainders:
/// `[heads, tails]`, `head + tail` within 2^-22 of each input relative to it.
fn tf32_split4(v: [f32; 4]) -> [[f32; 4]; 2] {
    let mut r = [[0.0f32; 4]; 2];
    #[unroll]
    for l in 0..4 {
        r[0][l] = f32::from_bits(v[l].to_tf32());
        r[1][l] = f32::from_bits((v[l] - r[0][l]).to_tf32());
    }
    r
}

/// A consumer warpgroup `w` of `gemm_tma`, for one tile whose K steps are the pipeline's
/// steps `it0 ..`: rows `64 w ..` of the A tile by the whole `BN` columns of B, each K step
/// in `128 / 32` `wgmma`s of 32 bytes of K (16 f16 / bf16 elements, or 8 f32 read as TF32:
/// the tensor cores take the top 19 bits of each) once the stage's `full` barrier completed
/// its phase (parity `(it / ST) % 2`). `wgmma_wait(1)` leaves the step's own products in
/// flight and completes the previous step's, whose stage each warp then releases (one
/// arrival per warp on `empty`); the last step's stage is released after `wgmma_wait(0)`.
/// `gemm_tma` passes `PARITY` 0 and `DRAIN` true; the mutant tests wait on the other parity,
/// or release the last stage and return with its products in flight. [`TMA_EPI_AHEAD`] steps
/// before the last (at the first with fewer) the warp sends its rows of the tile's residual
/// and C (rows `m0 ..` of matrix `z` from column `n0`) toward L2 for [`wg_store`].
fn tma_consume<T, O, const BM: u32, const BN: u32, const ST: u32, const PARITY: u32, const DRAIN: bool>(
    a_s: Shared<[T; ST * BM * (128 / size_of::<T>())]>,
    b_s: Shared<[T; ST * BN * (128 / size_of::<T>())]>,
    full: Shared<[u64; ST]>,
    empty: Shared<[u64; ST]>,
    it0: u32,
    ktiles: u32,
    w: u32,
    p: GemmParams,
    res: Option<&[O]>,
    c: &mut [O],
    z: u64,
    m0: u32,
    n0: u32,
) -> [f32; BN / 2] {
    let row = 128 / size_of::<T>();
    let lane = lane_id();
    let mut acc = [0.0f32; BN / 2];
    let mut kt = 0u32;
    while kt < ktiles {
        let it = it0 + kt;
        if kt + TMA_EPI_AHEAD == ktiles.max(TMA_EPI_AHEAD) {
            epi_prefetch::<O, 16, BN, 32>(p, res, c, z, m0, n0, lane);
        }
        let s = it % ST;
        let ab = s * (BM * row) + w * (64 * row);
        let bb = s * (BN * row);
        // Always true (`s < ST`, `w < BM / 64`): proves the barrier and every descriptor
        // below.
        if (s < ST) & (((ab as u64) + (64 * row) as u64) <= (a_s.len() as u64)) & (((bb as u64) + (BN * row) as u64) <= (b_s.len() as u64)) {
            full.mbar_wait(s, (it / ST + PARITY) % 2);
            wgmma_fence();
            #[unroll]
            for ks in 0..4 {
                if T == bf16 {
                    acc = wgmma_bf16(acc, a_s.wgmma_desc(ab, ks * (row / 4), 64), b_s.wgmma_desc(bb, ks * (row / 4), BN), true);
                } else if T == f16 {
                    acc = wgmma_f16(acc, a_s.wgmma_desc(ab, ks * (row / 4), 64), b_s.wgmma_desc(bb, ks * (row / 4), BN), true);
                } else if T == f32 {
                    acc = wgmma_tf32(acc, a_s.wgmma_desc(ab, ks * (row / 4), 64), b_s.wgmma_desc(bb, ks * (row / 4), BN), true);
                }
            }
            wgmma_commit();
        }
        wgmma_wait(1);
        if (kt > 0) & (lane == 0) {
            let ps = (it - 1) % ST;
            if ps < ST {
                empty.mbar_arrive(ps);
            }
        }
        kt += 1;
    }
    if DRAIN {
        wgmma_wait(0);
    }
    if (ktiles > 0) & (lane == 0) {
        let ls = (it0 + ktiles - 1) % ST;
        if ls < ST {
            empty.mbar_arrive(ls);
        }
    }
    acc
}

/// The K steps before a tile's last at which `gemm_tma`'s consumer warps send their rows of
/// the residual and C toward L2 ([`tma_consume`]): late enough that the lines are still
/// there for the epilogue (sent at the tile's start, the A and B tiles streaming through L2
/// since evicted them), early enough that they have arrived.
const TMA_EPI_AHEAD: u32 = 4;

/// The threads of the consumer warpgroups of `gemm_tma_x3`, each of which splits its share
/// of every stage ([`x3_split`]) and arrives on the stage's `ready` barrier.
fn x3_splitters<const BM: u32>() -> u32 {
    BM / 64 * 128
}

/// Consumer warpgroup `w`'s share of stage `s` of `gemm_tma_x3`, once it has landed (its
/// `full` barrier, parity `par`): rows `64 w ..` of the A box and the `w`-th of `BM / 64`
/// equal parts of the B box, each f32 replaced by its TF32 head and its TF32 tail written to
/// the same place of `a_lo` / `b_lo` (`tf32_split4`: the same layout, so the same swizzle),
/// 16 bytes per thread `t` of the warpgroup and turn, the turn's reads before its writes.
/// Then the writes are ordered before the `wgmma`s' reads (`fence_proxy_async`) and the
/// thread arrives on `ready`.
fn x3_split<const BM: u32, const BN: u32, const ST: u32>(
    a_s: Shared<[f32; ST * BM * 32]>,
    b_s: Shared<[f32; ST * BN * 32]>,
    a_lo: Shared<[f32; ST * BM * 32]>,
    b_lo: Shared<[f32; ST * BN * 32]>,
    full: Shared<[u64; ST]>,
    ready: Shared<[u64; ST]>,
    s: u32,
    par: u32,
    w: u32,
    t: u32,
) {
    let ai = s * (BM * 32) + w * (64 * 32) + t * 4;
    let bi = s * (BN * 32) + w * (BN * 32 / (BM / 64)) + t * 4;
    // Always true (`s < ST`, `w < BM / 64`, `t < 128`): proves every access below.
    if (s < ST) & (((ai as u64) + (64 * 32 - 128 * 4 + 4) as u64) <= (a_s.len() as u64)) & (((bi as u64) + (BN * 32 / (BM / 64) - 128 * 4 + 4) as u64) <= (b_s.len() as u64)) {
        full.mbar_wait(s, par);
        let mut v = [[0.0f32; 4]; 4];
        #[unroll]
        for j in 0..4 {
            v[j] = a_s.load4(ai + j * 512);
        }
        #[unroll]
        for j in 0..4 {
            let x = tf32_split4(v[j]);
            a_s.store4(ai + j * 512, x[0]);
            a_lo.store4(ai + j * 512, x[1]);
        }
        #[unroll]
        for h in 0..BN * 32 / (BM / 64) / 2048 {
            #[unroll]
            for j in 0..4 {
                v[j] = b_s.load4(bi + (h * 4 + j) * 512);
            }
            #[unroll]
            for j in 0..4 {
                let x = tf32_split4(v[j]);
                b_s.store4(bi + (h * 4 + j) * 512, x[0]);
                b_lo.store4(bi + (h * 4 + j) * 512, x[1]);
            }
        }
        fence_proxy_async();
        ready.mbar_arrive(s);
    }
}

/// One K step of a consumer warpgroup `w` of `gemm_tma_x3` (pipeline step `it`, stage
/// `it % ST`): once both warpgroups have split the stage (`ready`, parity `(it / ST) % 2`),
/// each 32 bytes of K (8 f32) multiplied three times, tails by heads, heads by tails and
/// heads by heads, into `step` from 0, committed as one group; then the next stage split
/// (`next`), and a wait until the group before is complete (`wgmma_wait(1)`), so that the
/// caller may add the other step sum. The wait is on the same path as the commit (the
/// other way waits for all), which lets `ptxas` keep the `wgmma`s asynchronous.
fn x3_step<const BM: u32, const BN: u32, const ST: u32, const PARITY: u32>(
    a_s: Shared<[f32; ST * BM * 32]>,
    b_s: Shared<[f32; ST * BN * 32]>,
    a_lo: Shared<[f32; ST * BM * 32]>,
    b_lo: Shared<[f32; ST * BN * 32]>,
    full: Shared<[u64; ST]>,
    ready: Shared<[u64; ST]>,
    step: [f32; BN / 2],
    it: u32,
    next: bool,
    w: u32,
    t: u32,
) -> [f32; BN / 2] {
    let mut d = step;
    let s = it % ST;
    let ab = s * (BM * 32) + w * (64 * 32);
    let bb = s * (BN * 32);
    // Always true: proves the barrier and every descriptor below.
    if (s < ST) & (((ab as u64) + (64 * 32) as u64) <= (a_s.len() as u64)) & (((bb as u64) + (BN * 32) as u64) <= (b_s.len() as u64)) {
        ready.mbar_wait(s, (it / ST + PARITY) % 2);
        wgmma_fence();
        #[unroll]
        for ks in 0..4 {
            d = wgmma_tf32(d, a_lo.wgmma_desc(ab, ks * 8, 64), b_s.wgmma_desc(bb, ks * 8, BN), ks > 0);
            d = wgmma_tf32(d, a_s.wgmma_desc(ab, ks * 8, 64), b_lo.wgmma_desc(bb, ks * 8, BN), true);
            d = wgmma_tf32(d, a_s.wgmma_desc(ab, ks * 8, 64), b_s.wgmma_desc(bb, ks * 8, BN), true);
        }
        wgmma_commit();
        if next {
            x3_split::<BM, BN, ST>(a_s, b_s, a_lo, b_lo, full, ready, (it + 1) % ST, ((it + 1) / ST) % 2, w, t);
        }
        wgmma_wait(1);
    } else {
        wgmma_wait(0);
    }
    d
}

/// The accumulators plus a finished step's sums, in f32, and the step's stage released (one
/// arrival per warp on `empty`).
fn x3_fold<const BN: u32, const ST: u32>(acc: [f32; BN / 2], step: [f32; BN / 2], empty: Shared<[u64; ST]>, it: u32) -> [f32; BN / 2] {
    let mut r = acc;
    #[unroll]
    for i in 0..BN / 2 {
        r[i] = r[i] + step[i];
    }
    let s = it % ST;
    if (lane_id() == 0) & (s < ST) {
        empty.mbar_arrive(s);
    }
    r
}

/// A consumer warpgroup `w` of `gemm_tma_x3` for one tile whose K steps are the pipeline's
/// steps `it0 ..`: both consumer warpgroups split each stage as it lands ([`x3_split`]), one
/// step ahead of their `wgmma`s ([`x3_step`]), so that the splitting of step `k + 1` runs
/// while the tensor cores multiply step `k`. A step's products sum from 0 into one of two
/// step sums, taken in turn, and are added to the accumulators in f32 once the next step's
/// `wgmma`s are in flight, as `tc_open` / `tc_close` do for `mma.sync`: the tensor cores'
/// adders truncate, and a running sum over all of K would collect one truncation of its
/// full magnitude per `wgmma`.
fn tma_consume_x3<const BM: u32, const BN: u32, const ST: u32, const PARITY: u32>(
    a_s: Shared<[f32; ST * BM * 32]>,
    b_s: Shared<[f32; ST * BN * 32]>,
    a_lo: Shared<[f32; ST * BM * 32]>,
    b_lo: Shared<[f32; ST * BN * 32]>,
    full: Shared<[u64; ST]>,
    ready: Shared<[u64; ST]>,
    empty: Shared<[u64; ST]>,
    it0: u32,
    ktiles: u32,
    w: u32,
) -> [f32; BN / 2] {
    let t = thread_idx_x() % 128;
    let mut acc = [0.0f32; BN / 2];
    let mut s0 = [0.0f32; BN / 2];
    let mut s1 = [0.0f32; BN / 2];
    if ktiles > 0 {
        x3_split::<BM, BN, ST>(a_s, b_s, a_lo, b_lo, full, ready, it0 % ST, (it0 / ST) % 2, w, t);
        // Step 0 into `s0`; each turn of the loop then starts with `s0`'s step in flight and
        // takes two steps, into `s1` and `s0`.
        s0 = x3_step::<BM, BN, ST, PARITY>(a_s, b_s, a_lo, b_lo, full, ready, s0, it0, ktiles > 1, w, t);
        let mut kt = 1u32;
        while kt + 1 < ktiles {
            let it = it0 + kt;
            s1 = x3_step::<BM, BN, ST, PARITY>(a_s, b_s, a_lo, b_lo, full, ready, s1, it, true, w, t);
            acc = x3_fold::<BN, ST>(acc, s0, empty, it - 1);
            s0 = x3_step::<BM, BN, ST, PARITY>(a_s, b_s, a_lo, b_lo, full, ready, s0, it + 1, kt + 2 < ktiles, w, t);
            acc = x3_fold::<BN, ST>(acc, s1, empty, it);
            kt += 2;
        }
        if kt < ktiles {
            s1 = x3_step::<BM, BN, ST, PARITY>(a_s, b_s, a_lo, b_lo, full, ready, s1, it0 + kt, false, w, t);
            acc = x3_fold::<BN, ST>(acc, s0, empty, it0 + kt - 1);
            wgmma_wait(0);
            acc = x3_fold::<BN, ST>(acc, s1, empty, it0 + kt);
        } else {
            wgmma_wait(0);
            acc = x3_fold::<BN, ST>(acc, s0, empty, it0 + kt - 1);
        }
    }
    acc
}

/// `gemm_tma`'s body, persistent: each block takes tiles `block_idx_x()`, `+ grid_dim_x()`,
/// .. of [`tma_tile`]'s order, through a pipeline of `ST` stages. Thread 0 is the producer
/// ([`tma_produce`]) of every tile's K steps, one pipeline across the tiles, so that it
/// loads the next tile's first stages while the consumers finish the current one;
/// warpgroups `1 ..= BM / 64` are the consumers ([`tma_consume`]), each of whose warps writes
/// its 16 rows of each tile through its own rows of the epilogue's chunks (`BM` rows of
/// [`TMA_EPI_LD`] f32 past the stages, [`wg_store`]). With `X3` (3xTF32, f32 inputs) the
/// consumers are [`tma_consume_x3`], which split each stage into TF32 heads and tails (the
/// tails at byte `LO` of the dynamic shared memory, past the stages) before they multiply
/// it; the rest of warpgroup 0 has nothing to do (and `LO` is 0 without `X3`). `PARITY` and
/// `DRAIN` go to the consumers (0 and true but in the mutant tests).
fn tma_gemm<T, O, const BM: u32, const BN: u32, const ST: u32, const X3: bool, const LO: u32, const PARITY: u32, const DRAIN: bool>(
    p: GemmParams,
    ta: TensorMap<T, { 128 / size_of::<T>() }, BM, 1>,
    tb: TensorMap<T, { 128 / size_of::<T>() }, BN, 1>,
    bias: Option<&[f32]>,
    res: Option<&[O]>,
    c: &mut [O],
    ws: Option<&mut [f32]>,
) {
    let a_s: Shared<[T; ST * BM * (128 / size_of::<T>())]> = dyn_shared(0);
    let b_s: Shared<[T; ST * BN * (128 / size_of::<T>())]> = dyn_shared(ST * BM * 128);
    let a_lo: Shared<[T; ST * BM * (128 / size_of::<T>())]> = dyn_shared(LO);
    let b_lo: Shared<[T; ST * BN * (128 / size_of::<T>())]> = dyn_shared(LO + ST * BM * 128);
    // Past the stages (and the tails of `X3`, at `LO`): the epilogue's chunks.
    let e_s: Shared<[f32; BM * TMA_EPI_LD]> = dyn_shared(LO + ST * (BM + BN) * 128);
    let full: Shared<[u64; ST]>;
    let ready: Shared<[u64; ST]>;
    let empty: Shared<[u64; ST]>;
    let tid = thread_idx_x();
    if tid == 0 {
        #[unroll]
        for s in 0..ST {
            full.mbar_init(s, 1);
            if X3 {
                ready.mbar_init(s, x3_splitters::<BM>());
            }
            // One arrival per consumer warp.
            empty.mbar_init(s, BM / 64 * 4);
        }
    }
    fence_proxy_async();
    sync_threads();
    // Each role computes its loop's bounds after its `setmaxnreg` (a value live across one
    // costs a spill).
    if tid < 128 {
        setmaxnreg_dec(TMA_PRODUCER_REGS);
        let total = (p.m + BM - 1) / BM * ((p.n + BN - 1) / BN) * p.batch * p.splits;
        let mut tile = block_idx_x();
        let mut it = 0u32;
        if tid == 0 {
            prefetch_tensormap(ta);
            prefetch_tensormap(tb);
            while tile < total {
                let t = tma_tile::<T, BM, BN>(p, tile);
                tma_produce::<T, BM, BN, ST>(a_s, b_s, full, empty, ta, tb, it, t[4], t[5], t[2], t[3], t[1]);
                it += t[5];
                tile += grid_dim_x();
            }
        }
    } else {
        setmaxnreg_inc(TMA_CONSUMER_REGS);
        let total = (p.m + BM - 1) / BM * ((p.n + BN - 1) / BN) * p.batch * p.splits;
        let mut tile = block_idx_x();
        let mut it = 0u32;
        while tile < total {
            let t = tma_tile::<T, BM, BN>(p, tile);
            // The warp's rows of the residual and C toward L2 for its epilogue (`wg_store`):
            // here for `X3`, late in the main loop otherwise (`tma_consume`).
            let r0 = (warp_id() - 4) * 16;
            let mut acc = [0.0f32; BN / 2];
            if X3 {
                epi_prefetch::<O, 16, BN, 32>(p, res, c, t[1] as u64, t[2] + r0, t[3], lane_id());
                acc = tma_consume_x3::<BM, BN, ST, PARITY>(a_s, b_s, a_lo, b_lo, full, ready, empty, it, t[5], tid / 128 - 1);
            } else {
                acc = tma_consume::<T, O, BM, BN, ST, PARITY, DRAIN>(a_s, b_s, full, empty, it, t[5], tid / 128 - 1, p, res, c, t[1] as u64, t[2] + r0, t[3]);
            }
            wg_store::<O, BM, BN>(acc, e_s, p, bias, res, c, ws, t[0], t[1], t[2], t[3]);
            it += t[5];
            tile += grid_dim_x();
        }
    }
}

/// The columns of a chunk of `gemm_tma`'s epilogue ([`wg_store`]): each consumer warp lays
/// its accumulators of that many columns out in shared memory, then writes them through
/// [`write_rows`], one chunk after another.
pub const TMA_EPI_COLS: u32 = 32;

/// The runs of 4 outputs that a lane of `gemm_tma`'s epilogue takes at a time
/// ([`write_rows`]' group): the whole chunk of its warp's 16 rows, so that the chunk's
/// reads of the residual and C are out together, not one turn after another.
pub const TMA_EPI_GROUP: u32 = 16 * TMA_EPI_COLS / 128;

/// The elements between rows of `gemm_tma`'s epilogue chunks: 8 more than a chunk's
/// columns, so that the 8-byte writes of a quarter warp's 4 rows (`[rows, TMA_EPI_LD]`, 8
/// apart in banks) fall on 32 different banks.
pub const TMA_EPI_LD: u32 = TMA_EPI_COLS + 8;

/// A consumer warp's accumulators (warp `4 + s` of the block: rows `16 s ..` of the tile
/// at `m0`, columns `n0 ..`) through the epilogue to C, or raw to the workspace plane of
/// slice `zs` where K is split (`ws`). Thread `(g, t)` (lane `4 g + t`) holds, in registers
/// `4 j .. 4 j + 4`, rows `16 s + g` and `+ 8`, columns `8 j + 2 t` and `+ 1`. The warp
/// walks the tile's columns in chunks of [`TMA_EPI_COLS`] (a runtime loop, so that the
/// epilogue's code is there once): it writes a chunk's accumulators to its own rows of
/// `e_s`, then [`write_rows`] reads them back 4 consecutive columns of a row per lane and
/// turn (a row's 128 bytes per 8 lanes) and applies the epilogue; `sync_warp` orders the
/// writes before the reads, and the reads before the next chunk's writes.
fn wg_store<O, const BM: u32, const BN: u32>(
    acc: [f32; BN / 2],
    e_s: Shared<[f32; BM * TMA_EPI_LD]>,
    p: GemmParams,
    bias: Option<&[f32]>,
    res: Option<&[O]>,
    c: &mut [O],
    ws: Option<&mut [f32]>,
    zs: u32,
    z: u32,
    m0: u32,
    n0: u32,
) {
    let lane = lane_id();
    let r0 = (warp_id() - 4) * 16;
    let to = (r0 + lane / 4) * TMA_EPI_LD + (lane % 4) * 2;
    // The warp's rows inside C, aligned (`write_rows`' whole tiles): each chunk's reads go
    // out a chunk ahead, before the chunk before computes and stores.
    let whole = ws.is_none() & (m0 + r0 + 16 <= p.m) & (n0 + BN <= p.n) & p.vec_c & (p.vec_r | res.is_none());
    let mut rv = [[0.0f32; 4]; TMA_EPI_GROUP];
    if whole {
        rv = wg_res_reads::<O>(p, res, z as u64, m0 + r0, n0, lane);
    }
    let mut ch = 0u32;
    while ch < BN / TMA_EPI_COLS {
        if ((to as u64) + (8 * TMA_EPI_LD + TMA_EPI_COLS - 8 + 2) as u64) <= (e_s.len() as u64) {
            #[unroll]
            for cc in 0..BN / TMA_EPI_COLS {
                if cc == ch {
                    #[unroll]
                    for jj in 0..TMA_EPI_COLS / 8 {
                        let j = cc * (TMA_EPI_COLS / 8) + jj;
                        // Each index `to + (a constant)`, the form the range above proves.
                        e_s.store2(to + jj * 8, [acc[4 * j], acc[4 * j + 1]]);
                        e_s.store2(to + (jj * 8 + 8 * TMA_EPI_LD), [acc[4 * j + 2], acc[4 * j + 3]]);
                    }
                }
            }
        }
        sync_warp();
        if whole {
            let mut next = rv;
            if ch + 1 < BN / TMA_EPI_COLS {
                next = wg_res_reads::<O>(p, res, z as u64, m0 + r0, n0 + (ch + 1) * TMA_EPI_COLS, lane);
            }
            let n = n0 + ch * TMA_EPI_COLS;
            // The old C (where `beta` is not 0) read here; the residual read a chunk ago.
            let mut r = [[0.0f32; 4]; 2 * TMA_EPI_GROUP];
            if p.beta != 0.0 {
                r = epi_group_reads::<O, TMA_EPI_COLS, 32, TMA_EPI_GROUP, true>(p, None, c, z as u64, m0 + r0, n, lane * 4);
            }
            #[unroll]
            for u in 0..TMA_EPI_GROUP {
                r[2 * u + 1] = rv[u];
            }
            group_out::<O, 16, TMA_EPI_COLS, TMA_EPI_LD, 32, TMA_EPI_GROUP, { BM * TMA_EPI_LD }>(e_s, r0 * TMA_EPI_LD, p, bias, res.is_some(), c, z as u64, m0 + r0, n, lane * 4, r, bias4(p, bias, n + (lane * 4) % TMA_EPI_COLS), true);
            rv = next;
        } else {
            write_rows::<O, 16, TMA_EPI_COLS, TMA_EPI_LD, 32, TMA_EPI_GROUP, { BM * TMA_EPI_LD }>(e_s, r0 * TMA_EPI_LD, p, bias, res, c, ws, zs as u64, z as u64, m0 + r0, n0 + ch * TMA_EPI_COLS, lane);
        }
        sync_warp();
        ch += 1;
    }
}

/// The residual of a chunk of [`wg_store`] (rows `m0 ..` of matrix `z`, columns `n0 ..` of
/// [`TMA_EPI_COLS`]) for lane `lane`: its runs of 4 (`TMA_EPI_GROUP`, `32 · 4` elements
/// apart), untested (the chunk inside C, the residual aligned); 0 without a residual.
fn wg_res_reads<O>(p: GemmParams, res: Option<&[O]>, z: u64, m0: u32, n0: u32, lane: u32) -> [[f32; 4]; TMA_EPI_GROUP] {
    let mut rv = [[0.0f32; 4]; TMA_EPI_GROUP];
    if let Some(rs) = res {
        #[unroll]
        for u in 0..TMA_EPI_GROUP {
            let [row, col] = group_run::<TMA_EPI_COLS, 32>(m0, n0, lane * 4, u);
            rv[u] = load4_f32::<O, true>(rs, z * p.batch_r + row as u64 * p.ldr as u64 + col as u64);
        }
    }
    rv
}

/// The accumulators of every warpgroup to the padded f32 tile `BM × (BN + 4)`: thread
/// `(q, g, t)` (warp `q` of its warpgroup `w`, lane `4 g + t`) holds, in registers `4 j .. 4 j + 4`, rows `64 w + 16 q + g` and `+ 8`, columns
/// `8 j + 2 t` and `+ 1`.
fn wg_to_shared<const BM: u32, const BN: u32>(acc: [f32; BN / 2], t_s: Shared<[f32; BM * (BN + 4)]>) {
    let lane = lane_id();
    let warp = warp_id();
    let to = (warp / 4 * 64 + warp % 4 * 16 + lane / 4) * (BN + 4) + (lane % 4) * 2;
    if ((to as u64) + (8 * (BN + 4) + BN - 8 + 2) as u64) <= (t_s.len() as u64) {
        #[unroll]
        for j in 0..BN / 8 {
            // Each index `to + (a constant)`, the form the range above proves.
            t_s.store2(to + j * 8, [acc[4 * j], acc[4 * j + 1]]);
            t_s.store2(to + (j * 8 + 8 * (BN + 4)), [acc[4 * j + 2], acc[4 * j + 3]]);
        }
    }
}

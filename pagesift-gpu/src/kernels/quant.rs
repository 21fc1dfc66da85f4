//! Decode kernels over quantized weights: `y = act(alpha · x · Wᵀ + beta · y + bias) +
//! residual` for up to [`QGEMV_MAX_TOKENS`] tokens, with `W` `[n_out, n_in]` in one of the
//! GGUF / ggml formats of [`crate::quant`] (Q8_0, Q4_0, Q4_K, BF16, F16) read straight from
//! their bytes, and `x` `[tokens, n_in]` f32 used as it is.
//!
//! Every product is exact in f32 (the codes become f32 by an exponent trick, no rounding) and
//! the sums are f32: a block's codes times `x` first, then times the block's scale. Each byte
//! of `W` is read once per launch, whatever the token count: a lane decodes a block once and
//! multiplies it with every token.
//!
//! A block of [`QGEMV_THREADS`] threads takes `4 · 32 / lanes` rows of `W`, `lanes` lanes per
//! row (`QuantParams::lanes`, 4 to 32, chosen by [`crate::ops::quant`] from the shape).
//! Where the rows are whole groups of 16-byte vectors (`QuantParams::fast`: 256 elements, or
//! 64 for BF16 / F16, starting 16-byte aligned), a lane loads a group with 16-byte reads before
//! decoding any of it; elsewhere it reads units of 32 elements byte by byte. The rows' sums go
//! through shared memory to the GEMM core's epilogue (`core::store_out`), four outputs of one
//! token at a time.
//!
//! `qgemv_tc` is the same product on tensor cores for Q4_0, Q8_0, Q4_K, BF16 and F16 rows of
//! whole chunks: warps stream their chunks of the rows into shared memory with `cp.async` and
//! multiply 16 rows by 8 columns per `mma.sync` m16n8k16 on bf16 operands. The codes are
//! exact in bf16 (two nibble planes for Q8_0; Q4_K's codes, with its scales and mins applied
//! per sub-block; an F16 weight as the sum of two bf16, each an `mma` of its own); each `x` is the exact sum of three bf16 parts. With `SPLIT` 1 (up to 5
//! tokens) a column of the `mma` is one part of one token, so that one `mma` takes every part
//! of two tokens, and `qgemv_tc_x` splits `x` into the `mma` fragments once per call for all
//! blocks; with `SPLIT` 3 a column is a token and each block splits its `x`, each part an
//! `mma` of its own. Every product is exact and the sums are f32; the decoding costs about
//! one instruction per weight.
//!
//! With `XQ` = `QTC_X_I8` (opt-in: `ops::quant::qgemm_int8`) `qgemv_tc_x8` first quantizes
//! `x` to int8 per block of 32 elements (scale `max |x| / 127`), and each block of Q4_0, Q8_0
//! or Q4_K is one `mma` m16n8k32 on int8 codes per 16 rows and 8 tokens (a column a token),
//! its exact i32 sums scaled by the weights' and the activations' scales in f32.

use crate::ptx_kernel;

ptx_kernel! {
    #[path = "src/kernels/lib/act_math.rs"]
    mod math;
    #[path = "src/kernels/lib/gemm_core.rs"]
    mod core;
    #[path = "src/kernels/lib/dequant.rs"]
    mod dq;
    use crate::kernels::gemm::GemmParams;

    /// The weight formats of the `FMT` axis.
    pub const FMT_Q8_0: u32 = dq::FMT_Q8_0;
    pub const FMT_Q4_0: u32 = dq::FMT_Q4_0;
    pub const FMT_Q4K: u32 = dq::FMT_Q4K;
    pub const FMT_BF16: u32 = dq::FMT_BF16;
    pub const FMT_F16: u32 = dq::FMT_F16;
    /// Threads of a block: four warps.
    pub const QGEMV_THREADS: u32 = 128;
    /// The most tokens of one block: its chunk of the tokens (grid y).
    pub const QGEMV_MAX_TOKENS: u32 = 16;
    /// The elements of a fast-path group of the block formats (8 blocks of Q8_0 / Q4_0, one
    /// super-block of Q4_K) and of the float formats.
    pub const QGROUP_BLOCKS: u32 = 256;
    pub const QGROUP_FLOATS: u32 = 64;

    /// The launch's scalars besides the GEMM's (`p.k` is `n_in`, `p.n` is `n_out`, `p.m` the
    /// tokens, `p.lda` the elements between tokens of `x`).
    pub struct QuantParams {
        /// Lanes per row of `W`: 4, 8, 16 or 32.
        pub lanes: u32,
        /// Bytes between rows of `W`.
        pub row_bytes: u32,
        /// Whether rows are read as whole 16-byte groups: `n_in` a multiple of the group, the
        /// rows and `W` 16-byte aligned.
        pub fast: bool,
    }

    /// `y[t][r] = act(alpha · Σ_k x[t][k] W[r][k] + beta · y[t][r] + bias[r]) + res[t][r]` for
    /// the `p.m` tokens, `W` in format `FMT`: grid `(⌈n_out / rows per block⌉, ⌈p.m /
    /// QGEMV_MAX_TOKENS⌉)`, blocks `(i, z)` take the tokens `z · QGEMV_MAX_TOKENS ..`
    /// (`p.batch_a`, `p.batch_c` and `p.batch_r` hold that many rows of `x`, `y` and the
    /// residual). Each thread keeps its partial sum per token in shared memory (`part`), so
    /// that the token loop is a loop, not one copy of the code per token.
    #[variants(FMT in [0, 1, 2, 3, 4])]
    #[launch(block = 128, max_regs = if FMT == FMT_Q8_0 { 168 } else { 128 })]
    pub fn qgemv<const FMT: u32>(
        p: GemmParams,
        q: QuantParams,
        w: &[u8],
        x: &[f32],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        y: &mut [f32],
    ) {
        // Each thread's partial sums: `[token][thread]`; the rows' sums: `[token][row of
        // the block]`.
        let part: Shared<[f32; QGEMV_MAX_TOKENS * QGEMV_THREADS]>;
        let sums: Shared<[f32; QGEMV_MAX_TOKENS * 32]>;
        let tid = thread_idx_x();
        let lane = lane_id();
        let rpw = 32 / q.lanes;
        let rpb = 4 * rpw;
        let g0 = lane % q.lanes;
        let lr = warp_id() * rpw + lane / q.lanes;
        let row = block_idx_x() * rpb + lr;
        let z = block_idx_y();
        // The chunk's tokens (`QGEMV_MAX_TOKENS` but in the last chunk) and its first row of `x`.
        let tv = (p.m - z * QGEMV_MAX_TOKENS).min(QGEMV_MAX_TOKENS);
        let xz = z as u64 * p.batch_a;
        #[unroll]
        for t in 0..QGEMV_MAX_TOKENS {
            part[t * QGEMV_THREADS + tid] = 0.0;
        }
        if row < p.n {
            let wrow = row as u64 * q.row_bytes as u64;
            if q.fast {
                if FMT == FMT_BF16 || FMT == FMT_F16 {
                    let groups = p.k / QGROUP_FLOATS;
                    let mut g = g0;
                    while g < groups {
                        group_floats::<FMT>(part, tid, w, wrow + (g * 128) as u64, x, xz, tv, p, g * QGROUP_FLOATS);
                        g += q.lanes;
                    }
                } else {
                    let groups = p.k / QGROUP_BLOCKS;
                    let mut g = g0;
                    while g < groups {
                        group_blocks::<FMT>(part, tid, w, wrow + (g * group_bytes::<FMT>()) as u64, x, xz, tv, p, g * QGROUP_BLOCKS);
                        g += q.lanes;
                    }
                }
            } else {
                let units = p.k / 32 + (p.k % 32 + 31) / 32;
                let mut u = g0;
                while u < units {
                    let wf = unit_slow::<FMT>(w, wrow, p.k, u);
                    block_dot(part, tid, wf, unit_scale::<FMT>(w, wrow, u), x, xz, tv, p, u * 32);
                    u += q.lanes;
                }
            }
        }
        // The sums of a row's lanes (each thread reads only its own partial sums), then the
        // block's rows in shared memory.
        let mut t = 0u32;
        while t < tv {
            let mut s = part[t * QGEMV_THREADS + tid];
            #[unroll]
            for b in 0..5 {
                if (1u32 << b) < q.lanes {
                    s += shfl_xor(s, 1u32 << b);
                }
            }
            if g0 == 0 {
                sums[t * 32 + lr] = s;
            }
            t += 1;
        }
        sync_threads();
        let runs = rpb / 4;
        let t = tid / runs;
        let c4 = (tid % runs) * 4;
        let col = block_idx_x() * rpb + c4;
        if (t < tv) & (col < p.n) {
            let v = sums.load4(t * 32 + c4);
            core::store_out::<f32>(p, bias, res, y, z as u64, t, col, v);
        }
    }

    /// The chunks of K in a warp's `cp.async` pipeline (one loading while one is used).
    pub const QTC_STAGES: u32 = 2;
    /// Columns of an `mma` column tile.
    pub const QTC_COLUMNS: u32 = 8;
    /// The bf16 parts of an activation: `x` is their exact sum (`tc_part`).
    pub const QTC_PARTS: u32 = 3;
    /// Threads of a block of `qgemv_tc_x` and `qgemv_tc_x8`.
    pub const QTC_X_THREADS: u32 = 128;
    /// The `XQ` axis of `qgemv_tc`: `x` as it is, f32 (every product exact), or quantized to
    /// int8 by `qgemv_tc_x8` (blocks of 32 elements, each its own scale) for `mma` on int8.
    pub const QTC_X_F32: u32 = 0;
    pub const QTC_X_I8: u32 = 1;
    /// The largest int8 code of an activation: a block's scale is its `max |x| / 127`.
    pub const QTC_X8_MAX: f32 = 127.0;
    /// The nibbles of the four bytes of a word.
    const NIBBLES: u32 = 0x0F0F_0F0F;

    /// The tokens of `NT` column tiles of `qgemv_tc`: with `SPLIT` 1 a column is one part of
    /// one token's activations (column `c`: token `c / QTC_PARTS`, part `c % QTC_PARTS`), so
    /// that one `mma` multiplies a row tile with every part of two tokens and the parts come
    /// split (`qgemv_tc_x`); with `SPLIT` 3 a column is a token, the block splits `x` itself
    /// and each part takes an `mma` of its own.
    fn tc_tokens<const NT: u32, const SPLIT: u32>() -> u32 {
        QTC_COLUMNS * NT * SPLIT / QTC_PARTS
    }

    /// The `mma` B fragments of `qgemv_tc` from `x`, once per launch (every block of
    /// `qgemv_tc` reads them, not `x`): for the chunk `z = block_idx_y()` of `tc_tokens::<NT, 1>()`
    /// tokens, pair `P` (elements `32 P ..`, `P` up to `p.k / 32`: the last pair is zeros,
    /// where a warp's read ahead past K lands), column tile `n` and lane `l`, the 4 words
    /// at `xs[(((z · (p.k / 32 + 1) + P) · NT + n) · 32 + l) · 4 ..]`: the fragments of steps
    /// 0 and 1 (elements `32 P + 16 s ..`), two words each. Lane `l` holds column `8 n + l /
    /// 4`'s part of `x[32 P + 16 s + 4 (l % 4) .. + 4]` of its token, as `(v[0], v[2])` and
    /// `(v[1], v[3])`: the order in which `tc_block`'s A fragments hold the weights. Tokens
    /// past `p.m` and elements past `p.k` are 0. Grid `(⌈(p.k / 32 + 1) · NT · 32 /
    /// QTC_X_THREADS⌉, ⌈p.m / tc_tokens⌉)`; `p.batch_a` holds a chunk's elements of `x`.
    #[variants(NT in [1, 2])]
    #[launch(block = 128)]
    pub fn qgemv_tc_x<const NT: u32>(p: GemmParams, x: &[f32], xs: &mut [u32]) {
        let pairs = p.k / 32 + 1;
        let i = block_idx_x() * QTC_X_THREADS + thread_idx_x();
        let lane = i % 32;
        let n = i / 32 % NT;
        let pr = i / 32 / NT;
        if pr < pairs {
            let z = block_idx_y();
            let f = tc_x_words::<NT>(p, x, z, n, 32 * pr, lane);
            xs.store4(((z * pairs + pr) as u64 * NT as u64 + n as u64) * 128 + (lane * 4) as u64, f);
        }
    }

    /// `x` quantized to int8 for `qgemv_tc` with `XQ` = `QTC_X_I8`, once per launch: per
    /// token and block of 32 elements (`P`, up to `p.k / 32`: the last block is zeros, as
    /// in `qgemv_tc_x`), the scale `dx = max |x| / QTC_X8_MAX` and the codes `qx =
    /// round_ties_even(x / dx)` (0 where the block is all zeros), so that `x ≈ dx · qx`.
    /// For chunk `z` of `8 · NT` tokens, column (token of the chunk) `c` and quad lane `t`,
    /// with `at = (z · (p.k / 32 + 1) + P) · 8 NT + c`: the codes of elements `32 P + 4 t
    /// .. + 4` and `32 P + 16 + 4 t .. + 4` (one byte each, the `mma` m16n8k32 B fragment of
    /// lane `4 (c % 8) + t`) at words `xs[(4 at + t) · 2 ..]`, and `[dx, dx · Σ qx]` at
    /// `xs[tc_x8_scales + 2 at ..]` (f32 bits). Tokens past `p.m` and elements past `p.k`
    /// are 0. Grid `(⌈(p.k / 32 + 1) · 8 NT · 4 / QTC_X_THREADS⌉, ⌈p.m / 8 NT⌉)`; `p.batch_a`
    /// holds a chunk's elements of `x`.
    #[variants(NT in [1, 2])]
    #[launch(block = 128)]
    pub fn qgemv_tc_x8<const NT: u32>(p: GemmParams, x: &[f32], xs: &mut [u32]) {
        let pairs = p.k / 32 + 1;
        let cols = QTC_COLUMNS * NT;
        let i = block_idx_x() * QTC_X_THREADS + thread_idx_x();
        let c = i / 4 % cols;
        let pr = i / 4 / cols;
        let z = block_idx_y();
        // The quads past the last block compute the zeros of the last one (every lane of a
        // quad takes part in its shuffles) and store nothing.
        let v = tc_x_token::<NT, QTC_PARTS>(p, x, z, c, 32 * pr.min(pairs - 1), lane_id());
        let mut amax = 0.0f32;
        #[unroll]
        for s in 0..2 {
            #[unroll]
            for l in 0..4 {
                amax = amax.max(v[s][l].abs());
            }
        }
        amax = amax.max(shfl_xor(amax, 1));
        amax = amax.max(shfl_xor(amax, 2));
        let dx = amax / QTC_X8_MAX;
        let mut w = [0u32; 2];
        let mut sum = 0i32;
        #[unroll]
        for s in 0..2 {
            #[unroll]
            for l in 0..4 {
                let q = if amax > 0.0 { (v[s][l] / dx).round_ties_even() as i32 } else { 0 };
                sum += q;
                w[s] |= ((q as u32) & 0xFF) << (8 * l);
            }
        }
        sum += shfl_xor(sum, 1);
        sum += shfl_xor(sum, 2);
        if pr < pairs {
            let at = (z * pairs + pr) as u64 * cols as u64 + c as u64;
            xs.store2((4 * at + (i % 4) as u64) * 2, w);
            if i % 4 == 0 {
                xs.store2(tc_x8_scales::<NT>(p, pairs) + 2 * at, [dx.to_bits(), (dx * sum as f32).to_bits()]);
            }
        }
    }

    /// Where the scales of `qgemv_tc_x8`'s `xs` start: after the codes, 8 words per column
    /// and block of every chunk of `8 · NT` tokens (`pairs` blocks each).
    fn tc_x8_scales<const NT: u32>(p: GemmParams, pairs: u32) -> u64 {
        let chunks = (p.m + QTC_COLUMNS * NT - 1) / (QTC_COLUMNS * NT);
        chunks as u64 * pairs as u64 * (QTC_COLUMNS * NT) as u64 * 8
    }

    /// Lane `lane`'s B fragments of column tile `n` for the 32 elements of K from `k` of the
    /// token chunk `z` (`qgemv_tc_x`'s words: steps 0 and 1, two words each): column `8 n +
    /// lane / 4`'s part of `x[k + 16 s + 4 (lane % 4) .. + 4]` of its token, as `(v[0], v[2])`
    /// and `(v[1], v[3])`; tokens past the chunk's and elements past `p.k` are 0.
    fn tc_x_words<const NT: u32>(p: GemmParams, x: &[f32], z: u32, n: u32, k: u32, lane: u32) -> [u32; 4] {
        let col = QTC_COLUMNS * n + lane / 4;
        let part = col % QTC_PARTS;
        let v = tc_x_token::<NT, 1>(p, x, z, col / QTC_PARTS, k, lane);
        let mut f = [0u32; 4];
        #[unroll]
        for s in 0..2 {
            f[2 * s] = tc_part(v[s][0], part).prmt(tc_part(v[s][2], part), 0x7632);
            f[2 * s + 1] = tc_part(v[s][1], part).prmt(tc_part(v[s][3], part), 0x7632);
        }
        f
    }

    /// Token `tk` of chunk `z`'s `x[k + 16 s + 4 (lane % 4) .. + 4]` for steps `s` 0 and 1;
    /// 0 for tokens past the chunk's and elements past `p.k`.
    fn tc_x_token<const NT: u32, const SPLIT: u32>(p: GemmParams, x: &[f32], z: u32, tk: u32, k: u32, lane: u32) -> [[f32; 4]; 2] {
        let tv = (p.m - z * tc_tokens::<NT, SPLIT>()).min(tc_tokens::<NT, SPLIT>());
        let e = k + lane % 4 * 4;
        let xb = z as u64 * p.batch_a + tk as u64 * p.lda as u64 + e as u64;
        let mut v = [[0.0f32; 4]; 2];
        if (tk < tv) & p.vec_a & (e + 20 <= p.k) & (xb + 20 <= x.len()) & x.is_aligned(xb, 16) {
            v[0] = x.load4_nc(xb);
            v[1] = x.load4_nc(xb + 16);
        } else {
            #[unroll]
            for s in 0..2 {
                v[s] = core::load4_edge::<f32, true>(x, xb + (16 * s) as u64, tk < tv, e + 16 * s, p.k, p.vec_a);
            }
        }
        v
    }

    /// The three bf16 parts of `a` and `b` (each the sum of its parts, exactly: each part
    /// takes the next 8 significant bits, by truncation), as pairs `(a part, b part)`.
    fn tc_split(a: f32, b: f32) -> [u32; 3] {
        let ha = a.to_bits() & 0xFFFF_0000;
        let hb = b.to_bits() & 0xFFFF_0000;
        let ra = a - f32::from_bits(ha);
        let rb = b - f32::from_bits(hb);
        let sa = ra - f32::from_bits(ra.to_bits() & 0xFFFF_0000);
        let sb = rb - f32::from_bits(rb.to_bits() & 0xFFFF_0000);
        [
            a.to_bits().prmt(b.to_bits(), 0x7632),
            ra.to_bits().prmt(rb.to_bits(), 0x7632),
            sa.to_bits().prmt(sb.to_bits(), 0x7632),
        ]
    }

    /// Part `part` of the three exact bf16 parts of `a`, in the high half of the result:
    /// each part takes the next 8 significant bits of what the parts before it left (by
    /// truncation, so each subtraction is exact), so `a` is exactly their sum.
    /// The lanes of a warp take different parts: each step subtracts its truncation times 1
    /// or 0 (exact either way), with no branch.
    fn tc_part(a: f32, part: u32) -> u32 {
        let s1 = if part >= 1 { 1.0f32 } else { 0.0f32 };
        let s2 = if part >= 2 { 1.0f32 } else { 0.0f32 };
        let r = (-s1).mul_add(f32::from_bits(a.to_bits() & 0xFFFF_0000), a);
        let r2 = (-s2).mul_add(f32::from_bits(r.to_bits() & 0xFFFF_0000), r);
        r2.to_bits()
    }

    /// `y[t][r] = act(alpha · Σ_k x[t][k] W[r][k] + beta · y[t][r] + bias[r]) + res[t][r]`
    /// on tensor cores, with f32 accuracy: the weights' codes are exact in bf16 (Q4_0 `q -
    /// 8`; Q8_0 as `16 · hi + lo` of its two signed nibbles; Q4_K's `q`; BF16 as they are;
    /// F16 as the sum of two bf16 planes, `tc_f16_planes`),
    /// each `x` is the exact sum of three bf16 parts (`qgemv_tc_x`, one column each), so
    /// that every product is exact and only the sums round (in f32, on the tensor cores).
    /// Each Q4_0 / Q8_0 block's sum is scaled by its `d` in f32; a Q4_K sub-block adds `d ·
    /// sc · Σ q x - dmin · m · Σ x`, its `Σ x` from one more `mma` on a fragment of ones
    /// (ggml rounds `d · sc · q` before subtracting the min: the two differ by half an ulp of
    /// the weight at most).
    ///
    /// A block takes `16 · MT` rows of `W` and `tc_tokens::<NT, SPLIT>()` tokens (grid `(⌈n_out /
    /// 16 MT⌉, ⌈p.m / tc_tokens⌉)`, chunks of tokens in grid y as in `qgemv`), its B
    /// fragments (`tc_x_load`) from `xs` (`qgemv_tc_x` of the same `p`) up to 2 column tiles,
    /// from `x` beyond; with `XQ` = `QTC_X_I8` the int8 codes and scales of `xs`
    /// (`qgemv_tc_x8` of the same `p`) and `tc_block_i8` in place of `tc_block`. Its `WARPS` warps share the
    /// rows: warp `w` streams the chunks `w, w + WARPS, ..` of K (`SB` bytes of each row:
    /// 8 blocks, or 128 floats) into its own `QTC_STAGES` shared buffers with 16-byte
    /// `cp.async` copies, and multiplies each 32 elements as two `m16n8k16` steps of every
    /// row tile and column tile. The warps' sums, and a token's three columns, meet in shared
    /// memory for the GEMM core's epilogue (`core::store_out`). Rows must be whole chunks,
    /// 16-byte aligned (`ops::quant` sends other weights to `qgemv`).
    ///
    /// # Safety
    ///
    /// The weights are copied without bounds checks: `w` holds `p.n ≥ 1` rows of
    /// `q.row_bytes` bytes (a multiple of 16 below `QTC_MAX_ROW_BYTES`, `w` 16-byte
    /// aligned), each at least `p.k / tc_chunk` chunks of `SB` bytes long, as
    /// [`crate::ops::quant`] checks them for a validated view. `xs`, `bias`, `res` and `y`
    /// are read and written with bounds checks.
    #[target(sm_80)]
    #[variants((FMT, MT, SB, NT, WARPS, SPLIT, XQ) in [
        (1, 1, 144, 1, 4, 1, 0), (1, 1, 144, 1, 8, 1, 0), (1, 1, 144, 2, 4, 1, 0), (1, 1, 144, 2, 8, 1, 0), (1, 2, 144, 1, 8, 3, 0), (1, 2, 144, 2, 8, 3, 0),
        (0, 1, 272, 1, 4, 1, 0), (0, 1, 272, 1, 8, 1, 0), (0, 1, 272, 2, 4, 1, 0), (0, 1, 272, 2, 8, 1, 0), (0, 1, 272, 1, 8, 3, 0), (0, 1, 272, 2, 8, 3, 0),
        (2, 1, 144, 1, 4, 1, 0), (2, 1, 144, 1, 8, 1, 0), (2, 1, 144, 2, 4, 1, 0), (2, 1, 144, 2, 8, 1, 0), (2, 2, 144, 1, 8, 3, 0), (2, 2, 144, 2, 8, 3, 0),
        (3, 1, 256, 1, 8, 3, 0), (3, 1, 256, 2, 8, 3, 0),
        (4, 1, 256, 1, 8, 3, 0), (4, 1, 256, 2, 8, 3, 0),
        (1, 1, 144, 1, 4, 3, 1), (1, 1, 144, 1, 8, 3, 1), (1, 2, 144, 2, 8, 3, 1),
        (0, 1, 272, 1, 4, 3, 1), (0, 1, 272, 1, 8, 3, 1), (0, 2, 272, 2, 8, 3, 1),
        (2, 1, 144, 1, 4, 3, 1), (2, 1, 144, 1, 8, 3, 1), (2, 2, 144, 2, 8, 3, 1),
    ])]
    #[launch(block = 32 * WARPS, max_regs = if XQ == QTC_X_I8 { if NT * MT == 4 { 136 } else { 64 + 16 * NT * MT } } else if SPLIT == 1 { if FMT == FMT_Q4K { if NT == 2 { 120 } else { 80 } } else if NT == 2 { 96 } else { 72 } } else { 128 })]
    pub fn qgemv_tc<const FMT: u32, const MT: u32, const SB: u32, const NT: u32, const WARPS: u32, const SPLIT: u32, const XQ: u32>(
        p: GemmParams,
        q: QuantParams,
        w: &[u8],
        x: &[f32],
        xs: &[u32],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        y: &mut [f32],
    ) {
        let st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]> = dyn_shared(0);
        let red: Shared<[f32; WARPS * QTC_COLUMNS * NT * (16 * MT + 4)]> = dyn_shared(0);
        let tid = thread_idx_x();
        let lane = lane_id();
        let warp = warp_id();
        let row0 = block_idx_x() * 16 * MT;
        let z = block_idx_y();
        let tb = tc_tokens::<NT, SPLIT>();
        let tv = (p.m - z * tb).min(tb);
        let so = warp * QTC_STAGES * 16 * MT * SB;
        let chunks = p.k / tc_chunk::<FMT, SB>();
        let wb = tc_base::<FMT, MT, XQ>(p, q, row0, lane);
        let wr = tc_rows::<FMT, MT, SB, XQ>(p, q, row0, lane);
        let mut acc = [[0.0f32; 4]; MT * NT];
        let chunk = tc_chunk::<FMT, SB>();
        let pairs = chunk / 64;
        // The pairs of `xs` per chunk of tokens (the last one zeros) and this chunk's first.
        let xpairs = p.k / 32 + 1;
        let xz = z * xpairs;
        let xsb = if XQ == QTC_X_I8 { tc_x8_scales::<NT>(p, xpairs) } else { 0u64 };
        #[unroll]
        for s in 0..QTC_STAGES - 1 {
            let c = warp + s * WARPS;
            if c < chunks {
                tc_issue::<FMT, MT, SB, WARPS, XQ>(st, so + s * 16 * MT * SB, w, wb, wr, c, lane);
            }
            cp_async_commit();
        }
        let mut c = warp;
        let mut i = 0u32;
        while c < chunks {
            let ahead = c + (QTC_STAGES - 1) * WARPS;
            if ahead < chunks {
                let s = (i + QTC_STAGES - 1) % QTC_STAGES;
                tc_issue::<FMT, MT, SB, WARPS, XQ>(st, so + s * 16 * MT * SB, w, wb, wr, ahead, lane);
            }
            cp_async_commit();
            cp_async_wait(QTC_STAGES - 1);
            sync_warp();
            // The chunk in pairs of blocks of 32 elements (a block of Q4_0 / Q8_0, two
            // sub-blocks of Q4_K, 64 bytes of BF16): the lane's first row of the buffer, and
            // that plus the lane's bytes of a plane (4 codes, or 4 BF16 weights; Q4_K's codes
            // lie past its 16 bytes of scales), and the bases of the chunk's B fragments in
            // `xs` (`tc_x_base`).
            let row = so + i % QTC_STAGES * 16 * MT * SB + lane / 4 * SB;
            let rowt = row + if FMT == FMT_Q4K { 16 + lane % 4 * 4 } else if tc_float::<FMT>() { lane % 4 * 8 } else { lane % 4 * 4 };
            let kb = c * chunk / 32;
            let xb = tc_x_base::<NT, XQ>(xz + kb, xsb, lane);
            let xb0 = xb[0];
            let xb1 = xb[1];
            // Every read of the chunk lies at a constant offset from these, below the last
            // pair's reach (`tc_reach`; Q4_K's scales past `bq = row + 2`). Proven inside the
            // buffer, and `xs`, once per chunk.
            let last = pairs - 1;
            let rb = if FMT == FMT_Q4K { 2 + tc_reach::<FMT, MT, SB, 2>() } else { tc_pair_bytes::<FMT>() * last + tc_reach::<FMT, MT, SB, 0>() };
            let rt = tc_pair_bytes::<FMT>() * last + tc_reach::<FMT, MT, SB, 1>();
            // Past `xb0` and `xb1`: the ends of the chunk's last reads of `xs` (`tc_x_at`),
            // whose 16-byte reads (8 bytes of the int8 codes) are aligned with the bases. (The
            // bases first below the length: then their sums cannot wrap.)
            let xe0 = if XQ == QTC_X_I8 { 64 * (2 * pairs * NT - 1) + 2 } else { 0 } as u64;
            let xe1 = if XQ == QTC_X_I8 { 16 * (2 * pairs * NT - 1) + 4 } else { 128 * (2 * pairs * NT - 1) + 4 } as u64;
            if (XQ == QTC_X_I8) | (SPLIT == 1) {
                if ((row as u64) + rb as u64 <= st.len() as u64) & ((rowt as u64) + rt as u64 <= st.len() as u64) & (xb0 < xs.len()) & (xb1 < xs.len()) & (xb0 + xe0 <= xs.len()) & (xb1 + xe1 <= xs.len()) & xs.is_aligned(xb0, 8) & xs.is_aligned(xb1, 16) {
                    acc = tc_pairs::<FMT, MT, SB, NT, WARPS, SPLIT, XQ, true>(st, row, rowt, p, x, xs, xb0, xb1, z, kb, lane, acc);
                }
            } else {
                // `SPLIT` 3 reads `x` itself, with checks (`xs` is empty), a pair at a time
                // (unrolled, its registers would spill).
                acc = tc_pairs::<FMT, MT, SB, NT, WARPS, SPLIT, XQ, false>(st, row, rowt, p, x, xs, xb0, xb1, z, kb, lane, acc);
            }
            sync_warp();
            c += WARPS;
            i += 1;
        }
        cp_async_wait_all();
        sync_threads();
        // The warps' sums, `[warp][column][row]` (rows padded by 4: conflict-free stores).
        let ldr = 16 * MT + 4;
        let g = lane / 4;
        let t2 = lane % 4 * 2;
        #[unroll]
        for m in 0..MT {
            #[unroll]
            for n in 0..NT {
                let r = 16 * m + g;
                let tk = (warp * QTC_COLUMNS * NT + QTC_COLUMNS * n + t2) * ldr + r;
                red[tk] = acc[m * NT + n][0];
                red[tk + ldr] = acc[m * NT + n][1];
                red[tk + 8] = acc[m * NT + n][2];
                red[tk + ldr + 8] = acc[m * NT + n][3];
            }
        }
        sync_threads();
        // Each output of the block: the sum over the warps and the token's columns (its
        // parts with `SPLIT` 1, the token itself with 3).
        let outs = 4 * MT * tb;
        if tid < outs {
            let tk = tid / (4 * MT);
            let r4 = tid % (4 * MT) * 4;
            let mut v = [0.0f32; 4];
            #[unroll]
            for wp in 0..WARPS {
                #[unroll]
                for part in 0..QTC_PARTS / SPLIT {
                    let s = red.load4((wp * QTC_COLUMNS * NT + QTC_PARTS / SPLIT * tk + part) * ldr + r4);
                    #[unroll]
                    for l in 0..4 {
                        v[l] += s[l];
                    }
                }
            }
            if tk < tv {
                core::store_out::<f32>(p, bias, res, y, z as u64, tk, row0 + r4, v);
            }
        }
    }

    /// The bases in `xs` of the B fragments of the lane for the blocks `kc ..` of K (`kc`
    /// counted from the first block of the call's chunk of tokens): with `SPLIT` 1
    /// (`qgemv_tc_x`) `[base, base]`, the block `u`'s column tile `n` at `base + (u · NT + n) ·
    /// 128` (read past the second); with `XQ` = `QTC_X_I8` (`qgemv_tc_x8`) `[codes, scales]`, its codes at `codes +
    /// 64 · (u · NT + n)` and its scales at `scales + 16 · (u · NT + n)`.
    fn tc_x_base<const NT: u32, const XQ: u32>(kc: u32, xsb: u64, lane: u32) -> [u64; 2] {
        if XQ == QTC_X_I8 {
            let col = kc as u64 * (QTC_COLUMNS * NT) as u64;
            [8 * col + (8 * (lane / 4) + 2 * (lane % 4)) as u64, xsb + 2 * col + (4 * (lane % 4)) as u64]
        } else {
            let b = kc as u64 * NT as u64 * 128 + (lane * 4) as u64;
            [b, b]
        }
    }

    /// What `tc_block` makes the B fragments of block `u` past the bases `xb0`, `xb1` (`tc_x_base`),
    /// block `kb` of K, from, per column tile `n`, read at constant offsets of the bases:
    /// with `SPLIT` 1, at `[n]` the words of steps 0 and 1 from `xs` (`qgemv_tc_x`'s layout);
    /// with `XQ` = `QTC_X_I8`, at `[2 n]` the lane's two words of int8 codes of token `8 n +
    /// lane / 4` (`qgemv_tc_x8`'s layout), at `[2 n + 1]` `[dx, sx]` of tokens `8 n + 2 (lane
    /// % 4)` and the next; with `SPLIT` 3, at `[2 n + s]` the bits of step `s`'s `x` of token
    /// `8 n + lane / 4` (`tc_x_token`).
    fn tc_x_at<const NT: u32, const SPLIT: u32, const XQ: u32>(p: GemmParams, x: &[f32], xs: &[u32], xb0: u64, xb1: u64, z: u32, kb: u32, u: u32, lane: u32) -> [[u32; 4]; 2 * NT] {
        let mut v = [[0u32; 4]; 2 * NT];
        #[unroll]
        for n in 0..NT {
            if XQ == QTC_X_I8 {
                let w = xs.load2_nc(xb0 + (64 * (u * NT + n)) as u64);
                v[2 * n] = [w[0], w[1], 0, 0];
                v[2 * n + 1] = xs.load4_nc(xb1 + (16 * (u * NT + n)) as u64);
            } else if SPLIT == 1 {
                v[n] = xs.load4_nc(xb1 + (128 * (u * NT + n)) as u64);
            } else {
                let t = tc_x_token::<NT, SPLIT>(p, x, z, QTC_COLUMNS * n + lane / 4, 32 * kb, lane);
                #[unroll]
                for s in 0..2 {
                    v[2 * n + s] = [t[s][0].to_bits(), t[s][1].to_bits(), t[s][2].to_bits(), t[s][3].to_bits()];
                }
            }
        }
        v
    }

    /// The pairs of blocks of a chunk of `qgemv_tc` (`tc_chunk / 64`) on the lane's row bases
    /// `row` and `rowt` in `st` and, for block `kb ..` of K, its B fragments' bases `xb0`,
    /// `xb1` in `xs` (`tc_x_base`). `UNROLL`: the pairs unrolled, every read at a constant
    /// offset of one of the bases, which the caller proves once per chunk; else a loop whose
    /// pairs each prove their reads of `st` (`tc_reach`).
    fn tc_pairs<const FMT: u32, const MT: u32, const SB: u32, const NT: u32, const WARPS: u32, const SPLIT: u32, const XQ: u32, const UNROLL: bool>(
        st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>,
        row: u32,
        rowt: u32,
        p: GemmParams,
        x: &[f32],
        xs: &[u32],
        xb0: u64,
        xb1: u64,
        z: u32,
        kb: u32,
        lane: u32,
        acc_in: [[f32; 4]; MT * NT],
    ) -> [[f32; 4]; MT * NT] {
        let mut acc = acc_in;
        if UNROLL {
            #[unroll]
            for jj in 0..4 {
                if jj < tc_chunk::<FMT, SB>() / 64 {
                    let b = if FMT == FMT_Q4K { row } else { row + tc_pair_bytes::<FMT>() * jj };
                    acc = tc_pair::<FMT, MT, SB, NT, WARPS, SPLIT, XQ>(st, b, rowt + tc_pair_bytes::<FMT>() * jj, row + 2 * (jj % 2), p, x, xs, xb0, xb1, z, kb, jj, lane, acc);
                }
            }
        } else {
            let rb = tc_reach::<FMT, MT, SB, 0>();
            let rt = tc_reach::<FMT, MT, SB, 1>();
            let rq = tc_reach::<FMT, MT, SB, 2>();
            let mut jj = 0u32;
            while jj < tc_chunk::<FMT, SB>() / 64 {
                let b = if FMT == FMT_Q4K { row } else { row + tc_pair_bytes::<FMT>() * jj };
                let bt = rowt + tc_pair_bytes::<FMT>() * jj;
                let bq = row + 2 * (jj % 2);
                if ((b as u64) + rb as u64 <= st.len() as u64) & ((bt as u64) + rt as u64 <= st.len() as u64) & ((bq as u64) + rq as u64 <= st.len() as u64) {
                    acc = tc_pair::<FMT, MT, SB, NT, WARPS, SPLIT, XQ>(st, b, bt, bq, p, x, xs, xb0, xb1, z, kb, jj, lane, acc);
                }
                jj += 1;
            }
        }
        acc
    }

    /// How far the reads of a pair of `qgemv_tc` reach past its bases (`tc_pair`: `BASE` 0
    /// `b`, 1 `bt`, 2 `bq`): each read's offset plus its bytes, in the last row tile's second
    /// row (`8 · SB` below the first), of the pair's second block. Q4_0 / Q8_0 its scale (2
    /// bytes) and codes (2 bytes in; Q8_0's second step 16 further); BF16 its second step, 64
    /// + 32 + 8; Q4_K `d` and `dmin`, 4, the second step's codes, 16 + 4, and the odd
    /// sub-block's third scale byte, 12 + 1 + 1.
    fn tc_reach<const FMT: u32, const MT: u32, const SB: u32, const BASE: u32>() -> u32 {
        let m1 = (16 * (MT - 1) + 8) * SB;
        if BASE == 0 {
            m1 + if FMT == FMT_Q4_0 { dq::Q4_0_BYTES + 2 } else if FMT == FMT_Q8_0 { dq::Q8_0_BYTES + 2 } else if tc_float::<FMT>() { 0 } else { 4 }
        } else if BASE == 1 {
            m1 + if FMT == FMT_Q4_0 { dq::Q4_0_BYTES + 2 + 4 } else if FMT == FMT_Q8_0 { dq::Q8_0_BYTES + 2 + 16 + 4 } else if tc_float::<FMT>() { 64 + 32 + 8 } else { 16 + 4 }
        } else {
            m1 + if FMT == FMT_Q4K { 12 + 1 + 1 } else { 0 }
        }
    }

    /// Pair `jj` of a chunk of `qgemv_tc` (its blocks `kb + 2 jj` and the next of K): `b` its
    /// bytes of the lane's row `g`, `bt` the lane's bytes of a plane, `bq` Q4_K's scales of
    /// the pair (`4 + (2 jj) % 4 ..` of the head).
    fn tc_pair<const FMT: u32, const MT: u32, const SB: u32, const NT: u32, const WARPS: u32, const SPLIT: u32, const XQ: u32>(
        st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>,
        b: u32,
        bt: u32,
        bq: u32,
        p: GemmParams,
        x: &[f32],
        xs: &[u32],
        xb0: u64,
        xb1: u64,
        z: u32,
        kb: u32,
        jj: u32,
        lane: u32,
        acc_in: [[f32; 4]; MT * NT],
    ) -> [[f32; 4]; MT * NT] {
        let mut acc = acc_in;
        let x0 = tc_x_at::<NT, SPLIT, XQ>(p, x, xs, xb0, xb1, z, kb + 2 * jj, 2 * jj, lane);
        let x1 = tc_x_at::<NT, SPLIT, XQ>(p, x, xs, xb0, xb1, z, kb + 2 * jj + 1, 2 * jj + 1, lane);
        acc = if XQ == QTC_X_I8 {
            tc_block_i8::<FMT, MT, SB, NT, WARPS, 0>(st, b, bt, bq, x0, 2 * jj, acc)
        } else {
            tc_block::<FMT, MT, SB, NT, WARPS, SPLIT, 0>(st, b, bt, bq, x0, 2 * jj, lane, acc)
        };
        acc = if XQ == QTC_X_I8 {
            tc_block_i8::<FMT, MT, SB, NT, WARPS, 1>(st, b, bt, bq, x1, 2 * jj + 1, acc)
        } else {
            tc_block::<FMT, MT, SB, NT, WARPS, SPLIT, 1>(st, b, bt, bq, x1, 2 * jj + 1, lane, acc)
        };
        acc
    }

    /// The elements of a chunk of K of `qgemv_tc`: the 8 blocks of `SB` bytes of Q4_0 / Q8_0,
    /// one super-block of Q4_K, `SB / 2` of BF16 and F16.
    fn tc_chunk<const FMT: u32, const SB: u32>() -> u32 {
        if tc_float::<FMT>() {
            SB / 2
        } else {
            8 * 32
        }
    }

    /// The largest `q.row_bytes` of `qgemv_tc`: its lanes' copies (`tc_rows`) hold their
    /// rows' offsets from the block's first row, `16 · MT · row_bytes` at most, in 32 bits.
    pub const QTC_MAX_ROW_BYTES: u32 = 1 << 26;

    /// Whether a lane of `qgemv_tc` copies a row of its own (`tc_issue`): with 32 rows a stage
    /// (`MT` 2) for Q4_K on f32 activations, whose registers (128 for sm_80) do not hold an
    /// offset a copy; elsewhere the warp's copy instructions read whole units of consecutive
    /// rows, which measured faster (Q4_0 at 16 tokens, 14336 × 4096 on an H100: 48 µs against
    /// 55 a call).
    fn tc_lane_rows<const FMT: u32, const MT: u32, const XQ: u32>() -> bool {
        (MT == 2) & (FMT == FMT_Q4K) & (XQ != QTC_X_I8)
    }

    /// The offsets of `tc_rows`: one a copy, or one (unused) where a lane copies its own row.
    fn tc_offsets<const FMT: u32, const MT: u32, const SB: u32, const XQ: u32>() -> u32 {
        if tc_lane_rows::<FMT, MT, XQ>() {
            1
        } else {
            (MT * SB + 31) / 32
        }
    }

    /// The 16-byte copies of a lane per stage of `qgemv_tc`: the stage's `16 · MT` rows of
    /// `SB` bytes are `MT · SB` units of 16 bytes; where `tc_lane_rows` (32 rows) lane
    /// `l` copies the `SB / 16` units of row `l`, else units `l + 32 i`.
    fn tc_copies<const FMT: u32, const MT: u32, const SB: u32, const XQ: u32>() -> u32 {
        if tc_lane_rows::<FMT, MT, XQ>() {
            SB / 16
        } else {
            (MT * SB + 31) / 32
        }
    }

    /// The offset in `w` of the first row of the lane's copies (`tc_issue`): row `row0 +
    /// lane` where `tc_lane_rows`, else row `row0` (rows past `n_out` repeat the last row,
    /// whose sums are never stored).
    fn tc_base<const FMT: u32, const MT: u32, const XQ: u32>(p: GemmParams, q: QuantParams, row0: u32, lane: u32) -> u64 {
        let r = if tc_lane_rows::<FMT, MT, XQ>() { (row0 + lane).min(p.n - 1) } else { row0 };
        r as u64 * q.row_bytes as u64
    }

    /// The sources of the lane's copies (`tc_issue`) as offsets from `tc_base` (`q.row_bytes`
    /// below `QTC_MAX_ROW_BYTES`, `tc_offsets` of them): where `tc_lane_rows` none (one zero,
    /// unused), the lane copying its own row; else one a copy, copy `i` taking unit `u = lane +
    /// 32 i` of the stage, bytes `16 · (u % (SB / 16)) ..` of row `row0 + u / (SB / 16)`'s
    /// chunk.
    fn tc_rows<const FMT: u32, const MT: u32, const SB: u32, const XQ: u32>(p: GemmParams, q: QuantParams, row0: u32, lane: u32) -> [u32; tc_offsets::<FMT, MT, SB, XQ>()] {
        let mut off = [0u32; tc_offsets::<FMT, MT, SB, XQ>()];
        if !tc_lane_rows::<FMT, MT, XQ>() {
            #[unroll]
            for i in 0..tc_offsets::<FMT, MT, SB, XQ>() {
                let u = lane + 32 * i;
                let r = (row0 + u / (SB / 16)).min(p.n - 1) - row0;
                off[i] = r * q.row_bytes + u % (SB / 16) * 16;
            }
        }
        off
    }

    /// Issues the copies of chunk `c` of the `16 · MT` rows from `row0` (`wb`: `tc_base`;
    /// `off`: `tc_rows`) into the stage buffer at byte `so`, laid out as
    /// the rows one after another, free of bank conflicts:
    /// - where `tc_lane_rows` (32 rows), copy `i` of lane `l` takes unit `i` of row `l`, to
    ///   byte `so + l · SB + 16 i`: a row is an odd count of units (`SB / 16`), so the 8 lanes of each
    ///   quarter of the warp's instruction write 8 different groups of 4 banks;
    /// - else unit `u` of the stage lands at byte `so + 16 u`, so that the 32 lanes of a
    ///   copy instruction fill 512 consecutive bytes and read whole units of consecutive rows.
    fn tc_issue<const FMT: u32, const MT: u32, const SB: u32, const WARPS: u32, const XQ: u32>(
        st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>,
        so: u32,
        w: &[u8],
        wb: u64,
        off: [u32; tc_offsets::<FMT, MT, SB, XQ>()],
        c: u32,
        lane: u32,
    ) {
        let g = wb + (c * SB) as u64;
        if tc_lane_rows::<FMT, MT, XQ>() {
            let sl = so + lane * SB;
            #[unroll]
            for i in 0..tc_copies::<FMT, MT, SB, XQ>() {
                // SAFETY: the launch's contract (see `qgemv_tc`): every row holds the `p.k /
                // tc_chunk` chunks of `SB` bytes, 16-byte aligned, and `wb` is the offset of
                // a row below `p.n` (`tc_base`), so unit `i < SB / 16` of its chunk
                // `c` lies inside `w`; its destination, unit `i` of row `lane < 16 · MT` of
                // the stage, lies inside the warp's stage at `so` (`16 · MT · SB` bytes).
                unsafe {
                    st.cp_async16_unchecked(sl + 16 * i, w, g + (16 * i) as u64);
                }
            }
        } else {
            let sl = so + 16 * lane;
            #[unroll]
            for i in 0..tc_copies::<FMT, MT, SB, XQ>() {
                // The last copy may take fewer units than the warp has lanes.
                if (32 * i + 32 <= MT * SB) | (lane + 32 * i < MT * SB) {
                    // SAFETY: the launch's contract (see `qgemv_tc`): every row holds the `p.k
                    // / tc_chunk` chunks of `SB` bytes, 16-byte aligned, `wb` is row `row0`'s
                    // offset and `off[i]` that of a unit of a row below `p.n` (`tc_rows`), so
                    // the unit of chunk `c` lies inside `w`; its destination, unit `lane + 32 i
                    // < MT · SB` of the stage, lies inside the warp's stage at `so` (`16 · MT ·
                    // SB` bytes).
                    unsafe {
                        st.cp_async16_unchecked(sl + 512 * i, w, g + off[i] as u64);
                    }
                }
            }
        }
    }

    /// Two bf16 weights from the nibbles at bits `shift .. shift + 4` and `shift + 16 ..` of
    /// `v`: `(nibble ^ or_xor) + off` in each half (the constants below), exact.
    fn tc_nibbles(v: u32, shift: u32, or_xor: u32, off: u32) -> u32 {
        // `(v >> shift) & mask ^ or_xor` in one instruction (truth table `a & b ^ c`).
        let b = bf16x2::from_bits((v >> shift).lop3(0x000F_000Fu32, or_xor, 0x6Au32));
        b.mul_add(bf16x2::from_bits(BF16_ONES), bf16x2::from_bits(off)).to_bits()
    }

    /// The bytes of a pair of blocks of 32 elements of `qgemv_tc` (Q4_0, Q8_0, BF16, F16;
    /// Q4_K's codes of a pair take 32 bytes after its 16 bytes of scales).
    fn tc_pair_bytes<const FMT: u32>() -> u32 {
        if FMT == FMT_Q4_0 {
            2 * dq::Q4_0_BYTES
        } else if FMT == FMT_Q8_0 {
            2 * dq::Q8_0_BYTES
        } else if tc_float::<FMT>() {
            128
        } else {
            32
        }
    }

    /// The 32 elements of K from `k` (block `j` of the chunk, `U` = `j % 2`) added to the
    /// lane's accumulators, read at constant offsets from the bases of the kernel's pair loop
    /// (under its test), with the lane's B fragments of it (`tc_xs_load`).
    fn tc_block<const FMT: u32, const MT: u32, const SB: u32, const NT: u32, const WARPS: u32, const SPLIT: u32, const U: u32>(
        st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>,
        b: u32,
        bt: u32,
        bq: u32,
        xv: [[u32; 4]; 2 * NT],
        j: u32,
        lane: u32,
        acc_in: [[f32; 4]; MT * NT],
    ) -> [[f32; 4]; MT * NT] {
        let mut acc = acc_in;
        // The column tiles' B fragments: `[tile][step][part]`, `SPLIT` parts.
        let mut xf = [[0u32; 2]; 2 * NT * SPLIT];
        #[unroll]
        for n in 0..NT {
            #[unroll]
            for s in 0..2 {
                if SPLIT == 1 {
                    xf[2 * n + s] = [xv[n][2 * s], xv[n][2 * s + 1]];
                } else {
                    let v = xv[2 * n + s];
                    let lo = tc_split(f32::from_bits(v[0]), f32::from_bits(v[2]));
                    let hi = tc_split(f32::from_bits(v[1]), f32::from_bits(v[3]));
                    #[unroll]
                    for part in 0..SPLIT {
                        xf[(2 * n + s) * SPLIT + part] = [lo[part], hi[part]];
                    }
                }
            }
        }
        // Q4_K: each column's `Σ x` over the sub-block (every row of the product of ones).
        let mut xs = [[0.0f32; 4]; NT];
        if FMT == FMT_Q4K {
            #[unroll]
            for n in 0..NT {
                #[unroll]
                for i in 0..2 * SPLIT {
                    xs[n] = mma_m16n8k16_bf16([BF16_ONES; 4], xf[2 * n * SPLIT + i], xs[n]);
                }
            }
        }
        #[unroll]
        for m in 0..MT {
            // The row tile's rows `g` and `g + 8` lie these bytes past the bases.
            let m0 = 16 * m * SB;
            let m1 = m0 + 8 * SB;
            if FMT == FMT_Q4K {
                // Sub-block `j`: the nibbles at bit `4 U` of the pair's 32 bytes.
                let sm0 = tc_q4k_scale_min(st.read::<u16>(b + m0), st.read::<u16>(b + m0 + 2), st[bq + m0 + 4 + U], st[bq + m0 + 8 + U], st[bq + m0 + 12 + U], j);
                let sm1 = tc_q4k_scale_min(st.read::<u16>(b + m1), st.read::<u16>(b + m1 + 2), st[bq + m1 + 4 + U], st[bq + m1 + 8 + U], st[bq + m1 + 12 + U], j);
                let mut a = [[0u32; 4]; 2];
                #[unroll]
                for s in 0..2 {
                    a[s] = tc_plane(st.read::<u32>(bt + m0 + 16 * s), st.read::<u32>(bt + m1 + 16 * s), 4 * U, BF16_128_PLUS, BF16_MINUS_128);
                }
                #[unroll]
                for n in 0..NT {
                    let mut blk = [0.0f32; 4];
                    #[unroll]
                    for s in 0..2 {
                        #[unroll]
                        for part in 0..SPLIT {
                            blk = mma_m16n8k16_bf16(a[s], xf[(2 * n + s) * SPLIT + part], blk);
                        }
                    }
                    let i = m * NT + n;
                    let sx = xs[n];
                    let old = acc[i];
                    acc[i] = [
                        sm0[0].mul_add(blk[0], (-sm0[1]).mul_add(sx[0], old[0])),
                        sm0[0].mul_add(blk[1], (-sm0[1]).mul_add(sx[1], old[1])),
                        sm1[0].mul_add(blk[2], (-sm1[1]).mul_add(sx[2], old[2])),
                        sm1[0].mul_add(blk[3], (-sm1[1]).mul_add(sx[3], old[3])),
                    ];
                }
            } else if tc_float::<FMT>() {
                // 64 bytes a block of 32: the lane's 4 elements of each step, as bf16 (F16
                // weights as the exact sum of two bf16 planes, `tc_f16_planes`).
                let mut a = [[0u32; 4]; 4];
                #[unroll]
                for s in 0..2 {
                    let o = 64 * U + 32 * s;
                    let w0 = [st.read::<u32>(bt + m0 + o), st.read::<u32>(bt + m0 + o + 4)];
                    let w1 = [st.read::<u32>(bt + m1 + o), st.read::<u32>(bt + m1 + o + 4)];
                    if FMT == FMT_BF16 {
                        a[s] = tc_float_fragment(w0, w1);
                    } else {
                        let [h00, l00] = tc_f16_planes(w0[0]);
                        let [h01, l01] = tc_f16_planes(w0[1]);
                        let [h10, l10] = tc_f16_planes(w1[0]);
                        let [h11, l11] = tc_f16_planes(w1[1]);
                        a[s] = tc_float_fragment([h00, h01], [h10, h11]);
                        a[2 + s] = tc_float_fragment([l00, l01], [l10, l11]);
                    }
                }
                #[unroll]
                for n in 0..NT {
                    #[unroll]
                    for s in 0..2 {
                        #[unroll]
                        for part in 0..SPLIT {
                            let f = xf[(2 * n + s) * SPLIT + part];
                            acc[m * NT + n] = mma_m16n8k16_bf16(a[s], f, acc[m * NT + n]);
                            if FMT == FMT_F16 {
                                acc[m * NT + n] = mma_m16n8k16_bf16(a[2 + s], f, acc[m * NT + n]);
                            }
                        }
                    }
                }
            } else {
                let o = U * if FMT == FMT_Q4_0 { dq::Q4_0_BYTES } else { dq::Q8_0_BYTES };
                let d0 = f16::from_bits(st.read::<u16>(b + m0 + o)) as f32;
                let d1 = f16::from_bits(st.read::<u16>(b + m1 + o)) as f32;
                // Planes of 16 weights per row and step: Q4_0 low then high nibbles of
                // the lane's 4 bytes; Q8_0 per step (bytes 4 t.. then 16 + 4 t..) the
                // low nibbles, then 16 times the signed high ones. The codes of a block
                // start 2 bytes in: 4-byte aligned in the odd block of the pair, read as two
                // halves in the even one.
                let mut a = [[0u32; 4]; 4];
                #[unroll]
                for s in 0..2 {
                    if (FMT != FMT_Q4_0) | (s == 0) {
                        let v = tc_code_words::<MT, SB, WARPS, U>(st, bt, o + 2 + 16 * s, m0, m1);
                        let v0 = v[0];
                        let v1 = v[1];
                        if FMT == FMT_Q4_0 {
                            a[0] = tc_plane(v0, v1, 0, BF16_128_PLUS, BF16_MINUS_136);
                            a[1] = tc_plane(v0, v1, 4, BF16_128_PLUS, BF16_MINUS_136);
                        } else {
                            a[2 * s] = tc_plane(v0, v1, 0, BF16_128_PLUS, BF16_MINUS_128);
                            a[2 * s + 1] = tc_plane(v0, v1, 4, BF16_2048_PLUS_16X8, BF16_MINUS_2176);
                        }
                    }
                }
                #[unroll]
                for n in 0..NT {
                    let mut blk = [0.0f32; 4];
                    #[unroll]
                    for s in 0..2 {
                        #[unroll]
                        for part in 0..SPLIT {
                            let f = xf[(2 * n + s) * SPLIT + part];
                            if FMT == FMT_Q4_0 {
                                blk = mma_m16n8k16_bf16(a[s], f, blk);
                            } else {
                                blk = mma_m16n8k16_bf16(a[2 * s], f, blk);
                                blk = mma_m16n8k16_bf16(a[2 * s + 1], f, blk);
                            }
                        }
                    }
                    let i = m * NT + n;
                    acc[i] = [d0.mul_add(blk[0], acc[i][0]), d0.mul_add(blk[1], acc[i][1]), d1.mul_add(blk[2], acc[i][2]), d1.mul_add(blk[3], acc[i][3])];
                }
            }
        }
        acc
    }

    /// Whether `qgemv_tc` reads `FMT` as 16-bit floats, 64 bytes a block of 32 (BF16, F16).
    fn tc_float<const FMT: u32>() -> bool {
        (FMT == FMT_BF16) | (FMT == FMT_F16)
    }

    /// The A fragment of one `m16n8k16` step from a lane's two pairs of 16-bit words of rows
    /// `g` (`w0`) and `g + 8` (`w1`): elements 2 t, 2 t + 1 and 2 t + 8, 2 t + 9 of the step.
    fn tc_float_fragment(w0: [u32; 2], w1: [u32; 2]) -> [u32; 4] {
        [w0[0].prmt(w0[1], 0x5410), w1[0].prmt(w1[1], 0x5410), w0[0].prmt(w0[1], 0x7632), w1[0].prmt(w1[1], 0x7632)]
    }

    /// A pair of f16 weights as two pairs of bf16, `[high, low]`, whose sums are the weights
    /// exactly: the high part keeps the top 8 of an f16's 11 significant bits (its f32 with
    /// the low 16 bits cleared), the low part the other 3, exact in bf16 (whose exponents
    /// reach below f16's smallest subnormal).
    fn tc_f16_planes(w: u32) -> [u32; 2] {
        let f0 = f16::from_bits((w & 0xFFFF) as u16) as f32;
        let f1 = f16::from_bits((w >> 16) as u16) as f32;
        let h0 = f0.to_bits() & 0xFFFF_0000;
        let h1 = f1.to_bits() & 0xFFFF_0000;
        let lo = bf16x2::from_f32s(f0 - f32::from_bits(h0), f1 - f32::from_bits(h1));
        [h0.prmt(h1, 0x7632), lo.to_bits()]
    }

    /// The bf16 pairs that decode a nibble plane (`tc_nibbles`): `0x4300 | n` is `128 + n`
    /// and `0x4500 | n` is `2048 + 16 n`, both exact; adding the offset makes the weight:
    /// Q4_0 `(128 + n) - 136 = n - 8`; Q4_K and Q8_0's low nibble `(128 + n) - 128`; Q8_0's
    /// high nibble `n` of the signed byte `16 h + l` (where `n ^ 8 = h + 8`) `(2048 + 16 (h +
    /// 8)) - 2176 = 16 h`.
    const BF16_128_PLUS: u32 = 0x4300_4300;
    const BF16_2048_PLUS_16X8: u32 = 0x4508_4508;
    const BF16_MINUS_128: u32 = 0xC300_C300;
    const BF16_MINUS_136: u32 = 0xC308_C308;
    const BF16_MINUS_2176: u32 = 0xC508_C508;
    /// A pair of bf16 ones.
    const BF16_ONES: u32 = 0x3F80_3F80;

    /// Block `j` of the chunk (`U` = `j % 2`) with int8 activations (`XQ` = `QTC_X_I8`), read
    /// as in `tc_block`: the codes as the A fragment of one `mma` m16n8k32 on int8 (Q4_0's and
    /// Q4_K's nibbles 0 to 15, Q8_0's signed bytes; the 4 bytes of slot `4 t ..` and `16 + 4 t
    /// ..` of rows `g` and `g + 8` are the lane's bytes `4 t ..` and `16 + 4 t ..` of the
    /// block's codes, its low nibbles for Q4_0 and its high ones at `16 + 4 t`), times each
    /// column tile's codes of `x` (`tc_x_load`): an exact i32 sum `Σ q qx` per row and token,
    /// scaled in f32 with the token's `dx` and `sx = dx Σ qx`: Q4_0 adds `d (dx Σ q qx) - 8 d
    /// sx`, Q8_0 `d (dx Σ q qx)`, Q4_K `d sc (dx Σ q qx) - dmin m sx`.
    fn tc_block_i8<const FMT: u32, const MT: u32, const SB: u32, const NT: u32, const WARPS: u32, const U: u32>(
        st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>,
        b: u32,
        bt: u32,
        bq: u32,
        xv: [[u32; 4]; 2 * NT],
        j: u32,
        acc_in: [[f32; 4]; MT * NT],
    ) -> [[f32; 4]; MT * NT] {
        let mut acc = acc_in;
        #[unroll]
        for m in 0..MT {
            let m0 = 16 * m * SB;
            let m1 = m0 + 8 * SB;
            // Rows `g` and `g + 8`: the factor of `dx Σ q qx` and that of `sx`.
            let mut sw = [[0.0f32; 2]; 2];
            let mut a = [0u32; 4];
            if FMT == FMT_Q4K {
                sw[0] = tc_q4k_scale_min(st.read::<u16>(b + m0), st.read::<u16>(b + m0 + 2), st[bq + m0 + 4 + U], st[bq + m0 + 8 + U], st[bq + m0 + 12 + U], j);
                sw[1] = tc_q4k_scale_min(st.read::<u16>(b + m1), st.read::<u16>(b + m1 + 2), st[bq + m1 + 4 + U], st[bq + m1 + 8 + U], st[bq + m1 + 12 + U], j);
                #[unroll]
                for s in 0..2 {
                    a[2 * s] = (st.read::<u32>(bt + m0 + 16 * s) >> (4 * U)) & NIBBLES;
                    a[2 * s + 1] = (st.read::<u32>(bt + m1 + 16 * s) >> (4 * U)) & NIBBLES;
                }
            } else {
                let o = U * if FMT == FMT_Q4_0 { dq::Q4_0_BYTES } else { dq::Q8_0_BYTES };
                let d0 = f16::from_bits(st.read::<u16>(b + m0 + o)) as f32;
                let d1 = f16::from_bits(st.read::<u16>(b + m1 + o)) as f32;
                let lo = tc_code_words::<MT, SB, WARPS, U>(st, bt, o + 2, m0, m1);
                if FMT == FMT_Q4_0 {
                    a = [lo[0] & NIBBLES, lo[1] & NIBBLES, (lo[0] >> 4) & NIBBLES, (lo[1] >> 4) & NIBBLES];
                    sw = [[d0, 8.0 * d0], [d1, 8.0 * d1]];
                } else {
                    let hi = tc_code_words::<MT, SB, WARPS, U>(st, bt, o + 2 + 16, m0, m1);
                    a = [lo[0], lo[1], hi[0], hi[1]];
                    sw = [[d0, 0.0], [d1, 0.0]];
                }
            }
            #[unroll]
            for n in 0..NT {
                let c = mma_m16n8k32_s8(a, [xv[2 * n][0], xv[2 * n][1]], [0i32; 4]);
                let sc = xv[2 * n + 1];
                let i = m * NT + n;
                // `c[e]`: row `g + 8 (e / 2)`, token `2 t + e % 2`.
                #[unroll]
                for e in 0..4 {
                    let dx = f32::from_bits(sc[2 * (e % 2)]);
                    let sx = f32::from_bits(sc[2 * (e % 2) + 1]);
                    let r = sw[e / 2];
                    let base = if FMT == FMT_Q8_0 { acc[i][e] } else { (-r[1]).mul_add(sx, acc[i][e]) };
                    acc[i][e] = r[0].mul_add(dx * c[e] as f32, base);
                }
            }
        }
        acc
    }

    /// The 4 code bytes `off` (a constant) past the lane's base `bt` of its rows `g` (`bt +
    /// m0`) and `g + 8` (`bt + m1`) of a pair's block `U`: 4-byte aligned in the odd block of
    /// the pair (`U` = 1), read as two halves in the even one. (The reads lie at constant
    /// offsets from `bt`, which the caller's range test covers.)
    fn tc_code_words<const MT: u32, const SB: u32, const WARPS: u32, const U: u32>(st: Shared<[u8; WARPS * QTC_STAGES * 16 * MT * SB]>, bt: u32, off: u32, m0: u32, m1: u32) -> [u32; 2] {
        if U == 1 {
            [st.read::<u32>(bt + m0 + off), st.read::<u32>(bt + m1 + off)]
        } else {
            [
                (st.read::<u16>(bt + m0 + off) as u32) | ((st.read::<u16>(bt + m0 + off + 2) as u32) << 16),
                (st.read::<u16>(bt + m1 + off) as u32) | ((st.read::<u16>(bt + m1 + off + 2) as u32) << 16),
            ]
        }
    }

    /// Q4_K sub-block `j`'s `[d · sc, dmin · m]` (`dq::q4k_scale_and_min`) from its
    /// super-block's `d` and `dmin` bits and its scale bytes `4 + j % 4`, `8 + j % 4`, `12 +
    /// j % 4`.
    fn tc_q4k_scale_min(d: u16, dmin: u16, lo: u8, mid: u8, hi: u8, j: u32) -> [f32; 2] {
        dq::q4k_scale_and_min(f16::from_bits(d) as f32, f16::from_bits(dmin) as f32, lo as u32, mid as u32, hi as u32, j)
    }

    /// The A fragment (`mma` row-major 16 × 16) of one nibble plane of the lane's rows `g`
    /// (bytes `v0`) and `g + 8` (`v1`): the nibbles at bit `shift` (0 or 4) of bytes 0, 2 (slots `2 t`,
    /// `2 t + 1`) and of bytes 1, 3 (slots `2 t + 8`, `2 t + 9`), as `qgemv_tc_x` pairs `x`.
    fn tc_plane(v0: u32, v1: u32, shift: u32, or_xor: u32, off: u32) -> [u32; 4] {
        [
            tc_nibbles(v0, shift, or_xor, off),
            tc_nibbles(v1, shift, or_xor, off),
            tc_nibbles(v0, shift + 8, or_xor, off),
            tc_nibbles(v1, shift + 8, or_xor, off),
        ]
    }

    /// The bytes of a fast-path group of block format `FMT`: 8 × 34 (Q8_0), 8 × 18 (Q4_0),
    /// 144 (Q4_K).
    fn group_bytes<const FMT: u32>() -> u32 {
        if FMT == FMT_Q8_0 {
            8 * dq::Q8_0_BYTES
        } else if FMT == FMT_Q4_0 {
            8 * dq::Q4_0_BYTES
        } else {
            dq::Q4K_BYTES
        }
    }

    /// Byte `i` of `N` 16-byte vectors.
    fn byte_at<const N: u32>(v: [[u32; 4]; N], i: u32) -> u32 {
        (v[i / 16][i % 16 / 4] >> (8 * (i % 4))) & 0xFF
    }

    /// The f16 at bytes `i, i + 1` of `N` 16-byte vectors (`i` even), as f32.
    fn f16_at<const N: u32>(v: [[u32; 4]; N], i: u32) -> f32 {
        f16::from_bits(((v[i / 16][i % 16 / 4] >> (8 * (i % 4))) & 0xFFFF) as u16) as f32
    }

    /// `part[t][tid] += d · Σ_j wf[j] · x[t][k0 + j]` over the 32 elements from `k0` (0 past
    /// `p.k`) for the tokens `t < tv` of the chunk whose rows of `x` start at element `xz`.
    fn block_dot(part: Shared<[f32; QGEMV_MAX_TOKENS * QGEMV_THREADS]>, tid: u32, wf: [f32; 32], d: f32, x: &[f32], xz: u64, tv: u32, p: GemmParams, k0: u32) {
        let mut t = 0u32;
        while t < tv {
            let xrow = xz + t as u64 * p.lda as u64;
            let mut s = 0.0f32;
            #[unroll]
            for u in 0..8 {
                let k = k0 + 4 * u;
                let xv = core::load4_edge::<f32, true>(x, xrow + k as u64, true, k, p.k, p.vec_a);
                #[unroll]
                for l in 0..4 {
                    s = wf[4 * u + l].mul_add(xv[l], s);
                }
            }
            let i = t * QGEMV_THREADS + tid;
            part[i] = d.mul_add(s, part[i]);
            t += 1;
        }
    }

    /// One fast-path group of a block format at byte `off` of `w` (its elements from `k0`):
    /// its 16-byte vectors loaded first, then each 32-element block decoded and multiplied.
    fn group_blocks<const FMT: u32>(part: Shared<[f32; QGEMV_MAX_TOKENS * QGEMV_THREADS]>, tid: u32, w: &[u8], off: u64, x: &[f32], xz: u64, tv: u32, p: GemmParams, k0: u32) {
        if FMT == FMT_Q8_0 {
            let mut v = [[0u32; 4]; 17];
            #[unroll]
            for i in 0..17 {
                v[i] = w.read::<[u32; 4]>(off + 16 * i as u64);
            }
            #[unroll]
            for b in 0..8 {
                let o = dq::Q8_0_BYTES * b;
                let mut wf = [0.0f32; 32];
                #[unroll]
                for j in 0..32 {
                    // The code as a signed byte: `(q ^ 0x80) - 128`.
                    wf[j] = dq::code_f32(byte_at::<17>(v, o + 2 + j) ^ 0x80) - 128.0;
                }
                block_dot(part, tid, wf, f16_at::<17>(v, o), x, xz, tv, p, k0 + 32 * b);
            }
        } else if FMT == FMT_Q4_0 {
            let mut v = [[0u32; 4]; 9];
            #[unroll]
            for i in 0..9 {
                v[i] = w.read::<[u32; 4]>(off + 16 * i as u64);
            }
            #[unroll]
            for b in 0..8 {
                let o = dq::Q4_0_BYTES * b;
                let mut wf = [0.0f32; 32];
                #[unroll]
                for j in 0..16 {
                    let c = byte_at::<9>(v, o + 2 + j);
                    wf[j] = dq::code_f32(c & 0xF) - 8.0;
                    wf[j + 16] = dq::code_f32(c >> 4) - 8.0;
                }
                block_dot(part, tid, wf, f16_at::<9>(v, o), x, xz, tv, p, k0 + 32 * b);
            }
        } else {
            let mut v = [[0u32; 4]; 9];
            #[unroll]
            for i in 0..9 {
                v[i] = w.read::<[u32; 4]>(off + 16 * i as u64);
            }
            let d = f16_at::<9>(v, 0);
            let dmin = f16_at::<9>(v, 2);
            #[unroll]
            for s in 0..8 {
                let sm = dq::q4k_scale_and_min(d, dmin, byte_at::<9>(v, 4 + s % 4), byte_at::<9>(v, 8 + s % 4), byte_at::<9>(v, 12 + s % 4), s);
                let mut wf = [0.0f32; 32];
                #[unroll]
                for j in 0..32 {
                    let c = byte_at::<9>(v, 16 + 32 * (s / 2) + j);
                    let nib = if s % 2 == 0 { c & 0xF } else { c >> 4 };
                    wf[j] = dq::q4k_value(sm, nib);
                }
                block_dot(part, tid, wf, 1.0, x, xz, tv, p, k0 + 32 * s);
            }
        }
    }

    /// One fast-path group of a float format at byte `off` of `w` (64 elements from `k0`).
    fn group_floats<const FMT: u32>(part: Shared<[f32; QGEMV_MAX_TOKENS * QGEMV_THREADS]>, tid: u32, w: &[u8], off: u64, x: &[f32], xz: u64, tv: u32, p: GemmParams, k0: u32) {
        let mut v = [[0u32; 4]; 8];
        #[unroll]
        for i in 0..8 {
            v[i] = w.read::<[u32; 4]>(off + 16 * i as u64);
        }
        #[unroll]
        for b in 0..2 {
            let mut wf = [0.0f32; 32];
            #[unroll]
            for j in 0..16 {
                let word = v[b * 4 + j / 4][j % 4];
                if FMT == FMT_BF16 {
                    wf[2 * j] = f32::from_bits(word << 16);
                    wf[2 * j + 1] = f32::from_bits(word & 0xFFFF_0000);
                } else {
                    wf[2 * j] = f16::from_bits((word & 0xFFFF) as u16) as f32;
                    wf[2 * j + 1] = f16::from_bits((word >> 16) as u16) as f32;
                }
            }
            block_dot(part, tid, wf, 1.0, x, xz, tv, p, k0 + 32 * b);
        }
    }

    /// The scale of unit `u` of the row at byte `wrow` of `w` (see `unit_slow`): a Q8_0 /
    /// Q4_0 block's `d`, 1 for the other formats.
    fn unit_scale<const FMT: u32>(w: &[u8], wrow: u64, u: u32) -> f32 {
        let mut d = 1.0f32;
        if FMT == FMT_Q8_0 {
            d = f16::from_bits(dq::u16_at(w, wrow + (dq::Q8_0_BYTES * u) as u64) as u16) as f32;
        } else if FMT == FMT_Q4_0 {
            d = f16::from_bits(dq::u16_at(w, wrow + (dq::Q4_0_BYTES * u) as u64) as u16) as f32;
        }
        d
    }

    /// Unit `u` (elements `32 u ..`, 0 past `k`) of the row at byte `wrow` of `w`, read byte
    /// by byte: a block of Q8_0 / Q4_0 (its codes, to be scaled by `unit_scale`), a sub-block
    /// of Q4_K (its values), 32 floats.
    fn unit_slow<const FMT: u32>(w: &[u8], wrow: u64, k: u32, u: u32) -> [f32; 32] {
        let mut wf = [0.0f32; 32];
        if FMT == FMT_Q8_0 {
            let off = wrow + (dq::Q8_0_BYTES * u) as u64;
            #[unroll]
            for j in 0..32 {
                wf[j] = dq::code_f32(w[off + 2 + j as u64] as u32 ^ 0x80) - 128.0;
            }
        } else if FMT == FMT_Q4_0 {
            let off = wrow + (dq::Q4_0_BYTES * u) as u64;
            #[unroll]
            for j in 0..16 {
                let c = w[off + 2 + j as u64] as u32;
                wf[j] = dq::code_f32(c & 0xF) - 8.0;
                wf[j + 16] = dq::code_f32(c >> 4) - 8.0;
            }
        } else if FMT == FMT_Q4K {
            let off = wrow + (dq::Q4K_BYTES * (u / 8)) as u64;
            let s = u % 8;
            let dd = f16::from_bits(dq::u16_at(w, off) as u16) as f32;
            let dmin = f16::from_bits(dq::u16_at(w, off + 2) as u16) as f32;
            let j4 = (s % 4) as u64;
            let sm = dq::q4k_scale_and_min(dd, dmin, w[off + 4 + j4] as u32, w[off + 8 + j4] as u32, w[off + 12 + j4] as u32, s);
            let shift = 4 * (s % 2);
            let q0 = off + 16 + 32 * (s / 2) as u64;
            #[unroll]
            for j in 0..32 {
                let c = (w[q0 + j as u64] as u32 >> shift) & 0xF;
                wf[j] = dq::q4k_value(sm, c);
            }
        } else {
            #[unroll]
            for j in 0..32 {
                let e = 32 * u + j;
                if e < k {
                    let bits = dq::u16_at(w, wrow + 2 * e as u64);
                    if FMT == FMT_BF16 {
                        wf[j] = f32::from_bits(bits << 16);
                    } else {
                        wf[j] = f16::from_bits(bits as u16) as f32;
                    }
                }
            }
        }
        wf
    }
}

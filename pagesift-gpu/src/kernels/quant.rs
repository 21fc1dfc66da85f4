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

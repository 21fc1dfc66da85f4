//! Kernels of the shapes that tiled and byte-packed workloads take: const arguments passed by
//! name (`affine`), 8-bit arithmetic (`byte_mix`), typed reads of packed byte records
//! (`q4_0_gemv`, GGUF's q4_0 blocks), two-dimensional register and shared arrays (`sgemm`)
//! typed views of one dynamic shared buffer, over 48 KiB (`staged_dot`) and index arithmetic
//! at the wrap of its type (`wrap_index`).

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    /// `y[i] = x[i] * SCALE + SHIFT`: two consts of one type, which a positional launch could
    /// swap unnoticed.
    #[variants((SCALE, SHIFT) in [(2, 3), (3, 2)])]
    #[launch(block = 64)]
    pub fn affine<const SCALE: u32, const SHIFT: u32>(x: &[u32], y: &mut [u32]) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if (i as u64) < x.len() {
            y[i] = x[i] * SCALE + SHIFT;
        }
    }

    /// 8-bit arithmetic, wrapping at 8 bits: `y = (a * 3 + b as u8) ^ (a >> 1)`, doubled where
    /// `a > 200`; `z = (-(b / 3) % 5) * (a as i8) + (b << 2) - 7` (`b` as i8 throughout).
    #[launch(block = 64)]
    pub fn byte_mix(a: &[u8], b: &[i8], y: &mut [u8], z: &mut [i8]) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if (i as u64) < a.len() {
            let p = a[i];
            let q = b[i];
            let mut v = (p * 3 + q as u8) ^ (p >> 1);
            if p > 200 {
                v += v;
            }
            y[i] = v;
            z[i] = (-(q / 3) % 5) * (p as i8) + (q << 2) - 7;
        }
    }

    /// `y[r] = Σ_k W[r][k] x[k]` with `W` in GGUF q4_0 blocks: a row of `cols` weights is
    /// `cols / 32` blocks of 18 bytes (2-byte aligned), an f16 scale `d` and 16 bytes of
    /// nibbles: weight `j` is `(low nibble of byte j) - 8`, weight `j + 16` the high nibble's,
    /// times `d`. One warp per row, each lane a block at a time.
    #[launch(block = 32)]
    pub fn q4_0_gemv(w: &[u8], x: &[f32], y: &mut [f32], rows: u32, cols: u32) {
        let r = block_idx_x();
        let lane = thread_idx_x();
        let nb = cols / 32;
        let mut acc = 0.0f32;
        let mut blk = lane;
        while blk < nb {
            let off = (r * nb + blk) * 18;
            let d = w.read::<f16>(off) as f32;
            let mut s = 0.0f32;
            #[unroll]
            for j in 0..16 {
                let q = w[off + 2 + j];
                let lo = (q & 0xF) as i8 - 8;
                let hi = (q >> 4) as i8 - 8;
                s += (lo as f32) * x[blk * 32 + j] + (hi as f32) * x[blk * 32 + j + 16];
            }
            acc += d * s;
            blk += 32;
        }
        #[unroll]
        for k in 0..5 {
            acc += shfl_xor(acc, 16 >> k);
        }
        if lane == 0 && r < rows {
            y[r] = acc;
        }
    }

    /// `C = A·B + bias` (row-major `m x k` by `k x n`, the bias per column): a `BM x BN` tile of
    /// `C` per block of 16 x 16 threads, each thread `BM / 16` rows of 2 columns in a
    /// two-dimensional register array (its rows loaded from the bias by `load2`, stored by
    /// `store2`); tiles of `A` (transposed, a padded row per `k`) and `B` in two-dimensional
    /// shared arrays.
    #[variants((BM, BN) in [(32, 32), (64, 32)])]
    #[launch(block = (16, 16))]
    pub fn sgemm<const BM: u32, const BN: u32>(
        a: &[f32],
        b: &[f32],
        bias: &[f32],
        c: &mut [f32],
        m: u32,
        n: u32,
        k: u32,
    ) {
        let at: Shared<[[f32; BM + 1]; 16]>;
        let bt: Shared<[[f32; BN]; 16]>;
        let tx = thread_idx_x();
        let ty = thread_idx_y();
        let tid = ty * 16 + tx;
        let bm0 = block_idx_y() * BM;
        let bn0 = block_idx_x() * BN;
        let col0 = bn0 + tx * 2;
        // The accumulators start at the bias of their columns.
        let mut acc = [[0.0f32; 2]; BM / 16];
        #[unroll]
        for i in 0..BM / 16 {
            if col0 + 2 <= n && bias.is_aligned(col0, 8) {
                acc[i] = bias.load2(col0);
            } else {
                #[unroll]
                for j in 0..2 {
                    if col0 + j < n {
                        acc[i][j] = bias[col0 + j];
                    }
                }
            }
        }
        let mut k0 = 0u32;
        while k0 < k {
            #[unroll]
            for e in 0..BM * 16 / 256 {
                let idx = e * 256 + tid;
                let r = idx / 16;
                let kk = idx % 16;
                let mut v = 0.0f32;
                if bm0 + r < m && k0 + kk < k {
                    v = a[(bm0 + r) * k + k0 + kk];
                }
                at[kk][r] = v;
            }
            #[unroll]
            for e in 0..BN * 16 / 256 {
                let idx = e * 256 + tid;
                let kk = idx / BN;
                let cc = idx % BN;
                let mut v = 0.0f32;
                if k0 + kk < k && bn0 + cc < n {
                    v = b[(k0 + kk) * n + bn0 + cc];
                }
                bt[kk][cc] = v;
            }
            sync_threads();
            #[unroll]
            for kk in 0..16 {
                #[unroll]
                for i in 0..BM / 16 {
                    let av = at[kk][ty * (BM / 16) + i];
                    #[unroll]
                    for j in 0..2 {
                        acc[i][j] += av * bt[kk][tx * 2 + j];
                    }
                }
            }
            sync_threads();
            k0 += 16;
        }
        #[unroll]
        for i in 0..BM / 16 {
            let row = bm0 + ty * (BM / 16) + i;
            if row < m {
                let idx = row * n + col0;
                if col0 + 2 <= n && c.is_aligned(idx, 8) {
                    c.store2(idx, acc[i]);
                } else {
                    let r = acc[i];
                    #[unroll]
                    for j in 0..2 {
                        if col0 + j < n {
                            c[idx + j] = r[j];
                        }
                    }
                }
            }
        }
    }

    /// The elements of a tile of `staged_dot`.
    pub const STAGE_TILE: u32 = 4096;
    /// The dynamic shared memory `staged_dot` needs: two stages of `x` (f32) and of `w` (f16),
    /// and 256 partial sums (50176 bytes, over the 48 KiB a launch gets without opting in).
    pub const STAGED_DOT_SHARED: u32 = 2 * STAGE_TILE * 4 + 2 * STAGE_TILE * 2 + 256 * 4;

    /// `y[b] = Σ_i x[b * n + i] · w[i]` per block `b`, tile by tile through two stages of `x`
    /// and `w` in views of one dynamic shared buffer: `x`'s stages at byte 0, `w`'s after
    /// them, the partial sums last.
    #[launch(block = 256)]
    pub fn staged_dot(x: &[f32], w: &[f16], y: &mut [f32], n: u32) {
        let xs: Shared<[[f32; STAGE_TILE]; 2]> = dyn_shared(0);
        let ws: Shared<[[f16; STAGE_TILE]; 2]> = dyn_shared(2 * STAGE_TILE * 4);
        let part: Shared<[f32; 256]> = dyn_shared(2 * STAGE_TILE * 6);
        let tid = thread_idx_x();
        let row = block_idx_x() * n;
        let mut acc = 0.0f32;
        let mut t = 0u32;
        while t * STAGE_TILE < n {
            let s = t % 2;
            #[unroll]
            for e in 0..STAGE_TILE / 256 {
                let j = e * 256 + tid;
                let i = t * STAGE_TILE + j;
                let mut xv = 0.0f32;
                let mut wv = 0.0f16;
                if i < n {
                    xv = x[row + i];
                    wv = w[i];
                }
                xs[s][j] = xv;
                ws[s][j] = wv;
            }
            sync_threads();
            #[unroll]
            for e in 0..STAGE_TILE / 256 {
                let j = e * 256 + tid;
                acc += xs[s][j] * (ws[s][j] as f32);
            }
            t += 1;
        }
        part[tid] = acc;
        sync_threads();
        if tid == 0 {
            let mut sum = 0.0f32;
            for k in 0..256u32 {
                sum += part[k];
            }
            y[block_idx_x()] = sum;
        }
    }

    /// `y[0] = x[i + 2]`, `y[1] = x[i + 0xFFFF_FFFF]`: `u32` index sums, which wrap at 2^32
    /// before they index.
    #[launch(block = 1)]
    pub fn wrap_index(x: &[f32], y: &mut [f32], i: u32) {
        y[0] = x[i + 2];
        y[1] = x[i + 0xFFFF_FFFF];
    }
}

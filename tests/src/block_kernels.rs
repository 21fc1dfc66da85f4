//! Kernels of the shapes that tiled and byte-packed workloads take: const arguments passed by
//! name (`affine`), 8-bit arithmetic (`byte_mix`) and typed reads of packed byte records
//! (`q4_0_gemv`, GGUF's q4_0 blocks).

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
}

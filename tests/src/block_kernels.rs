//! Kernels of the shapes that tiled and byte-packed workloads take: const arguments passed by
//! name (`affine`).

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
}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32], b: u32) {
        let i = 4 * thread_idx_x();
        // The alignment must be a constant of 2, 4, 8 or 16 bytes.
        if x.is_aligned(i, b) && x.is_aligned(i, 32) {
            y.store4(i, x.load4(i));
        }
    }
}

fn main() {}

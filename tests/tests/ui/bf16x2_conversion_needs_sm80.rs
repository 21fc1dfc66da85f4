use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[target(sm_75)]
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [u32]) {
        let i = thread_idx_x();
        y[i] = bf16x2::from_f32s(x[2 * i], x[2 * i + 1]).to_bits();
    }
}

fn main() {}

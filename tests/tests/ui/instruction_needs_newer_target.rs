use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[target(sm_75)]
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [bf16]) {
        let i = thread_idx_x();
        y[i] = x[i] as bf16;
    }
}

fn main() {}

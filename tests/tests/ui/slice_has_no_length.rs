use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32]) {
        let i = thread_idx_x();
        if i < x.len() {
            y[i] = x[i];
        }
    }
}

fn main() {}

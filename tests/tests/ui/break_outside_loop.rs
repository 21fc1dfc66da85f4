use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        if thread_idx_x() > 4 {
            break;
        }
        y[0] = 1.0;
    }
}

fn main() {}

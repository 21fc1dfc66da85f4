use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(stream: &mut [f32]) {
        stream[0] = 1.0;
    }
}

fn main() {}

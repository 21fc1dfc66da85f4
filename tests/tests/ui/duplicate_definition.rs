use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = 1.0;
    }

    fn k(v: f32) -> f32 {
        v
    }
}

fn main() {}

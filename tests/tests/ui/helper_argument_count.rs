use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = twice(1.0, 2.0);
    }

    fn twice(v: f32) -> f32 {
        v * 2.0
    }
}

fn main() {}

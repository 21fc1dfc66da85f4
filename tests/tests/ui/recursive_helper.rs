use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = fact(5.0);
    }

    fn fact(v: f32) -> f32 {
        if v <= 1.0 {
            return 1.0;
        }
        v * fact(v - 1.0)
    }
}

fn main() {}

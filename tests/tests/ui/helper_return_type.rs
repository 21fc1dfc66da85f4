use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = half(3.0);
    }

    fn half(v: f32) -> f32 {
        let h = v * 0.5;
    }
}

fn main() {}

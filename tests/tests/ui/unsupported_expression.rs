use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        let f = |v: f32| v * 2.0;
        y[0] = 1.0;
    }
}

fn main() {}

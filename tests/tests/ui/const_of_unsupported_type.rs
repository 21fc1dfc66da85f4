use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    pub const NAME: &str = "kernel";
    pub const HALF: f16 = 0.5;

    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = 1.0;
    }
}

fn main() {}

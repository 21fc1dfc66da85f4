use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32]) {
        y[0] = x.read::<f32>(4);
    }
}

fn main() {}

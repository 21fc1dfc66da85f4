use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32], n: u32) {
        y[0] = x[0] + n;
    }
}

fn main() {}

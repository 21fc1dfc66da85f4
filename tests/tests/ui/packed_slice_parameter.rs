use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f16x2], y: &mut [f32]) {
        let v = x[0];
        y[0] = v.lo() as f32;
    }
}

fn main() {}

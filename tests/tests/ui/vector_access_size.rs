use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32]) {
        let v = x.load3(0u32);
        y[0] = v[0];
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32], n: u32) {
        let v: f32 = n;
        y[0] = v;
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32], n: u32) {
        let total = n;
        total = total + 1;
        y[0] = total as f32;
    }
}

fn main() {}

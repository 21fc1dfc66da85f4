use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32], n: u32) {
        let mut acc = [0.0f32; 4];
        for i in 0..n {
            acc[i % 4] += 1.0;
        }
        y[0] = acc[0];
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32], n: u32) {
        #[unroll]
        for i in 0..n {
            y[i] = 0.0;
        }
    }
}

fn main() {}

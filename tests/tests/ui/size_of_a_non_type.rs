use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [u32]) {
        y[0] = size_of::<y>();
    }
}

fn main() {}

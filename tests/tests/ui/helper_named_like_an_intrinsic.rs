use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    fn warp_size() -> u32 {
        64
    }

    #[launch(block = 32)]
    pub fn k(y: &mut [u32]) {
        y[0] = warp_size();
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[variants(BM in [64], BN in [32])]
    #[launch(block = 32)]
    pub fn k<const BM: u32>(y: &mut [f32]) {
        y[0] = BM as f32;
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[variants(BM in [64, 2048])]
    #[launch(block = BM)]
    pub fn k<const BM: u32>(y: &mut [f32]) {
        y[0] = 1.0;
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    pub struct Params {
        pub n: u32,
        pub name: String,
        pub pair: f16x2,
    }

    #[launch(block = 32)]
    pub fn k(p: Params, y: &mut [u32]) {
        y[0] = p.n;
    }
}

fn main() {}

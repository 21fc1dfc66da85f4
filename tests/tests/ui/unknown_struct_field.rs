use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    pub struct Params {
        pub n: u32,
        pub scale: f32,
    }

    #[launch(block = 32)]
    pub fn k(p: Params, y: &mut [f32]) {
        y[0] = p.scale * (p.count as f32);
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32]) {
        let mut acc = [[0.0f32; 8]; 8];
        acc[1] = x.load4(0);
        y[0] = acc[1][0];
    }
}

fn main() {}

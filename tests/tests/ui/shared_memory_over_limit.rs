use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 256)]
    pub fn k(y: &mut [f32]) {
        let a: Shared<[f32; 8192]>;
        let b: Shared<[f32; 8192]>;
        a[0] = 1.0;
        b[0] = a[0];
        y[0] = b[0];
    }
}

fn main() {}

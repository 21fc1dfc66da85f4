use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        let a: Shared<[f32; 64]> = dyn_shared(0);
        let b: Shared<[f32; 64]> = dyn_shared(260);
        let c: Shared<[f32]> = dyn_shared(512);
        y[0] = a[0] + b[0] + c[0];
    }
}

fn main() {}

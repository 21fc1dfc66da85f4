use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        let t: Shared<[[f32; 33]; 32]>;
        t[0][thread_idx_x()] = 1.0;
        let row = t[1];
        y[0] = row[0];
    }
}

fn main() {}

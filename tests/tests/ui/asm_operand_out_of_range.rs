use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[u32], y: &mut [u32]) {
        let i = thread_idx_x();
        let r: u32 = asm!("add.u32 {0}, {1}, {2};", out(u32), x[i]);
        y[i] = r;
    }
}

fn main() {}

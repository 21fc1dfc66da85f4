use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(flags: &[u32], halves: &mut [u16], y: &mut [u32]) {
        let s: Shared<[u32; 32]>;
        let i = thread_idx_x();
        flags.store_release(i, 1u32);
        halves.store_release(i, 1u16);
        y[i] = s.load_acquire(i);
    }
}

fn main() {}

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], y: &mut [f32]) {
        let i = thread_idx_x();
        y[i] = x.get_unchecked(i);
        unsafe {
            helper(y, i);
        }
    }

    // A caller's `unsafe` block does not reach into a helper's body.
    fn helper(y: &mut [f32], i: u32) {
        y.store4_unchecked(i, [0.0; 4]);
    }
}

fn main() {}

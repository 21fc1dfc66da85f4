use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(x: &[f32], w: &[u32], y: &mut [i32]) {
        let i = thread_idx_x();
        y[i] = x[i].dp4a(w[i], 0);
        y[i] = (w[i] as i32).dp4a(x[i], 0);
        y[i] = w[i].prmt(x[i], 0x3210u32) as i32;
        y[i] = shfl_xor(w[i] as u8, 1u32) as i32;
    }
}

fn main() {}

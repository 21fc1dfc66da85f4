use pagesift_gpu::{ptx_kernel, DeviceBuffer, Gpu, LaunchConfig};

ptx_kernel! {
    /// Copies without bounds checks: its launch is an `unsafe fn`.
    #[launch(block = 32)]
    pub fn copy_unchecked(x: &[f32], y: &mut [f32]) {
        let i = thread_idx_x();
        unsafe {
            y.set_unchecked(i, x.get_unchecked(i));
        }
    }
}

fn main() -> pagesift_gpu::Result<()> {
    let gpu = Gpu::new(0)?;
    let x = DeviceBuffer::<f32>::alloc(&gpu, 32)?;
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, 32)?;
    copy_unchecked::launch(&gpu.default_stream(), LaunchConfig::grid_1d(1), &x, &mut y)
}

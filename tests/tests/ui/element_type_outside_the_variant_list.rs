use pagesift_gpu::{ptx_kernel, DeviceBuffer, Gpu, LaunchConfig};

ptx_kernel! {
    #[variants(T in [f32, f16])]
    #[launch(block = 32)]
    pub fn copy<T>(x: &[T], y: &mut [T]) {
        let i = thread_idx_x();
        if (i as u64) < x.len() {
            y[i] = x[i];
        }
    }
}

fn main() {
    let gpu = Gpu::new(0).unwrap();
    let x = DeviceBuffer::from_host(&gpu, &[1u32]).unwrap();
    let mut y = DeviceBuffer::from_host(&gpu, &[0u32]).unwrap();
    copy::launch(&gpu.default_stream(), LaunchConfig::grid_1d(1), &x, &mut y).unwrap();
}

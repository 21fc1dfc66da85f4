use pagesift_gpu::{ptx_kernel, DeviceBuffer, Gpu, LaunchConfig};

#[derive(Clone, Copy)]
pub enum Act {
    Relu,
}

ptx_kernel! {
    #[variants(ACT in [Relu])]
    #[launch(block = 32)]
    pub fn k<const ACT: Act>(x: &[f32], y: &mut [f32], n: u32) {
        let i = thread_idx_x();
        y[i] = x[i] * undefined_scale;
        let bad: u32 = x[i];
    }
}

// The wrapper is still declared with its full signature: no errors here.
fn run(gpu: &Gpu) -> pagesift_gpu::Result<()> {
    let x = DeviceBuffer::from_host(gpu, &[1.0f32; 4])?;
    let mut y = DeviceBuffer::from_host(gpu, &[0.0f32; 4])?;
    let stream = gpu.default_stream();
    k::launch(&stream, LaunchConfig::grid_1d(1), Act::Relu, &x, &mut y, 4)?;
    let _ = k::VARIANTS.len();
    Ok(())
}

fn main() {
    let _ = run;
}

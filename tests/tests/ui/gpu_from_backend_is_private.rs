// No outside backend can open a device.
fn main() {
    let _ = pagesift_gpu::Gpu::from_backend;
}

// Raw stream handles stay inside the crate.
fn main() {
    let gpu = pagesift_gpu::Gpu::new(0).unwrap();
    let _ = gpu.default_stream().raw();
}

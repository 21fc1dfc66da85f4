// The backend's methods take raw handles and addresses: safe code cannot reach it.
fn main() {
    let gpu = pagesift_gpu::Gpu::new(0).unwrap();
    let _ = gpu.backend();
}

// The process-wide driver backend is not reachable from safe code.
fn main() {
    let _ = pagesift_gpu::driver::cuda::CudaBackend::global();
}

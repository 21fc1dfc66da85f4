//! GEMM against cuBLAS on the same device buffers and the same stream, in one process: the
//! comparison of [`pagesift_gpu::bench::gemm`] (what each column measures and how it is timed
//! is documented there), also run by `pagesift-gpu bench gemm`.
//!
//! `PAGESIFT_BENCH_SHAPES=MxNxK[:KN],..` runs those shapes instead of the default list,
//! `PAGESIFT_BENCH_MODES=F32,Tf32x3,Tf32,Bf16,F16` those modes (f32 inputs at a precision, or
//! 16-bit inputs and outputs; `PAGESIFT_BENCH_PRECISIONS` is the older name);
//! `PAGESIFT_CUBLAS` names the cuBLAS library to load. Without a device it prints one line and
//! exits 0.

use pagesift_gpu::bench::{run_gemm, GemmBenchOptions};
use pagesift_gpu::Gpu;

fn main() {
    let opts = match GemmBenchOptions::from_env() {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("gemm bench: {e}");
            std::process::exit(2);
        }
    };
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("gemm bench: skipped, no device: {e}");
            return;
        }
    };
    if let Err(e) = run_gemm(&gpu, &opts, &mut std::io::stdout().lock()) {
        eprintln!("gemm bench failed: {e}");
        std::process::exit(1);
    }
}

//! The kernels over quantized weights against the copy bandwidth and cuBLAS on the same
//! device, in one process: the comparison of [`pagesift_gpu::bench::quant`] (what each column
//! measures and how it is timed is documented there), also run by `pagesift-gpu bench quant`.
//!
//! `PAGESIFT_BENCH_FORMATS=Q4_0,Q8_0,Q4_K,BF16,F16`, `PAGESIFT_BENCH_SHAPES=N_OUTxN_IN,..` and
//! `PAGESIFT_BENCH_TOKENS=1,2,..` replace the default lists. Without a device it prints one
//! line and exits 0.

use pagesift_gpu::bench::quant::{parse_formats, parse_quant_shapes, parse_tokens};
use pagesift_gpu::bench::{run_quant, QuantBenchOptions};
use pagesift_gpu::Gpu;

/// The default options with the lists the environment gives.
fn options() -> Result<QuantBenchOptions, String> {
    let mut opts = QuantBenchOptions::default();
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(v) = var("PAGESIFT_BENCH_FORMATS") {
        opts.formats = parse_formats(&v)?;
    }
    if let Some(v) = var("PAGESIFT_BENCH_SHAPES") {
        opts.shapes = parse_quant_shapes(&v)?;
    }
    if let Some(v) = var("PAGESIFT_BENCH_TOKENS") {
        opts.tokens = parse_tokens(&v)?;
    }
    Ok(opts)
}

fn main() {
    let opts = match options() {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("quant bench: {e}");
            std::process::exit(2);
        }
    };
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("quant bench: skipped, no device: {e}");
            return;
        }
    };
    if let Err(e) = run_quant(&gpu, &opts, &mut std::io::stdout().lock()) {
        eprintln!("quant bench failed: {e}");
        std::process::exit(1);
    }
}

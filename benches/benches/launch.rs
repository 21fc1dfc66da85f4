//! Launch overhead: host time per launch of an empty kernel through the safe API against the
//! driver's `cuLaunchKernel` called directly, same kernel, same stream, same run.
//!
//! Launches go in batches smaller than the driver's launch queue, and only the submitting loop
//! is timed (each batch is synchronized outside the timed region), so the numbers are host
//! overhead, not device throughput. Prints µs per launch and the ratios to the raw call.
//! Without a device it prints one line and exits 0.

// `Error` carries its context (JIT log, PTX path) inline; it is large, and rare.
#![allow(clippy::result_large_err)]

use std::time::{Duration, Instant};

use pagesift_gpu::__private::{self, KernelArg};
use pagesift_gpu::{driver, BackendKind, Function, Gpu, KernelVariant, LaunchConfig, Stream};

const PTX: &str = "
.version 7.0
.target sm_70
.address_size 64

.visible .entry empty()
{
	ret;
}
";

static EMPTY: KernelVariant = KernelVariant {
    kernel: "empty",
    entry: "empty",
    consts: &[],
    target: "sm_70",
    ptx_version: (7, 0),
    block: [32, 1, 1],
    static_shared_bytes: 0,
    dynamic_shared: false,
    params: &[],
    ptx_params: 0,
    shared: &[],
    ptx: PTX,
};

const BATCH: usize = 256;

/// Host time of `batches` batches of `BATCH` launches made by `submit`, per launch, as the
/// median over batches.
fn per_launch(
    stream: &Stream,
    batches: usize,
    mut submit: impl FnMut() -> pagesift_gpu::Result<()>,
) -> pagesift_gpu::Result<f64> {
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        submit()?;
        times.push(t.elapsed());
        stream.synchronize()?;
    }
    times.sort();
    let median: Duration = times[times.len() / 2];
    Ok(median.as_secs_f64() * 1e6 / BATCH as f64)
}

fn run(gpu: &Gpu) -> pagesift_gpu::Result<()> {
    let stream = gpu.new_stream()?;
    let module = gpu.load_ptx("launch_bench", PTX)?;
    let function: Function = module.function("empty")?;
    let cfg = LaunchConfig::grid_1d(1);
    let raw_ok = gpu.backend_kind() == BackendKind::Cuda;
    let batches = if raw_ok { 200 } else { 4 };

    let raw = || {
        driver::cuda::bench_raw_launch_loop(&stream, &function, [1, 1, 1], [32, 1, 1], &[], BATCH)
    };
    let variant = || {
        for _ in 0..BATCH {
            __private::launch(&stream, &EMPTY, &cfg, &[], &[])?;
        }
        Ok(())
    };
    let raw_ptx = || {
        for _ in 0..BATCH {
            // SAFETY: `empty` takes no parameters and touches no memory.
            unsafe { stream.launch(&function, [1, 1, 1], [32, 1, 1], 0, &[] as &[KernelArg]) }?;
        }
        Ok(())
    };

    // Warm up: load the variant's module, fill the driver's caches.
    per_launch(&stream, 2, variant)?;
    per_launch(&stream, 2, raw_ptx)?;
    if raw_ok {
        per_launch(&stream, 2, raw)?;
    }

    // Interleave the three paths so that drift hits them alike.
    let (mut t_raw, mut t_variant, mut t_ptx) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        if raw_ok {
            t_raw.push(per_launch(&stream, batches, raw)?);
        }
        t_variant.push(per_launch(&stream, batches, variant)?);
        t_ptx.push(per_launch(&stream, batches, raw_ptx)?);
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "launch overhead on {} ({:?}), empty kernel, 1x32 threads, batches of {BATCH}:",
        gpu.name(),
        gpu.backend_kind()
    );
    let (variant_us, ptx_us) = (best(&t_variant), best(&t_ptx));
    if raw_ok {
        let raw_us = best(&t_raw);
        println!("  cuLaunchKernel (raw function pointer)  {raw_us:8.3} µs/launch");
        println!(
            "  __private::launch (KernelVariant)      {variant_us:8.3} µs/launch  ratio {:.3}",
            variant_us / raw_us
        );
        println!(
            "  Stream::launch (raw PTX Function)      {ptx_us:8.3} µs/launch  ratio {:.3}",
            ptx_us / raw_us
        );
    } else {
        println!("  (no raw driver baseline on this device)");
        println!("  __private::launch (KernelVariant)      {variant_us:8.3} µs/launch");
        println!("  Stream::launch (raw PTX Function)      {ptx_us:8.3} µs/launch");
    }
    Ok(())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing here takes options.
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!(
                "launch bench skipped: no GPU ({})",
                e.to_string().replace('\n', " ")
            );
            return;
        }
    };
    if let Err(e) = run(&gpu) {
        eprintln!("launch bench failed: {e}");
        std::process::exit(1);
    }
}

//! Launch overhead: host time per launch of an empty kernel through the safe API against the
//! driver's `cuLaunchKernel` called directly, same kernel, same stream, same run; and of a
//! `ptx_kernel!` kernel taking one `&[f32]` and one `&mut [f32]` through its generated wrapper
//! (argument checks and buffer tracking included) against `cuLaunchKernel` of the same function
//! with as many parameters as its PTX declares (all zero, so it touches no memory).
//!
//! Launches go in batches smaller than the driver's launch queue, and only the submitting loop
//! is timed (each batch is synchronized outside the timed region), so the numbers are host
//! overhead, not device throughput. Prints µs per launch and the ratios to the raw call.
//! Without a device it prints one line and exits 0.

use pagesift_gpu::__private::{self, KernelArg};
use pagesift_gpu::{
    driver, ptx_kernel, timing, BackendKind, DeviceBuffer, Function, Gpu, KernelVariant,
    LaunchConfig, Stream,
};

ptx_kernel! {
    /// `y[i] = x[i]` for `i < n`: one read and one written slice, the buffer-tracking case of
    /// the bench (launched with `n = 0`, so it touches no memory).
    #[launch(block = 32)]
    pub fn copy_prefix(x: &[f32], y: &mut [f32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            y[i] = x[i];
        }
    }
}

/// One zero argument per `.param` line of the entry's PTX (its parameter list, up to the
/// body's `{`), sized as the line declares: what the raw call passes to the same function
/// whatever parameters the compiler adds.
fn zero_args(ptx: &str) -> Vec<KernelArg> {
    let start = ptx.find(".entry").unwrap_or(0);
    let header = &ptx[start..];
    let header = &header[..header.find('{').unwrap_or(header.len())];
    header
        .lines()
        .filter(|l| l.trim_start().starts_with(".param"))
        .map(|l| {
            if l.contains("64") {
                KernelArg::from(0u64)
            } else if l.contains("32") {
                KernelArg::from(0u32)
            } else if l.contains("16") {
                KernelArg::from(0u16)
            } else {
                KernelArg::from(0u8)
            }
        })
        .collect()
}

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
/// median over batches (each batch waited for outside the timed region).
fn per_launch(
    stream: &Stream,
    batches: usize,
    submit: impl FnMut() -> pagesift_gpu::Result<()>,
) -> pagesift_gpu::Result<f64> {
    let median = timing::host_median(stream, 0, batches, submit)?;
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
        // SAFETY: `empty` takes no parameters and touches no memory.
        unsafe {
            driver::cuda::bench_raw_launch_loop(
                &stream,
                &function,
                [1, 1, 1],
                [32, 1, 1],
                &[],
                BATCH,
            )
        }
    };
    let variant = || {
        for _ in 0..BATCH {
            // SAFETY: `empty` takes no parameters and touches no memory.
            unsafe { __private::launch(&stream, &EMPTY, &cfg, &[], &[]) }?;
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
    timing::warm_up(&stream, 2, variant)?;
    timing::warm_up(&stream, 2, raw_ptx)?;
    if raw_ok {
        timing::warm_up(&stream, 2, raw)?;
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
        typed(gpu, &stream, batches)?;
    } else {
        println!("  (no raw driver baseline on this device)");
        println!("  __private::launch (KernelVariant)      {variant_us:8.3} µs/launch");
        println!("  Stream::launch (raw PTX Function)      {ptx_us:8.3} µs/launch");
    }
    Ok(())
}

/// The generated wrapper of `copy_prefix` (two slices: device checks, buffer tracking)
/// against `cuLaunchKernel` of the same function with the same parameter count.
fn typed(gpu: &Gpu, stream: &Stream, batches: usize) -> pagesift_gpu::Result<()> {
    let variant = &copy_prefix::VARIANTS[0];
    let module = gpu.load_ptx("launch_bench_typed", variant.ptx)?;
    let function = module.function(variant.entry)?;
    let args = zero_args(variant.ptx);
    let x = DeviceBuffer::<f32>::zeroed(gpu, 1024)?;
    let mut y = DeviceBuffer::<f32>::zeroed(gpu, 1024)?;
    let cfg = LaunchConfig::grid_1d(1);
    let raw = || {
        // SAFETY: every parameter is zero: `n` (and any length the compiler passes) is 0, so
        // no thread accesses memory.
        unsafe {
            driver::cuda::bench_raw_launch_loop(
                stream,
                &function,
                [1, 1, 1],
                variant.block,
                &args,
                BATCH,
            )
        }
    };
    let mut wrapper = || {
        for _ in 0..BATCH {
            copy_prefix::launch(stream, cfg, &x, &mut y, 0)?;
        }
        Ok(())
    };
    timing::warm_up(stream, 2, &mut wrapper)?;
    timing::warm_up(stream, 2, raw)?;
    let (mut t_raw, mut t_wrapper) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        t_raw.push(per_launch(stream, batches, raw)?);
        t_wrapper.push(per_launch(stream, batches, &mut wrapper)?);
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (raw_us, wrapper_us) = (best(&t_raw), best(&t_wrapper));
    let ratio = wrapper_us / raw_us;
    println!(
        "typed kernel `copy_prefix(&[f32], &mut [f32], u32)`, {} PTX parameters:",
        args.len()
    );
    println!("  cuLaunchKernel (raw function pointer)  {raw_us:8.3} µs/launch");
    println!(
        "  copy_prefix::launch (generated)        {wrapper_us:8.3} µs/launch  ratio {ratio:.3} ({})",
        if ratio <= 1.10 {
            "within 10%"
        } else {
            "MORE than 10% over the raw call"
        }
    );
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

//! Activation throughput against a device-to-device copy of the same bytes, in one run.
//!
//! `y = act(x + bias)` over 256M f32 (1 GiB in, 1 GiB out; 16K elements on the emulated device)
//! for every activation, timed with events (2 warm-ups, median of 15 runs), next to
//! `cuMemcpyDtoD` of the same buffers. Reports GB/s (bytes read + written) and the percentage of
//! the copy's bandwidth. Also f16 / bf16 for a few activations. Without a device it prints one
//! line and exits 0.

use half::{bf16, f16};
use pagesift_gpu::ops::act::{activation, ActElement};
use pagesift_gpu::{Act, ActArgs, BackendKind, DeviceBuffer, Event, Gpu, Result, Stream};

const WARMUP: usize = 2;
const RUNS: usize = 15;
const COLS: usize = 4096;

fn main() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("act bench: skipped, no device: {e}");
            return;
        }
    };
    if let Err(e) = run(&gpu) {
        eprintln!("act bench failed: {e}");
        std::process::exit(1);
    }
}

fn run(gpu: &Gpu) -> Result<()> {
    let emulated = gpu.backend_kind() == BackendKind::Emulated;
    let len = if emulated { 1 << 14 } else { 1 << 28 };
    println!(
        "act bench on {} ({} SMs): y = act(x + bias), {len} elements, median of {RUNS}",
        gpu.name(),
        gpu.props().sm_count
    );
    println!(
        "{:<14} {:>5} {:>10} {:>10} {:>10} {:>8}",
        "activation", "type", "time ms", "GB/s", "copy GB/s", "% copy"
    );
    bench_type::<f32>(gpu, len, &Act::ALL)?;
    let half_len = if emulated { len } else { len * 2 };
    bench_type::<f16>(gpu, half_len, &[Act::Identity, Act::Gelu, Act::Silu])?;
    bench_type::<bf16>(gpu, half_len, &[Act::Identity, Act::Gelu, Act::Silu])?;
    Ok(())
}

fn bench_type<T: ActElement>(gpu: &Gpu, len: usize, acts: &[Act]) -> Result<()> {
    let stream = gpu.default_stream();
    let host: Vec<T> = (0..len)
        .map(|i| T::from_f32(((i * 7919) % 2003) as f32 / 125.0 - 8.0))
        .collect();
    let x = DeviceBuffer::from_host(gpu, &host)?;
    let bias = DeviceBuffer::from_host(gpu, &host[..COLS])?;
    let mut y = DeviceBuffer::<T>::alloc(gpu, len)?;
    let bytes = 2.0 * (len * std::mem::size_of::<T>()) as f64;
    let copy_ms = median_ms(gpu, &stream, &mut || stream.copy_dtod_async(&mut y, &x))?;
    let copy_gbps = bytes / copy_ms / 1e6;
    for &act in acts {
        let args = ActArgs::new(act).with_bias(bias.slice(..)?, COLS);
        let ms = median_ms(gpu, &stream, &mut || activation(&stream, &args, &x, &mut y))?;
        let gbps = bytes / ms / 1e6;
        println!(
            "{:<14} {:>5} {:>10.4} {:>10.1} {:>10.1} {:>7.1}%",
            act.name(),
            T::NAME,
            ms,
            gbps,
            copy_gbps,
            100.0 * gbps / copy_gbps
        );
    }
    Ok(())
}

/// The median time of `f` in milliseconds, from events around each run, after warm-ups.
fn median_ms(gpu: &Gpu, stream: &Stream, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..WARMUP {
        f()?;
    }
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Event::new(gpu)?;
        let end = Event::new(gpu)?;
        start.record(stream)?;
        f()?;
        end.record(stream)?;
        end.synchronize()?;
        times.push(f64::from(end.elapsed_ms(&start)?).max(1e-6));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[RUNS / 2])
}

//! Activation throughput against a device-to-device copy of the same bytes, in one run.
//!
//! `y = act(x + bias)` over 256M f32 (1 GiB in, 1 GiB out; 16K elements on the emulated device)
//! for every activation, timed with events (2 warm-ups, median of 15 runs), next to
//! `cuMemcpyDtoD` of the same buffers timed the same way right before it (a copy per
//! activation, so that a drift of the device's clocks or a slow copy measurement moves one
//! row, not a whole type). Reports GB/s (bytes read + written) and the percentage of the
//! copy's bandwidth; the same for f16 and bf16 (512M elements). Without a device it prints one
//! line and exits 0.
//!
//! With `PAGESIFT_BENCH_SWEEP` set it also prints the percentage of the copy by grid size (8 to
//! 256 blocks per SM, and one vector per thread) for a copy kernel in the activation kernels'
//! memory pattern (1 to 8 vectors in flight per thread) and for every activation: the data
//! behind the grid rules of [`pagesift_gpu::ops::act::Geometry`].

use half::{bf16, f16};
use pagesift_gpu::ops::act::{activation, activation_with_grid_limit, ActElement};
use pagesift_gpu::{
    ptx_kernel, timing, Act, ActArgs, BackendKind, DeviceBuffer, Gpu, LaunchConfig, Result,
};

ptx_kernel! {
    /// A copy in the activation kernels' memory pattern, `U` 16-byte vectors in flight per
    /// thread and iteration of a grid-stride loop: what our generated code reaches with no
    /// arithmetic (a probe for the grid size and unroll, not a product kernel).
    #[variants(U in [1, 2, 4, 8])]
    #[launch(block = 256)]
    pub fn probe_copy<const U: u32>(x: &[f32], y: &mut [f32], nvec: u64) {
        let nt = (grid_dim_x() * block_dim_x()) as u64;
        let mut j = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
        while j + (U as u64 - 1) * nt < nvec {
            let mut a = [0.0f32; 32];
            #[unroll]
            for u in 0..U {
                let v = x.load4_nc(4 * (j + u as u64 * nt));
                #[unroll]
                for l in 0..4 {
                    a[4 * u + l] = v[l];
                }
            }
            #[unroll]
            for u in 0..U {
                let v = [a[4 * u], a[4 * u + 1], a[4 * u + 2], a[4 * u + 3]];
                y.store4(4 * (j + u as u64 * nt), v);
            }
            j += U as u64 * nt;
        }
        while j < nvec {
            y.store4(4 * j, x.load4_nc(4 * j));
            j += nt;
        }
    }
}

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
    bench_type::<f16>(gpu, half_len, &Act::ALL)?;
    bench_type::<bf16>(gpu, half_len, &Act::ALL)?;
    if std::env::var_os("PAGESIFT_BENCH_SWEEP").is_some() {
        sweep(gpu, len)?;
    }
    Ok(())
}

/// With `PAGESIFT_BENCH_SWEEP` set: the grid size (blocks per SM) against the copy, for a copy
/// probe at several unrolls and for identity / gelu / gelu-tanh with a bias.
fn sweep(gpu: &Gpu, len: usize) -> Result<()> {
    let stream = gpu.default_stream();
    let host: Vec<f32> = (0..len)
        .map(|i| ((i * 7919) % 2003) as f32 / 125.0 - 8.0)
        .collect();
    let x = DeviceBuffer::from_host(gpu, &host)?;
    let bias = DeviceBuffer::from_host(gpu, &host[..COLS])?;
    let mut y = DeviceBuffer::<f32>::alloc(gpu, len)?;
    let bytes = 8.0 * len as f64;
    let copy_ms = timing::median_ms(&stream, WARMUP, RUNS, || stream.copy_dtod_async(&mut y, &x))?;
    let sms = gpu.props().sm_count;
    let nvec = (len / 4) as u64;
    println!(
        "sweep: % of the copy ({:.1} GB/s) by blocks per SM",
        bytes / copy_ms / 1e6
    );
    let per_sm = [8u32, 16, 32, 64, 128, 256, 0];
    let head: Vec<String> = per_sm
        .iter()
        .map(|&k| if k == 0 { "all".into() } else { k.to_string() })
        .collect();
    println!(
        "{:<16} {}",
        "kernel",
        head.iter().map(|h| format!("{h:>7}")).collect::<String>()
    );
    for u in [1u32, 2, 4, 8] {
        let mut row = String::new();
        for &k in &per_sm {
            let per_block = 256 * u64::from(u);
            let blocks = if k == 0 {
                nvec.div_ceil(per_block) as u32
            } else {
                (sms * k).min(nvec.div_ceil(per_block) as u32)
            };
            let cfg = LaunchConfig::grid_1d(blocks);
            let ms = timing::median_ms(&stream, WARMUP, RUNS, || {
                probe_copy::launch(&stream, cfg, u, &x, &mut y, nvec)
            })?;
            row += &format!("{:>6.1}%", 100.0 * copy_ms / ms);
        }
        println!("{:<16} {row}", format!("copy x{u}"));
    }
    sweep_acts(gpu, &x, &bias, &mut y, copy_ms, &per_sm, &Act::ALL)?;
    drop((x, y, bias));
    let host: Vec<f16> = host.iter().flat_map(|&v| [f16::from_f32(v); 2]).collect();
    let x = DeviceBuffer::from_host(gpu, &host)?;
    let bias = DeviceBuffer::from_host(gpu, &host[..COLS])?;
    let mut y = DeviceBuffer::<f16>::alloc(gpu, host.len())?;
    let acts = [Act::Identity, Act::Gelu, Act::Silu, Act::Tanh];
    sweep_acts(gpu, &x, &bias, &mut y, copy_ms, &per_sm, &acts)
}

/// One row per activation of [`sweep`]: `y = act(x + bias)` against the copy time `copy_ms`
/// of the same bytes, for each grid of `per_sm` blocks per SM (0: the grid that covers the
/// data, one vector per thread).
fn sweep_acts<T: ActElement>(
    gpu: &Gpu,
    x: &DeviceBuffer<T>,
    bias: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    copy_ms: f64,
    per_sm: &[u32],
    acts: &[Act],
) -> Result<()> {
    let stream = gpu.default_stream();
    let sms = gpu.props().sm_count;
    for &act in acts {
        let args = ActArgs::new(act).with_bias(bias.slice(..)?, COLS);
        let mut row = String::new();
        for &k in per_sm {
            let limit = if k == 0 { u32::MAX } else { sms * k };
            let ms = timing::median_ms(&stream, WARMUP, RUNS, || {
                activation_with_grid_limit(&stream, &args, x, y, Some(limit))
            })?;
            row += &format!("{:>6.1}%", 100.0 * copy_ms / ms);
        }
        println!(
            "{:<16} {row}",
            format!("{} {}", act.name(), T::DTYPE.name())
        );
    }
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
    for &act in acts {
        let copy_ms =
            timing::median_ms(&stream, WARMUP, RUNS, || stream.copy_dtod_async(&mut y, &x))?;
        let copy_gbps = bytes / copy_ms / 1e6;
        let args = ActArgs::new(act).with_bias(bias.slice(..)?, COLS);
        let ms = timing::median_ms(&stream, WARMUP, RUNS, || {
            activation(&stream, &args, &x, &mut y)
        })?;
        let gbps = bytes / ms / 1e6;
        println!(
            "{:<14} {:>5} {:>10.4} {:>10.1} {:>10.1} {:>7.1}%",
            act.name(),
            T::DTYPE.name(),
            ms,
            gbps,
            copy_gbps,
            100.0 * gbps / copy_gbps
        );
    }
    Ok(())
}

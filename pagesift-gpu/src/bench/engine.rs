//! The engine adapter's own cost: [`crate::engine::Adapter::matmul`] of one job against the
//! same work without the adapter (copy the activations in, [`crate::ops::quant::qgemm`],
//! wait, copy the outputs out, on buffers allocated once), each timed on the host around the
//! whole call (the median of [`RUNS`] calls after [`WARMUP`]), in one process on one device.
//! The ratio is the adapter's time over the bare one (1.10: the adapter adds 10%).

use std::io::Write;
use std::time::{Duration, Instant};

use super::{BenchError, SplitMix64};
use crate::engine::{Adapter, Job};
use crate::gemm::{BLayout, Gemm};
use crate::ops::quant::qgemm;
use crate::quant::{quantize, QuantMatrix, WeightFormat};
use crate::{BackendKind, DeviceBuffer, Gpu};

/// Calls before the timed ones.
pub const WARMUP: usize = 5;
/// Timed calls of each; the median is reported.
pub const RUNS: usize = 51;

/// What `bench engine` measures.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineBenchOptions {
    pub format: WeightFormat,
    /// Weight shapes `(n_out, n_in)`.
    pub shapes: Vec<(usize, usize)>,
    pub tokens: Vec<usize>,
}

impl Default for EngineBenchOptions {
    /// Q4_0 at 1 and 4 tokens on 4096 × 4096 and 14336 × 4096.
    fn default() -> Self {
        EngineBenchOptions {
            format: WeightFormat::Q4_0,
            shapes: vec![(4096, 4096), (14336, 4096)],
            tokens: vec![1, 4],
        }
    }
}

/// The median host time of `f` over [`RUNS`] calls after [`WARMUP`].
fn median(mut f: impl FnMut() -> crate::Result<()>) -> crate::Result<Duration> {
    for _ in 0..WARMUP {
        f()?;
    }
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[RUNS / 2])
}

/// Runs the comparison of the module docs on `gpu`, one row per shape and token count.
pub fn run_engine(
    gpu: &Gpu,
    opts: &EngineBenchOptions,
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let emulated = gpu.backend_kind() == BackendKind::Emulated;
    writeln!(
        out,
        "engine bench on {}: host time of a whole call (copies in and out included), median of {RUNS} after {WARMUP}; {} weights",
        gpu.name(),
        opts.format
    )?;
    writeln!(
        out,
        "{:>13} {:>6} {:>10} {:>12} {:>8}",
        "n_out x n_in", "tokens", "bare µs", "adapter µs", "adapter/bare"
    )?;
    let adapter = Adapter::with_gpu(gpu.clone())?;
    let stream = gpu.default_stream();
    let mut rng = SplitMix64::new(11);
    for &(n_out, n_in) in &opts.shapes {
        let (n_out, n_in) = if emulated {
            (n_out.min(64), n_in.min(512))
        } else {
            (n_out, n_in)
        };
        let values = rng.signed_units(n_out * n_in)?;
        let bytes = quantize(opts.format, &values, n_out, n_in)?;
        let matrix = QuantMatrix::new(opts.format, &bytes, n_out, n_in)?;
        let Some(dev) = adapter.upload(&matrix)? else {
            writeln!(
                out,
                "{n_out}x{n_in}: the weights do not fit the device's free memory"
            )?;
            continue;
        };
        let w = DeviceBuffer::from_host(gpu, &bytes)?;
        for &tokens in &opts.tokens {
            let x = rng.signed_units(tokens * n_in)?;
            let mut y = vec![0.0f32; tokens * n_out];
            let mut xd = DeviceBuffer::<f32>::alloc(gpu, x.len())?;
            let mut yd = DeviceBuffer::<f32>::alloc(gpu, y.len())?;
            let g = Gemm::new(tokens, n_out, n_in, BLayout::NK);
            let bare = median(|| {
                xd.copy_from_host(&x)?;
                qgemm(&stream, &g, opts.format, &w, &xd, None, None, &mut yd)?;
                stream.synchronize()?;
                yd.copy_to_host(&mut y)
            })?;
            let through =
                median(|| adapter.matmul(&x, tokens, n_in, &mut [Job::new(&dev, &mut y)]))?;
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            writeln!(
                out,
                "{:>13} {:>6} {:>10.1} {:>12.1} {:>11.3}x",
                format!("{n_out}x{n_in}"),
                tokens,
                us(bare),
                us(through),
                us(through) / us(bare)
            )?;
        }
    }
    Ok(())
}

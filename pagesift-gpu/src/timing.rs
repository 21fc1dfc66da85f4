//! Timing of device work: the median of several runs after warm-ups, measured either on the
//! device with [`Event`]s ([`median_ms`]) or on the host around the submitting call
//! ([`host_median`]). The self test and the benches time everything through these.
//!
//! ```no_run
//! use pagesift_gpu::{timing, DeviceBuffer, Gpu};
//! # fn main() -> pagesift_gpu::Result<()> {
//! let gpu = Gpu::new(0)?;
//! let stream = gpu.default_stream();
//! let x = DeviceBuffer::<f32>::zeroed(&gpu, 1 << 20)?;
//! let mut y = DeviceBuffer::<f32>::alloc(&gpu, 1 << 20)?;
//! // 2 warm-ups, then the median of 15 copies timed with events.
//! let ms = timing::median_ms(&stream, 2, 15, || stream.copy_dtod_async(&mut y, &x))?;
//! println!("{:.1} GB/s", 8.0 * (1 << 20) as f64 / ms / 1e6);
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, Instant};

use crate::driver::{Event, Stream};
use crate::error::{Error, InvalidArgument, Result};

/// Runs `f` `warmup` times, waiting for `stream` after each run (so that queued warm-up work
/// neither overlaps what is timed next nor overfills the driver's launch queue).
pub fn warm_up(stream: &Stream, warmup: usize, mut f: impl FnMut() -> Result<()>) -> Result<()> {
    for _ in 0..warmup {
        f()?;
        stream.synchronize()?;
    }
    Ok(())
}

/// The median device time of the work `f` queues on `stream`, in milliseconds: `warmup` runs
/// first ([`warm_up`]), then `runs` runs, each between two [`Event`]s recorded on `stream` and
/// waited for before the next. A time below 1 ns counts as 1 ns (so rates stay finite). With an
/// even `runs` the upper of the two middle times.
///
/// [`Error::InvalidArgument`] for `runs == 0`; any error of `f` or of the events is returned
/// as is.
pub fn median_ms(
    stream: &Stream,
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    check_runs("timing::median_ms", runs)?;
    warm_up(stream, warmup, &mut f)?;
    let gpu = stream.gpu();
    let (start, end) = (Event::new(gpu)?, Event::new(gpu)?);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        start.record(stream)?;
        f()?;
        end.record(stream)?;
        end.synchronize()?;
        times.push(f64::from(end.elapsed_ms(&start)?).max(1e-6));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

/// The median host time of the call `f` (what submitting its work costs, not the work): `warmup`
/// runs first ([`warm_up`]), then `runs` runs, each timed on the host clock around `f` alone;
/// `stream` is waited for after each, outside the timed region. With an even `runs` the upper of
/// the two middle times.
///
/// [`Error::InvalidArgument`] for `runs == 0`; any error of `f` or of the stream is returned as
/// is.
pub fn host_median(
    stream: &Stream,
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<Duration> {
    check_runs("timing::host_median", runs)?;
    warm_up(stream, warmup, &mut f)?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
        stream.synchronize()?;
    }
    times.sort();
    Ok(times[runs / 2])
}

fn check_runs(op: &'static str, runs: usize) -> Result<()> {
    if runs == 0 {
        return Err(Error::from(InvalidArgument {
            op,
            message: "no timed runs (runs == 0)".into(),
        }));
    }
    Ok(())
}

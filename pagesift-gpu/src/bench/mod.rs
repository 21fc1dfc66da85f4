//! Measurement helpers shared by the benches (`benches/`) and the command-line tool
//! (`pagesift-gpu bench`): side-by-side comparisons on one device, in one process, on the same
//! buffers and the same stream, timed on the device with events ([`crate::timing`]).
//!
//! - [`gemm`]: the GEMM against cuBLAS ([`run_gemm`], [`measure_gemm`]).
//! - [`cublas`]: cuBLAS loaded at run time, the reference of [`gemm`].
//! - [`quant`]: the decode kernel over quantized weights against the copy bandwidth
//!   ([`run_quant`]).
//! - [`engine`]: the engine adapter's call against the same work without it ([`run_engine`]).
//!
//! Each comparison writes a table to a [`std::io::Write`]; [`Timing`] holds how every figure
//! in it is timed.

pub mod cublas;
pub mod engine;
pub mod gemm;
pub mod quant;

pub use engine::{run_engine, EngineBenchOptions};
pub use gemm::{measure_gemm, run_gemm, GemmBenchOptions, GemmMode, GemmRow, GemmShape};
pub use quant::{run_quant, QuantBenchOptions};

use crate::{timing, BackendKind, Gpu, Result, Stream};

/// Why a comparison stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A device operation failed.
    #[error(transparent)]
    Gpu(#[from] crate::Error),
    /// The report could not be written.
    #[error("cannot write the report: {0}")]
    Write(#[from] std::io::Error),
}

/// How a figure is timed: `warmup` runs, then the median of `runs` runs between events on the
/// stream, each run a batch of back-to-back calls long enough to last `min_run_ms` (at most
/// `max_batch` calls); the figure is the time per call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Runs before the timed ones (the last one, timed alone, sizes the batch).
    pub warmup: usize,
    /// Timed runs; the median is reported.
    pub runs: usize,
    /// The shortest a timed run should last, in milliseconds.
    pub min_run_ms: f64,
    /// The most calls in one timed run.
    pub max_batch: usize,
}

impl Timing {
    /// On a GPU: 3 warm-ups, the median of 15 runs of at least 2 ms.
    pub const GPU: Timing = Timing {
        warmup: 3,
        runs: 15,
        min_run_ms: 2.0,
        max_batch: 1000,
    };

    /// On the emulated device, where one call takes milliseconds already: 1 warm-up, the median
    /// of 3 single calls.
    pub const EMULATED: Timing = Timing {
        warmup: 1,
        runs: 3,
        min_run_ms: 0.0,
        max_batch: 1,
    };

    /// [`Timing::GPU`], or [`Timing::EMULATED`] on the emulated device.
    pub fn for_gpu(gpu: &Gpu) -> Timing {
        match gpu.backend_kind() {
            BackendKind::Cuda => Timing::GPU,
            BackendKind::Emulated => Timing::EMULATED,
        }
    }

    /// The device time per call of `f`, which queues one call's work on `stream`, in
    /// milliseconds (see [`Timing`]).
    ///
    /// Errors: those of `f` and of the events; [`crate::Error::InvalidArgument`] for
    /// `runs == 0`.
    pub fn per_call_ms(&self, stream: &Stream, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        let one = timing::median_ms(stream, self.warmup.saturating_sub(1), 1, &mut f)?;
        let batch = ((self.min_run_ms / one).ceil() as usize).clamp(1, self.max_batch.max(1));
        let ms = timing::median_ms(stream, 0, self.runs, || {
            for _ in 0..batch {
                f()?;
            }
            Ok(())
        })?;
        Ok(ms / batch as f64)
    }
}

/// splitmix64: reproducible inputs from a seed, without a dependency.
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`, on a grid of 2^-23.
    pub(crate) fn signed_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) * f32::powi(2.0, -23) - 1.0
    }

    /// Uniform in `0..n` (`n > 0`; the bias of the modulo is negligible for the sizes here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `len` values of [`SplitMix64::signed_unit`]; an error where the host cannot hold them.
    pub(crate) fn signed_units(&mut self, len: usize) -> Result<Vec<f32>> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| {
            crate::Error::from(crate::error::InvalidArgument {
                op: "bench",
                message: format!("cannot allocate {len} f32 values on the host"),
            })
        })?;
        v.extend((0..len).map(|_| self.signed_unit()));
        Ok(v)
    }
}

//! `pagesift-gpu selftest`: every kernel family on the first GPU against the CPU reference.
//!
//! One row per family: how many variants ran, the worst error as a fraction of its tolerance,
//! the family's throughput against a device-to-device copy of the same bytes, PASS or FAIL.
//! The exit code is non-zero when a family fails. Without a GPU it says so in one line and, when
//! the emulated device is compiled in (feature `emulator`), runs the same checks there at small
//! sizes; otherwise it exits 0 after listing how many variants are compiled in.
//!
//! Each family is a [`Family`] in a module of its own, listed in [`FAMILIES`]: it runs its
//! variants, fills its [`Report`] and may print detail lines of its own; this module prints the
//! header, the table and the exit code. A new family is one more module here and one more entry
//! in [`FAMILIES`].

mod act;
mod act_scan;
mod gemm;
mod quant;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use pagesift_gpu::{BackendKind, Gpu, KernelVariant, Result};

/// Every family, in the order of the table.
const FAMILIES: &[&dyn Family] = &[
    &act::Activations,
    &act_scan::ActScan,
    &gemm::Gemms,
    &quant::Quants,
];

/// Warm-ups and timed runs of every throughput measurement (the median is reported).
const WARMUP: usize = 2;
const RUNS: usize = 7;

/// One kernel family of the self test.
trait Family {
    /// The family's name, the first column of the table.
    fn name(&self) -> &'static str;

    /// Runs the family's variants on `gpu` against the CPU reference (at small sizes where
    /// [`emulated`]), recording what ran, the errors and any throughput in `report`. A failure
    /// that leaves the rest to run goes into the report ([`Report::fail`]); an error returned
    /// ends the family's run and is reported as one more failure.
    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()>;
}

/// One family's result.
#[derive(Default)]
struct Report {
    variants: usize,
    /// The worst error over its tolerance (<= 1 passes), and where.
    worst: (f64, String),
    /// Failures other than accuracy (launch errors, untouched elements).
    failures: Vec<String>,
    /// (family GB/s, copy GB/s) where measured.
    throughput: Option<(f64, f64)>,
}

impl Report {
    /// Counts one variant (or one configuration of one) that ran.
    fn ran(&mut self) {
        self.variants += 1;
    }

    /// Records an error as a fraction of its tolerance; when it is the worst so far, `at`
    /// names where it occurred and the call returns true.
    fn error(&mut self, ratio: f64, at: impl FnOnce() -> String) -> bool {
        if ratio > self.worst.0 {
            self.worst = (ratio, at());
            true
        } else {
            false
        }
    }

    /// Records a failure other than accuracy.
    fn fail(&mut self, failure: String) {
        self.failures.push(failure);
    }

    /// Records the family's throughput and that of a copy of the same bytes, in GB/s.
    fn throughput(&mut self, gbps: f64, copy_gbps: f64) {
        self.throughput = Some((gbps, copy_gbps));
    }

    fn passed(&self) -> bool {
        self.failures.is_empty() && self.worst.0 <= 1.0 && self.variants > 0
    }
}

/// Whether `gpu` is the emulated device (the families then run at small sizes).
fn emulated(gpu: &Gpu) -> bool {
    gpu.backend_kind() == BackendKind::Emulated
}

/// Without a GPU, the emulated device (when compiled in, feature `emulator`): the same checks
/// at small sizes, on the PTX the GPU would get.
#[cfg(feature = "emulator")]
fn fallback_device(no_gpu: &pagesift_gpu::Error) -> Option<Gpu> {
    use pagesift_gpu::emulator::EmulatorConfig;
    outln!("selftest: no GPU ({no_gpu}); running on the emulated device instead");
    let config = match EmulatorConfig::from_env() {
        Ok(config) => config,
        Err(e) => {
            outln!("selftest: the emulated device is misconfigured: {e}");
            return None;
        }
    };
    Gpu::emulated(config).ok()
}

#[cfg(not(feature = "emulator"))]
fn fallback_device(_no_gpu: &pagesift_gpu::Error) -> Option<Gpu> {
    None
}

/// Runs the self test; returns the process exit code.
pub fn run(_args: &[String]) -> i32 {
    let variants = pagesift_gpu::kernels::registry().len();
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => match fallback_device(&e) {
            Some(gpu) => gpu,
            None => {
                outln!("selftest: no device to test on: {e}");
                outln!("{variants} kernel variants are compiled in; nothing was run.");
                return 0;
            }
        },
    };
    let (major, minor) = gpu.compute_capability();
    outln!(
        "selftest on {} (sm_{major}{minor}, {} SMs{}), {variants} kernel variants compiled in",
        gpu.name(),
        gpu.props().sm_count,
        if emulated(&gpu) { ", emulated" } else { "" }
    );
    let started = Instant::now();
    let reports: Vec<(&'static str, Report)> = FAMILIES
        .iter()
        .map(|family| {
            let mut report = Report::default();
            if let Err(e) = family.run(&gpu, &mut report) {
                report.fail(format!("{e}"));
            }
            (family.name(), report)
        })
        .collect();
    let ok = print_table(&reports);
    outln!("({:.1} s)", started.elapsed().as_secs_f64());
    if ok {
        0
    } else {
        1
    }
}

/// The table: one row per family, its first failures under it. Returns whether all passed.
fn print_table(reports: &[(&'static str, Report)]) -> bool {
    outln!();
    outln!(
        "{:<12} {:>8} {:>10}  {:<28} {:>10} {:>10} {:>7}  result",
        "family",
        "variants",
        "worst/tol",
        "(where)",
        "GB/s",
        "copy GB/s",
        "%copy"
    );
    let mut ok = true;
    for (family, r) in reports {
        let (gbps, copy, pct) = match r.throughput {
            Some((a, c)) => (
                format!("{a:.1}"),
                format!("{c:.1}"),
                format!("{:.1}", 100.0 * a / c),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let pass = r.passed();
        ok &= pass;
        outln!(
            "{:<12} {:>8} {:>10.3}  {:<28} {:>10} {:>10} {:>7}  {}",
            family,
            r.variants,
            r.worst.0,
            r.worst.1,
            gbps,
            copy,
            pct,
            if pass { "PASS" } else { "FAIL" }
        );
        for f in r.failures.iter().take(10) {
            outln!("    {f}");
        }
    }
    ok
}

/// A small deterministic generator (xorshift64*) for the test data.
struct Rng(u64);

impl Rng {
    /// A uniform value in `[lo, hi)`.
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        lo + (hi - lo) * (bits as f32 / (1u64 << 24) as f32)
    }
}

/// Loads the modules of every registered variant that `pick` selects, on as many threads as
/// the machine has cores (the driver's JIT is the slow part of a first launch, and the
/// module cache is thread-safe). Returns how many were selected. A variant that fails to load
/// is left for its run to report. (The H200's driver measured here compiles one module at a
/// time whatever the threads: about 35 ms a module; the threads cost nothing there and help
/// where the JIT runs concurrently.)
fn preload_parallel(gpu: &Gpu, pick: impl Fn(&KernelVariant) -> bool) -> usize {
    let variants: Vec<&'static KernelVariant> = pagesift_gpu::kernels::registry()
        .into_iter()
        .filter(|v| pick(v))
        .collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(variants.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(v) = variants.get(i) else {
                    break;
                };
                let _ = gpu.preload(v);
            });
        }
    });
    variants.len()
}

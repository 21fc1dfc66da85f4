//! `pagesift-gpu selftest`: every kernel family on the first GPU against the CPU reference.
//!
//! One row per family: how many variants ran, the worst error as a fraction of its tolerance,
//! the family's throughput against a device-to-device copy of the same bytes, PASS or FAIL.
//! The exit code is non-zero when a family fails. Without a GPU it says so in one line and, when
//! the emulated device is compiled in (feature `emulator`), runs the same checks there at small
//! sizes; otherwise it exits 0 after listing how many variants are compiled in.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use pagesift_gpu::cpu::act::{act_f32, ulp_f32};
use pagesift_gpu::ops::act::{activation, activation_inplace, max_error_ulps, ActElement};
use pagesift_gpu::{
    Act, ActArgs, BackendKind, DeviceBuffer, Event, Gpu, KernelVariant, Result, Stream,
};

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

/// One family's result.
struct FamilyReport {
    family: &'static str,
    variants: usize,
    /// The worst error over its tolerance (<= 1 passes), and where.
    worst: (f64, String),
    /// Failures other than accuracy (launch errors, untouched elements).
    failures: Vec<String>,
    /// (family GB/s, copy GB/s) where measured.
    throughput: Option<(f64, f64)>,
}

impl FamilyReport {
    fn passed(&self) -> bool {
        self.failures.is_empty() && self.worst.0 <= 1.0 && self.variants > 0
    }
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
    let emulated = gpu.backend_kind() == BackendKind::Emulated;
    let (major, minor) = gpu.compute_capability();
    outln!(
        "selftest on {} (sm_{major}{minor}, {} SMs{}), {variants} kernel variants compiled in",
        gpu.name(),
        gpu.props().sm_count,
        if emulated { ", emulated" } else { "" }
    );
    let started = Instant::now();
    let reports = vec![activations(&gpu, emulated), accuracy_scan(&gpu, emulated)];

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
    for r in &reports {
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
            r.family,
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
    outln!("({:.1} s)", started.elapsed().as_secs_f64());
    if ok {
        0
    } else {
        1
    }
}

/// Every activation variant (act x type x bias x residual, in place and not) on random data.
fn activations(gpu: &Gpu, emulated: bool) -> FamilyReport {
    let mut report = FamilyReport {
        family: "activation",
        variants: 0,
        worst: (0.0, String::new()),
        failures: Vec::new(),
        throughput: None,
    };
    let loaded = Instant::now();
    let count = preload_parallel(gpu, |v| v.kernel.starts_with("act_"));
    outln!(
        "activation: {count} variant modules loaded in {:.1} s",
        loaded.elapsed().as_secs_f64()
    );
    let n = if emulated { 1031 } else { (1 << 16) + 3 };
    let cols = if emulated { 37 } else { 1000 };
    check_type::<f32>(gpu, n, cols, &mut report);
    check_type::<half::f16>(gpu, n, cols, &mut report);
    check_type::<half::bf16>(gpu, n, cols, &mut report);
    let len = if emulated { 1 << 12 } else { 1 << 26 };
    match act_throughput(gpu, len) {
        Ok(t) => report.throughput = Some(t),
        Err(e) => report.failures.push(format!("throughput run failed: {e}")),
    }
    report
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

/// The storage type's ulp at `v`.
fn storage_ulp<T: ActElement>(v: f32) -> f32 {
    let mantissa_bits = match T::DTYPE.name() {
        "f16" => 10,
        "bf16" => 7,
        _ => return 0.0,
    };
    let a = v.abs().max(f32::MIN_POSITIVE);
    let exp = a.log2().floor() as i32;
    let min_exp = if T::DTYPE.name() == "f16" { -14 } else { -126 };
    2f32.powi(exp.max(min_exp) - mantissa_bits)
}

fn check_type<T: ActElement>(gpu: &Gpu, n: usize, cols: usize, report: &mut FamilyReport) {
    let mut rng = Rng(0x0ac7_5e1f_9e37_79b9);
    let x: Vec<T> = (0..n)
        .map(|_| T::from_f32(rng.uniform(-8.0, 8.0)))
        .collect();
    let bias: Vec<T> = (0..cols)
        .map(|_| T::from_f32(rng.uniform(-1.0, 1.0)))
        .collect();
    let res: Vec<T> = (0..n)
        .map(|_| T::from_f32(rng.uniform(-4.0, 4.0)))
        .collect();
    let setup = || -> Result<_> {
        Ok((
            DeviceBuffer::from_host(gpu, &x)?,
            DeviceBuffer::from_host(gpu, &bias)?,
            DeviceBuffer::from_host(gpu, &res)?,
        ))
    };
    let (xb, bb, rb) = match setup() {
        Ok(b) => b,
        Err(e) => {
            report
                .failures
                .push(format!("{}: upload failed: {e}", T::DTYPE.name()));
            return;
        }
    };
    let stream = gpu.default_stream();
    let poison = T::from_f32(f32::NAN);
    for act in Act::ALL {
        for (bias_on, res_on) in [(false, false), (true, false), (false, true), (true, true)] {
            for inplace in [false, true] {
                let where_ = format!(
                    "{} {}{}{}{}",
                    act.name(),
                    T::DTYPE.name(),
                    if bias_on { "+b" } else { "" },
                    if res_on { "+r" } else { "" },
                    if inplace { " inpl" } else { "" }
                );
                let run = || -> Result<Vec<T>> {
                    let mut args = ActArgs::new(act).with_slope(0.2);
                    if bias_on {
                        args = args.with_bias(bb.slice(..)?, cols);
                    }
                    if res_on {
                        args = args.with_residual(rb.slice(..)?);
                    }
                    let mut y = DeviceBuffer::from_host(gpu, &vec![poison; n])?;
                    if inplace {
                        y.copy_from_device(&xb)?;
                        activation_inplace(&stream, &args, &mut y)?;
                    } else {
                        activation(&stream, &args, &xb, &mut y)?;
                    }
                    stream.synchronize()?;
                    y.to_host()
                };
                let out = match run() {
                    Ok(out) => out,
                    Err(e) => {
                        report.failures.push(format!("{where_}: {e}"));
                        continue;
                    }
                };
                report.variants += 1;
                let tol = f64::from(max_error_ulps(act));
                for i in 0..n {
                    let v = if bias_on {
                        x[i].to_f32() + bias[i % cols].to_f32()
                    } else {
                        x[i].to_f32()
                    };
                    let a = act_f32(act, 0.2, v);
                    let want = if res_on { a + res[i].to_f32() } else { a };
                    let got = out[i].to_f32();
                    if got.is_nan() {
                        report
                            .failures
                            .push(format!("{where_}: element {i} not written (or NaN)"));
                        break;
                    }
                    let ratio = if tol == 0.0 {
                        // Exact functions: the reference rounded once to the storage type.
                        if got == T::from_f32(want).to_f32() {
                            0.0
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        let err = f64::from((got - want).abs());
                        let allowed = tol * f64::from(ulp_f32(a))
                            + if res_on {
                                f64::from(ulp_f32(want))
                            } else {
                                0.0
                            }
                            + f64::from(storage_ulp::<T>(want))
                            + f64::from(4.0 * f32::MIN_POSITIVE);
                        err / allowed
                    };
                    if ratio > report.worst.0 {
                        report.worst = (ratio, where_.clone());
                        if std::env::var_os("PAGESIFT_SELFTEST_VERBOSE").is_some() {
                            outln!("{where_}: [{i}] input {v:e} got {got:e} want {want:e}");
                        }
                    }
                }
            }
        }
    }
}

/// The inputs of the accuracy scan: `dense` points evenly over [-9.5, 9.5], `dense / 16` over
/// each far tail [-16, -9.5] and [9.5, 16], and `dense / 64` magnitudes from 2^-30 to 1 of
/// each sign (geometric: where the odd functions are x + O(x³)).
fn scan_points(dense: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(dense + dense / 8 + dense / 32 + 1);
    let step = |lo: f64, hi: f64, n: usize, i: usize| (lo + (hi - lo) * i as f64 / n as f64) as f32;
    x.extend((0..=dense).map(|i| step(-9.5, 9.5, dense, i)));
    let tail = dense / 16;
    x.extend((0..tail).map(|i| step(-16.0, -9.5, tail, i)));
    x.extend((1..=tail).map(|i| step(9.5, 16.0, tail, i)));
    let small = dense / 64;
    for i in 0..small {
        let m = step(-30.0, 0.0, small, i).exp2();
        x.push(m);
        x.push(-m);
    }
    x
}

/// Every f32 activation over a dense scan of inputs ([`scan_points`]: 2^22 + 3% points on the
/// emulated device, 2^24 + 3% on a GPU), without bias or residual: the largest error in ulp
/// of the activation value (after the absolute allowance of 2^-124), printed per activation
/// with its tolerance, the worst ratio into the report.
fn accuracy_scan(gpu: &Gpu, emulated: bool) -> FamilyReport {
    let mut report = FamilyReport {
        family: "act scan",
        variants: 0,
        worst: (0.0, String::new()),
        failures: Vec::new(),
        throughput: None,
    };
    let x = scan_points(if emulated { 1 << 22 } else { 1 << 24 });
    let stream = gpu.default_stream();
    let run = |act: Act| -> Result<Vec<f32>> {
        let xb = DeviceBuffer::from_host(gpu, &x)?;
        let mut y = DeviceBuffer::from_host(gpu, &vec![f32::NAN; x.len()])?;
        activation(&stream, &ActArgs::new(act).with_slope(0.2), &xb, &mut y)?;
        stream.synchronize()?;
        y.to_host()
    };
    outln!(
        "accuracy scan: {} f32 points over [-9.5, 9.5], [-16, -9.5], [9.5, 16] and 2^-30..1",
        x.len()
    );
    for act in Act::ALL {
        let out = match run(act) {
            Ok(out) => out,
            Err(e) => {
                report.failures.push(format!("scan {}: {e}", act.name()));
                continue;
            }
        };
        report.variants += 1;
        let mut worst = (0.0f64, 0.0f32);
        for (&xi, &got) in x.iter().zip(&out) {
            let want = act_f32(act, 0.2, xi);
            let err = if got.is_nan() || want.is_nan() {
                if got.is_nan() == want.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else if got == want {
                0.0
            } else {
                let over = f64::from((got - want).abs()) - f64::from(4.0 * f32::MIN_POSITIVE);
                over.max(0.0) / f64::from(ulp_f32(want))
            };
            if err > worst.0 {
                worst = (err, xi);
            }
        }
        let tol = f64::from(max_error_ulps(act));
        outln!(
            "  {:<12} max {:>6.3} ulp (at x = {:e}), tolerance {tol}",
            act.name(),
            worst.0,
            worst.1
        );
        let ratio = if tol == 0.0 {
            if worst.0 == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            worst.0 / tol
        };
        if ratio > report.worst.0 {
            report.worst = (ratio, format!("{} f32 scan", act.name()));
        }
    }
    let f16_inputs: Vec<half::f16> = (0..=u16::MAX)
        .map(half::f16::from_bits)
        .filter(|v| v.is_finite())
        .collect();
    scan_half(gpu, &f16_inputs, &mut report);
    let bf16_inputs: Vec<half::bf16> = (0..=u16::MAX)
        .map(half::bf16::from_bits)
        .filter(|v| v.is_finite())
        .collect();
    scan_half(gpu, &bf16_inputs, &mut report);
    report
}

/// Every finite input of a 16-bit type through every activation: the largest error beyond
/// the f32 allowance, in storage ulps of the f32 reference (at most 1 passes), and how many
/// results are not the storage value nearest to the reference.
fn scan_half<T: ActElement>(gpu: &Gpu, inputs: &[T], report: &mut FamilyReport) {
    let stream = gpu.default_stream();
    let run = |act: Act| -> Result<Vec<T>> {
        let xb = DeviceBuffer::from_host(gpu, inputs)?;
        let mut y = DeviceBuffer::from_host(gpu, &vec![T::from_f32(f32::NAN); inputs.len()])?;
        activation(&stream, &ActArgs::new(act).with_slope(0.2), &xb, &mut y)?;
        stream.synchronize()?;
        y.to_host()
    };
    let mut line = format!(
        "  {} exhaustive ({} inputs), storage ulps beyond the f32 allowance (results other \
         than the nearest to the reference):",
        T::DTYPE.name(),
        inputs.len()
    );
    for act in Act::ALL {
        let out = match run(act) {
            Ok(out) => out,
            Err(e) => {
                report
                    .failures
                    .push(format!("scan {} {}: {e}", act.name(), T::DTYPE.name()));
                continue;
            }
        };
        report.variants += 1;
        let tol = max_error_ulps(act);
        let mut worst = 0.0f64;
        let mut not_nearest = 0usize;
        for (x, got) in inputs.iter().zip(&out) {
            let want = act_f32(act, 0.2, x.to_f32());
            let got = got.to_f32();
            if got != T::from_f32(want).to_f32() && !(got.is_nan() && want.is_nan()) {
                not_nearest += 1;
            }
            let err = if got.is_nan() || want.is_nan() {
                if got.is_nan() == want.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else if tol == 0.0 {
                if got == T::from_f32(want).to_f32() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                let allowance = tol * ulp_f32(want) + 4.0 * f32::MIN_POSITIVE;
                let over = (f64::from((got - want).abs()) - f64::from(allowance)).max(0.0);
                over / f64::from(storage_ulp::<T>(want))
            };
            worst = worst.max(err);
        }
        line += &format!(" {} {worst:.2} ({not_nearest})", act.name());
        if worst > report.worst.0 {
            report.worst = (worst, format!("{} {} scan", act.name(), T::DTYPE.name()));
        }
    }
    outln!("{line}");
}

/// GB/s of gelu with a bias over `len` f32 (read + write) and of a device-to-device copy of the
/// same bytes, each the median of several timed runs after a warm-up.
fn act_throughput(gpu: &Gpu, len: usize) -> Result<(f64, f64)> {
    let stream = gpu.default_stream();
    let host: Vec<f32> = (0..len)
        .map(|i| ((i % 1013) as f32 - 506.0) / 63.0)
        .collect();
    let x = DeviceBuffer::from_host(gpu, &host)?;
    let bias = DeviceBuffer::from_host(gpu, &host[..1024])?;
    let mut y = DeviceBuffer::<f32>::alloc(gpu, len)?;
    let args = ActArgs::new(Act::Gelu).with_bias(bias.slice(..)?, 1024);
    let bytes = 2.0 * 4.0 * len as f64;
    let act_ms = median_ms(gpu, &stream, &mut || activation(&stream, &args, &x, &mut y))?;
    let copy_ms = median_ms(gpu, &stream, &mut || stream.copy_dtod_async(&mut y, &x))?;
    Ok((bytes / act_ms / 1e6, bytes / copy_ms / 1e6))
}

/// The median time of `f` in milliseconds, from events around each of 7 runs after 2 warm-ups.
fn median_ms(gpu: &Gpu, stream: &Stream, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    f()?;
    let mut times = Vec::new();
    for _ in 0..7 {
        let start = Event::new(gpu)?;
        let end = Event::new(gpu)?;
        start.record(stream)?;
        f()?;
        end.record(stream)?;
        end.synchronize()?;
        times.push(f64::from(end.elapsed_ms(&start)?).max(1e-6));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

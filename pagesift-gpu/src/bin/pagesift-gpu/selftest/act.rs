//! The activation family: every activation variant (act x type x bias x residual, in place and
//! not) on random data against the CPU reference, and gelu's throughput against a copy.

use std::time::Instant;

use pagesift_gpu::cpu::act::{act_f32, ulp_f32};
use pagesift_gpu::ops::act::{activation, activation_inplace, max_error_ulps, ActElement};
use pagesift_gpu::{timing, Act, ActArgs, DeviceBuffer, Gpu, Result};

use super::{emulated, preload_parallel, Family, Report, Rng, RUNS, WARMUP};

/// Every activation variant on random data.
pub struct Activations;

impl Family for Activations {
    fn name(&self) -> &'static str {
        "activation"
    }

    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let loaded = Instant::now();
        let count = preload_parallel(gpu, |v| v.kernel.starts_with("act_"));
        outln!(
            "activation: {count} variant modules loaded in {:.1} s",
            loaded.elapsed().as_secs_f64()
        );
        let small = emulated(gpu);
        let n = if small { 1031 } else { (1 << 16) + 3 };
        let cols = if small { 37 } else { 1000 };
        check_type::<f32>(gpu, n, cols, report);
        check_type::<half::f16>(gpu, n, cols, report);
        check_type::<half::bf16>(gpu, n, cols, report);
        let len = if small { 1 << 12 } else { 1 << 26 };
        match act_throughput(gpu, len) {
            Ok((gbps, copy_gbps)) => report.throughput(gbps, copy_gbps),
            Err(e) => report.fail(format!("throughput run failed: {e}")),
        }
        Ok(())
    }
}

/// The storage type's ulp at `v` (0 for f32).
pub(super) fn storage_ulp<T: ActElement>(v: f32) -> f32 {
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

/// Every activation with and without bias and residual, in place and not, over `n` random
/// elements of `T` in rows of `cols`.
fn check_type<T: ActElement>(gpu: &Gpu, n: usize, cols: usize, report: &mut Report) {
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
            report.fail(format!("{}: upload failed: {e}", T::DTYPE.name()));
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
                        report.fail(format!("{where_}: {e}"));
                        continue;
                    }
                };
                report.ran();
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
                        report.fail(format!("{where_}: element {i} not written (or NaN)"));
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
                    if report.error(ratio, || where_.clone())
                        && std::env::var_os("PAGESIFT_SELFTEST_VERBOSE").is_some()
                    {
                        outln!("{where_}: [{i}] input {v:e} got {got:e} want {want:e}");
                    }
                }
            }
        }
    }
}

/// GB/s of gelu with a bias over `len` f32 (read + write) and of a device-to-device copy of the
/// same bytes, each the median of several timed runs after warm-ups.
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
    let act_ms = timing::median_ms(&stream, WARMUP, RUNS, || {
        activation(&stream, &args, &x, &mut y)
    })?;
    let copy_ms = timing::median_ms(&stream, WARMUP, RUNS, || stream.copy_dtod_async(&mut y, &x))?;
    Ok((bytes / act_ms / 1e6, bytes / copy_ms / 1e6))
}

//! The activation accuracy scan: every f32 activation over a dense scan of inputs, and every
//! finite input of f16 and bf16 through every activation, against the CPU reference.

use pagesift_gpu::cpu::act::{act_f32, ulp_f32};
use pagesift_gpu::ops::act::{activation, max_error_ulps, ActElement};
use pagesift_gpu::{Act, ActArgs, DeviceBuffer, Gpu, Result};

use super::act::storage_ulp;
use super::{emulated, Family, Report};

/// Every f32 activation over a dense scan of inputs ([`scan_points`]: 2^22 + 3% points on the
/// emulated device, 2^24 + 3% on a GPU), without bias or residual: the largest error in ulp
/// of the activation value (after the absolute allowance of 2^-124), printed per activation
/// with its tolerance, the worst ratio into the report; then the 16-bit types exhaustively
/// ([`scan_half`]).
pub struct ActScan;

impl Family for ActScan {
    fn name(&self) -> &'static str {
        "act scan"
    }

    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        scan_f32(gpu, report);
        let f16_inputs: Vec<half::f16> = (0..=u16::MAX)
            .map(half::f16::from_bits)
            .filter(|v| v.is_finite())
            .collect();
        scan_half(gpu, &f16_inputs, report);
        let bf16_inputs: Vec<half::bf16> = (0..=u16::MAX)
            .map(half::bf16::from_bits)
            .filter(|v| v.is_finite())
            .collect();
        scan_half(gpu, &bf16_inputs, report);
        Ok(())
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

/// The f32 part of the scan: one line per activation.
fn scan_f32(gpu: &Gpu, report: &mut Report) {
    let x = scan_points(if emulated(gpu) { 1 << 22 } else { 1 << 24 });
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
                report.fail(format!("scan {}: {e}", act.name()));
                continue;
            }
        };
        report.ran();
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
        report.error(ratio, || format!("{} f32 scan", act.name()));
    }
}

/// Every finite input of a 16-bit type through every activation: the largest error beyond
/// the f32 allowance, in storage ulps of the f32 reference (at most 1 passes), and how many
/// results are not the storage value nearest to the reference.
fn scan_half<T: ActElement>(gpu: &Gpu, inputs: &[T], report: &mut Report) {
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
                report.fail(format!("scan {} {}: {e}", act.name(), T::DTYPE.name()));
                continue;
            }
        };
        report.ran();
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
        report.error(worst, || format!("{} {} scan", act.name(), T::DTYPE.name()));
    }
    outln!("{line}");
}

//! The GEMM family: every kernel of [`pagesift_gpu::ops::gemm`] (tiles, split-K, decode, the
//! tensor-core tiles at 3xTF32 and TF32) on random shapes that are multiples of no tile, with
//! bias, activation and residual, against the f64 reference and its tolerance
//! ([`pagesift_gpu::gemm::tolerance`]); on a GPU also the TFLOP/s of the dispatched GEMM at
//! 2048³ per precision.

use std::time::Instant;

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::{gemm, gemm_with, kernels, Kernel};
use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, Gemm, Gpu, Precision, Result};

use super::{emulated, Family, Report, Rng};

pub struct Gemms;

impl Family for Gemms {
    fn name(&self) -> &'static str {
        "gemm"
    }

    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let (mn, kk) = if emulated(gpu) { (37, 29) } else { (301, 517) };
        let mut rng = Rng(0x5eed_6e33);
        for (i, kernel) in kernels().into_iter().enumerate() {
            for layout in [BLayout::KN, BLayout::NK] {
                let m = match kernel {
                    Kernel::Gemv { rows } => rows as usize,
                    _ => mn,
                };
                if matches!(kernel, Kernel::Gemv { .. }) && layout == BLayout::KN {
                    continue;
                }
                let act = Act::ALL[i % Act::ALL.len()];
                let precisions: &[Precision] = match kernel {
                    Kernel::Mma { .. } => &[Precision::Tf32x3, Precision::Tf32],
                    _ => &[Precision::F32],
                };
                for &precision in precisions {
                    let g = Gemm::new(m, mn + 2, kk, layout)
                        .with_act(act)
                        .with_scale(1.25, 0.5)
                        .with_precision(precision);
                    check(gpu, &g, kernel, &mut rng, report)?;
                }
            }
        }
        if !emulated(gpu) {
            let n = 2048;
            let a = DeviceBuffer::<f32>::zeroed(gpu, n * n)?;
            let b = DeviceBuffer::<f32>::zeroed(gpu, n * n)?;
            let mut c = DeviceBuffer::<f32>::zeroed(gpu, n * n)?;
            let stream = gpu.default_stream();
            for precision in [Precision::F32, Precision::Tf32x3, Precision::Tf32] {
                let g = Gemm::new(n, n, n, BLayout::NK).with_precision(precision);
                gemm(&stream, &g, &a, &b, None, None, &mut c)?;
                gpu.synchronize()?;
                let runs = 20;
                let t = Instant::now();
                for _ in 0..runs {
                    gemm(&stream, &g, &a, &b, None, None, &mut c)?;
                }
                gpu.synchronize()?;
                let s = t.elapsed().as_secs_f64() / f64::from(runs);
                println!(
                    "  gemm {precision:?} {n}x{n}x{n}: {:.1} TFLOP/s (the gemm bench compares it with cuBLAS)",
                    2.0 * (n * n * n) as f64 / s / 1e12
                );
            }
        }
        Ok(())
    }
}

fn check(gpu: &Gpu, g: &Gemm, kernel: Kernel, rng: &mut Rng, report: &mut Report) -> Result<()> {
    let mut host = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect() };
    let a = host(g.m * g.k);
    let b = host(g.n * g.k);
    let bias = host(g.n);
    let res = host(g.m * g.n);
    let c0 = host(g.m * g.n);
    let (da, db) = (
        DeviceBuffer::from_host(gpu, &a)?,
        DeviceBuffer::from_host(gpu, &b)?,
    );
    let (dbias, dres) = (
        DeviceBuffer::from_host(gpu, &bias)?,
        DeviceBuffer::from_host(gpu, &res)?,
    );
    let mut dc = DeviceBuffer::from_host(gpu, &c0)?;
    let stream = gpu.default_stream();
    let r = gemm_with(
        &stream,
        g,
        kernel,
        &da,
        &db,
        Some(&dbias as &dyn DeviceRead<f32>),
        Some(&dres as &dyn DeviceRead<f32>),
        &mut dc,
    );
    if let Err(e) = r {
        report.fail(format!("{kernel} {:?}: {e}", g.b_layout));
        return Ok(());
    }
    let got = dc.to_host()?;
    report.ran();
    for i in 0..g.m {
        for j in 0..g.n {
            let want = output(g, &a, &b, Some(&bias), Some(&res), &c0, (0, i, j));
            let err = (f64::from(got[i * g.n + j]) - want.value).abs();
            let ratio = if err.is_nan() {
                f64::INFINITY
            } else {
                err / want.tolerance(g)
            };
            report.error(ratio, || format!("{kernel} {:?} C[{i}][{j}]", g.b_layout));
        }
    }
    Ok(())
}

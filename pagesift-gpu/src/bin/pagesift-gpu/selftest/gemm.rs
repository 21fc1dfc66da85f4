//! The GEMM family: every kernel of [`pagesift_gpu::ops::gemm`] (tiles, split-K, decode, the
//! tensor-core tiles at 3xTF32 and TF32) for every input type it serves (f32; f16 and bf16 on
//! the tensor-core tiles, with an f32 and with a 16-bit output) on random shapes that are
//! multiples of no tile, with bias, activation and residual, against the f64 reference on the
//! inputs as stored and its tolerance ([`pagesift_gpu::gemm::tolerance_for`]); on a GPU also
//! the TFLOP/s of the dispatched GEMM at 4096³ in each mode of the gemm bench, against cuBLAS
//! where it loads.

use pagesift_gpu::bench::cublas::Cublas;
use pagesift_gpu::bench::{measure_gemm, GemmMode, GemmShape, Timing};
use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::{gemm_with, kernel_shared_bytes, kernels, Kernel, WGMMA_CC};
use pagesift_gpu::{
    bf16, f16, Act, ActElement, BLayout, DeviceBuffer, DeviceRead, Dtype, Gemm, Gpu, Precision,
    Result,
};

use super::{emulated, Family, Report, Rng};

pub struct Gemms;

/// A check of one kernel on one GEMM for inputs `T` and output `O` ([`check`]).
type Check = fn(&Gpu, &Gemm, Kernel, &mut Rng, &mut Report) -> Result<()>;

/// Every pairing of inputs and output the GEMM takes, by the inputs' type.
const CHECKS: [(Dtype, Check); 5] = [
    (Dtype::F32, check::<f32, f32>),
    (Dtype::F16, check::<f16, f32>),
    (Dtype::F16, check::<f16, f16>),
    (Dtype::Bf16, check::<bf16, f32>),
    (Dtype::Bf16, check::<bf16, bf16>),
];

/// The shape of the TFLOP/s lines.
const SPEED_SHAPE: GemmShape = GemmShape::nk(4096, 4096, 4096);

impl Family for Gemms {
    fn name(&self) -> &'static str {
        "gemm"
    }

    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let (mn, kk) = if emulated(gpu) { (37, 29) } else { (301, 517) };
        let mut rng = Rng(0x5eed_6e33);
        let optin = gpu.props().max_shared_per_block_optin;
        let mut too_large = Vec::new();
        let mut not_hopper: Vec<String> = Vec::new();
        for (i, kernel) in kernels().into_iter().enumerate() {
            for layout in [BLayout::KN, BLayout::NK] {
                let m = match kernel {
                    Kernel::Gemv { rows, .. } => rows as usize,
                    _ => mn,
                };
                if matches!(kernel, Kernel::Gemv { .. } | Kernel::Wgmma { .. })
                    && layout == BLayout::KN
                {
                    continue;
                }
                // The Hopper kernels run on compute capability 9.0 only (the GEMM tests
                // check the refusal elsewhere).
                if matches!(kernel, Kernel::Wgmma { .. }) && gpu.compute_capability() != WGMMA_CC {
                    let what = kernel.to_string();
                    if !not_hopper.contains(&what) {
                        not_hopper.push(what);
                    }
                    continue;
                }
                let act = Act::ALL[i % Act::ALL.len()];
                for (input, check) in CHECKS {
                    for precision in precisions(kernel, input) {
                        // A block larger than the device's shared memory is refused (the
                        // GEMM tests check how), and the dispatch never picks it.
                        if kernel_shared_bytes(kernel, input, precision) > optin {
                            let what = format!("{kernel} {precision:?}");
                            if !too_large.contains(&what) {
                                too_large.push(what);
                            }
                            continue;
                        }
                        let g = Gemm::new(m, mn + 2, kk, layout)
                            .with_act(act)
                            .with_scale(1.25, 0.5)
                            .with_precision(precision);
                        check(gpu, &g, kernel, &mut rng, report)?;
                    }
                }
            }
        }
        if !not_hopper.is_empty() {
            let (major, minor) = gpu.compute_capability();
            outln!(
                "  gemm: not run here, sm_90a kernels need compute capability 9.0, the device has {major}.{minor}: {}",
                not_hopper.join(", ")
            );
        }
        if !too_large.is_empty() {
            outln!(
                "  gemm: not run here, their blocks need more than the device's {optin} bytes of shared memory: {}",
                too_large.join(", ")
            );
        }
        if !emulated(gpu) {
            speeds(gpu, report);
        }
        Ok(())
    }
}

/// The precisions to check `kernel` at for inputs of `input`: those it serves that change
/// its arithmetic. 3xTF32 and TF32 on the tensor-core tiles for f32; else one, as the FFMA
/// and decode kernels compute exact f32 and 16-bit products are exact at every precision.
fn precisions(kernel: Kernel, input: Dtype) -> Vec<Precision> {
    let distinct: &[Precision] = match (kernel, input) {
        (Kernel::Mma { .. } | Kernel::Wgmma { .. }, Dtype::F32) => {
            &[Precision::Tf32x3, Precision::Tf32]
        }
        _ => &[Precision::F32],
    };
    distinct
        .iter()
        .copied()
        .filter(|&p| kernel.serves(input, p))
        .collect()
}

/// One line per mode of the gemm bench at [`SPEED_SHAPE`] (the 16-bit ones on devices with
/// their tensor cores): our TFLOP/s, cuBLAS's and its time over ours, measured as the bench
/// measures them.
fn speeds(gpu: &Gpu, report: &mut Report) {
    let cublas = Cublas::load(gpu);
    match &cublas {
        Ok(c) => outln!(
            "  gemm at {SPEED_SHAPE} (B [N, K]) against cuBLAS from {} (ratio: cuBLAS's time over ours):",
            c.path()
        ),
        Err(e) => outln!("  gemm at {SPEED_SHAPE} (B [N, K]), no cuBLAS ({e}): ours alone"),
    }
    // 16-bit inputs run on tensor cores only.
    let tensor_cores = gpu.compute_capability() >= (8, 0);
    let modes: Vec<GemmMode> = GemmMode::ALL
        .into_iter()
        .filter(|m| tensor_cores || m.input() == Dtype::F32)
        .collect();
    if !tensor_cores {
        outln!("  gemm Bf16 and F16: not run, their tensor cores need compute capability 8.0");
    }
    let measured = measure_gemm(
        gpu,
        cublas.as_ref().ok(),
        Timing::for_gpu(gpu),
        SPEED_SHAPE,
        &modes,
        &mut |row| {
            let theirs = match (row.cublas_tflops(), row.ratio()) {
                (Some(t), Some(r)) => format!(", cuBLAS {t:.1} TFLOP/s, ratio {r:.3}x"),
                _ => String::new(),
            };
            outln!(
                "  gemm {:<6} {}: {:.1} TFLOP/s{theirs}",
                row.mode,
                row.shape,
                row.ours_tflops()
            );
            Ok(())
        },
    );
    if let Err(e) = measured {
        report.fail(format!("the TFLOP/s at {SPEED_SHAPE} failed: {e}"));
    }
}

/// `v` rounded to `T`, and the rounded values widened back (what the reference reads).
fn stored<T: ActElement>(v: Vec<f32>) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = v.into_iter().map(T::from_f32).collect();
    let back = t.iter().map(|&x| x.to_f32()).collect();
    (t, back)
}

/// `kernel` on `g` with random inputs of `T`, C and the residual of `O` and an f32 bias,
/// every output against the reference on the values as stored and its tolerance for `T` and
/// `O`.
fn check<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    g: &Gemm,
    kernel: Kernel,
    rng: &mut Rng,
    report: &mut Report,
) -> Result<()> {
    let mut host = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect() };
    let (ta, a) = stored::<T>(host(g.m * g.k));
    let (tb, b) = stored::<T>(host(g.n * g.k));
    let bias = host(g.n);
    let (tres, res) = stored::<O>(host(g.m * g.n));
    let (tc0, c0) = stored::<O>(host(g.m * g.n));
    let (da, db) = (
        DeviceBuffer::from_host(gpu, &ta)?,
        DeviceBuffer::from_host(gpu, &tb)?,
    );
    let (dbias, dres) = (
        DeviceBuffer::from_host(gpu, &bias)?,
        DeviceBuffer::from_host(gpu, &tres)?,
    );
    let mut dc = DeviceBuffer::from_host(gpu, &tc0)?;
    let (input, out) = (T::DTYPE, O::DTYPE);
    let what = match input {
        Dtype::F32 => format!("{kernel} {:?} {:?}", g.b_layout, g.precision),
        _ => format!("{kernel} {:?} {}->{}", g.b_layout, input.name(), out.name()),
    };
    let stream = gpu.default_stream();
    let r = gemm_with(
        &stream,
        g,
        kernel,
        &da,
        &db,
        Some(&dbias as &dyn DeviceRead<f32>),
        Some(&dres as &dyn DeviceRead<O>),
        &mut dc,
    );
    if let Err(e) = r {
        report.fail(format!("{what}: {e}"));
        return Ok(());
    }
    let got = dc.to_host()?;
    report.ran();
    for i in 0..g.m {
        for j in 0..g.n {
            let want = output(g, &a, &b, Some(&bias), Some(&res), &c0, (0, i, j));
            let err = (f64::from(got[i * g.n + j].to_f32()) - want.value).abs();
            let ratio = if err.is_nan() {
                f64::INFINITY
            } else {
                err / want.tolerance_for(g, input, out)
            };
            report.error(ratio, || format!("{what} C[{i}][{j}]"));
        }
    }
    Ok(())
}

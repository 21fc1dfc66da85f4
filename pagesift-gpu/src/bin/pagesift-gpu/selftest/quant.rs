//! The quantized-weight family: every kernel of [`pagesift_gpu::ops::quant`] (the FFMA and
//! tensor-core decode kernels, the latter also on int8 activations, the prefill kernel on each
//! FFMA tile, the tensor-core prefill on each of its tiles (and on Hopper its `wgmma` one), in
//! f16 or bf16, against the reference on the inputs rounded alike) for every weight format it takes, on random weights quantized by the host code and shapes that are multiples of no
//! tile (`n_in` whole chunks of the tensor-core kernel, `n_out` and the tokens anything), with
//! bias, activation and residual, against the f64 reference on the dequantized weights and its
//! tolerance; on a GPU also the GB/s of Q4_0 at 1 token on 14336 × 4096 against a copy of the
//! weights' bytes.

use pagesift_gpu::bench::Timing;
use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::{F32_TILES, WGMMA_CC};
use pagesift_gpu::ops::quant::{
    qgemm, qgemm_with, tc_plan, tc_plan_int8, tc_prefill_tiles, tc_shape, tc_warp_options,
    wgmma_prefill_tiles, QKernel, FORMATS, INT8_FORMATS, PREFILL_MIN_TOKENS, TC_PREFILL_TYPES,
};
use pagesift_gpu::quant::{dequantize, int8_activations, quantize, WeightFormat};
use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, Dtype, Gemm, Gpu, Result};

use super::{emulated, Family, Report, Rng};

pub struct Quants;

/// The shape of the GB/s line (`n_out × n_in`), a decode step of a 7B model's MLP.
const SPEED_SHAPE: (usize, usize) = (14336, 4096);

impl Family for Quants {
    fn name(&self) -> &'static str {
        "quant"
    }

    fn run(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let small = emulated(gpu);
        let mut rng = Rng(0x9a17_c0de_4b1d_5eed);
        for (i, format) in FORMATS.into_iter().enumerate() {
            // Whole chunks of the tensor-core kernel where it has a variant (so that it
            // runs), else whole Q4_K super-blocks; a few of them.
            let unit = tc_shape(format).map_or(256, |s| s.chunk);
            let n_in = unit * if small { 1 } else { 3 };
            let n_out = if small { 37 } else { 301 };
            let act = Act::ALL[i % Act::ALL.len()];
            let mut kernels: Vec<(QKernel, usize)> = Vec::new();
            for tokens in [1, 7, 16] {
                kernels.push((QKernel::Decode, tokens));
                if tc_shape(format).is_some() && gpu.compute_capability() >= (8, 0) {
                    for &warps in tc_warp_options(tc_plan(format, tokens)) {
                        kernels.push((QKernel::DecodeTc { warps }, tokens));
                    }
                    if INT8_FORMATS.contains(&format) {
                        for &warps in tc_warp_options(tc_plan_int8(tokens)) {
                            kernels.push((QKernel::DecodeInt8 { warps }, tokens));
                        }
                    }
                }
            }
            let tokens = PREFILL_MIN_TOKENS + if small { 2 } else { 40 };
            for tile in F32_TILES {
                kernels.push((QKernel::Prefill { tile, splits: 1 }, tokens));
            }
            if gpu.compute_capability() >= (8, 0) {
                let half = TC_PREFILL_TYPES[i % TC_PREFILL_TYPES.len()];
                for tile in tc_prefill_tiles() {
                    kernels.push((QKernel::PrefillTc { tile, half }, tokens));
                }
            }
            if gpu.compute_capability() == WGMMA_CC {
                let half = TC_PREFILL_TYPES[(i + 1) % TC_PREFILL_TYPES.len()];
                for tile in wgmma_prefill_tiles() {
                    kernels.push((QKernel::PrefillWgmma { tile, half }, tokens));
                }
            }
            for (kernel, tokens) in kernels {
                let g = Gemm::new(tokens, n_out, n_in, BLayout::NK)
                    .with_act(act)
                    .with_scale(1.25, 0.5);
                check(gpu, &g, format, kernel, &mut rng, report)?;
            }
        }
        if !small {
            match speed(gpu) {
                Ok((gbps, copy_gbps)) => {
                    outln!(
                        "  quant Q4_0 {}x{} at 1 token: {gbps:.0} GB/s of weights, {:.0}% of a copy's {copy_gbps:.0} GB/s",
                        SPEED_SHAPE.0,
                        SPEED_SHAPE.1,
                        100.0 * gbps / copy_gbps
                    );
                    report.throughput(gbps, copy_gbps);
                }
                Err(e) => report.fail(format!("the Q4_0 GB/s run failed: {e}")),
            }
        }
        Ok(())
    }
}

/// `kernel` on `g` with weights of `format` (random, of a few magnitudes, quantized on the
/// host), random activations, bias, residual and old outputs, every output against the
/// reference on the dequantized weights (and, on int8 activations, the activations as
/// `int8_activations` rounds them) and its tolerance.
fn check(
    gpu: &Gpu,
    g: &Gemm,
    format: WeightFormat,
    kernel: QKernel,
    rng: &mut Rng,
    report: &mut Report,
) -> Result<()> {
    let (m, n, k) = (g.m, g.n, g.k);
    let mut host = |len: usize, scale: bool| -> Vec<f32> {
        (0..len)
            .map(|i| {
                let v = rng.uniform(-1.0, 1.0);
                if scale {
                    v * (1 + i / 32 % 5) as f32
                } else {
                    v
                }
            })
            .collect()
    };
    let values = host(n * k, true);
    let bytes = quantize(format, &values, n, k)?;
    let w = dequantize(format, &bytes, n, k)?;
    let x = host(m * k, false);
    let mut w = w;
    let mut input = Dtype::F32;
    let x_ref = match kernel {
        QKernel::DecodeInt8 { .. } => int8_activations(&x, k)?,
        // The tensor-core prefill multiplies both operands rounded to its 16-bit type.
        QKernel::PrefillTc { half, .. } | QKernel::PrefillWgmma { half, .. } => {
            input = half;
            let round = |v: &f32| match half {
                Dtype::F16 => half::f16::from_f32(*v).to_f32(),
                _ => half::bf16::from_f32(*v).to_f32(),
            };
            w = w.iter().map(round).collect();
            x.iter().map(round).collect()
        }
        _ => x.clone(),
    };
    let bias = host(n, false);
    let res = host(m * n, false);
    let y0 = host(m * n, false);
    let (dw, dx) = (
        DeviceBuffer::from_host(gpu, &bytes)?,
        DeviceBuffer::from_host(gpu, &x)?,
    );
    let (dbias, dres) = (
        DeviceBuffer::from_host(gpu, &bias)?,
        DeviceBuffer::from_host(gpu, &res)?,
    );
    let mut dy = DeviceBuffer::from_host(gpu, &y0)?;
    let what = format!("{format} {kernel}");
    let stream = gpu.default_stream();
    let r = qgemm_with(
        &stream,
        g,
        format,
        kernel,
        &dw,
        &dx,
        Some(&dbias.slice(..)? as &dyn DeviceRead<f32>),
        Some(&dres.slice(..)? as &dyn DeviceRead<f32>),
        &mut dy,
    );
    if let Err(e) = r {
        report.fail(format!("{what}: {e}"));
        return Ok(());
    }
    let got = dy.to_host()?;
    report.ran();
    for t in 0..m {
        for j in 0..n {
            let want = output(g, &x_ref, &w, Some(&bias), Some(&res), &y0, (0, t, j));
            let err = (f64::from(got[t * n + j]) - want.value).abs();
            let ratio = if err.is_nan() {
                f64::INFINITY
            } else {
                err / want.tolerance_for(g, input, Dtype::F32)
            };
            report.error(ratio, || format!("{what} y[{t}][{j}]"));
        }
    }
    Ok(())
}

/// GB/s of the weights' bytes of [`qgemm`] on Q4_0 weights of [`SPEED_SHAPE`] at 1 token (the
/// kernel it picks) and of a device-to-device copy of the same bytes (read and written), each
/// timed as the quant bench times them; several copies of the weights in turn, so that L2
/// does not hold them from one call to the next.
fn speed(gpu: &Gpu) -> Result<(f64, f64)> {
    let (n_out, n_in) = SPEED_SHAPE;
    let format = WeightFormat::Q4_0;
    let mut rng = Rng(0x51ee_d0f4_0000_0001);
    let row: Vec<f32> = (0..n_in).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let row_bytes = quantize(format, &row, 1, n_in)?;
    let host: Vec<u8> = row_bytes.repeat(n_out);
    let bytes = host.len();
    let copies = (256usize << 20).div_ceil(bytes).max(2);
    let weights = (0..copies)
        .map(|_| DeviceBuffer::from_host(gpu, &host))
        .collect::<Result<Vec<_>>>()?;
    let x = DeviceBuffer::from_host(gpu, &row)?;
    let mut y = DeviceBuffer::<f32>::alloc(gpu, n_out)?;
    let mut copy_dst = DeviceBuffer::<u8>::alloc(gpu, bytes)?;
    let g = Gemm::new(1, n_out, n_in, BLayout::NK);
    let stream = gpu.default_stream();
    let timing = Timing::for_gpu(gpu);
    let mut turn = 0;
    let ms = timing.per_call_ms(&stream, || {
        turn = (turn + 1) % copies;
        qgemm(&stream, &g, format, &weights[turn], &x, None, None, &mut y)
    })?;
    let copy_ms = timing.per_call_ms(&stream, || {
        turn = (turn + 1) % copies;
        stream.copy_dtod_async(&mut copy_dst, &weights[turn])
    })?;
    Ok((bytes as f64 / ms / 1e6, 2.0 * bytes as f64 / copy_ms / 1e6))
}

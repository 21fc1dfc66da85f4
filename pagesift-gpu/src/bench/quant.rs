//! The kernels over quantized weights ([`crate::ops::quant::qgemm`]: the decode kernel up to
//! 16 tokens, the prefill kernel beyond) against the copy bandwidth and cuBLAS on the same
//! device, in one process: for each format, weight shape (`n_out × n_in`) and token count,
//! the time per call and what submitting one call costs the host, the bytes it must read
//! (the weights once, the activations, the outputs) as GB/s and as a share of a
//! device-to-device copy's GB/s (bytes read + written) of the same weights, its TFLOP/s, its
//! largest error against the f64 product on the dequantized weights (relative to the sum of
//! the magnitudes of the output's products), and cuBLAS on the dequantized weights at the same shape:
//! `cublasGemmEx` in bf16 (weights and activations in bf16, f32 accumulation: the
//! tensor-core bar) and `cublasSgemm` in f32 (exact: the bar of our exact f32 mode), each as
//! our speed over theirs (above 1: ours is faster). Where the int8 activations apply
//! ([`crate::ops::quant::qgemm_int8`]: Q4_0, Q8_0, Q4_K up to 16 tokens) a second row
//! gives them; from the prefill's token counts on, two more give the tensor-core prefill
//! ([`crate::ops::quant::qgemm_tc`]) on f16 and on bf16 inputs.
//!
//! The weights are one row quantized by the host code, repeated for every row, in enough
//! copies (used in turn) that each call reads them from device memory, not from L2; cuBLAS's
//! dequantized weights likewise.

use std::io::Write;

use half::bf16;

use super::cublas::{Cublas, CublasMath};
use super::{BenchError, SplitMix64, Timing};
use crate::gemm::{BLayout, Gemm};
use crate::kernels::quant::QGEMV_MAX_TOKENS;
use crate::ops::quant::{
    pick, pick_int8, pick_tc, qgemm, qgemm_int8, qgemm_tc, INT8_FORMATS, PREFILL_MIN_TOKENS,
    TC_PREFILL_TYPES,
};
use crate::quant::{dequantize, quantize, WeightFormat};
use crate::{timing, BackendKind, DeviceBuffer, Dtype, Gpu, Stream};

/// The kernels a row of the bench times: [`qgemm`]'s exact ones, [`qgemm_int8`]'s, or
/// [`qgemm_tc`]'s tensor-core prefill on inputs of a 16-bit type.
#[derive(Clone, Copy)]
enum Mode {
    Exact,
    Int8,
    Tc(Dtype),
}

/// What `bench quant` measures.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantBenchOptions {
    pub formats: Vec<WeightFormat>,
    /// Weight shapes `(n_out, n_in)`.
    pub shapes: Vec<(usize, usize)>,
    pub tokens: Vec<usize>,
}

impl Default for QuantBenchOptions {
    /// Every format at 1, 2, 4, 8 and 16 tokens (decode) and 512 (prefill) on 4096 × 4096,
    /// 14336 × 4096 and 4096 × 14336.
    fn default() -> Self {
        QuantBenchOptions {
            formats: vec![
                WeightFormat::Q4_0,
                WeightFormat::Q8_0,
                WeightFormat::Q4K,
                WeightFormat::Bf16,
                WeightFormat::F16,
            ],
            shapes: vec![(4096, 4096), (14336, 4096), (4096, 14336)],
            tokens: vec![1, 2, 4, 8, 16, 512],
        }
    }
}

/// The options' formats from a comma-separated list of ggml names (`Q4_0,Q8_0,Q4_K,BF16,F16`).
pub fn parse_formats(s: &str) -> Result<Vec<WeightFormat>, String> {
    s.split(',')
        .map(|name| {
            WeightFormat::ALL
                .into_iter()
                .find(|f| f.name().eq_ignore_ascii_case(name.trim()) && *f != WeightFormat::F32)
                .ok_or_else(|| {
                    format!("unknown weight format `{name}` (Q4_0, Q8_0, Q4_K, BF16, F16)")
                })
        })
        .collect()
}

/// Weight shapes `N_OUTxN_IN[,..]`.
pub fn parse_quant_shapes(s: &str) -> Result<Vec<(usize, usize)>, String> {
    s.split(',')
        .map(|shape| {
            let bad = || format!("`{shape}` is not N_OUTxN_IN (e.g. 14336x4096)");
            let (n, k) = shape.trim().split_once('x').ok_or_else(bad)?;
            Ok((n.parse().map_err(|_| bad())?, k.parse().map_err(|_| bad())?))
        })
        .collect()
}

/// Token counts `T[,..]`.
pub fn parse_tokens(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<usize>()
                .ok()
                .filter(|t| *t > 0)
                .ok_or_else(|| format!("`{t}` is not a token count (1 or more)"))
        })
        .collect()
}

/// The bytes that should stay out of L2 between two uses of the same copy of the weights.
const ROTATE_BYTES: usize = 256 << 20;

/// `copies` device copies of `rows` repetitions of `row`.
fn repeated<T: crate::DeviceRepr + Copy>(
    gpu: &Gpu,
    row: &[T],
    rows: usize,
    copies: usize,
) -> crate::Result<Vec<DeviceBuffer<T>>> {
    let mut host = Vec::with_capacity(row.len() * rows);
    for _ in 0..rows {
        host.extend_from_slice(row);
    }
    (0..copies)
        .map(|_| DeviceBuffer::from_host(gpu, &host))
        .collect()
}

/// The copies of `bytes` bytes that keep each use of one out of L2 ([`ROTATE_BYTES`]); one
/// on the emulated device.
fn copies_for(bytes: usize, emulated: bool) -> usize {
    if emulated {
        1
    } else {
        ROTATE_BYTES.div_ceil(bytes.max(1)).max(2)
    }
}

/// One shape's dequantized weights for cuBLAS, in bf16 and f32 copies.
struct CublasWeights {
    w16: Vec<DeviceBuffer<bf16>>,
    w32: Vec<DeviceBuffer<f32>>,
    turn: usize,
}

impl CublasWeights {
    /// The milliseconds per call of cuBLAS bf16 (`cublasGemmEx`) and f32 (`cublasSgemm`)
    /// at `g` on the activations `xs` (`g.m × g.k`).
    fn time(
        &mut self,
        cublas: &Cublas,
        stream: &Stream,
        timing: &Timing,
        g: &Gemm,
        xs: &[f32],
    ) -> crate::Result<(f64, f64)> {
        let gpu = stream.gpu();
        let x16 = DeviceBuffer::from_host(
            gpu,
            &xs.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>(),
        )?;
        let x32 = DeviceBuffer::from_host(gpu, xs)?;
        let mut y16 = DeviceBuffer::<bf16>::alloc(gpu, g.m * g.n)?;
        let mut y32 = DeviceBuffer::<f32>::alloc(gpu, g.m * g.n)?;
        let w = self;
        let bf16_ms = timing.per_call_ms(stream, || {
            w.turn = (w.turn + 1) % w.w16.len();
            // SAFETY: every buffer lives until the stream is synchronized below, on the one
            // stream that writes and reads them.
            unsafe { cublas.gemm_ex(stream, g, &x16, &w.w16[w.turn], &mut y16) }
        })?;
        let f32_ms = timing.per_call_ms(stream, || {
            w.turn = (w.turn + 1) % w.w32.len();
            // SAFETY: as above.
            unsafe {
                cublas.sgemm(
                    stream,
                    g,
                    CublasMath::Default,
                    &x32,
                    &w.w32[w.turn],
                    &mut y32,
                )
            }
        })?;
        stream.synchronize()?;
        Ok((bf16_ms, f32_ms))
    }
}

/// Runs the comparison of the module docs on `gpu`, one row per format, shape and token
/// count, written as each is measured.
pub fn run_quant(
    gpu: &Gpu,
    opts: &QuantBenchOptions,
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let timing = Timing::for_gpu(gpu);
    let emulated = gpu.backend_kind() == BackendKind::Emulated;
    let cublas = Cublas::load(gpu);
    writeln!(
        out,
        "quant bench on {}: timed with events on one stream, median of {} runs after {} warm-ups, per call",
        gpu.name(),
        timing.runs,
        timing.warmup
    )?;
    match &cublas {
        Ok(c) => writeln!(
            out,
            "cuBLAS from {} on the dequantized weights: bf16 (cublasGemmEx) and f32 (cublasSgemm); x = cuBLAS time / ours",
            c.path()
        )?,
        Err(e) => writeln!(out, "no cuBLAS ({e}): our figures only")?,
    }
    writeln!(
        out,
        "{:<6} {:>13} {:>6} {:>25} {:>10} {:>8} {:>8} {:>8} {:>7} {:>9} {:>11} {:>8} {:>11} {:>8}",
        "format",
        "n_out x n_in",
        "tokens",
        "kernel",
        "µs",
        "host µs",
        "GB/s",
        "of copy",
        "TF/s",
        "max err",
        "bf16 µs",
        "x bf16",
        "f32 µs",
        "x f32"
    )?;
    let stream = gpu.default_stream();
    let mut rng = SplitMix64::new(7);
    for &(n_out, n_in) in &opts.shapes {
        let (n_out, n_in) = if emulated {
            (n_out.min(64), n_in.min(512))
        } else {
            (n_out, n_in)
        };
        for &format in &opts.formats {
            let row = rng.signed_units(n_in)?;
            let row_bytes = quantize(format, &row, 1, n_in)?;
            let bytes = row_bytes.len() * n_out;
            let copies = copies_for(bytes, emulated);
            let weights = repeated(gpu, &row_bytes, n_out, copies)?;
            let mut copy_dst = DeviceBuffer::<u8>::alloc(gpu, bytes)?;
            let mut turn = 0usize;
            let copy_ms = timing.per_call_ms(&stream, || {
                turn = (turn + 1) % copies;
                stream.copy_dtod_async(&mut copy_dst, &weights[turn])
            })?;
            let copy_gbs = 2.0 * bytes as f64 / copy_ms / 1e6;
            let mut theirs_w = match &cublas {
                Ok(_) => {
                    let deq = dequantize(format, &row_bytes, 1, n_in)?;
                    let deq16: Vec<bf16> = deq.iter().map(|&v| bf16::from_f32(v)).collect();
                    Some(CublasWeights {
                        w16: repeated(gpu, &deq16, n_out, copies_for(2 * n_out * n_in, emulated))?,
                        w32: repeated(gpu, &deq, n_out, copies_for(4 * n_out * n_in, emulated))?,
                        turn: 0,
                    })
                }
                Err(_) => None,
            };
            let deq_row = dequantize(format, &row_bytes, 1, n_in)?;
            for &tokens in &opts.tokens {
                let xs = rng.signed_units(tokens * n_in)?;
                let x = DeviceBuffer::from_host(gpu, &xs)?;
                let mut y = DeviceBuffer::<f32>::alloc(gpu, tokens * n_out)?;
                let g = Gemm::new(tokens, n_out, n_in, BLayout::NK);
                let theirs = match (&cublas, &mut theirs_w) {
                    (Ok(c), Some(w)) => Some(w.time(c, &stream, &timing, &g, &xs)?),
                    _ => None,
                };
                // Every row of the weights is `deq_row`: each token's outputs are one dot product.
                let want: Vec<(f64, f64)> = xs
                    .chunks(n_in)
                    .map(|xt| {
                        xt.iter()
                            .zip(&deq_row)
                            .fold((0.0, 0.0), |(d, s), (&a, &b)| {
                                let t = f64::from(a) * f64::from(b);
                                (d + t, s + t.abs())
                            })
                    })
                    .collect();
                let mut modes = vec![Mode::Exact];
                if INT8_FORMATS.contains(&format) && tokens <= QGEMV_MAX_TOKENS as usize {
                    modes.push(Mode::Int8);
                }
                if tokens >= PREFILL_MIN_TOKENS && gpu.compute_capability() >= (8, 0) {
                    modes.extend(TC_PREFILL_TYPES.map(Mode::Tc));
                }
                for mode in modes {
                    let call = |w: &DeviceBuffer<u8>, y: &mut DeviceBuffer<f32>| match mode {
                        Mode::Exact => qgemm(&stream, &g, format, w, &x, None, None, y),
                        Mode::Int8 => qgemm_int8(&stream, &g, format, w, &x, None, None, y),
                        Mode::Tc(half) => qgemm_tc(&stream, &g, format, half, w, &x, None, None, y),
                    };
                    let ms = timing.per_call_ms(&stream, || {
                        turn = (turn + 1) % copies;
                        call(&weights[turn], &mut y)
                    })?;
                    stream.synchronize()?;
                    // What submitting one call costs the host (the stream idle before each):
                    // where it nears the device time, back-to-back calls are bound by the host.
                    let host = timing::host_median(&stream, timing.warmup, timing.runs, || {
                        call(&weights[0], &mut y)
                    })?;
                    let err = max_error(&y.to_host()?, &want, n_out);
                    let read = bytes + 4 * tokens * (n_in + n_out);
                    let gbs = read as f64 / ms / 1e6;
                    let tflops = 2.0 * (tokens * n_out * n_in) as f64 / ms / 1e9;
                    let us = |ms: f64| format!("{:.1}", ms * 1e3);
                    let x = |theirs: f64| format!("{:.3}x", theirs / ms);
                    let ptr = weights[0].device_ptr();
                    let kernel = match mode {
                        Mode::Exact => pick(&stream, &g, format, ptr)?,
                        Mode::Int8 => pick_int8(&stream, &g, format, ptr)?,
                        Mode::Tc(half) => pick_tc(&stream, &g, format, half, ptr)?,
                    };
                    writeln!(
                        out,
                        "{:<6} {:>13} {:>6} {:>25} {:>10.1} {:>8.1} {:>8.0} {:>7.0}% {:>7.2} {:>9.1e} {:>11} {:>8} {:>11} {:>8}",
                        format.name(),
                        format!("{n_out}x{n_in}"),
                        tokens,
                        kernel.to_string(),
                        ms * 1e3,
                        host.as_secs_f64() * 1e6,
                        gbs,
                        100.0 * gbs / copy_gbs,
                        tflops,
                        err,
                        theirs.map_or("-".into(), |t| us(t.0)),
                        theirs.map_or("-".into(), |t| x(t.0)),
                        theirs.map_or("-".into(), |t| us(t.1)),
                        theirs.map_or("-".into(), |t| x(t.1)),
                    )?;
                }
            }
            stream.synchronize()?;
        }
    }
    Ok(())
}

/// The largest error of the outputs `y` (`[tokens][n_out]`, every output of token `t` the
/// dot product `want[t].0`) relative to the sum of the magnitudes of its products
/// (`want[t].1`, the scale of a dot product's rounding errors).
fn max_error(y: &[f32], want: &[(f64, f64)], n_out: usize) -> f64 {
    y.chunks(n_out)
        .zip(want)
        .flat_map(|(row, &(w, s))| {
            row.iter()
                .map(move |&v| (f64::from(v) - w).abs() / s.max(f64::MIN_POSITIVE))
        })
        .fold(0.0f64, f64::max)
}

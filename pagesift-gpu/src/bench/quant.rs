//! The decode kernel over quantized weights ([`crate::ops::quant::qgemm`]) against the copy
//! bandwidth of the same device, in one process: for each format, weight shape (`n_out ×
//! n_in`) and token count, the time per call and the bytes it must read (the weights once,
//! the activations, the outputs) as GB/s and as a share of a device-to-device copy's GB/s
//! (bytes read + written) of the same weights, measured in the same run.
//!
//! The weights are one row quantized by the host code, repeated for every row, in enough
//! copies (used in turn) that each call reads them from device memory, not from L2.

use std::io::Write;

use super::{BenchError, SplitMix64, Timing};
use crate::gemm::{BLayout, Gemm};
use crate::ops::quant::qgemm;
use crate::quant::{quantize, WeightFormat};
use crate::{BackendKind, DeviceBuffer, Gpu};

/// What `bench quant` measures.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantBenchOptions {
    pub formats: Vec<WeightFormat>,
    /// Weight shapes `(n_out, n_in)`.
    pub shapes: Vec<(usize, usize)>,
    pub tokens: Vec<usize>,
}

impl Default for QuantBenchOptions {
    /// Every format of the decode kernel at 1, 2, 4, 8 and 16 tokens on 4096 × 4096,
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
            tokens: vec![1, 2, 4, 8, 16],
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

/// Runs the comparison of the module docs on `gpu`, one row per format, shape and token
/// count, written as each is measured.
pub fn run_quant(
    gpu: &Gpu,
    opts: &QuantBenchOptions,
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let timing = Timing::for_gpu(gpu);
    let emulated = gpu.backend_kind() == BackendKind::Emulated;
    writeln!(
        out,
        "quant bench on {}: timed with events on one stream, median of {} runs after {} warm-ups, per call",
        gpu.name(),
        timing.runs,
        timing.warmup
    )?;
    writeln!(
        out,
        "{:<6} {:>13} {:>6} {:>10} {:>10} {:>10} {:>9}",
        "format", "n_out x n_in", "tokens", "µs", "GB/s", "copy GB/s", "of copy"
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
            let mut host = Vec::with_capacity(bytes);
            for _ in 0..n_out {
                host.extend_from_slice(&row_bytes);
            }
            let copies = if emulated {
                1
            } else {
                ROTATE_BYTES.div_ceil(bytes.max(1)).max(2)
            };
            let weights = (0..copies)
                .map(|_| DeviceBuffer::from_host(gpu, &host))
                .collect::<crate::Result<Vec<_>>>()?;
            let mut copy_dst = DeviceBuffer::<u8>::alloc(gpu, bytes)?;
            let mut turn = 0usize;
            let copy_ms = timing.per_call_ms(&stream, || {
                turn = (turn + 1) % copies;
                stream.copy_dtod_async(&mut copy_dst, &weights[turn])
            })?;
            let copy_gbs = 2.0 * bytes as f64 / copy_ms / 1e6;
            for &tokens in &opts.tokens {
                let x = DeviceBuffer::from_host(gpu, &rng.signed_units(tokens * n_in)?)?;
                let mut y = DeviceBuffer::<f32>::alloc(gpu, tokens * n_out)?;
                let g = Gemm::new(tokens, n_out, n_in, BLayout::NK);
                let ms = timing.per_call_ms(&stream, || {
                    turn = (turn + 1) % copies;
                    qgemm(&stream, &g, format, &weights[turn], &x, None, None, &mut y)
                })?;
                let read = bytes + 4 * tokens * (n_in + n_out);
                let gbs = read as f64 / ms / 1e6;
                writeln!(
                    out,
                    "{:<6} {:>13} {:>6} {:>10.1} {:>10.0} {:>10.0} {:>8.0}%",
                    format.name(),
                    format!("{n_out}x{n_in}"),
                    tokens,
                    ms * 1e3,
                    gbs,
                    copy_gbs,
                    100.0 * gbs / copy_gbs
                )?;
            }
            stream.synchronize()?;
        }
    }
    Ok(())
}

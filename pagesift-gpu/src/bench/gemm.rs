//! GEMM against cuBLAS on the same device buffers and the same stream, in one process.
//!
//! For each shape (M × N × K, B as weights `[N, K]` unless the row says `:KN`) and precision:
//! our GEMM at `F32` and `Tf32x3` against `cublasSgemm` in its default math (exact f32), at
//! `Tf32` against `cublasSgemm` in TF32 tensor-op math. M ≤ 8 with B `[N, K]` runs the exact
//! decode kernel at every precision, so only `F32` is shown there. cuBLAS queues on our stream
//! (`cublasSetStream`), and both are timed alike by [`Timing`]: events on that stream after
//! warm-ups, the median of runs of back-to-back calls, the time per call.
//!
//! Each row: TFLOP/s of ours and cuBLAS's and their ratio (cuBLAS's time over ours), the max
//! error of each on 256 sampled outputs relative to `Σ |a b|` against an f64 dot product, and
//! the cost of the fused epilogue (bias + gelu + residual) against the plain GEMM. Decode rows
//! add GB/s of weight bytes, and each GEMM's weight GB/s as a share of the bandwidth of a
//! device-to-device copy of as many bytes, timed right before the row (a copy's GB/s count
//! the bytes read + written). Without cuBLAS ([`super::cublas`]) the table says so and holds
//! our figures alone.

use std::fmt;
use std::io::Write;
use std::str::FromStr;

use super::cublas::{Cublas, CublasMath};
use super::{BenchError, SplitMix64, Timing};
use crate::cpu::gemm::output;
use crate::ops::gemm::gemm;
use crate::{Act, BLayout, BackendKind, DeviceBuffer, DeviceRead, Gemm, Gpu, Precision};

/// One GEMM shape of the comparison: `[M, K] · B` with B `[N, K]` ([`BLayout::NK`], weights)
/// or `[K, N]` ([`BLayout::KN`]).
///
/// Written `MxNxK` (B `[N, K]`) or `MxNxK:KN` (`:NK` also accepted), as [`FromStr`] parses it
/// and [`fmt::Display`] prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// How B is stored.
    pub layout: BLayout,
}

impl GemmShape {
    /// A shape with B as weights `[N, K]`.
    pub const fn nk(m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape {
            m,
            n,
            k,
            layout: BLayout::NK,
        }
    }

    /// Whether the shape runs the decode kernel (M ≤ 8, B `[N, K]`), at every precision, in
    /// rows that report bandwidth.
    pub fn is_decode(&self) -> bool {
        self.m <= 8 && self.layout == BLayout::NK
    }
}

impl fmt::Display for GemmShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{}x{}x{}", self.m, self.n, self.k);
        match self.layout {
            BLayout::NK => f.pad(&s),
            BLayout::KN => f.pad(&format!("{s}:KN")),
        }
    }
}

impl FromStr for GemmShape {
    type Err = String;

    /// `MxNxK` or `MxNxK:KN` / `MxNxK:NK`; every dimension a positive integer, every operand
    /// small enough to count its bytes in a `usize`.
    fn from_str(s: &str) -> Result<GemmShape, String> {
        let text = s.trim();
        let (dims, layout) = match text.split_once(':') {
            None => (text, BLayout::NK),
            Some((dims, layout)) => match layout.trim().to_ascii_uppercase().as_str() {
                "NK" => (dims, BLayout::NK),
                "KN" => (dims, BLayout::KN),
                _ => {
                    return Err(format!(
                        "shape `{text}`: unknown B layout `{layout}` (expected NK or KN)"
                    ))
                }
            },
        };
        let parts: Vec<&str> = dims.split('x').map(str::trim).collect();
        let [m, n, k] = parts[..] else {
            return Err(format!(
                "shape `{text}`: expected MxNxK, e.g. 4096x4096x4096 or 4096x4096x4096:KN"
            ));
        };
        let dim = |name: &str, v: &str| match v.parse::<usize>() {
            Ok(d) if d > 0 => Ok(d),
            _ => Err(format!(
                "shape `{text}`: {name} = `{v}` is not a positive integer"
            )),
        };
        let (m, n, k) = (dim("M", m)?, dim("N", n)?, dim("K", k)?);
        let bytes = |rows: usize, cols: usize| rows.checked_mul(cols)?.checked_mul(4);
        if bytes(m, k).is_none() || bytes(n, k).is_none() || bytes(m, n).is_none() {
            return Err(format!("shape `{text}`: too large"));
        }
        Ok(GemmShape { m, n, k, layout })
    }
}

/// The shapes of a run on a GPU: square ones, prefill-like (512 rows against Llama-sized
/// weights), and decode (M ≤ 8).
pub const DEFAULT_SHAPES: &[GemmShape] = &[
    GemmShape::nk(1024, 1024, 1024),
    GemmShape::nk(2048, 2048, 2048),
    GemmShape::nk(4096, 4096, 4096),
    GemmShape {
        m: 4096,
        n: 4096,
        k: 4096,
        layout: BLayout::KN,
    },
    GemmShape::nk(8192, 8192, 8192),
    GemmShape::nk(512, 4096, 4096),
    GemmShape::nk(512, 14336, 4096),
    GemmShape::nk(512, 4096, 14336),
    GemmShape::nk(128, 4096, 4096),
    GemmShape::nk(32, 4096, 4096),
    GemmShape::nk(8, 4096, 4096),
    GemmShape::nk(1, 4096, 4096),
    GemmShape::nk(1, 14336, 4096),
];

/// The shape of a run on the emulated device, where [`DEFAULT_SHAPES`] would take hours.
pub const EMULATED_SHAPE: GemmShape = GemmShape::nk(33, 40, 17);

/// Every precision, in the order of the table.
pub const ALL_PRECISIONS: [Precision; 3] = [Precision::F32, Precision::Tf32x3, Precision::Tf32];

/// The environment variable of [`GemmBenchOptions::from_env`] listing the shapes.
pub const SHAPES_ENV: &str = "PAGESIFT_BENCH_SHAPES";
/// The environment variable of [`GemmBenchOptions::from_env`] listing the precisions.
pub const PRECISIONS_ENV: &str = "PAGESIFT_BENCH_PRECISIONS";

/// What [`run_gemm`] measures.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmBenchOptions {
    /// The shapes, in order; `None`: [`DEFAULT_SHAPES`] on a GPU, [`EMULATED_SHAPE`] on the
    /// emulated device.
    pub shapes: Option<Vec<GemmShape>>,
    /// The precisions, in order (default [`ALL_PRECISIONS`]).
    pub precisions: Vec<Precision>,
}

impl Default for GemmBenchOptions {
    fn default() -> GemmBenchOptions {
        GemmBenchOptions {
            shapes: None,
            precisions: ALL_PRECISIONS.to_vec(),
        }
    }
}

impl GemmBenchOptions {
    /// The defaults, with the shapes of `PAGESIFT_BENCH_SHAPES` and the precisions of
    /// `PAGESIFT_BENCH_PRECISIONS` where set (lists as [`parse_shapes`] and
    /// [`parse_precisions`] read them).
    ///
    /// Errors: the variable and what is wrong with its value.
    pub fn from_env() -> Result<GemmBenchOptions, String> {
        let mut opts = GemmBenchOptions::default();
        if let Ok(v) = std::env::var(SHAPES_ENV) {
            opts.shapes = Some(parse_shapes(&v).map_err(|e| format!("{SHAPES_ENV}: {e}"))?);
        }
        if let Ok(v) = std::env::var(PRECISIONS_ENV) {
            opts.precisions = parse_precisions(&v).map_err(|e| format!("{PRECISIONS_ENV}: {e}"))?;
        }
        Ok(opts)
    }
}

/// A comma-separated list of [`GemmShape`]s, e.g. `4096x4096x4096,4096x4096x4096:KN,1x4096x4096`.
///
/// Errors: an empty list, or the first entry that is not a shape.
pub fn parse_shapes(list: &str) -> Result<Vec<GemmShape>, String> {
    if list.trim().is_empty() {
        return Err("no shapes given (expected MxNxK[,..])".into());
    }
    list.split(',').map(str::parse).collect()
}

/// A comma-separated list of precisions, named as [`Precision`]'s variants (`F32`, `Tf32x3`,
/// `Tf32`, in any case); duplicates are dropped, the order kept.
///
/// Errors: an empty list, or the first name that is no precision.
pub fn parse_precisions(list: &str) -> Result<Vec<Precision>, String> {
    if list.trim().is_empty() {
        return Err("no precisions given (expected F32, Tf32x3 or Tf32)".into());
    }
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        let p = ALL_PRECISIONS
            .into_iter()
            .find(|p| format!("{p:?}").eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("unknown precision `{name}` (expected F32, Tf32x3 or Tf32)"))?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Runs the comparison of the module docs on `gpu` and writes its table to `out`: a line
/// naming the device and cuBLAS (or why there is none), a header, one row per shape and
/// precision, written as each is measured.
///
/// Errors: [`BenchError::Gpu`] when a device operation fails (an allocation, a launch, a
/// cuBLAS call), [`BenchError::Write`] when `out` fails.
pub fn run_gemm(gpu: &Gpu, opts: &GemmBenchOptions, out: &mut dyn Write) -> Result<(), BenchError> {
    let cublas = Cublas::load(gpu);
    let timing = Timing::for_gpu(gpu);
    match &cublas {
        Ok(c) => writeln!(
            out,
            "gemm bench on {}: cuBLAS from {}",
            gpu.name(),
            c.path()
        )?,
        Err(e) => writeln!(
            out,
            "gemm bench on {}: no cuBLAS ({e}); our figures only",
            gpu.name()
        )?,
    }
    writeln!(
        out,
        "timed with events on one stream: median of {} runs after {} warm-ups, per call",
        timing.runs, timing.warmup
    )?;
    writeln!(
        out,
        "{:<22} {:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9}",
        "shape",
        "prec",
        "ours TF/s",
        "cuBLAS",
        "ratio",
        "ours err",
        "cuBL err",
        "GB/s W",
        "epi cost",
        "copy GB/s",
        "ours/copy",
        "cuBL/copy"
    )?;
    let emulated = [EMULATED_SHAPE];
    let shapes: &[GemmShape] = match &opts.shapes {
        Some(shapes) => shapes,
        None if gpu.backend_kind() == BackendKind::Emulated => &emulated,
        None => DEFAULT_SHAPES,
    };
    for &shape in shapes {
        bench_shape(
            gpu,
            cublas.as_ref().ok(),
            timing,
            shape,
            &opts.precisions,
            out,
        )?;
    }
    Ok(())
}

/// The rows of one shape.
fn bench_shape(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    timing: Timing,
    shape: GemmShape,
    precisions: &[Precision],
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let GemmShape { m, n, k, layout } = shape;
    let mut rng = SplitMix64::new((m as u64) * 31 + (n as u64) * 7 + k as u64);
    let (a_h, b_h) = (rng.signed_units(m * k)?, rng.signed_units(n * k)?);
    let (bias_h, res_h) = (rng.signed_units(n)?, rng.signed_units(m * n)?);
    let a = DeviceBuffer::from_host(gpu, &a_h)?;
    let b = DeviceBuffer::from_host(gpu, &b_h)?;
    let bias = DeviceBuffer::from_host(gpu, &bias_h)?;
    let res = DeviceBuffer::from_host(gpu, &res_h)?;
    let mut c = DeviceBuffer::<f32>::zeroed(gpu, m * n)?;
    let mut w_copy = if shape.is_decode() {
        Some(DeviceBuffer::<f32>::alloc(gpu, n * k)?)
    } else {
        None
    };
    let stream = gpu.new_stream()?;
    // cuBLAS's work is known to no buffer: everything the buffers had queued is done first,
    // after that every use is on `stream`, and the buffers drop (declared above) only after
    // `stream` is done, whichever way this function returns.
    gpu.synchronize()?;
    let _drain = Drain(&stream);
    let g = Gemm::new(m, n, k, layout);
    let err = |c: &DeviceBuffer<f32>| -> crate::Result<f64> {
        stream.synchronize()?;
        let got = c.to_host()?;
        let mut worst = 0.0f64;
        let mut r = SplitMix64::new(5);
        for _ in 0..256 {
            let (i, j) = (r.below(m), r.below(n));
            let want = output(&g, &a_h, &b_h, None, None, &got, (0, i, j));
            let e =
                (f64::from(got[i * n + j]) - want.value).abs() / want.s_ab.max(f64::MIN_POSITIVE);
            worst = worst.max(e);
        }
        Ok(worst)
    };
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    let tf = |ms: f64| flops / ms / 1e9;
    let weight_bytes = (n * k * 4) as f64;
    let gbs = |bytes: f64, ms: f64| bytes / ms / 1e6;
    // cuBLAS in exact f32 (the bar of F32 and Tf32x3) and in TF32 (the bar of Tf32): (ms, err).
    let mut bars = [None, None];
    for (slot, math) in [CublasMath::Default, CublasMath::Tf32TensorOp]
        .into_iter()
        .enumerate()
    {
        let tf32 = math == CublasMath::Tf32TensorOp;
        let wanted = precisions.iter().any(|&p| {
            (p == Precision::Tf32) == tf32 && (!shape.is_decode() || p == Precision::F32)
        });
        if let (Some(cb), true) = (cublas, wanted) {
            let ms = timing.per_call_ms(&stream, || {
                // SAFETY: every use of `a`, `b` and `c` is on `stream` (their earlier work was
                // waited for above), so stream order places this call among them; `err`
                // synchronizes `stream` before reading `c`, and `_drain` before they drop.
                unsafe { cb.sgemm(&stream, &g, math, &a, &b, &mut c) }
            })?;
            bars[slot] = Some((ms, err(&c)?));
        }
    }
    for &precision in precisions {
        if shape.is_decode() && precision != Precision::F32 {
            continue;
        }
        let copy_ms = match &mut w_copy {
            Some(w) => Some(timing.per_call_ms(&stream, || stream.copy_dtod_async(w, &b))?),
            None => None,
        };
        let g = g.with_precision(precision);
        let ours = timing.per_call_ms(&stream, || gemm(&stream, &g, &a, &b, None, None, &mut c))?;
        let ours_err = err(&c)?;
        let ge = g.with_act(Act::Gelu);
        let fused = timing.per_call_ms(&stream, || {
            gemm(
                &stream,
                &ge,
                &a,
                &b,
                Some(&bias as &dyn DeviceRead<f32>),
                Some(&res as &dyn DeviceRead<f32>),
                &mut c,
            )
        })?;
        let bar = bars[(precision == Precision::Tf32) as usize];
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        let copy_gbs = copy_ms.map(|ms| gbs(2.0 * weight_bytes, ms));
        let share =
            |ms: f64| copy_gbs.map(|c| format!("{:.1}%", 100.0 * gbs(weight_bytes, ms) / c));
        writeln!(
            out,
            "{:<22} {:<7} {:>9.1} {:>9} {:>7} {:>9.2e} {:>9} {:>9} {:>+7.1}% {:>9} {:>9} {:>9}",
            shape,
            format!("{precision:?}"),
            tf(ours),
            or_dash(bar.map(|(ms, _)| format!("{:.1}", tf(ms)))),
            or_dash(bar.map(|(ms, _)| format!("{:.3}x", ms / ours))),
            ours_err,
            or_dash(bar.map(|(_, e)| format!("{e:.2e}"))),
            or_dash(copy_ms.map(|_| format!("{:.0}", gbs(weight_bytes, ours)))),
            100.0 * (fused / ours - 1.0),
            or_dash(copy_gbs.map(|c| format!("{c:.0}"))),
            or_dash(share(ours)),
            or_dash(bar.and_then(|(ms, _)| share(ms))),
        )?;
    }
    stream.synchronize()?;
    Ok(())
}

/// Waits for a stream when dropped, so that buffers declared before it outlive the work on it
/// that no buffer knows of (cuBLAS's), also on an early return.
struct Drain<'a>(&'a crate::Stream);

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        // On success the stream was synchronized already, with its errors returned; on an
        // early return the error that caused it is the one reported.
        let _ = self.0.synchronize();
    }
}

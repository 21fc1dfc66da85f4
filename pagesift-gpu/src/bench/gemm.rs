//! GEMM against cuBLAS on the same device buffers and the same stream, in one process.
//!
//! For each shape (M × N × K, B as weights `[N, K]` unless the row says `:KN`) and mode
//! ([`GemmMode`]): our GEMM on f32 inputs at `F32` and `Tf32x3` against `cublasSgemm` in its
//! default math (exact f32), at `Tf32` against `cublasSgemm` in TF32 tensor-op math; on bf16
//! and f16 inputs with an output of the same type (`Bf16`, `F16`) against `cublasGemmEx` with
//! A, B and C of that type and f32 accumulation. Both libraries get the same random values,
//! rounded to the inputs' type. M ≤ 8 with B `[N, K]` runs the exact decode kernel on f32
//! inputs at every precision, so of the f32 modes only `F32` is shown there. cuBLAS queues on
//! our stream (`cublasSetStream`), and both are timed alike by [`Timing`]: events on that
//! stream after warm-ups, the median of runs of back-to-back calls, the time per call.
//!
//! Each row: TFLOP/s of ours and cuBLAS's and their ratio (cuBLAS's time over ours), the max error
//! of each on 256 sampled outputs relative to `Σ |a b|` against an f64 dot product of the inputs as
//! stored, and the cost of the fused epilogue (f32 bias + gelu + a residual of the output's type)
//! against the plain GEMM, with that of each of its three parts alone. Decode rows add GB/s of
//! weight bytes (at the inputs' size), and each GEMM's weight GB/s as a share of the bandwidth of a
//! device-to-device copy of as many bytes, timed right before the row (a copy's GB/s count the
//! bytes read + written). On decode rows every call (ours, cuBLAS's, the copy's) reads the next of
//! several copies of B, at least [`ROTATION_BYTES`] of them together, so that the weights come from
//! memory and not from the previous call's leftovers in the L2 cache (50 MB on an H200, more than
//! the 32 MB of 16-bit 4096 × 4096 weights). Without cuBLAS ([`super::cublas`]) the table says so
//! and holds our figures alone.
//!
//! [`measure_gemm`] gives the figures of one shape's rows to any caller (the self test's
//! TFLOP/s); [`run_gemm`] prints the table.

mod options;

use std::io::Write;

pub use options::{
    parse_modes, parse_shapes, GemmBenchOptions, GemmMode, GemmShape, DEFAULT_SHAPES,
    EMULATED_SHAPE, MODES_ENV, PRECISIONS_ENV, SHAPES_ENV,
};

use super::cublas::{Cublas, CublasMath};
use super::{BenchError, SplitMix64, Timing};
use crate::cpu::gemm::output;
use crate::ops::gemm::gemm;
use crate::{
    bf16, f16, Act, ActElement, BackendKind, DeviceBuffer, DeviceRead, Dtype, Gemm, Gpu, Stream,
};

/// The figures of one row of the comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmRow {
    /// The shape measured.
    pub shape: GemmShape,
    /// The mode measured.
    pub mode: GemmMode,
    /// Our time per call, in milliseconds.
    pub ours_ms: f64,
    /// Our max error on the sampled outputs, relative to `Σ |a b|`.
    pub ours_err: f64,
    /// Our time per call with the fused epilogue (bias + gelu + residual), in milliseconds.
    pub fused_ms: f64,
    /// Our time per call with each part of the fused epilogue alone: the bias, the gelu and
    /// the residual, in milliseconds.
    pub part_ms: [f64; 3],
    /// cuBLAS's time per call in milliseconds and its error as ours, where cuBLAS loaded.
    pub cublas: Option<(f64, f64)>,
    /// On a decode shape: the time of a device-to-device copy of B, in milliseconds.
    pub copy_ms: Option<f64>,
}

impl GemmRow {
    /// TFLOP/s of a call that takes `ms` (2 · M · N · K operations).
    pub fn tflops(&self, ms: f64) -> f64 {
        let GemmShape { m, n, k, .. } = self.shape;
        2.0 * m as f64 * n as f64 * k as f64 / ms / 1e9
    }

    /// Our TFLOP/s.
    pub fn ours_tflops(&self) -> f64 {
        self.tflops(self.ours_ms)
    }

    /// cuBLAS's TFLOP/s, where it ran.
    pub fn cublas_tflops(&self) -> Option<f64> {
        self.cublas.map(|(ms, _)| self.tflops(ms))
    }

    /// cuBLAS's time over ours (above 1: ours is faster), where it ran.
    pub fn ratio(&self) -> Option<f64> {
        self.cublas.map(|(ms, _)| ms / self.ours_ms)
    }

    /// The bytes of B, at the inputs' element size.
    pub fn weight_bytes(&self) -> f64 {
        (self.shape.n * self.shape.k * self.mode.input().size()) as f64
    }

    /// The copy's GB/s (bytes read + written), on a decode shape.
    pub fn copy_gbs(&self) -> Option<f64> {
        self.copy_ms.map(|ms| 2.0 * self.weight_bytes() / ms / 1e6)
    }
}

/// Runs the comparison of the module docs on `gpu` and writes its table to `out`: a line
/// naming the device and cuBLAS (or why there is none), a header, one row per shape and
/// mode, written as each is measured.
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
        "{:<22} {:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9}",
        "shape",
        "mode",
        "ours TF/s",
        "cuBLAS",
        "ratio",
        "ours err",
        "cuBL err",
        "GB/s W",
        "epi cost",
        "bias",
        "gelu",
        "res",
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
        measure_gemm(
            gpu,
            cublas.as_ref().ok(),
            timing,
            shape,
            &opts.modes,
            &mut |row| Ok(write_row(out, row)?),
        )?;
    }
    Ok(())
}

/// One row of the table.
fn write_row(out: &mut dyn Write, row: &GemmRow) -> std::io::Result<()> {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let gbs = |ms: f64| row.weight_bytes() / ms / 1e6;
    let share = |ms: f64| {
        row.copy_gbs()
            .map(|c| format!("{:.1}%", 100.0 * gbs(ms) / c))
    };
    let cublas_ms = row.cublas.map(|(ms, _)| ms);
    let cost = |ms: f64| 100.0 * (ms / row.ours_ms - 1.0);
    writeln!(
        out,
        "{:<22} {:<7} {:>9.1} {:>9} {:>7} {:>9.2e} {:>9} {:>9} {:>+7.1}% {:>+6.1}% {:>+6.1}% {:>+6.1}% {:>9} {:>9} {:>9}",
        row.shape,
        row.mode,
        row.ours_tflops(),
        or_dash(row.cublas_tflops().map(|t| format!("{t:.1}"))),
        or_dash(row.ratio().map(|r| format!("{r:.3}x"))),
        row.ours_err,
        or_dash(row.cublas.map(|(_, e)| format!("{e:.2e}"))),
        or_dash(row.copy_ms.map(|_| format!("{:.0}", gbs(row.ours_ms)))),
        cost(row.fused_ms),
        cost(row.part_ms[0]),
        cost(row.part_ms[1]),
        cost(row.part_ms[2]),
        or_dash(row.copy_gbs().map(|c| format!("{c:.0}"))),
        or_dash(share(row.ours_ms)),
        or_dash(cublas_ms.and_then(share)),
    )
}

/// Measures the rows of `shape` in `modes` (those that [`GemmMode::runs_on`] it, in order)
/// on `gpu`, against `cublas` where given, timed by `timing`, and hands each row to `row` as
/// it is measured. The inputs are random values in `[-1, 1)` from a seed of the shape,
/// rounded to each mode's input type.
///
/// Errors: [`BenchError::Gpu`] when a device operation fails; what `row` returns.
pub fn measure_gemm(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    timing: Timing,
    shape: GemmShape,
    modes: &[GemmMode],
    row: &mut dyn FnMut(&GemmRow) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let modes: Vec<GemmMode> = modes.iter().copied().filter(|m| m.runs_on(shape)).collect();
    let GemmShape { m, n, k, layout } = shape;
    let mut rng = SplitMix64::new((m as u64) * 31 + (n as u64) * 7 + k as u64);
    let values = Values {
        a: rng.signed_units(m * k)?,
        b: rng.signed_units(n * k)?,
        bias: rng.signed_units(n)?,
        res: rng.signed_units(m * n)?,
    };
    let wants = |input: Dtype| modes.iter().any(|m| m.input() == input);
    let decode = shape.is_decode();
    let mut f32_ops = Operands::<f32>::new_if(wants(Dtype::F32), gpu, &values, decode)?;
    let mut bf16_ops = Operands::<bf16>::new_if(wants(Dtype::Bf16), gpu, &values, decode)?;
    let mut f16_ops = Operands::<f16>::new_if(wants(Dtype::F16), gpu, &values, decode)?;
    drop(values);
    let stream = gpu.new_stream()?;
    // cuBLAS's work is known to no buffer: everything the buffers had queued is done first,
    // after that every use is on `stream`, and the buffers drop (declared above) only after
    // `stream` is done, whichever way this function returns.
    gpu.synchronize()?;
    let _drain = Drain(&stream);
    let bench = ShapeBench {
        stream: &stream,
        cublas,
        timing,
        shape,
        g: Gemm::new(m, n, k, layout),
    };
    let made = "operands are made for every mode's input type";
    for mode in modes {
        let figures = match mode {
            GemmMode::F32 | GemmMode::Tf32x3 | GemmMode::Tf32 => {
                bench.row(f32_ops.as_mut().expect(made), mode)?
            }
            GemmMode::Bf16 => bench.row(bf16_ops.as_mut().expect(made), mode)?,
            GemmMode::F16 => bench.row(f16_ops.as_mut().expect(made), mode)?,
        };
        row(&figures)?;
    }
    stream.synchronize()?;
    Ok(())
}

/// The random values of one shape, in f32, before any rounding.
struct Values {
    a: Vec<f32>,
    b: Vec<f32>,
    bias: Vec<f32>,
    res: Vec<f32>,
}

/// An input type of the comparison, with the cuBLAS call that is its bar.
trait BenchInput: ActElement {
    /// Queues cuBLAS's `C = A·B` of `g` on `stream`: `cublasSgemm` in `math` for f32,
    /// `cublasGemmEx` (`math` unused) for f16 and bf16.
    ///
    /// # Safety
    /// As for [`Cublas::sgemm`].
    unsafe fn cublas_gemm(
        cublas: &Cublas,
        stream: &Stream,
        g: &Gemm,
        math: CublasMath,
        ops: &mut Operands<Self>,
    ) -> crate::Result<()>;
}

impl BenchInput for f32 {
    unsafe fn cublas_gemm(
        cublas: &Cublas,
        stream: &Stream,
        g: &Gemm,
        math: CublasMath,
        ops: &mut Operands<f32>,
    ) -> crate::Result<()> {
        // SAFETY: this function's contract is `sgemm`'s.
        unsafe { cublas.sgemm(stream, g, math, &ops.a, &ops.b, &mut ops.c) }
    }
}

/// `cublas_gemm` of a 16-bit type: `cublasGemmEx`.
macro_rules! gemm_ex_input {
    ($($t:ty),*) => {$(
        impl BenchInput for $t {
            unsafe fn cublas_gemm(
                cublas: &Cublas,
                stream: &Stream,
                g: &Gemm,
                _math: CublasMath,
                ops: &mut Operands<$t>,
            ) -> crate::Result<()> {
                // SAFETY: this function's contract is `gemm_ex`'s (that of `sgemm`).
                unsafe { cublas.gemm_ex(stream, g, &ops.a, &ops.b, &mut ops.c) }
            }
        }
    )*};
}
gemm_ex_input!(f16, bf16);

/// One shape's operands in one input type `T`, on the device and as stored.
struct Operands<T: ActElement> {
    a: DeviceBuffer<T>,
    b: DeviceBuffer<T>,
    bias: DeviceBuffer<f32>,
    res: DeviceBuffer<T>,
    c: DeviceBuffer<T>,
    /// On a decode shape, where the copy of B goes.
    b_copy: Option<DeviceBuffer<T>>,
    /// On a decode shape, the other copies of B that the calls rotate through.
    b_rot: Vec<DeviceBuffer<T>>,
    /// The copy of B (0 for `b`, else `b_rot[turn - 1]`) that `b` holds now.
    turn: usize,
    /// A and B as stored, widened to f32: the reference's inputs.
    a_stored: Vec<f32>,
    b_stored: Vec<f32>,
    /// cuBLAS's (time, error) in its default math and in TF32 (f32 inputs only), measured at
    /// the first row that needs each.
    bars: [Option<(f64, f64)>; 2],
}

impl<T: BenchInput> Operands<T> {
    /// `values` rounded to `T` (the bias stays f32) and uploaded, when `wanted`.
    fn new_if(
        wanted: bool,
        gpu: &Gpu,
        values: &Values,
        decode: bool,
    ) -> crate::Result<Option<Operands<T>>> {
        if !wanted {
            return Ok(None);
        }
        let round = |v: &[f32]| -> Vec<T> { v.iter().map(|&x| T::from_f32(x)).collect() };
        let widen = |v: &[T]| -> Vec<f32> { v.iter().map(|&x| x.to_f32()).collect() };
        let (a, b) = (round(&values.a), round(&values.b));
        let copies = if decode {
            (ROTATION_BYTES.div_ceil((b.len() * T::DTYPE.size()).max(1))).clamp(1, 16)
        } else {
            1
        };
        let mut b_rot = Vec::with_capacity(copies - 1);
        for _ in 1..copies {
            b_rot.push(DeviceBuffer::from_host(gpu, &b)?);
        }
        Ok(Some(Operands {
            a: DeviceBuffer::from_host(gpu, &a)?,
            b: DeviceBuffer::from_host(gpu, &b)?,
            bias: DeviceBuffer::from_host(gpu, &values.bias)?,
            res: DeviceBuffer::from_host(gpu, &round(&values.res))?,
            c: DeviceBuffer::zeroed(gpu, values.res.len())?,
            b_copy: if decode {
                Some(DeviceBuffer::alloc(gpu, b.len())?)
            } else {
                None
            },
            b_rot,
            turn: 0,
            a_stored: widen(&a),
            b_stored: widen(&b),
            bars: [None, None],
        }))
    }

    /// Puts the next copy of B in `b` (the copies hold the same values).
    fn rotate(&mut self) {
        if self.b_rot.is_empty() {
            return;
        }
        let next = (self.turn + 1) % (self.b_rot.len() + 1);
        // Back to the original order first, then the next copy into `b`.
        if self.turn > 0 {
            std::mem::swap(&mut self.b, &mut self.b_rot[self.turn - 1]);
        }
        if next > 0 {
            std::mem::swap(&mut self.b, &mut self.b_rot[next - 1]);
        }
        self.turn = next;
    }
}

/// The least bytes of the copies of B that decode rows rotate through: four times an H200's
/// L2 cache.
pub const ROTATION_BYTES: usize = 200 << 20;

/// What every row of one shape shares.
struct ShapeBench<'a> {
    stream: &'a Stream,
    cublas: Option<&'a Cublas>,
    timing: Timing,
    shape: GemmShape,
    /// The plain GEMM (precision F32, no epilogue).
    g: Gemm,
}

impl ShapeBench<'_> {
    /// The figures of `mode` on the operands of its input type.
    fn row<T: BenchInput>(&self, ops: &mut Operands<T>, mode: GemmMode) -> crate::Result<GemmRow> {
        let stream = self.stream;
        let tf32 = mode == GemmMode::Tf32;
        if let (Some(cublas), None) = (self.cublas, ops.bars[tf32 as usize]) {
            let math = if tf32 {
                CublasMath::Tf32TensorOp
            } else {
                CublasMath::Default
            };
            let ms = self.timing.per_call_ms(stream, || {
                ops.rotate();
                // SAFETY: every use of the operands is on `stream` (their earlier work was
                // waited for before the first row), so stream order places this call among
                // them; `max_error` synchronizes `stream` before reading C, and the caller's
                // `Drain` before they drop (the rotated copies of B live in `ops` as well).
                unsafe { T::cublas_gemm(cublas, stream, &self.g, math, ops) }
            })?;
            ops.bars[tf32 as usize] = Some((ms, self.max_error(ops)?));
        }
        let copy_ms = match ops.b_copy.take() {
            Some(mut w) => {
                let ms = self.timing.per_call_ms(stream, || {
                    ops.rotate();
                    stream.copy_dtod_async(&mut w, &ops.b)
                });
                ops.b_copy = Some(w);
                Some(ms?)
            }
            None => None,
        };
        let g = self.g.with_precision(mode.precision());
        let ours_ms = self.timing.per_call_ms(stream, || {
            ops.rotate();
            gemm(stream, &g, &ops.a, &ops.b, None, None, &mut ops.c)
        })?;
        let ours_err = self.max_error(ops)?;
        let ge = g.with_act(Act::Gelu);
        let mut epilogue = |g: &Gemm, bias: bool, res: bool| {
            self.timing.per_call_ms(stream, || {
                ops.rotate();
                gemm(
                    stream,
                    g,
                    &ops.a,
                    &ops.b,
                    bias.then_some(&ops.bias as &dyn DeviceRead<f32>),
                    res.then_some(&ops.res as &dyn DeviceRead<T>),
                    &mut ops.c,
                )
            })
        };
        let fused_ms = epilogue(&ge, true, true)?;
        let part_ms = [
            epilogue(&g, true, false)?,
            epilogue(&ge, false, false)?,
            epilogue(&g, false, true)?,
        ];
        Ok(GemmRow {
            shape: self.shape,
            mode,
            ours_ms,
            ours_err,
            fused_ms,
            part_ms,
            cublas: ops.bars[tf32 as usize],
            copy_ms,
        })
    }

    /// The largest error of C on 256 sampled outputs, relative to `Σ |a b|`, against the f64
    /// reference on the inputs as stored.
    fn max_error<T: BenchInput>(&self, ops: &Operands<T>) -> crate::Result<f64> {
        self.stream.synchronize()?;
        let got: Vec<f32> = ops.c.to_host()?.into_iter().map(|v| v.to_f32()).collect();
        let (g, n) = (&self.g, self.shape.n);
        let mut worst = 0.0f64;
        let mut r = SplitMix64::new(5);
        for _ in 0..256 {
            let (i, j) = (r.below(self.shape.m), r.below(n));
            let want = output(g, &ops.a_stored, &ops.b_stored, None, None, &got, (0, i, j));
            let e =
                (f64::from(got[i * n + j]) - want.value).abs() / want.s_ab.max(f64::MIN_POSITIVE);
            worst = worst.max(e);
        }
        Ok(worst)
    }
}

/// Waits for a stream when dropped, so that buffers declared before it outlive the work on it
/// that no buffer knows of (cuBLAS's), also on an early return.
struct Drain<'a>(&'a Stream);

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        // On success the stream was synchronized already, with its errors returned; on an
        // early return the error that caused it is the one reported.
        let _ = self.0.synchronize();
    }
}

//! What the GEMM comparison measures: its shapes ([`GemmShape`]), its modes ([`GemmMode`]) and
//! how both are read from flags and the environment.

use std::fmt;
use std::str::FromStr;

use crate::{BLayout, Dtype, Precision};

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

    /// Whether the shape is a decode shape (M ≤ 8, B `[N, K]`), whose rows report bandwidth.
    /// f32 inputs run the exact decode kernel there at every precision (so of the f32 modes
    /// only [`GemmMode::F32`] runs), 16-bit inputs the tensor-core kernel.
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

/// What one row of the comparison runs: the input type and, for f32 inputs, the precision,
/// each against its cuBLAS call.
///
/// Written as the variants are named (`F32`, `Tf32x3`, `Tf32`, `Bf16`, `F16`, in any case),
/// as [`FromStr`] parses it and [`fmt::Display`] prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmMode {
    /// f32 inputs and output at [`Precision::F32`], against `cublasSgemm` in its default math
    /// (exact f32).
    F32,
    /// f32 inputs and output at [`Precision::Tf32x3`], against `cublasSgemm` in its default
    /// math (the accuracy it matches).
    Tf32x3,
    /// f32 inputs and output at [`Precision::Tf32`], against `cublasSgemm` in TF32 tensor-op
    /// math.
    Tf32,
    /// bf16 inputs and output (`gemm::<bf16, bf16>`, what engines run), against
    /// `cublasGemmEx` with bf16 A, B and C and f32 accumulation.
    Bf16,
    /// f16 inputs and output, against `cublasGemmEx` with f16 A, B and C and f32
    /// accumulation.
    F16,
}

impl GemmMode {
    /// Every mode, in the order of the table.
    pub const ALL: [GemmMode; 5] = [
        GemmMode::F32,
        GemmMode::Tf32x3,
        GemmMode::Tf32,
        GemmMode::Bf16,
        GemmMode::F16,
    ];

    /// The type of A, B, C and the residual.
    pub fn input(self) -> Dtype {
        match self {
            GemmMode::F32 | GemmMode::Tf32x3 | GemmMode::Tf32 => Dtype::F32,
            GemmMode::Bf16 => Dtype::Bf16,
            GemmMode::F16 => Dtype::F16,
        }
    }

    /// The precision our GEMM is asked for ([`Precision::F32`] for 16-bit inputs, whose
    /// products are exact at every precision).
    pub fn precision(self) -> Precision {
        match self {
            GemmMode::Tf32x3 => Precision::Tf32x3,
            GemmMode::Tf32 => Precision::Tf32,
            GemmMode::F32 | GemmMode::Bf16 | GemmMode::F16 => Precision::F32,
        }
    }

    /// Whether the mode has a row for `shape`: every mode except `Tf32x3` and `Tf32` on a
    /// decode shape, where f32 inputs run the exact decode kernel whatever the precision.
    pub fn runs_on(self, shape: GemmShape) -> bool {
        !(shape.is_decode() && matches!(self, GemmMode::Tf32x3 | GemmMode::Tf32))
    }

    fn name(self) -> &'static str {
        match self {
            GemmMode::F32 => "F32",
            GemmMode::Tf32x3 => "Tf32x3",
            GemmMode::Tf32 => "Tf32",
            GemmMode::Bf16 => "Bf16",
            GemmMode::F16 => "F16",
        }
    }
}

impl fmt::Display for GemmMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for GemmMode {
    type Err = String;

    /// A mode's name in any case, surrounding spaces ignored.
    fn from_str(s: &str) -> Result<GemmMode, String> {
        let name = s.trim();
        GemmMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("unknown mode `{name}` (expected {})", expected_modes()))
    }
}

/// `F32, Tf32x3, Tf32, Bf16 or F16`.
fn expected_modes() -> String {
    let names: Vec<&str> = GemmMode::ALL.iter().map(|m| m.name()).collect();
    let (last, rest) = names.split_last().expect("modes exist");
    format!("{} or {last}", rest.join(", "))
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

/// The environment variable of [`GemmBenchOptions::from_env`] listing the shapes.
pub const SHAPES_ENV: &str = "PAGESIFT_BENCH_SHAPES";
/// The environment variable of [`GemmBenchOptions::from_env`] listing the modes.
pub const MODES_ENV: &str = "PAGESIFT_BENCH_MODES";
/// The older name of [`MODES_ENV`], read where that one is not set.
pub const PRECISIONS_ENV: &str = "PAGESIFT_BENCH_PRECISIONS";

/// What [`super::run_gemm`] measures.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmBenchOptions {
    /// The shapes, in order; `None`: [`DEFAULT_SHAPES`] on a GPU, [`EMULATED_SHAPE`] on the
    /// emulated device.
    pub shapes: Option<Vec<GemmShape>>,
    /// The modes, in order (default [`GemmMode::ALL`]).
    pub modes: Vec<GemmMode>,
}

impl Default for GemmBenchOptions {
    fn default() -> GemmBenchOptions {
        GemmBenchOptions {
            shapes: None,
            modes: GemmMode::ALL.to_vec(),
        }
    }
}

impl GemmBenchOptions {
    /// The defaults, with the shapes of `PAGESIFT_BENCH_SHAPES` and the modes of
    /// `PAGESIFT_BENCH_MODES` (or, where that is not set, `PAGESIFT_BENCH_PRECISIONS`) where
    /// set, lists as [`parse_shapes`] and [`parse_modes`] read them.
    ///
    /// Errors: the variable and what is wrong with its value.
    pub fn from_env() -> Result<GemmBenchOptions, String> {
        let mut opts = GemmBenchOptions::default();
        if let Ok(v) = std::env::var(SHAPES_ENV) {
            opts.shapes = Some(parse_shapes(&v).map_err(|e| format!("{SHAPES_ENV}: {e}"))?);
        }
        for name in [MODES_ENV, PRECISIONS_ENV] {
            if let Ok(v) = std::env::var(name) {
                opts.modes = parse_modes(&v).map_err(|e| format!("{name}: {e}"))?;
                break;
            }
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

/// A comma-separated list of [`GemmMode`]s (`F32`, `Tf32x3`, `Tf32`, `Bf16`, `F16`, in any
/// case), e.g. `F32,Bf16`; duplicates are dropped, the order kept.
///
/// Errors: an empty list, or the first name that is no mode.
pub fn parse_modes(list: &str) -> Result<Vec<GemmMode>, String> {
    if list.trim().is_empty() {
        return Err(format!("no modes given (expected {})", expected_modes()));
    }
    let mut out = Vec::new();
    for name in list.split(',') {
        let mode: GemmMode = name.parse()?;
        if !out.contains(&mode) {
            out.push(mode);
        }
    }
    Ok(out)
}

//! The description of a matrix multiply, [`Gemm`], shared by the CPU reference
//! ([`crate::cpu::gemm`]), the kernels ([`crate::kernels::gemm`]) and the operation
//! ([`crate::ops::gemm`]).
//!
//! `C = act(alpha · A·B + beta · C + bias) + residual` over a batch of matrices: A is `[M, K]`
//! row-major with leading dimension `lda`; B is `[K, N]` row-major ([`BLayout::KN`]) or
//! `[N, K]` row-major ([`BLayout::NK`], weights `[n_out, n_in]`: `y = x · Wᵀ`); C and the
//! residual are `[M, N]` with their own leading dimensions; the bias has one value per column.
//! The matrices of a batch lie `stride_*` elements apart.

use crate::act::{Act, DEFAULT_LEAKY_SLOPE};
use crate::{error, Dtype, Error, Result};

/// How B is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BLayout {
    /// `[K, N]` row-major: `B[k][n]` at `k * ldb + n`.
    KN,
    /// `[N, K]` row-major: `B[k][n]` at `n * ldb + k` (weights `[n_out, n_in]`, `y = x · Wᵀ`).
    NK,
}

/// The arithmetic of a GEMM, each with its error bound in [`tolerance`]. A precision is a
/// floor: where a more accurate kernel is as fast (the decode kernel, a device without tensor
/// cores for TF32), the dispatch runs that one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Exact f32 products and f32 sums (FFMA), the default.
    #[default]
    F32,
    /// f32-accurate on tensor cores (3xTF32): each operand split into a TF32 head and the
    /// TF32 rounding of its remainder, three TF32 products per pair (the small · small one
    /// left out): a relative error of about 2^-21 per product, against 2^-24 for `F32`.
    Tf32x3,
    /// TF32 tensor cores: the inputs reduced to 10 mantissa bits (a relative 2^-10 each:
    /// the `mma.sync` kernels round to nearest, within 2^-11; the Hopper kernels feed the
    /// f32 inputs from shared memory to `wgmma`, which reads their top 19 bits, truncating),
    /// products exact, f32 sums.
    Tf32,
}

impl Precision {
    /// The relative error of one product of two f32 inputs (0 for exact products): an f32
    /// reduced to TF32 (rounded or truncated) is within 2^-10 of its input, so a TF32
    /// product is within `2 · 2^-10 + 2^-20`; 3xTF32 leaves out `a_lo · b_lo` (2^-22) and
    /// rounds the two remainders (2^-22 each).
    pub fn product_error(self) -> f64 {
        match self {
            Precision::F32 => 0.0,
            Precision::Tf32x3 => 3.0 * f64::powi(2.0, -22),
            Precision::Tf32 => 2.0 * f64::powi(2.0, -10) + f64::powi(2.0, -20),
        }
    }

    /// The unit roundoff of the kernels' sums: 2^-24 for FFMA, 2^-23 on tensor cores (their
    /// adders may truncate instead of rounding).
    pub fn sum_unit(self) -> f64 {
        match self {
            Precision::F32 => f64::powi(2.0, -24),
            Precision::Tf32x3 | Precision::Tf32 => f64::powi(2.0, -23),
        }
    }

    /// Additions per product along one output's sum (3xTF32 adds three products per pair).
    pub fn sums_per_product(self) -> f64 {
        match self {
            Precision::Tf32x3 => 3.0,
            Precision::F32 | Precision::Tf32 => 1.0,
        }
    }
}

/// A GEMM's shape, layouts, scalars and epilogue (see the module docs). Build it with
/// [`Gemm::new`] and the `with_*` methods; the defaults are dense matrices (`lda = K`,
/// `ldb = N` or `K`, `ldc = ldr = N`), one matrix, `alpha = 1`, `beta = 0`, no activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub b_layout: BLayout,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    /// The residual's leading dimension.
    pub ldr: usize,
    /// Matrices in the batch.
    pub batch: usize,
    /// Elements between consecutive matrices of A, B, C and the residual.
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
    pub stride_r: usize,
    pub alpha: f32,
    /// `C` is read only where `beta` is not 0 (then it may hold anything, NaN included).
    pub beta: f32,
    pub act: Act,
    /// The negative slope of [`Act::LeakyRelu`].
    pub slope: f32,
    pub precision: Precision,
}

impl Gemm {
    /// `C[M, N] = A[M, K] · B` with B stored as `b_layout`, dense, one matrix.
    pub fn new(m: usize, n: usize, k: usize, b_layout: BLayout) -> Gemm {
        Gemm {
            m,
            n,
            k,
            b_layout,
            lda: k,
            ldb: match b_layout {
                BLayout::KN => n,
                BLayout::NK => k,
            },
            ldc: n,
            ldr: n,
            batch: 1,
            stride_a: m.saturating_mul(k),
            stride_b: n.saturating_mul(k),
            stride_c: m.saturating_mul(n),
            stride_r: m.saturating_mul(n),
            alpha: 1.0,
            beta: 0.0,
            act: Act::Identity,
            slope: DEFAULT_LEAKY_SLOPE,
            precision: Precision::F32,
        }
    }

    /// Leading dimensions of A, B and C (the residual's follows C's; see [`Gemm::with_ldr`]).
    pub fn with_lds(self, lda: usize, ldb: usize, ldc: usize) -> Gemm {
        Gemm {
            lda,
            ldb,
            ldc,
            ldr: ldc,
            ..self
        }
    }

    /// The residual's leading dimension.
    pub fn with_ldr(self, ldr: usize) -> Gemm {
        Gemm { ldr, ..self }
    }

    /// A batch of `batch` matrices, `stride_*` elements apart (the residual's stride follows
    /// C's).
    pub fn with_batch(
        self,
        batch: usize,
        stride_a: usize,
        stride_b: usize,
        stride_c: usize,
    ) -> Gemm {
        Gemm {
            batch,
            stride_a,
            stride_b,
            stride_c,
            stride_r: stride_c,
            ..self
        }
    }

    /// `alpha` and `beta`.
    pub fn with_scale(self, alpha: f32, beta: f32) -> Gemm {
        Gemm {
            alpha,
            beta,
            ..self
        }
    }

    /// The activation applied after the bias, before the residual.
    pub fn with_act(self, act: Act) -> Gemm {
        Gemm { act, ..self }
    }

    /// The negative slope of [`Act::LeakyRelu`].
    pub fn with_slope(self, slope: f32) -> Gemm {
        Gemm { slope, ..self }
    }

    /// The arithmetic.
    pub fn with_precision(self, precision: Precision) -> Gemm {
        Gemm { precision, ..self }
    }

    /// Whether there is nothing to compute (`M`, `N` or the batch is 0).
    pub fn is_empty(&self) -> bool {
        self.m == 0 || self.n == 0 || self.batch == 0
    }

    /// The index of `A[i][p]` of matrix `z`.
    pub fn a_index(&self, z: usize, i: usize, p: usize) -> usize {
        z * self.stride_a + i * self.lda + p
    }

    /// The index of `B[p][j]` of matrix `z` (in either layout).
    pub fn b_index(&self, z: usize, p: usize, j: usize) -> usize {
        z * self.stride_b
            + match self.b_layout {
                BLayout::KN => p * self.ldb + j,
                BLayout::NK => j * self.ldb + p,
            }
    }

    /// The index of `C[i][j]` of matrix `z`.
    pub fn c_index(&self, z: usize, i: usize, j: usize) -> usize {
        z * self.stride_c + i * self.ldc + j
    }

    /// The index of `residual[i][j]` of matrix `z`.
    pub fn r_index(&self, z: usize, i: usize, j: usize) -> usize {
        z * self.stride_r + i * self.ldr + j
    }

    /// Checks the shape against the lengths of the operands (`bias`, `residual`: `None` when
    /// absent): leading dimensions at least the row lengths, every element of every matrix of
    /// the batch inside its buffer, sizes within the kernels' 32-bit dimensions. `op` names
    /// the operation in the error.
    pub fn validate(
        &self,
        op: &'static str,
        a: usize,
        b: usize,
        c: usize,
        bias: Option<usize>,
        residual: Option<usize>,
    ) -> Result<()> {
        let invalid = |message: String| Err(Error::from(error::InvalidArgument { op, message }));
        let (m, n, k) = (self.m, self.n, self.k);
        for (name, v) in [("M", m), ("N", n), ("K", k)] {
            if v >= 1 << 31 {
                return invalid(format!("{name} = {v} must be below 2^31"));
            }
        }
        if self.batch > MAX_BATCH {
            return invalid(format!("batch = {} exceeds {MAX_BATCH}", self.batch));
        }
        let b_row = match self.b_layout {
            BLayout::KN => ("ldb", self.ldb, n, "N"),
            BLayout::NK => ("ldb", self.ldb, k, "K"),
        };
        let mut lds = vec![("lda", self.lda, k, "K"), b_row, ("ldc", self.ldc, n, "N")];
        if residual.is_some() {
            lds.push(("ldr", self.ldr, n, "N"));
        }
        for (name, ld, row, dim) in lds {
            if ld < row {
                return invalid(format!("{name} = {ld} is less than {dim} = {row}"));
            }
            if ld >= 1 << 31 {
                return invalid(format!("{name} = {ld} must be below 2^31"));
            }
        }
        if !self.slope.is_finite() && self.act == Act::LeakyRelu {
            return invalid(format!("the leaky relu slope {} is not finite", self.slope));
        }
        if let Some(len) = bias {
            if len != n {
                return Err(Error::from(error::LengthMismatch {
                    what: format!("{op}: bias (one value per column, N = {n})"),
                    expected: n,
                    actual: len,
                }));
            }
        }
        if self.is_empty() {
            return Ok(());
        }
        let last = self.batch - 1;
        // `stride · (batch - 1) + ld · (rows - 1) + row`, the elements an operand spans, in
        // checked arithmetic: an extent past the address space is an error, never a wrapped
        // (small) number that a short buffer would pass.
        let extent = |stride: usize, ld: usize, rows: usize, row: usize| {
            stride
                .checked_mul(last)
                .and_then(|x| ld.checked_mul(rows - 1).and_then(|y| x.checked_add(y)))
                .and_then(|x| x.checked_add(row))
        };
        let (b_rows, b_row) = match self.b_layout {
            BLayout::KN => (k, n),
            BLayout::NK => (n, k),
        };
        let mut need = Vec::new();
        if k > 0 {
            need.push(("A", extent(self.stride_a, self.lda, m, k), a));
            need.push(("B", extent(self.stride_b, self.ldb, b_rows, b_row), b));
        }
        need.push(("C", extent(self.stride_c, self.ldc, m, n), c));
        if let Some(len) = residual {
            need.push(("residual", extent(self.stride_r, self.ldr, m, n), len));
        }
        for (name, need, len) in need {
            let Some(need) = need else {
                return invalid(format!(
                    "{name}'s extent (M = {m}, N = {n}, K = {k}, batch {} with its strides and leading dimension) overflows the address space",
                    self.batch
                ));
            };
            if len < need {
                return invalid(format!(
                    "{name} holds {len} elements, the shape (M = {m}, N = {n}, K = {k}, batch {}) needs {need}",
                    self.batch
                ));
            }
        }
        Ok(())
    }
}

/// The largest batch (the grid's z dimension).
pub const MAX_BATCH: usize = 65535;

/// The error bound the tests hold every output to, for `K` products, whose absolute values
/// sum to `s_ab` (`Σ |A[i][p] B[p][j]|`), with `s_rest = |beta C| + |bias|` and the result's
/// magnitudes `y = |act(x)|`, `r = |residual|`, for f32 inputs and output
/// ([`tolerance_for`] gives the others):
///
/// `tol = L · ((γ(n) + e_p) · |alpha| · s_ab + 3u · (|alpha| s_ab + s_rest)) + e_act · ulp(y) + u · (y + r)`
///
/// with `u = 2^-24` (f32 rounding); `γ(n) = n u_s / (1 - n u_s)` for a sum of `n = K · s`
/// terms in any order, `u_s` the sum's unit roundoff and `s` the terms per product
/// ([`Precision::sum_unit`], [`Precision::sums_per_product`]); `e_p` the relative error of
/// one product ([`Precision::product_error`]: 0 for F32); `L = 1.5` (the largest slope of
/// any activation: hardswish at 3) and `e_act` the activation's own error in f32 ulps
/// ([`crate::act::max_error_ulps`]). The 3u cover the roundings of `alpha · acc`,
/// `+ beta C` and `+ bias`, the last term the rounding of the residual sum.
pub fn tolerance(g: &Gemm, s_ab: f64, s_rest: f64, y: f64, r: f64) -> f64 {
    tolerance_for(g, Dtype::F32, Dtype::F32, s_ab, s_rest, y, r)
}

/// [`tolerance`] for inputs of `input` and an output of `output` (f32, f16 or bf16; the
/// errors are measured against the f64 result on the inputs as stored). f16 and bf16
/// products are exact in f32 (`e_p = 0`) and sum on tensor cores (`u_s = 2^-23`, `s = 1`)
/// whatever the precision; a 16-bit output adds its own rounding of the f32 result,
/// `u_o · (y + r) + m_o / 2`, with `u_o` its unit roundoff (2^-11 for f16, 2^-8 for bf16)
/// and `m_o` its least subnormal, and the activation's 16-bit form (the kernels compute
/// the activation of a 16-bit output as the activation family does for 16-bit data,
/// within a relative 2^-15 of the f32 function), `2^-15 · y` in place of `e_act · ulp(y)`.
pub fn tolerance_for(
    g: &Gemm,
    input: Dtype,
    output: Dtype,
    s_ab: f64,
    s_rest: f64,
    y: f64,
    r: f64,
) -> f64 {
    let u = f64::powi(2.0, -24);
    let p = g.precision;
    let (per_product, us, e_p) = match input {
        Dtype::F32 => (p.sums_per_product(), p.sum_unit(), p.product_error()),
        _ => (1.0, f64::powi(2.0, -23), 0.0),
    };
    let n = g.k as f64 * per_product;
    let gamma = n * us / (1.0 - n * us);
    let alpha = f64::from(g.alpha.abs());
    let pre = (gamma + e_p) * alpha * s_ab + 3.0 * u * (alpha * s_ab + s_rest);
    let ulp_y = if y > 0.0 {
        f64::from(crate::cpu::act::ulp_f32(y as f32))
    } else {
        f64::from(f32::from_bits(1))
    };
    let out = match output {
        Dtype::F16 => f64::powi(2.0, -11) * (y + r) + f64::powi(2.0, -25),
        Dtype::Bf16 => f64::powi(2.0, -8) * (y + r) + f64::powi(2.0, -134),
        _ => 0.0,
    };
    let act_err = match output {
        Dtype::F16 | Dtype::Bf16 => crate::act::HALF_FORM_REL_ERROR * y,
        _ => f64::from(crate::act::max_error_ulps(g.act)) * ulp_y,
    };
    1.5 * pre + act_err + u * (y + r) + out
}

//! The GEMM reference: every output in f64 from the f32 inputs, with the sums of magnitudes the
//! tests' tolerance ([`crate::gemm::tolerance`]) needs.

use crate::cpu::act::act_f64;
use crate::gemm::Gemm;
use crate::Dtype;

/// One output of the reference: the value and what bounds its error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefValue {
    /// `act(alpha · Σ a b + beta · c + bias) + residual`, in f64.
    pub value: f64,
    /// `Σ |a b|`.
    pub s_ab: f64,
    /// `|beta · c| + |bias|`.
    pub s_rest: f64,
    /// `|act(..)|`.
    pub act: f64,
    /// `|residual|`.
    pub residual: f64,
}

impl RefValue {
    /// The largest error [`crate::gemm::tolerance`] allows a GPU result for this output.
    pub fn tolerance(&self, g: &Gemm) -> f64 {
        crate::gemm::tolerance(g, self.s_ab, self.s_rest, self.act, self.residual)
    }

    /// [`crate::gemm::tolerance_for`]: the bound for inputs of `input` and an output of
    /// `output`.
    pub fn tolerance_for(&self, g: &Gemm, input: Dtype, output: Dtype) -> f64 {
        crate::gemm::tolerance_for(
            g,
            input,
            output,
            self.s_ab,
            self.s_rest,
            self.act,
            self.residual,
        )
    }
}

/// Output `(i, j)` of matrix `z`: `c` is C before the call (read only where `beta` is not 0).
pub fn output(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    c: &[f32],
    (z, i, j): (usize, usize, usize),
) -> RefValue {
    let (mut dot, mut s_ab) = (0.0f64, 0.0f64);
    for p in 0..g.k {
        let t = f64::from(a[g.a_index(z, i, p)]) * f64::from(b[g.b_index(z, p, j)]);
        dot += t;
        s_ab += t.abs();
    }
    let mut x = f64::from(g.alpha) * dot;
    let mut s_rest = 0.0;
    if g.beta != 0.0 {
        let t = f64::from(g.beta) * f64::from(c[g.c_index(z, i, j)]);
        x += t;
        s_rest += t.abs();
    }
    if let Some(bias) = bias {
        x += f64::from(bias[j]);
        s_rest += f64::from(bias[j]).abs();
    }
    let y = act_f64(g.act, g.slope, x);
    let r = residual.map_or(0.0, |r| f64::from(r[g.r_index(z, i, j)]));
    RefValue {
        value: y + r,
        s_ab,
        s_rest,
        act: y.abs(),
        residual: r.abs(),
    }
}

/// Every output of C (a copy of `c` with the outputs of every matrix of the batch replaced;
/// elements between rows keep their values), rounded to f32.
pub fn gemm(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    c: &[f32],
) -> Vec<f32> {
    let mut out = c.to_vec();
    for z in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let v = output(g, a, b, bias, residual, c, (z, i, j));
                out[g.c_index(z, i, j)] = v.value as f32;
            }
        }
    }
    out
}

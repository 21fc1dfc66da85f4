//! The reference semantics of the activation family.
//!
//! `y[i] = act(x[i] + bias[i % cols]) + residual[i]`, with bias and residual optional. The
//! residual is added *after* the activation (the usual engine epilogue `act(x + bias) + residual`).
//!
//! Precision, for every storage type (f32, f16, bf16):
//!
//! 1. `x[i]` and `bias[i % cols]` are widened to f32 and added in f32 (one rounding);
//! 2. the activation of that f32 value is computed in f64 from its exact definition
//!    ([`act_f64`]) and rounded once to f32 ([`act_f32`]);
//! 3. the residual, widened to f32, is added in f32 (one rounding);
//! 4. the f32 result is rounded once to the storage type (round to nearest even).
//!
//! Every GPU activation kernel is tested against these functions.

use crate::act::{Act, ActElement};
use crate::error;
use crate::{Error, Result};

/// `sqrt(2 / pi)`, the constant of the tanh approximation of gelu.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// `1 / sqrt(pi)`.
const FRAC_1_SQRT_PI: f64 = 0.564_189_583_547_756_3;

/// The activation `act` of `x`, computed in f64 from its definition (see [`Act`] for each
/// formula). `slope` is the negative slope of [`Act::LeakyRelu`] and is ignored otherwise.
// `max(0).min(6)` rather than `clamp`: it maps NaN to 0 as PTX `max.f32` / `min.f32` do.
#[allow(clippy::manual_clamp)]
pub fn act_f64(act: Act, slope: f32, x: f64) -> f64 {
    match act {
        Act::Identity => x,
        // `max` and `min` return the non-NaN operand, as PTX `max.f32` / `min.f32` do.
        Act::Relu => x.max(0.0),
        Act::Relu6 => x.max(0.0).min(6.0),
        Act::LeakyRelu => {
            if x >= 0.0 {
                x
            } else {
                x * f64::from(slope)
            }
        }
        Act::Gelu => x * std_normal_cdf(x),
        Act::GeluTanh => {
            let u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
            // 0.5 * (1 + tanh(u)) == sigmoid(2u), without the cancellation for negative u.
            x * sigmoid_f64(2.0 * u)
        }
        Act::Silu => x * sigmoid_f64(x),
        Act::Sigmoid => sigmoid_f64(x),
        Act::Tanh => x.tanh(),
        Act::HardSwish => x * (x + 3.0).max(0.0).min(6.0) / 6.0,
        Act::HardSigmoid => (x + 3.0).max(0.0).min(6.0) / 6.0,
    }
}

/// The activation of an f32 value: [`act_f64`] rounded once to f32.
pub fn act_f32(act: Act, slope: f32, x: f32) -> f32 {
    act_f64(act, slope, f64::from(x)) as f32
}

/// The reference of the whole operation for one element, in f32, before the final rounding to the
/// storage type: `act(x + bias) + residual` with the roundings described in the module docs.
pub fn epilogue_f32(act: Act, slope: f32, x: f32, bias: Option<f32>, residual: Option<f32>) -> f32 {
    let v = match bias {
        Some(b) => x + b,
        None => x,
    };
    let a = act_f32(act, slope, v);
    match residual {
        Some(r) => a + r,
        None => a,
    }
}

/// `y[i] = act(x[i] + bias[i % cols]) + residual[i]` on the CPU: the reference of
/// [`crate::ops::act::activation`].
///
/// `input`, `output` and (when given) `residual` have the same length; `bias` has length `cols`
/// (the input is rows of `cols` elements; a last partial row is allowed). Without a bias `cols` is
/// ignored.
///
/// # Errors
/// [`Error::LengthMismatch`] naming the argument whose length is wrong, [`Error::InvalidArgument`]
/// when a bias is given with `cols == 0`.
pub fn activation<T: ActElement>(
    act: Act,
    slope: f32,
    input: &[T],
    bias: Option<&[T]>,
    residual: Option<&[T]>,
    output: &mut [T],
    cols: usize,
) -> Result<()> {
    check_lengths(
        "cpu::act::activation",
        input.len(),
        bias.map(<[T]>::len),
        residual.map(<[T]>::len),
        output.len(),
        cols,
    )?;
    for (i, (y, x)) in output.iter_mut().zip(input).enumerate() {
        let b = bias.map(|b| b[i % cols].to_f32());
        let r = residual.map(|r| r[i].to_f32());
        *y = T::from_f32(epilogue_f32(act, slope, x.to_f32(), b, r));
    }
    Ok(())
}

/// The in-place form of [`activation`]: `data[i] = act(data[i] + bias[i % cols]) + residual[i]`.
///
/// # Errors
/// As [`activation`].
pub fn activation_inplace<T: ActElement>(
    act: Act,
    slope: f32,
    data: &mut [T],
    bias: Option<&[T]>,
    residual: Option<&[T]>,
    cols: usize,
) -> Result<()> {
    let n = data.len();
    check_lengths(
        "cpu::act::activation_inplace",
        n,
        bias.map(<[T]>::len),
        residual.map(<[T]>::len),
        n,
        cols,
    )?;
    for (i, y) in data.iter_mut().enumerate() {
        let b = bias.map(|b| b[i % cols].to_f32());
        let r = residual.map(|r| r[i].to_f32());
        *y = T::from_f32(epilogue_f32(act, slope, y.to_f32(), b, r));
    }
    Ok(())
}

/// The length rules shared by the CPU reference and the GPU operations.
///
/// `n` is the input length; `bias`, `residual` and `output` the other lengths where given.
pub(crate) fn check_lengths(
    op: &'static str,
    n: usize,
    bias: Option<usize>,
    residual: Option<usize>,
    output: usize,
    cols: usize,
) -> Result<()> {
    if output != n {
        return Err(Error::from(error::LengthMismatch {
            what: format!("{op}: output (input has {n} elements)"),
            expected: n,
            actual: output,
        }));
    }
    if let Some(r) = residual {
        if r != n {
            return Err(Error::from(error::LengthMismatch {
                what: format!("{op}: residual (input has {n} elements)"),
                expected: n,
                actual: r,
            }));
        }
    }
    if let Some(b) = bias {
        if cols == 0 {
            return Err(Error::from(error::InvalidArgument {
                op,
                message: "cols must be at least 1 when a bias is given".into(),
            }));
        }
        if b != cols {
            return Err(Error::from(error::LengthMismatch {
                what: format!("{op}: bias (one per column, cols = {cols})"),
                expected: cols,
                actual: b,
            }));
        }
    }
    Ok(())
}

/// The logistic function `1 / (1 + exp(-x))` in f64, without overflow for large `|x|`.
fn sigmoid_f64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The standard normal distribution function `Phi(x) = 0.5 * erfc(-x / sqrt(2))`, accurate to
/// relative error of about 1e-14 everywhere (also deep in the left tail, where `0.5 * (1 + erf)`
/// would cancel).
pub fn std_normal_cdf(x: f64) -> f64 {
    0.5 * erfc_f64(-x * std::f64::consts::FRAC_1_SQRT_2)
}

/// The error function in f64, relative error about 1e-15.
pub fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        erf_series(a)
    } else {
        1.0 - erfc_continued_fraction(a)
    };
    r.copysign(x)
}

/// The complementary error function `1 - erf(x)` in f64, relative error about 1e-14 (it does not
/// cancel for large `x`).
pub fn erfc_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc_f64(-x);
    }
    if x < 1.5 {
        1.0 - erf_series(x)
    } else if x > 27.3 {
        0.0
    } else {
        erfc_continued_fraction(x)
    }
}

/// `erf(x)` for `0 <= x < 2.5` by the series `2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!!`
/// whose terms are all positive (no cancellation).
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0;
    while term > sum * 1e-18 {
        n += 1.0;
        term *= 2.0 * x2 / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 * FRAC_1_SQRT_PI * (-x2).exp() * sum
}

/// `erfc(x)` for `x >= 1.5` by its continued fraction
/// `exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`, evaluated backwards.
fn erfc_continued_fraction(x: f64) -> f64 {
    // The fraction converges faster for larger x: 100 terms at x = 1.5, about 20 at x = 5.
    let terms = (225.0 / (x * x)).min(90.0) as u32 + 10;
    let mut f = x;
    for k in (1..=terms).rev() {
        f = x + (f64::from(k) * 0.5) / f;
    }
    FRAC_1_SQRT_PI * (-x * x).exp() / f
}

/// The distance between `|v|` and the next larger f32 (the unit in the last place at `v`);
/// the smallest subnormal step for zero and subnormals.
pub fn ulp_f32(v: f32) -> f32 {
    let a = v.abs();
    if !a.is_finite() {
        return f32::NAN;
    }
    let bits = a.to_bits();
    f32::from_bits(bits + 1) - a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Values from a 40-digit evaluation.
        let cases = [
            (0.1, 0.112_462_916_018_284_89),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (2.4999, 0.999_592_830_099_666_5),
            (3.0, 0.999_977_909_503_001_4),
        ];
        for (x, e) in cases {
            let r = erf_f64(x);
            assert!(((r - e) / e).abs() < 1e-14, "erf({x}) = {r}, expected {e}");
            assert_eq!(erf_f64(-x), -r);
        }
    }

    #[test]
    fn erfc_is_accurate_in_the_tail() {
        let cases = [
            (2.5, 4.069_520_174_449_59e-4),
            (4.0, 1.541_725_790_028_002e-8),
            (6.0, 2.151_973_671_249_891_3e-17),
            (10.0, 2.088_487_583_762_545e-45),
        ];
        for (x, e) in cases {
            let r = erfc_f64(x);
            assert!(((r - e) / e).abs() < 1e-13, "erfc({x}) = {r}, expected {e}");
        }
        assert!((erfc_f64(-1.0) - 1.842_700_792_949_715).abs() < 1e-15);
    }

    #[test]
    fn length_rules() {
        assert!(check_lengths("t", 6, Some(3), Some(6), 6, 3).is_ok());
        assert!(matches!(
            check_lengths("t", 6, None, None, 5, 3),
            Err(Error::LengthMismatch(m)) if (m.expected, m.actual) == (6, 5)
        ));
        assert!(matches!(
            check_lengths("t", 6, Some(2), None, 6, 3),
            Err(Error::LengthMismatch(m)) if (m.expected, m.actual) == (3, 2)
        ));
        assert!(check_lengths("t", 7, Some(3), None, 7, 3).is_ok());
        assert!(matches!(
            check_lengths("t", 6, Some(0), None, 6, 0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(check_lengths("t", 7, None, None, 7, 0).is_ok());
    }
}

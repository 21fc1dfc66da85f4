//! Correct rounding to the IEEE binary formats kernels compute in: f16, bf16, f32 and f64.
//!
//! Every function here rounds its exact argument once, in one of the four IEEE rounding
//! directions, working on the bits (integer arithmetic on significands and exponents): from an
//! f64 ([`round_f64`]), from an exact sum of two f64s ([`round_sum`], [`round_scaled_sum`]), from
//! an integer ([`round_i128`]), and the fused multiply-add of f64 operands ([`mul_add`]).
//! Subnormal results are rounded at their own precision, results past the largest finite value
//! overflow as IEEE defines it (to infinity when rounding to nearest or away from zero, to the
//! largest finite value toward zero), zeros keep their sign and NaNs stay quiet NaNs.
//!
//! `half`'s `f16::from_f64` and `bf16::from_f64` round through f32, that is twice, and are not
//! correctly rounded for every input: `bf16::from_f64(1 + 2^-8 + 2^-30)` gives 1 where the
//! nearest bf16 is 1.0078125, `f16::from_f64(0.7692870795726776)` gives 0.76953125 where the
//! nearest f16 is 0.76904297. [`f16_from_f64`] and [`bf16_from_f64`] are the correctly rounded
//! conversions; the CPU references and the emulated device round to 16-bit formats through this
//! module only. (`f16::from_f32` and `bf16::from_f32` round once and are correct.)
//!
//! ```
//! use pagesift_gpu::cpu::round::{bf16_from_f64, f16_from_f64};
//! assert_eq!(bf16_from_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-30)).to_f64(), 1.0078125);
//! assert_eq!(f16_from_f64(0.7692870795726776).to_bits(), 0x3a27);
//! ```

use std::cmp::Ordering;

use half::{bf16, f16};

/// An IEEE binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// binary16 (`f16`): 5 exponent bits, 10 fraction bits.
    F16,
    /// bfloat16 (`bf16`): 8 exponent bits, 7 fraction bits.
    BF16,
    /// binary32 (`f32`): 8 exponent bits, 23 fraction bits.
    F32,
    /// binary64 (`f64`): 11 exponent bits, 52 fraction bits.
    F64,
}

impl Format {
    /// The width of the exponent field.
    pub const fn exponent_bits(self) -> u32 {
        match self {
            Format::F16 => 5,
            Format::BF16 | Format::F32 => 8,
            Format::F64 => 11,
        }
    }

    /// The width of the fraction field (the significand's bits less the implicit one).
    pub const fn fraction_bits(self) -> u32 {
        match self {
            Format::F16 => 10,
            Format::BF16 => 7,
            Format::F32 => 23,
            Format::F64 => 52,
        }
    }

    /// The sign bit of the format's bit pattern.
    pub const fn sign_bit(self) -> u64 {
        1 << (self.exponent_bits() + self.fraction_bits())
    }

    /// The bit pattern of +infinity (one more than the largest finite value's).
    pub const fn infinity(self) -> u64 {
        ((1 << self.exponent_bits()) - 1) << self.fraction_bits()
    }

    /// The value of the bit pattern `bits` (the format's low bits), exactly, as an f64.
    pub fn to_f64(self, bits: u64) -> f64 {
        match self {
            Format::F16 => f16::from_bits(bits as u16).to_f64(),
            Format::BF16 => bf16::from_bits(bits as u16).to_f64(),
            Format::F32 => f32::from_bits(bits as u32) as f64,
            Format::F64 => f64::from_bits(bits),
        }
    }
}

/// An IEEE rounding direction (PTX's `.rn`, `.rz`, `.rm`, `.rp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// To the nearest value, ties to the one with an even significand (`.rn`).
    NearestEven,
    /// Toward zero (`.rz`).
    TowardZero,
    /// Toward negative infinity (`.rm`).
    Down,
    /// Toward positive infinity (`.rp`).
    Up,
}

/// `x` rounded to nearest-even in f16 (one rounding, unlike `f16::from_f64`).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_bits(round_f64(x, Format::F16, Rounding::NearestEven) as u16)
}

/// `x` rounded to nearest-even in bf16 (one rounding, unlike `bf16::from_f64`).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_bits(round_f64(x, Format::BF16, Rounding::NearestEven) as u16)
}

/// The integer `v` rounded to nearest-even in f16 (`v as f64` first would round twice above
/// 2^53).
pub fn f16_from_i128(v: i128) -> f16 {
    f16::from_bits(round_i128(v, Format::F16, Rounding::NearestEven) as u16)
}

/// The integer `v` rounded to nearest-even in bf16.
pub fn bf16_from_i128(v: i128) -> bf16 {
    bf16::from_bits(round_i128(v, Format::BF16, Rounding::NearestEven) as u16)
}

/// `a * b + c` rounded once to nearest-even in f16, as `fma.rn.f16` computes it: the product
/// is exact in f64, [`two_sum`] gives the sum exactly as a pair, and [`round_sum`] rounds the
/// pair.
pub fn f16_mul_add(a: f16, b: f16, c: f16) -> f16 {
    let (s, e) = two_sum(a.to_f64() * b.to_f64(), c.to_f64());
    f16::from_bits(round_sum(s, e, Format::F16, Rounding::NearestEven) as u16)
}

/// `a * b + c` rounded once to nearest-even in bf16, as `fma.rn.bf16` computes it (see
/// [`f16_mul_add`]).
pub fn bf16_mul_add(a: bf16, b: bf16, c: bf16) -> bf16 {
    let (s, e) = two_sum(a.to_f64() * b.to_f64(), c.to_f64());
    bf16::from_bits(round_sum(s, e, Format::BF16, Rounding::NearestEven) as u16)
}

/// The sum `a + b` rounded to nearest f64 and its exact error: `s + e == a + b` exactly and
/// `s` is `a + b` rounded to nearest-even, for finite `a`, `b` whose sum does not overflow.
/// Where `s` is infinite or NaN the error is 0.
pub fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    if !s.is_finite() {
        return (s, 0.0);
    }
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// The bit pattern of `x` rounded to `fmt` in direction `mode`.
///
/// A NaN gives a quiet NaN of the same sign with the top bits of its payload; infinities and
/// zeros keep their sign.
pub fn round_f64(x: f64, fmt: Format, mode: Rounding) -> u64 {
    round_scaled_sum(x, 0.0, 0, fmt, mode)
}

/// The bit pattern of the exact sum `hi + lo` rounded once to `fmt` in direction `mode`.
///
/// The pair must be normalized as [`two_sum`] leaves it: `hi` is `hi + lo` rounded to the
/// nearest f64 (so `|lo|` is at most half an f64 ulp of `hi`) and `lo` is finite. An infinite
/// `hi` is an exact infinity; a zero `hi` with a zero `lo` gives a zero of `hi`'s sign (the sign
/// rules of an exact cancellation are the caller's).
pub fn round_sum(hi: f64, lo: f64, fmt: Format, mode: Rounding) -> u64 {
    round_scaled_sum(hi, lo, 0, fmt, mode)
}

/// The bit pattern of the exact value `(hi + lo) * 2^exp` rounded once to `fmt` in direction
/// `mode`; the pair as for [`round_sum`]. The scaling is exact: it lets a caller compute with
/// operands scaled into the normal range (no underflow, no overflow) and round the unscaled
/// result.
pub fn round_scaled_sum(hi: f64, lo: f64, exp: i32, fmt: Format, mode: Rounding) -> u64 {
    if hi.is_nan() {
        return quiet_nan(hi, fmt);
    }
    let sign = if hi.is_sign_negative() {
        fmt.sign_bit()
    } else {
        0
    };
    if hi.is_infinite() {
        return sign | fmt.infinity();
    }
    if lo.is_nan() {
        return quiet_nan(lo, fmt);
    }
    if hi == 0.0 {
        return if lo == 0.0 {
            sign
        } else {
            round_scaled_sum(lo, 0.0, exp, fmt, mode)
        };
    }
    let (neg, sig, e) = decompose(hi);
    let tail = if lo == 0.0 {
        Ordering::Equal
    } else if (lo < 0.0) == neg {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    round_magnitude(neg, sig as u128, e.saturating_add(exp), tail, fmt, mode)
}

/// The bit pattern of the integer `v` rounded once to `fmt` in direction `mode`.
pub fn round_i128(v: i128, fmt: Format, mode: Rounding) -> u64 {
    if v == 0 {
        return 0;
    }
    round_magnitude(v < 0, v.unsigned_abs(), 0, Ordering::Equal, fmt, mode)
}

/// The bit pattern of `a * b + c`, computed exactly and rounded once to `fmt` in direction
/// `mode` (IEEE fusedMultiplyAdd of f64 operands with the result in `fmt`).
///
/// `0 * inf` and `inf - inf` give the default quiet NaN, a NaN operand a quiet NaN of the first
/// NaN (`a`, `b`, `c`). An exact zero result is `+0`, or `-0` when rounding down, except that
/// the sum of two zeros of the same sign keeps that sign.
pub fn mul_add(a: f64, b: f64, c: f64, fmt: Format, mode: Rounding) -> u64 {
    for x in [a, b, c] {
        if x.is_nan() {
            return quiet_nan(x, fmt);
        }
    }
    let pneg = a.is_sign_negative() != b.is_sign_negative();
    let zero_sum = |neg_p: bool, neg_c: bool| {
        let neg = if neg_p == neg_c {
            neg_p
        } else {
            mode == Rounding::Down
        };
        if neg {
            fmt.sign_bit()
        } else {
            0
        }
    };
    if a.is_infinite() || b.is_infinite() {
        if a == 0.0 || b == 0.0 || (c.is_infinite() && c.is_sign_negative() != pneg) {
            return quiet_nan(f64::NAN, fmt);
        }
        return if pneg { fmt.sign_bit() } else { 0 } | fmt.infinity();
    }
    if c.is_infinite() {
        return round_f64(c, fmt, mode);
    }
    if a == 0.0 || b == 0.0 {
        return if c == 0.0 {
            zero_sum(pneg, c.is_sign_negative())
        } else {
            round_f64(c, fmt, mode)
        };
    }
    let (_, sa, ea) = decompose(a);
    let (_, sb, eb) = decompose(b);
    // The exact product: at most 106 significant bits.
    let (p, ep) = (sa as u128 * sb as u128, ea + eb);
    if c == 0.0 {
        return round_magnitude(pneg, p, ep, Ordering::Equal, fmt, mode);
    }
    let (cneg, sc, ec) = decompose(c);
    // Both terms with their leading bit at bit 125; the one of the larger magnitude is `big`,
    // the other is shifted to `big`'s exponent, the bits shifted out kept as a sticky bit 0.
    // A sticky bit is needed only when the terms are 20 or more bits apart, and then the
    // result's leading bit is at bit 124 or above, far above where any format rounds it.
    let norm = |s: u128, e: i32| {
        let z = s.leading_zeros() as i32 - 2;
        (s << z, e - z)
    };
    let (p, ep) = norm(p, ep);
    let (cs, ec) = norm(sc as u128, ec);
    let ((big, ebig, bneg), (small, esmall, sneg)) = if (ep, p) >= (ec, cs) {
        ((p, ep, pneg), (cs, ec, cneg))
    } else {
        ((cs, ec, cneg), (p, ep, pneg))
    };
    let d = (ebig - esmall) as u32;
    let small = if d == 0 {
        small
    } else if d >= 126 {
        1
    } else {
        (small >> d) | u128::from(small & ((1u128 << d) - 1) != 0)
    };
    let sum = if bneg == sneg {
        big + small
    } else {
        big - small
    };
    if sum == 0 {
        return zero_sum(false, true);
    }
    round_magnitude(bneg, sum, ebig, Ordering::Equal, fmt, mode)
}

/// The sign, the integer significand and the exponent of its last bit of a finite, nonzero `x`:
/// `|x| = sig * 2^exp`.
fn decompose(x: f64) -> (bool, u64, i32) {
    let bits = x.to_bits();
    let field = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (sig, exp) = if field == 0 {
        (frac, -1074)
    } else {
        (frac | (1 << 52), field - 1075)
    };
    (bits >> 63 != 0, sig, exp)
}

/// A quiet NaN of `fmt` with the sign and the top payload bits of the NaN `x`.
fn quiet_nan(x: f64, fmt: Format) -> u64 {
    let bits = x.to_bits();
    let m = fmt.fraction_bits();
    let sign = if bits >> 63 != 0 { fmt.sign_bit() } else { 0 };
    let payload = (bits & ((1 << 52) - 1)) >> (52 - m);
    sign | fmt.infinity() | (1 << (m - 1)) | payload
}

/// Where the dropped part of a magnitude lies between the value truncated to the format and
/// the next one up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// Nothing dropped: the truncated value is exact.
    Zero,
    /// Less than half the gap.
    Below,
    /// Exactly half.
    Half,
    /// More than half.
    Above,
}

/// Rounds the magnitude `sig * 2^exp + t` (`sig != 0`) with sign `neg` to `fmt`, where `t` is
/// zero or of the sign `tail` and at most half an ulp of `sig`'s last bit (the low part of a
/// pair normalized as [`round_sum`] requires). With `sig` a whole f64 significand that is
/// enough: `t` can only break a tie or make an exact value inexact, never move past a midpoint.
fn round_magnitude(
    neg: bool,
    sig: u128,
    exp: i32,
    tail: Ordering,
    fmt: Format,
    mode: Rounding,
) -> u64 {
    debug_assert!(sig != 0);
    let m = fmt.fraction_bits() as i32;
    // The exponent of the least subnormal's last bit: emin - m, emin = 2 - 2^(e - 1).
    let qmin = 2 - (1i32 << (fmt.exponent_bits() - 1)) - m;
    let top = 127 - sig.leading_zeros() as i32;
    // The exponent of the format's last significand bit at this magnitude.
    let q = top.saturating_add(exp).saturating_sub(m).max(qmin);
    let shift = i64::from(q) - i64::from(exp);
    let (n, mut rest) = if shift <= 0 {
        // Nothing to drop (the shift is at most m - top here).
        (sig << (-shift) as u32, Rest::Zero)
    } else if shift > 128 {
        (0, Rest::Below)
    } else {
        let (n, r) = if shift == 128 {
            (0, sig)
        } else {
            (sig >> shift, sig & ((1u128 << shift) - 1))
        };
        let half = 1u128 << (shift - 1);
        let rest = match r.cmp(&half) {
            _ if r == 0 => Rest::Zero,
            Ordering::Less => Rest::Below,
            Ordering::Equal => Rest::Half,
            Ordering::Greater => Rest::Above,
        };
        (n, rest)
    };
    // The bit pattern of the truncated magnitude: for a normal value `n` carries the implicit
    // bit, which adds one to the exponent field (q - qmin); for a subnormal q == qmin.
    let inf = u128::from(fmt.infinity());
    let mut trunc = ((q - qmin) as u128)
        .saturating_mul(1 << m)
        .saturating_add(n);
    if trunc >= inf {
        // At or past 2^(emax + 1): past the largest finite value by more than half its ulp.
        trunc = inf - 1;
        rest = Rest::Above;
    } else {
        match (rest, tail) {
            (Rest::Zero, Ordering::Greater) => rest = Rest::Below,
            (Rest::Zero, Ordering::Less) => {
                // Just below a representable value: above the midpoint under it.
                trunc -= 1;
                rest = Rest::Above;
            }
            (Rest::Half, Ordering::Greater) => rest = Rest::Above,
            (Rest::Half, Ordering::Less) => rest = Rest::Below,
            _ => {}
        }
    }
    let up = match mode {
        Rounding::NearestEven => rest == Rest::Above || (rest == Rest::Half && trunc & 1 == 1),
        Rounding::TowardZero => false,
        Rounding::Up => !neg && rest != Rest::Zero,
        Rounding::Down => neg && rest != Rest::Zero,
    };
    // Incrementing the pattern carries into the exponent, and from the largest finite value
    // into infinity.
    let sign = if neg { fmt.sign_bit() } else { 0 };
    sign | (trunc + u128::from(up)) as u64
}

#[cfg(test)]
mod tests;

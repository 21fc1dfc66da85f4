//! The rounding functions against a reference that knows, for every point it builds, the two
//! neighbouring values of the format it lies between: the result is then decided by exact f64
//! comparisons with those neighbours and their midpoint (every 16-bit value and midpoint is an
//! f64), never by rounding.

use super::*;
use std::cmp::Ordering::{Equal, Greater, Less};

const MODES: [Rounding; 4] = [
    Rounding::NearestEven,
    Rounding::TowardZero,
    Rounding::Down,
    Rounding::Up,
];

/// A rounding direction seen on the magnitude: to the nearer neighbour, to the lower one, or to
/// the upper one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Nearest,
    Lower,
    Upper,
}

fn side(mode: Rounding, neg: bool) -> Side {
    match (mode, neg) {
        (Rounding::NearestEven, _) => Side::Nearest,
        (Rounding::TowardZero, _) | (Rounding::Down, false) | (Rounding::Up, true) => Side::Lower,
        (Rounding::Down, true) | (Rounding::Up, false) => Side::Upper,
    }
}

/// xorshift64: deterministic points between neighbours.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * 2f64.powi(-53)
    }
}

/// The next f64 up from a non-negative finite `x`.
fn f64_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// The next f64 down from a positive `x`.
fn f64_down(x: f64) -> f64 {
    f64::from_bits(x.to_bits() - 1)
}

/// 2^(emax + 1), the magnitude where a format's next value after the largest finite one would be.
fn beyond_max(fmt: Format) -> f64 {
    2f64.powi(1 << (fmt.exponent_bits() - 1))
}

/// The largest finite value's bit pattern.
fn max_finite(fmt: Format) -> u64 {
    fmt.infinity() - 1
}

/// Two neighbouring non-negative values of a format: `v` (pattern `vb`) and the next one up `w`
/// (pattern `vb + 1`; past the largest finite value `w` is 2^(emax + 1) and its pattern that of
/// infinity).
struct Gap {
    vb: u64,
    v: f64,
    w: f64,
    /// `w` is past the largest finite value.
    overflow: bool,
}

impl Gap {
    fn new(fmt: Format, vb: u64) -> Gap {
        let overflow = vb == max_finite(fmt);
        Gap {
            vb,
            v: fmt.to_f64(vb),
            w: if overflow {
                beyond_max(fmt)
            } else {
                fmt.to_f64(vb + 1)
            },
            overflow,
        }
    }

    /// The expected magnitude's pattern for the exact value `x + t` with `v <= x <= w`, `t`
    /// infinitesimal of sign `tail` (not below `v` nor above `w`).
    fn expected(&self, x: f64, tail: Ordering, side: Side) -> u64 {
        assert!(self.v <= x && x <= self.w);
        assert!(tail != Less || x != self.v);
        assert!(tail != Greater || x != self.w);
        let wb = self.vb + 1;
        match side {
            Side::Nearest => {
                let mid = (self.v + self.w) / 2.0;
                match x.partial_cmp(&mid).expect("finite").then(tail) {
                    Less => self.vb,
                    Greater => wb,
                    Equal if self.vb % 2 == 0 => self.vb,
                    Equal => wb,
                }
            }
            // Toward the lower neighbour: `w` only when exactly `w` and finite (past the
            // largest finite value the lower neighbour is the largest finite value).
            Side::Lower if x == self.w && tail == Equal && !self.overflow => wb,
            Side::Lower => self.vb,
            Side::Upper if x == self.v && tail == Equal => self.vb,
            Side::Upper => wb,
        }
    }

    /// Points in [v, w]: the ends, one f64 ulp inside them, the midpoint and one ulp either
    /// side, points just above `v`, and `random` points drawn in between.
    fn points(&self, rng: &mut Rng, random: usize) -> Vec<f64> {
        let (v, w) = (self.v, self.w);
        let mid = (v + w) / 2.0;
        let mut xs = vec![
            v,
            f64_up(v),
            f64_down(mid),
            mid,
            f64_up(mid),
            f64_down(w),
            w,
            v + (w - v) * 2f64.powi(-20),
            v + (w - v) * 2f64.powi(-60),
        ];
        xs.extend((0..random).map(|_| v + (w - v) * rng.unit()));
        xs
    }
}

/// `(hi, lo)` pairs for a point `x` of a gap: `x` alone, and `x` with a low part of either sign
/// (none that would leave the gap).
fn pairs(gap: &Gap, x: f64) -> Vec<(f64, f64)> {
    let mut v = vec![(x, 0.0)];
    let t = x * 2f64.powi(-60);
    if t != 0.0 {
        if x != gap.w {
            v.push((x, t));
        }
        if x != gap.v {
            v.push((x, -t));
        }
    }
    v
}

/// Checks every pair of every point of the gap above pattern `vb`, both signs, all modes.
fn check_gap(fmt: Format, vb: u64, rng: &mut Rng, random: usize) {
    let gap = Gap::new(fmt, vb);
    for x in gap.points(rng, random) {
        for (hi, lo) in pairs(&gap, x) {
            let tail = lo.partial_cmp(&0.0).expect("finite");
            for neg in [false, true] {
                let (h, l) = if neg { (-hi, -lo) } else { (hi, lo) };
                let sign = if neg { fmt.sign_bit() } else { 0 };
                for mode in MODES {
                    let want = sign | gap.expected(hi, tail, side(mode, neg));
                    let got = if lo == 0.0 {
                        round_f64(h, fmt, mode)
                    } else {
                        round_sum(h, l, fmt, mode)
                    };
                    assert_eq!(
                        got, want,
                        "{fmt:?} {mode:?} of {h:e} + {l:e} ({:#x} + {:#x}): got {got:#x}, want {want:#x}",
                        h.to_bits(),
                        l.to_bits()
                    );
                }
            }
        }
    }
}

#[test]
fn every_f16_gap_rounds_correctly() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for vb in 0..=max_finite(Format::F16) {
        check_gap(Format::F16, vb, &mut rng, 3);
    }
}

#[test]
fn every_bf16_gap_rounds_correctly() {
    let mut rng = Rng(0xd1b5_4a32_d192_ed03);
    for vb in 0..=max_finite(Format::BF16) {
        check_gap(Format::BF16, vb, &mut rng, 3);
    }
}

#[test]
fn f32_gaps_round_correctly() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let max = max_finite(Format::F32);
    // The subnormals and the normal range's low end, the top, and random gaps.
    let mut vbs: Vec<u64> = (0..5000)
        .chain(0x0080_0000 - 50..0x0080_0000 + 50)
        .collect();
    vbs.extend(max - 100..=max);
    vbs.extend((0..50_000).map(|_| rng.next() % (max + 1)));
    for vb in vbs {
        check_gap(Format::F32, vb, &mut rng, 2);
    }
}

/// Rust's `as f32` and `half`'s `from_f32` round once to nearest: they must agree.
#[test]
fn nearest_agrees_with_single_roundings_of_std_and_half() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..200_000 {
        let x = f64::from_bits(rng.next());
        if x.is_nan() {
            continue;
        }
        assert_eq!(
            round_f64(x, Format::F32, Rounding::NearestEven),
            u64::from((x as f32).to_bits()),
            "{x:e}"
        );
        let y = x as f32;
        let yf = f64::from(y);
        assert_eq!(
            round_f64(yf, Format::F16, Rounding::NearestEven),
            u64::from(f16::from_f32(y).to_bits()),
            "{y:e}"
        );
        assert_eq!(
            round_f64(yf, Format::BF16, Rounding::NearestEven),
            u64::from(bf16::from_f32(y).to_bits()),
            "{y:e}"
        );
    }
    // Every f16 gap's midpoint and its f32 neighbours go through `from_f32` too.
    for vb in 0..max_finite(Format::F16) {
        let mid = ((Format::F16.to_f64(vb) + Format::F16.to_f64(vb + 1)) / 2.0) as f32;
        for y in [
            mid,
            f32::from_bits(mid.to_bits() + 1),
            f32::from_bits(mid.to_bits() - 1),
        ] {
            assert_eq!(
                round_f64(f64::from(y), Format::F16, Rounding::NearestEven),
                u64::from(f16::from_f32(y).to_bits()),
                "{y:e}"
            );
        }
    }
}

#[test]
fn past_the_largest_finite_value_and_specials() {
    for fmt in [Format::F16, Format::BF16, Format::F32] {
        let inf = fmt.infinity();
        let max = max_finite(fmt);
        for x in [beyond_max(fmt) * 1.5, 1e300, f64::MAX] {
            for neg in [false, true] {
                let (h, s) = if neg { (-x, fmt.sign_bit()) } else { (x, 0) };
                for mode in MODES {
                    let want = match side(mode, neg) {
                        Side::Lower => s | max,
                        _ => s | inf,
                    };
                    assert_eq!(round_f64(h, fmt, mode), want, "{fmt:?} {mode:?} {h:e}");
                }
            }
        }
        for mode in MODES {
            // Infinities are exact in every direction; zeros keep their sign.
            assert_eq!(round_f64(f64::INFINITY, fmt, mode), inf);
            assert_eq!(
                round_f64(f64::NEG_INFINITY, fmt, mode),
                fmt.sign_bit() | inf
            );
            assert_eq!(round_f64(0.0, fmt, mode), 0);
            assert_eq!(round_f64(-0.0, fmt, mode), fmt.sign_bit());
            assert_eq!(round_sum(-0.0, 0.0, fmt, mode), fmt.sign_bit());
            // Far below the least subnormal.
            let tiny = f64::from_bits(1);
            let up = match mode {
                Rounding::Up => 1,
                _ => 0,
            };
            assert_eq!(round_f64(tiny, fmt, mode), up, "{fmt:?} {mode:?}");
            let down = match mode {
                Rounding::Down => fmt.sign_bit() | 1,
                _ => fmt.sign_bit(),
            };
            assert_eq!(round_f64(-1e-300, fmt, mode), down, "{fmt:?} {mode:?}");
            // NaN stays a quiet NaN with its sign.
            for nan in [f64::NAN, -f64::NAN, f64::from_bits(0x7ff0_0000_0000_0001)] {
                let r = round_f64(nan, fmt, mode);
                assert!(fmt.to_f64(r).is_nan(), "{fmt:?} {r:#x}");
                let quiet = 1 << (fmt.fraction_bits() - 1);
                assert_ne!(r & quiet, 0, "{fmt:?} {r:#x} is quiet");
                assert_eq!(r & fmt.sign_bit() != 0, nan.is_sign_negative());
                assert!(fmt.to_f64(round_sum(1.0, nan, fmt, mode)).is_nan());
            }
        }
    }
}

/// The conversions `half` rounds twice.
#[test]
fn known_double_rounding_cases() {
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
    assert_eq!(bf16::from_f64(x).to_f64(), 1.0, "half rounds through f32");
    assert_eq!(bf16_from_f64(x).to_f64(), 1.0078125);
    let y = 0.7692870795726776;
    assert_eq!(
        f16::from_f64(y).to_f64(),
        0.76953125,
        "half rounds through f32"
    );
    assert_eq!(f16_from_f64(y).to_f64(), 0.76904296875);
    // The same values as an unevaluated sum: 1 + 2^-8 (a bf16 tie) broken by the low part.
    let (hi, lo) = (1.0 + 2f64.powi(-8), 2f64.powi(-60));
    assert_eq!(
        round_sum(hi, lo, Format::BF16, Rounding::NearestEven),
        u64::from(bf16::from_f64(1.0078125).to_bits())
    );
    assert_eq!(
        round_sum(hi, -lo, Format::BF16, Rounding::NearestEven),
        u64::from(bf16::ONE.to_bits())
    );
}

#[test]
fn f64_pairs_round_in_every_direction() {
    let mut rng = Rng(0x0bad_5eed_0bad_5eed);
    for _ in 0..100_000 {
        let hi = f64::from_bits(rng.next() & !(1 << 63) | (rng.next() & (1 << 63)));
        if !hi.is_finite() || hi == 0.0 {
            continue;
        }
        assert_eq!(
            round_f64(hi, Format::F64, Rounding::TowardZero),
            hi.to_bits()
        );
        // A low part of either sign, less than half an ulp of `hi` below and above.
        let ulp = f64::from_bits(hi.abs().to_bits() + 1) - hi.abs();
        let lo = ulp * 0.25 * if rng.next() % 2 == 0 { 1.0 } else { -1.0 };
        if lo == 0.0 || !ulp.is_finite() {
            continue;
        }
        let next_up = |x: f64| {
            if x >= 0.0 {
                f64::from_bits(x.to_bits() + 1)
            } else {
                f64::from_bits(x.to_bits() - 1)
            }
        };
        let next_down = |x: f64| -next_up(-x);
        let (down, up) = if lo > 0.0 {
            (hi, next_up(hi))
        } else {
            (next_down(hi), hi)
        };
        let zero = if hi > 0.0 { down } else { up };
        for (mode, want) in [
            (Rounding::NearestEven, hi),
            (Rounding::Down, down),
            (Rounding::Up, up),
            (Rounding::TowardZero, zero),
        ] {
            let got = f64::from_bits(round_sum(hi, lo, Format::F64, mode));
            assert_eq!(got, want, "{mode:?} {hi:e} + {lo:e}");
        }
    }
}

#[test]
fn integers_round_once() {
    for fmt in [Format::F16, Format::BF16, Format::F32, Format::F64] {
        for v in -70_000i128..=70_000 {
            for mode in MODES {
                assert_eq!(
                    round_i128(v, fmt, mode),
                    round_f64(v as f64, fmt, mode),
                    "{fmt:?} {mode:?} {v}"
                );
            }
        }
    }
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    let mut ints: Vec<i128> = vec![
        i128::MIN,
        i128::MAX,
        u64::MAX.into(),
        i64::MIN.into(),
        i64::MAX.into(),
        // A tie of f32 (and bf16) plus one: `as f64` drops the one, then rounds the tie to even.
        (1i128 << 60) + (1 << 36) + 1,
        (1i128 << 60) + (1 << 52) + 1,
        -((1i128 << 62) + (1 << 38) + 1),
    ];
    for _ in 0..20_000 {
        let r = rng.next();
        ints.push(i128::from(r as i64));
        ints.push(i128::from(r));
        // Near a midpoint of f32 at a random magnitude (2^25 to 2^64): tie, one either side.
        let b = rng.next() % 39;
        let x = i128::from((r | 1 << 63) >> b);
        let ulp = 40 - b as u32;
        let tie = (x >> ulp << ulp) + (1 << (ulp - 1));
        ints.extend([tie, tie + 1, tie - 1, -tie - 1]);
    }
    for v in ints {
        // Rust's integer-to-float casts round once to nearest.
        assert_eq!(
            round_i128(v, Format::F32, Rounding::NearestEven),
            u64::from((v as f32).to_bits()),
            "{v}"
        );
        assert_eq!(
            round_i128(v, Format::F64, Rounding::NearestEven),
            (v as f64).to_bits(),
            "{v}"
        );
        // The exact pair of a value below 2^127 in f64: hi rounded to nearest, lo the rest.
        let hi = v as f64;
        if hi.abs() < 2f64.powi(127) {
            let lo = (v - hi as i128) as f64;
            for fmt in [Format::F16, Format::BF16, Format::F32] {
                for mode in MODES {
                    assert_eq!(
                        round_i128(v, fmt, mode),
                        round_sum(hi, lo, fmt, mode),
                        "{fmt:?} {mode:?} {v}"
                    );
                }
            }
        }
    }
}

/// Directed results of an inexact value are its two neighbours; the nearest is one of them.
fn check_directed(rn: u64, rz: u64, rd: u64, ru: u64, fmt: Format, what: &str) {
    let (n, z, d, u) = (
        fmt.to_f64(rn),
        fmt.to_f64(rz),
        fmt.to_f64(rd),
        fmt.to_f64(ru),
    );
    if n.is_nan() {
        assert!(z.is_nan() && d.is_nan() && u.is_nan(), "{what}");
        return;
    }
    assert!(d <= n && n <= u, "{what}: {d:e} {n:e} {u:e}");
    assert!(z == d || z == u, "{what}");
    assert!(z.abs() <= n.abs(), "{what}");
    if d != u {
        // Neighbours: one pattern apart (through zero: +0 and the least negative, or the reverse).
        let step = |b: u64| {
            if b & fmt.sign_bit() != 0 {
                if b == fmt.sign_bit() {
                    1
                } else {
                    b - 1
                }
            } else {
                b + 1
            }
        };
        let next = step(rd);
        assert!(
            next == ru || (rd == fmt.sign_bit() | 1 && ru == 0) || fmt.to_f64(next) == u,
            "{what}: {d:e} {u:e} not neighbours"
        );
    }
}

fn random_operand(rng: &mut Rng, fmt: Format) -> f64 {
    let bits = rng.next();
    match rng.next() % 4 {
        // Arbitrary patterns (specials included).
        0 => fmt.to_f64(bits & (fmt.sign_bit() << 1).wrapping_sub(1)),
        // Moderate magnitudes.
        1 => fmt.to_f64(round_f64(
            (bits % 20_001) as f64 / 64.0 - 156.25,
            fmt,
            Rounding::NearestEven,
        )),
        // 1 + small multiples of the format's epsilon: products that need every bit.
        2 => fmt.to_f64(round_f64(
            1.0 + (bits % 256) as f64 * 2f64.powi(-(fmt.fraction_bits() as i32)),
            fmt,
            Rounding::NearestEven,
        )),
        // Near the subnormal range.
        _ => fmt.to_f64(bits & (fmt.sign_bit() | ((fmt.infinity() >> 2) - 1))),
    }
}

#[test]
fn mul_add_is_fused_in_every_format() {
    let mut rng = Rng(0x7777_1234_dead_beef);
    for _ in 0..100_000 {
        let f = |x: f32| u64::from(x.to_bits());
        // f32 and f64 against std's fused multiply-add.
        let (a, b, c) = (
            random_operand(&mut rng, Format::F32),
            random_operand(&mut rng, Format::F32),
            random_operand(&mut rng, Format::F32),
        );
        let want = (a as f32).mul_add(b as f32, c as f32);
        let got = mul_add(a, b, c, Format::F32, Rounding::NearestEven);
        if want.is_nan() {
            assert!(Format::F32.to_f64(got).is_nan());
        } else {
            assert_eq!(got, f(want), "f32 {a:e} {b:e} {c:e}");
        }
        let (a, b, c) = (
            f64::from_bits(rng.next()),
            random_operand(&mut rng, Format::F64),
            f64::from_bits(rng.next()) * if rng.next() % 2 == 0 { 1e-20 } else { 1.0 },
        );
        let want = a.mul_add(b, c);
        let got = mul_add(a, b, c, Format::F64, Rounding::NearestEven);
        if want.is_nan() {
            assert!(f64::from_bits(got).is_nan());
        } else {
            assert_eq!(got, want.to_bits(), "f64 {a:e} {b:e} {c:e}");
        }
        let all = |a, b, c, fmt| MODES.map(|m| mul_add(a, b, c, fmt, m));
        let [rn, rz, rd, ru] = all(a, b, c, Format::F64);
        check_directed(
            rn,
            rz,
            rd,
            ru,
            Format::F64,
            &format!("f64 {a:e} {b:e} {c:e}"),
        );
        // f16 and bf16 against the exact product and sum rounded as a pair.
        for fmt in [Format::F16, Format::BF16] {
            let (a, b, c) = (
                random_operand(&mut rng, fmt),
                random_operand(&mut rng, fmt),
                random_operand(&mut rng, fmt),
            );
            let (s, e) = two_sum(a * b, c);
            for mode in MODES {
                let got = mul_add(a, b, c, fmt, mode);
                if s.is_nan() {
                    assert!(fmt.to_f64(got).is_nan());
                    continue;
                }
                // An exact zero: the sign the two terms share, else +0 (-0 rounding down).
                let p = a * b;
                let want = if s != 0.0 {
                    round_sum(s, e, fmt, mode)
                } else if p == 0.0 && c == 0.0 && p.is_sign_negative() == c.is_sign_negative() {
                    if p.is_sign_negative() {
                        fmt.sign_bit()
                    } else {
                        0
                    }
                } else if mode == Rounding::Down {
                    fmt.sign_bit()
                } else {
                    0
                };
                assert_eq!(got, want, "{fmt:?} {mode:?} {a:e} {b:e} {c:e}");
            }
            let [rn, rz, rd, ru] = all(a, b, c, fmt);
            check_directed(rn, rz, rd, ru, fmt, &format!("{fmt:?} {a:e} {b:e} {c:e}"));
        }
    }
    // The public f16/bf16 forms are the nearest-even ones.
    let h = |x: f64| f16_from_f64(x);
    assert_eq!(
        f16_mul_add(h(0.5), h(1.5), h(-0.75)).to_bits(),
        mul_add(0.5, 1.5, -0.75, Format::F16, Rounding::NearestEven) as u16
    );
    let b = |x: f64| bf16_from_f64(x);
    assert_eq!(bf16_mul_add(b(3.0), b(0.5), b(1.0)).to_f64(), 2.5);
}

#[test]
fn mul_add_edges() {
    use Rounding::*;
    let f64_of = |x: u64| f64::from_bits(x);
    // Overflow: to infinity rounding to nearest or away from zero, else the largest value.
    let big = f64::MAX;
    assert_eq!(
        f64_of(mul_add(big, 2.0, 0.0, Format::F64, NearestEven)),
        f64::INFINITY
    );
    assert_eq!(
        f64_of(mul_add(big, 2.0, -big, Format::F64, TowardZero)),
        big
    );
    assert_eq!(f64_of(mul_add(big, 2.0, 0.0, Format::F64, TowardZero)), big);
    assert_eq!(f64_of(mul_add(big, -2.0, 0.0, Format::F64, Up)), -big);
    assert_eq!(
        f64_of(mul_add(big, -2.0, 0.0, Format::F64, Down)),
        f64::NEG_INFINITY
    );
    // Below the least subnormal: half of it ties to zero (even), a little more rounds up.
    let least = f64::from_bits(1);
    assert_eq!(mul_add(least, 0.5, 0.0, Format::F64, NearestEven), 0);
    assert_eq!(mul_add(least, 0.5, 0.0, Format::F64, Up), 1);
    assert_eq!(mul_add(least, 0.75, 0.0, Format::F64, NearestEven), 1);
    assert_eq!(
        mul_add(-least, 0.25, 0.0, Format::F64, Down),
        (-least).to_bits()
    );
    // A tiny addend decides directed results and breaks ties.
    let e = f64::EPSILON;
    assert_eq!(f64_of(mul_add(1.0, 1.0, 1e-300, Format::F64, Up)), 1.0 + e);
    assert_eq!(f64_of(mul_add(1.0, 1.0, 1e-300, Format::F64, Down)), 1.0);
    assert_eq!(
        f64_of(mul_add(1.0, 1.0, -1e-300, Format::F64, Down)),
        1.0 - e / 2.0
    );
    // (1 + e) * 1.5 = 1.5 + e + e / 2, a tie: to even (1.5 + 2e), below it with a negative addend.
    assert_eq!(
        f64_of(mul_add(1.0 + e, 1.5, 0.0, Format::F64, NearestEven)),
        1.5 + 2.0 * e
    );
    assert_eq!(
        f64_of(mul_add(1.0 + e, 1.5, -1e-300, Format::F64, NearestEven)),
        1.5 + e
    );
    // Exact zeros.
    assert_eq!(mul_add(1.0, 1.0, -1.0, Format::F64, NearestEven), 0);
    assert_eq!(
        mul_add(1.0, 1.0, -1.0, Format::F64, Down),
        (-0.0f64).to_bits()
    );
    assert_eq!(
        mul_add(-0.0, 1.0, -0.0, Format::F16, NearestEven),
        Format::F16.sign_bit()
    );
    assert_eq!(mul_add(-0.0, 1.0, 0.0, Format::F16, NearestEven), 0);
    assert_eq!(
        mul_add(-0.0, 1.0, 0.0, Format::F16, Down),
        Format::F16.sign_bit()
    );
    // Invalid operations and infinities.
    assert!(f64_of(mul_add(f64::INFINITY, 0.0, 1.0, Format::F64, NearestEven)).is_nan());
    assert!(f64_of(mul_add(
        f64::INFINITY,
        1.0,
        f64::NEG_INFINITY,
        Format::F64,
        NearestEven
    ))
    .is_nan());
    assert_eq!(
        f64_of(mul_add(f64::INFINITY, -1.0, 1.0, Format::F64, TowardZero)),
        f64::NEG_INFINITY
    );
    assert_eq!(
        f64_of(mul_add(1.0, 1.0, f64::INFINITY, Format::F64, TowardZero)),
        f64::INFINITY
    );
}

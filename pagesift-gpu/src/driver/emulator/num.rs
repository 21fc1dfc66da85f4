//! Arithmetic as PTX defines it: types, IEEE rounding modes, flush-to-zero, saturation,
//! conversions, and the integer and floating-point operations on raw register bits.

use half::{bf16, f16};

/// A PTX instruction type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    B8,
    B16,
    B32,
    B64,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    BF16,
    BF16x2,
    F32,
    F64,
    Pred,
}

impl Ty {
    /// Parses a type suffix (without the dot).
    pub fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f16" => Ty::F16,
            "f16x2" => Ty::F16x2,
            "bf16" => Ty::BF16,
            "bf16x2" => Ty::BF16x2,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }
    /// Width in bits (a predicate counts as 1).
    pub fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::B8 | Ty::U8 | Ty::S8 => 8,
            Ty::B16 | Ty::U16 | Ty::S16 | Ty::F16 | Ty::BF16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16x2 | Ty::BF16x2 => 32,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 64,
        }
    }
    /// Width in bytes of a memory access of this type.
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }
    /// A mask of the low `bits()` bits.
    pub fn mask(self) -> u64 {
        mask(self.bits())
    }
    pub fn is_signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    pub fn is_float(self) -> bool {
        self.fmt().is_some() || matches!(self, Ty::F16x2 | Ty::BF16x2)
    }
    /// The scalar float format, for scalar float types.
    pub fn fmt(self) -> Option<Fmt> {
        match self {
            Ty::F16 => Some(Fmt::F16),
            Ty::BF16 => Some(Fmt::BF16),
            Ty::F32 => Some(Fmt::F32),
            Ty::F64 => Some(Fmt::F64),
            _ => None,
        }
    }
    /// The lane format of a packed type (`f16x2`, `bf16x2`).
    pub fn packed(self) -> Option<Fmt> {
        match self {
            Ty::F16x2 => Some(Fmt::F16),
            Ty::BF16x2 => Some(Fmt::BF16),
            _ => None,
        }
    }
}

/// A mask of the low `bits` bits.
pub(super) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Sign-extends the low `bits` bits of `v`.
pub(super) fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let s = 64 - bits;
        ((v << s) as i64) >> s
    }
}

/// A register value of type `ty` as an exact integer (signed types sign-extended).
pub(super) fn int_val(v: u64, ty: Ty) -> i128 {
    if ty.is_signed() {
        sext(v, ty.bits()) as i128
    } else {
        (v & ty.mask()) as i128
    }
}

/// An IEEE binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fmt {
    F16,
    BF16,
    F32,
    F64,
}

impl Fmt {
    fn exp_mant(self) -> (u32, u32) {
        match self {
            Fmt::F16 => (5, 10),
            Fmt::BF16 => (8, 7),
            Fmt::F32 => (8, 23),
            Fmt::F64 => (11, 52),
        }
    }
    fn sign_bit(self) -> u64 {
        let (e, m) = self.exp_mant();
        1u64 << (e + m)
    }
    /// The value of `bits` in this format, exactly, as f64.
    pub fn to_f64(self, bits: u64) -> f64 {
        match self {
            Fmt::F16 => f16::from_bits(bits as u16).to_f64(),
            Fmt::BF16 => bf16::from_bits(bits as u16).to_f64(),
            Fmt::F32 => f32::from_bits(bits as u32) as f64,
            Fmt::F64 => f64::from_bits(bits),
        }
    }
    /// `x` rounded to nearest-even in this format.
    fn round_f64(self, x: f64) -> u64 {
        if x.is_nan() {
            return self.nan();
        }
        match self {
            Fmt::F16 => f16::from_f64(x).to_bits() as u64,
            Fmt::BF16 => bf16::from_f64(x).to_bits() as u64,
            Fmt::F32 => (x as f32).to_bits() as u64,
            Fmt::F64 => x.to_bits(),
        }
    }
    fn is_nan(self, bits: u64) -> bool {
        self.to_f64(bits).is_nan()
    }
    fn is_subnormal(self, bits: u64) -> bool {
        let (e, m) = self.exp_mant();
        (bits >> m) & mask(e) == 0 && bits & mask(m) != 0
    }
    /// The canonical NaN PTX produces.
    pub fn nan(self) -> u64 {
        match self {
            Fmt::F16 => 0x7fff,
            Fmt::BF16 => 0x7fff,
            Fmt::F32 => 0x7fff_ffff,
            Fmt::F64 => 0x7fff_ffff_ffff_ffff,
        }
    }
    /// The next representable value above (`up`) or below.
    fn step(self, bits: u64, up: bool) -> u64 {
        if self.is_nan(bits) {
            return bits;
        }
        let sign = self.sign_bit();
        let mag = bits & (sign - 1);
        let neg = bits & sign != 0;
        if mag == 0 {
            return if up { 1 } else { sign | 1 };
        }
        // Moving away from zero grows the magnitude; +inf/-inf stay where they are.
        let inf = mask(self.exp_mant().0) << self.exp_mant().1;
        if up != neg {
            if mag == inf {
                bits
            } else {
                bits + 1
            }
        } else {
            bits - 1
        }
    }
    /// Flushes a subnormal to a zero of the same sign.
    pub fn ftz(self, bits: u64) -> u64 {
        if self.is_subnormal(bits) {
            bits & self.sign_bit()
        } else {
            bits
        }
    }
}

/// An IEEE rounding mode as PTX names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rnd {
    /// No modifier given (the instruction's default, which is nearest-even).
    Default,
    Rn,
    Rz,
    Rm,
    Rp,
}

/// Rounds the exact value `hi + lo` (an unevaluated sum, `|lo|` tiny next to `hi`) to `fmt`.
pub(super) fn round_to(hi: f64, lo: f64, fmt: Fmt, rnd: Rnd) -> u64 {
    if hi.is_nan() {
        return fmt.nan();
    }
    let nearest = matches!(rnd, Rnd::Default | Rnd::Rn);
    if nearest && lo == 0.0 {
        return fmt.round_f64(hi);
    }
    let r = fmt.round_f64(hi);
    let back = fmt.to_f64(r);
    let resid = (hi - back) + lo;
    if resid == 0.0 || resid.is_nan() {
        return r;
    }
    match rnd {
        Rnd::Default | Rnd::Rn => {
            if lo == 0.0 || fmt == Fmt::F64 {
                return r;
            }
            if !back.is_finite() {
                // Overflow: `hi + lo` overflows too, unless `hi` is exactly the threshold (the
                // largest finite value plus half its ulp) and `lo` points back inside.
                let max = fmt.step(r, resid > 0.0);
                let mb = fmt.to_f64(max);
                let threshold = mb + (mb - fmt.to_f64(fmt.step(max, resid > 0.0))) / 2.0;
                return if hi == threshold && (lo < 0.0) == (hi > 0.0) {
                    max
                } else {
                    r
                };
            }
            // `hi` may sit exactly on a midpoint that `lo` breaks.
            let other = fmt.step(r, resid > 0.0);
            let ob = fmt.to_f64(other);
            if (hi - back).abs() == (ob - back).abs() / 2.0 && (lo > 0.0) == (ob > back) {
                other
            } else {
                r
            }
        }
        Rnd::Rz => {
            if back == 0.0 {
                // An underflow to zero keeps the sign of the exact value.
                if resid < 0.0 {
                    fmt.sign_bit()
                } else {
                    0
                }
            } else if back > 0.0 && resid < 0.0 {
                fmt.step(r, false)
            } else if back < 0.0 && resid > 0.0 {
                fmt.step(r, true)
            } else {
                r
            }
        }
        Rnd::Rm if resid < 0.0 => fmt.step(r, false),
        Rnd::Rp if resid > 0.0 => fmt.step(r, true),
        Rnd::Rm | Rnd::Rp => r,
    }
}

/// Whether `x` lies exactly halfway between two neighbours in `fmt` (normal range).
fn on_midpoint(x: f64, fmt: Fmt) -> bool {
    let drop = 52 - fmt.exp_mant().1;
    let low = x.to_bits() & mask(drop);
    let min_normal = match fmt {
        Fmt::F16 => 6.103515625e-5,
        _ => f32::MIN_POSITIVE as f64,
    };
    low == 1 << (drop - 1) || !x.is_normal() || x.abs() < min_normal
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, if e.is_nan() { 0.0 } else { e })
}

/// Float flags of an instruction: rounding, flush-to-zero, saturation to [0, 1].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FMode {
    pub rnd: Rnd,
    pub ftz: bool,
    pub sat: bool,
}

/// Two-operand float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FOp2 {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Copysign,
}

/// One-operand float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FOp1 {
    Abs,
    Neg,
    Sqrt,
    Rsqrt,
    Rcp,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
    /// Round to integral (`cvt.rni.f32.f32` and friends), mode in `FMode::rnd`.
    Rint,
}

fn finish(fmt: Fmt, fm: FMode, bits: u64) -> u64 {
    let mut b = bits;
    if fm.ftz && fmt == Fmt::F32 {
        b = fmt.ftz(b);
    }
    if fm.sat {
        let v = fmt.to_f64(b);
        if v.is_nan() || v <= 0.0 {
            b = 0;
        } else if v > 1.0 {
            b = fmt.round_f64(1.0);
        }
    }
    b
}

fn input(fmt: Fmt, fm: FMode, bits: u64) -> f64 {
    if fm.ftz && fmt == Fmt::F32 {
        fmt.to_f64(fmt.ftz(bits))
    } else {
        fmt.to_f64(bits)
    }
}

/// A scalar two-operand float operation on raw bits.
pub(super) fn fbin(op: FOp2, fmt: Fmt, fm: FMode, a: u64, b: u64) -> u64 {
    let (x, y) = (input(fmt, fm, a), input(fmt, fm, b));
    let nearest = matches!(fm.rnd, Rnd::Default | Rnd::Rn);
    let r = match op {
        // Every format up to f32 is exact or innocuously double-rounded through f64 for
        // + - * / when rounding to nearest (53 >= 2 * 24 + 2).
        FOp2::Add if nearest && fmt != Fmt::F64 => fmt.round_f64(x + y),
        FOp2::Sub if nearest && fmt != Fmt::F64 => fmt.round_f64(x - y),
        FOp2::Mul if fmt != Fmt::F64 => round_to(x * y, 0.0, fmt, fm.rnd),
        FOp2::Div if nearest && fmt != Fmt::F64 => fmt.round_f64(x / y),
        FOp2::Add | FOp2::Sub => {
            let y = if op == FOp2::Sub { -y } else { y };
            let (s, e) = two_sum(x, y);
            if s == 0.0 && e == 0.0 && x == -y {
                // Exact cancellation: +0, except -0 when rounding down.
                let z = if fm.rnd == Rnd::Rm { -0.0 } else { 0.0 };
                let z = if x == 0.0 && y == 0.0 && x.is_sign_negative() && y.is_sign_negative() {
                    -0.0
                } else {
                    z
                };
                fmt.round_f64(z)
            } else {
                round_to(s, e, fmt, fm.rnd)
            }
        }
        FOp2::Mul => {
            let p = x * y;
            let e = x.mul_add(y, -p);
            round_to(p, if e.is_finite() { e } else { 0.0 }, fmt, fm.rnd)
        }
        FOp2::Div => {
            let q = x / y;
            let r = -q.mul_add(y, -x);
            let lo = if r.is_finite() && q.is_finite() && y != 0.0 {
                r / y
            } else {
                0.0
            };
            round_to(q, lo, fmt, fm.rnd)
        }
        FOp2::Min | FOp2::Max => {
            let pick_x = if x.is_nan() {
                false
            } else if y.is_nan() {
                true
            } else if x == y {
                // -0 is below +0.
                (op == FOp2::Min) == x.is_sign_negative()
            } else {
                (op == FOp2::Min) == (x < y)
            };
            if x.is_nan() && y.is_nan() {
                fmt.nan()
            } else if pick_x {
                fmt.round_f64(x)
            } else {
                fmt.round_f64(y)
            }
        }
        FOp2::Copysign => {
            // copysign d, a, b: the magnitude of b with the sign of a.
            let s = fmt.sign_bit();
            (b & !s) | (a & s)
        }
    };
    finish(fmt, fm, r)
}

/// `a * b + c` with a single rounding.
pub(super) fn ffma(fmt: Fmt, fm: FMode, a: u64, b: u64, c: u64) -> u64 {
    let (x, y, z) = (input(fmt, fm, a), input(fmt, fm, b), input(fmt, fm, c));
    let r = match fmt {
        Fmt::F64 => x.mul_add(y, z).to_bits(),
        _ if matches!(fm.rnd, Rnd::Rn | Rnd::Default) => {
            // x*y is exact in f64; the sum rounds once to f64. Rounding that to the format is
            // the correctly rounded result unless it sits exactly on a midpoint of the format.
            let p = x * y;
            let (s, e) = two_sum(p, z);
            let r = fmt.round_f64(s);
            if e == 0.0 || !on_midpoint(s, fmt) {
                r
            } else {
                round_to(s, e, fmt, fm.rnd)
            }
        }
        _ => {
            // x*y is exact in f64 for every format up to f32.
            let p = x * y;
            let (s, e) = two_sum(p, z);
            if s == 0.0 && e == 0.0 {
                let r = x.mul_add(y, z);
                fmt.round_f64(r)
            } else {
                round_to(s, e, fmt, fm.rnd)
            }
        }
    };
    finish(fmt, fm, r)
}

/// A scalar one-operand float operation on raw bits.
pub(super) fn fun(op: FOp1, fmt: Fmt, fm: FMode, a: u64) -> u64 {
    let s = fmt.sign_bit();
    let x = input(fmt, fm, a);
    let r = match op {
        FOp1::Abs => {
            let b = if fm.ftz && fmt == Fmt::F32 {
                fmt.ftz(a)
            } else {
                a
            };
            b & !s
        }
        FOp1::Neg => {
            let b = if fm.ftz && fmt == Fmt::F32 {
                fmt.ftz(a)
            } else {
                a
            };
            b ^ s
        }
        FOp1::Sqrt => {
            let r = x.sqrt();
            if fmt == Fmt::F64 || r.is_nan() || r == 0.0 || r.is_infinite() {
                fmt.round_f64(r)
            } else {
                let res = -r.mul_add(r, -x);
                round_to(r, res / (2.0 * r), fmt, fm.rnd)
            }
        }
        FOp1::Rsqrt => fmt.round_f64(1.0 / x.sqrt()),
        FOp1::Rcp => return fbin(FOp2::Div, fmt, fm, fmt.round_f64(1.0), a),
        FOp1::Ex2 => fmt.round_f64(x.exp2()),
        FOp1::Lg2 => fmt.round_f64(x.log2()),
        FOp1::Sin => fmt.round_f64(x.sin()),
        FOp1::Cos => fmt.round_f64(x.cos()),
        FOp1::Tanh => fmt.round_f64(x.tanh()),
        FOp1::Rint => fmt.round_f64(match fm.rnd {
            Rnd::Rz => x.trunc(),
            Rnd::Rm => x.floor(),
            Rnd::Rp => x.ceil(),
            Rnd::Rn | Rnd::Default => x.round_ties_even(),
        }),
    };
    finish(fmt, fm, r)
}

/// Applies a scalar operation to each 16-bit lane of a packed `f16x2` / `bf16x2` value.
pub(super) fn lanes2(a: u64, b: u64, c: u64, f: impl Fn(u64, u64, u64) -> u64) -> u64 {
    let lo = f(a & 0xffff, b & 0xffff, c & 0xffff) & 0xffff;
    let hi = f((a >> 16) & 0xffff, (b >> 16) & 0xffff, (c >> 16) & 0xffff) & 0xffff;
    lo | (hi << 16)
}

/// A float comparison of `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

impl Cmp {
    pub fn parse(s: &str) -> Option<Cmp> {
        Some(match s {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" => Cmp::Lt,
            "le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "ge" => Cmp::Ge,
            "lo" => Cmp::Lo,
            "ls" => Cmp::Ls,
            "hi" => Cmp::Hi,
            "hs" => Cmp::Hs,
            "equ" => Cmp::Equ,
            "neu" => Cmp::Neu,
            "ltu" => Cmp::Ltu,
            "leu" => Cmp::Leu,
            "gtu" => Cmp::Gtu,
            "geu" => Cmp::Geu,
            "num" => Cmp::Num,
            "nan" => Cmp::Nan,
            _ => return None,
        })
    }
}

/// `setp`'s comparison of two values of type `ty` (scalar types).
pub(super) fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    if let Some(fmt) = ty.fmt() {
        let fm = FMode {
            rnd: Rnd::Default,
            ftz,
            sat: false,
        };
        let (x, y) = (input(fmt, fm, a), input(fmt, fm, b));
        let unord = x.is_nan() || y.is_nan();
        return match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => !unord && x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Equ => unord || x == y,
            Cmp::Neu => unord || x != y,
            Cmp::Ltu => unord || x < y,
            Cmp::Leu => unord || x <= y,
            Cmp::Gtu => unord || x > y,
            Cmp::Geu => unord || x >= y,
            Cmp::Num => !unord,
            Cmp::Nan => unord,
            Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs => false,
        };
    }
    let (x, y) = (int_val(a, ty), int_val(b, ty));
    let (ux, uy) = (a & ty.mask(), b & ty.mask());
    match cmp {
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::Lo => ux < uy,
        Cmp::Ls => ux <= uy,
        Cmp::Hi => ux > uy,
        Cmp::Hs => ux >= uy,
        _ => false,
    }
}

/// `cvt.<rnd>.<sat>.<ftz>.dty.sty`: every integer and float combination.
/// `int_rnd` is the integer rounding (`.rni` etc.) given for float -> int or float -> float.
pub(super) fn cvt(dty: Ty, sty: Ty, rnd: Rnd, int_rnd: bool, sat: bool, ftz: bool, a: u64) -> u64 {
    let fm = FMode { rnd, ftz, sat };
    match (dty.fmt(), sty.fmt()) {
        (None, None) => {
            let v = int_val(a, sty);
            let v = if sat { clamp_int(v, dty) } else { v };
            (v as u64) & dty.mask()
        }
        (None, Some(sf)) => {
            let x = input(sf, fm, a);
            let r = match rnd {
                Rnd::Rz => x.trunc(),
                Rnd::Rm => x.floor(),
                Rnd::Rp => x.ceil(),
                Rnd::Rn | Rnd::Default => x.round_ties_even(),
            };
            if r.is_nan() {
                // NaN converts to 0, except where an H200 (sm_90) was seen to give the most
                // negative value: f32 -> s64, and f64 -> a signed integer (seen for s8).
                let most_negative = dty.is_signed() && (dty.mask() == u64::MAX || sf == Fmt::F64);
                return if most_negative {
                    (clamp_int(i64::MIN as i128, dty) as u64) & dty.mask()
                } else {
                    0
                };
            }
            let v = if dty.is_signed() {
                r.clamp(i64::MIN as f64, i64::MAX as f64) as i128
            } else {
                r.clamp(0.0, u64::MAX as f64) as i128
            };
            // Float -> integer conversions always saturate.
            (clamp_int(v, dty) as u64) & dty.mask()
        }
        (Some(df), None) => {
            let v = int_val(a, sty);
            let hi = v as f64;
            let lo = (v - hi as i128) as f64;
            finish(df, fm, round_to(hi, lo, df, rnd))
        }
        (Some(df), Some(sf)) => {
            let x = input(sf, fm, a);
            if int_rnd {
                return fun(FOp1::Rint, df, fm, df.round_f64(x));
            }
            finish(df, fm, round_to(x, 0.0, df, rnd))
        }
    }
}

fn clamp_int(v: i128, ty: Ty) -> i128 {
    let bits = ty.bits();
    let (lo, hi) = if ty.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    v.clamp(lo, hi)
}

/// Integer two-operand operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IOp2 {
    Add,
    AddSat,
    Sub,
    SubSat,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// An integer two-operand operation; the result is zero-extended from its width.
pub(super) fn ibin(op: IOp2, ty: Ty, a: u64, b: u64) -> u64 {
    let bits = ty.bits();
    let m = ty.mask();
    match op {
        IOp2::Add => a.wrapping_add(b) & m,
        IOp2::Sub => a.wrapping_sub(b) & m,
        IOp2::MulLo => a.wrapping_mul(b) & m,
        IOp2::And => a & b & m,
        IOp2::Or => (a | b) & m,
        IOp2::Xor => (a ^ b) & m,
        IOp2::Shl => {
            let s = b & 0xffff_ffff;
            if s >= bits as u64 {
                0
            } else {
                (a << s) & m
            }
        }
        IOp2::Shr => {
            let s = b & 0xffff_ffff;
            if ty.is_signed() {
                ((sext(a, bits) >> s.min(bits as u64 - 1)) as u64) & m
            } else if s >= bits as u64 {
                0
            } else {
                ((a & m) >> s) & m
            }
        }
        _ => {
            let (x, y) = (int_val(a, ty), int_val(b, ty));
            let r: i128 = match op {
                IOp2::AddSat => clamp_int(x + y, ty),
                IOp2::SubSat => clamp_int(x - y, ty),
                IOp2::MulHi => (x * y) >> bits,
                IOp2::MulWide => return ((x * y) as u64) & mask(bits * 2),
                IOp2::Div => {
                    if y == 0 {
                        -1
                    } else {
                        x / y
                    }
                }
                IOp2::Rem => {
                    if y == 0 {
                        x
                    } else {
                        x % y
                    }
                }
                IOp2::Min => x.min(y),
                IOp2::Max => x.max(y),
                _ => 0,
            };
            (r as u64) & m
        }
    }
}

/// `bfe`: extract `len` bits at `pos`, sign-extending for signed types.
pub(super) fn bfe(ty: Ty, a: u64, pos: u64, len: u64) -> u64 {
    let bits = ty.bits() as u64;
    let pos = pos & 0xff;
    let len = len & 0xff;
    let a = a & ty.mask();
    let msb = bits - 1;
    let sbit = if !ty.is_signed() || len == 0 {
        false
    } else {
        (a >> (pos + len - 1).min(msb)) & 1 != 0
    };
    let mut d = 0u64;
    for i in 0..bits {
        let bit = if i < len && pos + i <= msb {
            (a >> (pos + i)) & 1 != 0
        } else {
            sbit
        };
        if bit {
            d |= 1 << i;
        }
    }
    d
}

/// `bfi`: insert the low `len` bits of `a` into `b` at `pos`.
pub(super) fn bfi(ty: Ty, a: u64, b: u64, pos: u64, len: u64) -> u64 {
    let bits = ty.bits() as u64;
    let (pos, len) = (pos & 0xff, len & 0xff);
    let mut d = b & ty.mask();
    for i in 0..len {
        if pos + i >= bits {
            break;
        }
        let bit = (a >> i) & 1;
        d = (d & !(1 << (pos + i))) | (bit << (pos + i));
    }
    d
}

/// `prmt.b32` in the default mode: select bytes of `{b, a}` by the nibbles of `c`.
pub(super) fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let src = (a & 0xffff_ffff) | ((b & 0xffff_ffff) << 32);
    let mut d = 0u64;
    for i in 0..4 {
        let sel = (c >> (4 * i)) & 0xf;
        let byte = (src >> ((sel & 7) * 8)) & 0xff;
        let byte = if sel & 8 != 0 {
            if byte & 0x80 != 0 {
                0xff
            } else {
                0
            }
        } else {
            byte
        };
        d |= byte << (8 * i);
    }
    d
}

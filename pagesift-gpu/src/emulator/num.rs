//! Arithmetic as PTX defines it: types, IEEE rounding modes, flush-to-zero, saturation,
//! conversions, and the integer and floating-point operations on raw register bits.

use crate::cpu::round::{self, Format, Rounding};

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
    /// The format as the CPU reference's rounding functions name it.
    fn format(self) -> Format {
        match self {
            Fmt::F16 => Format::F16,
            Fmt::BF16 => Format::BF16,
            Fmt::F32 => Format::F32,
            Fmt::F64 => Format::F64,
        }
    }
    /// The value of `bits` in this format, exactly, as f64.
    pub fn to_f64(self, bits: u64) -> f64 {
        self.format().to_f64(bits)
    }
    /// `x` rounded once to nearest-even in this format; NaN gives the canonical NaN.
    fn round_f64(self, x: f64) -> u64 {
        if x.is_nan() {
            return self.nan();
        }
        round::round_f64(x, self.format(), Rounding::NearestEven)
    }
    /// A NaN result becomes the canonical NaN.
    fn canonical(self, bits: u64) -> u64 {
        if self.is_nan(bits) {
            self.nan()
        } else {
            bits
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

impl Rnd {
    fn rounding(self) -> Rounding {
        match self {
            Rnd::Default | Rnd::Rn => Rounding::NearestEven,
            Rnd::Rz => Rounding::TowardZero,
            Rnd::Rm => Rounding::Down,
            Rnd::Rp => Rounding::Up,
        }
    }
}

/// Rounds the exact value `hi + lo` once to `fmt`; the pair normalized as a two-sum leaves it
/// (`hi` is `hi + lo` rounded to the nearest f64). NaN gives the canonical NaN.
pub(super) fn round_to(hi: f64, lo: f64, fmt: Fmt, rnd: Rnd) -> u64 {
    if hi.is_nan() || lo.is_nan() {
        return fmt.nan();
    }
    round::round_sum(hi, lo, fmt.format(), rnd.rounding())
}

/// Rounds the integer `v` once to `fmt`.
pub(super) fn round_int(v: i128, fmt: Fmt, rnd: Rnd) -> u64 {
    round::round_i128(v, fmt.format(), rnd.rounding())
}

/// `x * y + z` computed exactly and rounded once to `fmt`; NaN gives the canonical NaN.
fn fused(x: f64, y: f64, z: f64, fmt: Fmt, rnd: Rnd) -> u64 {
    fmt.canonical(round::mul_add(x, y, z, fmt.format(), rnd.rounding()))
}

/// A finite nonzero `x` as `m * 2^e` with `|m|` in [1, 2) (the sign stays with `m`).
fn split(x: f64) -> (f64, i32) {
    let (x, k) = if x.abs() < f64::MIN_POSITIVE {
        (x * 2f64.powi(64), -64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32 - 1023;
    (
        f64::from_bits((bits & !(0x7ff << 52)) | (1023 << 52)),
        e + k,
    )
}

/// `x / y` rounded once to `fmt` in any direction. Finite nonzero operands are scaled to
/// [1, 2) first, so that the remainder of the f64 quotient is exact (no underflow) and the
/// quotient cannot overflow; the exact quotient is that f64 quotient plus remainder / divisor,
/// rounded with the scale put back.
fn div_rounded(x: f64, y: f64, fmt: Fmt, rnd: Rnd) -> u64 {
    if !x.is_finite() || !y.is_finite() || x == 0.0 || y == 0.0 {
        // Exact: infinities, zeros, NaN.
        return fmt.round_f64(x / y);
    }
    let ((mx, ex), (my, ey)) = (split(x), split(y));
    let q = mx / my;
    let rem = -q.mul_add(my, -mx);
    fmt.canonical(round::round_scaled_sum(
        q,
        rem / my,
        ex - ey,
        fmt.format(),
        rnd.rounding(),
    ))
}

/// `sqrt(x)` rounded once to `fmt` in any direction, scaled as [`div_rounded`] is: `x = m *
/// 4^k` with `m` in [1, 4), `sqrt(m)` in f64 and its exact residual, the scale put back.
fn sqrt_rounded(x: f64, fmt: Fmt, rnd: Rnd) -> u64 {
    if !x.is_finite() || x <= 0.0 {
        // Exact: +-0, +inf, NaN (negative operands included).
        return fmt.round_f64(x.sqrt());
    }
    let (mut m, mut e) = split(x);
    if e % 2 != 0 {
        m *= 2.0;
        e -= 1;
    }
    let r = m.sqrt();
    let res = -r.mul_add(r, -m);
    fmt.canonical(round::round_scaled_sum(
        r,
        res / (2.0 * r),
        e / 2,
        fmt.format(),
        rnd.rounding(),
    ))
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
        // Rounding to nearest, f64 arithmetic is correctly rounded, and rounding its result
        // once more to a format up to f32 is too: products are exact in f64, and + - / are
        // innocuously double-rounded (53 >= 2 * 24 + 2).
        FOp2::Add if nearest => fmt.round_f64(x + y),
        FOp2::Sub if nearest => fmt.round_f64(x - y),
        FOp2::Mul if nearest => fmt.round_f64(x * y),
        FOp2::Div if nearest => fmt.round_f64(x / y),
        // Directed: the exact sum (x * 1 + y, with IEEE's signs of an exact zero) rounded once.
        FOp2::Add => fused(x, 1.0, y, fmt, fm.rnd),
        FOp2::Sub => fused(x, 1.0, -y, fmt, fm.rnd),
        // The product is exact in f64 up to f32 (and when an operand is zero); otherwise in f64
        // its exact value is rounded once.
        FOp2::Mul if fmt != Fmt::F64 || x == 0.0 || y == 0.0 => round_to(x * y, 0.0, fmt, fm.rnd),
        FOp2::Mul => fused(x, y, 0.0, fmt, fm.rnd),
        FOp2::Div => div_rounded(x, y, fmt, fm.rnd),
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
    let r = if fmt == Fmt::F64 && matches!(fm.rnd, Rnd::Rn | Rnd::Default) {
        fmt.round_f64(x.mul_add(y, z))
    } else {
        // The exact product and sum, rounded once to the format (never through f64: the sum
        // of an exact product and an addend is not always exact in f64).
        fused(x, y, z, fmt, fm.rnd)
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
        // Rounding to nearest, the f64 square root is correctly rounded and rounding it once
        // more to a format up to f32 is innocuous (53 >= 2 * 24 + 2).
        FOp1::Sqrt if matches!(fm.rnd, Rnd::Rn | Rnd::Default) => fmt.round_f64(x.sqrt()),
        FOp1::Sqrt => sqrt_rounded(x, fmt, fm.rnd),
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
        // One rounding of the exact integer (`as f64` first would round 64-bit values twice).
        (Some(df), None) => finish(df, fm, round_int(int_val(a, sty), df, rnd)),
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

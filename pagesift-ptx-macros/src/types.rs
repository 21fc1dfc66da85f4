//! The value types of the kernel language and their PTX spellings.

use std::fmt;

/// A scalar type of the kernel language (a value that lives in one PTX register).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
    F16x2,
    Bf16x2,
}

/// The PTX register classes (one `.reg` declaration line each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegClass {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

impl RegClass {
    /// Every class, in declaration order.
    pub const ALL: [RegClass; 6] = [
        RegClass::Pred,
        RegClass::B16,
        RegClass::B32,
        RegClass::B64,
        RegClass::F32,
        RegClass::F64,
    ];

    /// The `.reg` type and the register name prefix.
    pub fn decl(self) -> (&'static str, &'static str) {
        match self {
            RegClass::Pred => ("pred", "%p"),
            RegClass::B16 => ("b16", "%rs"),
            RegClass::B32 => ("b32", "%r"),
            RegClass::B64 => ("b64", "%rd"),
            RegClass::F32 => ("f32", "%f"),
            RegClass::F64 => ("f64", "%fd"),
        }
    }
}

impl Scalar {
    /// Every scalar type.
    pub const ALL: [Scalar; 15] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::Bf16,
        Scalar::F32,
        Scalar::F64,
        Scalar::F16x2,
        Scalar::Bf16x2,
    ];

    /// The type named `name` in kernel source (`f32`, `u8`, `bf16x2`, ...).
    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.iter().copied().find(|s| s.name() == name)
    }

    /// The name in kernel source.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::F16x2 => "f16x2",
            Scalar::Bf16x2 => "bf16x2",
        }
    }

    /// Size in memory, in bytes.
    pub fn bytes(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 | Scalar::F16x2 | Scalar::Bf16x2 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// Whether the type is an integer (signed or unsigned).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            Scalar::I8
                | Scalar::I16
                | Scalar::I32
                | Scalar::I64
                | Scalar::U8
                | Scalar::U16
                | Scalar::U32
                | Scalar::U64
        )
    }

    /// Whether the type is a signed integer.
    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }

    /// Whether the type is a scalar float (f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16 | Scalar::F32 | Scalar::F64)
    }

    /// Whether the type is a packed pair of halves.
    pub fn is_packed(self) -> bool {
        matches!(self, Scalar::F16x2 | Scalar::Bf16x2)
    }

    /// Whether the type is an 8-bit integer (computed at 16 bits, wrapping at 8; no indices).
    pub fn is_byte(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::U8)
    }

    /// Whether arithmetic is defined on the type in the language.
    pub fn is_arith(self) -> bool {
        (self.is_int() && !self.is_byte()) || self.is_float() || self.is_packed()
    }

    /// The PTX type suffix of arithmetic on this type (`f32`, `s32`, `u16`, `pred`, `f16x2`).
    pub fn ptx(self) -> &'static str {
        match self {
            Scalar::Bool => "pred",
            Scalar::I8 => "s8",
            Scalar::I16 => "s16",
            Scalar::I32 => "s32",
            Scalar::I64 => "s64",
            // Unsigned, float and packed types: PTX spells them as the language does.
            Scalar::U8
            | Scalar::U16
            | Scalar::U32
            | Scalar::U64
            | Scalar::F16
            | Scalar::Bf16
            | Scalar::F32
            | Scalar::F64
            | Scalar::F16x2
            | Scalar::Bf16x2 => self.name(),
        }
    }

    /// The untyped bit-size suffix (`b32`); `pred` for bool.
    pub fn bits(self) -> &'static str {
        match self {
            Scalar::Bool => "pred",
            _ => match self.bytes() {
                1 => "b8",
                2 => "b16",
                4 => "b32",
                _ => "b64",
            },
        }
    }

    /// The register class values of this type live in.
    pub fn reg_class(self) -> RegClass {
        match self {
            Scalar::Bool => RegClass::Pred,
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::Bf16 => {
                RegClass::B16
            }
            Scalar::I32 | Scalar::U32 | Scalar::F16x2 | Scalar::Bf16x2 => RegClass::B32,
            Scalar::I64 | Scalar::U64 => RegClass::B64,
            Scalar::F32 => RegClass::F32,
            Scalar::F64 => RegClass::F64,
        }
    }

    /// The unsigned integer type of the same size (for bit casts).
    pub fn bits_uint(self) -> Scalar {
        match self.bytes() {
            1 => Scalar::U8,
            2 => Scalar::U16,
            4 => Scalar::U32,
            _ => Scalar::U64,
        }
    }

    /// For a packed type, the element type.
    pub fn packed_elem(self) -> Option<Scalar> {
        match self {
            Scalar::F16x2 => Some(Scalar::F16),
            Scalar::Bf16x2 => Some(Scalar::Bf16),
            _ => None,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of an expression or binding after checking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// No value (statements, `()`-returning helpers).
    Unit,
    /// A value that diverges (`return`, `break`, `continue`).
    Never,
    /// One register.
    Scalar(Scalar),
    /// A register array `[T; N]`.
    Array(Scalar, u32),
    /// A two-dimensional register array `[[T; C]; R]`: rows, columns (registers row-major).
    Array2(Scalar, u32, u32),
    /// A global-memory slice parameter `&[T]` / `&mut [T]`.
    Slice { elem: Scalar, mutable: bool },
    /// A shared-memory array; `len` is `None` for the dynamic one sized at launch. A
    /// two-dimensional one `Shared<[[T; C]; R]>` has `cols: Some(C)` and `len` `R * C` (its
    /// elements row-major).
    Shared {
        elem: Scalar,
        len: Option<u32>,
        cols: Option<u32>,
    },
    /// A variant of an enum const parameter (only compared and matched, at expansion).
    Enum,
    /// A parameter struct, passed by value (kernel parameter) or by name (helpers).
    Struct(std::rc::Rc<StructDef>),
    /// `Option<&[T]>` / `Option<&mut [T]>` (a kernel parameter's type; the kernel binds the
    /// slice with `if let Some(s) = opt`).
    Option(Box<Ty>),
    /// A shared-memory matrix descriptor for `wgmma` (one 64-bit register): `rows` rows of
    /// `T` in 128-byte swizzled rows, made by a shared array's `wgmma_desc`, which checked
    /// that they lie inside it.
    Desc { elem: Scalar, rows: u32 },
    /// A tensor map kernel parameter (`TensorMap<T, C, R, D>`): its generic address, for the
    /// tensor memory accelerator, which reads boxes of `C × R × D` elements of `T` (and, for
    /// a `TensorMapMut` (`write`), writes them).
    TensorMap {
        elem: Scalar,
        boxes: [u32; 3],
        write: bool,
    },
}

/// The layout of a parameter struct: `#[repr(C)]` on the host, one `.param` blob of `size`
/// bytes aligned to `align` in PTX.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StructDef {
    pub name: String,
    /// (name, type, byte offset), in declaration order.
    pub fields: Vec<(String, Scalar, u32)>,
    pub size: u32,
    pub align: u32,
}

impl StructDef {
    /// Lays out `fields` as C does: each at the next multiple of its size, the whole padded to
    /// its largest alignment.
    pub fn layout(name: &str, fields: &[(String, Scalar)]) -> StructDef {
        let mut off = 0u32;
        let mut align = 1u32;
        let mut out = Vec::new();
        for (n, s) in fields {
            let a = s.bytes();
            off = off.div_ceil(a) * a;
            out.push((n.clone(), *s, off));
            off += a;
            align = align.max(a);
        }
        StructDef {
            name: name.to_string(),
            fields: out,
            size: off.div_ceil(align).max(1) * align,
            align,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Unit => f.write_str("()"),
            Ty::Never => f.write_str("!"),
            Ty::Scalar(s) => write!(f, "{s}"),
            Ty::Array(s, n) => write!(f, "[{s}; {n}]"),
            Ty::Array2(s, r, c) => write!(f, "[[{s}; {c}]; {r}]"),
            Ty::Slice {
                elem,
                mutable: false,
            } => write!(f, "&[{elem}]"),
            Ty::Slice {
                elem,
                mutable: true,
            } => write!(f, "&mut [{elem}]"),
            Ty::Shared {
                elem,
                len: Some(n),
                cols: Some(c),
            } => write!(f, "Shared<[[{elem}; {c}]; {}]>", n / (*c).max(1)),
            Ty::Shared {
                elem, len: Some(n), ..
            } => write!(f, "Shared<[{elem}; {n}]>"),
            Ty::Shared {
                elem, len: None, ..
            } => write!(f, "Shared<[{elem}]>"),
            Ty::Enum => f.write_str("enum"),
            Ty::Struct(d) => f.write_str(&d.name),
            Ty::Option(t) => write!(f, "Option<{t}>"),
            Ty::Desc { elem, rows } => write!(f, "MatrixDesc<{elem}, {rows}>"),
            Ty::TensorMap { elem, boxes, write } => {
                write!(
                    f,
                    "TensorMap{}<{elem}, {}, {}, {}>",
                    if *write { "Mut" } else { "" },
                    boxes[0],
                    boxes[1],
                    boxes[2]
                )
            }
        }
    }
}

/// A compile-time value: a literal, a const parameter, or a folded expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstVal {
    Int(i128),
    Float(f64),
    Bool(bool),
    /// An enum const parameter's variant, by name (`Relu`).
    Enum(String),
}

impl fmt::Display for ConstVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstVal::Int(v) => write!(f, "{v}"),
            ConstVal::Float(v) => write!(f, "{v}"),
            ConstVal::Bool(v) => write!(f, "{v}"),
            ConstVal::Enum(v) => f.write_str(v),
        }
    }
}

/// Wraps an integer to the range of `ty` (two's complement), as the hardware would.
pub fn wrap_int(v: i128, ty: Scalar) -> i128 {
    let bits = ty.bytes() * 8;
    let m = v & ((1i128 << bits) - 1);
    if ty.is_signed() && m >= (1i128 << (bits - 1)) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// Converts an f32 to IEEE half bits, rounding to nearest even.
pub fn f16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (r & 1) == 1) {
        r += 1;
    }
    sign | r as u16
}

/// Converts an f32 to bfloat16 bits, rounding to nearest even.
pub fn bf16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    if v.is_nan() {
        return ((x >> 16) as u16) | 0x40;
    }
    let round = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(round) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_to_nearest_even() {
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-2.0), 0xc000);
        assert_eq!(f16_bits(65504.0), 0x7bff);
        assert_eq!(f16_bits(1e6), 0x7c00);
        assert_eq!(f16_bits(5.960_464_5e-8), 0x0001);
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(bf16_bits(-0.5), 0xbf00);
    }

    #[test]
    fn wrapping_follows_twos_complement() {
        assert_eq!(wrap_int(300, Scalar::U8), 44);
        assert_eq!(wrap_int(-1, Scalar::U32), u32::MAX as i128);
        assert_eq!(wrap_int(0x8000_0000, Scalar::I32), i32::MIN as i128);
    }
}

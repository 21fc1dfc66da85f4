//! The PTX instruction forms pagesift knows, in one table.
//!
//! A *form* is an opcode with its modifiers as PTX writes it: `add.rn.f32`,
//! `ld.global.nc.v4.f32`, `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`. Each row of
//! the table ([`forms`]) defines a set of forms once: its syntax as a pattern, the operands
//! every form of the row takes, the lowest target (sm × 10) and PTX ISA version that have
//! them, the instruction [`Family`], and whether the `ptx_kernel!` emitter produces them.
//!
//! The table is read by
//! - the emitter (`pagesift-ptx-macros`): its lowering rule turns an IR operation into a form's
//!   text, [`lookup`] finds the row, and the row's minimum raises the kernel's target and
//!   `.version`; a text with no row is an internal error, never emitted;
//! - the emulated device's decoder (`pagesift-gpu`, feature `emulator`): a statement whose
//!   opcode has no row fails to load; otherwise the row's operand count is checked and the
//!   family's decode rule builds the executable instruction;
//! - the tests: every form's [`Form::examples`] assembles with `ptxas` at the row's minimum
//!   and not below it, decodes in the emulator, and the emitted rows are exactly the texts
//!   the emitter's lowering rules produce.
//!
//! ```
//! let row = pagesift_ptx_isa::lookup("add.rn.bf16").expect("a known form");
//! assert_eq!((row.sm, row.ptx), (90, (7, 8)));
//! assert_eq!(row.family, pagesift_ptx_isa::Family::Arith);
//! assert_eq!(row.examples("add.rn.bf16"), ["add.rn.bf16 %rs1, %rs2, %rs3;"]);
//! ```
//!
//! # Patterns
//!
//! A row's syntax is PTX text plus `{a|b|c}` (exactly one of the alternatives; an empty one
//! makes it optional: `{.ftz|}`) and `[x]` (the same as `{x|}`), nested freely:
//! `{add|sub}.rn.{f32|f64}` stands for four forms. Modifiers appear in the order PTX
//! documents them; a form written in another order is not the same form. No text belongs to
//! two rows, and a row is either emitted in full or not at all (split it otherwise).
//!
//! # Adding an instruction form
//!
//! 1. **A table row** (`src/table.rs`, in its family's section): the pattern, the operands
//!    (each names its type by position among the form's type modifiers, [`Ty::Nth`], or
//!    directly), and the minimum target and PTX version if above [`FLOOR`]. Mark it
//!    `.emitted()` when the emitter produces it:
//!
//!    ```text
//!    row(Arith, "{add|sub|mul}.rn.{bf16|bf16x2}", BINARY)   // BINARY: d, a, b of type 0
//!        .min(90, (7, 8))
//!        .emitted(),
//!    ```
//! 2. **A typing rule** in the checker (`pagesift-ptx-macros/src/check/`): which language
//!    construct (an intrinsic, an operator on which types) reaches it; a form above the floor
//!    is required there with `needs_op`, which reads the row's minimum.
//! 3. **A lowering rule** in the emitter (`pagesift-ptx-macros/src/ptx/rules.rs`, `opcode`):
//!    the IR operation and its types -> the form's text.
//! 4. **An execution rule** in the emulator: its family's decode rule
//!    (`pagesift-gpu/src/emulator/decode/<family>.rs`) and, for a new operation, its
//!    execution in `emulator/exec/`.
//!
//! The tests then check the rest: the row's forms assemble at the stated minimum (when
//! `ptxas` is installed at `target/ptxas/ptxas`), fail below it, decode in the emulator, and
//! an emitted row holds exactly the texts the lowering rules produce.

mod example;
mod pattern;
mod table;

pub use example::example_module;

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The oldest target (sm × 10) the project emits for, with its PTX ISA version: a row's
/// default minimum. A form older than sm_70 is recorded at sm_70; a PTX version below 7.0 is
/// recorded only where it was known (`abs.f16`: 6.5), and changes nothing since a variant's
/// `.version` is never below its target's.
pub const FLOOR: (u32, (u32, u32)) = (70, (7, 0));

/// The instruction families; each has one decode rule in the emulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Integer and floating-point arithmetic, logic, shifts, bit fields, comparisons and
    /// selects: registers in, registers out.
    Arith,
    /// Moves, type conversions and address conversions (`mov`, `cvt`, `cvta`).
    Convert,
    /// Loads, stores, atomics and reductions on memory.
    Memory,
    /// Control flow, barriers, fences and hints (`bra`, `ret`, `bar.sync`, `fence`, ...).
    Control,
    /// Warp-wide operations (`shfl`, `vote`, `redux`, `activemask`, `bar.warp.sync`,
    /// `elect.sync`).
    Warp,
    /// Tensor cores and asynchronous copies (`mma`, `ldmatrix`, `cp.async`, `wgmma`).
    Tensor,
}

/// A PTX type, as a type modifier (`.f32`) names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Pred,
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
    Bf16,
    Bf16x2,
    Tf32,
    F32,
    F64,
}

impl Type {
    /// Every type.
    pub const ALL: [Type; 20] = [
        Type::Pred,
        Type::B8,
        Type::B16,
        Type::B32,
        Type::B64,
        Type::U8,
        Type::U16,
        Type::U32,
        Type::U64,
        Type::S8,
        Type::S16,
        Type::S32,
        Type::S64,
        Type::F16,
        Type::F16x2,
        Type::Bf16,
        Type::Bf16x2,
        Type::Tf32,
        Type::F32,
        Type::F64,
    ];

    /// The modifier's name, without the dot (`f16x2`).
    pub fn name(self) -> &'static str {
        match self {
            Type::Pred => "pred",
            Type::B8 => "b8",
            Type::B16 => "b16",
            Type::B32 => "b32",
            Type::B64 => "b64",
            Type::U8 => "u8",
            Type::U16 => "u16",
            Type::U32 => "u32",
            Type::U64 => "u64",
            Type::S8 => "s8",
            Type::S16 => "s16",
            Type::S32 => "s32",
            Type::S64 => "s64",
            Type::F16 => "f16",
            Type::F16x2 => "f16x2",
            Type::Bf16 => "bf16",
            Type::Bf16x2 => "bf16x2",
            Type::Tf32 => "tf32",
            Type::F32 => "f32",
            Type::F64 => "f64",
        }
    }

    /// The type a modifier names (`"f32"`), if it is one.
    pub fn parse(name: &str) -> Option<Type> {
        Type::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The integer type of twice the width (`mul.wide.s32` writes an `s64`).
    pub fn wide(self) -> Option<Type> {
        Some(match self {
            Type::U16 => Type::U32,
            Type::S16 => Type::S32,
            Type::U32 => Type::U64,
            Type::S32 => Type::S64,
            _ => return None,
        })
    }
}

/// The type of an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// The form's `n`-th type modifier: in `cvt.rn.f16.f32`, 0 is `f16` and 1 is `f32`.
    Nth(u8),
    /// Twice the width of the `n`-th type modifier (`mul.wide`, `mad.wide`).
    Wide(u8),
    /// A fixed type.
    Is(Type),
}

/// How many registers an operand is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// One register (or an immediate, for a source).
    One,
    /// The form's `.v2` / `.v4` modifier: a vector `{a, b}` of that many, else one register.
    V,
    /// The form's `.x1` / `.x2` / `.x4` modifier: always a vector, `{a}` included.
    X,
    /// A vector of exactly `n` registers.
    N(u8),
    /// One register, or a vector of registers holding its parts (`mov.b64 {lo, hi}, d`).
    Parts,
    /// A vector of `n / 2` registers, `n` from the form's `m64n<n>k<k>` shape modifier:
    /// a thread's share of a `wgmma` warpgroup's `64 × n` f32 accumulators.
    Accum,
}

/// What an operand is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A register written (`_` discards it).
    Dst,
    /// A register written, optionally with a second predicate `d|p` (`setp`, `shfl`).
    DstPair,
    /// A register and a predicate written, both given: `d|p` (`elect.sync`; either may be
    /// `_`).
    DstPred,
    /// A register or an immediate read.
    Src,
    /// A predicate read, `!p` allowed.
    PredSrc,
    /// An immediate only; the text is an example valid for every form of the row.
    Imm(&'static str),
    /// A memory address `[base+offset]`.
    Addr,
    /// A shared-memory address `[base+offset]` (of a form whose state-space modifier names
    /// another space, or none: `mbarrier`, the destination of `cp.async.bulk.tensor`).
    SharedAddr,
    /// A tensor-map address with the box's coordinates, one per dimension of the form's
    /// `.<n>d` modifier: `[map, {x, y, z}]` (`cp.async.bulk.tensor`).
    TensorCoords,
    /// A branch target.
    Label,
}

/// One operand of a form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub role: Role,
    pub ty: Ty,
    pub width: Width,
    /// Whether it may be left out (`bar.sync`'s thread count, `cp.async`'s source size).
    pub optional: bool,
}

impl Operand {
    /// The same operand, optional.
    pub const fn opt(self) -> Operand {
        Operand {
            optional: true,
            ..self
        }
    }
}

const fn operand(role: Role, ty: Ty, width: Width) -> Operand {
    Operand {
        role,
        ty,
        width,
        optional: false,
    }
}

/// A destination register of type `ty`.
pub const fn dst(ty: Ty) -> Operand {
    operand(Role::Dst, ty, Width::One)
}
/// A destination with an optional second predicate (`p|q`).
pub const fn dst_pair(ty: Ty) -> Operand {
    operand(Role::DstPair, ty, Width::One)
}
/// A destination register of type `ty` with a predicate written beside it (`d|p`).
pub const fn dst_pred(ty: Ty) -> Operand {
    operand(Role::DstPred, ty, Width::One)
}
/// A destination of `width` registers.
pub const fn dst_vec(width: Width, ty: Ty) -> Operand {
    operand(Role::Dst, ty, width)
}
/// A source register or immediate of type `ty`.
pub const fn src(ty: Ty) -> Operand {
    operand(Role::Src, ty, Width::One)
}
/// A source of `width` registers.
pub const fn src_vec(width: Width, ty: Ty) -> Operand {
    operand(Role::Src, ty, width)
}
/// A predicate source, possibly negated.
pub const fn pred() -> Operand {
    operand(Role::PredSrc, Ty::Is(Type::Pred), Width::One)
}
/// An immediate of type `ty`; `example` is valid for every form of the row.
pub const fn imm(ty: Ty, example: &'static str) -> Operand {
    operand(Role::Imm(example), ty, Width::One)
}
/// A memory address.
pub const fn addr() -> Operand {
    operand(Role::Addr, Ty::Is(Type::B64), Width::One)
}
/// A shared-memory address.
pub const fn shared_addr() -> Operand {
    operand(Role::SharedAddr, Ty::Is(Type::B32), Width::One)
}
/// A tensor map's address with the box's coordinates (`s32`).
pub const fn tensor_coords() -> Operand {
    operand(Role::TensorCoords, Ty::Is(Type::S32), Width::One)
}
/// A branch target.
pub const fn label() -> Operand {
    operand(Role::Label, Ty::Is(Type::B32), Width::One)
}

/// One row of the table: a set of instruction forms with one operand signature and one
/// minimum.
#[derive(Clone, Copy, Debug)]
pub struct Form {
    /// The opcode pattern (see the crate documentation): `{add|sub}.rn.{f32|f64}`.
    pub syntax: &'static str,
    /// The operands in order.
    pub operands: &'static [Operand],
    /// A second operand signature of the same forms, or empty: `wgmma.mma_async` takes A
    /// either from a shared-memory descriptor ([`Form::operands`]) or from registers (this
    /// one), with the same opcode text.
    pub alt_operands: &'static [Operand],
    /// The lowest target, sm × 10.
    pub sm: u32,
    /// The lowest PTX ISA version, (major, minor).
    pub ptx: (u32, u32),
    /// Whether the forms exist only on the architecture-specific target of `sm` (`sm_90a`),
    /// not on the targets after it.
    pub arch: bool,
    pub family: Family,
    /// Whether the `ptx_kernel!` emitter produces these forms (else only hand-written PTX,
    /// `asm!` and the emulator's tests use them).
    pub emitted: bool,
}

impl Form {
    /// A row at the [`FLOOR`], not emitted.
    pub const fn new(family: Family, syntax: &'static str, operands: &'static [Operand]) -> Form {
        Form {
            syntax,
            operands,
            alt_operands: &[],
            sm: FLOOR.0,
            ptx: FLOOR.1,
            arch: false,
            family,
            emitted: false,
        }
    }

    /// The same row with a higher minimum target and PTX ISA version.
    pub const fn min(self, sm: u32, ptx: (u32, u32)) -> Form {
        Form { sm, ptx, ..self }
    }

    /// The same row at the architecture-specific target of `sm` (`sm_90a`) and PTX ISA
    /// version `ptx`.
    pub const fn min_arch(self, sm: u32, ptx: (u32, u32)) -> Form {
        Form {
            sm,
            ptx,
            arch: true,
            ..self
        }
    }

    /// The name of the lowest target that has the row's forms: `sm_80`, `sm_90a`.
    pub fn target(&self) -> String {
        format!("sm_{}{}", self.sm, if self.arch { "a" } else { "" })
    }

    /// The same row with a second operand signature (see [`Form::alt_operands`]).
    pub const fn or_operands(self, alt_operands: &'static [Operand]) -> Form {
        Form {
            alt_operands,
            ..self
        }
    }

    /// The same row, produced by the emitter.
    pub const fn emitted(self) -> Form {
        Form {
            emitted: true,
            ..self
        }
    }

    /// Every form of the row, as text.
    pub fn texts(&self) -> Vec<String> {
        pattern::expand(self.syntax)
    }

    /// The fewest and the most operands a form of the row takes (with either signature).
    pub fn operand_count(&self) -> (usize, usize) {
        let count = |ops: &[Operand]| {
            (
                ops.len() - ops.iter().filter(|o| o.optional).count(),
                ops.len(),
            )
        };
        let (fewest, most) = count(self.operands);
        if self.alt_operands.is_empty() {
            return (fewest, most);
        }
        let (f2, m2) = count(self.alt_operands);
        (fewest.min(f2), most.max(m2))
    }
}

/// Every row of the table.
pub fn forms() -> &'static [Form] {
    table::FORMS
}

/// Every form of the table, as text, with its row, in text order.
pub fn texts() -> impl Iterator<Item = (&'static str, &'static Form)> {
    index().iter().map(|(t, &i)| (t.as_str(), &table::FORMS[i]))
}

/// The row of a form (`ld.global.nc.v4.f32`), or `None` if the table has no such form.
pub fn lookup(text: &str) -> Option<&'static Form> {
    index().get(text).map(|&i| &table::FORMS[i])
}

/// Whether some form has this opcode (the text before the first dot: `ld`).
pub fn has_opcode(name: &str) -> bool {
    static OPCODES: OnceLock<Vec<&'static str>> = OnceLock::new();
    OPCODES
        .get_or_init(|| {
            let mut v: Vec<&str> = index()
                .keys()
                .map(|t| t.split('.').next().unwrap_or(""))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .binary_search(&name)
        .is_ok()
}

/// Form text -> row index; built on first use. A text in two rows keeps the first (the tests
/// reject the table then).
fn index() -> &'static BTreeMap<String, usize> {
    static INDEX: OnceLock<BTreeMap<String, usize>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut map = BTreeMap::new();
        for (i, f) in table::FORMS.iter().enumerate() {
            for t in f.texts() {
                map.entry(t).or_insert(i);
            }
        }
        map
    })
}

#[cfg(test)]
mod tests;

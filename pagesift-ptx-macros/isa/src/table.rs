//! The table: every instruction form the project knows, by family. A row is
//! `row(family, pattern, operands)`, then `.min(sm, (major, minor))` when it needs more than
//! the floor and `.emitted()` when the `ptx_kernel!` emitter produces it.

use crate::Family::*;
use crate::Width::{Accum, Parts, N, V, X};
use crate::{
    addr, dst, dst_pair, dst_pred, dst_vec, imm, label, pred, shared_addr, src, src_vec,
    tensor_coords, Family, Form, Operand, Ty, Type,
};

const fn row(family: Family, syntax: &'static str, operands: &'static [Operand]) -> Form {
    Form::new(family, syntax, operands)
}

/// The form's first and second type modifiers.
const T0: Ty = Ty::Nth(0);
const T1: Ty = Ty::Nth(1);
const U32: Ty = Ty::Is(Type::U32);
const B32: Ty = Ty::Is(Type::B32);
const PRED: Ty = Ty::Is(Type::Pred);
const B64: Ty = Ty::Is(Type::B64);
const S32: Ty = Ty::Is(Type::S32);

// Operand signatures shared by many rows.
const UNARY: &[Operand] = &[dst(T0), src(T0)];
const BINARY: &[Operand] = &[dst(T0), src(T0), src(T0)];
const TERNARY: &[Operand] = &[dst(T0), src(T0), src(T0), src(T0)];
const WIDE: &[Operand] = &[dst(Ty::Wide(0)), src(T0), src(T0)];
const WIDE_ADD: &[Operand] = &[dst(Ty::Wide(0)), src(T0), src(T0), src(Ty::Wide(0))];
const SHIFT: &[Operand] = &[dst(T0), src(T0), src(U32)];
const COUNT: &[Operand] = &[dst(U32), src(T0)];
const COMPARE: &[Operand] = &[dst_pair(PRED), src(T0), src(T0)];
const COMPARE_COMBINE: &[Operand] = &[dst_pair(PRED), src(T0), src(T0), pred()];
const TEST: &[Operand] = &[dst(PRED), src(T0)];
const SELECT: &[Operand] = &[dst(T0), src(T0), src(T0), src(PRED)];
const SELECT_SIGN: &[Operand] = &[dst(T0), src(T0), src(T0), src(T1)];
const DOT: &[Operand] = &[dst(B32), src(B32), src(B32), src(B32)];
const FIELD_EXTRACT: &[Operand] = &[dst(T0), src(T0), src(U32), src(U32)];
const FIELD_INSERT: &[Operand] = &[dst(T0), src(T0), src(T0), src(U32), src(U32)];
const CONVERT: &[Operand] = &[dst(T0), src(T1)];
const PACK: &[Operand] = &[dst(T0), src(T1), src(T1)];
const MOVE: &[Operand] = &[dst_vec(Parts, T0), src_vec(Parts, T0)];
const LOAD: &[Operand] = &[dst_vec(V, T0), addr()];
const STORE: &[Operand] = &[addr(), src_vec(V, T0)];
const ATOMIC: &[Operand] = &[dst(T0), addr(), src(T0)];
const ATOMIC_CAS: &[Operand] = &[dst(T0), addr(), src(T0), src(T0)];
const REDUCE: &[Operand] = &[addr(), src(T0)];
const NONE: &[Operand] = &[];
const BARRIER: &[Operand] = &[src(U32), src(U32).opt()];
const BARRIER_RED: &[Operand] = &[dst(T0), src(U32), src(U32).opt(), pred()];
const MMA_2_1: &[Operand] = &[
    dst_vec(N(4), T0),
    src_vec(N(2), B32),
    src_vec(N(1), B32),
    src_vec(N(4), T0),
];
const MMA_4_2: &[Operand] = &[
    dst_vec(N(4), T0),
    src_vec(N(4), B32),
    src_vec(N(2), B32),
    src_vec(N(4), T0),
];

/// `wgmma.mma_async` with A and B in shared memory: the accumulators (read and written), the
/// matrix descriptors of A and B, the predicate `scale-d` (false: D = A·B, ignoring D's
/// values), the immediates `imm-scale-a` and `imm-scale-b` (1 or -1) and, for 16-bit inputs,
/// `imm-trans-a` and `imm-trans-b` (0: K-major, 1: M- / N-major).
const WGMMA_SS: &[Operand] = &[
    dst_vec(Accum, T0),
    src(B64),
    src(B64),
    pred(),
    imm(S32, "1"),
    imm(S32, "1"),
    imm(S32, "0"),
    imm(S32, "0"),
];
/// `cp.async.bulk.tensor` global -> shared: the destination, the tensor map with the box's
/// coordinates, the `mbarrier` that counts its bytes.
const TMA_LOAD: &[Operand] = &[shared_addr(), tensor_coords(), shared_addr()];
/// `cp.async.bulk.tensor` shared -> global: the tensor map with the box's coordinates, the
/// source in shared memory.
const TMA_STORE: &[Operand] = &[tensor_coords(), shared_addr()];
const WGMMA_SS_TF32: &[Operand] = &[
    dst_vec(Accum, T0),
    src(B64),
    src(B64),
    pred(),
    imm(S32, "1"),
    imm(S32, "1"),
];
/// `wgmma.mma_async` with A in registers (the same forms, the second operand signature of
/// their rows): the accumulators, A's fragment in four `.b32` registers per thread, B's
/// descriptor, `scale-d`, `imm-scale-a`, `imm-scale-b` and, for 16-bit inputs, `imm-trans-b`
/// alone (A in registers has no transpose).
const WGMMA_RS: &[Operand] = &[
    dst_vec(Accum, T0),
    src_vec(N(4), B32),
    src(B64),
    pred(),
    imm(S32, "1"),
    imm(S32, "1"),
    imm(S32, "0"),
];
const WGMMA_RS_TF32: &[Operand] = &[
    dst_vec(Accum, T0),
    src_vec(N(4), B32),
    src(B64),
    pred(),
    imm(S32, "1"),
    imm(S32, "1"),
];

/// The table. Keep each family's rows together, the emitted ones first.
pub(crate) static FORMS: &[Form] = &[
    // ---- Arithmetic: integers ----
    row(Arith, "{add|sub}.{s16|u16|s32|u32|s64|u64}", BINARY).emitted(),
    row(Arith, "mul.{lo|hi}.{s16|u16|s32|u32|s64|u64}", BINARY).emitted(),
    row(Arith, "mul.wide.{s32|u32}", WIDE).emitted(),
    row(Arith, "mad.lo.{s16|u16|s32|u32|s64|u64}", TERNARY).emitted(),
    row(Arith, "{div|rem}.{s16|u16|s32|u32|s64|u64}", BINARY).emitted(),
    row(Arith, "{min|max}.{s32|u32|s64|u64|f32|f64}", BINARY).emitted(),
    row(Arith, "{neg|abs}.{s16|s32|s64|f32|f64}", UNARY).emitted(),
    row(Arith, "{and|or|xor}.{pred|b16|b32|b64}", BINARY).emitted(),
    row(Arith, "not.{pred|b16|b32|b64}", UNARY).emitted(),
    row(
        Arith,
        "{shl.{b16|b32|b64}|shr.{s16|u16|s32|u32|s64|u64}}",
        SHIFT,
    )
    .emitted(),
    row(Arith, "{popc|clz}.{b32|b64}", COUNT).emitted(),
    row(Arith, "bfe.{u32|s32}", FIELD_EXTRACT).emitted(),
    row(Arith, "bfi.b32", FIELD_INSERT).emitted(),
    row(Arith, "prmt.b32", TERNARY).emitted(),
    row(Arith, "dp4a.{u32|s32}.{u32|s32}", DOT).emitted(),
    row(Arith, "{add|sub}.sat.s32", BINARY),
    row(Arith, "mul.wide.{s16|u16}", WIDE),
    row(Arith, "mad.wide.{s32|u32}", WIDE_ADD),
    row(Arith, "mad.hi.{s16|u16|s32|u32|s64|u64}", TERNARY),
    row(Arith, "{min|max}.{s16|u16}", BINARY),
    row(Arith, "cnot.{b16|b32|b64}", UNARY),
    row(Arith, "shr.{b16|b32|b64}", SHIFT),
    row(Arith, "brev.{b32|b64}", UNARY),
    row(Arith, "bfind.{u32|s32|u64|s64}", COUNT),
    row(Arith, "bfe.{u64|s64}", FIELD_EXTRACT),
    row(Arith, "bfi.b64", FIELD_INSERT),
    row(Arith, "dp2a.{lo|hi}.{u32|s32}.{u32|s32}", DOT),
    row(
        Arith,
        "lop3.b32",
        &[dst(T0), src(T0), src(T0), src(T0), imm(B32, "0x96")],
    )
    .emitted(),
    row(
        Arith,
        "shf.{l|r}.{clamp|wrap}.b32",
        &[dst(T0), src(T0), src(T0), src(U32)],
    ),
    // ---- Arithmetic: floating point ----
    row(Arith, "{add|sub|mul}.rn.{f32|f64|f16|f16x2}", BINARY).emitted(),
    row(Arith, "{add|sub|mul}.rn.{bf16|bf16x2}", BINARY)
        .min(90, (7, 8))
        .emitted(),
    row(Arith, "div.rn.{f32|f64}", BINARY).emitted(),
    row(Arith, "fma.rn.{f32|f64|f16|f16x2}", TERNARY).emitted(),
    row(Arith, "fma.rn.{bf16|bf16x2}", TERNARY)
        .min(80, (7, 0))
        .emitted(),
    row(Arith, "{min|max}.{f16|f16x2|bf16|bf16x2}", BINARY)
        .min(80, (7, 0))
        .emitted(),
    row(Arith, "neg.{f16|f16x2}", UNARY).emitted(),
    row(Arith, "abs.{f16|f16x2}", UNARY)
        .min(70, (6, 5))
        .emitted(),
    row(Arith, "{neg|abs}.{bf16|bf16x2}", UNARY)
        .min(80, (7, 0))
        .emitted(),
    row(Arith, "copysign.{f32|f64}", BINARY).emitted(),
    row(Arith, "{sqrt|rcp}.rn.{f32|f64}", UNARY).emitted(),
    row(
        Arith,
        "{{sqrt|rsqrt|rcp|ex2|lg2|sin|cos}.approx|{rcp|ex2}.approx.ftz}.f32",
        UNARY,
    )
    .emitted(),
    row(Arith, "tanh.approx.f32", UNARY)
        .min(75, (7, 0))
        .emitted(),
    row(
        Arith,
        "{add|sub|mul}{{.rz|.rm|.rp|}[.ftz][.sat]|.rn{.ftz.sat|.ftz|.sat}}.f32",
        BINARY,
    ),
    row(Arith, "{add|sub|mul}{.rz|.rm|.rp|}.f64", BINARY),
    row(
        Arith,
        "{add|sub|mul}{{.ftz|.sat|.ftz.sat|}|.rn{.ftz|.sat|.ftz.sat}}.{f16|f16x2}",
        BINARY,
    ),
    row(Arith, "{add|sub|mul}.{bf16|bf16x2}", BINARY).min(90, (7, 8)),
    row(
        Arith,
        "div{{.approx|.full}[.ftz]|{.rz|.rm|.rp}[.ftz]|.rn.ftz}.f32",
        BINARY,
    ),
    row(Arith, "div{.rz|.rm|.rp}.f64", BINARY),
    row(
        Arith,
        "fma{{.rz|.rm|.rp}[.ftz][.sat]|.rn{.ftz.sat|.ftz|.sat}}.f32",
        TERNARY,
    ),
    row(Arith, "fma{.rz|.rm|.rp}.f64", TERNARY),
    row(Arith, "fma.rn{.ftz|.sat|.ftz.sat}.{f16|f16x2}", TERNARY),
    row(Arith, "{min|max}.ftz.f32", BINARY),
    row(Arith, "{neg|abs}.ftz.{f32|f16|f16x2}", UNARY),
    row(Arith, "{sqrt|rcp}{{.rz|.rm|.rp}[.ftz]|.rn.ftz}.f32", UNARY),
    row(Arith, "{sqrt|rcp}{.rz|.rm|.rp}.f64", UNARY),
    row(Arith, "{sqrt|rsqrt|lg2|sin|cos}.approx.ftz.f32", UNARY),
    row(Arith, "{rsqrt.approx|{rsqrt|rcp}.approx.ftz}.f64", UNARY),
    // ---- Arithmetic: comparisons and selects ----
    row(
        Arith,
        "setp.{eq|ne|lt|le|gt|ge}.{s16|u16|s32|u32|s64|u64}",
        COMPARE,
    )
    .emitted(),
    row(Arith, "setp.{eq|lt|le|gt|ge|neu}.{f32|f64|f16}", COMPARE).emitted(),
    row(Arith, "setp.{eq|lt|le|gt|ge|neu}.bf16", COMPARE)
        .min(90, (7, 8))
        .emitted(),
    row(Arith, "testp.notanumber.{f32|f64}", TEST).emitted(),
    row(Arith, "selp.{b16|b32|b64|f32|f64}", SELECT).emitted(),
    row(Arith, "setp.{lo|ls|hi|hs}.{u16|u32|u64}", COMPARE),
    row(Arith, "setp.{eq|ne}.{b16|b32|b64}", COMPARE),
    row(
        Arith,
        "setp.{ne|equ|ltu|leu|gtu|geu|num|nan}.{f32|f64|f16}",
        COMPARE,
    ),
    row(Arith, "setp.{ne|equ|ltu|leu|gtu|geu|num|nan}.bf16", COMPARE).min(90, (7, 8)),
    row(
        Arith,
        "setp.{eq|ne|lt|le|gt|ge|equ|neu|ltu|leu|gtu|geu|num|nan}.ftz.f32",
        COMPARE,
    ),
    row(
        Arith,
        "setp.{eq|ne|lt|le|gt|ge}.{and|or|xor}.{s16|u16|s32|u32|s64|u64}",
        COMPARE_COMBINE,
    ),
    row(
        Arith,
        "setp.{eq|ne|lt|le|gt|ge|equ|neu|ltu|leu|gtu|geu|num|nan}.{and|or|xor}{.ftz.f32|.f32|.f64}",
        COMPARE_COMBINE,
    ),
    row(
        Arith,
        "testp.{finite|infinite|number|normal|subnormal}.{f32|f64}",
        TEST,
    ),
    row(Arith, "selp.{u16|s16|u32|s32|u64|s64}", SELECT),
    row(
        Arith,
        "slct{.{b16|b32|b64|u16|u32|u64|s16|s32|s64|f32|f64}.s32\
         |[.ftz].{b16|b32|b64|u16|u32|u64|s16|s32|s64|f32|f64}.f32}",
        SELECT_SIGN,
    ),
    // ---- Moves and conversions ----
    row(
        Convert,
        "mov.{pred|b16|b32|b64|u16|s16|u32|s32|u64|s64|f32|f64}",
        MOVE,
    )
    .emitted(),
    row(
        Convert,
        "cvt.{u8.{s8|u16|s16|u32|s32|u64|s64}\
         |s8.{u8|u16|s16|u32|s32|u64|s64}\
         |u16.{u8|s8|s16|u32|s32|u64|s64}\
         |s16.{u8|s8|u16|u32|s32|u64|s64}\
         |u32.{u8|s8|u16|s16|s32|u64|s64}\
         |s32.{u8|s8|u16|s16|u32|u64|s64}\
         |u64.{u8|s8|u16|s16|u32|s32|s64}\
         |s64.{u8|s8|u16|s16|u32|s32|u64}}",
        CONVERT,
    )
    .emitted(),
    row(
        Convert,
        "cvt.{rn.{f16|f32|f64}.{u8|s8|u16|s16|u32|s32|u64|s64}\
         |rzi.{u8|s8|u16|s16|u32|s32|u64|s64}.{f16|f32|f64}\
         |{f32.f16|f64.f16|f64.f32}\
         |rn.{f16.f32|f16.f64|f32.f64}\
         |{rni|rzi|rmi|rpi}.{f32.f32|f64.f64}}",
        CONVERT,
    )
    .emitted(),
    row(Convert, "cvt.rn.bf16.f32", CONVERT)
        .min(80, (7, 0))
        .emitted(),
    row(Convert, "cvt.f32.bf16", CONVERT)
        .min(80, (7, 1))
        .emitted(),
    row(
        Convert,
        "cvt.{rn.bf16.{u16|s16|u32|s32|u64|s64|f16|f64}\
         |rzi.{u16|s16|u32|s32|u64|s64}.bf16\
         |f64.bf16|rn.f16.bf16}",
        CONVERT,
    )
    .min(90, (7, 8))
    .emitted(),
    row(Convert, "cvt.rn.{f16x2|bf16x2}.f32", PACK)
        .min(80, (7, 0))
        .emitted(),
    row(Convert, "cvt.rna.tf32.f32", CONVERT)
        .min(80, (7, 0))
        .emitted(),
    row(Convert, "cvta.to.global.u64", UNARY).emitted(),
    row(Convert, "cvta.param.u64", UNARY)
        .min(70, (7, 7))
        .emitted(),
    row(
        Convert,
        "cvt.{{rz|rm|rp}.{f16|f32|f64}.{u8|s8|u16|s16|u32|s32|u64|s64}\
         |{rni|rmi|rpi}.{u8|s8|u16|s16|u32|s32|u64|s64}.{f16|f32|f64}\
         |{rni|rzi|rmi|rpi}.ftz.{u8|s8|u16|s16|u32|s32|u64|s64}.f32\
         |{rz|rm|rp}.{f16.f32|f16.f64|f32.f64}\
         |{rni|rzi|rmi|rpi}.{ftz.f32.f32|f16.f16}}",
        CONVERT,
    ),
    row(
        Convert,
        "cvt.sat.{{u8|s8}.{u16|s16|u32|s32|u64|s64}\
         |{u16|s16}.{u32|s32|u64|s64}\
         |{u32|s32}.{u64|s64}}",
        CONVERT,
    ),
    row(Convert, "cvt.rz.{f16x2|bf16x2}.f32", PACK).min(80, (7, 0)),
    row(
        Convert,
        "cvta.{{global|shared|local|const}|to.{shared|local|const}}.u64",
        UNARY,
    ),
    // ---- Memory ----
    row(
        Memory,
        "ld.{global|global.nc|shared|param}\
         {[.v2].{u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}|.v4.{u8|s8|u16|s16|u32|s32|f32}}",
        LOAD,
    )
    .emitted(),
    row(
        Memory,
        "ld.acquire.gpu.global.{u32|s32|u64|s64|f32|f64}",
        LOAD,
    )
    .emitted(),
    row(
        Memory,
        "st.{global|shared}\
         {[.v2].{u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}|.v4.{u8|s8|u16|s16|u32|s32|f32}}",
        STORE,
    )
    .emitted(),
    row(
        Memory,
        "st.release.gpu.global.{u32|s32|u64|s64|f32|f64}",
        STORE,
    )
    .emitted(),
    row(
        Memory,
        "atom.{global|shared}\
         .{add.{u32|s32|u64|f32|f64}|{min|max}.{u32|s32|u64|s64}|{exch|and|or|xor}.{b32|b64}\
         |add.noftz.{f16|f16x2}}",
        ATOMIC,
    )
    .emitted(),
    row(Memory, "atom.{global|shared}.cas.{b32|b64}", ATOMIC_CAS).emitted(),
    row(
        Memory,
        "atom.{global|shared}.add.noftz.{bf16|bf16x2}",
        ATOMIC,
    )
    .min(90, (7, 8))
    .emitted(),
    row(
        Memory,
        "ld.{global|global.nc|shared|param}{[.v2].{b8|b16|b32|b64}|.v4.{b8|b16|b32}}",
        LOAD,
    ),
    row(
        Memory,
        "{ld{.local|.const|}|ldu.global|ld.global.{ca|cg|cs|lu|cv}\
         |ld{.volatile|.relaxed.{cta|gpu|sys}|.acquire.{cta|sys}}{.global|.shared|}\
         |ld.acquire.gpu{.shared|}}\
         {[.v2].{b8|b16|b32|b64|u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}\
         |.v4.{b8|b16|b32|u8|s8|u16|s16|u32|s32|f32}}",
        LOAD,
    ),
    row(
        Memory,
        "ld.acquire.gpu.global\
         {.{b8|b16|b32|b64|u8|s8|u16|s16}\
         |.v2.{b8|b16|b32|b64|u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}\
         |.v4.{b8|b16|b32|u8|s8|u16|s16|u32|s32|f32}}",
        LOAD,
    ),
    row(
        Memory,
        "st.{global|shared}{[.v2].{b8|b16|b32|b64}|.v4.{b8|b16|b32}}",
        STORE,
    ),
    row(
        Memory,
        "{st{.local|}|st.global.{wb|cg|cs|wt}\
         |st{.volatile|.relaxed.{cta|gpu|sys}|.release.{cta|sys}}{.global|.shared|}\
         |st.release.gpu{.shared|}}\
         {[.v2].{b8|b16|b32|b64|u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}\
         |.v4.{b8|b16|b32|u8|s8|u16|s16|u32|s32|f32}}",
        STORE,
    ),
    row(
        Memory,
        "st.release.gpu.global\
         {.{b8|b16|b32|b64|u8|s8|u16|s16}\
         |.v2.{b8|b16|b32|b64|u8|s8|u16|s16|u32|s32|u64|s64|f32|f64}\
         |.v4.{b8|b16|b32|u8|s8|u16|s16|u32|s32|f32}}",
        STORE,
    ),
    row(Memory, "atom.{global|shared}.{inc|dec}.u32", ATOMIC),
    row(
        Memory,
        "atom{{.relaxed|.acquire|.release|.acq_rel}.{cta|gpu|sys}{.global|.shared|}\
         |.{cta|gpu|sys}{.global|.shared|}|}\
         .{add.{u32|s32|u64|f32|f64}|{min|max}.{u32|s32|u64|s64}|{exch|and|or|xor}.{b32|b64}\
         |{inc|dec}.u32|add.noftz.{f16|f16x2}}",
        ATOMIC,
    ),
    row(
        Memory,
        "atom{{.relaxed|.acquire|.release|.acq_rel}.{cta|gpu|sys}{.global|.shared|}\
         |.{cta|gpu|sys}{.global|.shared|}|}.cas.{b32|b64}",
        ATOMIC_CAS,
    ),
    row(
        Memory,
        "atom{{.relaxed|.acquire|.release|.acq_rel}.{cta|gpu|sys}{.global|.shared|}\
         |.{cta|gpu|sys}{.global|.shared|}|}.add.noftz.{bf16|bf16x2}",
        ATOMIC,
    )
    .min(90, (7, 8)),
    row(
        Memory,
        "red{{.relaxed|.release}.{cta|gpu|sys}|.{cta|gpu|sys}|}{.global|.shared|}\
         .{add.{u32|s32|u64|f32|f64}|{min|max}.{u32|s32|u64|s64}|{and|or|xor}.{b32|b64}\
         |{inc|dec}.u32|add.noftz.{f16|f16x2}}",
        REDUCE,
    ),
    row(
        Memory,
        "red{{.relaxed|.release}.{cta|gpu|sys}|.{cta|gpu|sys}|}{.global|.shared|}\
         .add.noftz.{bf16|bf16x2}",
        REDUCE,
    )
    .min(90, (7, 8)),
    // ---- Control flow, barriers, fences ----
    row(Control, "bra", &[label()]).emitted(),
    row(Control, "ret", NONE).emitted(),
    row(Control, "bar.sync", BARRIER).emitted(),
    row(Control, "fence.{sc|acq_rel}.{cta|gpu|sys}", NONE).emitted(),
    row(Control, "prefetch.global.L2", &[addr()]).emitted(),
    row(Control, "fence.proxy.async.shared::cta", NONE)
        .min(90, (8, 0))
        .emitted(),
    // A warpgroup's register budget moved between its warpgroups (producer / consumer):
    // the new count per thread, a multiple of 8 in 24..=256.
    row(Control, "setmaxnreg.{inc|dec}.sync.aligned.u32", &[imm(U32, "232")])
        .min_arch(90, (8, 0))
        .emitted(),
    row(Control, "bra.uni", &[label()]),
    row(
        Control,
        "{ret.uni|exit|trap|brkpt|membar.{cta|gl|sys}}",
        NONE,
    ),
    row(Control, "barrier.sync[.aligned]", BARRIER),
    row(
        Control,
        "{bar.arrive|barrier.arrive[.aligned]}",
        &[src(U32), src(U32)],
    ),
    row(
        Control,
        "{bar.red.{popc.u32|{and|or}.pred}\
         |barrier.red.{popc[.aligned].u32|{and|or}[.aligned].pred}}",
        BARRIER_RED,
    ),
    row(Control, "nanosleep.u32", &[src(U32)]),
    row(
        Control,
        "{prefetch{.global|.local|}.L1|prefetch{.local|}.L2|prefetchu.L1}",
        &[addr()],
    ),
    // ---- Warp ----
    row(
        Warp,
        "shfl.sync.{up|down|bfly|idx}.b32",
        &[dst_pair(T0), src(T0), src(B32), src(B32), src(B32)],
    )
    .emitted(),
    row(
        Warp,
        "vote.sync.{all.pred|any.pred|ballot.b32}",
        &[dst(T0), pred(), src(B32)],
    )
    .emitted(),
    row(Warp, "bar.warp.sync", &[src(B32)]).emitted(),
    row(Warp, "vote.sync.uni.pred", &[dst(T0), pred(), src(B32)]),
    row(
        Warp,
        "redux.sync.{{add|min|max}.{u32|s32}|{and|or|xor}.b32}",
        &[dst(T0), src(T0), src(B32)],
    )
    .min(80, (7, 0)),
    row(Warp, "activemask.b32", &[dst(T0)]),
    // One lane of the member mask elected (the lowest): its index in `d` for every member,
    // `p` true in it alone.
    row(Warp, "elect.sync", &[dst_pred(B32), src(B32)])
        .min(90, (8, 0))
        .emitted(),
    // ---- Tensor cores and asynchronous copies ----
    row(
        Tensor,
        "ldmatrix.sync.aligned.m8n8.{x1|x2|x4}[.trans].shared.b16",
        &[dst_vec(X, B32), addr()],
    )
    .min(75, (6, 5))
    .emitted(),
    // The store counterpart of `ldmatrix`: lanes `8 i .. 8 i + 8` give the row addresses of
    // matrix `i`, every lane two 16-bit elements of each matrix (sm_90).
    row(
        Tensor,
        "stmatrix.sync.aligned.m8n8.{x1|x2|x4}[.trans].shared.b16",
        &[addr(), src_vec(X, B32)],
    )
    .min(90, (7, 8))
    .emitted(),
    row(
        Tensor,
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
        MMA_2_1,
    )
    .min(75, (6, 5))
    .emitted(),
    row(
        Tensor,
        "mma.sync.aligned.{m16n8k4.row.col.f32.tf32.tf32.f32\
         |m16n8k8.row.col.f32.bf16.bf16.f32\
         |m16n8k16.row.col.s32.{s8.s8|u8.u8}.s32}",
        MMA_2_1,
    )
    .min(80, (7, 0))
    .emitted(),
    row(
        Tensor,
        "mma.sync.aligned.{m16n8k8.row.col.f32.tf32.tf32.f32\
         |m16n8k16.row.col.f32.{f16.f16|bf16.bf16}.f32\
         |m16n8k32.row.col.s32.{s8.s8|u8.u8}.s32}",
        MMA_4_2,
    )
    .min(80, (7, 0))
    .emitted(),
    row(
        Tensor,
        "cp.async.{ca|cg}.shared.global",
        &[addr(), addr(), imm(U32, "16"), src(U32).opt()],
    )
    .min(80, (7, 0))
    .emitted(),
    row(Tensor, "cp.async.commit_group", NONE)
        .min(80, (7, 0))
        .emitted(),
    row(Tensor, "cp.async.wait_group", &[imm(U32, "0")])
        .min(80, (7, 0))
        .emitted(),
    row(
        Tensor,
        "wgmma.mma_async.sync.aligned.m64n{8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256}k16.f32.{f16.f16|bf16.bf16}",
        WGMMA_SS,
    )
    .or_operands(WGMMA_RS)
    .min_arch(90, (8, 0))
    .emitted(),
    row(
        Tensor,
        "wgmma.mma_async.sync.aligned.m64n{8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256}k8.f32.tf32.tf32",
        WGMMA_SS_TF32,
    )
    .or_operands(WGMMA_RS_TF32)
    .min_arch(90, (8, 0))
    .emitted(),
    row(Tensor, "wgmma.{fence|commit_group}.sync.aligned", NONE)
        .min_arch(90, (8, 0))
        .emitted(),
    row(Tensor, "wgmma.wait_group.sync.aligned", &[imm(U32, "0")])
        .min_arch(90, (8, 0))
        .emitted(),
    row(
        Tensor,
        "mma.sync.aligned.m16n8k16.row.col.s32.{s8.u8|u8.s8}.s32",
        MMA_2_1,
    )
    .min(80, (7, 0)),
    row(
        Tensor,
        "mma.sync.aligned.m16n8k32.row.col.s32.{s8.u8|u8.s8}.s32",
        MMA_4_2,
    )
    .min(80, (7, 0)),
    row(Tensor, "cp.async.wait_all", NONE).min(80, (7, 0)),
    // `mbarrier` objects (64 bits of shared memory): the arrivals and transaction bytes a
    // phase waits for, and the waits on a phase's parity.
    row(Tensor, "mbarrier.init.shared::cta.b64", &[shared_addr(), src(U32)])
        .min(80, (7, 8))
        .emitted(),
    row(Tensor, "mbarrier.arrive.shared::cta.b64", &[dst(B64), shared_addr()])
        .min(80, (7, 8))
        .emitted(),
    // One arrival once the thread's `cp.async` copies before it have landed, counted among
    // those the phase expects (`.noinc`).
    row(
        Tensor,
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
        &[shared_addr()],
    )
    .min(80, (7, 8))
    .emitted(),
    row(
        Tensor,
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        &[dst(B64), shared_addr(), src(U32)],
    )
    .min(90, (8, 0))
    .emitted(),
    row(
        Tensor,
        "mbarrier.try_wait.parity.shared::cta.b64",
        &[dst(PRED), shared_addr(), src(U32)],
    )
    .min(90, (7, 8))
    .emitted(),
    // The tensor memory accelerator: a box of a tensor map's tensor into shared memory,
    // completing on an `mbarrier` by its bytes.
    row(
        Tensor,
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        TMA_LOAD,
    )
    .min(90, (8, 0))
    .emitted(),
    row(
        Tensor,
        "cp.async.bulk.tensor.{1d|2d|4d|5d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        TMA_LOAD,
    )
    .min(90, (8, 0)),
    // A box of shared memory into a tensor map's tensor (the part outside the tensor is not
    // written), completing in the thread's bulk async-groups: `.read` waits until the source
    // has been read, the plain wait until the writes are done.
    row(
        Tensor,
        "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group",
        TMA_STORE,
    )
    .min(90, (8, 0))
    .emitted(),
    row(
        Tensor,
        "cp.async.bulk.tensor.{1d|2d|4d|5d}.global.shared::cta.tile.bulk_group",
        TMA_STORE,
    )
    .min(90, (8, 0)),
    row(Tensor, "cp.async.bulk.commit_group", NONE)
        .min(90, (8, 0))
        .emitted(),
    row(Tensor, "cp.async.bulk.wait_group[.read]", &[imm(U32, "0")])
        .min(90, (8, 0))
        .emitted(),
    row(Tensor, "prefetch.tensormap", &[addr()])
        .min(90, (8, 0))
        .emitted(),
];

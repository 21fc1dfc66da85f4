//! The decode rule of the arithmetic family: integer and floating-point arithmetic, logic,
//! shifts, bit fields, comparisons and selects (`add.rn.f32`, `setp.lt.and.s32`, `lop3.b32`).
//! Each reads its modifiers with [`Mods`]: a rounding mode, `.ftz` and `.sat` for floats
//! ([`fmode`]), `.lo`/`.hi`/`.wide` for integer products, and the operand type last.

use super::inst::{Ctx, Mods};
use super::*;

/// Decodes one arithmetic instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl"
        | "shr" | "copysign" => {
            let int_mode = m.take_one(&["lo", "hi", "wide"]);
            let fm = fmode(m);
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let bty = if matches!(base, "shl" | "shr") {
                Ty::U32
            } else {
                ty
            };
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], bty)?);
            if ty.is_float() {
                let op = match base {
                    "add" => FOp2::Add,
                    "sub" => FOp2::Sub,
                    "mul" => FOp2::Mul,
                    "div" => FOp2::Div,
                    "min" => FOp2::Min,
                    "max" => FOp2::Max,
                    "copysign" => FOp2::Copysign,
                    _ => return Err("not a float operation".into()),
                };
                // Round-to-nearest f32 add, sub and mul with no flushing or saturation are the
                // hot operations: they get dedicated ops.
                let plain =
                    ty == Ty::F32 && !fm.ftz && !fm.sat && matches!(fm.rnd, Rnd::Default | Rnd::Rn);
                match op {
                    FOp2::Add if plain => Op::F32Add { d, a, b },
                    FOp2::Sub if plain => Op::F32Sub { d, a, b },
                    FOp2::Mul if plain => Op::F32Mul { d, a, b },
                    _ => Op::Flt2 {
                        op,
                        ty,
                        fm,
                        d,
                        a,
                        b,
                    },
                }
            } else {
                let op = match (base, int_mode, fm.sat) {
                    ("add", None, false) => IOp2::Add,
                    ("add", None, true) => IOp2::AddSat,
                    ("sub", None, false) => IOp2::Sub,
                    ("sub", None, true) => IOp2::SubSat,
                    ("mul", Some("lo"), false) => IOp2::MulLo,
                    ("mul", Some("hi"), false) => IOp2::MulHi,
                    ("mul", Some("wide"), false) => IOp2::MulWide,
                    ("div", None, false) => IOp2::Div,
                    ("rem", None, false) => IOp2::Rem,
                    ("min", None, false) => IOp2::Min,
                    ("max", None, false) => IOp2::Max,
                    ("and", None, false) => IOp2::And,
                    ("or", None, false) => IOp2::Or,
                    ("xor", None, false) => IOp2::Xor,
                    ("shl", None, false) => IOp2::Shl,
                    ("shr", None, false) => IOp2::Shr,
                    _ => return Err("unsupported integer form".into()),
                };
                if fm.rnd != Rnd::Default || fm.ftz {
                    return Err("rounding modifiers on an integer operation".into());
                }
                let ty = if ty == Ty::Pred { Ty::Pred } else { ty };
                Op::Int2 { op, ty, d, a, b }
            }
        }
        "mad" | "fma" => {
            let int_mode = m.take_one(&["lo", "hi", "wide"]);
            let fm = fmode(m);
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], ty)?);
            // Floats: one rounding of a * b + c. Integers: `.lo` / `.hi` halves of the product,
            // or `.wide` with a double-width addend.
            if ty.is_float() {
                let c = ctx.src(&ops[3], ty)?;
                if ty == Ty::F32 && !fm.ftz && !fm.sat && matches!(fm.rnd, Rnd::Default | Rnd::Rn) {
                    Op::F32Fma { d, a, b, c }
                } else {
                    Op::Fma { ty, fm, d, a, b, c }
                }
            } else {
                let op = match int_mode {
                    Some("lo") => IOp2::MulLo,
                    Some("hi") => IOp2::MulHi,
                    Some("wide") => IOp2::MulWide,
                    _ => return Err("integer mad needs .lo, .hi or .wide".into()),
                };
                if fm.sat || fm.rnd != Rnd::Default {
                    return Err("unsupported integer mad form".into());
                }
                let cty = if op == IOp2::MulWide {
                    if ty.is_signed() {
                        Ty::S64
                    } else {
                        Ty::U64
                    }
                } else {
                    ty
                };
                let c = ctx.src(&ops[3], cty)?;
                Op::IMad { op, ty, d, a, b, c }
            }
        }
        "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "bfind" | "sqrt" | "rsqrt"
        | "rcp" | "ex2" | "lg2" | "sin" | "cos" | "tanh" => {
            let fm = fmode(m);
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let a = ctx.src(&ops[1], ty)?;
            if ty.is_float() {
                let op = match base {
                    "abs" => FOp1::Abs,
                    "neg" => FOp1::Neg,
                    "sqrt" => FOp1::Sqrt,
                    "rsqrt" => FOp1::Rsqrt,
                    "rcp" => FOp1::Rcp,
                    "ex2" => FOp1::Ex2,
                    "lg2" => FOp1::Lg2,
                    "sin" => FOp1::Sin,
                    "cos" => FOp1::Cos,
                    "tanh" => FOp1::Tanh,
                    _ => return Err("not a float operation".into()),
                };
                Op::Flt1 { op, ty, fm, d, a }
            } else {
                let op = match base {
                    "abs" => IOp1::Abs,
                    "neg" => IOp1::Neg,
                    "not" => IOp1::Not,
                    "cnot" => IOp1::Cnot,
                    "popc" => IOp1::Popc,
                    "clz" => IOp1::Clz,
                    "brev" => IOp1::Brev,
                    "bfind" => IOp1::Bfind,
                    _ => return Err("not an integer operation".into()),
                };
                if fm
                    != (FMode {
                        rnd: Rnd::Default,
                        ftz: false,
                        sat: false,
                    })
                {
                    return Err("float modifiers on an integer operation".into());
                }
                Op::Int1 { op, ty, d, a }
            }
        }
        "setp" => {
            // The comparison is the modifier that names one (`lt`, `equ`, `num`, ...).
            let cmp = m
                .parts
                .iter()
                .find_map(|p| Cmp::parse(p))
                .ok_or("missing comparison")?;
            let cname = m
                .parts
                .iter()
                .find(|p| Cmp::parse(p).is_some())
                .copied()
                .unwrap_or("");
            m.take(cname);
            let bop = match m.take_one(&["and", "or", "xor"]) {
                Some("and") => BoolOp::And,
                Some("or") => BoolOp::Or,
                Some(_) => BoolOp::Xor,
                None => BoolOp::None,
            };
            let ftz = m.take("ftz");
            let ty = m.ty()?;
            if ty.packed().is_some() {
                return Err("packed comparisons are not supported".into());
            }
            // `p|q, a, b` and, combining with a predicate (`.and` ...), `, {!}c`.
            let (p, q) = ctx.dst_pair(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], ty)?);
            let (c, cneg) = if bop != BoolOp::None {
                ctx.pred(&ops[3])?
            } else {
                (S_ZERO, false)
            };
            Op::Setp {
                cmp,
                ty,
                ftz,
                p,
                q,
                a,
                b,
                bop,
                c,
                cneg,
            }
        }
        "selp" => {
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            Op::Selp {
                mask: ty.mask(),
                d,
                a: ctx.src(&ops[1], ty)?,
                b: ctx.src(&ops[2], ty)?,
                p: ctx.src(&ops[3], Ty::Pred)?,
            }
        }
        "bfe" => {
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            Op::Bfe {
                ty,
                d,
                a: ctx.src(&ops[1], ty)?,
                b: ctx.src(&ops[2], Ty::U32)?,
                c: ctx.src(&ops[3], Ty::U32)?,
            }
        }
        "bfi" => {
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], ty)?);
            Op::Bfi {
                ty,
                d,
                a,
                b,
                c: ctx.src(&ops[3], Ty::U32)?,
                e: ctx.src(&ops[4], Ty::U32)?,
            }
        }
        "prmt" => {
            m.ty()?;
            let d = ctx.dst(&ops[0])?;
            Op::Prmt {
                d,
                a: ctx.src(&ops[1], Ty::B32)?,
                b: ctx.src(&ops[2], Ty::B32)?,
                c: ctx.src(&ops[3], Ty::B32)?,
            }
        }
        "lop3" => {
            m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let (a, b, c) = (
                ctx.src(&ops[1], Ty::B32)?,
                ctx.src(&ops[2], Ty::B32)?,
                ctx.src(&ops[3], Ty::B32)?,
            );
            let Operand::Imm(l) = &ops[4] else {
                return Err("lop3 needs an immediate table".into());
            };
            Op::Lop3 {
                d,
                a,
                b,
                c,
                lut: parse_int(l).ok_or("bad lop3 table")? as u8,
            }
        }
        "shf" => {
            let left = match m.take_one(&["l", "r"]) {
                Some("l") => true,
                Some(_) => false,
                None => return Err("shf needs .l or .r".into()),
            };
            let clamp = match m.take_one(&["clamp", "wrap"]) {
                Some("clamp") => true,
                Some(_) => false,
                None => return Err("shf needs .clamp or .wrap".into()),
            };
            m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let (a, b, c) = (
                ctx.src(&ops[1], Ty::B32)?,
                ctx.src(&ops[2], Ty::B32)?,
                ctx.src(&ops[3], Ty::U32)?,
            );
            Op::Shf {
                left,
                clamp,
                d,
                a,
                b,
                c,
            }
        }
        "dp4a" | "dp2a" => {
            let two = base == "dp2a";
            let hi = two && m.take("hi");
            if two && !hi && !m.take("lo") {
                return Err("dp2a needs .lo or .hi".into());
            }
            let tys = m.types();
            let [at, bt] = tys[..] else {
                return Err("expected two types".into());
            };
            if !matches!(at, Ty::U32 | Ty::S32) || !matches!(bt, Ty::U32 | Ty::S32) {
                return Err("dp4a/dp2a take .u32/.s32 types".into());
            }
            let d = ctx.dst(&ops[0])?;
            let (a, b, c) = (
                ctx.src(&ops[1], Ty::B32)?,
                ctx.src(&ops[2], Ty::B32)?,
                ctx.src(&ops[3], Ty::B32)?,
            );
            Op::Dot {
                two,
                hi,
                a_signed: at == Ty::S32,
                b_signed: bt == Ty::S32,
                d,
                a,
                b,
                c,
            }
        }
        "slct" => {
            m.take("ftz");
            let tys = m.types();
            let [dt, ct] = tys[..] else {
                return Err("expected two types".into());
            };
            if !matches!(ct, Ty::S32 | Ty::F32) {
                return Err("slct compares an .s32 or .f32 operand".into());
            }
            let d = ctx.dst(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], dt)?, ctx.src(&ops[2], dt)?);
            Op::Slct {
                float: ct == Ty::F32,
                mask: dt.mask(),
                d,
                a,
                b,
                c: ctx.src(&ops[3], ct)?,
            }
        }
        "testp" => {
            let kind = match m.take_one(&[
                "finite",
                "infinite",
                "number",
                "notanumber",
                "normal",
                "subnormal",
            ]) {
                Some("finite") => TestKind::Finite,
                Some("infinite") => TestKind::Infinite,
                Some("number") => TestKind::Number,
                Some("notanumber") => TestKind::NotANumber,
                Some("normal") => TestKind::Normal,
                Some(_) => TestKind::Subnormal,
                None => return Err("missing testp class".into()),
            };
            let ty = m.ty()?;
            if !matches!(ty, Ty::F32 | Ty::F64) {
                return Err("testp takes .f32 or .f64".into());
            }
            Op::Testp {
                kind,
                ty,
                p: ctx.dst(&ops[0])?,
                a: ctx.src(&ops[1], ty)?,
            }
        }
        other => return Err(format!("`{other}` is not an arithmetic instruction")),
    })
}

/// A float operation's rounding mode, `.ftz` and `.sat`; `.approx` and `.full` select no other
/// result in the emulator.
fn fmode(m: &mut Mods<'_>) -> FMode {
    let rnd = m.rnd();
    let ftz = m.take("ftz");
    let sat = m.take("sat");
    m.take("approx");
    m.take("full");
    FMode { rnd, ftz, sat }
}

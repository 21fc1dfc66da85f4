//! The decode rule of the memory family: loads, stores, atomics and reductions. The state
//! space and vector width come from the modifiers; cache, ordering and scope qualifiers do not
//! change results in the emulator (an acquire / release access only marks itself ordered).

use super::inst::{Ctx, Mods};
use super::*;

/// Decodes one memory instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "ld" | "ldu" => {
            let ordered = ordering_of(m);
            let (space, n) = access_of(m);
            let ty = m.ty()?;
            let (d, count) = ctx.vec_dst(&ops[0])?;
            if count != n {
                return Err("vector width does not match the destination".into());
            }
            let (b, off, _) = ctx.addr(&ops[1])?;
            Op::Ld {
                space,
                ty,
                n,
                ordered,
                d,
                base: b,
                off,
            }
        }
        "st" => {
            let ordered = ordering_of(m);
            let (space, n) = access_of(m);
            let ty = m.ty()?;
            let (b, off, _) = ctx.addr(&ops[0])?;
            let (s, count) = ctx.vec_src(&ops[1], ty)?;
            if count != n {
                return Err("vector width does not match the source".into());
            }
            Op::St {
                space,
                ty,
                n,
                ordered,
                s,
                base: b,
                off,
            }
        }
        "atom" | "red" => {
            let space = space_of(m);
            m.ignore_hints();
            let op = atom_op(m)?;
            let noftz = m.take("noftz");
            let ty = m.ty()?;
            let half = matches!(ty, Ty::F16 | Ty::BF16 | Ty::F16x2 | Ty::BF16x2);
            if ty.is_float() && !(op == AtomOp::Add && (half == noftz)) {
                return Err("among float atomics only add on f32/f64 and add.noftz on f16, bf16, f16x2 and bf16x2 are supported".into());
            }
            if noftz && !ty.is_float() {
                return Err(".noftz on an integer atomic".into());
            }
            // `atom d, [a], b{, c}`; a reduction `red [a], b` has no destination.
            let (d, rest) = if base == "atom" {
                (ctx.dst(&ops[0])?, &ops[1..])
            } else {
                (S_SINK, ops)
            };
            let (b0, off, _) = ctx.addr(&rest[0])?;
            let b = ctx.src(&rest[1], ty)?;
            let c = if op == AtomOp::Cas {
                ctx.src(&rest[2], ty)?
            } else {
                S_ZERO
            };
            Op::Atom {
                space,
                op,
                ty,
                d,
                base: b0,
                off,
                b,
                c,
            }
        }
        other => return Err(format!("`{other}` is not a memory instruction")),
    })
}

/// The state space and the vector width (`.v2`, `.v4`, else 1) of a load or store; its cache
/// hints are ignored.
fn access_of(m: &mut Mods<'_>) -> (MemSpace, u8) {
    let space = space_of(m);
    m.ignore_hints();
    let n = if m.take("v2") {
        2
    } else if m.take("v4") {
        4
    } else {
        1
    };
    (space, n)
}

/// Whether a load or store orders other accesses (`.acquire`, `.release`, `.sc`); `.relaxed`
/// and `.volatile` accesses are plain ones in the emulator.
fn ordering_of(m: &Mods<'_>) -> bool {
    m.parts
        .iter()
        .any(|p| matches!(*p, "acquire" | "release" | "sc"))
}

pub(super) fn space_of(m: &mut Mods<'_>) -> MemSpace {
    if m.take("global") {
        MemSpace::Global
    } else if m.take("shared") || m.take("shared::cta") {
        MemSpace::Shared
    } else if m.take("local") {
        MemSpace::Local
    } else if m.take("param") {
        MemSpace::Param
    } else if m.take("const") {
        MemSpace::Global
    } else {
        MemSpace::Generic
    }
}
pub(super) fn atom_op(m: &mut Mods<'_>) -> Result<AtomOp, String> {
    Ok(
        match m.take_one(&[
            "add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor",
        ]) {
            Some("add") => AtomOp::Add,
            Some("min") => AtomOp::Min,
            Some("max") => AtomOp::Max,
            Some("inc") => AtomOp::Inc,
            Some("dec") => AtomOp::Dec,
            Some("cas") => AtomOp::Cas,
            Some("exch") => AtomOp::Exch,
            Some("and") => AtomOp::And,
            Some("or") => AtomOp::Or,
            Some(_) => AtomOp::Xor,
            None => return Err("missing atomic operation".into()),
        },
    )
}

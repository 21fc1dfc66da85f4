//! The decode rule of moves and conversions: `mov` (including packing into and unpacking from
//! vectors), `cvt` (integer, float, packed pairs, tf32) and `cvta`.

use super::inst::{Ctx, Mods};
use super::memory::space_of;
use super::*;

/// Decodes one conversion instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "mov" => {
            let ty = m.ty()?;
            match (&ops[0], &ops[1]) {
                (Operand::Vector(v), a) => {
                    let (d, n) = ctx.vec_dst(&Operand::Vector(v.clone()))?;
                    Op::Unpack {
                        d,
                        n,
                        bits: (ty.bits() / n as u32) as u8,
                        a: ctx.src(a, ty)?,
                    }
                }
                (d, Operand::Vector(v)) => {
                    let n = v.len() as u32;
                    let (parts, _) = ctx.vec_src(&Operand::Vector(v.clone()), Ty::B64)?;
                    Op::Pack {
                        d: ctx.dst(d)?,
                        parts,
                        n: n as u8,
                        bits: (ty.bits() / n) as u8,
                    }
                }
                (d, a) => Op::Mov {
                    d: ctx.dst(d)?,
                    a: ctx.src(a, ty)?,
                    mask: if ty == Ty::Pred { 1 } else { ty.mask() },
                },
            }
        }
        "cvta" => {
            let to = m.take("to");
            let space = space_of(m);
            let ty = m.ty()?;
            Op::Cvta {
                to,
                space,
                d: ctx.dst(&ops[0])?,
                a: ctx.src(&ops[1], ty)?,
                mask: ty.mask(),
            }
        }
        "cvt" => {
            if m.take("tf32") {
                if !m.take("rna") || !m.take("f32") {
                    return Err("only cvt.rna.tf32.f32 is supported among tf32 conversions".into());
                }
                return Ok(Op::Tf32 {
                    d: ctx.dst(&ops[0])?,
                    a: ctx.src(&ops[1], Ty::F32)?,
                });
            }
            // Float -> float conversions round with `.rn/.rz/.rm/.rp`; the integer-rounding
            // forms (`.rni` ...) round to an integral value in a float type.
            let irnd = m.take_one(&["rni", "rzi", "rmi", "rpi"]);
            let mut rnd = m.rnd();
            if let Some(r) = irnd {
                rnd = match r {
                    "rzi" => Rnd::Rz,
                    "rmi" => Rnd::Rm,
                    "rpi" => Rnd::Rp,
                    _ => Rnd::Rn,
                };
            }
            let ftz = m.take("ftz");
            let sat = m.take("sat");
            let tys = m.types();
            let [dty, sty] = tys[..] else {
                return Err("expected two types".into());
            };
            if dty.packed().is_some() && sty == Ty::F32 {
                // `cvt.rn.f16x2.f32 d, hi, lo`: two f32 into one packed pair, the first source
                // in the upper half.
                let d = ctx.dst(&ops[0])?;
                Op::CvtPack {
                    dty,
                    rnd,
                    d,
                    a: ctx.src(&ops[1], sty)?,
                    b: ctx.src(&ops[2], sty)?,
                }
            } else {
                if dty.packed().is_some()
                    || sty.packed().is_some()
                    || dty == Ty::Pred
                    || sty == Ty::Pred
                {
                    return Err("unsupported conversion".into());
                }
                Op::Cvt {
                    dty,
                    sty,
                    rnd,
                    int_rnd: irnd.is_some(),
                    sat,
                    ftz,
                    d: ctx.dst(&ops[0])?,
                    a: ctx.src(&ops[1], sty)?,
                }
            }
        }
        other => return Err(format!("`{other}` is not a conversion instruction")),
    })
}

//! The decode rule of tensor-core and asynchronous-copy instructions: `mma.sync` (fragment
//! layouts resolved after decoding, see `tensor.rs`), `ldmatrix`, and `cp.async` with its
//! `commit_group` / `wait_group` / `wait_all`.

use super::inst::{Ctx, Mods};
use super::*;

/// Decodes one tensor instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "mma" => {
            if !(m.take("sync") && m.take("aligned") && m.take("row") && m.take("col")) {
                return Err("only mma.sync.aligned.<shape>.row.col is supported".into());
            }
            let k = match m.take_one(&["m16n8k4", "m16n8k8", "m16n8k16", "m16n8k32"]) {
                Some(s) => s[6..].parse::<usize>().map_err(|_| "bad mma shape")?,
                None => return Err("unsupported mma shape (m16n8k4/8/16/32 are supported)".into()),
            };
            let tys: Vec<&str> = m
                .parts
                .iter()
                .zip(&m.used)
                .filter(|(_, u)| !**u)
                .map(|(p, _)| *p)
                .collect();
            let [dty, aty, bty, cty] = tys[..] else {
                return Err("mma needs four types".into());
            };
            let kind = match (aty, bty) {
                ("tf32", "tf32") => MmaKind::Tf32,
                ("f16", "f16") => MmaKind::F16,
                ("bf16", "bf16") => MmaKind::BF16,
                ("s8" | "u8", "s8" | "u8") => MmaKind::Int8,
                _ => return Err(format!("unsupported mma operand types .{aty}.{bty}")),
            };
            let acc_ok = if kind == MmaKind::Int8 {
                dty == "s32" && cty == "s32"
            } else {
                dty == "f32" && cty == "f32"
            };
            if !acc_ok {
                return Err(format!("unsupported mma accumulator types .{dty}/.{cty}"));
            }
            m.parts.clear();
            m.used.clear();
            let (na, nb) = operand_regs(k, kind).ok_or("unsupported mma shape for these types")?;
            let (d, nd) = ctx.vec_dst(&ops[0])?;
            let (a, ca) = ctx.vec_src(&ops[1], Ty::B32)?;
            let (bv, cb) = ctx.vec_src(&ops[2], Ty::B32)?;
            let (c, nc) = ctx.vec_src(&ops[3], Ty::B32)?;
            if nd != 4 || nc != 4 || ca as usize != na || cb as usize != nb {
                return Err(format!("mma operand counts must be 4, {na}, {nb}, 4"));
            }
            ctx.mmas.push(MmaInst {
                k,
                kind,
                a_signed: aty == "s8",
                b_signed: bty == "s8",
                d,
                a,
                na,
                b: [bv[0], bv[1]],
                nb,
                c,
            });
            Op::Mma {
                idx: ctx.mmas.len() as u32 - 1,
                mask: ctx.konst(0xffff_ffff),
            }
        }
        "ldmatrix" => {
            if !(m.take("sync") && m.take("aligned") && m.take("m8n8") && m.take("b16")) {
                return Err("only ldmatrix.sync.aligned.m8n8.xN.shared.b16 is supported".into());
            }
            let n = match m.take_one(&["x1", "x2", "x4"]) {
                Some("x1") => 1,
                Some("x2") => 2,
                Some(_) => 4,
                None => return Err("ldmatrix needs .x1, .x2 or .x4".into()),
            };
            let trans = m.take("trans");
            if !(m.take("shared") || m.take("shared::cta")) {
                return Err("ldmatrix reads shared memory only".into());
            }
            let (d, nd) = ctx.vec_dst(&ops[0])?;
            if nd != n {
                return Err("ldmatrix destination count must match .xN".into());
            }
            let (base, off, _) = ctx.addr(&ops[1])?;
            Op::Ldmatrix {
                n,
                trans,
                d,
                base,
                off,
                mask: ctx.konst(0xffff_ffff),
            }
        }
        "cp" => {
            if !m.take("async") {
                return Err("only cp.async is supported".into());
            }
            // The copies of a thread are queued (`exec/mem.rs`): `commit_group` closes its open
            // group, `wait_group N` completes all but the N most recent committed groups, and
            // `wait_all` commits and completes everything.
            if m.take("commit_group") {
                Op::CpAsyncCommit
            } else if m.take("wait_all") {
                Op::CpAsyncWait { n: 0, all: true }
            } else if m.take("wait_group") {
                let Operand::Imm(n) = &ops[0] else {
                    return Err("cp.async.wait_group needs an immediate group count".into());
                };
                let n = parse_int(n)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or("bad cp.async.wait_group count")?;
                Op::CpAsyncWait { n, all: false }
            } else {
                let cg = m.take("cg");
                if !cg && !m.take("ca") {
                    return Err("cp.async needs .ca or .cg".into());
                }
                if !(m.take("shared") || m.take("shared::cta")) || !m.take("global") {
                    return Err("only cp.async.{ca,cg}.shared.global is supported".into());
                }
                m.ignore_hints();
                let (dst, dst_off, _) = ctx.addr(&ops[0])?;
                let (src, src_off, _) = ctx.addr(&ops[1])?;
                let Operand::Imm(sz) = &ops[2] else {
                    return Err("cp.async size must be an immediate".into());
                };
                let size = parse_int(sz).ok_or("bad cp.async size")? as u8;
                if !matches!(size, 4 | 8 | 16) || (cg && size != 16) {
                    return Err(format!("cp.async size {size} is not allowed"));
                }
                let src_size = if ops.len() == 4 {
                    ctx.src(&ops[3], Ty::U32)?
                } else {
                    ctx.konst(size as u64)
                };
                Op::CpAsync {
                    dst,
                    dst_off,
                    src,
                    src_off,
                    size,
                    src_size,
                }
            }
        }
        other => return Err(format!("`{other}` is not a tensor instruction")),
    })
}

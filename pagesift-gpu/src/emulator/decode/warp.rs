//! The decode rule of warp-wide operations: `shfl.sync`, `vote.sync`, `redux.sync`,
//! `elect.sync`, `activemask` and `bar.warp.sync`.

use super::inst::{Ctx, Mods};
use super::memory::atom_op;
use super::*;

/// Decodes one warp instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "shfl" => {
            if !m.take("sync") {
                return Err("shfl without .sync is not supported".into());
            }
            let mode = match m.take_one(&["up", "down", "bfly", "idx"]) {
                Some("up") => ShflMode::Up,
                Some("down") => ShflMode::Down,
                Some("bfly") => ShflMode::Bfly,
                Some(_) => ShflMode::Idx,
                None => return Err("missing shfl mode".into()),
            };
            m.ty()?;
            let (d, p) = ctx.dst_pair(&ops[0])?;
            Op::Shfl {
                mode,
                d,
                p,
                a: ctx.src(&ops[1], Ty::B32)?,
                b: ctx.src(&ops[2], Ty::B32)?,
                c: ctx.src(&ops[3], Ty::B32)?,
                mask: ctx.src(&ops[4], Ty::B32)?,
            }
        }
        "vote" => {
            if !m.take("sync") {
                return Err("vote without .sync is not supported".into());
            }
            let mode = match m.take_one(&["all", "any", "uni", "ballot"]) {
                Some("all") => VoteMode::All,
                Some("any") => VoteMode::Any,
                Some("uni") => VoteMode::Uni,
                Some(_) => VoteMode::Ballot,
                None => return Err("missing vote mode".into()),
            };
            m.ty()?;
            let d = ctx.dst(&ops[0])?;
            let (a, neg) = ctx.pred(&ops[1])?;
            Op::Vote {
                mode,
                d,
                a,
                neg,
                mask: ctx.src(&ops[2], Ty::B32)?,
            }
        }
        "elect" => {
            if !m.take("sync") {
                return Err("elect without .sync".into());
            }
            let (d, p) = ctx.dst_pair(&ops[0])?;
            Op::Elect {
                d,
                p,
                mask: ctx.src(&ops[1], Ty::B32)?,
            }
        }
        "redux" => {
            if !m.take("sync") {
                return Err("redux without .sync".into());
            }
            let op = atom_op(m)?;
            let ty = m.ty()?;
            let d = ctx.dst(&ops[0])?;
            Op::Redux {
                op,
                ty,
                d,
                a: ctx.src(&ops[1], ty)?,
                mask: ctx.src(&ops[2], Ty::B32)?,
            }
        }
        "activemask" => {
            m.ty()?;
            Op::Activemask {
                d: ctx.dst(&ops[0])?,
            }
        }
        "bar" => {
            if !(m.take("warp") && m.take("sync")) {
                return Err("only bar.warp.sync is a warp barrier".into());
            }
            Op::BarWarp {
                mask: ctx.src(&ops[0], Ty::B32)?,
            }
        }
        other => return Err(format!("`{other}` is not a warp instruction")),
    })
}

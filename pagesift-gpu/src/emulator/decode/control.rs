//! The decode rule of control flow and synchronization: branches, returns, traps, CTA
//! barriers (`bar.sync`, `bar.arrive`, `bar.red`), fences (`fence.proxy.async` among them),
//! and hints that are no-ops here (`nanosleep`, `prefetch`).

use super::inst::{Ctx, Mods};
use super::*;

/// Decodes one control instruction (opcode `base`, its modifiers `m`, operands `ops` whose
/// count its table row has checked).
pub(super) fn decode(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    Ok(match base {
        "bra" => {
            m.take("uni");
            let Operand::Name(l) = &ops[0] else {
                return Err("branch target must be a label".into());
            };
            Op::Bra {
                target: *ctx.labels.get(l).ok_or(format!("unknown label `{l}`"))?,
            }
        }
        "ret" | "exit" => {
            m.take("uni");
            Op::Exit
        }
        "trap" | "brkpt" => Op::Trap,
        // Every ordering of memory is already sequential in the emulator; the table names the
        // fence and hint forms that exist.
        "fence" if m.take("proxy") => {
            if !(m.take("async") && m.take("shared::cta")) {
                return Err("only fence.proxy.async.shared::cta is supported".into());
            }
            Op::ProxyFence
        }
        "setmaxnreg" => {
            let inc = m.take_one(&["inc", "dec"]);
            if inc.is_none() || !(m.take("sync") && m.take("aligned")) {
                return Err("setmaxnreg needs .inc or .dec and .sync.aligned".into());
            }
            m.ty()?;
            match &ops[0] {
                Operand::Imm(v) => parse_int(v).and_then(|n| u32::try_from(n).ok()),
                _ => None,
            }
            .filter(|n| (24..=256).contains(n) && n % 8 == 0)
            .ok_or(format!(
                "setmaxnreg: the register count must be an immediate multiple of 8 in 24..=256, not {:?}",
                ops[0]
            ))?;
            Op::SetMaxNReg {
                mask: ctx.konst(0xffff_ffff),
            }
        }
        "membar" | "fence" => {
            m.parts.clear();
            m.used.clear();
            Op::Fence
        }
        "nanosleep" | "prefetch" | "prefetchu" => {
            m.parts.clear();
            m.used.clear();
            Op::Nop
        }
        "bar" | "barrier" => {
            m.ignore_hints();
            if m.take("arrive") {
                m.take("cta");
                let id = ctx.src(&ops[0], Ty::U32)?;
                ctx.src(&ops[1], Ty::U32)?;
                Op::BarArrive { id }
            } else if m.take("red") {
                m.take("cta");
                let red = match m.take_one(&["popc", "and", "or"]) {
                    Some("popc") => BarRed::Popc,
                    Some("and") => BarRed::And,
                    Some(_) => BarRed::Or,
                    None => return Err("bar.red needs .popc, .and or .or".into()),
                };
                let ty = m.ty()?;
                if (red == BarRed::Popc) != (ty == Ty::U32)
                    || (red != BarRed::Popc && ty != Ty::Pred)
                {
                    return Err("bar.red.popc takes .u32, bar.red.and/.or take .pred".into());
                }
                // `d, id{, count}, {!}p`
                let d = ctx.dst(&ops[0])?;
                let id = ctx.src(&ops[1], Ty::U32)?;
                let count = if ops.len() == 4 {
                    ctx.src(&ops[2], Ty::U32)?
                } else {
                    S_SINK
                };
                let (p, pneg) = ctx.pred(&ops[ops.len() - 1])?;
                Op::Bar {
                    id,
                    count,
                    red,
                    d,
                    p,
                    pneg,
                }
            } else {
                if !m.take("sync") {
                    return Err("only bar.sync, bar.arrive and bar.red are supported".into());
                }
                m.take("cta");
                let id = ctx.src(&ops[0], Ty::U32)?;
                let count = if ops.len() == 2 {
                    ctx.src(&ops[1], Ty::U32)?
                } else {
                    S_SINK
                };
                Op::Bar {
                    id,
                    count,
                    red: BarRed::None,
                    d: S_SINK,
                    p: S_ZERO,
                    pneg: false,
                }
            }
        }
        other => return Err(format!("`{other}` is not a control instruction")),
    })
}

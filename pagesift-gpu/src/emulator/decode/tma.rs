//! The decode rule of `mbarrier` (`init`, `arrive`, `arrive.expect_tx`, `try_wait.parity`), of
//! the tensor memory accelerator's `cp.async.bulk.tensor` and of `prefetch.tensormap`. Their
//! execution is in `exec/tma.rs`.

use super::super::exec::{LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW};
use super::inst::{Ctx, Mods};
use super::*;

/// A shared-memory address operand: a register, a shared symbol, with an offset.
fn shared_addr(ctx: &mut Ctx<'_>, op: &Operand) -> Result<AddrSlot, String> {
    match ctx.addr(op)? {
        (base, off, None | Some(Space::Shared)) => Ok((base, off)),
        (_, _, Some(space)) => Err(format!(
            "expected a shared-memory address, found a symbol of the {space:?} space"
        )),
    }
}

/// A generic address operand: a register, or a symbol of any space at its generic address
/// (a kernel parameter's is in the parameter window).
fn generic_addr(ctx: &mut Ctx<'_>, op: &Operand) -> Result<AddrSlot, String> {
    let (base, off, space) = ctx.addr(op)?;
    let window = match space {
        Some(Space::Param) => PARAM_WINDOW,
        Some(Space::Shared) => SHARED_WINDOW,
        Some(Space::Local) => LOCAL_WINDOW,
        _ => 0,
    };
    Ok((base, off.wrapping_add(window as i64)))
}

/// `mbarrier.<op>.shared::cta.b64` (opcode base `mbarrier`).
pub(super) fn decode_mbarrier(
    ctx: &mut Ctx<'_>,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    if !(m.take("shared::cta") && m.take("b64")) {
        return Err("only mbarrier.<op>.shared::cta.b64 is supported".into());
    }
    if m.take("init") {
        let (base, off) = shared_addr(ctx, &ops[0])?;
        let count = ctx.src(&ops[1], Ty::U32)?;
        return Ok(Op::MbarInit { base, off, count });
    }
    if m.take("arrive") {
        let expect_tx = m.take("expect_tx");
        let d = ctx.dst(&ops[0])?;
        let (base, off) = shared_addr(ctx, &ops[1])?;
        let tx = match (expect_tx, ops.get(2)) {
            (true, Some(op)) => ctx.src(op, Ty::U32)?,
            (false, None) => S_ZERO,
            _ => return Err("mbarrier.arrive.expect_tx takes a byte count, arrive none".into()),
        };
        return Ok(Op::MbarArrive { d, base, off, tx });
    }
    if m.take("try_wait") && m.take("parity") {
        let p = ctx.dst(&ops[0])?;
        let (base, off) = shared_addr(ctx, &ops[1])?;
        let parity = ctx.src(&ops[2], Ty::U32)?;
        return Ok(Op::MbarTryWait {
            p,
            base,
            off,
            parity,
        });
    }
    Err("only mbarrier.init, arrive, arrive.expect_tx and try_wait.parity are supported".into())
}

/// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [a]` (opcode base `cp.async.mbarrier`):
/// one arrival on the `mbarrier` once the thread's `cp.async` copies issued before it have
/// landed, counted among the arrivals its phase expects (`.noinc`).
pub(super) fn decode_cp_async_arrive(
    ctx: &mut Ctx<'_>,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    if !(m.take("arrive") && m.take("noinc") && m.take("shared::cta") && m.take("b64")) {
        return Err("only cp.async.mbarrier.arrive.noinc.shared::cta.b64 is supported".into());
    }
    let (base, off) = shared_addr(ctx, &ops[0])?;
    Ok(Op::CpAsyncArrive { base, off })
}

/// `cp.async.bulk.tensor.<n>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
/// [dst], [map, {c0, ..}], [mbar]`, `cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group
/// [map, {c0, ..}], [src]`, `cp.async.bulk.commit_group` and `cp.async.bulk.wait_group{.read} n`
/// (the `cp.async.bulk` already taken).
pub(super) fn decode_tma(
    ctx: &mut Ctx<'_>,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    if m.take("commit_group") {
        return Ok(Op::BulkCommit);
    }
    if m.take("wait_group") {
        m.take("read");
        let n = match &ops[0] {
            Operand::Imm(n) => parse_int(n).and_then(|n| u32::try_from(n).ok()),
            _ => None,
        }
        .ok_or("cp.async.bulk.wait_group needs an immediate group count")?;
        return Ok(Op::BulkWait { n });
    }
    let rank = ["1d", "2d", "3d", "4d", "5d"]
        .iter()
        .position(|d| m.take(d))
        .map(|i| i + 1);
    let store = m.take("shared::cta");
    let form = m.take("tensor")
        && m.take("global")
        && m.take("tile")
        && if store {
            m.take("bulk_group")
        } else {
            m.take("shared::cluster") && m.take("mbarrier::complete_tx::bytes")
        };
    let (Some(rank), true) = (rank, form) else {
        return Err("only cp.async.bulk.tensor.<n>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes and cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group are supported".into());
    };
    let (smem_op, tensor_op) = if store {
        (&ops[1], &ops[0])
    } else {
        (&ops[0], &ops[1])
    };
    let smem = shared_addr(ctx, smem_op)?;
    let Operand::Tensor { map, coords } = tensor_op else {
        return Err("expected a tensor map and coordinates `[map, {c0, ..}]`".into());
    };
    if coords.len() != rank {
        return Err(format!(
            "a {rank}d copy takes {rank} coordinates, found {}",
            coords.len()
        ));
    }
    let map = generic_addr(
        ctx,
        &Operand::Addr {
            base: Some(map.clone()),
            offset: 0,
        },
    )?;
    let mut c = [S_ZERO; 5];
    for (slot, op) in c.iter_mut().zip(coords) {
        *slot = ctx.src(op, Ty::S32)?;
    }
    let mbar = if store {
        (S_ZERO, 0)
    } else {
        shared_addr(ctx, &ops[2])?
    };
    ctx.tmas.push(TmaInst {
        rank,
        store,
        smem,
        map,
        coords: c,
        mbar,
    });
    let idx = ctx.tmas.len() as u32 - 1;
    Ok(if store {
        Op::TmaStore { idx }
    } else {
        Op::Tma { idx }
    })
}

/// `prefetch.tensormap [a]`.
pub(super) fn decode_prefetch(
    ctx: &mut Ctx<'_>,
    m: &mut Mods<'_>,
    ops: &[Operand],
) -> Result<Op, String> {
    if !m.take("tensormap") {
        return Err("only prefetch.tensormap is supported".into());
    }
    let (base, off) = generic_addr(ctx, &ops[0])?;
    Ok(Op::PrefetchTensormap { base, off })
}

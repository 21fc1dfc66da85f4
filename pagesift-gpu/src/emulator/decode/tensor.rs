//! The decode rule of tensor-core and asynchronous-copy instructions: `mma.sync` (fragment
//! layouts resolved after decoding, see `tensor.rs`), `ldmatrix`, `cp.async` with its
//! `commit_group` / `wait_group` / `wait_all`, and `wgmma` (`mma_async`, `fence`,
//! `commit_group`, `wait_group`), with [`accumulator_uses`], which finds the other instructions
//! that name a `wgmma` accumulator register. `mbarrier`, `cp.async.bulk.tensor` and
//! `prefetch.tensormap` are decoded by `tma.rs`.

use super::inst::{Ctx, Mods};
use super::tma;
use super::*;
use pagesift_ptx_isa::{self as isa, Role};

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
        "stmatrix" => {
            if !(m.take("sync") && m.take("aligned") && m.take("m8n8") && m.take("b16")) {
                return Err("only stmatrix.sync.aligned.m8n8.xN.shared.b16 is supported".into());
            }
            let n = match m.take_one(&["x1", "x2", "x4"]) {
                Some("x1") => 1,
                Some("x2") => 2,
                Some(_) => 4,
                None => return Err("stmatrix needs .x1, .x2 or .x4".into()),
            };
            let trans = m.take("trans");
            if !(m.take("shared") || m.take("shared::cta")) {
                return Err("stmatrix writes shared memory only".into());
            }
            let (base, off, _) = ctx.addr(&ops[0])?;
            let (s, ns) = ctx.vec_src(&ops[1], Ty::B32)?;
            if ns != n {
                return Err("stmatrix source count must match .xN".into());
            }
            Op::Stmatrix {
                n,
                trans,
                s,
                base,
                off,
                mask: ctx.konst(0xffff_ffff),
            }
        }
        "mbarrier" => tma::decode_mbarrier(ctx, m, ops)?,
        "prefetch" => tma::decode_prefetch(ctx, m, ops)?,
        "cp" => {
            if !m.take("async") {
                return Err("only cp.async is supported".into());
            }
            if m.take("bulk") {
                return tma::decode_tma(ctx, m, ops);
            }
            if m.take("mbarrier") {
                return tma::decode_cp_async_arrive(ctx, m, ops);
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
        "wgmma" => decode_wgmma(ctx, m, ops)?,
        other => return Err(format!("`{other}` is not a tensor instruction")),
    })
}

/// An immediate operand of `wgmma` as an integer.
fn wgmma_imm(op: &Operand, what: &str) -> Result<i128, String> {
    match op {
        Operand::Imm(v) => parse_int(v).ok_or(format!("bad {what} `{v}`")),
        other => Err(format!("{what} must be an immediate, found {other:?}")),
    }
}

/// `wgmma.{fence|commit_group}.sync.aligned`, `wgmma.wait_group.sync.aligned N` and
/// `wgmma.mma_async.sync.aligned.m64n<n>k<k>.f32.<t>.<t> d, a-desc, b-desc, scale-d,
/// imm-scale-a, imm-scale-b{, imm-trans-a, imm-trans-b}`, or with A in registers
/// `d, {a0, a1, a2, a3}, b-desc, scale-d, imm-scale-a, imm-scale-b{, imm-trans-b}`.
fn decode_wgmma(ctx: &mut Ctx<'_>, m: &mut Mods<'_>, ops: &[Operand]) -> Result<Op, String> {
    if !(m.take("sync") && m.take("aligned")) {
        return Err("wgmma needs .sync.aligned".into());
    }
    let mask = ctx.konst(0xffff_ffff);
    if m.take("fence") {
        return Ok(Op::WgmmaFence { mask });
    }
    if m.take("commit_group") {
        return Ok(Op::WgmmaCommit { mask });
    }
    if m.take("wait_group") {
        let n = u32::try_from(wgmma_imm(&ops[0], "wgmma.wait_group count")?)
            .map_err(|_| "bad wgmma.wait_group count")?;
        return Ok(Op::WgmmaWait { n, mask });
    }
    if !m.take("mma_async") {
        return Err(
            "only wgmma.mma_async, fence, commit_group and wait_group are supported".into(),
        );
    }
    let shape = m
        .parts
        .iter()
        .copied()
        .find(|p| p.starts_with("m64n"))
        .ok_or("wgmma.mma_async needs an m64n<n>k<k> shape")?;
    m.take(shape);
    let (n, k) = shape[4..]
        .split_once('k')
        .and_then(|(n, k)| Some((n.parse::<usize>().ok()?, k.parse::<usize>().ok()?)))
        .filter(|&(n, _)| n % 8 == 0 && (8..=256).contains(&n))
        .ok_or(format!("unsupported wgmma shape .{shape}"))?;
    let tys: Vec<&str> = m
        .parts
        .iter()
        .zip(&m.used)
        .filter(|(_, u)| !**u)
        .map(|(p, _)| *p)
        .collect();
    let kind = match tys[..] {
        ["f32", "f16", "f16"] => MmaKind::F16,
        ["f32", "bf16", "bf16"] => MmaKind::BF16,
        ["f32", "tf32", "tf32"] => MmaKind::Tf32,
        _ => {
            return Err(format!(
                "unsupported wgmma.mma_async types .{} (.f32.f16.f16, .f32.bf16.bf16 and .f32.tf32.tf32 are supported)",
                tys.join(".")
            ))
        }
    };
    m.parts.clear();
    m.used.clear();
    let a_regs = matches!(&ops.get(1), Some(Operand::Vector(_)));
    let (want_k, n_ops) = match (kind == MmaKind::Tf32, a_regs) {
        (true, _) => (8, 6),
        (false, false) => (16, 8),
        (false, true) => (16, 7),
    };
    if k != want_k {
        return Err(format!("wgmma.mma_async with these types needs k{want_k}"));
    }
    if ops.len() != n_ops {
        return Err(format!(
            "wgmma.mma_async with these types takes {n_ops} operands"
        ));
    }
    let Operand::Vector(regs) = &ops[0] else {
        return Err("the wgmma.mma_async accumulators must be a vector {d0, ...}".into());
    };
    if regs.len() != n / 2 {
        return Err(format!(
            "m64n{n} needs {} accumulator registers, found {}",
            n / 2,
            regs.len()
        ));
    }
    let mut d = Vec::with_capacity(regs.len());
    for r in regs {
        match ctx.dst(r)? {
            S_SINK => return Err("a wgmma.mma_async accumulator cannot be `_`".into()),
            s => d.push(s),
        }
    }
    let a = match &ops[1] {
        Operand::Vector(v) if v.len() == 4 => {
            let mut regs = [S_SINK; 4];
            for (r, op) in regs.iter_mut().zip(v) {
                *r = ctx.src(op, Ty::B32)?;
            }
            WgmmaA::Regs(regs)
        }
        Operand::Vector(v) => {
            return Err(format!(
                "wgmma.mma_async with A in registers takes 4 .b32 registers of A, found {}",
                v.len()
            ))
        }
        op => WgmmaA::Desc(ctx.src(op, Ty::B64)?),
    };
    let b_desc = ctx.src(&ops[2], Ty::B64)?;
    let (scale_d, scale_d_neg) = ctx.pred(&ops[3])?;
    let mut neg = [false; 2];
    for (i, name) in ["imm-scale-a", "imm-scale-b"].into_iter().enumerate() {
        neg[i] = match wgmma_imm(&ops[4 + i], name)? {
            1 => false,
            -1 => true,
            v => return Err(format!("{name} must be 1 or -1, found {v}")),
        };
    }
    let trans: &[&str] = if a_regs {
        &["imm-trans-b"]
    } else {
        &["imm-trans-a", "imm-trans-b"]
    };
    for (i, &name) in trans.iter().enumerate() {
        if let Some(op) = ops.get(6 + i) {
            match wgmma_imm(op, name)? {
                0 => {}
                1 => {
                    return Err(
                        "transposed wgmma operands are not supported by the emulated device".into(),
                    )
                }
                v => return Err(format!("{name} must be 0 or 1, found {v}")),
            }
        }
    }
    ctx.wgmmas.push(WgmmaInst {
        n,
        kind,
        d,
        a,
        b_desc,
        scale_d,
        scale_d_neg,
        neg_a: neg[0],
        neg_b: neg[1],
    });
    Ok(Op::Wgmma {
        idx: ctx.wgmmas.len() as u32 - 1,
        mask,
    })
}

/// For a kernel with `wgmma.mma_async` instructions: every other instruction (`code[i]`,
/// decoded from the `i`-th instruction statement of `body`) that names one of their
/// accumulator registers or writes one of their registers of A (A in registers), with those it
/// reads and writes and its guard, which becomes `S_ACC` (the interpreter checks the accesses
/// then).
/// A register is written when it is (part of) the first operand of a form whose first operand
/// is a destination; every other register operand, address base and guard is read.
pub(super) fn accumulator_uses(
    ctx: &Ctx<'_>,
    body: &[Stmt],
    code: &mut [Inst],
) -> HashMap<u32, AccUse> {
    let mut uses = HashMap::new();
    if ctx.wgmmas.is_empty() {
        return uses;
    }
    let acc: std::collections::HashSet<Slot> = ctx
        .wgmmas
        .iter()
        .flat_map(|w| w.d.iter().copied())
        .collect();
    let a_regs: std::collections::HashSet<Slot> = ctx
        .wgmmas
        .iter()
        .filter_map(|w| match w.a {
            WgmmaA::Regs(r) => Some(r),
            WgmmaA::Desc(_) => None,
        })
        .flatten()
        .collect();
    let raws = body.iter().filter_map(|s| match s {
        Stmt::Inst(raw) => Some(raw),
        _ => None,
    });
    for (i, (raw, inst)) in raws.zip(code.iter_mut()).enumerate() {
        if matches!(inst.op, Op::Wgmma { .. }) {
            continue;
        }
        let first_written = isa::lookup(&raw.opcode)
            .and_then(|row| row.operands.first())
            .is_some_and(|o| matches!(o.role, Role::Dst | Role::DstPair | Role::DstPred));
        let mut u = AccUse {
            reads: Vec::new(),
            writes: Vec::new(),
            guard: inst.guard,
            guard_neg: inst.guard_neg,
        };
        let mut add = |name: &str, write: bool| {
            if let Some(s) = ctx.regs.get(name).filter(|s| acc.contains(s)) {
                if write { &mut u.writes } else { &mut u.reads }.push(*s);
            } else if let Some(s) = ctx.regs.get(name).filter(|s| write && a_regs.contains(s)) {
                u.writes.push(*s);
            }
        };
        if let Some((_, p)) = &raw.guard {
            add(p, false);
        }
        for (j, op) in raw.operands.iter().enumerate() {
            let write = j == 0 && first_written;
            let one = |op: &Operand, add: &mut dyn FnMut(&str, bool)| match op {
                Operand::Name(n) | Operand::Not(n) => add(n, write),
                Operand::Pair(a, b) => {
                    add(a, write);
                    add(b, write);
                }
                Operand::Addr { base: Some(b), .. } => add(b, false),
                _ => {}
            };
            match op {
                Operand::Vector(v) => v.iter().for_each(|e| one(e, &mut add)),
                other => one(other, &mut add),
            }
        }
        if !u.reads.is_empty() || !u.writes.is_empty() {
            inst.guard = S_ACC;
            inst.guard_neg = false;
            uses.insert(i as u32, u);
        }
    }
    uses
}

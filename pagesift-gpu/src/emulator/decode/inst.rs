//! Decoding of one instruction statement: the table lookup, modifiers, operands, and the
//! dispatch to the rule of the instruction's family.
//!
//! [`decode_inst`] turns a parsed statement (opcode text, operands, guard) into one executable
//! [`Inst`]. The opcode must be a form of the instruction table (`pagesift-ptx-isa`): a form
//! the emulator does not implement fails to load instead of running with a modifier ignored.
//! The row fixes the operand count; the family's rule (`arith.rs`, `convert.rs`, `memory.rs`,
//! `control.rs`, `warp.rs`, `tensor.rs`) splits the opcode at its dots into a base (`ld`) and
//! modifiers (`global`, `nc`, `v4`, `f32`), takes those it understands with [`Mods::take`] and
//! friends, and [`Mods::finish`] rejects any left over. Operands become slots of the kernel's
//! per-thread register template ([`Ctx`]): registers by name, immediates as shared constant
//! slots ([`Ctx::konst`]), vectors as runs of slots; a guard `@%p` / `@!%p` becomes the
//! instruction's predicate slot (`S_SINK`: always executed).

use super::{arith, control, convert, memory, tensor, warp, *};
use pagesift_ptx_isa::{self as isa, Family};

/// Modifiers of an opcode (`ld.global.nc.v4.f32` -> `global nc v4 f32`), consumed by the decoder;
/// any left over is an error.
pub(super) struct Mods<'a> {
    pub(super) parts: Vec<&'a str>,
    pub(super) used: Vec<bool>,
}

impl<'a> Mods<'a> {
    pub(super) fn new(opcode: &'a str) -> (&'a str, Mods<'a>) {
        let mut it = opcode.split('.');
        let base = it.next().unwrap_or("");
        let parts: Vec<&str> = it.collect();
        let used = vec![false; parts.len()];
        (base, Mods { parts, used })
    }
    pub(super) fn take(&mut self, m: &str) -> bool {
        for (p, u) in self.parts.iter().zip(self.used.iter_mut()) {
            if !*u && *p == m {
                *u = true;
                return true;
            }
        }
        false
    }
    pub(super) fn take_one(&mut self, set: &[&'static str]) -> Option<&'static str> {
        set.iter().copied().find(|s| self.take(s))
    }
    /// All type modifiers, in order.
    pub(super) fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        for (p, u) in self.parts.iter().zip(self.used.iter_mut()) {
            if !*u {
                if let Some(t) = Ty::parse(p) {
                    *u = true;
                    out.push(t);
                }
            }
        }
        out
    }
    pub(super) fn ty(&mut self) -> Result<Ty, String> {
        match self.types().as_slice() {
            [t] => Ok(*t),
            _ => Err("expected exactly one type".into()),
        }
    }
    /// Cache, ordering and scope qualifiers that do not change results in the emulator.
    pub(super) fn ignore_hints(&mut self) {
        for (p, u) in self.parts.iter().zip(self.used.iter_mut()) {
            if p.contains("::")
                || matches!(
                    *p,
                    "ca" | "cg"
                        | "cs"
                        | "lu"
                        | "cv"
                        | "wb"
                        | "wt"
                        | "nc"
                        | "volatile"
                        | "relaxed"
                        | "acquire"
                        | "release"
                        | "acq_rel"
                        | "weak"
                        | "sc"
                        | "cta"
                        | "gpu"
                        | "sys"
                        | "cluster"
                        | "aligned"
                        | "uni"
                )
            {
                *u = true;
            }
        }
    }
    pub(super) fn rnd(&mut self) -> Rnd {
        match self.take_one(&["rn", "rz", "rm", "rp"]) {
            Some("rz") => Rnd::Rz,
            Some("rm") => Rnd::Rm,
            Some("rp") => Rnd::Rp,
            Some(_) => Rnd::Rn,
            None => Rnd::Default,
        }
    }
    pub(super) fn finish(&self) -> Result<(), String> {
        let left: Vec<&str> = self
            .parts
            .iter()
            .zip(&self.used)
            .filter(|(_, u)| !**u)
            .map(|(p, _)| *p)
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("unsupported modifier(s) .{}", left.join(".")))
        }
    }
}

/// What decoding one kernel builds up: its register slots, the symbols and labels operands
/// name, and the initial register template every thread starts from.
pub(super) struct Ctx<'m> {
    /// Declared registers by name (`%r12`) -> slot.
    pub(super) regs: HashMap<String, Slot>,
    /// Module-level symbols (globals, shared arrays, parameters).
    pub(super) syms: &'m HashMap<String, Sym>,
    /// Symbols declared inside the entry (its `.shared` / `.local` arrays).
    pub(super) local_syms: HashMap<String, Sym>,
    /// Branch targets -> instruction index.
    pub(super) labels: HashMap<String, u32>,
    /// Immediate bits -> the constant slot holding them (one slot per distinct value).
    pub(super) consts: HashMap<u64, Slot>,
    /// The initial value of every slot: 0 for registers, the bits for constant slots.
    pub(super) template: Vec<u64>,
    /// The `mma` instructions, whose fragment layouts are resolved after decoding.
    pub(super) mmas: Vec<MmaInst>,
    /// The `wgmma.mma_async` instructions.
    pub(super) wgmmas: Vec<WgmmaInst>,
    /// The `cp.async.bulk.tensor` instructions.
    pub(super) tmas: Vec<TmaInst>,
}

impl Ctx<'_> {
    pub(super) fn sym(&self, name: &str) -> Option<Sym> {
        self.local_syms
            .get(name)
            .or_else(|| self.syms.get(name))
            .copied()
    }
    pub(super) fn konst(&mut self, v: u64) -> Slot {
        if let Some(&s) = self.consts.get(&v) {
            return s;
        }
        let s = self.template.len() as Slot;
        self.template.push(v);
        self.consts.insert(v, s);
        s
    }
    pub(super) fn new_slot(&mut self) -> Slot {
        let s = self.template.len() as Slot;
        self.template.push(0);
        s
    }
    /// A source operand of type `ty`.
    pub(super) fn src(&mut self, op: &Operand, ty: Ty) -> Result<Slot, String> {
        match op {
            Operand::Name(n) => {
                if let Some(&s) = self.regs.get(n) {
                    Ok(s)
                } else if let Some(s) = special(n) {
                    Ok(s)
                } else if let Some(sym) = self.sym(n) {
                    Ok(self.konst(sym.addr))
                } else {
                    Err(format!("unknown register or symbol `{n}`"))
                }
            }
            Operand::Imm(lit) => imm_bits(lit, ty)
                .map(|v| self.konst(v))
                .ok_or(format!("bad literal `{lit}`")),
            other => Err(format!("unsupported operand {other:?}")),
        }
    }
    pub(super) fn dst(&mut self, op: &Operand) -> Result<Slot, String> {
        match op {
            Operand::Name(n) => self
                .regs
                .get(n)
                .copied()
                .ok_or(format!("unknown destination register `{n}`")),
            Operand::Sink => Ok(S_SINK),
            other => Err(format!("unsupported destination {other:?}")),
        }
    }
    /// `[base+off]`: the base slot (or `S_ZERO`) and the offset, with symbols resolved.
    pub(super) fn addr(&mut self, op: &Operand) -> Result<(Slot, i64, Option<Space>), String> {
        let Operand::Addr { base, offset } = op else {
            return Err(format!("expected an address, found {op:?}"));
        };
        match base {
            None => Ok((S_ZERO, *offset, None)),
            Some(n) => {
                if let Some(&s) = self.regs.get(n) {
                    Ok((s, *offset, None))
                } else if let Some(sym) = self.sym(n) {
                    Ok((
                        S_ZERO,
                        (sym.addr as i64).wrapping_add(*offset),
                        Some(sym.space),
                    ))
                } else {
                    Err(format!("unknown address base `{n}`"))
                }
            }
        }
    }
    pub(super) fn vec_dst(&mut self, op: &Operand) -> Result<([Slot; 4], u8), String> {
        let mut d = [S_SINK; 4];
        match op {
            Operand::Vector(v) if v.len() <= 4 => {
                for (i, e) in v.iter().enumerate() {
                    d[i] = self.dst(e)?;
                }
                Ok((d, v.len() as u8))
            }
            _ => {
                d[0] = self.dst(op)?;
                Ok((d, 1))
            }
        }
    }
    pub(super) fn vec_src(&mut self, op: &Operand, ty: Ty) -> Result<([Slot; 4], u8), String> {
        let mut d = [S_ZERO; 4];
        match op {
            Operand::Vector(v) if v.len() <= 4 => {
                for (i, e) in v.iter().enumerate() {
                    d[i] = self.src(e, ty)?;
                }
                Ok((d, v.len() as u8))
            }
            _ => {
                d[0] = self.src(op, ty)?;
                Ok((d, 1))
            }
        }
    }
    /// A destination that may be a pair `a|b` (`setp`, `shfl`); the second is `S_SINK` when
    /// absent.
    pub(super) fn dst_pair(&mut self, op: &Operand) -> Result<(Slot, Slot), String> {
        match op {
            Operand::Pair(a, b) => {
                // Either half may be `_`, which discards it.
                let mut one = |n: &String| {
                    if n == "_" {
                        Ok(S_SINK)
                    } else {
                        self.dst(&Operand::Name(n.clone()))
                    }
                };
                Ok((one(a)?, one(b)?))
            }
            other => Ok((self.dst(other)?, S_SINK)),
        }
    }
    /// A predicate operand, possibly negated.
    pub(super) fn pred(&mut self, op: &Operand) -> Result<(Slot, bool), String> {
        match op {
            Operand::Not(n) => Ok((self.src(&Operand::Name(n.clone()), Ty::Pred)?, true)),
            other => Ok((self.src(other, Ty::Pred)?, false)),
        }
    }
}

pub(super) fn decode_inst(ctx: &mut Ctx<'_>, raw: &RawInst) -> Result<Inst, String> {
    let (guard, guard_neg) = match &raw.guard {
        Some((neg, p)) => (ctx.src(&Operand::Name(p.clone()), Ty::Pred)?, *neg),
        None => (S_SINK, false),
    };
    let row = isa::lookup(&raw.opcode).ok_or_else(|| unknown_form(&raw.opcode))?;
    let ops = raw.operands.as_slice();
    let (fewest, most) = row.operand_count();
    if ops.len() < fewest || ops.len() > most {
        let expected = match most - fewest {
            0 => format!("{most}"),
            1 => format!("{fewest} or {most}"),
            _ => format!("{fewest} to {most}"),
        };
        return Err(format!("expected {expected} operands, found {}", ops.len()));
    }
    let (base, mut m) = Mods::new(&raw.opcode);
    let m = &mut m;
    let op = match row.family {
        Family::Arith => arith::decode(ctx, base, m, ops)?,
        Family::Convert => convert::decode(ctx, base, m, ops)?,
        Family::Memory => memory::decode(ctx, base, m, ops)?,
        Family::Control => control::decode(ctx, base, m, ops)?,
        Family::Warp => warp::decode(ctx, base, m, ops)?,
        Family::Tensor => tensor::decode(ctx, base, m, ops)?,
    };
    // A rule that leaves a modifier of its row unread disagrees with the table (the tests decode
    // every form of it).
    m.finish()?;
    Ok(Inst {
        op,
        guard,
        guard_neg,
    })
}

/// The error for an opcode that is no form of the instruction table.
pub(super) fn unknown_form(opcode: &str) -> String {
    let base = opcode.split('.').next().unwrap_or("");
    if isa::has_opcode(base) {
        format!("`{opcode}` is not a form of the instruction table (pagesift-ptx-isa): the emulator does not run it")
    } else {
        format!("instruction `{base}` is not supported by the emulator")
    }
}

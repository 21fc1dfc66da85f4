//! Decoding of one instruction statement: opcode modifiers, operands, and the rule per opcode.
//!
//! [`decode_inst`] turns a parsed statement (opcode text, operands, guard) into one executable
//! [`Inst`]. The opcode is split at its dots into a base (`ld`) and modifiers (`global`, `nc`,
//! `v4`, `f32`); the arm of the base takes the modifiers it understands with [`Mods::take`] and
//! friends, and [`Mods::finish`] rejects any left over, so that a form the emulator does not
//! implement fails to load instead of running with a modifier ignored. Operands become slots
//! of the kernel's per-thread register template ([`Ctx`]): registers by name, immediates as
//! shared constant slots ([`Ctx::konst`]), vectors as runs of slots; a guard `@%p` / `@!%p`
//! becomes the instruction's predicate slot (`S_SINK`: always executed).

use super::*;

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
            Operand::Pair(a, b) => Ok((
                self.dst(&Operand::Name(a.clone()))?,
                self.dst(&Operand::Name(b.clone()))?,
            )),
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

fn space_of(m: &mut Mods<'_>) -> MemSpace {
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

fn fmode(m: &mut Mods<'_>) -> FMode {
    let rnd = m.rnd();
    let ftz = m.take("ftz");
    let sat = m.take("sat");
    m.take("approx");
    m.take("full");
    FMode { rnd, ftz, sat }
}

pub(super) fn decode_inst(ctx: &mut Ctx<'_>, raw: &RawInst) -> Result<Inst, String> {
    let (guard, guard_neg) = match &raw.guard {
        Some((neg, p)) => (ctx.src(&Operand::Name(p.clone()), Ty::Pred)?, *neg),
        None => (S_SINK, false),
    };
    let (base, mut m) = Mods::new(&raw.opcode);
    let ops = &raw.operands;
    let want = |n: usize| -> Result<(), String> {
        if ops.len() == n {
            Ok(())
        } else {
            Err(format!("expected {n} operands, found {}", ops.len()))
        }
    };
    let op = match base {
        "mov" => {
            let ty = m.ty()?;
            want(2)?;
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
        "ld" | "ldu" => {
            let ordered = ordering_of(&m);
            let (space, n) = access_of(&mut m);
            let ty = m.ty()?;
            want(2)?;
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
            let ordered = ordering_of(&m);
            let (space, n) = access_of(&mut m);
            let ty = m.ty()?;
            want(2)?;
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
        "cvta" => {
            let to = m.take("to");
            let space = space_of(&mut m);
            let ty = m.ty()?;
            want(2)?;
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
                want(2)?;
                m.finish()?;
                return Ok(Inst {
                    op: Op::Tf32 {
                        d: ctx.dst(&ops[0])?,
                        a: ctx.src(&ops[1], Ty::F32)?,
                    },
                    guard,
                    guard_neg,
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
                want(3)?;
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
                want(2)?;
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
        "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl"
        | "shr" | "copysign" => {
            let int_mode = m.take_one(&["lo", "hi", "wide"]);
            let fm = fmode(&mut m);
            let ty = m.ty()?;
            want(3)?;
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
            let fm = fmode(&mut m);
            let ty = m.ty()?;
            want(4)?;
            let d = ctx.dst(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], ty)?);
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
            let fm = fmode(&mut m);
            let ty = m.ty()?;
            want(2)?;
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
            if ops.len() < 3 {
                return Err(format!("expected 3 or 4 operands, found {}", ops.len()));
            }
            let (p, q) = ctx.dst_pair(&ops[0])?;
            let (a, b) = (ctx.src(&ops[1], ty)?, ctx.src(&ops[2], ty)?);
            let (c, cneg) = if bop != BoolOp::None {
                want(4)?;
                ctx.pred(&ops[3])?
            } else {
                want(3)?;
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
            want(4)?;
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
            want(4)?;
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
            want(5)?;
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
            want(4)?;
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
            want(5)?;
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
        "bra" => {
            m.take("uni");
            want(1)?;
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
            if m.take("warp") {
                m.take("sync");
                want(1)?;
                Op::BarWarp {
                    mask: ctx.src(&ops[0], Ty::B32)?,
                }
            } else if m.take("arrive") {
                m.take("cta");
                want(2)?;
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
                if ops.len() != 3 && ops.len() != 4 {
                    return Err(format!("expected 3 or 4 operands, found {}", ops.len()));
                }
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
                if ops.is_empty() || ops.len() > 2 {
                    return Err("expected a barrier id and an optional thread count".into());
                }
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
            want(5)?;
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
            want(3)?;
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
        "redux" => {
            if !m.take("sync") {
                return Err("redux without .sync".into());
            }
            let op = atom_op(&mut m)?;
            let ty = m.ty()?;
            want(3)?;
            let d = ctx.dst(&ops[0])?;
            Op::Redux {
                op,
                ty,
                d,
                a: ctx.src(&ops[1], ty)?,
                mask: ctx.src(&ops[2], Ty::B32)?,
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
            want(4)?;
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
            want(4)?;
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
            want(4)?;
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
            want(2)?;
            Op::Testp {
                kind,
                ty,
                p: ctx.dst(&ops[0])?,
                a: ctx.src(&ops[1], ty)?,
            }
        }
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
            want(4)?;
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
            want(2)?;
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
            if m.take("commit_group") || m.take("wait_all") {
                Op::Nop
            } else if m.take("wait_group") {
                want(1)?;
                Op::Nop
            } else {
                let cg = m.take("cg");
                if !cg && !m.take("ca") {
                    return Err("cp.async needs .ca or .cg".into());
                }
                if !(m.take("shared") || m.take("shared::cta")) || !m.take("global") {
                    return Err("only cp.async.{ca,cg}.shared.global is supported".into());
                }
                m.ignore_hints();
                if ops.len() < 3 || ops.len() > 4 {
                    return Err(format!("expected 3 or 4 operands, found {}", ops.len()));
                }
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
        "activemask" => {
            m.ty()?;
            want(1)?;
            Op::Activemask {
                d: ctx.dst(&ops[0])?,
            }
        }
        "atom" | "red" => {
            let space = space_of(&mut m);
            m.ignore_hints();
            let op = atom_op(&mut m)?;
            let noftz = m.take("noftz");
            let ty = m.ty()?;
            let half = matches!(ty, Ty::F16 | Ty::BF16 | Ty::F16x2 | Ty::BF16x2);
            if ty.is_float() && !(op == AtomOp::Add && (half == noftz)) {
                return Err("among float atomics only add on f32/f64 and add.noftz on f16, bf16, f16x2 and bf16x2 are supported".into());
            }
            if noftz && !ty.is_float() {
                return Err(".noftz on an integer atomic".into());
            }
            if ops.is_empty() {
                return Err("expected operands, found 0".into());
            }
            let (d, rest) = if base == "atom" {
                (ctx.dst(&ops[0])?, &ops[1..])
            } else {
                (S_SINK, &ops[..])
            };
            let need = if op == AtomOp::Cas { 3 } else { 2 };
            if rest.len() != need {
                return Err(format!(
                    "expected {} operands",
                    need + (base == "atom") as usize
                ));
            }
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
        other => {
            return Err(format!(
                "instruction `{other}` is not supported by the emulator"
            ))
        }
    };
    m.finish()?;
    Ok(Inst {
        op,
        guard,
        guard_neg,
    })
}

fn atom_op(m: &mut Mods<'_>) -> Result<AtomOp, String> {
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

//! Facts for bounds-check elision: what dominating conditions prove about indices (see
//! `bounds.rs` for the rules), and which registers an instruction writes (a fact holds while
//! its registers are unchanged).

use super::{Lower, Store, Val};
use crate::check::{TExpr, TKind};
use crate::parse::BinOp;
use crate::ptx::{Op, Operand, Reg};
use crate::types::{ConstVal, RegClass};

/// What bounds an index: a length register (`u64`) or a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Bound {
    Reg(Reg),
    Const(i128),
    /// On a slice's base register: the address of element `rel` (0 for `None`) is a multiple
    /// of `bytes` (from a dominating `x.is_aligned(i, B)`).
    Align {
        bytes: u32,
        rel: Option<Reg>,
    },
}

/// `value(idx) + c <= bound`, in exact integers, while `idx` has not been written again.
#[derive(Clone, Debug)]
pub(super) struct Fact {
    idx: Reg,
    gen: u32,
    bound: Bound,
    /// The write count of a bound register when the fact was made.
    bound_gen: u32,
    c: i128,
}

impl Lower<'_> {
    /// Records the registers an instruction writes (facts on them end; see the module docs).
    pub(super) fn note_writes(&mut self, op: &Op, args: &[Operand]) {
        let mut written = Vec::new();
        match op {
            Op::St { .. }
            | Op::StRelease(_)
            | Op::BarSync
            | Op::BarWarpSync
            | Op::Fence { .. }
            | Op::Bra
            | Op::Ret
            | Op::CpAsync { .. }
            | Op::Stmatrix { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait
            | Op::FenceProxyAsync
            | Op::SetMaxNReg { .. }
            | Op::PrefetchL2
            | Op::MbarInit
            | Op::MbarArriveCpAsync
            | Op::TmaLoad
            | Op::TmaStore
            | Op::BulkCommit
            | Op::BulkWait { .. }
            | Op::PrefetchTensormap => {}
            Op::Asm { outs, .. } => {
                for (a, o) in args.iter().zip(outs) {
                    if *o {
                        regs_of(a, &mut written);
                    }
                }
            }
            _ => {
                if let Some(a @ (Operand::Reg(_) | Operand::Vec(_) | Operand::Pair(..))) =
                    args.first()
                {
                    regs_of(a, &mut written);
                }
            }
        }
        for r in written {
            *self.writes.entry(r).or_insert(0) += 1;
            self.narrow.remove(&r);
        }
    }

    /// At a loop head: every mutable variable may have changed since.
    pub(super) fn forget_mutable(&mut self) {
        let regs: Vec<Reg> = self.mutable_regs.iter().copied().collect();
        for r in regs {
            *self.writes.entry(r).or_insert(0) += 1;
        }
    }

    pub(super) fn gen(&self, r: Reg) -> u32 {
        self.writes.get(&r).copied().unwrap_or(0)
    }

    /// Adds the facts a true `cond` establishes.
    pub(super) fn assume(&mut self, cond: &TExpr) {
        if let TKind::Mem {
            op: crate::check::MemOp::IsAligned(bytes),
            base,
            args,
            ..
        } = &cond.kind
        {
            let Some(Store::Global { base, elem, .. }) = self.vars.get(base) else {
                return;
            };
            let (base, es, bytes) = (*base, elem.bytes() as i128, *bytes);
            // The index as a register plus a constant that keeps the alignment, or a constant
            // of whole `bytes`.
            let rel = match args.first().map(|a| &a.kind) {
                Some(TKind::Const(ConstVal::Int(c))) if (c * es) % bytes as i128 == 0 => None,
                Some(_) => match self.peek_index(&args[0], false) {
                    Some((r, k)) if (k * es) % bytes as i128 == 0 => Some(r),
                    _ => return,
                },
                None => return,
            };
            let gen = self.gen(base);
            let bound = Bound::Align { bytes, rel };
            let bound_gen = self.bound_gen(bound);
            self.facts.push(Fact {
                idx: base,
                gen,
                bound,
                bound_gen,
                c: 0,
            });
            return;
        }
        let TKind::Binary(op, l, r) = &cond.kind else {
            return;
        };
        let boolean = matches!(
            cond.ty,
            crate::types::Ty::Scalar(crate::types::Scalar::Bool)
        );
        let (lhs, rhs, strict) = match op {
            // `a & b` on `bool` is true only when both are, like `a && b`.
            BinOp::LogicAnd | BinOp::And if *op == BinOp::LogicAnd || boolean => {
                self.assume(l);
                self.assume(r);
                return;
            }
            BinOp::Lt => (l, r, true),
            BinOp::Le => (l, r, false),
            BinOp::Gt => (r, l, true),
            BinOp::Ge => (r, l, false),
            _ => return,
        };
        let (Some(bound), Some((idx, k))) = (self.peek_bound(rhs), self.peek_index(lhs, true))
        else {
            return;
        };
        let gen = self.gen(idx);
        let bound_gen = self.bound_gen(bound);
        self.facts.push(Fact {
            idx,
            gen,
            bound,
            bound_gen,
            c: k + strict as i128,
        });
    }

    pub(super) fn bound_gen(&self, b: Bound) -> u32 {
        match b {
            Bound::Reg(r) => self.gen(r),
            // An aligned element's index register: the fact ends when it is written.
            Bound::Align { rel: Some(r), .. } => self.gen(r),
            Bound::Const(_) | Bound::Align { .. } => 0,
        }
    }

    /// What a dominating `x.is_aligned(i, B)` (B >= `bytes`) proved about the base `base`:
    /// `Some(None)` the base itself aligned, `Some(Some(r))` the element at index register `r`
    /// (a base fact preferred).
    pub(super) fn base_aligned(&self, base: Reg, bytes: u32) -> Option<Option<Reg>> {
        let mut found = None;
        for f in &self.facts {
            if let Bound::Align { bytes: b, rel } = f.bound {
                if f.idx == base && b >= bytes && self.valid(f) {
                    if rel.is_none() {
                        return Some(None);
                    }
                    found = Some(rel);
                }
            }
        }
        found
    }

    fn valid(&self, f: &Fact) -> bool {
        f.gen == self.gen(f.idx) && f.bound_gen == self.bound_gen(f.bound)
    }

    /// Adds the facts a false `cond` establishes (after `if cond { return; }`).
    pub(super) fn assume_not(&mut self, cond: &TExpr) {
        let TKind::Binary(op, l, r) = &cond.kind else {
            return;
        };
        let flipped = match op {
            BinOp::LogicOr => {
                self.assume_not(l);
                self.assume_not(r);
                return;
            }
            BinOp::Ge => BinOp::Lt,
            BinOp::Gt => BinOp::Le,
            BinOp::Lt => BinOp::Ge,
            BinOp::Le => BinOp::Gt,
            _ => return,
        };
        let negated = TExpr {
            kind: TKind::Binary(flipped, l.clone(), r.clone()),
            ty: cond.ty.clone(),
            span: cond.span,
        };
        self.assume(&negated);
    }

    /// `counter < end` (a `for` loop's counter in its body).
    pub(super) fn assume_below(&mut self, counter: Reg, end: &TExpr) {
        if let Some(bound) = self.peek_bound(end) {
            let gen = self.gen(counter);
            let bound_gen = self.bound_gen(bound);
            self.facts.push(Fact {
                idx: counter,
                gen,
                bound,
                bound_gen,
                c: 1,
            });
        }
    }

    /// `value <= bound` (the result of `x.min(bound)`), where `bound` is a length, an immutable
    /// unsigned variable or a constant.
    pub(super) fn assume_at_most(&mut self, value: &Val, bound: &TExpr) {
        let (Val::Reg(idx, _), Some(bound)) = (value, self.peek_bound(bound)) else {
            return;
        };
        let gen = self.gen(*idx);
        let bound_gen = self.bound_gen(bound);
        self.facts.push(Fact {
            idx: *idx,
            gen,
            bound,
            bound_gen,
            c: 0,
        });
    }

    /// Records `sum = src + k` (unsigned, `0 <= k < 2^20`, `sum` written once): a fact on
    /// `src` then proves an access at `sum + j` as one at `src + (k + j)`. Were `src + k` to
    /// wrap, `sum + j` would lie below `k + j`, which the fact bounds as well.
    pub(super) fn note_offset(&mut self, sum: &Val, l: &Val, r: &Val) {
        let (
            Val::Reg(out, s),
            (Val::Reg(src, _), Val::Imm(ConstVal::Int(k), _))
            | (Val::Imm(ConstVal::Int(k), _), Val::Reg(src, _)),
        ) = (sum, (l, r))
        else {
            return;
        };
        if !s.is_int()
            || s.is_signed()
            || !(0..1 << 20).contains(k)
            || out == src
            || self.gen(*out) != 1
        {
            return;
        }
        let src = self.source_of(*src);
        let g = self.gen(src);
        self.offsets.insert(*out, (src, *k, g));
    }

    /// The register and constant that `r` is the sum of (`note_offset`), while both are
    /// unchanged.
    fn offset_of(&self, r: Reg) -> Option<(Reg, i128)> {
        match self.offsets.get(&r) {
            Some((src, k, g)) if *g == self.gen(*src) && self.gen(r) == 1 => Some((*src, *k)),
            _ => None,
        }
    }

    /// The register a zero-extended copy was made from, while that one is unchanged.
    pub(super) fn source_of(&self, r: Reg) -> Reg {
        match self.aliases.get(&r) {
            Some((src, g)) if *g == self.gen(*src) && self.gen(r) == 1 => *src,
            _ => r,
        }
    }

    /// `x.len()`, a variable holding it, or a constant (an expression of constants).
    fn peek_bound(&self, e: &TExpr) -> Option<Bound> {
        match &e.kind {
            TKind::Mem {
                op: crate::check::MemOp::Len,
                base,
                ..
            } => match self.vars.get(base) {
                Some(Store::Global { len, .. }) => Some(Bound::Reg(*len)),
                // A static shared array's length.
                Some(Store::Shared { len: Some(n), .. }) => Some(Bound::Const(*n as i128)),
                _ => None,
            },
            // A length, or an immutable unsigned value (`let end = h + 4 * n;`): facts on it
            // chain with facts bounding it (`end <= x.len()`).
            TKind::Var(id) => match self.vars.get(id) {
                Some(Store::Value(Val::Reg(r, s)))
                    if self.len_regs.contains(r)
                        || (s.is_int() && !s.is_signed() && !self.mutable_regs.contains(r)) =>
                {
                    Some(Bound::Reg(*r))
                }
                Some(Store::Value(Val::Imm(ConstVal::Int(n), _))) => Some(Bound::Const(*n)),
                _ => None,
            },
            TKind::Const(ConstVal::Int(n)) => Some(Bound::Const(*n)),
            // A length widened (`t.len() as u64`).
            TKind::Cast(inner) if matches!(inner.kind, TKind::Mem { .. }) => self.peek_bound(inner),
            _ => self.const_of(e).map(Bound::Const),
        }
        .map(|b| match b {
            Bound::Reg(r) => Bound::Reg(self.source_of(r)),
            c => c,
        })
    }

    /// The value of an unsigned integer expression known at this point: literals, unrolled
    /// counters and other constant variables, and `+ - * / % << >> &` and widening casts of
    /// them (`kk * BM + BM / 2` in an unrolled loop), where no step wraps its type.
    pub(super) fn const_of(&self, e: &TExpr) -> Option<i128> {
        let crate::types::Ty::Scalar(s) = &e.ty else {
            return None;
        };
        if !s.is_int() || s.is_signed() {
            return None;
        }
        let v = match &e.kind {
            TKind::Const(ConstVal::Int(n)) => *n,
            TKind::Var(id) => match self.vars.get(id) {
                Some(Store::Value(Val::Imm(ConstVal::Int(n), _))) => *n,
                _ => return None,
            },
            TKind::Cast(inner) => self.const_of(inner)?,
            TKind::Binary(op, a, b) => {
                let (x, y) = (self.const_of(a)?, self.const_of(b)?);
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div if y != 0 => x / y,
                    BinOp::Rem if y != 0 => x % y,
                    BinOp::Shl if y < 64 => x << y,
                    BinOp::Shr if y < 128 => x >> y,
                    BinOp::And => x & y,
                    _ => return None,
                }
            }
            _ => return None,
        };
        (v >= 0 && v < 1i128 << (8 * s.bytes())).then_some(v)
    }

    /// An index as (register, constant offset) with the register holding an unsigned value:
    /// `i`, `i as u64` (widening), `i + k`. For a fact (`exact`), `i + k` must not wrap: `i`
    /// at most 32 bits wide under a 64-bit sum.
    fn peek_index(&self, e: &TExpr, exact: bool) -> Option<(Reg, i128)> {
        let unsigned = |t: &crate::types::Ty| match t {
            crate::types::Ty::Scalar(s) if s.is_int() && !s.is_signed() => Some(*s),
            _ => None,
        };
        match &e.kind {
            TKind::Var(id) => match self.vars.get(id) {
                Some(Store::Value(Val::Reg(r, s))) if s.is_int() && !s.is_signed() => {
                    Some((self.source_of(*r), 0))
                }
                _ => None,
            },
            TKind::Cast(inner) => {
                let (to, from) = (unsigned(&e.ty)?, unsigned(&inner.ty)?);
                if to.bytes() < from.bytes() || !matches!(inner.kind, TKind::Var(_)) {
                    return None;
                }
                self.peek_index(inner, exact)
            }
            TKind::Binary(BinOp::Add, a, b) => {
                let (x, k) = match (self.const_of(a), self.const_of(b)) {
                    (_, Some(k)) => (a, k),
                    (Some(k), _) => (b, k),
                    _ => return None,
                };
                if !(0..1 << 20).contains(&k) {
                    return None;
                }
                // Constant offsets add up (`(i + 896) + 64`); a fact's sum must be the one
                // widened sum, checked below.
                let (r, k) = match self.peek_index(x, exact)? {
                    (r, 0) => (r, k),
                    (r, k0) if !exact && k0 + k < 1 << 20 => return Some((r, k0 + k)),
                    _ => return None,
                };
                if exact {
                    let wide = unsigned(&e.ty)?.bytes() == 8;
                    let narrow = match &x.kind {
                        TKind::Cast(inner) => unsigned(&inner.ty).is_some_and(|s| s.bytes() <= 4),
                        // `r` may be the 32-bit source of a zero-extended copy.
                        _ => {
                            matches!(r.class, RegClass::B16 | RegClass::B32)
                                || self.narrow.contains(&r)
                                || self.below_len(r)
                        }
                    };
                    if !(wide && narrow) {
                        return None;
                    }
                }
                Some((r, k))
            }
            _ => None,
        }
    }

    /// Whether `r` is proven below a slice length (directly or through one bound register):
    /// then `r + k` cannot wrap, as lengths are below 2^63 (they count elements of a device
    /// allocation).
    fn below_len(&self, r: Reg) -> bool {
        let valid: Vec<&Fact> = self.facts.iter().filter(|f| self.valid(f)).collect();
        let is_len = |b: &Bound| matches!(b, Bound::Reg(l) if self.len_regs.contains(l));
        valid.iter().any(|f| {
            f.idx == r
                && (f.c >= 1 && is_len(&f.bound)
                    || matches!(f.bound, Bound::Reg(b) if valid.iter().any(|g| {
                        g.idx == b && f.c >= 0 && g.c >= 0 && f.c + g.c >= 1 && is_len(&g.bound)
                    })))
        })
    }

    /// Whether `index .. index + n` is proven inside `bound`.
    pub(super) fn proven(&self, index: &TExpr, bound: Bound, n: u32) -> bool {
        let Some((r, j)) = self.peek_index(index, false) else {
            return false;
        };
        if j < 0 {
            return false;
        }
        let need = j + n as i128;
        let valid: Vec<&Fact> = self.facts.iter().filter(|f| self.valid(f)).collect();
        // Up to two steps of transitivity through bound registers: r + c1 <= b1,
        // b1 + c2 <= b2, b2 + c3 <= bound proves r + (c1 + c2 + c3) <= bound.
        fn reaches(valid: &[&Fact], r: Reg, c: i128, bound: Bound, need: i128, depth: u32) -> bool {
            valid.iter().any(|f| {
                f.idx == r
                    && (f.bound == bound && need <= c + f.c
                        || depth > 0
                            && c + f.c >= 0
                            && matches!(f.bound, Bound::Reg(b) if b != r
                                && reaches(valid, b, c + f.c, bound, need, depth - 1)))
            })
        }
        // `r = src + k` (`note_offset`): `r + j` is `src + (k + j)`.
        reaches(&valid, r, 0, bound, need, 2)
            || self
                .offset_of(r)
                .is_some_and(|(src, k)| reaches(&valid, src, 0, bound, need + k, 2))
    }
}

fn regs_of(o: &Operand, out: &mut Vec<Reg>) {
    match o {
        Operand::Reg(r) => out.push(*r),
        Operand::Vec(items) => items.iter().for_each(|x| regs_of(x, out)),
        Operand::Pair(d, p) => {
            regs_of(d, out);
            regs_of(p, out);
        }
        _ => {}
    }
}

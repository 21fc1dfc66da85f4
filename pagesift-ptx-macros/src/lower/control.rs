//! Control flow: `if`, loops (unrolled or not), inlined helpers with `return`, assignments.

use super::{InlineCx, Lower, Store, Val};
use crate::check::{Intr, MmaType, Place, TBlock, TExpr, TKind, TStmt, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::BinOp;
use crate::ptx::{self, Item, Op, Operand};
use crate::types::{ConstVal, RegClass, Scalar, Ty};

impl Lower<'_> {
    pub(super) fn inline(
        &mut self,
        binds: &[(VarId, TExpr)],
        body: &TBlock,
        ty: &Ty,
        span: Span,
    ) -> Val {
        for (id, arg) in binds {
            let v = self.expr(arg);
            // Parameters are immutable: constants stay constants; registers are shared.
            self.vars.insert(*id, Store::Value(v));
        }
        // Facts from early returns inside the helper end with it.
        let facts = self.facts.clone();
        if !contains_return(body) {
            let v = self.block(body);
            self.facts = facts;
            return v;
        }
        let result = self.fresh_of(ty);
        let end = self.label();
        self.inlines.push(InlineCx {
            end,
            result: result.clone(),
        });
        let saved_loops = std::mem::take(&mut self.loops);
        let v = self.block(body);
        self.loops = saved_loops;
        self.inlines.pop();
        if let Some(dst) = &result {
            if !matches!(v, Val::Unit) {
                self.assign_val(dst, &v, span);
            }
        }
        self.body.push(Item::Label(end));
        self.facts = facts;
        result.unwrap_or(Val::Unit)
    }

    /// Fresh registers for a value of type `ty` (`None` for unit).
    pub(super) fn fresh_of(&mut self, ty: &Ty) -> Option<Val> {
        match ty {
            Ty::Scalar(s) => Some(Val::Reg(self.reg(s.reg_class()), *s)),
            Ty::Array(s, n) => Some(Val::Arr(
                (0..*n)
                    .map(|_| Val::Reg(self.reg(s.reg_class()), *s))
                    .collect(),
            )),
            Ty::Array2(s, r, c) => self.fresh_of(&Ty::Array(*s, r * c)),
            Ty::Desc { .. } => Some(Val::Reg(self.reg(RegClass::B64), Scalar::U64)),
            _ => None,
        }
    }

    pub(super) fn if_expr(
        &mut self,
        cond: &TExpr,
        then: &TBlock,
        els: Option<&TExpr>,
        ty: &Ty,
        span: Span,
    ) -> Val {
        let c = self.expr(cond);
        let p = match c {
            Val::Imm(ConstVal::Bool(b), _) => {
                // Constant after unrolling or propagation: only the taken branch is emitted.
                return if b {
                    self.block(then)
                } else {
                    els.map(|x| self.expr(x)).unwrap_or(Val::Unit)
                };
            }
            Val::Reg(p, _) => p,
            _ => return Val::Unit,
        };
        // `if c { a } else { b }` of scalars that cannot fault or have effects: both sides
        // are computed and one selected, with no branch.
        if let (Ty::Scalar(s), Some(x)) = (ty, els) {
            let then_tail = match (then.stmts.is_empty(), &then.tail) {
                (true, Some(t)) => Some(t),
                _ => None,
            };
            if let Some(t) =
                then_tail.filter(|t| *s != Scalar::Bool && self.selectable(t) && self.selectable(x))
            {
                let a = self.expr(t);
                let b = self.expr(x);
                let (a, b) = (self.operand(&a, span), self.operand(&b, span));
                return self.op_to(Op::Selp(*s), *s, vec![a, b, Operand::Reg(p)], span);
            }
        }
        let result = self.fresh_of(ty);
        let (else_l, end_l) = (self.label(), self.label());
        self.bra(if els.is_some() { else_l } else { end_l }, Some((p, true)));
        let facts = self.facts.clone();
        self.assume(cond);
        let tv = self.block(then);
        self.facts = facts;
        if let Some(dst) = &result {
            self.assign_val(dst, &tv, span);
        }
        if let Some(x) = els {
            self.bra(end_l, None);
            self.body.push(Item::Label(else_l));
            let ev = self.expr(x);
            if let Some(dst) = &result {
                self.assign_val(dst, &ev, span);
            }
        }
        self.body.push(Item::Label(end_l));
        result.unwrap_or(Val::Unit)
    }

    pub(super) fn assign(
        &mut self,
        place: &Place,
        op: Option<crate::parse::BinOp>,
        value: &TExpr,
        span: Span,
    ) {
        match place {
            Place::Var(id) => {
                let Some(dst) = self.place_value(*id) else {
                    return;
                };
                if let (
                    None,
                    TKind::Intr {
                        intr: Intr::Wgmma { ty, n, a_regs },
                        args,
                    },
                ) = (op, &value.kind)
                {
                    if matches!(&args[0].kind, TKind::Var(a) if a == id) {
                        self.wgmma_in_place(&dst, *ty, *n, *a_regs, args, span);
                        return;
                    }
                }
                let v = self.expr(value);
                let v = match op {
                    Some(o) => self.binary(o, dst.clone(), v, span),
                    None => v,
                };
                // `a = [a[1], a[0]]`: element moves must not read what earlier ones wrote.
                let v = match (&dst, &v) {
                    (Val::Arr(_), Val::Arr(_)) if overlaps(&dst, &v) => self.copy(&v, span),
                    _ => v,
                };
                self.assign_val(&dst, &v, span);
            }
            Place::Index { base, index } => match self.vars.get(base).cloned() {
                Some(Store::Value(Val::Arr(items))) => {
                    let i = self.expr(index);
                    let Some(k) = self.const_index(&i, items.len(), index.span) else {
                        return;
                    };
                    let dst = items[k].clone();
                    let v = self.expr(value);
                    let v = match op {
                        Some(o) => self.binary(o, dst.clone(), v, span),
                        None => v,
                    };
                    self.assign_val(&dst, &v, span);
                }
                Some(store @ (Store::Global { .. } | Store::Shared { .. })) => {
                    let (space, a, elem, iv) = self.elem_addr(&store, index, span);
                    let v = self.expr(value);
                    let g = self.guard(&store, index, &iv, 1, span);
                    let v = match op {
                        Some(o) => {
                            let old = self.load(space, elem, a.clone(), false, span);
                            self.binary(o, old, v, span)
                        }
                        None => v,
                    };
                    self.store(space, elem, a, &v, span);
                    self.finish_guards(g.into_iter().collect(), &Val::Unit);
                }
                _ => {}
            },
        }
    }

    /// `acc = wgmma_T(acc, a, b, accumulate)`: the instruction reads and writes the registers
    /// of the mutable array `acc` (`dst`) themselves, so that nothing copies them while the
    /// product is in flight. With `a_regs`, `a` is A's fragment in four registers, which the
    /// instruction names directly as well (they must not change until its `wgmma_wait`).
    fn wgmma_in_place(
        &mut self,
        dst: &Val,
        ty: MmaType,
        n: u32,
        a_regs: bool,
        args: &[TExpr],
        span: Span,
    ) {
        let regs: Option<Vec<Operand>> = match dst {
            Val::Arr(items) => items
                .iter()
                .map(|v| match v {
                    Val::Reg(r, Scalar::F32) => Some(Operand::Reg(*r)),
                    _ => None,
                })
                .collect(),
            _ => None,
        };
        let Some(regs) = regs else {
            self.error(
                span,
                "`wgmma_*` accumulates into a `let mut` array of f32 registers",
            );
            return;
        };
        let da = self.expr(&args[1]);
        let db = self.expr(&args[2]);
        let scale = self.expr(&args[3]);
        let da = match (&da, a_regs) {
            (Val::Arr(items), true) => {
                Operand::Vec(items.iter().map(|x| self.operand_reg(x, span)).collect())
            }
            _ => self.operand_reg(&da, span),
        };
        let db = self.operand_reg(&db, span);
        let scale = self.operand_reg(&scale, span);
        let mut ops = vec![
            Operand::Vec(regs),
            da,
            db,
            scale,
            Operand::Int(1),
            Operand::Int(1),
        ];
        if ty != MmaType::Tf32 {
            // K-major A (a descriptor's `imm-trans-a`; A in registers has none) and B.
            if !a_regs {
                ops.push(Operand::Int(0));
            }
            ops.push(Operand::Int(0));
        }
        self.emit(Op::Wgmma { ty, n }, ops, span);
    }

    /// The constant index of a register array, or an error.
    pub(crate) fn const_index(&mut self, i: &Val, len: usize, span: Span) -> Option<usize> {
        match i {
            Val::Imm(ConstVal::Int(k), _) if *k >= 0 && (*k as usize) < len => Some(*k as usize),
            Val::Imm(ConstVal::Int(k), _) => {
                self.error(
                    span,
                    format!("index {k} is out of bounds for a register array of {len}"),
                );
                None
            }
            _ => {
                self.error(
                    span,
                    "register arrays are indexed only by values known after unrolling (a constant, or the counter of an `#[unroll]` loop with constant bounds)",
                );
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn for_loop(
        &mut self,
        var: VarId,
        start: &TExpr,
        end: &TExpr,
        inclusive: bool,
        body: &TBlock,
        unroll: bool,
        span: Span,
    ) {
        let s = self.expr(start);
        let e = self.expr(end);
        let Ty::Scalar(ty) = self.v.vars[var].ty else {
            return;
        };
        if unroll {
            if let (Val::Imm(ConstVal::Int(a), _), Val::Imm(ConstVal::Int(b), _)) = (&s, &e) {
                let last = if inclusive { *b } else { b - 1 };
                let exit = self.label();
                for k in *a..=last {
                    let next = self.label();
                    self.vars
                        .insert(var, Store::Value(Val::Imm(ConstVal::Int(k), ty)));
                    self.loops.push((exit, next));
                    self.block(body);
                    self.loops.pop();
                    self.body.push(Item::Label(next));
                }
                self.body.push(Item::Label(exit));
                return;
            }
        }
        let counter = self.reg(ty.reg_class());
        self.mutable_regs.insert(counter);
        self.mov_into(counter, ty, &s, span);
        let end_v = self.copy(&e, span);
        let (head, latch, exit) = (self.label(), self.label(), self.label());
        self.body.push(Item::Label(head));
        self.forget_mutable();
        let cmp = if inclusive {
            ptx::CmpKind::Gt
        } else {
            ptx::CmpKind::Ge
        };
        let p = self.reg(RegClass::Pred);
        let end_op = self.operand(&end_v, span);
        self.emit(
            Op::Setp(cmp, ty),
            vec![p.into(), counter.into(), end_op.clone()],
            span,
        );
        self.bra(exit, Some((p, false)));
        self.vars.insert(var, Store::Value(Val::Reg(counter, ty)));
        let facts = self.facts.clone();
        if !inclusive && !ty.is_signed() {
            // `for i in a..x.len()`: `i < x.len()` in the body (until the latch).
            self.assume_below(counter, end);
        }
        self.loops.push((exit, latch));
        self.block(body);
        self.loops.pop();
        self.facts = facts;
        self.body.push(Item::Label(latch));
        if inclusive {
            // `a..=MAX` must not wrap around: leave when the counter reaches the end.
            let q = self.reg(RegClass::Pred);
            self.emit(
                Op::Setp(ptx::CmpKind::Eq, ty),
                vec![q.into(), counter.into(), end_op],
                span,
            );
            self.bra(exit, Some((q, false)));
        }
        self.emit(
            Op::Bin(ptx::BinKind::Add, ty),
            vec![counter.into(), counter.into(), Operand::Int(1)],
            span,
        );
        self.bra(head, None);
        self.body.push(Item::Label(exit));
    }
}

/// Whether a block always leaves (its last statement or tail is `return`, `break` or
/// `continue`).
pub(super) fn diverges(b: &TBlock) -> bool {
    let last = match &b.tail {
        Some(t) => Some(&**t),
        None => b.stmts.last().and_then(|s| match s {
            TStmt::Expr(e) => Some(e),
            TStmt::Let { .. } => None,
        }),
    };
    matches!(
        last.map(|e| &e.kind),
        Some(TKind::Return(_) | TKind::Break | TKind::Continue)
    )
}

pub(super) fn contains_return(b: &TBlock) -> bool {
    pub(super) fn e(x: &TExpr) -> bool {
        match &x.kind {
            TKind::Return(_) => true,
            TKind::Inline { binds, .. } => binds.iter().any(|(_, a)| e(a)),
            TKind::Unary(_, a) | TKind::Cast(a) | TKind::Repeat(a, _) => e(a),
            TKind::Binary(_, a, c) => e(a) || e(c),
            TKind::Index { index, .. } | TKind::Within { index, .. } => e(index),
            TKind::Intr { args, .. }
            | TKind::Mem { args, .. }
            | TKind::Call { args, .. }
            | TKind::Array(args) => args.iter().any(e),
            TKind::Asm { inputs, .. } => inputs.iter().any(e),
            TKind::If { cond, then, els } => {
                e(cond) || contains_return(then) || els.as_deref().is_some_and(e)
            }
            TKind::Block(b) => contains_return(b),
            TKind::Match { scrut, arms } => e(scrut) || arms.iter().any(|(_, a)| e(a)),
            TKind::Assign { place, value, .. } => {
                e(value) || matches!(place, Place::Index { index, .. } if e(index))
            }
            TKind::For {
                start, end, body, ..
            } => e(start) || e(end) || contains_return(body),
            TKind::While { cond, body } => e(cond) || contains_return(body),
            TKind::Const(_) | TKind::Var(_) | TKind::IsSome(_) | TKind::Break | TKind::Continue => {
                false
            }
        }
    }
    b.stmts.iter().any(|s| match s {
        TStmt::Let { init, .. } => init.as_ref().is_some_and(e),
        TStmt::Expr(x) => e(x),
    }) || b.tail.as_deref().is_some_and(e)
}

/// Whether a register of `a` occurs in `b`.
fn overlaps(a: &Val, b: &Val) -> bool {
    fn regs(v: &Val, out: &mut Vec<crate::ptx::Reg>) {
        match v {
            Val::Reg(r, _) => out.push(*r),
            Val::Arr(items) => items.iter().for_each(|x| regs(x, out)),
            _ => {}
        }
    }
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    regs(a, &mut ra);
    regs(b, &mut rb);
    ra.iter().any(|r| rb.contains(r))
}

impl Lower<'_> {
    /// Whether an arm of an `if` value may be computed even when not taken: small (at most 8
    /// operations), no memory access, no effects; nested `if`s of such arms and elements of
    /// register arrays included.
    fn selectable(&self, e: &TExpr) -> bool {
        self.select_cost(e).is_some_and(|n| n <= 8)
    }

    fn select_cost(&self, e: &TExpr) -> Option<usize> {
        let arm = |b: &TBlock| match (b.stmts.is_empty(), &b.tail) {
            (true, Some(t)) => self.select_cost(t),
            _ => None,
        };
        match &e.kind {
            TKind::Const(_) | TKind::Var(_) => Some(0),
            TKind::Intr {
                intr: crate::check::Intr::Special(_),
                ..
            } => Some(1),
            TKind::Unary(_, a) | TKind::Cast(a) => Some(1 + self.select_cost(a)?),
            TKind::Binary(op, a, b) if !matches!(op, BinOp::Div | BinOp::Rem) => {
                Some(1 + self.select_cost(a)? + self.select_cost(b)?)
            }
            TKind::Index { base, index } => match self.vars.get(base) {
                Some(Store::Value(Val::Arr(_))) => self.select_cost(index),
                _ => None,
            },
            TKind::Within { index, .. } => self.select_cost(index),
            TKind::Block(b) => arm(b),
            TKind::If {
                cond,
                then,
                els: Some(x),
            } => Some(1 + self.select_cost(cond)? + arm(then)? + self.select_cost(x)?),
            _ => None,
        }
    }
}

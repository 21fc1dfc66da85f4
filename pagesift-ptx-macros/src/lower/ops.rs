//! Lowering of operations: arithmetic, conversions, memory accesses and intrinsics, with the
//! rewrites for forms a target lacks (half-precision arithmetic through f32).

use super::{Lower, Val};
use crate::check::{Intr, TExpr, TKind};
use crate::ctxt::Sp as Span;
use crate::parse::{BinOp, UnOp};
use crate::ptx::{self, BinKind, CmpKind, Op, Operand, UnKind};
use crate::types::{bf16_bits, f16_bits, wrap_int, ConstVal, RegClass, Scalar, Ty};

impl Lower<'_> {
    /// An immediate operand of type `s`.
    pub(super) fn imm(&self, c: &ConstVal, s: Scalar) -> Operand {
        let as_f64 = match c {
            ConstVal::Int(i) => *i as f64,
            ConstVal::Float(f) => *f,
            ConstVal::Bool(b) => *b as i128 as f64,
            ConstVal::Enum(_) => 0.0,
        };
        match s {
            Scalar::F32 => Operand::F32((as_f64 as f32).to_bits()),
            Scalar::F64 => Operand::F64(as_f64.to_bits()),
            Scalar::F16 => Operand::Int(f16_bits(as_f64 as f32) as i128),
            Scalar::Bf16 => Operand::Int(bf16_bits(as_f64 as f32) as i128),
            _ => match c {
                ConstVal::Int(i) => Operand::Int(wrap_int(*i, s)),
                ConstVal::Bool(b) => Operand::Int(*b as i128),
                _ => Operand::Int(as_f64 as i128),
            },
        }
    }

    /// The value as a register (constants are moved into one).
    pub(super) fn in_reg(&mut self, v: &Val, span: Span) -> Option<crate::ptx::Reg> {
        match v {
            Val::Reg(r, _) => Some(*r),
            Val::Imm(_, s) => {
                let r = self.reg(s.reg_class());
                self.mov_into(r, *s, v, span);
                Some(r)
            }
            _ => None,
        }
    }

    /// The value as an operand: a register, or an immediate where PTX takes one (integers,
    /// f32, f64); halves and predicates are put into registers.
    pub(super) fn operand(&mut self, v: &Val, span: Span) -> Operand {
        match v {
            Val::Imm(c, s)
                if (s.is_int() || matches!(s, Scalar::F32 | Scalar::F64)) && !s.is_byte() =>
            {
                self.imm(c, *s)
            }
            _ => self
                .in_reg(v, span)
                .map(Operand::Reg)
                .unwrap_or(Operand::Int(0)),
        }
    }

    pub(super) fn scalar_of(v: &Val) -> Option<Scalar> {
        match v {
            Val::Reg(_, s) | Val::Imm(_, s) => Some(*s),
            _ => None,
        }
    }

    /// `dst = op(args)` with a fresh destination of type `to`.
    pub(super) fn op_to(&mut self, op: Op, to: Scalar, args: Vec<Operand>, span: Span) -> Val {
        let d = self.reg(to.reg_class());
        let mut all = vec![Operand::Reg(d)];
        all.extend(args);
        self.emit(op, all, span);
        Val::Reg(d, to)
    }

    pub(super) fn unary(&mut self, op: UnOp, v: Val, span: Span) -> Val {
        let Some(s) = Self::scalar_of(&v) else {
            return Val::Unit;
        };
        let kind = if op == UnOp::Neg {
            UnKind::Neg
        } else {
            UnKind::Not
        };
        if s.is_byte() {
            if let Val::Imm(ConstVal::Int(c), _) = v {
                let r = if op == UnOp::Neg { -c } else { !c };
                return Val::Imm(ConstVal::Int(wrap_int(r, s)), s);
            }
            let w = wide16(s);
            let x = self.un(kind, w, retag(v, w), span);
            return self.wrap_byte(x, s, span);
        }
        self.un(kind, s, v, span)
    }

    /// A 16-bit result as the 8-bit integer `s`: its low byte, extended again (`cvt.u16.u8`,
    /// `cvt.s16.s8`).
    fn wrap_byte(&mut self, v: Val, s: Scalar, span: Span) -> Val {
        match v {
            Val::Imm(ConstVal::Int(c), _) => Val::Imm(ConstVal::Int(wrap_int(c, s)), s),
            Val::Reg(r, _) => {
                let w = wide16(s);
                self.op_to(Op::Cvt { to: w, from: s }, s, vec![r.into()], span)
            }
            other => other,
        }
    }

    /// A unary operation, through f32 where the target lacks the half-precision form.
    pub(super) fn un(&mut self, kind: UnKind, s: Scalar, v: Val, span: Span) -> Val {
        let op = Op::Un(kind, s);
        if !ptx::available(&op, self.v.target.sm)
            && (s.is_float() || s.is_packed())
            && s != Scalar::F32
            && s != Scalar::F64
        {
            return self.via_f32(s, &[v], span, &|lw, args| {
                lw.un(kind, Scalar::F32, args[0].clone(), span)
            });
        }
        let a = self.operand_reg(&v, span);
        self.op_to(op, s, vec![a], span)
    }

    pub(super) fn operand_reg(&mut self, v: &Val, span: Span) -> Operand {
        self.in_reg(v, span)
            .map(Operand::Reg)
            .unwrap_or(Operand::Int(0))
    }

    /// Computes a half-precision operation in f32: converts the operands, applies `f`, rounds
    /// back. Packed pairs are split, computed per half and packed again.
    pub(super) fn via_f32(
        &mut self,
        s: Scalar,
        args: &[Val],
        span: Span,
        f: &dyn Fn(&mut Self, &[Val]) -> Val,
    ) -> Val {
        if let Some(elem) = s.packed_elem() {
            let mut halves: Vec<Vec<Val>> = vec![Vec::new(), Vec::new()];
            for a in args {
                let (lo, hi) = self.unpack(a, elem, span);
                halves[0].push(lo);
                halves[1].push(hi);
            }
            let lo = self.via_f32(elem, &halves[0], span, f);
            let hi = self.via_f32(elem, &halves[1], span, f);
            return self.pack(&lo, &hi, s, span);
        }
        let wide: Vec<Val> = args
            .iter()
            .map(|a| self.cast(a.clone(), Scalar::F32, span))
            .collect();
        let r = f(self, &wide);
        match Self::scalar_of(&r) {
            Some(Scalar::F32) => self.cast(r, s, span),
            _ => r,
        }
    }

    pub(super) fn unpack(&mut self, v: &Val, elem: Scalar, span: Span) -> (Val, Val) {
        let w = self.operand_reg(v, span);
        let lo = self.reg(RegClass::B16);
        let hi = self.reg(RegClass::B16);
        self.emit(
            Op::MovBits(32),
            vec![Operand::Vec(vec![lo.into(), hi.into()]), w],
            span,
        );
        (Val::Reg(lo, elem), Val::Reg(hi, elem))
    }

    pub(super) fn pack(&mut self, lo: &Val, hi: &Val, s: Scalar, span: Span) -> Val {
        let a = self.operand_reg(lo, span);
        let b = self.operand_reg(hi, span);
        let d = self.reg(RegClass::B32);
        self.emit(
            Op::MovBits(32),
            vec![d.into(), Operand::Vec(vec![a, b])],
            span,
        );
        Val::Reg(d, s)
    }

    pub(super) fn binary_expr(&mut self, op: BinOp, l: &TExpr, r: &TExpr, span: Span) -> Val {
        if matches!(op, BinOp::LogicAnd | BinOp::LogicOr) && !is_simple(r) {
            // Short circuit: the right side may read memory that the left side guards.
            let lv = self.expr(l);
            let res = self.reg(RegClass::Pred);
            self.mov_into(res, Scalar::Bool, &lv, span);
            let skip = self.label();
            let neg = op == BinOp::LogicAnd;
            self.body.push(crate::ptx::Item::Inst {
                pred: Some((res, neg)),
                op: Op::Bra,
                args: vec![Operand::Label(skip)],
            });
            let rv = self.expr(r);
            self.mov_into(res, Scalar::Bool, &rv, span);
            self.body.push(crate::ptx::Item::Label(skip));
            return Val::Reg(res, Scalar::Bool);
        }
        let lv = self.expr(l);
        let rv = self.expr(r);
        let v = self.binary(op, lv.clone(), rv.clone(), span);
        // `i + k` (unsigned, `k` a constant): facts on `i` prove accesses at `(i + k) + j`.
        if op == BinOp::Add {
            self.note_offset(&v, &lv, &rv);
        }
        // `a & m` is at most `a` (unsigned): a bound for bounds-check elision.
        if op == BinOp::And && Self::scalar_of(&v).is_some_and(|s| s.is_int() && !s.is_signed()) {
            self.assume_at_most(&v, l);
            self.assume_at_most(&v, r);
        }
        v
    }

    /// `l op r` on lowered values (constants fold).
    pub(super) fn binary(&mut self, op: BinOp, l: Val, r: Val, span: Span) -> Val {
        let (Some(s), Some(rs)) = (Self::scalar_of(&l), Self::scalar_of(&r)) else {
            return Val::Unit;
        };
        if let (Val::Imm(a, _), Val::Imm(b, _)) = (&l, &r) {
            if let Ok(Some(c)) = crate::check::fold(op, &Ty::Scalar(s), a, b) {
                let ty = if op.is_cmp() { Scalar::Bool } else { s };
                return Val::Imm(c, ty);
            }
        }
        // Integer identities (`i + 0`, `i * 1`, `i << 0`) leave the operand as it is.
        if s.is_int() {
            let is = |v: &Val, x: i128| matches!(v, Val::Imm(ConstVal::Int(k), _) if *k == x);
            match op {
                BinOp::Add | BinOp::Sub | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr
                    if is(&r, 0) =>
                {
                    return l
                }
                BinOp::Add | BinOp::Or | BinOp::Xor if is(&l, 0) => return r,
                BinOp::Mul | BinOp::Div if is(&r, 1) => return l,
                BinOp::Mul if is(&l, 1) => return r,
                _ => {}
            }
        }
        if s == Scalar::Bool {
            // `true && c` is `c` (a test a fact proved, `x.is_aligned(16)`, folds away).
            let t = |v: &Val| matches!(v, Val::Imm(ConstVal::Bool(true), _));
            if matches!(op, BinOp::And | BinOp::LogicAnd) {
                if t(&l) {
                    return r;
                }
                if t(&r) {
                    return l;
                }
            }
            let (a, b) = (self.operand_reg(&l, span), self.operand_reg(&r, span));
            let k = match op {
                BinOp::And | BinOp::LogicAnd => BinKind::And,
                BinOp::Or | BinOp::LogicOr => BinKind::Or,
                _ => BinKind::Xor,
            };
            let x = self.op_to(Op::Bin(k, Scalar::Bool), Scalar::Bool, vec![a, b], span);
            if op == BinOp::Eq {
                return self.un(UnKind::Not, Scalar::Bool, x, span);
            }
            return x;
        }
        if s.is_byte() {
            // 8-bit integers live extended to 16 bits (zero for u8, sign for i8): computed
            // at 16 bits, results wrap back to 8 (shifts by 8 or more give 0 or the sign).
            let w = wide16(s);
            let l = retag(l, w);
            let r = if matches!(op, BinOp::Shl | BinOp::Shr) {
                r
            } else {
                retag(r, w)
            };
            let v = self.binary(op, l, r, span);
            return if op.is_cmp() {
                v
            } else {
                self.wrap_byte(v, s, span)
            };
        }
        if op.is_cmp() {
            let cmp = match op {
                BinOp::Eq => CmpKind::Eq,
                BinOp::Ne if s.is_float() => CmpKind::Neu,
                BinOp::Ne => CmpKind::Ne,
                BinOp::Lt => CmpKind::Lt,
                BinOp::Le => CmpKind::Le,
                BinOp::Gt => CmpKind::Gt,
                _ => CmpKind::Ge,
            };
            let setp = Op::Setp(cmp, s);
            if !ptx::available(&setp, self.v.target.sm) && s.is_float() {
                let a = self.cast(l, Scalar::F32, span);
                let b = self.cast(r, Scalar::F32, span);
                return self.binary(op, a, b, span);
            }
            if let (Val::Imm(..), Val::Reg(..)) = (&l, &r) {
                let flipped = match cmp {
                    CmpKind::Lt => CmpKind::Gt,
                    CmpKind::Le => CmpKind::Ge,
                    CmpKind::Gt => CmpKind::Lt,
                    CmpKind::Ge => CmpKind::Le,
                    c => c,
                };
                let a = self.operand_reg(&r, span);
                let b = self.operand(&l, span);
                return self.op_to(Op::Setp(flipped, s), Scalar::Bool, vec![a, b], span);
            }
            let a = self.operand_reg(&l, span);
            let b = self.operand(&r, span);
            return self.op_to(setp, Scalar::Bool, vec![a, b], span);
        }
        let kind = match op {
            BinOp::Add => BinKind::Add,
            BinOp::Sub => BinKind::Sub,
            BinOp::Mul => BinKind::Mul,
            BinOp::Div => BinKind::Div,
            BinOp::Rem => BinKind::Rem,
            BinOp::And => BinKind::And,
            BinOp::Or => BinKind::Or,
            BinOp::Xor => BinKind::Xor,
            BinOp::Shl => BinKind::Shl,
            _ => BinKind::Shr,
        };
        if matches!(kind, BinKind::Shl | BinKind::Shr) {
            // PTX shift amounts are u32.
            let amount = if rs == Scalar::U32 {
                r
            } else {
                self.cast(r, Scalar::U32, span)
            };
            let a = self.operand_reg(&l, span);
            let b = self.operand(&amount, span);
            return self.op_to(Op::Bin(kind, s), s, vec![a, b], span);
        }
        // An unsigned division or remainder by a power of two is a shift or a mask (ptxas does
        // not always find it: `div.u32 r, x, 16` can become a full division sequence).
        if let (BinKind::Div | BinKind::Rem, Val::Imm(ConstVal::Int(c), _)) = (kind, &r) {
            if s.is_int() && !s.is_signed() && !s.is_byte() && *c > 0 && (*c & (*c - 1)) == 0 {
                let a = self.operand_reg(&l, span);
                return if kind == BinKind::Div {
                    let sh = Operand::Int(c.trailing_zeros() as i128);
                    self.op_to(Op::Bin(BinKind::Shr, s), s, vec![a, sh], span)
                } else {
                    self.op_to(
                        Op::Bin(BinKind::And, s),
                        s,
                        vec![a, Operand::Int(c - 1)],
                        span,
                    )
                };
            }
        }
        self.bin(kind, s, l, r, span)
    }

    /// A binary operation of the tables, through f32 where the target lacks the half form.
    pub(super) fn bin(&mut self, kind: BinKind, s: Scalar, l: Val, r: Val, span: Span) -> Val {
        let op = Op::Bin(kind, s);
        if !ptx::available(&op, self.v.target.sm)
            && (s.is_packed() || matches!(s, Scalar::F16 | Scalar::Bf16))
        {
            return self.via_f32(s, &[l, r], span, &|lw, a| {
                lw.bin(kind, Scalar::F32, a[0].clone(), a[1].clone(), span)
            });
        }
        // Immediates go second, where PTX takes them.
        let (l, r) = match (&l, &r, kind) {
            (
                Val::Imm(..),
                Val::Reg(..),
                BinKind::Add
                | BinKind::Mul
                | BinKind::And
                | BinKind::Or
                | BinKind::Xor
                | BinKind::Min
                | BinKind::Max,
            ) => (r, l),
            _ => (l, r),
        };
        let a = self.operand_reg(&l, span);
        let b = self.operand(&r, span);
        self.op_to(op, s, vec![a, b], span)
    }

    /// `v as to`.
    pub(super) fn cast(&mut self, v: Val, to: Scalar, span: Span) -> Val {
        let Some(from) = Self::scalar_of(&v) else {
            return Val::Unit;
        };
        if from == to {
            return v;
        }
        if let Val::Imm(c, _) = &v {
            let folded = match (c, to.is_float(), to.is_int()) {
                (ConstVal::Int(i), true, _) => Some(ConstVal::Float(if to == Scalar::F32 {
                    *i as f32 as f64
                } else {
                    *i as f64
                })),
                (ConstVal::Int(i), _, true) => Some(ConstVal::Int(wrap_int(*i, to))),
                (ConstVal::Float(f), true, _) => Some(ConstVal::Float(*f)),
                _ => None,
            };
            if let Some(c) = folded {
                return Val::Imm(c, to);
            }
        }
        if from == Scalar::Bool {
            let p = self.operand_reg(&v, span);
            let one = self.op_to(
                Op::Selp(Scalar::U32),
                Scalar::U32,
                vec![Operand::Int(1), Operand::Int(0), p],
                span,
            );
            return self.cast(one, to, span);
        }
        // Same-size integers share their bits.
        if from.is_int() && to.is_int() && from.bytes() == to.bytes() && !from.is_byte() {
            let r = self.operand_reg(&v, span);
            return match r {
                Operand::Reg(r) => Val::Reg(r, to),
                _ => Val::Unit,
            };
        }
        // bf16 -> f32 is exact by shifting; other bf16 conversions go through f32.
        if from == Scalar::Bf16 {
            let cvt = Op::Cvt {
                to: Scalar::F32,
                from,
            };
            // The shift is exact and needs no newer PTX ISA; sm_90 has the one instruction.
            let wide = if self.v.target.sm >= 90 && ptx::available(&cvt, self.v.target.sm) {
                let a = self.operand_reg(&v, span);
                self.op_to(cvt, Scalar::F32, vec![a], span)
            } else {
                let a = self.operand_reg(&v, span);
                let w = self.op_to(
                    Op::Cvt {
                        to: Scalar::U32,
                        from: Scalar::U16,
                    },
                    Scalar::U32,
                    vec![a],
                    span,
                );
                let wo = self.operand_reg(&w, span);
                let sh = self.op_to(
                    Op::Bin(BinKind::Shl, Scalar::U32),
                    Scalar::U32,
                    vec![wo, Operand::Int(16)],
                    span,
                );
                let so = self.operand_reg(&sh, span);
                self.op_to(Op::MovBits(32), Scalar::F32, vec![so], span)
            };
            return self.cast(wide, to, span);
        }
        if to == Scalar::Bf16 && from != Scalar::F32 {
            let cvt = Op::Cvt { to, from };
            if !ptx::available(&cvt, self.v.target.sm) {
                let wide = self.cast(v, Scalar::F32, span);
                return self.cast(wide, to, span);
            }
        }
        // f16 -> 8-bit saturates through f32 (as Rust's `as`); 8-bit -> f16 is exact through i32.
        if from == Scalar::F16 && to.is_byte() {
            let m = self.cast(v, Scalar::F32, span);
            return self.cast(m, to, span);
        }
        if to == Scalar::F16 && from.is_byte() {
            let m = self.cast(v, Scalar::I32, span);
            return self.cast(m, to, span);
        }
        // f16 -> integer goes through f32 (exact), where the NaN guard below applies.
        if from == Scalar::F16 && to.is_int() {
            let m = self.cast(v, Scalar::F32, span);
            return self.cast(m, to, span);
        }
        let a = self.operand_reg(&v, span);
        let converted = self.op_to(Op::Cvt { to, from }, to, vec![a.clone()], span);
        // Rust's `as` turns NaN into 0; the device does not always (an sm_90 gives the most
        // negative value for f32 -> s64 and f64 -> s8), so every float -> integer cast selects 0.
        if matches!(from, Scalar::F32 | Scalar::F64) && to.is_int() {
            let nan = self.op_to(Op::IsNan(from), Scalar::Bool, vec![a], span);
            let p = self.operand_reg(&nan, span);
            let c = self.operand_reg(&converted, span);
            return self.op_to(Op::Selp(to), to, vec![Operand::Int(0), c, p], span);
        }
        converted
    }
}

/// The 16-bit type an 8-bit integer computes in.
fn wide16(s: Scalar) -> Scalar {
    if s.is_signed() {
        Scalar::I16
    } else {
        Scalar::U16
    }
}

/// `v` as a value of type `s` (the same register or constant).
fn retag(v: Val, s: Scalar) -> Val {
    match v {
        Val::Reg(r, _) => Val::Reg(r, s),
        Val::Imm(c, _) => Val::Imm(c, s),
        other => other,
    }
}

/// Whether evaluating `e` can neither fault nor have effects (so `&&` / `||` need no branch).
fn is_simple(e: &TExpr) -> bool {
    match &e.kind {
        TKind::Const(_) | TKind::Var(_) => true,
        TKind::Unary(_, a) | TKind::Cast(a) => is_simple(a),
        TKind::Binary(op, a, b) => {
            !matches!(op, BinOp::Div | BinOp::Rem) && is_simple(a) && is_simple(b)
        }
        TKind::Intr {
            intr: Intr::Special(_),
            ..
        } => true,
        TKind::Mem {
            op: crate::check::MemOp::IsAligned(_),
            ..
        } => true,
        _ => false,
    }
}

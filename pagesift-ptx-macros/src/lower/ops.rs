//! Lowering of operations: arithmetic, conversions, memory accesses and intrinsics, with the
//! rewrites for forms a target lacks (half-precision arithmetic through f32).

use super::{addr, mem_scalar, Lower, Store, Val};
use crate::check::{Intr, MemOp, ShflKind, Special, TExpr, TKind, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::{BinOp, UnOp};
use crate::ptx::{self, BinKind, CmpKind, Op, Operand, Space, UnKind};
use crate::types::{bf16_bits, f16_bits, wrap_int, ConstVal, RegClass, Scalar, Ty};

const FULL_MASK: i128 = 0xffff_ffff;

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

    fn scalar_of(v: &Val) -> Option<Scalar> {
        match v {
            Val::Reg(_, s) | Val::Imm(_, s) => Some(*s),
            _ => None,
        }
    }

    /// `dst = op(args)` with a fresh destination of type `to`.
    fn op_to(&mut self, op: Op, to: Scalar, args: Vec<Operand>, span: Span) -> Val {
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
        self.un(kind, s, v, span)
    }

    /// A unary operation, through f32 where the target lacks the half-precision form.
    fn un(&mut self, kind: UnKind, s: Scalar, v: Val, span: Span) -> Val {
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

    fn operand_reg(&mut self, v: &Val, span: Span) -> Operand {
        self.in_reg(v, span)
            .map(Operand::Reg)
            .unwrap_or(Operand::Int(0))
    }

    /// Computes a half-precision operation in f32: converts the operands, applies `f`, rounds
    /// back. Packed pairs are split, computed per half and packed again.
    fn via_f32(
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
        self.binary(op, lv, rv, span)
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
        if s == Scalar::Bool {
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
                (ConstVal::Int(i), true, _) => Some(ConstVal::Float(*i as f64)),
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
            let wide = if ptx::available(&cvt, self.v.target.sm) {
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
        if (from == Scalar::F16 && to.is_int() && to.is_byte())
            || (to == Scalar::F16 && from.is_byte())
        {
            let m = self.cast(v, Scalar::I32, span);
            return self.cast(m, to, span);
        }
        let a = self.operand_reg(&v, span);
        self.op_to(Op::Cvt { to, from }, to, vec![a], span)
    }

    /// Address of element `index` of a slice or shared array: (space, address operand, elem).
    pub(super) fn elem_addr(
        &mut self,
        store: &Store,
        index: &TExpr,
        span: Span,
    ) -> (Space, Operand, Scalar) {
        // `base[i + k]` with constant `k` uses the address offset.
        let (index, k) = match &index.kind {
            TKind::Binary(BinOp::Add, a, b) => match &b.kind {
                TKind::Const(ConstVal::Int(k)) if k.abs() < (1 << 20) => (&**a, *k),
                _ => (index, 0),
            },
            _ => (index, 0),
        };
        let i = self.expr(index);
        self.elem_addr_val(store, &i, k, span)
    }

    pub(super) fn elem_addr_val(
        &mut self,
        store: &Store,
        i: &Val,
        k: i128,
        span: Span,
    ) -> (Space, Operand, Scalar) {
        let (elem, space) = match store {
            Store::Global(_, e) => (*e, Space::Global),
            Store::Shared(_, e) => (*e, Space::Shared),
            Store::Value(_) => return (Space::Global, Operand::Int(0), Scalar::U32),
        };
        let size = elem.bytes() as i128;
        let s = Self::scalar_of(i).unwrap_or(Scalar::U32);
        if let Val::Imm(ConstVal::Int(c), _) = i {
            let off = ((c + k) * size) as i64;
            let base = match store {
                Store::Global(r, _) => Operand::Reg(*r),
                Store::Shared(sym, _) => Operand::Name(sym.clone()),
                Store::Value(_) => Operand::Int(0),
            };
            return (space, addr(base, off), elem);
        }
        let off = (k * size) as i64;
        match store {
            Store::Global(base, _) => {
                let scaled = match s {
                    Scalar::U32 | Scalar::I32 => {
                        let a = self.operand_reg(i, span);
                        self.op_to(
                            Op::MulWide {
                                signed: s == Scalar::I32,
                            },
                            Scalar::U64,
                            vec![a, Operand::Int(size)],
                            span,
                        )
                    }
                    _ => {
                        let wide = self.cast(
                            i.clone(),
                            if s.is_signed() {
                                Scalar::I64
                            } else {
                                Scalar::U64
                            },
                            span,
                        );
                        let a = self.operand_reg(&wide, span);
                        self.op_to(
                            Op::Bin(BinKind::Mul, Scalar::U64),
                            Scalar::U64,
                            vec![a, Operand::Int(size)],
                            span,
                        )
                    }
                };
                let so = self.operand_reg(&scaled, span);
                let sum = self.op_to(
                    Op::Bin(BinKind::Add, Scalar::U64),
                    Scalar::U64,
                    vec![Operand::Reg(*base), so],
                    span,
                );
                (space, addr(self.operand_reg(&sum, span), off), elem)
            }
            Store::Shared(sym, _) => {
                let idx = if s.bytes() == 4 {
                    i.clone()
                } else {
                    self.cast(i.clone(), Scalar::U32, span)
                };
                let a = self.operand_reg(&idx, span);
                let base = self.op_to(
                    Op::Mov(Scalar::U32),
                    Scalar::U32,
                    vec![Operand::Name(sym.clone())],
                    span,
                );
                let bo = self.operand_reg(&base, span);
                let sum = self.op_to(
                    Op::Fma(Scalar::U32),
                    Scalar::U32,
                    vec![a, Operand::Int(size), bo],
                    span,
                );
                (space, addr(self.operand_reg(&sum, span), off), elem)
            }
            Store::Value(_) => (space, Operand::Int(0), elem),
        }
    }

    pub(super) fn load(
        &mut self,
        space: Space,
        elem: Scalar,
        a: Operand,
        nc: bool,
        span: Span,
    ) -> Val {
        let op = Op::Ld {
            space,
            ty: mem_scalar_signed(elem),
            vec: 1,
            nc,
        };
        self.op_to(op, elem, vec![a], span)
    }

    pub(super) fn store(&mut self, space: Space, elem: Scalar, a: Operand, v: &Val, span: Span) {
        let x = self.operand_reg(v, span);
        self.emit(
            Op::St {
                space,
                ty: mem_scalar(elem),
                vec: 1,
            },
            vec![a, x],
            span,
        );
    }

    pub(super) fn index_load(&mut self, base: VarId, index: &TExpr, span: Span) -> Val {
        match self.vars.get(&base).cloned() {
            Some(Store::Value(Val::Arr(items))) => {
                let i = self.expr(index);
                match self.const_index(&i, items.len(), index.span) {
                    Some(k) => items[k].clone(),
                    None => Val::Unit,
                }
            }
            Some(store @ (Store::Global(..) | Store::Shared(..))) => {
                let (space, a, elem) = self.elem_addr(&store, index, span);
                self.load(space, elem, a, false, span)
            }
            _ => Val::Unit,
        }
    }

    pub(super) fn intrinsic(&mut self, intr: Intr, args: &[TExpr], ty: &Ty, span: Span) -> Val {
        let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
        let rs = match ty {
            Ty::Scalar(s) => *s,
            _ => Scalar::U32,
        };
        let s0 = vals.first().and_then(Self::scalar_of).unwrap_or(rs);
        let special = |name: &str| Operand::Name(name.to_string());
        let xyz = |d: u8| ["x", "y", "z"][d as usize];
        match intr {
            Intr::Special(sp) => {
                let name = match sp {
                    Special::Tid(d) => format!("%tid.{}", xyz(d)),
                    Special::Ctaid(d) => format!("%ctaid.{}", xyz(d)),
                    Special::Nctaid(d) => format!("%nctaid.{}", xyz(d)),
                    Special::LaneId => "%laneid".to_string(),
                };
                self.op_to(
                    Op::Mov(Scalar::U32),
                    Scalar::U32,
                    vec![special(&name)],
                    span,
                )
            }
            Intr::WarpId => {
                let [bx, by, _] = self.v.block;
                let tx = self.op_to(
                    Op::Mov(Scalar::U32),
                    Scalar::U32,
                    vec![special("%tid.x")],
                    span,
                );
                let mut lin = tx;
                if self.v.block[1] > 1 || self.v.block[2] > 1 {
                    let ty_ = self.op_to(
                        Op::Mov(Scalar::U32),
                        Scalar::U32,
                        vec![special("%tid.y")],
                        span,
                    );
                    let tz = self.op_to(
                        Op::Mov(Scalar::U32),
                        Scalar::U32,
                        vec![special("%tid.z")],
                        span,
                    );
                    let yz = {
                        let (a, b) = (self.operand_reg(&tz, span), self.operand_reg(&ty_, span));
                        self.op_to(
                            Op::Fma(Scalar::U32),
                            Scalar::U32,
                            vec![a, Operand::Int(by as i128), b],
                            span,
                        )
                    };
                    let (a, b) = (self.operand_reg(&yz, span), self.operand_reg(&lin, span));
                    lin = self.op_to(
                        Op::Fma(Scalar::U32),
                        Scalar::U32,
                        vec![a, Operand::Int(bx as i128), b],
                        span,
                    );
                }
                let l = self.operand_reg(&lin, span);
                self.op_to(
                    Op::Bin(BinKind::Shr, Scalar::U32),
                    Scalar::U32,
                    vec![l, Operand::Int(5)],
                    span,
                )
            }
            Intr::SyncThreads => {
                self.emit(Op::BarSync, vec![Operand::Int(0)], span);
                Val::Unit
            }
            Intr::Shfl(k) => {
                let v = self.operand_reg(&vals[0], span);
                let l = self.operand(&vals[1], span);
                let c = if k == ShflKind::Up { 0 } else { 0x1f };
                self.op_to(
                    Op::Shfl(k),
                    rs,
                    vec![v, l, Operand::Int(c), Operand::Int(FULL_MASK)],
                    span,
                )
            }
            Intr::Vote(k) => {
                let p = self.operand_reg(&vals[0], span);
                self.op_to(Op::Vote(k), rs, vec![p, Operand::Int(FULL_MASK)], span)
            }
            Intr::Abs => self.un(UnKind::Abs, s0, vals[0].clone(), span),
            Intr::Min => self.bin(BinKind::Min, s0, vals[0].clone(), vals[1].clone(), span),
            Intr::Max => self.bin(BinKind::Max, s0, vals[0].clone(), vals[1].clone(), span),
            Intr::MulHi => self.bin(BinKind::MulHi, s0, vals[0].clone(), vals[1].clone(), span),
            // PTX `copysign d, a, b` gives b's magnitude with a's sign.
            Intr::CopySign => self.bin(
                BinKind::CopySign,
                s0,
                vals[1].clone(),
                vals[0].clone(),
                span,
            ),
            Intr::Fma => self.fma(s0, &vals, span),
            Intr::Sqrt => self.un(UnKind::Sqrt, s0, vals[0].clone(), span),
            Intr::SqrtFast => self.un(UnKind::SqrtApprox, s0, vals[0].clone(), span),
            Intr::RsqrtFast => self.un(UnKind::RsqrtApprox, s0, vals[0].clone(), span),
            Intr::Recip => self.un(UnKind::Rcp, s0, vals[0].clone(), span),
            Intr::RecipFast => self.un(UnKind::RcpApprox, s0, vals[0].clone(), span),
            Intr::Exp2Fast => self.un(UnKind::Ex2Approx, s0, vals[0].clone(), span),
            Intr::Log2Fast => self.un(UnKind::Lg2Approx, s0, vals[0].clone(), span),
            Intr::TanhFast => self.un(UnKind::TanhApprox, s0, vals[0].clone(), span),
            Intr::SinFast => self.un(UnKind::SinApprox, s0, vals[0].clone(), span),
            Intr::CosFast => self.un(UnKind::CosApprox, s0, vals[0].clone(), span),
            Intr::Floor => self.un(UnKind::Floor, s0, vals[0].clone(), span),
            Intr::Ceil => self.un(UnKind::Ceil, s0, vals[0].clone(), span),
            Intr::RoundEven => self.un(UnKind::RoundEven, s0, vals[0].clone(), span),
            Intr::Trunc => self.un(UnKind::Trunc, s0, vals[0].clone(), span),
            Intr::IsNan => {
                let a = self.operand_reg(&vals[0], span);
                self.op_to(Op::IsNan(s0), Scalar::Bool, vec![a], span)
            }
            Intr::Popc | Intr::Clz => {
                let k = if intr == Intr::Popc {
                    UnKind::Popc
                } else {
                    UnKind::Clz
                };
                let a = self.operand_reg(&vals[0], span);
                self.op_to(Op::Un(k, s0), Scalar::U32, vec![a], span)
            }
            Intr::BitCast => {
                if let Val::Imm(c, _) = &vals[0] {
                    if let Some(v) = fold_bitcast(c, s0, rs) {
                        return v;
                    }
                }
                let a = self.operand_reg(&vals[0], span);
                if s0.reg_class() == rs.reg_class() {
                    return match a {
                        Operand::Reg(r) => Val::Reg(r, rs),
                        _ => Val::Unit,
                    };
                }
                self.op_to(Op::MovBits(rs.bytes() * 8), rs, vec![a], span)
            }
            Intr::Pack => self.pack(&vals[0], &vals[1], rs, span),
            Intr::Lo | Intr::Hi => {
                let (lo, hi) = self.unpack(&vals[0], rs, span);
                if intr == Intr::Lo {
                    lo
                } else {
                    hi
                }
            }
        }
    }

    fn fma(&mut self, s: Scalar, vals: &[Val], span: Span) -> Val {
        let op = Op::Fma(s);
        if !ptx::available(&op, self.v.target.sm)
            && (s.is_packed() || matches!(s, Scalar::F16 | Scalar::Bf16))
        {
            return self.via_f32(s, vals, span, &|lw, a| lw.fma(Scalar::F32, a, span));
        }
        let a = self.operand_reg(&vals[0], span);
        let b = self.operand(&vals[1], span);
        let c = self.operand(&vals[2], span);
        self.op_to(op, s, vec![a, b, c], span)
    }

    pub(super) fn mem_op(&mut self, op: MemOp, base: VarId, args: &[TExpr], span: Span) -> Val {
        let Some(store) = self.vars.get(&base).cloned() else {
            return Val::Unit;
        };
        let (space, a, elem) = self.elem_addr(&store, &args[0], span);
        match op {
            MemOp::LoadNc => self.load(space, elem, a, true, span),
            MemOp::LoadVec { n, nc } => self.load_vec(space, elem, n, a, nc, span),
            MemOp::StoreVec { n } => {
                let v = self.expr(&args[1]);
                self.store_vec(space, elem, n, a, &v, span);
                Val::Unit
            }
            MemOp::Atomic(kind) => {
                let vals: Vec<Val> = args[1..].iter().map(|x| self.expr(x)).collect();
                let mut ops = vec![a];
                for v in &vals {
                    let o = self.operand(v, span);
                    ops.push(o);
                }
                self.op_to(
                    Op::Atom {
                        space,
                        kind,
                        ty: elem,
                    },
                    elem,
                    ops,
                    span,
                )
            }
        }
    }

    fn load_vec(
        &mut self,
        space: Space,
        elem: Scalar,
        n: u32,
        a: Operand,
        nc: bool,
        span: Span,
    ) -> Val {
        if elem.bytes() >= 4 {
            let regs: Vec<_> = (0..n).map(|_| self.reg(elem.reg_class())).collect();
            let dst = Operand::Vec(regs.iter().map(|r| Operand::Reg(*r)).collect());
            self.emit(
                Op::Ld {
                    space,
                    ty: mem_scalar(elem),
                    vec: n as u8,
                    nc,
                },
                vec![dst, a],
                span,
            );
            return Val::Arr(regs.into_iter().map(|r| Val::Reg(r, elem)).collect());
        }
        let words = (n * elem.bytes() / 4) as u8;
        let regs: Vec<_> = (0..words).map(|_| self.reg(RegClass::B32)).collect();
        let dst = if words == 1 {
            Operand::Reg(regs[0])
        } else {
            Operand::Vec(regs.iter().map(|r| Operand::Reg(*r)).collect())
        };
        self.emit(
            Op::Ld {
                space,
                ty: Scalar::U32,
                vec: words,
                nc,
            },
            vec![dst, a],
            span,
        );
        let mut out = Vec::new();
        for w in regs {
            let wv = Val::Reg(w, Scalar::U32);
            if elem.bytes() == 2 {
                let (lo, hi) = self.unpack(&wv, elem, span);
                out.push(lo);
                out.push(hi);
            } else {
                for k in 0..4 {
                    let x = self.op_to(
                        Op::Bfe {
                            signed: elem.is_signed(),
                        },
                        Scalar::U32,
                        vec![w.into(), Operand::Int(8 * k), Operand::Int(8)],
                        span,
                    );
                    let xo = self.operand_reg(&x, span);
                    let b = self.op_to(
                        Op::Cvt {
                            to: Scalar::U16,
                            from: Scalar::U32,
                        },
                        elem,
                        vec![xo],
                        span,
                    );
                    out.push(b);
                }
            }
        }
        Val::Arr(out)
    }

    fn store_vec(&mut self, space: Space, elem: Scalar, n: u32, a: Operand, v: &Val, span: Span) {
        let Val::Arr(items) = v else { return };
        if elem.bytes() >= 4 {
            let srcs: Vec<Operand> = items.iter().map(|x| self.operand_reg(x, span)).collect();
            self.emit(
                Op::St {
                    space,
                    ty: mem_scalar(elem),
                    vec: n as u8,
                },
                vec![a, Operand::Vec(srcs)],
                span,
            );
            return;
        }
        let per_word = (4 / elem.bytes()) as usize;
        let mut words = Vec::new();
        for chunk in items.chunks(per_word) {
            if elem.bytes() == 2 {
                let w = self.pack(&chunk[0], &chunk[1], Scalar::U32, span);
                words.push(self.operand_reg(&w, span));
            } else {
                let mut acc: Option<Operand> = None;
                for (k, b) in chunk.iter().enumerate() {
                    let bo = self.operand_reg(b, span);
                    let wide = self.op_to(
                        Op::Cvt {
                            to: Scalar::U32,
                            from: Scalar::U16,
                        },
                        Scalar::U32,
                        vec![bo],
                        span,
                    );
                    let wo = self.operand_reg(&wide, span);
                    acc = Some(match acc {
                        None => wo,
                        Some(prev) => {
                            let r = self.op_to(
                                Op::Bfi,
                                Scalar::U32,
                                vec![wo, prev, Operand::Int(8 * k as i128), Operand::Int(8)],
                                span,
                            );
                            self.operand_reg(&r, span)
                        }
                    });
                }
                words.push(acc.unwrap_or(Operand::Int(0)));
            }
        }
        let src = if words.len() == 1 {
            words.remove(0)
        } else {
            Operand::Vec(words.clone())
        };
        let nw = words.len().max(1) as u8;
        self.emit(
            Op::St {
                space,
                ty: Scalar::U32,
                vec: nw,
            },
            vec![a, src],
            span,
        );
    }

    pub(super) fn asm(
        &mut self,
        template: &str,
        inputs: &[TExpr],
        out: Option<Scalar>,
        span: Span,
    ) -> Val {
        let vals: Vec<Val> = inputs.iter().map(|x| self.expr(x)).collect();
        let mut text = template.to_string();
        for (i, v) in vals.iter().enumerate() {
            let o = self.operand(v, span);
            text = text.replace(&format!("{{in{i}}}"), &operand_text(&o));
        }
        let result = out.map(|s| {
            let r = self.reg(s.reg_class());
            text = text.replace("{out}", &operand_text(&Operand::Reg(r)));
            Val::Reg(r, s)
        });
        self.emit(Op::Asm(text), vec![], span);
        result.unwrap_or(Val::Unit)
    }
}

fn operand_text(o: &Operand) -> String {
    match o {
        Operand::Reg(r) => format!("{}{}", r.class.decl().1, r.n),
        Operand::Int(v) => v.to_string(),
        Operand::F32(b) => format!("0f{b:08X}"),
        Operand::F64(b) => format!("0d{b:016X}"),
        _ => String::new(),
    }
}

/// The load type of a scalar: signed bytes sign-extend.
fn mem_scalar_signed(s: Scalar) -> Scalar {
    mem_scalar(s)
}

fn fold_bitcast(c: &ConstVal, from: Scalar, to: Scalar) -> Option<Val> {
    match (c, from, to) {
        (ConstVal::Int(i), Scalar::U32, Scalar::F32) => Some(Val::Imm(
            ConstVal::Float(f32::from_bits(*i as u32) as f64),
            to,
        )),
        (ConstVal::Float(f), Scalar::F32, Scalar::U32) => {
            Some(Val::Imm(ConstVal::Int((*f as f32).to_bits() as i128), to))
        }
        (ConstVal::Int(i), Scalar::U64, Scalar::F64) => {
            Some(Val::Imm(ConstVal::Float(f64::from_bits(*i as u64)), to))
        }
        (ConstVal::Float(f), Scalar::F64, Scalar::U64) => {
            Some(Val::Imm(ConstVal::Int(f.to_bits() as i128), to))
        }
        _ => None,
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
        _ => false,
    }
}

//! Memory: element addresses, loads and stores (scalar and vector), atomics.

use super::{addr, mem_scalar, Lower, Store, Val};
use crate::check::{MemOp, TExpr, TKind, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::BinOp;
use crate::ptx::{BinKind, Op, Operand, Space};
use crate::types::{ConstVal, RegClass, Scalar};

impl Lower<'_> {
    /// Address of element `index` of a slice or shared array: (space, address operand, elem).
    pub(super) fn elem_addr(
        &mut self,
        store: &Store,
        index: &TExpr,
        span: Span,
    ) -> (Space, Operand, Scalar) {
        // `base[i + k]` with `k` constant (after unrolling) uses the address offset; index
        // arithmetic is assumed not to wrap around.
        if let TKind::Binary(BinOp::Add, a, b) = &index.kind {
            let av = self.expr(a);
            let bv = self.expr(b);
            let small = |v: &Val| match v {
                Val::Imm(ConstVal::Int(k), _) if k.abs() < (1 << 20) => Some(*k),
                _ => None,
            };
            if let (Some(k), false) = (small(&bv), matches!(av, Val::Imm(..))) {
                return self.elem_addr_val(store, &av, k, span);
            }
            if let (Some(k), false) = (small(&av), matches!(bv, Val::Imm(..))) {
                return self.elem_addr_val(store, &bv, k, span);
            }
            let sum = self.binary(BinOp::Add, av, bv, span);
            return self.elem_addr_val(store, &sum, 0, span);
        }
        let i = self.expr(index);
        self.elem_addr_val(store, &i, 0, span)
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
            ty: mem_scalar(elem),
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

    pub(super) fn mem_op(&mut self, op: MemOp, base: VarId, args: &[TExpr], span: Span) -> Val {
        let Some(store) = self.vars.get(&base).cloned() else {
            return Val::Unit;
        };
        let (space, a, elem) = self.elem_addr(&store, &args[0], span);
        match op {
            MemOp::CpAsync { bytes, partial } => {
                let Some(src_store) = (match &args[1].kind {
                    TKind::Var(id) => self.vars.get(id).cloned(),
                    _ => None,
                }) else {
                    return Val::Unit;
                };
                let (_, src, _) = self.elem_addr(&src_store, &args[2], span);
                let mut ops = vec![a, src, Operand::Int(bytes as i128)];
                if partial {
                    let n = self.expr(&args[3]);
                    let o = self.operand(&n, span);
                    ops.push(o);
                }
                self.emit(Op::CpAsync { bytes }, ops, span);
                Val::Unit
            }
            MemOp::Ldmatrix { n, trans } => {
                let regs: Vec<_> = (0..n).map(|_| self.reg(RegClass::B32)).collect();
                let dst = Operand::Vec(regs.iter().map(|r| Operand::Reg(*r)).collect());
                self.emit(Op::Ldmatrix { n, trans }, vec![dst, a], span);
                Val::Arr(regs.into_iter().map(|r| Val::Reg(r, Scalar::U32)).collect())
            }
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

    pub(super) fn load_vec(
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

    pub(super) fn store_vec(
        &mut self,
        space: Space,
        elem: Scalar,
        n: u32,
        a: Operand,
        v: &Val,
        span: Span,
    ) {
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
}

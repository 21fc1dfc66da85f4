//! Intrinsics: special registers, barriers, shuffles, votes, math, bit casts, `asm!`.

use super::{Lower, Val};
use crate::check::{AsmPiece, Intr, ShflKind, Special, TExpr};
use crate::ctxt::Sp as Span;
use crate::ptx::{self, BinKind, Op, Operand, UnKind};
use crate::types::{ConstVal, RegClass, Scalar, Ty};

pub(super) const FULL_MASK: i128 = 0xffff_ffff;

impl Lower<'_> {
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
            Intr::SyncWarp => {
                let m = self.operand(&vals[0], span);
                self.emit(Op::BarWarpSync, vec![m], span);
                Val::Unit
            }
            Intr::Fence { sc, scope } => {
                self.emit(Op::Fence { sc, scope }, vec![], span);
                Val::Unit
            }
            Intr::Shfl(k) => {
                let v = self.operand_reg(&vals[0], span);
                let l = self.operand(&vals[1], span);
                let c = if k == ShflKind::Up { 0 } else { 0x1f };
                let shfl = |lw: &mut Self, v: Operand, to: Scalar| {
                    let ops = vec![v, l.clone(), Operand::Int(c), Operand::Int(FULL_MASK)];
                    lw.op_to(Op::Shfl(k), to, ops, span)
                };
                match rs.bytes() {
                    // 16 bits: zero-extended to 32, shuffled, narrowed again.
                    2 => {
                        let widen = Op::Cvt {
                            to: Scalar::U32,
                            from: Scalar::U16,
                        };
                        let w = self.op_to(widen, Scalar::U32, vec![v], span);
                        let wo = self.operand_reg(&w, span);
                        let r = shfl(self, wo, Scalar::U32);
                        let ro = self.operand_reg(&r, span);
                        let narrow = Op::Cvt {
                            to: Scalar::U16,
                            from: Scalar::U32,
                        };
                        self.op_to(narrow, rs, vec![ro], span)
                    }
                    // 64 bits: both 32-bit halves shuffled alike.
                    8 => {
                        let (lo, hi) = (self.reg(RegClass::B32), self.reg(RegClass::B32));
                        let halves = Operand::Vec(vec![lo.into(), hi.into()]);
                        self.emit(Op::MovBits(64), vec![halves, v], span);
                        let a = shfl(self, lo.into(), Scalar::U32);
                        let b = shfl(self, hi.into(), Scalar::U32);
                        let (ao, bo) = (self.operand_reg(&a, span), self.operand_reg(&b, span));
                        let d = self.reg(rs.reg_class());
                        self.emit(
                            Op::MovBits(64),
                            vec![d.into(), Operand::Vec(vec![ao, bo])],
                            span,
                        );
                        Val::Reg(d, rs)
                    }
                    _ => shfl(self, v, rs),
                }
            }
            Intr::Vote(k) => {
                let p = self.operand_reg(&vals[0], span);
                self.op_to(Op::Vote(k), rs, vec![p, Operand::Int(FULL_MASK)], span)
            }
            Intr::Elect => {
                // The leader's lane index is discarded (`_`): the predicate is the result.
                let p = self.reg(rs.reg_class());
                let pair = Operand::Pair(Box::new(Operand::Name("_".into())), Box::new(p.into()));
                self.emit(Op::Elect, vec![pair, Operand::Int(FULL_MASK)], span);
                Val::Reg(p, rs)
            }
            Intr::Abs => self.un(UnKind::Abs, s0, vals[0].clone(), span),
            Intr::Min => {
                let m = self.bin(BinKind::Min, s0, vals[0].clone(), vals[1].clone(), span);
                // `a.min(b)` is at most `b` (and `a`): a bound for bounds-check elision.
                if s0.is_int() && !s0.is_signed() {
                    for bound in args {
                        self.assume_at_most(&m, bound);
                    }
                }
                m
            }
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
            Intr::RecipFastFtz => self.un(UnKind::RcpApproxFtz, s0, vals[0].clone(), span),
            Intr::Exp2FastFtz => self.un(UnKind::Ex2ApproxFtz, s0, vals[0].clone(), span),
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
            Intr::PackF32 => {
                let op = Op::CvtPack(rs);
                if !ptx::available(&op, self.v.target.sm) {
                    // Each half rounded on its own: the same result as the packed conversion.
                    let elem = rs.packed_elem().unwrap_or(Scalar::F16);
                    let lo = self.cast(vals[0].clone(), elem, span);
                    let hi = self.cast(vals[1].clone(), elem, span);
                    return self.pack(&lo, &hi, rs, span);
                }
                // `cvt.rn.f16x2.f32 d, a, b` puts `a` in the upper half.
                let hi = self.operand_reg(&vals[1], span);
                let lo = self.operand_reg(&vals[0], span);
                self.op_to(op, rs, vec![hi, lo], span)
            }
            Intr::Dp4a => {
                let signed = |v: &Val| Self::scalar_of(v) == Some(Scalar::I32);
                let op = Op::Dp4a {
                    a_signed: signed(&vals[0]),
                    b_signed: signed(&vals[1]),
                };
                let a = self.operand_reg(&vals[0], span);
                let b = self.operand_reg(&vals[1], span);
                let c = self.operand_reg(&vals[2], span);
                self.op_to(op, rs, vec![a, b, c], span)
            }
            Intr::Prmt => {
                let a = self.operand_reg(&vals[0], span);
                let b = self.operand_reg(&vals[1], span);
                let c = self.operand(&vals[2], span);
                self.op_to(Op::Prmt, rs, vec![a, b, c], span)
            }
            Intr::Lop3(lut) => {
                let a = self.operand_reg(&vals[0], span);
                let b = self.operand(&vals[1], span);
                let c = self.operand(&vals[2], span);
                self.op_to(Op::Lop3, rs, vec![a, b, c, Operand::Int(lut as i128)], span)
            }
            Intr::ToTf32 => {
                let a = self.operand_reg(&vals[0], span);
                self.op_to(Op::CvtTf32, Scalar::U32, vec![a], span)
            }
            Intr::CpAsyncCommit => {
                self.emit(Op::CpAsyncCommit, vec![], span);
                Val::Unit
            }
            Intr::CpAsyncWait(n) => {
                self.emit(Op::CpAsyncWait, vec![Operand::Int(n as i128)], span);
                Val::Unit
            }
            Intr::WgmmaFence | Intr::WgmmaCommit | Intr::FenceProxyAsync => {
                let op = match intr {
                    Intr::WgmmaFence => Op::WgmmaFence,
                    Intr::WgmmaCommit => Op::WgmmaCommit,
                    _ => Op::FenceProxyAsync,
                };
                self.emit(op, vec![], span);
                Val::Unit
            }
            Intr::SetMaxNReg { inc, n } => {
                self.emit(Op::SetMaxNReg { inc }, vec![Operand::Int(n as i128)], span);
                Val::Unit
            }
            Intr::PrefetchTensormap => {
                let m = self.operand_reg(&vals[0], span);
                self.emit(
                    Op::PrefetchTensormap,
                    vec![Operand::Addr(Box::new(m), 0)],
                    span,
                );
                Val::Unit
            }
            Intr::BulkCommit => {
                self.emit(Op::BulkCommit, vec![], span);
                Val::Unit
            }
            Intr::BulkWait { read, n } => {
                self.emit(Op::BulkWait { read }, vec![Operand::Int(n as i128)], span);
                Val::Unit
            }
            Intr::WgmmaWait(n) => {
                self.emit(Op::WgmmaWait, vec![Operand::Int(n as i128)], span);
                Val::Unit
            }
            Intr::Wgmma { .. } => {
                // In place only (`Lower::assign`): the accumulators stay in their registers
                // while the product is in flight.
                self.error(
                    span,
                    "`wgmma_*` updates its accumulators in place: write `acc = wgmma_bf16(acc, a, b, accumulate)` with `acc` a `let mut` register array",
                );
                Val::Unit
            }
            Intr::Mma { ty, k } => {
                let acc = match ty {
                    crate::check::MmaType::S8 | crate::check::MmaType::U8 => Scalar::I32,
                    _ => Scalar::F32,
                };
                let d: Vec<_> = (0..4).map(|_| self.reg(acc.reg_class())).collect();
                let mut ops = vec![Operand::Vec(d.iter().map(|r| Operand::Reg(*r)).collect())];
                for v in &vals {
                    let Val::Arr(items) = v else { return Val::Unit };
                    let regs = items.iter().map(|x| self.operand_reg(x, span)).collect();
                    ops.push(Operand::Vec(regs));
                }
                self.emit(Op::Mma { ty, k }, ops, span);
                Val::Arr(d.into_iter().map(|r| Val::Reg(r, acc)).collect())
            }
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

    pub(super) fn fma(&mut self, s: Scalar, vals: &[Val], span: Span) -> Val {
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

    pub(super) fn asm(
        &mut self,
        pieces: &[AsmPiece],
        inputs: &[TExpr],
        outs: &[Scalar],
        span: Span,
    ) -> Val {
        let vals: Vec<Val> = inputs.iter().map(|x| self.expr(x)).collect();
        let ins: Vec<Operand> = vals.iter().map(|v| self.operand(v, span)).collect();
        let regs: Vec<(crate::ptx::Reg, Scalar)> =
            outs.iter().map(|s| (self.reg(s.reg_class()), *s)).collect();
        // The operands stay operands of the IR instruction (in their order of appearance), so
        // that the IR passes see what the instruction reads and writes.
        let mut text = vec![String::new()];
        let (mut args, mut written) = (Vec::new(), Vec::new());
        for p in pieces {
            let (arg, out) = match p {
                AsmPiece::Text(t) => {
                    if let Some(s) = text.last_mut() {
                        s.push_str(t);
                    }
                    continue;
                }
                AsmPiece::In(k) => (ins[*k].clone(), false),
                AsmPiece::Out(k) => (Operand::Reg(regs[*k].0), true),
            };
            args.push(arg);
            written.push(out);
            text.push(String::new());
        }
        self.emit(
            Op::Asm {
                pieces: text,
                outs: written,
            },
            args,
            span,
        );
        match regs.as_slice() {
            [] => Val::Unit,
            [(r, s)] => Val::Reg(*r, *s),
            _ => Val::Arr(regs.iter().map(|(r, s)| Val::Reg(*r, *s)).collect()),
        }
    }
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

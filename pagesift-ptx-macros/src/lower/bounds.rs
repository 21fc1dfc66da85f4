//! Bounds checks of slice and shared-array accesses, and their elision.
//!
//! Every checked access compares its element index (widened to 64 bits, sign-extended for
//! signed types, so a negative index is huge) with the length less the elements it moves:
//! `setp.ge.u64 p, index, len - (N - 1)` and a predicated branch to an out-of-line fault block
//! after the kernel's `ret`. The fault block gives a load's registers 0, records the first
//! fault of the launch in the fault record (the hidden first kernel parameter, layout below)
//! and jumps back behind the access, which is thereby skipped.
//!
//! A check is left out when lowering has proven it: a *fact* `index + c <= bound` (bound: a
//! slice's length register or a constant) comes from a dominating `if` or loop condition
//! `i < x.len()`, `i <= x.len()`, `(i as u64) + k < x.len()`, `i < N` (conjunctions with `&&`
//! included; after `if c { return; }` the negation of `c`) and holds until the index register
//! is written again (every instruction's
//! destination is watched; at a loop head the registers of all mutable variables count as
//! written). An access `x[i + j]` of `N` elements is proven by a fact on `i` with
//! `0 <= j` and `j + N <= c`; a constant index into a static shared array is checked at
//! compile time.
//!
//! A checked vector access of more than one element also tests its alignment (`align_guard`):
//! `and t, address, B - 1; setp.ne p, t, -off mod B` into a fault block of its own, whose code
//! has [`record::MISALIGNED`] and the access's bytes. Under a dominating `x.is_aligned(i, B)`
//! (a fact `Bound::Align` on the base register) only the scaled element offset is tested.
//! After lowering, `opt::elide_align_checks` deletes every test whose offset it proves a
//! multiple of B from the aligned one (`opt::congruences`, a flow-insensitive analysis of
//! every register: loop counters included), with its fault block.

use super::facts::Bound;
use super::{Lower, Store, Val};
use crate::check::TExpr;
use crate::ctxt::Sp as Span;
use crate::ptx::{self, BinKind, Item, Op, Operand, Reg, Space};
use crate::types::{ConstVal, RegClass, Scalar};

/// The fault record's layout (the runtime's `driver/fault.rs` holds the same numbers; an
/// end-to-end test checks that both agree).
pub mod record {
    /// `u32`: 0 while no fault was recorded; the first fault's `atom.cas` sets it to 1.
    pub const FLAG: i64 = 0;
    /// `u32`: the parameter index (`0xFFFF - k` for the k-th shared array) | elements << 16.
    pub const CODE: i64 = 4;
    /// `u64`: the FNV-1a hash of the variant's entry name.
    pub const HASH: i64 = 8;
    /// `u64`: the element index of the access.
    pub const INDEX: i64 = 16;
    /// `u64`: the length of the slice or shared array in elements.
    pub const LEN: i64 = 24;
    /// The code of the k-th shared array (static arrays in declaration order, then the
    /// dynamic one).
    pub const SHARED: u32 = 0xFFFF;
    /// Code bit: the access was misaligned (its address not a multiple of its bytes); the
    /// access's bytes are then at [`BYTES_SHIFT`].
    pub const MISALIGNED: u32 = 1 << 31;
    /// Shift of the byte count of a misaligned access in the code (bits 24..30: 4, 8 or 16).
    pub const BYTES_SHIFT: u32 = 24;
}

/// The 64-bit FNV-1a hash of a variant's entry name (the fault record names the variant so).
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A check that was emitted: its fault block is made once the access is.
pub(super) struct Guard {
    /// The predicate that is true when the check failed (`None`: it always fails).
    pub(super) pred: Option<Reg>,
    fail: u32,
    code: u32,
    /// The index as lowered (recomputed in the fault block, so that no 64-bit copy of it
    /// stays live across the access).
    index: (Val, i128),
    len: Operand,
    /// Where the fault block reloads the length from (a slice's length parameter).
    len_param: Option<String>,
}

impl Lower<'_> {
    /// The bound and fault code of a store (`None`: not memory).
    fn bound_of(&mut self, store: &Store, n: u32) -> Option<(Bound, u32)> {
        let elems = n << 16;
        match store {
            Store::Global { len, param, .. } => Some((Bound::Reg(*len), *param | elems)),
            Store::Shared {
                len: Some(len),
                code,
                ..
            } => Some((Bound::Const(*len as i128), *code | elems)),
            Store::Shared {
                len: None,
                elem,
                code,
                ..
            } => {
                let r = self.dyn_len(*elem);
                Some((Bound::Reg(r), *code | elems))
            }
            Store::Value(_) => None,
        }
    }

    /// The element count of the dynamic shared array, read where it is needed (a special
    /// register, so nothing stays live).
    pub(super) fn dyn_len(&mut self, elem: Scalar) -> Reg {
        let span = Span::call_site();
        let bytes = self.op_to(
            Op::Mov(Scalar::U32),
            Scalar::U32,
            vec![Operand::Name("%dynamic_smem_size".into())],
            span,
        );
        let b = self.operand_reg(&bytes, span);
        let n = self.op_to(
            Op::Bin(BinKind::Shr, Scalar::U32),
            Scalar::U32,
            vec![b, Operand::Int(elem.bytes().trailing_zeros() as i128)],
            span,
        );
        let w = self.cast(n, Scalar::U64, span);
        self.in_reg(&w, span).unwrap_or(Reg {
            class: RegClass::B64,
            n: 0,
        })
    }

    /// The failure predicate of `index .. index + n` against a length register: `index >= len`
    /// for one element; for more `index + n - 1 >= len` when the index cannot wrap (below
    /// 2^33), else `index >= max(len, n - 1) - (n - 1)`. Nothing stays live across the kernel:
    /// the length is a parameter (ptxas reads it from the constant bank).
    fn fail_pred(&mut self, index: &Operand, len: Reg, n: u32, narrow: bool, span: Span) -> Reg {
        let k = n as i128 - 1;
        let p = self.reg(RegClass::Pred);
        let (lhs, rhs) = if k == 0 {
            (index.clone(), Operand::Reg(len))
        } else if narrow {
            let t = self.op_to(
                Op::Bin(BinKind::Add, Scalar::U64),
                Scalar::U64,
                vec![index.clone(), Operand::Int(k)],
                span,
            );
            (self.operand_reg(&t, span), Operand::Reg(len))
        } else {
            let m = self.op_to(
                Op::Bin(BinKind::Max, Scalar::U64),
                Scalar::U64,
                vec![len.into(), Operand::Int(k)],
                span,
            );
            let mo = self.operand_reg(&m, span);
            let l = self.op_to(
                Op::Bin(BinKind::Sub, Scalar::U64),
                Scalar::U64,
                vec![mo, Operand::Int(k)],
                span,
            );
            (index.clone(), self.operand_reg(&l, span))
        };
        self.emit(
            Op::Setp(ptx::CmpKind::Ge, Scalar::U64),
            vec![p.into(), lhs, rhs],
            span,
        );
        p
    }

    /// A slice's length loaded from its parameter here (a short live range).
    fn fresh_len(&mut self, store: &Store) -> Option<Reg> {
        let Store::Global { len_param, .. } = store else {
            return None;
        };
        let r = self.reg(RegClass::B64);
        let name = len_param.clone();
        self.emit(
            Op::Ld {
                space: Space::Param,
                ty: Scalar::U64,
                vec: 1,
                nc: false,
            },
            vec![r.into(), super::addr(Operand::Name(name), 0)],
            Span::call_site(),
        );
        Some(r)
    }

    /// Whether the lowered index is below 2^32 (so `index + k + n` cannot wrap in 64 bits).
    fn index_is_narrow(&self, i: &Val) -> bool {
        match i {
            Val::Reg(r, s) => {
                (s.is_int() && !s.is_signed() && s.bytes() <= 4) || self.narrow.contains(r)
            }
            Val::Imm(..) => true,
            _ => false,
        }
    }

    /// The index `i + k` in 64 bits: summed in the index's type (wrapping, as the language
    /// defines index arithmetic), then widened (sign-extended from signed types).
    fn index64(&mut self, i: &Val, k: i128, span: Span) -> Operand {
        let s = Self::scalar_of(i).unwrap_or(Scalar::U32);
        if let Val::Imm(ConstVal::Int(c), _) = i {
            let w = crate::types::wrap_int(c + k, s);
            return Operand::Int(crate::types::wrap_int(w, Scalar::U64));
        }
        if k != 0 && s.bytes() < 8 {
            let sum = self.binary(
                crate::parse::BinOp::Add,
                i.clone(),
                Val::Imm(ConstVal::Int(crate::types::wrap_int(k, s)), s),
                span,
            );
            return self.index64(&sum, 0, span);
        }
        let wide = self.cast(
            i.clone(),
            if s.is_signed() {
                Scalar::I64
            } else {
                Scalar::U64
            },
            span,
        );
        let w = self.operand_reg(&wide, span);
        if k == 0 {
            return w;
        }
        let sum = self.op_to(
            Op::Bin(BinKind::Add, Scalar::U64),
            Scalar::U64,
            vec![w, Operand::Int(k)],
            span,
        );
        self.operand_reg(&sum, span)
    }

    /// Checks an access of `n` elements at `index` (lowered as `iv` + `k`) unless it is
    /// proven; the caller emits the access and then [`Lower::finish_guards`].
    pub(super) fn guard(
        &mut self,
        store: &Store,
        index: &TExpr,
        iv: &(Val, i128),
        n: u32,
        span: Span,
    ) -> Option<Guard> {
        let (bound, code) = self.bound_of(store, n)?;
        if self.proven(index, bound, n) {
            self.elided += 1;
            return None;
        }
        if let (Bound::Const(len), Val::Imm(ConstVal::Int(c), _)) = (bound, &iv.0) {
            let i = c + iv.1;
            if i >= 0 && i + n as i128 <= len {
                self.elided += 1;
                return None;
            }
        }
        self.checks += 1;
        let narrow = self.index_is_narrow(&iv.0) && iv.1 >= 0;
        let index = self.index64(&iv.0, iv.1, span);
        let fail = self.label();
        let p = match (bound, &index) {
            (Bound::Const(len), Operand::Int(i)) => {
                // Both known: in bounds was handled above, so this access always fails.
                let _ = (len, i);
                self.bra(fail, None);
                None
            }
            (Bound::Const(len), _) => {
                let p = self.reg(RegClass::Pred);
                let lim = (len - (n as i128 - 1)).max(0);
                self.emit(
                    Op::Setp(ptx::CmpKind::Ge, Scalar::U64),
                    vec![p.into(), index.clone(), Operand::Int(lim)],
                    span,
                );
                Some(p)
            }
            (Bound::Reg(len), _) => {
                let len = self.fresh_len(store).unwrap_or(len);
                let index = match &index {
                    Operand::Int(_) => {
                        let v = self.op_to(
                            Op::Mov(Scalar::U64),
                            Scalar::U64,
                            vec![index.clone()],
                            span,
                        );
                        self.operand_reg(&v, span)
                    }
                    o => o.clone(),
                };
                Some(self.fail_pred(&index, len, n, narrow, span))
            }
            (Bound::Align { .. }, _) => None,
        };
        if let Some(p) = p {
            self.bra(fail, Some((p, false)));
        }
        let len = match bound {
            Bound::Reg(r) => Operand::Reg(r),
            Bound::Const(c) => Operand::Int(c),
            Bound::Align { .. } => Operand::Int(0),
        };
        let len_param = match store {
            Store::Global { len_param, .. } => Some(len_param.clone()),
            _ => None,
        };
        Some(Guard {
            pred: p,
            fail,
            code,
            index: iv.clone(),
            len,
            len_param,
        })
    }

    /// `x.is_aligned(i, bytes)` for the address `a` of element `i`: its low bits tested
    /// (`true` where a dominating test already proved it).
    pub(super) fn is_aligned(
        &mut self,
        store: &Store,
        a: &Operand,
        iv: &(Val, i128),
        bytes: u32,
        span: Span,
    ) -> Val {
        let Operand::Addr(inner, off) = a else {
            return Val::Unit;
        };
        let want = (-(*off as i128)).rem_euclid(bytes as i128);
        if let Store::Global { base, elem, .. } = store {
            let es = elem.bytes() as i128;
            let whole = (iv.1 * es) % bytes as i128 == 0;
            let known = match (self.base_aligned(*base, bytes), &iv.0) {
                (Some(None), Val::Imm(..)) => want == 0,
                (Some(Some(r)), Val::Reg(i, _)) => whole && *i == r,
                _ => false,
            };
            if known {
                return Val::Imm(ConstVal::Bool(true), Scalar::Bool);
            }
        }
        let reg = match &**inner {
            Operand::Reg(r) => *r,
            // A shared array's symbol: 16-byte aligned.
            _ => return Val::Imm(ConstVal::Bool(want == 0 && bytes <= 16), Scalar::Bool),
        };
        let ty = if reg.class == RegClass::B64 {
            Scalar::U64
        } else {
            Scalar::U32
        };
        let t = self.op_to(
            Op::Bin(BinKind::And, ty),
            ty,
            vec![Operand::Reg(reg), Operand::Int(bytes as i128 - 1)],
            span,
        );
        let to = self.operand_reg(&t, span);
        self.op_to(
            Op::Setp(ptx::CmpKind::Eq, ty),
            Scalar::Bool,
            vec![to, Operand::Int(want)],
            span,
        )
    }

    /// The alignment test of a vector access of `n` elements at address `a` (`scaled`: the
    /// scaled element offset of a global address): `(address & (bytes - 1)) == 0`, failing
    /// into its own fault block (code bit [`record::MISALIGNED`]). Where a dominating
    /// `x.is_aligned(B)` proves the base, only the offset is tested; the tests whose register
    /// is proven a multiple of the access's bytes go after lowering
    /// (`opt::elide_align_checks`), which makes `i` a multiple of N elements from `i = 4 * t`,
    /// `i & !3`, `i += 4 * step` and the like.
    pub(super) fn align_guard(
        &mut self,
        store: &Store,
        a: &Operand,
        scaled: Option<Reg>,
        iv: &(Val, i128),
        n: u32,
        span: Span,
    ) -> Option<Guard> {
        let es = match store {
            Store::Global { elem, .. } | Store::Shared { elem, .. } => elem.bytes(),
            Store::Value(_) => return None,
        };
        let bytes = n * es;
        if n < 2 || !bytes.is_power_of_two() {
            return None;
        }
        let Operand::Addr(inner, off) = a else {
            return None;
        };
        let want = (-(*off as i128)).rem_euclid(bytes as i128);
        let mut rel = None;
        let reg = match (store, &**inner) {
            (Store::Global { base, .. }, Operand::Reg(r)) => {
                match self.base_aligned(*base, bytes) {
                    Some(None) if r == base && want == 0 => {
                        self.elided += 1;
                        return None;
                    }
                    // The very index the test was on (`if x.is_aligned(i, 16) { x.load4(i) }`),
                    // plus whole vectors.
                    Some(Some(f))
                        if want == 0
                            && matches!(iv.0, Val::Reg(i, _) if i == f || self.source_of(i) == f)
                            && (iv.1 * es as i128) % bytes as i128 == 0 =>
                    {
                        self.elided += 1;
                        return None;
                    }
                    Some(fact) if r != base && scaled.is_some() => {
                        rel = fact.map(|f| (f, es));
                        scaled.unwrap_or(*r)
                    }
                    _ => *r,
                }
            }
            (Store::Shared { .. }, Operand::Reg(r)) => *r,
            (Store::Shared { sym, .. }, Operand::Name(_)) => {
                if want == 0 {
                    self.elided += 1;
                    return None;
                }
                let v = self.op_to(
                    Op::Mov(Scalar::U32),
                    Scalar::U32,
                    vec![Operand::Name(sym.clone())],
                    span,
                );
                self.in_reg(&v, span)?
            }
            _ => return None,
        };
        let (bound, code) = self.bound_of(store, n)?;
        let ty = if reg.class == RegClass::B64 {
            Scalar::U64
        } else {
            Scalar::U32
        };
        let t = self.reg(reg.class);
        self.emit(
            Op::Bin(BinKind::And, ty),
            vec![t.into(), reg.into(), Operand::Int(bytes as i128 - 1)],
            span,
        );
        let p = self.reg(RegClass::Pred);
        self.emit(
            Op::Setp(ptx::CmpKind::Ne, ty),
            vec![p.into(), t.into(), Operand::Int(want)],
            span,
        );
        let fail = self.label();
        self.bra(fail, Some((p, false)));
        self.checks += 1;
        self.align_checks.push(super::opt::AlignCheck {
            reg,
            bytes,
            want,
            fail,
            rel,
            tmp: t,
        });
        let len = match bound {
            Bound::Reg(r) => Operand::Reg(r),
            Bound::Const(c) => Operand::Int(c),
            Bound::Align { .. } => Operand::Int(0),
        };
        let len_param = match store {
            Store::Global { len_param, .. } => Some(len_param.clone()),
            _ => None,
        };
        Some(Guard {
            pred: Some(p),
            fail,
            code: code | record::MISALIGNED | (bytes << record::BYTES_SHIFT),
            index: iv.clone(),
            len,
            len_param,
        })
    }

    /// The check of a `cp_async*_partial` source: `nbytes` bytes from element `index` of a
    /// slice of `es`-byte elements (`n` elements reported in a fault).
    pub(super) fn guard_bytes(
        &mut self,
        store: &Store,
        iv: &(Val, i128),
        nbytes: &Val,
        n: u32,
        span: Span,
    ) -> Option<Guard> {
        let Store::Global {
            len, elem, param, ..
        } = store
        else {
            return None;
        };
        let (_, es, code) = (*len, elem.bytes(), *param | (n << 16));
        let len = self.fresh_len(store).unwrap_or(*len);
        self.checks += 1;
        let index = self.index64(&iv.0, iv.1, span);
        let lo = match &index {
            Operand::Int(_) => {
                let v = self.op_to(Op::Mov(Scalar::U64), Scalar::U64, vec![index.clone()], span);
                self.operand_reg(&v, span)
            }
            o => o.clone(),
        };
        let m = self.op_to(
            Op::Bin(BinKind::Min, Scalar::U64),
            Scalar::U64,
            vec![lo, len.into()],
            span,
        );
        let mo = self.operand_reg(&m, span);
        let avail = self.op_to(
            Op::Bin(BinKind::Sub, Scalar::U64),
            Scalar::U64,
            vec![len.into(), mo],
            span,
        );
        let ao = self.operand_reg(&avail, span);
        let bytes = self.op_to(
            Op::Bin(BinKind::Mul, Scalar::U64),
            Scalar::U64,
            vec![ao, Operand::Int(es as i128)],
            span,
        );
        let bo = self.operand_reg(&bytes, span);
        let nb = self.cast(nbytes.clone(), Scalar::U64, span);
        let nbo = self.operand(&nb, span);
        let p = self.reg(RegClass::Pred);
        self.emit(
            Op::Setp(ptx::CmpKind::Lt, Scalar::U64),
            vec![p.into(), bo, nbo],
            span,
        );
        let fail = self.label();
        self.bra(fail, Some((p, false)));
        Some(Guard {
            pred: Some(p),
            fail,
            code,
            index: iv.clone(),
            len: Operand::Reg(len),
            len_param: Some(store_len_param(store)),
        })
    }

    /// After the access: the resume point, and per guard a fault block that zeroes `zero`
    /// (a load's result), records the fault and resumes behind the access.
    pub(super) fn finish_guards(&mut self, guards: Vec<Guard>, zero: &Val) {
        if guards.is_empty() {
            return;
        }
        let resume = self.label();
        self.body.push(Item::Label(resume));
        let span = Span::call_site();
        for g in guards {
            let body = std::mem::replace(&mut self.body, std::mem::take(&mut self.faults));
            self.body.push(Item::Label(g.fail));
            self.zero(zero, span);
            self.record_fault(&g, resume, span);
            self.bra(resume, None);
            self.faults = std::mem::replace(&mut self.body, body);
        }
    }

    fn zero(&mut self, v: &Val, span: Span) {
        match v {
            Val::Reg(r, s) => {
                let s = if *s == Scalar::Bool { Scalar::U32 } else { *s };
                if r.class == RegClass::Pred {
                    return;
                }
                let z = match r.class {
                    RegClass::F32 => Operand::F32(0),
                    RegClass::F64 => Operand::F64(0),
                    _ => Operand::Int(0),
                };
                let ty = match r.class {
                    RegClass::B16 => Scalar::U16,
                    RegClass::B32 => Scalar::U32,
                    RegClass::B64 => Scalar::U64,
                    RegClass::F32 => Scalar::F32,
                    RegClass::F64 => Scalar::F64,
                    _ => s,
                };
                self.emit(Op::Mov(ty), vec![(*r).into(), z], span);
            }
            Val::Arr(items) => items.iter().for_each(|x| self.zero(x, span)),
            _ => {}
        }
    }

    /// The first fault of a launch wins the flag (`atom.cas` 0 -> 1) and writes the rest.
    fn record_fault(&mut self, g: &Guard, resume: u32, span: Span) {
        let raw = self.reg(RegClass::B64);
        let name = self.fault_param.clone();
        self.emit(
            Op::Ld {
                space: Space::Param,
                ty: Scalar::U64,
                vec: 1,
                nc: false,
            },
            vec![raw.into(), super::addr(Operand::Name(name), 0)],
            span,
        );
        let rec = self.reg(RegClass::B64);
        self.emit(Op::CvtaGlobal, vec![rec.into(), raw.into()], span);
        let at = |off| super::addr(Operand::Reg(rec), off);
        let old = self.reg(RegClass::B32);
        self.emit(
            Op::Atom {
                space: Space::Global,
                kind: crate::check::AtomKind::Cas,
                ty: Scalar::U32,
            },
            vec![
                old.into(),
                at(record::FLAG),
                Operand::Int(0),
                Operand::Int(1),
            ],
            span,
        );
        let won = self.reg(RegClass::Pred);
        self.emit(
            Op::Setp(ptx::CmpKind::Ne, Scalar::U32),
            vec![won.into(), old.into(), Operand::Int(0)],
            span,
        );
        self.bra(resume, Some((won, false)));
        let hash = fnv1a(&self.v.entry);
        let words = [
            (record::CODE, g.code as u64),
            (record::HASH, hash & 0xFFFF_FFFF),
            (record::HASH + 4, hash >> 32),
        ];
        for (off, w) in words {
            let r = self.reg(RegClass::B32);
            self.emit(
                Op::Mov(Scalar::U32),
                vec![r.into(), Operand::Int(w as i128)],
                span,
            );
            self.st32(rec, off, r.into(), span);
        }
        // The index and the length as 32-bit halves: one temporary register at a time.
        let (iv, k) = &g.index;
        let halves = match iv {
            Val::Reg(r, s) if *k == 0 && s.bytes() == 4 => Some((*r, s.is_signed())),
            _ => None,
        };
        match halves {
            Some((r, signed)) => {
                self.st32(rec, record::INDEX, Operand::Reg(r), span);
                let hi = self.reg(RegClass::B32);
                if signed {
                    self.emit(
                        Op::Bin(BinKind::Shr, Scalar::I32),
                        vec![hi.into(), r.into(), Operand::Int(31)],
                        span,
                    );
                } else {
                    self.emit(Op::Mov(Scalar::U32), vec![hi.into(), Operand::Int(0)], span);
                }
                self.st32(rec, record::INDEX + 4, hi.into(), span);
            }
            None => {
                let idx = self.index64(iv, *k, span);
                let idx = match idx {
                    Operand::Reg(r) => r,
                    other => {
                        let r = self.reg(RegClass::B64);
                        self.emit(Op::Mov(Scalar::U64), vec![r.into(), other], span);
                        r
                    }
                };
                self.emit(
                    Op::St {
                        space: Space::Global,
                        ty: Scalar::U64,
                        vec: 1,
                    },
                    vec![super::addr(Operand::Reg(rec), record::INDEX), idx.into()],
                    span,
                );
            }
        }
        match (&g.len_param, &g.len) {
            (Some(name), _) => {
                for half in [0, 4] {
                    let r = self.reg(RegClass::B32);
                    self.emit(
                        Op::Ld {
                            space: Space::Param,
                            ty: Scalar::U32,
                            vec: 1,
                            nc: false,
                        },
                        vec![r.into(), super::addr(Operand::Name(name.clone()), half)],
                        span,
                    );
                    self.st32(rec, record::LEN + half, r.into(), span);
                }
            }
            (None, Operand::Reg(r)) => {
                self.emit(
                    Op::St {
                        space: Space::Global,
                        ty: Scalar::U64,
                        vec: 1,
                    },
                    vec![super::addr(Operand::Reg(rec), record::LEN), (*r).into()],
                    span,
                );
            }
            (None, other) => {
                let v = match other {
                    Operand::Int(c) => *c,
                    _ => 0,
                };
                for (half, w) in [(0, v & 0xFFFF_FFFF), (4, (v >> 32) & 0xFFFF_FFFF)] {
                    let r = self.reg(RegClass::B32);
                    self.emit(Op::Mov(Scalar::U32), vec![r.into(), Operand::Int(w)], span);
                    self.st32(rec, record::LEN + half, r.into(), span);
                }
            }
        }
    }

    /// At the kernel's start: whether the launch's dynamic shared memory holds every view of
    /// it (`= dyn_shared(offset)`); if not, the fault of the view that ends last is recorded
    /// (index 0, its elements, the elements the launch gave it) and the thread exits.
    pub(super) fn check_dyn_views(&mut self) {
        let views = &self.v.dyn_views;
        let Some((k, &(_, elem, n, off))) = views
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, s, n, off))| off.saturating_add(s.bytes().saturating_mul(*n)))
        else {
            return;
        };
        let span = Span::call_site();
        let end = off.saturating_add(elem.bytes().saturating_mul(n));
        let first_view = self.v.shared.len() as u32 + self.v.dyn_shared.is_some() as u32;
        let code = (record::SHARED - first_view - k as u32) | (n << 16);
        let size = self.op_to(
            Op::Mov(Scalar::U32),
            Scalar::U32,
            vec![Operand::Name("%dynamic_smem_size".into())],
            span,
        );
        let so = self.operand_reg(&size, span);
        let p = self.reg(RegClass::Pred);
        self.emit(
            Op::Setp(ptx::CmpKind::Lt, Scalar::U32),
            vec![p.into(), so.clone(), Operand::Int(end as i128)],
            span,
        );
        let fail = self.label();
        self.bra(fail, Some((p, false)));
        let exit = self.exit;
        let body = std::mem::replace(&mut self.body, std::mem::take(&mut self.faults));
        self.body.push(Item::Label(fail));
        // The view's elements inside the launch's bytes.
        let m = self.op_to(
            Op::Bin(BinKind::Max, Scalar::U32),
            Scalar::U32,
            vec![so, Operand::Int(off as i128)],
            span,
        );
        let mo = self.operand_reg(&m, span);
        let a = self.op_to(
            Op::Bin(BinKind::Sub, Scalar::U32),
            Scalar::U32,
            vec![mo, Operand::Int(off as i128)],
            span,
        );
        let ao = self.operand_reg(&a, span);
        let e = self.op_to(
            Op::Bin(BinKind::Shr, Scalar::U32),
            Scalar::U32,
            vec![ao, Operand::Int(elem.bytes().trailing_zeros() as i128)],
            span,
        );
        let w = self.cast(e, Scalar::U64, span);
        let len = self.operand_reg(&w, span);
        let g = Guard {
            pred: Some(p),
            fail,
            code,
            index: (Val::Imm(ConstVal::Int(0), Scalar::U32), 0),
            len,
            len_param: None,
        };
        self.record_fault(&g, exit, span);
        self.bra(exit, None);
        self.faults = std::mem::replace(&mut self.body, body);
    }

    fn st32(&mut self, rec: Reg, off: i64, v: Operand, span: Span) {
        self.emit(
            Op::St {
                space: Space::Global,
                ty: Scalar::U32,
                vec: 1,
            },
            vec![super::addr(Operand::Reg(rec), off), v],
            span,
        );
    }
}

fn store_len_param(store: &Store) -> String {
    match store {
        Store::Global { len_param, .. } => len_param.clone(),
        _ => String::new(),
    }
}

//! Memory: element addresses, loads and stores (scalar and vector), acquire loads and release
//! stores, atomics.

use super::bounds::Guard;
use super::{addr, mem_scalar, Lower, Store, Val};
use crate::check::{MbarOp, MemOp, TExpr, TKind, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::BinOp;
use crate::ptx::{BinKind, Op, Operand, Reg, Space};
use crate::types::{ConstVal, RegClass, Scalar, Ty};

impl Lower<'_> {
    /// Address of element `index` of a slice or shared array: (space, address operand, elem).
    /// Also returns the index as lowered: (value, constant offset).
    pub(super) fn elem_addr(
        &mut self,
        store: &Store,
        index: &TExpr,
        span: Span,
    ) -> (Space, Operand, Scalar, (Val, i128)) {
        // An index is computed in its own type, wrapping, then widened (`index64`). `base[i + k]`
        // with `k` constant (after unrolling) puts `k` into the address offset where that is
        // the same address: a 64-bit index (addresses wrap at 2^64 too), or a 32-bit one into
        // shared memory (32-bit addresses, which wrap with it). The bounds check tests the
        // wrapped index all the same.
        if let TKind::Binary(BinOp::Add, a, b) = &index.kind {
            let av = self.expr(a);
            let bv = self.expr(b);
            let fold = match (store, &index.ty) {
                (_, crate::types::Ty::Scalar(s)) if s.bytes() == 8 => true,
                (Store::Shared { .. }, crate::types::Ty::Scalar(s)) if s.bytes() == 4 => true,
                // An unsigned sum that cannot wrap (`4 * thread_idx_x() + k`).
                (_, crate::types::Ty::Scalar(s)) if s.is_int() && !s.is_signed() => {
                    let max = (1u128 << (8 * s.bytes())) - 1;
                    match (&a.kind, &b.kind, self.upper(a), self.upper(b)) {
                        (_, _, Some(x), Some(y)) => x + y <= max,
                        _ => false,
                    }
                }
                _ => false,
            };
            let small = |v: &Val| match v {
                Val::Imm(ConstVal::Int(k), _) if fold && k.abs() < (1 << 20) => Some(*k),
                _ => None,
            };
            if let (Some(k), false) = (small(&bv), matches!(av, Val::Imm(..))) {
                let (sp, a, e) = self.elem_addr_val(store, &av, k, span);
                return (sp, a, e, (av, k));
            }
            if let (Some(k), false) = (small(&av), matches!(bv, Val::Imm(..))) {
                let (sp, a, e) = self.elem_addr_val(store, &bv, k, span);
                return (sp, a, e, (bv, k));
            }
            let sum = self.binary(BinOp::Add, av, bv, span);
            let (sp, a, e) = self.elem_addr_val(store, &sum, 0, span);
            return (sp, a, e, (sum, 0));
        }
        let i = self.expr(index);
        let (sp, a, e) = self.elem_addr_val(store, &i, 0, span);
        (sp, a, e, (i, 0))
    }

    /// An upper bound of the unsigned value of `e`, where one is known: constants, thread and
    /// block indices (from the block shape and the grid's limits), immutable variables bounded
    /// so, and sums, products, shifts, masks, quotients and remainders of them in the type.
    pub(super) fn upper(&self, e: &TExpr) -> Option<u128> {
        use crate::check::{Intr, Special};
        let crate::types::Ty::Scalar(s) = &e.ty else {
            return None;
        };
        if !s.is_int() || s.is_signed() {
            return None;
        }
        let max = (1u128 << (8 * s.bytes())) - 1;
        let fit = |v: u128| (v <= max).then_some(v);
        match &e.kind {
            TKind::Const(ConstVal::Int(v)) => u128::try_from(*v).ok(),
            TKind::Var(id) => match self.vars.get(id) {
                // An unrolled loop's counter.
                Some(Store::Value(Val::Imm(ConstVal::Int(v), _))) => u128::try_from(*v).ok(),
                _ => self.uppers.get(id).copied(),
            },
            TKind::Intr {
                intr: Intr::Special(sp),
                ..
            } => Some(match sp {
                Special::Tid(d) => self.v.block[*d as usize].max(1) as u128 - 1,
                Special::LaneId => 31,
                Special::Ctaid(0) => (1 << 31) - 2,
                Special::Ctaid(_) => 65534,
                Special::Nctaid(0) => (1 << 31) - 1,
                Special::Nctaid(_) => 65535,
            }),
            TKind::Cast(x) => match &x.ty {
                crate::types::Ty::Scalar(f) if f.is_int() && !f.is_signed() => {
                    let u = self.upper(x).unwrap_or((1u128 << (8 * f.bytes())) - 1);
                    fit(u)
                }
                _ => None,
            },
            TKind::Binary(op, a, b) => {
                let (x, y) = (self.upper(a), self.upper(b));
                match op {
                    BinOp::Add => fit(x? + y?),
                    BinOp::Mul => fit(x?.checked_mul(y?)?),
                    BinOp::Shl => fit(x?.checked_shl(u32::try_from(y?).ok()?)?),
                    BinOp::Shr | BinOp::Div => x,
                    BinOp::And => match (x, y) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (Some(v), None) | (None, Some(v)) => Some(v),
                        _ => None,
                    },
                    BinOp::Rem => match (x, y) {
                        (_, Some(y)) if y > 0 => Some(y - 1),
                        (x, _) => x,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }

    pub(super) fn elem_addr_val(
        &mut self,
        store: &Store,
        i: &Val,
        k: i128,
        span: Span,
    ) -> (Space, Operand, Scalar) {
        let (elem, space) = match store {
            Store::Global { elem, .. } => (*elem, Space::Global),
            Store::Shared { elem, .. } => (*elem, Space::Shared),
            Store::Value(_) => return (Space::Global, Operand::Int(0), Scalar::U32),
        };
        let size = elem.bytes() as i128;
        let s = Self::scalar_of(i).unwrap_or(Scalar::U32);
        let view = match store {
            Store::Shared { off, .. } => *off as i64,
            _ => 0,
        };
        if let Val::Imm(ConstVal::Int(c), _) = i {
            let off = ((c + k) * size) as i64 + view;
            let base = match store {
                Store::Global { base, .. } => Operand::Reg(*base),
                Store::Shared { sym, .. } => Operand::Name(sym.clone()),
                Store::Value(_) => Operand::Int(0),
            };
            return (space, addr(base, off), elem);
        }
        let off = (k * size) as i64 + view;
        match store {
            Store::Global { base, .. } => {
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
                self.last_scaled = match so {
                    Operand::Reg(r) => Some(r),
                    _ => None,
                };
                let sum = self.op_to(
                    Op::Bin(BinKind::Add, Scalar::U64),
                    Scalar::U64,
                    vec![Operand::Reg(*base), so],
                    span,
                );
                (space, addr(self.operand_reg(&sum, span), off), elem)
            }
            Store::Shared { sym, .. } => {
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

    /// The shared address `a` (a register or a symbol, with its offset) plus `extra` bytes, in
    /// one `u32` register (or the symbol itself where nothing is added).
    fn shared_flat(&mut self, a: Operand, extra: i64, span: Span) -> Operand {
        let (base, off) = match a {
            Operand::Addr(b, off) => (*b, off + extra),
            other => (other, extra),
        };
        let base = match base {
            Operand::Name(_) => {
                let v = self.op_to(Op::Mov(Scalar::U32), Scalar::U32, vec![base], span);
                self.operand_reg(&v, span)
            }
            o => o,
        };
        if off == 0 {
            return base;
        }
        let v = self.op_to(
            Op::Bin(BinKind::Add, Scalar::U32),
            Scalar::U32,
            vec![base, Operand::Int(off as i128)],
            span,
        );
        self.operand_reg(&v, span)
    }

    /// The `wgmma` matrix descriptor (`u64`) of rows of 128 bytes from the shared address `a`,
    /// `k` bytes into the row: start address `(a + k) >> 4` (bits 0-13), leading byte offset
    /// 16 (unused by swizzled K-major layouts, bits 16-29), stride byte offset 1024 between
    /// groups of 8 rows (bits 32-45), 128-byte swizzle (mode 1, bits 62-63).
    ///
    /// The start is `a`'s field plus `k >> 4` (`k` a multiple of 32): the same, as `a + k`
    /// lies below 2^18 (a shared address; the range was checked), so the sum neither carries
    /// out of the 14 bits nor needs the mask again, and the descriptors of one row at
    /// different `k` share all but that addition.
    fn wgmma_desc(&mut self, a: Operand, k: u32, span: Span) -> Val {
        use crate::ptx::BinKind;
        let mut flat = self.shared_flat(a, 0, span);
        let mut lo = Val::Unit;
        let step = (k >> 4) as i128;
        let fields = [
            (BinKind::Shr, 4),
            (BinKind::And, WGMMA_ADDR_MASK),
            (BinKind::Or, WGMMA_LBO_FIELD),
            (BinKind::Add, step),
        ];
        let used = if step == 0 { 3 } else { 4 };
        for &(kind, x) in &fields[..used] {
            lo = self.op_to(
                Op::Bin(kind, Scalar::U32),
                Scalar::U32,
                vec![flat, Operand::Int(x)],
                span,
            );
            flat = self.operand_reg(&lo, span);
        }
        let wide = self.cast(lo, Scalar::U64, span);
        let w = self.operand_reg(&wide, span);
        self.op_to(
            Op::Bin(BinKind::Or, Scalar::U64),
            Scalar::U64,
            vec![w, Operand::Int(WGMMA_DESC_HIGH << 32)],
            span,
        )
    }

    /// `tile.tma_load(i, map, x, y, z, bars, j)` (`load`) or `tile.tma_store(i, map, x, y, z)`
    /// at the shared address `a` of element `i`, whose `n`-element box `unproven` is true when
    /// the range check was not elided: an asynchronous copy has no place to skip to, so its
    /// ranges (the box, and a load's `mbarrier`) must be proven by the kernel. The box's
    /// address rounds down to 128 bytes, which a fault reports when it changes the address;
    /// the array itself starts on 128 bytes. A store completes in the thread's bulk groups.
    #[allow(clippy::too_many_arguments)]
    fn tma_copy(
        &mut self,
        load: bool,
        store: &Store,
        a: Operand,
        iv: &(Val, i128),
        n: u32,
        args: &[TExpr],
        unproven: bool,
        span: Span,
    ) {
        let Store::Shared { off, elem, .. } = store else {
            return;
        };
        let (what, does) = if load {
            ("tma_load", "writes")
        } else {
            ("tma_store", "reads")
        };
        if unproven {
            self.error(
                span,
                format!("`{what}` {does} elements `i .. i + {n}` (the box) asynchronously: prove them inside the array with a range test first (`if i + {n} <= tile.len() {{ .. }}`)"),
            );
            return;
        }
        if off % 128 != 0 {
            self.error(
                span,
                format!("`{what}` {does} at 128-byte aligned addresses: this view of the dynamic shared memory starts at byte {off}, not a multiple of 128"),
            );
            return;
        }
        let mut bar = None;
        if load {
            let Some(bstore) = (match &args[5].kind {
                TKind::Var(id) => self.vars.get(id).cloned(),
                _ => None,
            }) else {
                return;
            };
            let (_, b, _, biv) = self.elem_addr(&bstore, &args[6], span);
            if let Some(g) = self.guard(&bstore, &args[6], &biv, 1, span) {
                drop(g);
                self.error(
                    args[6].span,
                    "the `mbarrier` of `tma_load` must be proven inside its array with a range test first (a copy that cannot complete on it would never end)",
                );
                return;
            }
            bar = Some(b);
        }
        let map = self.expr(&args[1]);
        let map = self.operand_reg(&map, span);
        let coords: Vec<Operand> = args[2..5]
            .iter()
            .map(|x| {
                let v = self.expr(x);
                self.operand(&v, span)
            })
            .collect();
        // Misaligned: a fault, and the copy takes the 128-byte boundary below.
        if let Some(g) = self.align_guard(store, &a, None, iv, 128 / elem.bytes().max(1), span) {
            self.finish_guards(vec![g], &Val::Unit);
        }
        let flat = self.shared_flat(a, 0, span);
        let at = self.op_to(
            Op::Bin(BinKind::And, Scalar::U32),
            Scalar::U32,
            vec![flat, Operand::Int(-128)],
            span,
        );
        let at = self.operand_reg(&at, span);
        let box_at = Operand::Addr(Box::new(at), 0);
        let tensor = Operand::Tensor(Box::new(map), coords);
        match bar {
            Some(bar) => self.emit(Op::TmaLoad, vec![box_at, tensor, bar], span),
            None => self.emit(Op::TmaStore, vec![tensor, box_at], span),
        }
    }

    /// An `mbarrier` operation on the object at shared address `a`, with its other operands.
    fn mbar(&mut self, o: MbarOp, a: Operand, vals: Vec<Operand>, span: Span) -> Val {
        match o {
            MbarOp::Init => {
                let mut ops = vec![a];
                ops.extend(vals);
                self.emit(Op::MbarInit, ops, span);
            }
            MbarOp::Arrive | MbarOp::ArriveExpectTx => {
                let state = self.reg(RegClass::B64);
                let mut ops = vec![state.into(), a];
                ops.extend(vals);
                let op = if o == MbarOp::Arrive {
                    Op::MbarArrive
                } else {
                    Op::MbarArriveTx
                };
                self.emit(op, ops, span);
            }
            MbarOp::ArriveCpAsync => {
                self.emit(Op::MbarArriveCpAsync, vec![a], span);
            }
            MbarOp::Wait => {
                let top = self.label();
                self.body.push(crate::ptx::Item::Label(top));
                let p = self.reg(RegClass::Pred);
                let mut ops = vec![p.into(), a];
                ops.extend(vals);
                self.emit(Op::MbarTryWait, ops, span);
                self.bra(top, Some((p, true)));
            }
        }
        Val::Unit
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
            Some(store @ (Store::Global { .. } | Store::Shared { .. })) => {
                let (space, a, elem, iv) = self.elem_addr(&store, index, span);
                let g = self.guard(&store, index, &iv, 1, span);
                let v = self.load(space, elem, a, false, span);
                self.finish_guards(g.into_iter().collect(), &v);
                v
            }
            _ => Val::Unit,
        }
    }

    pub(super) fn mem_op(
        &mut self,
        op: MemOp,
        base: VarId,
        args: &[TExpr],
        checked: bool,
        span: Span,
    ) -> Val {
        let Some(store) = self.vars.get(&base).cloned() else {
            return Val::Unit;
        };
        if op == MemOp::Len {
            return match store {
                Store::Global { len, .. } => Val::Reg(len, Scalar::U64),
                _ => Val::Unit,
            };
        }
        self.last_scaled = None;
        let (space, a, elem, iv) = self.elem_addr(&store, &args[0], span);
        let scaled = self.last_scaled.take();
        if let MemOp::IsAligned(bytes) = op {
            return self.is_aligned(&store, &a, &iv, bytes, span);
        }
        let n = match op {
            MemOp::LoadVec { n, .. } | MemOp::StoreVec { n } => n,
            MemOp::CpAsync { bytes, .. } => bytes / elem.bytes().max(1),
            // A row of 16 bytes.
            MemOp::Ldmatrix { .. } | MemOp::Stmatrix { .. } => 16 / elem.bytes().max(1),
            MemOp::Read(t, count) => count * t.bytes() / elem.bytes().max(1),
            // Every row the descriptor covers, from the row of `i`.
            MemOp::WgmmaDesc { rows, .. } => rows * (128 / elem.bytes().max(1)),
            // The whole box.
            MemOp::TmaLoad | MemOp::TmaStore => match &args[1].ty {
                Ty::TensorMap { boxes, .. } => boxes.iter().product(),
                _ => 1,
            },
            _ => 1,
        };
        // Values are computed before the check (a skipped store still evaluates them).
        let vals: Vec<Val> = match op {
            MemOp::Set
            | MemOp::StoreVec { .. }
            | MemOp::Atomic(_)
            | MemOp::StoreRelease
            | MemOp::Stmatrix { .. } => args[1..].iter().map(|x| self.expr(x)).collect(),
            _ => Vec::new(),
        };
        let mut guards = Vec::new();
        if checked {
            guards.extend(self.guard(&store, &args[0], &iv, n, span));
            if matches!(
                op,
                MemOp::LoadVec { .. }
                    | MemOp::StoreVec { .. }
                    | MemOp::CpAsync { .. }
                    | MemOp::Ldmatrix { .. }
                    | MemOp::Stmatrix { .. }
                    | MemOp::Read(..)
            ) {
                guards.extend(self.align_guard(&store, &a, scaled, &iv, n, span));
            }
        }
        let out = match op {
            MemOp::Len | MemOp::IsAligned(_) => Val::Unit,
            MemOp::CpAsync { bytes, partial } => {
                let Some(src_store) = (match &args[1].kind {
                    TKind::Var(id) => self.vars.get(id).cloned(),
                    _ => None,
                }) else {
                    return Val::Unit;
                };
                self.last_scaled = None;
                let (_, src, src_elem, siv) = self.elem_addr(&src_store, &args[2], span);
                let src_scaled = self.last_scaled.take();
                let sn = bytes / src_elem.bytes().max(1);
                let mut ops = vec![a, src.clone(), Operand::Int(bytes as i128)];
                if partial {
                    let nb = self.expr(&args[3]);
                    if checked {
                        guards.extend(self.guard_bytes(&src_store, &siv, &nb, sn, span));
                    }
                    let o = self.operand(&nb, span);
                    ops.push(o);
                } else if checked {
                    guards.extend(self.guard(&src_store, &args[2], &siv, sn, span));
                }
                if checked {
                    guards.extend(self.align_guard(&src_store, &src, src_scaled, &siv, sn, span));
                }
                self.emit(Op::CpAsync { bytes }, ops, span);
                Val::Unit
            }
            MemOp::Ldmatrix { n, trans } => {
                // A warp-wide instruction: a lane out of bounds reads element 0 instead of
                // skipping it (the fault is recorded all the same).
                let a = if guards.is_empty() {
                    a
                } else {
                    // Out of bounds or misaligned (a row address not a multiple of 16 bytes):
                    // the lane reads the first row. (Combined behind the resume point, which
                    // the fault blocks return to; a test skipped after a failed one does not
                    // matter, the failed one decides.)
                    let pred = self.failed_lane(std::mem::take(&mut guards), span);
                    self.ldmatrix_clamp(&store, a, pred, span)
                };
                let regs: Vec<_> = (0..n).map(|_| self.reg(RegClass::B32)).collect();
                let dst = Operand::Vec(regs.iter().map(|r| Operand::Reg(*r)).collect());
                // The clamp needs the row (16 bytes) at the array's start: an array shorter
                // than that (its length is the same in every lane) skips the load.
                let row = (16 / elem.bytes().max(1)) as u64;
                let short = match &store {
                    Store::Shared { len: Some(l), .. } if checked => Some((*l as u64) < row),
                    Store::Shared { len: None, .. } if checked => None,
                    _ => Some(false),
                };
                if short != Some(false) {
                    for r in &regs {
                        self.emit(
                            Op::Mov(Scalar::U32),
                            vec![(*r).into(), Operand::Int(0)],
                            span,
                        );
                    }
                }
                match (short, &store) {
                    (Some(false), _) => self.emit(Op::Ldmatrix { n, trans }, vec![dst, a], span),
                    (None, Store::Shared { elem, .. }) => {
                        let len = self.dyn_len(*elem);
                        let q = self.reg(RegClass::Pred);
                        self.emit(
                            Op::Setp(crate::ptx::CmpKind::Lt, Scalar::U64),
                            vec![q.into(), len.into(), Operand::Int(row as i128)],
                            span,
                        );
                        let skip = self.label();
                        self.bra(skip, Some((q, false)));
                        self.emit(Op::Ldmatrix { n, trans }, vec![dst, a], span);
                        self.body.push(crate::ptx::Item::Label(skip));
                    }
                    _ => {}
                }
                Val::Arr(regs.into_iter().map(|r| Val::Reg(r, Scalar::U32)).collect())
            }
            MemOp::Stmatrix { n, trans } => {
                // A warp-wide instruction: where a lane's row is out of bounds or misaligned
                // (the fault is recorded), the whole warp skips the store (`vote.any` of the
                // failed checks, the same in every lane), so that nothing outside the array
                // is written.
                let regs: Vec<Operand> = match vals.first() {
                    Some(Val::Arr(vs)) => vs.iter().map(|v| self.operand_reg(v, span)).collect(),
                    _ => return Val::Unit,
                };
                let skip = self.label();
                if !guards.is_empty() {
                    match self.failed_lane(std::mem::take(&mut guards), span) {
                        Some(bad) => {
                            let any = self.op_to(
                                Op::Vote(crate::check::VoteKind::Any),
                                Scalar::Bool,
                                vec![bad.into(), Operand::Int(super::intrinsics::FULL_MASK)],
                                span,
                            );
                            if let Some(any) = self.in_reg(&any, span) {
                                self.bra(skip, Some((any, false)));
                            }
                        }
                        None => self.bra(skip, None),
                    }
                }
                self.emit(Op::Stmatrix { n, trans }, vec![a, Operand::Vec(regs)], span);
                self.body.push(crate::ptx::Item::Label(skip));
                Val::Unit
            }
            MemOp::WgmmaDesc { .. } => {
                let k = self.expr(&args[1]);
                let (row, step) = (128 / elem.bytes().max(1), 32 / elem.bytes().max(1));
                match k {
                    Val::Imm(ConstVal::Int(k), _)
                        if k >= 0 && k < row as i128 && k % step as i128 == 0 =>
                    {
                        self.wgmma_desc(a, k as u32 * elem.bytes(), span)
                    }
                    _ => {
                        self.error(
                            args[1].span,
                            format!("`wgmma_desc` starts at an element known after unrolling, a multiple of {step} (32 bytes) below {row} (one 128-byte row)"),
                        );
                        Val::Unit
                    }
                }
            }
            MemOp::TmaLoad | MemOp::TmaStore => {
                let load = op == MemOp::TmaLoad;
                self.tma_copy(load, &store, a, &iv, n, args, !guards.is_empty(), span);
                guards.clear();
                Val::Unit
            }
            MemOp::Mbar(o) => {
                let vals: Vec<Operand> = args[1..]
                    .iter()
                    .map(|x| {
                        let v = self.expr(x);
                        self.operand(&v, span)
                    })
                    .collect();
                self.mbar(o, a, vals, span)
            }
            MemOp::LoadNc => self.load(space, elem, a, true, span),
            MemOp::PrefetchL2 => {
                self.emit(Op::PrefetchL2, vec![a], span);
                Val::Unit
            }
            MemOp::LoadAcquire => self.op_to(Op::LdAcquire(mem_scalar(elem)), elem, vec![a], span),
            MemOp::StoreRelease => {
                let x = self.operand_reg(&vals[0], span);
                self.emit(Op::StRelease(mem_scalar(elem)), vec![a, x], span);
                Val::Unit
            }
            MemOp::Get => self.load(space, elem, a, false, span),
            MemOp::Read(t, 1) => self.load(space, t, a, false, span),
            MemOp::Read(t, count) => self.load_vec(space, t, count, a, false, span),
            MemOp::Set => {
                self.store(space, elem, a, &vals[0], span);
                Val::Unit
            }
            MemOp::LoadVec { n, nc } => self.load_vec(space, elem, n, a, nc, span),
            MemOp::StoreVec { n } => {
                self.store_vec(space, elem, n, a, &vals[0], span);
                Val::Unit
            }
            MemOp::Atomic(kind) => {
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
        };
        self.finish_guards(guards, &out);
        // Elements narrower than a word are taken apart behind the resume point, so that the
        // fault blocks zero whole words and the extraction sits next to its uses.
        match op {
            MemOp::LoadVec { .. } if elem.bytes() < 4 => self.unpack_words(elem, &out, span),
            MemOp::Read(t, count) if count > 1 && t.bytes() < 4 => self.unpack_words(t, &out, span),
            _ => out,
        }
    }

    /// Finishes the checks `guards` of a warp-wide access (their fault blocks record the
    /// failure and come back) and returns whether this lane's access failed one of them: a
    /// predicate register, or `None` where a check always fails.
    fn failed_lane(&mut self, guards: Vec<Guard>, span: Span) -> Option<Reg> {
        let preds: Vec<Option<Reg>> = guards.iter().map(|g| g.pred).collect();
        self.finish_guards(guards, &Val::Unit);
        let mut pred = preds[0];
        for q in &preds[1..] {
            pred = match (pred, *q) {
                (Some(p), Some(q)) => {
                    let o = self.op_to(
                        Op::Bin(BinKind::Or, Scalar::Bool),
                        Scalar::Bool,
                        vec![p.into(), q.into()],
                        span,
                    );
                    self.in_reg(&o, span)
                }
                _ => None,
            };
        }
        pred
    }

    /// The shared address `a`, or the array's first element where `out` (the failed check's
    /// predicate; `None`: always out of bounds) holds.
    fn ldmatrix_clamp(
        &mut self,
        store: &Store,
        a: Operand,
        out: Option<Reg>,
        span: Span,
    ) -> Operand {
        let Store::Shared { sym, off: view, .. } = store else {
            return a;
        };
        let view = *view as i64;
        let base = self.op_to(
            Op::Mov(Scalar::U32),
            Scalar::U32,
            vec![Operand::Name(sym.clone())],
            span,
        );
        let mut bo = self.operand_reg(&base, span);
        if view != 0 {
            // A view's first row.
            let v = self.op_to(
                Op::Bin(crate::ptx::BinKind::Add, Scalar::U32),
                Scalar::U32,
                vec![bo, Operand::Int(view as i128)],
                span,
            );
            bo = self.operand_reg(&v, span);
        }
        let Some(p) = out else {
            return super::addr(bo, 0);
        };
        let flat = match a {
            Operand::Addr(b, off) => {
                let s = self.op_to(
                    Op::Bin(crate::ptx::BinKind::Add, Scalar::U32),
                    Scalar::U32,
                    vec![*b, Operand::Int(off as i128)],
                    span,
                );
                self.operand_reg(&s, span)
            }
            other => other,
        };
        let sel = self.op_to(
            Op::Selp(Scalar::U32),
            Scalar::U32,
            vec![bo, flat, p.into()],
            span,
        );
        super::addr(self.operand_reg(&sel, span), 0)
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
        Val::Arr(regs.into_iter().map(|r| Val::Reg(r, Scalar::U32)).collect())
    }

    /// The elements of 16- or 8-bit type `elem` in the words of a vector load.
    fn unpack_words(&mut self, elem: Scalar, words: &Val, span: Span) -> Val {
        let Val::Arr(words) = words else {
            return Val::Unit;
        };
        let mut out = Vec::new();
        for wv in words {
            let Val::Reg(w, _) = *wv else { continue };
            if elem.bytes() == 2 {
                let (lo, hi) = self.unpack(wv, elem, span);
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

/// The 14-bit start-address field of a `wgmma` descriptor (address bits 4-17).
const WGMMA_ADDR_MASK: i128 = 0x3FFF;
/// A `wgmma` descriptor's leading byte offset field (bits 16-29): 16 bytes, in units of 16.
const WGMMA_LBO_FIELD: i128 = 1 << 16;
/// The high word of a `wgmma` descriptor of 128-byte swizzled rows: the stride byte offset
/// 1024 (8 rows of 128 bytes, in units of 16) and the swizzle mode 1 (128 bytes) at bits
/// 62-63 of the descriptor.
const WGMMA_DESC_HIGH: i128 = (1024 >> 4) | (1 << 30);

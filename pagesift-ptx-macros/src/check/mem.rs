//! Memory methods of slices and shared arrays (vector accesses, atomics, asynchronous copies,
//! `ldmatrix`) and the tensor-core intrinsics.

use super::checker::{err_expr, Checker};
use super::intrinsics::{AtomKind, Intr, MbarOp, MemOp, MmaType};
use super::{TExpr, TKind};
use crate::ctxt::Sp as Span;
use crate::parse::Expr;
use crate::ptx::{self, Op, Space};
use crate::types::{Scalar, Ty};

impl Checker<'_> {
    /// `mutable`: `Some(m)` for a slice, `None` for shared memory (always writable).
    pub(super) fn check_mem(
        &mut self,
        base: usize,
        elem: Scalar,
        mutable: Option<bool>,
        m: &str,
        args: &[Expr],
        span: Span,
    ) -> TExpr {
        let elem_ty = Ty::Scalar(elem);
        let writable = mutable.unwrap_or(true);
        let full = m;
        let (m, unchecked) = match m.strip_suffix("_unchecked") {
            Some(r) => (r, true),
            None => (m, false),
        };
        if unchecked && self.unsafe_depth == 0 {
            self.cx.error(
                span,
                format!("`{full}` skips the bounds check: it is allowed only inside an `unsafe {{ }}` block"),
            );
        }
        let (op, n_args) = if unchecked && m == "get" {
            (MemOp::Get, 1)
        } else if unchecked && m == "set" {
            (MemOp::Set, 2)
        } else if unchecked
            && !(m.starts_with("load")
                || m.starts_with("store")
                || m.starts_with("cp_async")
                || m == "prefetch_l2")
        {
            return self.unknown_mem(full, span);
        } else if m == "load_nc" {
            (MemOp::LoadNc, 1)
        } else if m == "prefetch_l2" {
            (MemOp::PrefetchL2, 1)
        } else if m == "load_acquire" {
            (MemOp::LoadAcquire, 1)
        } else if m == "store_release" {
            (MemOp::StoreRelease, 2)
        } else if let Some(rest) = m.strip_prefix("load") {
            let (num, nc) = match rest.strip_suffix("_nc") {
                Some(r) => (r, true),
                None => (rest, false),
            };
            match num.parse::<u32>() {
                Ok(n) => (MemOp::LoadVec { n, nc }, 1),
                Err(_) => return self.unknown_mem(m, span),
            }
        } else if let Some(num) = m.strip_prefix("store") {
            match num.parse::<u32>() {
                Ok(n) => (MemOp::StoreVec { n }, 2),
                Err(_) => return self.unknown_mem(m, span),
            }
        } else if let Some(k) = AtomKind::ALL.iter().find(|k| k.names().0 == m) {
            (MemOp::Atomic(*k), if *k == AtomKind::Cas { 3 } else { 2 })
        } else if let Some(rest) = m.strip_prefix("cp_async") {
            let (num, partial) = match rest.strip_suffix("_partial") {
                Some(r) => (r, true),
                None => (rest, false),
            };
            match num.parse::<u32>() {
                Ok(bytes @ (4 | 8 | 16)) => (
                    MemOp::CpAsync { bytes, partial },
                    if partial { 4 } else { 3 },
                ),
                _ => return self.unknown_mem(m, span),
            }
        } else if m == "wgmma_desc" {
            (MemOp::WgmmaDesc { rows: 0 }, 3)
        } else if m == "tma_load" {
            (MemOp::TmaLoad, 7)
        } else if m == "tma_store" {
            (MemOp::TmaStore, 5)
        } else if let Some(op) = MbarOp::ALL.iter().find(|o| o.method().0 == m) {
            (MemOp::Mbar(*op), 1 + op.method().1)
        } else if let Some((rest, store)) = m
            .strip_prefix("ldmatrix_x")
            .map(|r| (r, false))
            .or_else(|| m.strip_prefix("stmatrix_x").map(|r| (r, true)))
        {
            let (num, trans) = match rest.strip_suffix("_trans") {
                Some(r) => (r, true),
                None => (rest, false),
            };
            match (num.parse::<u32>(), store) {
                (Ok(n @ (1 | 2 | 4)), false) => (MemOp::Ldmatrix { n, trans }, 1),
                (Ok(n @ (1 | 2 | 4)), true) => (MemOp::Stmatrix { n, trans }, 2),
                _ => return self.unknown_mem(m, span),
            }
        } else {
            return self.unknown_mem(m, span);
        };
        if matches!(
            op,
            MemOp::CpAsync { .. }
                | MemOp::Ldmatrix { .. }
                | MemOp::Stmatrix { .. }
                | MemOp::WgmmaDesc { .. }
                | MemOp::TmaLoad
                | MemOp::TmaStore
                | MemOp::Mbar(_)
        ) {
            if unchecked && !matches!(op, MemOp::CpAsync { .. }) {
                return self.unknown_mem(full, span);
            }
            return self.check_shared_only(op, base, elem, mutable, m, args, !unchecked, span);
        }
        if !self.arity(args, n_args, m, span) {
            return err_expr(span);
        }
        if matches!(
            op,
            MemOp::LoadAcquire | MemOp::StoreRelease | MemOp::PrefetchL2
        ) {
            if mutable.is_none() {
                self.cx.error(
                    span,
                    format!(
                        "`{m}` works on slice parameters (global memory), not on shared arrays"
                    ),
                );
                return err_expr(span);
            }
            if op != MemOp::PrefetchL2
                && !matches!(
                    elem,
                    Scalar::U32
                        | Scalar::I32
                        | Scalar::U64
                        | Scalar::I64
                        | Scalar::F32
                        | Scalar::F64
                )
            {
                self.cx.error(
                    span,
                    format!("`{m}` is not available on `{elem}` (u32, i32, u64, i64, f32, f64)"),
                );
                return err_expr(span);
            }
        }
        let nc = matches!(op, MemOp::LoadNc | MemOp::LoadVec { nc: true, .. });
        if nc && mutable != Some(false) {
            self.cx.error(span, format!("`{m}` reads through the non-coherent cache: only for `&[T]` parameters (read-only for the whole kernel)"));
        }
        if matches!(
            op,
            MemOp::StoreVec { .. } | MemOp::Atomic(_) | MemOp::Set | MemOp::StoreRelease
        ) && !writable
        {
            self.cx.error(
                span,
                format!("`{m}` writes: declare the parameter `&mut [{elem}]`"),
            );
        }
        let idx = self.check_index(&args[0]);
        let mut targs = vec![idx];
        let ty = match op {
            MemOp::LoadNc | MemOp::Get | MemOp::LoadAcquire => elem_ty,
            MemOp::PrefetchL2 => Ty::Unit,
            MemOp::Set | MemOp::StoreRelease => {
                let v = self.check_expr(&args[1], Some(&elem_ty));
                self.expect_ty(&v, &elem_ty, args[1].span);
                targs.push(v);
                Ty::Unit
            }
            MemOp::Len
            | MemOp::IsAligned(_)
            | MemOp::Read(..)
            | MemOp::WgmmaDesc { .. }
            | MemOp::TmaLoad
            | MemOp::TmaStore
            | MemOp::Mbar(_) => return err_expr(span),
            MemOp::LoadVec { n, .. } | MemOp::StoreVec { n } => {
                let bytes = n * elem.bytes();
                if n < 2 || !matches!(bytes, 4 | 8 | 16) || elem == Scalar::Bool {
                    self.cx.error(span, format!("`{m}` on `{elem}` moves {bytes} bytes; vector accesses move 4, 8 or 16 bytes of 2 or more elements"));
                    return err_expr(span);
                }
                if let MemOp::StoreVec { .. } = op {
                    let want = Ty::Array(elem, n);
                    let v = self.check_expr(&args[1], Some(&want));
                    self.expect_ty(&v, &want, args[1].span);
                    targs.push(v);
                    Ty::Unit
                } else {
                    Ty::Array(elem, n)
                }
            }
            MemOp::CpAsync { .. } | MemOp::Ldmatrix { .. } | MemOp::Stmatrix { .. } => {
                return err_expr(span)
            }
            MemOp::Atomic(k) => {
                if !k.supports(elem) {
                    self.cx
                        .error(span, format!("`{m}` is not available on `{elem}`"));
                    return err_expr(span);
                }
                let atom = Op::Atom {
                    space: Space::Global,
                    kind: k,
                    ty: elem,
                };
                self.needs_op(&atom, &format!("{m}` on `{elem}"), span);
                for a in &args[1..] {
                    let v = self.check_expr(a, Some(&elem_ty));
                    self.expect_ty(&v, &elem_ty, a.span);
                    targs.push(v);
                }
                elem_ty
            }
        };
        TExpr {
            kind: TKind::Mem {
                op,
                base,
                args: targs,
                checked: !unchecked,
            },
            ty,
            span,
        }
    }

    /// Reports `what` when the kernel's target lacks the instruction form `op` lowers to (the
    /// minimum is the instruction table's).
    pub(super) fn needs_op(&mut self, op: &Op, what: &str, span: Span) {
        if let Ok((sm, _)) = ptx::requirement(op) {
            self.needs_sm(sm, what, span);
            if ptx::requires_arch(op) && self.target.sm >= sm && !self.target.name.ends_with('a') {
                self.cx.error(
                    span,
                    format!(
                        "`{what}` needs the architecture-specific target sm_{sm}a: add #[target(sm_{sm}a)] (this kernel targets {})",
                        self.target.name
                    ),
                );
            }
        }
    }

    /// Reports `what` when the kernel's target is below sm_`sm`.
    pub(super) fn needs_sm(&mut self, sm: u32, what: &str, span: Span) {
        if self.target.sm < sm && self.target_auto {
            // No `#[target]`: the variant takes the lowest target that has the instruction.
            if let Some(t) = super::Target::KNOWN
                .iter()
                .filter_map(|(n, _)| super::Target::parse(n))
                .find(|t| t.sm >= sm && !t.name.ends_with('a'))
            {
                self.target = t;
            }
        }
        if self.target.sm < sm {
            self.cx.error(
                span,
                format!(
                    "`{what}` needs sm_{sm} or later: add #[target(sm_{sm})] (this kernel targets {})",
                    self.target.name
                ),
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_mma(
        &mut self,
        name: &str,
        ty: MmaType,
        k: u32,
        na: u32,
        nb: u32,
        args: &[Expr],
        span: Span,
    ) -> TExpr {
        if !self.arity(args, 3, name, span) {
            return err_expr(span);
        }
        self.needs_op(&Op::Mma { ty, k }, name, span);
        let acc = if matches!(ty, MmaType::S8 | MmaType::U8) {
            Scalar::I32
        } else {
            Scalar::F32
        };
        let want = [
            Ty::Array(Scalar::U32, na),
            Ty::Array(Scalar::U32, nb),
            Ty::Array(acc, 4),
        ];
        let mut targs = Vec::new();
        for (a, w) in args.iter().zip(&want) {
            let t = self.check_expr(a, Some(w));
            self.expect_ty(&t, w, a.span);
            targs.push(t);
        }
        self.intr(Intr::Mma { ty, k }, targs, Ty::Array(acc, 4), span)
    }

    /// `acc = wgmma_T(acc, a, b, accumulate)`: `acc` the `[f32; n / 2]` accumulators of a
    /// `64 × n` tile, `a` and `b` descriptors of 64 and `n` rows of the input type (f16,
    /// bf16; f32 for TF32), `accumulate` false to ignore the accumulators' values. `a` may
    /// instead be a `[u32; 4]`: the thread's fragment of A in registers (`wgmma.mma_async`
    /// with A in registers).
    pub(super) fn check_wgmma(
        &mut self,
        name: &str,
        ty: MmaType,
        args: &[Expr],
        span: Span,
    ) -> TExpr {
        if !self.arity(args, 4, name, span) {
            return err_expr(span);
        }
        let acc = self.check_expr(&args[0], None);
        let n = match acc.ty {
            Ty::Array(Scalar::F32, len) if (4..=128).contains(&len) && len % 4 == 0 => 2 * len,
            Ty::Never => return err_expr(span),
            ref other => {
                self.cx.error(
                    args[0].span,
                    format!("`{name}` accumulates into `[f32; N]` with N = n / 2 for a 64 × n tile (N a multiple of 4, 4 ..= 128), not `{other}`"),
                );
                return err_expr(span);
            }
        };
        self.needs_op(&Op::Wgmma { ty, n }, name, span);
        let elem = match ty {
            MmaType::F16 => Scalar::F16,
            MmaType::Bf16 => Scalar::Bf16,
            _ => Scalar::F32,
        };
        let mut targs = vec![acc];
        let mut a_regs = false;
        for (i, (a, rows)) in args[1..3].iter().zip([64, n]).enumerate() {
            let want = Ty::Desc { elem, rows };
            let t = self.check_expr(a, Some(&want));
            let fits = match (&t.ty, elem) {
                // A in registers: the thread's four `.b32` words of A's fragment.
                (Ty::Array(Scalar::U32, 4), _) if i == 0 => {
                    a_regs = true;
                    true
                }
                (Ty::Desc { elem: e, rows: r }, Scalar::F32) => {
                    *r == rows && matches!(e, Scalar::F32 | Scalar::U32)
                }
                (other, _) => *other == want,
            };
            if !fits && t.ty != Ty::Never {
                let regs = if i == 0 {
                    " or `[u32; 4]` (A's fragment in registers)"
                } else {
                    ""
                };
                self.cx.error(
                    a.span,
                    format!(
                        "`{name}` takes `{want}` here (from `wgmma_desc`){regs}, not `{}`",
                        t.ty
                    ),
                );
            }
            targs.push(t);
        }
        let b = Ty::Scalar(Scalar::Bool);
        let acc_flag = self.check_expr(&args[3], Some(&b));
        self.expect_ty(&acc_flag, &b, args[3].span);
        targs.push(acc_flag);
        self.intr(
            Intr::Wgmma { ty, n, a_regs },
            targs,
            Ty::Array(Scalar::F32, n / 2),
            span,
        )
    }

    /// The tensor map and coordinates of a TMA copy `tile.m(i, map, x, y, z, ..)` of a
    /// `Shared<[elem; N]>` (`store`: from the tile, through a `TensorMapMut`), after the
    /// tile's index `idx`: `[idx, map, x, y, z]`, or `None` once an error is reported.
    fn check_tma_box(
        &mut self,
        m: &str,
        elem: Scalar,
        store: bool,
        args: &[Expr],
        idx: TExpr,
    ) -> Option<Vec<TExpr>> {
        let mt = self.check_expr(&args[1], None);
        match &mt.ty {
            Ty::TensorMap { elem: e, write, .. } if *e == elem && (*write || !store) => {}
            Ty::Never => return None,
            other => {
                let msg = if store {
                    format!("`{m}` from a `Shared<[{elem}; N]>` takes a `TensorMapMut<{elem}, C, R, D>` parameter (a map the kernel may write through), not `{other}`")
                } else {
                    format!("`{m}` into a `Shared<[{elem}; N]>` takes a `TensorMap<{elem}, C, R, D>` parameter, not `{other}`")
                };
                self.cx.error(args[1].span, msg);
                return None;
            }
        }
        if !matches!(mt.kind, TKind::Var(_)) {
            self.cx.error(
                args[1].span,
                format!("`{m}` takes a tensor map parameter by name"),
            );
            return None;
        }
        let i32t = Ty::Scalar(Scalar::I32);
        let mut targs = vec![idx, mt];
        for a in &args[2..5] {
            let v = self.check_expr(a, Some(&i32t));
            self.expect_ty(&v, &i32t, a.span);
            targs.push(v);
        }
        Some(targs)
    }

    /// `cp_async*` and `ldmatrix*`: methods of shared arrays only.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_shared_only(
        &mut self,
        op: MemOp,
        base: usize,
        elem: Scalar,
        mutable: Option<bool>,
        m: &str,
        args: &[Expr],
        checked: bool,
        span: Span,
    ) -> TExpr {
        if mutable.is_some() {
            self.cx.error(
                span,
                format!("`{m}` works on shared arrays (`Shared<[T; N]>`), not on slices"),
            );
            return err_expr(span);
        }
        let n_args = match op {
            MemOp::CpAsync { partial: true, .. } => 4,
            MemOp::CpAsync { .. } | MemOp::WgmmaDesc { .. } => 3,
            MemOp::Stmatrix { .. } => 2,
            MemOp::TmaLoad => 7,
            MemOp::TmaStore => 5,
            MemOp::Mbar(o) => 1 + o.method().1,
            _ => 1,
        };
        if !self.arity(args, n_args, m, span) {
            return err_expr(span);
        }
        let idx = self.check_index(&args[0]);
        match op {
            MemOp::CpAsync { bytes, .. } => {
                self.needs_op(&Op::CpAsync { bytes }, m, span);
                let Some((src, sty)) = self.place_base(&args[1]) else {
                    return err_expr(span);
                };
                match sty {
                    Ty::Slice { elem: se, .. }
                        if se.bytes() <= bytes && bytes % se.bytes() == 0 => {}
                    Ty::Never => return err_expr(span),
                    ref other => {
                        self.cx.error(
                            args[1].span,
                            format!("`{m}` copies from a slice parameter whose elements divide {bytes} bytes, not `{other}`"),
                        );
                        return err_expr(span);
                    }
                }
                if elem.bytes() > bytes || bytes % elem.bytes() != 0 {
                    self.cx.error(
                        span,
                        format!(
                            "`{m}` copies {bytes} bytes, which `{elem}` elements do not divide"
                        ),
                    );
                }
                let src_idx = self.check_index(&args[2]);
                let src_var = TExpr {
                    kind: TKind::Var(src),
                    ty: sty,
                    span: args[1].span,
                };
                let mut targs = vec![idx, src_var, src_idx];
                if n_args == 4 {
                    let u = Ty::Scalar(Scalar::U32);
                    let b = self.check_expr(&args[3], Some(&u));
                    self.expect_ty(&b, &u, args[3].span);
                    targs.push(b);
                }
                TExpr {
                    kind: TKind::Mem {
                        op,
                        base,
                        args: targs,
                        checked,
                    },
                    ty: Ty::Unit,
                    span,
                }
            }
            MemOp::WgmmaDesc { .. } => {
                // Rows of 128 bytes: 64 16-bit or 32 32-bit elements; a `wgmma` step reads
                // 32 bytes of each, from element `k`.
                if !matches!(elem.bytes(), 2 | 4) || elem == Scalar::Bool {
                    self.cx.error(
                        span,
                        format!("`{m}` describes rows of 16-bit or 32-bit elements, not `{elem}`"),
                    );
                    return err_expr(span);
                }
                let u = Ty::Scalar(Scalar::U32);
                let k = self.check_expr(&args[1], Some(&u));
                self.expect_ty(&k, &u, args[1].span);
                let Some(rows) = self.const_u32(&args[2], "the rows the descriptor covers") else {
                    return err_expr(span);
                };
                if rows == 0 || rows % 8 != 0 || rows > 256 {
                    self.cx.error(
                        args[2].span,
                        format!("`{m}` covers a multiple of 8 rows, at most 256, not {rows}"),
                    );
                }
                TExpr {
                    kind: TKind::Mem {
                        op: MemOp::WgmmaDesc { rows },
                        base,
                        args: vec![idx, k],
                        checked: true,
                    },
                    ty: Ty::Desc { elem, rows },
                    span,
                }
            }
            MemOp::Mbar(o) => {
                let ptx_op = match o {
                    MbarOp::Init => Op::MbarInit,
                    MbarOp::Arrive => Op::MbarArrive,
                    MbarOp::ArriveExpectTx => Op::MbarArriveTx,
                    MbarOp::Wait => Op::MbarTryWait,
                    MbarOp::ArriveCpAsync => Op::MbarArriveCpAsync,
                };
                self.needs_op(&ptx_op, m, span);
                if elem != Scalar::U64 {
                    self.cx.error(
                        span,
                        format!("`{m}` works on `mbarrier` objects, the elements of a `Shared<[u64; N]>`, not on `{elem}`"),
                    );
                    return err_expr(span);
                }
                let mut targs = vec![idx];
                let u = Ty::Scalar(Scalar::U32);
                for a in &args[1..] {
                    let v = self.check_expr(a, Some(&u));
                    self.expect_ty(&v, &u, a.span);
                    targs.push(v);
                }
                mem_expr(op, base, targs, Ty::Unit, span)
            }
            MemOp::TmaLoad => {
                self.needs_op(&Op::TmaLoad, m, span);
                let Some(mut targs) = self.check_tma_box(m, elem, false, args, idx) else {
                    return err_expr(span);
                };
                let Some((bars, bty)) = self.place_base(&args[5]) else {
                    return err_expr(span);
                };
                match bty {
                    Ty::Shared {
                        elem: Scalar::U64, ..
                    } => {}
                    Ty::Never => return err_expr(span),
                    ref other => {
                        self.cx.error(
                            args[5].span,
                            format!("`{m}` completes on an `mbarrier`, an element of a `Shared<[u64; N]>`, not of `{other}`"),
                        );
                        return err_expr(span);
                    }
                }
                targs.push(TExpr {
                    kind: TKind::Var(bars),
                    ty: bty,
                    span: args[5].span,
                });
                targs.push(self.check_index(&args[6]));
                mem_expr(op, base, targs, Ty::Unit, span)
            }
            MemOp::TmaStore => {
                self.needs_op(&Op::TmaStore, m, span);
                match self.check_tma_box(m, elem, true, args, idx) {
                    Some(targs) => mem_expr(op, base, targs, Ty::Unit, span),
                    None => err_expr(span),
                }
            }
            MemOp::Stmatrix { n, trans } => {
                self.needs_op(&Op::Stmatrix { n, trans }, m, span);
                if !(elem.bytes() == 2 || (elem.bytes() == 4 && !trans)) {
                    self.cx.error(
                        span,
                        format!("`{m}` stores 16-bit elements (or, not transposed, 32-bit ones), not `{elem}`"),
                    );
                }
                let want = Ty::Array(Scalar::U32, n);
                let v = self.check_expr(&args[1], Some(&want));
                self.expect_ty(&v, &want, args[1].span);
                TExpr {
                    kind: TKind::Mem {
                        op,
                        base,
                        args: vec![idx, v],
                        checked: true,
                    },
                    ty: Ty::Unit,
                    span,
                }
            }
            MemOp::Ldmatrix { n, trans } => {
                self.needs_op(&Op::Ldmatrix { n, trans }, m, span);
                // 32-bit elements load as pairs of 16-bit ones: the 8 × 4 (32-bit) matrices of
                // TF32 fragments; transposing needs 16-bit elements.
                if !(elem.bytes() == 2 || (elem.bytes() == 4 && !trans)) {
                    self.cx.error(
                        span,
                        format!("`{m}` loads 16-bit elements (or, not transposed, 32-bit ones), not `{elem}`"),
                    );
                }
                TExpr {
                    kind: TKind::Mem {
                        op,
                        base,
                        args: vec![idx],
                        checked: true,
                    },
                    ty: Ty::Array(Scalar::U32, n),
                    span,
                }
            }
            _ => err_expr(span),
        }
    }

    /// `bytes.read::<T>(off)` on a `&[u8]` / `&[i8]` slice or a shared byte array: the `T`
    /// stored at byte `off` (a field of a packed record), bounds-checked over its bytes and
    /// alignment-checked (`off` and the base a multiple of `size_of::<T>()`).
    pub(super) fn check_read(
        &mut self,
        recv: &Expr,
        generics: &[Expr],
        args: &[Expr],
        span: Span,
    ) -> TExpr {
        let Some((base, bty)) = self.place_base(recv) else {
            return err_expr(span);
        };
        match &bty {
            Ty::Slice { elem, .. } | Ty::Shared { elem, .. } if elem.is_byte() => {}
            Ty::Never => return err_expr(span),
            other => {
                self.cx.error(
                    recv.span,
                    format!("`read::<T>` reads typed values out of byte data (`&[u8]`, `&[i8]`, `Shared<[u8; N]>`), not `{other}`: index it instead"),
                );
                return err_expr(span);
            }
        }
        let scalar = |e: &Expr| match &e.kind {
            crate::parse::ExprKind::Var(n) => {
                Scalar::from_name(&n.to_string()).filter(|s| *s != Scalar::Bool)
            }
            _ => None,
        };
        let (ty, count) = match generics {
            [g] => match &g.kind {
                crate::parse::ExprKind::Repeat { value, len } => {
                    let n = self.const_u32(len, "the length of a vector read");
                    (scalar(value), n.unwrap_or(0))
                }
                _ => (scalar(g), 1),
            },
            _ => (None, 1),
        };
        let Some(ty) = ty else {
            self.cx.error(
                span,
                "`read` takes the type it reads: `bytes.read::<f16>(offset)` (a scalar type other than `bool`), or `bytes.read::<[u32; 4]>(offset)` (a vector of them)",
            );
            return err_expr(span);
        };
        let bytes = count * ty.bytes();
        if count != 1 && (count < 2 || !matches!(bytes, 4 | 8 | 16)) {
            self.cx.error(
                span,
                format!("`read::<[{ty}; {count}]>` moves {bytes} bytes; a vector read moves 4, 8 or 16 bytes of 2 or more values"),
            );
            return err_expr(span);
        }
        if !self.arity(args, 1, "read", span) {
            return err_expr(span);
        }
        let idx = self.check_index(&args[0]);
        TExpr {
            kind: TKind::Mem {
                op: MemOp::Read(ty, count),
                base,
                args: vec![idx],
                checked: true,
            },
            ty: if count == 1 {
                Ty::Scalar(ty)
            } else {
                Ty::Array(ty, count)
            },
            span,
        }
    }

    pub(super) fn unknown_mem(&self, m: &str, span: Span) -> TExpr {
        self.cx.error(
            span,
            format!("unknown memory method `{m}` (len, is_aligned, prefetch_l2 (slices), load_nc, load_acquire, store_release, loadN, loadN_nc, storeN, atomic_add/min/max/exch/cas/and/or/xor; in `unsafe`: get_unchecked, set_unchecked, loadN_unchecked, loadN_nc_unchecked, storeN_unchecked, load_acquire_unchecked, store_release_unchecked, prefetch_l2_unchecked, cp_asyncN_unchecked; on shared arrays cp_asyncN, cp_asyncN_partial, ldmatrix_xN, ldmatrix_xN_trans, stmatrix_xN, stmatrix_xN_trans, wgmma_desc, tma_load, tma_store; on `Shared<[u64; N]>` mbar_init, mbar_arrive, mbar_arrive_expect_tx, mbar_wait)"),
        );
        err_expr(span)
    }
}

/// A checked memory method's expression.
fn mem_expr(op: MemOp, base: usize, args: Vec<TExpr>, ty: Ty, span: Span) -> TExpr {
    TExpr {
        kind: TKind::Mem {
            op,
            base,
            args,
            checked: true,
        },
        ty,
        span,
    }
}

//! The type checker of one variant: statements and expressions.

use super::{
    Place, TBlock, TExpr, TKind, TStmt, Target, VarId, VarInfo, Variant, STATIC_SHARED_LIMIT,
};
use crate::ctxt::Ctxt;
use crate::ctxt::Sp as Span;
use crate::parse::{
    BinOp, Block, ConstTy, Expr, ExprKind, FnItem, Pat, Stmt, TypeAst, TypeKind, UnOp,
};
use crate::types::{wrap_int, ConstVal, Scalar, Ty};
use std::collections::HashMap;

#[derive(Clone)]
pub(super) enum Binding {
    Var(VarId),
    Const(ConstVal, Ty),
}

pub(super) struct Frame {
    scopes: Vec<HashMap<String, Binding>>,
    pub(super) ret: Ty,
    loops: usize,
}

impl Frame {
    pub(super) fn new(scope: HashMap<String, Binding>, ret: Ty) -> Frame {
        Frame {
            scopes: vec![scope],
            ret,
            loops: 0,
        }
    }

    pub(super) fn bind(&mut self, name: &str, b: Binding) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), b);
        }
    }
}

pub(super) struct Checker<'a> {
    pub(super) cx: &'a Ctxt,
    pub(super) helpers: &'a HashMap<String, &'a FnItem>,
    pub(super) target: Target,
    pub(super) block: [u32; 3],
    pub(super) vars: Vec<VarInfo>,
    pub(super) shared: Vec<(VarId, Scalar, u32)>,
    pub(super) dyn_shared: Option<(VarId, Scalar)>,
    pub(super) frames: Vec<Frame>,
}

/// Whether `a` and `b` agree (`!` agrees with everything; it also stands for an error).
pub(super) fn same(a: &Ty, b: &Ty) -> bool {
    a == b || *a == Ty::Never || *b == Ty::Never
}

pub(super) fn err_expr(span: Span) -> TExpr {
    TExpr {
        kind: TKind::Const(ConstVal::Int(0)),
        ty: Ty::Never,
        span,
    }
}

fn const_ty(ty: &ConstTy) -> Ty {
    match ty {
        ConstTy::Int(s) => Ty::Scalar(*s),
        ConstTy::Bool => Ty::Scalar(Scalar::Bool),
        ConstTy::Enum(_) => Ty::Enum,
    }
}

/// Checks one variant of kernel `f`; `None` when it has errors.
pub(super) fn check_variant(
    cx: &Ctxt,
    f: &FnItem,
    helpers: &HashMap<String, &FnItem>,
    consts: Vec<(String, ConstVal)>,
) -> Option<Variant> {
    let before = cx.count();
    let target = match &f.target {
        None => Target::parse("sm_70"),
        Some((name, span)) => {
            let t = Target::parse(name);
            if t.is_none() {
                let known: Vec<&str> = Target::KNOWN.iter().map(|(n, _)| *n).collect();
                cx.error(
                    *span,
                    format!("unknown target `{name}` (known: {})", known.join(", ")),
                );
            }
            t
        }
    }?;
    let mut ck = Checker {
        cx,
        helpers,
        target,
        block: [1, 1, 1],
        vars: Vec::new(),
        shared: Vec::new(),
        dyn_shared: None,
        frames: Vec::new(),
    };
    let mut scope = HashMap::new();
    for c in &f.consts {
        if let Some((_, v)) = consts.iter().find(|(n, _)| c.name == n.as_str()) {
            scope.insert(
                c.name.to_string(),
                Binding::Const(v.clone(), const_ty(&c.ty)),
            );
        }
    }
    ck.frames.push(Frame::new(scope, Ty::Unit));
    let mut min_blocks = 1;
    let mut max_regs = None;
    match &f.launch {
        None => cx.error(
            f.name.span(),
            "a kernel needs `#[launch(block = N)]` (or `block = (X, Y)`)",
        ),
        Some(l) => {
            for (i, e) in l.block.iter().enumerate() {
                if let Some(v) = ck.const_u32(e, "a block dimension") {
                    ck.block[i] = v;
                }
            }
            if let Some(e) = &l.min_blocks {
                min_blocks = ck.const_u32(e, "`min_blocks`").unwrap_or(1).max(1);
            }
            if let Some(e) = &l.max_regs {
                max_regs = ck.const_u32(e, "`max_regs`");
                if max_regs.is_some_and(|r| !(24..=255).contains(&r)) {
                    cx.error(e.span, "`max_regs` is between 24 and 255");
                }
            }
            let threads: u64 = ck.block.iter().map(|&d| d as u64).product();
            if ck.block.contains(&0) || threads > 1024 {
                cx.error(
                    l.span,
                    format!("a block has 1 to 1024 threads (this one has {threads})"),
                );
            }
        }
    }
    let mut params = Vec::new();
    for p in &f.params {
        let ty = super::kernel_param_ty(&Ctxt::new(), &p.ty).unwrap_or(Ty::Never);
        let mutable = false;
        let id = ck.declare(&p.name.to_string(), ty, mutable);
        params.push(id);
    }
    let body = ck.check_block(&f.body, Some(&Ty::Unit));
    if !same(&body.ty, &Ty::Unit) {
        if let Some(t) = &f.body.tail {
            cx.error(
                t.span,
                "a kernel's body ends with a statement, not a value (add `;`)",
            );
        }
    }
    if cx.count() > before {
        return None;
    }
    let entry = super::entry_name(&f.name.to_string(), &consts);
    Some(Variant {
        consts,
        entry,
        target: ck.target,
        block: ck.block,
        min_blocks,
        max_regs,
        params,
        vars: ck.vars,
        shared: ck.shared,
        dyn_shared: ck.dyn_shared,
        body,
    })
}

impl Checker<'_> {
    fn frame(&mut self) -> &mut Frame {
        let n = self.frames.len() - 1;
        &mut self.frames[n]
    }

    pub(super) fn declare(&mut self, name: &str, ty: Ty, mutable: bool) -> VarId {
        let id = self.vars.len();
        self.vars.push(VarInfo {
            name: name.to_string(),
            ty,
            mutable,
        });
        self.bind(name, Binding::Var(id));
        id
    }

    fn bind(&mut self, name: &str, b: Binding) {
        if let Some(scope) = self.frame().scopes.last_mut() {
            scope.insert(name.to_string(), b);
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Binding> {
        let frame = self.frames.last()?;
        frame.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    /// Evaluates `e` as a constant u32 (block dimensions, array lengths).
    pub(super) fn const_u32(&mut self, e: &Expr, what: &str) -> Option<u32> {
        let t = self.check_expr(e, Some(&Ty::Scalar(Scalar::U32)));
        match t.kind {
            TKind::Const(ConstVal::Int(v)) if (0..=u32::MAX as i128).contains(&v) => Some(v as u32),
            _ if t.ty == Ty::Never => None,
            _ => {
                self.cx.error(
                    e.span,
                    format!("{what} must be a constant non-negative integer"),
                );
                None
            }
        }
    }

    /// The type a written type denotes, with array lengths evaluated.
    pub(super) fn resolve_ty(&mut self, t: &TypeAst) -> Ty {
        match &t.kind {
            TypeKind::Scalar(s) => Ty::Scalar(*s),
            TypeKind::Unit => Ty::Unit,
            TypeKind::Slice { elem, mutable } => Ty::Slice {
                elem: *elem,
                mutable: *mutable,
            },
            TypeKind::Array { elem, len } => match self.const_u32(len, "an array length") {
                Some(0) | None => Ty::Never,
                Some(n) if n > 1024 => {
                    self.cx
                        .error(len.span, "register arrays hold at most 1024 elements");
                    Ty::Never
                }
                Some(n) => Ty::Array(*elem, n),
            },
            TypeKind::Shared { elem, len } => match len {
                None => Ty::Shared {
                    elem: *elem,
                    len: None,
                },
                Some(l) => match self.const_u32(l, "a shared array length") {
                    Some(n) if n > 0 => Ty::Shared {
                        elem: *elem,
                        len: Some(n),
                    },
                    _ => Ty::Never,
                },
            },
        }
    }

    pub(super) fn check_block(&mut self, b: &Block, expect: Option<&Ty>) -> TBlock {
        self.frame().scopes.push(HashMap::new());
        let mut stmts = Vec::new();
        let mut diverges = false;
        for s in &b.stmts {
            match s {
                Stmt::Let {
                    name,
                    mutable,
                    ty,
                    init,
                    span,
                } => {
                    if let Some(st) =
                        self.check_let(name, *mutable, ty.as_ref(), init.as_ref(), *span)
                    {
                        stmts.push(st);
                    }
                }
                Stmt::Expr(e) => {
                    let t = self.check_expr(e, None);
                    if t.ty == Ty::Never && !matches!(t.kind, TKind::Const(_)) {
                        diverges = true;
                    }
                    stmts.push(TStmt::Expr(t));
                }
            }
        }
        let tail = b
            .tail
            .as_ref()
            .map(|t| Box::new(self.check_expr(t, expect)));
        self.frame().scopes.pop();
        let ty = match &tail {
            Some(t) => t.ty.clone(),
            None if diverges => Ty::Never,
            None => Ty::Unit,
        };
        TBlock { stmts, tail, ty }
    }

    fn check_let(
        &mut self,
        name: &syn::Ident,
        mutable: bool,
        ty: Option<&TypeAst>,
        init: Option<&Expr>,
        span: Span,
    ) -> Option<TStmt> {
        let declared = ty.map(|t| self.resolve_ty(t));
        let name_s = name.to_string();
        if let Some(Ty::Shared { elem, len }) = &declared {
            if let Some(i) = init {
                self.cx.error(
                    i.span,
                    "shared arrays are declared without a value: `let t: Shared<[f32; 256]>;`",
                );
            }
            if *elem == Scalar::Bool {
                self.cx
                    .error(span, "shared arrays of `bool` are not supported: use `u8`");
            }
            let id = self.declare(&name_s, declared.clone().unwrap_or(Ty::Never), true);
            match len {
                Some(n) => {
                    self.shared.push((id, *elem, *n));
                    let total: u32 = self
                        .shared
                        .iter()
                        .map(|(_, s, n)| (s.bytes() * n).div_ceil(16) * 16)
                        .sum();
                    if total > STATIC_SHARED_LIMIT {
                        self.cx.error(
                            span,
                            format!(
                                "static shared memory of this kernel reaches {total} bytes, over the {STATIC_SHARED_LIMIT}-byte limit; use dynamic shared memory (`Shared<[T]>`)"
                            ),
                        );
                    }
                }
                None => {
                    if self.dyn_shared.is_some() {
                        self.cx.error(
                            span,
                            "a kernel has at most one dynamic shared array `Shared<[T]>`",
                        );
                    }
                    self.dyn_shared = Some((id, *elem));
                }
            }
            return None;
        }
        if let Some(Ty::Slice { .. }) = &declared {
            self.cx
                .error(span, "slices are kernel parameters, not local variables");
            return None;
        }
        let Some(init) = init else {
            self.cx
                .error(span, format!("`{name_s}` needs an initial value"));
            self.declare(&name_s, declared.unwrap_or(Ty::Never), mutable);
            return None;
        };
        let value = self.check_expr(init, declared.as_ref());
        let ty = match declared {
            Some(d) => {
                if !same(&d, &value.ty) {
                    self.cx.error(
                        init.span,
                        format!("mismatched types: expected `{d}`, found `{}`", value.ty),
                    );
                }
                d
            }
            None => value.ty.clone(),
        };
        match &ty {
            Ty::Unit | Ty::Enum | Ty::Slice { .. } | Ty::Shared { .. } => {
                self.cx.error(
                    span,
                    format!("a `let` holds a scalar or a register array, not `{ty}`"),
                );
            }
            _ => {}
        }
        if !mutable && ty != Ty::Never {
            if let TKind::Const(v) = &value.kind {
                // Immutable constants stay constants (register-array indices, unrolled bounds).
                self.bind(&name_s, Binding::Const(v.clone(), ty));
                return None;
            }
        }
        let var = self.declare(&name_s, ty, mutable);
        Some(TStmt::Let {
            var,
            init: Some(value),
        })
    }

    /// Whether `e` is a literal whose type comes from context.
    fn untyped(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Int(_, None) | ExprKind::Float(_, None) => true,
            ExprKind::Unary { expr, .. } => Self::untyped(expr),
            ExprKind::Binary { op, lhs, rhs } if !op.is_cmp() => {
                Self::untyped(lhs) && Self::untyped(rhs)
            }
            _ => false,
        }
    }

    pub(super) fn check_expr(&mut self, e: &Expr, expect: Option<&Ty>) -> TExpr {
        let span = e.span;
        let mk = |kind, ty| TExpr { kind, ty, span };
        let expect_scalar = match expect {
            Some(Ty::Scalar(s)) => Some(*s),
            _ => None,
        };
        match &e.kind {
            ExprKind::Error => err_expr(span),
            ExprKind::Unit => mk(
                TKind::Block(TBlock {
                    stmts: vec![],
                    tail: None,
                    ty: Ty::Unit,
                }),
                Ty::Unit,
            ),
            ExprKind::Bool(b) => mk(TKind::Const(ConstVal::Bool(*b)), Ty::Scalar(Scalar::Bool)),
            ExprKind::Int(v, suffix) => {
                let ty = suffix
                    .or(expect_scalar.filter(|s| s.is_int() || s.is_float()))
                    .unwrap_or(if *v < 0 { Scalar::I32 } else { Scalar::U32 });
                if ty.is_float() {
                    return mk(TKind::Const(ConstVal::Float(*v as f64)), Ty::Scalar(ty));
                }
                if !ty.is_int() {
                    self.cx
                        .error(span, format!("an integer literal cannot have type `{ty}`"));
                    return err_expr(span);
                }
                if wrap_int(*v, ty) != *v {
                    self.cx
                        .error(span, format!("literal out of range for `{ty}`"));
                    return err_expr(span);
                }
                mk(TKind::Const(ConstVal::Int(*v)), Ty::Scalar(ty))
            }
            ExprKind::Float(v, suffix) => {
                let ty = suffix
                    .or(expect_scalar.filter(|s| s.is_float()))
                    .unwrap_or(Scalar::F32);
                if !ty.is_float() {
                    self.cx
                        .error(span, format!("a float literal cannot have type `{ty}`"));
                    return err_expr(span);
                }
                mk(TKind::Const(ConstVal::Float(*v)), Ty::Scalar(ty))
            }
            ExprKind::Var(name) => match self.lookup(&name.to_string()) {
                Some(Binding::Var(id)) => mk(TKind::Var(id), self.vars[id].ty.clone()),
                Some(Binding::Const(v, ty)) => mk(TKind::Const(v), ty),
                None => {
                    self.cx
                        .error(span, format!("cannot find `{name}` in this scope"));
                    err_expr(span)
                }
            },
            ExprKind::Path(segs) => self.check_path(segs, span),
            ExprKind::Unary { op, expr } => {
                let x = self.check_expr(expr, expect);
                self.unary(*op, x, span)
            }
            ExprKind::Binary { op, lhs, rhs } => self.check_binary(*op, lhs, rhs, expect, span),
            ExprKind::Cast { expr, ty } => {
                let to = self.resolve_ty(ty);
                let x = self.check_expr(expr, None);
                self.cast(x, &to, span)
            }
            ExprKind::Index { base, index } => {
                let (base_id, base_ty) = match self.place_base(base) {
                    Some(b) => b,
                    None => return err_expr(span),
                };
                let idx = self.check_index(index);
                let elem = match base_ty {
                    Ty::Array(s, n) => {
                        if let TKind::Const(ConstVal::Int(i)) = idx.kind {
                            if i < 0 || i >= n as i128 {
                                self.cx.error(
                                    index.span,
                                    format!("index {i} is out of bounds for `[{s}; {n}]`"),
                                );
                            }
                        }
                        s
                    }
                    Ty::Slice { elem, .. } | Ty::Shared { elem, .. } => elem,
                    Ty::Never => return err_expr(span),
                    other => {
                        self.cx
                            .error(base.span, format!("cannot index a value of type `{other}`"));
                        return err_expr(span);
                    }
                };
                mk(
                    TKind::Index {
                        base: base_id,
                        index: Box::new(idx),
                    },
                    Ty::Scalar(elem),
                )
            }
            ExprKind::If { cond, then, els } => {
                let c = self.check_expr(cond, Some(&Ty::Scalar(Scalar::Bool)));
                self.expect_ty(&c, &Ty::Scalar(Scalar::Bool), cond.span);
                if let TKind::Const(ConstVal::Bool(b)) = c.kind {
                    // Resolved at expansion: only the taken branch exists in this variant.
                    return if b {
                        let t = self.check_block(then, expect);
                        let ty = if els.is_some() {
                            t.ty.clone()
                        } else {
                            Ty::Unit
                        };
                        mk(TKind::Block(t), ty)
                    } else {
                        match els {
                            Some(x) => self.check_expr(x, expect),
                            None => mk(
                                TKind::Block(TBlock {
                                    stmts: vec![],
                                    tail: None,
                                    ty: Ty::Unit,
                                }),
                                Ty::Unit,
                            ),
                        }
                    };
                }
                let t = self.check_block(then, expect);
                let (els, ty) = match els {
                    Some(x) => {
                        let ex = self.check_expr(x, expect.or(Some(&t.ty)));
                        let ty = if t.ty == Ty::Never {
                            ex.ty.clone()
                        } else {
                            t.ty.clone()
                        };
                        if !same(&t.ty, &ex.ty) {
                            self.cx.error(
                                x.span,
                                format!(
                                    "`if` and `else` have different types: `{}` and `{}`",
                                    t.ty, ex.ty
                                ),
                            );
                        }
                        (Some(Box::new(ex)), ty)
                    }
                    None => (None, Ty::Unit),
                };
                mk(
                    TKind::If {
                        cond: Box::new(c),
                        then: t,
                        els,
                    },
                    ty,
                )
            }
            ExprKind::Match { scrut, arms } => {
                let s = self.check_expr(scrut, None);
                if let TKind::Const(v) = &s.kind {
                    for (pat, body) in arms {
                        if pat_matches(pat, v) {
                            return self.check_expr(body, expect);
                        }
                    }
                    self.cx.error(span, format!("no `match` arm matches `{v}`"));
                    return err_expr(span);
                }
                // Not constant here: it must become one after unrolling (an `#[unroll]`
                // counter); lowering picks the arm or reports the error.
                if !matches!(s.ty, Ty::Scalar(t) if t.is_int() || t == Scalar::Bool) {
                    if s.ty != Ty::Never {
                        self.cx.error(scrut.span, format!("`match` works on constants (integers, bools, enum consts), not `{}`", s.ty));
                    }
                    return err_expr(span);
                }
                let mut tarms = Vec::new();
                let mut ty: Option<Ty> = None;
                for (pat, body) in arms {
                    let t = self.check_expr(body, expect.or(ty.as_ref()));
                    match &ty {
                        Some(prev) if !same(prev, &t.ty) => self.cx.error(
                            body.span,
                            format!("`match` arms have different types: `{prev}` and `{}`", t.ty),
                        ),
                        Some(prev) if *prev == Ty::Never => ty = Some(t.ty.clone()),
                        None => ty = Some(t.ty.clone()),
                        _ => {}
                    }
                    tarms.push((pat.clone(), t));
                }
                let ty = ty.unwrap_or(Ty::Unit);
                mk(
                    TKind::Match {
                        scrut: Box::new(s),
                        arms: tarms,
                    },
                    ty,
                )
            }
            ExprKind::Block(b) => {
                let t = self.check_block(b, expect);
                let ty = t.ty.clone();
                mk(TKind::Block(t), ty)
            }
            ExprKind::Array(items) => {
                let elem_expect = match expect {
                    Some(Ty::Array(s, _)) => Some(Ty::Scalar(*s)),
                    _ => None,
                };
                let mut out: Vec<TExpr> = Vec::new();
                let mut elem: Option<Ty> = elem_expect.clone();
                for it in items {
                    let x = self.check_expr(it, elem.as_ref());
                    match &elem {
                        Some(t) if !same(t, &x.ty) => self.cx.error(
                            it.span,
                            format!("mismatched types: expected `{t}`, found `{}`", x.ty),
                        ),
                        None => elem = Some(x.ty.clone()),
                        _ => {}
                    }
                    out.push(x);
                }
                match elem {
                    Some(Ty::Scalar(s)) if !out.is_empty() => {
                        let n = out.len() as u32;
                        mk(TKind::Array(out), Ty::Array(s, n))
                    }
                    Some(Ty::Never) => err_expr(span),
                    _ => {
                        self.cx
                            .error(span, "register arrays hold scalars and are not empty");
                        err_expr(span)
                    }
                }
            }
            ExprKind::Repeat { value, len } => {
                let elem_expect = match expect {
                    Some(Ty::Array(s, _)) => Some(Ty::Scalar(*s)),
                    _ => None,
                };
                let v = self.check_expr(value, elem_expect.as_ref());
                let n = self.const_u32(len, "an array length");
                match (&v.ty, n) {
                    (Ty::Scalar(s), Some(n)) if n > 0 && n <= 1024 => {
                        let s = *s;
                        mk(TKind::Repeat(Box::new(v), n), Ty::Array(s, n))
                    }
                    (Ty::Never, _) | (_, None) => err_expr(span),
                    _ => {
                        self.cx
                            .error(span, "register arrays hold 1 to 1024 scalars");
                        err_expr(span)
                    }
                }
            }
            ExprKind::Assign { place, op, value } => self.check_assign(place, *op, value, span),
            ExprKind::For {
                var,
                start,
                end,
                inclusive,
                body,
                unroll,
            } => {
                let (s, en) = if Self::untyped(start) && !Self::untyped(end) {
                    let en = self.check_expr(end, None);
                    (self.check_expr(start, Some(&en.ty)), en)
                } else {
                    let s = self.check_expr(start, None);
                    let t = s.ty.clone();
                    (s, self.check_expr(end, Some(&t)))
                };
                if !same(&s.ty, &en.ty) {
                    self.cx.error(
                        end.span,
                        format!(
                            "range bounds have different types: `{}` and `{}`",
                            s.ty, en.ty
                        ),
                    );
                }
                let ty = if s.ty == Ty::Never {
                    en.ty.clone()
                } else {
                    s.ty.clone()
                };
                if !matches!(ty, Ty::Scalar(t) if t.is_int() && !t.is_byte()) && ty != Ty::Never {
                    self.cx.error(
                        start.span,
                        format!("`for` ranges are over integers, not `{ty}`"),
                    );
                }
                if *unroll {
                    match (&s.kind, &en.kind) {
                        (TKind::Const(ConstVal::Int(a)), TKind::Const(ConstVal::Int(b))) => {
                            let trips = b - a + if *inclusive { 1 } else { 0 };
                            if trips > 4096 {
                                self.cx.error(
                                    span,
                                    format!("#[unroll] of {trips} iterations (at most 4096)"),
                                );
                            }
                        }
                        _ if s.ty == Ty::Never || en.ty == Ty::Never => {}
                        (TKind::Const(_), _) => self
                            .cx
                            .error(end.span, "#[unroll] needs constant range bounds"),
                        _ => self
                            .cx
                            .error(start.span, "#[unroll] needs constant range bounds"),
                    }
                }
                self.frame().scopes.push(HashMap::new());
                let id = self.declare(&var.to_string(), ty, false);
                self.frame().loops += 1;
                let b = self.check_block(body, Some(&Ty::Unit));
                self.frame().loops -= 1;
                self.frame().scopes.pop();
                let kind = TKind::For {
                    var: id,
                    start: Box::new(s),
                    end: Box::new(en),
                    inclusive: *inclusive,
                    body: b,
                    unroll: *unroll,
                };
                mk(kind, Ty::Unit)
            }
            ExprKind::While { cond, body } => {
                let c = self.check_expr(cond, Some(&Ty::Scalar(Scalar::Bool)));
                self.expect_ty(&c, &Ty::Scalar(Scalar::Bool), cond.span);
                if let TKind::Const(ConstVal::Bool(false)) = c.kind {
                    return mk(
                        TKind::Block(TBlock {
                            stmts: vec![],
                            tail: None,
                            ty: Ty::Unit,
                        }),
                        Ty::Unit,
                    );
                }
                self.frame().loops += 1;
                let b = self.check_block(body, Some(&Ty::Unit));
                self.frame().loops -= 1;
                mk(
                    TKind::While {
                        cond: Box::new(c),
                        body: b,
                    },
                    Ty::Unit,
                )
            }
            ExprKind::Break | ExprKind::Continue => {
                if self.frames.last().is_none_or(|f| f.loops == 0) {
                    let w = if matches!(e.kind, ExprKind::Break) {
                        "break"
                    } else {
                        "continue"
                    };
                    self.cx.error(span, format!("`{w}` outside of a loop"));
                }
                let k = if matches!(e.kind, ExprKind::Break) {
                    TKind::Break
                } else {
                    TKind::Continue
                };
                mk(k, Ty::Never)
            }
            ExprKind::Return(v) => {
                let ret = self
                    .frames
                    .last()
                    .map(|f| f.ret.clone())
                    .unwrap_or(Ty::Unit);
                let value = match v {
                    Some(x) => {
                        let t = self.check_expr(x, Some(&ret));
                        if !same(&t.ty, &ret) {
                            self.cx.error(
                                x.span,
                                format!("mismatched types: expected `{ret}`, found `{}`", t.ty),
                            );
                        }
                        Some(Box::new(t))
                    }
                    None => {
                        if ret != Ty::Unit && ret != Ty::Never {
                            self.cx
                                .error(span, format!("`return` needs a value of type `{ret}`"));
                        }
                        None
                    }
                };
                mk(TKind::Return(value), Ty::Never)
            }
            ExprKind::Call {
                func,
                generics,
                args,
            } => self.check_call(func, generics, args, expect, span),
            ExprKind::Method { recv, method, args } => {
                self.check_method(recv, method, args, expect, span)
            }
            ExprKind::Asm { template, operands } => self.check_asm(template, operands, span),
        }
    }

    pub(super) fn expect_ty(&self, t: &TExpr, want: &Ty, span: Span) {
        if !same(&t.ty, want) {
            self.cx.error(
                span,
                format!("mismatched types: expected `{want}`, found `{}`", t.ty),
            );
        }
    }

    /// An index expression: any integer type but the 8-bit ones.
    pub(super) fn check_index(&mut self, index: &Expr) -> TExpr {
        let idx = self.check_expr(index, None);
        match &idx.ty {
            Ty::Scalar(s) if s.is_int() && !s.is_byte() => {}
            Ty::Never => {}
            other => self.cx.error(
                index.span,
                format!("indices are integers (u32, i32, u64, ...), not `{other}`"),
            ),
        }
        idx
    }

    /// The variable a place expression (`x` in `x[i]`, `x.load4(i)`) names.
    pub(super) fn place_base(&mut self, base: &Expr) -> Option<(VarId, Ty)> {
        match &base.kind {
            ExprKind::Var(name) => match self.lookup(&name.to_string()) {
                Some(Binding::Var(id)) => Some((id, self.vars[id].ty.clone())),
                Some(Binding::Const(_, ty)) => {
                    self.cx.error(
                        base.span,
                        format!("`{name}` is a constant of type `{ty}`, it cannot be indexed"),
                    );
                    None
                }
                None => {
                    self.cx
                        .error(base.span, format!("cannot find `{name}` in this scope"));
                    None
                }
            },
            ExprKind::Error => None,
            _ => {
                self.cx
                    .error(base.span, "only named arrays and slices can be indexed");
                None
            }
        }
    }

    fn check_path(&mut self, segs: &[syn::Ident], span: Span) -> TExpr {
        let mk = |kind, ty| TExpr { kind, ty, span };
        if segs.len() == 2 {
            if let Some(s) = Scalar::from_name(&segs[0].to_string()) {
                if let Some(v) = assoc_const(s, &segs[1].to_string()) {
                    return mk(TKind::Const(v), Ty::Scalar(s));
                }
                self.cx
                    .error(span, format!("unknown constant `{s}::{}`", segs[1]));
                return err_expr(span);
            }
        }
        // `Act::Relu`, `crate::Act::Relu`: an enum variant, matched by its last segment.
        match segs.last() {
            Some(last) => mk(TKind::Const(ConstVal::Enum(last.to_string())), Ty::Enum),
            None => err_expr(span),
        }
    }

    fn check_binary(
        &mut self,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        if matches!(op, BinOp::LogicAnd | BinOp::LogicOr) {
            let b = Ty::Scalar(Scalar::Bool);
            let l = self.check_expr(lhs, Some(&b));
            self.expect_ty(&l, &b, lhs.span);
            // `false && x`, `true || x`: decided without `x`, so `x` is never evaluated.
            match (&l.kind, op) {
                (TKind::Const(ConstVal::Bool(false)), BinOp::LogicAnd) => return l,
                (TKind::Const(ConstVal::Bool(true)), BinOp::LogicOr) => return l,
                (TKind::Const(ConstVal::Bool(_)), _) => {
                    let r = self.check_expr(rhs, Some(&b));
                    self.expect_ty(&r, &b, rhs.span);
                    return r;
                }
                _ => {}
            }
            let r = self.check_expr(rhs, Some(&b));
            self.expect_ty(&r, &b, rhs.span);
            return TExpr {
                kind: TKind::Binary(op, Box::new(l), Box::new(r)),
                ty: b,
                span,
            };
        }
        let operand_expect = if op.is_cmp() { None } else { expect };
        let (l, r) = if matches!(op, BinOp::Shl | BinOp::Shr) {
            let l = self.check_expr(lhs, operand_expect);
            let r = self.check_expr(rhs, Some(&Ty::Scalar(Scalar::U32)));
            (l, r)
        } else if Self::untyped(lhs) && !Self::untyped(rhs) {
            let r = self.check_expr(rhs, operand_expect);
            let t = r.ty.clone();
            (self.check_expr(lhs, Some(&t)), r)
        } else {
            let l = self.check_expr(lhs, operand_expect);
            let t = l.ty.clone();
            (l, self.check_expr(rhs, Some(&t)))
        };
        self.binary(op, l, r, span)
    }

    /// Types and folds a binary operation on checked operands.
    pub(super) fn binary(&mut self, op: BinOp, l: TExpr, r: TExpr, span: Span) -> TExpr {
        if l.ty == Ty::Never || r.ty == Ty::Never {
            return err_expr(span);
        }
        let shift = matches!(op, BinOp::Shl | BinOp::Shr);
        if !shift && l.ty != r.ty {
            self.cx.error(
                span,
                format!(
                    "mismatched types: `{}` {} `{}` (convert one side with `as`)",
                    l.ty,
                    op_str(op),
                    r.ty
                ),
            );
            return err_expr(span);
        }
        let ok = match (&l.ty, op) {
            (Ty::Enum, BinOp::Eq | BinOp::Ne) => true,
            (Ty::Scalar(s), _) => {
                let s = *s;
                match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul => s.is_arith(),
                    BinOp::Div => s.is_arith() && !s.is_packed(),
                    BinOp::Rem => s.is_int() && !s.is_byte(),
                    BinOp::And | BinOp::Or | BinOp::Xor => {
                        (s.is_int() && !s.is_byte()) || s == Scalar::Bool
                    }
                    BinOp::Shl | BinOp::Shr => {
                        s.is_int()
                            && !s.is_byte()
                            && matches!(r.ty, Ty::Scalar(t) if t.is_int() && !t.is_byte())
                    }
                    BinOp::Eq | BinOp::Ne => !s.is_packed() && !s.is_byte(),
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => s.is_arith() && !s.is_packed(),
                    BinOp::LogicAnd | BinOp::LogicOr => false,
                }
            }
            _ => false,
        };
        if !ok {
            let hint = match &l.ty {
                Ty::Scalar(s) if s.is_byte() => {
                    " (8-bit integers are storage types: cast with `as` first)"
                }
                _ => "",
            };
            self.cx.error(
                span,
                format!(
                    "operator `{}` is not defined on `{}`{hint}",
                    op_str(op),
                    l.ty
                ),
            );
            return err_expr(span);
        }
        let ty = if op.is_cmp() {
            Ty::Scalar(Scalar::Bool)
        } else {
            l.ty.clone()
        };
        if let (TKind::Const(a), TKind::Const(b)) = (&l.kind, &r.kind) {
            match fold_binary(op, &l.ty, a, b) {
                Ok(Some(v)) => {
                    return TExpr {
                        kind: TKind::Const(v),
                        ty,
                        span,
                    }
                }
                Ok(None) => {}
                Err(msg) => {
                    self.cx.error(span, msg);
                    return err_expr(span);
                }
            }
        }
        TExpr {
            kind: TKind::Binary(op, Box::new(l), Box::new(r)),
            ty,
            span,
        }
    }

    fn unary(&mut self, op: UnOp, x: TExpr, span: Span) -> TExpr {
        let ok = match (&x.ty, op) {
            (Ty::Never, _) => return err_expr(span),
            (Ty::Scalar(s), UnOp::Neg) => {
                s.is_signed() && !s.is_byte() || s.is_float() || s.is_packed()
            }
            (Ty::Scalar(s), UnOp::Not) => *s == Scalar::Bool || (s.is_int() && !s.is_byte()),
            _ => false,
        };
        if !ok {
            let o = if op == UnOp::Neg { "-" } else { "!" };
            self.cx
                .error(span, format!("operator `{o}` is not defined on `{}`", x.ty));
            return err_expr(span);
        }
        if let (TKind::Const(v), Ty::Scalar(s)) = (&x.kind, &x.ty) {
            let folded = match (v, op) {
                (ConstVal::Int(i), UnOp::Neg) => Some(ConstVal::Int(wrap_int(-i, *s))),
                (ConstVal::Int(i), UnOp::Not) => Some(ConstVal::Int(wrap_int(!i, *s))),
                (ConstVal::Float(f), UnOp::Neg) => Some(ConstVal::Float(-f)),
                (ConstVal::Bool(b), UnOp::Not) => Some(ConstVal::Bool(!b)),
                _ => None,
            };
            if let Some(v) = folded {
                return TExpr {
                    kind: TKind::Const(v),
                    ty: x.ty,
                    span,
                };
            }
        }
        let ty = x.ty.clone();
        TExpr {
            kind: TKind::Unary(op, Box::new(x)),
            ty,
            span,
        }
    }

    /// Types and folds `x as to`.
    pub(super) fn cast(&mut self, x: TExpr, to: &Ty, span: Span) -> TExpr {
        let (Ty::Scalar(from), Ty::Scalar(to_s)) = (&x.ty, to) else {
            if x.ty != Ty::Never && *to != Ty::Never {
                self.cx
                    .error(span, format!("cannot cast `{}` as `{to}`", x.ty));
            }
            return err_expr(span);
        };
        let (from, to_s) = (*from, *to_s);
        if from.is_packed() || to_s.is_packed() || (to_s == Scalar::Bool && from != Scalar::Bool) {
            self.cx
                .error(span, format!("cannot cast `{from}` as `{to_s}`"));
            return err_expr(span);
        }
        if let TKind::Const(v) = &x.kind {
            let folded = match (v, to_s.is_float(), to_s.is_int()) {
                (ConstVal::Int(i), true, _) => Some(ConstVal::Float(*i as f64)),
                (ConstVal::Int(i), _, true) => Some(ConstVal::Int(wrap_int(*i, to_s))),
                (ConstVal::Bool(b), _, true) => Some(ConstVal::Int(*b as i128)),
                (ConstVal::Float(f), true, _) if to_s == Scalar::F32 || to_s == Scalar::F64 => {
                    Some(ConstVal::Float(if to_s == Scalar::F32 {
                        *f as f32 as f64
                    } else {
                        *f
                    }))
                }
                (ConstVal::Float(f), _, true) => {
                    let (lo, hi) = (
                        wrap_int(
                            if to_s.is_signed() {
                                1 << (to_s.bytes() * 8 - 1)
                            } else {
                                0
                            },
                            to_s,
                        ),
                        {
                            let bits = to_s.bytes() * 8 - to_s.is_signed() as u32;
                            (1i128 << bits) - 1
                        },
                    );
                    let t = if f.is_nan() {
                        0
                    } else {
                        (f.trunc().clamp(lo as f64, hi as f64)) as i128
                    };
                    Some(ConstVal::Int(t))
                }
                (ConstVal::Bool(b), _, _) if to_s == Scalar::Bool => Some(ConstVal::Bool(*b)),
                _ => None,
            };
            if let Some(v) = folded {
                return TExpr {
                    kind: TKind::Const(v),
                    ty: to.clone(),
                    span,
                };
            }
        }
        if from == to_s {
            return TExpr {
                ty: to.clone(),
                ..x
            };
        }
        TExpr {
            kind: TKind::Cast(Box::new(x)),
            ty: to.clone(),
            span,
        }
    }

    fn check_assign(&mut self, place: &Expr, op: Option<BinOp>, value: &Expr, span: Span) -> TExpr {
        let unit = |kind| TExpr {
            kind,
            ty: Ty::Unit,
            span,
        };
        let (tplace, ty) = match &place.kind {
            ExprKind::Var(name) => {
                match self.lookup(&name.to_string()) {
                    Some(Binding::Var(id)) => {
                        let info = self.vars[id].clone();
                        if !info.mutable {
                            self.cx.error(place.span, format!("cannot assign to immutable variable `{name}` (declare it `let mut`)"));
                        }
                        if !matches!(info.ty, Ty::Scalar(_) | Ty::Array(..) | Ty::Never) {
                            self.cx.error(
                                place.span,
                                format!("cannot assign to `{name}` of type `{}`", info.ty),
                            );
                        }
                        (Place::Var(id), info.ty)
                    }
                    Some(Binding::Const(..)) => {
                        self.cx.error(place.span, format!("cannot assign to `{name}`: it is a constant (declare it `let mut`)"));
                        return err_expr(span);
                    }
                    None => {
                        self.cx
                            .error(place.span, format!("cannot find `{name}` in this scope"));
                        return err_expr(span);
                    }
                }
            }
            ExprKind::Index { base, index } => {
                let Some((id, bty)) = self.place_base(base) else {
                    return err_expr(span);
                };
                let idx = self.check_index(index);
                let elem = match &bty {
                    Ty::Slice { elem, mutable } => {
                        if !mutable {
                            self.cx.error(
                                base.span,
                                format!("cannot assign through `{bty}`: declare the parameter `&mut [{elem}]`"),
                            );
                        }
                        *elem
                    }
                    Ty::Shared { elem, .. } => *elem,
                    Ty::Array(elem, n) => {
                        if !self.vars[id].mutable {
                            let name = self.vars[id].name.clone();
                            self.cx.error(base.span, format!("cannot assign to an element of immutable `{name}` (declare it `let mut`)"));
                        }
                        if let TKind::Const(ConstVal::Int(i)) = idx.kind {
                            if i < 0 || i >= *n as i128 {
                                self.cx.error(
                                    index.span,
                                    format!("index {i} is out of bounds for `[{elem}; {n}]`"),
                                );
                            }
                        }
                        *elem
                    }
                    Ty::Never => return err_expr(span),
                    other => {
                        self.cx
                            .error(base.span, format!("cannot index a value of type `{other}`"));
                        return err_expr(span);
                    }
                };
                (
                    Place::Index {
                        base: id,
                        index: Box::new(idx),
                    },
                    Ty::Scalar(elem),
                )
            }
            ExprKind::Error => return err_expr(span),
            _ => {
                self.cx
                    .error(place.span, "assign to a variable or an element `x[i]`");
                return err_expr(span);
            }
        };
        let v = if matches!(op, Some(BinOp::Shl | BinOp::Shr)) {
            self.check_expr(value, Some(&Ty::Scalar(Scalar::U32)))
        } else {
            self.check_expr(value, Some(&ty))
        };
        if let Some(o) = op {
            // Type the compound operation as `place op value`.
            let placeholder = TExpr {
                kind: TKind::Const(ConstVal::Int(0)),
                ty: ty.clone(),
                span,
            };
            let t = self.binary(
                o,
                TExpr {
                    kind: TKind::Var(usize::MAX),
                    ..placeholder
                },
                v.clone(),
                span,
            );
            if t.ty == Ty::Never {
                return err_expr(span);
            }
        } else if !same(&ty, &v.ty) {
            self.cx.error(
                value.span,
                format!("mismatched types: expected `{ty}`, found `{}`", v.ty),
            );
        }
        unit(TKind::Assign {
            place: tplace,
            op,
            value: Box::new(v),
        })
    }

    fn check_asm(
        &mut self,
        template: &syn::LitStr,
        operands: &[crate::parse::AsmOperand],
        span: Span,
    ) -> TExpr {
        use crate::parse::AsmOperand;
        let mut inputs = Vec::new();
        let mut out = None;
        let mut slots = Vec::new();
        for op in operands {
            match op {
                AsmOperand::In(e) => {
                    let t = self.check_expr(e, None);
                    if !matches!(t.ty, Ty::Scalar(_) | Ty::Never) {
                        self.cx.error(
                            e.span,
                            format!("`asm!` operands are scalars, not `{}`", t.ty),
                        );
                    }
                    slots.push(false);
                    inputs.push(t);
                }
                AsmOperand::Out(s, sp) => {
                    if out.is_some() {
                        self.cx
                            .error(*sp, "`asm!` has at most one `out(T)` operand");
                    }
                    slots.push(true);
                    out = Some(*s);
                }
            }
        }
        let text = template.value();
        let mut rest = text.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let idx = &rest[open + 1..open + close];
            match idx.parse::<usize>() {
                Ok(i) if i < slots.len() => {}
                _ => self.cx.error(
                    template.span(),
                    format!("`{{{idx}}}` names no operand (operands are `{{0}}`..)"),
                ),
            }
            rest = &rest[open + close + 1..];
        }
        if !text.trim_end().ends_with(';') || text.matches(';').count() != 1 {
            self.cx.error(
                template.span(),
                "`asm!` splices exactly one PTX instruction ending in `;`",
            );
        }
        // Operand order: the template's `{N}` index over all operands, in written order.
        let ty = out.map(Ty::Scalar).unwrap_or(Ty::Unit);
        let mut t = text.clone();
        let mut in_k = 0usize;
        for (i, is_out) in slots.iter().enumerate() {
            let name = if *is_out {
                "{out}".to_string()
            } else {
                format!("{{in{in_k}}}")
            };
            if !*is_out {
                in_k += 1;
            }
            t = t.replace(&format!("{{{i}}}"), &name);
        }
        TExpr {
            kind: TKind::Asm {
                template: t,
                inputs,
                out,
            },
            ty,
            span,
        }
    }
}

pub(crate) fn pat_matches(p: &Pat, v: &ConstVal) -> bool {
    match (p, v) {
        (Pat::Wild, _) => true,
        (Pat::Name(n), ConstVal::Enum(e)) => n == e,
        (Pat::Int(a), ConstVal::Int(b)) => a == b,
        (Pat::Bool(a), ConstVal::Bool(b)) => a == b,
        (Pat::Or(ps), v) => ps.iter().any(|p| pat_matches(p, v)),
        _ => false,
    }
}

fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::LogicAnd => "&&",
        BinOp::LogicOr => "||",
    }
}

fn assoc_const(s: Scalar, name: &str) -> Option<ConstVal> {
    if s.is_int() {
        let bits = s.bytes() * 8;
        let (min, max) = if s.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        return match name {
            "MIN" => Some(ConstVal::Int(min)),
            "MAX" => Some(ConstVal::Int(max)),
            "BITS" => Some(ConstVal::Int(bits as i128)),
            _ => None,
        };
    }
    let (max, min_pos, eps) = match s {
        Scalar::F32 => (
            f32::MAX as f64,
            f32::MIN_POSITIVE as f64,
            f32::EPSILON as f64,
        ),
        Scalar::F64 => (f64::MAX, f64::MIN_POSITIVE, f64::EPSILON),
        Scalar::F16 => (65504.0, 6.103_515_625e-5, 0.000_976_562_5),
        Scalar::Bf16 => (
            3.389_531_389_251_535_5e38,
            1.175_494_350_822_287_5e-38,
            0.007_812_5,
        ),
        _ => return None,
    };
    match name {
        "MAX" => Some(ConstVal::Float(max)),
        "MIN" => Some(ConstVal::Float(-max)),
        "MIN_POSITIVE" => Some(ConstVal::Float(min_pos)),
        "EPSILON" => Some(ConstVal::Float(eps)),
        "INFINITY" => Some(ConstVal::Float(f64::INFINITY)),
        "NEG_INFINITY" => Some(ConstVal::Float(f64::NEG_INFINITY)),
        "NAN" => Some(ConstVal::Float(f64::NAN)),
        _ => None,
    }
}

/// Folds `a op b` of type `ty`; `Ok(None)` when the value is left to run time.
pub(crate) fn fold_binary(
    op: BinOp,
    ty: &Ty,
    a: &ConstVal,
    b: &ConstVal,
) -> Result<Option<ConstVal>, String> {
    use ConstVal as C;
    let s = match ty {
        Ty::Scalar(s) => Some(*s),
        _ => None,
    };
    Ok(Some(match (a, b) {
        (C::Int(x), C::Int(y)) => {
            let s = s.unwrap_or(Scalar::U32);
            let (x, y) = (*x, *y);
            let int = |v: i128| C::Int(wrap_int(v, s));
            match op {
                BinOp::Add => int(x + y),
                BinOp::Sub => int(x - y),
                BinOp::Mul => int(x.wrapping_mul(y)),
                BinOp::Div | BinOp::Rem if y == 0 => {
                    return Err("division by zero in a constant expression".into())
                }
                BinOp::Div => int(x / y),
                BinOp::Rem => int(x % y),
                BinOp::And => int(x & y),
                BinOp::Or => int(x | y),
                BinOp::Xor => int(x ^ y),
                BinOp::Shl | BinOp::Shr => {
                    let bits = s.bytes() as i128 * 8;
                    if !(0..bits).contains(&y) {
                        return Err(format!("shift by {y} overflows `{s}`"));
                    }
                    if op == BinOp::Shl {
                        int(x << y)
                    } else {
                        int(x >> y)
                    }
                }
                BinOp::Eq => C::Bool(x == y),
                BinOp::Ne => C::Bool(x != y),
                BinOp::Lt => C::Bool(x < y),
                BinOp::Le => C::Bool(x <= y),
                BinOp::Gt => C::Bool(x > y),
                BinOp::Ge => C::Bool(x >= y),
                BinOp::LogicAnd | BinOp::LogicOr => return Ok(None),
            }
        }
        (C::Float(x), C::Float(y)) => {
            let (x, y) = (*x, *y);
            let round = |v: f64| -> Option<C> {
                match s {
                    Some(Scalar::F32) => Some(C::Float(v as f32 as f64)),
                    Some(Scalar::F64) => Some(C::Float(v)),
                    _ => None,
                }
            };
            let r = match op {
                BinOp::Add => round(if s == Some(Scalar::F32) {
                    (x as f32 + y as f32) as f64
                } else {
                    x + y
                }),
                BinOp::Sub => round(if s == Some(Scalar::F32) {
                    (x as f32 - y as f32) as f64
                } else {
                    x - y
                }),
                BinOp::Mul => round(if s == Some(Scalar::F32) {
                    (x as f32 * y as f32) as f64
                } else {
                    x * y
                }),
                BinOp::Div => round(if s == Some(Scalar::F32) {
                    (x as f32 / y as f32) as f64
                } else {
                    x / y
                }),
                BinOp::Eq => Some(C::Bool(x == y)),
                BinOp::Ne => Some(C::Bool(x != y)),
                BinOp::Lt => Some(C::Bool(x < y)),
                BinOp::Le => Some(C::Bool(x <= y)),
                BinOp::Gt => Some(C::Bool(x > y)),
                BinOp::Ge => Some(C::Bool(x >= y)),
                _ => None,
            };
            match r {
                Some(v) => v,
                None => return Ok(None),
            }
        }
        (C::Bool(x), C::Bool(y)) => match op {
            BinOp::And | BinOp::LogicAnd => C::Bool(*x && *y),
            BinOp::Or | BinOp::LogicOr => C::Bool(*x || *y),
            BinOp::Xor | BinOp::Ne => C::Bool(x != y),
            BinOp::Eq => C::Bool(x == y),
            _ => return Ok(None),
        },
        (C::Enum(x), C::Enum(y)) => match op {
            BinOp::Eq => C::Bool(x == y),
            BinOp::Ne => C::Bool(x != y),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

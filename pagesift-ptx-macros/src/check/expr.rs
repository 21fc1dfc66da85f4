//! Expressions: literals, names, indexing, control flow, arrays, loops.
//!
//! `check_expr` takes an expression and the type its context expects (`expect`: the declared
//! type of a `let`, the other operand, a parameter), which is how unsuffixed literals get their
//! type. Checking and constant evaluation are one pass: a name bound to a constant (a const
//! parameter, an immutable `let` of a constant, a `const` item, an element type) yields a
//! `TKind::Const`, operations on constants fold, and an `if` or `match` whose condition is
//! constant keeps only the taken branch, so each variant's tree holds only its own path.
//! Optional slices carry their presence through `Checker::opt_known` while an `if let` or
//! `is_some()` test of them is being checked (inlined helpers included), so a repeated test
//! folds too. The result type `Ty::Never` marks both diverging code and an expression already
//! reported as an error, so one mistake is reported once.

use super::checker::{err_expr, same, Binding, Checker};
use super::fold::{assoc_const, pat_matches};
use super::{TBlock, TExpr, TKind, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::{Expr, ExprKind};
use crate::types::{wrap_int, ConstVal, Scalar, Ty};
use std::collections::HashMap;

impl Checker<'_> {
    /// Whether `e` is a literal whose type comes from context.
    pub(super) fn untyped(e: &Expr) -> bool {
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
                Some(Binding::Opt(id)) => {
                    self.opt_misuse(&name.to_string(), id, span);
                    err_expr(span)
                }
                // A type name stands for itself (an instantiated `T` in `match T`, `T == f16`,
                // `f::<T>`): a constant compared and matched by name.
                None if Scalar::from_name(&name.to_string()).is_some() => {
                    mk(TKind::Const(ConstVal::Enum(name.to_string())), Ty::Enum)
                }
                None => {
                    self.cx
                        .error(span, format!("cannot find `{name}` in this scope"));
                    err_expr(span)
                }
            },
            ExprKind::Field { base, field } => self.check_field(base, field, span),
            ExprKind::IfLet {
                name,
                scrut,
                then,
                els,
            } => self.check_if_let(name, scrut, then, els.as_deref(), expect, span),
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
            ExprKind::Index { base, index } => self.check_index_expr(base, index, span),
            ExprKind::If { cond, then, els } => {
                // `if opt.is_some()` / `if opt.is_none()` on an optional slice: its presence is
                // known in each branch (as with `if let`).
                if let Some((id, some)) = self.presence_test(cond) {
                    return self.check_presence_if(
                        id,
                        some,
                        None,
                        cond,
                        then,
                        els.as_deref(),
                        expect,
                        span,
                    );
                }
                let mut c = self.check_expr(cond, Some(&Ty::Scalar(Scalar::Bool)));
                self.expect_ty(&c, &Ty::Scalar(Scalar::Bool), cond.span);
                // A helper call whose value follows from constants (`if fits::<N>() { .. }`)
                // is a constant condition too.
                super::fold::fold_helper_call(&mut c);
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
            ExprKind::Unsafe(b) => {
                self.uses_unsafe = true;
                self.unsafe_depth += 1;
                let t = self.check_block(b, expect);
                self.unsafe_depth -= 1;
                let ty = t.ty.clone();
                mk(TKind::Block(t), ty)
            }
            ExprKind::Array(items) => {
                let elem_expect = match expect {
                    Some(Ty::Array(s, _)) => Some(Ty::Scalar(*s)),
                    Some(Ty::Array2(s, _, c)) => Some(Ty::Array(*s, *c)),
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
                    // Rows: a two-dimensional array.
                    Some(Ty::Array(s, c)) if out.len() as u32 * c <= 1024 => {
                        let n = out.len() as u32;
                        mk(TKind::Array(out), Ty::Array2(s, n, c))
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
                    Some(Ty::Array2(s, _, c)) => Some(Ty::Array(*s, *c)),
                    _ => None,
                };
                let v = self.check_expr(value, elem_expect.as_ref());
                let n = self.const_u32(len, "an array length");
                match (&v.ty, n) {
                    (Ty::Scalar(s), Some(n)) if n > 0 && n <= 1024 => {
                        let s = *s;
                        mk(TKind::Repeat(Box::new(v), n), Ty::Array(s, n))
                    }
                    // `[[0.0; C]; R]`: a two-dimensional array.
                    (Ty::Array(s, c), Some(n)) if n > 0 && n as u64 * *c as u64 <= 1024 => {
                        let (s, c) = (*s, *c);
                        mk(TKind::Repeat(Box::new(v), n), Ty::Array2(s, n, c))
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
                let (mut s, mut en) = if Self::untyped(start) && !Self::untyped(end) {
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
                    // Bounds that are helper calls of constants become constants here.
                    for b in [&mut s, &mut en] {
                        super::fold::fold_helper_call(b);
                    }
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
            ExprKind::Method {
                recv,
                method,
                generics,
                args,
            } => self.check_method(recv, method, generics, args, expect, span),
            ExprKind::Asm { template, operands } => self.check_asm(template, operands, span),
            ExprKind::Assert { cond, text, why } => {
                self.check_assert(cond, text, why.as_ref(), span)
            }
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
                Some(Binding::Opt(id)) => {
                    self.opt_misuse(&name.to_string(), id, base.span);
                    None
                }
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

    /// An optional slice used as a slice.
    fn opt_misuse(&self, name: &str, id: VarId, span: Span) {
        let ty = &self.vars[id].ty;
        self.cx.error(
            span,
            format!("`{name}` is an `Option<{ty}>`: unwrap it first (`if let Some(s) = {name} {{ .. }}`, or test `{name}.is_some()`)"),
        );
    }

    /// `opt.is_some()` (`true`) or `opt.is_none()` (`false`) of an optional slice parameter.
    fn presence_test(&self, cond: &Expr) -> Option<(VarId, bool)> {
        let ExprKind::Method {
            recv,
            method,
            generics,
            args,
        } = &cond.kind
        else {
            return None;
        };
        let ExprKind::Var(name) = &recv.kind else {
            return None;
        };
        let some = match method.to_string().as_str() {
            "is_some" => true,
            "is_none" => false,
            _ => return None,
        };
        if !generics.is_empty() || !args.is_empty() {
            return None;
        }
        match self.lookup(&name.to_string()) {
            Some(Binding::Opt(id)) => Some((id, some)),
            _ => None,
        }
    }

    /// `if opt.is_some() { a } else { b }` (or `is_none`), and `if let Some(name) = opt` (with
    /// `bind`, the name of the slice in the first block): `opt`'s presence known in each
    /// branch; a test already made keeps only its branch.
    #[allow(clippy::too_many_arguments)]
    fn check_presence_if(
        &mut self,
        id: VarId,
        some: bool,
        bind: Option<&syn::Ident>,
        cond: &Expr,
        then: &crate::parse::Block,
        els: Option<&Expr>,
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        let known = self.opt_known.get(&id).copied().map(|k| k == some);
        let saved = self.opt_known.insert(id, some);
        self.frame().scopes.push(HashMap::new());
        if let Some(name) = bind {
            self.bind(&name.to_string(), Binding::Var(id));
        }
        let t = (known != Some(false)).then(|| self.check_block(then, expect));
        self.frame().scopes.pop();
        self.opt_known.insert(id, !some);
        let ex = match els {
            Some(x) if known != Some(true) => {
                Some(self.check_expr(x, expect.or(t.as_ref().map(|t| &t.ty))))
            }
            _ => None,
        };
        match saved {
            Some(v) => self.opt_known.insert(id, v),
            None => self.opt_known.remove(&id),
        };
        let unit = TExpr {
            kind: TKind::Block(TBlock {
                stmts: vec![],
                tail: None,
                ty: Ty::Unit,
            }),
            ty: Ty::Unit,
            span,
        };
        match (known, t, ex) {
            (Some(true), Some(t), _) => {
                let ty = if els.is_some() {
                    t.ty.clone()
                } else {
                    Ty::Unit
                };
                TExpr {
                    kind: TKind::Block(t),
                    ty,
                    span,
                }
            }
            (Some(false), _, ex) => ex.unwrap_or(unit),
            (_, Some(t), ex) => {
                let ty = match &ex {
                    Some(ex) if !same(&t.ty, &ex.ty) => {
                        self.cx.error(
                            ex.span,
                            format!(
                                "`if` and `else` have different types: `{}` and `{}`",
                                t.ty, ex.ty
                            ),
                        );
                        t.ty.clone()
                    }
                    Some(ex) if t.ty == Ty::Never => ex.ty.clone(),
                    Some(_) => t.ty.clone(),
                    None => Ty::Unit,
                };
                let mut c = TExpr {
                    kind: TKind::IsSome(id),
                    ty: Ty::Scalar(Scalar::Bool),
                    span: cond.span,
                };
                if !some {
                    c = self.unary(crate::parse::UnOp::Not, c, cond.span);
                }
                TExpr {
                    kind: TKind::If {
                        cond: Box::new(c),
                        then: t,
                        els: ex.map(Box::new),
                    },
                    ty,
                    span,
                }
            }
            (_, None, _) => err_expr(span),
        }
    }

    /// `s.field` of a parameter struct: the field's variable.
    fn check_field(&mut self, base: &Expr, field: &syn::Ident, span: Span) -> TExpr {
        let Some((id, ty)) = self.place_base(base) else {
            return err_expr(span);
        };
        let Ty::Struct(def) = &ty else {
            if ty != Ty::Never {
                self.cx.error(
                    span,
                    format!("`{ty}` has no fields (only parameter structs do)"),
                );
            }
            return err_expr(span);
        };
        let pos = def.fields.iter().position(|(n, _, _)| field == n.as_str());
        match (pos, self.fields.get(&id)) {
            (Some(k), Some(vars)) => {
                let v = vars[k];
                TExpr {
                    kind: TKind::Var(v),
                    ty: self.vars[v].ty.clone(),
                    span,
                }
            }
            _ => {
                let names: Vec<&str> = def.fields.iter().map(|(n, _, _)| n.as_str()).collect();
                self.cx.error(
                    field.span(),
                    format!(
                        "no field `{field}` on `{}` (its fields: {})",
                        def.name,
                        names.join(", ")
                    ),
                );
                err_expr(span)
            }
        }
    }

    /// `if let Some(s) = opt { .. } else { .. }`: the branch on whether the optional slice was
    /// given (a uniform test of its address), with `s` naming the slice in the first block.
    fn check_if_let(
        &mut self,
        name: &syn::Ident,
        scrut: &Expr,
        then: &crate::parse::Block,
        els: Option<&Expr>,
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        let id = match &scrut.kind {
            ExprKind::Var(n) => {
                match self.lookup(&n.to_string()) {
                    Some(Binding::Opt(id)) => Some(id),
                    Some(_) => {
                        self.cx.error(
                        scrut.span,
                        format!("`if let Some(..)` takes an optional slice parameter; `{n}` is not one"),
                    );
                        None
                    }
                    None => {
                        self.cx
                            .error(scrut.span, format!("cannot find `{n}` in this scope"));
                        None
                    }
                }
            }
            _ => {
                self.cx.error(
                    scrut.span,
                    "`if let Some(..)` takes an optional slice parameter by name",
                );
                None
            }
        };
        let Some(id) = id else {
            return err_expr(span);
        };
        self.check_presence_if(id, true, Some(name), scrut, then, els, expect, span)
    }

    pub(super) fn check_path(&mut self, segs: &[syn::Ident], span: Span) -> TExpr {
        let mk = |kind, ty| TExpr { kind, ty, span };
        if segs.len() >= 2 {
            let name: Vec<String> = segs.iter().map(|s| s.to_string()).collect();
            if let Some((v, ty)) = self.scope.consts.get(&name.join("::")) {
                return mk(TKind::Const(v.clone()), ty.clone());
            }
        }
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
}

//! Helper calls: checked at each call with the helper's const parameters bound, and inlined.

use super::checker::{err_expr, same, Binding, Checker, Frame};
use super::{TBlock, TExpr, TFunc, TKind, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::{Expr, FnItem};
use crate::types::{ConstVal, Scalar, Ty};
use std::collections::HashMap;

impl Checker<'_> {
    /// Checks a helper call and inlines it: its body is checked here, with the helper's const
    /// parameters bound to the call's generic arguments.
    pub(super) fn inline_call(
        &mut self,
        f: &FnItem,
        generics: &[Expr],
        args: Vec<HelperArg<'_>>,
        span: Span,
    ) -> TExpr {
        if self.frames.len() > 48 {
            self.cx.error(
                span,
                format!("helper calls nest too deeply (is `{}` recursive?)", f.name),
            );
            return err_expr(span);
        }
        if !f.types.is_empty() && generics.len() == f.consts.len() {
            // A helper generic over element types: parsed again with the call's types.
            let mut binds = Vec::new();
            let mut rest = Vec::new();
            for (c, g) in f.consts.iter().zip(generics) {
                if !matches!(c.ty, crate::parse::ConstTy::Type) {
                    rest.push(g.clone());
                    continue;
                }
                let ty = match &g.kind {
                    crate::parse::ExprKind::Var(t) => Scalar::from_name(&t.to_string()),
                    _ => None,
                };
                match ty {
                    Some(s) => binds.push((c.name.to_string(), s)),
                    None => {
                        self.cx.error(
                            g.span,
                            format!(
                                "`{}`'s parameter `{}` takes a type (f32, f16, ...)",
                                f.name, c.name
                            ),
                        );
                        return err_expr(span);
                    }
                }
            }
            let Some(inst) = crate::parse::instantiate(self.cx, f, &binds) else {
                return err_expr(span);
            };
            return self.inline_call(&inst, &rest, args, span);
        }
        if generics.len() != f.consts.len() {
            self.cx.error(
                span,
                format!(
                    "`{}` takes {} const argument(s) (`{}::<...>(..)`), {} given",
                    f.name,
                    f.consts.len(),
                    f.name,
                    generics.len()
                ),
            );
            return err_expr(span);
        }
        if args.len() != f.params.len() {
            self.cx.error(
                span,
                format!(
                    "`{}` takes {} argument(s), {} given",
                    f.name,
                    f.params.len(),
                    args.len()
                ),
            );
            return err_expr(span);
        }
        let mut scope = HashMap::new();
        let mut const_text = Vec::new();
        for (c, g) in f.consts.iter().zip(generics) {
            let mut v = self.check_expr(g, None);
            // A helper call whose value follows from constants is a constant argument.
            super::fold::fold_helper_call(&mut v);
            let TKind::Const(val) = v.kind else {
                if v.ty != Ty::Never {
                    self.cx.error(g.span, "const arguments must be constants");
                }
                return err_expr(span);
            };
            let ty = match &c.ty {
                crate::parse::ConstTy::Int(s) => Ty::Scalar(*s),
                crate::parse::ConstTy::Bool => Ty::Scalar(Scalar::Bool),
                crate::parse::ConstTy::Enum(_) | crate::parse::ConstTy::Type => Ty::Enum,
            };
            let fits = match (&ty, &val) {
                (Ty::Enum, ConstVal::Enum(_)) | (Ty::Scalar(Scalar::Bool), ConstVal::Bool(_)) => {
                    true
                }
                (Ty::Scalar(s), ConstVal::Int(i)) => crate::types::wrap_int(*i, *s) == *i,
                _ => false,
            };
            if !fits {
                self.cx.error(
                    g.span,
                    format!(
                        "const argument `{val}` does not fit `{}`'s parameter `{}`",
                        f.name, c.name
                    ),
                );
                return err_expr(span);
            }
            const_text.push(val.to_string());
            scope.insert(c.name.to_string(), Binding::Const(val, ty));
        }
        // Parameter and return types may use the helper's consts (`[f32; N]`).
        let mut frame = Frame::new(scope, Ty::Unit);
        frame.module = f.module.clone();
        self.frames.push(frame);
        let ptys: Vec<Ty> = f.params.iter().map(|p| self.resolve_ty(&p.ty)).collect();
        let ret = f
            .ret
            .as_ref()
            .map(|r| self.resolve_ty(r))
            .unwrap_or(Ty::Unit);
        let frame = self.frames.pop();
        if f.noinline {
            let Some(frame) = frame else {
                return err_expr(span);
            };
            let key = format!(
                "{}::{}<{}>({})->{ret}",
                f.module.as_deref().unwrap_or(""),
                f.name,
                const_text.join(","),
                ptys.iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            return self.call_noinline(f, frame, key, ptys, ret, args, span);
        }
        let mut binds = Vec::new();
        let mut aliases = Vec::new();
        for ((p, pty), a) in f.params.iter().zip(&ptys).zip(args) {
            match pty {
                Ty::Option(inner) => {
                    let HelperArg::Expr(e) = a else { continue };
                    use crate::parse::ExprKind;
                    let found = match &e.kind {
                        ExprKind::Var(n) if n == "None" => {
                            // An operand known to be absent: its tests fold away.
                            let id = self.declare_hidden("None", (**inner).clone());
                            self.opt_known.insert(id, false);
                            Some(Binding::Opt(id))
                        }
                        ExprKind::Var(n) => self.lookup(&n.to_string()),
                        ExprKind::Call { func, args, .. }
                            if func.len() == 1 && func[0] == "Some" && args.len() == 1 =>
                        {
                            // A slice known to be present.
                            self.place_base(&args[0]).map(|(id, t)| {
                                if t == **inner || t == Ty::Never {
                                    self.opt_known.insert(id, true);
                                }
                                Binding::Opt(id)
                            })
                        }
                        _ => None,
                    };
                    match found {
                        Some(Binding::Opt(id))
                            if self.vars[id].ty == **inner
                                || matches!((&self.vars[id].ty, &**inner),
                                    (Ty::Slice { elem: a, mutable: true }, Ty::Slice { elem: b, mutable: false }) if a == b) =>
                        {
                            aliases.push((p.name.to_string(), Binding::Opt(id)));
                        }
                        _ => self.cx.error(
                            e.span,
                            format!("expected `None`, `Some(slice)` or an optional slice parameter of type `{pty}`"),
                        ),
                    }
                }
                Ty::Struct(_) => {
                    let HelperArg::Expr(e) = a else { continue };
                    let Some((id, aty)) = self.place_base(e) else {
                        continue;
                    };
                    if aty != *pty && aty != Ty::Never {
                        self.cx.error(
                            e.span,
                            format!("mismatched types: expected `{pty}`, found `{aty}`"),
                        );
                    }
                    aliases.push((p.name.to_string(), Binding::Var(id)));
                }
                Ty::Slice { .. } | Ty::Shared { .. } => {
                    let HelperArg::Expr(e) = a else { continue };
                    let Some((id, aty)) = self.place_base(e) else {
                        continue;
                    };
                    let ok = match (pty, &aty) {
                        (
                            Ty::Slice { elem, mutable },
                            Ty::Slice {
                                elem: ae,
                                mutable: am,
                            },
                        ) => elem == ae && (!mutable || *am),
                        (
                            Ty::Shared { elem, len, cols },
                            Ty::Shared {
                                elem: ae,
                                len: al,
                                cols: ac,
                            },
                        ) => elem == ae && (len.is_none() || (len == al && cols == ac)),
                        _ => aty == Ty::Never,
                    };
                    if !ok {
                        self.cx.error(
                            e.span,
                            format!("mismatched types: expected `{pty}`, found `{aty}`"),
                        );
                    }
                    aliases.push((p.name.to_string(), Binding::Var(id)));
                }
                _ => {
                    let t = match a {
                        HelperArg::Expr(e) => {
                            let t = self.check_expr(e, Some(pty));
                            if !same(&t.ty, pty) {
                                self.cx.error(
                                    e.span,
                                    format!("mismatched types: expected `{pty}`, found `{}`", t.ty),
                                );
                            }
                            t
                        }
                        HelperArg::Checked(t) => t,
                    };
                    binds.push((p.name.to_string(), pty.clone(), t));
                }
            }
        }
        let Some(mut frame) = frame else {
            return err_expr(span);
        };
        frame.ret = ret.clone();
        self.frames.push(frame);
        if let Some(top) = self.frames.last_mut() {
            for (name, b) in aliases {
                top.bind(&name, b);
            }
        }
        let mut tbinds = Vec::new();
        for (name, ty, t) in binds {
            let id = self.declare(&name, ty, false);
            tbinds.push((id, t));
        }
        // A caller's `unsafe` block does not extend into the helper's body (as in Rust).
        let depth = std::mem::take(&mut self.unsafe_depth);
        let body = self.check_block(&f.body, Some(&ret));
        self.unsafe_depth = depth;
        self.frames.pop();
        if !same(&body.ty, &ret) {
            let at = f
                .body
                .tail
                .as_ref()
                .map(|t| t.span)
                .unwrap_or(f.name.span().into());
            self.cx.error(
                at,
                format!(
                    "`{}` must return `{ret}`, its body gives `{}`",
                    f.name, body.ty
                ),
            );
        }
        TExpr {
            kind: TKind::Inline {
                binds: tbinds,
                body,
            },
            ty: ret,
            span,
        }
    }
}

impl Checker<'_> {
    /// A call of a `#[noinline]` helper: its body checked once per instantiation (`key`:
    /// helper, const arguments and types) into a `.func` of the variant, in `frame` (the
    /// helper's consts bound) with parameters of their own, so that nothing of the caller
    /// (known values, `unsafe`) reaches it; the arguments checked against `ptys`.
    #[allow(clippy::too_many_arguments)]
    fn call_noinline(
        &mut self,
        f: &FnItem,
        mut frame: Frame,
        key: String,
        ptys: Vec<Ty>,
        ret: Ty,
        args: Vec<HelperArg<'_>>,
        span: Span,
    ) -> TExpr {
        let scalar = |t: &Ty| {
            matches!(
                t,
                Ty::Scalar(
                    Scalar::I32
                        | Scalar::U32
                        | Scalar::I64
                        | Scalar::U64
                        | Scalar::F32
                        | Scalar::F64
                )
            )
        };
        let mut ok = true;
        for (p, t) in f.params.iter().zip(&ptys) {
            if !scalar(t) {
                self.cx.error(
                    p.name.span(),
                    format!("a `#[noinline]` helper takes scalars of 32 or 64 bits (i32, u32, i64, u64, f32, f64); `{}` is `{t}`", p.name),
                );
                ok = false;
            }
        }
        if ret != Ty::Unit && !scalar(&ret) {
            self.cx.error(
                f.name.span(),
                format!("a `#[noinline]` helper returns a scalar of 32 or 64 bits or nothing; `{}` returns `{ret}`", f.name),
            );
            ok = false;
        }
        if !ok {
            return err_expr(span);
        }
        let func = match self.func_keys.get(&key) {
            Some(&k) => k,
            None => {
                if self.frames.len() > 48 {
                    self.cx.error(
                        span,
                        format!("helper calls nest too deeply (is `{}` recursive?)", f.name),
                    );
                    return err_expr(span);
                }
                // Reserved before the body is checked: a call of itself inside it finds the
                // key and nests no further (recursion is reported by lowering).
                let k = self.funcs.len();
                self.func_keys.insert(key, k);
                self.funcs.push(TFunc {
                    name: format!("{}__{k}", f.name),
                    params: Vec::new(),
                    ret: ret.clone(),
                    body: TBlock {
                        stmts: Vec::new(),
                        tail: None,
                        ty: Ty::Unit,
                    },
                });
                frame.ret = ret.clone();
                self.frames.push(frame);
                let params: Vec<VarId> = f
                    .params
                    .iter()
                    .zip(&ptys)
                    .map(|(p, t)| self.declare(&p.name.to_string(), t.clone(), false))
                    .collect();
                let depth = std::mem::take(&mut self.unsafe_depth);
                let known = std::mem::take(&mut self.opt_known);
                let body = self.check_block(&f.body, Some(&ret));
                self.opt_known = known;
                self.unsafe_depth = depth;
                self.frames.pop();
                if !same(&body.ty, &ret) {
                    self.cx.error(
                        f.name.span(),
                        format!(
                            "`{}` must return `{ret}`, its body gives `{}`",
                            f.name, body.ty
                        ),
                    );
                }
                self.funcs[k].params = params;
                self.funcs[k].body = body;
                k
            }
        };
        let mut targs = Vec::new();
        for (a, pty) in args.into_iter().zip(&ptys) {
            let t = match a {
                HelperArg::Expr(e) => self.check_expr(e, Some(pty)),
                HelperArg::Checked(t) => t,
            };
            if !same(&t.ty, pty) {
                self.cx.error(
                    t.span,
                    format!("mismatched types: expected `{pty}`, found `{}`", t.ty),
                );
            }
            targs.push(t);
        }
        TExpr {
            kind: TKind::Call { func, args: targs },
            ty: ret,
            span,
        }
    }
}

/// An argument of a helper call: written, or already checked (the receiver of a method that
/// the prelude implements).
pub(super) enum HelperArg<'e> {
    Expr(&'e Expr),
    Checked(TExpr),
}

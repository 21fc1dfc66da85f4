//! Helper calls: checked at each call with the helper's const parameters bound, and inlined.

use super::checker::{err_expr, same, Binding, Checker, Frame};
use super::{TExpr, TKind};
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
        for (c, g) in f.consts.iter().zip(generics) {
            let v = self.check_expr(g, None);
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

/// An argument of a helper call: written, or already checked (the receiver of a method that
/// the prelude implements).
pub(super) enum HelperArg<'e> {
    Expr(&'e Expr),
    Checked(TExpr),
}

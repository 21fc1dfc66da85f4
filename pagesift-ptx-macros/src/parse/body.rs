//! Function bodies: types, blocks, statements, expressions, patterns, `asm!`.

use super::*;
use crate::ctxt::{Ctxt, Sp};
use crate::types::Scalar;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Token};

/// Parses a written type.
pub fn parse_type(cx: &Ctxt, ty: &syn::Type) -> TypeAst {
    let span = Sp::of(ty);
    let scalar_of = |cx: &Ctxt, t: &syn::Type| -> Scalar {
        let mut t = t;
        while let syn::Type::Group(syn::TypeGroup { elem, .. })
        | syn::Type::Paren(syn::TypeParen { elem, .. }) = t
        {
            t = elem;
        }
        if let syn::Type::Path(p) = t {
            if let Some(s) = p
                .path
                .get_ident()
                .and_then(|i| Scalar::from_name(&i.to_string()))
            {
                return s;
            }
        }
        cx.error(
            Sp::of(&t),
            "expected a scalar type (f32, f16, bf16, i8..i64, u8..u64, bool)",
        );
        Scalar::F32
    };
    let kind = match ty {
        syn::Type::Tuple(t) if t.elems.is_empty() => TypeKind::Unit,
        syn::Type::Paren(p) => return parse_type(cx, &p.elem),
        // A type substituted by `macro_rules!` (`$t:ty`).
        syn::Type::Group(g) => return parse_type(cx, &g.elem),
        syn::Type::Path(p) if p.qself.is_none() => {
            if let Some(s) = p
                .path
                .get_ident()
                .and_then(|i| Scalar::from_name(&i.to_string()))
            {
                TypeKind::Scalar(s)
            } else if p.path.segments.len() == 1 && p.path.segments[0].ident == "Shared" {
                match &p.path.segments[0].arguments {
                    syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => {
                        match &a.args[0] {
                            syn::GenericArgument::Type(syn::Type::Array(arr)) => {
                                let (elem, cols) = match &*arr.elem {
                                    syn::Type::Array(row) => (
                                        scalar_of(cx, &row.elem),
                                        Some(Box::new(parse_expr(cx, &row.len))),
                                    ),
                                    e => (scalar_of(cx, e), None),
                                };
                                TypeKind::Shared {
                                    elem,
                                    len: Some(Box::new(parse_expr(cx, &arr.len))),
                                    cols,
                                }
                            }
                            syn::GenericArgument::Type(syn::Type::Slice(sl)) => TypeKind::Shared {
                                elem: scalar_of(cx, &sl.elem),
                                len: None,
                                cols: None,
                            },
                            other => {
                                cx.error(
                                    Sp::of(&other),
                                    "expected `Shared<[T; N]>` or `Shared<[T]>`",
                                );
                                TypeKind::Error
                            }
                        }
                    }
                    _ => {
                        cx.error(span, "expected `Shared<[T; N]>` or `Shared<[T]>`");
                        TypeKind::Error
                    }
                }
            } else if p.path.segments.len() == 1
                && (p.path.segments[0].ident == "TensorMap"
                    || p.path.segments[0].ident == "TensorMapMut")
            {
                let write = p.path.segments[0].ident == "TensorMapMut";
                let usage = "expected `TensorMap<T, C, R, D>` (or `TensorMapMut<T, C, R, D>`): the element type and the box's three dimensions (elements, innermost first)";
                match &p.path.segments[0].arguments {
                    syn::PathArguments::AngleBracketed(a) if a.args.len() == 4 => {
                        let elem = match &a.args[0] {
                            syn::GenericArgument::Type(t) => scalar_of(cx, t),
                            other => {
                                cx.error(Sp::of(other), usage);
                                Scalar::F32
                            }
                        };
                        let boxes = a
                            .args
                            .iter()
                            .skip(1)
                            .map(|g| match g {
                                syn::GenericArgument::Const(e) => parse_expr(cx, e),
                                // `BM` parses as a type: the const parameter of that name.
                                syn::GenericArgument::Type(syn::Type::Path(tp)) => parse_expr(
                                    cx,
                                    &syn::Expr::Path(syn::ExprPath {
                                        attrs: Vec::new(),
                                        qself: None,
                                        path: tp.path.clone(),
                                    }),
                                ),
                                other => {
                                    cx.error(Sp::of(other), usage);
                                    parse_expr(cx, &syn::parse_quote!(1))
                                }
                            })
                            .collect();
                        TypeKind::TensorMap { elem, boxes, write }
                    }
                    _ => {
                        cx.error(span, usage);
                        TypeKind::Error
                    }
                }
            } else if p.path.segments.len() == 1 && p.path.segments[0].ident == "Option" {
                match &p.path.segments[0].arguments {
                    syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => {
                        match &a.args[0] {
                            syn::GenericArgument::Type(inner) => {
                                TypeKind::Option(Box::new(parse_type(cx, inner)))
                            }
                            other => {
                                cx.error(
                                    Sp::of(&other),
                                    "expected `Option<&[T]>` or `Option<&mut [T]>`",
                                );
                                TypeKind::Error
                            }
                        }
                    }
                    _ => {
                        cx.error(span, "expected `Option<&[T]>` or `Option<&mut [T]>`");
                        TypeKind::Error
                    }
                }
            } else if let Some(id) = p.path.get_ident().filter(|i| {
                !matches!(
                    i.to_string().as_str(),
                    "usize" | "isize" | "char" | "String" | "str"
                )
            }) {
                // A parameter struct of the invocation (resolved by the checker).
                TypeKind::Named(id.clone())
            } else {
                let name = quote::quote!(#ty).to_string();
                let hint = match name.as_str() {
                    "usize" => " (use `u64`, or `u32` for indices)",
                    "isize" => " (use `i64` or `i32`)",
                    "char" | "String" | "str" => " (kernels compute on numbers)",
                    _ => "",
                };
                cx.error(span, format!("unsupported type `{name}`{hint}"));
                TypeKind::Error
            }
        }
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Slice(sl) => TypeKind::Slice {
                elem: scalar_of(cx, &sl.elem),
                mutable: r.mutability.is_some(),
            },
            _ => {
                cx.error(span, "references are only to slices: `&[T]` or `&mut [T]`");
                TypeKind::Error
            }
        },
        syn::Type::Array(arr) => {
            let (elem, cols) = match &*arr.elem {
                syn::Type::Array(row) => (
                    scalar_of(cx, &row.elem),
                    Some(Box::new(parse_expr(cx, &row.len))),
                ),
                e => (scalar_of(cx, e), None),
            };
            TypeKind::Array {
                elem,
                len: Box::new(parse_expr(cx, &arr.len)),
                cols,
            }
        }
        _ => {
            cx.error(span, format!("unsupported type `{}`", quote::quote!(#ty)));
            TypeKind::Error
        }
    };
    TypeAst { kind, span }
}

/// Parses a block.
pub fn parse_block(cx: &Ctxt, block: &syn::Block) -> Block {
    let mut stmts = Vec::new();
    let mut tail = None;
    let n = block.stmts.len();
    for (i, stmt) in block.stmts.iter().enumerate() {
        match stmt {
            syn::Stmt::Local(local) => stmts.extend(parse_local(cx, local)),
            syn::Stmt::Expr(e, semi) => {
                let expr = parse_expr(cx, e);
                if semi.is_none() && i + 1 == n {
                    tail = Some(Box::new(expr));
                } else {
                    stmts.push(Stmt::Expr(expr));
                }
            }
            syn::Stmt::Macro(m) => {
                let expr = parse_macro(cx, &m.mac);
                if m.semi_token.is_none() && i + 1 == n {
                    tail = Some(Box::new(expr));
                } else {
                    stmts.push(Stmt::Expr(expr));
                }
            }
            syn::Stmt::Item(item) => {
                cx.error(Sp::of(&item), "items inside a function are not supported")
            }
        }
    }
    Block { stmts, tail }
}

/// A `let` statement: one name, or an array pattern `let [a, mut b, _] = e;`, which binds a
/// hidden name to `e` and then each named element to its entry (`let a = hidden[0];` ...).
fn parse_local(cx: &Ctxt, local: &syn::Local) -> Vec<Stmt> {
    let span = Sp::of(local);
    let (pat, ty) = match &local.pat {
        syn::Pat::Type(pt) => (&*pt.pat, Some(parse_type(cx, &pt.ty))),
        other => (other, None),
    };
    let init = local.init.as_ref().map(|init| {
        if let Some((_, d)) = &init.diverge {
            cx.error(Sp::of(&d), "`let ... else` is not supported");
        }
        parse_expr(cx, &init.expr)
    });
    if let syn::Pat::Slice(slice) = pat {
        let hidden = Ident::new("__let_array", proc_macro2::Span::call_site());
        let mut stmts = vec![Stmt::Let {
            name: hidden.clone(),
            mutable: false,
            ty,
            init,
            pattern: Some(slice.elems.len()),
            span,
        }];
        for (i, elem) in slice.elems.iter().enumerate() {
            let (name, mutable) = match elem {
                syn::Pat::Wild(_) => continue,
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    (pi.ident.clone(), pi.mutability.is_some())
                }
                other => {
                    cx.error(
                        Sp::of(other),
                        "an array pattern of `let` holds names and `_` only",
                    );
                    continue;
                }
            };
            let esp = Sp::of(elem);
            let at = |kind| Box::new(Expr { kind, span: esp });
            stmts.push(Stmt::Let {
                name,
                mutable,
                ty: None,
                init: Some(Expr {
                    kind: ExprKind::Index {
                        base: at(ExprKind::Var(hidden.clone())),
                        index: at(ExprKind::Int(i as i128, None)),
                    },
                    span: esp,
                }),
                pattern: None,
                span: esp,
            });
        }
        return stmts;
    }
    let (name, mutable) = match pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            (pi.ident.clone(), pi.mutability.is_some())
        }
        other => {
            cx.error(
                Sp::of(&other),
                "`let` binds a single name or an array pattern (`let [a, b] = ...`)",
            );
            (Ident::new("__error", other.span()), false)
        }
    };
    vec![Stmt::Let {
        name,
        mutable,
        ty,
        init,
        pattern: None,
        span,
    }]
}

fn parse_macro(cx: &Ctxt, mac: &syn::Macro) -> Expr {
    let span = Sp::of(mac);
    if mac.path.is_ident("assert") {
        return parse_assert(cx, mac);
    }
    if !mac.path.is_ident("asm") {
        cx.error(
            span,
            "the macros supported in kernels are `asm!` and `assert!`",
        );
        return error_expr(span);
    }
    let parsed = mac.parse_body_with(|input: ParseStream<'_>| {
        let template: LitStr = input.parse()?;
        let mut operands = Vec::new();
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            if input.peek(Ident)
                && input.peek2(syn::token::Paren)
                && input.fork().parse::<Ident>()? == "out"
            {
                let kw: Ident = input.parse()?;
                let content;
                syn::parenthesized!(content in input);
                let ty: Ident = content.parse()?;
                match Scalar::from_name(&ty.to_string()) {
                    Some(s) => operands.push(AsmOperand::Out(s, kw.span())),
                    None => return Err(syn::Error::new(ty.span(), "expected a scalar type")),
                }
            } else {
                let e: syn::Expr = input.parse()?;
                operands.push(AsmOperand::In(parse_expr(cx, &e)));
            }
        }
        Ok((template, operands))
    });
    match parsed {
        Ok((template, operands)) => Expr {
            kind: ExprKind::Asm { template, operands },
            span,
        },
        Err(e) => {
            cx.syn_error(e);
            error_expr(span)
        }
    }
}

/// `assert!(cond)` or `assert!(cond, "why")` (a message literal without arguments).
fn parse_assert(cx: &Ctxt, mac: &syn::Macro) -> Expr {
    let span = Sp::of(mac);
    let parsed = mac.parse_body_with(|input: ParseStream<'_>| {
        let cond: syn::Expr = input.parse()?;
        let mut why = None;
        if !input.is_empty() {
            input.parse::<Token![,]>()?;
            if !input.is_empty() {
                why = Some(input.parse::<LitStr>()?);
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
            }
        }
        if !input.is_empty() {
            return Err(input.error("`assert!` takes a condition and an optional message literal"));
        }
        Ok((cond, why))
    });
    match parsed {
        Ok((cond, why)) => Expr {
            kind: ExprKind::Assert {
                cond: Box::new(parse_expr(cx, &cond)),
                text: quote::ToTokens::to_token_stream(&cond).to_string(),
                why,
            },
            span,
        },
        Err(e) => {
            cx.syn_error(e);
            error_expr(span)
        }
    }
}

/// The expression left where an error was reported.
fn error_expr(span: Sp) -> Expr {
    Expr {
        kind: ExprKind::Error,
        span,
    }
}

fn bin_op(op: &syn::BinOp) -> (Option<BinOp>, bool) {
    use syn::BinOp as B;
    let (o, assign) = match op {
        B::Add(_) => (BinOp::Add, false),
        B::Sub(_) => (BinOp::Sub, false),
        B::Mul(_) => (BinOp::Mul, false),
        B::Div(_) => (BinOp::Div, false),
        B::Rem(_) => (BinOp::Rem, false),
        B::And(_) => (BinOp::LogicAnd, false),
        B::Or(_) => (BinOp::LogicOr, false),
        B::BitXor(_) => (BinOp::Xor, false),
        B::BitAnd(_) => (BinOp::And, false),
        B::BitOr(_) => (BinOp::Or, false),
        B::Shl(_) => (BinOp::Shl, false),
        B::Shr(_) => (BinOp::Shr, false),
        B::Eq(_) => (BinOp::Eq, false),
        B::Lt(_) => (BinOp::Lt, false),
        B::Le(_) => (BinOp::Le, false),
        B::Ne(_) => (BinOp::Ne, false),
        B::Ge(_) => (BinOp::Ge, false),
        B::Gt(_) => (BinOp::Gt, false),
        B::AddAssign(_) => (BinOp::Add, true),
        B::SubAssign(_) => (BinOp::Sub, true),
        B::MulAssign(_) => (BinOp::Mul, true),
        B::DivAssign(_) => (BinOp::Div, true),
        B::RemAssign(_) => (BinOp::Rem, true),
        B::BitXorAssign(_) => (BinOp::Xor, true),
        B::BitAndAssign(_) => (BinOp::And, true),
        B::BitOrAssign(_) => (BinOp::Or, true),
        B::ShlAssign(_) => (BinOp::Shl, true),
        B::ShrAssign(_) => (BinOp::Shr, true),
        _ => return (None, false),
    };
    (Some(o), assign)
}

fn lit_suffix(cx: &Ctxt, suffix: &str, span: Sp) -> Option<Scalar> {
    if suffix.is_empty() {
        return None;
    }
    let s = Scalar::from_name(suffix);
    if s.is_none() {
        cx.error(span, format!("unknown literal suffix `{suffix}`"));
    }
    s
}

fn path_idents(cx: &Ctxt, path: &syn::Path) -> Vec<Ident> {
    for seg in &path.segments {
        if !seg.arguments.is_none() {
            cx.error(
                Sp::of(&seg.arguments),
                "generic arguments are only allowed on calls: `f::<A>(x)`",
            );
        }
    }
    path.segments.iter().map(|s| s.ident.clone()).collect()
}

fn parse_pat(cx: &Ctxt, pat: &syn::Pat) -> Pat {
    match pat {
        syn::Pat::Wild(_) => Pat::Wild,
        syn::Pat::Ident(pi) if pi.subpat.is_none() => Pat::Name(pi.ident.clone()),
        syn::Pat::Path(p) => match p.path.segments.last() {
            Some(seg) => Pat::Name(seg.ident.clone()),
            None => Pat::Wild,
        },
        syn::Pat::Or(o) => Pat::Or(o.cases.iter().map(|c| parse_pat(cx, c)).collect()),
        syn::Pat::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => Pat::Int(i.base10_parse().unwrap_or(0)),
            syn::Lit::Bool(b) => Pat::Bool(b.value),
            other => {
                cx.error(
                    Sp::of(&other),
                    "match patterns are integers, bools, enum variants or `_`",
                );
                Pat::Wild
            }
        },
        other => {
            cx.error(
                Sp::of(&other),
                "match patterns are integers, bools, enum variants or `_`",
            );
            Pat::Wild
        }
    }
}

/// Parses an expression.
pub fn parse_expr(cx: &Ctxt, e: &syn::Expr) -> Expr {
    let span = Sp::of(e);
    let b = |x: &syn::Expr| Box::new(parse_expr(cx, x));
    let kind = match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => match i.base10_parse::<i128>() {
                Ok(v) => ExprKind::Int(v, lit_suffix(cx, i.suffix(), span)),
                Err(err) => {
                    cx.syn_error(err);
                    ExprKind::Error
                }
            },
            syn::Lit::Float(f) => match f.base10_parse::<f64>() {
                Ok(v) => ExprKind::Float(v, lit_suffix(cx, f.suffix(), span)),
                Err(err) => {
                    cx.syn_error(err);
                    ExprKind::Error
                }
            },
            syn::Lit::Bool(v) => ExprKind::Bool(v.value),
            other => {
                cx.error(
                    Sp::of(&other),
                    "only integer, float and bool literals are supported",
                );
                ExprKind::Error
            }
        },
        syn::Expr::Path(p) if p.qself.is_none() => {
            let ids = path_idents(cx, &p.path);
            if ids.len() == 1 {
                ExprKind::Var(ids[0].clone())
            } else {
                ExprKind::Path(ids)
            }
        }
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() => {
                let mut generics = Vec::new();
                for seg in &p.path.segments {
                    if let syn::PathArguments::AngleBracketed(a) = &seg.arguments {
                        for arg in &a.args {
                            match arg {
                                syn::GenericArgument::Type(syn::Type::Path(tp))
                                    if tp.qself.is_none() =>
                                {
                                    let ids = path_idents(cx, &tp.path);
                                    let sp = Sp::of(tp);
                                    generics.push(Expr {
                                        kind: if ids.len() == 1 {
                                            ExprKind::Var(ids[0].clone())
                                        } else {
                                            ExprKind::Path(ids)
                                        },
                                        span: sp,
                                    });
                                }
                                syn::GenericArgument::Const(ce) => {
                                    generics.push(parse_const_arg(cx, ce))
                                }
                                other => {
                                    cx.error(Sp::of(&other), "expected a const generic argument")
                                }
                            }
                        }
                    }
                }
                let func = p.path.segments.iter().map(|s| s.ident.clone()).collect();
                ExprKind::Call {
                    func,
                    generics,
                    args: c.args.iter().map(|a| parse_expr(cx, a)).collect(),
                }
            }
            other => {
                cx.error(Sp::of(&other), "only named functions can be called");
                ExprKind::Error
            }
        },
        syn::Expr::MethodCall(m) => {
            let mut generics = Vec::new();
            if let Some(t) = &m.turbofish {
                for arg in &t.args {
                    match arg {
                        syn::GenericArgument::Const(ce) => generics.push(parse_const_arg(cx, ce)),
                        syn::GenericArgument::Type(t @ syn::Type::Path(tp))
                            if tp.qself.is_none() =>
                        {
                            generics.push(type_name_expr(cx, t))
                        }
                        // `read::<[u32; 4]>`: an array type, kept as the expression `[u32; 4]`.
                        syn::GenericArgument::Type(syn::Type::Array(arr)) => generics.push(Expr {
                            kind: ExprKind::Repeat {
                                value: Box::new(type_name_expr(cx, &arr.elem)),
                                len: b(&arr.len),
                            },
                            span: Sp::of(arr),
                        }),
                        other => cx.error(Sp::of(&other), "expected a const generic argument"),
                    }
                }
            }
            ExprKind::Method {
                recv: b(&m.receiver),
                method: m.method.clone(),
                generics,
                args: m.args.iter().map(|a| parse_expr(cx, a)).collect(),
            }
        }
        syn::Expr::Binary(bin) => match bin_op(&bin.op) {
            (Some(op), false) => ExprKind::Binary {
                op,
                lhs: b(&bin.left),
                rhs: b(&bin.right),
            },
            (Some(op), true) => ExprKind::Assign {
                place: b(&bin.left),
                op: Some(op),
                value: b(&bin.right),
            },
            (None, _) => {
                cx.error(Sp::of(&bin.op), "unsupported operator");
                ExprKind::Error
            }
        },
        syn::Expr::Assign(a) => ExprKind::Assign {
            place: b(&a.left),
            op: None,
            value: b(&a.right),
        },
        syn::Expr::Unary(u) => match u.op {
            syn::UnOp::Neg(_) => match &*u.expr {
                // Fold the sign into literals so that `-2147483648i32` and `-1.0` are one literal.
                syn::Expr::Lit(_) => {
                    let inner = parse_expr(cx, &u.expr);
                    match inner.kind {
                        ExprKind::Int(v, s) => ExprKind::Int(-v, s),
                        ExprKind::Float(v, s) => ExprKind::Float(-v, s),
                        k => ExprKind::Unary {
                            op: UnOp::Neg,
                            expr: Box::new(Expr {
                                kind: k,
                                span: inner.span,
                            }),
                        },
                    }
                }
                _ => ExprKind::Unary {
                    op: UnOp::Neg,
                    expr: b(&u.expr),
                },
            },
            syn::UnOp::Not(_) => ExprKind::Unary {
                op: UnOp::Not,
                expr: b(&u.expr),
            },
            _ => {
                cx.error(
                    span,
                    "dereference is not supported: index slices with `x[i]`",
                );
                ExprKind::Error
            }
        },
        syn::Expr::Cast(c) => ExprKind::Cast {
            expr: b(&c.expr),
            ty: parse_type(cx, &c.ty),
        },
        syn::Expr::Index(i) => ExprKind::Index {
            base: b(&i.expr),
            index: b(&i.index),
        },
        syn::Expr::If(i) => match &*i.cond {
            syn::Expr::Let(l) => {
                let name = match &*l.pat {
                    syn::Pat::TupleStruct(ts)
                        if ts.path.is_ident("Some") && ts.elems.len() == 1 =>
                    {
                        match &ts.elems[0] {
                            syn::Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
                                Some(pi.ident.clone())
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                match name {
                    Some(name) => ExprKind::IfLet {
                        name,
                        scrut: b(&l.expr),
                        then: parse_block(cx, &i.then_branch),
                        els: i.else_branch.as_ref().map(|(_, e)| b(e)),
                    },
                    None => {
                        cx.error(
                            Sp::of(&l.pat),
                            "`if let` takes the pattern `Some(name)` (of an optional slice)",
                        );
                        ExprKind::Error
                    }
                }
            }
            _ => ExprKind::If {
                cond: b(&i.cond),
                then: parse_block(cx, &i.then_branch),
                els: i.else_branch.as_ref().map(|(_, e)| b(e)),
            },
        },
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(field) => ExprKind::Field {
                base: b(&f.base),
                field: field.clone(),
            },
            syn::Member::Unnamed(u) => {
                cx.error(Sp::of(&u), "tuple fields are not supported");
                ExprKind::Error
            }
        },
        syn::Expr::Match(m) => ExprKind::Match {
            scrut: b(&m.expr),
            arms: m
                .arms
                .iter()
                .map(|arm| {
                    if let Some((_, g)) = &arm.guard {
                        cx.error(Sp::of(&g), "match guards are not supported");
                    }
                    (parse_pat(cx, &arm.pat), parse_expr(cx, &arm.body))
                })
                .collect(),
        },
        syn::Expr::Block(bl) => {
            if let Some(l) = &bl.label {
                cx.error(Sp::of(&l), "labels are not supported");
            }
            ExprKind::Block(parse_block(cx, &bl.block))
        }
        syn::Expr::Unsafe(u) => ExprKind::Unsafe(parse_block(cx, &u.block)),
        syn::Expr::Paren(p) => return parse_expr(cx, &p.expr),
        syn::Expr::Group(g) => return parse_expr(cx, &g.expr),
        syn::Expr::Array(a) => ExprKind::Array(a.elems.iter().map(|x| parse_expr(cx, x)).collect()),
        syn::Expr::Repeat(r) => ExprKind::Repeat {
            value: b(&r.expr),
            len: b(&r.len),
        },
        syn::Expr::Tuple(t) if t.elems.is_empty() => ExprKind::Unit,
        syn::Expr::ForLoop(f) => {
            if let Some(l) = &f.label {
                cx.error(Sp::of(&l), "labels are not supported");
            }
            let mut unroll = false;
            for attr in &f.attrs {
                if attr.path().is_ident("unroll") {
                    unroll = true;
                } else {
                    cx.error(Sp::of(&attr), "the only loop attribute is `#[unroll]`");
                }
            }
            let var = match &*f.pat {
                syn::Pat::Ident(pi) => pi.ident.clone(),
                syn::Pat::Wild(w) => Ident::new("_", w.span()),
                other => {
                    cx.error(Sp::of(&other), "a `for` loop binds a single name");
                    Ident::new("_", other.span())
                }
            };
            match &*f.expr {
                syn::Expr::Range(r) => match (&r.start, &r.end) {
                    (Some(s), Some(end)) => ExprKind::For {
                        var,
                        start: b(s),
                        end: b(end),
                        inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
                        body: parse_block(cx, &f.body),
                        unroll,
                    },
                    _ => {
                        cx.error(
                            Sp::of(&r),
                            "`for` loops run over a bounded range `a..b` or `a..=b`",
                        );
                        ExprKind::Error
                    }
                },
                other => {
                    cx.error(
                        Sp::of(&other),
                        "`for` loops run over a range `a..b` or `a..=b`",
                    );
                    ExprKind::Error
                }
            }
        }
        syn::Expr::While(w) => {
            if let Some(l) = &w.label {
                cx.error(Sp::of(&l), "labels are not supported");
            }
            ExprKind::While {
                cond: b(&w.cond),
                body: parse_block(cx, &w.body),
            }
        }
        syn::Expr::Loop(l) => {
            if let Some(lb) = &l.label {
                cx.error(Sp::of(&lb), "labels are not supported");
            }
            ExprKind::While {
                cond: Box::new(Expr {
                    kind: ExprKind::Bool(true),
                    span,
                }),
                body: parse_block(cx, &l.body),
            }
        }
        syn::Expr::Break(br) => {
            if br.label.is_some() || br.expr.is_some() {
                cx.error(span, "`break` takes no label or value");
            }
            ExprKind::Break
        }
        syn::Expr::Continue(c) => {
            if c.label.is_some() {
                cx.error(span, "`continue` takes no label");
            }
            ExprKind::Continue
        }
        syn::Expr::Return(r) => ExprKind::Return(r.expr.as_ref().map(|x| b(x))),
        syn::Expr::Macro(m) => return parse_macro(cx, &m.mac),
        syn::Expr::Reference(r) => {
            cx.error(
                Sp::of(&r),
                "references are not supported: pass slices by name",
            );
            ExprKind::Error
        }
        syn::Expr::Closure(c) => {
            cx.error(
                Sp::of(&c),
                "closures are not supported: write a helper `fn`",
            );
            ExprKind::Error
        }
        other => {
            cx.error(Sp::of(&other), "unsupported expression in a kernel");
            ExprKind::Error
        }
    };
    Expr { kind, span }
}

/// A const generic argument: a literal, a name, or an expression over consts in braces
/// (`f::<{ BN + 8 }>(..)`), whose value the checker folds.
fn parse_const_arg(cx: &Ctxt, e: &syn::Expr) -> Expr {
    if let syn::Expr::Block(blk) = e {
        if let [syn::Stmt::Expr(inner, None)] = blk.block.stmts.as_slice() {
            return parse_expr(cx, inner);
        }
    }
    parse_expr(cx, e)
}

/// A type named by a path (`u32`, `T`) as the expression of that name, as generic arguments
/// of methods are kept; any other type is an error (and an error expression).
fn type_name_expr(cx: &Ctxt, t: &syn::Type) -> Expr {
    match t {
        syn::Type::Path(tp) if tp.qself.is_none() => parse_expr(
            cx,
            &syn::Expr::Path(syn::ExprPath {
                attrs: Vec::new(),
                qself: None,
                path: tp.path.clone(),
            }),
        ),
        other => {
            cx.error(Sp::of(other), "expected a type name");
            error_expr(Sp::of(other))
        }
    }
}

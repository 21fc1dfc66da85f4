//! Items and their attributes: `fn` signatures, `#[variants]`, `#[launch]`, `#[target]`.

use super::*;
use crate::ctxt::{Ctxt, Sp};
use crate::types::Scalar;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Ident, Token};

struct Items(Vec<syn::Item>);

impl Parse for Items {
    fn parse(input: ParseStream<'_>) -> syn::Result<Items> {
        let mut items = Vec::new();
        while !input.is_empty() {
            items.push(input.parse()?);
        }
        Ok(Items(items))
    }
}

/// Parses the whole invocation.
pub fn parse_program(cx: &Ctxt, tokens: proc_macro2::TokenStream) -> Program {
    let items = match syn::parse2::<Items>(tokens) {
        Ok(items) => items.0,
        Err(e) => {
            cx.syn_error(e);
            return Program { fns: Vec::new() };
        }
    };
    parse_items(cx, items)
}

/// Converts parsed syn items.
pub fn parse_items(cx: &Ctxt, items: Vec<syn::Item>) -> Program {
    let mut fns = Vec::new();
    for item in items {
        match item {
            syn::Item::Fn(f) => fns.push(parse_fn(cx, &f)),
            other => cx.error(
                Sp::of(&other),
                "only `fn` items are allowed in ptx_kernel! (`pub fn` = kernel, `fn` = helper)",
            ),
        }
    }
    Program { fns }
}

fn parse_fn(cx: &Ctxt, f: &syn::ItemFn) -> FnItem {
    let is_kernel = matches!(f.vis, syn::Visibility::Public(_));
    let mut item = FnItem {
        name: f.sig.ident.clone(),
        is_kernel,
        docs: Vec::new(),
        consts: Vec::new(),
        params: Vec::new(),
        ret: None,
        body: parse_block(cx, &f.block),
        variants: Vec::new(),
        launch: None,
        target: None,
    };
    for attr in &f.attrs {
        let name = attr
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        let kernel_only = |cx: &Ctxt| {
            if !is_kernel {
                cx.error(
                    Sp::of(&attr),
                    format!("`#[{name}]` applies to kernels (`pub fn`) only"),
                );
            }
        };
        match name.as_str() {
            "doc" => item.docs.push(attr.clone()),
            "variants" => {
                kernel_only(cx);
                match attr.parse_args_with(parse_variants) {
                    Ok(g) => item.variants.extend(g),
                    Err(e) => cx.syn_error(e),
                }
            }
            "launch" => {
                kernel_only(cx);
                match attr.parse_args_with(parse_launch) {
                    Ok(l) => item.launch = Some(l),
                    Err(e) => cx.syn_error(e),
                }
            }
            "target" => {
                kernel_only(cx);
                match attr.parse_args::<Ident>() {
                    Ok(t) => item.target = Some((t.to_string(), t.span())),
                    Err(e) => cx.syn_error(e),
                }
            }
            _ => cx.error(
                Sp::of(&attr),
                format!("unknown attribute `#[{name}]` (expected variants, launch, target or doc)"),
            ),
        }
    }
    if let Some(a) = &f.sig.asyncness {
        cx.error(Sp::of(&a), "kernels and helpers cannot be `async`");
    }
    if let Some(u) = &f.sig.unsafety {
        cx.error(Sp::of(&u), "kernels and helpers are not `unsafe`");
    }
    for g in &f.sig.generics.params {
        match g {
            syn::GenericParam::Const(c) => {
                let ty = match &c.ty {
                    syn::Type::Path(p) if p.path.is_ident("bool") => ConstTy::Bool,
                    syn::Type::Path(p) => match p
                        .path
                        .get_ident()
                        .and_then(|i| Scalar::from_name(&i.to_string()))
                    {
                        Some(s) if s.is_int() => ConstTy::Int(s),
                        Some(_) => {
                            cx.error(
                                Sp::of(&c.ty),
                                "const parameters are integers, bool or enums",
                            );
                            ConstTy::Int(Scalar::U32)
                        }
                        None => ConstTy::Enum(p.path.clone()),
                    },
                    other => {
                        cx.error(
                            Sp::of(&other),
                            "const parameters are integers, bool or enums",
                        );
                        ConstTy::Int(Scalar::U32)
                    }
                };
                item.consts.push(ConstParam {
                    name: c.ident.clone(),
                    ty,
                });
            }
            other => cx.error(
                Sp::of(&other),
                "only const generic parameters are supported (`<const N: u32, const ACT: Act>`)",
            ),
        }
    }
    for input in &f.sig.inputs {
        match input {
            syn::FnArg::Typed(pt) => {
                let name = match &*pt.pat {
                    syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        if let Some(m) = &pi.mutability {
                            cx.error(
                                Sp::of(&m),
                                "parameters cannot be `mut`; copy into a `let mut`",
                            );
                        }
                        pi.ident.clone()
                    }
                    other => {
                        cx.error(Sp::of(&other), "parameters must be plain names");
                        continue;
                    }
                };
                let ty = parse_type(cx, &pt.ty);
                item.params.push(Param { name, ty });
            }
            syn::FnArg::Receiver(r) => cx.error(Sp::of(&r), "`self` parameters are not supported"),
        }
    }
    if let syn::ReturnType::Type(_, t) = &f.sig.output {
        item.ret = Some(parse_type(cx, t));
    }
    item
}

fn parse_const_lit(input: ParseStream<'_>) -> syn::Result<ConstLit> {
    if input.peek(syn::LitInt) || input.peek(Token![-]) {
        let neg = input.parse::<Option<Token![-]>>()?.is_some();
        let lit: syn::LitInt = input.parse()?;
        let v: i128 = lit.base10_parse()?;
        Ok(ConstLit::Int(if neg { -v } else { v }, lit.span()))
    } else if input.peek(syn::LitBool) {
        let b: syn::LitBool = input.parse()?;
        Ok(ConstLit::Bool(b.value, b.span))
    } else {
        let path: syn::Path = input.parse()?;
        match path.segments.last() {
            Some(seg) => Ok(ConstLit::Name(seg.ident.clone())),
            None => Err(syn::Error::new(path.span(), "expected a value")),
        }
    }
}

fn parse_variants(input: ParseStream<'_>) -> syn::Result<Vec<VariantGroup>> {
    let mut groups = Vec::new();
    while !input.is_empty() {
        let names: Vec<Ident> = if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            content
                .parse_terminated(Ident::parse, Token![,])?
                .into_iter()
                .collect()
        } else {
            vec![input.parse()?]
        };
        input.parse::<Token![in]>()?;
        let content;
        syn::bracketed!(content in input);
        let mut rows = Vec::new();
        while !content.is_empty() {
            let row = if names.len() > 1 {
                let tuple;
                let paren = syn::parenthesized!(tuple in content);
                let vals: Vec<ConstLit> = tuple
                    .parse_terminated(parse_const_lit, Token![,])?
                    .into_iter()
                    .collect();
                if vals.len() != names.len() {
                    return Err(syn::Error::new(
                        paren.span.join(),
                        format!("expected a tuple of {} values", names.len()),
                    ));
                }
                vals
            } else {
                vec![parse_const_lit(&content)?]
            };
            rows.push(row);
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        groups.push(VariantGroup { names, rows });
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(groups)
}

fn parse_launch(input: ParseStream<'_>) -> syn::Result<LaunchAttr> {
    let mut attr = LaunchAttr {
        block: Vec::new(),
        min_blocks: None,
        max_regs: None,
        span: input.span().into(),
    };
    while !input.is_empty() {
        let key: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let value: syn::Expr = input.parse()?;
        let cx = Ctxt::new();
        match key.to_string().as_str() {
            "block" => {
                attr.span = Sp::of(&value);
                attr.block = match &value {
                    syn::Expr::Tuple(t) => t.elems.iter().map(|e| parse_expr(&cx, e)).collect(),
                    syn::Expr::Paren(p) => vec![parse_expr(&cx, &p.expr)],
                    other => vec![parse_expr(&cx, other)],
                };
            }
            "min_blocks" => attr.min_blocks = Some(parse_expr(&cx, &value)),
            "max_regs" => attr.max_regs = Some(parse_expr(&cx, &value)),
            _ => {
                return Err(syn::Error::new(
                    key.span(),
                    "expected `block = N` or `block = (X, Y[, Z])`, then optionally `min_blocks = N`, `max_regs = N`",
                ))
            }
        }
        if let Some(e) = cx.finish().into_iter().next() {
            return Err(e);
        }
        if key == "block" && (attr.block.is_empty() || attr.block.len() > 3) {
            return Err(syn::Error::new(
                value.span(),
                "a block has 1 to 3 dimensions",
            ));
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    if attr.block.is_empty() {
        return Err(syn::Error::new(
            attr.span.start,
            "expected `block = N` or `block = (X, Y[, Z])`",
        ));
    }
    Ok(attr)
}

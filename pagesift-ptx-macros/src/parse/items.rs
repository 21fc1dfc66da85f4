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
            return Program::default();
        }
    };
    parse_items(cx, items)
}

/// Converts parsed syn items.
pub fn parse_items(cx: &Ctxt, items: Vec<syn::Item>) -> Program {
    let mut prog = Program::default();
    add_items(cx, &mut prog, items, None);
    prog
}

/// Adds `items` to `prog`; `module` is the helper library they belong to.
fn add_items(cx: &Ctxt, prog: &mut Program, items: Vec<syn::Item>, module: Option<&str>) {
    for item in items {
        match item {
            syn::Item::Fn(f) => {
                let mut item = parse_fn(cx, &f);
                if module.is_some() {
                    // Every fn of a library is a helper, whatever its visibility.
                    item.is_kernel = false;
                    item.module = module.map(str::to_string);
                }
                prog.fns.push(item);
            }
            syn::Item::Const(c) => {
                if let Some(k) = parse_const(cx, &c, module) {
                    prog.consts.push(k);
                }
            }
            syn::Item::Struct(st) => {
                if let Some(mut k) = parse_struct(cx, &st) {
                    k.module = module.map(str::to_string);
                    prog.structs.push(k);
                }
            }
            syn::Item::Mod(m) if module.is_none() => add_library(cx, prog, &m),
            syn::Item::Use(u) if module.is_none() => {
                if let Some(i) = parse_use(cx, &u) {
                    prog.imports.push(i);
                }
            }
            other => cx.error(
                Sp::of(&other),
                if module.is_some() {
                    "a helper library holds `fn`, `const` and parameter `struct` items only"
                } else {
                    "ptx_kernel! holds `fn` items (`pub fn` = kernel, `fn` = helper), parameter `struct`s, `const`s and helper libraries (`#[path = \"..\"] mod name;`)"
                },
            ),
        }
    }
}

/// `#[path = "src/kernels/math.rs"] mod math;` (the path relative to the invoking crate's
/// root, `CARGO_MANIFEST_DIR`) or `mod math { .. }`: a library of helpers and consts, named
/// `math::f` by the invocation.
fn add_library(cx: &Ctxt, prog: &mut Program, m: &syn::ItemMod) {
    let name = m.ident.to_string();
    let mut path = None;
    for attr in &m.attrs {
        if attr.path().is_ident("path") {
            match &attr.meta {
                syn::Meta::NameValue(syn::MetaNameValue {
                    value:
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }),
                    ..
                }) => path = Some((s.value(), s.span())),
                _ => cx.error(Sp::of(&attr), "expected `#[path = \"file.rs\"]`"),
            }
        } else if !attr.path().is_ident("doc") {
            cx.error(
                Sp::of(&attr),
                "a helper library takes `#[path = \"..\"]` and docs only",
            );
        }
    }
    let items = match (&m.content, path) {
        (Some((_, items)), None) => items.clone(),
        (None, Some((file, span))) => {
            let root = std::env::var_os("CARGO_MANIFEST_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_default();
            let full = root.join(&file);
            let text = match std::fs::read_to_string(&full) {
                Ok(t) => t,
                Err(e) => {
                    cx.error(
                        span,
                        format!(
                            "cannot read the helper library `{name}` at {} ({e}); the path is relative to the crate root",
                            full.display()
                        ),
                    );
                    return;
                }
            };
            prog.files.push(full);
            match syn::parse_file(&text) {
                Ok(f) => f.items,
                Err(e) => {
                    cx.error(
                        span,
                        format!("the helper library `{name}` ({file}) does not parse: {e}"),
                    );
                    return;
                }
            }
        }
        (None, None) => {
            cx.error(
                Sp::of(&m.ident),
                format!("a helper library needs its file: `#[path = \"src/kernels/{name}.rs\"] mod {name};`"),
            );
            return;
        }
        (Some(_), Some((_, span))) => {
            cx.error(
                span,
                "a helper library is either a file or inline, not both",
            );
            return;
        }
    };
    add_items(cx, prog, items, Some(&name));
}

/// `use a::b::Name;`: a path of at least two segments to one name (no globs, groups or
/// renames), the host type of a library's struct (checked against the libraries later).
fn parse_use(cx: &Ctxt, u: &syn::ItemUse) -> Option<Import> {
    let mut tree = &u.tree;
    let mut depth = 0;
    loop {
        match tree {
            syn::UseTree::Path(p) => {
                tree = &p.tree;
                depth += 1;
            }
            syn::UseTree::Name(n) if depth > 0 => {
                return Some(Import {
                    name: n.ident.clone(),
                    item: u.clone(),
                })
            }
            _ => {
                cx.error(
                    Sp::of(&u.tree),
                    "a `use` in ptx_kernel! names the host type of a helper library's parameter struct by its path: `use other_crate::kernels::Params;`",
                );
                return None;
            }
        }
    }
}

fn parse_const(cx: &Ctxt, c: &syn::ItemConst, module: Option<&str>) -> Option<ConstItem> {
    let ty = match &*c.ty {
        syn::Type::Path(p) => p
            .path
            .get_ident()
            .and_then(|i| Scalar::from_name(&i.to_string())),
        _ => None,
    }
    .filter(|s| s.is_int() || matches!(s, Scalar::Bool | Scalar::F32 | Scalar::F64));
    let Some(ty) = ty else {
        let t = &c.ty;
        cx.error(
            Sp::of(&c.ty),
            format!(
                "unsupported type `{}` for a `const`: integers, `bool`, `f32` or `f64`",
                quote::quote!(#t).to_string().replace(' ', "")
            ),
        );
        return None;
    };
    let attrs = c
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .cloned()
        .collect();
    Some(ConstItem {
        name: c.ident.clone(),
        vis: c.vis.clone(),
        attrs,
        ty,
        value: parse_expr(cx, &c.expr),
        module: module.map(str::to_string),
    })
}

fn parse_struct(cx: &Ctxt, st: &syn::ItemStruct) -> Option<StructItem> {
    if !st.generics.params.is_empty() {
        cx.error(Sp::of(&st.generics), "parameter structs are not generic");
    }
    let syn::Fields::Named(named) = &st.fields else {
        cx.error(
            Sp::of(&st.ident),
            "a parameter struct has named fields: `struct P { n: u32, .. }`",
        );
        return None;
    };
    let mut fields = Vec::new();
    for f in &named.named {
        let Some(name) = f.ident.clone() else {
            continue;
        };
        let scalar = match &f.ty {
            syn::Type::Path(p) => p
                .path
                .get_ident()
                .and_then(|i| Scalar::from_name(&i.to_string())),
            _ => None,
        }
        .filter(|s| !s.is_packed());
        match scalar {
            Some(s) => fields.push((name, s, f.attrs.clone(), f.vis.clone())),
            None => {
                let ty = &f.ty;
                cx.error(
                    Sp::of(&f.ty),
                    format!(
                        "field `{name}` of `{}` has type `{}`: the fields of a parameter struct are `Copy` scalars (bool, i8..i64, u8..u64, f16, bf16, f32, f64)",
                        st.ident,
                        quote::quote!(#ty).to_string().replace(' ', "")
                    ),
                );
            }
        }
    }
    let attrs = st
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .cloned()
        .collect();
    Some(StructItem {
        name: st.ident.clone(),
        vis: st.vis.clone(),
        attrs,
        fields,
        module: None,
    })
}

/// One instantiation of a generic fn: its source parsed with each type parameter replaced by
/// the scalar type `binds` gives it. The result has no type parameters.
pub fn instantiate(cx: &Ctxt, f: &FnItem, binds: &[(String, Scalar)]) -> Option<FnItem> {
    let src = f.source.as_ref()?;
    let mut item = parse_fn(cx, &substitute_types(src, binds));
    item.module = f.module.clone();
    item.is_kernel = f.is_kernel;
    Some(item)
}

/// `f` with its type parameters replaced by the scalar types `binds` gives them (and removed
/// from its generics), for parsing one instantiation.
pub fn substitute_types(f: &syn::ItemFn, binds: &[(String, Scalar)]) -> syn::ItemFn {
    fn subst(ts: proc_macro2::TokenStream, binds: &[(String, Scalar)]) -> proc_macro2::TokenStream {
        ts.into_iter()
            .map(|tt| match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    match binds.iter().find(|(n, _)| i == n.as_str()) {
                        Some((_, s)) => {
                            proc_macro2::TokenTree::Ident(Ident::new(s.name(), i.span()))
                        }
                        None => proc_macro2::TokenTree::Ident(i),
                    }
                }
                proc_macro2::TokenTree::Group(g) => {
                    let mut ng = proc_macro2::Group::new(g.delimiter(), subst(g.stream(), binds));
                    ng.set_span(g.span());
                    proc_macro2::TokenTree::Group(ng)
                }
                other => other,
            })
            .collect()
    }
    let mut f = f.clone();
    f.sig.generics.params = f
        .sig
        .generics
        .params
        .into_iter()
        .filter(|g| !matches!(g, syn::GenericParam::Type(_)))
        .collect();
    // The attributes keep the parameter's name (`#[variants(T in ..)]`, `#[launch]` and
    // `#[target]` expressions see it as a constant).
    let sig = &f.sig;
    let block = &f.block;
    if let Ok(s) = syn::parse2::<syn::Signature>(subst(quote::quote!(#sig), binds)) {
        f.sig = s;
    }
    if let Ok(b) = syn::parse2::<syn::Block>(subst(quote::quote!(#block), binds)) {
        *f.block = b;
    }
    f
}

fn parse_fn(cx: &Ctxt, f: &syn::ItemFn) -> FnItem {
    let types: Vec<Ident> = f
        .sig
        .generics
        .params
        .iter()
        .filter_map(|g| match g {
            syn::GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .collect();
    if !types.is_empty() {
        // A generic fn is parsed for real per instantiation; here only its shape matters
        // (names, parameters, attributes), from an instantiation with `f32`.
        let binds: Vec<(String, Scalar)> =
            types.iter().map(|t| (t.to_string(), Scalar::F32)).collect();
        let quiet = Ctxt::new();
        let mut item = parse_fn(&quiet, &substitute_types(f, &binds));
        let _ = quiet.finish();
        let mut consts = Vec::new();
        for g in &f.sig.generics.params {
            match g {
                syn::GenericParam::Type(t) => {
                    consts.push(ConstParam {
                        name: t.ident.clone(),
                        ty: ConstTy::Type,
                    })
                }
                syn::GenericParam::Const(c) => {
                    if let Some(k) = item.consts.iter().find(|k| k.name == c.ident) {
                        consts.push(ConstParam {
                            name: k.name.clone(),
                            ty: k.ty.clone(),
                        });
                    }
                }
                syn::GenericParam::Lifetime(l) => cx.error(
                    Sp::of(&l),
                    "generic parameters are element types and consts (`<T, const N: u32, const ACT: Act>`)",
                ),
            }
        }
        item.consts = consts;
        item.types = types;
        item.type_bounds = f
            .sig
            .generics
            .params
            .iter()
            .filter_map(|g| match g {
                syn::GenericParam::Type(t) if t.bounds.is_empty() => Some(None),
                syn::GenericParam::Type(t) => {
                    let b = &t.bounds;
                    Some(Some(quote::quote!(#b)))
                }
                _ => None,
            })
            .collect();
        item.source = Some(f.clone());
        return item;
    }
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
        variant_filters: Vec::new(),
        launch: None,
        target: None,
        noinline: false,
        module: None,
        types: Vec::new(),
        type_bounds: Vec::new(),
        source: None,
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
                    Ok((g, filter)) => {
                        item.variants.extend(g);
                        if let Some(e) = filter {
                            let fcx = Ctxt::new();
                            item.variant_filters.push(parse_expr(&fcx, &e));
                            for err in fcx.finish() {
                                cx.syn_error(err);
                            }
                        }
                    }
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
                match attr.parse_args::<syn::Expr>() {
                    Ok(syn::Expr::Path(p)) if p.path.get_ident().is_some() => {
                        let t = p
                            .path
                            .get_ident()
                            .cloned()
                            .unwrap_or_else(|| f.sig.ident.clone());
                        item.target = Some(TargetAttr::Name(t.to_string(), t.span()));
                    }
                    Ok(e) => item.target = Some(TargetAttr::Expr(parse_expr(cx, &e))),
                    Err(e) => cx.syn_error(e),
                }
            }
            "noinline" => {
                if is_kernel {
                    cx.error(
                        Sp::of(&attr),
                        "`#[noinline]` applies to helpers (`fn` without `pub`) only",
                    );
                }
                if let Err(e) = attr.meta.require_path_only() {
                    cx.syn_error(e);
                }
                item.noinline = true;
            }
            _ => cx.error(
                Sp::of(&attr),
                format!("unknown attribute `#[{name}]` (expected variants, launch, target, noinline or doc)"),
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
                "generic parameters are element types and consts (`<T, const N: u32, const ACT: Act>`)",
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

/// The groups of `#[variants(..)]` and the condition of a closing `where COND`.
fn parse_variants(input: ParseStream<'_>) -> syn::Result<(Vec<VariantGroup>, Option<syn::Expr>)> {
    let mut groups = Vec::new();
    while !input.is_empty() {
        if input.peek(Token![where]) {
            input.parse::<Token![where]>()?;
            let cond: syn::Expr = input.parse()?;
            if !input.is_empty() {
                return Err(input.error("`where COND` ends the #[variants] list"));
            }
            return Ok((groups, Some(cond)));
        }
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
    Ok((groups, None))
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

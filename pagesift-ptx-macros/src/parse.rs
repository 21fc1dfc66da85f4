//! syn tokens -> the kernel AST. Every node keeps its span; unsupported syntax is reported at
//! its span and parsing goes on, so one invocation reports all its errors.

use crate::ctxt::{Ctxt, Sp};
use crate::types::Scalar;
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Token};

/// Every item of one `ptx_kernel!` invocation.
pub struct Program {
    pub fns: Vec<FnItem>,
}

/// A `fn`: a kernel when `pub`, a helper otherwise.
pub struct FnItem {
    pub name: Ident,
    pub is_kernel: bool,
    pub docs: Vec<syn::Attribute>,
    pub consts: Vec<ConstParam>,
    pub params: Vec<Param>,
    pub ret: Option<TypeAst>,
    pub body: Block,
    pub variants: Vec<VariantGroup>,
    pub launch: Option<LaunchAttr>,
    pub target: Option<(String, Span)>,
}

/// `const NAME: Type` in a fn's generics.
pub struct ConstParam {
    pub name: Ident,
    pub ty: ConstTy,
}

/// The type of a const parameter.
#[derive(Clone)]
pub enum ConstTy {
    Int(Scalar),
    Bool,
    /// An enum as written (`Act`, `crate::Act`); its variants are matched by name.
    Enum(syn::Path),
}

/// A fn parameter.
pub struct Param {
    pub name: Ident,
    pub ty: TypeAst,
}

/// A type as written.
#[derive(Clone)]
pub struct TypeAst {
    pub kind: TypeKind,
    pub span: Sp,
}

/// The kinds of written types.
#[derive(Clone)]
pub enum TypeKind {
    Scalar(Scalar),
    Slice {
        elem: Scalar,
        mutable: bool,
    },
    Array {
        elem: Scalar,
        len: Box<Expr>,
    },
    Shared {
        elem: Scalar,
        len: Option<Box<Expr>>,
    },
    Unit,
}

/// One group of `#[variants(...)]`: a name with values, or names with tuples of values.
pub struct VariantGroup {
    pub names: Vec<Ident>,
    pub rows: Vec<Vec<ConstLit>>,
}

/// A value in `#[variants]`.
#[derive(Clone)]
pub enum ConstLit {
    Int(i128, Span),
    Bool(bool, Span),
    Name(Ident),
}

impl ConstLit {
    /// Where the value is written.
    pub fn span(&self) -> Span {
        match self {
            ConstLit::Int(_, s) | ConstLit::Bool(_, s) => *s,
            ConstLit::Name(i) => i.span(),
        }
    }
}

/// `#[launch(block = N)]` or `block = (X, Y[, Z])`, optionally `min_blocks = N` (blocks per SM
/// the register allocation must allow, `.minnctapersm`) and `max_regs = N` (`.maxnreg`); the
/// values may name const parameters.
pub struct LaunchAttr {
    pub block: Vec<Expr>,
    pub min_blocks: Option<Expr>,
    pub max_regs: Option<Expr>,
    pub span: Sp,
}

/// `{ stmts; tail }`.
#[derive(Clone)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
}

/// A statement.
#[derive(Clone)]
pub enum Stmt {
    Let {
        name: Ident,
        mutable: bool,
        ty: Option<TypeAst>,
        init: Option<Expr>,
        span: Sp,
    },
    Expr(Expr),
}

/// An expression with its span.
#[derive(Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Sp,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicAnd,
    LogicOr,
}

impl BinOp {
    /// Whether the operator compares (result `bool`).
    pub fn is_cmp(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// A `match` arm pattern.
#[derive(Clone, Debug)]
pub enum Pat {
    Wild,
    /// `Act::Relu` or `Relu`: the last segment names the variant.
    Name(Ident),
    Int(i128),
    Bool(bool),
    Or(Vec<Pat>),
}

/// An operand of `asm!`.
#[derive(Clone)]
pub enum AsmOperand {
    In(Expr),
    Out(Scalar, Span),
}

/// Expression kinds.
#[derive(Clone)]
pub enum ExprKind {
    Int(i128, Option<Scalar>),
    Float(f64, Option<Scalar>),
    Bool(bool),
    /// A single identifier: a variable or a const parameter.
    Var(Ident),
    /// A multi-segment path (`Act::Relu`).
    Path(Vec<Ident>),
    /// `f(args)` or `f::<A, B>(args)`; `func` is the path (`f`, `f32::from_bits`).
    Call {
        func: Vec<Ident>,
        generics: Vec<Expr>,
        args: Vec<Expr>,
    },
    Method {
        recv: Box<Expr>,
        method: Ident,
        args: Vec<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    Cast {
        expr: Box<Expr>,
        ty: TypeAst,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    Match {
        scrut: Box<Expr>,
        arms: Vec<(Pat, Expr)>,
    },
    Block(Block),
    Array(Vec<Expr>),
    Repeat {
        value: Box<Expr>,
        len: Box<Expr>,
    },
    Assign {
        place: Box<Expr>,
        op: Option<BinOp>,
        value: Box<Expr>,
    },
    For {
        var: Ident,
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
        body: Block,
        unroll: bool,
    },
    While {
        cond: Box<Expr>,
        body: Block,
    },
    Break,
    Continue,
    Return(Option<Box<Expr>>),
    Asm {
        template: LitStr,
        operands: Vec<AsmOperand>,
    },
    Unit,
    /// Syntax that was already reported as an error.
    Error,
}

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
                if attr.block.is_empty() || attr.block.len() > 3 {
                    return Err(syn::Error::new(value.span(), "a block has 1 to 3 dimensions"));
                }
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

/// Parses a written type.
pub fn parse_type(cx: &Ctxt, ty: &syn::Type) -> TypeAst {
    let span = Sp::of(ty);
    let scalar_of = |cx: &Ctxt, t: &syn::Type| -> Scalar {
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
                            syn::GenericArgument::Type(syn::Type::Array(arr)) => TypeKind::Shared {
                                elem: scalar_of(cx, &arr.elem),
                                len: Some(Box::new(parse_expr(cx, &arr.len))),
                            },
                            syn::GenericArgument::Type(syn::Type::Slice(sl)) => TypeKind::Shared {
                                elem: scalar_of(cx, &sl.elem),
                                len: None,
                            },
                            other => {
                                cx.error(
                                    Sp::of(&other),
                                    "expected `Shared<[T; N]>` or `Shared<[T]>`",
                                );
                                TypeKind::Unit
                            }
                        }
                    }
                    _ => {
                        cx.error(span, "expected `Shared<[T; N]>` or `Shared<[T]>`");
                        TypeKind::Unit
                    }
                }
            } else {
                cx.error(span, format!("unsupported type `{}`", quote::quote!(#ty)));
                TypeKind::Unit
            }
        }
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Slice(sl) => TypeKind::Slice {
                elem: scalar_of(cx, &sl.elem),
                mutable: r.mutability.is_some(),
            },
            _ => {
                cx.error(span, "references are only to slices: `&[T]` or `&mut [T]`");
                TypeKind::Unit
            }
        },
        syn::Type::Array(arr) => TypeKind::Array {
            elem: scalar_of(cx, &arr.elem),
            len: Box::new(parse_expr(cx, &arr.len)),
        },
        _ => {
            cx.error(span, format!("unsupported type `{}`", quote::quote!(#ty)));
            TypeKind::Unit
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
            syn::Stmt::Local(local) => stmts.push(parse_local(cx, local)),
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

fn parse_local(cx: &Ctxt, local: &syn::Local) -> Stmt {
    let span = Sp::of(local);
    let (pat, ty) = match &local.pat {
        syn::Pat::Type(pt) => (&*pt.pat, Some(parse_type(cx, &pt.ty))),
        other => (other, None),
    };
    let (name, mutable) = match pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            (pi.ident.clone(), pi.mutability.is_some())
        }
        other => {
            cx.error(Sp::of(&other), "`let` binds a single name (no patterns)");
            (Ident::new("__error", other.span()), false)
        }
    };
    let init = local.init.as_ref().map(|init| {
        if let Some((_, d)) = &init.diverge {
            cx.error(Sp::of(&d), "`let ... else` is not supported");
        }
        parse_expr(cx, &init.expr)
    });
    Stmt::Let {
        name,
        mutable,
        ty,
        init,
        span,
    }
}

fn parse_macro(cx: &Ctxt, mac: &syn::Macro) -> Expr {
    let span = Sp::of(mac);
    if !mac.path.is_ident("asm") {
        cx.error(span, "the only macro supported in kernels is `asm!`");
        return Expr {
            kind: ExprKind::Error,
            span,
        };
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
            Expr {
                kind: ExprKind::Error,
                span,
            }
        }
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
                                    generics.push(parse_expr(cx, ce))
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
            if let Some(t) = &m.turbofish {
                cx.error(Sp::of(&t), "methods take no generic arguments");
            }
            ExprKind::Method {
                recv: b(&m.receiver),
                method: m.method.clone(),
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
        syn::Expr::If(i) => ExprKind::If {
            cond: b(&i.cond),
            then: parse_block(cx, &i.then_branch),
            els: i.else_branch.as_ref().map(|(_, e)| b(e)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn program(items: Vec<syn::Item>) -> (Program, Vec<String>) {
        let cx = Ctxt::new();
        let p = parse_items(&cx, items);
        (p, cx.finish().iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn kernel_signature_and_attributes() {
        let (p, errs) = program(vec![
            parse_quote! {
                #[variants(ACT in [Identity, Relu], BM in [64, 128])]
                #[launch(block = (16, 16))]
                #[target(sm_80)]
                pub fn k<const ACT: Act, const BM: u32>(x: &[f32], y: &mut [f16], n: u32) {
                    let i = thread_idx_x();
                    if i < n { y[i] = x[i] as f16; }
                }
            },
            parse_quote! { fn helper(v: f32) -> f32 { v * 2.0 } },
        ]);
        assert!(errs.is_empty(), "{errs:?}");
        let k = &p.fns[0];
        assert!(k.is_kernel && !p.fns[1].is_kernel);
        assert_eq!(k.consts.len(), 2);
        assert!(matches!(k.consts[0].ty, ConstTy::Enum(_)));
        assert!(matches!(k.consts[1].ty, ConstTy::Int(Scalar::U32)));
        assert_eq!(k.variants.len(), 2);
        assert_eq!(k.variants[1].rows.len(), 2);
        assert_eq!(k.launch.as_ref().map(|l| l.block.len()), Some(2));
        assert_eq!(k.target.as_ref().map(|t| t.0.as_str()), Some("sm_80"));
        assert!(matches!(
            k.params[1].ty.kind,
            TypeKind::Slice {
                elem: Scalar::F16,
                mutable: true
            }
        ));
        assert_eq!(k.body.stmts.len(), 1);
        assert!(k.body.tail.is_some() && p.fns[1].body.tail.is_some());
    }

    #[test]
    fn tuple_variants_and_statements() {
        let (p, errs) = program(vec![parse_quote! {
            #[variants((BM, BN) in [(64, 64), (128, 64)])]
            pub fn k<const BM: u32, const BN: u32>(y: &mut [f32]) {
                let tile: Shared<[f32; BM * BN]>;
                let mut acc = [0.0f32; 4];
                #[unroll]
                for j in 0..4 { acc[j] += 1.0; }
                while true { break; }
                let r: u32 = asm!("mov.u32 {0}, %clock;", out(u32));
                y[0] = -1.5;
            }
        }]);
        assert!(errs.is_empty(), "{errs:?}");
        let k = &p.fns[0];
        assert_eq!(k.variants[0].names.len(), 2);
        assert_eq!(k.variants[0].rows.len(), 2);
        assert_eq!(k.body.stmts.len(), 6);
        let Stmt::Expr(Expr {
            kind: ExprKind::For { unroll, .. },
            ..
        }) = &k.body.stmts[2]
        else {
            panic!("expected a for loop")
        };
        assert!(*unroll);
    }

    #[test]
    fn unsupported_syntax_is_reported_with_every_error() {
        let (_, errs) = program(vec![
            parse_quote! { struct S; },
            parse_quote! {
                pub fn k(x: &[f32], s: &str) {
                    let f = |v: f32| v;
                    let (a, b) = (1, 2);
                    println!("x");
                }
            },
        ]);
        assert_eq!(errs.len(), 6, "{errs:?}");
        assert!(errs[0].contains("only `fn` items"));
    }
}

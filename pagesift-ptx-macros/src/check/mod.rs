//! Names, types, constant evaluation and variant expansion (monomorphization).
//!
//! Each kernel is checked once per variant with its const parameters bound to values; `if` and
//! `match` on constants are resolved here, so the typed tree of a variant holds only its own
//! path. Helper calls are inlined into the tree (checked at each call with the caller's consts
//! and argument types). Lowering then works only from this checked form.

mod arrays;
mod checker;
mod expr;
mod fold;
mod inline;
mod intrinsics;
mod mem;
mod ops;
pub mod prelude;

pub(crate) use fold::{fold_binary as fold, pat_matches};
pub use intrinsics::{AtomKind, Intr, MbarOp, MemOp, MmaType, ShflKind, Special, VoteKind};

use crate::ctxt::Ctxt;
use crate::ctxt::Sp as Span;
use crate::parse::{BinOp, ConstLit, ConstTy, FnItem, Program, TypeAst, UnOp};
use crate::types::{ConstVal, Scalar, StructDef, Ty};
use std::collections::HashMap;
use std::rc::Rc;

/// The static shared memory limit of a block without opt-in, in bytes.
pub const STATIC_SHARED_LIMIT: u32 = 48 * 1024;

/// A variable of a variant (parameters, lets, loop counters, inlined helper parameters).
pub type VarId = usize;

/// What the checker knows of a variable.
#[derive(Clone, Debug)]
pub struct VarInfo {
    pub name: String,
    pub ty: Ty,
    pub mutable: bool,
}

/// A checked expression.
#[derive(Clone, Debug)]
pub struct TExpr {
    pub kind: TKind,
    pub ty: Ty,
    pub span: Span,
}

/// Checked expression kinds.
#[derive(Clone, Debug)]
pub enum TKind {
    Const(ConstVal),
    Var(VarId),
    Unary(UnOp, Box<TExpr>),
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    /// A conversion to `ty` (`as`).
    Cast(Box<TExpr>),
    /// Whether an optional slice was given (its address is not null).
    IsSome(VarId),
    /// `base[index]` on a register array, slice or shared array (of a two-dimensional one
    /// the flat, row-major index).
    Index {
        base: VarId,
        index: Box<TExpr>,
    },
    /// An index into one dimension of a two-dimensional register array: its value, which
    /// must be known after unrolling and below `len`.
    Within {
        index: Box<TExpr>,
        len: u32,
    },
    /// A value intrinsic (math, special registers, shuffles, ...).
    Intr {
        intr: Intr,
        args: Vec<TExpr>,
    },
    /// A memory intrinsic on a slice or shared array (vector loads, stores, atomics).
    Mem {
        op: MemOp,
        base: VarId,
        args: Vec<TExpr>,
        /// Whether the access is bounds-checked (false: an `_unchecked` form in `unsafe`).
        checked: bool,
    },
    If {
        cond: Box<TExpr>,
        then: TBlock,
        els: Option<Box<TExpr>>,
    },
    Block(TBlock),
    /// A `match` whose scrutinee becomes a constant only after unrolling.
    Match {
        scrut: Box<TExpr>,
        arms: Vec<(crate::parse::Pat, TExpr)>,
    },
    Array(Vec<TExpr>),
    Repeat(Box<TExpr>, u32),
    Assign {
        place: Place,
        op: Option<BinOp>,
        value: Box<TExpr>,
    },
    For {
        var: VarId,
        start: Box<TExpr>,
        end: Box<TExpr>,
        inclusive: bool,
        body: TBlock,
        unroll: bool,
    },
    While {
        cond: Box<TExpr>,
        body: TBlock,
    },
    Break,
    Continue,
    /// `return`: from the kernel, or from the innermost inlined helper.
    Return(Option<Box<TExpr>>),
    /// A call of a `#[noinline]` helper: `func` indexes the variant's `funcs`.
    Call {
        func: usize,
        args: Vec<TExpr>,
    },
    /// An inlined helper call: parameters bound to arguments, then the body.
    Inline {
        binds: Vec<(VarId, TExpr)>,
        body: TBlock,
    },
    /// One spliced PTX instruction: text with operand slots; the value is the output (one
    /// register, or an array of them).
    Asm {
        pieces: Vec<AsmPiece>,
        inputs: Vec<TExpr>,
        outs: Vec<Scalar>,
    },
}

/// A piece of an `asm!` template.
#[derive(Clone, Debug, PartialEq)]
pub enum AsmPiece {
    Text(String),
    /// The k-th input operand.
    In(usize),
    /// The k-th output register.
    Out(usize),
}

/// An assignable place.
#[derive(Clone, Debug)]
pub enum Place {
    Var(VarId),
    Index { base: VarId, index: Box<TExpr> },
}

/// A checked statement.
#[derive(Clone, Debug)]
pub enum TStmt {
    Let { var: VarId, init: Option<TExpr> },
    Expr(TExpr),
}

/// A checked block.
#[derive(Clone, Debug)]
pub struct TBlock {
    pub stmts: Vec<TStmt>,
    pub tail: Option<Box<TExpr>>,
    pub ty: Ty,
}

/// A compilation target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `sm_80`, `sm_90a`.
    pub name: String,
    /// The compute capability times ten (70, 80, 90).
    pub sm: u32,
}

impl Target {
    /// The targets the compiler knows, with their lowest PTX ISA versions.
    pub const KNOWN: [(&'static str, (u32, u32)); 7] = [
        ("sm_70", (7, 0)),
        ("sm_75", (7, 0)),
        ("sm_80", (7, 0)),
        ("sm_86", (7, 1)),
        ("sm_89", (7, 8)),
        ("sm_90", (7, 8)),
        ("sm_90a", (8, 0)),
    ];

    /// The target named `name`, if known.
    pub fn parse(name: &str) -> Option<Target> {
        Target::KNOWN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, _)| Target {
                name: n.to_string(),
                sm: n
                    .trim_start_matches("sm_")
                    .trim_end_matches('a')
                    .parse()
                    .unwrap_or(70),
            })
    }

    /// The lowest PTX ISA version that knows this target.
    pub fn min_ptx(&self) -> (u32, u32) {
        Target::KNOWN
            .iter()
            .find(|(n, _)| *n == self.name)
            .map(|(_, v)| *v)
            .unwrap_or((7, 0))
    }
}

/// One variant of a kernel, checked.
#[derive(Clone, Debug)]
pub struct Variant {
    /// The const parameter values, in declaration order.
    pub consts: Vec<(String, ConstVal)>,
    /// The PTX entry name.
    pub entry: String,
    pub target: Target,
    pub block: [u32; 3],
    /// Blocks per SM the register allocation must allow (`.minnctapersm`).
    pub min_blocks: u32,
    /// A register limit per thread (`.maxnreg`).
    pub max_regs: Option<u32>,
    /// The kernel parameters: their variables, in order.
    pub params: Vec<VarId>,
    pub vars: Vec<VarInfo>,
    /// Static shared arrays: variable, element type, length.
    pub shared: Vec<(VarId, Scalar, u32)>,
    /// The dynamic shared array, if any.
    pub dyn_shared: Option<(VarId, Scalar)>,
    /// Views of the dynamic shared memory (`= dyn_shared(offset)`): variable, element type,
    /// length, byte offset.
    pub dyn_views: Vec<(VarId, Scalar, u32, u32)>,
    /// Whether the variant has `unsafe` code (its launch is then an `unsafe fn`).
    pub uses_unsafe: bool,
    /// The field variables of each parameter struct (kernel parameters), in field order.
    pub fields: HashMap<VarId, Vec<VarId>>,
    /// Whether the target was chosen by the compiler (no `#[target]`): lowering raises it to
    /// the lowest one the variant's instructions need.
    pub target_auto: bool,
    /// The `#[noinline]` helper instantiations its calls reach (PTX `.func`s).
    pub funcs: Vec<TFunc>,
    pub body: TBlock,
}

/// One instantiation of a `#[noinline]` helper: its PTX name, parameter variables (scalars),
/// return type (a scalar or unit) and checked body.
#[derive(Clone, Debug)]
pub struct TFunc {
    pub name: String,
    pub params: Vec<VarId>,
    pub ret: Ty,
    pub body: TBlock,
}

impl Variant {
    /// Bytes of static shared memory (each array aligned to 16 bytes).
    pub fn static_shared_bytes(&self) -> u32 {
        self.shared
            .iter()
            .map(|(_, s, n)| (s.bytes() * n).div_ceil(16) * 16)
            .sum()
    }
}

/// A kernel's signature, as the wrapper needs it even when its body has errors.
pub struct KernelSig<'p> {
    pub item: &'p FnItem,
    /// Parameter types; `None` where the written type is not a valid kernel parameter. The
    /// element type of a parameter written with a type parameter is its first value.
    pub params: Vec<Option<Ty>>,
    /// Per parameter, the type parameter its element type is written with (`x: &[T]`).
    pub generic: Vec<Option<syn::Ident>>,
    /// Per type parameter, the scalar types of its `#[variants]` list.
    pub type_values: Vec<(syn::Ident, Vec<Scalar>)>,
}

/// What every kernel of an invocation can name besides its own items: helpers (`lib::f` for
/// a library's), parameter structs and consts (`lib::C` for a library's).
pub struct Scope<'p> {
    pub helpers: HashMap<String, &'p FnItem>,
    pub structs: HashMap<String, Rc<StructDef>>,
    pub consts: HashMap<String, (ConstVal, Ty)>,
}

/// The parameter structs and consts of an invocation, checked, for the wrapper.
pub struct Items {
    pub structs: Vec<Rc<StructDef>>,
    /// The invocation's own consts (not the libraries'): name, type, value.
    pub consts: Vec<(String, Scalar, ConstVal)>,
}

/// One kernel after checking.
pub struct CheckedKernel<'p> {
    pub sig: KernelSig<'p>,
    pub variants: Vec<Variant>,
    /// Whether every variant checked without error.
    pub complete: bool,
}

/// The checked program.
pub struct Checked<'p> {
    pub kernels: Vec<CheckedKernel<'p>>,
    pub items: Items,
}

/// Checks every kernel of the program and expands its variants.
pub fn check_program<'p>(cx: &Ctxt, prog: &'p Program) -> Checked<'p> {
    let prelude = prelude::parse_prelude();
    let mut helpers: HashMap<String, &FnItem> = HashMap::new();
    for f in prelude.fns.iter() {
        helpers.insert(f.name.to_string(), f);
    }
    let mut seen: HashMap<String, Span> = HashMap::new();
    for f in &prog.fns {
        let name = match &f.module {
            Some(m) => format!("{m}::{}", f.name),
            None => f.name.to_string(),
        };
        if seen.insert(name.clone(), f.name.span().into()).is_some() {
            cx.error(f.name.span(), format!("`{name}` is defined more than once"));
        }
        if f.module.is_none() && intrinsics::is_intrinsic(&name) {
            cx.error(
                f.name.span(),
                format!("`{name}` is the name of an intrinsic, which a call would reach instead of this fn: rename it"),
            );
        }
        // Kernels are callable like helpers too (inlined, with their const arguments).
        helpers.insert(name, f);
    }
    let structs = check_structs(cx, prog);
    let mut scope = Scope {
        helpers,
        structs: structs
            .iter()
            .map(|d| (d.name.clone(), d.clone()))
            .collect(),
        consts: HashMap::new(),
    };
    let consts = checker::check_consts(cx, prog, &mut scope);
    let mut kernels = Vec::new();
    for f in prog.fns.iter().filter(|f| f.is_kernel) {
        let params = f
            .params
            .iter()
            .map(|p| kernel_param_ty(cx, &p.ty, &scope.structs))
            .collect();
        let generic = generic_params(f);
        if let Some(r) = &f.ret {
            cx.error(r.span, "kernels return nothing");
        }
        let mut names: HashMap<String, Span> = HashMap::new();
        for p in &f.params {
            names.insert(p.name.to_string(), p.name.span().into());
        }
        for (name, span) in f
            .params
            .iter()
            .map(|p| (p.name.to_string(), p.name.span()))
            .chain(
                f.consts
                    .iter()
                    .filter(|c| !matches!(c.ty, ConstTy::Type))
                    .map(|c| (c.name.to_string().to_lowercase(), c.name.span())),
            )
        {
            if name == "stream" || name == "cfg" || name.starts_with("__") {
                cx.error(span, format!("`{name}` is reserved for the launch wrapper (`launch(stream, cfg, ..)`): rename it"));
            }
        }
        for c in f.consts.iter().filter(|c| !matches!(c.ty, ConstTy::Type)) {
            let lower = c.name.to_string().to_lowercase();
            if names.contains_key(&lower) {
                cx.error(c.name.span(), format!("const parameter `{}` becomes the launch argument `{lower}`, which a kernel parameter already uses", c.name));
            }
        }
        let combos: Vec<_> = expand_variants(cx, f)
            .into_iter()
            .filter(|c| checker::selected(cx, f, &scope, c))
            .collect();
        let expected = combos.len();
        let mut type_values: Vec<(syn::Ident, Vec<Scalar>)> =
            f.types.iter().map(|t| (t.clone(), Vec::new())).collect();
        for combo in &combos {
            for (t, vals) in type_values.iter_mut() {
                if let Some((_, ConstVal::Enum(v))) = combo.iter().find(|(n, _)| t == n.as_str()) {
                    if let Some(s) = Scalar::from_name(v).filter(|s| !vals.contains(s)) {
                        vals.push(s);
                    }
                }
            }
        }
        let variants: Vec<Variant> = combos
            .into_iter()
            .filter_map(|consts| checker::check_variant(cx, f, &scope, consts))
            .collect();
        let complete = expected > 0 && variants.len() == expected;
        kernels.push(CheckedKernel {
            sig: KernelSig {
                item: f,
                params,
                generic,
                type_values,
            },
            variants,
            complete,
        });
    }
    Checked {
        kernels,
        items: Items { structs, consts },
    }
}

/// Per parameter of `f`, the type parameter its written type names, if any.
fn generic_params(f: &FnItem) -> Vec<Option<syn::Ident>> {
    fn find(ts: proc_macro2::TokenStream, types: &[syn::Ident]) -> Option<syn::Ident> {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    if let Some(t) = types.iter().find(|t| **t == i) {
                        return Some(t.clone());
                    }
                }
                proc_macro2::TokenTree::Group(g) => {
                    if let Some(t) = find(g.stream(), types) {
                        return Some(t);
                    }
                }
                _ => {}
            }
        }
        None
    }
    let Some(src) = &f.source else {
        return f.params.iter().map(|_| None).collect();
    };
    src.sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(pt) => {
                let ty = &pt.ty;
                find(quote::quote!(#ty), &f.types)
            }
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}

/// The layouts of the invocation's parameter structs (its own and its libraries'); the
/// `use` items must each name a library's struct.
fn check_structs(cx: &Ctxt, prog: &Program) -> Vec<Rc<StructDef>> {
    let mut out: Vec<Rc<StructDef>> = Vec::new();
    for st in &prog.structs {
        let name = st.name.to_string();
        if out.iter().any(|d| d.name == name) {
            cx.error(
                st.name.span(),
                format!("`{name}` is defined more than once"),
            );
            continue;
        }
        let mut fields: Vec<(String, Scalar)> = Vec::new();
        for (f, s, _, _) in &st.fields {
            if fields.iter().any(|(n, _)| f == n.as_str()) {
                cx.error(f.span(), format!("field `{f}` is declared more than once"));
            }
            fields.push((f.to_string(), *s));
        }
        out.push(Rc::new(StructDef::layout(&name, &fields)));
    }
    for (k, imp) in prog.imports.iter().enumerate() {
        let name = imp.name.to_string();
        if prog.imports[..k].iter().any(|i| i.name == imp.name) {
            cx.error(
                imp.name.span(),
                format!("`{name}` is imported more than once"),
            );
            continue;
        }
        match prog.structs.iter().find(|s| s.name == imp.name) {
            Some(s) if s.module.is_some() => {}
            Some(_) => cx.error(
                imp.name.span(),
                format!("`{name}` is a struct of this invocation, which declares its host type: `use` names the host type of a helper library's struct"),
            ),
            None => cx.error(
                imp.name.span(),
                format!("no helper library of this invocation defines a struct `{name}`: `use` names the host type of a library's parameter struct"),
            ),
        }
    }
    out
}

fn kernel_param_ty(
    cx: &Ctxt,
    ty: &TypeAst,
    structs: &HashMap<String, Rc<StructDef>>,
) -> Option<Ty> {
    use crate::parse::TypeKind;
    match &ty.kind {
        TypeKind::Error => None,
        TypeKind::Named(n) => match structs.get(&n.to_string()) {
            Some(d) => Some(Ty::Struct(d.clone())),
            None => {
                cx.error(
                    ty.span,
                    format!("unknown type `{n}`: kernel parameters are scalars, `&[T]`, `&mut [T]`, `Option<&[T]>` or a parameter struct of this invocation"),
                );
                None
            }
        },
        TypeKind::Option(inner) => match &inner.kind {
            TypeKind::Slice { .. } => {
                kernel_param_ty(cx, inner, structs).map(|t| Ty::Option(Box::new(t)))
            }
            TypeKind::Error => None,
            _ => {
                cx.error(
                    ty.span,
                    "an optional parameter is `Option<&[T]>` or `Option<&mut [T]>`",
                );
                None
            }
        },
        TypeKind::Scalar(s) if !s.is_packed() => Some(Ty::Scalar(*s)),
        // The box is the variant's (`Checker::resolve_ty`).
        TypeKind::TensorMap { elem, write, .. } => Some(Ty::TensorMap {
            elem: *elem,
            boxes: [0; 3],
            write: *write,
        }),
        TypeKind::Slice {
            elem: Scalar::Bool, ..
        } => {
            cx.error(ty.span, "slices of `bool` are not supported: use `u8`");
            None
        }
        TypeKind::Slice { elem, mutable } if elem.is_packed() => {
            let half = elem.packed_elem().unwrap_or(Scalar::F16);
            let m = if *mutable { "mut " } else { "" };
            cx.error(
                ty.span,
                format!(
                    "slices of the packed `{elem}` have no host element type: take `&{m}[{half}]` and read pairs with `load2` (`{elem}::new(v[0], v[1])`), or `&{m}[u32]` with `{elem}::from_bits`"
                ),
            );
            None
        }
        TypeKind::Slice { elem, mutable } => Some(Ty::Slice {
            elem: *elem,
            mutable: *mutable,
        }),
        _ => {
            cx.error(
                ty.span,
                "kernel parameters are scalars, `&[T]`, `&mut [T]`, `Option<&[T]>`, `TensorMap<T, C, R, D>` or a parameter struct",
            );
            None
        }
    }
}

/// The const parameter values of every variant, in declaration order (the cross product of the
/// `#[variants]` groups).
pub fn expand_variants(cx: &Ctxt, f: &FnItem) -> Vec<Vec<(String, ConstVal)>> {
    let mut combos: Vec<Vec<(String, ConstVal)>> = vec![Vec::new()];
    let mut covered: HashMap<String, Span> = HashMap::new();
    let mut ok = true;
    for group in &f.variants {
        let mut group_vals: Vec<Vec<(String, ConstVal)>> = Vec::new();
        for name in &group.names {
            if covered
                .insert(name.to_string(), name.span().into())
                .is_some()
            {
                cx.error(
                    name.span(),
                    format!("`{name}` is listed in #[variants] more than once"),
                );
                ok = false;
            }
            if !f.consts.iter().any(|c| c.name == *name) {
                cx.error(
                    name.span(),
                    format!("`{name}` is not a const parameter of `{}`", f.name),
                );
                ok = false;
            }
        }
        if group.rows.is_empty() {
            if let Some(n) = group.names.first() {
                cx.error(n.span(), "a #[variants] list needs at least one value");
            }
            ok = false;
        }
        for row in &group.rows {
            let mut vals = Vec::new();
            for (name, lit) in group.names.iter().zip(row) {
                let Some(param) = f.consts.iter().find(|c| c.name == *name) else {
                    continue;
                };
                match const_lit_value(&param.ty, lit) {
                    Ok(v) => vals.push((name.to_string(), v)),
                    Err(msg) => {
                        cx.error(lit.span(), msg);
                        ok = false;
                    }
                }
            }
            group_vals.push(vals);
        }
        combos = combos
            .into_iter()
            .flat_map(|c| {
                group_vals.iter().map(move |g| {
                    let mut c = c.clone();
                    c.extend(g.iter().cloned());
                    c
                })
            })
            .collect();
    }
    for c in &f.consts {
        if !covered.contains_key(&c.name.to_string()) {
            cx.error(
                c.name.span(),
                format!(
                    "const parameter `{}` has no values: list them in #[variants({} in [...])]",
                    c.name, c.name
                ),
            );
            ok = false;
        }
    }
    if !ok {
        return Vec::new();
    }
    // Declaration order, whatever the order of the groups.
    for combo in combos.iter_mut() {
        combo.sort_by_key(|(n, _)| f.consts.iter().position(|c| c.name == n.as_str()));
    }
    combos
}

fn const_lit_value(ty: &ConstTy, lit: &ConstLit) -> Result<ConstVal, String> {
    match (ty, lit) {
        (ConstTy::Int(s), ConstLit::Int(v, _)) => {
            if crate::types::wrap_int(*v, *s) != *v {
                Err(format!("{v} is out of range for `{s}`"))
            } else {
                Ok(ConstVal::Int(*v))
            }
        }
        (ConstTy::Bool, ConstLit::Bool(b, _)) => Ok(ConstVal::Bool(*b)),
        (ConstTy::Enum(_), ConstLit::Name(n)) => Ok(ConstVal::Enum(n.to_string())),
        (ConstTy::Type, ConstLit::Name(n)) => match Scalar::from_name(&n.to_string()) {
            Some(s) if !s.is_packed() && s != Scalar::Bool => Ok(ConstVal::Enum(s.name().to_string())),
            _ => Err(format!(
                "`{n}` is not an element type: a type parameter takes i8..i64, u8..u64, f16, bf16, f32 or f64"
            )),
        },
        (ConstTy::Type, _) => Err("expected an element type (f32, f16, bf16, ...)".to_string()),
        (ConstTy::Int(s), _) => Err(format!("expected an integer of type `{s}`")),
        (ConstTy::Bool, _) => Err("expected `true` or `false`".to_string()),
        (ConstTy::Enum(p), _) => Err(format!(
            "expected a variant name of `{}`",
            quote::quote!(#p).to_string().replace(' ', "")
        )),
    }
}

/// The PTX entry name of a variant: `kernel` or `kernel__ACT_Relu__BM_64`.
pub fn entry_name(kernel: &str, consts: &[(String, ConstVal)]) -> String {
    let mut s = kernel.to_string();
    for (n, v) in consts {
        let v = v.to_string().replace('-', "m");
        s.push_str(&format!("__{n}_{v}"));
    }
    s
}

#[cfg(test)]
mod tests;

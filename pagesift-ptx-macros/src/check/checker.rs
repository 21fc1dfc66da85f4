//! The type checker of one variant: statements and expressions.

use super::{
    Scope, TBlock, TExpr, TKind, TStmt, Target, VarId, VarInfo, Variant, STATIC_SHARED_LIMIT,
};
use crate::ctxt::Ctxt;
use crate::ctxt::Sp as Span;
use crate::parse::{Block, ConstTy, Expr, FnItem, Program, Stmt, TargetAttr, TypeAst, TypeKind};
use crate::types::{ConstVal, Scalar, Ty};
use std::collections::HashMap;

#[derive(Clone)]
pub(super) enum Binding {
    Var(VarId),
    Const(ConstVal, Ty),
    /// An optional slice (`Option<&[T]>`): its slice variable, usable only through
    /// `if let Some(s) = opt` and `opt.is_some()` / `is_none()`.
    Opt(VarId),
}

pub(super) struct Frame {
    pub(super) scopes: Vec<HashMap<String, Binding>>,
    pub(super) ret: Ty,
    pub(super) loops: usize,
    /// The helper library whose fn this frame checks: its helpers and consts are named
    /// without the library's prefix.
    pub(super) module: Option<String>,
}

impl Frame {
    pub(super) fn new(scope: HashMap<String, Binding>, ret: Ty) -> Frame {
        Frame {
            scopes: vec![scope],
            ret,
            loops: 0,
            module: None,
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
    /// ` (variant N = 4, ..)`: the variant being checked, for errors that depend on it.
    pub(super) variant: String,
    pub(super) scope: &'a Scope<'a>,
    pub(super) target: Target,
    /// Whether the target is the compiler's choice (no `#[target]`): a need for a later one
    /// raises it instead of failing.
    pub(super) target_auto: bool,
    /// The field variables of parameter structs.
    pub(super) fields: HashMap<VarId, Vec<VarId>>,
    /// Optional slices whose presence the enclosing code has tested (`if let Some(..)`):
    /// tests of them again, also in inlined helpers, are constants.
    pub(super) opt_known: HashMap<VarId, bool>,
    pub(super) block: [u32; 3],
    pub(super) vars: Vec<VarInfo>,
    pub(super) shared: Vec<(VarId, Scalar, u32)>,
    pub(super) dyn_shared: Option<(VarId, Scalar)>,
    /// Views of the dynamic shared memory: variable, element type, length, byte offset.
    pub(super) dyn_views: Vec<(VarId, Scalar, u32, u32)>,
    pub(super) frames: Vec<Frame>,
    /// Nesting of `unsafe` blocks around the expression being checked (reset in helpers).
    pub(super) unsafe_depth: u32,
    /// Whether the variant has an `unsafe` block (its own or an inlined helper's).
    pub(super) uses_unsafe: bool,
    /// The `#[noinline]` helper instantiations called so far, and each one's index by its
    /// helper, const arguments and types.
    pub(super) funcs: Vec<super::TFunc>,
    pub(super) func_keys: HashMap<String, usize>,
}

/// Whether `a` and `b` agree (`!` agrees with everything; it also stands for an error).
pub(super) fn same(a: &Ty, b: &Ty) -> bool {
    a == b || *a == Ty::Never || *b == Ty::Never
}

/// The value an expression resolved to: `if` and `match` on constants become a block
/// holding only the taken value, which this looks through.
fn resolved(mut k: &TKind) -> &TKind {
    while let TKind::Block(TBlock {
        stmts,
        tail: Some(tail),
        ..
    }) = k
    {
        if !stmts.is_empty() {
            break;
        }
        k = &tail.kind;
    }
    k
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
        ConstTy::Enum(_) | ConstTy::Type => Ty::Enum,
    }
}

/// Evaluates the consts of the invocation and its libraries, in order (each may use the
/// ones before it), into `scope`; returns the invocation's own.
pub(super) fn check_consts(
    cx: &Ctxt,
    prog: &Program,
    scope: &mut Scope<'_>,
) -> Vec<(String, Scalar, ConstVal)> {
    let mut own = Vec::new();
    for c in &prog.consts {
        let name = match &c.module {
            Some(m) => format!("{m}::{}", c.name),
            None => c.name.to_string(),
        };
        if scope.consts.contains_key(&name) {
            cx.error(c.name.span(), format!("`{name}` is defined more than once"));
            continue;
        }
        let value = {
            let mut ck = Checker::new(
                cx,
                scope,
                Target::parse("sm_90a").unwrap_or(Target {
                    name: "sm_90a".into(),
                    sm: 90,
                }),
            );
            let mut frame = Frame::new(HashMap::new(), Ty::Unit);
            frame.module = c.module.clone();
            ck.frames.push(frame);
            let t = ck.check_expr(&c.value, Some(&Ty::Scalar(c.ty)));
            match (t.kind, &t.ty) {
                (TKind::Const(v), Ty::Scalar(s)) if *s == c.ty => Some(v),
                (_, Ty::Never) => None,
                (TKind::Const(_), other) => {
                    cx.error(
                        c.value.span,
                        format!("mismatched types: expected `{}`, found `{other}`", c.ty),
                    );
                    None
                }
                _ => {
                    cx.error(
                        c.value.span,
                        "a `const` needs a value known at compile time",
                    );
                    None
                }
            }
        };
        let Some(v) = value else { continue };
        scope
            .consts
            .insert(name.clone(), (v.clone(), Ty::Scalar(c.ty)));
        if c.module.is_none() {
            own.push((name, c.ty, v));
        }
    }
    own
}

impl<'a> Checker<'a> {
    pub(super) fn new(cx: &'a Ctxt, scope: &'a Scope<'a>, target: Target) -> Checker<'a> {
        Checker {
            cx,
            variant: String::new(),
            scope,
            target,
            target_auto: false,
            fields: HashMap::new(),
            opt_known: HashMap::new(),
            block: [1, 1, 1],
            vars: Vec::new(),
            shared: Vec::new(),
            dyn_shared: None,
            dyn_views: Vec::new(),
            frames: Vec::new(),
            unsafe_depth: 0,
            uses_unsafe: false,
            funcs: Vec::new(),
            func_keys: HashMap::new(),
        }
    }
}

/// Whether the combination `consts` of `#[variants]` values is a variant: every
/// `where COND` of the kernel's `#[variants]` holds (`COND` a constant `bool` of the const
/// parameters).
pub(super) fn selected(
    cx: &Ctxt,
    f: &FnItem,
    scope: &Scope<'_>,
    consts: &[(String, ConstVal)],
) -> bool {
    if f.variant_filters.is_empty() {
        return true;
    }
    let Some(default) = Target::parse("sm_70") else {
        return true;
    };
    let mut ck = Checker::new(cx, scope, default);
    let mut scope_map = HashMap::new();
    for (n, v) in consts {
        let ty = f
            .consts
            .iter()
            .find(|c| c.name == n.as_str())
            .map_or(Ty::Enum, |c| const_ty(&c.ty));
        scope_map.insert(n.clone(), Binding::Const(v.clone(), ty));
    }
    ck.frames.push(Frame::new(scope_map, Ty::Unit));
    f.variant_filters
        .iter()
        .all(|e| ck.const_bool(e, "a `where` condition of #[variants]"))
}

/// Checks one variant of kernel `f`; `None` when it has errors.
pub(super) fn check_variant(
    cx: &Ctxt,
    f: &FnItem,
    scope: &Scope<'_>,
    consts: Vec<(String, ConstVal)>,
) -> Option<Variant> {
    let before = cx.count();
    // A kernel generic over element types is parsed again with this variant's types.
    let inst;
    let f = if f.types.is_empty() {
        f
    } else {
        let binds: Vec<(String, Scalar)> = consts
            .iter()
            .filter_map(|(n, v)| match v {
                ConstVal::Enum(t) if f.types.iter().any(|ty| ty == n.as_str()) => {
                    Scalar::from_name(t).map(|s| (n.clone(), s))
                }
                _ => None,
            })
            .collect();
        inst = crate::parse::instantiate(cx, f, &binds)?;
        &inst
    };
    let default = Target::parse("sm_70")?;
    let mut ck = Checker::new(cx, scope, default);
    ck.variant = variant_note(&consts);
    let mut scope_map = HashMap::new();
    for c in &f.consts {
        if let Some((_, v)) = consts.iter().find(|(n, _)| c.name == n.as_str()) {
            scope_map.insert(
                c.name.to_string(),
                Binding::Const(v.clone(), const_ty(&c.ty)),
            );
        }
    }
    // Type parameters are substituted in the instantiation; their values remain constants
    // for `#[target]` and `#[launch]` expressions.
    for (n, v) in &consts {
        scope_map
            .entry(n.clone())
            .or_insert_with(|| Binding::Const(v.clone(), Ty::Enum));
    }
    ck.frames.push(Frame::new(scope_map, Ty::Unit));
    match &f.target {
        None => ck.target_auto = true,
        Some(TargetAttr::Name(name, span)) => match Target::parse(name) {
            Some(t) => ck.target = t,
            None => {
                let known: Vec<&str> = Target::KNOWN.iter().map(|(n, _)| *n).collect();
                cx.error(
                    *span,
                    format!("unknown target `{name}` (known: {})", known.join(", ")),
                );
                return None;
            }
        },
        Some(TargetAttr::Expr(e)) => {
            let t = ck.const_target(e, &consts)?;
            ck.target = t;
        }
    }

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
                // 0 means no cap, so that a `match` on a const can cap some variants only.
                max_regs = ck.const_u32(e, "`max_regs`").filter(|&r| r != 0);
                if let Some(r) = max_regs.filter(|r| !(24..=255).contains(r)) {
                    cx.error(
                        e.span,
                        format!(
                            "`max_regs` is 0 (no cap) or between 24 and 255, not {r}{}",
                            variant_note(&consts)
                        ),
                    );
                }
            }
            let threads: u64 = ck.block.iter().map(|&d| d as u64).product();
            if ck.block.contains(&0) || threads > 1024 {
                cx.error(
                    l.span,
                    format!(
                        "a block has 1 to 1024 threads (this one has {threads}){}",
                        variant_note(&consts)
                    ),
                );
            }
        }
    }
    let mut params = Vec::new();
    for p in &f.params {
        // Already reported by `check_program`; here only the type matters.
        let quiet = Ctxt::new();
        let ty = super::kernel_param_ty(&quiet, &p.ty, &scope.structs).unwrap_or(Ty::Never);
        let _ = quiet.finish();
        let name = p.name.to_string();
        let id = match ty {
            Ty::Option(slice) => {
                let id = ck.declare_hidden(&name, *slice);
                ck.bind(&name, Binding::Opt(id));
                id
            }
            Ty::Struct(def) => {
                let id = ck.declare(&name, Ty::Struct(def.clone()), false);
                let fields = def
                    .fields
                    .iter()
                    .map(|(fname, s, _)| {
                        ck.declare_hidden(&format!("{name}.{fname}"), Ty::Scalar(*s))
                    })
                    .collect();
                ck.fields.insert(id, fields);
                id
            }
            Ty::TensorMap { .. } => {
                let t = ck.resolve_ty(&p.ty);
                ck.declare(&name, t, false)
            }
            ty => ck.declare(&name, ty, false),
        };
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
        dyn_views: ck.dyn_views,
        uses_unsafe: ck.uses_unsafe,
        fields: ck.fields,
        target_auto: ck.target_auto,
        funcs: ck.funcs,
        body,
    })
}

/// ` (variant T = f16, ACT = Relu)` for an error that depends on the variant's values.
pub(super) fn variant_note(consts: &[(String, ConstVal)]) -> String {
    if consts.is_empty() {
        return String::new();
    }
    let named: Vec<String> = consts.iter().map(|(n, v)| format!("{n} = {v}")).collect();
    format!(" (variant {})", named.join(", "))
}

impl Checker<'_> {
    /// `#[target(expr)]`: an expression over the const parameters naming a target
    /// (`match T { bf16 => sm_80, _ => sm_70 }`).
    fn const_target(&mut self, e: &Expr, consts: &[(String, ConstVal)]) -> Option<Target> {
        self.frame().scopes.push(
            Target::KNOWN
                .iter()
                .map(|(n, _)| {
                    (
                        n.to_string(),
                        Binding::Const(ConstVal::Enum(n.to_string()), Ty::Enum),
                    )
                })
                .collect(),
        );
        let t = self.check_expr(e, None);
        self.frame().scopes.pop();
        match resolved(&t.kind) {
            TKind::Const(ConstVal::Enum(name)) => match Target::parse(name) {
                Some(t) => Some(t),
                None => {
                    self.cx.error(
                        e.span,
                        format!("`{name}` is not a target{}", variant_note(consts)),
                    );
                    None
                }
            },
            _ => {
                if t.ty != Ty::Never {
                    self.cx.error(
                        e.span,
                        format!("`#[target]` names a target (sm_70 .. sm_90a), or chooses one with `if` / `match` on const parameters{}", variant_note(consts)),
                    );
                }
                None
            }
        }
    }

    /// Declares a variable no name reaches (an optional slice's, a struct field's).
    pub(super) fn declare_hidden(&mut self, name: &str, ty: Ty) -> VarId {
        let id = self.vars.len();
        self.vars.push(VarInfo {
            name: name.to_string(),
            ty,
            mutable: false,
        });
        id
    }

    pub(super) fn frame(&mut self) -> &mut Frame {
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

    pub(super) fn bind(&mut self, name: &str, b: Binding) {
        if let Some(scope) = self.frame().scopes.last_mut() {
            scope.insert(name.to_string(), b);
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Binding> {
        let frame = self.frames.last()?;
        if let Some(b) = frame.scopes.iter().rev().find_map(|s| s.get(name).cloned()) {
            return Some(b);
        }
        self.global_const(name)
    }

    /// A const of the invocation or of a library (`lib::C`; inside a library its own consts
    /// also by their plain name).
    pub(super) fn global_const(&self, name: &str) -> Option<Binding> {
        let module = self.frames.last().and_then(|f| f.module.clone());
        let own = module.map(|m| format!("{m}::{name}"));
        let found = match own.as_deref().and_then(|n| self.scope.consts.get(n)) {
            Some(c) => Some(c),
            None => self.scope.consts.get(name),
        };
        found.map(|(v, t)| Binding::Const(v.clone(), t.clone()))
    }
}

impl<'a> Checker<'a> {
    /// The helper a call names: a library's own helpers first inside it, then the
    /// invocation's and the prelude's.
    pub(super) fn helper(&self, name: &str) -> Option<&'a FnItem> {
        let module = self.frames.last().and_then(|f| f.module.clone());
        if let Some(m) = module {
            if let Some(f) = self.scope.helpers.get(&format!("{m}::{name}")) {
                return Some(f);
            }
        }
        self.scope.helpers.get(name).copied()
    }

    /// Evaluates `e` as a constant bool (`false`, with an error, where it is not one).
    pub(super) fn const_bool(&mut self, e: &Expr, what: &str) -> bool {
        let t = self.check_expr(e, Some(&Ty::Scalar(Scalar::Bool)));
        match resolved(&t.kind) {
            TKind::Const(ConstVal::Bool(b)) => *b,
            _ => {
                if t.ty != Ty::Never {
                    self.cx
                        .error(e.span, format!("{what} must be a constant bool"));
                }
                false
            }
        }
    }

    /// Evaluates `e` as a constant u32 (block dimensions, array lengths, tensor map boxes):
    /// an expression of constants, or a helper call whose value follows from constants.
    pub(super) fn const_u32(&mut self, e: &Expr, what: &str) -> Option<u32> {
        let mut t = self.check_expr(e, Some(&Ty::Scalar(Scalar::U32)));
        if !matches!(resolved(&t.kind), TKind::Const(_)) {
            super::fold::fold_helper_call(&mut t);
        }
        match resolved(&t.kind) {
            TKind::Const(ConstVal::Int(v)) if (0..=u32::MAX as i128).contains(v) => Some(*v as u32),
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

    /// `TensorMap<T, C, R, D>` with the box evaluated: each dimension 1 ..= 256, rows
    /// (`C` elements) a multiple of 16 bytes, as the hardware copies them.
    fn tensor_map_ty(&mut self, elem: Scalar, boxes: &[Expr], write: bool, span: Span) -> Ty {
        if elem == Scalar::Bool || elem.is_packed() {
            self.cx.error(
                span,
                format!("a tensor map holds numbers of 1, 2, 4 or 8 bytes, not `{elem}`"),
            );
            return Ty::Never;
        }
        let mut b = [0u32; 3];
        for (i, e) in boxes.iter().enumerate().take(3) {
            match self.const_u32(e, "a tensor map's box dimension") {
                Some(v @ 1..=256) => b[i] = v,
                Some(v) => {
                    self.cx.error(
                        e.span,
                        format!("a box dimension is 1 ..= 256 elements, not {v}"),
                    );
                    return Ty::Never;
                }
                None => return Ty::Never,
            }
        }
        if (b[0] * elem.bytes()) % 16 != 0 {
            self.cx.error(
                span,
                format!(
                    "a box's rows are a multiple of 16 bytes: {} `{elem}` elements are {} bytes",
                    b[0],
                    b[0] * elem.bytes()
                ),
            );
            return Ty::Never;
        }
        Ty::TensorMap {
            elem,
            boxes: b,
            write,
        }
    }

    /// The type a written type denotes, with array lengths evaluated.
    pub(super) fn resolve_ty(&mut self, t: &TypeAst) -> Ty {
        match &t.kind {
            TypeKind::Scalar(s) => Ty::Scalar(*s),
            TypeKind::Unit => Ty::Unit,
            TypeKind::Error => Ty::Never,
            TypeKind::TensorMap { elem, boxes, write } => {
                self.tensor_map_ty(*elem, boxes, *write, t.span)
            }
            TypeKind::Named(n) => match self.scope.structs.get(&n.to_string()) {
                Some(d) => Ty::Struct(d.clone()),
                None => {
                    self.cx.error(t.span, format!("unsupported type `{n}`"));
                    Ty::Never
                }
            },
            TypeKind::Option(inner) => {
                let i = self.resolve_ty(inner);
                if !matches!(i, Ty::Slice { .. } | Ty::Never) {
                    self.cx.error(
                        t.span,
                        "an optional parameter is `Option<&[T]>` or `Option<&mut [T]>`",
                    );
                    return Ty::Never;
                }
                Ty::Option(Box::new(i))
            }
            TypeKind::Slice { elem, mutable } => Ty::Slice {
                elem: *elem,
                mutable: *mutable,
            },
            TypeKind::Array { elem, len, cols } => {
                let c = match cols {
                    Some(c) => match self.const_u32(c, "an array length") {
                        Some(0) | None => return Ty::Never,
                        Some(c) => Some(c),
                    },
                    None => None,
                };
                match self.const_u32(len, "an array length") {
                    Some(0) | None => Ty::Never,
                    Some(n) if n as u64 * c.unwrap_or(1) as u64 > 1024 => {
                        self.cx
                            .error(t.span, "register arrays hold at most 1024 elements");
                        Ty::Never
                    }
                    Some(n) => match c {
                        Some(c) => Ty::Array2(*elem, n, c),
                        None => Ty::Array(*elem, n),
                    },
                }
            }
            TypeKind::Shared { elem, len, cols } => match len {
                None => Ty::Shared {
                    elem: *elem,
                    len: None,
                    cols: None,
                },
                Some(l) => {
                    let c = match cols {
                        Some(c) => match self.const_u32(c, "a shared array length") {
                            Some(c) if c > 0 => Some(c),
                            _ => return Ty::Never,
                        },
                        None => None,
                    };
                    match self.const_u32(l, "a shared array length") {
                        // (A length beyond any limit saturates, for the size checks.)
                        Some(n) if n > 0 => Ty::Shared {
                            elem: *elem,
                            len: Some(
                                (n as u64 * c.unwrap_or(1) as u64).min(u32::MAX as u64 / 16) as u32
                            ),
                            cols: c,
                        },
                        _ => Ty::Never,
                    }
                }
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
                    pattern,
                    span,
                } => {
                    if let Some(st) =
                        self.check_let(name, *mutable, ty.as_ref(), init.as_ref(), *pattern, *span)
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

    pub(super) fn check_let(
        &mut self,
        name: &syn::Ident,
        mutable: bool,
        ty: Option<&TypeAst>,
        init: Option<&Expr>,
        pattern: Option<usize>,
        span: Span,
    ) -> Option<TStmt> {
        let declared = ty.map(|t| self.resolve_ty(t));
        let name_s = name.to_string();
        if let Some(Ty::Shared { elem, len, .. }) = &declared {
            // `= dyn_shared(offset)`: a view of the dynamic shared memory.
            let mut view = None;
            if let Some(i) = init {
                match &i.kind {
                    crate::parse::ExprKind::Call { func, args, .. }
                        if func.len() == 1 && func[0] == "dyn_shared" && args.len() == 1 =>
                    {
                        let off = self.const_u32(&args[0], "the byte offset of a view")?;
                        view = Some((off, args[0].span));
                    }
                    _ => self.cx.error(
                        i.span,
                        "shared arrays are declared without a value: `let t: Shared<[f32; 256]>;`",
                    ),
                }
            }
            if let Some((off, at)) = view {
                let Some(n) = len else {
                    self.cx.error(
                        span,
                        "a view of dynamic shared memory has a length: `let a: Shared<[f32; N]> = dyn_shared(offset);`",
                    );
                    self.declare(&name_s, Ty::Never, true);
                    return None;
                };
                if off % 16 != 0 {
                    self.cx.error(
                        at,
                        format!("a view of dynamic shared memory starts at a multiple of 16 bytes, not at byte {off}"),
                    );
                }
                let id = self.declare(&name_s, declared.clone().unwrap_or(Ty::Never), true);
                self.dyn_views.push((id, *elem, *n, off));
                return None;
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
        if let Some(n) = pattern {
            let len = match &ty {
                Ty::Array(_, len) | Ty::Array2(_, len, _) => Some(*len as usize),
                _ => None,
            };
            if len != Some(n) && ty != Ty::Never {
                self.cx.error(
                    span,
                    format!("an array pattern of {n} entries does not match `{ty}`"),
                );
            }
        }
        match &ty {
            Ty::Unit
            | Ty::Enum
            | Ty::Slice { .. }
            | Ty::Shared { .. }
            | Ty::Struct(_)
            | Ty::Option(_) => {
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
}

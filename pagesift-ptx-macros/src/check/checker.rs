//! The type checker of one variant: statements and expressions.

use super::{TBlock, TExpr, TKind, TStmt, Target, VarId, VarInfo, Variant, STATIC_SHARED_LIMIT};
use crate::ctxt::Ctxt;
use crate::ctxt::Sp as Span;
use crate::parse::{Block, ConstTy, Expr, FnItem, Stmt, TypeAst, TypeKind};
use crate::types::{ConstVal, Scalar, Ty};
use std::collections::HashMap;

#[derive(Clone)]
pub(super) enum Binding {
    Var(VarId),
    Const(ConstVal, Ty),
}

pub(super) struct Frame {
    pub(super) scopes: Vec<HashMap<String, Binding>>,
    pub(super) ret: Ty,
    pub(super) loops: usize,
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
    /// Nesting of `unsafe` blocks around the expression being checked (reset in helpers).
    pub(super) unsafe_depth: u32,
    /// Whether the variant has an `unsafe` block (its own or an inlined helper's).
    pub(super) uses_unsafe: bool,
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
        unsafe_depth: 0,
        uses_unsafe: false,
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
                // 0 means no cap, so that a `match` on a const can cap some variants only.
                max_regs = ck.const_u32(e, "`max_regs`").filter(|&r| r != 0);
                if let Some(r) = max_regs.filter(|r| !(24..=255).contains(r)) {
                    let named: Vec<String> =
                        consts.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                    let of = if named.is_empty() {
                        String::new()
                    } else {
                        format!(" (variant {}: {r})", named.join(", "))
                    };
                    cx.error(
                        e.span,
                        format!("`max_regs` is 0 (no cap) or between 24 and 255{of}"),
                    );
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
        // Already reported by `check_program`; here only the type matters.
        let quiet = Ctxt::new();
        let ty = super::kernel_param_ty(&quiet, &p.ty).unwrap_or(Ty::Never);
        let _ = quiet.finish();
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
        uses_unsafe: ck.uses_unsafe,
        body,
    })
}

impl Checker<'_> {
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
        frame.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    /// Evaluates `e` as a constant u32 (block dimensions, array lengths).
    pub(super) fn const_u32(&mut self, e: &Expr, what: &str) -> Option<u32> {
        let t = self.check_expr(e, Some(&Ty::Scalar(Scalar::U32)));
        // `if` and `match` on constants resolve to a block holding only the taken value.
        let mut k = &t.kind;
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
        match k {
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

    /// The type a written type denotes, with array lengths evaluated.
    pub(super) fn resolve_ty(&mut self, t: &TypeAst) -> Ty {
        match &t.kind {
            TypeKind::Scalar(s) => Ty::Scalar(*s),
            TypeKind::Unit => Ty::Unit,
            TypeKind::Error => Ty::Never,
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

    pub(super) fn check_let(
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
}

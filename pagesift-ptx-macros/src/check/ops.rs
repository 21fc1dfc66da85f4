//! Operators, conversions, assignments and `asm!`.

use super::checker::{err_expr, same, Binding, Checker};
use super::fold::{fold_binary, op_str};
use super::{AsmPiece, Place, TExpr, TKind};
use crate::ctxt::Sp as Span;
use crate::parse::{BinOp, Expr, ExprKind, UnOp};
use crate::types::{wrap_int, ConstVal, Scalar, Ty};

impl Checker<'_> {
    pub(super) fn check_binary(
        &mut self,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        if matches!(op, BinOp::LogicAnd | BinOp::LogicOr) {
            let b = Ty::Scalar(Scalar::Bool);
            let l = self.check_expr(lhs, Some(&b));
            self.expect_ty(&l, &b, lhs.span);
            // `false && x`, `true || x`: decided without `x`, so `x` is never evaluated.
            match (&l.kind, op) {
                (TKind::Const(ConstVal::Bool(false)), BinOp::LogicAnd) => return l,
                (TKind::Const(ConstVal::Bool(true)), BinOp::LogicOr) => return l,
                (TKind::Const(ConstVal::Bool(_)), _) => {
                    let r = self.check_expr(rhs, Some(&b));
                    self.expect_ty(&r, &b, rhs.span);
                    return r;
                }
                _ => {}
            }
            let r = self.check_expr(rhs, Some(&b));
            self.expect_ty(&r, &b, rhs.span);
            return TExpr {
                kind: TKind::Binary(op, Box::new(l), Box::new(r)),
                ty: b,
                span,
            };
        }
        let operand_expect = if op.is_cmp() { None } else { expect };
        let (l, r) = if matches!(op, BinOp::Shl | BinOp::Shr) {
            let l = self.check_expr(lhs, operand_expect);
            let r = self.check_expr(rhs, Some(&Ty::Scalar(Scalar::U32)));
            (l, r)
        } else if Self::untyped(lhs) && !Self::untyped(rhs) {
            let r = self.check_expr(rhs, operand_expect);
            let t = r.ty.clone();
            (self.check_expr(lhs, Some(&t)), r)
        } else {
            let l = self.check_expr(lhs, operand_expect);
            let t = l.ty.clone();
            (l, self.check_expr(rhs, Some(&t)))
        };
        self.binary(op, l, r, span)
    }

    /// Types and folds a binary operation on checked operands.
    pub(super) fn binary(&mut self, op: BinOp, l: TExpr, r: TExpr, span: Span) -> TExpr {
        if l.ty == Ty::Never || r.ty == Ty::Never {
            return err_expr(span);
        }
        let shift = matches!(op, BinOp::Shl | BinOp::Shr);
        if !shift && l.ty != r.ty {
            self.cx.error(
                span,
                format!(
                    "mismatched types: `{}` {} `{}` (convert one side with `as`)",
                    l.ty,
                    op_str(op),
                    r.ty
                ),
            );
            return err_expr(span);
        }
        let ok = match (&l.ty, op) {
            (Ty::Enum, BinOp::Eq | BinOp::Ne) => true,
            (Ty::Scalar(s), _) => {
                let s = *s;
                match op {
                    // 8-bit integers compute as the others do, wrapping at 8 bits.
                    BinOp::Add | BinOp::Sub | BinOp::Mul => s.is_arith() || s.is_byte(),
                    BinOp::Div => (s.is_arith() || s.is_byte()) && !s.is_packed(),
                    BinOp::Rem => s.is_int(),
                    BinOp::And | BinOp::Or | BinOp::Xor => s.is_int() || s == Scalar::Bool,
                    BinOp::Shl | BinOp::Shr => {
                        s.is_int() && matches!(r.ty, Ty::Scalar(t) if t.is_int() && !t.is_byte())
                    }
                    BinOp::Eq | BinOp::Ne => !s.is_packed(),
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        (s.is_arith() || s.is_byte()) && !s.is_packed()
                    }
                    BinOp::LogicAnd | BinOp::LogicOr => false,
                }
            }
            _ => false,
        };
        if !ok {
            self.cx.error(
                span,
                format!("operator `{}` is not defined on `{}`", op_str(op), l.ty),
            );
            return err_expr(span);
        }
        let ty = if op.is_cmp() {
            Ty::Scalar(Scalar::Bool)
        } else {
            l.ty.clone()
        };
        if let (TKind::Const(a), TKind::Const(b)) = (&l.kind, &r.kind) {
            match fold_binary(op, &l.ty, a, b) {
                Ok(Some(v)) => {
                    return TExpr {
                        kind: TKind::Const(v),
                        ty,
                        span,
                    }
                }
                Ok(None) => {}
                Err(msg) => {
                    self.cx.error(span, msg);
                    return err_expr(span);
                }
            }
        }
        TExpr {
            kind: TKind::Binary(op, Box::new(l), Box::new(r)),
            ty,
            span,
        }
    }

    pub(super) fn unary(&mut self, op: UnOp, x: TExpr, span: Span) -> TExpr {
        let ok = match (&x.ty, op) {
            (Ty::Never, _) => return err_expr(span),
            (Ty::Scalar(s), UnOp::Neg) => s.is_signed() || s.is_float() || s.is_packed(),
            (Ty::Scalar(s), UnOp::Not) => *s == Scalar::Bool || s.is_int(),
            _ => false,
        };
        if !ok {
            let o = if op == UnOp::Neg { "-" } else { "!" };
            self.cx
                .error(span, format!("operator `{o}` is not defined on `{}`", x.ty));
            return err_expr(span);
        }
        if let (TKind::Const(v), Ty::Scalar(s)) = (&x.kind, &x.ty) {
            let folded = match (v, op) {
                (ConstVal::Int(i), UnOp::Neg) => Some(ConstVal::Int(wrap_int(-i, *s))),
                (ConstVal::Int(i), UnOp::Not) => Some(ConstVal::Int(wrap_int(!i, *s))),
                (ConstVal::Float(f), UnOp::Neg) => Some(ConstVal::Float(-f)),
                (ConstVal::Bool(b), UnOp::Not) => Some(ConstVal::Bool(!b)),
                _ => None,
            };
            if let Some(v) = folded {
                return TExpr {
                    kind: TKind::Const(v),
                    ty: x.ty,
                    span,
                };
            }
        }
        let ty = x.ty.clone();
        TExpr {
            kind: TKind::Unary(op, Box::new(x)),
            ty,
            span,
        }
    }

    /// Types and folds `x as to`.
    pub(super) fn cast(&mut self, x: TExpr, to: &Ty, span: Span) -> TExpr {
        let (Ty::Scalar(from), Ty::Scalar(to_s)) = (&x.ty, to) else {
            if x.ty != Ty::Never && *to != Ty::Never {
                self.cx
                    .error(span, format!("cannot cast `{}` as `{to}`", x.ty));
            }
            return err_expr(span);
        };
        let (from, to_s) = (*from, *to_s);
        if from.is_packed() || to_s.is_packed() || (to_s == Scalar::Bool && from != Scalar::Bool) {
            self.cx
                .error(span, format!("cannot cast `{from}` as `{to_s}`"));
            return err_expr(span);
        }
        if let TKind::Const(v) = &x.kind {
            let folded = match (v, to_s.is_float(), to_s.is_int()) {
                (ConstVal::Int(i), true, _) => Some(ConstVal::Float(if to_s == Scalar::F32 {
                    *i as f32 as f64
                } else {
                    *i as f64
                })),
                (ConstVal::Int(i), _, true) => Some(ConstVal::Int(wrap_int(*i, to_s))),
                (ConstVal::Bool(b), _, true) => Some(ConstVal::Int(*b as i128)),
                (ConstVal::Float(f), true, _) if to_s == Scalar::F32 || to_s == Scalar::F64 => {
                    Some(ConstVal::Float(if to_s == Scalar::F32 {
                        *f as f32 as f64
                    } else {
                        *f
                    }))
                }
                (ConstVal::Float(f), _, true) => {
                    let (lo, hi) = (
                        wrap_int(
                            if to_s.is_signed() {
                                1 << (to_s.bytes() * 8 - 1)
                            } else {
                                0
                            },
                            to_s,
                        ),
                        {
                            let bits = to_s.bytes() * 8 - to_s.is_signed() as u32;
                            (1i128 << bits) - 1
                        },
                    );
                    let t = if f.is_nan() {
                        0
                    } else {
                        (f.trunc().clamp(lo as f64, hi as f64)) as i128
                    };
                    Some(ConstVal::Int(t))
                }
                (ConstVal::Bool(b), _, _) if to_s == Scalar::Bool => Some(ConstVal::Bool(*b)),
                _ => None,
            };
            if let Some(v) = folded {
                return TExpr {
                    kind: TKind::Const(v),
                    ty: to.clone(),
                    span,
                };
            }
        }
        if from == to_s {
            return TExpr {
                ty: to.clone(),
                ..x
            };
        }
        TExpr {
            kind: TKind::Cast(Box::new(x)),
            ty: to.clone(),
            span,
        }
    }

    pub(super) fn check_assign(
        &mut self,
        place: &Expr,
        op: Option<BinOp>,
        value: &Expr,
        span: Span,
    ) -> TExpr {
        let unit = |kind| TExpr {
            kind,
            ty: Ty::Unit,
            span,
        };
        let (tplace, ty) = match &place.kind {
            ExprKind::Var(name) => {
                match self.lookup(&name.to_string()) {
                    Some(Binding::Var(id)) => {
                        let info = self.vars[id].clone();
                        if !info.mutable {
                            self.cx.error(place.span, format!("cannot assign to immutable variable `{name}` (declare it `let mut`)"));
                        }
                        if !matches!(
                            info.ty,
                            Ty::Scalar(_) | Ty::Array(..) | Ty::Array2(..) | Ty::Never
                        ) {
                            self.cx.error(
                                place.span,
                                format!("cannot assign to `{name}` of type `{}`", info.ty),
                            );
                        }
                        (Place::Var(id), info.ty)
                    }
                    Some(Binding::Const(..)) => {
                        self.cx.error(place.span, format!("cannot assign to `{name}`: it is a constant (declare it `let mut`)"));
                        return err_expr(span);
                    }
                    Some(Binding::Opt(_)) => {
                        self.cx.error(
                            place.span,
                            format!("cannot assign to `{name}`: it is an optional slice parameter"),
                        );
                        return err_expr(span);
                    }
                    None => {
                        self.cx
                            .error(place.span, format!("cannot find `{name}` in this scope"));
                        return err_expr(span);
                    }
                }
            }
            ExprKind::Index { base, index } => {
                let target = self.indexed(base, index);
                // The array's variable: a slice must be `&mut`, a register array `let mut`.
                let (id, elem) = match &target {
                    Some(super::arrays::Indexed::Elem(id, _, e))
                    | Some(super::arrays::Indexed::Row(id, _, _, e)) => (*id, *e),
                    None => return err_expr(span),
                };
                match self.vars[id].ty.clone() {
                    bty @ Ty::Slice { mutable: false, .. } => {
                        let b = match &base.kind {
                            ExprKind::Index { base: b, .. } => b,
                            _ => base,
                        };
                        self.cx.error(
                            b.span,
                            format!("cannot assign through `{bty}`: declare the parameter `&mut [{elem}]`"),
                        );
                    }
                    Ty::Array(..) | Ty::Array2(..) if !self.vars[id].mutable => {
                        let name = self.vars[id].name.clone();
                        self.cx.error(base.span, format!("cannot assign to an element of immutable `{name}` (declare it `let mut`)"));
                    }
                    _ => {}
                }
                match target {
                    Some(super::arrays::Indexed::Row(id, first, cols, elem)) => {
                        return self.assign_row(id, first, cols, elem, op, value, span);
                    }
                    Some(super::arrays::Indexed::Elem(id, idx, elem)) => (
                        Place::Index {
                            base: id,
                            index: Box::new(idx),
                        },
                        Ty::Scalar(elem),
                    ),
                    None => return err_expr(span),
                }
            }
            ExprKind::Error => return err_expr(span),
            _ => {
                self.cx
                    .error(place.span, "assign to a variable or an element `x[i]`");
                return err_expr(span);
            }
        };
        let v = if matches!(op, Some(BinOp::Shl | BinOp::Shr)) {
            self.check_expr(value, Some(&Ty::Scalar(Scalar::U32)))
        } else {
            self.check_expr(value, Some(&ty))
        };
        if let Some(o) = op {
            // Type the compound operation as `place op value`.
            let placeholder = TExpr {
                kind: TKind::Const(ConstVal::Int(0)),
                ty: ty.clone(),
                span,
            };
            let t = self.binary(
                o,
                TExpr {
                    kind: TKind::Var(usize::MAX),
                    ..placeholder
                },
                v.clone(),
                span,
            );
            if t.ty == Ty::Never {
                return err_expr(span);
            }
        } else if !same(&ty, &v.ty) {
            self.cx.error(
                value.span,
                format!("mismatched types: expected `{ty}`, found `{}`", v.ty),
            );
        }
        unit(TKind::Assign {
            place: tplace,
            op,
            value: Box::new(v),
        })
    }

    /// `assert!(cond, "why")`: `cond` must fold to a constant (constants, const parameters,
    /// helper calls of them); true leaves nothing, false is an error naming the condition,
    /// the message and the variant.
    pub(super) fn check_assert(
        &mut self,
        cond: &crate::parse::Expr,
        text: &str,
        why: Option<&syn::LitStr>,
        span: Span,
    ) -> TExpr {
        let mut c = self.check_expr(cond, Some(&Ty::Scalar(Scalar::Bool)));
        self.expect_ty(&c, &Ty::Scalar(Scalar::Bool), cond.span);
        super::fold::fold_helper_call(&mut c);
        match c.kind {
            TKind::Const(ConstVal::Bool(true)) => {}
            TKind::Const(ConstVal::Bool(false)) => {
                let why = why.map(|w| format!(": {}", w.value())).unwrap_or_default();
                self.cx.error(
                    span,
                    format!("assertion failed: `{text}`{why}{}", self.variant),
                );
            }
            _ if c.ty != Ty::Scalar(Scalar::Bool) => {}
            _ => self.cx.error(
                cond.span,
                "`assert!` takes a condition known when the kernel is expanded (constants, const parameters and helper calls of them), not one left to run time",
            ),
        }
        TExpr {
            kind: TKind::Block(super::TBlock {
                stmts: vec![],
                tail: None,
                ty: Ty::Unit,
            }),
            ty: Ty::Unit,
            span,
        }
    }

    pub(super) fn check_asm(
        &mut self,
        template: &syn::LitStr,
        operands: &[crate::parse::AsmOperand],
        span: Span,
    ) -> TExpr {
        use crate::parse::AsmOperand;
        let mut inputs = Vec::new();
        let mut outs = Vec::new();
        // Each written operand, as the slot it fills: input k or output k.
        let mut slots = Vec::new();
        for op in operands {
            match op {
                AsmOperand::In(e) => {
                    let t = self.check_expr(e, None);
                    if !matches!(t.ty, Ty::Scalar(_) | Ty::Never) {
                        self.cx.error(
                            e.span,
                            format!("`asm!` operands are scalars, not `{}`", t.ty),
                        );
                    }
                    slots.push(AsmPiece::In(inputs.len()));
                    inputs.push(t);
                }
                AsmOperand::Out(s, sp) => {
                    if outs.first().is_some_and(|f| f != s) {
                        self.cx.error(*sp, "the `out(T)` operands of one `asm!` have one type (their value is `[T; N]`)");
                    }
                    slots.push(AsmPiece::Out(outs.len()));
                    outs.push(*s);
                }
            }
        }
        let text = template.value();
        let pieces = match parse_asm_template(&text, slots.len()) {
            Ok(p) => p,
            Err(msg) => {
                self.cx.error(template.span(), msg);
                return err_expr(span);
            }
        };
        let pieces: Vec<AsmPiece> = pieces
            .into_iter()
            .map(|p| match p {
                AsmPiece::In(i) => slots[i].clone(),
                other => other,
            })
            .collect();
        if !text.trim_end().ends_with(';') || text.matches(';').count() != 1 {
            self.cx.error(
                template.span(),
                "`asm!` splices exactly one PTX instruction ending in `;`",
            );
        } else if self.unsafe_depth == 0 {
            if let Err(why) = register_only_asm(&text).and_then(|_| writes_only_outputs(&pieces)) {
                self.cx.error(
                    template.span(),
                    format!("{why}: outside an `unsafe {{ }}` block `asm!` allows only instructions on registers (arithmetic, logic, conversions, moves, comparisons, approximate functions)"),
                );
            }
        }
        let ty = match outs.as_slice() {
            [] => Ty::Unit,
            [s] => Ty::Scalar(*s),
            [s, ..] => Ty::Array(*s, outs.len() as u32),
        };
        TExpr {
            kind: TKind::Asm {
                pieces,
                inputs,
                outs,
            },
            ty,
            span,
        }
    }
}

/// Splits an `asm!` template into text and operand slots: `{N}` is the N-th operand (as
/// `AsmPiece::In(N)`, resolved by the caller), `{{` and `}}` are literal braces (PTX vector
/// operands).
pub(super) fn parse_asm_template(text: &str, n_operands: usize) -> Result<Vec<AsmPiece>, String> {
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                lit.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                lit.push('}');
            }
            '{' => {
                let mut idx = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(d) => idx.push(d),
                        None => {
                            return Err(
                                "unclosed `{` in the `asm!` template (write `{{` for a brace)"
                                    .into(),
                            )
                        }
                    }
                }
                match idx.trim().parse::<usize>() {
                    Ok(i) if i < n_operands => {
                        if !lit.is_empty() {
                            pieces.push(AsmPiece::Text(std::mem::take(&mut lit)));
                        }
                        pieces.push(AsmPiece::In(i));
                    }
                    _ => {
                        return Err(format!(
                            "`{{{idx}}}` names no operand: operands are `{{0}}` to `{{{}}}`, `{{{{` and `}}}}` are literal braces",
                            n_operands.saturating_sub(1)
                        ))
                    }
                }
            }
            '}' => {
                return Err("unmatched `}` in the `asm!` template (write `}}` for a brace)".into())
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        pieces.push(AsmPiece::Text(lit));
    }
    Ok(pieces)
}

/// The opcodes (first dot-separated part) that `asm!` may use in safe code: they read and write
/// registers only, with no memory access and no control flow.
const REGISTER_ONLY_OPCODES: &[&str] = &[
    "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "fma", "div", "rem", "abs", "neg", "min",
    "max", "and", "or", "xor", "not", "cnot", "shl", "shr", "shf", "lop3", "prmt", "bfe", "bfi",
    "brev", "popc", "clz", "bfind", "fns", "bmsk", "szext", "dp4a", "dp2a", "cvt", "mov", "selp",
    "slct", "setp", "set", "testp", "copysign", "ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos",
    "tanh",
];

/// Whether an `asm!` instruction only computes on registers (`Err` says why not).
pub(crate) fn register_only_asm(text: &str) -> Result<(), String> {
    let inst = text.trim();
    if inst.starts_with('@') {
        return Err("a predicated `asm!` instruction".to_string());
    }
    let opcode = inst
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(';');
    let root = opcode.split('.').next().unwrap_or("");
    if !REGISTER_ONLY_OPCODES.contains(&root) {
        return Err(format!(
            "`{opcode}` may access memory or change control flow"
        ));
    }
    if inst.contains('[') {
        return Err(format!("`{opcode}` with an address operand"));
    }
    Ok(())
}

/// Whether the destination of an instruction (up to its first comma outside braces) names only
/// `out(T)` operands: an input operand or a register written by name there would change a value
/// the compiler assumes unchanged (and may have proven an index with).
pub(crate) fn writes_only_outputs(pieces: &[AsmPiece]) -> Result<(), String> {
    let mut depth = 0;
    let mut seen_opcode = false;
    for p in pieces {
        match p {
            AsmPiece::Text(t) => {
                let mut rest = t.as_str();
                if !seen_opcode {
                    let t = rest.trim_start();
                    let end = t.find(char::is_whitespace).unwrap_or(t.len());
                    rest = &t[end..];
                    seen_opcode = true;
                }
                for c in rest.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' | ';' if depth == 0 => return Ok(()),
                        c if c.is_whitespace() || c == ',' || c == '|' => {}
                        _ => return Err("the destination is not an `out(T)` operand".to_string()),
                    }
                }
            }
            AsmPiece::Out(_) => {}
            AsmPiece::In(_) => {
                return Err("the destination is an input operand".to_string());
            }
        }
    }
    Ok(())
}

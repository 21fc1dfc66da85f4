//! Indexing: elements of register arrays, slices and shared arrays, the elements and rows of
//! two-dimensional arrays (`a[i][j]`, `a[i]`), and assignments to them.
//!
//! A two-dimensional array is one flat array, row-major: `a[i][j]` is element `i * C + j`. Of a
//! register array each index must be known after unrolling and inside its dimension (checked
//! when it is known: at compile time); of a shared array the flat index is bounds-checked at
//! run time like any other (a constant index is checked per dimension at compile time). A row
//! `a[i]` of a register array is a value `[T; C]` and a place: `a[i] = x.load4(k)`.

use super::checker::{err_expr, Checker};
use super::{Place, TBlock, TExpr, TKind, TStmt, VarId};
use crate::ctxt::Sp as Span;
use crate::parse::{BinOp, Expr, ExprKind};
use crate::types::{ConstVal, Scalar, Ty};

/// What an index expression names.
pub(super) enum Indexed {
    /// One element: the array's variable, the (flat) index, the element type.
    Elem(VarId, TExpr, Scalar),
    /// A row of a two-dimensional register array: its variable, the flat index of the row's
    /// first element, the row's length and element type.
    Row(VarId, TExpr, u32, Scalar),
}

impl Checker<'_> {
    /// `base[index]` (and `base[i][index]`): the element or row it names; `None` after an
    /// error.
    pub(super) fn indexed(&mut self, base: &Expr, index: &Expr) -> Option<Indexed> {
        if let ExprKind::Index {
            base: inner,
            index: row,
        } = &base.kind
        {
            return self.indexed2(inner, row, index, base.span);
        }
        let (id, ty) = self.place_base(base)?;
        let idx = self.check_index(index);
        match ty {
            Ty::Array(s, n) => {
                self.const_in_dim(&idx, n, &ty, index.span);
                Some(Indexed::Elem(id, idx, s))
            }
            Ty::Array2(s, r, c) => {
                self.const_in_dim(&idx, r, &ty, index.span);
                let first = self.flat(Self::within(idx, r), c, None, index.span);
                Some(Indexed::Row(id, first, c, s))
            }
            Ty::Shared { cols: Some(_), .. } => {
                self.cx.error(
                    base.span,
                    format!("a row of a two-dimensional shared array is not a value: name an element, `{}[r][c]`", self.vars[id].name),
                );
                None
            }
            Ty::Slice { elem, .. } | Ty::Shared { elem, .. } => Some(Indexed::Elem(id, idx, elem)),
            Ty::Never => None,
            other => {
                self.cx
                    .error(base.span, format!("cannot index a value of type `{other}`"));
                None
            }
        }
    }

    /// `a[row][col]` of a two-dimensional array.
    fn indexed2(&mut self, a: &Expr, row: &Expr, col: &Expr, span: Span) -> Option<Indexed> {
        let (id, ty) = self.place_base(a)?;
        let r = self.check_index(row);
        // The column index takes the row index's type (an unsuffixed literal included).
        let c = match &r.ty {
            Ty::Scalar(s) if Self::untyped(col) => self.check_expr(col, Some(&Ty::Scalar(*s))),
            _ => self.check_index(col),
        };
        match ty {
            Ty::Array2(s, rows, cols) => {
                self.const_in_dim(&r, rows, &ty, row.span);
                let cty = Ty::Array(s, cols);
                self.const_in_dim(&c, cols, &cty, col.span);
                let flat = self.flat(
                    Self::within(r, rows),
                    cols,
                    Some(Self::within(c, cols)),
                    span,
                );
                Some(Indexed::Elem(id, flat, s))
            }
            Ty::Shared {
                elem,
                len: Some(n),
                cols: Some(cols),
            } => {
                let rows = n / cols;
                self.const_in_dim(&r, rows, &ty, row.span);
                self.const_in_dim(&c, cols, &Ty::Array(elem, cols), col.span);
                let flat = self.flat(r, cols, Some(c), span);
                Some(Indexed::Elem(id, flat, elem))
            }
            Ty::Never => None,
            Ty::Array(s, _) | Ty::Slice { elem: s, .. } | Ty::Shared { elem: s, .. } => {
                self.cx
                    .error(span, format!("cannot index a value of type `{s}`"));
                None
            }
            other => {
                self.cx
                    .error(a.span, format!("cannot index a value of type `{other}`"));
                None
            }
        }
    }

    /// A constant index outside `0..n` (a dimension of `ty`) is an error.
    fn const_in_dim(&self, idx: &TExpr, n: u32, ty: &Ty, span: Span) {
        if let TKind::Const(ConstVal::Int(i)) = idx.kind {
            if i < 0 || i >= n as i128 {
                let shown = match ty {
                    Ty::Array2(s, _, c) => format!("[[{s}; {c}]; {n}]"),
                    Ty::Shared {
                        elem,
                        cols: Some(c),
                        ..
                    } => format!("Shared<[[{elem}; {c}]; {n}]>"),
                    other => other.to_string(),
                };
                self.cx
                    .error(span, format!("index {i} is out of bounds for `{shown}`"));
            }
        }
    }

    /// A register array's index into a dimension of `len`: checked after unrolling.
    fn within(idx: TExpr, len: u32) -> TExpr {
        match idx.kind {
            TKind::Const(_) => idx,
            _ => TExpr {
                ty: idx.ty.clone(),
                span: idx.span,
                kind: TKind::Within {
                    index: Box::new(idx),
                    len,
                },
            },
        }
    }

    /// `row * cols + col` in the row index's type (constants fold).
    fn flat(&mut self, row: TExpr, cols: u32, col: Option<TExpr>, span: Span) -> TExpr {
        let k = TExpr {
            kind: TKind::Const(ConstVal::Int(cols as i128)),
            ty: row.ty.clone(),
            span,
        };
        let first = self.binary(BinOp::Mul, row, k, span);
        match col {
            Some(c) => self.binary(BinOp::Add, first, c, span),
            None => first,
        }
    }

    /// `first + k` for the `k`-th element of a row.
    fn row_elem(&mut self, first: &TExpr, k: u32, span: Span) -> TExpr {
        let kk = TExpr {
            kind: TKind::Const(ConstVal::Int(k as i128)),
            ty: first.ty.clone(),
            span,
        };
        self.binary(BinOp::Add, first.clone(), kk, span)
    }

    /// The value of `base[index]`.
    pub(super) fn check_index_expr(&mut self, base: &Expr, index: &Expr, span: Span) -> TExpr {
        match self.indexed(base, index) {
            Some(Indexed::Elem(id, idx, s)) => TExpr {
                kind: TKind::Index {
                    base: id,
                    index: Box::new(idx),
                },
                ty: Ty::Scalar(s),
                span,
            },
            Some(Indexed::Row(id, first, cols, s)) => {
                let items = (0..cols)
                    .map(|k| {
                        let idx = self.row_elem(&first, k, span);
                        TExpr {
                            kind: TKind::Index {
                                base: id,
                                index: Box::new(idx),
                            },
                            ty: Ty::Scalar(s),
                            span,
                        }
                    })
                    .collect();
                TExpr {
                    kind: TKind::Array(items),
                    ty: Ty::Array(s, cols),
                    span,
                }
            }
            None => err_expr(span),
        }
    }

    /// `base[i] op= value` for a row `base[i]` of a two-dimensional register array: the value
    /// (`[T; C]`) once into a hidden variable, then each element assigned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assign_row(
        &mut self,
        id: VarId,
        first: TExpr,
        cols: u32,
        elem: Scalar,
        op: Option<BinOp>,
        value: &Expr,
        span: Span,
    ) -> TExpr {
        let want = Ty::Array(elem, cols);
        let v = self.check_expr(value, Some(&want));
        if v.ty == Ty::Never {
            return err_expr(span);
        }
        if v.ty != want {
            self.cx.error(
                value.span,
                format!(
                    "mismatched types: expected `{want}` (a row), found `{}`",
                    v.ty
                ),
            );
            return err_expr(span);
        }
        if let Some(o) = op {
            // Typed as `element op element`.
            let e = TExpr {
                kind: TKind::Const(ConstVal::Int(0)),
                ty: Ty::Scalar(elem),
                span,
            };
            let t = self.binary(
                o,
                TExpr {
                    kind: TKind::Var(usize::MAX),
                    ..e.clone()
                },
                TExpr {
                    kind: TKind::Var(usize::MAX),
                    ..e
                },
                span,
            );
            if t.ty == Ty::Never {
                return err_expr(span);
            }
        }
        let tmp = self.declare_hidden("row", want.clone());
        let mut stmts = vec![TStmt::Let {
            var: tmp,
            init: Some(v),
        }];
        for k in 0..cols {
            let idx = self.row_elem(&first, k, span);
            let src = TExpr {
                kind: TKind::Index {
                    base: tmp,
                    index: Box::new(TExpr {
                        kind: TKind::Const(ConstVal::Int(k as i128)),
                        ty: Ty::Scalar(Scalar::U32),
                        span,
                    }),
                },
                ty: Ty::Scalar(elem),
                span,
            };
            stmts.push(TStmt::Expr(TExpr {
                kind: TKind::Assign {
                    place: Place::Index {
                        base: id,
                        index: Box::new(idx),
                    },
                    op,
                    value: Box::new(src),
                },
                ty: Ty::Unit,
                span,
            }));
        }
        TExpr {
            kind: TKind::Block(TBlock {
                stmts,
                tail: None,
                ty: Ty::Unit,
            }),
            ty: Ty::Unit,
            span,
        }
    }
}

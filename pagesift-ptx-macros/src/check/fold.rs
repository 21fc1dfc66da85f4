//! Constant evaluation and the tables it uses.

use crate::parse::{BinOp, Pat};
use crate::types::{wrap_int, ConstVal, Scalar, Ty};

pub(crate) fn pat_matches(p: &Pat, v: &ConstVal) -> bool {
    match (p, v) {
        (Pat::Wild, _) => true,
        (Pat::Name(n), ConstVal::Enum(e)) => n == e,
        (Pat::Int(a), ConstVal::Int(b)) => a == b,
        (Pat::Bool(a), ConstVal::Bool(b)) => a == b,
        (Pat::Or(ps), v) => ps.iter().any(|p| pat_matches(p, v)),
        _ => false,
    }
}

pub(super) fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::LogicAnd => "&&",
        BinOp::LogicOr => "||",
    }
}

pub(super) fn assoc_const(s: Scalar, name: &str) -> Option<ConstVal> {
    if s.is_int() {
        let bits = s.bytes() * 8;
        let (min, max) = if s.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        return match name {
            "MIN" => Some(ConstVal::Int(min)),
            "MAX" => Some(ConstVal::Int(max)),
            "BITS" => Some(ConstVal::Int(bits as i128)),
            _ => None,
        };
    }
    let (max, min_pos, eps) = match s {
        Scalar::F32 => (
            f32::MAX as f64,
            f32::MIN_POSITIVE as f64,
            f32::EPSILON as f64,
        ),
        Scalar::F64 => (f64::MAX, f64::MIN_POSITIVE, f64::EPSILON),
        Scalar::F16 => (65504.0, 6.103_515_625e-5, 0.000_976_562_5),
        Scalar::Bf16 => (
            3.389_531_389_251_535_5e38,
            1.175_494_350_822_287_5e-38,
            0.007_812_5,
        ),
        _ => return None,
    };
    match name {
        "MAX" => Some(ConstVal::Float(max)),
        "MIN" => Some(ConstVal::Float(-max)),
        "MIN_POSITIVE" => Some(ConstVal::Float(min_pos)),
        "EPSILON" => Some(ConstVal::Float(eps)),
        "INFINITY" => Some(ConstVal::Float(f64::INFINITY)),
        "NEG_INFINITY" => Some(ConstVal::Float(f64::NEG_INFINITY)),
        "NAN" => Some(ConstVal::Float(f64::NAN)),
        _ => None,
    }
}

/// Folds `a op b` of type `ty`; `Ok(None)` when the value is left to run time.
pub(crate) fn fold_binary(
    op: BinOp,
    ty: &Ty,
    a: &ConstVal,
    b: &ConstVal,
) -> Result<Option<ConstVal>, String> {
    use ConstVal as C;
    let s = match ty {
        Ty::Scalar(s) => Some(*s),
        _ => None,
    };
    Ok(Some(match (a, b) {
        (C::Int(x), C::Int(y)) => {
            let s = s.unwrap_or(Scalar::U32);
            let (x, y) = (*x, *y);
            let int = |v: i128| C::Int(wrap_int(v, s));
            match op {
                BinOp::Add => int(x + y),
                BinOp::Sub => int(x - y),
                BinOp::Mul => int(x.wrapping_mul(y)),
                BinOp::Div | BinOp::Rem if y == 0 => {
                    return Err("division by zero in a constant expression".into())
                }
                BinOp::Div => int(x / y),
                BinOp::Rem => int(x % y),
                BinOp::And => int(x & y),
                BinOp::Or => int(x | y),
                BinOp::Xor => int(x ^ y),
                BinOp::Shl | BinOp::Shr => {
                    let bits = s.bytes() as i128 * 8;
                    if !(0..bits).contains(&y) {
                        return Err(format!("shift by {y} overflows `{s}`"));
                    }
                    if op == BinOp::Shl {
                        int(x << y)
                    } else {
                        int(x >> y)
                    }
                }
                BinOp::Eq => C::Bool(x == y),
                BinOp::Ne => C::Bool(x != y),
                BinOp::Lt => C::Bool(x < y),
                BinOp::Le => C::Bool(x <= y),
                BinOp::Gt => C::Bool(x > y),
                BinOp::Ge => C::Bool(x >= y),
                BinOp::LogicAnd | BinOp::LogicOr => return Ok(None),
            }
        }
        (C::Float(x), C::Float(y)) => {
            // Values of f32 type compare and compute as f32 (a literal may hold more digits).
            let (x, y) = match s {
                Some(Scalar::F32) => (*x as f32 as f64, *y as f32 as f64),
                _ => (*x, *y),
            };
            let round = |v: f64| -> Option<C> {
                match s {
                    Some(Scalar::F32) => Some(C::Float(v as f32 as f64)),
                    Some(Scalar::F64) => Some(C::Float(v)),
                    _ => None,
                }
            };
            let r = match op {
                BinOp::Add => round(if s == Some(Scalar::F32) {
                    (x as f32 + y as f32) as f64
                } else {
                    x + y
                }),
                BinOp::Sub => round(if s == Some(Scalar::F32) {
                    (x as f32 - y as f32) as f64
                } else {
                    x - y
                }),
                BinOp::Mul => round(if s == Some(Scalar::F32) {
                    (x as f32 * y as f32) as f64
                } else {
                    x * y
                }),
                BinOp::Div => round(if s == Some(Scalar::F32) {
                    (x as f32 / y as f32) as f64
                } else {
                    x / y
                }),
                BinOp::Eq => Some(C::Bool(x == y)),
                BinOp::Ne => Some(C::Bool(x != y)),
                BinOp::Lt => Some(C::Bool(x < y)),
                BinOp::Le => Some(C::Bool(x <= y)),
                BinOp::Gt => Some(C::Bool(x > y)),
                BinOp::Ge => Some(C::Bool(x >= y)),
                _ => None,
            };
            match r {
                Some(v) => v,
                None => return Ok(None),
            }
        }
        (C::Bool(x), C::Bool(y)) => match op {
            BinOp::And | BinOp::LogicAnd => C::Bool(*x && *y),
            BinOp::Or | BinOp::LogicOr => C::Bool(*x || *y),
            BinOp::Xor | BinOp::Ne => C::Bool(x != y),
            BinOp::Eq => C::Bool(x == y),
            _ => return Ok(None),
        },
        (C::Enum(x), C::Enum(y)) => match op {
            BinOp::Eq => C::Bool(x == y),
            BinOp::Ne => C::Bool(x != y),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

/// The constant value of a checked expression that the checker did not fold: a helper call
/// inlined with constant arguments (`q_chunk_bytes::<FMT>() / 16`), whose body is `let`s of
/// constants, `if`s on constant conditions and arithmetic on them. `None` where any part
/// is left to run time or has an effect.
pub(super) fn const_value(e: &super::TExpr) -> Option<ConstVal> {
    const_in(e, &mut Vec::new())
}

/// Replaces `e` by its constant where [`const_value`] finds one (constants stay as they are).
pub(super) fn fold_helper_call(e: &mut super::TExpr) {
    if !matches!(e.kind, super::TKind::Const(_)) {
        if let Some(v) = const_value(e) {
            e.kind = super::TKind::Const(v);
        }
    }
}

fn const_in(e: &super::TExpr, env: &mut Vec<(super::VarId, ConstVal)>) -> Option<ConstVal> {
    use super::TKind;
    match &e.kind {
        TKind::Const(v) => Some(v.clone()),
        TKind::Var(id) => env
            .iter()
            .rev()
            .find(|(v, _)| v == id)
            .map(|(_, c)| c.clone()),
        TKind::Binary(op, a, b) => {
            let (a, b) = (const_in(a, env)?, const_in(b, env)?);
            fold_binary(*op, &e.ty, &a, &b).ok().flatten()
        }
        TKind::If { cond, then, els } => match const_in(cond, env)? {
            ConstVal::Bool(true) => const_block(then, env),
            ConstVal::Bool(false) => const_in(els.as_ref()?, env),
            _ => None,
        },
        TKind::Block(b) => const_block(b, env),
        TKind::Inline { binds, body } => {
            let depth = env.len();
            for (id, init) in binds {
                let v = const_in(init, env)?;
                env.push((*id, v));
            }
            let v = const_block(body, env);
            env.truncate(depth);
            v
        }
        _ => None,
    }
}

fn const_block(b: &super::TBlock, env: &mut Vec<(super::VarId, ConstVal)>) -> Option<ConstVal> {
    let depth = env.len();
    let mut ok = true;
    for st in &b.stmts {
        match st {
            super::TStmt::Let {
                var,
                init: Some(init),
            } => match const_in(init, env) {
                Some(v) => env.push((*var, v)),
                None => {
                    ok = false;
                    break;
                }
            },
            _ => {
                ok = false;
                break;
            }
        }
    }
    let v = if ok {
        b.tail.as_ref().and_then(|t| const_in(t, env))
    } else {
        None
    };
    env.truncate(depth);
    v
}

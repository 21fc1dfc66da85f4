//! Clean-ups of the lowered IR, before emission:
//!
//! - **wide index products**: `cvt.u64.u32 a, r; mul.lo.u64 d, a, 4` becomes
//!   `mul.wide.u32 d, r, 4` (and `.s32` for a sign-extended `i32`), which is exact: the product
//!   of a 32-bit value and a small constant fits in 64 bits. Only when `a` has a single
//!   definition and `r` is not written between the extension and the product.
//!
//! `asm!` instructions carry their operands (which of them are written), so they take part in
//! the analysis like any other instruction.

use crate::ptx::{BinKind, Item, Op, Operand, Reg};
use crate::types::Scalar;
use std::collections::HashMap;

/// Runs the clean-ups on a function body.
pub fn optimize(body: &mut [Item]) {
    widen_index_products(body);
}

/// Whether the operation writes the register(s) of its first operand.
fn has_dest(op: &Op) -> bool {
    !matches!(
        op,
        Op::St { .. }
            | Op::BarSync
            | Op::Bra
            | Op::Ret
            | Op::CpAsync { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait
            | Op::Asm { .. }
    )
}

fn regs_of(o: &Operand, out: &mut Vec<Reg>) {
    match o {
        Operand::Reg(r) => out.push(*r),
        Operand::Addr(b, _) => regs_of(b, out),
        Operand::Vec(items) => items.iter().for_each(|x| regs_of(x, out)),
        _ => {}
    }
}

/// (registers written, registers read) of an item. A predicated write also reads its
/// destination (the old value survives when the predicate is false).
fn defs_uses(item: &Item) -> (Vec<Reg>, Vec<Reg>) {
    let (mut defs, mut uses) = (Vec::new(), Vec::new());
    if let Item::Inst { pred, op, args } = item {
        if let Some((p, _)) = pred {
            uses.push(*p);
        }
        for (i, a) in args.iter().enumerate() {
            let written = match op {
                Op::Asm { outs, .. } => outs.get(i).copied().unwrap_or(false),
                _ => i == 0 && has_dest(op),
            };
            if written {
                regs_of(a, &mut defs);
            } else {
                regs_of(a, &mut uses);
            }
        }
        if pred.is_some() {
            uses.extend(defs.iter().copied());
        }
    }
    (defs, uses)
}

fn def_counts(body: &[Item]) -> HashMap<Reg, u32> {
    let mut counts = HashMap::new();
    for item in body {
        for r in defs_uses(item).0 {
            *counts.entry(r).or_insert(0) += 1;
        }
    }
    counts
}

/// `cvt.u64.u32 a, r; mul.lo.u64 d, a, C` -> `mul.wide.u32 d, r, C`, and
/// `cvt.u32.u64 x, a` -> `mov.u32 x, r` (see the module comment).
pub(super) fn widen_index_products(body: &mut [Item]) {
    let counts = def_counts(body);
    let single = |r: &Reg| counts.get(r).copied() == Some(1);
    // a -> (r, signed, local): `a` holds the extension of `r`. With `r` written more than once
    // the fact is local: it holds until `r` is written again or control flow joins or leaves.
    let mut widened: HashMap<Reg, (Reg, bool, bool)> = HashMap::new();
    for item in body.iter_mut() {
        let Item::Inst { op, args, .. } = item else {
            widened.retain(|_, e| !e.2);
            continue;
        };
        let src = |o: &Operand| match o {
            Operand::Reg(a) => widened.get(a).copied(),
            _ => None,
        };
        match (&*op, args.as_slice()) {
            (Op::Bin(BinKind::Mul, Scalar::U64 | Scalar::I64), [_, x, y]) => {
                let found = match (x, y) {
                    (_, Operand::Int(c)) => src(x).map(|e| (e, *c)),
                    (Operand::Int(c), _) => src(y).map(|e| (e, *c)),
                    _ => None,
                };
                // The immediate of `mul.wide.{u32,s32}` is a 32-bit operand of the same
                // signedness.
                if let Some(((r, signed, _), c)) =
                    found.filter(|(_, c)| (0..=i32::MAX as i128).contains(c))
                {
                    *op = Op::MulWide { signed };
                    args.truncate(1);
                    args.push(Operand::Reg(r));
                    args.push(Operand::Int(c));
                }
            }
            (
                Op::Cvt {
                    to: to @ (Scalar::U32 | Scalar::I32),
                    from: Scalar::U64 | Scalar::I64,
                },
                [_, a],
            ) => {
                if let Some((r, _, _)) = src(a) {
                    *op = Op::Mov(*to);
                    args[1] = Operand::Reg(r);
                }
            }
            _ => {}
        }
        if matches!(op, Op::Bra | Op::Ret) {
            widened.retain(|_, e| !e.2);
        }
        let (defs, _) = defs_uses(item);
        for d in &defs {
            widened.remove(d);
            widened.retain(|_, e| e.0 != *d);
        }
        let Item::Inst { op, args, pred } = item else {
            continue;
        };
        if let (
            None,
            Op::Cvt {
                to: Scalar::U64 | Scalar::I64,
                from: from @ (Scalar::U32 | Scalar::I32),
            },
            [Operand::Reg(a), Operand::Reg(r)],
        ) = (&*pred, &*op, args.as_slice())
        {
            if single(a) {
                widened.insert(*a, (*r, *from == Scalar::I32, !single(r)));
            }
        }
    }
}

#[cfg(test)]
#[path = "opt_tests.rs"]
mod tests;

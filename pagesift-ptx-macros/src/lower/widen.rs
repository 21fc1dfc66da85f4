//! Widening peepholes of the lowered IR (run first by [`super::opt::optimize`]):
//!
//! - **wide index products**: `cvt.u64.u32 a, r; mul.lo.u64 d, a, 4` becomes
//!   `mul.wide.u32 d, r, 4` (and `.s32` for a sign-extended `i32`), which is exact: the product
//!   of a 32-bit value and a small constant fits in 64 bits. Only when `a` has a single
//!   definition and `r` is not written between the extension and the product.
//! - **bf16 halves**: a bf16 is the top half of an f32, so the halves of a 32-bit word `w`
//!   unpacked by `mov.b32 {lo, hi}, w` widen straight from the word: `lo` to `w << 16`, `hi` to
//!   `w & 0xffff0000`, one instruction each instead of an extraction and a shift.

use super::opt::{def_counts, defs_uses, successors};
use crate::ptx::{BinKind, Item, Op, Operand, Reg};
use crate::types::Scalar;
use std::collections::HashMap;

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

/// What a register is known to hold: the low or high half of a 32-bit word (`Half`), or that
/// half zero-extended to 32 bits (`Extended`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fact {
    word: Reg,
    high: bool,
    extended: bool,
}

type Facts = HashMap<Reg, Fact>;

/// The facts after `item`, given those before it: a write kills every fact about the
/// register written or about its word; `mov.b32 {lo, hi}, w` and `cvt.u32.u16 t, half` make
/// new ones.
fn transfer(item: &Item, facts: &mut Facts) {
    let (defs, _) = defs_uses(item);
    for d in &defs {
        facts.remove(d);
        facts.retain(|_, f| f.word != *d);
    }
    let Item::Inst {
        pred: None,
        op,
        args,
    } = item
    else {
        return;
    };
    match (op, args.as_slice()) {
        (Op::MovBits(32), [Operand::Vec(parts), Operand::Reg(w)]) => {
            if let [Operand::Reg(lo), Operand::Reg(hi)] = parts.as_slice() {
                if lo != hi && lo != w && hi != w {
                    for (r, high) in [(*lo, false), (*hi, true)] {
                        let fact = Fact {
                            word: *w,
                            high,
                            extended: false,
                        };
                        facts.insert(r, fact);
                    }
                }
            }
        }
        (
            Op::Cvt {
                to: Scalar::U32,
                from: Scalar::U16,
            },
            [Operand::Reg(t), Operand::Reg(h)],
        ) => {
            if let Some(f) = facts.get(h).copied().filter(|f| !f.extended) {
                if f.word != *t {
                    facts.insert(
                        *t,
                        Fact {
                            extended: true,
                            ..f
                        },
                    );
                }
            }
        }
        _ => {}
    }
}

/// The bf16 widening of the module comment, run after move coalescing: `shl.b32 u, t, 16` of
/// a `t` known to be a zero-extended half of `w` on every path (a forward must-analysis over
/// the control flow, facts meeting by intersection) takes `shl.b32 u, w, 16` for the low
/// half and `and.b32 u, w, 0xffff0000` for the high one. The extraction left unread goes with
/// the dead definitions.
pub(super) fn widen_bf16_halves(body: &mut [Item]) {
    let succ = successors(body);
    let n = body.len();
    // The facts on entry to each item; `None`: not reached yet.
    let mut entry: Vec<Option<Facts>> = vec![None; n];
    if n == 0 {
        return;
    }
    entry[0] = Some(Facts::new());
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..n {
            let Some(mut facts) = entry[i].clone() else {
                continue;
            };
            transfer(&body[i], &mut facts);
            for &j in &succ[i] {
                let merged = match &entry[j] {
                    None => facts.clone(),
                    Some(old) => old
                        .iter()
                        .filter(|(r, f)| facts.get(r) == Some(f))
                        .map(|(r, f)| (*r, *f))
                        .collect(),
                };
                if entry[j].as_ref() != Some(&merged) {
                    entry[j] = Some(merged);
                    changed = true;
                }
            }
        }
    }
    for (item, facts) in body.iter_mut().zip(entry) {
        let (Some(facts), Item::Inst { pred, op, args }) = (facts, item) else {
            continue;
        };
        if let (None, Op::Bin(BinKind::Shl, Scalar::U32), [d, Operand::Reg(t), Operand::Int(16)]) =
            (&*pred, &*op, args.as_slice())
        {
            if let Some(f) = facts.get(t).filter(|f| f.extended) {
                (*op, *args) = widened(d.clone(), f.word, f.high);
            }
        }
    }
}

/// `shl.b32 d, w, 16` (the low half) or `and.b32 d, w, 0xffff0000` (the high half).
fn widened(d: Operand, w: Reg, high: bool) -> (Op, Vec<Operand>) {
    let w = Operand::Reg(w);
    if high {
        (
            Op::Bin(BinKind::And, Scalar::U32),
            vec![d, w, Operand::Int(0xffff_0000)],
        )
    } else {
        (
            Op::Bin(BinKind::Shl, Scalar::U32),
            vec![d, w, Operand::Int(16)],
        )
    }
}

//! Clean-ups of the lowered IR, before emission:
//!
//! - **widening** (`widen.rs`): 32-bit index products and bf16 halves widened in one step.
//! - **move coalescing**: `mov d, s` where `d` and `s` never hold different values while both
//!   are live (Chaitin's interference test on per-instruction liveness) renames `s` to `d`, so
//!   the values of an `if`'s arms, an inlined helper's result or an assignment land in their
//!   final registers.
//! - **dead definitions**: side-effect-free instructions whose results are never read (default
//!   values overwritten on every path, copies made dead by coalescing) go.
//!
//! `asm!` instructions carry their operands (which of them are written), so they take part in
//! the analysis like any other instruction; they are never deleted.

use crate::ptx::{BinKind, Item, Op, Operand, Reg, Space};
use crate::types::Scalar;
use std::collections::HashMap;

/// Runs the clean-ups on a function body.
pub fn optimize(body: &mut Vec<Item>) {
    super::widen::widen_index_products(body);
    // Dead copies first: a copy that is overwritten before use still keeps its source live.
    remove_dead_defs(body);
    coalesce_moves(body);
    super::widen::widen_bf16_halves(body);
    remove_dead_defs(body);
    remove_jumps_to_next(body);
}

/// The alignment test of a vector access (`bounds.rs`): `and t, reg, bytes - 1;
/// setp.ne p, t, want; @p bra fail`, `fail` its fault block's label. `reg` is the whole
/// address, or with a dominating `x.is_aligned(i, B)` the scaled element offset, `rel` then
/// the register of `i` and the element size (`None`: the base itself is aligned).
#[derive(Clone, Debug)]
pub struct AlignCheck {
    pub reg: Reg,
    pub bytes: u32,
    pub want: i128,
    pub fail: u32,
    pub rel: Option<(Reg, u32)>,
    /// The `and`'s destination (a proven test's `and` becomes `mov tmp, 0`, so that a
    /// predicate still read, an `ldmatrix` clamp's, is plainly false).
    pub tmp: Reg,
}

/// Deletes the alignment tests that [`congruences`] proves (the offset from the aligned
/// address a multiple of the access's bytes, with no constant offset to make up), and their
/// fault blocks; the `and` and `setp` left unread go with the dead definitions.
pub fn elide_align_checks(body: &mut Vec<Item>, checks: &[AlignCheck]) {
    if checks.is_empty() {
        return;
    }
    let cong = congruences(body);
    let get = |r: &Reg| cong.get(r).copied().unwrap_or(Cong::BOTTOM);
    let proven: std::collections::HashSet<u32> = checks
        .iter()
        .filter(|c| {
            let need = c.bytes.trailing_zeros();
            let off = get(&c.reg);
            // The tested offset less the aligned one: `es * rel`, or 0 for an aligned base.
            let diff = match c.rel {
                None => off,
                Some((rel, es)) => off.add(get(&rel).mul(Cong::BOTTOM, Some(es as i128)), -1),
            };
            c.want == 0 && off != Cong::Top && diff != Cong::Top && diff.zeros() >= need
        })
        .map(|c| c.fail)
        .collect();
    if proven.is_empty() {
        return;
    }
    let tmps: std::collections::HashSet<Reg> = checks
        .iter()
        .filter(|c| proven.contains(&c.fail))
        .map(|c| c.tmp)
        .collect();
    for item in body.iter_mut() {
        if let Item::Inst {
            op: op @ Op::Bin(BinKind::And, _),
            args,
            ..
        } = item
        {
            if matches!(args.first(), Some(Operand::Reg(t)) if tmps.contains(t)) {
                if let Op::Bin(_, ty) = *op {
                    *op = Op::Mov(ty);
                    args.truncate(1);
                    args.push(Operand::Int(0));
                }
            }
        }
    }
    let mut keep = vec![true; body.len()];
    let mut in_block = false;
    // The resume points the deleted fault blocks jumped to.
    let mut resumes = std::collections::HashSet::new();
    for (i, item) in body.iter().enumerate() {
        match item {
            Item::Label(l) if proven.contains(l) => {
                in_block = true;
                keep[i] = false;
            }
            Item::Inst {
                op: Op::Bra,
                args,
                pred,
            } => {
                if in_block {
                    keep[i] = false;
                    if let Some(Operand::Label(l)) = args.first() {
                        resumes.insert(*l);
                    }
                    // The fault block ends with its unconditional jump back.
                    in_block = pred.is_some();
                } else if let Some(Operand::Label(l)) = args.first() {
                    if proven.contains(l) {
                        keep[i] = false;
                    }
                }
            }
            _ => keep[i] = !in_block,
        }
    }
    let mut k = keep.into_iter();
    body.retain(|_| k.next().unwrap_or(true));
    // A resume point no branch targets any more is no join point: it goes, so that the
    // passes after this one see straight-line code there.
    let targets = super::branch_targets(body);
    body.retain(|i| !matches!(i, Item::Label(l) if resumes.contains(l) && !targets.contains(l)));
}

/// What is known about every value an integer register holds: `Top` (nothing computed yet),
/// or `r = c * root (mod 2^k)` where `root` is a register with one definition that the
/// analysis does not see through (a parameter, a load, a special register), `None` for 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cong {
    Top,
    V { c: i128, root: Option<Reg>, k: u32 },
}

impl Cong {
    const BOTTOM: Cong = Cong::V {
        c: 0,
        root: None,
        k: 0,
    };

    /// `c * root (mod 2^k)`, normalized: a root term that is 0 mod 2^k goes.
    fn v(c: i128, root: Option<Reg>, k: u32) -> Cong {
        let k = k.min(64);
        if c == 0 || root.is_none() || tz(c) >= k {
            Cong::V {
                c: 0,
                root: None,
                k,
            }
        } else if c.unsigned_abs() > 1 << 64 {
            Cong::v(0, None, k.min(tz(c)))
        } else {
            Cong::V { c, root, k }
        }
    }

    /// Known low zero bits of the value itself.
    fn zeros(self) -> u32 {
        match self {
            Cong::Top => 64,
            Cong::V { c, k, .. } => k.min(tz(c)),
        }
    }

    fn meet(self, o: Cong) -> Cong {
        match (self, o) {
            (Cong::Top, x) | (x, Cong::Top) => x,
            (
                Cong::V { c, root, k },
                Cong::V {
                    c: c2,
                    root: r2,
                    k: k2,
                },
            ) => {
                if root == r2 {
                    Cong::v(c, root, k.min(k2).min(tz(c - c2)))
                } else {
                    Cong::v(0, None, self.zeros().min(o.zeros()))
                }
            }
        }
    }

    /// `self + sign * o`; of two different roots the one with the lower set bit of its
    /// coefficient stays, the other term counts by its zeros.
    fn add(self, o: Cong, sign: i128) -> Cong {
        match (self, o) {
            (Cong::Top, _) | (_, Cong::Top) => Cong::Top,
            (
                Cong::V { c, root, k },
                Cong::V {
                    c: c2,
                    root: r2,
                    k: k2,
                },
            ) => {
                if root.is_none() || r2.is_none() || root == r2 {
                    Cong::v(c + sign * c2, root.or(r2), k.min(k2))
                } else if tz(c) <= tz(c2) {
                    Cong::v(c, root, k.min(o.zeros()))
                } else {
                    Cong::v(sign * c2, r2, k2.min(self.zeros()))
                }
            }
        }
    }

    fn mul(self, o: Cong, imm: Option<i128>) -> Cong {
        match (self, o, imm) {
            (Cong::Top, _, _) | (_, Cong::Top, _) => Cong::Top,
            (Cong::V { c, root, k }, _, Some(m)) => {
                Cong::v(c.saturating_mul(m), root, k.saturating_add(tz(m)))
            }
            (a, b, None) => Cong::v(0, None, a.zeros().saturating_add(b.zeros())),
        }
    }
}

/// Trailing zeros of a coefficient (64 for 0).
fn tz(c: i128) -> u32 {
    if c == 0 {
        64
    } else {
        c.trailing_zeros().min(64)
    }
}

/// The congruences of every register ([`Cong`]): a flow-insensitive greatest fixpoint over
/// all definitions (a loop counter `e = h + 4 * t; e += 4 * s` stays `h (mod 4)`). Sums,
/// differences and products by constants (also `mul.wide`, `mad`, shifts) carry them, integer
/// conversions and moves keep them (a congruence mod 2^k survives wrapping and extension),
/// `and` with a constant gives its zeros, selects and `min`/`max` meet their operands, a
/// shared array's symbol is 16-byte aligned.
pub fn congruences(body: &[Item]) -> HashMap<Reg, Cong> {
    let counts = def_counts(body);
    let mut cong: HashMap<Reg, Cong> = counts.keys().map(|r| (*r, Cong::Top)).collect();
    loop {
        let mut changed = false;
        for item in body {
            let Item::Inst { op, args, .. } = item else {
                continue;
            };
            let (defs, _) = defs_uses(item);
            let v = match (defs.as_slice(), args.first()) {
                ([d], Some(Operand::Reg(r))) if r == d && has_dest(op) => cong_of(op, args, &cong)
                    .unwrap_or_else(|| {
                        if counts.get(d) == Some(&1) {
                            Cong::v(1, Some(*d), 64)
                        } else {
                            Cong::BOTTOM
                        }
                    }),
                _ => Cong::BOTTOM,
            };
            for d in defs {
                let e = cong.entry(d).or_insert(Cong::Top);
                let m = e.meet(v);
                if m != *e {
                    *e = m;
                    changed = true;
                }
            }
        }
        if !changed {
            return cong;
        }
    }
}

/// The congruence of an instruction's result (`None`: opaque, see [`congruences`]).
fn cong_of(op: &Op, args: &[Operand], cong: &HashMap<Reg, Cong>) -> Option<Cong> {
    let get = |i: usize| -> Option<Cong> {
        match args.get(i) {
            Some(Operand::Reg(r)) => Some(cong.get(r).copied().unwrap_or(Cong::BOTTOM)),
            Some(Operand::Int(0)) => Some(Cong::v(0, None, 64)),
            Some(Operand::Int(c)) => Some(Cong::v(0, None, c.trailing_zeros())),
            Some(Operand::Name(n)) if n.starts_with("smem_") || n == "dyn_smem" => {
                Some(Cong::v(0, None, 4))
            }
            _ => None,
        }
    };
    let imm = |i: usize| match args.get(i) {
        Some(Operand::Int(c)) => Some(*c),
        _ => None,
    };
    let int = |s: &Scalar| s.is_int();
    Some(match op {
        Op::Mov(s) if int(s) => get(1)?,
        Op::Cvt { to, from } if int(to) && int(from) => get(1)?,
        Op::Bin(kind, s) if int(s) => {
            let (a, b) = (get(1)?, get(2)?);
            match kind {
                BinKind::Add => a.add(b, 1),
                BinKind::Sub => a.add(b, -1),
                BinKind::Mul => match (imm(1), imm(2)) {
                    (_, Some(m)) => a.mul(b, Some(m)),
                    (Some(m), _) => b.mul(a, Some(m)),
                    _ => a.mul(b, None),
                },
                BinKind::Shl => match imm(2) {
                    Some(s) if (0..64).contains(&s) => a.mul(b, Some(1i128 << s)),
                    _ => Cong::BOTTOM,
                },
                BinKind::Shr => match (a, imm(2)) {
                    (Cong::Top, _) => Cong::Top,
                    (_, Some(s)) if (0..64).contains(&s) => {
                        Cong::v(0, None, a.zeros().saturating_sub(s as u32))
                    }
                    _ => Cong::BOTTOM,
                },
                BinKind::And => match (a, b) {
                    (Cong::Top, _) | (_, Cong::Top) => Cong::Top,
                    _ => Cong::v(0, None, a.zeros().max(b.zeros())),
                },
                BinKind::Or | BinKind::Xor => match (a, b) {
                    (Cong::Top, _) | (_, Cong::Top) => Cong::Top,
                    _ => Cong::v(0, None, a.zeros().min(b.zeros())),
                },
                BinKind::Min | BinKind::Max => a.meet(b),
                _ => return None,
            }
        }
        Op::MulWide { .. } => {
            let (a, b) = (get(1)?, get(2)?);
            match (imm(1), imm(2)) {
                (_, Some(m)) => a.mul(b, Some(m)),
                (Some(m), _) => b.mul(a, Some(m)),
                _ => a.mul(b, None),
            }
        }
        Op::Fma(s) if int(s) => {
            let (a, b, c) = (get(1)?, get(2)?, get(3)?);
            let p = match (imm(1), imm(2)) {
                (_, Some(m)) => a.mul(b, Some(m)),
                (Some(m), _) => b.mul(a, Some(m)),
                _ => a.mul(b, None),
            };
            p.add(c, 1)
        }
        Op::Selp(s) if int(s) => get(1)?.meet(get(2)?),
        _ => return None,
    })
}

/// Whether the operation writes the register(s) of its first operand.
fn has_dest(op: &Op) -> bool {
    !matches!(
        op,
        Op::St { .. }
            | Op::StRelease(_)
            | Op::BarSync
            | Op::BarWarpSync
            | Op::Fence { .. }
            | Op::Bra
            | Op::Ret
            | Op::CpAsync { .. }
            | Op::Stmatrix { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait
            | Op::FenceProxyAsync
            | Op::SetMaxNReg { .. }
            | Op::PrefetchL2
            | Op::MbarInit
            | Op::MbarArriveCpAsync
            | Op::TmaLoad
            | Op::TmaStore
            | Op::BulkCommit
            | Op::BulkWait { .. }
            | Op::PrefetchTensormap
            | Op::Asm { .. }
    )
}

/// Whether the instruction may be deleted when its results are never read.
fn is_pure(op: &Op) -> bool {
    matches!(
        op,
        Op::Mov(_)
            | Op::MovBits(_)
            | Op::Bin(..)
            | Op::Un(..)
            | Op::Fma(_)
            | Op::Setp(..)
            | Op::IsNan(_)
            | Op::Selp(_)
            | Op::Cvt { .. }
            | Op::CvtaGlobal
            | Op::CvtaParam
            | Op::MulWide { .. }
            | Op::Bfe { .. }
            | Op::Bfi
            | Op::CvtTf32
            | Op::CvtPack(_)
            | Op::Dp4a { .. }
            | Op::Prmt
            | Op::Lop3
            | Op::Ld {
                space: Space::Param,
                ..
            }
    )
}

fn regs_of(o: &Operand, out: &mut Vec<Reg>) {
    match o {
        Operand::Reg(r) => out.push(*r),
        Operand::Addr(b, _) => regs_of(b, out),
        Operand::Vec(items) => items.iter().for_each(|x| regs_of(x, out)),
        Operand::Tensor(map, coords) => {
            regs_of(map, out);
            coords.iter().for_each(|x| regs_of(x, out));
        }
        Operand::Pair(d, p) => {
            regs_of(d, out);
            regs_of(p, out);
        }
        _ => {}
    }
}

/// (registers written, registers read) of an item. A predicated write also reads its
/// destination (the old value survives when the predicate is false).
pub(super) fn defs_uses(item: &Item) -> (Vec<Reg>, Vec<Reg>) {
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
                // `wgmma`'s accumulators are read as well (`scale-d`).
                if matches!(op, Op::Wgmma { .. }) {
                    regs_of(a, &mut uses);
                }
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

pub(super) fn def_counts(body: &[Item]) -> HashMap<Reg, u32> {
    let mut counts = HashMap::new();
    for item in body {
        for r in defs_uses(item).0 {
            *counts.entry(r).or_insert(0) += 1;
        }
    }
    counts
}

/// The control-flow successors of each item (by index).
pub(super) fn successors(body: &[Item]) -> Vec<Vec<usize>> {
    let labels: HashMap<u32, usize> = body
        .iter()
        .enumerate()
        .filter_map(|(i, it)| match it {
            Item::Label(l) => Some((*l, i)),
            _ => None,
        })
        .collect();
    let n = body.len();
    body.iter()
        .enumerate()
        .map(|(i, it)| {
            let next = (i + 1 < n).then_some(i + 1);
            match it {
                Item::Inst {
                    op: Op::Bra,
                    pred,
                    args,
                } => {
                    let target = match args.first() {
                        Some(Operand::Label(l)) => labels.get(l).copied(),
                        _ => None,
                    };
                    let mut s: Vec<usize> = target.into_iter().collect();
                    if pred.is_some() {
                        s.extend(next);
                    }
                    s
                }
                Item::Inst { op: Op::Ret, .. } => Vec::new(),
                _ => next.into_iter().collect(),
            }
        })
        .collect()
}

/// Per-instruction liveness over dense register indices.
struct Liveness {
    words: usize,
    /// Live-in bit sets, `words` per item.
    live_in: Vec<u64>,
    succ: Vec<Vec<usize>>,
}

impl Liveness {
    fn compute(
        body: &[Item],
        index: &HashMap<Reg, usize>,
        du: &[(Vec<usize>, Vec<usize>)],
    ) -> Self {
        let n = body.len();
        let words = index.len().div_ceil(64).max(1);
        let succ = successors(body);
        let mut live_in = vec![0u64; n * words];
        let mut out = vec![0u64; words];
        loop {
            let mut changed = false;
            for i in (0..n).rev() {
                out.iter_mut().for_each(|w| *w = 0);
                for &s in &succ[i] {
                    for (w, x) in out.iter_mut().zip(&live_in[s * words..(s + 1) * words]) {
                        *w |= x;
                    }
                }
                let (defs, uses) = &du[i];
                for &d in defs {
                    out[d / 64] &= !(1 << (d % 64));
                }
                for &u in uses {
                    out[u / 64] |= 1 << (u % 64);
                }
                let cur = &mut live_in[i * words..(i + 1) * words];
                if cur != out.as_slice() {
                    cur.copy_from_slice(&out);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Liveness {
            words,
            live_in,
            succ,
        }
    }

    /// Whether register `r` is live right after item `i`.
    fn live_out(&self, i: usize, r: usize) -> bool {
        self.succ[i]
            .iter()
            .any(|&s| self.live_in[s * self.words + r / 64] & (1 << (r % 64)) != 0)
    }
}

/// Dense register indices and each item's (defs, uses) in them.
#[allow(clippy::type_complexity)]
fn index_regs(body: &[Item]) -> (HashMap<Reg, usize>, Vec<Reg>, Vec<(Vec<usize>, Vec<usize>)>) {
    let mut index = HashMap::new();
    let mut regs = Vec::new();
    let mut id = |r: Reg| {
        *index.entry(r).or_insert_with(|| {
            regs.push(r);
            regs.len() - 1
        })
    };
    let du = body
        .iter()
        .map(|it| {
            let (d, u) = defs_uses(it);
            (
                d.into_iter().map(&mut id).collect(),
                u.into_iter().map(&mut id).collect(),
            )
        })
        .collect();
    (index, regs, du)
}

/// An unpredicated `mov` between two registers of one class: (destination, source).
fn plain_move(item: &Item) -> Option<(Reg, Reg)> {
    match item {
        Item::Inst {
            pred: None,
            op: Op::Mov(_),
            args,
        } => match args.as_slice() {
            [Operand::Reg(d), Operand::Reg(s)] if d.class == s.class => Some((*d, *s)),
            _ => None,
        },
        _ => None,
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Renames the source of a move to its destination where the two never interfere.
pub(super) fn coalesce_moves(body: &mut Vec<Item>) {
    let (index, regs, du) = index_regs(body);
    if regs.is_empty() {
        return;
    }
    let live = Liveness::compute(body, &index, &du);
    let n = regs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    let mut members: Vec<Vec<usize>> = (0..n).map(|r| vec![r]).collect();
    let mut def_sites: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (defs, _)) in du.iter().enumerate() {
        for &d in defs {
            def_sites[d].push(i);
        }
    }
    let moves: Vec<Option<(usize, usize)>> = body
        .iter()
        .map(|it| plain_move(it).map(|(d, s)| (index[&d], index[&s])))
        .collect();
    for m in 0..body.len() {
        let Some((d, s)) = moves[m] else { continue };
        let (gd, gs) = (find(&mut parent, d), find(&mut parent, s));
        if gd == gs {
            continue;
        }
        // Group `a` is written at a definition site while a member of group `b` is live after
        // it, unless the site copies a member of `b` (then both hold the same value).
        let clash = |parent: &mut [usize], a: usize, b: usize| {
            def_sites[a].iter().any(|&i| {
                if let Some((_, src)) = moves[i] {
                    if find(parent, src) == b {
                        return false;
                    }
                }
                members[b].iter().any(|&r| live.live_out(i, r))
            })
        };
        if clash(&mut parent, gs, gd) || clash(&mut parent, gd, gs) {
            continue;
        }
        parent[gs] = gd;
        let moved = std::mem::take(&mut members[gs]);
        members[gd].extend(moved);
        let sites = std::mem::take(&mut def_sites[gs]);
        def_sites[gd].extend(sites);
    }
    let rename: HashMap<Reg, Reg> = (0..n)
        .filter_map(|r| {
            let g = find(&mut parent, r);
            (g != r).then(|| (regs[r], regs[g]))
        })
        .collect();
    if rename.is_empty() {
        return;
    }
    for item in body.iter_mut() {
        if let Item::Inst { pred, args, .. } = item {
            if let Some((p, _)) = pred {
                if let Some(q) = rename.get(p) {
                    *p = *q;
                }
            }
            args.iter_mut().for_each(|a| rename_operand(a, &rename));
        }
    }
    body.retain(|it| !matches!(plain_move(it), Some((d, s)) if d == s));
}

fn rename_operand(o: &mut Operand, rename: &HashMap<Reg, Reg>) {
    match o {
        Operand::Reg(r) => {
            if let Some(q) = rename.get(r) {
                *r = *q;
            }
        }
        Operand::Addr(b, _) => rename_operand(b, rename),
        Operand::Vec(items) => items.iter_mut().for_each(|x| rename_operand(x, rename)),
        Operand::Pair(d, p) => {
            rename_operand(d, rename);
            rename_operand(p, rename);
        }
        _ => {}
    }
}

/// Deletes side-effect-free instructions none of whose results is read afterwards.
pub(super) fn remove_dead_defs(body: &mut Vec<Item>) {
    // Each round may make the operands of deleted instructions dead in turn.
    for _ in 0..8 {
        let (index, _, du) = index_regs(body);
        let live = Liveness::compute(body, &index, &du);
        let mut keep = Vec::with_capacity(body.len());
        let mut removed = false;
        for (i, item) in body.iter().enumerate() {
            let dead = match item {
                Item::Inst { op, .. } if is_pure(op) => {
                    let defs = &du[i].0;
                    !defs.is_empty() && defs.iter().all(|&d| !live.live_out(i, d))
                }
                _ => false,
            };
            removed |= dead;
            keep.push(!dead);
        }
        if !removed {
            return;
        }
        let mut k = keep.into_iter();
        body.retain(|_| k.next().unwrap_or(true));
    }
}

/// Deletes branches to a label that follows with only labels in between.
pub(super) fn remove_jumps_to_next(body: &mut Vec<Item>) {
    let mut keep = vec![true; body.len()];
    for (i, item) in body.iter().enumerate() {
        let Item::Inst {
            op: Op::Bra, args, ..
        } = item
        else {
            continue;
        };
        let Some(Operand::Label(l)) = args.first() else {
            continue;
        };
        let mut j = i + 1;
        while let Some(Item::Label(m)) = body.get(j) {
            if m == l {
                keep[i] = false;
                break;
            }
            j += 1;
        }
    }
    let mut k = keep.into_iter();
    body.retain(|_| k.next().unwrap_or(true));
}

#[cfg(test)]
#[path = "opt_tests.rs"]
mod tests;

//! Checked variant -> PTX IR: virtual registers, labels, branches. Loops marked `#[unroll]` are
//! unrolled here with their counter as a constant, constants propagate through arithmetic, and a
//! register array indexed by anything that is not a constant by then is a compile error.

mod bounds;
mod call;
mod control;
mod facts;
mod intrinsics;
mod mem;
mod ops;
mod opt;
mod widen;

use crate::check::{TBlock, TExpr, TKind, TStmt, VarId, Variant};
use crate::ctxt::Ctxt;
use crate::ctxt::Sp as Span;
use crate::ptx::{self, Function, Item, Op, Operand, ParamDecl, Reg, SharedArray, Space};
use crate::types::{ConstVal, RegClass, Scalar, Ty};
use std::collections::HashMap;

/// A lowered value.
#[derive(Clone, Debug)]
pub enum Val {
    /// Nothing (statements, unit helpers), or the value of diverging code.
    Unit,
    Reg(Reg, Scalar),
    Imm(ConstVal, Scalar),
    /// A register array.
    Arr(Vec<Val>),
}

#[derive(Clone, Debug)]
enum Store {
    /// A scalar or array value (registers or constants).
    Value(Val),
    /// A global slice: its generic-to-global converted base address, its length (`u64`
    /// elements) and its index among the kernel's parameters (for the fault record).
    Global {
        base: Reg,
        len: Reg,
        /// The length's parameter: checks load it where they need it (ptxas reads it from the
        /// constant bank, so no register holds it across the kernel).
        len_param: String,
        elem: Scalar,
        param: u32,
    },
    /// A shared array: its symbol, its length (`None`: the dynamic array), fault code and
    /// byte offset from the symbol (of a view of the dynamic shared memory).
    Shared {
        sym: String,
        elem: Scalar,
        len: Option<u32>,
        code: u32,
        off: u32,
    },
}

struct InlineCx {
    end: u32,
    result: Option<Val>,
}

pub(crate) struct Lower<'a> {
    cx: &'a Ctxt,
    v: &'a Variant,
    body: Vec<Item>,
    regs: HashMap<RegClass, u32>,
    labels: u32,
    vars: HashMap<VarId, Store>,
    loops: Vec<(u32, u32)>,
    inlines: Vec<InlineCx>,
    exit: u32,
    version: (u32, u32),
    failed: bool,
    /// Registers of mutable variables and loop counters (they change after being read).
    mutable_regs: std::collections::HashSet<Reg>,
    /// Facts proven about indices (bounds-check elision, `bounds.rs`).
    facts: Vec<facts::Fact>,
    /// How often each register was written (a fact holds while its count is unchanged).
    writes: HashMap<Reg, u32>,
    /// Registers holding a zero-extended value of at most 32 bits (until written again).
    narrow: std::collections::HashSet<Reg>,
    /// Zero-extended copies: (wide register) -> (source, its write count then).
    aliases: HashMap<Reg, (Reg, u32)>,
    /// Sums of a register and a constant: (sum register) -> (source, the constant, the
    /// source's write count then).
    offsets: HashMap<Reg, (Reg, i128, u32)>,
    /// The slices' length registers.
    len_regs: std::collections::HashSet<Reg>,
    /// Upper bounds of immutable unsigned variables (`mem.rs`, `upper`).
    uppers: HashMap<VarId, u128>,
    /// The out-of-line fault blocks, after the final `ret`.
    faults: Vec<Item>,
    /// The hidden fault-record parameter's name.
    fault_param: String,
    /// The alignment tests of vector accesses, for `opt::elide_align_checks`.
    align_checks: Vec<opt::AlignCheck>,
    /// The scaled element offset of the last global address made (an alignment test of an
    /// access whose base is proven aligned tests it instead of the whole address).
    last_scaled: Option<Reg>,
    /// The highest compute capability an emitted instruction needs (a variant without
    /// `#[target]` is raised to it, `settle_target`).
    needed_sm: u32,
    /// Bounds checks emitted and left out (for the tests).
    pub(crate) checks: u32,
    pub(crate) elided: u32,
    /// The `.func`s of `#[noinline]` helpers lowered so far, and where each of the variant's
    /// stands.
    funcs_out: Vec<ptx::DevFunc>,
    func_state: Vec<call::FuncState>,
}

/// Raises the target of a variant without `#[target]` to the lowest one its instructions
/// need (lowering it quietly until no instruction asks for more).
pub fn settle_target(v: &mut Variant) {
    if !v.target_auto {
        return;
    }
    for _ in 0..4 {
        let quiet = Ctxt::new();
        let needed = lower_needs(&quiet, v);
        let _ = quiet.finish();
        if needed <= v.target.sm {
            break;
        }
        let next = crate::check::Target::KNOWN
            .iter()
            .filter_map(|(n, _)| crate::check::Target::parse(n))
            .filter(|t| !t.name.ends_with('a'))
            .find(|t| t.sm >= needed);
        match next {
            Some(t) => v.target = t,
            None => break,
        }
    }
    // Settled: an instruction the target still lacks is now an error.
    v.target_auto = false;
}

/// The highest compute capability an instruction of `v` asked for while lowering.
fn lower_needs(cx: &Ctxt, v: &Variant) -> u32 {
    let mut needed = 0;
    let _ = lower_inner(cx, v, &mut needed);
    needed
}

/// Lowers one checked variant to a PTX function; `None` after reporting errors.
pub fn lower_variant(cx: &Ctxt, v: &Variant) -> Option<Function> {
    let mut needed = 0;
    lower_inner(cx, v, &mut needed)
}

/// Lowers `v`; `needed` becomes the highest compute capability an instruction asked for.
fn lower_inner(cx: &Ctxt, v: &Variant, needed: &mut u32) -> Option<Function> {
    let mut lw = Lower {
        needed_sm: 0,
        cx,
        v,
        body: Vec::new(),
        regs: HashMap::new(),
        labels: 0,
        vars: HashMap::new(),
        loops: Vec::new(),
        inlines: Vec::new(),
        exit: 0,
        version: v.target.min_ptx(),
        failed: false,
        mutable_regs: Default::default(),
        facts: Vec::new(),
        writes: HashMap::new(),
        narrow: Default::default(),
        aliases: HashMap::new(),
        offsets: HashMap::new(),
        len_regs: Default::default(),
        uppers: HashMap::new(),
        faults: Vec::new(),
        fault_param: format!("{}_fault", v.entry),
        align_checks: Vec::new(),
        last_scaled: None,
        checks: 0,
        elided: 0,
        funcs_out: Vec::new(),
        func_state: vec![call::FuncState::NotYet; v.funcs.len()],
    };
    lw.exit = lw.label();
    // The hidden first parameter: the device address of the fault record (`bounds.rs`).
    let mut params = vec![ParamDecl {
        name: lw.fault_param.clone(),
        ty: Scalar::U64.ptx(),
        blob: None,
    }];
    for (i, id) in v.params.iter().enumerate() {
        let name = format!("{}_param_{i}", v.entry);
        let span = Span::call_site();
        match &v.vars[*id].ty {
            Ty::Slice { elem, .. } => {
                let raw = lw.load_param(&mut params, name.clone(), Scalar::U64, RegClass::B64);
                let len = lw.load_param(
                    &mut params,
                    format!("{name}_len"),
                    Scalar::U64,
                    RegClass::B64,
                );
                lw.len_regs.insert(len);
                let g = lw.reg(RegClass::B64);
                lw.emit(Op::CvtaGlobal, vec![g.into(), raw.into()], span);
                lw.vars.insert(
                    *id,
                    Store::Global {
                        base: g,
                        len,
                        len_param: format!("{name}_len"),
                        elem: *elem,
                        param: i as u32,
                    },
                );
            }
            Ty::Scalar(Scalar::Bool) => {
                let raw = lw.load_param(&mut params, name, Scalar::U8, RegClass::B16);
                let p = lw.reg(RegClass::Pred);
                lw.emit(
                    Op::Setp(ptx::CmpKind::Ne, Scalar::U16),
                    vec![p.into(), raw.into(), Operand::Int(0)],
                    span,
                );
                lw.vars.insert(*id, Store::Value(Val::Reg(p, Scalar::Bool)));
            }
            Ty::Scalar(s) => {
                let r = lw.load_param(&mut params, name, mem_scalar(*s), s.reg_class());
                lw.vars.insert(*id, Store::Value(Val::Reg(r, *s)));
            }
            Ty::TensorMap { .. } => {
                // 128 opaque bytes; the copies take its generic address.
                params.push(ParamDecl {
                    name: name.clone(),
                    ty: "b8",
                    blob: Some((64, 128)),
                });
                let at = lw.op_to(
                    Op::Mov(Scalar::U64),
                    Scalar::U64,
                    vec![Operand::Name(name.clone())],
                    span,
                );
                let at = lw.operand_reg(&at, span);
                let g = lw.op_to(Op::CvtaParam, Scalar::U64, vec![at], span);
                lw.vars.insert(*id, Store::Value(g));
            }
            Ty::Struct(def) => {
                // One blob; each field read at its offset (ptxas reads the fields it needs
                // from the constant bank).
                params.push(ParamDecl {
                    name: name.clone(),
                    ty: "b8",
                    blob: Some((def.align, def.size)),
                });
                let fields = v.fields.get(id).cloned().unwrap_or_default();
                for ((_, s, off), fid) in def.fields.iter().zip(fields) {
                    let at = addr(Operand::Name(name.clone()), *off as i64);
                    let ld = |ty| Op::Ld {
                        space: Space::Param,
                        ty,
                        vec: 1,
                        nc: false,
                    };
                    let val = if *s == Scalar::Bool {
                        let raw = lw.reg(RegClass::B16);
                        lw.emit(ld(Scalar::U8), vec![raw.into(), at], span);
                        let p = lw.reg(RegClass::Pred);
                        lw.emit(
                            Op::Setp(ptx::CmpKind::Ne, Scalar::U16),
                            vec![p.into(), raw.into(), Operand::Int(0)],
                            span,
                        );
                        Val::Reg(p, Scalar::Bool)
                    } else {
                        let r = lw.reg(s.reg_class());
                        lw.emit(ld(mem_scalar(*s)), vec![r.into(), at], span);
                        Val::Reg(r, *s)
                    };
                    lw.vars.insert(fid, Store::Value(val));
                }
            }
            _ => return None,
        }
    }
    let mut shared = Vec::new();
    for (k, (id, elem, n)) in v.shared.iter().enumerate() {
        let sym = format!("smem_{}_{id}", v.vars[*id].name);
        shared.push(SharedArray {
            name: sym.clone(),
            bytes: (elem.bytes() * n).div_ceil(16) * 16,
            words: matches!(elem, Scalar::U64 | Scalar::I64),
        });
        let store = Store::Shared {
            sym,
            elem: *elem,
            len: Some(*n),
            code: bounds::record::SHARED - k as u32,
            off: 0,
        };
        lw.vars.insert(*id, store);
    }
    let mut dyn_shared = v.dyn_shared.map(|(id, elem)| {
        let sym = "dyn_smem".to_string();
        let store = Store::Shared {
            sym: sym.clone(),
            elem,
            len: None,
            code: bounds::record::SHARED - v.shared.len() as u32,
            off: 0,
        };
        lw.vars.insert(id, store);
        sym
    });
    // Views of the dynamic shared memory: arrays of their own lengths at their offsets, codes
    // after the dynamic array's; the launch must give them room (tested first).
    let first_view = v.shared.len() as u32 + v.dyn_shared.is_some() as u32;
    for (k, (id, elem, n, off)) in v.dyn_views.iter().enumerate() {
        let store = Store::Shared {
            sym: "dyn_smem".to_string(),
            elem: *elem,
            len: Some(*n),
            code: bounds::record::SHARED - first_view - k as u32,
            off: *off,
        };
        lw.vars.insert(*id, store);
        dyn_shared = Some("dyn_smem".to_string());
    }
    lw.check_dyn_views();
    lw.block(&v.body);
    *needed = lw.needed_sm;
    let exit = lw.exit;
    lw.body.push(Item::Label(exit));
    lw.emit(Op::Ret, vec![], Span::call_site());
    if lw.failed {
        return None;
    }
    let faults = std::mem::take(&mut lw.faults);
    lw.body.extend(faults);
    opt::elide_align_checks(&mut lw.body, &lw.align_checks);
    opt::optimize(&mut lw.body);
    drop_unused_labels(&mut lw.body);
    let mut reg_counts: Vec<(RegClass, u32)> = RegClass::ALL
        .iter()
        .map(|c| (*c, lw.regs.get(c).copied().unwrap_or(0)))
        .collect();
    reg_counts.retain(|(_, n)| *n > 0);
    Some(Function {
        entry: v.entry.clone(),
        target: v.target.name.clone(),
        ptx_version: lw.version,
        block: v.block,
        min_blocks: v.min_blocks,
        max_regs: v.max_regs,
        params,
        shared,
        dyn_shared,
        body: lw.body,
        reg_counts,
        funcs: lw.funcs_out,
    })
}

/// Removes the labels no branch targets (loop exits never taken, unrolled iterations).
fn drop_unused_labels(body: &mut Vec<Item>) {
    let used = branch_targets(body);
    body.retain(|i| !matches!(i, Item::Label(l) if !used.contains(l)));
}

/// The labels some branch of `body` targets.
fn branch_targets(body: &[Item]) -> std::collections::HashSet<u32> {
    body.iter()
        .filter_map(|i| match i {
            Item::Inst {
                op: Op::Bra, args, ..
            } => match args.first() {
                Some(Operand::Label(l)) => Some(*l),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The memory type of a scalar (halves move as 16-bit integers, `bool` as a byte).
pub(crate) fn mem_scalar(s: Scalar) -> Scalar {
    match s {
        Scalar::F16 | Scalar::Bf16 => Scalar::U16,
        Scalar::F16x2 | Scalar::Bf16x2 => Scalar::U32,
        Scalar::Bool => Scalar::U8,
        s => s,
    }
}

pub(crate) fn addr(base: Operand, off: i64) -> Operand {
    Operand::Addr(Box::new(base), off)
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Operand {
        Operand::Reg(r)
    }
}

impl Lower<'_> {
    pub(crate) fn reg(&mut self, class: RegClass) -> Reg {
        let n = self.regs.entry(class).or_insert(0);
        *n += 1;
        Reg { class, n: *n }
    }

    /// Declares the kernel parameter `name` of type `ty` and loads it into a new register of
    /// `class`.
    fn load_param(
        &mut self,
        params: &mut Vec<ParamDecl>,
        name: String,
        ty: Scalar,
        class: RegClass,
    ) -> Reg {
        params.push(ParamDecl {
            name: name.clone(),
            ty: ty.ptx(),
            blob: None,
        });
        let r = self.reg(class);
        self.emit(
            Op::Ld {
                space: Space::Param,
                ty,
                vec: 1,
                nc: false,
            },
            vec![r.into(), addr(Operand::Name(name), 0)],
            Span::call_site(),
        );
        r
    }

    pub(super) fn label(&mut self) -> u32 {
        self.labels += 1;
        self.labels - 1
    }

    pub(crate) fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.failed = true;
        self.cx.error(span, msg);
    }

    /// Appends an instruction after checking that the target has it.
    pub(crate) fn emit(&mut self, op: Op, args: Vec<Operand>, span: Span) {
        self.emit_pred(None, op, args, span);
    }

    pub(crate) fn emit_pred(
        &mut self,
        pred: Option<(Reg, bool)>,
        op: Op,
        args: Vec<Operand>,
        span: Span,
    ) {
        let (sm, ver) = match ptx::requirement(&op) {
            Ok(r) => r,
            Err(e) => {
                self.error(span, format!("internal: {e}"));
                return;
            }
        };
        self.needed_sm = self.needed_sm.max(sm);
        if sm > self.v.target.sm && !self.v.target_auto {
            let text = ptx::opcode(&op).unwrap_or_default();
            self.error(span, format!("`{text}` needs sm_{sm} or later: add #[target(sm_{sm})] (this kernel targets {})", self.v.target.name));
            return;
        }
        self.version = self.version.max(ver);
        self.note_writes(&op, &args);
        self.body.push(Item::Inst { pred, op, args });
    }

    pub(super) fn bra(&mut self, label: u32, pred: Option<(Reg, bool)>) {
        self.body.push(Item::Inst {
            pred,
            op: Op::Bra,
            args: vec![Operand::Label(label)],
        });
    }

    pub(super) fn block(&mut self, b: &TBlock) -> Val {
        for s in &b.stmts {
            match s {
                TStmt::Let { var, init } => {
                    let Some(init) = init else { continue };
                    let v = self.expr(init);
                    let mutable = self.v.vars[*var].mutable;
                    // A mutable variable owns its registers; an immutable one may share
                    // registers with the value unless they belong to a mutable variable.
                    let v = if mutable || self.mentions_mutable(&v) {
                        self.copy(&v, init.span)
                    } else {
                        v
                    };
                    if mutable {
                        self.mark_mutable(&v);
                    } else if let Some(u) = self.upper(init) {
                        self.uppers.insert(*var, u);
                    }
                    self.vars.insert(*var, Store::Value(v));
                }
                TStmt::Expr(e) => {
                    self.expr(e);
                    // `if i >= x.len() { return; }`: the rest of the block runs only when
                    // the condition is false.
                    if let TKind::If {
                        cond,
                        then,
                        els: None,
                    } = &e.kind
                    {
                        if control::diverges(then) {
                            self.assume_not(cond);
                        }
                    }
                }
            }
        }
        match &b.tail {
            Some(t) => self.expr(t),
            None => Val::Unit,
        }
    }

    pub(super) fn mark_mutable(&mut self, v: &Val) {
        match v {
            Val::Reg(r, _) => {
                self.mutable_regs.insert(*r);
            }
            Val::Arr(items) => items.iter().for_each(|x| self.mark_mutable(x)),
            _ => {}
        }
    }

    fn mentions_mutable(&self, v: &Val) -> bool {
        match v {
            Val::Reg(r, _) => self.mutable_regs.contains(r),
            Val::Arr(items) => items.iter().any(|x| self.mentions_mutable(x)),
            _ => false,
        }
    }

    /// A copy of `v` in fresh registers (constants are materialized).
    pub(crate) fn copy(&mut self, v: &Val, span: Span) -> Val {
        match v {
            Val::Unit => Val::Unit,
            Val::Arr(items) => Val::Arr(items.iter().map(|x| self.copy(x, span)).collect()),
            Val::Reg(_, s) | Val::Imm(_, s) => {
                let s = *s;
                let r = self.reg(s.reg_class());
                self.mov_into(r, s, v, span);
                Val::Reg(r, s)
            }
        }
    }

    /// `dst = v`.
    pub(crate) fn mov_into(&mut self, dst: Reg, s: Scalar, v: &Val, span: Span) {
        match v {
            Val::Reg(r, _) if *r == dst => {}
            Val::Reg(r, _) => self.emit(Op::Mov(s), vec![dst.into(), (*r).into()], span),
            Val::Imm(c, _) => {
                if s == Scalar::Bool {
                    let t = self.reg(RegClass::B32);
                    let b = matches!(c, ConstVal::Bool(true)) as i128;
                    self.emit(Op::Mov(Scalar::U32), vec![t.into(), Operand::Int(b)], span);
                    self.emit(
                        Op::Setp(ptx::CmpKind::Ne, Scalar::U32),
                        vec![dst.into(), t.into(), Operand::Int(0)],
                        span,
                    );
                } else {
                    let op = self.imm(c, s);
                    self.emit(Op::Mov(s), vec![dst.into(), op], span);
                }
            }
            Val::Unit | Val::Arr(_) => {}
        }
    }

    /// `dst = v` element-wise for arrays.
    pub(super) fn assign_val(&mut self, dst: &Val, v: &Val, span: Span) {
        match (dst, v) {
            (Val::Reg(r, s), v) => self.mov_into(*r, *s, v, span),
            (Val::Arr(ds), Val::Arr(vs)) => {
                for (d, x) in ds.iter().zip(vs) {
                    self.assign_val(d, x, span);
                }
            }
            _ => {}
        }
    }

    pub(super) fn place_value(&mut self, var: VarId) -> Option<Val> {
        match self.vars.get(&var) {
            Some(Store::Value(v)) => Some(v.clone()),
            _ => None,
        }
    }

    pub(crate) fn expr(&mut self, e: &TExpr) -> Val {
        let span = e.span;
        match &e.kind {
            TKind::Const(c) => match &e.ty {
                Ty::Scalar(s) => Val::Imm(c.clone(), *s),
                _ => Val::Unit,
            },
            TKind::Var(id) => match self.vars.get(id) {
                Some(Store::Value(v)) => v.clone(),
                _ => Val::Unit,
            },
            TKind::IsSome(id) => match self.vars.get(id) {
                Some(Store::Global { len_param, .. }) => {
                    // The address parameter, loaded where it is tested (ptxas reads it from
                    // the constant bank, so no register holds it for the test).
                    let param = len_param.trim_end_matches("_len").to_string();
                    let raw = self.reg(RegClass::B64);
                    self.emit(
                        Op::Ld {
                            space: Space::Param,
                            ty: Scalar::U64,
                            vec: 1,
                            nc: false,
                        },
                        vec![raw.into(), addr(Operand::Name(param), 0)],
                        span,
                    );
                    let p = self.reg(RegClass::Pred);
                    self.emit(
                        Op::Setp(ptx::CmpKind::Ne, Scalar::U64),
                        vec![p.into(), raw.into(), Operand::Int(0)],
                        span,
                    );
                    Val::Reg(p, Scalar::Bool)
                }
                _ => Val::Unit,
            },
            TKind::Unary(op, x) => {
                let v = self.expr(x);
                self.unary(*op, v, span)
            }
            TKind::Binary(op, l, r) => self.binary_expr(*op, l, r, span),
            TKind::Cast(x) => {
                let v = self.expr(x);
                match (e.ty.clone(), &x.ty) {
                    (Ty::Scalar(to), Ty::Scalar(from)) => {
                        let v_in = v.clone();
                        let out = self.cast(v, to, span);
                        // A zero-extended value below 2^32 (bounds-check facts use it).
                        if let (Val::Reg(r, _), Val::Reg(src, _)) = (&out, &v_in) {
                            if from.is_int()
                                && !from.is_signed()
                                && from.bytes() <= 4
                                && to.bytes() == 8
                            {
                                self.narrow.insert(*r);
                            }
                            // The same value: facts on `src` hold for `r` (until `src` changes).
                            if from.is_int()
                                && to.is_int()
                                && !from.is_signed()
                                && !to.is_signed()
                                && to.bytes() >= from.bytes()
                                && r != src
                            {
                                let g = *self.writes.get(src).unwrap_or(&0);
                                self.aliases.insert(*r, (*src, g));
                            }
                        }
                        out
                    }
                    (Ty::Scalar(to), _) => self.cast(v, to, span),
                    _ => Val::Unit,
                }
            }
            TKind::Index { base, index } => self.index_load(*base, index, span),
            TKind::Within { index, len } => {
                let i = self.expr(index);
                match self.const_index(&i, *len as usize, index.span) {
                    Some(_) => i,
                    None => Val::Imm(ConstVal::Int(0), Self::scalar_of(&i).unwrap_or(Scalar::U32)),
                }
            }
            TKind::Intr { intr, args } => self.intrinsic(*intr, args, &e.ty, span),
            TKind::Mem {
                op,
                base,
                args,
                checked,
            } => self.mem_op(*op, *base, args, *checked, span),
            TKind::If { cond, then, els } => self.if_expr(cond, then, els.as_deref(), &e.ty, span),
            TKind::Block(b) => self.block(b),
            TKind::Match { scrut, arms } => {
                let v = self.expr(scrut);
                let Val::Imm(c, _) = &v else {
                    self.error(scrut.span, "`match` needs a value known after unrolling (a constant, or the counter of an `#[unroll]` loop)");
                    return Val::Unit;
                };
                match arms.iter().find(|(p, _)| crate::check::pat_matches(p, c)) {
                    Some((_, body)) => self.expr(body),
                    None => {
                        self.error(span, format!("no `match` arm matches `{c}`"));
                        Val::Unit
                    }
                }
            }
            // Rows of a two-dimensional array are laid out flat, one after the other.
            TKind::Array(items) => Val::Arr(
                items
                    .iter()
                    .flat_map(|x| match self.expr(x) {
                        Val::Arr(row) => row,
                        v => vec![v],
                    })
                    .collect(),
            ),
            TKind::Repeat(x, n) => match self.expr(x) {
                Val::Arr(row) => Val::Arr((0..*n).flat_map(|_| row.iter().cloned()).collect()),
                v => Val::Arr(vec![v; *n as usize]),
            },
            TKind::Assign { place, op, value } => {
                self.assign(place, *op, value, span);
                Val::Unit
            }
            TKind::For {
                var,
                start,
                end,
                inclusive,
                body,
                unroll,
            } => {
                self.for_loop(*var, start, end, *inclusive, body, *unroll, span);
                Val::Unit
            }
            TKind::While { cond, body } => {
                let (head, exit) = (self.label(), self.label());
                self.body.push(Item::Label(head));
                self.forget_mutable();
                let c = self.expr(cond);
                match c {
                    Val::Imm(ConstVal::Bool(false), _) => self.bra(exit, None),
                    Val::Reg(p, _) => self.bra(exit, Some((p, true))),
                    _ => {}
                }
                let facts = self.facts.clone();
                self.assume(cond);
                self.loops.push((exit, head));
                self.block(body);
                self.loops.pop();
                self.facts = facts;
                self.bra(head, None);
                self.body.push(Item::Label(exit));
                Val::Unit
            }
            TKind::Break => {
                if let Some((b, _)) = self.loops.last().copied() {
                    self.bra(b, None);
                }
                Val::Unit
            }
            TKind::Continue => {
                if let Some((_, c)) = self.loops.last().copied() {
                    self.bra(c, None);
                }
                Val::Unit
            }
            TKind::Return(v) => {
                let val = v.as_ref().map(|x| self.expr(x));
                match self.inlines.last() {
                    Some(ic) => {
                        let (end, result) = (ic.end, ic.result.clone());
                        if let (Some(dst), Some(val)) = (result, val) {
                            self.assign_val(&dst, &val, span);
                        }
                        self.bra(end, None);
                    }
                    None => {
                        let exit = self.exit;
                        self.bra(exit, None);
                    }
                }
                Val::Unit
            }
            TKind::Inline { binds, body } => self.inline(binds, body, &e.ty, span),
            TKind::Call { func, args } => self.call(*func, args, &e.ty, span),
            TKind::Asm {
                pieces,
                inputs,
                outs,
            } => self.asm(pieces, inputs, outs, span),
        }
    }
}

#[cfg(test)]
mod tests;

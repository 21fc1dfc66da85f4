//! Parsed PTX -> pre-decoded kernels: every instruction becomes an [`Op`] whose operands are
//! register-file slots (immediates and symbol addresses are constant slots filled once per
//! thread), with label targets resolved. Anything the emulator does not implement is an error
//! naming the instruction and line, never a silently different program.

use super::num::{Cmp, FMode, FOp1, FOp2, IOp2, Rnd, Ty};
use super::ptx::{parse_int, Entry, Operand, RawInst, Space, Stmt, VarDecl};
use super::tensor::{operand_regs, MmaInst, MmaKind};
use std::collections::HashMap;

mod forms;
mod inst;

pub(crate) use forms::check_form;
use inst::{decode_inst, Ctx};

/// A register-file slot.
pub(super) type Slot = u32;

// Special registers occupy fixed slots, filled per thread before it starts.
pub(super) const S_TID: Slot = 0;
pub(super) const S_NTID: Slot = 3;
pub(super) const S_CTAID: Slot = 6;
pub(super) const S_NCTAID: Slot = 9;
pub(super) const S_LANEID: Slot = 12;
pub(super) const S_WARPID: Slot = 13;
pub(super) const S_NWARPID: Slot = 14;
pub(super) const S_LANEMASK: Slot = 15; // eq, lt, le, gt, ge
pub(super) const S_SMID: Slot = 20;
pub(super) const S_NSMID: Slot = 21;
pub(super) const S_CLOCK: Slot = 22;
/// Always 0: the base of an address without a register.
pub(super) const S_ZERO: Slot = 23;
/// Written by `_` destinations, never read.
pub(super) const S_SINK: Slot = 24;
/// `%dynamic_smem_size` and `%total_smem_size`.
pub(super) const S_SMEM: Slot = 25;
const FIRST_FREE: Slot = 27;
/// The most register slots a kernel may use (declared registers and constants).
const MAX_SLOTS: usize = 1 << 16;
/// The most local memory per thread, in bytes (the hardware limit).
const MAX_LOCAL: u64 = 512 * 1024;
/// The most kernel parameter bytes (the limit of sm_70 and later with CUDA 12.1).
const MAX_PARAM_BYTES: u64 = 32764;
/// The most static shared memory a module or kernel may declare before the device's own limit
/// is applied at load: keeps every shared offset inside the 32-bit shared window.
pub(super) const MAX_SHARED: u64 = u32::MAX as u64 / 2;

fn special(name: &str) -> Option<Slot> {
    let comp = |base: Slot, c: &str| match c {
        "x" => Some(base),
        "y" => Some(base + 1),
        "z" => Some(base + 2),
        _ => None,
    };
    if let Some((head, c)) = name.split_once('.') {
        return match head {
            "%tid" => comp(S_TID, c),
            "%ntid" => comp(S_NTID, c),
            "%ctaid" => comp(S_CTAID, c),
            "%nctaid" => comp(S_NCTAID, c),
            _ => None,
        };
    }
    Some(match name {
        "%laneid" => S_LANEID,
        "%warpid" => S_WARPID,
        "%nwarpid" => S_NWARPID,
        "%lanemask_eq" => S_LANEMASK,
        "%lanemask_lt" => S_LANEMASK + 1,
        "%lanemask_le" => S_LANEMASK + 2,
        "%lanemask_gt" => S_LANEMASK + 3,
        "%lanemask_ge" => S_LANEMASK + 4,
        "%smid" => S_SMID,
        "%nsmid" => S_NSMID,
        "%dynamic_smem_size" => S_SMEM,
        "%total_smem_size" => S_SMEM + 1,
        "%clock" | "%clock64" | "%globaltimer" => S_CLOCK,
        _ => return None,
    })
}

/// The state space of a memory instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MemSpace {
    Global,
    Shared,
    Local,
    Param,
    Generic,
}

/// Atomic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtomOp {
    Add,
    Min,
    Max,
    Inc,
    Dec,
    Cas,
    Exch,
    And,
    Or,
    Xor,
}

/// Integer one-operand operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IOp1 {
    Abs,
    Neg,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
    Bfind,
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// The reduction of `bar.red`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BarRed {
    None,
    Popc,
    And,
    Or,
}

/// How `setp` combines its comparison with a third predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BoolOp {
    None,
    And,
    Or,
    Xor,
}

/// One pre-decoded operation. Slots index the thread's register file.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    Mov {
        d: Slot,
        a: Slot,
        mask: u64,
    },
    Pack {
        d: Slot,
        parts: [Slot; 4],
        n: u8,
        bits: u8,
    },
    Unpack {
        d: [Slot; 4],
        n: u8,
        bits: u8,
        a: Slot,
    },
    Int2 {
        op: IOp2,
        ty: Ty,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Int1 {
        op: IOp1,
        ty: Ty,
        d: Slot,
        a: Slot,
    },
    /// `mad.lo/.hi/.wide`: `d = op(a, b) + c`.
    IMad {
        op: IOp2,
        ty: Ty,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    Flt2 {
        op: FOp2,
        ty: Ty,
        fm: FMode,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Flt1 {
        op: FOp1,
        ty: Ty,
        fm: FMode,
        d: Slot,
        a: Slot,
    },
    Fma {
        ty: Ty,
        fm: FMode,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    Cvt {
        dty: Ty,
        sty: Ty,
        rnd: Rnd,
        int_rnd: bool,
        sat: bool,
        ftz: bool,
        d: Slot,
        a: Slot,
    },
    /// `cvt.rn.f16x2.f32 d, a, b`: `a` goes to the upper half.
    CvtPack {
        dty: Ty,
        rnd: Rnd,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        p: Slot,
        q: Slot,
        a: Slot,
        b: Slot,
        bop: BoolOp,
        c: Slot,
        cneg: bool,
    },
    Selp {
        mask: u64,
        d: Slot,
        a: Slot,
        b: Slot,
        p: Slot,
    },
    Bfe {
        ty: Ty,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    Bfi {
        ty: Ty,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        e: Slot,
    },
    Prmt {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    Lop3 {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        lut: u8,
    },
    /// `ordered`: an acquire (or sequentially consistent) load, fenced on both sides.
    Ld {
        space: MemSpace,
        ty: Ty,
        n: u8,
        ordered: bool,
        d: [Slot; 4],
        base: Slot,
        off: i64,
    },
    /// `ordered`: a release (or sequentially consistent) store, fenced on both sides.
    St {
        space: MemSpace,
        ty: Ty,
        n: u8,
        ordered: bool,
        s: [Slot; 4],
        base: Slot,
        off: i64,
    },
    Atom {
        space: MemSpace,
        op: AtomOp,
        ty: Ty,
        d: Slot,
        base: Slot,
        off: i64,
        b: Slot,
        c: Slot,
    },
    /// Generic <-> state-space address conversion.
    Cvta {
        to: bool,
        space: MemSpace,
        d: Slot,
        a: Slot,
        mask: u64,
    },
    Bra {
        target: u32,
    },
    Exit,
    Trap,
    Nop,
    /// `membar` / `fence`: a sequentially consistent fence between the host threads that run
    /// blocks (within a block the emulator runs threads one at a time).
    Fence,
    /// `bar.sync id{, count}` and `bar.red`: `count` is `S_SINK` when absent.
    Bar {
        id: Slot,
        count: Slot,
        /// `bar.red`: the reduction, its destination and predicate.
        red: BarRed,
        d: Slot,
        p: Slot,
        pneg: bool,
    },
    /// `bar.arrive id, count`: counts toward the barrier without waiting (the count is the
    /// one the waiting threads give).
    BarArrive {
        id: Slot,
    },
    Shfl {
        mode: ShflMode,
        d: Slot,
        p: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        mask: Slot,
    },
    Vote {
        mode: VoteMode,
        d: Slot,
        a: Slot,
        neg: bool,
        mask: Slot,
    },
    BarWarp {
        mask: Slot,
    },
    Redux {
        op: AtomOp,
        ty: Ty,
        d: Slot,
        a: Slot,
        mask: Slot,
    },
    Activemask {
        d: Slot,
    },
    /// `add.f32` / `add.rn.f32` (the common case, without flags).
    F32Add {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    /// `sub.f32` / `sub.rn.f32`.
    F32Sub {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    /// `mul.f32` / `mul.rn.f32`.
    F32Mul {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    /// `fma.rn.f32`.
    F32Fma {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `mma.sync`: operands in `Kernel::mmas[idx]`; `mask` holds the full-warp mask.
    Mma {
        idx: u32,
        mask: Slot,
    },
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16`.
    Ldmatrix {
        n: u8,
        trans: bool,
        d: [Slot; 4],
        base: Slot,
        off: i64,
        mask: Slot,
    },
    /// `cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}`, performed at once.
    CpAsync {
        dst: Slot,
        dst_off: i64,
        src: Slot,
        src_off: i64,
        size: u8,
        src_size: Slot,
    },
    /// `cvt.rna.tf32.f32`.
    Tf32 {
        d: Slot,
        a: Slot,
    },
    /// `shf.{l,r}.{clamp,wrap}.b32`: funnel shift of `{b, a}` by `c`.
    Shf {
        left: bool,
        clamp: bool,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `dp4a.atype.btype d, a, b, c` (`wide` false) or `dp2a.{lo,hi}` (`wide` true, `hi`).
    Dot {
        two: bool,
        hi: bool,
        a_signed: bool,
        b_signed: bool,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `slct.dtype.ctype d, a, b, c`: `d = c >= 0 ? a : b`.
    Slct {
        float: bool,
        mask: u64,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `testp.<kind>.<ty> p, a`.
    Testp {
        kind: TestKind,
        ty: Ty,
        p: Slot,
        a: Slot,
    },
}

/// `testp` classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TestKind {
    Finite,
    Infinite,
    Number,
    NotANumber,
    Normal,
    Subnormal,
}

impl Op {
    /// The membermask operand of a warp collective.
    pub fn member_mask(&self) -> Slot {
        match *self {
            Op::Shfl { mask, .. }
            | Op::Vote { mask, .. }
            | Op::BarWarp { mask }
            | Op::Redux { mask, .. }
            | Op::Mma { mask, .. }
            | Op::Ldmatrix { mask, .. } => mask,
            _ => S_ZERO,
        }
    }
}

/// One instruction: the op, its guard predicate, nothing else (kept small for the hot loop).
#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    pub op: Op,
    /// The guard predicate's slot, `S_SINK` when unguarded.
    pub guard: Slot,
    /// Execute when the guard is false (`@!%p`).
    pub guard_neg: bool,
}

/// A kernel parameter's place in the parameter buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct ParamSlot {
    pub offset: u32,
    pub size: u32,
}

/// A decoded kernel entry.
#[derive(Debug)]
pub(super) struct Kernel {
    pub name: String,
    pub code: Vec<Inst>,
    /// PTX line of each instruction.
    pub lines: Vec<u32>,
    /// PTX text of each instruction, for error messages.
    pub texts: Vec<String>,
    pub nslots: usize,
    /// The register file every thread starts from (constants filled in).
    pub template: Vec<u64>,
    pub params: Vec<ParamSlot>,
    pub param_bytes: u32,
    pub static_shared: u32,
    pub local_bytes: u32,
    pub reqntid: Option<[u32; 3]>,
    pub maxntid: Option<[u32; 3]>,
    /// The operands of the kernel's `mma` instructions.
    pub mmas: Vec<MmaInst>,
}

/// A decode failure: line and message.
#[derive(Debug)]
pub(super) struct DecodeError {
    pub line: u32,
    pub message: String,
}

type DResult<T> = Result<T, DecodeError>;

/// A placed symbol: its state space and address (or offset in its space).
#[derive(Clone, Copy, Debug)]
pub(super) struct Sym {
    space: Space,
    addr: u64,
}

/// The byte size of a variable; an error when element size x vector width x count overflows.
pub(super) fn var_bytes(v: &VarDecl) -> Result<u64, String> {
    let elem = Ty::parse(&v.ty).map_or(1, |t| t.bytes() as u64) * v.vec as u64;
    elem.checked_mul(v.count.unwrap_or(1))
        .ok_or(format!("the size of `{}` overflows 64 bits", v.name))
}

/// `top` rounded up to `align` (a power of two), then `bytes` added: the next free offset of a
/// state space, or an error when that overflows.
fn place(top: u64, align: u64, bytes: u64, name: &str) -> Result<(u64, u64), String> {
    if !align.is_power_of_two() {
        return Err(format!(
            "alignment {align} of `{name}` is not a power of two"
        ));
    }
    let addr = top
        .checked_next_multiple_of(align)
        .ok_or(format!("`{name}` does not fit its state space"))?;
    let end = addr
        .checked_add(bytes)
        .ok_or(format!("`{name}` does not fit its state space"))?;
    Ok((addr, end))
}

/// The size of a `.global` / `.const` variable, which must fit `max_bytes` (the device's
/// memory), and the bytes of its initializer (the rest is zero): no host buffer of the full
/// size is built, so a huge array costs nothing here and fails, if at all, as an allocation.
pub(super) fn var_init(v: &VarDecl, max_bytes: u64) -> Result<(u64, Vec<u8>), String> {
    let ty = Ty::parse(&v.ty).ok_or(format!("unsupported variable type .{}", v.ty))?;
    let bytes = var_bytes(v)?;
    if bytes > max_bytes {
        return Err(format!(
            "out of device memory for `{}`: {bytes} bytes, the device has {max_bytes}",
            v.name
        ));
    }
    let esize = ty.bytes() as usize;
    if (v.init.len() as u64).saturating_mul(esize as u64) > bytes {
        return Err(format!("too many initializers for `{}`", v.name));
    }
    let mut out = Vec::with_capacity(v.init.len() * esize);
    for lit in &v.init {
        let bits = imm_bits(lit, ty).ok_or(format!("bad initializer `{lit}`"))?;
        out.extend_from_slice(&bits.to_le_bytes()[..esize]);
    }
    Ok((bytes, out))
}

/// The bits of a literal as an operand of type `ty`.
pub(super) fn imm_bits(lit: &str, ty: Ty) -> Option<u64> {
    let (neg, body) = match lit.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, lit),
    };
    let lower = body.to_ascii_lowercase();
    let fmt = ty.fmt().or(ty.packed());
    let as_float = |x: f64| -> u64 {
        let x = if neg { -x } else { x };
        match fmt {
            Some(f) => super::num::round_to(x, 0.0, f, Rnd::Rn),
            None => (x as i64) as u64 & ty.mask(),
        }
    };
    if let Some(h) = lower.strip_prefix("0f") {
        let bits = u32::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F32 || fmt.is_none() {
            (bits ^ if neg { 0x8000_0000 } else { 0 }) as u64
        } else {
            as_float(f32::from_bits(bits) as f64)
        });
    }
    if let Some(h) = lower.strip_prefix("0d") {
        let bits = u64::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F64 || fmt.is_none() {
            bits ^ if neg { 1 << 63 } else { 0 }
        } else {
            as_float(f64::from_bits(bits))
        });
    }
    if !lower.starts_with("0x")
        && (lower.contains('.') || lower.contains('e') || lower == "inf" || lower == "nan")
    {
        return Some(as_float(lower.parse::<f64>().ok()?));
    }
    let v = parse_int(lit)?;
    Some(match fmt {
        Some(_) => as_float((if neg { -v } else { v }) as f64),
        None => (v as u64) & if ty == Ty::Pred { 1 } else { ty.mask() },
    })
}

/// Decodes one entry of a module whose module-level symbols are already placed.
pub(super) fn decode_entry(
    e: &Entry,
    module_syms: &HashMap<String, Sym>,
    module_shared: u32,
    source: &[&str],
) -> DResult<Kernel> {
    let mut ctx = Ctx {
        regs: HashMap::new(),
        syms: module_syms,
        local_syms: HashMap::new(),
        labels: HashMap::new(),
        consts: HashMap::new(),
        template: vec![0; FIRST_FREE as usize],
        mmas: Vec::new(),
    };
    // Parameters, in u64 arithmetic checked against the device's parameter space.
    let mut params = Vec::new();
    let mut off = 0u64;
    for p in &e.params {
        let ty = Ty::parse(&p.ty).ok_or(DecodeError {
            line: 0,
            message: format!("unsupported parameter type .{}", p.ty),
        })?;
        let size = (ty.bytes() as u64).saturating_mul(p.count.unwrap_or(1));
        let align = if p.align > 0 { p.align } else { ty.bytes() } as u64;
        let (addr, end) = place(off, align, size, &p.name)
            .ok()
            .filter(|&(_, end)| end <= MAX_PARAM_BYTES)
            .ok_or_else(|| DecodeError {
                line: 0,
                message: format!(
                    "the parameters of `{}` exceed {MAX_PARAM_BYTES} bytes (at `{}`)",
                    e.name, p.name
                ),
            })?;
        ctx.local_syms.insert(
            p.name.clone(),
            Sym {
                space: Space::Param,
                addr,
            },
        );
        params.push(ParamSlot {
            offset: addr as u32,
            size: size as u32,
        });
        off = end;
    }
    let param_bytes = off as u32;
    // Declarations and labels.
    let mut shared = module_shared as u64;
    let mut local = 0u64;
    let mut n_inst = 0u32;
    let mut dynamic: Vec<(String, u32)> = Vec::new();
    for s in &e.body {
        match s {
            Stmt::Reg { names } => {
                for (name, count) in names {
                    match count {
                        Some(n) => {
                            if ctx.template.len() + *n as usize > MAX_SLOTS {
                                return Err(DecodeError {
                                    line: 0,
                                    message: format!(
                                        "more than {MAX_SLOTS} registers in `{}`",
                                        e.name
                                    ),
                                });
                            }
                            for i in 0..*n {
                                let slot = ctx.new_slot();
                                ctx.regs.insert(format!("{name}{i}"), slot);
                            }
                        }
                        None => {
                            let slot = ctx.new_slot();
                            ctx.regs.insert(name.clone(), slot);
                        }
                    }
                }
            }
            Stmt::Var(v) => {
                let align = v.align.max(1) as u64;
                let bad = |message: String| DecodeError {
                    line: v.line,
                    message,
                };
                match v.space {
                    Space::Shared if v.count == Some(0) => {
                        dynamic.push((v.name.clone(), v.align.max(1)))
                    }
                    Space::Shared | Space::Local => {
                        let top = if v.space == Space::Shared {
                            &mut shared
                        } else {
                            &mut local
                        };
                        let bytes = var_bytes(v).map_err(bad)?;
                        let (addr, end) = place(*top, align, bytes, &v.name).map_err(bad)?;
                        ctx.local_syms.insert(
                            v.name.clone(),
                            Sym {
                                space: v.space,
                                addr,
                            },
                        );
                        *top = end;
                    }
                    _ => {
                        return Err(DecodeError {
                            line: v.line,
                            message: "global variables inside a kernel are not supported".into(),
                        })
                    }
                }
            }
            Stmt::Label(l) => {
                ctx.labels.insert(l.clone(), n_inst);
            }
            Stmt::Inst(_) => n_inst += 1,
        }
    }
    if ctx.template.len() > MAX_SLOTS {
        return Err(DecodeError {
            line: 0,
            message: format!("more than {MAX_SLOTS} registers in `{}`", e.name),
        });
    }
    if local > MAX_LOCAL {
        return Err(DecodeError {
            line: 0,
            message: format!(
                "more than {MAX_LOCAL} bytes of local memory in `{}`",
                e.name
            ),
        });
    }
    if shared > MAX_SHARED {
        return Err(DecodeError {
            line: 0,
            message: format!("too much shared memory in `{}`: {shared} bytes", e.name),
        });
    }
    // Dynamic shared memory starts after the static part, at the strictest alignment asked.
    let dyn_align = dynamic.iter().map(|d| d.1).max().unwrap_or(16).max(16) as u64;
    let dyn_base = shared.div_ceil(dyn_align) * dyn_align;
    for (name, _) in dynamic {
        ctx.local_syms.insert(
            name,
            Sym {
                space: Space::Shared,
                addr: dyn_base,
            },
        );
    }
    let mut code = Vec::with_capacity(n_inst as usize);
    let mut lines = Vec::with_capacity(n_inst as usize);
    let mut texts = Vec::with_capacity(n_inst as usize);
    for s in &e.body {
        if let Stmt::Inst(raw) = s {
            let inst = decode_inst(&mut ctx, raw).map_err(|m| DecodeError {
                line: raw.line,
                message: format!(
                    "`{}`: {m}",
                    source
                        .get(raw.line as usize - 1)
                        .map_or(raw.opcode.as_str(), |l| l.trim())
                ),
            })?;
            code.push(inst);
            lines.push(raw.line);
            texts.push(
                source
                    .get(raw.line as usize - 1)
                    .map_or(String::new(), |l| l.trim().to_string()),
            );
        }
    }
    // Falling off the end exits.
    code.push(Inst {
        op: Op::Exit,
        guard: S_SINK,
        guard_neg: false,
    });
    lines.push(lines.last().copied().unwrap_or(0));
    texts.push("(end of kernel)".to_string());
    Ok(Kernel {
        name: e.name.clone(),
        code,
        lines,
        texts,
        nslots: ctx.template.len(),
        template: ctx.template,
        params,
        param_bytes,
        static_shared: dyn_base.max(shared) as u32,
        local_bytes: local as u32,
        reqntid: e.reqntid,
        maxntid: e.maxntid,
        mmas: ctx.mmas,
    })
}

/// Allocates a module-level `.global` / `.const` variable and writes its initial bytes.
/// Receives the variable, its size in bytes and its initialized first bytes.
pub(super) type VarAlloc<'a> = dyn FnMut(&VarDecl, u64, &[u8]) -> Result<u64, String> + 'a;

/// Places module-level variables: `.shared` at offsets from 0, `.global`/`.const` at addresses
/// given by `alloc` (which also receives their initial bytes).
/// `max_global` bounds each `.global`/`.const` variable (the device's memory); module-level
/// `.shared` totals more than [`MAX_SHARED`] are errors, never truncated.
pub(super) fn place_module_vars(
    vars: &[VarDecl],
    max_global: u64,
    alloc: &mut VarAlloc<'_>,
) -> DResult<(HashMap<String, Sym>, u32)> {
    let mut syms = HashMap::new();
    let mut shared = 0u64;
    for v in vars {
        let e = |message: String| DecodeError {
            line: v.line,
            message,
        };
        match v.space {
            Space::Shared => {
                let align = v.align.max(1) as u64;
                let bytes = var_bytes(v).map_err(e)?;
                let (addr, end) = place(shared, align, bytes, &v.name).map_err(e)?;
                if end > MAX_SHARED {
                    return Err(e(format!(
                        "too much shared memory: `{}` ends at byte {end}",
                        v.name
                    )));
                }
                syms.insert(
                    v.name.clone(),
                    Sym {
                        space: Space::Shared,
                        addr,
                    },
                );
                shared = end;
            }
            Space::Global | Space::Const => {
                let (bytes, init) = var_init(v, max_global).map_err(e)?;
                let addr = alloc(v, bytes, &init).map_err(e)?;
                syms.insert(
                    v.name.clone(),
                    Sym {
                        space: v.space,
                        addr,
                    },
                );
            }
            _ => return Err(e(format!("unsupported module-level variable `{}`", v.name))),
        }
    }
    Ok((syms, shared as u32))
}

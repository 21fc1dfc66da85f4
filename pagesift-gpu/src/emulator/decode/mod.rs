//! Parsed PTX -> pre-decoded kernels: every instruction becomes an [`Op`] whose operands are
//! register-file slots (immediates and symbol addresses are constant slots filled once per
//! thread), with label targets resolved. Anything the emulator does not implement is an error
//! naming the instruction and line, never a silently different program.
//!
//! `entry.rs` places a kernel's parameters, registers and arrays and decodes its statements;
//! `inst.rs` looks each opcode up in the instruction table (`pagesift-ptx-isa`), checks the
//! operand count of its row and calls the decode rule of its family: `arith.rs`,
//! `convert.rs`, `memory.rs`, `control.rs`, `warp.rs`, `tensor.rs` (with `tma.rs`).

use super::num::{Cmp, FMode, FOp1, FOp2, IOp2, Rnd, Ty};
use super::ptx::{parse_int, Entry, Operand, RawInst, Space, Stmt, VarDecl};
use super::tensor::{operand_regs, MmaInst, MmaKind, WgmmaA, WgmmaInst};
use std::collections::HashMap;

mod arith;
mod control;
mod convert;
mod entry;
mod forms;
mod inst;
mod memory;
mod tensor;
mod tma;
mod warp;

use entry::imm_bits;
pub(super) use entry::{decode_entry, place_module_vars};
pub(crate) use forms::check_form;

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
/// The guard of an instruction that names a `wgmma` accumulator register: its accesses are
/// checked before it executes (`Kernel::acc_uses`, which holds its own guard). No slot: never
/// read.
pub(super) const S_ACC: Slot = Slot::MAX;
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
    /// `elect.sync d|p, mask`: the lowest lane of the mask is elected; `d` its index in every
    /// member, `p` true in it alone.
    Elect {
        d: Slot,
        p: Slot,
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
    /// `stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16`: the store counterpart of
    /// `ldmatrix`, `s` the lanes' source registers.
    Stmatrix {
        n: u8,
        trans: bool,
        s: [Slot; 4],
        base: Slot,
        off: i64,
        mask: Slot,
    },
    /// `cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}`: reads the source at
    /// once, writes the shared destination when a `CpAsyncWait` completes the copy (until then
    /// its bytes are pending and any access to them is an error).
    CpAsync {
        dst: Slot,
        dst_off: i64,
        src: Slot,
        src_off: i64,
        size: u8,
        src_size: Slot,
    },
    /// `cp.async.commit_group`: the thread's copies since its last commit form a group.
    CpAsyncCommit,
    /// `cp.async.wait_group n` (`all` false): completes the thread's oldest committed groups
    /// until at most `n` remain pending; `cp.async.wait_all` (`all` true, `n` 0): commits, then
    /// completes every copy.
    CpAsyncWait {
        n: u32,
        all: bool,
    },
    /// `wgmma.mma_async.sync.aligned`: operands in `Kernel::wgmmas[idx]`; `mask` holds the
    /// full-warp mask (it runs as a warp collective, see `exec/wgmma.rs`).
    Wgmma {
        idx: u32,
        mask: Slot,
    },
    /// `wgmma.fence.sync.aligned`.
    WgmmaFence {
        mask: Slot,
    },
    /// `wgmma.commit_group.sync.aligned`: the warp's `wgmma.mma_async` since its last commit
    /// form a group.
    WgmmaCommit {
        mask: Slot,
    },
    /// `wgmma.wait_group.sync.aligned n`: completes the warp's oldest committed groups until at
    /// most `n` remain pending.
    WgmmaWait {
        n: u32,
        mask: Slot,
    },
    /// `fence.proxy.async.shared::cta`: the thread's earlier shared-memory writes become
    /// visible to the async proxy (`wgmma` operand reads).
    ProxyFence,
    /// `setmaxnreg.{inc|dec}.sync.aligned.u32 n` (`n` checked at decode): a warpgroup
    /// collective (see `exec`), whose register count the emulator does not model; `mask`
    /// holds the full-warp mask.
    SetMaxNReg {
        mask: Slot,
    },
    /// `mbarrier.init.shared::cta.b64 [a], count`.
    MbarInit {
        base: Slot,
        off: i64,
        count: Slot,
    },
    /// `mbarrier.arrive{.expect_tx}.shared::cta.b64 state, [a]{, tx}`: `tx` is `S_ZERO` for a
    /// plain arrive.
    MbarArrive {
        d: Slot,
        base: Slot,
        off: i64,
        tx: Slot,
    },
    /// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [a]`: the emulator lands the thread's
    /// copies issued so far at once (as a `cp.async.wait_all`), then arrives; a read of them
    /// not ordered after the phase is still a race (`exec/tma.rs`).
    CpAsyncArrive {
        base: Slot,
        off: i64,
    },
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [a], parity`.
    MbarTryWait {
        p: Slot,
        base: Slot,
        off: i64,
        parity: Slot,
    },
    /// `cp.async.bulk.tensor` global -> shared: operands in `Kernel::tmas[idx]`.
    Tma {
        idx: u32,
    },
    /// `cp.async.bulk.tensor` shared -> global (`.bulk_group`): operands in
    /// `Kernel::tmas[idx]`.
    TmaStore {
        idx: u32,
    },
    /// `cp.async.bulk.commit_group`: the thread's bulk stores since its last commit form a
    /// group.
    BulkCommit,
    /// `cp.async.bulk.wait_group{.read} n`: completes the thread's oldest committed bulk groups
    /// until at most `n` remain (with `.read` the hardware waits only for their reads of shared
    /// memory; the emulator completes their writes then as well).
    BulkWait {
        n: u32,
    },
    /// `prefetch.tensormap [a]`: a hint whose generic address must be valid.
    PrefetchTensormap {
        base: Slot,
        off: i64,
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
            | Op::Elect { mask, .. }
            | Op::BarWarp { mask }
            | Op::Redux { mask, .. }
            | Op::Mma { mask, .. }
            | Op::Ldmatrix { mask, .. }
            | Op::Stmatrix { mask, .. }
            | Op::Wgmma { mask, .. }
            | Op::WgmmaFence { mask }
            | Op::WgmmaCommit { mask }
            | Op::WgmmaWait { mask, .. }
            | Op::SetMaxNReg { mask, .. } => mask,
            _ => S_ZERO,
        }
    }
}

/// One instruction: the op, its guard predicate, nothing else (kept small for the hot loop).
#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    pub op: Op,
    /// The guard predicate's slot, `S_SINK` when unguarded, `S_ACC` when the instruction
    /// names a `wgmma` accumulator register (its guard is then in `Kernel::acc_uses`).
    pub guard: Slot,
    /// Execute when the guard is false (`@!%p`).
    pub guard_neg: bool,
}

/// An instruction (not a `wgmma`) that names registers a `wgmma.mma_async` of its kernel uses
/// as accumulators (those it reads and writes) or writes registers one reads A from (in
/// `writes` too), and its own guard.
#[derive(Clone, Debug)]
pub(super) struct AccUse {
    pub reads: Vec<Slot>,
    pub writes: Vec<Slot>,
    pub guard: Slot,
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
    /// The operands of the kernel's `wgmma.mma_async` instructions.
    pub wgmmas: Vec<WgmmaInst>,
    /// Per instruction index whose guard is `S_ACC`: the accumulator registers it accesses.
    pub acc_uses: HashMap<u32, AccUse>,
    /// The operands of the kernel's `cp.async.bulk.tensor` instructions.
    pub tmas: Vec<TmaInst>,
}

/// An address operand `[base+off]`.
pub(super) type AddrSlot = (Slot, i64);

/// One decoded `cp.async.bulk.tensor.<n>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
/// [dst], [map, {c0, ..}], [mbar]` or (`store`)
/// `cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group [map, {c0, ..}], [src]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct TmaInst {
    /// The number of dimensions (the `.<n>d`), 1 ..= 5.
    pub rank: usize,
    /// From shared memory to the tensor (else into shared memory).
    pub store: bool,
    /// The box in shared memory: the destination of a load, the source of a store.
    pub smem: AddrSlot,
    /// The generic address of the tensor map.
    pub map: AddrSlot,
    /// The s32 coordinates of the box, `coords[..rank]`, innermost first.
    pub coords: [Slot; 5],
    /// The shared address of the `mbarrier` a load completes on (unused by a store).
    pub mbar: AddrSlot,
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

//! The PTX IR (virtual registers, labels, instructions) and its text form.
//!
//! Emission is table driven: a lowering rule ([`opcode`]) maps an operation and its types to
//! the text of an instruction form (`add.rn.f32`, `ld.global.nc.v4.f32`), which must be a row
//! of the instruction table (`pagesift-ptx-isa`); the row gives the lowest target and PTX ISA
//! version ([`requirement`]). An operation with no rule, or a text with no row, is a hard
//! error, never a guess.

use crate::check::{AtomKind, MmaType, ShflKind, VoteKind};
use crate::types::{RegClass, Scalar};
use std::fmt::Write as _;

/// A virtual register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reg {
    pub class: RegClass,
    pub n: u32,
}

/// An instruction operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(Reg),
    /// An integer immediate.
    Int(i128),
    /// An f32 immediate, by its bits (`0f3F800000`).
    F32(u32),
    /// An f64 immediate, by its bits.
    F64(u64),
    /// A special register (`%tid.x`) or a symbol (a shared array, a parameter).
    Name(String),
    /// `[base+offset]`.
    Addr(Box<Operand>, i64),
    /// `{a, b, c, d}`.
    Vec(Vec<Operand>),
    /// A branch target.
    Label(u32),
    /// A tensor map's address with a box's coordinates: `[map, {x, y, z}]`.
    Tensor(Box<Operand>, Vec<Operand>),
    /// A destination and a predicate written beside it: `d|p` (`elect.sync`; `_` discards).
    Pair(Box<Operand>, Box<Operand>),
}

/// Binary operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinKind {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Min,
    Max,
    MulHi,
    CopySign,
}

/// Unary operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnKind {
    Neg,
    Not,
    Abs,
    Sqrt,
    SqrtApprox,
    RsqrtApprox,
    Rcp,
    RcpApprox,
    RcpApproxFtz,
    Ex2Approx,
    Ex2ApproxFtz,
    Lg2Approx,
    TanhApprox,
    SinApprox,
    CosApprox,
    Floor,
    Ceil,
    RoundEven,
    Trunc,
    Popc,
    Clz,
}

/// Comparisons of `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpKind {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Unordered not-equal (floats: true when either side is NaN).
    Neu,
}

/// State spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Param,
}

/// The scope of a fence: the threads whose accesses it orders against the fencing thread's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceScope {
    /// The thread block (`.cta`).
    Block,
    /// The whole device (`.gpu`).
    Device,
    /// The device, the host and peer devices (`.sys`).
    System,
}

impl FenceScope {
    /// The PTX scope qualifier.
    pub fn ptx(self) -> &'static str {
        match self {
            FenceScope::Block => "cta",
            FenceScope::Device => "gpu",
            FenceScope::System => "sys",
        }
    }

    /// Every scope.
    #[cfg(test)]
    pub const ALL: [FenceScope; 3] = [FenceScope::Block, FenceScope::Device, FenceScope::System];
}

/// An operation; its types select the instruction form.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Mov(Scalar),
    /// `mov.b{bits}`: moves bits between register classes, packs and unpacks vectors.
    MovBits(u32),
    Bin(BinKind, Scalar),
    Un(UnKind, Scalar),
    Fma(Scalar),
    Setp(CmpKind, Scalar),
    /// `testp.notanumber`.
    IsNan(Scalar),
    Selp(Scalar),
    Cvt {
        to: Scalar,
        from: Scalar,
    },
    /// `ty` is the memory type (`Scalar::mem`), `vec` 1, 2 or 4.
    Ld {
        space: Space,
        ty: Scalar,
        vec: u8,
        nc: bool,
    },
    St {
        space: Space,
        ty: Scalar,
        vec: u8,
    },
    Atom {
        space: Space,
        kind: AtomKind,
        ty: Scalar,
    },
    Shfl(ShflKind),
    Vote(VoteKind),
    /// `elect.sync d|p, mask`: the lowest lane of the mask elected, `p` true in it alone.
    Elect,
    BarSync,
    /// `bar.warp.sync mask`.
    BarWarpSync,
    /// `fence.sc.<scope>` (`sc`) or `fence.acq_rel.<scope>`.
    Fence {
        sc: bool,
        scope: FenceScope,
    },
    /// `ld.acquire.gpu.global` of one element; `ty` is the memory type.
    LdAcquire(Scalar),
    /// `st.release.gpu.global` of one element; `ty` is the memory type.
    StRelease(Scalar),
    /// `dp4a.<a>.<b>`: the dot product of the four bytes of `a` and `b`, plus `c`.
    Dp4a {
        a_signed: bool,
        b_signed: bool,
    },
    /// `prmt.b32` (default mode).
    Prmt,
    /// `lop3.b32 d, a, b, c, lut`: any bitwise function of three words, `lut` its truth
    /// table (the function's value on `a = 0xF0`, `b = 0xCC`, `c = 0xAA`).
    Lop3,
    /// `cvt.rn.f16x2.f32 d, hi, lo` / `cvt.rn.bf16x2.f32`: two f32 rounded into one packed pair.
    CvtPack(Scalar),
    Bra,
    Ret,
    CvtaGlobal,
    MulWide {
        signed: bool,
    },
    Bfe {
        signed: bool,
    },
    Bfi,
    /// `cp.async.{ca,cg}.shared.global [dst], [src], bytes[, src_bytes]` (`.cg` for 16 bytes).
    CpAsync {
        bytes: u32,
    },
    CpAsyncCommit,
    CpAsyncWait,
    /// `prefetch.global.L2 [a]`: the line holding `a` brought into L2 (no result).
    PrefetchL2,
    /// `ldmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16`.
    Ldmatrix {
        n: u32,
        trans: bool,
    },
    /// `stmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16 [a], {r..}`.
    Stmatrix {
        n: u32,
        trans: bool,
    },
    /// `mma.sync.aligned.m16n8k{k}.row.col` with f32 (s32 for 8-bit) accumulators.
    Mma {
        ty: MmaType,
        k: u32,
    },
    /// `cvt.rna.tf32.f32`.
    CvtTf32,
    /// `wgmma.mma_async.sync.aligned.m64n{n}k{16|8}.f32.<ty>.<ty>` with both operands in
    /// shared memory (descriptors): its first operand, the accumulators, is read and written.
    Wgmma {
        ty: MmaType,
        n: u32,
    },
    /// `wgmma.fence.sync.aligned`.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned N`.
    WgmmaWait,
    /// `fence.proxy.async.shared::cta`: the thread's shared-memory writes made visible to the
    /// asynchronous proxy (`wgmma`, TMA).
    FenceProxyAsync,
    /// `setmaxnreg.{inc|dec}.sync.aligned.u32 N` (`inc`: raise, else lower): the warpgroup's
    /// registers per thread become `N`.
    SetMaxNReg {
        inc: bool,
    },
    /// `mbarrier.init.shared::cta.b64 [a], count`.
    MbarInit,
    /// `mbarrier.arrive.shared::cta.b64 state, [a]`.
    MbarArrive,
    /// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [a]`.
    MbarArriveCpAsync,
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 state, [a], bytes`.
    MbarArriveTx,
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [a], parity`: whether the phase of that
    /// parity has completed (waiting a while for it first).
    MbarTryWait,
    /// `cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    /// [dst], [map, {x, y, z}], [bar]`.
    TmaLoad,
    /// `cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [map, {x, y, z}], [src]`.
    TmaStore,
    /// `cp.async.bulk.commit_group`: the thread's bulk copies since the last one as a group.
    BulkCommit,
    /// `cp.async.bulk.wait_group{.read} N`: until at most `N` of the thread's bulk groups are
    /// pending (`read`: have their shared sources still to read).
    BulkWait {
        read: bool,
    },
    /// `cvta.param.u64`: the generic address of a kernel parameter.
    CvtaParam,
    /// `prefetch.tensormap [a]`: a tensor map brought into the cache (a hint).
    PrefetchTensormap,
    /// One instruction spliced by `asm!`: `pieces[i]` is the text before operand `args[i]`
    /// (one more piece than operands), `outs[i]` whether `args[i]` is written.
    Asm {
        pieces: Vec<String>,
        outs: Vec<bool>,
    },
}

/// An instruction or a label.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Inst {
        pred: Option<(Reg, bool)>,
        op: Op,
        args: Vec<Operand>,
    },
    Label(u32),
}

/// A kernel parameter's PTX type.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: String,
    pub ty: &'static str,
    /// A parameter struct's blob: `.param .align A .b8 name[bytes]` (then `ty` is `b8`).
    pub blob: Option<(u32, u32)>,
}

/// A static shared array of a kernel: its symbol, its bytes (a multiple of 16) and whether
/// its elements are 8-byte words (`u64` / `i64`: `mbarrier` objects and the like, which no
/// `wgmma` or TMA tile is made of, so that they align on 16 bytes where the kernel's tiles
/// align on 1024).
#[derive(Clone, Debug)]
pub struct SharedArray {
    pub name: String,
    pub bytes: u32,
    pub words: bool,
}

/// One kernel entry, ready to print.
#[derive(Clone, Debug)]
pub struct Function {
    pub entry: String,
    pub target: String,
    pub ptx_version: (u32, u32),
    pub block: [u32; 3],
    pub min_blocks: u32,
    pub max_regs: Option<u32>,
    pub params: Vec<ParamDecl>,
    /// Static shared arrays.
    pub shared: Vec<SharedArray>,
    /// The dynamic shared array's symbol.
    pub dyn_shared: Option<String>,
    pub body: Vec<Item>,
    pub reg_counts: Vec<(RegClass, u32)>,
    /// The `.func`s its calls reach, printed before it.
    pub funcs: Vec<DevFunc>,
}

/// A `.func` of a `#[noinline]` helper: parameters and result passed in registers of the
/// given names.
#[derive(Clone, Debug)]
pub struct DevFunc {
    pub name: String,
    pub params: Vec<(String, Scalar)>,
    pub ret: Option<(String, Scalar)>,
    pub body: Vec<Item>,
}

fn operand(o: &Operand, out: &mut String) {
    match o {
        Operand::Reg(r) => {
            let _ = write!(out, "{}{}", r.class.decl().1, r.n);
        }
        Operand::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Operand::F32(bits) => {
            let _ = write!(out, "0f{bits:08X}");
        }
        Operand::F64(bits) => {
            let _ = write!(out, "0d{bits:016X}");
        }
        Operand::Name(n) => out.push_str(n),
        Operand::Addr(base, off) => {
            out.push('[');
            operand(base, out);
            // nvcc's spelling for negative offsets is `[%rd1+-4]`.
            if *off != 0 {
                let _ = write!(out, "+{off}");
            }
            out.push(']');
        }
        Operand::Vec(items) => {
            out.push('{');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                operand(it, out);
            }
            out.push('}');
        }
        Operand::Label(l) => {
            let _ = write!(out, "$L__BB{l}");
        }
        Operand::Tensor(map, coords) => {
            out.push('[');
            operand(map, out);
            out.push_str(", ");
            operand(&Operand::Vec(coords.clone()), out);
            out.push(']');
        }
        Operand::Pair(d, p) => {
            operand(d, out);
            out.push('|');
            operand(p, out);
        }
    }
}

/// The text of one instruction (without indentation or newline).
pub fn inst_text(pred: &Option<(Reg, bool)>, op: &Op, args: &[Operand]) -> Result<String, String> {
    let mut s = String::new();
    if let Some((p, neg)) = pred {
        let _ = write!(
            s,
            "@{}{}{} ",
            if *neg { "!" } else { "" },
            p.class.decl().1,
            p.n
        );
    }
    if let Op::Asm { pieces, .. } = op {
        let mut text = String::new();
        for (i, piece) in pieces.iter().enumerate() {
            text.push_str(piece);
            if let Some(a) = args.get(i) {
                operand(a, &mut text);
            }
        }
        s.push_str(text.trim().trim_end_matches(';'));
        s.push(';');
        return Ok(s);
    }
    s.push_str(&opcode(op)?);
    for (i, a) in args.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { ", " });
        operand(a, &mut s);
    }
    s.push(';');
    Ok(s)
}

/// The complete PTX module text of one function.
pub fn emit_module(f: &Function) -> Result<String, String> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "//\n// Generated by ptx_kernel! (pagesift-ptx-macros)\n//\n"
    );
    let _ = writeln!(s, ".version {}.{}", f.ptx_version.0, f.ptx_version.1);
    let _ = writeln!(s, ".target {}", f.target);
    let _ = writeln!(s, ".address_size 64\n");
    // `wgmma` reads 128-byte swizzled tiles, whose pattern follows the address bits of a
    // 1024-byte atom: their arrays start on one.
    // The tensor memory accelerator writes boxes at 128-byte aligned addresses, swizzled on
    // the same address bits.
    let wgmma = f.body.iter().any(|i| {
        matches!(
            i,
            Item::Inst {
                op: Op::Wgmma { .. } | Op::TmaLoad | Op::TmaStore,
                ..
            }
        )
    });
    let align = if wgmma { 1024 } else { 16 };
    if let Some(d) = &f.dyn_shared {
        let _ = writeln!(s, ".extern .shared .align {align} .b8 {d}[];\n");
    }
    for d in &f.funcs {
        let reg =
            |(name, ty): &(String, Scalar)| format!(".reg .{} {name}", ty.reg_class().decl().0);
        let _ = write!(s, ".func ");
        if let Some(r) = &d.ret {
            let _ = write!(s, "({}) ", reg(r));
        }
        let params: Vec<String> = d.params.iter().map(reg).collect();
        let _ = writeln!(s, "{}({})\n{{", d.name, params.join(", "));
        body_text(&mut s, &f.reg_counts, &[], 16, &d.body)?;
        s.push('\n');
    }
    let _ = write!(s, ".visible .entry {}(", f.entry);
    for (i, p) in f.params.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = match p.blob {
            Some((align, bytes)) => {
                write!(s, "{sep}\n\t.param .align {align} .b8 {}[{bytes}]", p.name)
            }
            None => write!(s, "{sep}\n\t.param .{} {}", p.ty, p.name),
        };
    }
    let _ = writeln!(s, "\n)");
    let [x, y, z] = f.block;
    let _ = writeln!(s, ".reqntid {x}, {y}, {z}");
    // Without a blocks-per-SM bound ptxas aims at full occupancy for the block size and spills
    // beyond its register budget; the bound states what the kernel actually needs.
    let _ = writeln!(s, ".minnctapersm {}", f.min_blocks);
    if let Some(r) = f.max_regs {
        let _ = writeln!(s, ".maxnreg {r}");
    }
    let _ = writeln!(s, "{{");
    body_text(&mut s, &f.reg_counts, &f.shared, align, &f.body)?;
    Ok(s)
}

/// A function's body after its `{`: register declarations, shared arrays, instructions,
/// and the closing `}`.
fn body_text(
    s: &mut String,
    reg_counts: &[(RegClass, u32)],
    shared: &[SharedArray],
    align: u32,
    body: &[Item],
) -> Result<(), String> {
    for (class, n) in reg_counts {
        if *n > 0 {
            let (ty, prefix) = class.decl();
            let _ = writeln!(s, "\t.reg .{ty} {prefix}<{}>;", n + 1);
        }
    }
    for a in shared {
        let align = if a.words { 16 } else { align };
        let _ = writeln!(s, "\t.shared .align {align} .b8 {}[{}];", a.name, a.bytes);
    }
    s.push('\n');
    for item in body {
        match item {
            Item::Label(l) => {
                let _ = writeln!(s, "$L__BB{l}:");
            }
            Item::Inst { pred, op, args } => {
                let _ = writeln!(s, "\t{}", inst_text(pred, op, args)?);
            }
        }
    }
    let _ = writeln!(s, "}}");
    Ok(())
}

mod rules;

pub use rules::{available, opcode, requirement, requires_arch};

#[cfg(test)]
mod tests;

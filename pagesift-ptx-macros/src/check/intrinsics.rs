//! The intrinsic table: free functions, methods on scalars, memory methods on slices and shared
//! arrays, and helper calls (inlined). New instruction families (`cp.async`, `ldmatrix`,
//! `mma.sync`, `wgmma`) slot in as further `Intr` / `MemOp` entries with a typing rule here and
//! an emission rule in `lower` and `ptx`.

use super::checker::{err_expr, Binding, Checker};
use super::inline::HelperArg;
use super::{TExpr, TKind};
use crate::ctxt::Sp as Span;
use crate::parse::{Expr, ExprKind};
use crate::ptx::{self, FenceScope, Op, UnKind};
use crate::types::{ConstVal, Scalar, Ty};

/// PTX special registers read as `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// `%tid.{x,y,z}`.
    Tid(u8),
    /// `%ctaid.{x,y,z}`.
    Ctaid(u8),
    /// `%nctaid.{x,y,z}`.
    Nctaid(u8),
    /// `%laneid`.
    LaneId,
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflKind {
    Bfly,
    Down,
    Up,
    Idx,
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteKind {
    All,
    Any,
    Ballot,
}

/// Atomic read-modify-write operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomKind {
    Add,
    Min,
    Max,
    Exch,
    Cas,
    And,
    Or,
    Xor,
}

impl AtomKind {
    /// The method name (`atomic_add`) and the PTX operation (`add`).
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            AtomKind::Add => ("atomic_add", "add"),
            AtomKind::Min => ("atomic_min", "min"),
            AtomKind::Max => ("atomic_max", "max"),
            AtomKind::Exch => ("atomic_exch", "exch"),
            AtomKind::Cas => ("atomic_cas", "cas"),
            AtomKind::And => ("atomic_and", "and"),
            AtomKind::Or => ("atomic_or", "or"),
            AtomKind::Xor => ("atomic_xor", "xor"),
        }
    }

    /// Every atomic operation.
    pub const ALL: [AtomKind; 8] = [
        AtomKind::Add,
        AtomKind::Min,
        AtomKind::Max,
        AtomKind::Exch,
        AtomKind::Cas,
        AtomKind::And,
        AtomKind::Or,
        AtomKind::Xor,
    ];

    /// Whether the operation exists for elements of type `s`.
    pub fn supports(self, s: Scalar) -> bool {
        use Scalar::*;
        match self {
            AtomKind::Add => matches!(s, U32 | I32 | U64 | F32 | F64 | F16 | Bf16 | F16x2 | Bf16x2),
            AtomKind::Min | AtomKind::Max => matches!(s, U32 | I32 | U64 | I64),
            AtomKind::Exch => matches!(s, U32 | I32 | U64 | I64 | F32),
            AtomKind::Cas | AtomKind::And | AtomKind::Or | AtomKind::Xor => {
                matches!(s, U32 | I32 | U64 | I64)
            }
        }
    }
}

/// Memory intrinsics on a slice or shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOp {
    /// `x.load_nc(i)`: one element through the non-coherent (read-only) cache.
    LoadNc,
    /// `x.load_acquire(i)`: one element of a global slice, an acquire load at device scope.
    LoadAcquire,
    /// `y.store_release(i, v)`: one element of a global slice, a release store at device scope.
    StoreRelease,
    /// `x.load4(i)`: `n` consecutive elements from element `i` in one access.
    LoadVec { n: u32, nc: bool },
    /// `y.store4(i, v)`.
    StoreVec { n: u32 },
    /// `y.atomic_add(i, v)` and friends; the old value is returned.
    Atomic(AtomKind),
    /// `tile.cp_async16(i, x, j)`: an asynchronous copy of `bytes` from `x[j..]` to
    /// `tile[i..]` (sm_80); `partial` takes the source byte count (the rest is zero-filled).
    CpAsync { bytes: u32, partial: bool },
    /// `tile.ldmatrix_x4(i)`: `n` 8x8 matrices of 16-bit elements for `mma` (sm_75).
    Ldmatrix { n: u32, trans: bool },
    /// `tile.stmatrix_x4(i, v)`: `n` 8x8 matrices of 16-bit elements from the warp's
    /// registers (each lane's `v`, laid out as `ldmatrix` would load them) to the rows whose
    /// addresses the lanes give (sm_90).
    Stmatrix { n: u32, trans: bool },
    /// `x.prefetch_l2(i)`: the line holding element `i` of a global slice brought into L2
    /// (a hint: no result, no ordering).
    PrefetchL2,
    /// `x.len()`: the slice's length in elements (`u64`, a kernel parameter).
    Len,
    /// `x.is_aligned(i, B)`: whether the address of element `i` is a multiple of `B` bytes
    /// (`bool`; a dominating test proves vector accesses aligned, `lower/bounds.rs`).
    IsAligned(u32),
    /// `tile.wgmma_desc(i, k, rows)`: the `wgmma` descriptor of `rows` rows of 128 bytes
    /// (128-byte swizzle, 8-row groups 1024 bytes apart) from the row starting at element `i`,
    /// at element `k` of each row (known after unrolling: a multiple of 32 bytes within the
    /// row); `i .. i + rows · 128 / size_of::<T>()` is bounds-checked.
    WgmmaDesc { rows: u32 },
    /// `tile.tma_load(i, map, x, y, z, bars, j)`: the box of the tensor map `map` at
    /// coordinates `(x, y, z)` into `tile[i ..]`, completing on the `mbarrier` `bars[j]` by its
    /// bytes (sm_90). `i` rounds down to a multiple of 128 bytes (a fault when it was not one).
    TmaLoad,
    /// `tile.tma_store(i, map, x, y, z)`: `tile[i ..]`, the box of the tensor map `map` (a
    /// `TensorMapMut`), into its tensor at coordinates `(x, y, z)` (the part outside the tensor
    /// is not written), in the thread's current bulk async-group (sm_90). `i` rounds down to a
    /// multiple of 128 bytes (a fault when it was not one).
    TmaStore,
    /// The `mbarrier` operations on a `Shared<[u64; N]>` element.
    Mbar(MbarOp),
    /// `x.get_unchecked(i)`: `x[i]` without the bounds check (in `unsafe` only).
    Get,
    /// `y.set_unchecked(i, v)`: `y[i] = v` without the bounds check (in `unsafe` only).
    Set,
    /// `bytes.read::<T>(off)`: a `T` from the bytes `off..off + size_of::<T>()` of byte data;
    /// `bytes.read::<[T; N]>(off)` (`Read(T, N)`): `N` of them in one vector access (4, 8 or 16
    /// bytes, aligned to its size).
    Read(Scalar, u32),
}

/// An operation on an `mbarrier` object (`bars[j]`, 8 bytes of shared memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarOp {
    /// `bars.mbar_init(j, count)`: a phase completes after `count` arrivals.
    Init,
    /// `bars.mbar_arrive(j)`: one arrival.
    Arrive,
    /// `bars.mbar_arrive_expect_tx(j, bytes)`: the phase also waits for `bytes` more of
    /// asynchronous copies; then one arrival.
    ArriveExpectTx,
    /// `bars.mbar_wait(j, parity)`: waits until the phase of parity `parity` (0 or 1) has
    /// completed.
    Wait,
    /// `bars.mbar_arrive_cp_async(j)`: one arrival, made once the thread's `cp.async` copies
    /// issued before it have landed (the phase's count includes it).
    ArriveCpAsync,
}

impl MbarOp {
    /// The method's name and its arguments after the index.
    pub fn method(self) -> (&'static str, usize) {
        match self {
            MbarOp::Init => ("mbar_init", 1),
            MbarOp::Arrive => ("mbar_arrive", 0),
            MbarOp::ArriveExpectTx => ("mbar_arrive_expect_tx", 1),
            MbarOp::Wait => ("mbar_wait", 1),
            MbarOp::ArriveCpAsync => ("mbar_arrive_cp_async", 0),
        }
    }

    pub const ALL: [MbarOp; 5] = [
        MbarOp::Init,
        MbarOp::Arrive,
        MbarOp::ArriveExpectTx,
        MbarOp::Wait,
        MbarOp::ArriveCpAsync,
    ];
}

/// The operand types of `mma.sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaType {
    Tf32,
    F16,
    Bf16,
    S8,
    U8,
}

impl MmaType {
    /// The PTX type name.
    pub fn ptx(self) -> &'static str {
        match self {
            MmaType::Tf32 => "tf32",
            MmaType::F16 => "f16",
            MmaType::Bf16 => "bf16",
            MmaType::S8 => "s8",
            MmaType::U8 => "u8",
        }
    }

    /// The `mma_m16n8k*_*` intrinsics: (name, type, k, A registers, B registers).
    pub const SHAPES: [(&'static str, MmaType, u32, u32, u32); 10] = [
        ("mma_m16n8k4_tf32", MmaType::Tf32, 4, 2, 1),
        ("mma_m16n8k8_tf32", MmaType::Tf32, 8, 4, 2),
        ("mma_m16n8k8_f16", MmaType::F16, 8, 2, 1),
        ("mma_m16n8k16_f16", MmaType::F16, 16, 4, 2),
        ("mma_m16n8k8_bf16", MmaType::Bf16, 8, 2, 1),
        ("mma_m16n8k16_bf16", MmaType::Bf16, 16, 4, 2),
        ("mma_m16n8k16_s8", MmaType::S8, 16, 2, 1),
        ("mma_m16n8k32_s8", MmaType::S8, 32, 4, 2),
        ("mma_m16n8k16_u8", MmaType::U8, 16, 2, 1),
        ("mma_m16n8k32_u8", MmaType::U8, 32, 4, 2),
    ];
}

/// Value intrinsics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intr {
    Special(Special),
    /// The warp index within the block: linear thread index / 32.
    WarpId,
    SyncThreads,
    /// `sync_warp()` / `sync_warp_mask(m)`: `bar.warp.sync` (the full warp without a mask).
    SyncWarp,
    /// `fence_device()` and friends: `fence.sc` (`sc`) or `fence.acq_rel` at a scope.
    Fence {
        sc: bool,
        scope: FenceScope,
    },
    Shfl(ShflKind),
    Vote(VoteKind),
    /// `elect_one()`: `elect.sync` over the whole warp, true in one lane (the lowest).
    Elect,
    Abs,
    Min,
    Max,
    Fma,
    Sqrt,
    SqrtFast,
    RsqrtFast,
    Recip,
    RecipFast,
    RecipFastFtz,
    Exp2Fast,
    Exp2FastFtz,
    Log2Fast,
    TanhFast,
    SinFast,
    CosFast,
    Floor,
    Ceil,
    RoundEven,
    Trunc,
    IsNan,
    CopySign,
    MulHi,
    Popc,
    Clz,
    /// Reinterprets the bits of the argument as the result type.
    BitCast,
    /// `f16x2::new(lo, hi)`.
    Pack,
    /// `f16x2::from_f32s(lo, hi)`: two f32 rounded to the halves of a pair.
    PackF32,
    /// `a.dp4a(b, c)`: `c` plus the dot product of the four bytes of `a` and `b`.
    Dp4a,
    /// `a.prmt(b, sel)`: byte permute of `{b, a}` (`prmt.b32`).
    Prmt,
    /// `a.lop3(b, c, LUT)`: the bitwise function of truth table `LUT` (a constant below 256)
    /// of three words (`lop3.b32`).
    Lop3(u8),
    /// `x.to_tf32()`: f32 rounded to tf32 (`cvt.rna.tf32.f32`), as its 32 bits.
    ToTf32,
    /// `mma_m16n8kK_T(a, b, c)`: one warp-wide `mma.sync` (row-major A, column-major B).
    Mma {
        ty: MmaType,
        k: u32,
    },
    CpAsyncCommit,
    /// `cp_async_wait(N)`: wait until at most N groups are pending.
    CpAsyncWait(u32),
    /// `acc = wgmma_bf16(acc, a, b, accumulate)`: one warpgroup-wide asynchronous
    /// `64 × n × k` product of the descriptors `a` and `b` into the accumulators, in place;
    /// with `a_regs`, `a` is the thread's `[u32; 4]` fragment of A in registers.
    Wgmma {
        ty: MmaType,
        n: u32,
        a_regs: bool,
    },
    WgmmaFence,
    WgmmaCommit,
    /// `wgmma_wait(N)`: wait until at most N `wgmma` groups are pending.
    WgmmaWait(u32),
    FenceProxyAsync,
    /// `setmaxnreg_inc(N)` / `setmaxnreg_dec(N)`: the warpgroup's registers per thread
    /// raised / lowered to `N`.
    SetMaxNReg {
        inc: bool,
        n: u32,
    },
    /// `prefetch_tensormap(map)`: the tensor map brought into the cache (a hint).
    PrefetchTensormap,
    /// `bulk_commit()`: the thread's TMA stores since the last one as a bulk async-group.
    BulkCommit,
    /// `bulk_wait(N)` / `bulk_wait_read(N)`: wait until at most `N` of the thread's bulk
    /// groups are pending (`read`: still to read their shared memory).
    BulkWait {
        read: bool,
        n: u32,
    },
    Lo,
    Hi,
}

fn scalar_of(t: &TExpr) -> Option<Scalar> {
    match t.ty {
        Ty::Scalar(s) => Some(s),
        _ => None,
    }
}

/// The range of `setmaxnreg`'s registers per thread (a multiple of 8).
const SETMAXNREG_MIN: u32 = 24;
const SETMAXNREG_MAX: u32 = 256;

/// The intrinsic functions called by name (a helper may not take one of these names).
const INTRINSIC_FNS: &[&str] = &[
    "cp_async_commit",
    "cp_async_wait_all",
    "cp_async_wait",
    "wgmma_fence",
    "wgmma_commit",
    "wgmma_wait",
    "wgmma_f16",
    "wgmma_bf16",
    "wgmma_tf32",
    "fence_proxy_async",
    "setmaxnreg_inc",
    "setmaxnreg_dec",
    "elect_one",
    "prefetch_tensormap",
    "bulk_commit",
    "bulk_wait",
    "bulk_wait_read",
    "lane_id",
    "warp_id",
    "warp_size",
    "num_warps",
    "sync_threads",
    "shfl_xor",
    "shfl_down",
    "shfl_up",
    "shfl_idx",
    "vote_all",
    "vote_any",
    "vote_ballot",
    "size_of",
    "sync_warp",
    "sync_warp_mask",
    "fence_block",
    "fence_device",
    "fence_system",
    "fence_acq_rel_block",
    "fence_acq_rel_device",
    "fence_acq_rel_system",
];

/// Whether `name` is the name of an intrinsic function.
pub fn is_intrinsic(name: &str) -> bool {
    let special = ["thread_idx_", "block_idx_", "block_dim_", "grid_dim_"]
        .iter()
        .any(|p| matches!(name.strip_prefix(p), Some("x" | "y" | "z")));
    special || INTRINSIC_FNS.contains(&name) || MmaType::SHAPES.iter().any(|s| s.0 == name)
}

impl Checker<'_> {
    pub(super) fn intr(&self, intr: Intr, args: Vec<TExpr>, ty: Ty, span: Span) -> TExpr {
        TExpr {
            kind: TKind::Intr { intr, args },
            ty,
            span,
        }
    }

    pub(super) fn arity(&self, args: &[Expr], n: usize, what: &str, span: Span) -> bool {
        if args.len() != n {
            self.cx.error(
                span,
                format!("`{what}` takes {n} argument(s), {} given", args.len()),
            );
            return false;
        }
        true
    }

    /// The type of the array or slice `e` names, reporting nothing.
    fn place_base_quiet(&self, e: &Expr) -> Option<Ty> {
        match &e.kind {
            ExprKind::Var(n) => match self.lookup(&n.to_string()) {
                Some(Binding::Var(id)) => Some(self.vars[id].ty.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    pub(super) fn check_call(
        &mut self,
        func: &[syn::Ident],
        generics: &[Expr],
        args: &[Expr],
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        let u32t = Ty::Scalar(Scalar::U32);
        let names: Vec<String> = func.iter().map(|i| i.to_string()).collect();
        if names.len() == 2 {
            if let Some(s) = Scalar::from_name(&names[0]) {
                return self.check_assoc_fn(s, &names[1], args, span);
            }
        }
        let name = names.join("::");
        let dim = |suffix: &str| -> Option<u8> {
            match suffix {
                "x" => Some(0),
                "y" => Some(1),
                "z" => Some(2),
                _ => None,
            }
        };
        let special = |n: &str| -> Option<(&str, u8)> {
            for prefix in ["thread_idx_", "block_idx_", "block_dim_", "grid_dim_"] {
                if let Some(d) = n.strip_prefix(prefix).and_then(dim) {
                    return Some((prefix, d));
                }
            }
            None
        };
        if let Some((prefix, d)) = special(&name) {
            if !self.arity(args, 0, &name, span) {
                return err_expr(span);
            }
            return match prefix {
                "thread_idx_" => self.intr(Intr::Special(Special::Tid(d)), vec![], u32t, span),
                "block_idx_" => self.intr(Intr::Special(Special::Ctaid(d)), vec![], u32t, span),
                "grid_dim_" => self.intr(Intr::Special(Special::Nctaid(d)), vec![], u32t, span),
                // The block shape is fixed per variant (`.reqntid`), so its size is a constant.
                _ => TExpr {
                    kind: TKind::Const(ConstVal::Int(self.block[d as usize] as i128)),
                    ty: u32t,
                    span,
                },
            };
        }
        if let Some(&(_, ty, k, na, nb)) = MmaType::SHAPES.iter().find(|s| s.0 == name) {
            return self.check_mma(&name, ty, k, na, nb, args, span);
        }
        match name.as_str() {
            "cp_async_commit" | "cp_async_wait_all" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                let (op, intr) = if name == "cp_async_commit" {
                    (Op::CpAsyncCommit, Intr::CpAsyncCommit)
                } else {
                    (Op::CpAsyncWait, Intr::CpAsyncWait(0))
                };
                self.needs_op(&op, &name, span);
                self.intr(intr, vec![], Ty::Unit, span)
            }
            "wgmma_fence" | "wgmma_commit" | "fence_proxy_async" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                let (op, intr) = match name.as_str() {
                    "wgmma_fence" => (Op::WgmmaFence, Intr::WgmmaFence),
                    "wgmma_commit" => (Op::WgmmaCommit, Intr::WgmmaCommit),
                    _ => (Op::FenceProxyAsync, Intr::FenceProxyAsync),
                };
                self.needs_op(&op, &name, span);
                self.intr(intr, vec![], Ty::Unit, span)
            }
            "prefetch_tensormap" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                self.needs_op(&Op::PrefetchTensormap, &name, span);
                let m = self.check_expr(&args[0], None);
                if !matches!(m.ty, Ty::TensorMap { .. } | Ty::Never) {
                    self.cx.error(
                        args[0].span,
                        format!(
                            "`prefetch_tensormap` takes a tensor map parameter, not `{}`",
                            m.ty
                        ),
                    );
                }
                self.intr(Intr::PrefetchTensormap, vec![m], Ty::Unit, span)
            }
            "wgmma_wait" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                self.needs_op(&Op::WgmmaWait, &name, span);
                let n = self
                    .const_u32(&args[0], "the number of pending groups")
                    .unwrap_or(0);
                self.intr(Intr::WgmmaWait(n), vec![], Ty::Unit, span)
            }
            "wgmma_f16" | "wgmma_bf16" | "wgmma_tf32" => {
                let ty = match name.as_str() {
                    "wgmma_f16" => MmaType::F16,
                    "wgmma_bf16" => MmaType::Bf16,
                    _ => MmaType::Tf32,
                };
                self.check_wgmma(&name, ty, args, span)
            }
            "setmaxnreg_inc" | "setmaxnreg_dec" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                let inc = name == "setmaxnreg_inc";
                self.needs_op(&Op::SetMaxNReg { inc }, &name, span);
                let n = self
                    .const_u32(&args[0], "the registers per thread")
                    .unwrap_or(SETMAXNREG_MIN);
                if !(SETMAXNREG_MIN..=SETMAXNREG_MAX).contains(&n) || n % 8 != 0 {
                    self.cx.error(
                        args[0].span,
                        format!(
                            "`{name}({n})`: the registers per thread are a multiple of 8 in {SETMAXNREG_MIN}..={SETMAXNREG_MAX}"
                        ),
                    );
                }
                let threads: u32 = self.block.iter().product();
                if threads % 128 != 0 {
                    self.cx.error(
                        span,
                        format!(
                            "`{name}` sets a warpgroup's registers: the block's {threads} threads are not whole warpgroups of 128"
                        ),
                    );
                }
                self.intr(Intr::SetMaxNReg { inc, n }, vec![], Ty::Unit, span)
            }
            "bulk_commit" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                self.needs_op(&Op::BulkCommit, &name, span);
                self.intr(Intr::BulkCommit, vec![], Ty::Unit, span)
            }
            "bulk_wait" | "bulk_wait_read" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                let read = name == "bulk_wait_read";
                self.needs_op(&Op::BulkWait { read }, &name, span);
                let n = self
                    .const_u32(&args[0], "the number of pending groups")
                    .unwrap_or(0);
                self.intr(Intr::BulkWait { read, n }, vec![], Ty::Unit, span)
            }
            "cp_async_wait" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                self.needs_op(&Op::CpAsyncWait, &name, span);
                let n = self
                    .const_u32(&args[0], "the number of pending groups")
                    .unwrap_or(0);
                self.intr(Intr::CpAsyncWait(n), vec![], Ty::Unit, span)
            }
            "lane_id" | "warp_id" | "warp_size" | "num_warps" | "sync_threads" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                let threads: u32 = self.block.iter().product();
                match name.as_str() {
                    "lane_id" => self.intr(Intr::Special(Special::LaneId), vec![], u32t, span),
                    "warp_id" => self.intr(Intr::WarpId, vec![], u32t, span),
                    "warp_size" => TExpr {
                        kind: TKind::Const(ConstVal::Int(32)),
                        ty: u32t,
                        span,
                    },
                    "num_warps" => TExpr {
                        kind: TKind::Const(ConstVal::Int(threads.div_ceil(32) as i128)),
                        ty: u32t,
                        span,
                    },
                    _ => self.intr(Intr::SyncThreads, vec![], Ty::Unit, span),
                }
            }
            "shfl_xor" | "shfl_down" | "shfl_up" | "shfl_idx" => {
                if !self.arity(args, 2, &name, span) {
                    return err_expr(span);
                }
                let kind = match name.as_str() {
                    "shfl_xor" => ShflKind::Bfly,
                    "shfl_down" => ShflKind::Down,
                    "shfl_up" => ShflKind::Up,
                    _ => ShflKind::Idx,
                };
                let v = self.check_expr(&args[0], expect);
                let l = self.check_expr(&args[1], Some(&u32t));
                self.expect_ty(&l, &u32t, args[1].span);
                match scalar_of(&v) {
                    // 16-bit values are widened, 64-bit ones moved as two 32-bit halves.
                    Some(s) if matches!(s.bytes(), 2 | 4 | 8) => {}
                    _ if v.ty == Ty::Never => return err_expr(span),
                    _ => {
                        self.cx.error(
                            args[0].span,
                            format!(
                                "warp shuffles move 16-, 32- or 64-bit values, not `{}`",
                                v.ty
                            ),
                        );
                        return err_expr(span);
                    }
                }
                let ty = v.ty.clone();
                self.intr(Intr::Shfl(kind), vec![v, l], ty, span)
            }
            "size_of" | "core::mem::size_of" | "std::mem::size_of" => {
                let _ = self.arity(args, 0, "size_of", span);
                let ty = match generics {
                    [Expr {
                        kind: ExprKind::Var(t),
                        ..
                    }] => Scalar::from_name(&t.to_string()),
                    _ => None,
                };
                match ty {
                    Some(t) => TExpr {
                        kind: TKind::Const(ConstVal::Int(t.bytes() as i128)),
                        ty: expect
                            .filter(|e| matches!(e, Ty::Scalar(s) if s.is_int() && !s.is_byte()))
                            .cloned()
                            .unwrap_or(u32t),
                        span,
                    },
                    None => {
                        self.cx.error(
                            span,
                            "`size_of` takes a scalar type: `size_of::<T>()`, `size_of::<f32>()`",
                        );
                        err_expr(span)
                    }
                }
            }
            "sync_warp" | "sync_warp_mask" => {
                let masked = name == "sync_warp_mask";
                if !self.arity(args, masked as usize, &name, span) {
                    return err_expr(span);
                }
                let mask = if masked {
                    let m = self.check_expr(&args[0], Some(&u32t));
                    self.expect_ty(&m, &u32t, args[0].span);
                    m
                } else {
                    TExpr {
                        kind: TKind::Const(ConstVal::Int(0xffff_ffff)),
                        ty: u32t,
                        span,
                    }
                };
                self.intr(Intr::SyncWarp, vec![mask], Ty::Unit, span)
            }
            "fence_block"
            | "fence_device"
            | "fence_system"
            | "fence_acq_rel_block"
            | "fence_acq_rel_device"
            | "fence_acq_rel_system" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                let sc = !name.starts_with("fence_acq_rel_");
                let scope = if name.ends_with("_block") {
                    FenceScope::Block
                } else if name.ends_with("_device") {
                    FenceScope::Device
                } else {
                    FenceScope::System
                };
                self.intr(Intr::Fence { sc, scope }, vec![], Ty::Unit, span)
            }
            "elect_one" => {
                if !self.arity(args, 0, &name, span) {
                    return err_expr(span);
                }
                self.needs_op(&Op::Elect, &name, span);
                self.intr(Intr::Elect, vec![], Ty::Scalar(Scalar::Bool), span)
            }
            "vote_all" | "vote_any" | "vote_ballot" => {
                if !self.arity(args, 1, &name, span) {
                    return err_expr(span);
                }
                let b = Ty::Scalar(Scalar::Bool);
                let p = self.check_expr(&args[0], Some(&b));
                self.expect_ty(&p, &b, args[0].span);
                let (kind, ty) = match name.as_str() {
                    "vote_all" => (VoteKind::All, b),
                    "vote_any" => (VoteKind::Any, b),
                    _ => (VoteKind::Ballot, u32t),
                };
                self.intr(Intr::Vote(kind), vec![p], ty, span)
            }
            _ => {
                let Some(f) = self.helper(&name) else {
                    let msg = match names.split_last() {
                        Some((last, lib)) if !lib.is_empty() => {
                            let lib = lib.join("::");
                            if self
                                .scope
                                .helpers
                                .keys()
                                .any(|k| k.starts_with(&format!("{lib}::")))
                            {
                                format!("no helper `{last}` in the library `{lib}`")
                            } else {
                                format!("unknown function `{name}`: no library `{lib}` (declare it with `#[path = \"..\"] mod {lib};`)")
                            }
                        }
                        _ => format!("unknown function or intrinsic `{name}`"),
                    };
                    self.cx.error(span, msg);
                    return err_expr(span);
                };
                let args: Vec<HelperArg<'_>> = args.iter().map(HelperArg::Expr).collect();
                self.inline_call(f, generics, args, span)
            }
        }
    }

    pub(super) fn check_assoc_fn(
        &mut self,
        s: Scalar,
        name: &str,
        args: &[Expr],
        span: Span,
    ) -> TExpr {
        match name {
            "from_bits" if !s.is_int() && s != Scalar::Bool => {
                if !self.arity(args, 1, &format!("{s}::from_bits"), span) {
                    return err_expr(span);
                }
                let want = Ty::Scalar(s.bits_uint());
                let x = self.check_expr(&args[0], Some(&want));
                self.expect_ty(&x, &want, args[0].span);
                self.intr(Intr::BitCast, vec![x], Ty::Scalar(s), span)
            }
            "new" if s.is_packed() => {
                if !self.arity(args, 2, &format!("{s}::new"), span) {
                    return err_expr(span);
                }
                let elem = Ty::Scalar(s.packed_elem().unwrap_or(Scalar::F16));
                let a = self.check_expr(&args[0], Some(&elem));
                let b = self.check_expr(&args[1], Some(&elem));
                self.expect_ty(&a, &elem, args[0].span);
                self.expect_ty(&b, &elem, args[1].span);
                self.intr(Intr::Pack, vec![a, b], Ty::Scalar(s), span)
            }
            "from_f32s" if s.is_packed() => {
                let what = format!("{s}::from_f32s");
                if !self.arity(args, 2, &what, span) {
                    return err_expr(span);
                }
                // f16x2 below sm_80 rounds each half on its own (the same result).
                if s == Scalar::Bf16x2 {
                    self.needs_op(&Op::CvtPack(s), &what, span);
                }
                let f = Ty::Scalar(Scalar::F32);
                let a = self.check_expr(&args[0], Some(&f));
                let b = self.check_expr(&args[1], Some(&f));
                self.expect_ty(&a, &f, args[0].span);
                self.expect_ty(&b, &f, args[1].span);
                self.intr(Intr::PackF32, vec![a, b], Ty::Scalar(s), span)
            }
            _ => {
                self.cx
                    .error(span, format!("unknown function `{s}::{name}`"));
                err_expr(span)
            }
        }
    }

    pub(super) fn check_method(
        &mut self,
        recv: &Expr,
        method: &syn::Ident,
        generics: &[Expr],
        args: &[Expr],
        expect: Option<&Ty>,
        span: Span,
    ) -> TExpr {
        let mut m = method.to_string();
        if let ExprKind::Var(name) = &recv.kind {
            if let Some(Binding::Opt(id)) = self.lookup(&name.to_string()) {
                if m == "is_some" || m == "is_none" {
                    let _ = self.arity(args, 0, &m, span);
                    let b = Ty::Scalar(Scalar::Bool);
                    // Known inside a test of it (`if let Some(..)`): a constant.
                    let kind = match self.opt_known.get(&id) {
                        Some(k) => TKind::Const(ConstVal::Bool(*k)),
                        None => TKind::IsSome(id),
                    };
                    let some = TExpr {
                        kind,
                        ty: b.clone(),
                        span,
                    };
                    if m == "is_some" {
                        return some;
                    }
                    return self.unary(crate::parse::UnOp::Not, some, span);
                }
            }
        }
        if m == "read" {
            return self.check_read(recv, generics, args, span);
        }
        // `load_vec::<B>` and friends: the vector access of B bytes of the element type.
        let vec_form = ["load_vec", "store_vec"]
            .iter()
            .find(|p| m.starts_with(*p))
            .copied();
        match (vec_form, generics) {
            (Some(prefix), [g]) => {
                let bytes = self.const_u32(g, "the bytes of a vector access");
                let elem = match self.place_base_quiet(recv) {
                    Some(Ty::Slice { elem, .. } | Ty::Shared { elem, .. }) => Some(elem),
                    _ => None,
                };
                if let (Some(b), Some(e)) = (bytes, elem) {
                    if !matches!(b, 4 | 8 | 16) || b % e.bytes() != 0 || b == e.bytes() {
                        self.cx.error(
                            g.span,
                            format!("a vector access moves 4, 8 or 16 bytes of at least two elements, not {b} bytes of `{e}`"),
                        );
                        return err_expr(span);
                    }
                    let n = b / e.bytes();
                    let rest = &m[prefix.len()..];
                    m = format!("{}{n}{rest}", &prefix[..prefix.len() - 4]);
                }
            }
            (Some(_), _) => {
                self.cx.error(
                    method.span(),
                    format!("`{m}` takes its size in bytes: `{m}::<16>(..)`"),
                );
                return err_expr(span);
            }
            (None, []) => {}
            (None, _) => {
                self.cx
                    .error(method.span(), "methods take no generic arguments");
                return err_expr(span);
            }
        }
        let method = &syn::Ident::new(&m, method.span());
        // Memory methods name their array; everything else is a method on a value.
        if let ExprKind::Var(name) = &recv.kind {
            if let Some(Binding::Var(id)) = self.lookup(&name.to_string()) {
                let ty = self.vars[id].ty.clone();
                if let Ty::Slice { elem, mutable } = ty {
                    if m == "len" {
                        let _ = self.arity(args, 0, "len", span);
                        return TExpr {
                            kind: TKind::Mem {
                                op: MemOp::Len,
                                base: id,
                                args: Vec::new(),
                                checked: true,
                            },
                            ty: Ty::Scalar(Scalar::U64),
                            span,
                        };
                    }
                    if m == "is_aligned" {
                        if !self.arity(args, 2, "is_aligned", span) {
                            return err_expr(span);
                        }
                        let idx = self.check_index(&args[0]);
                        let b = self.check_expr(&args[1], Some(&Ty::Scalar(Scalar::U32)));
                        let bytes = match &b.kind {
                            TKind::Const(ConstVal::Int(v)) if matches!(*v, 2 | 4 | 8 | 16) => {
                                *v as u32
                            }
                            _ => {
                                self.cx.error(
                                    args[1].span,
                                    "`is_aligned(i, B)` takes a constant alignment B of 2, 4, 8 or 16 bytes",
                                );
                                return err_expr(span);
                            }
                        };
                        return TExpr {
                            kind: TKind::Mem {
                                op: MemOp::IsAligned(bytes),
                                base: id,
                                args: vec![idx],
                                checked: true,
                            },
                            ty: Ty::Scalar(Scalar::Bool),
                            span,
                        };
                    }
                    return self.check_mem(id, elem, Some(mutable), &m, args, span);
                }
                if let Ty::Shared { elem, len, cols } = ty {
                    if m == "len" {
                        // Of a two-dimensional array its rows, as in Rust.
                        if let Some(n) = len.map(|n| n / cols.unwrap_or(1).max(1)) {
                            let _ = self.arity(args, 0, "len", span);
                            return TExpr {
                                kind: TKind::Const(ConstVal::Int(n as i128)),
                                ty: Ty::Scalar(Scalar::U32),
                                span,
                            };
                        }
                        self.cx.error(
                            span,
                            "the dynamic shared array has no length known at compile time",
                        );
                        return err_expr(span);
                    }
                    return self.check_mem(id, elem, None, &m, args, span);
                }
            }
        }
        let x = self.check_expr(
            recv,
            expect.filter(|_| !matches!(m.as_str(), "to_bits" | "is_nan")),
        );
        let Some(s) = scalar_of(&x) else {
            if x.ty != Ty::Never {
                self.cx
                    .error(method.span(), format!("no method `{m}` on `{}`", x.ty));
            }
            return err_expr(span);
        };
        if matches!(m.as_str(), "dp4a" | "prmt") {
            return self.check_byte_op(x, &m, args, span);
        }
        if m == "lop3" {
            return self.check_lop3(x, args, span);
        }
        let float = s.is_float();
        let f32_only = s == Scalar::F32;
        let rounding = s == Scalar::F32 || s == Scalar::F64;
        // The `tanh.approx` form exists from its table minimum on; below it `tanh_fast` is a formula.
        let tanh_approx = Op::Un(UnKind::TanhApprox, Scalar::F32);
        let (intr, n_args, ty) = match m.as_str() {
            "abs" if float || s.is_packed() || (s.is_signed() && !s.is_byte()) => {
                (Intr::Abs, 0, x.ty.clone())
            }
            "min" if s.is_arith() && !(s.is_int() && s.bytes() == 2) => {
                (Intr::Min, 1, x.ty.clone())
            }
            "max" if s.is_arith() && !(s.is_int() && s.bytes() == 2) => {
                (Intr::Max, 1, x.ty.clone())
            }
            "mul_add" | "fma" if float || s.is_packed() => (Intr::Fma, 2, x.ty.clone()),
            "sqrt" if rounding => (Intr::Sqrt, 0, x.ty.clone()),
            "recip" if rounding => (Intr::Recip, 0, x.ty.clone()),
            "floor" if rounding => (Intr::Floor, 0, x.ty.clone()),
            "ceil" if rounding => (Intr::Ceil, 0, x.ty.clone()),
            "round_ties_even" if rounding => (Intr::RoundEven, 0, x.ty.clone()),
            "trunc" if rounding => (Intr::Trunc, 0, x.ty.clone()),
            "copysign" if rounding => (Intr::CopySign, 1, x.ty.clone()),
            "is_nan" if rounding => (Intr::IsNan, 0, Ty::Scalar(Scalar::Bool)),
            "sqrt_fast" if f32_only => (Intr::SqrtFast, 0, x.ty.clone()),
            "rsqrt_fast" if f32_only => (Intr::RsqrtFast, 0, x.ty.clone()),
            "recip_fast" if f32_only => (Intr::RecipFast, 0, x.ty.clone()),
            "exp2_fast" if f32_only => (Intr::Exp2Fast, 0, x.ty.clone()),
            "recip_fast_ftz" if f32_only => (Intr::RecipFastFtz, 0, x.ty.clone()),
            "exp2_fast_ftz" if f32_only => (Intr::Exp2FastFtz, 0, x.ty.clone()),
            "log2_fast" if f32_only => (Intr::Log2Fast, 0, x.ty.clone()),
            "sin_fast" if f32_only => (Intr::SinFast, 0, x.ty.clone()),
            "cos_fast" if f32_only => (Intr::CosFast, 0, x.ty.clone()),
            "tanh_fast" if f32_only && ptx::available(&tanh_approx, self.target.sm) => {
                (Intr::TanhFast, 0, x.ty.clone())
            }
            "mul_hi" if s.is_int() && s.bytes() >= 2 && !s.is_byte() => {
                (Intr::MulHi, 1, x.ty.clone())
            }
            "count_ones" if s.is_int() && s.bytes() >= 4 => {
                (Intr::Popc, 0, Ty::Scalar(Scalar::U32))
            }
            "leading_zeros" if s.is_int() && s.bytes() >= 4 => {
                (Intr::Clz, 0, Ty::Scalar(Scalar::U32))
            }
            "to_tf32" if f32_only => {
                self.needs_op(&Op::CvtTf32, "to_tf32", span);
                (Intr::ToTf32, 0, Ty::Scalar(Scalar::U32))
            }
            "to_bits" if !s.is_int() && s != Scalar::Bool => {
                (Intr::BitCast, 0, Ty::Scalar(s.bits_uint()))
            }
            "lo" | "hi" if s.is_packed() => {
                let elem = Ty::Scalar(s.packed_elem().unwrap_or(Scalar::F16));
                (if m == "lo" { Intr::Lo } else { Intr::Hi }, 0, elem)
            }
            _ => {
                // Accurate special functions come from the built-in prelude (`__exp_f32`, ...).
                let helper = format!("__{m}_{s}");
                if let Some(f) = self.scope.helpers.get(&helper).copied() {
                    let mut hargs = vec![HelperArg::Checked(x)];
                    hargs.extend(args.iter().map(HelperArg::Expr));
                    return self.inline_call(f, &[], hargs, span);
                }
                let hint = if s.is_float() && s != Scalar::F32 {
                    " (convert to f32 first)"
                } else {
                    ""
                };
                self.cx
                    .error(method.span(), format!("no method `{m}` on `{s}`{hint}"));
                return err_expr(span);
            }
        };
        if !self.arity(args, n_args, &m, span) {
            return err_expr(span);
        }
        let mut targs = vec![x];
        for a in args {
            let t = self.check_expr(a, Some(&Ty::Scalar(s)));
            self.expect_ty(&t, &Ty::Scalar(s), a.span);
            targs.push(t);
        }
        self.intr(intr, targs, ty, span)
    }

    /// `a.lop3(b, c, LUT)`: `a`, `b` and `c` words of one type (`u32` or `i32`), `LUT` a
    /// constant truth table below 256 (`0xF0 & 0xCC | 0xAA` is `a & b | c`).
    fn check_lop3(&mut self, x: TExpr, args: &[Expr], span: Span) -> TExpr {
        if !matches!(x.ty, Ty::Scalar(Scalar::U32 | Scalar::I32)) {
            if x.ty != Ty::Never {
                self.cx.error(
                    x.span,
                    format!(
                        "`lop3` works on the bits of a `u32` or `i32`, not `{}`",
                        x.ty
                    ),
                );
            }
            return err_expr(span);
        }
        if !self.arity(args, 3, "lop3", span) {
            return err_expr(span);
        }
        let mut targs = vec![x.clone()];
        for a in &args[..2] {
            let t = self.check_expr(a, Some(&x.ty));
            self.expect_ty(&t, &x.ty, a.span);
            targs.push(t);
        }
        let lut = self.const_u32(&args[2], "the truth table of `lop3`");
        let lut = match lut {
            Some(v) if v < 256 => v as u8,
            Some(v) => {
                self.cx.error(
                    args[2].span,
                    format!("`lop3`'s truth table is 8 bits (below 256), not {v}"),
                );
                0
            }
            None => 0,
        };
        let ty = x.ty.clone();
        self.intr(Intr::Lop3(lut), targs, ty, span)
    }

    /// `a.dp4a(b, c)` and `a.prmt(b, sel)`: operations on the four bytes of 32-bit integers.
    fn check_byte_op(&mut self, x: TExpr, m: &str, args: &[Expr], span: Span) -> TExpr {
        let word = |t: &Ty| matches!(t, Ty::Scalar(Scalar::U32 | Scalar::I32));
        if !word(&x.ty) {
            self.cx.error(
                x.span,
                format!(
                    "`{m}` works on four bytes packed in a `u32` or `i32`, not `{}`",
                    x.ty
                ),
            );
            return err_expr(span);
        }
        if !self.arity(args, 2, m, span) {
            return err_expr(span);
        }
        let b = self.check_expr(&args[0], Some(&x.ty));
        if m == "prmt" {
            self.expect_ty(&b, &x.ty, args[0].span);
            let u = Ty::Scalar(Scalar::U32);
            let sel = self.check_expr(&args[1], Some(&u));
            self.expect_ty(&sel, &u, args[1].span);
            let ty = x.ty.clone();
            return self.intr(Intr::Prmt, vec![x, b, sel], ty, span);
        }
        if !word(&b.ty) {
            if b.ty != Ty::Never {
                self.cx.error(
                    args[0].span,
                    format!(
                        "`dp4a` multiplies four bytes packed in a `u32` or `i32`, not `{}`",
                        b.ty
                    ),
                );
            }
            return err_expr(span);
        }
        // The accumulator and the result are unsigned only when both byte vectors are.
        let acc = if x.ty == Ty::Scalar(Scalar::U32) && b.ty == Ty::Scalar(Scalar::U32) {
            Ty::Scalar(Scalar::U32)
        } else {
            Ty::Scalar(Scalar::I32)
        };
        let c = self.check_expr(&args[1], Some(&acc));
        self.expect_ty(&c, &acc, args[1].span);
        self.intr(Intr::Dp4a, vec![x, b, c], acc, span)
    }
}

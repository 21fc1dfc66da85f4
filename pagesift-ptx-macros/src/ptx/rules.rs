//! The emitter's lowering rules: an IR operation and its types -> the text of an instruction
//! form (`add.rn.f32`), whose row in the instruction table (`pagesift-ptx-isa`) gives the
//! lowest target and PTX ISA version it needs.

use super::{BinKind, CmpKind, Op, Space, UnKind};
use crate::check::{AtomKind, MmaType, ShflKind, VoteKind};
use crate::types::Scalar;
use pagesift_ptx_isa as isa;

fn mov_ty(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "pred",
        Scalar::F16 | Scalar::Bf16 | Scalar::I8 | Scalar::U8 => "b16",
        Scalar::F16x2 | Scalar::Bf16x2 => "b32",
        _ => s.ptx(),
    }
}

/// The instruction text of an operation (`add.rn.f32`) and its row of the instruction table,
/// or why there is none. `asm!` text has no row: it is the user's, and needs only the floor.
pub fn form(op: &Op) -> Result<(String, Option<&'static isa::Form>), String> {
    let text = lowering(op)?;
    if let Op::Asm { .. } = op {
        return Ok((text, None));
    }
    match isa::lookup(&text) {
        Some(row) => Ok((text, Some(row))),
        None => Err(format!(
            "`{text}` (for {op:?}) is not in the instruction table"
        )),
    }
}

/// The instruction text of an operation (`add.rn.f32`), or why there is none.
pub fn opcode(op: &Op) -> Result<String, String> {
    form(op).map(|(text, _)| text)
}

/// The lowest target (sm × 10) and PTX ISA version an operation needs: its table row's.
pub fn requirement(op: &Op) -> Result<(u32, (u32, u32)), String> {
    form(op).map(|(_, row)| row.map_or(isa::FLOOR, |r| (r.sm, r.ptx)))
}

/// Whether the form `op` lowers to exists only on an architecture-specific target
/// (`sm_90a`).
pub fn requires_arch(op: &Op) -> bool {
    form(op).is_ok_and(|(_, row)| row.is_some_and(|r| r.arch))
}

/// Whether `op` exists on target `sm` (× 10).
pub fn available(op: &Op, sm: u32) -> bool {
    requirement(op).is_ok_and(|(min, _)| min <= sm)
}

/// The lowering rule: the text of the form `op` becomes.
fn lowering(op: &Op) -> Result<String, String> {
    use Scalar::*;
    let no = || Err(format!("no PTX instruction rule for {op:?}"));
    let half = |s: Scalar| matches!(s, F16 | Bf16 | F16x2 | Bf16x2);
    Ok(match op {
        Op::Mov(s) => format!("mov.{}", mov_ty(*s)),
        Op::MovBits(b @ (16 | 32 | 64)) => format!("mov.b{b}"),
        Op::MovBits(_) => return no(),
        Op::Bin(k, s) => {
            let s = *s;
            let int = s.is_int() && !s.is_byte();
            let float = s.is_float() || s.is_packed();
            match k {
                BinKind::Add | BinKind::Sub => {
                    let n = if *k == BinKind::Add { "add" } else { "sub" };
                    if int {
                        format!("{n}.{}", s.ptx())
                    } else if matches!(s, F32 | F64) || half(s) {
                        // `.rn` everywhere: without it ptxas may contract a multiply and an
                        // add into one fma, and results would depend on the assembler.
                        format!("{n}.rn.{}", s.ptx())
                    } else {
                        return no();
                    }
                }
                BinKind::Mul if int => format!("mul.lo.{}", s.ptx()),
                BinKind::Mul if matches!(s, F32 | F64) || half(s) => format!("mul.rn.{}", s.ptx()),
                BinKind::Div if int => format!("div.{}", s.ptx()),
                BinKind::Div if matches!(s, F32 | F64) => format!("div.rn.{}", s.ptx()),
                BinKind::Rem if int => format!("rem.{}", s.ptx()),
                BinKind::And | BinKind::Or | BinKind::Xor if int || s == Bool => {
                    let n = match k {
                        BinKind::And => "and",
                        BinKind::Or => "or",
                        _ => "xor",
                    };
                    format!("{n}.{}", s.bits())
                }
                BinKind::Shl if int => format!("shl.{}", s.bits()),
                BinKind::Shr if int => format!("shr.{}", s.ptx()),
                BinKind::Min | BinKind::Max if (int && s.bytes() >= 4) || float => {
                    format!(
                        "{}.{}",
                        if *k == BinKind::Min { "min" } else { "max" },
                        s.ptx()
                    )
                }
                BinKind::MulHi if int => format!("mul.hi.{}", s.ptx()),
                BinKind::CopySign if matches!(s, F32 | F64) => format!("copysign.{}", s.ptx()),
                _ => return no(),
            }
        }
        Op::Un(k, s) => {
            let s = *s;
            let int = s.is_int() && !s.is_byte();
            let f32_only = s == F32;
            let rnd = matches!(s, F32 | F64);
            match k {
                UnKind::Neg if (int && s.is_signed()) || s.is_float() || s.is_packed() => {
                    format!("neg.{}", s.ptx())
                }
                UnKind::Not if int || s == Bool => format!("not.{}", s.bits()),
                UnKind::Abs if (int && s.is_signed()) || s.is_float() || s.is_packed() => {
                    format!("abs.{}", s.ptx())
                }
                UnKind::Sqrt if rnd => format!("sqrt.rn.{}", s.ptx()),
                UnKind::Rcp if rnd => format!("rcp.rn.{}", s.ptx()),
                UnKind::SqrtApprox if f32_only => "sqrt.approx.f32".into(),
                UnKind::RsqrtApprox if f32_only => "rsqrt.approx.f32".into(),
                UnKind::RcpApprox if f32_only => "rcp.approx.f32".into(),
                UnKind::RcpApproxFtz if f32_only => "rcp.approx.ftz.f32".into(),
                UnKind::Ex2Approx if f32_only => "ex2.approx.f32".into(),
                UnKind::Ex2ApproxFtz if f32_only => "ex2.approx.ftz.f32".into(),
                UnKind::Lg2Approx if f32_only => "lg2.approx.f32".into(),
                UnKind::TanhApprox if f32_only => "tanh.approx.f32".into(),
                UnKind::SinApprox if f32_only => "sin.approx.f32".into(),
                UnKind::CosApprox if f32_only => "cos.approx.f32".into(),
                UnKind::Floor if rnd => format!("cvt.rmi.{0}.{0}", s.ptx()),
                UnKind::Ceil if rnd => format!("cvt.rpi.{0}.{0}", s.ptx()),
                UnKind::RoundEven if rnd => format!("cvt.rni.{0}.{0}", s.ptx()),
                UnKind::Trunc if rnd => format!("cvt.rzi.{0}.{0}", s.ptx()),
                UnKind::Popc if int && s.bytes() >= 4 => format!("popc.{}", s.bits()),
                UnKind::Clz if int && s.bytes() >= 4 => format!("clz.{}", s.bits()),
                _ => return no(),
            }
        }
        Op::Fma(s) => match *s {
            F32 | F64 | F16 | Bf16 | F16x2 | Bf16x2 => format!("fma.rn.{}", s.ptx()),
            s if s.is_int() && !s.is_byte() => format!("mad.lo.{}", s.ptx()),
            _ => return no(),
        },
        Op::Setp(c, s) => {
            let s = *s;
            if !(s.is_float() || (s.is_int() && !s.is_byte())) {
                return no();
            }
            let c = match c {
                CmpKind::Eq => "eq",
                CmpKind::Ne if s.is_float() => return no(),
                CmpKind::Ne => "ne",
                CmpKind::Lt => "lt",
                CmpKind::Le => "le",
                CmpKind::Gt => "gt",
                CmpKind::Ge => "ge",
                CmpKind::Neu if s.is_float() => "neu",
                CmpKind::Neu => return no(),
            };
            format!("setp.{c}.{}", s.ptx())
        }
        Op::IsNan(s) if matches!(s, F32 | F64) => format!("testp.notanumber.{}", s.ptx()),
        Op::IsNan(_) => return no(),
        // Bytes live in 16-bit registers.
        Op::Selp(I8 | U8) => "selp.b16".into(),
        Op::Selp(s) if *s != Bool => format!(
            "selp.{}",
            if s.is_float() && !half(*s) {
                s.ptx()
            } else {
                s.bits()
            }
        ),
        Op::Selp(_) => return no(),
        Op::Cvt { to, from } => return cvt_opcode(*to, *from),
        Op::Ld { space, ty, vec, nc } => {
            let sp = space_name(*space);
            if *nc && *space != Space::Global {
                return no();
            }
            let v = match vec {
                1 => String::new(),
                2 | 4 if *vec as u32 * ty.bytes() <= 16 => format!(".v{vec}"),
                _ => return no(),
            };
            format!(
                "ld.{sp}{}{v}.{}",
                if *nc { ".nc" } else { "" },
                mem_name(*ty)?
            )
        }
        Op::St { space, ty, vec } => {
            if *space == Space::Param {
                return no();
            }
            let v = match vec {
                1 => String::new(),
                2 | 4 if *vec as u32 * ty.bytes() <= 16 => format!(".v{vec}"),
                _ => return no(),
            };
            format!("st.{}{v}.{}", space_name(*space), mem_name(*ty)?)
        }
        Op::Atom { space, kind, ty } => {
            if *space == Space::Param || !kind.supports(*ty) {
                return no();
            }
            let t = match kind {
                // Half-precision adds exist only without flushing subnormals (`.noftz`).
                AtomKind::Add if half(*ty) => format!("noftz.{}", ty.ptx()),
                AtomKind::Add | AtomKind::Min | AtomKind::Max => ty.ptx().to_string(),
                _ => ty.bits().to_string(),
            };
            format!("atom.{}.{}.{t}", space_name(*space), kind.names().1)
        }
        Op::Shfl(k) => {
            let m = match k {
                ShflKind::Bfly => "bfly",
                ShflKind::Down => "down",
                ShflKind::Up => "up",
                ShflKind::Idx => "idx",
            };
            format!("shfl.sync.{m}.b32")
        }
        Op::Vote(VoteKind::All) => "vote.sync.all.pred".into(),
        Op::Vote(VoteKind::Any) => "vote.sync.any.pred".into(),
        Op::Vote(VoteKind::Ballot) => "vote.sync.ballot.b32".into(),
        Op::Elect => "elect.sync".into(),
        Op::BarSync => "bar.sync".into(),
        Op::BarWarpSync => "bar.warp.sync".into(),
        Op::Fence { sc, scope } => format!(
            "fence.{}.{}",
            if *sc { "sc" } else { "acq_rel" },
            scope.ptx()
        ),
        Op::LdAcquire(ty) if ordered_ty(*ty) => format!("ld.acquire.gpu.global.{}", ty.ptx()),
        Op::StRelease(ty) if ordered_ty(*ty) => format!("st.release.gpu.global.{}", ty.ptx()),
        Op::LdAcquire(_) | Op::StRelease(_) => return no(),
        Op::Dp4a { a_signed, b_signed } => {
            let t = |s: bool| if s { "s32" } else { "u32" };
            format!("dp4a.{}.{}", t(*a_signed), t(*b_signed))
        }
        Op::Prmt => "prmt.b32".into(),
        Op::Lop3 => "lop3.b32".into(),
        Op::CvtPack(s @ (F16x2 | Bf16x2)) => format!("cvt.rn.{}.f32", s.ptx()),
        Op::CvtPack(_) => return no(),
        Op::Bra => "bra".into(),
        Op::Ret => "ret".into(),
        Op::CvtaGlobal => "cvta.to.global.u64".into(),
        Op::MulWide { signed } => format!("mul.wide.{}", if *signed { "s32" } else { "u32" }),
        Op::Bfe { signed } => format!("bfe.{}", if *signed { "s32" } else { "u32" }),
        Op::Bfi => "bfi.b32".into(),
        Op::CpAsync { bytes: 16 } => "cp.async.cg.shared.global".into(),
        Op::CpAsync { bytes: 4 | 8 } => "cp.async.ca.shared.global".into(),
        Op::CpAsync { .. } => return no(),
        Op::CpAsyncCommit => "cp.async.commit_group".into(),
        Op::CpAsyncWait => "cp.async.wait_group".into(),
        Op::PrefetchL2 => "prefetch.global.L2".into(),
        Op::Ldmatrix {
            n: n @ (1 | 2 | 4),
            trans,
        } => {
            format!(
                "ldmatrix.sync.aligned.m8n8.x{n}{}.shared.b16",
                if *trans { ".trans" } else { "" }
            )
        }
        Op::Ldmatrix { .. } => return no(),
        Op::Stmatrix {
            n: n @ (1 | 2 | 4),
            trans,
        } => {
            format!(
                "stmatrix.sync.aligned.m8n8.x{n}{}.shared.b16",
                if *trans { ".trans" } else { "" }
            )
        }
        Op::Stmatrix { .. } => return no(),
        Op::Mma { ty, k } => {
            if !MmaType::SHAPES
                .iter()
                .any(|(_, t, kk, _, _)| t == ty && kk == k)
            {
                return no();
            }
            let acc = if matches!(ty, MmaType::S8 | MmaType::U8) {
                "s32"
            } else {
                "f32"
            };
            let t = ty.ptx();
            format!("mma.sync.aligned.m16n8k{k}.row.col.{acc}.{t}.{t}.{acc}")
        }
        Op::CvtTf32 => "cvt.rna.tf32.f32".into(),
        Op::Wgmma { ty, n } => {
            let k = match ty {
                MmaType::F16 | MmaType::Bf16 => 16,
                MmaType::Tf32 => 8,
                _ => return no(),
            };
            if *n == 0 || *n > 256 || n % 8 != 0 {
                return no();
            }
            let t = ty.ptx();
            format!("wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t}")
        }
        Op::WgmmaFence => "wgmma.fence.sync.aligned".into(),
        Op::WgmmaCommit => "wgmma.commit_group.sync.aligned".into(),
        Op::WgmmaWait => "wgmma.wait_group.sync.aligned".into(),
        Op::FenceProxyAsync => "fence.proxy.async.shared::cta".into(),
        Op::SetMaxNReg { inc } => format!(
            "setmaxnreg.{}.sync.aligned.u32",
            if *inc { "inc" } else { "dec" }
        ),
        Op::MbarInit => "mbarrier.init.shared::cta.b64".into(),
        Op::MbarArrive => "mbarrier.arrive.shared::cta.b64".into(),
        Op::MbarArriveTx => "mbarrier.arrive.expect_tx.shared::cta.b64".into(),
        Op::MbarArriveCpAsync => "cp.async.mbarrier.arrive.noinc.shared::cta.b64".into(),
        Op::MbarTryWait => "mbarrier.try_wait.parity.shared::cta.b64".into(),
        Op::TmaLoad => {
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                .into()
        }
        Op::TmaStore => "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group".into(),
        Op::BulkCommit => "cp.async.bulk.commit_group".into(),
        Op::BulkWait { read: true } => "cp.async.bulk.wait_group.read".into(),
        Op::BulkWait { read: false } => "cp.async.bulk.wait_group".into(),
        Op::CvtaParam => "cvta.param.u64".into(),
        Op::PrefetchTensormap => "prefetch.tensormap".into(),
        Op::Asm { pieces, .. } => pieces.concat(),
    })
}

/// The memory types of acquire loads and release stores: 32- and 64-bit integers and floats.
fn ordered_ty(ty: Scalar) -> bool {
    use Scalar::*;
    matches!(ty, U32 | I32 | U64 | I64 | F32 | F64)
}

fn space_name(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Param => "param",
    }
}

fn mem_name(ty: Scalar) -> Result<&'static str, String> {
    match ty {
        Scalar::Bool | Scalar::F16 | Scalar::Bf16 | Scalar::F16x2 | Scalar::Bf16x2 => {
            Err(format!("no memory type for {ty} (use its storage type)"))
        }
        _ => Ok(ty.ptx()),
    }
}

fn cvt_opcode(to: Scalar, from: Scalar) -> Result<String, String> {
    use Scalar::*;
    let no = || Err(format!("no PTX conversion rule from {from} to {to}"));
    if to == from || to.is_packed() || from.is_packed() || to == Bool || from == Bool {
        return no();
    }
    // bf16 converts from and to 16-bit and wider integers only.
    if (to == Bf16 && from.is_byte()) || (from == Bf16 && to.is_byte()) {
        return no();
    }
    let (t, f) = (to.ptx(), from.ptx());
    Ok(match (to.is_float(), from.is_float()) {
        (false, false) => format!("cvt.{t}.{f}"),
        (true, false) => format!("cvt.rn.{t}.{f}"),
        (false, true) => format!("cvt.rzi.{t}.{f}"),
        (true, true) => {
            let widening = matches!(
                (to, from),
                (F32, F16) | (F32, Bf16) | (F64, F32) | (F64, F16) | (F64, Bf16)
            );
            if widening {
                format!("cvt.{t}.{f}")
            } else {
                format!("cvt.rn.{t}.{f}")
            }
        }
    })
}

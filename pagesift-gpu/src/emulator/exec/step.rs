//! The interpreter's step: one instruction of one thread.

use super::super::decode::*;
use super::mem::{atom_apply, Mem};
use super::{TState, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW};
use std::sync::atomic::{fence, Ordering};

#[inline(always)]
fn f32_in(v: u64) -> f64 {
    f32::from_bits(v as u32) as f64
}

#[inline(always)]
fn f32_out(x: f64) -> u64 {
    if x.is_nan() {
        0x7fff_ffff
    } else {
        (x as f32).to_bits() as u64
    }
}

/// `a * b + c` for f32 operands held as f64: the f64 sum when rounding it to f32 gives the
/// correctly rounded fused result, `None` when it may not (an f32 midpoint or the subnormal range).
trait FusedHint {
    fn mul_add_exact_hint(self, b: f64, c: f64) -> Option<f64>;
}

impl FusedHint for f64 {
    #[inline(always)]
    fn mul_add_exact_hint(self, b: f64, c: f64) -> Option<f64> {
        let s = self * b + c;
        let low = s.to_bits() & 0x1fff_ffff;
        if low == 0x1000_0000 || s.abs() < f32::MIN_POSITIVE as f64 {
            None
        } else {
            Some(s)
        }
    }
}

pub(super) enum Flow {
    Next,
    /// `bar.arrive` on the barrier with this id.
    Arrive(u64),
    Jump(u32),
    Stop(TState),
    /// A false `mbarrier.try_wait`: the `mbarrier`'s shared offset and the parity waited for.
    Wait(u32, u64),
}

#[inline(always)]
fn addr_of(r: &[u64], base: Slot, off: i64) -> u64 {
    r[base as usize].wrapping_add(off as u64)
}

/// The address of each of the `n` elements of `size` bytes of an access at `addr`; a vector
/// access (`n > 1`) must be aligned to its whole size.
#[inline(always)]
fn vector_elems(
    mem: &mut Mem<'_, '_>,
    space: MemSpace,
    addr: u64,
    size: u32,
    n: u8,
    what: &str,
) -> Result<impl Iterator<Item = u64>, String> {
    if n > 1 {
        mem.resolve(space, addr, size * n as u32, what)?;
    }
    Ok((0..n as u32).map(move |i| addr.wrapping_add((i * size) as u64)))
}

/// Executes one (unguarded or guard-true) instruction of a thread.
#[inline(always)]
pub(super) fn step(op: Op, r: &mut [u64], mem: &mut Mem<'_, '_>) -> Result<Flow, String> {
    use super::super::num::*;
    macro_rules! g {
        ($s:expr) => {
            r[$s as usize]
        };
    }
    match op {
        Op::Mov { d, a, mask } => g!(d) = g!(a) & mask,
        Op::Int2 { op, ty, d, a, b } => g!(d) = ibin(op, ty, g!(a), g!(b)),
        // Through f64 these are correctly rounded (53 >= 2 * 24 + 2); NaNs become canonical.
        Op::F32Add { d, a, b } => g!(d) = f32_out(f32_in(g!(a)) + f32_in(g!(b))),
        Op::F32Sub { d, a, b } => g!(d) = f32_out(f32_in(g!(a)) - f32_in(g!(b))),
        Op::F32Mul { d, a, b } => g!(d) = f32_out(f32_in(g!(a)) * f32_in(g!(b))),
        Op::F32Fma { d, a, b, c } => {
            let s = f32_in(g!(a)).mul_add_exact_hint(f32_in(g!(b)), f32_in(g!(c)));
            g!(d) = match s {
                Some(v) => f32_out(v),
                None => ffma(
                    Fmt::F32,
                    FMode {
                        rnd: Rnd::Rn,
                        ftz: false,
                        sat: false,
                    },
                    g!(a),
                    g!(b),
                    g!(c),
                ),
            };
        }
        Op::Flt2 {
            op,
            ty,
            fm,
            d,
            a,
            b,
        } => {
            g!(d) = match ty.fmt() {
                Some(f) => fbin(op, f, fm, g!(a), g!(b)),
                None => {
                    let f = ty.packed().unwrap_or(Fmt::F16);
                    lanes2(g!(a), g!(b), 0, |x, y, _| fbin(op, f, fm, x, y))
                }
            }
        }
        Op::Fma { ty, fm, d, a, b, c } => {
            g!(d) = match ty.fmt() {
                Some(f) => ffma(f, fm, g!(a), g!(b), g!(c)),
                None => {
                    let f = ty.packed().unwrap_or(Fmt::F16);
                    lanes2(g!(a), g!(b), g!(c), |x, y, z| ffma(f, fm, x, y, z))
                }
            }
        }
        Op::Flt1 { op, ty, fm, d, a } => {
            g!(d) = match ty.fmt() {
                Some(f) => fun(op, f, fm, g!(a)),
                None => {
                    let f = ty.packed().unwrap_or(Fmt::F16);
                    lanes2(g!(a), 0, 0, |x, _, _| fun(op, f, fm, x))
                }
            }
        }
        Op::Setp {
            cmp,
            ty,
            ftz,
            p,
            q,
            a,
            b,
            bop,
            c,
            cneg,
        } => {
            let v = compare(cmp, ty, ftz, g!(a), g!(b));
            let cv = (g!(c) != 0) != cneg;
            let comb = |x: bool| match bop {
                BoolOp::None => x,
                BoolOp::And => x && cv,
                BoolOp::Or => x || cv,
                BoolOp::Xor => x ^ cv,
            };
            g!(p) = comb(v) as u64;
            if q != S_SINK {
                g!(q) = comb(!v) as u64;
            }
        }
        Op::Selp { mask, d, a, b, p } => g!(d) = if g!(p) != 0 { g!(a) } else { g!(b) } & mask,
        Op::Ld {
            space,
            ty,
            n,
            ordered,
            d,
            base,
            off,
        } => {
            let size = ty.bytes();
            let elems = vector_elems(mem, space, addr_of(r, base, off), size, n, "vector load")?;
            if ordered {
                fence(Ordering::SeqCst);
            }
            for (ea, &ds) in elems.zip(&d) {
                let v = mem.load(space, ea, size)?;
                let v = if ty.is_signed() {
                    sext(v, ty.bits()) as u64
                } else {
                    v
                };
                g!(ds) = v;
            }
            if ordered {
                fence(Ordering::SeqCst);
            }
        }
        Op::St {
            space,
            ty,
            n,
            ordered,
            s,
            base,
            off,
        } => {
            let size = ty.bytes();
            let elems = vector_elems(mem, space, addr_of(r, base, off), size, n, "vector store")?;
            if ordered {
                fence(Ordering::SeqCst);
            }
            for (ea, &ss) in elems.zip(&s) {
                mem.store(space, ea, size, g!(ss) & mask(size * 8))?;
            }
            if ordered {
                fence(Ordering::SeqCst);
            }
        }
        Op::Atom {
            space,
            op,
            ty,
            d,
            base,
            off,
            b,
            c,
        } => {
            let addr = addr_of(r, base, off);
            let (bv, cv) = (g!(b), g!(c));
            let old = mem.atomic(space, addr, ty.bytes(), |old| {
                atom_apply(op, ty, old, bv, cv)
            })?;
            g!(d) = if ty.is_signed() {
                sext(old, ty.bits()) as u64
            } else {
                old
            };
        }
        Op::Bra { target } => return Ok(Flow::Jump(target)),
        Op::Exit => {
            // Copies never waited for complete at the exit (and the arrivals that wait for
            // them arrive).
            mem.cp_wait(0, true)?;
            return Ok(Flow::Stop(TState::Done));
        }
        Op::Bar { .. } => return Ok(Flow::Stop(TState::Bar)),
        Op::BarArrive { id } => return Ok(Flow::Arrive(g!(id))),
        Op::Shfl { .. }
        | Op::Vote { .. }
        | Op::Elect { .. }
        | Op::BarWarp { .. }
        | Op::Redux { .. }
        | Op::Mma { .. }
        | Op::Ldmatrix { .. }
        | Op::Stmatrix { .. }
        | Op::Wgmma { .. }
        | Op::WgmmaFence { .. }
        | Op::WgmmaCommit { .. }
        | Op::WgmmaWait { .. }
        | Op::SetMaxNReg { .. } => return Ok(Flow::Stop(TState::Warp)),
        Op::Cvt {
            dty,
            sty,
            rnd,
            int_rnd,
            sat,
            ftz,
            d,
            a,
        } => {
            let v = cvt(dty, sty, rnd, int_rnd, sat, ftz, g!(a));
            g!(d) = if dty.is_signed() {
                sext(v, dty.bits()) as u64
            } else {
                v
            };
        }
        Op::CvtPack { dty, rnd, d, a, b } => {
            let f = dty.packed().unwrap_or(Fmt::F16);
            let hi = cvt(
                if f == Fmt::F16 { Ty::F16 } else { Ty::BF16 },
                Ty::F32,
                rnd,
                false,
                false,
                false,
                g!(a),
            );
            let lo = cvt(
                if f == Fmt::F16 { Ty::F16 } else { Ty::BF16 },
                Ty::F32,
                rnd,
                false,
                false,
                false,
                g!(b),
            );
            g!(d) = (hi << 16) | (lo & 0xffff);
        }
        Op::Int1 { op, ty, d, a } => {
            let m = if ty == Ty::Pred { 1 } else { ty.mask() };
            let v = g!(a) & m;
            let bits = ty.bits();
            g!(d) = match op {
                IOp1::Abs => (sext(v, bits).wrapping_abs() as u64) & m,
                IOp1::Neg => v.wrapping_neg() & m,
                IOp1::Not => !v & m,
                IOp1::Cnot => (v == 0) as u64,
                IOp1::Popc => v.count_ones() as u64,
                IOp1::Clz => (v.leading_zeros() - (64 - bits)) as u64,
                IOp1::Brev => v.reverse_bits() >> (64 - bits),
                IOp1::Bfind => {
                    let x = if ty.is_signed() && sext(v, bits) < 0 {
                        !v & m
                    } else {
                        v
                    };
                    if x == 0 {
                        0xffff_ffff
                    } else {
                        (63 - x.leading_zeros()) as u64
                    }
                }
            };
        }
        Op::IMad { op, ty, d, a, b, c } => {
            let p = ibin(op, ty, g!(a), g!(b));
            let wty = if op == IOp2::MulWide {
                if ty.is_signed() {
                    Ty::S64
                } else {
                    Ty::U64
                }
            } else {
                ty
            };
            g!(d) = p.wrapping_add(g!(c)) & wty.mask();
        }
        Op::Pack { d, parts, n, bits } => {
            let mut v = 0u64;
            for (i, &p) in parts.iter().enumerate().take(n as usize) {
                v |= (g!(p) & mask(bits as u32)) << (i as u32 * bits as u32);
            }
            g!(d) = v;
        }
        Op::Unpack { d, n, bits, a } => {
            let v = g!(a);
            for (i, &ds) in d.iter().enumerate().take(n as usize) {
                if ds != S_SINK {
                    g!(ds) = (v >> (i as u32 * bits as u32)) & mask(bits as u32);
                }
            }
        }
        Op::Bfe { ty, d, a, b, c } => g!(d) = bfe(ty, g!(a), g!(b), g!(c)),
        Op::Bfi { ty, d, a, b, c, e } => g!(d) = bfi(ty, g!(a), g!(b), g!(c), g!(e)),
        Op::Prmt { d, a, b, c } => g!(d) = prmt(g!(a), g!(b), g!(c)),
        Op::Lop3 { d, a, b, c, lut } => {
            let (x, y, z) = (g!(a), g!(b), g!(c));
            let mut v = 0u64;
            for i in 0..32 {
                let idx = ((x >> i & 1) << 2) | ((y >> i & 1) << 1) | (z >> i & 1);
                v |= ((lut as u64 >> idx) & 1) << i;
            }
            g!(d) = v;
        }
        Op::Cvta {
            to,
            space,
            d,
            a,
            mask: m,
        } => {
            let window = match space {
                MemSpace::Shared => SHARED_WINDOW,
                MemSpace::Local => LOCAL_WINDOW,
                MemSpace::Param => PARAM_WINDOW,
                _ => 0,
            };
            let v = g!(a);
            g!(d) = if to {
                v.wrapping_sub(window)
            } else {
                v.wrapping_add(window)
            } & m;
        }
        Op::Activemask { d } => {
            // The lanes of this warp that exist (threads run independently here, so every
            // existing lane counts as active).
            let nt = g!(S_NTID) * g!(S_NTID + 1) * g!(S_NTID + 2);
            let lanes = nt.saturating_sub(g!(S_WARPID) * 32).min(32);
            g!(d) = mask(lanes as u32);
        }
        Op::Shf {
            left,
            clamp,
            d,
            a,
            b,
            c,
        } => {
            let wide = (g!(a) & 0xffff_ffff) | ((g!(b) & 0xffff_ffff) << 32);
            let n = g!(c) & 0xffff_ffff;
            let n = if clamp { n.min(32) } else { n & 31 };
            g!(d) = if left {
                (wide << n) >> 32
            } else {
                (wide >> n) & 0xffff_ffff
            };
        }
        Op::Tf32 { d, a } => g!(d) = super::super::tensor::to_tf32(g!(a)),
        Op::CpAsync {
            dst,
            dst_off,
            src,
            src_off,
            size,
            src_size,
        } => {
            let (to, from) = (addr_of(r, dst, dst_off), addr_of(r, src, src_off));
            let size = size as u32;
            let keep = (g!(src_size) & 0xffff_ffff).min(size as u64) as u32;
            mem.cp_async(to, from, size, keep)?;
        }
        Op::MbarInit { base, off, count } => mem.mbar_init(addr_of(r, base, off), g!(count))?,
        Op::MbarArrive { d, base, off, tx } => {
            let token = mem.mbar_arrive(addr_of(r, base, off), g!(tx))?;
            if d != S_SINK {
                g!(d) = token;
            }
        }
        Op::CpAsyncArrive { base, off } => mem.cp_arrive(addr_of(r, base, off))?,
        Op::MbarTryWait {
            p,
            base,
            off,
            parity,
        } => {
            let at = addr_of(r, base, off);
            let parity = g!(parity) & 1;
            let done = mem.mbar_try_wait(at, parity)?;
            g!(p) = done as u64;
            if !done {
                // Checked by the try_wait: a shared offset inside the block's shared memory.
                return Ok(Flow::Wait(at as u32, parity));
            }
        }
        Op::Tma { idx } => mem.tma_issue(idx, r)?,
        Op::TmaStore { idx } => mem.tma_store(idx, r)?,
        Op::BulkCommit => mem.bulk_commit(),
        Op::BulkWait { n } => mem.bulk_wait(n)?,
        Op::PrefetchTensormap { base, off } => mem.prefetch_tensormap(addr_of(r, base, off))?,
        Op::CpAsyncCommit => mem.cp_commit(),
        Op::ProxyFence => mem.proxy_fence(),
        Op::CpAsyncWait { n, all } => mem.cp_wait(n, all)?,
        Op::Dot {
            two,
            hi,
            a_signed,
            b_signed,
            d,
            a,
            b,
            c,
        } => {
            let byte = |v: u64, i: u32, signed: bool| {
                let x = (v >> (8 * i)) & 0xff;
                if signed {
                    x as u8 as i8 as i64
                } else {
                    x as i64
                }
            };
            let half = |v: u64, i: u32, signed: bool| {
                let x = (v >> (16 * i)) & 0xffff;
                if signed {
                    x as u16 as i16 as i64
                } else {
                    x as i64
                }
            };
            let (x, y) = (g!(a), g!(b));
            let dot: i64 = if two {
                // dp2a: the 16-bit halves of a times two bytes of b (the low or high pair).
                let base = if hi { 2 } else { 0 };
                (0..2)
                    .map(|i| half(x, i, a_signed) * byte(y, base + i, b_signed))
                    .sum()
            } else {
                (0..4)
                    .map(|i| byte(x, i, a_signed) * byte(y, i, b_signed))
                    .sum()
            };
            g!(d) = (g!(c) as u32 as i32 as i64).wrapping_add(dot) as u32 as u64;
        }
        Op::Slct {
            float,
            mask: m,
            d,
            a,
            b,
            c,
        } => {
            let ge = if float {
                f32::from_bits(g!(c) as u32) >= 0.0
            } else {
                g!(c) as u32 as i32 >= 0
            };
            g!(d) = if ge { g!(a) } else { g!(b) } & m;
        }
        Op::Testp { kind, ty, p, a } => {
            let x = if ty == Ty::F32 {
                f32::from_bits(g!(a) as u32) as f64
            } else {
                f64::from_bits(g!(a))
            };
            let normal = if ty == Ty::F32 {
                (x as f32).is_normal()
            } else {
                x.is_normal()
            };
            g!(p) = match kind {
                TestKind::Finite => x.is_finite(),
                TestKind::Infinite => x.is_infinite(),
                TestKind::Number => !x.is_nan(),
                TestKind::NotANumber => x.is_nan(),
                TestKind::Normal => normal,
                TestKind::Subnormal => x.is_finite() && x != 0.0 && !normal,
            } as u64;
        }
        Op::Nop => {}
        // Plain accesses are relaxed atomics of the host (`memory.rs`): a fence orders them
        // against the blocks that other host threads run at the same time.
        Op::Fence => fence(Ordering::SeqCst),
        Op::Trap => return Err("trap: the kernel executed trap".into()),
    }
    Ok(Flow::Next)
}

//! `wgmma` (sm_90a): warpgroup matrix multiply-accumulate from shared memory, asynchronous, with
//! the hardware's rules checked.
//!
//! A warpgroup is 4 consecutive warps of the block (warps `4g..4g+3`); warp `q = w % 4` of it
//! owns rows `16q..16q+16` of the `64 × n` tile, so each warp computes its own rows when it
//! executes the instruction (a warp collective: all 32 lanes, see `exec/mod.rs`).
//!
//! Each warp keeps its `wgmma.mma_async` not completed yet ([`WarpWg`]):
//! `wgmma.commit_group` closes the uncommitted ones into a group and `wgmma.wait_group N`
//! completes all but the `N` most recent groups. The product is computed when the instruction
//! issues, in issue order (so chained instructions on the same accumulators see each other's
//! results, as on the hardware), and written to the accumulator registers at once: the program
//! cannot tell, since until its group completes
//! - any other instruction's access to its accumulator registers is an error (read or write
//!   of a wgmma accumulator before its `wgmma.wait_group`), and so is a write to the registers
//!   it took A from (A in registers, read when it issues: the hardware may read them until
//!   the op completes),
//! - any write of the shared memory it read is an error (`exec/mem.rs`), so its operands stay
//!   what they were when it issued.
//!
//! The other checks: a `wgmma.mma_async` needs a `wgmma.fence` of its warp before it and after
//! any access of its accumulator registers by another instruction; shared memory it reads must
//! be initialized, free of races with its writers (as a read by lane 0 of the warp), and, if
//! written through the generic proxy, fenced by the writer with `fence.proxy.async`
//! (`exec/mem.rs`); a warp may not exit with `wgmma.mma_async` not completed; the warp's lanes
//! must agree on the matrix descriptors, and the block must hold the whole warpgroup. With A in
//! registers, each warp's 16 rows of A come from its own lanes' four registers
//! ([`WgmmaA::Regs`]) instead of a descriptor.

use super::super::decode::{Kernel, MemSpace, Slot, S_SINK};
use super::super::tensor::{
    element, f32_accumulate, wgmma_a_reg_pos, wgmma_acc_pos, MatrixDesc, MmaKind, WgmmaA,
    WgmmaInst, WGMMA_ROW_BYTES,
};
use super::mem::{AsyncRead, Where};
use super::{Fail, Launch, Runner};

/// A `wgmma.mma_async` issued by a warp and not completed.
struct Pending {
    /// Its instruction index.
    pc: u32,
    /// The end of its chunks in [`WarpWg::chunks`].
    chunks_end: u32,
    /// Its index in `Kernel::wgmmas`.
    idx: u32,
}

/// One warp's `wgmma` state; the buffers are reused from block to block.
#[derive(Default)]
pub(super) struct WarpWg {
    /// The `wgmma.mma_async` not completed, in issue order.
    ops: Vec<Pending>,
    /// Per committed group not completed, oldest first: the number of `ops` up to its end (the
    /// ops after the last form the uncommitted group).
    groups: Vec<u32>,
    /// The 16-byte shared chunks (offset / 16) the pending ops read, in op order.
    chunks: Vec<u32>,
    /// One bit per register slot: an accumulator register that another instruction accessed
    /// since the warp's last `wgmma.fence` (all set before its first).
    touched: Vec<u64>,
    /// Whether the warp executed a `wgmma.fence`.
    fenced: bool,
}

impl WarpWg {
    /// The state at the start of a block of a kernel with `nslots` register slots.
    pub(super) fn reset(&mut self, nslots: usize) {
        self.ops.clear();
        self.groups.clear();
        self.chunks.clear();
        self.touched.clear();
        self.touched.resize(nslots.div_ceil(64), u64::MAX);
        self.fenced = false;
    }

    /// The error of a warp that exits with `wgmma.mma_async` not completed.
    pub(super) fn exit_check(&self, k: &Kernel) -> Result<(), String> {
        match self.ops.first() {
            None => Ok(()),
            Some(first) => Err(format!(
                "wgmma not complete at exit: the warp exits with {} wgmma.mma_async that no wgmma.wait_group completed (the first at PTX line {})",
                self.ops.len(),
                k.lines[first.pc as usize]
            )),
        }
    }

    /// An instruction (not a `wgmma`) at `pc` that names accumulator registers (or writes A
    /// registers), of a thread whose registers are `r`: whether it executes (its own guard); an
    /// error if so and one of the registers is an accumulator of a pending `wgmma.mma_async`
    /// of the warp, or one it writes holds A of one; else they count as accessed since the
    /// last `wgmma.fence`.
    #[cold]
    #[inline(never)]
    pub(super) fn access(&mut self, k: &Kernel, pc: usize, r: &[u64]) -> Result<bool, String> {
        let Some(u) = k.acc_uses.get(&(pc as u32)) else {
            return Ok(true);
        };
        if u.guard != S_SINK && (r[u.guard as usize] != 0) == u.guard_neg {
            return Ok(false);
        }
        if !self.ops.is_empty() {
            for (slots, what) in [(&u.reads, "read of"), (&u.writes, "write to")] {
                for s in slots {
                    let owner = self
                        .ops
                        .iter()
                        .find(|o| k.wgmmas[o.idx as usize].d.contains(s));
                    if let Some(o) = owner {
                        return Err(format!(
                            "{what} a wgmma accumulator before its wgmma.wait_group: the register is an accumulator of the wgmma.mma_async of PTX line {}, which no wgmma.wait_group has completed yet",
                            k.lines[o.pc as usize]
                        ));
                    }
                }
            }
            for s in &u.writes {
                let owner = self.ops.iter().find(
                    |o| matches!(k.wgmmas[o.idx as usize].a, WgmmaA::Regs(a) if a.contains(s)),
                );
                if let Some(o) = owner {
                    return Err(format!(
                        "write to a wgmma A register before its wgmma.wait_group: the register holds matrix A of the wgmma.mma_async of PTX line {}, which no wgmma.wait_group has completed yet",
                        k.lines[o.pc as usize]
                    ));
                }
            }
        }
        for &s in u.reads.iter().chain(&u.writes) {
            self.touched[s as usize / 64] |= 1 << (s % 64);
        }
        Ok(true)
    }

    fn touched(&self, s: Slot) -> bool {
        self.touched[s as usize / 64] >> (s % 64) & 1 != 0
    }
}

impl Runner {
    /// The error when the warpgroup of warp `w` is not whole in a block of `nt` threads.
    pub(super) fn warpgroup_check(w: usize, nt: usize) -> Result<(), String> {
        let warps = nt.div_ceil(32);
        let g = w / 4;
        if 4 * g + 4 > warps {
            return Err(format!(
                "incomplete warpgroup: wgmma needs the 4 warps {}..{} of warpgroup {g}, the block has {warps} warps",
                4 * g,
                4 * g + 3
            ));
        }
        Ok(())
    }

    /// `wgmma.fence` of the warp whose lane 0 is thread `lo`.
    pub(super) fn wgmma_fence(&mut self, lo: usize) {
        let st = &mut self.wg[lo / 32];
        st.touched.fill(0);
        st.fenced = true;
    }

    /// `wgmma.commit_group`.
    pub(super) fn wgmma_commit(&mut self, lo: usize) {
        let st = &mut self.wg[lo / 32];
        st.groups.push(st.ops.len() as u32);
    }

    /// `wgmma.wait_group n`: completes the oldest committed groups until at most `n` remain;
    /// the shared memory their ops read may be written again.
    pub(super) fn wgmma_wait(&mut self, lo: usize, n: u32) {
        let st = &mut self.wg[lo / 32];
        let Some(done) = st.groups.len().checked_sub(n as usize).filter(|&d| d > 0) else {
            return;
        };
        let ops = st.groups[done - 1] as usize;
        let chunks = if ops == 0 {
            0
        } else {
            st.ops[ops - 1].chunks_end as usize
        };
        for &c in &st.chunks[..chunks] {
            self.async_reads[c as usize].count -= 1;
        }
        st.chunks.drain(..chunks);
        st.ops.drain(..ops);
        for o in &mut st.ops {
            o.chunks_end -= chunks as u32;
        }
        st.groups.drain(..done);
        for g in &mut st.groups {
            *g -= ops as u32;
        }
    }

    /// Reads rows `rows` of the K-major operand `name` (A or B) that `desc` describes into `out`
    /// (cleared first; K contiguous per row, negated if `neg`), for the warp whose lane 0 is
    /// thread `lo`.
    #[allow(clippy::too_many_arguments)]
    fn wgmma_operand(
        &mut self,
        l: &Launch<'_>,
        lo: usize,
        wi: &WgmmaInst,
        desc: &MatrixDesc,
        rows: std::ops::Range<usize>,
        neg: bool,
        name: &str,
        out: &mut Vec<f64>,
    ) -> Result<(), String> {
        out.clear();
        let eb = wi.elem_bytes();
        let what = format!("wgmma.mma_async operand {name} read");
        for r in rows {
            for c in 0..WGMMA_ROW_BYTES / 16 {
                let bytes = self.wgmma_chunk(l, lo, desc.chunk(r, c), &what)?;
                for e in bytes.chunks_exact(eb) {
                    let v = e.iter().rev().fold(0u64, |v, &x| v << 8 | x as u64);
                    let x = element(wi.kind, false, v, 0);
                    out.push(if neg { -x } else { x });
                }
            }
        }
        Ok(())
    }

    /// Reads 16-byte chunk `addr` of a `wgmma` operand (`what`) for the warp whose lane 0 is
    /// `lo`, with the checks of a shared read and of the async proxy; records it for the op.
    fn wgmma_chunk(
        &mut self,
        l: &Launch<'_>,
        lo: usize,
        addr: u64,
        what: &str,
    ) -> Result<[u8; 16], String> {
        let mut mem = self.mem_for(l, lo);
        let Where::Shared(at) = mem.resolve(MemSpace::Shared, addr, 16, what)? else {
            return Err(format!("{what} outside shared memory"));
        };
        mem.shared_read_as(at, 16, false)?;
        mem.async_read(at, 16, "wgmma.mma_async")?;
        self.wg[lo / 32].chunks.push((at / 16) as u32);
        let mut out = [0u8; 16];
        out.copy_from_slice(&self.shared[at..at + 16]);
        Ok(out)
    }

    /// `wgmma.mma_async` (`Kernel::wgmmas[idx]`, instruction `pc`) of the warp whose lane 0 is
    /// thread `lo`: its 16 rows of `D = A·B (+ D)`, computed now; the op stays pending until a
    /// `wgmma.wait_group` completes its group.
    pub(super) fn wgmma_issue(
        &mut self,
        l: &Launch<'_>,
        lo: usize,
        pc: usize,
        idx: usize,
    ) -> Result<(), Fail> {
        let fail = |msg: String| Fail { msg, t: lo, pc };
        let k = l.kernel;
        let wi = &k.wgmmas[idx];
        let ns = k.nslots;
        let w = lo / 32;
        let st = &self.wg[w];
        if wi.d.iter().any(|&s| st.touched(s)) {
            return Err(fail(if st.fenced {
                "wgmma.mma_async without a preceding wgmma.fence: another instruction accessed its accumulator registers after the warp's last wgmma.fence".into()
            } else {
                "wgmma.mma_async without a preceding wgmma.fence: the warp executed no wgmma.fence before its first wgmma.mma_async".into()
            }));
        }
        let reg = |r: &Runner, lane: usize, s: Slot| r.regs[(lo + lane) * ns + s as usize];
        // The descriptors the lanes must agree on: A's (if A is in shared memory) and B's.
        let descs: Vec<Slot> = match wi.a {
            WgmmaA::Desc(a) => vec![a, wi.b_desc],
            WgmmaA::Regs(_) => vec![wi.b_desc],
        };
        let at = |r: &Runner, lane: usize| -> Vec<u64> {
            descs.iter().map(|&s| reg(r, lane, s)).collect()
        };
        let first = at(self, 0);
        if let Some(lane) = (1..32).find(|&i| at(self, i) != first) {
            let hex = |v: Vec<u64>| {
                v.iter()
                    .map(|x| format!("{x:#x}"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            return Err(fail(format!(
                "wgmma.mma_async matrix descriptors differ between the lanes of the warp: lane 0 has {}, lane {lane} has {}",
                hex(first.clone()),
                hex(at(self, lane))
            )));
        }
        let b_desc = MatrixDesc::decode(reg(self, 0, wi.b_desc))
            .map_err(|m| fail(format!("wgmma.mma_async B: {m}")))?;
        // The operands as f64, K contiguous per row: this warp's 16 rows of A, the n rows of B.
        let kk = wi.k();
        let mut a = std::mem::take(&mut self.wg_a);
        let mut b = std::mem::take(&mut self.wg_b);
        let chunks_start = self.wg[w].chunks.len();
        match wi.a {
            WgmmaA::Desc(ad) => {
                let a_desc = MatrixDesc::decode(reg(self, 0, ad))
                    .map_err(|m| fail(format!("wgmma.mma_async A: {m}")))?;
                let a_rows = 16 * (w % 4)..16 * (w % 4) + 16;
                self.wgmma_operand(l, lo, wi, &a_desc, a_rows, wi.neg_a, "A", &mut a)
                    .map_err(fail)?;
            }
            WgmmaA::Regs(regs) => {
                // The warp's 16 rows of A from its lanes' registers, read now (at issue).
                a.clear();
                a.resize(16 * kk, 0.0);
                let per = if wi.kind == MmaKind::Tf32 { 1 } else { 2 };
                for lane in 0..32 {
                    for (j, &s) in regs.iter().enumerate() {
                        let v = reg(self, lane, s);
                        for e in 0..per {
                            let (row, col) = wgmma_a_reg_pos(wi.kind, lane, j, e);
                            let x = element(wi.kind, false, v, e);
                            a[row * kk + col] = if wi.neg_a { -x } else { x };
                        }
                    }
                }
            }
        }
        self.wgmma_operand(l, lo, wi, &b_desc, 0..wi.n, wi.neg_b, "B", &mut b)
            .map_err(fail)?;
        for lane in 0..32 {
            let r = &mut self.regs[(lo + lane) * ns..(lo + lane + 1) * ns];
            let keep = (r[wi.scale_d as usize] != 0) != wi.scale_d_neg;
            for (i, &s) in wi.d.iter().enumerate() {
                let (row, col) = wgmma_acc_pos(lane, i);
                let c = if keep { r[s as usize] as u32 } else { 0 };
                let (ar, br) = (&a[row * kk..][..kk], &b[col * kk..][..kk]);
                let products = ar.iter().zip(br).map(|(x, y)| x * y);
                r[s as usize] = f32_accumulate(c, products) as u64;
            }
        }
        self.wg_a = a;
        self.wg_b = b;
        let st = &mut self.wg[w];
        for &c in &st.chunks[chunks_start..] {
            self.async_reads[c as usize] = AsyncRead {
                count: self.async_reads[c as usize].count + 1,
                pc: pc as u32,
            };
        }
        st.ops.push(Pending {
            pc: pc as u32,
            chunks_end: st.chunks.len() as u32,
            idx: idx as u32,
        });
        Ok(())
    }
}

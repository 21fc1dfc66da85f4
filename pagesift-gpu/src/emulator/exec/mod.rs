//! Execution of one thread block: the interpreter loop, memory accesses with their checks, and
//! the scheduling of barriers and warp collectives.
//!
//! Each thread runs until it reaches a synchronization point (a barrier, a warp collective, or
//! its exit). When every thread is stopped, warp collectives whose member lanes have all arrived
//! are performed together, then barriers whose participants have all arrived are released. A
//! state in which nothing can proceed is an error that names who waits where.
//!
//! `cp.async` is asynchronous as on the hardware: each thread queues its copies (`mem.rs`),
//! whose shared destinations are written, and may be accessed, only once a
//! `cp.async.wait_group` / `wait_all` of that thread (or its exit) has completed them.
//!
//! `mbarrier` objects and `cp.async.bulk.tensor` copies are the block's (`tma.rs`): a thread
//! whose `mbarrier.try_wait` fails is suspended until its phase completes, and copies in flight
//! complete while some thread waits on their `mbarrier` or when nothing else can proceed.
//!
//! `wgmma` instructions are warp collectives whose `mma_async` stays pending per warp until a
//! `wgmma.wait_group` completes it (`wgmma.rs`); an instruction that names a `wgmma`
//! accumulator register (its guard is `S_ACC`, set at decode) is checked against the warp's
//! pending ones.

mod mem;
mod step;
mod tma;
mod wgmma;

use super::decode::*;
use super::memory::GlobalView;
use mem::{atom_apply, AsyncQueue, AsyncRead, Mem, ProxyByte, Shadow};
use step::{step, Flow};
use tma::{MbarWait, TmaState};
use wgmma::WarpWg;

/// Generic addresses of the shared window (the shared offset is the low 32 bits).
pub(super) const SHARED_WINDOW: u64 = 0x5000_0000_0000;
/// Generic addresses of the local window.
pub(super) const LOCAL_WINDOW: u64 = 0x6000_0000_0000;
/// Generic addresses of the kernel parameters (`cvta.param`): the parameter offset is the low
/// 32 bits.
pub(super) const PARAM_WINDOW: u64 = 0x4000_0000_0000;
const WINDOW_SIZE: u64 = 1 << 32;

/// Everything a block needs to know about its launch.
pub(super) struct Launch<'a> {
    pub kernel: &'a Kernel,
    pub global: &'a GlobalView,
    pub params: &'a [u8],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Static plus dynamic shared memory, in bytes.
    pub shared_bytes: u32,
    pub sm_count: u32,
    /// The most instructions a thread may execute between two synchronization points.
    pub max_steps: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TState {
    Run,
    Warp,
    Bar,
    /// Suspended by a false `mbarrier.try_wait` (`tma.rs`), past it.
    Wait,
    Done,
}

/// A failure inside a thread: what, which thread (linear index), which instruction.
struct Fail {
    msg: String,
    t: usize,
    pc: usize,
}

/// Executes blocks; one per host thread, its buffers reused from block to block.
pub(super) struct Runner {
    regs: Vec<u64>,
    pc: Vec<u32>,
    state: Vec<TState>,
    shared: Vec<u8>,
    shadow: Vec<Shadow>,
    local: Vec<u8>,
    epoch: u32,
    block_epoch: u32,
    hint: usize,
    /// Thread-instructions executed so far.
    pub steps: u64,
    /// `bar.arrive` counts per barrier id, since the barrier last completed.
    arrivals: Vec<(u64, u64)>,
    /// Warp barriers (`bar.warp.sync`) completed in this block so far: the stamp of the last.
    warp_syncs: u32,
    /// Per thread and lane of its warp: the stamp of the last warp barrier both took part in.
    met: Vec<[u32; 32]>,
    /// Per thread: the stamp of the last warp barrier of every lane of its warp.
    met_all: Vec<u32>,
    /// Per thread: its `cp.async` copies not completed yet.
    queues: Vec<AsyncQueue>,
    /// Per warp: its `wgmma` state (kernels with `wgmma.mma_async` only).
    wg: Vec<WarpWg>,
    /// Per shared byte: its last generic-proxy write (kernels with `wgmma.mma_async` only).
    proxy: Vec<ProxyByte>,
    /// Per 16-byte shared chunk: its pending `wgmma` reads (kernels with `wgmma.mma_async`
    /// only).
    async_reads: Vec<AsyncRead>,
    /// Per thread: its count of executed `fence.proxy.async`.
    proxy_fences: Vec<u32>,
    /// Scratch buffers of a `wgmma.mma_async`'s A and B values.
    wg_a: Vec<f64>,
    wg_b: Vec<f64>,
    /// The block's `mbarrier` objects and `cp.async.bulk.tensor` copies in flight.
    tma: TmaState,
    /// Per thread in [`TState::Wait`]: what it waits for.
    waits: Vec<MbarWait>,
    /// The `mbarrier` events and every thread's state and pc when the waiting threads were
    /// last let go without their phase complete (`tma.rs`, the deadlock test).
    stall: Option<(u64, Vec<(TState, u32)>)>,
}

fn coords(t: usize, dim: [u32; 3]) -> [u32; 3] {
    let t = t as u32;
    [t % dim[0], (t / dim[0]) % dim[1], t / (dim[0] * dim[1])]
}

fn fmt3(c: [u32; 3]) -> String {
    format!("({},{},{})", c[0], c[1], c[2])
}

impl Runner {
    pub fn new() -> Runner {
        Runner {
            regs: Vec::new(),
            pc: Vec::new(),
            state: Vec::new(),
            shared: Vec::new(),
            shadow: Vec::new(),
            local: Vec::new(),
            epoch: 0,
            block_epoch: 0,
            hint: 0,
            steps: 0,
            arrivals: Vec::new(),
            warp_syncs: 0,
            met: Vec::new(),
            met_all: Vec::new(),
            queues: Vec::new(),
            wg: Vec::new(),
            proxy: Vec::new(),
            async_reads: Vec::new(),
            proxy_fences: Vec::new(),
            wg_a: Vec::new(),
            wg_b: Vec::new(),
            tma: TmaState::default(),
            waits: Vec::new(),
            stall: None,
        }
    }

    fn describe(&self, l: &Launch<'_>, block: [u32; 3], f: Fail) -> String {
        let k = l.kernel;
        let pc = f.pc.min(k.code.len() - 1);
        format!(
            "{} (kernel `{}`, block {}, thread {}, PTX line {}: `{}`)",
            f.msg,
            k.name,
            fmt3(block),
            fmt3(coords(f.t, l.block)),
            k.lines[pc],
            k.texts[pc]
        )
    }

    /// Runs block `block` of the launch to completion.
    pub fn run_block(&mut self, l: &Launch<'_>, block: [u32; 3]) -> Result<(), String> {
        let k = l.kernel;
        let nt = (l.block[0] * l.block[1] * l.block[2]) as usize;
        let n = k.nslots;
        self.regs.resize(nt * n, 0);
        self.pc.clear();
        self.pc.resize(nt, 0);
        self.state.clear();
        self.state.resize(nt, TState::Run);
        let sb = l.shared_bytes as usize;
        if self.shared.len() < sb {
            self.shared.resize(sb, 0);
            self.shadow.resize(sb, Shadow::default());
        }
        // Fresh garbage so a missing initialization never reads last block's values by luck.
        self.shared[..sb].fill(0xCD);
        let lb = k.local_bytes as usize;
        self.local.clear();
        self.local.resize(nt * lb, 0xCD);
        if self.epoch > u32::MAX / 2 {
            // Start the shadow afresh long before the epoch counter could wrap.
            self.shadow.fill(Shadow::default());
            self.epoch = 0;
        }
        self.epoch += 1;
        self.block_epoch = self.epoch;
        self.arrivals.clear();
        self.warp_syncs = 0;
        self.met.clear();
        self.met.resize(nt, [0; 32]);
        self.met_all.clear();
        self.met_all.resize(nt, 0);
        // Copies a failed block left pending (their queues keep their buffers).
        for q in &mut self.queues {
            q.discard(&mut self.shadow);
        }
        self.tma.reset(&mut self.shadow);
        self.waits.clear();
        self.waits.resize(nt, MbarWait::default());
        self.stall = None;
        if self.queues.len() < nt {
            self.queues.resize_with(nt, AsyncQueue::default);
        }
        self.proxy_fences.clear();
        self.proxy_fences.resize(nt, 0);
        self.proxy.clear();
        self.async_reads.clear();
        if !k.wgmmas.is_empty() || k.tmas.iter().any(|t| t.store) {
            self.proxy.resize(sb, ProxyByte::default());
            self.async_reads
                .resize(sb.div_ceil(16), AsyncRead::default());
        }
        if !k.wgmmas.is_empty() {
            if self.wg.len() < nt.div_ceil(32) {
                self.wg.resize_with(nt.div_ceil(32), WarpWg::default);
            }
            for w in &mut self.wg[..nt.div_ceil(32)] {
                w.reset(n);
            }
        }
        let nwarps = nt.div_ceil(32) as u64;
        for t in 0..nt {
            let r = &mut self.regs[t * n..(t + 1) * n];
            r.copy_from_slice(&k.template);
            let tid = coords(t, l.block);
            for i in 0..3 {
                r[(S_TID as usize) + i] = tid[i] as u64;
                r[(S_NTID as usize) + i] = l.block[i] as u64;
                r[(S_CTAID as usize) + i] = block[i] as u64;
                r[(S_NCTAID as usize) + i] = l.grid[i] as u64;
            }
            let lane = (t % 32) as u64;
            r[S_LANEID as usize] = lane;
            r[S_WARPID as usize] = (t / 32) as u64;
            r[S_NWARPID as usize] = nwarps;
            let bit = 1u64 << lane;
            r[S_LANEMASK as usize] = bit;
            r[S_LANEMASK as usize + 1] = bit - 1;
            r[S_LANEMASK as usize + 2] = (bit << 1) - 1;
            r[S_LANEMASK as usize + 3] = !((bit << 1) - 1) & 0xffff_ffff;
            r[S_LANEMASK as usize + 4] = !(bit - 1) & 0xffff_ffff;
            let lin = block[0] as u64 + block[1] as u64 * l.grid[0] as u64;
            r[S_SMID as usize] = lin % l.sm_count.max(1) as u64;
            r[S_NSMID as usize] = l.sm_count as u64;
            r[S_SMEM as usize] = (l.shared_bytes - k.static_shared.min(l.shared_bytes)) as u64;
            r[S_SMEM as usize + 1] = l.shared_bytes as u64;
        }
        loop {
            for t in 0..nt {
                if self.state[t] == TState::Run {
                    self.run_thread(l, t)
                        .map_err(|f| self.describe(l, block, f))?;
                }
            }
            let mut progressed = false;
            for w in 0..nt.div_ceil(32) {
                progressed |= self
                    .try_warp(l, w, nt)
                    .map_err(|f| self.describe(l, block, f))?;
            }
            if progressed {
                continue;
            }
            if self.state.iter().all(|s| *s == TState::Done) {
                return self
                    .tma_exit_check(l)
                    .map_err(|f| self.describe(l, block, f));
            }
            if self.try_barriers(l, nt) {
                continue;
            }
            if self
                .mbar_progress(l, nt)
                .map_err(|f| self.describe(l, block, f))?
            {
                continue;
            }
            let f = self.stuck(l, nt);
            return Err(self.describe(l, block, f));
        }
    }

    fn reg(&self, l: &Launch<'_>, t: usize, s: Slot) -> u64 {
        self.regs[t * l.kernel.nslots + s as usize]
    }

    /// Releases every barrier whose participants have all arrived.
    fn try_barriers(&mut self, l: &Launch<'_>, nt: usize) -> bool {
        let code = &l.kernel.code;
        let mut released = false;
        // (id, expected, waiting)
        let mut groups: Vec<(u64, u64, u64)> = Vec::new();
        for t in 0..nt {
            if self.state[t] != TState::Bar {
                continue;
            }
            let Op::Bar { id, count, .. } = code[self.pc[t] as usize].op else {
                continue;
            };
            let idv = self.reg(l, t, id);
            let expected = if count == S_SINK {
                nt as u64
            } else {
                self.reg(l, t, count)
            };
            match groups.iter_mut().find(|g| g.0 == idv) {
                Some(g) => g.2 += 1,
                None => groups.push((idv, expected, 1)),
            }
        }
        for (idv, expected, waiting) in groups {
            let arrived = self.arrivals.iter().find(|a| a.0 == idv).map_or(0, |a| a.1);
            if waiting + arrived < expected {
                continue;
            }
            released = true;
            self.arrivals.retain(|a| a.0 != idv);
            let at_this = |r: &Runner, t: usize| {
                r.state[t] == TState::Bar
                    && matches!(code[r.pc[t] as usize].op, Op::Bar { id, .. } if r.reg(l, t, id) == idv)
            };
            // bar.red: reduce the predicates of the waiting threads.
            let (mut count, mut all) = (0u64, true);
            for t in 0..nt {
                if at_this(self, t) {
                    if let Op::Bar { p, pneg, .. } = code[self.pc[t] as usize].op {
                        let v = (self.reg(l, t, p) != 0) != pneg;
                        count += v as u64;
                        all &= v;
                    }
                }
            }
            for t in 0..nt {
                if at_this(self, t) {
                    if let Op::Bar { red, d, .. } = code[self.pc[t] as usize].op {
                        let v = match red {
                            BarRed::None => None,
                            BarRed::Popc => Some(count),
                            BarRed::And => Some(all as u64),
                            BarRed::Or => Some((count > 0) as u64),
                        };
                        if let Some(v) = v {
                            self.regs[t * l.kernel.nslots + d as usize] = v;
                        }
                    }
                    self.state[t] = TState::Run;
                    self.pc[t] += 1;
                }
            }
        }
        if released {
            self.epoch = self.epoch.saturating_add(1);
        }
        released
    }

    fn where_is(&self, l: &Launch<'_>, t: usize) -> String {
        let pc = (self.pc[t] as usize).min(l.kernel.code.len() - 1);
        let line = l.kernel.lines[pc];
        match self.state[t] {
            TState::Done => format!("exited (PTX line {line})"),
            TState::Bar => format!("waits at a barrier (PTX line {line})"),
            TState::Warp => format!("waits at a warp collective (PTX line {line})"),
            TState::Wait => format!("waits on an mbarrier (PTX line {line})"),
            TState::Run => "is running".to_string(),
        }
    }

    /// Explains why no thread of the block can proceed.
    fn stuck(&self, l: &Launch<'_>, nt: usize) -> Fail {
        let code = &l.kernel.code;
        if let Some(t) = (0..nt).find(|&t| self.state[t] == TState::Bar) {
            let pc = self.pc[t] as usize;
            let arrived = (0..nt)
                .filter(|&u| self.state[u] == TState::Bar && self.pc[u] == self.pc[t])
                .count();
            let other = (0..nt)
                .find(|&u| self.state[u] != TState::Bar || self.pc[u] != self.pc[t])
                .unwrap_or(t);
            return Fail {
                msg: format!(
                    "barrier divergence: barrier reached by {arrived} of {nt} threads of the block; thread {} {} instead",
                    fmt3(coords(other, l.block)),
                    self.where_is(l, other)
                ),
                t,
                pc,
            };
        }
        let t = (0..nt)
            .find(|&t| self.state[t] == TState::Warp)
            .unwrap_or(0);
        let pc = self.pc[t] as usize;
        let mask = self.reg(l, t, code[pc].op.member_mask()) as u32;
        let w = t / 32;
        let missing = (0..32usize)
            .filter(|&lane| mask >> lane & 1 != 0)
            .map(|lane| w * 32 + lane)
            .find(|&u| u < nt && (self.state[u] != TState::Warp || self.pc[u] as usize != pc))
            .unwrap_or(t);
        Fail {
            msg: format!(
                "warp divergence: warp collective with membermask {mask:#010x} waits for lane {}, thread {}, which {}",
                missing % 32,
                fmt3(coords(missing, l.block)),
                self.where_is(l, missing)
            ),
            t,
            pc,
        }
    }

    /// Performs the warp collectives of warp `w` whose member lanes have all arrived.
    fn try_warp(&mut self, l: &Launch<'_>, w: usize, nt: usize) -> Result<bool, Fail> {
        let code = &l.kernel.code;
        let lo = w * 32;
        let hi = (lo + 32).min(nt);
        let exist: u32 = if hi - lo == 32 {
            u32::MAX
        } else {
            (1u32 << (hi - lo)) - 1
        };
        let mut progressed = false;
        for t in lo..hi {
            if self.state[t] != TState::Warp {
                continue;
            }
            let pc = self.pc[t] as usize;
            let mslot = code[pc].op.member_mask();
            let mval = self.reg(l, t, mslot) as u32;
            let lane = t - lo;
            if mval >> lane & 1 == 0 {
                return Err(Fail { msg: format!("warp divergence: lane {lane} executes a warp collective whose membermask {mval:#010x} excludes it"), t, pc });
            }
            let need = mval & exist;
            // The warpgroup collectives: `wgmma` and `setmaxnreg` (which here changes
            // nothing: the emulator has no register file to resize).
            let wgmma = matches!(
                code[pc].op,
                Op::Wgmma { .. }
                    | Op::WgmmaFence { .. }
                    | Op::WgmmaCommit { .. }
                    | Op::WgmmaWait { .. }
                    | Op::SetMaxNReg { .. }
            );
            if (wgmma
                || matches!(
                    code[pc].op,
                    Op::Mma { .. } | Op::Ldmatrix { .. } | Op::Stmatrix { .. }
                ))
                && exist != u32::MAX
            {
                return Err(Fail {
                    msg: format!(
                        "warp divergence: a matrix instruction needs all 32 lanes, the warp has {}",
                        hi - lo
                    ),
                    t,
                    pc,
                });
            }
            if wgmma {
                Runner::warpgroup_check(w, nt).map_err(|msg| Fail { msg, t, pc })?;
            }
            let mut group = 0u32;
            for u in lo..hi {
                if need >> (u - lo) & 1 != 0
                    && self.state[u] == TState::Warp
                    && self.pc[u] as usize == pc
                    && self.reg(l, u, mslot) as u32 == mval
                {
                    group |= 1 << (u - lo);
                }
            }
            if group != need {
                continue;
            }
            self.collective(l, lo, group, pc)?;
            for u in lo..hi {
                if group >> (u - lo) & 1 != 0 {
                    self.state[u] = TState::Run;
                    self.pc[u] += 1;
                }
            }
            progressed = true;
        }
        Ok(progressed)
    }

    /// A view of memory as thread `t` sees it.
    fn mem_for<'r, 'a>(&'r mut self, l: &'r Launch<'a>, t: usize) -> Mem<'r, 'a> {
        let lb = l.kernel.local_bytes as usize;
        Mem {
            l,
            shared: &mut self.shared[..l.shared_bytes as usize],
            shadow: &mut self.shadow[..l.shared_bytes as usize],
            local: &mut self.local[t * lb..(t + 1) * lb],
            hint: &mut self.hint,
            epoch: self.epoch,
            block_epoch: self.block_epoch,
            me: t as u32 + 1,
            warp_syncs: self.warp_syncs,
            met: &self.met[t],
            met_all: self.met_all[t],
            queue: &mut self.queues[t],
            tma: &mut self.tma,
            proxy: &mut self.proxy,
            async_reads: &mut self.async_reads,
            proxy_fences: &mut self.proxy_fences,
        }
    }

    /// `ldmatrix`: lanes 8i..8i+7 give the row addresses of matrix i; every lane receives two
    /// 16-bit elements of each matrix.
    fn ldmatrix(&mut self, l: &Launch<'_>, lo: usize, pc: usize) -> Result<(), Fail> {
        let Op::Ldmatrix {
            n,
            trans,
            d,
            base,
            off,
            ..
        } = l.kernel.code[pc].op
        else {
            return Ok(());
        };
        let ns = l.kernel.nslots;
        let mut rows = [0u64; 32];
        for (lane, row) in rows.iter_mut().enumerate().take(8 * n as usize) {
            *row = self.regs[(lo + lane) * ns + base as usize].wrapping_add(off as u64);
        }
        let mut out = [[0u64; 4]; 32];
        for (lane, o) in out.iter_mut().enumerate() {
            let (g, t) = (lane >> 2, lane & 3);
            for (i, slot) in o.iter_mut().enumerate().take(n as usize) {
                let v = if trans {
                    let mut v = 0u64;
                    for j in 0..2 {
                        let src = lo + i * 8 + t * 2 + j;
                        let addr = rows[i * 8 + t * 2 + j].wrapping_add((g * 2) as u64);
                        let mut mem = self.mem_for(l, src);
                        v |= mem.load(MemSpace::Shared, addr, 2).map_err(|msg| Fail {
                            msg,
                            t: src,
                            pc,
                        })? << (16 * j);
                    }
                    v
                } else {
                    let src = lo + i * 8 + g;
                    let mut mem = self.mem_for(l, src);
                    mem.load(
                        MemSpace::Shared,
                        rows[i * 8 + g].wrapping_add((t * 4) as u64),
                        4,
                    )
                    .map_err(|msg| Fail { msg, t: src, pc })?
                };
                *slot = v;
            }
        }
        for (lane, o) in out.iter().enumerate() {
            for (i, &ds) in d.iter().enumerate().take(n as usize) {
                self.regs[(lo + lane) * ns + ds as usize] = o[i];
            }
        }
        Ok(())
    }

    /// `stmatrix`: lanes 8i..8i+7 give the row addresses of matrix i; every lane gives two
    /// 16-bit elements of each matrix, where `ldmatrix` would have loaded them. A row's bytes
    /// count as written by the lane that gave its address.
    fn stmatrix(&mut self, l: &Launch<'_>, lo: usize, pc: usize) -> Result<(), Fail> {
        let Op::Stmatrix {
            n,
            trans,
            s,
            base,
            off,
            ..
        } = l.kernel.code[pc].op
        else {
            return Ok(());
        };
        let ns = l.kernel.nslots;
        let mut rows = [0u64; 32];
        for (lane, row) in rows.iter_mut().enumerate().take(8 * n as usize) {
            *row = self.regs[(lo + lane) * ns + base as usize].wrapping_add(off as u64);
            if *row % 16 != 0 {
                return Err(Fail {
                    msg: format!(
                        "misaligned stmatrix row: lane {lane} gives shared address {:#x}, not a multiple of 16 bytes",
                        *row
                    ),
                    t: lo + lane,
                    pc,
                });
            }
        }
        for lane in 0..32usize {
            let (g, t) = (lane >> 2, lane & 3);
            for (i, &src) in s.iter().enumerate().take(n as usize) {
                let v = self.regs[(lo + lane) * ns + src as usize];
                let fail = |msg, t| Fail { msg, t, pc };
                if trans {
                    // Element j of the lane's pair goes to row `2 t + j`, column `g`.
                    for j in 0..2 {
                        let dst = lo + i * 8 + t * 2 + j;
                        let addr = rows[i * 8 + t * 2 + j].wrapping_add((g * 2) as u64);
                        let mut mem = self.mem_for(l, dst);
                        mem.store(MemSpace::Shared, addr, 2, (v >> (16 * j)) & 0xffff)
                            .map_err(|msg| fail(msg, dst))?;
                    }
                } else {
                    let dst = lo + i * 8 + g;
                    let mut mem = self.mem_for(l, dst);
                    mem.store(
                        MemSpace::Shared,
                        rows[i * 8 + g].wrapping_add((t * 4) as u64),
                        4,
                        v & 0xffff_ffff,
                    )
                    .map_err(|msg| fail(msg, dst))?;
                }
            }
        }
        Ok(())
    }

    fn collective(&mut self, l: &Launch<'_>, lo: usize, group: u32, pc: usize) -> Result<(), Fail> {
        let n = l.kernel.nslots;
        let lanes = || (0..32usize).filter(move |i| group >> i & 1 != 0);
        match l.kernel.code[pc].op {
            Op::Shfl {
                mode,
                d,
                p,
                a,
                b,
                c,
                ..
            } => {
                let mut vals = [0u64; 32];
                for i in lanes() {
                    vals[i] = self.regs[(lo + i) * n + a as usize];
                }
                for i in lanes() {
                    let r = &mut self.regs[(lo + i) * n..(lo + i + 1) * n];
                    let (bv, cv) = (r[b as usize] as i64 & 31, r[c as usize]);
                    let seg = ((cv >> 8) & 31) as i64;
                    let cl = (cv & 31) as i64;
                    let lane = i as i64;
                    let max_lane = (lane & seg) | (cl & !seg);
                    let min_lane = lane & seg;
                    let (j, ok) = match mode {
                        ShflMode::Up => (lane - bv, lane - bv >= max_lane),
                        ShflMode::Down => (lane + bv, lane + bv <= max_lane),
                        ShflMode::Bfly => (lane ^ bv, (lane ^ bv) <= max_lane),
                        ShflMode::Idx => {
                            let j = min_lane | (bv & !seg);
                            (j, j <= max_lane)
                        }
                    };
                    let j = if ok { j as usize } else { i };
                    // A source lane outside the group has undefined contents: keep our own value.
                    let v = if j < 32 && group >> j & 1 != 0 {
                        vals[j]
                    } else {
                        vals[i]
                    };
                    r[d as usize] = v & 0xffff_ffff;
                    if p != S_SINK {
                        r[p as usize] = ok as u64;
                    }
                }
            }
            Op::Vote {
                mode, d, a, neg, ..
            } => {
                let mut ballot = 0u32;
                for i in lanes() {
                    if (self.regs[(lo + i) * n + a as usize] != 0) != neg {
                        ballot |= 1 << i;
                    }
                }
                let v = match mode {
                    VoteMode::All => (ballot == group) as u64,
                    VoteMode::Any => (ballot != 0) as u64,
                    VoteMode::Uni => (ballot == group || ballot == 0) as u64,
                    VoteMode::Ballot => ballot as u64,
                };
                for i in lanes() {
                    self.regs[(lo + i) * n + d as usize] = v;
                }
            }
            Op::Elect { d, p, .. } => {
                let leader = group.trailing_zeros() as u64;
                for i in lanes() {
                    let r = &mut self.regs[(lo + i) * n..(lo + i + 1) * n];
                    if d != S_SINK {
                        r[d as usize] = leader;
                    }
                    if p != S_SINK {
                        r[p as usize] = (i as u64 == leader) as u64;
                    }
                }
            }
            Op::Redux { op, ty, d, a, .. } => {
                let mut acc: Option<u64> = None;
                for i in lanes() {
                    let v = self.regs[(lo + i) * n + a as usize] & ty.mask();
                    acc = Some(match acc {
                        None => v,
                        Some(x) => atom_apply(op, ty, x, v, 0) & ty.mask(),
                    });
                }
                for i in lanes() {
                    self.regs[(lo + i) * n + d as usize] = acc.unwrap_or(0);
                }
            }
            Op::Mma { idx, .. } => {
                if let Some(m) = l.kernel.mmas.get(idx as usize) {
                    super::tensor::mma_warp(m, &mut self.regs, n, lo);
                }
            }
            Op::Ldmatrix { .. } => self.ldmatrix(l, lo, pc)?,
            Op::Stmatrix { .. } => self.stmatrix(l, lo, pc)?,
            Op::Wgmma { idx, .. } => self.wgmma_issue(l, lo, pc, idx as usize)?,
            Op::WgmmaFence { .. } => self.wgmma_fence(lo),
            Op::WgmmaCommit { .. } => self.wgmma_commit(lo),
            Op::WgmmaWait { n, .. } => self.wgmma_wait(lo, n),
            Op::BarWarp { .. } => {
                // Shared accesses of the group's threads before the barrier are ordered before
                // their accesses after it (`mem.rs`, the race checks).
                self.warp_syncs += 1;
                let stamp = self.warp_syncs;
                let nt = (l.block[0] * l.block[1] * l.block[2]) as usize;
                let lanes_here = (nt - lo).min(32);
                let whole = lanes_here == 32 && group == u32::MAX
                    || lanes_here < 32 && group == (1u32 << lanes_here) - 1;
                for i in lanes() {
                    for j in lanes() {
                        self.met[lo + i][j] = stamp;
                    }
                    if whole {
                        self.met_all[lo + i] = stamp;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Runs thread `t` until it stops at a synchronization point or exits.
    fn run_thread(&mut self, l: &Launch<'_>, t: usize) -> Result<(), Fail> {
        let k = l.kernel;
        let n = k.nslots;
        let code = &k.code[..];
        let lb = k.local_bytes as usize;
        let Runner {
            regs,
            pc: pcs,
            state,
            shared,
            shadow,
            local,
            epoch,
            block_epoch,
            hint,
            steps,
            arrivals,
            warp_syncs,
            met,
            met_all,
            queues,
            wg,
            proxy,
            async_reads,
            proxy_fences,
            wg_a: _,
            wg_b: _,
            tma,
            waits,
            stall: _,
        } = self;
        let r = &mut regs[t * n..(t + 1) * n];
        let mut mem = Mem {
            l,
            shared: &mut shared[..l.shared_bytes as usize],
            shadow: &mut shadow[..l.shared_bytes as usize],
            local: &mut local[t * lb..(t + 1) * lb],
            hint,
            epoch: *epoch,
            block_epoch: *block_epoch,
            me: t as u32 + 1,
            warp_syncs: *warp_syncs,
            met: &met[t],
            met_all: met_all[t],
            queue: &mut queues[t],
            tma,
            proxy,
            async_reads,
            proxy_fences,
        };
        let mut pc = pcs[t] as usize;
        let mut count = 0u64;
        let result = loop {
            let inst = &code[pc];
            count += 1;
            if count > l.max_steps {
                break Err(Fail {
                    msg: format!("watchdog: the thread executed {} instructions without reaching a synchronization point or its exit (an endless loop?)", l.max_steps),
                    t,
                    pc,
                });
            }
            if inst.guard != S_SINK {
                if inst.guard == S_ACC {
                    match wg[t / 32].access(k, pc, r) {
                        Ok(true) => {}
                        Ok(false) => {
                            pc += 1;
                            continue;
                        }
                        Err(msg) => break Err(Fail { msg, t, pc }),
                    }
                } else if (r[inst.guard as usize] != 0) == inst.guard_neg {
                    pc += 1;
                    continue;
                }
            }
            match step(inst.op, r, &mut mem) {
                Ok(Flow::Next) => pc += 1,
                Ok(Flow::Jump(target)) => pc = target as usize,
                Ok(Flow::Arrive(idv)) => {
                    match arrivals.iter_mut().find(|a| a.0 == idv) {
                        Some(a) => a.1 += 1,
                        None => arrivals.push((idv, 1)),
                    }
                    pc += 1;
                }
                Ok(Flow::Wait(at, parity)) => {
                    waits[t] = MbarWait {
                        at,
                        parity,
                        pc: pc as u32,
                    };
                    state[t] = TState::Wait;
                    pc += 1;
                    break Ok(());
                }
                Ok(Flow::Stop(s)) => {
                    if s == TState::Done {
                        if let Some(Err(msg)) = wg.get(t / 32).map(|w| w.exit_check(k)) {
                            break Err(Fail { msg, t, pc });
                        }
                    }
                    state[t] = s;
                    break Ok(());
                }
                Err(msg) => break Err(Fail { msg, t, pc }),
            }
        };
        pcs[t] = pc as u32;
        *steps += count;
        result
    }
}

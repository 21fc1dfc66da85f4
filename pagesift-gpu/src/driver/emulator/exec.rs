//! Execution of one thread block: the interpreter loop, memory accesses with their checks, and
//! the scheduling of barriers and warp collectives.
//!
//! Each thread runs until it reaches a synchronization point (a barrier, a warp collective, or
//! its exit). When every thread is stopped, warp collectives whose member lanes have all arrived
//! are performed together, then barriers whose participants have all arrived are released. A
//! state in which nothing can proceed is an error that names who waits where.

use super::decode::*;
use super::memory::{Fault, GlobalView};
use super::num::{self, Ty};

/// Generic addresses of the shared window (the shared offset is the low 32 bits).
pub(super) const SHARED_WINDOW: u64 = 0x5000_0000_0000;
/// Generic addresses of the local window.
pub(super) const LOCAL_WINDOW: u64 = 0x6000_0000_0000;
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
    Done,
}

/// Per shared byte: who wrote and read it last, and in which barrier interval (epoch).
#[derive(Clone, Copy, Default)]
struct Shadow {
    writer: u32,
    w_epoch: u32,
    reader: u32,
    r_epoch: u32,
}

const MANY_READERS: u32 = u32::MAX;

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
}

fn coords(t: usize, dim: [u32; 3]) -> [u32; 3] {
    let t = t as u32;
    [t % dim[0], (t / dim[0]) % dim[1], t / (dim[0] * dim[1])]
}

fn fmt3(c: [u32; 3]) -> String {
    format!("({},{},{})", c[0], c[1], c[2])
}

/// Memory of one thread's view while it runs.
struct Mem<'r, 'a> {
    l: &'r Launch<'a>,
    shared: &'r mut [u8],
    shadow: &'r mut [Shadow],
    local: &'r mut [u8],
    hint: &'r mut usize,
    epoch: u32,
    block_epoch: u32,
    me: u32,
    block: [u32; 3],
}

enum Where {
    Global(usize, u64),
    Shared(usize),
    Local(usize),
    Param(usize),
}

impl Mem<'_, '_> {
    fn resolve(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        what: &str,
    ) -> Result<Where, String> {
        let space = match space {
            MemSpace::Generic if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.resolve(MemSpace::Shared, addr - SHARED_WINDOW, len, what)
            }
            MemSpace::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.resolve(MemSpace::Local, addr - LOCAL_WINDOW, len, what)
            }
            MemSpace::Generic => MemSpace::Global,
            s => s,
        };
        let align = len.min(16) as u64;
        match space {
            MemSpace::Global => {
                if addr % align != 0 {
                    return Err(format!("misaligned global access: {what} of {len} bytes at {addr:#x} is not {align}-byte aligned"));
                }
                match self.l.global.find(*self.hint, addr, len as u64) {
                    Ok((i, off)) => {
                        *self.hint = i;
                        Ok(Where::Global(i, off))
                    }
                    Err(Fault::OutOfBounds(near)) => Err(format!(
                        "out-of-bounds global access: {what} of {len} bytes at {addr:#x} is outside every live allocation{}",
                        match near {
                            Some((b, s)) => format!(" (the nearest below is {b:#x}..{:#x}, {s} bytes)", b + s),
                            None => String::new(),
                        }
                    )),
                }
            }
            MemSpace::Shared => {
                if addr % align != 0 {
                    return Err(format!("misaligned shared access: {what} of {len} bytes at shared offset {addr:#x} is not {align}-byte aligned"));
                }
                if addr.saturating_add(len as u64) > self.l.shared_bytes as u64 {
                    return Err(format!(
                        "out-of-bounds shared access: {what} of {len} bytes at shared offset {addr:#x}, beyond the block's {} bytes of shared memory (static {} + dynamic {})",
                        self.l.shared_bytes,
                        self.l.kernel.static_shared,
                        self.l.shared_bytes - self.l.kernel.static_shared.min(self.l.shared_bytes)
                    ));
                }
                Ok(Where::Shared(addr as usize))
            }
            MemSpace::Local => {
                if addr.saturating_add(len as u64) > self.local.len() as u64 {
                    return Err(format!("out-of-bounds local access: {what} of {len} bytes at local offset {addr:#x}, beyond {} bytes", self.local.len()));
                }
                Ok(Where::Local(addr as usize))
            }
            MemSpace::Param | MemSpace::Generic => {
                if addr.saturating_add(len as u64) > self.l.params.len() as u64 {
                    return Err(format!(
                        "out-of-bounds parameter access at offset {addr:#x}"
                    ));
                }
                Ok(Where::Param(addr as usize))
            }
        }
    }

    fn shared_read(&mut self, at: usize, len: usize) -> Result<(), String> {
        for i in at..at + len {
            let s = &mut self.shadow[i];
            if s.w_epoch < self.block_epoch {
                return Err(format!("uninitialized shared memory read: byte at shared offset {i:#x} was never written by any thread of the block"));
            }
            if s.w_epoch == self.epoch && s.writer != self.me {
                let other = coords(s.writer as usize - 1, self.l.block);
                return Err(format!(
                    "shared memory data race: read of shared offset {i:#x}, which thread {} wrote with no barrier in between",
                    fmt3(other)
                ));
            }
            if s.r_epoch == self.epoch && s.reader != self.me {
                s.reader = MANY_READERS;
            } else {
                s.reader = self.me;
                s.r_epoch = self.epoch;
            }
        }
        Ok(())
    }

    fn shared_write(&mut self, at: usize, len: usize) -> Result<(), String> {
        for i in at..at + len {
            let s = &mut self.shadow[i];
            if s.w_epoch == self.epoch && s.writer != self.me {
                let other = coords(s.writer as usize - 1, self.l.block);
                return Err(format!(
                    "shared memory data race: write of shared offset {i:#x}, which thread {} also wrote with no barrier in between",
                    fmt3(other)
                ));
            }
            if s.r_epoch == self.epoch && s.reader != self.me {
                let who = if s.reader == MANY_READERS {
                    "other threads".to_string()
                } else {
                    format!(
                        "thread {}",
                        fmt3(coords(s.reader as usize - 1, self.l.block))
                    )
                };
                return Err(format!("shared memory data race: write of shared offset {i:#x}, which {who} read with no barrier in between"));
            }
            s.writer = self.me;
            s.w_epoch = self.epoch;
        }
        Ok(())
    }

    fn load(&mut self, space: MemSpace, addr: u64, len: u32) -> Result<u64, String> {
        Ok(match self.resolve(space, addr, len, "load")? {
            Where::Global(i, off) => self.l.global.get(i).load(off, len),
            Where::Shared(at) => {
                self.shared_read(at, len as usize)?;
                le(&self.shared[at..at + len as usize])
            }
            Where::Local(at) => le(&self.local[at..at + len as usize]),
            Where::Param(at) => le(&self.l.params[at..at + len as usize]),
        })
    }

    fn store(&mut self, space: MemSpace, addr: u64, len: u32, v: u64) -> Result<(), String> {
        match self.resolve(space, addr, len, "store")? {
            Where::Global(i, off) => self.l.global.get(i).store(off, len, v),
            Where::Shared(at) => {
                self.shared_write(at, len as usize)?;
                self.shared[at..at + len as usize]
                    .copy_from_slice(&v.to_le_bytes()[..len as usize]);
            }
            Where::Local(at) => {
                self.local[at..at + len as usize].copy_from_slice(&v.to_le_bytes()[..len as usize])
            }
            Where::Param(_) => return Err("store to the parameter space".into()),
        }
        Ok(())
    }

    fn atomic(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, String> {
        match self.resolve(space, addr, len, "atomic")? {
            Where::Global(i, off) => Ok(self.l.global.get(i).update(off, len, f)),
            Where::Shared(at) => {
                let end = at + len as usize;
                if let Some(i) = (at..end).find(|&i| self.shadow[i].w_epoch < self.block_epoch) {
                    return Err(format!("uninitialized shared memory read: atomic on shared offset {i:#x}, which no thread of the block wrote"));
                }
                let old = le(&self.shared[at..end]);
                self.shared[at..end].copy_from_slice(&f(old).to_le_bytes()[..len as usize]);
                Ok(old)
            }
            _ => Err("atomic outside global and shared memory".into()),
        }
    }
}

fn le(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

fn atom_apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    use super::num::{int_val, FMode, FOp2, Rnd};
    match op {
        AtomOp::Add if ty.is_float() => {
            let fmt = ty.fmt().unwrap_or(num::Fmt::F32);
            num::fbin(
                FOp2::Add,
                fmt,
                FMode {
                    rnd: Rnd::Rn,
                    ftz: ty == Ty::F32,
                    sat: false,
                },
                old,
                b,
            )
        }
        AtomOp::Add => old.wrapping_add(b),
        AtomOp::Min => (int_val(old, ty).min(int_val(b, ty))) as u64,
        AtomOp::Max => (int_val(old, ty).max(int_val(b, ty))) as u64,
        AtomOp::Inc => {
            let (o, b) = (old & ty.mask(), b & ty.mask());
            if o >= b {
                0
            } else {
                o + 1
            }
        }
        AtomOp::Dec => {
            let (o, b) = (old & ty.mask(), b & ty.mask());
            if o == 0 || o > b {
                b
            } else {
                o - 1
            }
        }
        AtomOp::Cas => {
            if old & ty.mask() == b & ty.mask() {
                c
            } else {
                old
            }
        }
        AtomOp::Exch => b,
        AtomOp::And => old & b,
        AtomOp::Or => old | b,
        AtomOp::Xor => old ^ b,
    }
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
        self.epoch += 1;
        self.block_epoch = self.epoch;
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
                return Ok(());
            }
            if self.try_barriers(l, nt) {
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
            let Op::Bar { id, count } = code[self.pc[t] as usize].op else {
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
            if waiting >= expected {
                released = true;
                for t in 0..nt {
                    if self.state[t] == TState::Bar {
                        if let Op::Bar { id, .. } = code[self.pc[t] as usize].op {
                            if self.reg(l, t, id) == idv {
                                self.state[t] = TState::Run;
                                self.pc[t] += 1;
                            }
                        }
                    }
                }
            }
        }
        if released {
            self.epoch += 1;
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
            if matches!(code[pc].op, Op::Mma { .. } | Op::Ldmatrix { .. }) && exist != u32::MAX {
                return Err(Fail {
                    msg: format!(
                        "warp divergence: a matrix instruction needs all 32 lanes, the warp has {}",
                        hi - lo
                    ),
                    t,
                    pc,
                });
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
            block: l.block,
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
            block: l.block,
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
            if inst.guard != S_SINK && (r[inst.guard as usize] != 0) == inst.guard_neg {
                pc += 1;
                continue;
            }
            match step(inst.op, r, &mut mem, count) {
                Ok(Flow::Next) => pc += 1,
                Ok(Flow::Jump(target)) => pc = target as usize,
                Ok(Flow::Stop(s)) => {
                    state[t] = s;
                    break Ok(());
                }
                Err(msg) => break Err(Fail { msg, t, pc }),
            }
        };
        pcs[t] = pc as u32;
        *steps += count;
        let _ = mem.block;
        result
    }
}

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

enum Flow {
    Next,
    Jump(u32),
    Stop(TState),
}

#[inline(always)]
fn addr_of(r: &[u64], base: Slot, off: i64) -> u64 {
    r[base as usize].wrapping_add(off as u64)
}

/// Executes one (unguarded or guard-true) instruction of a thread.
#[inline(always)]
fn step(op: Op, r: &mut [u64], mem: &mut Mem<'_, '_>, clock: u64) -> Result<Flow, String> {
    use super::num::*;
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
            d,
            base,
            off,
        } => {
            let addr = addr_of(r, base, off);
            let size = ty.bytes();
            if n > 1 {
                // The whole vector must be aligned to its size.
                mem.resolve(space, addr, size * n as u32, "vector load")?;
            }
            for (i, &ds) in d.iter().enumerate().take(n as usize) {
                let v = mem.load(space, addr.wrapping_add((i as u32 * size) as u64), size)?;
                let v = if ty.is_signed() {
                    sext(v, ty.bits()) as u64
                } else {
                    v
                };
                g!(ds) = v;
            }
        }
        Op::St {
            space,
            ty,
            n,
            s,
            base,
            off,
        } => {
            let addr = addr_of(r, base, off);
            let size = ty.bytes();
            if n > 1 {
                mem.resolve(space, addr, size * n as u32, "vector store")?;
            }
            for (i, &ss) in s.iter().enumerate().take(n as usize) {
                mem.store(
                    space,
                    addr.wrapping_add((i as u32 * size) as u64),
                    size,
                    g!(ss) & mask(size * 8),
                )?;
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
        Op::Exit => return Ok(Flow::Stop(TState::Done)),
        Op::Bar { .. } => return Ok(Flow::Stop(TState::Bar)),
        Op::Shfl { .. }
        | Op::Vote { .. }
        | Op::BarWarp { .. }
        | Op::Redux { .. }
        | Op::Mma { .. }
        | Op::Ldmatrix { .. } => return Ok(Flow::Stop(TState::Warp)),
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
                _ => 0,
            };
            let v = g!(a);
            g!(d) = if to {
                v.wrapping_sub(window)
            } else {
                v.wrapping_add(window)
            } & m;
        }
        Op::Activemask { d } => g!(d) = 0xffff_ffff,
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
        Op::Tf32 { d, a } => g!(d) = super::tensor::to_tf32(g!(a)),
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
            mem.resolve(MemSpace::Shared, to, size, "cp.async store")?;
            if keep == size {
                mem.resolve(MemSpace::Global, from, size, "cp.async load")?;
            }
            for i in (0..size).step_by(4) {
                let mut v = 0u64;
                for b in 0..4 {
                    if i + b < keep {
                        v |= mem.load(MemSpace::Global, from.wrapping_add((i + b) as u64), 1)?
                            << (8 * b);
                    }
                }
                mem.store(MemSpace::Shared, to.wrapping_add(i as u64), 4, v)?;
            }
        }
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
        Op::Trap => return Err("trap: the kernel executed trap".into()),
    }
    let _ = clock;
    Ok(Flow::Next)
}

//! Memory as one thread sees it: address resolution across the state spaces, and the checks
//! (bounds, alignment, uninitialized shared reads, shared-memory races, accesses to the
//! destination of a `cp.async` not yet completed).
//!
//! `cp.async` reads its global source when it executes, but writes its shared destination only
//! when a `cp.async.wait_group` / `wait_all` of the issuing thread (or its exit) completes it,
//! or, for the copies a `cp.async.mbarrier.arrive` waits for, when the emulator lets that
//! arrival happen (as late as it can: `exec/tma.rs`), as the hardware may. Until then the
//! destination bytes are pending (`PENDING` in their shadow) and any access to them by any
//! thread of the block is an error; once completed they count as written by the issuing
//! thread at that moment, so the race checks apply to them as to a store.
//!
//! In a kernel with `wgmma.mma_async`, shared memory also has an async-proxy shadow: per byte
//! the last thread that wrote it through the generic proxy (stores, atomics, completed
//! `cp.async`) with its count of `fence.proxy.async` at that write ([`ProxyByte`]), so a
//! `wgmma` read of a byte whose writer has not fenced since is an error; and per 16-byte chunk
//! the number of pending `wgmma.mma_async` that read it ([`AsyncRead`]), so a write to it
//! before their `wgmma.wait_group` is an error.

use super::super::decode::{AtomOp, MemSpace, Op};
use super::super::memory::Fault;
use super::super::num::Ty;
use super::tma::TmaState;
use super::{coords, fmt3, Launch, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE};

/// Per shared byte: who wrote and read it last, in which barrier interval (epoch), after how
/// many warp barriers of the block (the stamps: a later warp barrier of both threads orders
/// the accesses), and at which of the accessing thread's `mbarrier` clocks (the clocks: an
/// `mbarrier` phase that the thread arrived on later, and that the other thread waited for,
/// orders them; `exec/tma.rs`).
#[derive(Clone, Copy, Default)]
pub(super) struct Shadow {
    /// The thread (numbered from 1) that wrote it last; [`ASYNC_WRITER`] for a completed
    /// `cp.async.bulk.tensor`.
    pub(super) writer: u32,
    pub(super) w_epoch: u32,
    pub(super) w_stamp: u32,
    pub(super) w_clock: u32,
    pub(super) reader: u32,
    pub(super) r_epoch: u32,
    /// The latest stamp of the interval's reads.
    r_stamp: u32,
    /// The single reader's clock at its read; for readers all in one warp, the latest of
    /// their clocks at their reads.
    r_clock: u32,
    /// For readers all in one warp, their lanes (bit `l`: lane `l` read it).
    r_lanes: u32,
}

/// The `w_epoch` of a byte that a `cp.async` of thread `writer` will write, not completed yet
/// (above every epoch a block reaches: the epoch restarts long before).
const PENDING: u32 = u32::MAX;
/// The `w_epoch` of the 8 bytes of an initialized `mbarrier` (`exec/tma.rs`).
pub(super) const MBARRIER: u32 = u32::MAX - 1;
/// The `w_epoch` of a byte that a `cp.async.bulk.tensor` in flight writes (`exec/tma.rs`).
pub(super) const TMA_PENDING: u32 = u32::MAX - 2;
/// The writer of bytes a completed `cp.async.bulk.tensor` wrote: ordered before every access
/// that follows, as the `mbarrier` wait that let the copy complete orders them.
pub(super) const ASYNC_WRITER: u32 = 0;

/// A `cp.async` issued and not completed: its shared destination and the bytes it read.
#[derive(Clone, Copy)]
struct AsyncCopy {
    at: u32,
    len: u8,
    bytes: [u8; 16],
}

/// A thread's `cp.async` copies not completed yet, in issue order; its buffers are reused from
/// block to block.
#[derive(Default)]
pub(super) struct AsyncQueue {
    copies: Vec<AsyncCopy>,
    /// Per committed group not completed yet, oldest first: the number of `copies` up to its
    /// end (the copies after the last hold the open group).
    groups: Vec<u32>,
    /// The thread's copies completed so far in this block: `copies[i]` is its copy number
    /// `done + i` (what a `cp.async.mbarrier.arrive` waits for, `exec/tma.rs`).
    pub(super) done: u64,
}

impl AsyncQueue {
    /// Forgets the copies of a block that failed, their destinations uninitialized again.
    pub(super) fn discard(&mut self, shadow: &mut [Shadow]) {
        for c in self.copies.drain(..) {
            let at = c.at as usize;
            shadow[at..at + c.len as usize].fill(Shadow::default());
        }
        self.groups.clear();
        self.done = 0;
    }

    /// The number of the thread's next copy.
    pub(super) fn issued(&self) -> u64 {
        self.done + self.copies.len() as u64
    }
}

/// The async-proxy view of one shared byte (kernels with `wgmma` only).
#[derive(Clone, Copy, Default)]
pub(super) struct ProxyByte {
    /// The thread (numbered from 1; 0: none) that last wrote it through the generic proxy.
    writer: u32,
    /// That thread's count of `fence.proxy.async` when it wrote: the write is visible to the
    /// async proxy once the count is higher.
    fences: u32,
}

/// The pending `wgmma.mma_async` reads of one 16-byte shared chunk (kernels with `wgmma`
/// only).
#[derive(Clone, Copy, Default)]
pub(super) struct AsyncRead {
    /// How many pending `wgmma.mma_async` read it.
    pub(super) count: u32,
    /// The instruction index of the latest of them.
    pub(super) pc: u32,
}

/// Readers in several warps.
const MANY_READERS: u32 = u32::MAX;
/// Several readers, all in warp `w`: `MANY_IN_WARP | w` (thread numbers stay below 2^31).
const MANY_IN_WARP: u32 = 1 << 31;

/// Memory of one thread's view while it runs.
pub(super) struct Mem<'r, 'a> {
    pub(super) l: &'r Launch<'a>,
    pub(super) shared: &'r mut [u8],
    pub(super) shadow: &'r mut [Shadow],
    pub(super) local: &'r mut [u8],
    pub(super) hint: &'r mut usize,
    pub(super) epoch: u32,
    pub(super) block_epoch: u32,
    pub(super) me: u32,
    /// The stamp of the block's last warp barrier.
    pub(super) warp_syncs: u32,
    /// Per lane of this thread's warp: the stamp of the last warp barrier of both.
    pub(super) met: &'r [u32; 32],
    /// The stamp of the last warp barrier of this thread's whole warp.
    pub(super) met_all: u32,
    /// This thread's `cp.async` copies not completed yet.
    pub(super) queue: &'r mut AsyncQueue,
    /// The block's `mbarrier` objects and `cp.async.bulk.tensor` copies in flight.
    pub(super) tma: &'r mut TmaState,
    /// Per shared byte, its last generic write (empty unless the kernel has `wgmma`).
    pub(super) proxy: &'r mut [ProxyByte],
    /// Per 16-byte shared chunk, its pending `wgmma` reads (empty unless the kernel has
    /// `wgmma`).
    pub(super) async_reads: &'r mut [AsyncRead],
    /// Per thread of the block, its count of executed `fence.proxy.async`.
    pub(super) proxy_fences: &'r mut [u32],
}

pub(super) enum Where {
    Global(usize, u64),
    Shared(usize),
    Local(usize),
    Param(usize),
}

impl Mem<'_, '_> {
    pub(super) fn resolve(
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
            MemSpace::Generic if (PARAM_WINDOW..PARAM_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.resolve(MemSpace::Param, addr - PARAM_WINDOW, len, what)
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

    /// Whether this thread and thread `other` (numbered from 1) are in one warp and both took
    /// part in a warp barrier after the access made at `stamp`.
    fn warp_ordered(me: u32, met: &[u32; 32], other: u32, stamp: u32) -> bool {
        if other == ASYNC_WRITER {
            return true;
        }
        let (a, b) = (me - 1, other - 1);
        a / 32 == b / 32 && met[(b % 32) as usize] > stamp
    }

    /// Whether the interval's earlier reads of a byte (`reader`, at `stamp` the latest; a
    /// single reader at its `clock`; readers in one warp, `lanes` of it, at `clock` the
    /// latest of theirs) are ordered before an access of this thread: by a warp barrier of
    /// the whole warp, or by `mbarrier` phases that each reader arrived on after `clock`.
    fn reads_ordered(&self, reader: u32, stamp: u32, clock: u32, lanes: u32) -> bool {
        let warp = (self.me - 1) / 32;
        match reader {
            MANY_READERS => false,
            r if r & MANY_IN_WARP != 0 => {
                let w = r & !MANY_IN_WARP;
                (w == warp && self.met_all > stamp)
                    || (0..32)
                        .filter(|l| lanes >> l & 1 != 0)
                        .all(|l| self.tma.ordered(self.me, w * 32 + l + 1, clock))
            }
            r => {
                r == self.me
                    || Self::warp_ordered(self.me, self.met, r, stamp)
                    || self.tma.ordered(self.me, r, clock)
            }
        }
    }

    /// Why byte `i`, whose last write is not of this block's epochs, cannot be read: the
    /// destination of a pending `cp.async`, or never written.
    #[cold]
    #[inline(never)]
    fn unreadable(&self, i: usize, atomic: bool) -> String {
        let what = if atomic { "atomic on" } else { "read of" };
        if self.shadow[i].w_epoch >= TMA_PENDING {
            self.pending(i, what)
        } else if atomic {
            format!("uninitialized shared memory read: atomic on shared offset {i:#x}, which no thread of the block wrote")
        } else {
            format!("uninitialized shared memory read: byte at shared offset {i:#x} was never written by any thread of the block")
        }
    }

    /// The error of an access (`what`: "read of", ...) to byte `i`, which no thread may access
    /// now: a `cp.async` or `cp.async.bulk.tensor` in flight writes it, or it is part of an
    /// `mbarrier`.
    #[cold]
    #[inline(never)]
    pub(super) fn pending(&self, i: usize, what: &str) -> String {
        let s = self.shadow[i];
        let issuer = fmt3(coords((s.writer as usize).max(1) - 1, self.l.block));
        match s.w_epoch {
            MBARRIER => format!(
                "generic access of an mbarrier object: {what} shared offset {i:#x}, a byte of an mbarrier that mbarrier.init initialized (only mbarrier instructions may access it)"
            ),
            TMA_PENDING => format!(
                "{what} shared memory that a cp.async.bulk.tensor in flight writes: shared offset {i:#x}, in the destination of a copy of thread {issuer} that no mbarrier wait has completed yet"
            ),
            _ => format!(
                "cp.async not complete: {what} shared offset {i:#x}, the destination of a cp.async of thread {issuer} that no cp.async.wait_group has completed yet"
            ),
        }
    }

    pub(super) fn shared_read(&mut self, at: usize, len: usize) -> Result<(), String> {
        self.shared_read_as(at, len, true)
    }

    /// A read of shared bytes `at..at+len`, checked against their writes; recorded as this
    /// thread's read (for the checks of later writes) where `record`. The asynchronous
    /// `wgmma` reads are not recorded: their own record (`AsyncRead`) refuses writes until
    /// their `wgmma.wait_group`.
    pub(super) fn shared_read_as(
        &mut self,
        at: usize,
        len: usize,
        record: bool,
    ) -> Result<(), String> {
        let (me, met, stamp) = (self.me, self.met, self.warp_syncs);
        let clock = self.tma.own_clock(me);
        let warp = (me - 1) / 32;
        // Written in this block: an epoch in block_epoch..=epoch (not PENDING, not older).
        let span = self.epoch - self.block_epoch;
        for i in at..at + len {
            let s = &mut self.shadow[i];
            if s.w_epoch.wrapping_sub(self.block_epoch) > span {
                return Err(self.unreadable(i, false));
            }
            if s.w_epoch == self.epoch
                && s.writer != me
                && !Self::warp_ordered(me, met, s.writer, s.w_stamp)
                && !self.tma.ordered(me, s.writer, s.w_clock)
            {
                let other = coords(s.writer as usize - 1, self.l.block);
                return Err(format!(
                    "shared memory data race: read of shared offset {i:#x}, which thread {} wrote with no barrier in between",
                    fmt3(other)
                ));
            }
            if !record {
                continue;
            }
            if s.r_epoch == self.epoch && s.reader != me {
                let same_warp = match s.reader {
                    MANY_READERS => false,
                    r if r & MANY_IN_WARP != 0 => r & !MANY_IN_WARP == warp,
                    r => {
                        s.r_lanes = 1 << ((r - 1) % 32);
                        (r - 1) / 32 == warp
                    }
                };
                if same_warp {
                    s.reader = MANY_IN_WARP | warp;
                    s.r_lanes |= 1 << ((me - 1) % 32);
                    s.r_clock = s.r_clock.max(clock);
                } else {
                    s.reader = MANY_READERS;
                }
                s.r_stamp = s.r_stamp.max(stamp);
            } else {
                s.reader = me;
                s.r_epoch = self.epoch;
                s.r_stamp = stamp;
                s.r_clock = clock;
            }
        }
        Ok(())
    }

    pub(super) fn shared_write(&mut self, at: usize, len: usize) -> Result<(), String> {
        if !self.proxy.is_empty() {
            self.generic_write(at, len)?;
        }
        let (me, met, stamp) = (self.me, self.met, self.warp_syncs);
        let clock = self.tma.own_clock(me);
        for i in at..at + len {
            let s = self.shadow[i];
            if s.w_epoch >= self.epoch {
                if s.w_epoch >= TMA_PENDING {
                    return Err(self.pending(i, "write of"));
                }
                if s.writer != me
                    && !Self::warp_ordered(me, met, s.writer, s.w_stamp)
                    && !self.tma.ordered(me, s.writer, s.w_clock)
                {
                    let other = coords(s.writer as usize - 1, self.l.block);
                    return Err(format!(
                        "shared memory data race: write of shared offset {i:#x}, which thread {} also wrote with no barrier in between",
                        fmt3(other)
                    ));
                }
            }
            if s.r_epoch == self.epoch
                && s.reader != me
                && !self.reads_ordered(s.reader, s.r_stamp, s.r_clock, s.r_lanes)
            {
                let who = if s.reader & MANY_IN_WARP != 0 {
                    "other threads".to_string()
                } else {
                    format!(
                        "thread {}",
                        fmt3(coords(s.reader as usize - 1, self.l.block))
                    )
                };
                return Err(format!("shared memory data race: write of shared offset {i:#x}, which {who} read with no barrier in between"));
            }
            let s = &mut self.shadow[i];
            s.writer = me;
            s.w_epoch = self.epoch;
            s.w_stamp = stamp;
            s.w_clock = clock;
        }
        Ok(())
    }

    pub(super) fn load(&mut self, space: MemSpace, addr: u64, len: u32) -> Result<u64, String> {
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

    pub(super) fn store(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        v: u64,
    ) -> Result<(), String> {
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

    pub(super) fn atomic(
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
                let span = self.epoch - self.block_epoch;
                if let Some(i) = (at..end)
                    .find(|&i| self.shadow[i].w_epoch.wrapping_sub(self.block_epoch) > span)
                {
                    return Err(self.unreadable(i, true));
                }
                if !self.proxy.is_empty() {
                    self.generic_write(at, len as usize)?;
                }
                let old = le(&self.shared[at..end]);
                self.shared[at..end].copy_from_slice(&f(old).to_le_bytes()[..len as usize]);
                Ok(old)
            }
            _ => Err("atomic outside global and shared memory".into()),
        }
    }
}

impl Mem<'_, '_> {
    /// `cp.async` of `size` bytes from global `from` to shared `to`, of which the first `keep`
    /// come from the source and the rest are zero: reads the source now, checks the
    /// destination as a store and leaves it pending until a wait completes the copy.
    #[inline(never)]
    pub(super) fn cp_async(
        &mut self,
        to: u64,
        from: u64,
        size: u32,
        keep: u32,
    ) -> Result<(), String> {
        let Where::Shared(at) = self.resolve(MemSpace::Shared, to, size, "cp.async store")? else {
            return Err("cp.async destination outside shared memory".into());
        };
        let mut bytes = [0u8; 16];
        if keep == size {
            if let Where::Global(i, off) =
                self.resolve(MemSpace::Global, from, size, "cp.async load")?
            {
                // Aligned to the size (checked), so to the width of the words read.
                let a = self.l.global.get(i);
                let w = size.min(8);
                for k in (0..size).step_by(w as usize) {
                    let v = a.load(off + k as u64, w);
                    bytes[k as usize..(k + w) as usize]
                        .copy_from_slice(&v.to_le_bytes()[..w as usize]);
                }
            }
        } else {
            // Only the bytes read need a valid source.
            for (b, byte) in bytes.iter_mut().enumerate().take(keep as usize) {
                *byte = self.load(MemSpace::Global, from.wrapping_add(b as u64), 1)? as u8;
            }
        }
        let len = size as usize;
        self.shared_write(at, len)?;
        for s in &mut self.shadow[at..at + len] {
            s.w_epoch = PENDING;
        }
        self.queue.copies.push(AsyncCopy {
            at: at as u32,
            len: size as u8,
            bytes,
        });
        Ok(())
    }

    /// `cp.async.commit_group`: the copies since the last commit become a group.
    pub(super) fn cp_commit(&mut self) {
        let end = self.queue.copies.len() as u32;
        self.queue.groups.push(end);
    }

    /// `cp.async.wait_group n`: completes the oldest committed groups until at most `n` remain
    /// (`all`, for `wait_all` and the thread's exit: commits first, `n` 0, completing every copy).
    /// The thread's `cp.async.mbarrier.arrive`s whose copies have all completed arrive.
    #[inline]
    pub(super) fn cp_wait(&mut self, n: u32, all: bool) -> Result<(), String> {
        if all {
            if self.queue.copies.is_empty() {
                self.queue.groups.clear();
                return self.cp_arrivals_fire();
            }
            self.cp_commit();
        }
        if self.queue.groups.len() > n as usize {
            let upto = self.queue.groups[self.queue.groups.len() - n as usize - 1];
            self.cp_complete(upto as usize)?;
        }
        Ok(())
    }

    /// Completes the `upto` oldest copies: writes their destinations, which count as written by
    /// this thread now, at its clock (or, for a copy that a `cp.async.mbarrier.arrive` of the
    /// thread waits for, at its clock before that arrival, which the arrival releases); then
    /// the arrivals whose copies have all completed arrive.
    #[inline(never)]
    pub(super) fn cp_complete(&mut self, upto: usize) -> Result<(), String> {
        let me = self.me;
        let (epoch, stamp) = (self.epoch, self.warp_syncs);
        let own = self.tma.own_clock(me);
        let fences = self.proxy_fences[me as usize - 1];
        let q = &mut *self.queue;
        for (i, c) in q.copies[..upto].iter().enumerate() {
            let clock = self.tma.copy_clock(me, q.done + i as u64).unwrap_or(own);
            let (at, len) = (c.at as usize, c.len as usize);
            self.shared[at..at + len].copy_from_slice(&c.bytes[..len]);
            for s in &mut self.shadow[at..at + len] {
                s.writer = me;
                s.w_epoch = epoch;
                s.w_stamp = stamp;
                s.w_clock = clock;
            }
            if !self.proxy.is_empty() {
                // A completed copy is a generic-proxy write (a wgmma read of it was refused
                // while it was pending, so none is pending over it).
                self.proxy[at..at + len].fill(ProxyByte { writer: me, fences });
            }
        }
        q.copies.drain(..upto);
        q.done += upto as u64;
        let upto = upto as u32;
        q.groups.retain_mut(|g| {
            *g = g.saturating_sub(upto);
            *g > 0
        });
        self.cp_arrivals_fire()
    }
}

impl Mem<'_, '_> {
    /// A generic-proxy write of shared bytes `at..at+len` by this thread: an error if a pending
    /// `wgmma.mma_async` reads them; else they are recorded as this thread's, not yet fenced.
    #[inline(never)]
    fn generic_write(&mut self, at: usize, len: usize) -> Result<(), String> {
        if let Some(c) =
            (at / 16..(at + len).div_ceil(16)).find(|&c| self.async_reads[c].count != 0)
        {
            return Err(self.read_pending(c, at.max(c * 16), "write of"));
        }
        let fences = self.proxy_fences[self.me as usize - 1];
        self.proxy[at..at + len].fill(ProxyByte {
            writer: self.me,
            fences,
        });
        Ok(())
    }

    /// The error of an access (`what`, at shared offset `i`) that changes the 16-byte chunk
    /// `c` while an asynchronous operation still reads it: a `wgmma.mma_async` before its
    /// `wgmma.wait_group`, or a `cp.async.bulk.tensor` store before a `cp.async.bulk.wait_group`
    /// of its thread.
    pub(super) fn read_pending(&self, c: usize, i: usize, what: &str) -> String {
        let pc = self.async_reads[c].pc as usize;
        let line = self.l.kernel.lines[pc];
        if matches!(self.l.kernel.code[pc].op, Op::TmaStore { .. }) {
            format!(
                "shared memory read by a cp.async.bulk.tensor store was written before the wait for it: {what} shared offset {i:#x}, which the store of PTX line {line} reads and no cp.async.bulk.wait_group(.read) of its thread has completed yet"
            )
        } else {
            format!(
                "shared memory read by wgmma.mma_async was written before its wgmma.wait_group: {what} shared offset {i:#x}, which the wgmma.mma_async of PTX line {line} reads and no wgmma.wait_group has completed yet"
            )
        }
    }

    /// `fence.proxy.async.shared::cta`: this thread's earlier generic writes of shared memory
    /// become visible to the async proxy.
    pub(super) fn proxy_fence(&mut self) {
        let f = &mut self.proxy_fences[self.me as usize - 1];
        *f = f.wrapping_add(1);
    }

    /// An async-proxy read (by `wgmma`, `reader` its instruction's name) of shared bytes
    /// `at..at+len`: an error if a thread wrote one of them through the generic proxy and
    /// executed no `fence.proxy.async` since.
    pub(super) fn async_read(&self, at: usize, len: usize, reader: &str) -> Result<(), String> {
        for (i, b) in self.proxy[at..at + len].iter().enumerate() {
            if b.writer != 0 && self.proxy_fences[b.writer as usize - 1] == b.fences {
                let writer = coords(b.writer as usize - 1, self.l.block);
                let short = if reader.starts_with("wgmma") {
                    "wgmma"
                } else {
                    reader
                };
                return Err(format!(
                    "shared memory written by thread {} read by {short} without fence.proxy.async: the {reader} reads shared offset {:#x}, which that thread wrote through the generic proxy (a store, an atomic or a cp.async) and executed no fence.proxy.async.shared::cta after",
                    fmt3(writer),
                    at + i
                ));
            }
        }
        Ok(())
    }
}

/// The little-endian value of up to 8 bytes.
pub(super) fn le(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

pub(super) fn atom_apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    use super::super::num::{int_val, FMode, FOp2, Rnd};
    match op {
        // f16 / bf16 (`.noftz`): each lane's exact sum rounded once to nearest even.
        AtomOp::Add if ty.packed().is_some() || matches!(ty, Ty::F16 | Ty::BF16) => {
            let fmt = ty
                .packed()
                .or(ty.fmt())
                .unwrap_or(super::super::num::Fmt::F16);
            let fm = FMode {
                rnd: Rnd::Rn,
                ftz: false,
                sat: false,
            };
            let add = |x: u64, y: u64, _: u64| super::super::num::fbin(FOp2::Add, fmt, fm, x, y);
            if ty.packed().is_some() {
                super::super::num::lanes2(old, b, 0, add)
            } else {
                add(old, b, 0)
            }
        }
        AtomOp::Add if ty.is_float() => {
            let fmt = ty.fmt().unwrap_or(super::super::num::Fmt::F32);
            super::super::num::fbin(
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

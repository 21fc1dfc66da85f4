//! `mbarrier` objects and the tensor memory accelerator (`cp.async.bulk.tensor`, sm_90), with
//! the PTX ISA's semantics and the hardware's rules checked.
//!
//! An `mbarrier` is 8 bytes of shared memory, 8-byte aligned; its state lives in a side table
//! of the block ([`TmaState`]) keyed by its shared offset: the arrivals its phases expect, the
//! arrivals still pending, the signed transaction count and the number of completed phases
//! (whose low bit is the parity of the current phase). A phase completes when no arrival is
//! pending and the transaction count is 0; `try_wait.parity P` is true once the phase of
//! parity `P` has completed, i.e. while the current phase's parity differs from `P`. Its bytes
//! are marked in the shared shadow (`mem.rs`), so any other access to them is an error.
//!
//! A copy reads its tensor map and the box from global memory when it issues and writes shared
//! memory when the emulator completes it: when a thread's `try_wait` on its `mbarrier` finds
//! the phase incomplete (completion happens while someone waits), or when no thread of the
//! block can proceed otherwise. Until then any access to its destination is an error, and a
//! block may not exit with a copy in flight.
//!
//! An `mbarrier` also orders memory, as the PTX memory model says (`arrive` releases, a
//! `try_wait` that returns true acquires): the block keeps a vector clock per thread (its
//! arrivals, and what it learned of the others' through the phases it waited for), each
//! `mbarrier` the clocks released on its current phase and on its completed ones. A shared
//! byte remembers its writer's clock at the write (`mem.rs`), so a thread that reads it after
//! waiting for a phase the writer arrived on later reads it ordered, without a `bar.sync`.
//!
//! `cp.async.mbarrier.arrive.noinc` arrives once every `cp.async` its thread issued before it
//! has landed. The thread's clock ticks at the instruction (it releases what the thread did
//! before, nothing after), but the copies land, and the arrival counts, only when a thread
//! waits on that `mbarrier` and the block cannot proceed otherwise, or when the issuing thread
//! waits for its copies or exits: a read of the copies not ordered after that phase finds them
//! pending.
//!
//! A store from shared memory into a tensor (`cp.async.bulk.tensor...global.shared::cta`) reads
//! its box when it issues, through the async proxy (a byte written without a later
//! `fence.proxy.async` of its writer is an error), and counts as reading it until a
//! `cp.async.bulk.wait_group` of its thread completes its group (`commit_group` closes the
//! thread's open group): a write of the source before then is an error, and so is a block
//! that exits with a store not completed. The emulator writes the tensor's elements (those
//! of the box inside the tensor) when the wait completes the group, with or without `.read`.
//!
//! A `try_wait` that returns false also suspends its thread ([`MbarWait`]): the scheduler
//! (`exec/mod.rs`) lets the other threads run and wakes it once the phase it waits for has
//! completed, so a spin loop costs nothing. When every thread is blocked and no copy is in
//! flight, the waiting threads see their false `try_wait` once more (they may do other work);
//! if the block comes back to the same state with no `mbarrier` changed, it is a deadlock.

use super::super::decode::{AddrSlot, MemSpace, Op, TmaInst};
use super::super::tensor::swizzle_chunk;
use super::super::tensor_map;
use super::mem::{
    le, AsyncRead, Mem, ProxyByte, Shadow, Where, ASYNC_WRITER, MBARRIER, TMA_PENDING,
};
use super::{coords, fmt3, Fail, Launch, Runner, TState};
use crate::driver::tensor_map::TENSOR_MAP_BYTES;
use crate::driver::TensorMapSpec;

/// The most arrivals an `mbarrier` phase may expect, and the largest transaction count.
const MBAR_MAX: i64 = (1 << 20) - 1;

/// One `mbarrier` of the block.
struct Mbarrier {
    /// Its shared offset.
    at: u32,
    /// The arrivals each phase expects.
    count: u32,
    /// The arrivals the current phase still waits for.
    pending: u32,
    /// The transaction count: bytes expected (`expect_tx`) less bytes completed.
    tx: i64,
    /// Completed phases; the low bit is the current phase's parity.
    phases: u64,
    /// Per thread of the block, the latest of its clocks that an arrival on the current
    /// phase released (the arriving threads' vector clocks, merged).
    released: Vec<u32>,
    /// The same through the completed phases: what a successful `try_wait` acquires.
    completed: Vec<u32>,
}

impl Mbarrier {
    /// Completes the current phase if nothing is pending.
    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phases += 1;
            self.pending = self.count;
            for (c, r) in self.completed.iter_mut().zip(&mut self.released) {
                *c = (*c).max(std::mem::take(r));
            }
        }
    }

    /// An error where the current phase has had all its arrivals: `what` arrived on the
    /// `mbarrier` at shared offset `at` (`when`: at which point, or empty).
    fn room_for_arrival(&self, at: u64, what: &str, when: &str) -> Result<(), String> {
        if self.pending > 0 {
            return Ok(());
        }
        Err(format!(
            "too many arrivals: {what} on the mbarrier at shared offset {at:#x}, whose current phase had all its {} arrivals{when} ({})",
            self.count,
            self.describe()
        ))
    }

    fn describe(&self) -> String {
        format!(
            "phase {} (parity {}), {} of {} arrivals pending, tx-count {}",
            self.phases,
            self.phases & 1,
            self.pending,
            self.count,
            self.tx
        )
    }
}

/// One arrival on `b` that releases the vector clock `clock`; the phase completes if it was
/// the last.
fn release_on(b: &mut Mbarrier, clock: &[u32]) {
    b.pending -= 1;
    for (r, &c) in b.released.iter_mut().zip(clock) {
        *r = (*r).max(c);
    }
    b.settle();
}

/// A `cp.async.bulk.tensor` in flight: the box, read when it issued, lands at completion.
struct TmaCopy {
    /// The shared offset of its `mbarrier`.
    mbar: u32,
    /// Its shared destination (128-byte aligned).
    dst: u32,
    /// The swizzle span (0, 32, 64 or 128 bytes).
    span: u64,
    /// The box, dense (box dimension 0 fastest), before the swizzle.
    data: Vec<u8>,
    /// The issuing thread, numbered from 1.
    issuer: u32,
}

/// A `cp.async.bulk.tensor` store from shared memory not completed: the box, read from shared
/// memory when it issued (whose bytes no one may write until a wait of its thread ends the
/// read: they count as read by an asynchronous operation, `AsyncRead`), and the tensor's
/// elements it writes when a `cp.async.bulk.wait_group` of its thread completes it.
struct BulkStore {
    /// The issuing thread, numbered from 1.
    issuer: u32,
    /// The issuing thread's bulk group it belongs to (the number of its commits before it),
    /// or `None` while that group is open.
    group: Option<u32>,
    /// Its shared source (128-byte aligned) and the bytes it reads.
    src: u32,
    len: u32,
    /// The element size, and the elements inside the tensor: global address and value.
    es: u32,
    writes: Vec<(u64, u64)>,
}

/// A `cp.async.mbarrier.arrive.noinc` whose thread's copies have not all landed: it arrives
/// once they have, which the emulator puts off as long as it can (`cp_arrivals_land`), so that
/// a read of the copies not ordered after the arrival meets them pending.
struct CpArrival {
    /// The shared offset of its `mbarrier`.
    mbar: u32,
    /// The arriving thread, numbered from 1.
    thread: u32,
    /// The thread's copies it waits for: those numbered below this (`AsyncQueue::done`).
    upto: u64,
    /// The thread's own clock before the arrival: the clock of the copies it releases.
    copy_clock: u32,
    /// The thread's vector clock at the instruction (its tick included): what it releases.
    release: Vec<u32>,
}

/// The block's `mbarrier` objects and the copies in flight.
#[derive(Default)]
pub(super) struct TmaState {
    mbars: Vec<Mbarrier>,
    copies: Vec<TmaCopy>,
    /// The bulk stores not completed, in issue order.
    stores: Vec<BulkStore>,
    /// Per thread (numbered from 0), its `cp.async.bulk.commit_group`s so far.
    commits: Vec<u32>,
    /// The `cp.async.mbarrier.arrive`s waiting for their copies, in issue order.
    cp_arrivals: Vec<CpArrival>,
    /// Counts every change of an `mbarrier` and every copy issued: the scheduler's test of
    /// progress.
    events: u64,
    /// The threads of the block, once it initialized an `mbarrier` (0 before).
    threads: usize,
    /// Their vector clocks, `threads × threads` (thread `t`'s at `t · threads`): entry `u`
    /// of thread `t`'s is the time of the latest arrival of thread `u` ordered before `t`'s
    /// next access, its own entry that of its own latest arrival. The times are the block's
    /// count of arrivals ([`TmaState::ticks`]), so that the clocks of different threads
    /// compare: several readers of a byte keep the latest of theirs.
    clocks: Vec<u32>,
    /// The block's arrivals so far: the time of the next one.
    ticks: u32,
}

impl TmaState {
    /// Forgets the previous block's `mbarrier` objects and copies, their shadow bytes
    /// uninitialized again.
    pub(super) fn reset(&mut self, shadow: &mut [Shadow]) {
        for b in self.mbars.drain(..) {
            shadow[b.at as usize..b.at as usize + 8].fill(Shadow::default());
        }
        for c in self.copies.drain(..) {
            let at = c.dst as usize;
            shadow[at..at + c.data.len()].fill(Shadow::default());
        }
        self.stores.clear();
        self.commits.clear();
        self.cp_arrivals.clear();
        self.events = 0;
        self.threads = 0;
        self.clocks.clear();
        self.ticks = 0;
    }

    /// The clock at which thread `me`'s copy number `copy` lands: that of the first of its
    /// `cp.async.mbarrier.arrive`s that waits for it, if any.
    pub(super) fn copy_clock(&self, me: u32, copy: u64) -> Option<u32> {
        self.cp_arrivals
            .iter()
            .find(|a| a.thread == me && copy < a.upto)
            .map(|a| a.copy_clock)
    }

    /// Thread `me`'s arrival: the block's time moves on and becomes its own clock; its vector
    /// clock, which the arrival releases.
    fn tick(&mut self, me: u32) -> &[u32] {
        self.ticks += 1;
        let n = self.threads;
        let clock = &mut self.clocks[(me as usize - 1) * n..me as usize * n];
        clock[me as usize - 1] = self.ticks;
        clock
    }

    /// One arrival on `mbars[i]` that releases the vector clock `clock` (`release_on`).
    fn release(&mut self, i: usize, clock: &[u32]) {
        release_on(&mut self.mbars[i], clock);
        self.events += 1;
    }

    /// The threads (numbered from 0, ascending) with `cp.async.mbarrier.arrive`s waiting, on
    /// the `mbarrier` at `only` if given.
    pub(super) fn cp_arrival_threads(&self, only: Option<u32>) -> Vec<usize> {
        let mut threads: Vec<usize> = self
            .cp_arrivals
            .iter()
            .filter(|a| only.is_none_or(|m| a.mbar == m))
            .map(|a| a.thread as usize - 1)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        threads
    }

    /// Thread `me`'s own clock (threads numbered from 1): the time of its latest arrival.
    pub(super) fn own_clock(&self, me: u32) -> u32 {
        match self.threads {
            0 => 0,
            n => self.clocks[(me as usize - 1) * (n + 1)],
        }
    }

    /// Whether an access of thread `other` at its clock `clock` is ordered before thread
    /// `me`'s next access by the `mbarrier` phases (`other` arrived on a phase after it that
    /// `me` then waited for).
    pub(super) fn ordered(&self, me: u32, other: u32, clock: u32) -> bool {
        self.threads != 0
            && other != ASYNC_WRITER
            && self.clocks[(me as usize - 1) * self.threads + other as usize - 1] > clock
    }

    /// Thread `me`'s vector clock.
    fn clock_of(&mut self, me: u32) -> &mut [u32] {
        let n = self.threads;
        &mut self.clocks[(me as usize - 1) * n..me as usize * n]
    }

    fn find(&self, at: u64) -> Option<usize> {
        self.mbars.iter().position(|b| b.at as u64 == at)
    }

    /// Whether the phase of parity `parity` of the `mbarrier` at `at` has completed.
    fn phase_done(&self, at: u32, parity: u64) -> bool {
        self.find(at as u64)
            .is_some_and(|i| self.mbars[i].phases & 1 != parity)
    }
}

/// A thread suspended by a false `try_wait`: the `mbarrier`, the parity it waits for, the
/// instruction.
#[derive(Clone, Copy, Default)]
pub(super) struct MbarWait {
    pub(super) at: u32,
    pub(super) parity: u64,
    pub(super) pc: u32,
}

impl Mem<'_, '_> {
    /// The index of the initialized `mbarrier` at shared offset `at`, for instruction `what`.
    fn mbar(&self, at: u64, what: &str) -> Result<usize, String> {
        self.mbar_place(at, what)?;
        self.tma.find(at).ok_or_else(|| {
            format!("mbarrier used before mbarrier.init: {what} on shared offset {at:#x}, which no mbarrier.init of the block initialized")
        })
    }

    /// Checks that shared offset `at` can hold an `mbarrier` (for instruction `what`).
    fn mbar_place(&self, at: u64, what: &str) -> Result<(), String> {
        if at % 8 != 0 {
            return Err(format!(
                "misaligned mbarrier: {what} on shared offset {at:#x}, which is not 8-byte aligned"
            ));
        }
        if at.saturating_add(8) > self.l.shared_bytes as u64 {
            return Err(format!(
                "out-of-bounds mbarrier: {what} on shared offset {at:#x}, beyond the block's {} bytes of shared memory",
                self.l.shared_bytes
            ));
        }
        Ok(())
    }

    /// `mbarrier.init [at], count`: a fresh `mbarrier` (a re-initialized one starts over).
    pub(super) fn mbar_init(&mut self, at: u64, count: u64) -> Result<(), String> {
        self.mbar_place(at, "mbarrier.init")?;
        let count = count & 0xffff_ffff;
        if !(1..=MBAR_MAX as u64).contains(&count) {
            return Err(format!(
                "mbarrier.init with count {count}: an mbarrier expects 1 ..= 2^20 - 1 arrivals"
            ));
        }
        let i = at as usize;
        let busy = |e: u32| e >= TMA_PENDING && e != MBARRIER;
        if let Some(b) = (i..i + 8).find(|&b| busy(self.shadow[b].w_epoch)) {
            return Err(self.pending(b, "mbarrier.init of"));
        }
        if self.tma.copies.iter().any(|c| c.mbar as u64 == at) {
            return Err(format!("mbarrier.init of the mbarrier at shared offset {at:#x}, on which a cp.async.bulk.tensor is in flight"));
        }
        if self.tma.threads == 0 {
            let n = self.l.block.iter().product::<u32>() as usize;
            self.tma.threads = n;
            self.tma.clocks.resize(n * n, 0);
        }
        let n = self.tma.threads;
        let b = Mbarrier {
            at: at as u32,
            count: count as u32,
            pending: count as u32,
            tx: 0,
            phases: 0,
            released: vec![0; n],
            completed: vec![0; n],
        };
        match self.tma.find(at) {
            Some(j) => self.tma.mbars[j] = b,
            None => self.tma.mbars.push(b),
        }
        for s in &mut self.shadow[i..i + 8] {
            s.w_epoch = MBARRIER;
        }
        self.tma.events += 1;
        Ok(())
    }

    /// `mbarrier.arrive{.expect_tx}`: the transaction count grows by `tx`, then one arrival;
    /// the state token (the number of completed phases before the arrival).
    pub(super) fn mbar_arrive(&mut self, at: u64, tx: u64) -> Result<u64, String> {
        let what = if tx > 0 {
            "mbarrier.arrive.expect_tx"
        } else {
            "mbarrier.arrive"
        };
        let i = self.mbar(at, what)?;
        let b = &mut self.tma.mbars[i];
        let new_tx = b.tx + (tx & 0xffff_ffff) as i64;
        if new_tx > MBAR_MAX {
            return Err(format!(
                "mbarrier tx-count overflow: {what} of {tx} bytes on the mbarrier at shared offset {at:#x} ({}) exceeds 2^20 - 1",
                b.describe()
            ));
        }
        b.room_for_arrival(at, what, "")?;
        let token = b.phases;
        b.tx = new_tx;
        // The arrival releases this thread's accesses before it: its clock ticks, and the
        // phase carries what the thread's clock orders.
        let me = self.me;
        let st = &mut *self.tma;
        st.tick(me);
        let n = st.threads;
        let clock = &st.clocks[(me as usize - 1) * n..me as usize * n];
        release_on(&mut st.mbars[i], clock);
        st.events += 1;
        Ok(token)
    }

    /// `cp.async.mbarrier.arrive.noinc [at]`: one arrival on the `mbarrier` at `at` once every
    /// `cp.async` this thread issued so far has landed. The thread's clock ticks now (what it
    /// did before is released, nothing after); the arrival waits (`CpArrival`).
    pub(super) fn cp_arrive(&mut self, at: u64) -> Result<(), String> {
        self.mbar(at, "cp.async.mbarrier.arrive.noinc")?;
        let me = self.me;
        let upto = self.queue.issued();
        let st = &mut *self.tma;
        let copy_clock = st.own_clock(me);
        let release = st.tick(me).to_vec();
        st.cp_arrivals.push(CpArrival {
            mbar: at as u32,
            thread: me,
            upto,
            copy_clock,
            release,
        });
        st.events += 1;
        Ok(())
    }

    /// The arrivals of this thread's `cp.async.mbarrier.arrive`s whose copies have all landed.
    pub(super) fn cp_arrivals_fire(&mut self) -> Result<(), String> {
        let (me, done) = (self.me, self.queue.done);
        while let Some(k) = self
            .tma
            .cp_arrivals
            .iter()
            .position(|a| a.thread == me && a.upto <= done)
        {
            let a = self.tma.cp_arrivals.remove(k);
            let what = "cp.async.mbarrier.arrive.noinc";
            let i = self.mbar(a.mbar as u64, what)?;
            self.tma.mbars[i].room_for_arrival(
                a.mbar as u64,
                what,
                " when the thread's copies landed",
            )?;
            self.tma.release(i, &a.release);
        }
        Ok(())
    }

    /// Lands this thread's copies that its `cp.async.mbarrier.arrive`s (on the `mbarrier` at
    /// `only`, if given) wait for, and so makes them arrive.
    pub(super) fn cp_arrivals_land(&mut self, only: Option<u32>) -> Result<(), String> {
        let me = self.me;
        let upto = self
            .tma
            .cp_arrivals
            .iter()
            .filter(|a| a.thread == me && only.is_none_or(|m| a.mbar == m))
            .map(|a| a.upto)
            .max();
        match upto {
            Some(upto) => self.cp_complete(upto.saturating_sub(self.queue.done) as usize),
            None => Ok(()),
        }
    }

    /// `mbarrier.try_wait.parity`: whether the phase of parity `parity` has completed. If not,
    /// the copies in flight on the `mbarrier` complete first (the hardware finishes them while
    /// a thread waits), then it is tested again.
    pub(super) fn mbar_try_wait(&mut self, at: u64, parity: u64) -> Result<bool, String> {
        let i = self.mbar(at, "mbarrier.try_wait")?;
        if self.tma.mbars[i].phases & 1 == parity {
            self.tma_complete(Some(at as u32))?;
            if self.tma.mbars[i].phases & 1 == parity {
                return Ok(false);
            }
        }
        // The wait acquires what the completed phases released.
        let st = &mut *self.tma;
        let done = std::mem::take(&mut st.mbars[i].completed);
        for (c, &d) in st.clock_of(self.me).iter_mut().zip(&done) {
            *c = (*c).max(d);
        }
        st.mbars[i].completed = done;
        Ok(true)
    }

    /// Completes the copies in flight (only those on the `mbarrier` at `only`, if given): writes
    /// their boxes, swizzled, and counts their bytes on their `mbarrier`.
    pub(super) fn tma_complete(&mut self, only: Option<u32>) -> Result<(), String> {
        let mut copies = std::mem::take(&mut self.tma.copies);
        let mut result = Ok(());
        copies.retain(|c| {
            if result.is_err() || only.is_some_and(|m| m != c.mbar) {
                return true;
            }
            result = self.tma_land(c);
            false
        });
        // Copies issued meanwhile cannot exist (completion issues none); keep any left.
        copies.append(&mut self.tma.copies);
        self.tma.copies = copies;
        result
    }

    /// Lands one copy: its box in shared memory (written by [`ASYNC_WRITER`], visible to the
    /// async proxy), then `complete_tx` of its bytes on its `mbarrier`.
    fn tma_land(&mut self, c: &TmaCopy) -> Result<(), String> {
        let (dst, len) = (c.dst as usize, c.data.len());
        for (k, chunk) in c.data.chunks_exact(16).enumerate() {
            let to = swizzle_chunk((dst + 16 * k) as u64, c.span) as usize;
            self.shared[to..to + 16].copy_from_slice(chunk);
        }
        let (epoch, stamp) = (self.epoch, self.warp_syncs);
        for s in &mut self.shadow[dst..dst + len] {
            s.writer = ASYNC_WRITER;
            s.w_epoch = epoch;
            s.w_stamp = stamp;
            // The reads before the copy are forgotten: it replaced what they read.
            s.reader = ASYNC_WRITER;
            s.r_epoch = TMA_PENDING;
        }
        if !self.proxy.is_empty() {
            self.proxy[dst..dst + len].fill(ProxyByte::default());
        }
        let Some(i) = self.tma.find(c.mbar as u64) else {
            return Ok(());
        };
        let b = &mut self.tma.mbars[i];
        b.tx -= len as i64;
        if b.tx < -MBAR_MAX {
            return Err(format!(
                "mbarrier tx-count underflow: a cp.async.bulk.tensor of {len} bytes completes on the mbarrier at shared offset {:#x} ({}), beyond -(2^20 - 1)",
                c.mbar,
                b.describe()
            ));
        }
        b.settle();
        self.tma.events += 1;
        Ok(())
    }

    /// The 128 bytes of the tensor map at generic address `at`, decoded.
    fn tensor_map(&mut self, at: u64) -> Result<TensorMapSpec, String> {
        if at % 64 != 0 {
            return Err(format!(
                "misaligned tensor map: generic address {at:#x} is not 64-byte aligned"
            ));
        }
        let what = "cp.async.bulk.tensor tensor map read";
        let mut map = [0u8; TENSOR_MAP_BYTES];
        match self.resolve(MemSpace::Generic, at, TENSOR_MAP_BYTES as u32, what)? {
            Where::Param(p) => map.copy_from_slice(&self.l.params[p..p + TENSOR_MAP_BYTES]),
            Where::Global(i, off) => {
                let a = self.l.global.get(i);
                for (k, w) in map.chunks_exact_mut(8).enumerate() {
                    w.copy_from_slice(&a.load(off + 8 * k as u64, 8).to_le_bytes());
                }
            }
            _ => {
                return Err(format!(
                    "the tensor map at generic address {at:#x} is in shared or local memory (a kernel parameter, a constant or global memory holds one)"
                ))
            }
        }
        tensor_map::decode(&map)
            .map_err(|e| format!("{e} (the tensor map at generic address {at:#x})"))
    }

    /// `cp.async.bulk.tensor` (`Kernel::tmas[idx]`) of a thread whose registers are `r`: reads
    /// the tensor map and the box now (zero outside the tensor) and leaves the copy in flight.
    pub(super) fn tma_issue(&mut self, idx: u32, r: &[u64]) -> Result<(), String> {
        let ti: TmaInst = self.l.kernel.tmas[idx as usize];
        let mbar_at = r[ti.mbar.0 as usize].wrapping_add(ti.mbar.1 as u64);
        self.mbar(mbar_at, "cp.async.bulk.tensor")?;
        let (spec, at, len, c) = self.tma_box(&ti, r, "destination")?;
        if let Some(i) = (at..at + len).find(|&i| self.shadow[i].w_epoch >= TMA_PENDING) {
            return Err(self.pending(i, "cp.async.bulk.tensor write of"));
        }
        if let Some(c) = (at / 16..(at + len) / 16)
            .find(|&c| self.async_reads.get(c).is_some_and(|a| a.count != 0))
        {
            return Err(self.read_pending(c, c * 16, "a cp.async.bulk.tensor writes"));
        }
        let data = self.read_box(&spec, &c)?;
        for s in &mut self.shadow[at..at + len] {
            s.writer = self.me;
            s.w_epoch = TMA_PENDING;
        }
        self.tma.copies.push(TmaCopy {
            mbar: mbar_at as u32,
            dst: at as u32,
            span: spec.swizzle.span() as u64,
            data,
            issuer: self.me,
        });
        self.tma.events += 1;
        Ok(())
    }

    /// The tensor map, the shared box (its offset and bytes: 128-byte aligned, inside the
    /// block's shared memory; `role`, the copy's destination or source, names it in the
    /// errors) and the coordinates of the `cp.async.bulk.tensor` `ti` of a thread whose
    /// registers are `r`.
    fn tma_box(
        &mut self,
        ti: &TmaInst,
        r: &[u64],
        role: &str,
    ) -> Result<(TensorMapSpec, usize, usize, [i64; 5]), String> {
        let get = |(b, o): AddrSlot| r[b as usize].wrapping_add(o as u64);
        let at = get(ti.smem);
        let spec = self.tensor_map(get(ti.map))?;
        if spec.rank as usize != ti.rank {
            return Err(format!(
                "cp.async.bulk.tensor.{}d through a tensor map of rank {}",
                ti.rank, spec.rank
            ));
        }
        if at % 128 != 0 {
            return Err(format!(
                "misaligned cp.async.bulk.tensor {role}: shared offset {at:#x} is not 128-byte aligned"
            ));
        }
        let bytes = spec.box_bytes();
        if at.saturating_add(bytes) > self.l.shared_bytes as u64 {
            return Err(format!(
                "out-of-bounds cp.async.bulk.tensor {role}: a box of {bytes} bytes at shared offset {at:#x}, beyond the block's {} bytes of shared memory",
                self.l.shared_bytes
            ));
        }
        let mut c = [0i64; 5];
        for (v, &s) in c.iter_mut().zip(&ti.coords[..ti.rank]) {
            *v = r[s as usize] as u32 as i32 as i64;
        }
        Ok((spec, at as usize, bytes as usize, c))
    }

    /// The box of `spec` at coordinates `c`, dense: box element `(i0, i1, ..)` is tensor element
    /// `(c0 + i0, c1 + i1, ..)`, zero where that lies outside the tensor.
    fn read_box(&mut self, spec: &TensorMapSpec, c: &[i64; 5]) -> Result<Vec<u8>, String> {
        let es = spec.dtype.size();
        let mut out = Vec::with_capacity(spec.box_bytes() as usize);
        for a in box_addresses(spec, c) {
            let v = match a {
                Some(addr) => self.load(MemSpace::Global, addr, es as u32)?,
                None => 0,
            };
            out.extend_from_slice(&v.to_le_bytes()[..es]);
        }
        Ok(out)
    }

    /// `cp.async.bulk.tensor` from shared memory (`Kernel::tmas[idx]`) of a thread whose
    /// registers are `r`: reads the box from shared memory now, through
    /// the async proxy (each byte written and fenced, none pending), and leaves the store in the
    /// thread's open bulk group; its source counts as read until a wait completes the group.
    pub(super) fn tma_store(&mut self, idx: u32, r: &[u64]) -> Result<(), String> {
        let ti: TmaInst = self.l.kernel.tmas[idx as usize];
        let (spec, at, len, c) = self.tma_box(&ti, r, "source")?;
        self.shared_read(at, len)?;
        self.async_read(at, len, "cp.async.bulk.tensor store")?;
        let span = spec.swizzle.span() as u64;
        let mut data = vec![0u8; len];
        for (k, chunk) in data.chunks_exact_mut(16).enumerate() {
            let from = swizzle_chunk((at + 16 * k) as u64, span) as usize;
            chunk.copy_from_slice(&self.shared[from..from + 16]);
        }
        let es = spec.dtype.size();
        let writes = box_addresses(&spec, &c)
            .into_iter()
            .zip(data.chunks_exact(es))
            .filter_map(|(a, v)| a.map(|a| (a, le(v))))
            .collect();
        let pc = self
            .l
            .kernel
            .code
            .iter()
            .position(|i| matches!(i.op, Op::TmaStore { idx: j } if j == idx))
            .unwrap_or(0) as u32;
        for c in at / 16..(at + len) / 16 {
            self.async_reads[c] = AsyncRead {
                count: self.async_reads[c].count + 1,
                pc,
            };
        }
        self.tma.stores.push(BulkStore {
            issuer: self.me,
            group: None,
            src: at as u32,
            len: len as u32,
            es: es as u32,
            writes,
        });
        Ok(())
    }

    /// `cp.async.bulk.commit_group`: the thread's bulk stores since its last commit form a
    /// group.
    pub(super) fn bulk_commit(&mut self) {
        let t = self.me as usize - 1;
        if self.tma.commits.len() <= t {
            self.tma.commits.resize(t + 1, 0);
        }
        let g = self.tma.commits[t];
        for s in &mut self.tma.stores {
            if s.issuer == self.me && s.group.is_none() {
                s.group = Some(g);
            }
        }
        self.tma.commits[t] = g + 1;
    }

    /// `cp.async.bulk.wait_group{.read} n`: completes the thread's oldest committed bulk groups
    /// until at most `n` remain: their sources are free to write again, and their elements are
    /// written to the tensor (which the hardware guarantees only without `.read`; done here
    /// for both, as a later wait would).
    pub(super) fn bulk_wait(&mut self, n: u32) -> Result<(), String> {
        let commits = self
            .tma
            .commits
            .get(self.me as usize - 1)
            .copied()
            .unwrap_or(0);
        let below = commits.saturating_sub(n);
        let me = self.me;
        let mut done = Vec::new();
        self.tma.stores.retain_mut(|s| {
            let finished = s.issuer == me && s.group.is_some_and(|g| g < below);
            if finished {
                done.push((s.es, std::mem::take(&mut s.writes)));
                for c in s.src as usize / 16..(s.src + s.len) as usize / 16 {
                    self.async_reads[c].count -= 1;
                }
            }
            !finished
        });
        for (es, writes) in done {
            for (a, v) in writes {
                self.store(MemSpace::Global, a, es, v)?;
            }
        }
        Ok(())
    }

    /// `prefetch.tensormap [at]`: a hint, but the 128 bytes at generic address `at` must be
    /// accessible.
    pub(super) fn prefetch_tensormap(&mut self, at: u64) -> Result<(), String> {
        self.resolve(
            MemSpace::Generic,
            at,
            TENSOR_MAP_BYTES as u32,
            "prefetch.tensormap",
        )
        .map(|_| ())
    }
}

/// The global address of each element of the box of `spec` at coordinates `c`, dense (box
/// dimension 0 fastest): box element `(i0, i1, ..)` is tensor element `(c0 + i0, c1 + i1, ..)`,
/// `None` where that lies outside the tensor.
fn box_addresses(spec: &TensorMapSpec, c: &[i64; 5]) -> Vec<Option<u64>> {
    let es = spec.dtype.size() as u64;
    let rank = spec.rank as usize;
    let b = spec.boxes.map(|x| x as i64);
    let mut out = Vec::with_capacity((spec.box_bytes() / es) as usize);
    let rows = b[1] * b[2] * b[3] * b[4];
    for row in 0..rows {
        // The row's index in box dimensions 1..5, then its tensor coordinates.
        let mut rest = row;
        let mut offset = Some(0u64);
        for d in 1..5 {
            let i = rest % b[d];
            rest /= b[d];
            let x = c[d] + i;
            if d < rank {
                offset = offset.filter(|_| (0..spec.dims[d] as i64).contains(&x));
                offset = offset.map(|o| o.wrapping_add(x as u64 * spec.strides[d - 1]));
            }
        }
        for i0 in 0..b[0] {
            let x = c[0] + i0;
            out.push(match offset {
                Some(o) if (0..spec.dims[0] as i64).contains(&x) => {
                    Some(spec.address.wrapping_add(o).wrapping_add(x as u64 * es))
                }
                _ => None,
            });
        }
    }
    out
}

impl Runner {
    /// When no thread can proceed otherwise: wakes the threads whose awaited phase has
    /// completed (completing the copies on the `mbarrier` they wait on first); else completes
    /// every copy in flight; else lets the waiting threads see their false `try_wait` once
    /// more, or reports a deadlock if they did last time and nothing changed. Whether the
    /// block can go on.
    pub(super) fn mbar_progress(&mut self, l: &Launch<'_>, nt: usize) -> Result<bool, Fail> {
        let mut woke = false;
        for t in 0..nt {
            if self.state[t] != TState::Wait {
                continue;
            }
            let w = self.waits[t];
            if !self.tma.phase_done(w.at, w.parity) {
                // The `cp.async` copies that arrive on it land (each thread's own), then the
                // tensor copies on it.
                for u in self.tma.cp_arrival_threads(Some(w.at)) {
                    let pc = self.pc[u] as usize;
                    let mut mem = self.mem_for(l, u);
                    mem.cp_arrivals_land(Some(w.at))
                        .map_err(|msg| Fail { msg, t: u, pc })?;
                }
                let mut mem = self.mem_for(l, t);
                mem.tma_complete(Some(w.at)).map_err(|msg| Fail {
                    msg,
                    t,
                    pc: w.pc as usize,
                })?;
            }
            if self.tma.phase_done(w.at, w.parity) {
                self.state[t] = TState::Run;
                woke = true;
            }
        }
        if woke {
            return Ok(true);
        }
        if let Some(&u) = self.tma.cp_arrival_threads(None).first() {
            let pc = self.pc[u] as usize;
            let mut mem = self.mem_for(l, u);
            mem.cp_arrivals_land(None)
                .map_err(|msg| Fail { msg, t: u, pc })?;
            return Ok(true);
        }
        if let Some(c) = self.tma.copies.first() {
            let t = c.issuer as usize - 1;
            let pc = self.pc[t] as usize;
            let mut mem = self.mem_for(l, t);
            mem.tma_complete(None).map_err(|msg| Fail { msg, t, pc })?;
            return Ok(true);
        }
        let Some(first) = (0..nt).find(|&t| self.state[t] == TState::Wait) else {
            return Ok(false);
        };
        let now: Vec<(TState, u32)> = (0..nt).map(|t| (self.state[t], self.pc[t])).collect();
        if self
            .stall
            .as_ref()
            .is_some_and(|(events, was)| *events == self.tma.events && *was == now)
        {
            return Err(self.deadlock(l, nt, first));
        }
        self.stall = Some((self.tma.events, now));
        for s in &mut self.state[..nt] {
            if *s == TState::Wait {
                *s = TState::Run;
            }
        }
        Ok(true)
    }

    /// The error of a block whose threads all wait and cannot be released.
    fn deadlock(&self, l: &Launch<'_>, nt: usize, t: usize) -> Fail {
        let w = self.waits[t];
        let waiting = (0..nt).filter(|&u| self.state[u] == TState::Wait).count();
        let state = match self.tma.find(w.at as u64) {
            Some(i) => self.tma.mbars[i].describe(),
            None => "not initialized".into(),
        };
        Fail {
            msg: format!(
                "mbarrier deadlock: {waiting} of the block's {nt} threads wait on mbarriers, the others are blocked or exited, and no copy in flight can complete a phase; thread {} waits on the mbarrier at shared offset {:#x} for the phase of parity {} ({state})",
                fmt3(coords(t, l.block)),
                w.at,
                w.parity
            ),
            t,
            pc: w.pc as usize,
        }
    }

    /// The error of a block that exits with copies in flight, or with a bulk store whose read
    /// of shared memory no wait of its thread ended (the block's shared memory goes with it).
    pub(super) fn tma_exit_check(&self, l: &Launch<'_>) -> Result<(), Fail> {
        if let Some(s) = self.tma.stores.first() {
            let t = s.issuer as usize - 1;
            return Err(Fail {
                msg: format!(
                    "cp.async.bulk.tensor store in flight at exit: thread {} exits before a cp.async.bulk.wait_group.read{} ends its read of shared offset {:#x} (commit the store with cp.async.bulk.commit_group, then wait for the group)",
                    fmt3(coords(t, l.block)),
                    if s.group.is_none() { " (the store's group was never committed)" } else { "" },
                    s.src
                ),
                t,
                pc: self.pc[t] as usize,
            });
        }
        let Some(c) = self.tma.copies.first() else {
            return Ok(());
        };
        let t = c.issuer as usize - 1;
        Err(Fail {
            msg: format!(
                "cp.async.bulk.tensor in flight at exit: the block exits with {} that no mbarrier wait completed (the first, by thread {}, writes shared offset {:#x} and completes on the mbarrier at shared offset {:#x})",
                match self.tma.copies.len() {
                    1 => "a copy".to_string(),
                    n => format!("{n} copies"),
                },
                fmt3(coords(t, l.block)),
                c.dst,
                c.mbar
            ),
            t,
            pc: self.pc[t] as usize,
        })
    }
}

//! Streams of the emulated device: every stream, the default one included, is a queue of work
//! that runs only at synchronization points, so that a missing synchronization reads stale data
//! (or races) exactly as it could on a GPU, and does so deterministically under a seed.
//!
//! Each stream runs its work in order; `wait_event` holds a stream until the event's
//! record that was current when the wait was queued has run (a never-recorded event is already
//! reached). A drain runs only the work its caller waits for: the target streams up to their
//! length at the call, and whatever those wait on. When several of them have ready work, a PRNG
//! seeded by [`super::EmulatorConfig::seed`] picks which piece runs next, and a kernel picked
//! then runs a random share of its remaining blocks, so other streams' work lands between them.
//!
//! Errors: a failure of queued work (a failed check in a kernel, a copy outside live memory) is
//! kept on its stream with the position of the failing work, and reported once, by the first
//! synchronization call that covers it (`synchronize_stream` / `query_stream` of that stream,
//! `synchronize_event` / `query_event` of an event recorded on it after the failure,
//! `synchronize`, `destroy_stream`, and for the default stream the synchronous copies). It is
//! not sticky for the device: later work still runs (every access is checked, so it cannot
//! corrupt the host), and once reported the stream is usable again. The default stream is
//! shared by every thread, so its failures go to a synchronization call of the thread that
//! queued the failed work (tests running in parallel on one device each get their own).
//! Device-wide waits that are not synchronization calls of the user (`free`, `unload`) leave
//! errors where they are.

use super::decode::Kernel;
use super::{invalid_handle, poisoned, DevicePtr, Emulator, EventId, StreamId};
use crate::error::{DriverError, Error, Result};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, MutexGuard, TryLockError};
use std::thread::ThreadId;
use std::time::Instant;

/// A launch whose arguments were checked when it was queued.
pub(super) struct QueuedLaunch {
    pub kernel: Arc<Kernel>,
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Static plus dynamic shared memory, in bytes.
    pub shared_bytes: u32,
    pub params: Vec<u8>,
    /// Blocks already run (in linear order): a launch can run in pieces, so that work of
    /// another stream lands between its blocks, as on a GPU running both at once.
    pub first_block: u64,
    /// Where the next piece ends (set by the scheduler).
    pub run_to: u64,
}

impl QueuedLaunch {
    /// The blocks of the grid.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g as u64).product()
    }
}

/// One piece of queued work. Host addresses are kept as integers: the caller of the async copy
/// promised they stay valid until the stream passes the copy.
pub(super) enum Work {
    Launch(Box<QueuedLaunch>),
    CopyDtoD {
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    },
    CopyHtoD {
        dst: DevicePtr,
        src: usize,
        bytes: usize,
    },
    CopyDtoH {
        dst: usize,
        src: DevicePtr,
        bytes: usize,
    },
    /// `count` elements of `width` (1 or 4) bytes set to the low bytes of `value`.
    Memset {
        dst: DevicePtr,
        value: u32,
        width: u8,
        count: usize,
    },
    Free {
        ptr: DevicePtr,
    },
    /// Runs in the scheduler itself: marks record `id` of `event` reached.
    Record {
        event: usize,
        id: u64,
    },
    /// Runs in the scheduler itself once record `id` is reached.
    Wait {
        id: u64,
    },
}

/// Which thread queued a piece of work on the default stream (`None` on created streams): the
/// default stream is shared by every user of the device, so its failures are reported to the
/// thread whose work failed, not to whichever thread happens to synchronize it first.
type Owner = Option<ThreadId>;

fn owner_for(s: usize) -> Owner {
    (s == StreamId::DEFAULT.0).then(|| std::thread::current().id())
}

/// Whether an error of `owner` is for the calling thread.
fn is_mine(owner: &Owner) -> bool {
    owner.is_none_or(|o| o == std::thread::current().id())
}

struct Stream {
    queue: VecDeque<(u64, Owner, Work)>,
    /// Pieces of work queued so far; each gets the next number, from 1.
    queued: u64,
    /// Pieces finished: work runs in order, so exactly numbers `1..=done`.
    done: u64,
    /// The first failure not yet reported of each owner, with the number of the failed work.
    errors: Vec<(u64, Owner, Error)>,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            queue: VecDeque::new(),
            queued: 0,
            done: 0,
            errors: Vec::new(),
        }
    }
}

/// Where an event's latest record was queued.
#[derive(Clone, Copy)]
struct Record {
    id: u64,
    stream: usize,
    seq: u64,
}

#[derive(Default)]
struct Event {
    latest: Option<Record>,
    /// When the latest record ran.
    time: Option<Instant>,
}

/// What a drain waits for.
pub(super) enum Target {
    /// Each stream up to (and including) its work number.
    Streams(Vec<(usize, u64)>),
    /// One record of an event.
    Record(u64),
}

/// The next step of a drain.
enum Next {
    Done,
    Run(usize, u64, Owner, Work),
}

/// Streams, events and the interleaving PRNG of one emulated device.
pub(super) struct Queues {
    streams: BTreeMap<usize, Stream>,
    events: HashMap<usize, Event>,
    /// Records queued and not yet reached: id -> stream.
    pending: HashMap<u64, usize>,
    next_record: u64,
    rng: u64,
}

impl Queues {
    pub fn new(seed: u64) -> Queues {
        let mut streams = BTreeMap::new();
        streams.insert(StreamId::DEFAULT.0, Stream::new());
        Queues {
            streams,
            events: HashMap::new(),
            pending: HashMap::new(),
            next_record: 0,
            rng: seed,
        }
    }

    /// splitmix64: a full-period sequence from any seed, so nearby seeds still differ.
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn has_stream(&self, s: StreamId) -> bool {
        self.streams.contains_key(&s.0)
    }

    pub fn add_stream(&mut self, id: usize) {
        self.streams.insert(id, Stream::new());
    }

    pub fn add_event(&mut self, id: usize) {
        self.events.insert(id, Event::default());
    }

    pub fn remove_event(&mut self, id: usize) -> bool {
        self.events.remove(&id).is_some()
    }

    /// Removes a drained stream; its unreported error, if any.
    pub fn remove_stream(&mut self, id: usize) -> Option<Option<Error>> {
        let st = self.streams.remove(&id)?;
        // Records queued after the drain (by another thread) count as reached, so no drain
        // waits for a stream that is gone.
        for (_, _, w) in &st.queue {
            if let Work::Record { id, .. } = w {
                self.pending.remove(id);
            }
        }
        Some(st.errors.into_iter().next().map(|e| e.2))
    }

    fn push(&mut self, call: &'static str, s: StreamId, work: Work) -> Result<u64> {
        let st = self
            .streams
            .get_mut(&s.0)
            .ok_or_else(|| invalid_handle(call, s.0))?;
        st.queued += 1;
        st.queue.push_back((st.queued, owner_for(s.0), work));
        Ok(st.queued)
    }

    pub fn enqueue(&mut self, call: &'static str, s: StreamId, work: Work) -> Result<()> {
        self.push(call, s, work).map(|_| ())
    }

    /// Queues a record of `event` on `s`; it becomes the event's latest record.
    pub fn record(&mut self, call: &'static str, event: EventId, s: StreamId) -> Result<()> {
        if !self.events.contains_key(&event.0) {
            return Err(invalid_handle(call, event.0));
        }
        self.next_record += 1;
        let id = self.next_record;
        let seq = self.push(call, s, Work::Record { event: event.0, id })?;
        self.pending.insert(id, s.0);
        if let Some(e) = self.events.get_mut(&event.0) {
            e.latest = Some(Record {
                id,
                stream: s.0,
                seq,
            });
        }
        Ok(())
    }

    /// Makes `s` wait for `event`'s latest record (nothing to wait for once it is reached).
    pub fn wait(&mut self, call: &'static str, s: StreamId, event: EventId) -> Result<()> {
        let e = self
            .events
            .get(&event.0)
            .ok_or_else(|| invalid_handle(call, event.0))?;
        if !self.streams.contains_key(&s.0) {
            return Err(invalid_handle(call, s.0));
        }
        match e.latest {
            Some(r) if self.pending.contains_key(&r.id) => {
                self.enqueue(call, s, Work::Wait { id: r.id })
            }
            _ => Ok(()),
        }
    }

    /// `s` up to the work queued so far.
    pub fn stream_target(&self, call: &'static str, s: StreamId) -> Result<Target> {
        let st = self
            .streams
            .get(&s.0)
            .ok_or_else(|| invalid_handle(call, s.0))?;
        Ok(Target::Streams(vec![(s.0, st.queued)]))
    }

    /// Every stream up to the work queued so far.
    pub fn all_target(&self) -> Target {
        Target::Streams(self.streams.iter().map(|(id, s)| (*id, s.queued)).collect())
    }

    /// The latest record of `event`; `None` for an event never recorded.
    pub fn event_target(&self, call: &'static str, event: EventId) -> Result<Option<Target>> {
        let e = self
            .events
            .get(&event.0)
            .ok_or_else(|| invalid_handle(call, event.0))?;
        Ok(e.latest.map(|r| Target::Record(r.id)))
    }

    fn reached(&self, target: &Target) -> bool {
        match target {
            Target::Streams(v) => v
                .iter()
                .all(|(s, seq)| self.streams.get(s).is_none_or(|st| st.done >= *seq)),
            Target::Record(id) => !self.pending.contains_key(id),
        }
    }

    /// The next piece of heavy work toward `target`; records and waits run here, inline.
    fn next(&mut self, target: &Target) -> std::result::Result<Next, String> {
        loop {
            // The streams the target needs, then (transitively) the ones their heads wait on.
            let mut need: Vec<usize> = match target {
                Target::Streams(v) => v
                    .iter()
                    .filter(|(s, seq)| self.streams.get(s).is_some_and(|st| st.done < *seq))
                    .map(|(s, _)| *s)
                    .collect(),
                Target::Record(id) => self.pending.get(id).copied().into_iter().collect(),
            };
            if need.is_empty() {
                return Ok(Next::Done);
            }
            let mut ready = Vec::new();
            let mut i = 0;
            while i < need.len() {
                let s = need[i];
                i += 1;
                match self.streams.get(&s).and_then(|st| st.queue.front()) {
                    Some((_, _, Work::Wait { id })) if self.pending.contains_key(id) => {
                        let owner = self.pending[id];
                        if !need.contains(&owner) {
                            need.push(owner);
                        }
                    }
                    Some(_) => ready.push(s),
                    None => {}
                }
            }
            // Record ids only grow, so waits cannot form a cycle; an empty `ready` is a bug.
            if ready.is_empty() {
                return Err(format!("no stream can make progress (streams {need:?})"));
            }
            let s = if ready.len() == 1 {
                ready[0]
            } else {
                ready[(self.random() % ready.len() as u64) as usize]
            };
            let st = self.streams.get_mut(&s).expect("a ready stream exists");
            let (seq, owner, work) = st.queue.pop_front().expect("a ready stream has work");
            match work {
                Work::Record { event, id } => {
                    st.done = seq;
                    self.pending.remove(&id);
                    if let Some(e) = self.events.get_mut(&event) {
                        if e.latest.is_some_and(|r| r.id == id) {
                            e.time = Some(Instant::now());
                        }
                    }
                }
                Work::Wait { .. } => st.done = seq,
                Work::Launch(mut l) => {
                    // With other streams ready, run a random share of the remaining blocks and
                    // put the rest back: their work then interleaves with this kernel's blocks.
                    let left = l.blocks() - l.first_block;
                    l.run_to = if ready.len() > 1 && left > 1 {
                        l.first_block + 1 + self.random() % left
                    } else {
                        u64::MAX
                    };
                    return Ok(Next::Run(s, seq, owner, Work::Launch(l)));
                }
                work => return Ok(Next::Run(s, seq, owner, work)),
            }
        }
    }

    /// Puts the unrun blocks of a launch back at the head of its stream.
    fn requeue(&mut self, s: usize, seq: u64, owner: Owner, mut l: Box<QueuedLaunch>) {
        if let Some(st) = self.streams.get_mut(&s) {
            l.first_block = l.run_to;
            st.queue.push_front((seq, owner, Work::Launch(l)));
        }
    }

    fn finish(&mut self, s: usize, seq: u64, owner: Owner, result: Result<()>) {
        if let Some(st) = self.streams.get_mut(&s) {
            st.done = seq;
            if let Err(e) = result {
                if !st.errors.iter().any(|(_, o, _)| *o == owner) {
                    st.errors.push((seq, owner, e));
                }
            }
        }
    }

    /// Takes the calling thread's first unreported error of `s` that failed before work
    /// number `before`.
    fn take_before(&mut self, s: usize, before: u64) -> Result<()> {
        let Some(st) = self.streams.get_mut(&s) else {
            return Ok(());
        };
        match st
            .errors
            .iter()
            .position(|(seq, o, _)| *seq < before && is_mine(o))
        {
            Some(i) => Err(st.errors.remove(i).2),
            None => Ok(()),
        }
    }

    /// Takes the unreported error of `s` (on the default stream, the calling thread's).
    pub fn take_error(&mut self, s: StreamId) -> Result<()> {
        self.take_before(s.0, u64::MAX)
    }

    /// Takes the first unreported error of any stream for the calling thread (the others stay
    /// for later calls).
    pub fn take_any_error(&mut self) -> Result<()> {
        let ids: Vec<usize> = self.streams.keys().copied().collect();
        ids.into_iter()
            .try_for_each(|s| self.take_before(s, u64::MAX))
    }

    /// Takes the error of the stream `event` was last recorded on, if it failed before the record.
    pub fn take_event_error(&mut self, event: EventId) -> Result<()> {
        match self.events.get(&event.0).and_then(|e| e.latest) {
            Some(r) => self.take_before(r.stream, r.seq),
            None => Ok(()),
        }
    }

    /// When `event`'s latest record ran: `Err(true)` while it is pending, `Err(false)` when it
    /// was never recorded.
    pub fn event_time(&self, event: EventId) -> Option<std::result::Result<Instant, bool>> {
        let e = self.events.get(&event.0)?;
        Some(match (e.latest, e.time) {
            (None, _) => Err(false),
            (Some(r), _) if self.pending.contains_key(&r.id) => Err(true),
            (Some(_), Some(t)) => Ok(t),
            (Some(_), None) => Err(true),
        })
    }

    /// Whether `target` is reached.
    pub fn is_reached(&self, target: &Target) -> bool {
        self.reached(target)
    }
}

fn stuck(call: &'static str, message: String) -> Error {
    Error::from(DriverError {
        call,
        code: 999,
        name: "CUDA_ERROR_UNKNOWN".to_string(),
        message: format!("emulated device scheduler: {message}"),
    })
}

impl Emulator {
    pub(super) fn queues(&self, call: &'static str) -> Result<MutexGuard<'_, Queues>> {
        self.queues.lock().map_err(|_| poisoned(call))
    }

    /// Runs queued work until `target` is reached. Errors of the work stay on its streams
    /// (see the module documentation); the result is an error only when the device is broken.
    pub(super) fn drain(&self, call: &'static str, target: &Target) -> Result<()> {
        // One drain at a time: it keeps each stream in order while work runs unlocked, so
        // other threads can queue meanwhile.
        let _running = self.running.lock().map_err(|_| poisoned(call))?;
        while self.step(call, target)? {}
        Ok(())
    }

    /// Runs one piece of work toward `target` without waiting for another thread's drain;
    /// whether `target` is reached afterwards (false when another drain is running).
    pub(super) fn try_step(&self, call: &'static str, target: &Target) -> Result<bool> {
        let _running = match self.running.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return Ok(self.queues(call)?.is_reached(target)),
            Err(TryLockError::Poisoned(_)) => return Err(poisoned(call)),
        };
        self.step(call, target)?;
        Ok(self.queues(call)?.is_reached(target))
    }

    /// One piece of work toward `target`; false once it is reached. The caller holds `running`.
    fn step(&self, call: &'static str, target: &Target) -> Result<bool> {
        let next = self
            .queues(call)?
            .next(target)
            .map_err(|m| stuck(call, m))?;
        let Next::Run(s, seq, owner, work) = next else {
            return Ok(false);
        };
        if let Work::Launch(l) = work {
            let result = self.run(&l);
            let mut q = self.queues(call)?;
            if result.is_ok() && l.run_to < l.blocks() {
                q.requeue(s, seq, owner, l);
            } else {
                q.finish(s, seq, owner, result);
            }
            return Ok(true);
        }
        let result = self.execute(work);
        self.queues(call)?.finish(s, seq, owner, result);
        Ok(true)
    }

    /// Performs one piece of heavy work (the caller holds `running`).
    fn execute(&self, work: Work) -> Result<()> {
        match work {
            Work::Launch(l) => self.run(&l),
            Work::CopyDtoD { dst, src, bytes } => self.copy_dtod(dst, src, bytes),
            Work::CopyHtoD { dst, src, bytes } => {
                // SAFETY: the caller of `copy_to_async` promised `src..src+bytes` stays
                // valid and unchanged until the stream passes this copy, which is now.
                let src = unsafe { std::slice::from_raw_parts(src as *const u8, bytes) };
                self.write_device("cuMemcpyHtoDAsync_v2", dst, src)
            }
            Work::CopyDtoH { dst, src, bytes } => {
                // SAFETY: the caller of `copy_from_async` promised `dst..dst+bytes` stays
                // valid and otherwise unaccessed until the stream passes this copy, which is now.
                let dst = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, bytes) };
                self.read_device("cuMemcpyDtoHAsync_v2", dst, src)
            }
            Work::Memset {
                dst,
                value,
                width,
                count,
            } => self.fill(dst, value, width, count),
            Work::Free { ptr } => self.free_now("cuMemFreeAsync", ptr),
            Work::Record { .. } | Work::Wait { .. } => Ok(()),
        }
    }
}

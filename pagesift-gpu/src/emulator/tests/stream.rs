//! Streams of the emulated device run asynchronously: a missing synchronization reads stale data
//! or races, deterministically under a seed; the documented synchronizations fix it.

use crate::emulator::{
    DevicePtr, Emulator, EmulatorConfig, EventId, FunctionId, KernelLaunch, StreamId,
};
use crate::error::Error;

const NULL: StreamId = StreamId::DEFAULT;

fn emu_seeded(seed: u64) -> Emulator {
    Emulator::new(EmulatorConfig {
        threads: 2,
        memory_capacity: 64 << 20,
        seed,
        ..EmulatorConfig::default()
    })
}

/// `fill(y, v, n)`: `y[i] = v` for `i < n`; one thread per element.
const FILL: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry fill(.param .u64 y, .param .u32 v, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [y];
    ld.param.u32 %r1, [v];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r3, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra $L__done;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
$L__done:
    ret;
}
"#;

const N: usize = 300;

struct Fill {
    function: FunctionId,
}

impl Fill {
    fn load(e: &Emulator) -> Fill {
        let m = e.load_ptx(FILL).expect("fill loads");
        Fill {
            function: e.function(m, "fill").expect("entry"),
        }
    }

    /// Queues `y[0..n] = v` on `stream`.
    fn queue(&self, e: &Emulator, stream: StreamId, y: DevicePtr, v: u32, n: usize) {
        e.launch(&KernelLaunch {
            function: self.function,
            grid: [n.div_ceil(128) as u32, 1, 1],
            block: [128, 1, 1],
            shared_mem_bytes: 0,
            stream,
            args: &[
                &y.to_le_bytes(),
                &v.to_le_bytes(),
                &(n as u32).to_le_bytes(),
            ],
        })
        .expect("the launch is queued");
    }
}

fn zeroed(e: &Emulator, n: usize) -> DevicePtr {
    let p = e.alloc(n * 4).expect("alloc");
    e.copy_to(p, &vec![0u8; n * 4]).expect("zero");
    p
}

fn read(e: &Emulator, p: DevicePtr, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; n * 4];
    e.copy_from(&mut b, p).expect("dtoh");
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A kernel on a created stream, read back with a synchronous copy and no synchronization of
/// that stream: the copy is ordered after the default stream only, so it reads the old data
/// under every seed; after `synchronize_stream` it reads the kernel's.
#[test]
fn a_synchronous_copy_does_not_wait_for_a_created_stream() {
    for seed in 0..8 {
        let e = emu_seeded(seed);
        let fill = Fill::load(&e);
        let y = zeroed(&e, N);
        let s = e.create_stream().expect("stream");
        fill.queue(&e, s, y, 7, N);
        assert_eq!(
            read(&e, y, N),
            vec![0; N],
            "seed {seed}: the stream ran unasked"
        );
        e.synchronize_stream(s).expect("sync");
        assert_eq!(read(&e, y, N), vec![7; N], "seed {seed}");
    }
}

/// The same kernel on the default stream is finished before a synchronous copy reads.
#[test]
fn a_synchronous_copy_waits_for_the_default_stream() {
    let e = emu_seeded(1);
    let fill = Fill::load(&e);
    let y = zeroed(&e, N);
    fill.queue(&e, NULL, y, 9, N);
    assert_eq!(read(&e, y, N), vec![9; N]);
}

/// Stream A fills `y` (8 blocks), stream B copies `y` to `z`. Without an event the copy races
/// the fill: it sees none, all or (landing between the kernel's blocks) part of it, depending on
/// the seed, each seed reproducibly; with `wait_event` B always copies the filled data.
#[test]
fn unordered_streams_race_and_an_event_orders_them() {
    let n = 8 * 128;
    let run = |seed: u64, ordered: bool| -> Vec<u32> {
        let e = emu_seeded(seed);
        let fill = Fill::load(&e);
        let (y, z) = (zeroed(&e, n), zeroed(&e, n));
        let a = e.create_stream().expect("stream a");
        let b = e.create_stream().expect("stream b");
        let ev = e.create_event().expect("event");
        fill.queue(&e, a, y, 5, n);
        if ordered {
            e.record_event(ev, a).expect("record");
            e.wait_event(b, ev).expect("wait");
        }
        e.copy_within(z, y, n * 4, b).expect("dtod");
        e.synchronize().expect("sync");
        read(&e, z, n)
    };
    // How many elements the copy saw filled, per seed.
    let seen: Vec<usize> = (0..32)
        .map(|s| run(s, false).iter().filter(|&&v| v == 5).count())
        .collect();
    assert!(
        seen.contains(&0) && seen.contains(&n) && seen.iter().any(|&c| c > 0 && c < n),
        "seeds 0..32 must show the copy before, after and inside the kernel: {seen:?}"
    );
    let again: Vec<usize> = (0..32)
        .map(|s| run(s, false).iter().filter(|&&v| v == 5).count())
        .collect();
    assert_eq!(again, seen, "a seed gives one interleaving");
    for seed in 0..16 {
        assert_eq!(
            run(seed, true),
            vec![5; n],
            "seed {seed}: the wait must order the copy"
        );
    }
}

/// A wait is on the record current when it was queued: re-recording the event later neither
/// holds the waiting stream back nor is run by synchronizing it.
#[test]
fn a_wait_holds_at_the_record_current_when_it_was_queued() {
    for seed in 0..8 {
        let e = emu_seeded(seed);
        let fill = Fill::load(&e);
        let (y, z) = (zeroed(&e, N), zeroed(&e, N));
        let a = e.create_stream().expect("stream a");
        let b = e.create_stream().expect("stream b");
        let ev = e.create_event().expect("event");
        fill.queue(&e, a, y, 1, N);
        e.record_event(ev, a).expect("record 1");
        e.wait_event(b, ev).expect("wait");
        e.copy_within(z, y, N * 4, b).expect("dtod");
        fill.queue(&e, a, y, 2, N);
        e.record_event(ev, a).expect("record 2");
        // Synchronizing b runs a only up to the first record.
        e.synchronize_stream(b).expect("sync b");
        assert_eq!(read(&e, z, N), vec![1; N], "seed {seed}");
        assert_eq!(
            read(&e, y, N),
            vec![1; N],
            "seed {seed}: a ran past the record"
        );
        e.synchronize_event(ev).expect("event sync");
        assert_eq!(read(&e, y, N), vec![2; N], "seed {seed}");
    }
}

/// Waiting on an event never recorded waits for nothing.
#[test]
fn a_wait_on_an_event_never_recorded_is_reached() {
    let e = emu_seeded(3);
    let fill = Fill::load(&e);
    let y = zeroed(&e, N);
    let s = e.create_stream().expect("stream");
    let ev = e.create_event().expect("event");
    e.wait_event(s, ev).expect("wait");
    fill.queue(&e, s, y, 4, N);
    assert!(e.query_event(ev).expect("query"));
    e.synchronize_event(ev).expect("sync");
    e.synchronize_stream(s).expect("sync");
    assert_eq!(read(&e, y, N), vec![4; N]);
}

/// Polling `query_stream` makes progress and finishes; `query_event` likewise.
#[test]
fn queries_make_progress() {
    let e = emu_seeded(4);
    let fill = Fill::load(&e);
    let y = zeroed(&e, N);
    let s = e.create_stream().expect("stream");
    for v in 1..=5 {
        fill.queue(&e, s, y, v, N);
    }
    let ev = e.create_event().expect("event");
    e.record_event(ev, s).expect("record");
    let mut polls = 0;
    while !e.query_event(ev).expect("event query") {
        polls += 1;
        assert!(polls < 100, "query_event never finishes");
    }
    assert!(polls >= 5, "one piece of work per query: {polls}");
    assert!(e.query_stream(s).expect("stream query"));
    assert_eq!(read(&e, y, N), vec![5; N]);
}

/// A failed check in queued work is returned by the synchronization that covers its stream,
/// once; a synchronous copy (default stream only) does not see it.
#[test]
fn a_failure_of_queued_work_reaches_the_synchronization_of_its_stream() {
    let e = emu_seeded(5);
    let fill = Fill::load(&e);
    let y = zeroed(&e, N);
    let s = e.create_stream().expect("stream");
    fill.queue(&e, s, y, 3, N + 1);
    let ev = e.create_event().expect("event");
    e.record_event(ev, s).expect("record");
    read(&e, y, N);
    let err = e.synchronize_event(ev).expect_err("the overrun fails");
    let Error::Emulator(failure) = &err else {
        panic!("not an emulator error: {err}")
    };
    assert_eq!(failure.kernel, "fill");
    assert!(
        failure.message.contains("out-of-bounds"),
        "{}",
        failure.message
    );
    e.synchronize_stream(s).expect("reported once");
    e.synchronize().expect("reported once");
    // The stream is usable again, and a later failure is reported by `synchronize`.
    fill.queue(&e, s, y, 3, N + 1);
    assert!(matches!(e.synchronize(), Err(Error::Emulator(_))));
    fill.queue(&e, s, y, 6, N);
    e.synchronize_stream(s).expect("a good launch");
    assert_eq!(read(&e, y, N), vec![6; N]);
}

/// Events take their timestamp when the stream reaches them, so the time between two measures
/// the work queued between them; before that it is not ready.
#[test]
fn events_time_the_work_between_them() {
    let e = emu_seeded(6);
    let fill = Fill::load(&e);
    let n = 1 << 16;
    let y = zeroed(&e, n);
    let s = e.create_stream().expect("stream");
    let (start, end) = (e.create_event().unwrap(), e.create_event().unwrap());
    e.record_event(start, s).expect("record");
    for v in 0..4 {
        fill.queue(&e, s, y, v, n);
    }
    e.record_event(end, s).expect("record");
    std::thread::sleep(std::time::Duration::from_millis(30));
    let not_ready = e.elapsed_ms(start, end).expect_err("not reached yet");
    assert!(not_ready.to_string().contains("NOT_READY"), "{not_ready}");
    e.synchronize_event(end).expect("sync");
    let ms = e.elapsed_ms(start, end).expect("elapsed");
    assert!(ms > 0.0, "{ms}");
}

/// `free_async` frees when the stream reaches it: work queued before it still sees the
/// memory, work queued after it is out of bounds; async host copies touch host memory only
/// when the stream reaches them.
#[test]
fn stream_order_governs_frees_and_async_host_copies() {
    let e = emu_seeded(7);
    let fill = Fill::load(&e);
    let s = e.create_stream().expect("stream");
    let y = e.alloc_async(N * 4, s).expect("alloc");
    fill.queue(&e, s, y, 8, N);
    let mut host = vec![0u8; N * 4];
    // SAFETY: `host` outlives the synchronization below and is not touched before it.
    unsafe { e.copy_from_async(host.as_mut_ptr(), y, N * 4, s) }.expect("dtoh");
    e.free_async(y, s).expect("free");
    e.synchronize_stream(s)
        .expect("the kernel and copy ran before the free");
    assert!(host.chunks_exact(4).all(|c| c == 8u32.to_le_bytes()));

    let z = e.alloc(N * 4).expect("alloc");
    e.free_async(z, s).expect("free");
    fill.queue(&e, s, z, 1, N);
    assert!(matches!(e.synchronize_stream(s), Err(Error::Emulator(_))));

    let w = zeroed(&e, N);
    let src = vec![1u8; N * 4];
    // SAFETY: `src` lives until the synchronization below and is not modified.
    unsafe { e.copy_to_async(w, src.as_ptr(), N * 4, s) }.expect("htod");
    assert_eq!(read(&e, w, N), vec![0; N], "the copy waits for its stream");
    e.synchronize_stream(s).expect("sync");
    assert_eq!(read(&e, w, N), vec![0x0101_0101; N]);
}

/// The default stream's synchronous forms keep working: a memset then `synchronize_stream`,
/// and a destroyed stream runs its work first.
#[test]
fn default_stream_forms_and_stream_destroy() {
    let e = emu_seeded(8);
    let fill = Fill::load(&e);
    let y = zeroed(&e, N);
    e.memset_u32(y, 0xabcd, N, NULL).expect("memset");
    e.synchronize_stream(NULL).expect("sync");
    assert_eq!(read(&e, y, N), vec![0xabcd; N]);
    let s = e.create_stream().expect("stream");
    fill.queue(&e, s, y, 2, N);
    e.destroy_stream(s).expect("destroy");
    assert_eq!(read(&e, y, N), vec![2; N]);
    assert!(e.synchronize_stream(s).is_err(), "destroyed");
    assert!(e.destroy_stream(NULL).is_err(), "the default stream stays");
}

/// `PAGESIFT_EMU_SEED` and `PAGESIFT_EMU_MAX_LAUNCH_THREADS` reach the configuration; bad
/// values are errors naming the variable.
#[test]
fn seed_and_work_cap_come_from_the_environment() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let c = EmulatorConfig::from_vars(vars(&[
        ("PAGESIFT_EMU_SEED", "0x2a"),
        ("PAGESIFT_EMU_MAX_LAUNCH_THREADS", "1000"),
    ]))
    .expect("config");
    assert_eq!((c.seed, c.max_launch_threads), (42, 1000));
    let d = EmulatorConfig::from_vars(vars(&[])).expect("config");
    assert_eq!(
        (d.seed, d.max_launch_threads),
        (crate::emulator::DEFAULT_SEED, 1 << 32)
    );
    let Err(Error::InvalidArgument(e)) =
        EmulatorConfig::from_vars(vars(&[("PAGESIFT_EMU_MAX_LAUNCH_THREADS", "-1")]))
    else {
        panic!("a negative cap is accepted")
    };
    assert_eq!(e.op, "PAGESIFT_EMU_MAX_LAUNCH_THREADS");
}

/// The default stream is shared by every thread: a failure there is reported to the thread
/// that queued the failed work, even when another thread's synchronization ran it.
#[test]
fn a_default_stream_failure_goes_to_the_thread_that_queued_it() {
    let e = emu_seeded(9);
    let fill = Fill::load(&e);
    let (y, z) = (zeroed(&e, N), zeroed(&e, N));
    let queued = std::sync::Barrier::new(2);
    let synced = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            fill.queue(&e, NULL, y, 1, N + 1);
            queued.wait();
            synced.wait();
            let err = e.synchronize_stream(NULL).expect_err("my overrun");
            assert!(matches!(err, Error::Emulator(_)), "{err}");
        });
        queued.wait();
        fill.queue(&e, NULL, z, 2, N);
        e.synchronize_stream(NULL)
            .expect("the other thread's failure is not mine");
        assert_eq!(read(&e, z, N), vec![2; N]);
        synced.wait();
    });
    e.synchronize().expect("reported once");
}

/// Threads queueing, waiting on each other's events, querying and synchronizing at once: no
/// deadlock, no lost work, every stream's final fill is its own.
#[test]
fn threads_with_cross_stream_waits_do_not_deadlock() {
    let e = emu_seeded(10);
    let fill = Fill::load(&e);
    let threads = 4;
    let bufs: Vec<DevicePtr> = (0..threads).map(|_| zeroed(&e, N)).collect();
    let events: Vec<EventId> = (0..threads)
        .map(|_| e.create_event().expect("event"))
        .collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (e, fill, bufs, events) = (&e, &fill, &bufs, &events);
            s.spawn(move || {
                let stream = e.create_stream().expect("stream");
                for round in 0..20u32 {
                    e.wait_event(stream, events[(t + 1) % threads])
                        .expect("wait");
                    fill.queue(e, stream, bufs[t], round + 1, N);
                    e.record_event(events[t], stream).expect("record");
                    match round % 3 {
                        0 => e.synchronize_stream(stream).expect("sync"),
                        1 => {
                            let _ = e.query_event(events[(t + 2) % threads]).expect("query");
                        }
                        _ => {
                            let _ = e.query_stream(stream).expect("query");
                        }
                    }
                }
                e.destroy_stream(stream).expect("destroy");
            });
        }
    });
    e.synchronize().expect("sync");
    for b in &bufs {
        assert_eq!(read(&e, *b, N), vec![20; N]);
    }
}

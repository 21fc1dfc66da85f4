//! Stream-ordered buffers and deferred errors over the fake backend: which waits, records,
//! synchronizations and frees each use queues, call by call.

use super::*;

/// One launch of `SCALE` on `stream` reading `x` and writing `y`, with their uses.
fn scale(stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let xa = launch::arg_read(stream, x)?;
    let ya = launch::arg_write(stream, y)?;
    let args = [xa.ptr, ya.ptr, 300u32.into()];
    fake_launch(
        stream,
        &SCALE,
        &LaunchConfig::grid_1d(3),
        &args,
        &[xa.access, ya.access],
    )
}

fn buffers(gpu: &Gpu) -> (DeviceBuffer<f32>, DeviceBuffer<f32>) {
    let x = DeviceBuffer::from_host(gpu, &[1.0f32; 300]).unwrap();
    let y = DeviceBuffer::<f32>::alloc(gpu, 300).unwrap();
    (x, y)
}

#[test]
fn one_stream_records_nothing_and_waits_for_nothing() {
    let f = fake();
    let gpu = gpu_of(&f);
    let s = gpu.new_stream().unwrap();
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    f.take_log();
    for _ in 0..5 {
        scale(&s, &x, &mut y).unwrap();
    }
    let h = s.raw().0;
    assert_eq!(f.take_log(), vec![Op::Launch(h); 5]);
}

#[test]
fn a_fresh_allocation_is_waited_for_by_another_stream() {
    let f = fake();
    let gpu = gpu_of(&f);
    let s = gpu.new_stream().unwrap();
    let x = DeviceBuffer::from_host(&gpu, &[1.0f32; 300]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, 300).unwrap();
    f.take_log();
    scale(&s, &x, &mut y).unwrap();
    let h = s.raw().0;
    let log = f.take_log();
    let [Op::Record(ev, 0), Op::Wait(w, ev2), Op::Launch(l)] = log[..] else {
        panic!("expected record on the default stream, wait, launch: {log:?}");
    };
    assert_eq!((ev, w, l), (ev2, h, h));
}

#[test]
fn a_read_on_another_stream_waits_for_the_write_on_the_device() {
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (x, mut y) = buffers(&gpu);
    let mut z = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    y.memset_bytes(0).unwrap();
    scale(&a, &x, &mut y).unwrap();
    f.take_log();
    // y written on a, read on b: b waits for an event recorded on a, before the launch.
    scale(&b, &y, &mut z).unwrap();
    let (ha, hb) = (a.raw().0, b.raw().0);
    let log = f.take_log();
    let [Op::Record(ev, ra), Op::Wait(wb, ev2), Op::Launch(lb)] = log[..] else {
        panic!("expected record on a, wait on b, launch on b: {log:?}");
    };
    assert_eq!((ra, wb, ev2, lb), (ha, hb, ev, hb));
    // A second read on b waits for nothing more; a write of y on a waits for b's read.
    scale(&b, &y, &mut z).unwrap();
    assert_eq!(f.take_log(), vec![Op::Launch(hb)]);
    scale(&a, &x, &mut y).unwrap();
    let log = f.take_log();
    assert!(
        matches!(log[..], [Op::Record(_, r), Op::Wait(w, _), Op::Launch(l)] if r == hb && w == ha && l == ha),
        "a write waits for the reads of other streams: {log:?}"
    );
}

#[test]
fn a_write_waits_for_the_writer_streams_later_reads() {
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (x, mut y) = buffers(&gpu);
    let mut z = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    y.memset_bytes(0).unwrap();
    // y: written on a, read on b, read again on a; then written on b: b must wait for a.
    scale(&a, &x, &mut y).unwrap();
    scale(&b, &y, &mut z).unwrap();
    let mut w = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    scale(&a, &y, &mut w).unwrap();
    f.take_log();
    scale(&b, &x, &mut y).unwrap();
    let log = f.take_log();
    assert!(
        log.iter()
            .any(|op| matches!(op, Op::Record(_, r) if *r == a.raw().0))
            && log.contains(&Op::Launch(b.raw().0)),
        "the write on b waits for a's read: {log:?}"
    );
}

#[test]
fn host_copies_synchronize_only_the_conflicting_streams() {
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    scale(&a, &x, &mut y).unwrap();
    f.take_log();
    // Reading y waits for its writer, a, and only a.
    let _ = y.to_host().unwrap();
    assert_eq!(f.take_log(), vec![Op::Sync(a.raw().0)]);
    // Finished: a second read waits for nothing.
    let _ = y.to_host().unwrap();
    assert_eq!(f.take_log(), vec![]);
    // x was read on a; b reads it too; writing x from the host waits for both readers.
    let mut z = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    scale(&b, &x, &mut z).unwrap();
    let mut x = x;
    f.take_log();
    x.copy_from_host(&[2.0; 300]).unwrap();
    let log = f.take_log();
    assert!(log.contains(&Op::Sync(a.raw().0)), "{log:?}");
    assert!(log.contains(&Op::Sync(b.raw().0)), "{log:?}");
}

#[test]
fn async_copies_and_memsets_are_ordered_like_launches() {
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    b.memset_async(&mut y, 1).unwrap();
    f.take_log();
    let mut host = PinnedBuffer::<f32>::new(&gpu, 300).unwrap();
    a.copy_dtoh_async(&mut host, &y).unwrap();
    let log = f.take_log();
    assert!(
        matches!(log[..2], [Op::Record(_, r), Op::Wait(w, _)] if r == b.raw().0 && w == a.raw().0),
        "the copy on a waits for the memset on b: {log:?}"
    );
    let mut y2 = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    a.copy_dtod_async(&mut y2, &x).unwrap();
    f.take_log();
    let _ = y2.to_host().unwrap();
    assert_eq!(f.take_log(), vec![Op::Sync(a.raw().0)]);
}

#[test]
fn drop_frees_in_stream_order_on_the_last_stream_without_a_stall() {
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&gpu, 300).unwrap();
    scale(&a, &x, &mut y).unwrap();
    let (yp, ha, hb) = (y.device_ptr(), a.raw().0, b.raw().0);
    f.take_log();
    drop(y);
    assert_eq!(f.take_log(), vec![Op::FreeAsync(yp, ha)]);
    // x was read on a and on b: the free goes on one of them after waiting for the other.
    scale(&b, &x, &mut z).unwrap();
    let xp = x.device_ptr();
    f.take_log();
    drop(x);
    let log = f.take_log();
    assert!(!log.contains(&Op::DeviceSync), "{log:?}");
    assert!(
        matches!(log[..], [Op::Record(_, r), Op::Wait(w, _), Op::FreeAsync(p, s)]
            if p == xp && w == s && r != s && [ha, hb].contains(&r) && [ha, hb].contains(&s)),
        "{log:?}"
    );
    // A buffer whose work is finished frees on the default stream.
    let zp = z.device_ptr();
    let _ = z.to_host().unwrap();
    f.take_log();
    drop(z);
    assert_eq!(f.take_log(), vec![Op::FreeAsync(zp, 0)]);
}

#[test]
fn a_stream_lives_while_a_buffer_has_work_on_it() {
    let f = fake();
    let gpu = gpu_of(&f);
    let a = gpu.new_stream().unwrap();
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    scale(&a, &x, &mut y).unwrap();
    let ha = a.raw().0;
    drop(a);
    f.take_log();
    let _ = y.to_host().unwrap();
    assert_eq!(
        f.take_log(),
        vec![Op::Sync(ha)],
        "the stream is still known"
    );
}

#[test]
fn a_failed_free_is_kept_for_the_caller_who_asks() {
    let f = fake();
    let gpu = gpu_of(&f);
    let b = DeviceBuffer::<f32>::alloc(&gpu, 8).unwrap();
    f.fail_free.store(true, Ordering::SeqCst);
    drop(b);
    f.fail_free.store(false, Ordering::SeqCst);
    // Unrelated calls, on this thread and another, neither fail nor skip their work.
    assert!(gpu.mem_info().is_ok());
    let c = DeviceBuffer::from_host(&gpu, &[1.0f32, 2.0]).unwrap();
    assert_eq!(c.to_host().unwrap(), vec![1.0, 2.0]);
    let g2 = gpu.clone();
    std::thread::spawn(move || {
        let d = DeviceBuffer::from_host(&g2, &[3u32]).unwrap();
        assert_eq!(d.to_host().unwrap(), vec![3]);
    })
    .join()
    .unwrap();
    let errors = gpu.take_deferred_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        matches!(&errors[0], Error::Driver(d) if d.call == "cuMemFree_v2"),
        "{errors:?}"
    );
    assert!(gpu.take_deferred_errors().is_empty(), "reported once");

    // `synchronize` synchronizes, then reports what is pending.
    let b = DeviceBuffer::<f32>::alloc(&gpu, 8).unwrap();
    f.fail_free.store(true, Ordering::SeqCst);
    drop(b);
    f.fail_free.store(false, Ordering::SeqCst);
    f.take_log();
    match gpu.synchronize() {
        Err(Error::Deferred(errors)) => assert_eq!(errors.len(), 1),
        other => panic!("expected the deferred error, got {other:?}"),
    }
    assert!(f.take_log().contains(&Op::DeviceSync));
    assert!(gpu.synchronize().is_ok(), "reported once");
}

#[test]
fn to_host_returns_initialized_elements_whatever_the_driver_wrote() {
    let f = fake();
    let gpu = gpu_of(&f);
    let b = DeviceBuffer::from_host(&gpu, &[7u32; 64]).unwrap();
    f.dtoh_writes_nothing.store(true, Ordering::SeqCst);
    assert_eq!(b.to_host().unwrap(), vec![0u32; 64]);
    assert_eq!(b.slice(8..).unwrap().to_host().unwrap(), vec![0u32; 56]);
}

#[test]
fn device_mismatch_names_the_object() {
    let (f1, f2) = (fake(), fake());
    let (g1, g2) = (gpu_of(&f1), gpu_of(&f2));
    let s1 = g1.new_stream().unwrap();
    let ev2 = Event::new(&g2).unwrap();
    let ev1 = Event::new(&g1).unwrap();
    let object = |r: Result<()>| match r {
        Err(Error::DeviceMismatch(e)) => e.object,
        other => panic!("expected a device mismatch, got {other:?}"),
    };
    assert_eq!(object(ev2.record(&s1)), "stream");
    assert_eq!(object(ev1.elapsed_ms(&ev2).map(|_| ())), "event");
    let host = PinnedBuffer::<f32>::new(&g2, 4).unwrap();
    let mut dev = DeviceBuffer::<f32>::alloc(&g1, 4).unwrap();
    assert_eq!(object(s1.copy_htod_async(&mut dev, &host)), "pinned buffer");
    let other = DeviceBuffer::<f32>::alloc(&g2, 4).unwrap();
    assert_eq!(object(s1.copy_dtod_async(&mut dev, &other)), "buffer");
    let e = Error::from(error::DeviceMismatch {
        what: "Event::record".into(),
        object: "stream",
    });
    assert!(e
        .to_string()
        .contains("the stream belongs to another device"));
}

#[test]
fn an_unknown_device_variable_is_a_configuration_error() {
    match backend_for("quantum") {
        Err(Error::Config(c)) => {
            assert_eq!((c.variable, c.value.as_str()), (DEVICE_ENV, "quantum"))
        }
        Err(other) => panic!("expected a configuration error, got {other}"),
        Ok(_) => panic!("expected a configuration error"),
    }
}

#[test]
fn the_bookkeeping_of_a_single_stream_launch_is_cheap() {
    let f = fake();
    let gpu = gpu_of(&f);
    let s = gpu.new_stream().unwrap();
    let (x, mut y) = buffers(&gpu);
    y.memset_bytes(0).unwrap();
    let untracked = |s: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>| {
        let args = [
            launch::arg_read(s, x)?.ptr,
            launch::arg_write(s, y)?.ptr,
            300u32.into(),
        ];
        fake_launch(s, &SCALE, &LaunchConfig::grid_1d(3), &args, &[])
    };
    const N: u32 = 20_000;
    let time = |tracked: bool, y: &mut DeviceBuffer<f32>| {
        let t = std::time::Instant::now();
        for _ in 0..N {
            if tracked {
                scale(&s, &x, y).unwrap();
            } else {
                untracked(&s, &x, y).unwrap();
            }
        }
        f.take_log();
        t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
    };
    time(true, &mut y);
    let (mut with, mut without) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        with = with.min(time(true, &mut y));
        without = without.min(time(false, &mut y));
    }
    println!(
        "launch bookkeeping, one stream, one read and one written buffer: {:.0} ns with, {:.0} ns without ({:+.0} ns){}",
        with,
        without,
        with - without,
        if cfg!(debug_assertions) { " [debug build]" } else { "" }
    );
    assert_eq!(
        f.take_log(),
        vec![],
        "nothing recorded or waited on one stream"
    );
}

/// The wrappers `ptx_kernel!` generates must hand their buffer uses to `launch`; with them, a
/// write on one stream after a write on another waits for it.
#[test]
fn generated_wrappers_pass_their_buffer_uses() {
    use crate::ops::act::{activation_inplace, Act, ActArgs};
    let f = fake();
    let gpu = gpu_of(&f);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let mut y = DeviceBuffer::<f32>::zeroed(&gpu, 1024).unwrap();
    activation_inplace(&a, &ActArgs::new(Act::Relu), &mut y).unwrap();
    f.take_log();
    activation_inplace(&b, &ActArgs::new(Act::Relu), &mut y).unwrap();
    let log = f.take_log();
    let (ha, hb) = (a.raw().0, b.raw().0);
    let wait = log
        .iter()
        .position(|op| matches!(op, Op::Wait(w, _) if *w == hb))
        .unwrap_or_else(|| panic!("no wait on b: {log:?}"));
    assert!(
        matches!(log[..wait], [.., Op::Record(_, r)] if r == ha),
        "the wait is for a's tail: {log:?}"
    );
    assert!(
        matches!(log[wait..], [.., Op::Launch(l)] if l == hb),
        "then the launch on b: {log:?}"
    );
}

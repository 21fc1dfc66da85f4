//! Stream-ordered buffers on a device (the real GPU, or the emulated one with
//! `PAGESIFT_GPU_DEVICE=emulated`): results read with no explicit synchronization are final,
//! work on one stream is seen by another, and dropping a buffer under queued work neither waits
//! for it nor frees memory the work still uses. Skips visibly without a device.
//!
//! Every launch here changes every element (leaky relu with slope 2 of negative data doubles
//! it, exactly), so a read that overtakes any launch sees a wrong value.

use std::time::Instant;

use pagesift_gpu::ops::act::{activation, activation_inplace};
use pagesift_gpu::{Act, ActArgs, DeviceBuffer, Event, Gpu, KernelVariant, LaunchConfig, Stream};
use pagesift_tests::hand_ptx::{axpb_variant, launch_axpb_variant};
use pagesift_tests::{gpu_or_skip, is_emulated};

/// `y = 2 x` by the hand-written `axpb` kernel, launched with its buffer uses as generated
/// wrappers launch (independent of the compiler's kernels).
static AXPB: KernelVariant = axpb_variant(256, false);

fn double_into(stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) {
    let cfg = LaunchConfig::grid_1d(u32::try_from(x.len().div_ceil(256)).unwrap());
    launch_axpb_variant(stream, &AXPB, &cfg, x, y, 2.0, 0.0).unwrap();
}

/// Queued launches per test.
const LAUNCHES: usize = 200;

/// 2^28 elements (1 GiB of f32) on a GPU, so the queued work takes long enough to be
/// overtaken; a small size on the emulated device.
fn size(gpu: &Gpu) -> usize {
    if is_emulated(gpu) {
        4099
    } else {
        1 << 28
    }
}

/// Negative data of magnitude below 2^-79, so 200 doublings stay finite and exact.
fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| -(1.0 + (i % 1021) as f32 / 1021.0) * f32::powi(2.0, -80))
        .collect()
}

/// `x` doubled `k` times (exact: a power of two within range).
fn doubled(x: f32, k: usize) -> f32 {
    let mut v = x;
    let mut left = k;
    while left > 0 {
        let step = left.min(100);
        v *= f32::powi(2.0, step as i32);
        left -= step;
    }
    v
}

fn leaky() -> ActArgs<'static, f32> {
    ActArgs::new(Act::LeakyRelu).with_slope(2.0)
}

/// How many elements of `got` differ from `x` doubled `k` times.
fn not_final(got: &[f32], x: &[f32], k: usize) -> usize {
    got.iter()
        .zip(x)
        .filter(|(g, x)| g.to_bits() != doubled(**x, k).to_bits())
        .count()
}

#[test]
fn queued_kernels_are_final_when_read_without_a_synchronize() {
    let Some(gpu) = gpu_or_skip("queued_kernels_are_final_when_read_without_a_synchronize") else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let stream = gpu.new_stream().unwrap();
    let mut y = DeviceBuffer::from_host(&gpu, &x).unwrap();
    let start = Instant::now();
    for _ in 0..LAUNCHES {
        activation_inplace(&stream, &leaky(), &mut y).unwrap();
    }
    let queued = start.elapsed();
    // No synchronize: the copy itself must wait for the 200 launches.
    let got = y.to_host().unwrap();
    let total = start.elapsed();
    let bad = not_final(&got, &x, LAUNCHES);
    println!(
        "{LAUNCHES} queued in-place activations on {n} elements ({}): queued in {} µs, read back after {} µs, {bad} elements not final",
        gpu.name(),
        queued.as_micros(),
        total.as_micros()
    );
    assert_eq!(
        bad, 0,
        "{bad} of {n} elements were read before the work finished"
    );
}

#[test]
fn work_written_on_one_stream_is_read_correctly_on_another() {
    let Some(gpu) = gpu_or_skip("work_written_on_one_stream_is_read_correctly_on_another") else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let (a, b) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let mut y = DeviceBuffer::from_host(&gpu, &x).unwrap();
    let mut z = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    // Long work on a, then one launch on b reading its result, then more on b: no sync.
    let k = LAUNCHES / 4;
    for _ in 0..k {
        activation_inplace(&a, &leaky(), &mut y).unwrap();
    }
    activation(&b, &leaky(), &y, &mut z).unwrap();
    activation_inplace(&b, &leaky(), &mut z).unwrap();
    // y was read on b: writing it on a again must wait for that read.
    activation_inplace(&a, &leaky(), &mut y).unwrap();
    let bad_z = not_final(&z.to_host().unwrap(), &x, k + 2);
    let bad_y = not_final(&y.to_host().unwrap(), &x, k + 1);
    println!(
        "cross-stream: {k} launches on stream a read by stream b, {n} elements ({}): {bad_z} wrong in the reader's output, {bad_y} in the writer's",
        gpu.name()
    );
    assert_eq!((bad_z, bad_y), (0, 0));
}

#[test]
fn drop_under_queued_work_returns_at_once_and_corrupts_nothing() {
    let Some(gpu) = gpu_or_skip("drop_under_queued_work_returns_at_once_and_corrupts_nothing")
    else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let stream = gpu.new_stream().unwrap();
    let mut y = DeviceBuffer::from_host(&gpu, &x).unwrap();
    let (begin, end) = (Event::new(&gpu).unwrap(), Event::new(&gpu).unwrap());
    begin.record(&stream).unwrap();
    for _ in 0..LAUNCHES {
        activation_inplace(&stream, &leaky(), &mut y).unwrap();
    }
    end.record(&stream).unwrap();
    let t = Instant::now();
    drop(y);
    let drop_us = t.elapsed().as_secs_f64() * 1e6;
    let still_running = !end.query().unwrap();

    // A buffer allocated right after may take the freed memory: it must not see the queued
    // kernels' writes, before or after they finish.
    let pattern: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut z = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    z.copy_from_host(&pattern).unwrap();
    let early = z.to_host().unwrap();
    stream.synchronize().unwrap();
    let late = z.to_host().unwrap();
    let work_us = f64::from(end.elapsed_ms(&begin).unwrap()) * 1e3;
    let corrupt = |v: &[f32]| {
        v.iter()
            .zip(&pattern)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count()
    };
    let (bad_early, bad_late) = (corrupt(&early), corrupt(&late));
    println!(
        "drop under {LAUNCHES} queued launches on {n} elements ({}): drop took {drop_us:.1} µs, the queued work {work_us:.1} µs (still running at the drop: {still_running}); {bad_early} + {bad_late} corrupted elements in the next buffer",
        gpu.name()
    );
    assert_eq!((bad_early, bad_late), (0, 0));
    assert!(
        gpu.take_deferred_errors().is_empty(),
        "the free was accepted"
    );
    if !is_emulated(&gpu) {
        assert!(
            drop_us < work_us / 10.0,
            "drop took {drop_us:.1} µs against {work_us:.1} µs of queued work"
        );
    }
}

#[test]
fn a_stream_dropped_under_work_still_orders_its_buffers() {
    let Some(gpu) = gpu_or_skip("a_stream_dropped_under_work_still_orders_its_buffers") else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let mut y = DeviceBuffer::from_host(&gpu, &x).unwrap();
    {
        let stream = gpu.new_stream().unwrap();
        for _ in 0..LAUNCHES / 4 {
            activation_inplace(&stream, &leaky(), &mut y).unwrap();
        }
    }
    let bad = not_final(&y.to_host().unwrap(), &x, LAUNCHES / 4);
    println!(
        "stream dropped under {} launches: {bad} elements not final",
        LAUNCHES / 4
    );
    assert_eq!(bad, 0);
}

/// 200 launches between two buffers, alternating (`p -> q`, `q -> p`, ...), each on the
/// stream `streams[k % streams.len()]`; the result is read with no synchronize.
fn ping_pong(test: &str, streams: usize) {
    let Some(gpu) = gpu_or_skip(test) else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let streams: Vec<Stream> = (0..streams).map(|_| gpu.new_stream().unwrap()).collect();
    let mut p = DeviceBuffer::from_host(&gpu, &x).unwrap();
    let mut q = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    let start = Instant::now();
    for k in 0..LAUNCHES {
        let s = &streams[k % streams.len()];
        if k % 2 == 0 {
            double_into(s, &p, &mut q);
        } else {
            double_into(s, &q, &mut p);
        }
    }
    let queued = start.elapsed();
    let got = p.to_host().unwrap();
    let total = start.elapsed();
    let bad = not_final(&got, &x, LAUNCHES);
    println!(
        "{test}: {LAUNCHES} axpb launches on {} stream(s), {n} elements ({}): queued in {} µs, read after {} µs, {bad} elements not final",
        streams.len(),
        gpu.name(),
        queued.as_micros(),
        total.as_micros()
    );
    assert_eq!(bad, 0);
}

#[test]
fn tracked_launches_on_one_stream_are_final_when_read() {
    ping_pong("tracked_launches_on_one_stream_are_final_when_read", 1);
}

#[test]
fn tracked_launches_alternating_streams_are_ordered() {
    ping_pong("tracked_launches_alternating_streams_are_ordered", 2);
}

#[test]
fn tracked_drop_under_queued_work_returns_at_once() {
    let Some(gpu) = gpu_or_skip("tracked_drop_under_queued_work_returns_at_once") else {
        return;
    };
    let n = size(&gpu);
    let x = data(n);
    let stream = gpu.new_stream().unwrap();
    let mut p = DeviceBuffer::from_host(&gpu, &x).unwrap();
    let mut q = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    let (begin, end) = (Event::new(&gpu).unwrap(), Event::new(&gpu).unwrap());
    begin.record(&stream).unwrap();
    for k in 0..LAUNCHES {
        if k % 2 == 0 {
            double_into(&stream, &p, &mut q);
        } else {
            double_into(&stream, &q, &mut p);
        }
    }
    end.record(&stream).unwrap();
    let t = Instant::now();
    drop(q);
    let drop_us = t.elapsed().as_secs_f64() * 1e6;
    let still_running = !end.query().unwrap();
    let pattern: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut z = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    z.copy_from_host(&pattern).unwrap();
    let got = p.to_host().unwrap();
    let late = z.to_host().unwrap();
    let work_us = f64::from(end.elapsed_ms(&begin).unwrap()) * 1e3;
    let bad = not_final(&got, &x, LAUNCHES);
    let corrupt = late
        .iter()
        .zip(&pattern)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!(
        "tracked drop under {LAUNCHES} queued launches on {n} elements ({}): drop took {drop_us:.1} µs, the queued work {work_us:.1} µs (still running at the drop: {still_running}); {bad} not final, {corrupt} corrupted in the next buffer",
        gpu.name()
    );
    assert_eq!((bad, corrupt), (0, 0));
    if !is_emulated(&gpu) {
        assert!(
            drop_us < work_us / 10.0,
            "drop took {drop_us:.1} µs against {work_us:.1} µs of queued work"
        );
    }
}

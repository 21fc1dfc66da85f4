//! The driver layer on a device (the real GPU, or the emulated one with
//! `PAGESIFT_GPU_DEVICE=emulated`): copies, hand-written PTX kernels, JIT errors, out of
//! memory, events, threads, and memory returned after drops. Skips visibly without a device.

use std::ops::Range;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use pagesift_gpu::{
    DeviceBuffer, Error, Event, Gpu, KernelArg, KernelVariant, LaunchConfig, PinnedBuffer,
};
use pagesift_tests::hand_ptx::{
    axpb_reference, axpb_variant, expect_module_load_error, launch_axpb_variant, spin_reference,
    RawAxpb, AXPB_PTX, BROKEN_PTX, SPIN_PTX,
};
use pagesift_tests::util::{
    bits, poison_f32, poisoned_device, poisoned_f32, random_f32, POISON_BITS,
};
use pagesift_tests::{gpu_or_skip, is_emulated};

/// Tests take this shared; the memory test takes it exclusive, so no other test allocates while
/// it compares free memory.
static DEVICE: RwLock<()> = RwLock::new(());

/// Opens the device for the test `test` (or skips it) and takes [`DEVICE`] shared.
fn open(test: &str) -> Option<(Gpu, RwLockReadGuard<'static, ()>)> {
    let gpu = gpu_or_skip(test)?;
    Some((gpu, DEVICE.read().unwrap_or_else(|p| p.into_inner())))
}

/// The range of the random data.
const DATA: Range<f32> = -100.0..100.0;

/// `axpb` of the shared hand-written PTX as a kernel variant, launched through the same path as
/// the code `ptx_kernel!` generates.
static AXPB: KernelVariant = axpb_variant(256, false);

/// The sizes of [`sizes`], each with random data (seeds `seed`, `seed + 1`, ...).
fn sized_data(gpu: &Gpu, seed: u64) -> impl Iterator<Item = (usize, Vec<f32>)> {
    (seed..)
        .zip(sizes(gpu))
        .map(|(s, n)| (n, random_f32(n, s, DATA)))
}

fn sizes(gpu: &Gpu) -> Vec<usize> {
    // 64 MiB of f32 on a GPU; the emulated device copies host memory, so 1 MiB shows the same.
    let big = if is_emulated(gpu) {
        (1 << 20) / 4 + 3
    } else {
        (64 << 20) / 4
    };
    vec![0, 1, 3, 4097, big]
}

#[test]
fn synchronous_copies_round_trip() {
    let Some((gpu, _shared)) = open("synchronous_copies_round_trip") else {
        return;
    };
    for (n, host) in sized_data(&gpu, 1) {
        let mut dev = poisoned_device(&gpu, n).unwrap();
        dev.copy_from_host(&host).unwrap();
        let mut back = poisoned_f32(n);
        dev.copy_to_host(&mut back).unwrap();
        assert_eq!(bits(&back), bits(&host), "size {n}");
        assert_eq!(
            bits(
                &DeviceBuffer::from_host(&gpu, &host)
                    .unwrap()
                    .to_host()
                    .unwrap()
            ),
            bits(&host),
            "size {n}"
        );
        // A view in the middle copies only its range.
        if n >= 3 {
            let (lo, hi) = (1, n - 1);
            let mut view_back = poisoned_f32(hi - lo);
            dev.slice(lo..hi)
                .unwrap()
                .copy_to_host(&mut view_back)
                .unwrap();
            assert_eq!(bits(&view_back), bits(&host[lo..hi]), "view of size {n}");
        }
    }
    let mut b = DeviceBuffer::<u8>::alloc(&gpu, 4).unwrap();
    assert!(matches!(
        b.copy_from_host(&[1, 2, 3]),
        Err(Error::LengthMismatch(_))
    ));
}

#[test]
fn pinned_asynchronous_copies_round_trip() {
    let Some((gpu, _shared)) = open("pinned_asynchronous_copies_round_trip") else {
        return;
    };
    let stream = gpu.new_stream().unwrap();
    for (n, host) in sized_data(&gpu, 100) {
        let src = PinnedBuffer::from_slice(&gpu, &host).unwrap();
        let mut dev = poisoned_device(&gpu, n).unwrap();
        stream.copy_htod_async(&mut dev, &src).unwrap();
        let mut dst = PinnedBuffer::<f32>::new(&gpu, n).unwrap();
        dst.as_mut_slice().unwrap().fill(poison_f32());
        stream.copy_dtoh_async(&mut dst, &dev).unwrap();
        // Reading waits for the copy; no explicit synchronize.
        assert_eq!(bits(dst.as_slice().unwrap()), bits(&host), "size {n}");
    }
}

#[test]
fn device_to_device_copies_round_trip() {
    let Some((gpu, _shared)) = open("device_to_device_copies_round_trip") else {
        return;
    };
    let stream = gpu.new_stream().unwrap();
    for (n, host) in sized_data(&gpu, 200) {
        let src = DeviceBuffer::from_host(&gpu, &host).unwrap();
        let mut dst = poisoned_device(&gpu, n).unwrap();
        dst.copy_from_device(&src).unwrap();
        assert_eq!(bits(&dst.to_host().unwrap()), bits(&host), "size {n}");

        dst.fill_u32(POISON_BITS).unwrap();
        stream.copy_dtod_async(&mut dst, &src).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&dst.to_host().unwrap()),
            bits(&host),
            "async, size {n}"
        );

        if n >= 4 {
            // Shift by one element through views.
            dst.fill_u32(POISON_BITS).unwrap();
            dst.slice_mut(1..)
                .unwrap()
                .copy_from_device(&src.slice(..n - 1).unwrap())
                .unwrap();
            let got = dst.to_host().unwrap();
            assert_eq!(
                got[0].to_bits(),
                POISON_BITS,
                "untouched element keeps its poison"
            );
            assert_eq!(
                bits(&got[1..]),
                bits(&host[..n - 1]),
                "shifted view, size {n}"
            );
        }
    }
}

#[test]
fn a_hand_written_ptx_kernel_runs() {
    let Some((gpu, _shared)) = open("a_hand_written_ptx_kernel_runs") else {
        return;
    };
    let axpb = RawAxpb::load(&gpu).unwrap();
    let stream = gpu.new_stream().unwrap();
    for n in [1usize, 3, 4097] {
        let host = random_f32(n, 300 + n as u64, DATA);
        let (a, b) = (1.75f32, -0.375f32);
        let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
        let mut y = poisoned_device(&gpu, n).unwrap();
        axpb.launch(&stream, &x, &mut y, a, b, 256).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&y.to_host().unwrap()),
            bits(&axpb_reference(&host, a, b)),
            "n = {n}"
        );
    }
    // Limits are checked before the driver sees the launch.
    // SAFETY: refused before launching.
    let r = unsafe { stream.launch(axpb.function(), [1, 1, 1], [4096, 1, 1], 0, &[]) };
    assert!(
        matches!(&r, Err(Error::Launch(e)) if e.kernel == "axpb"),
        "{r:?}"
    );
    assert!(axpb.module().function("no_such_entry").is_err());
}

#[test]
fn a_kernel_variant_launches_through_the_generated_code_path() {
    let Some((gpu, _shared)) = open("a_kernel_variant_launches_through_the_generated_code_path")
    else {
        return;
    };
    let stream = gpu.default_stream();
    let n = 1000usize;
    let host = random_f32(n, 400, DATA);
    let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    for round in 0..2 {
        y.fill_u32(POISON_BITS).unwrap();
        let cfg = LaunchConfig::grid_1d(4);
        launch_axpb_variant(&stream, &AXPB, &cfg, &x, &mut y, 0.5, round as f32).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&y.to_host().unwrap()),
            bits(&axpb_reference(&host, 0.5, round as f32)),
            "round {round}"
        );
    }
    assert!(gpu.loaded_module_count() >= 1);
    let too_big =
        LaunchConfig::grid_1d(4).with_shared_mem(gpu.props().max_shared_per_block_optin + 1);
    assert!(matches!(
        launch_axpb_variant(&stream, &AXPB, &too_big, &x, &mut y, 0.0, 0.0),
        Err(Error::Launch(_))
    ));
}

#[test]
fn a_ptx_syntax_error_is_a_module_load_error_with_the_jit_log() {
    let Some((gpu, _shared)) = open("a_ptx_syntax_error_is_a_module_load_error_with_the_jit_log")
    else {
        return;
    };
    let (source, jit_log) = expect_module_load_error(&gpu, "broken", BROKEN_PTX);
    assert_eq!(source.call, "cuModuleLoadDataEx");
    assert!(!jit_log.trim().is_empty(), "the JIT log is kept");
    assert!(
        jit_log.contains("line 8") || jit_log.contains(":8"),
        "the log names line 8: {jit_log}"
    );
    // The device is still usable.
    assert_eq!(
        DeviceBuffer::from_host(&gpu, &[5u32, 6])
            .unwrap()
            .to_host()
            .unwrap(),
        vec![5, 6]
    );
}

#[test]
fn an_allocation_larger_than_the_device_is_out_of_memory() {
    let Some((gpu, _shared)) = open("an_allocation_larger_than_the_device_is_out_of_memory") else {
        return;
    };
    let (_, total) = gpu.mem_info().unwrap();
    let bytes = total + total / 2;
    match DeviceBuffer::<u8>::alloc(&gpu, bytes) {
        Err(Error::OutOfMemory { bytes: b }) => assert_eq!(b, bytes),
        Err(e) => panic!("expected OutOfMemory, got {e}"),
        Ok(_) => panic!("allocated {bytes} bytes on a device of {total}"),
    }
    let host = random_f32(4097, 500, DATA);
    assert_eq!(
        bits(
            &DeviceBuffer::from_host(&gpu, &host)
                .unwrap()
                .to_host()
                .unwrap()
        ),
        bits(&host)
    );
}

#[test]
fn events_time_a_kernel() {
    let Some((gpu, _shared)) = open("events_time_a_kernel") else {
        return;
    };
    let module = gpu.load_ptx("spin", SPIN_PTX).unwrap();
    let spin = module.function("spin").unwrap();
    let (threads, iters) = if is_emulated(&gpu) {
        (64u32, 200u32)
    } else {
        (128 * 1024, 20_000)
    };
    let out = poisoned_device(&gpu, threads as usize).unwrap();
    let stream = gpu.new_stream().unwrap();
    let (start, end) = (Event::new(&gpu).unwrap(), Event::new(&gpu).unwrap());
    start.record(&stream).unwrap();
    let args = [KernelArg::ptr(out.device_ptr()), iters.into()];
    // SAFETY: the arguments match `spin`; `out` holds one element per thread.
    unsafe { stream.launch(&spin, [threads / 64, 1, 1], [64, 1, 1], 0, &args) }.unwrap();
    end.record(&stream).unwrap();
    end.synchronize().unwrap();
    let ms = end.elapsed_ms(&start).unwrap();
    assert!(ms > 0.0 && ms.is_finite(), "elapsed {ms} ms");
    let got = out.to_host().unwrap();
    for i in [0u32, 1, threads - 1] {
        assert_eq!(
            got[i as usize].to_bits(),
            spin_reference(i, iters).to_bits(),
            "thread {i}"
        );
    }
}

#[test]
fn one_gpu_is_used_from_eight_threads_at_once() {
    let Some((gpu, _shared)) = open("one_gpu_is_used_from_eight_threads_at_once") else {
        return;
    };
    let gpu = Arc::new(gpu);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let gpu = Arc::clone(&gpu);
            s.spawn(move || {
                let stream = gpu.new_stream().unwrap();
                for round in 0..3u64 {
                    let n = 1000 + 37 * t as usize + round as usize;
                    let host = random_f32(n, 600 + 10 * t + round, DATA);
                    let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
                    let mut y = poisoned_device(&gpu, n).unwrap();
                    let a = t as f32 + 0.5;
                    let grid = LaunchConfig::grid_1d((n as u32).div_ceil(256));
                    launch_axpb_variant(&stream, &AXPB, &grid, &x, &mut y, a, 1.0).unwrap();
                    stream.synchronize().unwrap();
                    assert_eq!(
                        bits(&y.to_host().unwrap()),
                        bits(&axpb_reference(&host, a, 1.0)),
                        "thread {t}"
                    );
                }
            });
        }
    });
}

#[test]
fn free_memory_returns_after_all_handles_drop() {
    let Some(gpu) = gpu_or_skip("free_memory_returns_after_all_handles_drop") else {
        return;
    };
    let _exclusive = DEVICE.write().unwrap_or_else(|p| p.into_inner());
    // Tolerance for the driver's own bookkeeping (stream and event pools, page tables).
    const TOLERANCE: usize = 8 << 20;
    let chunk = if is_emulated(&gpu) { 1 << 20 } else { 64 << 20 };
    // Warm up: the module and the first stream allocate driver memory once.
    drop(gpu.load_ptx("axpb", AXPB_PTX).unwrap());
    drop(gpu.new_stream().unwrap());
    gpu.synchronize().unwrap();
    let (free_before, _) = gpu.mem_info().unwrap();
    {
        let stream = gpu.new_stream().unwrap();
        let buffers: Vec<DeviceBuffer<u8>> = (0..4)
            .map(|_| DeviceBuffer::alloc(&gpu, chunk).unwrap())
            .collect();
        let pinned = PinnedBuffer::<u8>::from_slice(&gpu, &vec![7u8; chunk]).unwrap();
        let mut last = DeviceBuffer::<u8>::alloc(&gpu, chunk).unwrap();
        stream.copy_htod_async(&mut last, &pinned).unwrap();
        let event = Event::new(&gpu).unwrap();
        event.record(&stream).unwrap();
        event.synchronize().unwrap();
        let (free_during, _) = gpu.mem_info().unwrap();
        assert!(
            free_during + 4 * chunk <= free_before + TOLERANCE,
            "allocations show: {free_during} free during, {free_before} before"
        );
        drop((buffers, pinned, last, event, stream));
    }
    gpu.synchronize().unwrap();
    let (free_after, _) = gpu.mem_info().unwrap();
    assert!(
        free_after + TOLERANCE >= free_before,
        "free memory {free_after} after the drops, {free_before} before (tolerance {TOLERANCE})"
    );
}

//! The driver layer on a device (the real GPU, or the emulated one with
//! `PAGESIFT_GPU_DEVICE=emulated`): copies, hand-written PTX kernels, JIT errors, out of
//! memory, events, threads, and memory returned after drops. Skips visibly without a device.

use std::sync::{Arc, RwLock};

use pagesift_gpu::__private::{self, KernelArg};
use pagesift_gpu::{DeviceBuffer, Error, Event, Gpu, KernelVariant, LaunchConfig, PinnedBuffer};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Tests take this shared; the memory test takes it exclusive, so no other test allocates while
/// it compares free memory.
static DEVICE: RwLock<()> = RwLock::new(());

/// A NaN pattern written into outputs before each run, so an unwritten element cannot pass.
const POISON: u32 = 0x7FC0_DEAD;

const KERNELS: &str = r#"
.version 7.0
.target sm_70
.address_size 64

// y[i] = fma(x[i], a, b) for i < n
.visible .entry axpb(
	.param .u64 x,
	.param .u64 y,
	.param .f32 a,
	.param .f32 b,
	.param .u32 n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	ld.param.f32 %f1, [a];
	ld.param.f32 %f2, [b];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.u32 %rd5, %r5, 4;
	add.s64 %rd6, %rd3, %rd5;
	ld.global.f32 %f3, [%rd6];
	fma.rn.f32 %f4, %f3, %f1, %f2;
	add.s64 %rd7, %rd4, %rd5;
	st.global.f32 [%rd7], %f4;
DONE:
	ret;
}

// out[i]: v = i, then `iters` times v = fma(v, 0.999, 0.001); a loop long enough to time.
.visible .entry spin(
	.param .u64 out,
	.param .u32 iters
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [iters];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	cvt.rn.f32.u32 %f1, %r5;
	mov.u32 %r6, 0;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 bra STORE;
LOOP:
	fma.rn.f32 %f1, %f1, 0f3F7FBE77, 0f3A83126F;
	add.u32 %r6, %r6, 1;
	setp.lt.u32 %p2, %r6, %r1;
	@%p2 bra LOOP;
STORE:
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.f32 [%rd4], %f1;
	ret;
}
"#;

/// The `axpb` entry of `KERNELS` as a kernel variant, launched through the same path as the
/// code `ptx_kernel!` generates.
static AXPB: KernelVariant = KernelVariant {
    kernel: "axpb",
    entry: "axpb",
    consts: &[],
    target: "sm_70",
    ptx_version: (7, 0),
    block: [256, 1, 1],
    static_shared_bytes: 0,
    dynamic_shared: false,
    params: &[
        ("x", "&[f32]"),
        ("y", "&mut [f32]"),
        ("a", "f32"),
        ("b", "f32"),
        ("n", "u32"),
    ],
    ptx: KERNELS,
};

fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-100.0f32..100.0)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
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
    let Some(gpu) = gpu_or_skip("synchronous_copies_round_trip") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    for (k, n) in sizes(&gpu).into_iter().enumerate() {
        let host = random_f32(n, k as u64 + 1);
        let mut dev = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
        dev.fill_u32(POISON).unwrap();
        dev.copy_from_host(&host).unwrap();
        let mut back = vec![f32::from_bits(POISON); n];
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
            let mut view_back = vec![f32::from_bits(POISON); hi - lo];
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
        Err(Error::LengthMismatch { .. })
    ));
}

#[test]
fn pinned_asynchronous_copies_round_trip() {
    let Some(gpu) = gpu_or_skip("pinned_asynchronous_copies_round_trip") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let stream = gpu.new_stream().unwrap();
    for (k, n) in sizes(&gpu).into_iter().enumerate() {
        let host = random_f32(n, 100 + k as u64);
        let src = PinnedBuffer::from_slice(&gpu, &host).unwrap();
        let mut dev = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
        dev.fill_u32(POISON).unwrap();
        stream.copy_htod_async(&mut dev, &src).unwrap();
        let mut dst = PinnedBuffer::<f32>::new(&gpu, n).unwrap();
        dst.as_mut_slice().unwrap().fill(f32::from_bits(POISON));
        stream.copy_dtoh_async(&mut dst, &dev).unwrap();
        // Reading waits for the copy; no explicit synchronize.
        assert_eq!(bits(dst.as_slice().unwrap()), bits(&host), "size {n}");
    }
}

#[test]
fn device_to_device_copies_round_trip() {
    let Some(gpu) = gpu_or_skip("device_to_device_copies_round_trip") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let stream = gpu.new_stream().unwrap();
    for (k, n) in sizes(&gpu).into_iter().enumerate() {
        let host = random_f32(n, 200 + k as u64);
        let src = DeviceBuffer::from_host(&gpu, &host).unwrap();
        let mut dst = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
        dst.fill_u32(POISON).unwrap();
        dst.copy_from_device(&src).unwrap();
        assert_eq!(bits(&dst.to_host().unwrap()), bits(&host), "size {n}");

        dst.fill_u32(POISON).unwrap();
        stream.copy_dtod_async(&mut dst, &src).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&dst.to_host().unwrap()),
            bits(&host),
            "async, size {n}"
        );

        if n >= 4 {
            // Shift by one element through views.
            dst.fill_u32(POISON).unwrap();
            dst.slice_mut(1..)
                .unwrap()
                .copy_from_device(&src.slice(..n - 1).unwrap())
                .unwrap();
            let got = dst.to_host().unwrap();
            assert_eq!(
                got[0].to_bits(),
                POISON,
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

fn axpb_expected(x: &[f32], a: f32, b: f32) -> Vec<f32> {
    x.iter().map(|&v| v.mul_add(a, b)).collect()
}

#[test]
fn a_hand_written_ptx_kernel_runs() {
    let Some(gpu) = gpu_or_skip("a_hand_written_ptx_kernel_runs") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let module = gpu.load_ptx("driver_gpu_kernels", KERNELS).unwrap();
    let f = module.function("axpb").unwrap();
    let stream = gpu.new_stream().unwrap();
    for n in [1usize, 3, 4097] {
        let host = random_f32(n, 300 + n as u64);
        let (a, b) = (1.75f32, -0.375f32);
        let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
        let mut y = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
        y.fill_u32(POISON).unwrap();
        let args = [
            KernelArg::ptr(x.device_ptr()),
            KernelArg::ptr(y.device_ptr()),
            a.into(),
            b.into(),
            (n as u32).into(),
        ];
        let grid = [(n as u32).div_ceil(256), 1, 1];
        // SAFETY: the arguments match `axpb`'s parameters; x and y hold n elements.
        unsafe { stream.launch(&f, grid, [256, 1, 1], 0, &args) }.unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&y.to_host().unwrap()),
            bits(&axpb_expected(&host, a, b)),
            "n = {n}"
        );
    }
    // Limits are checked before the driver sees the launch.
    // SAFETY: refused before launching.
    let r = unsafe { stream.launch(&f, [1, 1, 1], [4096, 1, 1], 0, &[]) };
    assert!(
        matches!(r, Err(Error::Launch { ref kernel, .. }) if kernel == "axpb"),
        "{r:?}"
    );
    assert!(module.function("no_such_entry").is_err());
}

#[test]
fn a_kernel_variant_launches_through_the_generated_code_path() {
    let Some(gpu) = gpu_or_skip("a_kernel_variant_launches_through_the_generated_code_path") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let stream = gpu.default_stream();
    let n = 1000usize;
    let host = random_f32(n, 400);
    let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
    for round in 0..2 {
        y.fill_u32(POISON).unwrap();
        let args = [
            __private::arg_read(&stream, &x).unwrap(),
            __private::arg_write(&stream, &mut y).unwrap(),
            KernelArg::from(0.5f32),
            KernelArg::from(round as f32),
            KernelArg::from(n as u32),
        ];
        __private::launch(&stream, &AXPB, &LaunchConfig::grid_1d(4), &args).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            bits(&y.to_host().unwrap()),
            bits(&axpb_expected(&host, 0.5, round as f32)),
            "round {round}"
        );
    }
    assert!(gpu.loaded_module_count() >= 1);
    let too_big =
        LaunchConfig::grid_1d(4).with_shared_mem(gpu.props().max_shared_per_block_optin + 1);
    let args = [
        KernelArg::ptr(0),
        KernelArg::ptr(0),
        0f32.into(),
        0f32.into(),
        0u32.into(),
    ];
    assert!(matches!(
        __private::launch(&stream, &AXPB, &too_big, &args),
        Err(Error::Launch { .. })
    ));
}

#[test]
fn a_ptx_syntax_error_is_a_module_load_error_with_the_jit_log() {
    let Some(gpu) = gpu_or_skip("a_ptx_syntax_error_is_a_module_load_error_with_the_jit_log")
    else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let bad = ".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry broken()\n{\n\t.reg .b32 %r<2>;\n\tfrobnicate.u32 %r1, 7;\n\tret;\n}\n";
    match gpu.load_ptx("broken", bad) {
        Err(Error::ModuleLoad {
            kernel,
            source,
            jit_log,
            ptx_path,
        }) => {
            assert_eq!(kernel, "broken");
            assert_eq!(source.call, "cuModuleLoadDataEx");
            assert!(!jit_log.trim().is_empty(), "the JIT log is kept");
            assert!(
                jit_log.contains("line 8") || jit_log.contains(":8"),
                "the log names line 8: {jit_log}"
            );
            let path = ptx_path.expect("the PTX is written for inspection");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
            let _ = std::fs::remove_file(path);
        }
        Err(e) => panic!("expected ModuleLoad, got {e}"),
        Ok(_) => panic!("a PTX syntax error loaded"),
    }
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
    let Some(gpu) = gpu_or_skip("an_allocation_larger_than_the_device_is_out_of_memory") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let (_, total) = gpu.mem_info().unwrap();
    let bytes = total + total / 2;
    match DeviceBuffer::<u8>::alloc(&gpu, bytes) {
        Err(Error::OutOfMemory { bytes: b }) => assert_eq!(b, bytes),
        Err(e) => panic!("expected OutOfMemory, got {e}"),
        Ok(_) => panic!("allocated {bytes} bytes on a device of {total}"),
    }
    let host = random_f32(4097, 500);
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
    let Some(gpu) = gpu_or_skip("events_time_a_kernel") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let module = gpu.load_ptx("driver_gpu_kernels", KERNELS).unwrap();
    let spin = module.function("spin").unwrap();
    let (threads, iters) = if is_emulated(&gpu) {
        (64u32, 200u32)
    } else {
        (128 * 1024, 20_000)
    };
    let mut out = DeviceBuffer::<f32>::alloc(&gpu, threads as usize).unwrap();
    out.fill_u32(POISON).unwrap();
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
    for i in [0usize, 1, threads as usize - 1] {
        let mut v = i as f32;
        for _ in 0..iters {
            v = v.mul_add(f32::from_bits(0x3F7F_BE77), f32::from_bits(0x3A83_126F));
        }
        assert_eq!(got[i].to_bits(), v.to_bits(), "thread {i}");
    }
}

#[test]
fn one_gpu_is_used_from_eight_threads_at_once() {
    let Some(gpu) = gpu_or_skip("one_gpu_is_used_from_eight_threads_at_once") else {
        return;
    };
    let _shared = DEVICE.read().unwrap_or_else(|p| p.into_inner());
    let gpu = Arc::new(gpu);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let gpu = Arc::clone(&gpu);
            s.spawn(move || {
                let stream = gpu.new_stream().unwrap();
                for round in 0..3u64 {
                    let n = 1000 + 37 * t as usize + round as usize;
                    let host = random_f32(n, 600 + 10 * t + round);
                    let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
                    let mut y = DeviceBuffer::<f32>::alloc(&gpu, n).unwrap();
                    y.fill_u32(POISON).unwrap();
                    let a = t as f32 + 0.5;
                    let args = [
                        __private::arg_read(&stream, &x).unwrap(),
                        __private::arg_write(&stream, &mut y).unwrap(),
                        a.into(),
                        1.0f32.into(),
                        (n as u32).into(),
                    ];
                    let grid = LaunchConfig::grid_1d((n as u32).div_ceil(256));
                    __private::launch(&stream, &AXPB, &grid, &args).unwrap();
                    stream.synchronize().unwrap();
                    assert_eq!(
                        bits(&y.to_host().unwrap()),
                        bits(&axpb_expected(&host, a, 1.0)),
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
    drop(gpu.load_ptx("driver_gpu_kernels", KERNELS).unwrap());
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

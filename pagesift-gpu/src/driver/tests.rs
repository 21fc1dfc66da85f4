//! Unit tests of the safe layer over a fake [`Backend`]: a device whose memory is host memory,
//! with counters for every call and switches for failures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::*;
use crate::error::DriverError;
use crate::kernel::{KernelVariant, LaunchConfig};

#[path = "tests_order.rs"]
mod order;

#[derive(Default)]
struct Counters {
    retain: AtomicUsize,
    release: AtomicUsize,
    alloc: AtomicUsize,
    free: AtomicUsize,
    copies: AtomicUsize,
    module_load: AtomicUsize,
    module_unload: AtomicUsize,
    launch: AtomicUsize,
    set_dyn_shared: AtomicUsize,
    /// The most dynamic shared memory a function was opted in to.
    dyn_shared_optin: AtomicUsize,
    event_sync: AtomicUsize,
}

/// Grid, block, dynamic shared memory and argument bytes of a launch.
type LastLaunch = ([u32; 3], [u32; 3], u32, Vec<Vec<u8>>);

struct Fake {
    n: Counters,
    mem: Mutex<HashMap<u64, Vec<u8>>>,
    next: AtomicUsize,
    fail_free: AtomicBool,
    /// `memcpy_dtoh` returns success without writing (a misbehaving driver).
    dtoh_writes_nothing: AtomicBool,
    jit_fails: AtomicBool,
    driver_version: i32,
    cc: (u32, u32),
    last_launch: Mutex<Option<LastLaunch>>,
    /// The stream-ordering calls, in order.
    log: Mutex<Vec<Op>>,
}

/// A stream-ordering call the fake saw (stream handles as numbers, 0 = default stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `stream_synchronize(stream)`.
    Sync(usize),
    /// `event_record(event, stream)`.
    Record(usize, usize),
    /// `stream_wait_event(stream, event)`.
    Wait(usize, usize),
    /// `mem_free_async(ptr, stream)`.
    FreeAsync(u64, usize),
    /// `synchronize()` of the whole device.
    DeviceSync,
    /// A launch on a stream.
    Launch(usize),
}

fn fake() -> Arc<Fake> {
    fake_with(12080, (8, 0))
}

fn fake_with(driver_version: i32, cc: (u32, u32)) -> Arc<Fake> {
    Arc::new(Fake {
        n: Counters::default(),
        mem: Mutex::new(HashMap::new()),
        next: AtomicUsize::new(0x1000),
        fail_free: AtomicBool::new(false),
        dtoh_writes_nothing: AtomicBool::new(false),
        jit_fails: AtomicBool::new(false),
        driver_version,
        cc,
        last_launch: Mutex::new(None),
        log: Mutex::new(Vec::new()),
    })
}

const TOTAL: usize = 1 << 20;

fn driver_err(call: &'static str, code: i32) -> DriverError {
    DriverError {
        call,
        code,
        name: format!("CUDA_ERROR_{code}"),
        message: "fake".into(),
    }
}

/// [`launch::launch`] on the fake backend, which runs no kernel code.
fn fake_launch(
    stream: &Stream,
    variant: &'static KernelVariant,
    cfg: &LaunchConfig,
    args: &[KernelArg],
    accesses: &[launch::Access<'_>],
) -> Result<()> {
    // SAFETY: the fake backend records launches and executes nothing, so no argument is ever
    // used as an address.
    unsafe { launch::launch(stream, variant, cfg, args, accesses) }
}

impl Fake {
    fn push(&self, op: Op) {
        self.log.lock().unwrap().push(op);
    }

    /// The ordering calls since the last call of `take_log`.
    fn take_log(&self) -> Vec<Op> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// The allocation containing `p`, and the offset of `p` in it.
    fn find(&self, p: u64, bytes: usize) -> (u64, usize) {
        let mem = self.mem.lock().unwrap();
        for (&base, v) in mem.iter() {
            if p >= base && p + bytes as u64 <= base + v.len() as u64 {
                return (base, (p - base) as usize);
            }
        }
        panic!("fake device: {bytes} bytes at {p:#x} are not allocated");
    }
}

impl Backend for Fake {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulated
    }
    fn library(&self) -> &str {
        "fake"
    }
    fn driver_version(&self) -> Result<i32> {
        Ok(self.driver_version)
    }
    fn driver_version_string(&self) -> Option<String> {
        None
    }
    fn device_count(&self) -> Result<usize> {
        Ok(1)
    }
    fn device_props(&self, _ordinal: usize) -> Result<DeviceProps> {
        Ok(DeviceProps {
            name: "Fake GPU".into(),
            compute_capability: self.cc,
            sm_count: 4,
            max_threads_per_sm: 2048,
            total_memory: TOTAL,
            l2_cache_bytes: 1 << 16,
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 96 * 1024,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [65535, 65535, 65535],
        })
    }
    fn primary_context_retain(&self, _ordinal: usize) -> Result<RawHandle> {
        self.n.retain.fetch_add(1, Ordering::SeqCst);
        Ok(RawHandle(7))
    }
    fn primary_context_release(&self, _ordinal: usize) -> Result<()> {
        self.n.release.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn set_current(&self, ctx: RawHandle) -> Result<()> {
        assert_eq!(ctx, RawHandle(7));
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        self.push(Op::DeviceSync);
        Ok(())
    }
    fn mem_info(&self) -> Result<(usize, usize)> {
        let used: usize = self.mem.lock().unwrap().values().map(Vec::len).sum();
        Ok((TOTAL - used, TOTAL))
    }
    fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr> {
        assert!(bytes > 0, "zero-byte allocations never reach the backend");
        let (_, total) = self.mem_info()?;
        let (free, _) = self.mem_info()?;
        if bytes > free || bytes > total {
            return Err(Error::OutOfMemory { bytes });
        }
        self.n.alloc.fetch_add(1, Ordering::SeqCst);
        let p = self
            .next
            .fetch_add(bytes.div_ceil(256) * 256 + 256, Ordering::SeqCst) as u64;
        self.mem.lock().unwrap().insert(p, vec![0xAB; bytes]);
        Ok(p)
    }
    fn mem_free(&self, ptr: DevicePtr) -> Result<()> {
        self.n.free.fetch_add(1, Ordering::SeqCst);
        if self.fail_free.load(Ordering::SeqCst) {
            return Err(driver_err("cuMemFree_v2", 700).into());
        }
        self.mem.lock().unwrap().remove(&ptr).expect("double free");
        Ok(())
    }
    fn mem_alloc_async(&self, bytes: usize, _s: RawHandle) -> Result<DevicePtr> {
        self.mem_alloc(bytes)
    }
    fn mem_free_async(&self, ptr: DevicePtr, s: RawHandle) -> Result<()> {
        self.push(Op::FreeAsync(ptr, s.0));
        self.mem_free(ptr)
    }
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        let layout = std::alloc::Layout::from_size_align(bytes, 64).unwrap();
        // SAFETY: bytes > 0 (contract of the trait).
        Ok(unsafe { std::alloc::alloc(layout) })
    }
    unsafe fn host_free(&self, _ptr: *mut u8) -> Result<()> {
        // The size is unknown here; the tests leak these few bytes.
        Ok(())
    }
    fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.n.copies.fetch_add(1, Ordering::SeqCst);
        let (base, off) = self.find(dst, src.len());
        self.mem.lock().unwrap().get_mut(&base).unwrap()[off..off + src.len()].copy_from_slice(src);
        Ok(())
    }
    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.n.copies.fetch_add(1, Ordering::SeqCst);
        if self.dtoh_writes_nothing.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (base, off) = self.find(src, dst.len());
        dst.copy_from_slice(&self.mem.lock().unwrap()[&base][off..off + dst.len()]);
        Ok(())
    }
    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        _s: RawHandle,
    ) -> Result<()> {
        let mut tmp = vec![0u8; bytes];
        self.memcpy_dtoh(&mut tmp, src)?;
        self.memcpy_htod(dst, &tmp)
    }
    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        _s: RawHandle,
    ) -> Result<()> {
        // SAFETY: by the caller.
        self.memcpy_htod(dst, unsafe { std::slice::from_raw_parts(src, bytes) })
    }
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        _s: RawHandle,
    ) -> Result<()> {
        // SAFETY: by the caller.
        self.memcpy_dtoh(unsafe { std::slice::from_raw_parts_mut(dst, bytes) }, src)
    }
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, _s: RawHandle) -> Result<()> {
        self.memcpy_htod(dst, &vec![value; bytes])
    }
    fn memset_d32(&self, dst: DevicePtr, value: u32, count: usize, _s: RawHandle) -> Result<()> {
        let bytes: Vec<u8> = (0..count).flat_map(|_| value.to_le_bytes()).collect();
        self.memcpy_htod(dst, &bytes)
    }
    fn stream_create(&self) -> Result<RawHandle> {
        Ok(RawHandle(0x5000 + self.next.fetch_add(1, Ordering::SeqCst)))
    }
    fn stream_destroy(&self, _stream: RawHandle) -> Result<()> {
        Ok(())
    }
    fn stream_synchronize(&self, stream: RawHandle) -> Result<()> {
        self.push(Op::Sync(stream.0));
        Ok(())
    }
    fn stream_query(&self, _stream: RawHandle) -> Result<bool> {
        Ok(true)
    }
    fn stream_wait_event(&self, stream: RawHandle, event: RawHandle) -> Result<()> {
        self.push(Op::Wait(stream.0, event.0));
        Ok(())
    }
    fn event_create(&self, _timing: bool) -> Result<RawHandle> {
        Ok(RawHandle(0x9000 + self.next.fetch_add(1, Ordering::SeqCst)))
    }
    fn event_destroy(&self, _event: RawHandle) -> Result<()> {
        Ok(())
    }
    fn event_record(&self, event: RawHandle, stream: RawHandle) -> Result<()> {
        self.push(Op::Record(event.0, stream.0));
        Ok(())
    }
    fn event_synchronize(&self, _event: RawHandle) -> Result<()> {
        self.n.event_sync.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn event_query(&self, _event: RawHandle) -> Result<bool> {
        Ok(true)
    }
    fn event_elapsed_ms(&self, _start: RawHandle, _end: RawHandle) -> Result<f32> {
        Ok(0.5)
    }
    fn module_load(&self, ptx: &str) -> std::result::Result<RawHandle, ModuleLoadError> {
        // Slow enough that concurrent first users overlap.
        std::thread::sleep(std::time::Duration::from_millis(20));
        if self.jit_fails.load(Ordering::SeqCst) || ptx.contains("syntax error") {
            return Err(ModuleLoadError {
                error: driver_err("cuModuleLoadDataEx", 218),
                log: "ptxas application ptx input, line 3; error : syntax error".into(),
            });
        }
        self.n.module_load.fetch_add(1, Ordering::SeqCst);
        Ok(RawHandle(0x7000 + self.next.fetch_add(1, Ordering::SeqCst)))
    }
    fn module_unload(&self, _module: RawHandle) -> Result<()> {
        self.n.module_unload.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn module_function(&self, module: RawHandle, _name: &str) -> Result<RawHandle> {
        Ok(RawHandle(module.0 + 1))
    }
    fn function_attributes(&self, _function: RawHandle) -> Result<FunctionAttributes> {
        Ok(FunctionAttributes {
            num_regs: 16,
            static_shared_bytes: 0,
            local_bytes: 0,
            max_threads_per_block: 1024,
        })
    }
    fn occupancy_blocks_per_sm(&self, _f: RawHandle, threads: u32, shared: u32) -> Result<u32> {
        // As the driver does: a block past the default shared memory fits nowhere until the
        // function is opted in to it.
        let limit = (48 * 1024).max(self.n.dyn_shared_optin.load(Ordering::SeqCst));
        if shared as usize > limit {
            return Ok(0);
        }
        Ok(2048 / threads.max(1))
    }
    fn function_set_max_dynamic_shared(&self, _function: RawHandle, bytes: u32) -> Result<()> {
        self.n.set_dyn_shared.fetch_add(1, Ordering::SeqCst);
        self.n
            .dyn_shared_optin
            .fetch_max(bytes as usize, Ordering::SeqCst);
        Ok(())
    }
    fn tensor_map_encode_tiled(
        &self,
        spec: &crate::driver::TensorMapSpec,
    ) -> Result<[u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]> {
        let mut b = [0u8; crate::driver::tensor_map::TENSOR_MAP_BYTES];
        b[..8].copy_from_slice(&spec.address.to_le_bytes());
        Ok(b)
    }
    fn launch(&self, r: &LaunchRequest<'_>) -> Result<()> {
        self.n.launch.fetch_add(1, Ordering::SeqCst);
        self.push(Op::Launch(r.stream.0));
        let args = r.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        *self.last_launch.lock().unwrap() = Some((r.grid, r.block, r.shared_mem_bytes, args));
        Ok(())
    }
}

fn gpu_of(f: &Arc<Fake>) -> Gpu {
    Gpu::from_backend(Arc::clone(f) as Arc<dyn Backend>, 0).unwrap()
}

static PARAMS: &[(&str, &str)] = &[("x", "&[f32]"), ("y", "&mut [f32]"), ("n", "u32")];

const fn variant(
    ptx: &'static str,
    target: &'static str,
    ptx_version: (u32, u32),
) -> KernelVariant {
    KernelVariant {
        kernel: "scale",
        entry: "scale_v",
        consts: &[("ACT", "Relu")],
        target,
        ptx_version,
        block: [128, 1, 1],
        static_shared_bytes: 1024,
        dynamic_shared: true,
        params: PARAMS,
        ptx_params: PARAMS.len() as u32,
        shared: &[],
        ptx,
    }
}

static SCALE: KernelVariant = variant(".version 7.0\n.target sm_70\n// scale", "sm_70", (7, 0));

#[test]
fn opening_a_device_twice_shares_one_context() {
    let f = fake();
    let a = gpu_of(&f);
    let b = gpu_of(&f);
    assert!(a.same_device(&b));
    assert_eq!(f.n.retain.load(Ordering::SeqCst), 1);
    assert_eq!(a.name(), "Fake GPU");
    assert_eq!(a.compute_capability(), (8, 0));
    assert_eq!(a.driver_version(), 12080);
    let buf = DeviceBuffer::<f32>::alloc(&a, 3).unwrap();
    drop((a, b));
    assert_eq!(
        f.n.release.load(Ordering::SeqCst),
        0,
        "the buffer keeps the context"
    );
    drop(buf);
    assert_eq!(f.n.release.load(Ordering::SeqCst), 1);
    assert!(matches!(
        Gpu::from_backend(f.clone() as Arc<dyn Backend>, 1),
        Err(Error::NoSuchDevice {
            ordinal: 1,
            count: 1
        })
    ));
}

#[test]
fn buffers_round_trip_and_views_address_their_range() {
    let f = fake();
    let gpu = gpu_of(&f);
    let host: Vec<f32> = (0..37).map(|i| i as f32 * 0.5 - 3.0).collect();
    let mut buf = DeviceBuffer::from_host(&gpu, &host).unwrap();
    assert_eq!(buf.to_host().unwrap(), host);
    let copy = buf.try_clone().unwrap();
    assert_ne!(copy.device_ptr(), buf.device_ptr());
    assert_eq!(copy.to_host().unwrap(), host);

    let view = buf.slice(5..9).unwrap();
    assert_eq!(view.device_ptr(), buf.device_ptr() + 20);
    assert_eq!(view.to_host().unwrap(), &host[5..9]);
    assert_eq!(view.slice(1..=2).unwrap().to_host().unwrap(), &host[6..8]);

    buf.slice_mut(30..)
        .unwrap()
        .copy_from_host(&[9.0; 7])
        .unwrap();
    let mut expect = host.clone();
    expect[30..].fill(9.0);
    assert_eq!(buf.to_host().unwrap(), expect);

    buf.fill_u32(0x7FC0_0001).unwrap();
    assert!(buf
        .to_host()
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == 0x7FC0_0001));
    let mut other = DeviceBuffer::<f32>::zeroed(&gpu, 37).unwrap();
    assert!(other.to_host().unwrap().iter().all(|&v| v == 0.0));
    other.copy_from_device(&buf).unwrap();
    assert!(other
        .to_host()
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == 0x7FC0_0001));
}

#[test]
fn lengths_and_ranges_are_checked() {
    let f = fake();
    let gpu = gpu_of(&f);
    let mut buf = DeviceBuffer::<u16>::alloc(&gpu, 5).unwrap();
    assert!(matches!(
        buf.copy_from_host(&[1, 2, 3]),
        Err(Error::LengthMismatch(m)) if (m.expected, m.actual) == (5, 3)
    ));
    assert!(matches!(
        buf.copy_to_host(&mut [0; 6]),
        Err(Error::LengthMismatch(m)) if (m.expected, m.actual) == (5, 6)
    ));
    assert!(matches!(buf.slice(2..6), Err(Error::InvalidArgument(_))));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = buf.slice(4..2);
    assert!(matches!(reversed, Err(Error::InvalidArgument(_))));
    assert!(
        matches!(
            buf.fill_u32(0),
            Err(Error::InvalidArgument(a)) if a.op == "fill_u32"
        ),
        "10 bytes are not whole words"
    );
    let small = DeviceBuffer::<u16>::alloc(&gpu, 4).unwrap();
    assert!(matches!(
        buf.copy_from_device(&small),
        Err(Error::LengthMismatch(_))
    ));
    let huge = DeviceBuffer::<f64>::alloc(&gpu, usize::MAX / 4);
    assert!(matches!(huge, Err(Error::InvalidArgument(_))));
}

#[test]
fn empty_buffers_never_reach_the_backend() {
    let f = fake();
    let gpu = gpu_of(&f);
    let mut b = DeviceBuffer::<f32>::from_host(&gpu, &[]).unwrap();
    assert!(b.is_empty());
    assert_eq!(b.to_host().unwrap(), Vec::<f32>::new());
    b.memset_bytes(1).unwrap();
    b.fill_u32(1).unwrap();
    let s = b.slice(..).unwrap();
    assert!(s.is_empty());
    drop(b);
    assert_eq!(f.n.alloc.load(Ordering::SeqCst), 0);
    assert_eq!(f.n.free.load(Ordering::SeqCst), 0);
    assert_eq!(f.n.copies.load(Ordering::SeqCst), 0);
}

#[test]
fn out_of_memory_is_typed_and_the_device_stays_usable() {
    let f = fake();
    let gpu = gpu_of(&f);
    match DeviceBuffer::<u8>::alloc(&gpu, TOTAL + 1) {
        Err(Error::OutOfMemory { bytes }) => assert_eq!(bytes, TOTAL + 1),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert_eq!(
        DeviceBuffer::from_host(&gpu, &[1u8, 2, 3])
            .unwrap()
            .to_host()
            .unwrap(),
        vec![1, 2, 3]
    );
}

#[test]
fn launch_limits_are_checked_before_the_driver() {
    let props = fake().device_props(0).unwrap();
    let ok = launch::check_limits("k", &props, [10, 1, 1], [256, 1, 1], 0, 0);
    assert!(ok.is_ok());
    type Case = ([u32; 3], [u32; 3], u32, u32, &'static str);
    let cases: &[Case] = &[
        ([1, 1, 1], [2048, 1, 1], 0, 0, "dimension x"),
        ([1, 1, 1], [32, 32, 2], 0, 0, "2048 threads"),
        ([1, 1, 1], [1, 1, 65], 0, 0, "dimension z"),
        ([1, 1, 1], [0, 1, 1], 0, 0, "dimension x is 0"),
        ([65536, 1, 1], [32, 1, 1], 0, 0, "grid"),
        ([1, 1, 70000], [32, 1, 1], 0, 0, "grid"),
        ([1, 1, 1], [32, 1, 1], 50 * 1024, 50 * 1024, "shared memory"),
    ];
    for &(grid, block, st, dy, what) in cases {
        match launch::check_limits("my_kernel", &props, grid, block, st, dy) {
            Err(Error::Launch(e)) => {
                assert_eq!(e.kernel, "my_kernel");
                assert!(
                    e.message.contains(what),
                    "{:?} should mention {what:?}",
                    e.message
                );
            }
            other => {
                panic!("grid {grid:?} block {block:?}: expected a launch error, got {other:?}")
            }
        }
    }
}

#[test]
fn variants_load_once_and_launch_with_their_block() {
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.new_stream().unwrap();
    let x = DeviceBuffer::from_host(&gpu, &[1.0f32; 300]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, 300).unwrap();
    let cfg = LaunchConfig::grid_1d(3);
    for _ in 0..3 {
        let args = [
            launch::arg_read(&stream, &x).unwrap().ptr,
            launch::arg_write(&stream, &mut y).unwrap().ptr,
            300u32.into(),
        ];
        fake_launch(&stream, &SCALE, &cfg, &args, &[]).unwrap();
    }
    assert_eq!(f.n.module_load.load(Ordering::SeqCst), 1);
    assert_eq!(f.n.launch.load(Ordering::SeqCst), 3);
    assert_eq!(
        gpu.preload(&SCALE).unwrap().num_regs,
        16,
        "preloading a loaded variant reuses it"
    );
    assert_eq!(f.n.module_load.load(Ordering::SeqCst), 1);
    assert_eq!(gpu.loaded_module_count(), 1);
    let (grid, block, shared, args) = f.last_launch.lock().unwrap().clone().unwrap();
    assert_eq!((grid, block, shared), ([3, 1, 1], [128, 1, 1], 0));
    assert_eq!(args[0], x.device_ptr().to_le_bytes());
    assert_eq!(args[1], y.device_ptr().to_le_bytes());
    assert_eq!(args[2], 300u32.to_le_bytes());

    // A zero-sized grid launches nothing; a wrong argument count is refused.
    fake_launch(
        &stream,
        &SCALE,
        &LaunchConfig::grid([0, 1, 1]),
        &[0u64.into(), 0u64.into(), 0u32.into()],
        &[],
    )
    .unwrap();
    assert_eq!(f.n.launch.load(Ordering::SeqCst), 3);
    match fake_launch(&stream, &SCALE, &cfg, &[1u32.into()], &[]) {
        Err(Error::Launch(e)) => {
            assert_eq!(e.kernel, "scale[ACT=Relu]");
            assert!(
                e.message.contains("1 arguments for 3 PTX parameters"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a launch error, got {other:?}"),
    }
    drop((x, y, stream));
    drop(gpu);
    assert_eq!(
        f.n.module_unload.load(Ordering::SeqCst),
        1,
        "modules unload with the device"
    );
}

#[test]
fn concurrent_first_launches_load_the_module_once() {
    static V: KernelVariant = variant(
        ".version 7.0\n.target sm_70\n// concurrent",
        "sm_70",
        (7, 0),
    );
    let f = fake();
    let gpu = gpu_of(&f);
    std::thread::scope(|s| {
        for _ in 0..8 {
            let gpu = gpu.clone();
            s.spawn(move || {
                let stream = gpu.new_stream().unwrap();
                fake_launch(
                    &stream,
                    &V,
                    &LaunchConfig::grid_1d(1),
                    &[0u64.into(), 0u64.into(), 1u32.into()],
                    &[],
                )
                .unwrap();
            });
        }
    });
    assert_eq!(f.n.module_load.load(Ordering::SeqCst), 1);
    assert_eq!(f.n.launch.load(Ordering::SeqCst), 8);
}

#[test]
fn dynamic_shared_memory_opts_in_once_when_above_the_default() {
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.default_stream();
    let args = [0u64.into(), 0u64.into(), 1u32.into()];
    fake_launch(
        &stream,
        &SCALE,
        &LaunchConfig::grid_1d(1).with_shared_mem(8 * 1024),
        &args,
        &[],
    )
    .unwrap();
    assert_eq!(
        f.n.set_dyn_shared.load(Ordering::SeqCst),
        0,
        "47 KiB fit the default"
    );
    let big = LaunchConfig::grid_1d(1).with_shared_mem(80 * 1024);
    fake_launch(&stream, &SCALE, &big, &args, &[]).unwrap();
    fake_launch(&stream, &SCALE, &big, &args, &[]).unwrap();
    assert_eq!(f.n.set_dyn_shared.load(Ordering::SeqCst), 1);
    let too_big = LaunchConfig::grid_1d(1).with_shared_mem(96 * 1024);
    assert!(matches!(
        fake_launch(&stream, &SCALE, &too_big, &args, &[]),
        Err(Error::Launch(_))
    ));
}

#[test]
fn occupancy_opts_in_to_dynamic_shared_memory_past_the_default() {
    let f = fake();
    let gpu = gpu_of(&f);
    let threads = SCALE.block.iter().product::<u32>();
    assert_eq!(gpu.blocks_per_sm(&SCALE, 8 * 1024).unwrap(), 2048 / threads);
    assert_eq!(f.n.set_dyn_shared.load(Ordering::SeqCst), 0);
    // 80 KiB needs the opt-in, which the occupancy query sets first (as a launch would).
    assert_eq!(
        gpu.blocks_per_sm(&SCALE, 80 * 1024).unwrap(),
        2048 / threads
    );
    assert_eq!(f.n.set_dyn_shared.load(Ordering::SeqCst), 1);
}

#[test]
fn variants_beyond_the_driver_or_device_are_unsupported() {
    static NEW_PTX: KernelVariant = variant(".version 9.0\n.target sm_70\n// new", "sm_70", (9, 0));
    static HOPPER: KernelVariant =
        variant(".version 8.0\n.target sm_90a\n// hopper", "sm_90a", (8, 0));
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.default_stream();
    let args = [0u64.into(), 0u64.into(), 1u32.into()];
    match fake_launch(&stream, &NEW_PTX, &LaunchConfig::grid_1d(1), &args, &[]) {
        Err(Error::Unsupported(e)) => {
            let error::Unsupported { kernel, reason } = *e;
            assert_eq!(kernel, "scale[ACT=Relu]");
            assert!(
                reason.contains("CUDA 13.0") && reason.contains("CUDA 12.8"),
                "{reason}"
            );
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    match fake_launch(&stream, &HOPPER, &LaunchConfig::grid_1d(1), &args, &[]) {
        Err(Error::Unsupported(e)) => {
            assert!(
                e.reason.contains("9.0") && e.reason.contains("8.0"),
                "{}",
                e.reason
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert_eq!(f.n.module_load.load(Ordering::SeqCst), 0);
    // Arch-specific targets need exactly their architecture.
    assert!(module::check_supported(&HOPPER, (9, 0), 12080).is_ok());
    assert!(module::check_supported(&HOPPER, (10, 0), 12080).is_err());
    assert!(module::check_supported(&SCALE, (10, 0), 12080).is_ok());
}

#[test]
fn a_jit_failure_carries_the_log_and_writes_the_ptx() {
    static BAD: KernelVariant = KernelVariant {
        entry: "bad_entry_for_unit_test",
        ..variant(
            ".version 7.0\n.target sm_70\nsyntax error here",
            "sm_70",
            (7, 0),
        )
    };
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.default_stream();
    match fake_launch(
        &stream,
        &BAD,
        &LaunchConfig::grid_1d(1),
        &[0u64.into(), 0u64.into(), 1u32.into()],
        &[],
    ) {
        Err(Error::ModuleLoad(e)) => {
            let error::ModuleLoad {
                kernel,
                source,
                jit_log,
                ptx_path,
            } = *e;
            assert_eq!(kernel, "bad_entry_for_unit_test");
            assert_eq!(source.call, "cuModuleLoadDataEx");
            assert!(jit_log.contains("line 3"), "{jit_log}");
            let path = ptx_path.expect("PTX written");
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("bad_entry_for_unit_test-"), "{name}");
            let dir = path.parent().unwrap();
            assert!(dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("pagesift-gpu-{}-", std::process::id())));
            assert_eq!(std::fs::read_to_string(&path).unwrap(), BAD.ptx);
            // A second failure of the same kernel gets a new file; the first is kept.
            let again = fake_launch(
                &stream,
                &BAD,
                &LaunchConfig::grid_1d(1),
                &[0u64.into(), 0u64.into(), 1u32.into()],
                &[],
            );
            let second = match again {
                Err(Error::ModuleLoad(e)) => e.ptx_path.expect("PTX written again"),
                other => panic!("expected ModuleLoad with a path, got {other:?}"),
            };
            assert_ne!(second, path);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), BAD.ptx);
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_file(second);
        }
        other => panic!("expected ModuleLoad, got {other:?}"),
    }
    let raw = gpu.load_ptx("raw/name with space", "syntax error");
    match raw {
        Err(Error::ModuleLoad(e)) => {
            assert!(!e.jit_log.is_empty());
            if let Some(p) = e.ptx_path {
                assert!(p.to_string_lossy().contains("raw_name_with_space"));
                let _ = std::fs::remove_file(p);
            }
        }
        other => panic!("expected ModuleLoad, got {other:?}"),
    }
}

#[test]
fn buffers_of_another_device_are_refused() {
    let (f1, f2) = (fake(), fake());
    let (g1, g2) = (gpu_of(&f1), gpu_of(&f2));
    let stream = g1.default_stream();
    let mut other = DeviceBuffer::<f32>::alloc(&g2, 4).unwrap();
    assert!(matches!(
        launch::arg_read(&stream, &other),
        Err(Error::DeviceMismatch(_))
    ));
    assert!(matches!(
        launch::arg_write(&stream, &mut other),
        Err(Error::DeviceMismatch(_))
    ));
    let mine = DeviceBuffer::<f32>::alloc(&g1, 4).unwrap();
    assert!(matches!(
        other.copy_from_device(&mine),
        Err(Error::DeviceMismatch(_))
    ));
    assert!(launch::arg_read(&stream, &mine.slice(1..).unwrap()).is_ok());
}

#[test]
fn pinned_buffers_wait_for_their_copies() {
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.new_stream().unwrap();
    let src = PinnedBuffer::from_slice(&gpu, &[1i32, -2, 3, 4097]).unwrap();
    let mut dev = DeviceBuffer::<i32>::alloc(&gpu, 4).unwrap();
    stream.copy_htod_async(&mut dev, &src).unwrap();
    let mut back = PinnedBuffer::<i32>::new(&gpu, 4).unwrap();
    stream.copy_dtoh_async(&mut back, &dev).unwrap();
    let before = f.n.event_sync.load(Ordering::SeqCst);
    assert_eq!(back.as_slice().unwrap(), &[1, -2, 3, 4097]);
    assert_eq!(
        f.n.event_sync.load(Ordering::SeqCst),
        before + 1,
        "reading waited for the copy"
    );
    assert_eq!(back.as_slice().unwrap(), &[1, -2, 3, 4097]);
    assert_eq!(
        f.n.event_sync.load(Ordering::SeqCst),
        before + 1,
        "and only once"
    );
    drop(src);
    assert_eq!(
        f.n.event_sync.load(Ordering::SeqCst),
        before + 2,
        "dropping waited for the copy"
    );
    assert!(matches!(
        stream.copy_dtoh_async(&mut back, &dev.slice(..3).unwrap()),
        Err(Error::LengthMismatch(_))
    ));
}

#[test]
fn events_time_through_the_backend() {
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.default_stream();
    let (a, b) = (Event::new(&gpu).unwrap(), Event::new(&gpu).unwrap());
    a.record(&stream).unwrap();
    b.record(&stream).unwrap();
    b.synchronize().unwrap();
    assert_eq!(b.elapsed_ms(&a).unwrap(), 0.5);
}

#[test]
fn timing_warms_up_then_takes_the_median_of_the_timed_runs() {
    let f = fake();
    let gpu = gpu_of(&f);
    let stream = gpu.default_stream();
    let mut calls = 0;
    let ms = crate::timing::median_ms(&stream, 2, 5, || {
        calls += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(
        (ms, calls),
        (0.5, 7),
        "the backend's 0.5 ms, 2 warm-ups + 5 runs"
    );
    let mut calls = 0;
    crate::timing::host_median(&stream, 1, 3, || {
        calls += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(calls, 4);
    for runs in [
        crate::timing::median_ms(&stream, 0, 0, || Ok(())).map(|_| ()),
        crate::timing::host_median(&stream, 0, 0, || Ok(())).map(|_| ()),
    ] {
        assert!(matches!(runs, Err(Error::InvalidArgument(_))), "{runs:?}");
    }
}

#[test]
fn long_lived_allocations_leave_the_reserve_free() {
    let f = fake();
    let gpu = gpu_of(&f);
    gpu.set_memory_reserve(TOTAL / 2);
    assert_eq!(
        gpu_of(&f).memory_reserve(),
        TOTAL / 2,
        "shared by every handle"
    );
    let weights = DeviceBuffer::<u8>::alloc_long_lived(&gpu, TOTAL / 4).unwrap();
    match DeviceBuffer::<u8>::from_host_long_lived(&gpu, &vec![1u8; TOTAL / 4 + 4096]) {
        Err(Error::OutOfMemory { bytes }) => assert_eq!(bytes, TOTAL / 4 + 4096),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // Short-lived allocations may use the reserve.
    let activations = DeviceBuffer::<u8>::alloc(&gpu, TOTAL / 2).unwrap();
    assert_eq!(activations.len() + weights.len(), 3 * TOTAL / 4);
    gpu.set_memory_reserve(0);
    assert!(DeviceBuffer::<u8>::alloc_long_lived(&gpu, TOTAL / 8).is_ok());
}

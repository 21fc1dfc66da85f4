//! The emulated device: executes PTX text on the CPU, behind an API of its own ([`Emulator`]).
//!
//! The runtime reaches it only through the driver's adapter (`driver::emulated`), which maps the
//! crate-private `Backend` trait onto this API; nothing here knows the trait. Handles are typed
//! ([`StreamId`], [`EventId`], [`ModuleId`], [`FunctionId`]), device addresses are plain
//! integers, and failures are the crate's [`Error`], worded as the NVIDIA driver reports them
//! (the CUDA call and error name), so the layers above see the same errors from either device.
//!
//! Modules are parsed from their PTX text (`ptx`) and pre-decoded into compact instructions with
//! register slots and resolved labels (`decode`); anything the emulator does not implement fails
//! the load with a log line naming the instruction and PTX line. A launch runs its grid's
//! blocks spread over host threads (`exec`), with the checks of a sanitizer:
//! out-of-bounds and misaligned global and shared accesses, barriers not reached by every thread,
//! reads of shared memory no thread wrote, shared-memory data races between two barriers, and
//! accesses to the shared destination of a `cp.async` that no `cp.async.wait_group` has
//! completed (copies run asynchronously, as on the hardware). `wgmma` (sm_90a, on a device of
//! compute capability 9.0) is asynchronous too, with the hardware's rules checked: no access to
//! the accumulators of a `wgmma.mma_async` before its `wgmma.wait_group`, a `wgmma.fence`
//! before it, its shared operands (and the registers it takes A from, when A is in
//! registers) unchanged until it completes, shared ones made visible to the async proxy by
//! `fence.proxy.async` (`exec/wgmma.rs`). `mbarrier` objects and the tensor memory
//! accelerator (`cp.async.bulk.tensor`, sm_90) follow the PTX ISA, their copies in flight until
//! a thread waits on their `mbarrier`, with the hardware's rules checked: no access to an
//! `mbarrier`'s bytes or to a copy's destination in flight, no arrival beyond a phase's count,
//! no block exit with a copy in flight, and a block whose threads all wait on phases that
//! cannot complete is a deadlock (`exec/tma.rs`); tensor maps are in the device's own format
//! (`tensor_map.rs`), read through a kernel parameter's generic address (`cvta.param`). A
//! failed check is [`Error::Emulator`], whose message names the check, the kernel, the block,
//! the thread and the PTX line.
//!
//! Streams run asynchronously (`queue`): launches, copies on a stream, memsets, event records,
//! stream waits and stream-ordered frees are queued and run at synchronization points, streams
//! interleaved by a seeded PRNG, so a missing synchronization shows as stale data or a race.
//! The failure of queued work is reported by the synchronization call that covers it.
//!
//! Environment: `PAGESIFT_EMU_MEMORY` (capacity, e.g. `512M`), `PAGESIFT_EMU_THREADS` (host
//! threads), `PAGESIFT_EMU_CC` (the compute capability reported, e.g. `9.0`; default 8.0),
//! `PAGESIFT_EMU_SEED` (the interleaving of streams), `PAGESIFT_EMU_MAX_LAUNCH_THREADS` (the
//! total-work cap of one launch).
//!
//! Device memory is host memory behind device-style addresses (from `0x7000_0000_0000`, 256-byte
//! aligned, a guard gap after every allocation, addresses never reused), allocated lazily and
//! fallibly. Events record a host timestamp when the stream reaches them.
//!
//! The unit tests are in `tests/` (the parser, the arithmetic, kernels, streams, hostile input);
//! the integration tests that run the runtime on the emulated device are the workspace's
//! `tests/tests/emulator_*.rs`.

mod calls;
mod config;
mod decode;
mod exec;
mod launch;
mod memory;
mod num;
mod ptx;
mod queue;
mod tensor;
mod tensor_map;
#[cfg(test)]
mod tests;

use crate::error::{DriverError, Error, Result};
#[cfg(test)]
use config::{parse_bytes, parse_cc};
pub use config::{EmulatorConfig, DEFAULT_SEED};
use decode::Kernel;
use memory::Memory;
use queue::{Queues, Work};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// A device address of the emulated device.
pub type DevicePtr = u64;

/// A stream of the emulated device; [`StreamId::DEFAULT`] is the default stream, which exists
/// from the start and cannot be destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamId(pub(crate) usize);

impl StreamId {
    /// The default stream.
    pub const DEFAULT: StreamId = StreamId(0);
}

/// An event of the emulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventId(pub(crate) usize);

/// A loaded module of the emulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleId(pub(crate) usize);

/// A kernel function of a loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FunctionId(pub(crate) usize);

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;
/// The most threads one block may have.
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// The most blocks resident on one multiprocessor (as on sm_80 and sm_90).
pub const MAX_BLOCKS_PER_SM: u32 = 32;
/// The largest block dimensions (x, y, z).
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// The largest grid dimensions (x, y, z).
pub const MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
/// The L2 cache size the device reports, in bytes (nothing is cached).
pub const L2_CACHE_BYTES: u32 = 4 << 20;

/// A kernel launch: what [`Emulator::launch`] checks and queues.
#[derive(Clone, Copy, Debug)]
pub struct KernelLaunch<'a> {
    /// The function, from [`Emulator::function`].
    pub function: FunctionId,
    /// Grid dimensions in blocks.
    pub grid: [u32; 3],
    /// Block dimensions in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes.
    pub shared_mem_bytes: u32,
    /// The stream.
    pub stream: StreamId,
    /// Each parameter's bytes (little-endian, as the kernel reads them), in declaration order.
    pub args: &'a [&'a [u8]],
}

/// The resource use of a kernel function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Registers per thread (the decoded register slots, at most 255).
    pub registers: u32,
    /// Static shared memory in bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread in bytes.
    pub local_bytes: u32,
    /// The most threads per block it can be launched with (from `.reqntid` / `.maxntid`).
    pub max_threads_per_block: u32,
}

/// A failed module load: the error, worded as the driver's JIT reports it, and the log.
#[derive(Clone, Debug)]
pub struct LoadError {
    /// The error (call `cuModuleLoadDataEx`).
    pub error: DriverError,
    /// The log: one line naming the PTX line and what is wrong.
    pub log: String,
}

/// Thread-instructions executed by every emulated device of the process.
static TOTAL_EXECUTED: AtomicU64 = AtomicU64::new(0);

/// Thread-instructions executed by every emulated device of the process so far (each thread
/// executing one PTX instruction counts once, predicated-off instructions included).
pub fn total_executed_instructions() -> u64 {
    TOTAL_EXECUTED.load(Ordering::Relaxed)
}

/// Checks that the emulator has a rule for an instruction form as the PTX emitter writes it
/// (the opcode with its modifiers, e.g. `ld.global.nc.v4.f32`); the error says why not.
pub fn check_instruction_form(form: &str) -> std::result::Result<(), String> {
    decode::check_form(form)
}

struct LoadedModule {
    kernels: Vec<Arc<Kernel>>,
    globals: Vec<DevicePtr>,
}

struct Function {
    kernel: Arc<Kernel>,
    max_dynamic_shared: u32,
}

#[derive(Default)]
struct Handles {
    next: usize,
    modules: HashMap<usize, LoadedModule>,
    functions: HashMap<usize, Function>,
    host: HashMap<usize, usize>,
}

impl Handles {
    fn fresh(&mut self) -> usize {
        self.next += 1;
        self.next
    }
}

/// The emulated device. One device (ordinal 0), one context.
///
/// Locks are taken in the order `running`, `handles`, `queues`, `memory`, each held briefly
/// except `running`, which a drain holds while queued work runs.
pub struct Emulator {
    config: EmulatorConfig,
    memory: RwLock<Memory>,
    handles: Mutex<Handles>,
    queues: Mutex<Queues>,
    running: Mutex<()>,
    executed: AtomicU64,
}

/// The host buffer of chunked copies and fills (a multiple of 8, so chunks stay word-aligned).
const CHUNK: usize = 1 << 20;

fn driver_error(call: &'static str, code: i32, name: &str, message: impl Into<String>) -> Error {
    Error::from(DriverError {
        call,
        code,
        name: name.to_string(),
        message: message.into(),
    })
}

fn invalid_value(call: &'static str, message: impl Into<String>) -> Error {
    driver_error(call, 1, "CUDA_ERROR_INVALID_VALUE", message)
}

fn invalid_handle(call: &'static str, id: usize) -> Error {
    driver_error(
        call,
        400,
        "CUDA_ERROR_INVALID_HANDLE",
        format!("no such handle {id:#x} on the emulated device"),
    )
}

fn poisoned(call: &'static str) -> Error {
    driver_error(
        call,
        999,
        "CUDA_ERROR_UNKNOWN",
        "emulator state poisoned by an earlier panic",
    )
}

fn mem_fault(call: &'static str, addr: DevicePtr, bytes: usize) -> Error {
    invalid_value(
        call,
        format!(
            "{bytes} bytes at {addr:#x} are not inside one live allocation of the emulated device"
        ),
    )
}

impl Emulator {
    /// An emulated device with the given configuration.
    pub fn new(config: EmulatorConfig) -> Emulator {
        let capacity = config.memory_capacity as u64;
        Emulator {
            config: config.clone(),
            memory: RwLock::new(Memory::new(capacity)),
            handles: Mutex::new(Handles::default()),
            queues: Mutex::new(Queues::new(config.seed)),
            running: Mutex::new(()),
            executed: AtomicU64::new(0),
        }
    }

    /// The emulated device configured from the environment (see [`EmulatorConfig::from_env`]).
    pub fn from_env() -> Result<Emulator> {
        Ok(Emulator::new(EmulatorConfig::from_env()?))
    }

    /// The configuration.
    pub fn config(&self) -> &EmulatorConfig {
        &self.config
    }

    /// Thread-instructions this device has executed so far.
    pub fn executed_instructions(&self) -> u64 {
        self.executed.load(Ordering::Relaxed)
    }

    fn handles(&self, call: &'static str) -> Result<std::sync::MutexGuard<'_, Handles>> {
        self.handles.lock().map_err(|_| poisoned(call))
    }

    fn read_mem(&self, call: &'static str) -> Result<std::sync::RwLockReadGuard<'_, Memory>> {
        self.memory.read().map_err(|_| poisoned(call))
    }

    fn check_stream(&self, call: &'static str, s: StreamId) -> Result<()> {
        if self.queues(call)?.has_stream(s) {
            Ok(())
        } else {
            Err(invalid_handle(call, s.0))
        }
    }

    /// Runs `s` up to the work queued so far; its unreported error.
    fn sync_stream(&self, call: &'static str, s: StreamId) -> Result<()> {
        let target = self.queues(call)?.stream_target(call, s)?;
        self.drain(call, &target)?;
        self.queues(call)?.take_error(s)
    }

    /// Runs every stream up to the work queued so far (a device-wide wait; errors stay queued).
    fn drain_all(&self, call: &'static str) -> Result<()> {
        let target = self.queues(call)?.all_target();
        self.drain(call, &target)
    }

    /// Checks that `[addr, addr+bytes)` lies in one live allocation.
    fn check_range(&self, call: &'static str, addr: DevicePtr, bytes: usize) -> Result<()> {
        if self.read_mem(call)?.contains(addr, bytes as u64) {
            Ok(())
        } else {
            Err(mem_fault(call, addr, bytes))
        }
    }

    fn write_device(&self, call: &'static str, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.read_mem(call)?
            .write(dst, src)
            .map_err(|_| mem_fault(call, dst, src.len()))
    }

    fn read_device(&self, call: &'static str, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        let len = dst.len();
        self.read_mem(call)?
            .read(src, dst)
            .map_err(|_| mem_fault(call, src, len))
    }

    /// Device-to-device copy through a bounded host buffer (in chunks, so a large copy needs
    /// no large host allocation).
    fn copy_dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<()> {
        const CALL: &str = "cuMemcpyDtoDAsync_v2";
        self.check_range(CALL, src, bytes)?;
        self.check_range(CALL, dst, bytes)?;
        let mut tmp = vec![0u8; bytes.min(CHUNK)];
        let mut done = 0usize;
        while done < bytes {
            let n = (bytes - done).min(CHUNK);
            self.read_device(CALL, &mut tmp[..n], src + done as u64)?;
            self.write_device(CALL, dst + done as u64, &tmp[..n])?;
            done += n;
        }
        Ok(())
    }

    /// Sets `count` elements of `width` (1 or 4) bytes to `value`, in bounded chunks.
    fn fill(&self, dst: DevicePtr, value: u32, width: u8, count: usize) -> Result<()> {
        let call = if width == 1 {
            "cuMemsetD8Async"
        } else {
            "cuMemsetD32Async"
        };
        let bytes = count.saturating_mul(width as usize);
        self.check_range(call, dst, bytes)?;
        let pattern = value.to_le_bytes();
        let buf: Vec<u8> = (0..bytes.min(CHUNK))
            .map(|i| pattern[i % width as usize])
            .collect();
        let mut done = 0usize;
        while done < bytes {
            let n = (bytes - done).min(CHUNK);
            self.write_device(call, dst + done as u64, &buf[..n])?;
            done += n;
        }
        Ok(())
    }

    /// Frees an allocation now.
    fn free_now(&self, call: &'static str, ptr: DevicePtr) -> Result<()> {
        let mut mem = self.memory.write().map_err(|_| poisoned(call))?;
        if mem.free(ptr) {
            Ok(())
        } else {
            Err(invalid_value(
                call,
                format!("{ptr:#x} is not the start of a live allocation"),
            ))
        }
    }

    /// Parses, checks and decodes a module and places its variables; the error's code, name
    /// and log.
    fn build_module(
        &self,
        ptx_text: &str,
    ) -> std::result::Result<LoadedModule, (i32, &'static str, String)> {
        let bad = |line: u32, msg: String| {
            (
                218,
                "CUDA_ERROR_INVALID_PTX",
                format!("ptx line {line}: error: {msg}"),
            )
        };
        let module = ptx::parse_module(ptx_text).map_err(|e| bad(e.line, e.message))?;
        let digits: String = module
            .target
            .trim_start_matches("sm_")
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let sm: u32 = digits.parse().unwrap_or(0);
        let (maj, min) = self.config.compute_capability;
        if sm > maj * 10 + min || (module.target.ends_with('a') && sm != maj * 10 + min) {
            return Err((
                209,
                "CUDA_ERROR_NO_BINARY_FOR_GPU",
                format!(
                    "ptx targets {}, the emulated device has compute capability {maj}.{min}",
                    module.target
                ),
            ));
        }
        let mut globals = Vec::new();
        let placed = {
            let mut alloc = |v: &ptx::VarDecl,
                             bytes: u64,
                             init: &[u8]|
             -> std::result::Result<DevicePtr, String> {
                let mut mem = self
                    .memory
                    .write()
                    .map_err(|_| "emulator state poisoned".to_string())?;
                let ptr = mem.alloc(bytes.max(1)).ok_or(format!(
                    "out of device memory for `{}` ({bytes} bytes)",
                    v.name
                ))?;
                mem.write(ptr, init)
                    .map_err(|_| "initializer outside its variable".to_string())?;
                globals.push(ptr);
                Ok(ptr)
            };
            decode::place_module_vars(&module.vars, self.config.memory_capacity as u64, &mut alloc)
        };
        let free_all = |globals: &[DevicePtr]| {
            if let Ok(mut mem) = self.memory.write() {
                for g in globals {
                    mem.free(*g);
                }
            }
        };
        let (syms, module_shared, module_dynamic) = match placed {
            Ok(p) => p,
            Err(e) => {
                free_all(&globals);
                return Err(bad(e.line, e.message));
            }
        };
        let source: Vec<&str> = ptx_text.lines().collect();
        let mut kernels = Vec::new();
        let optin = self.config.max_shared_per_block_optin;
        for e in &module.entries {
            match decode::decode_entry(e, &syms, module_shared, &module_dynamic, &source) {
                // As ptxas does, static shared memory past the device's limit fails the load.
                Ok(k) if k.static_shared > optin => {
                    free_all(&globals);
                    return Err(bad(
                        0,
                        format!(
                            "entry `{}` uses {} bytes of static shared memory, more than the device's {optin} bytes per block",
                            e.name, k.static_shared
                        ),
                    ));
                }
                Ok(k) => kernels.push(Arc::new(k)),
                Err(err) => {
                    free_all(&globals);
                    return Err(bad(
                        err.line,
                        format!("in entry `{}`: {}", e.name, err.message),
                    ));
                }
            }
        }
        Ok(LoadedModule { kernels, globals })
    }
}

/// The device API. Calls that act on streams take the stream they order on; a synchronous call
/// (`copy_to`, `copy_from`) is ordered after the default stream only, as created streams are
/// non-blocking. The failure of queued work is reported by the synchronization that covers it
/// (see `queue`).
impl Emulator {
    /// Waits for all queued work; the first unreported failure of the calling thread's work.
    pub(crate) fn synchronize(&self) -> Result<()> {
        const CALL: &str = "cuCtxSynchronize";
        self.drain_all(CALL)?;
        self.queues(CALL)?.take_any_error()
    }
    /// Free and total device memory, in bytes.
    pub(crate) fn memory_info(&self) -> Result<(usize, usize)> {
        let mem = self.read_mem("cuMemGetInfo")?;
        Ok(((mem.capacity - mem.used()) as usize, mem.capacity as usize))
    }
    /// Allocates `bytes` (not 0) of device memory; [`Error::OutOfMemory`] past the capacity.
    pub(crate) fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(invalid_value("cuMemAlloc_v2", "zero-byte allocation"));
        }
        let mut mem = self.memory.write().map_err(|_| poisoned("cuMemAlloc_v2"))?;
        mem.alloc(bytes as u64).ok_or(Error::OutOfMemory { bytes })
    }
    /// Frees an allocation after all queued work (which may still use it) has run.
    pub(crate) fn free(&self, ptr: DevicePtr) -> Result<()> {
        // As cuMemFree: waits for all work of the device, so nothing queued uses the memory.
        self.drain_all("cuMemFree_v2")?;
        self.free_now("cuMemFree_v2", ptr)
    }
    /// Allocates device memory for `stream`'s later work (at once: that is all it promises).
    pub(crate) fn alloc_async(&self, bytes: usize, stream: StreamId) -> Result<DevicePtr> {
        // Allocated at once: it is usable by the stream's later work, which is all it promises.
        self.check_stream("cuMemAllocAsync", stream)?;
        self.alloc(bytes)
    }
    /// Frees an allocation when `stream` reaches this point.
    pub(crate) fn free_async(&self, ptr: DevicePtr, stream: StreamId) -> Result<()> {
        const CALL: &str = "cuMemFreeAsync";
        if !self.read_mem(CALL)?.is_allocation(ptr) {
            return Err(invalid_value(
                CALL,
                format!("{ptr:#x} is not the start of a live allocation"),
            ));
        }
        self.queues(CALL)?.enqueue(CALL, stream, Work::Free { ptr })
    }
    /// Allocates `bytes` of zeroed host memory (the page-locked memory of asynchronous copies).
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<*mut u8> {
        if bytes > self.config.memory_capacity.max(1 << 30) {
            return Err(Error::OutOfMemory { bytes });
        }
        // Fallible, so a request the host cannot meet is out-of-memory, not an abort.
        let mut v: Vec<u8> = Vec::new();
        v.try_reserve_exact(bytes.max(1))
            .map_err(|_| Error::OutOfMemory { bytes })?;
        v.resize(bytes.max(1), 0);
        let buf = v.into_boxed_slice();
        let len = buf.len();
        let ptr = Box::into_raw(buf) as *mut u8;
        self.handles("cuMemHostAlloc")?
            .host
            .insert(ptr as usize, len);
        Ok(ptr)
    }
    /// Frees memory from [`Emulator::alloc_host`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_host` of this device and is not used afterwards.
    pub(crate) unsafe fn free_host(&self, ptr: *mut u8) -> Result<()> {
        let len = self
            .handles("cuMemFreeHost")?
            .host
            .remove(&(ptr as usize))
            .ok_or_else(|| invalid_value("cuMemFreeHost", "not memory from host_alloc"))?;
        // SAFETY: `ptr` and `len` come from `Box::into_raw` of a boxed slice in `host_alloc`
        // (the map entry proves it and is removed, so this happens once); the caller promises
        // the memory is no longer used.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        Ok(())
    }
    /// Copies host memory to the device, after the default stream's queued work.
    pub(crate) fn copy_to(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // Synchronous copies are ordered after the default stream only: created streams are
        // non-blocking, so their queued work is not waited for.
        self.sync_stream("cuMemcpyHtoD_v2", StreamId::DEFAULT)?;
        self.write_device("cuMemcpyHtoD_v2", dst, src)
    }
    /// Copies device memory to the host, after the default stream's queued work.
    pub(crate) fn copy_from(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.sync_stream("cuMemcpyDtoH_v2", StreamId::DEFAULT)?;
        self.read_device("cuMemcpyDtoH_v2", dst, src)
    }
    /// Queues a device-to-device copy of `bytes` on `stream`.
    pub(crate) fn copy_within(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamId,
    ) -> Result<()> {
        const CALL: &str = "cuMemcpyDtoDAsync_v2";
        self.check_stream(CALL, stream)?;
        self.check_range(CALL, src, bytes)?;
        self.check_range(CALL, dst, bytes)?;
        self.queues(CALL)?
            .enqueue(CALL, stream, Work::CopyDtoD { dst, src, bytes })
    }
    /// Queues a copy of host memory to the device on `stream`; the host memory is read when
    /// the stream reaches the copy.
    ///
    /// # Safety
    /// `src..src+bytes` stays valid and unchanged until the stream has passed this copy.
    pub(crate) unsafe fn copy_to_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamId,
    ) -> Result<()> {
        const CALL: &str = "cuMemcpyHtoDAsync_v2";
        self.check_stream(CALL, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        self.check_range(CALL, dst, bytes)?;
        // The host memory is read when the stream reaches the copy, as on a GPU.
        let work = Work::CopyHtoD {
            dst,
            src: src as usize,
            bytes,
        };
        self.queues(CALL)?.enqueue(CALL, stream, work)
    }
    /// Queues a copy of device memory to the host on `stream`.
    ///
    /// # Safety
    /// `dst..dst+bytes` stays valid and is not otherwise accessed until the stream has passed
    /// this copy.
    pub(crate) unsafe fn copy_from_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamId,
    ) -> Result<()> {
        const CALL: &str = "cuMemcpyDtoHAsync_v2";
        self.check_stream(CALL, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        self.check_range(CALL, src, bytes)?;
        let work = Work::CopyDtoH {
            dst: dst as usize,
            src,
            bytes,
        };
        self.queues(CALL)?.enqueue(CALL, stream, work)
    }
    /// Queues setting `bytes` bytes at `dst` to `value` on `stream`.
    pub(crate) fn memset_u8(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamId,
    ) -> Result<()> {
        const CALL: &str = "cuMemsetD8Async";
        self.check_stream(CALL, stream)?;
        self.check_range(CALL, dst, bytes)?;
        let work = Work::Memset {
            dst,
            value: value as u32,
            width: 1,
            count: bytes,
        };
        self.queues(CALL)?.enqueue(CALL, stream, work)
    }
    /// Queues setting `count` 32-bit words at `dst` (4-byte aligned) to `value` on `stream`.
    pub(crate) fn memset_u32(
        &self,
        dst: DevicePtr,
        value: u32,
        count: usize,
        stream: StreamId,
    ) -> Result<()> {
        const CALL: &str = "cuMemsetD32Async";
        self.check_stream(CALL, stream)?;
        if dst % 4 != 0 {
            return Err(invalid_value(
                CALL,
                format!("{dst:#x} is not 4-byte aligned"),
            ));
        }
        self.check_range(CALL, dst, count.saturating_mul(4))?;
        let work = Work::Memset {
            dst,
            value,
            width: 4,
            count,
        };
        self.queues(CALL)?.enqueue(CALL, stream, work)
    }
    /// Creates a stream (non-blocking with respect to the default stream).
    pub(crate) fn create_stream(&self) -> Result<StreamId> {
        let id = self.handles("cuStreamCreate")?.fresh();
        self.queues("cuStreamCreate")?.add_stream(id);
        Ok(StreamId(id))
    }
    /// Destroys a stream after running its queued work; the error it had not reported.
    pub(crate) fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        const CALL: &str = "cuStreamDestroy_v2";
        if stream == StreamId::DEFAULT {
            return Err(invalid_handle(CALL, stream.0));
        }
        // Its queued work still runs (as on a GPU); an error it had not reported is returned
        // here, the last call that names the stream.
        let target = self.queues(CALL)?.stream_target(CALL, stream)?;
        self.drain(CALL, &target)?;
        match self.queues(CALL)?.remove_stream(stream.0) {
            Some(None) => Ok(()),
            Some(Some(e)) => Err(e),
            None => Err(invalid_handle(CALL, stream.0)),
        }
    }
    /// Runs `stream` up to the work queued so far; its unreported failure.
    pub(crate) fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.sync_stream("cuStreamSynchronize", stream)
    }
    /// Whether `stream`'s queued work is done; runs one piece of it first.
    pub(crate) fn query_stream(&self, stream: StreamId) -> Result<bool> {
        // Runs one piece of the work the stream waits for, so a polling loop always finishes
        // and, single-threaded, deterministically under the seed.
        const CALL: &str = "cuStreamQuery";
        let target = self.queues(CALL)?.stream_target(CALL, stream)?;
        if !self.try_step(CALL, &target)? {
            return Ok(false);
        }
        self.queues(CALL)?.take_error(stream).map(|()| true)
    }
    /// Makes `stream`'s later work wait for `event`'s latest record (none: no wait).
    pub(crate) fn wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.queues("cuStreamWaitEvent")?
            .wait("cuStreamWaitEvent", stream, event)
    }
    /// Creates an event (every event records its time).
    pub(crate) fn create_event(&self) -> Result<EventId> {
        let id = self.handles("cuEventCreate")?.fresh();
        self.queues("cuEventCreate")?.add_event(id);
        Ok(EventId(id))
    }
    /// Destroys an event.
    pub(crate) fn destroy_event(&self, event: EventId) -> Result<()> {
        // A pending record of a destroyed event still runs; waits on it still hold.
        if self.queues("cuEventDestroy_v2")?.remove_event(event.0) {
            Ok(())
        } else {
            Err(invalid_handle("cuEventDestroy_v2", event.0))
        }
    }
    /// Queues a record of `event` on `stream`; it becomes the event's latest record.
    pub(crate) fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        self.queues("cuEventRecord")?
            .record("cuEventRecord", event, stream)
    }
    /// Waits for `event`'s latest record; the failure of its stream's work before it.
    pub(crate) fn synchronize_event(&self, event: EventId) -> Result<()> {
        const CALL: &str = "cuEventSynchronize";
        // Bound first: a guard in an `if let` scrutinee would live through the drain.
        let target = self.queues(CALL)?.event_target(CALL, event)?;
        if let Some(target) = target {
            self.drain(CALL, &target)?;
        }
        self.queues(CALL)?.take_event_error(event)
    }
    /// Whether `event`'s latest record is reached; runs one piece of the work first.
    pub(crate) fn query_event(&self, event: EventId) -> Result<bool> {
        const CALL: &str = "cuEventQuery";
        let target = self.queues(CALL)?.event_target(CALL, event)?;
        if let Some(target) = target {
            if !self.try_step(CALL, &target)? {
                return Ok(false);
            }
        }
        self.queues(CALL)?.take_event_error(event).map(|()| true)
    }
    /// Milliseconds between the latest records of two reached events.
    pub(crate) fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f32> {
        const CALL: &str = "cuEventElapsedTime";
        let q = self.queues(CALL)?;
        let get = |e: EventId| match q.event_time(e) {
            Some(Ok(t)) => Ok(t),
            Some(Err(pending)) => Err(driver_error(
                CALL,
                600,
                "CUDA_ERROR_NOT_READY",
                if pending {
                    "the event's stream has not reached it"
                } else {
                    "event not recorded"
                },
            )),
            None => Err(invalid_handle(CALL, e.0)),
        };
        let (a, b) = (get(start)?, get(end)?);
        Ok(match b.checked_duration_since(a) {
            Some(d) => d.as_secs_f32() * 1000.0,
            None => -(a.duration_since(b).as_secs_f32() * 1000.0),
        })
    }
    /// Parses, checks and decodes a module; what the emulator does not implement fails the load
    /// with a log line naming the PTX line.
    pub(crate) fn load_ptx(&self, ptx_text: &str) -> std::result::Result<ModuleId, LoadError> {
        let fail = |code: i32, name: &str, log: String| LoadError {
            error: DriverError {
                call: "cuModuleLoadDataEx",
                code,
                name: name.to_string(),
                message: log.lines().next().unwrap_or("").to_string(),
            },
            log,
        };
        let m = self
            .build_module(ptx_text)
            .map_err(|(code, name, log)| fail(code, name, log))?;
        let mut h = self
            .handles
            .lock()
            .map_err(|_| fail(999, "CUDA_ERROR_UNKNOWN", "emulator state poisoned".into()))?;
        let id = h.fresh();
        h.modules.insert(id, m);
        Ok(ModuleId(id))
    }
    /// Unloads a module after all queued work, freeing its variables.
    pub(crate) fn unload(&self, module: ModuleId) -> Result<()> {
        // Queued launches of the module may still use its globals.
        self.drain_all("cuModuleUnload")?;
        let m = self
            .handles("cuModuleUnload")?
            .modules
            .remove(&module.0)
            .ok_or_else(|| invalid_handle("cuModuleUnload", module.0))?;
        let mut mem = self
            .memory
            .write()
            .map_err(|_| poisoned("cuModuleUnload"))?;
        for g in m.globals {
            mem.free(g);
        }
        Ok(())
    }
    /// The kernel entry `name` of a loaded module.
    pub(crate) fn function(&self, module: ModuleId, name: &str) -> Result<FunctionId> {
        let mut h = self.handles("cuModuleGetFunction")?;
        let m = h
            .modules
            .get(&module.0)
            .ok_or_else(|| invalid_handle("cuModuleGetFunction", module.0))?;
        let kernel = m
            .kernels
            .iter()
            .find(|k| k.name == name)
            .cloned()
            .ok_or_else(|| {
                driver_error(
                    "cuModuleGetFunction",
                    500,
                    "CUDA_ERROR_NOT_FOUND",
                    format!("no entry `{name}` in the module"),
                )
            })?;
        let max_dynamic_shared = self
            .config
            .max_shared_per_block
            .saturating_sub(kernel.static_shared);
        let id = h.fresh();
        h.functions.insert(
            id,
            Function {
                kernel,
                max_dynamic_shared,
            },
        );
        Ok(FunctionId(id))
    }
    /// The resource use of a function.
    pub(crate) fn function_info(&self, function: FunctionId) -> Result<FunctionInfo> {
        let h = self.handles("cuFuncGetAttribute")?;
        let f = h
            .functions
            .get(&function.0)
            .ok_or_else(|| invalid_handle("cuFuncGetAttribute", function.0))?;
        let k = &f.kernel;
        let max_threads = match (k.reqntid, k.maxntid) {
            (Some(d), _) | (None, Some(d)) => d[0] * d[1] * d[2],
            _ => MAX_THREADS_PER_BLOCK,
        };
        Ok(FunctionInfo {
            registers: (k.nslots as u32).min(255),
            static_shared_bytes: k.static_shared,
            local_bytes: k.local_bytes,
            max_threads_per_block: max_threads.min(MAX_THREADS_PER_BLOCK),
        })
    }
    /// How many blocks of `block_threads` threads and `dynamic_shared` bytes of dynamic shared
    /// memory one multiprocessor holds at once (by thread slots and shared memory).
    pub(crate) fn blocks_per_sm(
        &self,
        function: FunctionId,
        block_threads: u32,
        dynamic_shared: u32,
    ) -> Result<u32> {
        let h = self.handles("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let f = h.functions.get(&function.0).ok_or_else(|| {
            invalid_handle("cuOccupancyMaxActiveBlocksPerMultiprocessor", function.0)
        })?;
        // The emulated device has no register file: thread slots and shared memory decide.
        let c = &self.config;
        let by_threads = c.max_threads_per_sm / block_threads.max(1);
        let shared = f.kernel.static_shared as u64 + dynamic_shared as u64;
        let by_shared = (c.shared_per_sm as u64)
            .checked_div(shared)
            .map_or(u32::MAX, |b| b.min(u32::MAX as u64) as u32);
        Ok(by_threads.min(by_shared).min(MAX_BLOCKS_PER_SM))
    }
    /// Allows a function up to `bytes` of dynamic shared memory (up to the opt-in limit).
    pub(crate) fn set_max_dynamic_shared(&self, function: FunctionId, bytes: u32) -> Result<()> {
        let optin = self.config.max_shared_per_block_optin;
        let mut h = self.handles("cuFuncSetAttribute")?;
        let f = h
            .functions
            .get_mut(&function.0)
            .ok_or_else(|| invalid_handle("cuFuncSetAttribute", function.0))?;
        if bytes as u64 + f.kernel.static_shared as u64 > optin as u64 {
            return Err(invalid_value("cuFuncSetAttribute", format!("{bytes} bytes of dynamic shared memory exceed the opt-in limit of {optin} bytes")));
        }
        f.max_dynamic_shared = bytes;
        Ok(())
    }
    /// Encodes a tiled tensor map (`cuTensorMapEncodeTiled`) of a validated spec in the
    /// emulated device's own format (`tensor_map.rs`).
    pub(crate) fn tensor_map_encode_tiled(
        &self,
        spec: &crate::driver::TensorMapSpec,
    ) -> Result<[u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]> {
        Ok(tensor_map::encode(spec))
    }
    /// Checks a launch as `cuLaunchKernel` does (a bad configuration is an error at once) and
    /// queues it on its stream; a failed check while it runs is reported by the
    /// synchronization that covers it.
    pub(crate) fn launch(&self, launch: &KernelLaunch<'_>) -> Result<()> {
        self.queue_launch(launch)
    }
}

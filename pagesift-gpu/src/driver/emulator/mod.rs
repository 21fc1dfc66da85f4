//! The emulated device: a [`Backend`] that executes PTX text on the CPU.
//!
//! Modules are parsed from their PTX text (`ptx`) and pre-decoded into compact instructions with
//! register slots and resolved labels (`decode`); anything the emulator does not implement fails
//! the load with a log line naming the instruction and PTX line. A launch runs its grid's
//! blocks spread over host threads (`exec`), with the checks of a sanitizer:
//! out-of-bounds and misaligned global and shared accesses, barriers not reached by every thread,
//! reads of shared memory no thread wrote, and shared-memory data races between two barriers. A
//! failed check is [`Error::Emulator`], whose message names the check, the kernel, the block, the
//! thread and the PTX line.
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

mod config;
mod decode;
mod exec;
#[cfg(test)]
mod input_tests;
mod launch;
mod memory;
mod num;
mod ptx;
mod queue;
#[cfg(test)]
mod stream_tests;
mod tensor;
#[cfg(test)]
mod tests;

use super::backend::{
    Backend, BackendKind, DeviceProps, DevicePtr, FunctionAttributes, LaunchRequest,
    ModuleLoadError, RawHandle,
};
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

fn invalid_handle(call: &'static str, h: RawHandle) -> Error {
    driver_error(
        call,
        400,
        "CUDA_ERROR_INVALID_HANDLE",
        format!("no such handle {:#x} on the emulated device", h.0),
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

    /// The emulated device configured from the environment (see [`EmulatorConfig::from_env`]),
    /// as the backend the runtime uses when `PAGESIFT_GPU_DEVICE=emulated`.
    pub fn from_env() -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(Emulator::new(EmulatorConfig::from_env()?)))
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

    fn check_stream(&self, call: &'static str, s: RawHandle) -> Result<()> {
        if self.queues(call)?.has_stream(s) {
            Ok(())
        } else {
            Err(invalid_handle(call, s))
        }
    }

    /// Runs `s` up to the work queued so far; its unreported error.
    fn sync_stream(&self, call: &'static str, s: RawHandle) -> Result<()> {
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

    fn load(
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
        let (syms, module_shared) = match placed {
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
            match decode::decode_entry(e, &syms, module_shared, &source) {
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

impl Backend for Emulator {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulated
    }
    fn library(&self) -> &str {
        "pagesift emulator (PTX interpreted on the CPU)"
    }
    fn driver_version(&self) -> Result<i32> {
        Ok(12090)
    }
    fn driver_version_string(&self) -> Option<String> {
        None
    }
    fn device_count(&self) -> Result<usize> {
        Ok(1)
    }
    fn device_props(&self, ordinal: usize) -> Result<DeviceProps> {
        if ordinal != 0 {
            return Err(Error::NoSuchDevice { ordinal, count: 1 });
        }
        let c = &self.config;
        Ok(DeviceProps {
            name: c.name.clone(),
            compute_capability: c.compute_capability,
            sm_count: c.sm_count,
            max_threads_per_sm: c.max_threads_per_sm,
            total_memory: c.memory_capacity,
            l2_cache_bytes: 4 << 20,
            max_shared_per_block: c.max_shared_per_block,
            max_shared_per_block_optin: c.max_shared_per_block_optin,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [i32::MAX as u32, 65535, 65535],
        })
    }
    fn primary_context_retain(&self, ordinal: usize) -> Result<RawHandle> {
        if ordinal != 0 {
            return Err(Error::NoSuchDevice { ordinal, count: 1 });
        }
        Ok(RawHandle(1))
    }
    fn primary_context_release(&self, _ordinal: usize) -> Result<()> {
        Ok(())
    }
    fn set_current(&self, _ctx: RawHandle) -> Result<()> {
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        const CALL: &str = "cuCtxSynchronize";
        self.drain_all(CALL)?;
        self.queues(CALL)?.take_any_error()
    }
    fn mem_info(&self) -> Result<(usize, usize)> {
        let mem = self.read_mem("cuMemGetInfo")?;
        Ok(((mem.capacity - mem.used()) as usize, mem.capacity as usize))
    }
    fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(invalid_value("cuMemAlloc_v2", "zero-byte allocation"));
        }
        let mut mem = self.memory.write().map_err(|_| poisoned("cuMemAlloc_v2"))?;
        mem.alloc(bytes as u64).ok_or(Error::OutOfMemory { bytes })
    }
    fn mem_free(&self, ptr: DevicePtr) -> Result<()> {
        // As cuMemFree: waits for all work of the device, so nothing queued uses the memory.
        self.drain_all("cuMemFree_v2")?;
        self.free_now("cuMemFree_v2", ptr)
    }
    fn mem_alloc_async(&self, bytes: usize, stream: RawHandle) -> Result<DevicePtr> {
        // Allocated at once: it is usable by the stream's later work, which is all it promises.
        self.check_stream("cuMemAllocAsync", stream)?;
        self.mem_alloc(bytes)
    }
    fn mem_free_async(&self, ptr: DevicePtr, stream: RawHandle) -> Result<()> {
        const CALL: &str = "cuMemFreeAsync";
        if !self.read_mem(CALL)?.is_allocation(ptr) {
            return Err(invalid_value(
                CALL,
                format!("{ptr:#x} is not the start of a live allocation"),
            ));
        }
        self.queues(CALL)?.enqueue(CALL, stream, Work::Free { ptr })
    }
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
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
    unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
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
    fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // Synchronous copies are ordered after the default stream only: created streams are
        // non-blocking, so their queued work is not waited for.
        self.sync_stream("cuMemcpyHtoD_v2", RawHandle::NULL)?;
        self.write_device("cuMemcpyHtoD_v2", dst, src)
    }
    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.sync_stream("cuMemcpyDtoH_v2", RawHandle::NULL)?;
        self.read_device("cuMemcpyDtoH_v2", dst, src)
    }
    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        const CALL: &str = "cuMemcpyDtoDAsync_v2";
        self.check_stream(CALL, stream)?;
        self.check_range(CALL, src, bytes)?;
        self.check_range(CALL, dst, bytes)?;
        self.queues(CALL)?
            .enqueue(CALL, stream, Work::CopyDtoD { dst, src, bytes })
    }
    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: RawHandle,
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
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
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
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, stream: RawHandle) -> Result<()> {
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
    fn memset_d32(
        &self,
        dst: DevicePtr,
        value: u32,
        count: usize,
        stream: RawHandle,
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
    fn stream_create(&self) -> Result<RawHandle> {
        let id = self.handles("cuStreamCreate")?.fresh();
        self.queues("cuStreamCreate")?.add_stream(id);
        Ok(RawHandle(id))
    }
    fn stream_destroy(&self, stream: RawHandle) -> Result<()> {
        const CALL: &str = "cuStreamDestroy_v2";
        if stream == RawHandle::NULL {
            return Err(invalid_handle(CALL, stream));
        }
        // Its queued work still runs (as on a GPU); an error it had not reported is returned
        // here, the last call that names the stream.
        let target = self.queues(CALL)?.stream_target(CALL, stream)?;
        self.drain(CALL, &target)?;
        match self.queues(CALL)?.remove_stream(stream.0) {
            Some(None) => Ok(()),
            Some(Some(e)) => Err(e),
            None => Err(invalid_handle(CALL, stream)),
        }
    }
    fn stream_synchronize(&self, stream: RawHandle) -> Result<()> {
        self.sync_stream("cuStreamSynchronize", stream)
    }
    fn stream_query(&self, stream: RawHandle) -> Result<bool> {
        // Runs one piece of the work the stream waits for, so a polling loop always finishes
        // and, single-threaded, deterministically under the seed.
        const CALL: &str = "cuStreamQuery";
        let target = self.queues(CALL)?.stream_target(CALL, stream)?;
        if !self.try_step(CALL, &target)? {
            return Ok(false);
        }
        self.queues(CALL)?.take_error(stream).map(|()| true)
    }
    fn stream_wait_event(&self, stream: RawHandle, event: RawHandle) -> Result<()> {
        self.queues("cuStreamWaitEvent")?
            .wait("cuStreamWaitEvent", stream, event)
    }
    fn event_create(&self, _timing: bool) -> Result<RawHandle> {
        let id = self.handles("cuEventCreate")?.fresh();
        self.queues("cuEventCreate")?.add_event(id);
        Ok(RawHandle(id))
    }
    fn event_destroy(&self, event: RawHandle) -> Result<()> {
        // A pending record of a destroyed event still runs; waits on it still hold.
        if self.queues("cuEventDestroy_v2")?.remove_event(event.0) {
            Ok(())
        } else {
            Err(invalid_handle("cuEventDestroy_v2", event))
        }
    }
    fn event_record(&self, event: RawHandle, stream: RawHandle) -> Result<()> {
        self.queues("cuEventRecord")?
            .record("cuEventRecord", event, stream)
    }
    fn event_synchronize(&self, event: RawHandle) -> Result<()> {
        const CALL: &str = "cuEventSynchronize";
        // Bound first: a guard in an `if let` scrutinee would live through the drain.
        let target = self.queues(CALL)?.event_target(CALL, event)?;
        if let Some(target) = target {
            self.drain(CALL, &target)?;
        }
        self.queues(CALL)?.take_event_error(event)
    }
    fn event_query(&self, event: RawHandle) -> Result<bool> {
        const CALL: &str = "cuEventQuery";
        let target = self.queues(CALL)?.event_target(CALL, event)?;
        if let Some(target) = target {
            if !self.try_step(CALL, &target)? {
                return Ok(false);
            }
        }
        self.queues(CALL)?.take_event_error(event).map(|()| true)
    }
    fn event_elapsed_ms(&self, start: RawHandle, end: RawHandle) -> Result<f32> {
        const CALL: &str = "cuEventElapsedTime";
        let q = self.queues(CALL)?;
        let get = |e: RawHandle| match q.event_time(e) {
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
            None => Err(invalid_handle(CALL, e)),
        };
        let (a, b) = (get(start)?, get(end)?);
        Ok(match b.checked_duration_since(a) {
            Some(d) => d.as_secs_f32() * 1000.0,
            None => -(a.duration_since(b).as_secs_f32() * 1000.0),
        })
    }
    fn module_load(&self, ptx_text: &str) -> std::result::Result<RawHandle, ModuleLoadError> {
        let fail = |code: i32, name: &str, log: String| ModuleLoadError {
            error: DriverError {
                call: "cuModuleLoadDataEx",
                code,
                name: name.to_string(),
                message: log.lines().next().unwrap_or("").to_string(),
            },
            log,
        };
        let m = self
            .load(ptx_text)
            .map_err(|(code, name, log)| fail(code, name, log))?;
        let mut h = self
            .handles
            .lock()
            .map_err(|_| fail(999, "CUDA_ERROR_UNKNOWN", "emulator state poisoned".into()))?;
        let id = h.fresh();
        h.modules.insert(id, m);
        Ok(RawHandle(id))
    }
    fn module_unload(&self, module: RawHandle) -> Result<()> {
        // Queued launches of the module may still use its globals.
        self.drain_all("cuModuleUnload")?;
        let m = self
            .handles("cuModuleUnload")?
            .modules
            .remove(&module.0)
            .ok_or_else(|| invalid_handle("cuModuleUnload", module))?;
        let mut mem = self
            .memory
            .write()
            .map_err(|_| poisoned("cuModuleUnload"))?;
        for g in m.globals {
            mem.free(g);
        }
        Ok(())
    }
    fn module_function(&self, module: RawHandle, name: &str) -> Result<RawHandle> {
        let mut h = self.handles("cuModuleGetFunction")?;
        let m = h
            .modules
            .get(&module.0)
            .ok_or_else(|| invalid_handle("cuModuleGetFunction", module))?;
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
        Ok(RawHandle(id))
    }
    fn function_attributes(&self, function: RawHandle) -> Result<FunctionAttributes> {
        let h = self.handles("cuFuncGetAttribute")?;
        let f = h
            .functions
            .get(&function.0)
            .ok_or_else(|| invalid_handle("cuFuncGetAttribute", function))?;
        let k = &f.kernel;
        let max_threads = match (k.reqntid, k.maxntid) {
            (Some(d), _) | (None, Some(d)) => d[0] * d[1] * d[2],
            _ => 1024,
        };
        Ok(FunctionAttributes {
            num_regs: (k.nslots as u32).min(255),
            static_shared_bytes: k.static_shared,
            local_bytes: k.local_bytes,
            max_threads_per_block: max_threads.min(1024),
        })
    }
    fn occupancy_blocks_per_sm(
        &self,
        function: RawHandle,
        block_threads: u32,
        dynamic_shared: u32,
    ) -> Result<u32> {
        let h = self.handles("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let f = h.functions.get(&function.0).ok_or_else(|| {
            invalid_handle("cuOccupancyMaxActiveBlocksPerMultiprocessor", function)
        })?;
        // The emulated device has no register file: thread slots and shared memory decide.
        let c = &self.config;
        let by_threads = c.max_threads_per_sm / block_threads.max(1);
        let shared = f.kernel.static_shared as u64 + dynamic_shared as u64;
        let by_shared = (c.shared_per_sm as u64)
            .checked_div(shared)
            .map_or(u32::MAX, |b| b.min(u32::MAX as u64) as u32);
        Ok(by_threads.min(by_shared).min(32))
    }
    fn function_set_max_dynamic_shared(&self, function: RawHandle, bytes: u32) -> Result<()> {
        let optin = self.config.max_shared_per_block_optin;
        let mut h = self.handles("cuFuncSetAttribute")?;
        let f = h
            .functions
            .get_mut(&function.0)
            .ok_or_else(|| invalid_handle("cuFuncSetAttribute", function))?;
        if bytes as u64 + f.kernel.static_shared as u64 > optin as u64 {
            return Err(invalid_value("cuFuncSetAttribute", format!("{bytes} bytes of dynamic shared memory exceed the opt-in limit of {optin} bytes")));
        }
        f.max_dynamic_shared = bytes;
        Ok(())
    }
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<()> {
        self.queue_launch(req)
    }
}

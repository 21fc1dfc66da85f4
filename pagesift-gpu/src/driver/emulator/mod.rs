//! The emulated device: a [`Backend`] that executes PTX text on the CPU.
//!
//! Modules are parsed from their PTX text (`ptx`) and pre-decoded into compact instructions with
//! register slots and resolved labels (`decode`); anything the emulator does not implement fails
//! the load with a log line naming the instruction and PTX line. Launches run the whole grid
//! synchronously, blocks spread over host threads (`exec`), with the checks of a sanitizer:
//! out-of-bounds and misaligned global and shared accesses, barriers not reached by every thread,
//! reads of shared memory no thread wrote, and shared-memory data races between two barriers. A
//! failed check is [`Error::Emulator`], whose message names the check, the kernel, the block, the
//! thread and the PTX line.
//!
//! Environment: `PAGESIFT_EMU_MEMORY` (capacity, e.g. `512M`), `PAGESIFT_EMU_THREADS` (host
//! threads), `PAGESIFT_EMU_CC` (the compute capability reported, e.g. `9.0`; default 8.0).
//!
//! Device memory is host memory behind device-style addresses (from `0x7000_0000_0000`, 256-byte
//! aligned, a guard gap after every allocation, addresses never reused). Streams and events are
//! trivial: every operation completes before it returns; events record a host timestamp.

mod decode;
mod exec;
mod memory;
mod num;
mod ptx;
mod tensor;
#[cfg(test)]
mod tests;

use super::backend::{
    Backend, BackendKind, DeviceProps, DevicePtr, FunctionAttributes, LaunchRequest,
    ModuleLoadError, RawHandle,
};
use crate::error::{DriverError, Error, Result};
use decode::Kernel;
use memory::Memory;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

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

/// What the emulated device looks like and how it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorConfig {
    /// The compute capability it reports (default (8, 0)); modules targeting a higher `sm_XY`
    /// fail to load, as on a real device.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors it reports (default 4).
    pub sm_count: u32,
    /// Shared memory per block without opting in, in bytes (default 48 KiB).
    pub max_shared_per_block: u32,
    /// Shared memory per block after opting in, in bytes (default 163 KiB).
    pub max_shared_per_block_optin: u32,
    /// Device memory capacity in bytes (default 1 GiB; `PAGESIFT_EMU_MEMORY`).
    pub memory_capacity: usize,
    /// Host threads that blocks are spread over (default: the available parallelism;
    /// `PAGESIFT_EMU_THREADS`).
    pub threads: usize,
    /// The device name it reports.
    pub name: String,
    /// The most instructions one thread may execute between two synchronization points before
    /// the launch fails as an endless loop (default 2^32).
    pub max_thread_instructions: u64,
}

impl Default for EmulatorConfig {
    fn default() -> EmulatorConfig {
        EmulatorConfig {
            compute_capability: (8, 0),
            sm_count: 4,
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 163 * 1024,
            memory_capacity: 1 << 30,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            name: "pagesift emulated device".to_string(),
            max_thread_instructions: 1 << 32,
        }
    }
}

/// Parses a byte count such as `1073741824`, `512M`, `2GiB`, `64k`.
fn parse_bytes(s: &str) -> Option<usize> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().ok()?;
    let mul: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mul)
}

impl EmulatorConfig {
    /// The default configuration with `PAGESIFT_EMU_MEMORY` (bytes, with an optional `K`/`M`/`G`
    /// suffix), `PAGESIFT_EMU_THREADS` and `PAGESIFT_EMU_CC` (a compute capability such as `9.0`)
    /// applied.
    pub fn from_env() -> Result<EmulatorConfig> {
        let mut c = EmulatorConfig::default();
        if let Ok(v) = std::env::var("PAGESIFT_EMU_MEMORY") {
            c.memory_capacity = parse_bytes(&v).ok_or_else(|| Error::InvalidArgument {
                op: "PAGESIFT_EMU_MEMORY",
                message: format!("`{v}` is not a byte count (e.g. 1073741824, 512M, 2G)"),
            })?;
        }
        if let Ok(v) = std::env::var("PAGESIFT_EMU_THREADS") {
            c.threads =
                v.trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| Error::InvalidArgument {
                        op: "PAGESIFT_EMU_THREADS",
                        message: format!("`{v}` is not a positive thread count"),
                    })?;
        }
        if let Ok(v) = std::env::var("PAGESIFT_EMU_CC") {
            c.compute_capability = parse_cc(&v).ok_or_else(|| Error::InvalidArgument {
                op: "PAGESIFT_EMU_CC",
                message: format!("`{v}` is not a compute capability (e.g. 8.0, 9.0, 86)"),
            })?;
        }
        Ok(c)
    }
}

/// Parses a compute capability written `9.0` or `90`.
fn parse_cc(s: &str) -> Option<(u32, u32)> {
    let s = s.trim();
    let (major, minor) = match s.split_once('.') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None if s.len() >= 2 && s.bytes().all(|b| b.is_ascii_digit()) => (
            s[..s.len() - 1].parse().ok()?,
            s[s.len() - 1..].parse().ok()?,
        ),
        None => return None,
    };
    (major >= 1 && minor < 10).then_some((major, minor))
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
    streams: HashMap<usize, ()>,
    events: HashMap<usize, Option<Instant>>,
    host: HashMap<usize, usize>,
}

impl Handles {
    fn fresh(&mut self) -> usize {
        self.next += 1;
        self.next
    }
}

/// The emulated device. One device (ordinal 0), one context.
pub struct Emulator {
    config: EmulatorConfig,
    memory: RwLock<Memory>,
    handles: Mutex<Handles>,
    executed: AtomicU64,
}

fn driver_error(call: &'static str, code: i32, name: &str, message: impl Into<String>) -> Error {
    Error::Driver(DriverError {
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
            config,
            memory: RwLock::new(Memory::new(capacity)),
            handles: Mutex::new(Handles::default()),
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
        if s == RawHandle::NULL || self.handles(call)?.streams.contains_key(&s.0) {
            Ok(())
        } else {
            Err(invalid_handle(call, s))
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
            let mut alloc =
                |v: &ptx::VarDecl, bytes: Vec<u8>| -> std::result::Result<DevicePtr, String> {
                    let mut mem = self
                        .memory
                        .write()
                        .map_err(|_| "emulator state poisoned".to_string())?;
                    let ptr = mem
                        .alloc(bytes.len().max(1) as u64)
                        .ok_or(format!("out of device memory for `{}`", v.name))?;
                    mem.write(ptr, &bytes)
                        .map_err(|_| "initializer outside its variable".to_string())?;
                    globals.push(ptr);
                    Ok(ptr)
                };
            decode::place_module_vars(&module.vars, &mut alloc)
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
        for e in &module.entries {
            match decode::decode_entry(e, &syms, module_shared, &source) {
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

    fn run(&self, kernel: &Kernel, req: &LaunchRequest<'_>, params: &[u8]) -> Result<()> {
        let global = self.read_mem("cuLaunchKernel")?.snapshot();
        let launch = exec::Launch {
            kernel,
            global: &global,
            params,
            grid: req.grid,
            block: req.block,
            shared_bytes: kernel.static_shared.saturating_add(req.shared_mem_bytes),
            sm_count: self.config.sm_count,
            max_steps: self.config.max_thread_instructions,
        };
        let [gx, gy, gz] = req.grid;
        let nblocks = gx as u64 * gy as u64 * gz as u64;
        let workers = (self.config.threads.max(1) as u64).min(nblocks) as usize;
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let first_error: Mutex<Option<(u64, String)>> = Mutex::new(None);
        let executed = AtomicU64::new(0);
        let work = || {
            let mut runner = exec::Runner::new();
            while !stop.load(Ordering::Relaxed) {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= nblocks {
                    break;
                }
                let block = [
                    (b % gx as u64) as u32,
                    ((b / gx as u64) % gy as u64) as u32,
                    (b / (gx as u64 * gy as u64)) as u32,
                ];
                if let Err(msg) = runner.run_block(&launch, block) {
                    stop.store(true, Ordering::Relaxed);
                    if let Ok(mut slot) = first_error.lock() {
                        if slot.as_ref().is_none_or(|(fb, _)| b < *fb) {
                            *slot = Some((b, msg));
                        }
                    }
                }
            }
            executed.fetch_add(runner.steps, Ordering::Relaxed);
        };
        if workers <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(work);
                }
            });
        }
        let steps = executed.load(Ordering::Relaxed);
        self.executed.fetch_add(steps, Ordering::Relaxed);
        TOTAL_EXECUTED.fetch_add(steps, Ordering::Relaxed);
        match first_error.into_inner().ok().flatten() {
            Some((_, message)) => Err(Error::Emulator {
                kernel: req.name.to_string(),
                message,
            }),
            None => Ok(()),
        }
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
        Ok(())
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
        let mut mem = self.memory.write().map_err(|_| poisoned("cuMemFree_v2"))?;
        if mem.free(ptr) {
            Ok(())
        } else {
            Err(invalid_value(
                "cuMemFree_v2",
                format!("{ptr:#x} is not the start of a live allocation"),
            ))
        }
    }
    fn mem_alloc_async(&self, bytes: usize, stream: RawHandle) -> Result<DevicePtr> {
        self.check_stream("cuMemAllocAsync", stream)?;
        self.mem_alloc(bytes)
    }
    fn mem_free_async(&self, ptr: DevicePtr, stream: RawHandle) -> Result<()> {
        self.check_stream("cuMemFreeAsync", stream)?;
        self.mem_free(ptr)
    }
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        if bytes > self.config.memory_capacity.max(1 << 30) {
            return Err(Error::OutOfMemory { bytes });
        }
        let buf: Box<[u8]> = vec![0u8; bytes.max(1)].into_boxed_slice();
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
        self.read_mem("cuMemcpyHtoD_v2")?
            .write(dst, src)
            .map_err(|_| mem_fault("cuMemcpyHtoD_v2", dst, src.len()))
    }
    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        let len = dst.len();
        self.read_mem("cuMemcpyDtoH_v2")?
            .read(src, dst)
            .map_err(|_| mem_fault("cuMemcpyDtoH_v2", src, len))
    }
    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        self.check_stream("cuMemcpyDtoDAsync_v2", stream)?;
        let mem = self.read_mem("cuMemcpyDtoDAsync_v2")?;
        if !mem.contains(src, bytes as u64) {
            return Err(mem_fault("cuMemcpyDtoDAsync_v2", src, bytes));
        }
        let mut tmp = vec![0u8; bytes];
        mem.read(src, &mut tmp)
            .map_err(|_| mem_fault("cuMemcpyDtoDAsync_v2", src, bytes))?;
        mem.write(dst, &tmp)
            .map_err(|_| mem_fault("cuMemcpyDtoDAsync_v2", dst, bytes))
    }
    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        self.check_stream("cuMemcpyHtoDAsync_v2", stream)?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller promises `src..src+bytes` is valid and unchanged until the stream
        // passes this copy; the emulator completes the copy before returning.
        let src = unsafe { std::slice::from_raw_parts(src, bytes) };
        self.memcpy_htod(dst, src)
    }
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        self.check_stream("cuMemcpyDtoHAsync_v2", stream)?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller promises `dst..dst+bytes` is valid and not otherwise accessed until
        // the stream passes this copy; the emulator completes the copy before returning.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        self.memcpy_dtoh(dst, src)
    }
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, stream: RawHandle) -> Result<()> {
        self.check_stream("cuMemsetD8Async", stream)?;
        if !self
            .read_mem("cuMemsetD8Async")?
            .contains(dst, bytes as u64)
        {
            return Err(mem_fault("cuMemsetD8Async", dst, bytes));
        }
        let buf = vec![value; bytes];
        self.read_mem("cuMemsetD8Async")?
            .write(dst, &buf)
            .map_err(|_| mem_fault("cuMemsetD8Async", dst, bytes))
    }
    fn memset_d32(
        &self,
        dst: DevicePtr,
        value: u32,
        count: usize,
        stream: RawHandle,
    ) -> Result<()> {
        self.check_stream("cuMemsetD32Async", stream)?;
        if dst % 4 != 0 {
            return Err(invalid_value(
                "cuMemsetD32Async",
                format!("{dst:#x} is not 4-byte aligned"),
            ));
        }
        if !self
            .read_mem("cuMemsetD32Async")?
            .contains(dst, (count as u64).saturating_mul(4))
        {
            return Err(mem_fault("cuMemsetD32Async", dst, count.saturating_mul(4)));
        }
        let buf: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), count)
            .flatten()
            .collect();
        self.read_mem("cuMemsetD32Async")?
            .write(dst, &buf)
            .map_err(|_| mem_fault("cuMemsetD32Async", dst, count.saturating_mul(4)))
    }
    fn stream_create(&self) -> Result<RawHandle> {
        let mut h = self.handles("cuStreamCreate")?;
        let id = h.fresh();
        h.streams.insert(id, ());
        Ok(RawHandle(id))
    }
    fn stream_destroy(&self, stream: RawHandle) -> Result<()> {
        match self
            .handles("cuStreamDestroy_v2")?
            .streams
            .remove(&stream.0)
        {
            Some(()) => Ok(()),
            None => Err(invalid_handle("cuStreamDestroy_v2", stream)),
        }
    }
    fn stream_synchronize(&self, stream: RawHandle) -> Result<()> {
        self.check_stream("cuStreamSynchronize", stream)
    }
    fn stream_query(&self, stream: RawHandle) -> Result<bool> {
        self.check_stream("cuStreamQuery", stream).map(|()| true)
    }
    fn stream_wait_event(&self, stream: RawHandle, event: RawHandle) -> Result<()> {
        self.check_stream("cuStreamWaitEvent", stream)?;
        self.event_synchronize(event)
    }
    fn event_create(&self, _timing: bool) -> Result<RawHandle> {
        let mut h = self.handles("cuEventCreate")?;
        let id = h.fresh();
        h.events.insert(id, None);
        Ok(RawHandle(id))
    }
    fn event_destroy(&self, event: RawHandle) -> Result<()> {
        match self.handles("cuEventDestroy_v2")?.events.remove(&event.0) {
            Some(_) => Ok(()),
            None => Err(invalid_handle("cuEventDestroy_v2", event)),
        }
    }
    fn event_record(&self, event: RawHandle, stream: RawHandle) -> Result<()> {
        self.check_stream("cuEventRecord", stream)?;
        match self.handles("cuEventRecord")?.events.get_mut(&event.0) {
            Some(t) => {
                *t = Some(Instant::now());
                Ok(())
            }
            None => Err(invalid_handle("cuEventRecord", event)),
        }
    }
    fn event_synchronize(&self, event: RawHandle) -> Result<()> {
        if self
            .handles("cuEventSynchronize")?
            .events
            .contains_key(&event.0)
        {
            Ok(())
        } else {
            Err(invalid_handle("cuEventSynchronize", event))
        }
    }
    fn event_query(&self, event: RawHandle) -> Result<bool> {
        self.event_synchronize(event).map(|()| true)
    }
    fn event_elapsed_ms(&self, start: RawHandle, end: RawHandle) -> Result<f32> {
        let h = self.handles("cuEventElapsedTime")?;
        let get = |e: RawHandle| match h.events.get(&e.0) {
            Some(Some(t)) => Ok(*t),
            Some(None) => Err(driver_error(
                "cuEventElapsedTime",
                600,
                "CUDA_ERROR_NOT_READY",
                "event not recorded",
            )),
            None => Err(invalid_handle("cuEventElapsedTime", e)),
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
        let launch_err = |message: String| Error::Launch {
            kernel: req.name.to_string(),
            message,
        };
        self.check_stream("cuLaunchKernel", req.stream)?;
        let (kernel, max_dynamic) = {
            let h = self.handles("cuLaunchKernel")?;
            let f = h
                .functions
                .get(&req.function.0)
                .ok_or_else(|| invalid_handle("cuLaunchKernel", req.function))?;
            (f.kernel.clone(), f.max_dynamic_shared)
        };
        let [bx, by, bz] = req.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        if threads == 0 || threads > 1024 || bz > 64 {
            return Err(launch_err(format!(
                "block {:?} is outside the device limits (1..=1024 threads, z <= 64)",
                req.block
            )));
        }
        if req.grid.contains(&0)
            || req.grid[1] > 65535
            || req.grid[2] > 65535
            || req.grid[0] > i32::MAX as u32
        {
            return Err(launch_err(format!(
                "grid {:?} is outside the device limits",
                req.grid
            )));
        }
        if let Some(r) = kernel.reqntid {
            if r != req.block {
                return Err(launch_err(format!(
                    "the kernel requires block {r:?} (.reqntid), launched with {:?}",
                    req.block
                )));
            }
        }
        if let Some(m) = kernel.maxntid {
            if threads > (m[0] * m[1] * m[2]) as u64 {
                return Err(launch_err(format!(
                    "block {:?} exceeds the kernel's .maxntid {m:?}",
                    req.block
                )));
            }
        }
        if req.shared_mem_bytes > max_dynamic {
            return Err(launch_err(format!(
                "{} bytes of dynamic shared memory exceed the function's limit of {max_dynamic} bytes (raise it with the max dynamic shared memory attribute)",
                req.shared_mem_bytes
            )));
        }
        let optin = self.config.max_shared_per_block_optin as u64;
        if kernel.static_shared as u64 + req.shared_mem_bytes as u64 > optin {
            return Err(launch_err(format!(
                "{} bytes of static and {} bytes of dynamic shared memory exceed the device's {optin} bytes per block",
                kernel.static_shared, req.shared_mem_bytes
            )));
        }
        if req.args.len() != kernel.params.len() {
            return Err(launch_err(format!(
                "{} arguments for {} kernel parameters",
                req.args.len(),
                kernel.params.len()
            )));
        }
        let mut params = vec![0u8; kernel.param_bytes as usize];
        for (i, (arg, slot)) in req.args.iter().zip(&kernel.params).enumerate() {
            let b = arg.as_bytes();
            if b.len() != slot.size as usize {
                return Err(launch_err(format!(
                    "argument {i} has {} bytes, the parameter has {}",
                    b.len(),
                    slot.size
                )));
            }
            params[slot.offset as usize..slot.offset as usize + b.len()].copy_from_slice(b);
        }
        self.run(&kernel, req, &params)
    }
}

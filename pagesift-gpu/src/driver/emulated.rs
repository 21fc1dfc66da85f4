//! The emulated device as a [`Backend`]: maps the trait's calls onto the [`Emulator`] API
//! (`crate::emulator`), one to one. The emulator has one device (ordinal 0) with one context;
//! raw handles become its typed handles unchecked (the emulator rejects unknown ones).

use super::backend::{
    Backend, BackendKind, DeviceProps, DevicePtr, FunctionAttributes, LaunchRequest,
    ModuleLoadError, RawHandle,
};
use crate::emulator::{
    self, Emulator, EmulatorConfig, EventId, FunctionId, KernelLaunch, ModuleId, StreamId,
};
use crate::error::{Error, Result};

/// The CUDA version the emulated device reports (`cuDriverGetVersion`: 12.9).
const DRIVER_VERSION: i32 = 12090;

/// An [`Emulator`] behind the [`Backend`] trait.
pub(crate) struct EmulatedBackend(Emulator);

impl EmulatedBackend {
    /// A new emulated device with the given configuration.
    pub(crate) fn new(config: EmulatorConfig) -> EmulatedBackend {
        EmulatedBackend(Emulator::new(config))
    }

    /// The emulated device configured from the environment (`EmulatorConfig::from_env`).
    pub(crate) fn from_env() -> Result<EmulatedBackend> {
        Ok(EmulatedBackend(Emulator::from_env()?))
    }
}

fn stream(h: RawHandle) -> StreamId {
    StreamId(h.0)
}

fn event(h: RawHandle) -> EventId {
    EventId(h.0)
}

fn module(h: RawHandle) -> ModuleId {
    ModuleId(h.0)
}

fn function(h: RawHandle) -> FunctionId {
    FunctionId(h.0)
}

fn device_zero(ordinal: usize) -> Result<()> {
    if ordinal == 0 {
        Ok(())
    } else {
        Err(Error::NoSuchDevice { ordinal, count: 1 })
    }
}

impl Backend for EmulatedBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulated
    }
    fn library(&self) -> &str {
        "pagesift emulator (PTX interpreted on the CPU)"
    }
    fn driver_version(&self) -> Result<i32> {
        Ok(DRIVER_VERSION)
    }
    fn driver_version_string(&self) -> Option<String> {
        None
    }
    fn device_count(&self) -> Result<usize> {
        Ok(1)
    }
    fn device_props(&self, ordinal: usize) -> Result<DeviceProps> {
        device_zero(ordinal)?;
        let c = self.0.config();
        Ok(DeviceProps {
            name: c.name.clone(),
            compute_capability: c.compute_capability,
            sm_count: c.sm_count,
            max_threads_per_sm: c.max_threads_per_sm,
            total_memory: c.memory_capacity,
            l2_cache_bytes: emulator::L2_CACHE_BYTES,
            max_shared_per_block: c.max_shared_per_block,
            max_shared_per_block_optin: c.max_shared_per_block_optin,
            warp_size: emulator::WARP_SIZE,
            max_threads_per_block: emulator::MAX_THREADS_PER_BLOCK,
            max_block_dim: emulator::MAX_BLOCK_DIM,
            max_grid_dim: emulator::MAX_GRID_DIM,
        })
    }

    fn primary_context_retain(&self, ordinal: usize) -> Result<RawHandle> {
        device_zero(ordinal)?;
        Ok(RawHandle(1))
    }
    fn primary_context_release(&self, _ordinal: usize) -> Result<()> {
        Ok(())
    }
    fn set_current(&self, _ctx: RawHandle) -> Result<()> {
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        self.0.memory_info()
    }
    fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.0.alloc(bytes)
    }
    fn mem_free(&self, ptr: DevicePtr) -> Result<()> {
        self.0.free(ptr)
    }
    fn mem_alloc_async(&self, bytes: usize, s: RawHandle) -> Result<DevicePtr> {
        self.0.alloc_async(bytes, stream(s))
    }
    fn mem_free_async(&self, ptr: DevicePtr, s: RawHandle) -> Result<()> {
        self.0.free_async(ptr, stream(s))
    }
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        self.0.alloc_host(bytes)
    }
    unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
        // SAFETY: the trait's contract is `free_host`'s: `ptr` came from `host_alloc`, which is
        // `alloc_host` of this emulator, and is not used afterwards.
        unsafe { self.0.free_host(ptr) }
    }

    fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.0.copy_to(dst, src)
    }
    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.0.copy_from(dst, src)
    }
    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        s: RawHandle,
    ) -> Result<()> {
        self.0.copy_within(dst, src, bytes, stream(s))
    }
    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        s: RawHandle,
    ) -> Result<()> {
        // SAFETY: the trait's contract is `copy_to_async`'s: the host memory stays valid and
        // unchanged until the stream has passed the copy.
        unsafe { self.0.copy_to_async(dst, src, bytes, stream(s)) }
    }
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        s: RawHandle,
    ) -> Result<()> {
        // SAFETY: the trait's contract is `copy_from_async`'s: the host memory stays valid and
        // untouched until the stream has passed the copy.
        unsafe { self.0.copy_from_async(dst, src, bytes, stream(s)) }
    }
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, s: RawHandle) -> Result<()> {
        self.0.memset_u8(dst, value, bytes, stream(s))
    }
    fn memset_d32(&self, dst: DevicePtr, value: u32, count: usize, s: RawHandle) -> Result<()> {
        self.0.memset_u32(dst, value, count, stream(s))
    }

    fn stream_create(&self) -> Result<RawHandle> {
        Ok(RawHandle(self.0.create_stream()?.0))
    }
    fn stream_destroy(&self, s: RawHandle) -> Result<()> {
        self.0.destroy_stream(stream(s))
    }
    fn stream_synchronize(&self, s: RawHandle) -> Result<()> {
        self.0.synchronize_stream(stream(s))
    }
    fn stream_query(&self, s: RawHandle) -> Result<bool> {
        self.0.query_stream(stream(s))
    }
    fn stream_wait_event(&self, s: RawHandle, e: RawHandle) -> Result<()> {
        self.0.wait_event(stream(s), event(e))
    }

    fn event_create(&self, _timing: bool) -> Result<RawHandle> {
        Ok(RawHandle(self.0.create_event()?.0))
    }
    fn event_destroy(&self, e: RawHandle) -> Result<()> {
        self.0.destroy_event(event(e))
    }
    fn event_record(&self, e: RawHandle, s: RawHandle) -> Result<()> {
        self.0.record_event(event(e), stream(s))
    }
    fn event_synchronize(&self, e: RawHandle) -> Result<()> {
        self.0.synchronize_event(event(e))
    }
    fn event_query(&self, e: RawHandle) -> Result<bool> {
        self.0.query_event(event(e))
    }
    fn event_elapsed_ms(&self, start: RawHandle, end: RawHandle) -> Result<f32> {
        self.0.elapsed_ms(event(start), event(end))
    }

    fn module_load(&self, ptx: &str) -> std::result::Result<RawHandle, ModuleLoadError> {
        match self.0.load_ptx(ptx) {
            Ok(m) => Ok(RawHandle(m.0)),
            Err(e) => Err(ModuleLoadError {
                error: e.error,
                log: e.log,
            }),
        }
    }
    fn module_unload(&self, m: RawHandle) -> Result<()> {
        self.0.unload(module(m))
    }
    fn module_function(&self, m: RawHandle, name: &str) -> Result<RawHandle> {
        Ok(RawHandle(self.0.function(module(m), name)?.0))
    }
    fn function_attributes(&self, f: RawHandle) -> Result<FunctionAttributes> {
        let info = self.0.function_info(function(f))?;
        Ok(FunctionAttributes {
            num_regs: info.registers,
            static_shared_bytes: info.static_shared_bytes,
            local_bytes: info.local_bytes,
            max_threads_per_block: info.max_threads_per_block,
        })
    }
    fn occupancy_blocks_per_sm(
        &self,
        f: RawHandle,
        block_threads: u32,
        dynamic_shared: u32,
    ) -> Result<u32> {
        self.0
            .blocks_per_sm(function(f), block_threads, dynamic_shared)
    }
    fn tensor_map_encode_tiled(
        &self,
        spec: &crate::driver::TensorMapSpec,
    ) -> Result<[u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]> {
        self.0.tensor_map_encode_tiled(spec)
    }

    fn function_set_max_dynamic_shared(&self, f: RawHandle, bytes: u32) -> Result<()> {
        self.0.set_max_dynamic_shared(function(f), bytes)
    }

    /// The entry name travels with the function in the emulator, so `request.name` (the same
    /// entry) is not passed on.
    fn launch(&self, request: &LaunchRequest<'_>) -> Result<()> {
        let args: Vec<&[u8]> = request.args.iter().map(|a| a.as_bytes()).collect();
        self.0.launch(&KernelLaunch {
            function: function(request.function),
            grid: request.grid,
            block: request.block,
            shared_mem_bytes: request.shared_mem_bytes,
            stream: stream(request.stream),
            args: &args,
        })
    }
}

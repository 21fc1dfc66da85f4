//! The NVIDIA driver backend: `libcuda` through libloading, in three layers: [`sys`] (the
//! function table), [`result`] (one thin `unsafe fn` per call returning `Result`) and
//! [`CudaBackend`] (the `Backend` implementation the safe types use).
//!
//! The driver is loaded and initialized once per process, on first use; the outcome, success
//! or the error, is remembered.

pub mod result;
pub mod sys;

use std::ffi::{c_char, c_void};
use std::sync::{Arc, OnceLock};

use self::result::Driver;
use super::backend::{
    Backend, BackendKind, DeviceProps, DevicePtr, FunctionAttributes, KernelArg, LaunchRequest,
    ModuleLoadError, RawHandle,
};
use crate::error::{self, Error, Result};

/// The most kernel parameters passed without a heap allocation.
const STACK_ARGS: usize = 32;

/// The `Backend` over the NVIDIA driver. There is one per process: `CudaBackend::global`.
pub struct CudaBackend {
    driver: Driver,
    version_string: OnceLock<Option<String>>,
}

static GLOBAL: OnceLock<std::result::Result<Arc<CudaBackend>, Error>> = OnceLock::new();

impl CudaBackend {
    /// The process-wide driver backend: loads `PAGESIFT_GPU_LIB` (or `libcuda.so.1`, then
    /// `libcuda.so`) and calls `cuInit` on first use.
    ///
    /// Errors: [`Error::DriverNotFound`], [`Error::MissingSymbol`], or [`Error::Driver`] from
    /// `cuInit`; the same error again on every later call.
    pub(crate) fn global() -> Result<Arc<CudaBackend>> {
        match GLOBAL.get_or_init(|| {
            Driver::open().map(|driver| {
                Arc::new(CudaBackend {
                    driver,
                    version_string: OnceLock::new(),
                })
            })
        }) {
            Ok(b) => Ok(Arc::clone(b)),
            Err(e) => Err(replicate(e)),
        }
    }

    /// The 16-byte UUID of a device (needs a driver with `cuDeviceGetUuid_v2`).
    pub(crate) fn device_uuid(&self, ordinal: usize) -> Result<[u8; 16]> {
        let dev = self.device(ordinal)?;
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { self.driver.device_uuid(dev) }
    }

    fn device(&self, ordinal: usize) -> Result<sys::CUdevice> {
        let ordinal =
            i32::try_from(ordinal).map_err(|_| Error::NoSuchDevice { ordinal, count: 0 })?;
        // SAFETY: the driver is initialized.
        Ok(unsafe { self.driver.device_get(ordinal) }?)
    }

    fn attr(&self, dev: sys::CUdevice, attrib: i32) -> Result<u32> {
        // SAFETY: `dev` came from cuDeviceGet.
        let v = unsafe { self.driver.device_attribute(attrib, dev) }?;
        Ok(v.max(0) as u32)
    }
}

/// Rebuilds a remembered load error (errors are not `Clone`).
fn replicate(e: &Error) -> Error {
    match e {
        Error::DriverNotFound(e) => Error::DriverNotFound(e.clone()),
        Error::MissingSymbol(e) => Error::MissingSymbol(e.clone()),
        Error::Driver(d) => Error::Driver(d.clone()),
        Error::Config(c) => Error::Config(c.clone()),
        other => Error::from(error::Unsupported {
            kernel: "NVIDIA driver".into(),
            reason: other.to_string(),
        }),
    }
}

fn ptr<T>(h: RawHandle) -> *mut T {
    h.0 as *mut T
}

fn handle<T>(p: *mut T) -> RawHandle {
    RawHandle(p as usize)
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn library(&self) -> &str {
        &self.driver.library
    }

    fn driver_version(&self) -> Result<i32> {
        // SAFETY: the driver is initialized.
        Ok(unsafe { self.driver.driver_version() }?)
    }

    fn driver_version_string(&self) -> Option<String> {
        self.version_string.get_or_init(nvml_driver_version).clone()
    }

    fn device_count(&self) -> Result<usize> {
        // SAFETY: the driver is initialized.
        Ok(unsafe { self.driver.device_count() }?.max(0) as usize)
    }

    fn device_props(&self, ordinal: usize) -> Result<DeviceProps> {
        use sys::attr::*;
        let dev = self.device(ordinal)?;
        // SAFETY: `dev` came from cuDeviceGet.
        let name = unsafe { self.driver.device_name(dev) }?;
        // SAFETY: as above.
        let total_memory = unsafe { self.driver.device_total_mem(dev) }?;
        Ok(DeviceProps {
            name,
            compute_capability: (
                self.attr(dev, COMPUTE_CAPABILITY_MAJOR)?,
                self.attr(dev, COMPUTE_CAPABILITY_MINOR)?,
            ),
            sm_count: self.attr(dev, MULTIPROCESSOR_COUNT)?,
            max_threads_per_sm: self.attr(dev, MAX_THREADS_PER_MULTIPROCESSOR)?,
            total_memory,
            l2_cache_bytes: self.attr(dev, L2_CACHE_SIZE)?,
            max_shared_per_block: self.attr(dev, MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: self.attr(dev, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            warp_size: self.attr(dev, WARP_SIZE)?,
            max_threads_per_block: self.attr(dev, MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                self.attr(dev, MAX_BLOCK_DIM_X)?,
                self.attr(dev, MAX_BLOCK_DIM_Y)?,
                self.attr(dev, MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                self.attr(dev, MAX_GRID_DIM_X)?,
                self.attr(dev, MAX_GRID_DIM_Y)?,
                self.attr(dev, MAX_GRID_DIM_Z)?,
            ],
        })
    }

    fn primary_context_retain(&self, ordinal: usize) -> Result<RawHandle> {
        let dev = self.device(ordinal)?;
        // SAFETY: `dev` came from cuDeviceGet; the safe layer pairs this with one release.
        Ok(handle(unsafe { self.driver.primary_ctx_retain(dev) }?))
    }

    fn primary_context_release(&self, ordinal: usize) -> Result<()> {
        let dev = self.device(ordinal)?;
        // SAFETY: the safe layer releases once per retain, after dropping the context's objects.
        Ok(unsafe { self.driver.primary_ctx_release(dev) }?)
    }

    fn set_current(&self, ctx: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a context it holds retained.
        Ok(unsafe { self.driver.ctx_set_current(ptr(ctx)) }?)
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: the safe layer made a context current.
        Ok(unsafe { self.driver.ctx_synchronize() }?)
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        // SAFETY: the safe layer made a context current.
        Ok(unsafe { self.driver.mem_get_info() }?)
    }

    fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr> {
        // SAFETY: the safe layer made a context current.
        unsafe { self.driver.mem_alloc(bytes) }
    }

    fn mem_free(&self, ptr: DevicePtr) -> Result<()> {
        // SAFETY: the safe layer frees each allocation once, in its context, when no handle to
        // it remains.
        Ok(unsafe { self.driver.mem_free(ptr) }?)
    }

    fn mem_alloc_async(&self, bytes: usize, stream: RawHandle) -> Result<DevicePtr> {
        if !self.driver.has_async_alloc() {
            return self.mem_alloc(bytes);
        }
        // SAFETY: the safe layer made a context current and passes a live stream.
        unsafe { self.driver.mem_alloc_async(bytes, ptr(stream)) }
    }

    fn mem_free_async(&self, dptr: DevicePtr, stream: RawHandle) -> Result<()> {
        if !self.driver.has_async_alloc() {
            // `cuMemFree` waits for the device; the stream's work is done once it returns.
            return self.mem_free(dptr);
        }
        // SAFETY: the safe layer frees each allocation once, ordered after every piece of work
        // that uses it, and passes a live stream.
        unsafe { self.driver.mem_free_async(dptr, ptr(stream)) }
    }

    fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        // SAFETY: the safe layer made a context current.
        unsafe { self.driver.mem_host_alloc(bytes) }
    }

    unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
        // SAFETY: by the caller.
        Ok(unsafe { self.driver.mem_free_host(ptr) }?)
    }

    fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the safe layer passes a live device range of at least `src.len()` bytes.
        Ok(unsafe { self.driver.memcpy_htod(dst, src.as_ptr(), src.len()) }?)
    }

    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        // SAFETY: the safe layer passes a live device range of at least `dst.len()` bytes.
        Ok(unsafe { self.driver.memcpy_dtoh(dst.as_mut_ptr(), src, dst.len()) }?)
    }

    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        // SAFETY: the safe layer passes live device ranges and a live stream.
        Ok(unsafe { self.driver.memcpy_dtod_async(dst, src, bytes, ptr(stream)) }?)
    }

    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        // SAFETY: by the caller.
        Ok(unsafe { self.driver.memcpy_htod_async(dst, src, bytes, ptr(stream)) }?)
    }

    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()> {
        // SAFETY: by the caller.
        Ok(unsafe { self.driver.memcpy_dtoh_async(dst, src, bytes, ptr(stream)) }?)
    }

    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, stream: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a live device range and a live stream.
        Ok(unsafe { self.driver.memset_d8_async(dst, value, bytes, ptr(stream)) }?)
    }

    fn memset_d32(
        &self,
        dst: DevicePtr,
        value: u32,
        count: usize,
        stream: RawHandle,
    ) -> Result<()> {
        // SAFETY: the safe layer passes a live, aligned device range and a live stream.
        Ok(unsafe { self.driver.memset_d32_async(dst, value, count, ptr(stream)) }?)
    }

    fn stream_create(&self) -> Result<RawHandle> {
        // SAFETY: the safe layer made a context current.
        Ok(handle(unsafe { self.driver.stream_create() }?))
    }

    fn stream_destroy(&self, stream: RawHandle) -> Result<()> {
        // SAFETY: the safe layer destroys each stream it created once.
        Ok(unsafe { self.driver.stream_destroy(ptr(stream)) }?)
    }

    fn stream_synchronize(&self, stream: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a live stream.
        Ok(unsafe { self.driver.stream_synchronize(ptr(stream)) }?)
    }

    fn stream_query(&self, stream: RawHandle) -> Result<bool> {
        // SAFETY: the safe layer passes a live stream.
        Ok(unsafe { self.driver.stream_query(ptr(stream)) }?)
    }

    fn stream_wait_event(&self, stream: RawHandle, event: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a live stream and event.
        Ok(unsafe { self.driver.stream_wait_event(ptr(stream), ptr(event)) }?)
    }

    fn event_create(&self, timing: bool) -> Result<RawHandle> {
        // SAFETY: the safe layer made a context current.
        Ok(handle(unsafe { self.driver.event_create(timing) }?))
    }

    fn event_destroy(&self, event: RawHandle) -> Result<()> {
        // SAFETY: the safe layer destroys each event it created once.
        Ok(unsafe { self.driver.event_destroy(ptr(event)) }?)
    }

    fn event_record(&self, event: RawHandle, stream: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a live event and stream.
        Ok(unsafe { self.driver.event_record(ptr(event), ptr(stream)) }?)
    }

    fn event_synchronize(&self, event: RawHandle) -> Result<()> {
        // SAFETY: the safe layer passes a live event.
        Ok(unsafe { self.driver.event_synchronize(ptr(event)) }?)
    }

    fn event_query(&self, event: RawHandle) -> Result<bool> {
        // SAFETY: the safe layer passes a live event.
        Ok(unsafe { self.driver.event_query(ptr(event)) }?)
    }

    fn event_elapsed_ms(&self, start: RawHandle, end: RawHandle) -> Result<f32> {
        // SAFETY: the safe layer passes live events.
        unsafe { self.driver.event_elapsed(ptr(start), ptr(end)) }
    }

    fn module_load(&self, ptx: &str) -> std::result::Result<RawHandle, ModuleLoadError> {
        // SAFETY: the safe layer made a context current.
        match unsafe { self.driver.module_load_ptx(ptx) } {
            Ok(m) => Ok(handle(m)),
            Err((error, log)) => Err(ModuleLoadError { error, log }),
        }
    }

    fn module_unload(&self, module: RawHandle) -> Result<()> {
        // SAFETY: the safe layer unloads a module once, after its functions' last use.
        Ok(unsafe { self.driver.module_unload(ptr(module)) }?)
    }

    fn module_function(&self, module: RawHandle, name: &str) -> Result<RawHandle> {
        // SAFETY: the safe layer passes a loaded module.
        Ok(handle(unsafe {
            self.driver.module_get_function(ptr(module), name)
        }?))
    }

    fn function_attributes(&self, function: RawHandle) -> Result<FunctionAttributes> {
        use sys::func_attr::*;
        let get = |a| -> Result<u32> {
            // SAFETY: the safe layer passes a function of a loaded module.
            Ok(unsafe { self.driver.func_get_attribute(a, ptr(function)) }?.max(0) as u32)
        };
        Ok(FunctionAttributes {
            num_regs: get(NUM_REGS)?,
            static_shared_bytes: get(SHARED_SIZE_BYTES)?,
            local_bytes: get(LOCAL_SIZE_BYTES)?,
            max_threads_per_block: get(MAX_THREADS_PER_BLOCK)?,
        })
    }

    fn occupancy_blocks_per_sm(
        &self,
        function: RawHandle,
        block_threads: u32,
        dynamic_shared: u32,
    ) -> Result<u32> {
        // SAFETY: the safe layer passes a function of a loaded module.
        let v = unsafe {
            self.driver.occupancy_max_active_blocks(
                ptr(function),
                block_threads.min(i32::MAX as u32) as i32,
                dynamic_shared as usize,
            )
        }?;
        Ok(v.max(0) as u32)
    }

    fn tensor_map_encode_tiled(
        &self,
        spec: &crate::driver::TensorMapSpec,
    ) -> Result<[u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]> {
        self.driver.tensor_map_encode_tiled(spec)
    }

    fn function_set_max_dynamic_shared(&self, function: RawHandle, bytes: u32) -> Result<()> {
        let bytes = i32::try_from(bytes).map_err(|_| {
            Error::from(error::InvalidArgument {
                op: "function_set_max_dynamic_shared",
                message: format!("{bytes} bytes of shared memory"),
            })
        })?;
        // SAFETY: the safe layer passes a function of a loaded module.
        Ok(unsafe {
            self.driver.func_set_attribute(
                ptr(function),
                sys::func_attr::MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes,
            )
        }?)
    }

    fn launch(&self, request: &LaunchRequest<'_>) -> Result<()> {
        let args = request.args;
        let mut stack: [*mut c_void; STACK_ARGS] = [std::ptr::null_mut(); STACK_ARGS];
        let mut heap = Vec::new();
        let params: &mut [*mut c_void] = if args.len() <= STACK_ARGS {
            &mut stack[..args.len()]
        } else {
            heap.resize(args.len(), std::ptr::null_mut());
            &mut heap
        };
        for (p, a) in params.iter_mut().zip(args) {
            *p = a.as_bytes().as_ptr() as *mut c_void;
        }
        // SAFETY: the safe layer passes a function of a loaded module, checked limits, and one
        // argument per kernel parameter (its generated wrapper types them); the pointers point
        // into `args`, which outlives the call (the driver copies the values at launch).
        Ok(unsafe {
            self.driver.launch_kernel(
                ptr(request.function),
                request.grid,
                request.block,
                request.shared_mem_bytes,
                ptr(request.stream),
                params.as_mut_ptr(),
            )
        }?)
    }
}

/// The full driver version (e.g. `580.95.05`) from NVML, when NVML is present.
fn nvml_driver_version() -> Option<String> {
    // SAFETY: loading NVML runs its initializers, which are sound to run.
    let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }.ok()?;
    // SAFETY: `lib` is NVML and outlives the table (both are dropped at the end of this scope).
    let nvml = unsafe { sys::NvmlFunctions::load(&lib) }?;
    let mut buf = [0 as c_char; 96];
    // SAFETY: init/shutdown are paired; the version call writes at most `len` bytes,
    // NUL-terminated.
    unsafe {
        if (nvml.nvmlInit_v2)() != 0 {
            return None;
        }
        let rc = (nvml.nvmlSystemGetDriverVersion)(buf.as_mut_ptr(), buf.len() as u32);
        (nvml.nvmlShutdown)();
        if rc != 0 {
            return None;
        }
        std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_str()
            .ok()
            .map(str::to_string)
    }
}

/// Launches `function` `iters` times straight through the driver's `cuLaunchKernel` function
/// pointer, with no checks: the baseline the launch-overhead bench compares the safe API with.
/// Reports [`Error::Unsupported`] on a non-CUDA device.
///
/// # Safety
/// As [`super::Stream::launch`]: `args` match the kernel's parameters in number, size and
/// meaning, and every access the kernel makes with them is in bounds of live allocations that
/// nothing else uses meanwhile; no buffer tracks these launches. Nothing is checked: not the
/// launch shape, not the argument count.
#[doc(hidden)]
pub unsafe fn bench_raw_launch_loop(
    stream: &super::Stream,
    function: &super::Function,
    grid: [u32; 3],
    block: [u32; 3],
    args: &[KernelArg],
    iters: usize,
) -> Result<()> {
    let gpu = stream.gpu();
    if gpu.backend_kind() != BackendKind::Cuda {
        return Err(Error::from(error::Unsupported {
            kernel: function.name().to_string(),
            reason: "the raw launch loop needs the NVIDIA driver".into(),
        }));
    }
    let backend = CudaBackend::global()?;
    gpu.enter()?;
    let mut params: Vec<*mut c_void> = args
        .iter()
        .map(|a| a.as_bytes().as_ptr() as *mut c_void)
        .collect();
    let f = backend.driver.fns.cuLaunchKernel;
    let (fh, sh): (sys::CUfunction, sys::CUstream) = (ptr(function.raw()), ptr(stream.raw()));
    for _ in 0..iters {
        // SAFETY: the function belongs to a module loaded in the current context, the caller
        // passes one argument per parameter of the (benchmark) kernel, and `params` outlives
        // each call.
        let code = unsafe {
            f(
                fh,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                0,
                sh,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if code != sys::CUDA_SUCCESS {
            return Err(Error::from(backend.driver.error("cuLaunchKernel", code)));
        }
    }
    Ok(())
}

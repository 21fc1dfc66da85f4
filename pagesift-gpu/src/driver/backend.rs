//! The one narrow interface between the runtime and a device implementation.
//!
//! Everything above this trait (buffers, streams, the module cache, launch wrappers, ops) talks
//! to a device only through `Backend`. Two implementations exist: the NVIDIA driver
//! (`libcuda`, in `driver::cuda`) and, with the `emulator` feature, the emulated device that
//! executes the PTX text on the CPU (`crate::emulator`, adapted in `driver::emulated`).
//!
//! Handles are plain integers ([`RawHandle`], [`DevicePtr`]) so that the trait carries no raw
//! pointers except where host memory is handed to an asynchronous copy.

use crate::error::{DriverError, Result};

/// A device address, as `CUdeviceptr`.
pub type DevicePtr = u64;

/// An opaque handle of a backend object (context, module, function, stream, event).
/// `RawHandle(0)` is the null handle; as a stream it names the default (legacy) stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RawHandle(pub usize);

impl RawHandle {
    /// The null handle (the default stream, where a stream is meant).
    pub const NULL: RawHandle = RawHandle(0);
}

/// Which implementation stands behind a `Backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The NVIDIA driver, `libcuda`.
    Cuda,
    /// The emulated device (feature `emulator`).
    Emulated,
}

/// What the runtime needs to know about a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor), e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// The most threads resident on one streaming multiprocessor.
    pub max_threads_per_sm: u32,
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// L2 cache size in bytes.
    pub l2_cache_bytes: u32,
    /// Shared memory a block may use without opting in, in bytes.
    pub max_shared_per_block: u32,
    /// Shared memory a block may use after opting in (dynamic shared memory attribute), in bytes.
    pub max_shared_per_block_optin: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum block dimensions (x, y, z).
    pub max_block_dim: [u32; 3],
    /// Maximum grid dimensions (x, y, z).
    pub max_grid_dim: [u32; 3],
}

/// Resource usage of a loaded kernel function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionAttributes {
    /// Registers per thread.
    pub num_regs: u32,
    /// Static shared memory in bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread in bytes (spills, stack).
    pub local_bytes: u32,
    /// The most threads per block this function can be launched with.
    pub max_threads_per_block: u32,
}

/// One kernel parameter, by value, little-endian as the kernel reads it: a scalar of up to 8
/// bytes, or the bytes of a parameter struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArg {
    bytes: [u8; 8],
    len: u8,
    /// A parameter struct's bytes (then `len` is 0).
    blob: Option<Box<[u8]>>,
}

impl KernelArg {
    fn from_le(le: &[u8]) -> KernelArg {
        let mut bytes = [0u8; 8];
        bytes[..le.len()].copy_from_slice(le);
        KernelArg {
            bytes,
            len: le.len() as u8,
            blob: None,
        }
    }
    /// A device pointer parameter (`.u64` in PTX).
    pub fn ptr(p: DevicePtr) -> KernelArg {
        KernelArg::from_le(&p.to_le_bytes())
    }
    /// A parameter struct, as the bytes of its `.param` blob.
    pub fn blob(bytes: &[u8]) -> KernelArg {
        KernelArg {
            bytes: [0; 8],
            len: 0,
            blob: Some(bytes.into()),
        }
    }
    /// The parameter's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.blob {
            Some(b) => b,
            None => &self.bytes[..self.len as usize],
        }
    }
}

macro_rules! kernel_arg_from {
    ($($t:ty),*) => {$(
        impl From<$t> for KernelArg {
            fn from(v: $t) -> KernelArg { KernelArg::from_le(&v.to_le_bytes()) }
        }
    )*};
}
kernel_arg_from!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl From<bool> for KernelArg {
    fn from(v: bool) -> KernelArg {
        KernelArg::from_le(&[v as u8])
    }
}
impl From<half::f16> for KernelArg {
    fn from(v: half::f16) -> KernelArg {
        KernelArg::from_le(&v.to_bits().to_le_bytes())
    }
}
impl From<half::bf16> for KernelArg {
    fn from(v: half::bf16) -> KernelArg {
        KernelArg::from_le(&v.to_bits().to_le_bytes())
    }
}

/// A kernel launch as the backend receives it; the caller has already checked the limits.
#[derive(Clone, Copy, Debug)]
pub struct LaunchRequest<'a> {
    /// The function, from `Backend::module_function`.
    pub function: RawHandle,
    /// The kernel's entry name, for error messages.
    pub name: &'a str,
    /// Grid dimensions in blocks.
    pub grid: [u32; 3],
    /// Block dimensions in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes.
    pub shared_mem_bytes: u32,
    /// The stream (`RawHandle::NULL` for the default stream).
    pub stream: RawHandle,
    /// The parameters, in declaration order.
    pub args: &'a [KernelArg],
}

/// A failed module load: the driver's error and the JIT compiler's log.
#[derive(Clone, Debug)]
pub struct ModuleLoadError {
    /// The driver's error.
    pub error: DriverError,
    /// The JIT error log, followed by its info log.
    pub log: String,
}

/// A device implementation: the NVIDIA driver, or the emulated device.
///
/// Crate-private: its methods take raw handles and addresses that nothing checks (a made-up
/// stream handle, a freed or foreign address), so no safe code outside the crate may call them
/// or implement them. The safe types are the only users.
///
/// Methods that act on device state assume the context of the device is current on the calling
/// thread (see [`Backend::set_current`]); the safe layer guarantees this.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Which implementation this is.
    fn kind(&self) -> BackendKind;
    /// The library (or emulator description) this backend was loaded from.
    fn library(&self) -> &str;
    /// The CUDA version the driver supports, as `cuDriverGetVersion` reports it (13000 = 13.0).
    fn driver_version(&self) -> Result<i32>;
    /// The full driver version string (e.g. `580.159.04`) where it can be found (NVML).
    fn driver_version_string(&self) -> Option<String>;
    /// Number of devices.
    fn device_count(&self) -> Result<usize>;
    /// The properties of one device.
    fn device_props(&self, ordinal: usize) -> Result<DeviceProps>;

    /// Retains the primary context of a device.
    fn primary_context_retain(&self, ordinal: usize) -> Result<RawHandle>;
    /// Releases the primary context retained by [`Backend::primary_context_retain`].
    fn primary_context_release(&self, ordinal: usize) -> Result<()>;
    /// Makes a context current on the calling thread.
    fn set_current(&self, ctx: RawHandle) -> Result<()>;
    /// Waits for all work of the current context.
    fn synchronize(&self) -> Result<()>;

    /// Free and total device memory, in bytes.
    fn mem_info(&self) -> Result<(usize, usize)>;
    /// Allocates device memory; `bytes` is never 0. Failure for lack of memory is
    /// [`crate::Error::OutOfMemory`].
    fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr>;
    /// Frees device memory from [`Backend::mem_alloc`].
    fn mem_free(&self, ptr: DevicePtr) -> Result<()>;
    /// Allocates device memory ordered on `stream` (`cuMemAllocAsync`; plain `cuMemAlloc` where
    /// the driver lacks the stream-ordered allocator): work on `stream` may use it at once,
    /// other streams after an event recorded on `stream` after this call. `bytes` is never 0.
    fn mem_alloc_async(&self, bytes: usize, stream: RawHandle) -> Result<DevicePtr>;
    /// Frees memory from [`Backend::mem_alloc`] or [`Backend::mem_alloc_async`] in stream
    /// order: the memory stays valid for every piece of work `stream` runs before it reaches
    /// the free (`cuMemFreeAsync`; where the driver lacks it, after waiting for `stream`).
    fn mem_free_async(&self, ptr: DevicePtr, stream: RawHandle) -> Result<()>;
    /// Allocates page-locked host memory; `bytes` is never 0. The memory is `bytes` long and
    /// aligned to at least 16 bytes (the safe layer writes all of it).
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8>;
    /// Frees memory from [`Backend::host_alloc`].
    ///
    /// # Safety
    /// `ptr` came from `host_alloc` of this backend and is not used afterwards.
    unsafe fn host_free(&self, ptr: *mut u8) -> Result<()>;

    /// Copies host memory to the device, synchronously.
    fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// Copies device memory to the host, synchronously.
    fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()>;
    /// Copies device memory to device memory, ordered on `stream`.
    fn memcpy_dtod(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()>;
    /// Copies host memory to the device, asynchronously on `stream`.
    ///
    /// # Safety
    /// `src..src+bytes` stays valid and unchanged until the stream has passed this copy.
    unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()>;
    /// Copies device memory to the host, asynchronously on `stream`.
    ///
    /// # Safety
    /// `dst..dst+bytes` stays valid and is not otherwise accessed until the stream has passed
    /// this copy.
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: RawHandle,
    ) -> Result<()>;
    /// Sets `bytes` bytes of device memory to `value`, ordered on `stream`.
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize, stream: RawHandle) -> Result<()>;
    /// Sets `count` 32-bit words of device memory to `value`, ordered on `stream`.
    fn memset_d32(&self, dst: DevicePtr, value: u32, count: usize, stream: RawHandle)
        -> Result<()>;

    /// Creates a stream (non-blocking with respect to the default stream).
    fn stream_create(&self) -> Result<RawHandle>;
    /// Destroys a stream.
    fn stream_destroy(&self, stream: RawHandle) -> Result<()>;
    /// Waits until all work on `stream` is done.
    fn stream_synchronize(&self, stream: RawHandle) -> Result<()>;

    /// Whether all work queued on `stream` is done (never waits).
    fn stream_query(&self, stream: RawHandle) -> Result<bool>;
    /// Makes work queued on `stream` after this call wait until `event`'s recorded point is
    /// reached (an event never recorded is already reached). The wait is for the record made
    /// most recently before this call: recording the event again later (the stream-ordered
    /// buffers re-record one event per stream) does not change it, as in CUDA.
    fn stream_wait_event(&self, stream: RawHandle, event: RawHandle) -> Result<()>;

    /// Creates an event (with timing when `timing`).
    fn event_create(&self, timing: bool) -> Result<RawHandle>;
    /// Destroys an event.
    fn event_destroy(&self, event: RawHandle) -> Result<()>;
    /// Records an event on a stream (replacing its previous record for later waits and
    /// queries; waits queued before keep the point they were given).
    fn event_record(&self, event: RawHandle, stream: RawHandle) -> Result<()>;
    /// Waits for an event.
    fn event_synchronize(&self, event: RawHandle) -> Result<()>;
    /// Whether the work before `event`'s recorded point is done (never waits; an event never
    /// recorded is done).
    fn event_query(&self, event: RawHandle) -> Result<bool>;
    /// Milliseconds between two recorded events.
    fn event_elapsed_ms(&self, start: RawHandle, end: RawHandle) -> Result<f32>;

    /// Loads a module from PTX text; a JIT failure returns the driver's log.
    fn module_load(&self, ptx: &str) -> std::result::Result<RawHandle, ModuleLoadError>;
    /// Unloads a module.
    fn module_unload(&self, module: RawHandle) -> Result<()>;
    /// Looks up a kernel entry in a loaded module.
    fn module_function(&self, module: RawHandle, name: &str) -> Result<RawHandle>;
    /// The register and memory use of a function.
    fn function_attributes(&self, function: RawHandle) -> Result<FunctionAttributes>;
    /// How many blocks of `block_threads` threads and `dynamic_shared` bytes of dynamic shared
    /// memory of `function` one multiprocessor holds at once (by registers, shared memory and
    /// thread slots; `cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    fn occupancy_blocks_per_sm(
        &self,
        function: RawHandle,
        block_threads: u32,
        dynamic_shared: u32,
    ) -> Result<u32>;
    /// Allows a function up to `bytes` of dynamic shared memory (the opt-in attribute).
    fn function_set_max_dynamic_shared(&self, function: RawHandle, bytes: u32) -> Result<()>;

    /// Launches a kernel.
    fn launch(&self, request: &LaunchRequest<'_>) -> Result<()>;

    /// Encodes a tiled tensor map (`cuTensorMapEncodeTiled`) that [`TensorMap::tiled`]
    /// validated: the 128 bytes a kernel parameter `TensorMap<T, ..>` carries.
    ///
    /// [`TensorMap::tiled`]: super::TensorMap::tiled
    fn tensor_map_encode_tiled(
        &self,
        spec: &super::TensorMapSpec,
    ) -> Result<[u8; super::tensor_map::TENSOR_MAP_BYTES]>;
}

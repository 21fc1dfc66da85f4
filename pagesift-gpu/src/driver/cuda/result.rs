//! Layer 2: one thin `unsafe fn` per driver call, each returning `Result` with a
//! [`DriverError`] that names the call, the code, and the driver's own name and message for it.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr;

use super::sys::{
    self, CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream,
};
use crate::error::{self, DriverError, Error, Result};

/// The loaded driver library and its function table.
pub struct Driver {
    /// The entry points. They stay valid while `_lib` is loaded.
    pub fns: sys::Functions,
    /// The library name or path that was loaded.
    pub library: String,
    _lib: libloading::Library,
}

/// The library names tried when `PAGESIFT_GPU_LIB` is not set, in order.
#[cfg(not(windows))]
pub const DEFAULT_LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];
/// The library names tried when `PAGESIFT_GPU_LIB` is not set, in order.
#[cfg(windows)]
pub const DEFAULT_LIBRARIES: &[&str] = &["nvcuda.dll"];

/// The libraries to try: `PAGESIFT_GPU_LIB` alone when it is set (and not empty), else the
/// default names.
pub fn candidate_libraries() -> Vec<String> {
    match std::env::var("PAGESIFT_GPU_LIB") {
        Ok(path) if !path.is_empty() => vec![path],
        _ => DEFAULT_LIBRARIES.iter().map(|s| s.to_string()).collect(),
    }
}

/// Refuses a `PAGESIFT_GPU_LIB` path that exists but is not a regular file after resolving
/// symlinks (a FIFO would block `dlopen` forever, a directory or device makes no sense):
/// [`Error::Config`]. A path that does not exist, or a bare library name for the loader to
/// search, is left to `dlopen` (and so to [`Error::DriverNotFound`]).
pub(crate) fn check_library_path(path: &str) -> Result<()> {
    if path.is_empty() || !path.contains(std::path::MAIN_SEPARATOR) {
        return Ok(());
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            let kind = file_kind(&m);
            Err(Error::from(error::Config {
                variable: crate::driver::LIBRARY_ENV,
                value: path.to_string(),
                message: format!(
                    "{kind}, not a regular file: it must name the driver library (libcuda.so.1)"
                ),
            }))
        }
        _ => Ok(()),
    }
}

/// What kind of file `m` describes, in words.
fn file_kind(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    "a special file"
}

impl Driver {
    /// Loads the driver library, resolves its entry points and calls `cuInit(0)`.
    ///
    /// Errors: [`Error::DriverNotFound`] when no candidate library loads,
    /// [`Error::MissingSymbol`] when the library lacks a required entry point, and
    /// [`Error::Driver`] when `cuInit` fails (for example with no device present).
    pub fn open() -> Result<Driver> {
        let candidates = candidate_libraries();
        if let Ok(path) = std::env::var(crate::driver::LIBRARY_ENV) {
            check_library_path(&path)?;
        }
        let mut reasons = Vec::new();
        for name in &candidates {
            // SAFETY: loading a shared library runs its initializers; the driver's (and any
            // system library's) initializers are sound to run.
            let lib = match unsafe { libloading::Library::new(name) } {
                Ok(lib) => lib,
                Err(e) => {
                    reasons.push(e.to_string().replace('\n', " "));
                    continue;
                }
            };
            // SAFETY: the table is kept together with `lib` in `Driver`, which outlives it; the
            // signatures are those of cuda.h.
            let fns = unsafe { sys::Functions::load(&lib, name) }?;
            let driver = Driver {
                fns,
                library: name.clone(),
                _lib: lib,
            };
            // SAFETY: cuInit has no preconditions.
            unsafe { driver.init() }?;
            return Ok(driver);
        }
        Err(Error::from(error::DriverNotFound {
            tried: candidates.join(", "),
            reason: reasons.join("; "),
        }))
    }

    /// Turns a `CUresult` into `Ok` or a [`DriverError`] for `call`.
    pub fn check(
        &self,
        call: &'static str,
        code: CUresult,
    ) -> std::result::Result<(), DriverError> {
        if code == sys::CUDA_SUCCESS {
            return Ok(());
        }
        Err(self.error(call, code))
    }

    /// The [`DriverError`] for a failed call, with the driver's name and message for the code.
    pub fn error(&self, call: &'static str, code: CUresult) -> DriverError {
        let mut name: *const c_char = ptr::null();
        let mut message: *const c_char = ptr::null();
        // SAFETY: both calls only write a pointer to a static string (or fail for an unknown
        // code, leaving the pointer null).
        let (name, message) = unsafe {
            let n = (self.fns.cuGetErrorName)(code, &mut name);
            let m = (self.fns.cuGetErrorString)(code, &mut message);
            (
                if n == sys::CUDA_SUCCESS {
                    cstr(name)
                } else {
                    None
                },
                if m == sys::CUDA_SUCCESS {
                    cstr(message)
                } else {
                    None
                },
            )
        };
        driver_error(call, code, name, message)
    }

    /// `cuInit(0)`.
    ///
    /// # Safety
    /// None beyond a loaded driver; marked `unsafe` as every FFI call is.
    pub unsafe fn init(&self) -> std::result::Result<(), DriverError> {
        // SAFETY: cuInit takes flags by value.
        self.check("cuInit", unsafe { (self.fns.cuInit)(0) })
    }

    /// `cuDriverGetVersion`.
    ///
    /// # Safety
    /// The driver is initialized.
    pub unsafe fn driver_version(&self) -> std::result::Result<i32, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDriverGetVersion", unsafe {
            (self.fns.cuDriverGetVersion)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGetCount`.
    ///
    /// # Safety
    /// The driver is initialized.
    pub unsafe fn device_count(&self) -> std::result::Result<i32, DriverError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetCount", unsafe {
            (self.fns.cuDeviceGetCount)(&mut n)
        })?;
        Ok(n)
    }

    /// `cuDeviceGet`.
    ///
    /// # Safety
    /// The driver is initialized.
    pub unsafe fn device_get(&self, ordinal: i32) -> std::result::Result<CUdevice, DriverError> {
        let mut d: CUdevice = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGet", unsafe {
            (self.fns.cuDeviceGet)(&mut d, ordinal)
        })?;
        Ok(d)
    }

    /// `cuDeviceGetName`.
    ///
    /// # Safety
    /// `dev` came from [`Driver::device_get`].
    pub unsafe fn device_name(&self, dev: CUdevice) -> std::result::Result<String, DriverError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
        self.check("cuDeviceGetName", unsafe {
            (self.fns.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, dev)
        })?;
        // SAFETY: buf is NUL-terminated (zero-initialized and the driver terminates).
        Ok(unsafe { cstr(buf.as_ptr()) }
            .unwrap_or_default()
            .to_string())
    }

    /// `cuDeviceGetAttribute`.
    ///
    /// # Safety
    /// `dev` came from [`Driver::device_get`].
    pub unsafe fn device_attribute(
        &self,
        attrib: c_int,
        dev: CUdevice,
    ) -> std::result::Result<i32, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetAttribute", unsafe {
            (self.fns.cuDeviceGetAttribute)(&mut v, attrib, dev)
        })?;
        Ok(v)
    }

    /// `cuDeviceTotalMem_v2`.
    ///
    /// # Safety
    /// `dev` came from [`Driver::device_get`].
    pub unsafe fn device_total_mem(
        &self,
        dev: CUdevice,
    ) -> std::result::Result<usize, DriverError> {
        let mut v: usize = 0;
        // SAFETY: writes one size_t.
        self.check("cuDeviceTotalMem_v2", unsafe {
            (self.fns.cuDeviceTotalMem_v2)(&mut v, dev)
        })?;
        Ok(v)
    }

    /// `cuDeviceGetUuid_v2`, where the driver has it.
    ///
    /// # Safety
    /// `dev` came from [`Driver::device_get`].
    pub unsafe fn device_uuid(&self, dev: CUdevice) -> Result<[u8; 16]> {
        let Some(f) = self.fns.cuDeviceGetUuid_v2 else {
            return Err(Error::from(error::Unsupported {
                kernel: "device UUID".into(),
                reason: "the driver lacks cuDeviceGetUuid_v2 (needs CUDA 11.4 or newer)".into(),
            }));
        };
        let mut u = sys::CUuuid::default();
        // SAFETY: writes one CUuuid.
        self.check("cuDeviceGetUuid_v2", unsafe { f(&mut u, dev) })?;
        Ok(u.bytes.map(|b| b as u8))
    }

    /// `cuDevicePrimaryCtxRetain`.
    ///
    /// # Safety
    /// `dev` came from [`Driver::device_get`]; each retain is paired with one release.
    pub unsafe fn primary_ctx_retain(
        &self,
        dev: CUdevice,
    ) -> std::result::Result<CUcontext, DriverError> {
        let mut ctx: CUcontext = ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.fns.cuDevicePrimaryCtxRetain)(&mut ctx, dev)
        })?;
        Ok(ctx)
    }

    /// `cuDevicePrimaryCtxRelease_v2`.
    ///
    /// # Safety
    /// Pairs with an earlier retain; no object of the context is used afterwards unless another
    /// retain keeps it alive.
    pub unsafe fn primary_ctx_release(
        &self,
        dev: CUdevice,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuDevicePrimaryCtxRelease_v2", unsafe {
            (self.fns.cuDevicePrimaryCtxRelease_v2)(dev)
        })
    }

    /// `cuCtxSetCurrent`.
    ///
    /// # Safety
    /// `ctx` is a live context (or null).
    pub unsafe fn ctx_set_current(&self, ctx: CUcontext) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuCtxSetCurrent", unsafe {
            (self.fns.cuCtxSetCurrent)(ctx)
        })
    }

    /// `cuCtxSynchronize`.
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn ctx_synchronize(&self) -> std::result::Result<(), DriverError> {
        // SAFETY: no arguments.
        self.check("cuCtxSynchronize", unsafe { (self.fns.cuCtxSynchronize)() })
    }

    /// `cuMemGetInfo_v2`: (free, total) bytes.
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn mem_get_info(&self) -> std::result::Result<(usize, usize), DriverError> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t.
        self.check("cuMemGetInfo_v2", unsafe {
            (self.fns.cuMemGetInfo_v2)(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// `cuMemAlloc_v2`; lack of memory is [`Error::OutOfMemory`].
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn mem_alloc(&self, bytes: usize) -> Result<CUdeviceptr> {
        let mut p: CUdeviceptr = 0;
        // SAFETY: writes one device pointer.
        let code = unsafe { (self.fns.cuMemAlloc_v2)(&mut p, bytes) };
        self.check("cuMemAlloc_v2", code)
            .map_err(|e| alloc_error(e, bytes))?;
        Ok(p)
    }

    /// `cuMemFree_v2`.
    ///
    /// # Safety
    /// `p` came from [`Driver::mem_alloc`] in the current context and is not used afterwards.
    pub unsafe fn mem_free(&self, p: CUdeviceptr) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemFree_v2", unsafe { (self.fns.cuMemFree_v2)(p) })
    }

    /// `cuMemHostAlloc` (flags 0); lack of memory is [`Error::OutOfMemory`].
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn mem_host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer.
        let code = unsafe { (self.fns.cuMemHostAlloc)(&mut p, bytes, 0) };
        self.check("cuMemHostAlloc", code)
            .map_err(|e| alloc_error(e, bytes))?;
        Ok(p.cast())
    }

    /// `cuMemFreeHost`.
    ///
    /// # Safety
    /// `p` came from [`Driver::mem_host_alloc`], no copy using it is in flight, and it is not
    /// used afterwards.
    pub unsafe fn mem_free_host(&self, p: *mut u8) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemFreeHost", unsafe {
            (self.fns.cuMemFreeHost)(p.cast())
        })
    }

    /// `cuMemcpyHtoD_v2`.
    ///
    /// # Safety
    /// `dst..dst+bytes` is device memory of the current context; `src..src+bytes` is readable.
    pub unsafe fn memcpy_htod(
        &self,
        dst: CUdeviceptr,
        src: *const u8,
        bytes: usize,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemcpyHtoD_v2", unsafe {
            (self.fns.cuMemcpyHtoD_v2)(dst, src.cast(), bytes)
        })
    }

    /// `cuMemcpyDtoH_v2`.
    ///
    /// # Safety
    /// `src..src+bytes` is device memory of the current context; `dst..dst+bytes` is writable.
    pub unsafe fn memcpy_dtoh(
        &self,
        dst: *mut u8,
        src: CUdeviceptr,
        bytes: usize,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemcpyDtoH_v2", unsafe {
            (self.fns.cuMemcpyDtoH_v2)(dst.cast(), src, bytes)
        })
    }

    /// `cuMemcpyDtoDAsync_v2`.
    ///
    /// # Safety
    /// Both ranges are device memory of the current context; `stream` is live (or null).
    pub unsafe fn memcpy_dtod_async(
        &self,
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemcpyDtoDAsync_v2", unsafe {
            (self.fns.cuMemcpyDtoDAsync_v2)(dst, src, bytes, stream)
        })
    }

    /// `cuMemcpyHtoDAsync_v2`.
    ///
    /// # Safety
    /// As [`Driver::memcpy_htod`], and `src..src+bytes` stays valid and unchanged until the
    /// stream has passed the copy.
    pub unsafe fn memcpy_htod_async(
        &self,
        dst: CUdeviceptr,
        src: *const u8,
        bytes: usize,
        stream: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemcpyHtoDAsync_v2", unsafe {
            (self.fns.cuMemcpyHtoDAsync_v2)(dst, src.cast(), bytes, stream)
        })
    }

    /// `cuMemcpyDtoHAsync_v2`.
    ///
    /// # Safety
    /// As [`Driver::memcpy_dtoh`], and `dst..dst+bytes` stays valid and untouched until the
    /// stream has passed the copy.
    pub unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemcpyDtoHAsync_v2", unsafe {
            (self.fns.cuMemcpyDtoHAsync_v2)(dst.cast(), src, bytes, stream)
        })
    }

    /// `cuMemsetD8Async`.
    ///
    /// # Safety
    /// `dst..dst+bytes` is device memory of the current context; `stream` is live (or null).
    pub unsafe fn memset_d8_async(
        &self,
        dst: CUdeviceptr,
        value: u8,
        bytes: usize,
        stream: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemsetD8Async", unsafe {
            (self.fns.cuMemsetD8Async)(dst, value, bytes, stream)
        })
    }

    /// `cuMemsetD32Async`.
    ///
    /// # Safety
    /// `dst..dst+4*count` is 4-byte aligned device memory of the current context; `stream` is
    /// live (or null).
    pub unsafe fn memset_d32_async(
        &self,
        dst: CUdeviceptr,
        value: u32,
        count: usize,
        stream: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuMemsetD32Async", unsafe {
            (self.fns.cuMemsetD32Async)(dst, value, count, stream)
        })
    }

    /// `cuStreamCreate` with `CU_STREAM_NON_BLOCKING`.
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn stream_create(&self) -> std::result::Result<CUstream, DriverError> {
        let mut s: CUstream = ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("cuStreamCreate", unsafe {
            (self.fns.cuStreamCreate)(&mut s, sys::CU_STREAM_NON_BLOCKING)
        })?;
        Ok(s)
    }

    /// `cuStreamDestroy_v2`.
    ///
    /// # Safety
    /// `s` came from [`Driver::stream_create`] and is not used afterwards.
    pub unsafe fn stream_destroy(&self, s: CUstream) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuStreamDestroy_v2", unsafe {
            (self.fns.cuStreamDestroy_v2)(s)
        })
    }

    /// `cuStreamSynchronize`.
    ///
    /// # Safety
    /// `s` is live (or null).
    pub unsafe fn stream_synchronize(&self, s: CUstream) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuStreamSynchronize", unsafe {
            (self.fns.cuStreamSynchronize)(s)
        })
    }

    /// `cuEventCreate`.
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn event_create(&self, timing: bool) -> std::result::Result<CUevent, DriverError> {
        let flags = if timing {
            sys::CU_EVENT_DEFAULT
        } else {
            sys::CU_EVENT_DISABLE_TIMING
        };
        let mut e: CUevent = ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("cuEventCreate", unsafe {
            (self.fns.cuEventCreate)(&mut e, flags)
        })?;
        Ok(e)
    }

    /// `cuEventDestroy_v2`.
    ///
    /// # Safety
    /// `e` came from [`Driver::event_create`] and is not used afterwards.
    pub unsafe fn event_destroy(&self, e: CUevent) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuEventDestroy_v2", unsafe {
            (self.fns.cuEventDestroy_v2)(e)
        })
    }

    /// `cuEventRecord`.
    ///
    /// # Safety
    /// `e` and `s` are live (`s` may be null).
    pub unsafe fn event_record(
        &self,
        e: CUevent,
        s: CUstream,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuEventRecord", unsafe { (self.fns.cuEventRecord)(e, s) })
    }

    /// `cuEventSynchronize`.
    ///
    /// # Safety
    /// `e` is live.
    pub unsafe fn event_synchronize(&self, e: CUevent) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuEventSynchronize", unsafe {
            (self.fns.cuEventSynchronize)(e)
        })
    }

    /// `cuEventQuery`: `true` when the work before the recorded point is done.
    ///
    /// # Safety
    /// `e` is live.
    pub unsafe fn event_query(&self, e: CUevent) -> std::result::Result<bool, DriverError> {
        // SAFETY: by the caller.
        let code = unsafe { (self.fns.cuEventQuery)(e) };
        if code == sys::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        self.check("cuEventQuery", code).map(|()| true)
    }

    /// `cuStreamQuery`: `true` when all work queued on the stream is done.
    ///
    /// # Safety
    /// `s` is live (or null).
    pub unsafe fn stream_query(&self, s: CUstream) -> std::result::Result<bool, DriverError> {
        // SAFETY: by the caller.
        let code = unsafe { (self.fns.cuStreamQuery)(s) };
        if code == sys::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        self.check("cuStreamQuery", code).map(|()| true)
    }

    /// `cuStreamWaitEvent`: later work on `s` waits for the point `e` recorded.
    ///
    /// # Safety
    /// `s` (or null) and `e` are live.
    pub unsafe fn stream_wait_event(
        &self,
        s: CUstream,
        e: CUevent,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuStreamWaitEvent", unsafe {
            (self.fns.cuStreamWaitEvent)(s, e, 0)
        })
    }

    /// `cuTensorMapEncodeTiled` of a validated spec: zero fill, no interleave, element
    /// strides 1, L2 promotion of 256 bytes.
    pub fn tensor_map_encode_tiled(
        &self,
        spec: &crate::driver::TensorMapSpec,
    ) -> Result<[u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]> {
        use crate::driver::Dtype;
        let Some(f) = self.fns.cuTensorMapEncodeTiled else {
            return Err(Error::from(error::Unsupported {
                kernel: "tensor maps".into(),
                reason: format!("{} lacks cuTensorMapEncodeTiled (CUDA 12.0)", self.library),
            }));
        };
        // `CUtensorMapDataType`.
        let dtype: c_uint = match spec.dtype {
            Dtype::U8 | Dtype::I8 => 0,
            Dtype::U16 | Dtype::I16 => 1,
            Dtype::U32 => 2,
            Dtype::I32 => 3,
            Dtype::U64 => 4,
            Dtype::I64 => 5,
            Dtype::F16 => 6,
            Dtype::F32 => 7,
            Dtype::F64 => 8,
            Dtype::Bf16 => 9,
        };
        #[repr(C, align(64))]
        struct Map([u8; crate::driver::tensor_map::TENSOR_MAP_BYTES]);
        let mut map = Map([0; crate::driver::tensor_map::TENSOR_MAP_BYTES]);
        let elem_strides = [1 as c_uint; crate::driver::tensor_map::TENSOR_MAP_MAX_RANK];
        let boxes = spec.boxes.map(|b| b as c_uint);
        // SAFETY: `map` is 128 bytes aligned to 64; the arrays hold `rank` (and `rank - 1`
        // strides) values; the address is only recorded, not accessed.
        let code = unsafe {
            f(
                map.0.as_mut_ptr().cast(),
                dtype,
                spec.rank,
                spec.address as *mut c_void,
                spec.dims.as_ptr(),
                spec.strides.as_ptr(),
                boxes.as_ptr(),
                elem_strides.as_ptr(),
                0,
                spec.swizzle.code(),
                3,
                0,
            )
        };
        self.check("cuTensorMapEncodeTiled", code)?;
        Ok(map.0)
    }

    /// Whether the driver has the stream-ordered allocator (`cuMemAllocAsync` and
    /// `cuMemFreeAsync`).
    pub fn has_async_alloc(&self) -> bool {
        self.fns.cuMemAllocAsync.is_some() && self.fns.cuMemFreeAsync.is_some()
    }

    /// `cuMemAllocAsync`, ordered on `s`; lack of memory is [`Error::OutOfMemory`].
    ///
    /// # Safety
    /// A context is current; `s` is live (or null); the driver has the call
    /// ([`Driver::has_async_alloc`]).
    pub unsafe fn mem_alloc_async(&self, bytes: usize, s: CUstream) -> Result<CUdeviceptr> {
        let Some(f) = self.fns.cuMemAllocAsync else {
            return Err(missing_async(&self.library));
        };
        let mut p: CUdeviceptr = 0;
        // SAFETY: writes one device pointer.
        let code = unsafe { f(&mut p, bytes, s) };
        self.check("cuMemAllocAsync", code)
            .map_err(|e| alloc_error(e, bytes))?;
        Ok(p)
    }

    /// `cuMemFreeAsync`, ordered on `s`.
    ///
    /// # Safety
    /// `p` is device memory of the current context that no work reaches after `s` reaches the
    /// free, and it is not used afterwards.
    pub unsafe fn mem_free_async(&self, p: CUdeviceptr, s: CUstream) -> Result<()> {
        let Some(f) = self.fns.cuMemFreeAsync else {
            return Err(missing_async(&self.library));
        };
        // SAFETY: by the caller.
        Ok(self.check("cuMemFreeAsync", unsafe { f(p, s) })?)
    }

    /// `cuEventElapsedTime_v2` (or `cuEventElapsedTime` on drivers before CUDA 12.8), in
    /// milliseconds.
    ///
    /// # Safety
    /// Both events are live.
    pub unsafe fn event_elapsed(&self, start: CUevent, end: CUevent) -> Result<f32> {
        let (call, f) = match (self.fns.cuEventElapsedTime_v2, self.fns.cuEventElapsedTime) {
            (Some(f), _) => ("cuEventElapsedTime_v2", f),
            (None, Some(f)) => ("cuEventElapsedTime", f),
            (None, None) => {
                return Err(Error::from(error::Unsupported {
                    kernel: "event timing".into(),
                    reason: format!(
                        "{} exports neither cuEventElapsedTime_v2 nor cuEventElapsedTime",
                        self.library
                    ),
                }))
            }
        };
        let mut ms = 0f32;
        // SAFETY: writes one float.
        self.check(call, unsafe { f(&mut ms, start, end) })?;
        Ok(ms)
    }

    /// `cuModuleLoadDataEx` with the JIT error and info logs captured (verbose logging off).
    /// On failure the error comes with the logs, error log first.
    ///
    /// # Safety
    /// A context is current.
    pub unsafe fn module_load_ptx(
        &self,
        ptx: &str,
    ) -> std::result::Result<CUmodule, (DriverError, String)> {
        const LOG: usize = 16 * 1024;
        let image = match std::ffi::CString::new(ptx) {
            Ok(c) => c,
            Err(_) => {
                return Err((
                    driver_error(
                        "cuModuleLoadDataEx",
                        218,
                        Some("CUDA_ERROR_INVALID_PTX"),
                        Some("PTX text contains a NUL byte"),
                    ),
                    "PTX text contains a NUL byte".into(),
                ))
            }
        };
        let mut error_log = vec![0u8; LOG];
        let mut info_log = vec![0u8; LOG];
        let mut options = [
            sys::CU_JIT_ERROR_LOG_BUFFER,
            sys::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CU_JIT_INFO_LOG_BUFFER,
            sys::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CU_JIT_LOG_VERBOSE,
        ];
        // Sizes and flags travel as pointer-sized integers in the value slots (cuda.h).
        let mut values: [*mut c_void; 5] = [
            error_log.as_mut_ptr().cast(),
            LOG as *mut c_void,
            info_log.as_mut_ptr().cast(),
            LOG as *mut c_void,
            ptr::null_mut(),
        ];
        let mut module: CUmodule = ptr::null_mut();
        // SAFETY: the image is NUL-terminated; the option arrays have the same length; the log
        // buffers are as large as announced and outlive the call.
        let code = unsafe {
            (self.fns.cuModuleLoadDataEx)(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        match self.check("cuModuleLoadDataEx", code) {
            Ok(()) => Ok(module),
            Err(e) => Err((e, jit_log(&error_log, &info_log))),
        }
    }

    /// `cuModuleUnload`.
    ///
    /// # Safety
    /// `m` came from [`Driver::module_load_ptx`]; none of its functions is used afterwards.
    pub unsafe fn module_unload(&self, m: CUmodule) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuModuleUnload", unsafe { (self.fns.cuModuleUnload)(m) })
    }

    /// `cuModuleGetFunction`.
    ///
    /// # Safety
    /// `m` is a loaded module.
    pub unsafe fn module_get_function(
        &self,
        m: CUmodule,
        name: &str,
    ) -> std::result::Result<CUfunction, DriverError> {
        let Ok(cname) = std::ffi::CString::new(name) else {
            return Err(driver_error(
                "cuModuleGetFunction",
                500,
                Some("CUDA_ERROR_NOT_FOUND"),
                Some("name contains a NUL byte"),
            ));
        };
        let mut f: CUfunction = ptr::null_mut();
        // SAFETY: the name is NUL-terminated; writes one handle.
        self.check("cuModuleGetFunction", unsafe {
            (self.fns.cuModuleGetFunction)(&mut f, m, cname.as_ptr())
        })?;
        Ok(f)
    }

    /// `cuFuncGetAttribute`.
    ///
    /// # Safety
    /// `f` is a function of a loaded module.
    pub unsafe fn func_get_attribute(
        &self,
        attrib: c_int,
        f: CUfunction,
    ) -> std::result::Result<i32, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuFuncGetAttribute", unsafe {
            (self.fns.cuFuncGetAttribute)(&mut v, attrib, f)
        })?;
        Ok(v)
    }

    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
    ///
    /// # Safety
    /// `f` is a function of a loaded module.
    pub unsafe fn occupancy_max_active_blocks(
        &self,
        f: CUfunction,
        block_threads: c_int,
        dynamic_shared: usize,
    ) -> std::result::Result<i32, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuOccupancyMaxActiveBlocksPerMultiprocessor", unsafe {
            (self.fns.cuOccupancyMaxActiveBlocksPerMultiprocessor)(
                &mut v,
                f,
                block_threads,
                dynamic_shared,
            )
        })?;
        Ok(v)
    }

    /// `cuFuncSetAttribute`.
    ///
    /// # Safety
    /// `f` is a function of a loaded module.
    pub unsafe fn func_set_attribute(
        &self,
        f: CUfunction,
        attrib: c_int,
        value: i32,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        self.check("cuFuncSetAttribute", unsafe {
            (self.fns.cuFuncSetAttribute)(f, attrib, value)
        })
    }

    /// `cuLaunchKernel`.
    ///
    /// # Safety
    /// `f` is a function of a loaded module of the current context; `params` holds one pointer
    /// per kernel parameter, each to a value of the parameter's size, valid for the call; the
    /// kernel's memory accesses through those values are valid.
    pub unsafe fn launch_kernel(
        &self,
        f: CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> std::result::Result<(), DriverError> {
        // SAFETY: by the caller.
        let code = unsafe {
            (self.fns.cuLaunchKernel)(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                stream,
                params,
                ptr::null_mut(),
            )
        };
        self.check("cuLaunchKernel", code)
    }
}

/// A [`DriverError`] from the parts the driver reported; unknown codes get a generic name.
pub fn driver_error(
    call: &'static str,
    code: CUresult,
    name: Option<&str>,
    message: Option<&str>,
) -> DriverError {
    DriverError {
        call,
        code,
        name: name
            .map(str::to_string)
            .unwrap_or_else(|| format!("CUDA_ERROR_{code}")),
        message: message
            .map(str::to_string)
            .unwrap_or_else(|| "unknown error code".to_string()),
    }
}

fn missing_async(library: &str) -> Error {
    Error::from(error::Unsupported {
        kernel: "stream-ordered allocation".into(),
        reason: format!("{library} lacks cuMemAllocAsync / cuMemFreeAsync (CUDA 11.2)"),
    })
}

/// An allocation failure: lack of memory becomes [`Error::OutOfMemory`], anything else stays a
/// driver error.
pub fn alloc_error(e: DriverError, bytes: usize) -> Error {
    if e.code == sys::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory { bytes }
    } else {
        Error::from(e)
    }
}

/// The JIT log: the error log, then the info log, each up to its first NUL, trimmed.
pub fn jit_log(error_log: &[u8], info_log: &[u8]) -> String {
    let text = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).trim().to_string()
    };
    let (e, i) = (text(error_log), text(info_log));
    match (e.is_empty(), i.is_empty()) {
        (false, false) => format!("{e}\n{i}"),
        (false, true) => e,
        (true, false) => i,
        (true, true) => String::new(),
    }
}

/// Reads a C string, `None` for null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that lives long enough to be copied.
unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: by the caller.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_on_allocation_is_typed() {
        let e = driver_error(
            "cuMemAlloc_v2",
            2,
            Some("CUDA_ERROR_OUT_OF_MEMORY"),
            Some("out of memory"),
        );
        assert!(
            matches!(alloc_error(e, 1 << 40), Error::OutOfMemory { bytes } if bytes == 1 << 40)
        );
        let e = driver_error(
            "cuMemAlloc_v2",
            1,
            Some("CUDA_ERROR_INVALID_VALUE"),
            Some("invalid argument"),
        );
        match alloc_error(e, 7) {
            Error::Driver(d) => {
                assert_eq!(d.call, "cuMemAlloc_v2");
                assert_eq!(d.code, 1);
                assert_eq!(d.name, "CUDA_ERROR_INVALID_VALUE");
            }
            other => panic!("expected a driver error, got {other:?}"),
        }
    }

    #[test]
    fn unknown_codes_get_a_generic_name() {
        let e = driver_error("cuInit", 12345, None, None);
        assert_eq!(e.name, "CUDA_ERROR_12345");
        assert!(e.to_string().contains("cuInit failed"), "{e}");
        assert!(e.to_string().contains("12345"), "{e}");
    }

    #[test]
    fn jit_log_joins_error_and_info_logs() {
        let mut err = b"ptxas application ptx input, line 7; error   : syntax".to_vec();
        err.extend_from_slice(&[0, b'x', b'y']);
        let info = b"info    : 0 bytes gmem\0\0\0";
        let log = jit_log(&err, info);
        assert_eq!(
            log,
            "ptxas application ptx input, line 7; error   : syntax\ninfo    : 0 bytes gmem"
        );
        assert_eq!(jit_log(&[0; 4], &[0; 4]), "");
        assert_eq!(jit_log(b"only error", &[0]), "only error");
    }
}

//! Layer 1: the raw driver ABI. Types and constants from `cuda.h`, and a table of function
//! pointers filled from `libcuda` by libloading.
//!
//! Symbols are looked up by their current ABI names (the `_v2` forms where they exist), so the
//! table works with every driver since CUDA 11. Functions only newer drivers export are
//! `Option`s; the feature that needs one reports [`crate::Error::Unsupported`] where it is absent.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::error::{self, Error, Result};

/// `CUresult`: 0 is success.
pub type CUresult = c_int;
/// `CUdevice`: a device ordinal.
pub type CUdevice = c_int;
/// `CUdeviceptr`: a device address.
pub type CUdeviceptr = u64;
/// `CUcontext`.
pub type CUcontext = *mut c_void;
/// `CUmodule`.
pub type CUmodule = *mut c_void;
/// `CUfunction`.
pub type CUfunction = *mut c_void;
/// `CUstream`.
pub type CUstream = *mut c_void;
/// `CUevent`.
pub type CUevent = *mut c_void;
/// `CUjit_option`.
pub type CUjit_option = c_int;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CUresult = 0;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
/// `CUDA_ERROR_NOT_READY`: queried work is not complete yet.
pub const CUDA_ERROR_NOT_READY: CUresult = 600;

/// `CU_STREAM_NON_BLOCKING`: no implicit synchronization with the legacy default stream.
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DEFAULT`.
pub const CU_EVENT_DEFAULT: c_uint = 0;
/// `CU_EVENT_DISABLE_TIMING`.
pub const CU_EVENT_DISABLE_TIMING: c_uint = 2;

/// `CU_JIT_INFO_LOG_BUFFER`.
pub const CU_JIT_INFO_LOG_BUFFER: CUjit_option = 3;
/// `CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES`.
pub const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: CUjit_option = 4;
/// `CU_JIT_ERROR_LOG_BUFFER`.
pub const CU_JIT_ERROR_LOG_BUFFER: CUjit_option = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: CUjit_option = 6;
/// `CU_JIT_LOG_VERBOSE`.
pub const CU_JIT_LOG_VERBOSE: CUjit_option = 12;

/// `CUdevice_attribute` values (cuda.h).
pub mod attr {
    use std::ffi::c_int;
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub const MAX_THREADS_PER_BLOCK: c_int = 1;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X`.
    pub const MAX_BLOCK_DIM_X: c_int = 2;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y`.
    pub const MAX_BLOCK_DIM_Y: c_int = 3;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z`.
    pub const MAX_BLOCK_DIM_Z: c_int = 4;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X`.
    pub const MAX_GRID_DIM_X: c_int = 5;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y`.
    pub const MAX_GRID_DIM_Y: c_int = 6;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z`.
    pub const MAX_GRID_DIM_Z: c_int = 7;
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK`.
    pub const MAX_SHARED_MEMORY_PER_BLOCK: c_int = 8;
    /// `CU_DEVICE_ATTRIBUTE_WARP_SIZE`.
    pub const WARP_SIZE: c_int = 10;
    /// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
    pub const MULTIPROCESSOR_COUNT: c_int = 16;
    /// `CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE`.
    pub const L2_CACHE_SIZE: c_int = 38;
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`.
    pub const MAX_THREADS_PER_MULTIPROCESSOR: c_int = 39;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 76;
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`.
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
}

/// `CUfunction_attribute` values (cuda.h).
pub mod func_attr {
    use std::ffi::c_int;
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub const MAX_THREADS_PER_BLOCK: c_int = 0;
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`.
    pub const SHARED_SIZE_BYTES: c_int = 1;
    /// `CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`.
    pub const LOCAL_SIZE_BYTES: c_int = 3;
    /// `CU_FUNC_ATTRIBUTE_NUM_REGS`.
    pub const NUM_REGS: c_int = 4;
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub const MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
}

/// `CUuuid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUuuid {
    /// The 16 bytes of the UUID.
    pub bytes: [c_char; 16],
}

macro_rules! function_table {
    (
        required { $($name:ident : fn($($arg:ty),*) -> $ret:ty;)* }
        optional { $($oname:ident : fn($($oarg:ty),*) -> $oret:ty;)* }
    ) => {
        /// The driver's entry points, resolved once when the library is loaded.
        #[allow(non_snake_case)]
        pub struct Functions {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: unsafe extern "C" fn($($arg),*) -> $ret,
            )*
            $(
                #[doc = concat!("`", stringify!($oname), "`, where the driver has it.")]
                pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> $oret>,
            )*
        }

        impl Functions {
            /// Resolves every entry point in `lib`; a missing required one is
            /// [`Error::MissingSymbol`].
            ///
            /// # Safety
            /// `lib` must be an NVIDIA driver library (or one exporting the same symbols with the
            /// same C signatures), and must outlive the returned table.
            pub unsafe fn load(lib: &libloading::Library, library: &str) -> Result<Functions> {
                Ok(Functions {
                    $(
                        $name: {
                            let sym = concat!(stringify!($name), "\0");
                            // SAFETY: the caller guarantees the symbol has this signature.
                            match unsafe { lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(sym.as_bytes()) } {
                                Ok(f) => *f,
                                Err(_) => return Err(Error::from(error::MissingSymbol {
                                    library: library.to_string(),
                                    symbol: stringify!($name),
                                })),
                            }
                        },
                    )*
                    $(
                        $oname: {
                            let sym = concat!(stringify!($oname), "\0");
                            // SAFETY: the caller guarantees the symbol has this signature.
                            unsafe { lib.get::<unsafe extern "C" fn($($oarg),*) -> $oret>(sym.as_bytes()) }
                                .ok()
                                .map(|f| *f)
                        },
                    )*
                })
            }
        }
    };
}

function_table! {
    required {
        cuInit: fn(c_uint) -> CUresult;
        cuGetErrorName: fn(CUresult, *mut *const c_char) -> CUresult;
        cuGetErrorString: fn(CUresult, *mut *const c_char) -> CUresult;
        cuDriverGetVersion: fn(*mut c_int) -> CUresult;
        cuDeviceGetCount: fn(*mut c_int) -> CUresult;
        cuDeviceGet: fn(*mut CUdevice, c_int) -> CUresult;
        cuDeviceGetName: fn(*mut c_char, c_int, CUdevice) -> CUresult;
        cuDeviceGetAttribute: fn(*mut c_int, c_int, CUdevice) -> CUresult;
        cuDeviceTotalMem_v2: fn(*mut usize, CUdevice) -> CUresult;
        cuDevicePrimaryCtxRetain: fn(*mut CUcontext, CUdevice) -> CUresult;
        cuDevicePrimaryCtxRelease_v2: fn(CUdevice) -> CUresult;
        cuCtxSetCurrent: fn(CUcontext) -> CUresult;
        cuCtxSynchronize: fn() -> CUresult;
        cuMemGetInfo_v2: fn(*mut usize, *mut usize) -> CUresult;
        cuMemAlloc_v2: fn(*mut CUdeviceptr, usize) -> CUresult;
        cuMemFree_v2: fn(CUdeviceptr) -> CUresult;
        cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint) -> CUresult;
        cuMemFreeHost: fn(*mut c_void) -> CUresult;
        cuMemcpyHtoD_v2: fn(CUdeviceptr, *const c_void, usize) -> CUresult;
        cuMemcpyDtoH_v2: fn(*mut c_void, CUdeviceptr, usize) -> CUresult;
        cuMemcpyDtoD_v2: fn(CUdeviceptr, CUdeviceptr, usize) -> CUresult;
        cuMemcpyHtoDAsync_v2: fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult;
        cuMemcpyDtoHAsync_v2: fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult;
        cuMemcpyDtoDAsync_v2: fn(CUdeviceptr, CUdeviceptr, usize, CUstream) -> CUresult;
        cuMemsetD8Async: fn(CUdeviceptr, u8, usize, CUstream) -> CUresult;
        cuMemsetD32Async: fn(CUdeviceptr, c_uint, usize, CUstream) -> CUresult;
        cuStreamCreate: fn(*mut CUstream, c_uint) -> CUresult;
        cuStreamDestroy_v2: fn(CUstream) -> CUresult;
        cuStreamSynchronize: fn(CUstream) -> CUresult;
        cuEventCreate: fn(*mut CUevent, c_uint) -> CUresult;
        cuEventDestroy_v2: fn(CUevent) -> CUresult;
        cuEventRecord: fn(CUevent, CUstream) -> CUresult;
        cuEventSynchronize: fn(CUevent) -> CUresult;
        cuEventQuery: fn(CUevent) -> CUresult;
        cuStreamWaitEvent: fn(CUstream, CUevent, c_uint) -> CUresult;
        cuStreamQuery: fn(CUstream) -> CUresult;
        cuModuleLoadDataEx: fn(*mut CUmodule, *const c_void, c_uint, *mut CUjit_option, *mut *mut c_void) -> CUresult;
        cuModuleUnload: fn(CUmodule) -> CUresult;
        cuModuleGetFunction: fn(*mut CUfunction, CUmodule, *const c_char) -> CUresult;
        cuFuncGetAttribute: fn(*mut c_int, c_int, CUfunction) -> CUresult;
        cuFuncSetAttribute: fn(CUfunction, c_int, c_int) -> CUresult;
        cuOccupancyMaxActiveBlocksPerMultiprocessor: fn(*mut c_int, CUfunction, c_int, usize) -> CUresult;
        cuLaunchKernel: fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void) -> CUresult;
    }
    optional {
        cuDeviceGetUuid_v2: fn(*mut CUuuid, CUdevice) -> CUresult;
        // CUDA 12.8 added the `_v2` form; CUDA 13 headers map the plain name to it, and a
        // future driver may drop the plain symbol.
        cuEventElapsedTime_v2: fn(*mut f32, CUevent, CUevent) -> CUresult;
        cuEventElapsedTime: fn(*mut f32, CUevent, CUevent) -> CUresult;
        // The stream-ordered allocator (CUDA 11.2).
        cuMemAllocAsync: fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
        cuMemFreeAsync: fn(CUdeviceptr, CUstream) -> CUresult;
        // Tensor maps for the tensor memory accelerator (CUDA 12.0).
        cuTensorMapEncodeTiled: fn(*mut c_void, c_uint, c_uint, *mut c_void, *const u64, *const u64, *const c_uint, *const c_uint, c_uint, c_uint, c_uint, c_uint) -> CUresult;
    }
}

/// NVML's entry points (`libnvidia-ml.so.1`), used only to report the driver version string.
#[allow(non_snake_case)]
pub struct NvmlFunctions {
    /// `nvmlInit_v2`.
    pub nvmlInit_v2: unsafe extern "C" fn() -> c_int,
    /// `nvmlSystemGetDriverVersion`.
    pub nvmlSystemGetDriverVersion: unsafe extern "C" fn(*mut c_char, c_uint) -> c_int,
    /// `nvmlShutdown`.
    pub nvmlShutdown: unsafe extern "C" fn() -> c_int,
}

impl NvmlFunctions {
    /// Resolves NVML's entry points, or `None` when one is missing.
    ///
    /// # Safety
    /// `lib` must be NVML (or export these symbols with NVML's signatures) and outlive the table.
    pub unsafe fn load(lib: &libloading::Library) -> Option<NvmlFunctions> {
        // SAFETY: the caller guarantees the signatures.
        unsafe {
            Some(NvmlFunctions {
                nvmlInit_v2: *lib.get(b"nvmlInit_v2\0").ok()?,
                nvmlSystemGetDriverVersion: *lib.get(b"nvmlSystemGetDriverVersion\0").ok()?,
                nvmlShutdown: *lib.get(b"nvmlShutdown\0").ok()?,
            })
        }
    }
}

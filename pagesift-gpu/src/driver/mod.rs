//! The device layer: the only home of FFI in the crate, and of its `unsafe` but for the host and
//! device memory of the emulated device (`crate::emulator`).
//!
//! `backend` is the narrow interface a device implementation provides (crate-private: its
//! methods take raw handles and addresses); `cuda` implements it over `libcuda` (through
//! libloading), and `emulated` (feature `emulator`) over the emulated device, which lives
//! beside this layer in `crate::emulator` with an API of its own. The safe types ([`Gpu`],
//! buffers, streams, events, the module cache and launches) are built on the interface alone,
//! and are the only way in from outside the crate.
//!
//! - [`Gpu`]: one device and its primary context; cheap to clone, usable from any thread.
//! - [`DeviceBuffer`] / [`DeviceSlice`] / [`DeviceSliceMut`]: typed device memory and views,
//!   with synchronous copies (complete when they return).
//! - [`Stream`], [`Event`], [`PinnedBuffer`]: ordered asynchronous work, timing, and the
//!   page-locked host memory asynchronous copies use. A pinned buffer cannot be read, written
//!   or freed while a copy that uses it is in flight: every access waits for it.
//! - Kernel variants from [`crate::ptx_kernel!`] load on first launch, once per device
//!   ([`launch`]); raw PTX loads with [`Gpu::load_ptx`] and launches with the `unsafe`
//!   [`Stream::launch`].
//!
//! # Stream-ordered buffers
//!
//! Every [`DeviceBuffer`] remembers the stream of its last write and the streams that read it
//! since (views share their buffer's record). From that:
//!
//! - a launch of a generated kernel, [`Stream::copy_htod_async`], [`Stream::copy_dtoh_async`],
//!   [`Stream::copy_dtod_async`] and [`Stream::memset_async`] on stream `s` first make `s` wait,
//!   on the device, for the conflicting work on other streams (a read for the last write, a
//!   write for the last write and every read): an event is recorded at that moment at the tail
//!   of the other stream and `s` waits for it. Then the use is recorded.
//! - the synchronous copies (`to_host`, `copy_to_host`, `copy_from_host`, `copy_from_device`,
//!   `memset_bytes`, `fill_u32`) first synchronize the streams of the conflicting work, so
//!   they never read a result that is still being written, nor overwrite data a queued kernel
//!   still reads.
//! - dropping a buffer never waits: it frees the memory with the stream-ordered free on the
//!   stream of one pending use, after making that stream wait for the others (the default
//!   stream when nothing is pending). Where the driver lacks `cuMemFreeAsync` the free waits
//!   for that stream only. Allocation is stream-ordered on the default stream and counts as a
//!   write there.
//!
//! A buffer holds its streams by reference count, so a [`Stream`] dropped while work on it is
//! pending stays alive (in the driver) until the last buffer that waits on it is gone. On one
//! stream nothing is recorded and nothing waits (a launch compares the stream with the
//! buffer's last one); events exist only where another stream or the host must wait, and the
//! wait may cover more than the buffer's own work (never less).
//!
//! [`Stream::launch`] takes raw addresses, so no buffer knows about it: its caller orders it
//! (see its `# Safety`).
//!
//! # Errors
//!
//! No driver is [`Error::DriverNotFound`], a library that is not a driver is
//! [`Error::MissingSymbol`], a `PAGESIFT_GPU_LIB` that is not a regular file or an unknown
//! `PAGESIFT_GPU_DEVICE` is [`Error::Config`], a failed call is [`Error::Driver`] naming the
//! call, allocation failure is [`Error::OutOfMemory`]. A failure inside a `Drop` (a free, a
//! destroy) cannot be returned: the device keeps it until [`Gpu::take_deferred_errors`] or
//! [`Gpu::synchronize`] (which returns [`Error::Deferred`] after synchronizing); no other call
//! reports it or fails because of it.
//!
//! ```no_run
//! use pagesift_gpu::{DeviceBuffer, Event, Gpu, PinnedBuffer};
//! # fn main() -> pagesift_gpu::Result<()> {
//! let gpu = Gpu::new(0)?;
//! let stream = gpu.new_stream()?;
//! let host = PinnedBuffer::from_slice(&gpu, &[1.0f32, 2.0, 3.0, 4.0])?;
//! let mut dev = DeviceBuffer::<f32>::alloc(&gpu, 4)?;
//! let (start, end) = (Event::new(&gpu)?, Event::new(&gpu)?);
//! start.record(&stream)?;
//! stream.copy_htod_async(&mut dev, &host)?;
//! end.record(&stream)?;
//! let mut back = PinnedBuffer::<f32>::new(&gpu, 4)?;
//! stream.copy_dtoh_async(&mut back, &dev.slice(..)?)?;
//! assert_eq!(back.as_slice()?, &[1.0, 2.0, 3.0, 4.0]); // waits for the copy
//! println!("upload took {} ms", end.elapsed_ms(&start)?);
//! # Ok(())
//! # }
//! ```

pub mod backend;
mod copy;
pub mod cuda;
#[cfg(feature = "emulator")]
mod emulated;
pub mod fault;
mod gpu;
pub mod launch;
mod memory;
mod module;
mod stream;
pub mod tensor_map;
mod track;

#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};

pub(crate) use backend::Backend;
pub use backend::{
    BackendKind, DeviceProps, DevicePtr, FunctionAttributes, KernelArg, LaunchRequest,
    ModuleLoadError, RawHandle,
};
pub use gpu::Gpu;
pub use memory::{
    DeviceBuffer, DeviceRead, DeviceRepr, DeviceSlice, DeviceSliceMut, DeviceWrite, Dtype,
};
pub use module::{Function, Module};
pub use stream::{Event, PinnedBuffer, Stream};
pub use tensor_map::{Swizzle, TensorMap, TensorMapMut, TensorMapSpec};

use crate::error::{self, Error, Result};

/// The environment variable that selects the device implementation: unset (or `cuda`) for the
/// NVIDIA driver, `emulated` for the emulated device (feature `emulator`).
pub const DEVICE_ENV: &str = "PAGESIFT_GPU_DEVICE";

/// The environment variable naming the driver library to load instead of `libcuda.so.1`.
pub const LIBRARY_ENV: &str = "PAGESIFT_GPU_LIB";

/// The backend `Gpu::new` uses: the emulated device when `PAGESIFT_GPU_DEVICE=emulated`
/// (with the `emulator` feature), else the NVIDIA driver. Both are created once per process.
///
/// Errors: [`Error::DriverNotFound`] / [`Error::MissingSymbol`] / [`Error::Driver`] when the
/// driver cannot be loaded and initialized; [`Error::Unsupported`] when the emulated device is
/// asked for but not compiled in; [`Error::Config`] for an unknown `PAGESIFT_GPU_DEVICE` value.
pub(crate) fn default_backend() -> Result<Arc<dyn Backend>> {
    backend_for(&std::env::var(DEVICE_ENV).unwrap_or_default())
}

/// The backend for a value of `PAGESIFT_GPU_DEVICE`.
fn backend_for(device: &str) -> Result<Arc<dyn Backend>> {
    match device {
        "" | "cuda" => Ok(cuda::CudaBackend::global()?),
        "emulated" => emulated_backend(),
        other => Err(Error::from(error::Config {
            variable: DEVICE_ENV,
            value: other.to_string(),
            message: "not a known device (use `cuda` or `emulated`)".into(),
        })),
    }
}

#[cfg(feature = "emulator")]
fn emulated_backend() -> Result<Arc<dyn Backend>> {
    static EMULATOR: std::sync::Mutex<Option<Arc<dyn Backend>>> = std::sync::Mutex::new(None);
    let mut slot = EMULATOR.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = slot.as_ref() {
        return Ok(Arc::clone(b));
    }
    let b: Arc<dyn Backend> = Arc::new(emulated::EmulatedBackend::from_env()?);
    *slot = Some(Arc::clone(&b));
    Ok(b)
}

#[cfg(not(feature = "emulator"))]
fn emulated_backend() -> Result<Arc<dyn Backend>> {
    Err(Error::from(error::Unsupported {
        kernel: "emulated device".into(),
        reason: format!(
            "{DEVICE_ENV}=emulated needs pagesift-gpu built with the `emulator` feature"
        ),
    }))
}

/// What the default backend reports about its driver, for tools (`pagesift-gpu info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// The CUDA version the driver supports, as `cuDriverGetVersion` reports it (13000 = 13.0).
    pub version: i32,
    /// The full driver version string (e.g. `580.95.05`), where NVML reports it.
    pub version_string: Option<String>,
    /// The library the driver was loaded from (or the emulated device's description).
    pub library: String,
    /// The number of devices.
    pub device_count: usize,
}

/// Loads the default backend and describes its driver.
///
/// Errors: as [`Gpu::new`] without a usable driver.
pub fn driver_info() -> Result<DriverInfo> {
    let b = default_backend()?;
    Ok(DriverInfo {
        version: b.driver_version()?,
        version_string: b.driver_version_string(),
        library: b.library().to_string(),
        device_count: b.device_count()?,
    })
}

/// Whether a device can be opened: the default backend loads and initializes and has at least
/// one device. Cheap after the first call (the answer is remembered); never panics.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        default_backend()
            .and_then(|b| b.device_count())
            .is_ok_and(|n| n > 0)
    })
}

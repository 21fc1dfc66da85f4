//! The device layer: the only home of FFI and `unsafe` in the crate.
//!
//! `backend` is the narrow interface a device implementation provides; `cuda` implements it over
//! `libcuda` (through libloading); the safe types ([`Gpu`], buffers, streams, events, the module
//! cache and launches) are built on the interface alone.
//!
//! - [`Gpu`]: one device and its primary context; cheap to clone, usable from any thread.
//! - [`DeviceBuffer`] / [`DeviceSlice`] / [`DeviceSliceMut`]: typed device memory and views,
//!   with synchronous copies (complete when they return).
//! - [`Stream`], [`Event`], [`PinnedBuffer`]: ordered asynchronous work, timing, and the
//!   page-locked host memory asynchronous copies use. A pinned buffer cannot be read, written
//!   or freed while a copy that uses it is in flight: every access waits for it.
//! - Kernel variants from [`crate::ptx_kernel!`] load on first launch, once per device
//!   ([`launch`]); raw PTX loads with [`Gpu::load_ptx`] and launches with [`Stream::launch`].
//!
//! Errors: no driver is [`Error::DriverNotFound`], a library that is not a driver is
//! [`Error::MissingSymbol`], a failed call is [`Error::Driver`] naming the call, allocation
//! failure is [`Error::OutOfMemory`]; a failure inside a `Drop` comes back from the next call on
//! the same device as [`Error::Deferred`].
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

// `Error` carries its context inline (the JIT log, the PTX path); it is returned rarely and
// boxing it would cost every caller an allocation on failure for no gain.
#![allow(clippy::result_large_err)]

pub mod backend;
pub mod cuda;
#[cfg(feature = "emulator")]
pub mod emulator;
pub mod fault;
mod gpu;
pub mod launch;
mod memory;
mod module;
mod stream;

#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};

pub use backend::{
    Backend, BackendKind, DeviceProps, DevicePtr, FunctionAttributes, KernelArg, LaunchRequest,
    ModuleLoadError, RawHandle,
};
pub use gpu::Gpu;
pub use memory::{DeviceBuffer, DeviceRead, DeviceRepr, DeviceSlice, DeviceSliceMut, DeviceWrite};
pub use module::{Function, Module};
pub use stream::{Event, PinnedBuffer, Stream};

use crate::error::{Error, Result};

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
/// asked for but not compiled in, or for an unknown `PAGESIFT_GPU_DEVICE` value.
pub fn default_backend() -> Result<Arc<dyn Backend>> {
    let device = std::env::var(DEVICE_ENV).unwrap_or_default();
    match device.as_str() {
        "" | "cuda" => Ok(cuda::CudaBackend::global()?),
        "emulated" => emulated_backend(),
        other => Err(Error::Unsupported {
            kernel: "device selection".into(),
            reason: format!(
                "{DEVICE_ENV}={other} is not a known device (use `cuda` or `emulated`)"
            ),
        }),
    }
}

#[cfg(feature = "emulator")]
fn emulated_backend() -> Result<Arc<dyn Backend>> {
    static EMULATOR: std::sync::Mutex<Option<Arc<dyn Backend>>> = std::sync::Mutex::new(None);
    let mut slot = EMULATOR.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = slot.as_ref() {
        return Ok(Arc::clone(b));
    }
    let b = emulator::Emulator::from_env()?;
    *slot = Some(Arc::clone(&b));
    Ok(b)
}

#[cfg(not(feature = "emulator"))]
fn emulated_backend() -> Result<Arc<dyn Backend>> {
    Err(Error::Unsupported {
        kernel: "emulated device".into(),
        reason: format!(
            "{DEVICE_ENV}=emulated needs pagesift-gpu built with the `emulator` feature"
        ),
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

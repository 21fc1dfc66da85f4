//! [`Gpu`]: one device, its primary context, its module cache and its deferred errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::backend::{Backend, BackendKind, DeviceProps, RawHandle};
use super::module::ModuleCache;
use super::stream::Stream;
use crate::error::{Error, Result};

/// One GPU: the device, its primary context (retained for as long as any clone, buffer, stream
/// or module of it lives), and its kernel module cache.
///
/// `Gpu` is a cheap handle (`Clone` shares it) and is `Send + Sync`: every operation makes the
/// device's context current on the calling thread first, so it works from any thread.
/// Two `Gpu`s opened for the same device of the same backend share one context, one module
/// cache and one memory space.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<GpuInner>,
}

pub(crate) struct GpuInner {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) ordinal: usize,
    pub(crate) ctx: RawHandle,
    pub(crate) props: DeviceProps,
    pub(crate) driver_version: i32,
    pub(crate) modules: ModuleCache,
    /// The fault record of bounds-checked kernels, allocated at the first generated launch.
    pub(crate) fault: std::sync::OnceLock<super::fault::FaultRecord>,
    has_deferred: AtomicBool,
    /// Bytes long-lived allocations leave free (see `Gpu::set_memory_reserve`).
    pub(crate) memory_reserve: AtomicUsize,
    deferred: Mutex<Vec<Error>>,
}

/// Identifies a device of a backend: buffers of one identity may be used with any `Gpu` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DeviceKey {
    backend: usize,
    ordinal: usize,
}

/// Live devices, so that opening a device twice shares its context and module cache.
static OPEN: Mutex<Option<HashMap<DeviceKey, Weak<GpuInner>>>> = Mutex::new(None);

fn backend_id(backend: &Arc<dyn Backend>) -> usize {
    Arc::as_ptr(backend) as *const () as usize
}

impl Gpu {
    /// Opens device `ordinal` of the default backend ([`super::default_backend`]: the NVIDIA
    /// driver, or the emulated device when `PAGESIFT_GPU_DEVICE=emulated`).
    ///
    /// Errors: [`Error::DriverNotFound`] / [`Error::MissingSymbol`] without a usable driver,
    /// [`Error::NoSuchDevice`] for an ordinal past the last device, [`Error::Driver`] when the
    /// driver refuses the context.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        Gpu::from_backend(super::default_backend()?, ordinal)
    }

    /// Opens a new emulated device (feature `emulator`): the generated PTX runs on the CPU,
    /// with every memory access and barrier checked. Each call creates a separate device with
    /// its own memory.
    ///
    /// ```
    /// # #[cfg(feature = "emulator")] {
    /// use pagesift_gpu::driver::emulator::EmulatorConfig;
    /// let gpu = pagesift_gpu::Gpu::emulated(EmulatorConfig::default()).unwrap();
    /// assert_eq!(gpu.compute_capability(), (8, 0));
    /// # }
    /// ```
    #[cfg(feature = "emulator")]
    pub fn emulated(config: super::emulator::EmulatorConfig) -> Result<Gpu> {
        Gpu::from_backend(Arc::new(super::emulator::Emulator::new(config)), 0)
    }

    /// Opens device `ordinal` of an explicit backend.
    pub fn from_backend(backend: Arc<dyn Backend>, ordinal: usize) -> Result<Gpu> {
        let key = DeviceKey {
            backend: backend_id(&backend),
            ordinal,
        };
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        let map = open.get_or_insert_with(HashMap::new);
        if let Some(inner) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(Gpu { inner });
        }
        map.retain(|_, w| w.strong_count() > 0);
        let count = backend.device_count()?;
        if ordinal >= count {
            return Err(Error::NoSuchDevice { ordinal, count });
        }
        let props = backend.device_props(ordinal)?;
        let driver_version = backend.driver_version()?;
        let ctx = backend.primary_context_retain(ordinal)?;
        if let Err(e) = backend.set_current(ctx) {
            let _ = backend.primary_context_release(ordinal);
            return Err(e);
        }
        let inner = Arc::new(GpuInner {
            backend,
            ordinal,
            ctx,
            props,
            driver_version,
            modules: ModuleCache::default(),
            fault: std::sync::OnceLock::new(),
            has_deferred: AtomicBool::new(false),
            memory_reserve: AtomicUsize::new(0),
            deferred: Mutex::new(Vec::new()),
        });
        map.insert(key, Arc::downgrade(&inner));
        Ok(Gpu { inner })
    }

    /// The number of devices of the default backend.
    pub fn device_count() -> Result<usize> {
        super::default_backend()?.device_count()
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> &str {
        &self.inner.props.name
    }

    /// The device's properties and limits.
    pub fn props(&self) -> &DeviceProps {
        &self.inner.props
    }

    /// Which backend runs this device.
    pub fn backend_kind(&self) -> BackendKind {
        self.inner.backend.kind()
    }

    /// The backend (for tools that need a call the safe API does not wrap).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// Compute capability (major, minor), e.g. (9, 0).
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.props.compute_capability
    }

    /// The CUDA version the driver supports, as `cuDriverGetVersion` reports it
    /// (13000 = CUDA 13.0).
    pub fn driver_version(&self) -> i32 {
        self.inner.driver_version
    }

    /// The full driver version string (e.g. `580.95.05`), where NVML reports it.
    pub fn driver_version_string(&self) -> Option<String> {
        self.inner.backend.driver_version_string()
    }

    /// Free and total device memory, in bytes: `(free, total)`.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.enter()?;
        self.inner.backend.mem_info()
    }

    /// Sets how many bytes of device memory long-lived allocations
    /// ([`super::DeviceBuffer::alloc_long_lived`], e.g. model weights) must leave free, so that
    /// they never take the memory that short-lived ones (activations, workspaces) need.
    /// Ordinary allocations ignore the reserve. Shared by every handle of this device.
    pub fn set_memory_reserve(&self, bytes: usize) {
        self.inner.memory_reserve.store(bytes, Ordering::Relaxed);
    }

    /// The memory reserve in bytes (0 unless set).
    pub fn memory_reserve(&self) -> usize {
        self.inner.memory_reserve.load(Ordering::Relaxed)
    }

    /// Waits until all work on the device (every stream) is done.
    pub fn synchronize(&self) -> Result<()> {
        self.enter()?;
        self.inner.backend.synchronize()?;
        super::fault::check_after(self, true)
    }

    /// The default (legacy) stream. Work on it is ordered with the synchronous copies of
    /// buffers; dropping it destroys nothing.
    pub fn default_stream(&self) -> Stream {
        Stream::default_of(self.clone())
    }

    /// A new stream, not ordered with the default stream: synchronize it (or the device)
    /// before reading what its work wrote with a synchronous copy.
    pub fn new_stream(&self) -> Result<Stream> {
        Stream::new(self)
    }

    /// Whether two handles name the same device of the same backend (and so share memory).
    pub fn same_device(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Makes the context current on this thread, after reporting any deferred error.
    pub(crate) fn enter(&self) -> Result<()> {
        self.take_deferred()?;
        self.inner.backend.set_current(self.inner.ctx)
    }

    /// Reports (once) an error recorded where it could not be returned.
    pub(crate) fn take_deferred(&self) -> Result<()> {
        if !self.inner.has_deferred.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut d = self
            .inner
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let first = if d.is_empty() {
            None
        } else {
            Some(d.remove(0))
        };
        if d.is_empty() {
            self.inner.has_deferred.store(false, Ordering::Release);
        }
        match first {
            Some(e) => Err(Error::Deferred(Box::new(e))),
            None => Ok(()),
        }
    }

    /// Records an error from a `Drop`, to be reported by the next call on this device.
    pub(crate) fn defer(&self, e: Error) {
        let mut d = self
            .inner
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        d.push(e);
        self.inner.has_deferred.store(true, Ordering::Release);
    }

    /// The backend, with the context made current (no deferred-error check): for `Drop`s.
    pub(crate) fn current_backend(&self) -> Result<&Arc<dyn Backend>> {
        self.inner.backend.set_current(self.inner.ctx)?;
        Ok(&self.inner.backend)
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.props.name)
            .field("backend", &self.inner.backend.kind())
            .finish()
    }
}

impl Drop for GpuInner {
    fn drop(&mut self) {
        // Nothing can report here: the last handle is gone. Unload the modules, then let the
        // context go (which frees anything left in it).
        if self.backend.set_current(self.ctx).is_ok() {
            let _ = self.backend.synchronize();
            self.modules.unload_all(self.backend.as_ref());
            super::fault::release(self);
        }
        let _ = self.backend.primary_context_release(self.ordinal);
    }
}

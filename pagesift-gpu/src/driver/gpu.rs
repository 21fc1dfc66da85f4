//! [`Gpu`]: one device, its primary context, its module cache and its deferred errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::backend::{Backend, BackendKind, DeviceProps, RawHandle};
use super::module::ModuleCache;
use super::stream::Stream;
use super::track::StreamInner;
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
    /// The legacy default stream, which buffers name as the stream of their allocation.
    pub(crate) default_stream: Arc<StreamInner>,
    /// The fault records of the device's streams (each allocated at the stream's first
    /// generated launch), for the device-wide check of `Gpu::synchronize`.
    pub(crate) faults: Mutex<Vec<std::sync::Weak<super::fault::FaultRecord>>>,
    /// Bytes long-lived allocations leave free (see `Gpu::set_memory_reserve`).
    pub(crate) memory_reserve: AtomicUsize,
    /// Errors of `Drop`s, until [`Gpu::take_deferred_errors`] or [`Gpu::synchronize`].
    deferred: Mutex<Vec<Error>>,
    /// Occupancy answers: ((variant address, dynamic shared bytes), blocks per SM).
    pub(crate) occupancy: Mutex<Vec<((usize, u32), u32)>>,
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
    /// Opens device `ordinal` of the default backend (`super::default_backend`: the NVIDIA
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
    /// use pagesift_gpu::emulator::EmulatorConfig;
    /// let gpu = pagesift_gpu::Gpu::emulated(EmulatorConfig::default()).unwrap();
    /// assert_eq!(gpu.compute_capability(), (8, 0));
    /// # }
    /// ```
    #[cfg(feature = "emulator")]
    pub fn emulated(config: crate::emulator::EmulatorConfig) -> Result<Gpu> {
        Gpu::from_backend(Arc::new(super::emulated::EmulatedBackend::new(config)), 0)
    }

    /// Opens device `ordinal` of an explicit backend (one of the crate's: the trait is sealed).
    pub(crate) fn from_backend(backend: Arc<dyn Backend>, ordinal: usize) -> Result<Gpu> {
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
            default_stream: Arc::new(StreamInner::default_stream()),
            faults: Mutex::new(Vec::new()),
            memory_reserve: AtomicUsize::new(0),
            deferred: Mutex::new(Vec::new()),
            occupancy: Mutex::new(Vec::new()),
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

    /// The backend. Crate-internal: its methods take raw handles and addresses.
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
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

    /// The device's 16-byte UUID (as `nvidia-smi -L` shows it), where the driver reports one
    /// (`None` on the emulated device).
    pub fn uuid(&self) -> Result<Option<[u8; 16]>> {
        if self.backend_kind() != BackendKind::Cuda {
            return Ok(None);
        }
        // A CUDA device always comes from the process-wide driver backend.
        super::cuda::CudaBackend::global()?
            .device_uuid(self.inner.ordinal)
            .map(Some)
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
    ///
    /// Errors: the driver's; else, when `Drop`s on this device failed since the last report,
    /// [`Error::Deferred`] with their errors (after synchronizing; they are reported once).
    pub fn synchronize(&self) -> Result<()> {
        self.enter()?;
        super::fault::after_device_wait(self, || self.inner.backend.synchronize())?;
        let deferred = self.take_deferred_errors();
        if deferred.is_empty() {
            Ok(())
        } else {
            Err(Error::Deferred(deferred.into()))
        }
    }

    /// The errors of `Drop`s on this device (failed frees, destroys, unloads) since the last
    /// call or [`Gpu::synchronize`], oldest first; each is reported once. No other call
    /// reports them.
    pub fn take_deferred_errors(&self) -> Vec<Error> {
        std::mem::take(
            &mut *self
                .inner
                .deferred
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// The default (legacy) stream, one per device (every call returns a handle of the same
    /// stream); dropping it destroys nothing.
    pub fn default_stream(&self) -> Stream {
        Stream::default_of(self.clone())
    }

    /// A new stream, not implicitly ordered with the default stream or any other: buffers
    /// order their uses across streams and with synchronous copies themselves (see
    /// [`super`]), so no explicit synchronization is needed to read what its work wrote.
    pub fn new_stream(&self) -> Result<Stream> {
        Stream::new(self)
    }

    /// Whether two handles name the same device of the same backend (and so share memory).
    pub fn same_device(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Makes the context current on this thread.
    pub(crate) fn enter(&self) -> Result<()> {
        self.inner.backend.set_current(self.inner.ctx)
    }

    /// What an operation with nothing to do returns. Deferred errors are not reported here:
    /// only [`Gpu::synchronize`] and [`Gpu::take_deferred_errors`] report them.
    pub(crate) fn take_deferred(&self) -> Result<()> {
        Ok(())
    }

    /// Records an error from a `Drop`, for [`Gpu::take_deferred_errors`].
    pub(crate) fn defer(&self, e: Error) {
        self.inner
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }

    /// The backend, with the context made current: for `Drop`s.
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
            let _ = self.default_stream.destroy_tail(self.backend.as_ref());
            self.modules.unload_all(self.backend.as_ref());
            if let Some(r) = self.default_stream.fault.get() {
                let _ = r.release(self.backend.as_ref(), RawHandle::NULL);
            }
        }
        let _ = self.backend.primary_context_release(self.ordinal);
    }
}

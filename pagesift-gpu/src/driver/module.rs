//! Kernel modules: the per-device cache of [`KernelVariant`] modules (each loaded once, on first
//! use, thread-safely), and [`Module`] / [`Function`] for raw PTX.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::backend::{Backend, FunctionAttributes, ModuleLoadError, RawHandle};
use super::gpu::Gpu;
use crate::error::{self, Error, Result};
use crate::kernel::KernelVariant;

/// A loaded kernel of the cache.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) module: RawHandle,
    pub(crate) function: RawHandle,
    /// The variant (the fault record names it by its entry's hash).
    pub(crate) variant: &'static KernelVariant,
    /// The largest dynamic shared memory the function has been opted in to, in bytes.
    dyn_shared_optin: AtomicU32,
}

/// One cache entry: loaded at most once; concurrent first users wait on `init`.
#[derive(Default)]
pub(crate) struct Slot {
    init: Mutex<()>,
    loaded: OnceLock<Loaded>,
}

/// A multiplicative hasher for the cache's keys (two addresses-sized integers): the launch
/// path looks a variant up on every launch, and SipHash would be most of that cost.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type Key = (usize, usize);

fn key(variant: &KernelVariant) -> Key {
    (variant.ptx.as_ptr() as usize, variant.ptx.len())
}

/// The modules of one device, keyed by the address and length of the variant's PTX text.
#[derive(Default)]
pub(crate) struct ModuleCache {
    slots: RwLock<HashMap<Key, Arc<Slot>, std::hash::BuildHasherDefault<KeyHasher>>>,
}

impl ModuleCache {
    /// The function of an already loaded variant, when no shared-memory opt-in is needed for
    /// `dynamic_shared` bytes: the launch path's fast lookup (no allocation, no reference count).
    pub(crate) fn ready(
        &self,
        variant: &KernelVariant,
        dynamic_shared: u32,
        needs_optin: bool,
    ) -> Option<RawHandle> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        let loaded = slots.get(&key(variant))?.loaded.get()?;
        if needs_optin && dynamic_shared > loaded.dyn_shared_optin.load(Ordering::Acquire) {
            return None;
        }
        Some(loaded.function)
    }

    /// The slot of `variant`, created empty on first use.
    fn slot(&self, variant: &KernelVariant) -> Arc<Slot> {
        let key = key(variant);
        if let Some(s) = self
            .slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Arc::clone(s);
        }
        let mut w = self.slots.write().unwrap_or_else(|p| p.into_inner());
        Arc::clone(w.entry(key).or_default())
    }

    /// A loaded variant for which `pred` holds.
    pub(crate) fn find(
        &self,
        pred: impl Fn(&KernelVariant) -> bool,
    ) -> Option<&'static KernelVariant> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .filter_map(|s| s.loaded.get())
            .map(|l| l.variant)
            .find(|v| pred(v))
    }

    /// Number of modules loaded.
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        slots.values().filter(|s| s.loaded.get().is_some()).count()
    }

    /// Unloads every module (the device is going away; errors have nowhere to go).
    pub(crate) fn unload_all(&self, backend: &dyn Backend) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        for (_, slot) in slots.drain() {
            if let Some(l) = slot.loaded.get() {
                let _ = backend.module_unload(l.module);
            }
        }
    }
}

/// Whether a variant can run on this device and driver; `Error::Unsupported` says what it needs.
pub(crate) fn check_supported(
    variant: &KernelVariant,
    cc: (u32, u32),
    driver_version: i32,
) -> Result<()> {
    let need_driver = variant.min_driver_version();
    if need_driver > driver_version {
        return Err(Error::from(error::Unsupported {
            kernel: variant.display_name(),
            reason: format!(
                "its PTX ISA {}.{} needs a driver for CUDA {} or newer; this driver supports CUDA {}",
                variant.ptx_version.0,
                variant.ptx_version.1,
                cuda_version(need_driver),
                cuda_version(driver_version)
            ),
        }));
    }
    let need_cc = variant.min_compute_capability();
    // `sm_90a`-style targets use features of exactly that architecture.
    let arch_specific = variant.target.ends_with('a') || variant.target.ends_with('f');
    let fits = if arch_specific {
        cc == need_cc
    } else {
        cc >= need_cc
    };
    if !fits {
        return Err(Error::from(error::Unsupported {
            kernel: variant.display_name(),
            reason: format!(
                "target {} needs compute capability {}{}.{}; this device has {}.{}",
                variant.target,
                if arch_specific { "exactly " } else { "" },
                need_cc.0,
                need_cc.1,
                cc.0,
                cc.1
            ),
        }));
    }
    Ok(())
}

/// `12080` -> `12.8`.
pub(crate) fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The directory rejected PTX is written to: `temp_dir()/pagesift-gpu-<pid>-<nanos>`, created
/// by this process (a create that fails on any existing path, symlinks included), readable by
/// its owner only. `None` when it cannot be created.
fn ptx_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let dir = std::env::temp_dir().join(format!(
                "pagesift-gpu-{}-{nanos:08x}{attempt}",
                std::process::id()
            ));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&dir) {
                Ok(()) => return Some(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .as_deref()
}

/// Writes the PTX of a failed load where it can be inspected: `<entry>-<n>.ptx` in
/// [`ptx_dir`], `n` unique in the process, created new (`create_new`: never an existing file,
/// never through a symlink).
fn write_ptx(entry: &str, ptx: &str) -> Option<PathBuf> {
    use std::io::Write;
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let safe: String = entry
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = ptx_dir()?;
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{safe}-{n}.ptx"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ok()?;
    f.write_all(ptx.as_bytes()).ok().map(|()| path)
}

fn module_load_error(entry: &str, ptx: &str, e: ModuleLoadError) -> Error {
    Error::from(error::ModuleLoad {
        kernel: entry.to_string(),
        source: e.error,
        jit_log: e.log,
        ptx_path: write_ptx(entry, ptx),
    })
}

impl Gpu {
    /// The loaded function of a kernel variant, loading its module on first use. The caller has
    /// entered the context.
    pub(crate) fn variant_function(&self, variant: &'static KernelVariant) -> Result<Arc<Slot>> {
        let slot = self.inner.modules.slot(variant);
        if slot.loaded.get().is_some() {
            return Ok(slot);
        }
        self.load_into(&slot, variant)?;
        Ok(slot)
    }

    fn load_into(&self, slot: &Slot, variant: &'static KernelVariant) -> Result<()> {
        let _guard = slot.init.lock().unwrap_or_else(|p| p.into_inner());
        if slot.loaded.get().is_some() {
            return Ok(());
        }
        check_supported(variant, self.compute_capability(), self.driver_version())?;
        let backend = self.backend();
        let module = backend
            .module_load(variant.ptx)
            .map_err(|e| module_load_error(variant.entry, variant.ptx, e))?;
        let function = match backend.module_function(module, variant.entry) {
            Ok(f) => f,
            Err(e) => {
                let _ = backend.module_unload(module);
                return Err(e);
            }
        };
        let _ = slot.loaded.set(Loaded {
            module,
            function,
            variant,
            dyn_shared_optin: AtomicU32::new(0),
        });
        Ok(())
    }

    /// Loads a kernel variant's module now rather than at its first launch (so that a timed
    /// run does not include the JIT), and returns the function's resource use.
    ///
    /// Errors: as the first launch would report them: [`Error::Unsupported`] for a variant this
    /// device or driver cannot run, [`Error::ModuleLoad`] when the JIT rejects it.
    pub fn preload(&self, variant: &'static KernelVariant) -> Result<FunctionAttributes> {
        self.enter()?;
        let slot = self.variant_function(variant)?;
        let loaded = slot.loaded().ok_or_else(|| {
            Error::from(error::Launch {
                kernel: variant.display_name(),
                message: "module not loaded".into(),
            })
        })?;
        self.backend().function_attributes(loaded.function)
    }

    /// How many blocks of `variant` (its block shape, `dynamic_shared` bytes of dynamic shared
    /// memory) one multiprocessor holds at once: the driver's occupancy answer (registers,
    /// shared memory, thread slots). Loads the variant's module on first use, and opts it in to
    /// `dynamic_shared` bytes where that is past the default per block; the answer is
    /// remembered per device, variant and shared memory size.
    pub fn blocks_per_sm(
        &self,
        variant: &'static KernelVariant,
        dynamic_shared: u32,
    ) -> Result<u32> {
        type Key = (usize, u32);
        let key: Key = (variant as *const KernelVariant as usize, dynamic_shared);
        let cache = &self.inner.occupancy;
        if let Some(&(_, n)) = cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(k, _)| *k == key)
        {
            return Ok(n);
        }
        self.enter()?;
        let slot = self.variant_function(variant)?;
        let loaded = slot.loaded().ok_or_else(|| {
            Error::from(error::Launch {
                kernel: variant.display_name(),
                message: "module not loaded".into(),
            })
        })?;
        // The driver counts a block past the default shared memory as not fitting at all
        // until the function is opted in to it, as a launch would do first.
        loaded.ensure_dynamic_shared(
            self.backend().as_ref(),
            dynamic_shared,
            variant.static_shared_bytes,
            self.props().max_shared_per_block,
        )?;
        let threads = variant.block.iter().product::<u32>().max(1);
        let n = self
            .backend()
            .occupancy_blocks_per_sm(loaded.function, threads, dynamic_shared)?;
        cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key, n));
        Ok(n)
    }

    /// How many kernel variant modules this device has loaded.
    pub fn loaded_module_count(&self) -> usize {
        self.inner.modules.len()
    }

    /// Loads a module from PTX text (for tests, benches and tools; kernels written with
    /// [`crate::ptx_kernel!`] are loaded automatically). `name` labels errors and the file the
    /// PTX is written to when the JIT rejects it.
    ///
    /// Errors: [`Error::ModuleLoad`] with the JIT log when the driver rejects the PTX.
    pub fn load_ptx(&self, name: &str, ptx: &str) -> Result<Module> {
        self.enter()?;
        let handle = self
            .backend()
            .module_load(ptx)
            .map_err(|e| module_load_error(name, ptx, e))?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                gpu: self.clone(),
                handle,
                name: name.to_string(),
            }),
        })
    }
}

impl Slot {
    /// The loaded function (the slot was returned by `variant_function`).
    pub(crate) fn loaded(&self) -> Option<&Loaded> {
        self.loaded.get()
    }
}

impl Loaded {
    /// Opts the function in to `bytes` of dynamic shared memory when the default is too small.
    pub(crate) fn ensure_dynamic_shared(
        &self,
        backend: &dyn Backend,
        bytes: u32,
        static_bytes: u32,
        default_max: u32,
    ) -> Result<()> {
        ensure_dynamic_shared(
            backend,
            self.function,
            &self.dyn_shared_optin,
            bytes,
            static_bytes,
            default_max,
        )
    }
}

fn ensure_dynamic_shared(
    backend: &dyn Backend,
    function: RawHandle,
    optin: &AtomicU32,
    bytes: u32,
    static_bytes: u32,
    default_max: u32,
) -> Result<()> {
    if static_bytes.saturating_add(bytes) <= default_max || bytes <= optin.load(Ordering::Acquire) {
        return Ok(());
    }
    backend.function_set_max_dynamic_shared(function, bytes)?;
    optin.fetch_max(bytes, Ordering::AcqRel);
    Ok(())
}

struct ModuleInner {
    gpu: Gpu,
    handle: RawHandle,
    name: String,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if let Err(e) = self
            .gpu
            .current_backend()
            .and_then(|b| b.module_unload(self.handle))
        {
            self.gpu.defer(e);
        }
    }
}

/// A module loaded from raw PTX by [`Gpu::load_ptx`]; unloaded when it and its functions drop.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

impl Module {
    /// The kernel entry `entry` of this module.
    ///
    /// Errors: the driver's (`CUDA_ERROR_NOT_FOUND` for an unknown entry).
    pub fn function(&self, entry: &str) -> Result<Function> {
        let gpu = &self.inner.gpu;
        gpu.enter()?;
        let handle = gpu.backend().module_function(self.inner.handle, entry)?;
        let attributes = gpu.backend().function_attributes(handle)?;
        Ok(Function {
            module: Arc::clone(&self.inner),
            handle,
            name: entry.to_string(),
            attributes,
            dyn_shared_optin: AtomicU32::new(0),
        })
    }

    /// The name the module was loaded under.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// A kernel entry of a [`Module`], launched with [`super::Stream::launch`]. Keeps its module
/// loaded.
pub struct Function {
    module: Arc<ModuleInner>,
    handle: RawHandle,
    name: String,
    attributes: FunctionAttributes,
    dyn_shared_optin: AtomicU32,
}

impl Function {
    /// The entry name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device the function is loaded on.
    pub fn gpu(&self) -> &Gpu {
        &self.module.gpu
    }

    /// The backend handle.
    pub(crate) fn raw(&self) -> RawHandle {
        self.handle
    }

    /// Registers, static shared and local memory, and the thread limit of the function.
    pub fn attributes(&self) -> FunctionAttributes {
        self.attributes
    }

    /// Static shared memory in bytes.
    pub fn static_shared_bytes(&self) -> u32 {
        self.attributes.static_shared_bytes
    }

    pub(crate) fn ensure_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let gpu = self.gpu();
        ensure_dynamic_shared(
            gpu.backend().as_ref(),
            self.handle,
            &self.dyn_shared_optin,
            bytes,
            self.attributes.static_shared_bytes,
            gpu.props().max_shared_per_block,
        )
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("attributes", &self.attributes)
            .finish()
    }
}

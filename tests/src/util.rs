//! Data and device helpers the integration tests share: seeded random data that is never all
//! zero, the poison pattern outputs are filled with before each run, exact bit comparison, and
//! an emulated device driven by address ([`Emu`]: allocate, copy, load hand-written PTX and
//! launch it through the safe API and `Stream::launch`).

use pagesift_gpu::error;
use std::ops::Range;
use std::sync::Mutex;

use pagesift_gpu::driver::KernelArg;
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{DeviceBuffer, DevicePtr, Error, Function, Gpu, Module, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The bits of the NaN written into outputs before each run (a quiet NaN no kernel produces
/// from finite data), so an element a kernel forgot to write cannot pass.
pub const POISON_BITS: u32 = 0x7FC0_DEAD;

/// The poison value as an `f32`.
pub fn poison_f32() -> f32 {
    f32::from_bits(POISON_BITS)
}

/// `n` elements of poison.
pub fn poisoned_f32(n: usize) -> Vec<f32> {
    vec![poison_f32(); n]
}

/// `n` elements of device memory on `gpu`, filled with poison.
///
/// # Errors
/// The allocation's or the fill's.
pub fn poisoned_device(gpu: &Gpu, n: usize) -> Result<DeviceBuffer<f32>> {
    let mut b = DeviceBuffer::alloc(gpu, n)?;
    b.fill_u32(POISON_BITS)?;
    Ok(b)
}

/// Asserts that `e` is a [`Error::LengthMismatch`] of `expected` against `actual` elements whose
/// message names `what` (the argument at fault).
///
/// # Panics
/// When it is not.
pub fn assert_length_mismatch(e: &Error, expected: usize, actual: usize, what: &str) {
    assert!(
        matches!(
            e,
            Error::LengthMismatch(m) if (m.expected, m.actual) == (expected, actual)
        ),
        "expected a length mismatch of {expected} against {actual}: {e}"
    );
    assert!(e.to_string().contains(what), "`{what}` not named: {e}");
}

/// The bit patterns of `v`, to compare results exactly (NaN included).
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `n` values drawn uniformly from `range` by `rng`; never all zero when `n > 0` (were every
/// draw zero, the first becomes half the range's end).
pub fn random_f32_from(rng: &mut impl Rng, n: usize, range: Range<f32>) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|_| rng.gen_range(range.clone())).collect();
    if v.iter().all(|x| *x == 0.0) {
        // All zero only when 0 lies in [start, end), so end > 0 and end / 2 lies in the range.
        if let Some(first) = v.first_mut() {
            *first = range.end / 2.0;
        }
    }
    v
}

/// `n` values drawn uniformly from `range` by a generator seeded with `seed` (the same seed
/// gives the same values); never all zero when `n > 0`.
pub fn random_f32(n: usize, seed: u64, range: Range<f32>) -> Vec<f32> {
    random_f32_from(&mut StdRng::seed_from_u64(seed), n, range)
}

/// An emulated device whose buffers the tests name by device address, as hand-written PTX
/// takes them: each upload is a [`DeviceBuffer`] kept alive until [`Emu::mem_free`] or the
/// end of the device.
pub struct Emu {
    /// The device.
    pub gpu: Gpu,
    buffers: Mutex<Vec<DeviceBuffer<u8>>>,
}

/// Why a module did not load: the emulator's log (it names the line and the instruction).
#[derive(Debug)]
pub struct LoadFailure {
    /// The load log.
    pub log: String,
}

impl Emu {
    /// A new emulated device with `config`.
    ///
    /// # Panics
    /// When the device cannot be opened.
    pub fn new(config: EmulatorConfig) -> Emu {
        Emu {
            gpu: Gpu::emulated(config).expect("emulated device"),
            buffers: Mutex::new(Vec::new()),
        }
    }

    /// Allocates `bytes` bytes (at least one) and returns their address.
    ///
    /// # Errors
    /// The allocation's.
    pub fn mem_alloc(&self, bytes: usize) -> Result<DevicePtr> {
        let b = DeviceBuffer::<u8>::alloc(&self.gpu, bytes.max(1))?;
        let p = b.device_ptr();
        self.buffers.lock().expect("buffers").push(b);
        Ok(p)
    }

    /// Frees the allocation at `ptr` (later accesses to it are out of bounds).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no allocation starts at `ptr`.
    pub fn mem_free(&self, ptr: DevicePtr) -> Result<()> {
        let mut buffers = self.buffers.lock().expect("buffers");
        let i = buffers
            .iter()
            .position(|b| b.device_ptr() == ptr)
            .ok_or_else(|| {
                Error::from(error::InvalidArgument {
                    op: "Emu::mem_free",
                    message: format!("no allocation at {ptr:#x}"),
                })
            })?;
        drop(buffers.swap_remove(i));
        Ok(())
    }

    /// Runs `f` on the `bytes` bytes at `ptr`, inside one allocation.
    fn with_range<R>(
        &self,
        ptr: DevicePtr,
        bytes: usize,
        f: impl FnOnce(&mut DeviceBuffer<u8>, usize) -> Result<R>,
    ) -> Result<R> {
        let mut buffers = self.buffers.lock().expect("buffers");
        let b = buffers
            .iter_mut()
            .find(|b| {
                ptr >= b.device_ptr() && ptr + bytes as u64 <= b.device_ptr() + b.len() as u64
            })
            .ok_or_else(|| {
                Error::from(error::InvalidArgument {
                    op: "Emu",
                    message: format!("{bytes} bytes at {ptr:#x} are not allocated"),
                })
            })?;
        let start = (ptr - b.device_ptr()) as usize;
        f(b, start)
    }

    /// Copies `bytes` to `ptr`.
    ///
    /// # Errors
    /// The copy's, or [`Error::InvalidArgument`] outside the allocations.
    pub fn memcpy_htod(&self, ptr: DevicePtr, bytes: &[u8]) -> Result<()> {
        self.with_range(ptr, bytes.len(), |b, s| {
            b.slice_mut(s..s + bytes.len())?.copy_from_host(bytes)
        })
    }

    /// Copies the bytes at `ptr` into `dst`.
    ///
    /// # Errors
    /// The copy's, or [`Error::InvalidArgument`] outside the allocations.
    pub fn memcpy_dtoh(&self, dst: &mut [u8], ptr: DevicePtr) -> Result<()> {
        self.with_range(ptr, dst.len(), |b, s| {
            b.slice(s..s + dst.len())?.copy_to_host(dst)
        })
    }

    /// Loads hand-written PTX.
    ///
    /// # Errors
    /// The load log when the emulator rejects it.
    pub fn module_load(&self, ptx: &str) -> std::result::Result<Module, LoadFailure> {
        self.gpu.load_ptx("hand-written", ptx).map_err(|e| match e {
            Error::ModuleLoad(e) => LoadFailure { log: e.jit_log },
            other => LoadFailure {
                log: other.to_string(),
            },
        })
    }
}

/// An emulated device of `memory_capacity` bytes, otherwise as configured by default.
pub fn emulator(memory_capacity: usize) -> Emu {
    Emu::new(EmulatorConfig {
        memory_capacity,
        ..EmulatorConfig::default()
    })
}

/// 32-bit elements the emulator helpers copy, little-endian as the device stores them.
pub trait Word: Copy {
    /// The element's bytes.
    fn to_le(self) -> [u8; 4];
    /// The element from its bytes.
    fn from_le(bytes: [u8; 4]) -> Self;
}

impl Word for f32 {
    fn to_le(self) -> [u8; 4] {
        self.to_le_bytes()
    }
    fn from_le(bytes: [u8; 4]) -> f32 {
        f32::from_le_bytes(bytes)
    }
}

impl Word for u32 {
    fn to_le(self) -> [u8; 4] {
        self.to_le_bytes()
    }
    fn from_le(bytes: [u8; 4]) -> u32 {
        u32::from_le_bytes(bytes)
    }
}

/// Allocates room for `v` on `e` (at least one element) and copies `v` there.
///
/// # Panics
/// When the emulator cannot allocate or copy.
pub fn emu_upload<T: Word>(e: &Emu, v: &[T]) -> DevicePtr {
    let p = e.mem_alloc(v.len().max(1) * 4).expect("alloc");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le()).collect();
    e.memcpy_htod(p, &bytes).expect("htod");
    p
}

/// Copies `n` elements at `p` back from `e`.
///
/// # Panics
/// When the copy fails.
pub fn emu_download<T: Word>(e: &Emu, p: DevicePtr, n: usize) -> Vec<T> {
    let mut b = vec![0u8; n * 4];
    e.memcpy_dtoh(&mut b, p).expect("dtoh");
    b.chunks_exact(4)
        .map(|c| T::from_le([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// One entry of a hand-written PTX module loaded on the emulated device.
pub struct EmuKernel<'e> {
    emu: &'e Emu,
    function: Function,
}

impl<'e> EmuKernel<'e> {
    /// Loads `ptx` on `e` and looks up `entry`.
    ///
    /// # Panics
    /// When the module does not load (the message holds the emulator's log, which names the
    /// line and the instruction).
    ///
    /// # Errors
    /// The emulator's, when `entry` is not in the module.
    pub fn load(e: &'e Emu, ptx: &str, entry: &str) -> Result<EmuKernel<'e>> {
        let module = e
            .module_load(ptx)
            .unwrap_or_else(|err| panic!("{entry} does not load: {}", err.log));
        let function = module.function(entry)?;
        Ok(EmuKernel { emu: e, function })
    }

    /// Launches the entry on the default stream with `shared` bytes of dynamic shared memory
    /// and waits for it.
    ///
    /// # Errors
    /// The emulator's (its run-time checks report as [`pagesift_gpu::Error::Emulator`]).
    pub fn launch(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        let stream = self.emu.gpu.default_stream();
        // SAFETY: test kernels on the emulated device, whose memory is its own (not the
        // process's) and which checks every access a kernel makes against its allocations;
        // the callers keep the buffers alive (`Emu`) and wait for the launch below.
        unsafe { stream.launch(&self.function, grid, block, shared, args) }?;
        stream.synchronize()
    }

    /// Unloads the module (when no other function of it is alive).
    ///
    /// # Errors
    /// None today; kept for the callers' symmetry with the load.
    pub fn unload(self) -> Result<()> {
        drop(self.function);
        Ok(())
    }
}

/// Loads `entry` of `ptx` on `e`, launches it once and unloads the module.
///
/// # Panics
/// As [`EmuKernel::load`].
///
/// # Errors
/// The lookup's or the unload's error, else the launch's.
pub fn emu_launch(
    e: &Emu,
    ptx: &str,
    entry: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    args: &[KernelArg],
) -> Result<()> {
    let k = EmuKernel::load(e, ptx, entry)?;
    let r = k.launch(grid, block, shared, args);
    k.unload()?;
    r
}

/// Assembles every variant of `variants` with NVIDIA's `ptxas` for its own target, asserting
/// each succeeds, for the test `test` (which names the skip). `ptxas` is found as by the
/// `ptxas` test: `PAGESIFT_PTXAS`, else `target/ptxas/ptxas`; without it the test prints why
/// it skipped and returns.
pub fn assemble_every_variant(test: &str, variants: &[pagesift_gpu::KernelVariant]) {
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas/ptxas");
    let ptxas = match std::env::var_os("PAGESIFT_PTXAS") {
        Some(p) => std::path::PathBuf::from(p),
        None if local.is_file() => local,
        None => {
            eprintln!("SKIPPED {test}: no ptxas");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!(
        "pagesift-{}-{}",
        test.replace("::", "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    for v in variants {
        let src = dir.join(format!("{}.ptx", v.entry));
        std::fs::write(&src, v.ptx).expect("writing the PTX");
        let out = std::process::Command::new(&ptxas)
            .arg(format!("-arch={}", v.target))
            .arg(&src)
            .arg("-o")
            .arg(dir.join(format!("{}.cubin", v.entry)))
            .output()
            .expect("running ptxas");
        assert!(
            out.status.success(),
            "{}: ptxas failed:\n{}",
            v.display_name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{test}: {} variants", variants.len());
}

//! cuBLAS loaded at run time through libloading, as the reference of the GEMM comparison: one
//! handle, `cublasSgemm` in the default or the TF32 tensor-op math for f32, `cublasGemmEx`
//! with f32 accumulation for f16 and bf16, queued on a [`Stream`] of ours so that the same
//! events time both.
//!
//! The library is looked for as `PAGESIFT_CUBLAS` names it, then as `libcublas.so.13` /
//! `libcublas.so.12` on the library path, under `/usr/local/cuda`, and in Python's `nvidia`
//! wheels (`nvidia-cublas-cu12` / `-cu13`, PyTorch's dependencies). A missing library or
//! symbol is an error naming what was tried, never a panic.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;

use crate::error::{DeviceMismatch, DriverError, InvalidArgument};
use crate::{
    Act, ActElement, BLayout, BackendKind, DeviceRead, DeviceWrite, Dtype, Gemm, Gpu, Result,
    Stream,
};

/// The environment variable naming the cuBLAS library to load before the usual names.
pub const CUBLAS_ENV: &str = "PAGESIFT_CUBLAS";

type Handle = *mut c_void;
type Create = unsafe extern "C" fn(*mut Handle) -> i32;
type Destroy = unsafe extern "C" fn(Handle) -> i32;
type SetStream = unsafe extern "C" fn(Handle, *mut c_void) -> i32;
type SetMathMode = unsafe extern "C" fn(Handle, i32) -> i32;
#[allow(clippy::type_complexity)]
type Sgemm = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const f32,
    *const f32,
    i32,
    *const f32,
    i32,
    *const f32,
    *mut f32,
    i32,
) -> i32;

#[allow(clippy::type_complexity)]
type GemmEx = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const c_void,
    *const c_void,
    i32,
    i32,
    *const c_void,
    i32,
    i32,
    *const c_void,
    *mut c_void,
    i32,
    i32,
    i32,
    i32,
) -> i32;

/// `CUBLAS_OP_N` and `CUBLAS_OP_T`.
const OP_N: i32 = 0;
const OP_T: i32 = 1;

/// `cudaDataType_t`: `CUDA_R_16F` and `CUDA_R_16BF`.
const CUDA_R_16F: i32 = 2;
const CUDA_R_16BF: i32 = 14;
/// `CUBLAS_COMPUTE_32F`: f32 accumulation, alpha and beta as f32.
const COMPUTE_32F: i32 = 68;
/// `CUBLAS_GEMM_DEFAULT`: cuBLAS's own choice of algorithm.
const GEMM_DEFAULT: i32 = -1;

/// The arithmetic cuBLAS is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CublasMath {
    /// `CUBLAS_DEFAULT_MATH`: exact f32 products and sums in `cublasSgemm`.
    Default,
    /// `CUBLAS_TF32_TENSOR_OP_MATH`: inputs rounded to TF32 on tensor cores.
    Tf32TensorOp,
}

impl CublasMath {
    fn mode(self) -> i32 {
        match self {
            CublasMath::Default => 0,
            CublasMath::Tf32TensorOp => 3,
        }
    }
}

/// An open cuBLAS library and one handle, created in the primary context of one device.
/// Neither `Send` nor `Sync` (a cuBLAS handle belongs to one host thread at a time).
pub struct Cublas {
    path: String,
    gpu: Gpu,
    handle: Handle,
    destroy: Destroy,
    set_stream: SetStream,
    set_math_mode: SetMathMode,
    sgemm: Sgemm,
    gemm_ex: GemmEx,
    /// The stream the handle queues on (held so that its driver handle stays valid).
    stream: RefCell<Option<Stream>>,
    math: Cell<Option<CublasMath>>,
    _lib: libloading::Library,
}

/// The entry points of one opened library.
struct Symbols {
    create: Create,
    destroy: Destroy,
    set_stream: SetStream,
    set_math_mode: SetMathMode,
    sgemm: Sgemm,
    gemm_ex: GemmEx,
}

impl Cublas {
    /// Opens cuBLAS (the first of the candidates in the module docs that loads and has every
    /// entry point) and creates a handle in `gpu`'s primary context.
    ///
    /// Errors, as text: the emulated device (no CUDA context), no library found (each
    /// candidate with its loader error), `cublasCreate_v2` failing.
    pub fn load(gpu: &Gpu) -> std::result::Result<Cublas, String> {
        if gpu.backend_kind() != BackendKind::Cuda {
            return Err("the emulated device has no CUDA context".into());
        }
        gpu.enter().map_err(|e| e.to_string())?;
        let mut tried = Vec::new();
        for path in candidates() {
            // SAFETY: opening a shared library runs its initializers; cuBLAS's have no
            // preconditions.
            let lib = match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => lib,
                Err(e) => {
                    tried.push(format!("{path}: {e}"));
                    continue;
                }
            };
            let fns = match symbols(&lib) {
                Ok(fns) => fns,
                Err(e) => {
                    tried.push(format!("{path}: {e}"));
                    continue;
                }
            };
            let mut handle: Handle = std::ptr::null_mut();
            // SAFETY: `handle` is a valid out pointer; the device's context is current (above).
            let status = unsafe { (fns.create)(&mut handle) };
            if status != 0 {
                return Err(format!(
                    "{path}: cublasCreate_v2 failed with {}",
                    status_name(status)
                ));
            }
            return Ok(Cublas {
                path,
                gpu: gpu.clone(),
                handle,
                destroy: fns.destroy,
                set_stream: fns.set_stream,
                set_math_mode: fns.set_math_mode,
                sgemm: fns.sgemm,
                gemm_ex: fns.gemm_ex,
                stream: RefCell::new(None),
                math: Cell::new(None),
                _lib: lib,
            });
        }
        Err(format!("not found (tried {})", tried.join("; ")))
    }

    /// The path or name the library was opened by.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Queues the row-major `C = alpha · A·B + beta · C` of `g` on `stream`, as cuBLAS's
    /// column-major `Cᵀ = Bᵀ·Aᵀ`, in the math `math`. The shape is checked against the buffers
    /// as [`crate::ops::gemm::gemm`] checks it; one matrix, no epilogue.
    ///
    /// Errors: [`crate::Error::InvalidArgument`] for a shape the buffers cannot hold, a batch
    /// or an activation; [`crate::Error::DeviceMismatch`] for a stream or buffer of another
    /// device; [`crate::Error::Driver`] naming the cuBLAS call and its status when cuBLAS
    /// refuses.
    ///
    /// # Safety
    /// cuBLAS takes raw addresses, so no buffer knows of this call (as with
    /// [`Stream::launch`]): the caller orders it after the pending work on `a`, `b` and `c` on
    /// other streams, synchronizes `stream` before the host reads `c`, and keeps the three
    /// alive until `stream` has finished the call.
    pub unsafe fn sgemm(
        &self,
        stream: &Stream,
        g: &Gemm,
        math: CublasMath,
        a: &impl DeviceRead<f32>,
        b: &impl DeviceRead<f32>,
        c: &mut impl DeviceWrite<f32>,
    ) -> Result<()> {
        const OP: &str = "cublasSgemm_v2";
        let Some(d) = self.prepare(OP, stream, g, math, a, b, c)? else {
            return Ok(());
        };
        let b_ptr = b.device_ptr() as *const f32;
        let a_ptr = a.device_ptr() as *const f32;
        let c_ptr = c.device_ptr_mut() as *mut f32;
        // SAFETY: a live handle bound to `stream` of its device; the shape was checked against
        // the three buffers by `prepare` (every element cuBLAS reads or writes lies inside
        // them); cuBLAS only reads `a` and `b`, and `c` is exclusively borrowed. Ordering and
        // lifetimes are the caller's (this function's contract).
        check(OP, unsafe {
            (self.sgemm)(
                self.handle,
                d.trans_b,
                OP_N,
                d.n,
                d.m,
                d.k,
                &g.alpha,
                b_ptr,
                d.ldb,
                a_ptr,
                d.lda,
                &g.beta,
                c_ptr,
                d.ldc,
            )
        })
    }

    /// [`Cublas::sgemm`] for f16 or bf16 `A`, `B` and `C`: `cublasGemmEx` with the three of
    /// `CUDA_R_16F` or `CUDA_R_16BF`, f32 accumulation (`CUBLAS_COMPUTE_32F`, alpha and beta
    /// as f32) and cuBLAS's default algorithm, in its default math (which allows it to reduce
    /// partial sums in the output type, as engines that call it allow by default).
    ///
    /// Errors: those of [`Cublas::sgemm`], and [`crate::Error::InvalidArgument`] for f32
    /// elements (which [`Cublas::sgemm`] takes).
    ///
    /// # Safety
    /// As for [`Cublas::sgemm`].
    pub unsafe fn gemm_ex<T: ActElement>(
        &self,
        stream: &Stream,
        g: &Gemm,
        a: &impl DeviceRead<T>,
        b: &impl DeviceRead<T>,
        c: &mut impl DeviceWrite<T>,
    ) -> Result<()> {
        const OP: &str = "cublasGemmEx";
        let data_type = match T::DTYPE {
            Dtype::F16 => CUDA_R_16F,
            Dtype::Bf16 => CUDA_R_16BF,
            other => {
                return Err(InvalidArgument {
                    op: OP,
                    message: format!("f16 or bf16 elements only, not {}", other.name()),
                }
                .into())
            }
        };
        let Some(d) = self.prepare(OP, stream, g, CublasMath::Default, a, b, c)? else {
            return Ok(());
        };
        let b_ptr = b.device_ptr() as *const c_void;
        let a_ptr = a.device_ptr() as *const c_void;
        let c_ptr = c.device_ptr_mut() as *mut c_void;
        let alpha: *const f32 = &g.alpha;
        let beta: *const f32 = &g.beta;
        // SAFETY: a live handle bound to `stream` of its device; the shape was checked against
        // the three buffers by `prepare` in elements of `T`, whose `cudaDataType_t` is the one
        // passed for all three; alpha and beta point to f32 values, as `CUBLAS_COMPUTE_32F`
        // reads them (host pointer mode, read before the call returns); cuBLAS only reads `a`
        // and `b`, and `c` is exclusively borrowed. Ordering and lifetimes are the caller's.
        check(OP, unsafe {
            (self.gemm_ex)(
                self.handle,
                d.trans_b,
                OP_N,
                d.n,
                d.m,
                d.k,
                alpha.cast(),
                b_ptr,
                data_type,
                d.ldb,
                a_ptr,
                data_type,
                d.lda,
                beta.cast(),
                c_ptr,
                data_type,
                d.ldc,
                COMPUTE_32F,
                GEMM_DEFAULT,
            )
        })
    }

    /// The checks and the setup of a call `op` of `g` on `stream` in `math`: every buffer and
    /// the stream on this handle's device, the shape against the buffers' lengths, one matrix
    /// without an epilogue, the sizes in cuBLAS's 32-bit integers; then the context made
    /// current, the handle bound to `stream` and set to `math`. `None` for an empty GEMM
    /// (nothing to queue).
    #[allow(clippy::too_many_arguments)]
    fn prepare<T: crate::DeviceRepr>(
        &self,
        op: &'static str,
        stream: &Stream,
        g: &Gemm,
        math: CublasMath,
        a: &impl DeviceRead<T>,
        b: &impl DeviceRead<T>,
        c: &impl DeviceRead<T>,
    ) -> Result<Option<ColumnMajor>> {
        for (object, gpu) in [("stream", stream.gpu()), ("buffer", a.gpu())]
            .into_iter()
            .chain([("buffer", b.gpu()), ("buffer", c.gpu())])
        {
            if !gpu.same_device(&self.gpu) {
                return Err(DeviceMismatch {
                    what: op.into(),
                    object,
                }
                .into());
            }
        }
        g.validate(op, a.len(), b.len(), c.len(), None, None)?;
        if g.batch != 1 || g.act != Act::Identity {
            return Err(InvalidArgument {
                op,
                message: "one matrix without an epilogue only".into(),
            }
            .into());
        }
        let dim = |v: usize| {
            i32::try_from(v).map_err(|_| {
                crate::Error::from(InvalidArgument {
                    op,
                    message: format!("{v} does not fit cuBLAS's 32-bit sizes"),
                })
            })
        };
        let d = ColumnMajor {
            m: dim(g.m)?,
            n: dim(g.n)?,
            k: dim(g.k)?,
            lda: dim(g.lda)?,
            ldb: dim(g.ldb)?,
            ldc: dim(g.ldc)?,
            // Row-major B [N, K] is column-major [K, N]: Bᵀ of the column-major product.
            trans_b: match g.b_layout {
                BLayout::NK => OP_T,
                BLayout::KN => OP_N,
            },
        };
        if g.is_empty() {
            return Ok(None);
        }
        self.gpu.enter()?;
        self.use_stream(stream)?;
        if self.math.get() != Some(math) {
            // SAFETY: a live handle; the mode is one of cuBLAS's math modes.
            check("cublasSetMathMode", unsafe {
                (self.set_math_mode)(self.handle, math.mode())
            })?;
            self.math.set(Some(math));
        }
        Ok(Some(d))
    }

    /// Binds the handle to `stream` unless it is bound to it already.
    fn use_stream(&self, stream: &Stream) -> Result<()> {
        let mut bound = self.stream.borrow_mut();
        if bound.as_ref().is_some_and(|s| s.same_stream(stream)) {
            return Ok(());
        }
        // SAFETY: a live handle; `raw_handle` is the driver stream of the same context, kept
        // alive by the clone stored below for as long as the handle queues on it.
        check("cublasSetStream_v2", unsafe {
            (self.set_stream)(self.handle, stream.raw_handle())
        })?;
        *bound = Some(stream.clone());
        Ok(())
    }
}

/// A GEMM's sizes in cuBLAS's integers, for the column-major `Cᵀ = op(Bᵀ)·Aᵀ` that computes
/// the row-major `C = A·B`: the calls pass our N as cuBLAS's `m` and our M as its `n`, and
/// keep our leading dimensions (a row-major matrix is the transpose of the column-major one
/// with the same leading dimension).
struct ColumnMajor {
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
    ldc: i32,
    /// `CUBLAS_OP_T` for B `[N, K]`, `CUBLAS_OP_N` for B `[K, N]`.
    trans_b: i32,
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // A failure leaves nothing to do: the handle is gone with the process.
        if self.gpu.enter().is_ok() {
            // SAFETY: the handle was created by `load` and is not used after this.
            let _ = unsafe { (self.destroy)(self.handle) };
        }
    }
}

impl std::fmt::Debug for Cublas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cublas").field("path", &self.path).finish()
    }
}

/// The entry points, or the first one missing.
fn symbols(lib: &libloading::Library) -> std::result::Result<Symbols, String> {
    fn get<T: Copy>(lib: &libloading::Library, name: &str) -> std::result::Result<T, String> {
        let symbol = format!("{name}\0");
        // SAFETY: each caller names `T` as the C signature the symbol has in cuBLAS 12 and 13.
        unsafe { lib.get::<T>(symbol.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("no {name}: {e}"))
    }
    Ok(Symbols {
        create: get(lib, "cublasCreate_v2")?,
        destroy: get(lib, "cublasDestroy_v2")?,
        set_stream: get(lib, "cublasSetStream_v2")?,
        set_math_mode: get(lib, "cublasSetMathMode")?,
        sgemm: get(lib, "cublasSgemm_v2")?,
        gemm_ex: get(lib, "cublasGemmEx")?,
    })
}

/// A cuBLAS status other than success as [`crate::Error::Driver`] naming the call.
fn check(call: &'static str, status: i32) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    Err(DriverError {
        call,
        code: status,
        name: status_name(status).into(),
        message: "cuBLAS refused the call".into(),
    }
    .into())
}

/// The name of a `cublasStatus_t`.
fn status_name(status: i32) -> &'static str {
    match status {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "an unknown cuBLAS status",
    }
}

/// The paths and names to try, in order.
fn candidates() -> Vec<String> {
    const NAMES: [&str; 2] = ["libcublas.so.13", "libcublas.so.12"];
    let mut v = Vec::new();
    if let Ok(p) = std::env::var(CUBLAS_ENV) {
        v.push(p);
    }
    for name in NAMES {
        v.push(name.to_string());
        v.push(format!("/usr/local/cuda/targets/x86_64-linux/lib/{name}"));
        v.push(format!("/usr/local/cuda/lib64/{name}"));
    }
    for root in ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"] {
        let Ok(dirs) = std::fs::read_dir(root) else {
            continue;
        };
        for python in dirs.flatten().map(|d| d.path()) {
            for sub in ["site-packages", "dist-packages"] {
                for lib in ["nvidia/cublas/lib", "nvidia/cu13/lib"] {
                    for name in NAMES {
                        let p = python.join(sub).join(lib).join(name);
                        if p.exists() {
                            v.push(p.display().to_string());
                        }
                    }
                }
            }
        }
    }
    v
}

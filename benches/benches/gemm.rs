//! GEMM against cuBLAS on the same device buffers, in one process.
//!
//! For each shape (M × N × K, B as weights `[N, K]` unless the row says `KN`) and precision:
//! our GEMM at `F32` and `Tf32x3` against `cublasSgemm` (default math: exact f32), at `Tf32`
//! against `cublasSgemm` in TF32 tensor-op math (M ≤ 8 runs the exact decode kernel at every
//! precision, so only `F32` is shown there), all timed the same way on the host clock around
//! batches of back-to-back calls ended by a device synchronization (3 warm-ups, median of 5
//! batches of at least ~20 ms), since cuBLAS queues on its own stream. Prints TFLOP/s (and
//! GB/s of weight bytes for M ≤ 8), our ratio to cuBLAS, the max error of each on 256
//! sampled outputs relative to `Σ |a b|` against an f64 dot product, and the cost of the fused
//! epilogue (bias + gelu + residual) against the plain GEMM. cuBLAS is loaded with
//! libloading (`PAGESIFT_CUBLAS`, then `libcublas.so.13` / `.12` on the library path, under
//! `/usr/local/cuda`, and in Python's `nvidia` wheels); where it is missing the bench says so
//! and prints our figures alone. Without a device it prints one line and exits 0.
//! `PAGESIFT_BENCH_SHAPES=MxNxK,..` restricts the run to those shapes,
//! `PAGESIFT_BENCH_PRECISIONS=F32,Tf32x3,Tf32` to those precisions.

use std::time::Instant;

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::gemm;
use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, Gemm, Gpu, Precision, Result};
use rand::{Rng, SeedableRng};

const SHAPES: &[(usize, usize, usize, BLayout)] = &[
    (1024, 1024, 1024, BLayout::NK),
    (2048, 2048, 2048, BLayout::NK),
    (4096, 4096, 4096, BLayout::NK),
    (4096, 4096, 4096, BLayout::KN),
    (8192, 8192, 8192, BLayout::NK),
    (512, 4096, 4096, BLayout::NK),
    (512, 14336, 4096, BLayout::NK),
    (512, 4096, 14336, BLayout::NK),
    (128, 4096, 4096, BLayout::NK),
    (32, 4096, 4096, BLayout::NK),
    (8, 4096, 4096, BLayout::NK),
    (1, 4096, 4096, BLayout::NK),
    (1, 14336, 4096, BLayout::NK),
];

fn main() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("gemm bench: skipped, no device: {e}");
            return;
        }
    };
    if let Err(e) = run(&gpu) {
        eprintln!("gemm bench failed: {e}");
        std::process::exit(1);
    }
}

fn run(gpu: &Gpu) -> Result<()> {
    let emulated = gpu.backend_kind() == pagesift_gpu::BackendKind::Emulated;
    let cublas = if emulated {
        Err("the emulated device".to_string())
    } else {
        cublas::Cublas::load()
    };
    match &cublas {
        Ok(c) => println!("gemm bench on {}: cuBLAS from {}", gpu.name(), c.path),
        Err(e) => println!(
            "gemm bench on {}: no cuBLAS ({e}); our figures only",
            gpu.name()
        ),
    }
    println!(
        "{:<22} {:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8}",
        "shape",
        "prec",
        "ours TF/s",
        "cuBLAS",
        "ratio",
        "ours err",
        "cuBL err",
        "GB/s W",
        "epi cost"
    );
    let mut precisions = vec![Precision::F32, Precision::Tf32x3, Precision::Tf32];
    if let Ok(only) = std::env::var("PAGESIFT_BENCH_PRECISIONS") {
        let names: Vec<&str> = only.split(',').map(str::trim).collect();
        precisions.retain(|p| names.contains(&format!("{p:?}").as_str()));
    }
    let mut shapes: Vec<_> = if emulated {
        vec![(33, 40, 17, BLayout::NK)]
    } else {
        SHAPES.to_vec()
    };
    // `PAGESIFT_BENCH_SHAPES=4096x4096x4096,512x4096x4096`: only those (for profilers).
    if let Ok(only) = std::env::var("PAGESIFT_BENCH_SHAPES") {
        let names: Vec<&str> = only.split(',').map(str::trim).collect();
        shapes.retain(|(m, n, k, _)| names.contains(&format!("{m}x{n}x{k}").as_str()));
    }
    for (m, n, k, layout) in shapes {
        bench_shape(gpu, cublas.as_ref().ok(), m, n, k, layout, &precisions)?;
    }
    Ok(())
}

fn bench_shape(
    gpu: &Gpu,
    cublas: Option<&cublas::Cublas>,
    m: usize,
    n: usize,
    k: usize,
    layout: BLayout,
    precisions: &[Precision],
) -> Result<()> {
    let mut rng = rand::rngs::StdRng::seed_from_u64((m * 31 + n * 7 + k) as u64);
    let host = |len: usize, rng: &mut rand::rngs::StdRng| -> Vec<f32> {
        (0..len).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
    };
    let (a_h, b_h) = (host(m * k, &mut rng), host(n * k, &mut rng));
    let (bias_h, res_h) = (host(n, &mut rng), host(m * n, &mut rng));
    let a = DeviceBuffer::from_host(gpu, &a_h)?;
    let b = DeviceBuffer::from_host(gpu, &b_h)?;
    let bias = DeviceBuffer::from_host(gpu, &bias_h)?;
    let res = DeviceBuffer::from_host(gpu, &res_h)?;
    let mut c = DeviceBuffer::<f32>::zeroed(gpu, m * n)?;
    let stream = gpu.default_stream();
    let g = Gemm::new(m, n, k, layout);
    let err = |out: &[f32]| -> f64 {
        let mut worst = 0.0f64;
        let mut r = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..256 {
            let (i, j) = (r.gen_range(0..m), r.gen_range(0..n));
            let want = output(&g, &a_h, &b_h, None, None, out, (0, i, j));
            let e =
                (f64::from(out[i * n + j]) - want.value).abs() / want.s_ab.max(f64::MIN_POSITIVE);
            worst = worst.max(e);
        }
        worst
    };
    let flops = 2.0 * (m * n * k) as f64;
    let tf = |s: f64| flops / s / 1e12;
    let shape = format!(
        "{m}x{n}x{k}{}",
        if layout == BLayout::KN { " KN" } else { "" }
    );
    // cuBLAS in exact f32 (the bar of F32 and Tf32x3) and in TF32 (the bar of Tf32).
    let mut bars = Vec::new();
    for tf32 in [false, true] {
        let wanted = precisions
            .iter()
            .any(|&p| (p == Precision::Tf32) == tf32 && (m > 8 || p == Precision::F32));
        let bar = match cublas {
            Some(cb) if wanted => {
                let t = time(gpu, || cb.sgemm(gpu, &g, tf32, &a, &b, &mut c))?;
                Some((t, err(&c.to_host()?)))
            }
            _ => None,
        };
        bars.push(bar);
    }
    for &precision in precisions {
        if m <= 8 && precision != Precision::F32 {
            continue;
        }
        let g = g.with_precision(precision);
        let ours = time(gpu, || gemm(&stream, &g, &a, &b, None, None, &mut c))?;
        let ours_err = err(&c.to_host()?);
        let ge = g.with_act(Act::Gelu);
        let fused = time(gpu, || {
            gemm(
                &stream,
                &ge,
                &a,
                &b,
                Some(&bias as &dyn DeviceRead<f32>),
                Some(&res as &dyn DeviceRead<f32>),
                &mut c,
            )
        })?;
        let bar = bars[(precision == Precision::Tf32) as usize];
        let weights_gbs = if m <= 8 {
            format!("{:.0}", (n * k * 4) as f64 / ours / 1e9)
        } else {
            "-".into()
        };
        println!(
            "{shape:<22} {:<7} {:>9.1} {:>9} {:>7} {:>9.2e} {:>9} {:>9} {:>+7.1}%",
            format!("{precision:?}"),
            tf(ours),
            bar.map_or("-".into(), |(t, _)| format!("{:.1}", tf(t))),
            bar.map_or("-".into(), |(t, _)| format!("{:.3}x", t / ours)),
            ours_err,
            bar.map_or("-".into(), |(_, e)| format!("{e:.2e}")),
            weights_gbs,
            100.0 * (fused / ours - 1.0),
        );
    }
    Ok(())
}

/// Seconds per call of `f`: 3 warm-ups, then the median of 5 batches of back-to-back calls,
/// each ended by a device synchronization and at least ~20 ms long.
fn time(gpu: &Gpu, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
        gpu.synchronize()?;
    }
    let t = Instant::now();
    f()?;
    gpu.synchronize()?;
    let one = t.elapsed().as_secs_f64();
    let iters = ((0.02 / one.max(1e-7)) as usize).clamp(1, 2000);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        gpu.synchronize()?;
        times.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

/// cuBLAS through libloading, for comparison only.
mod cublas {
    use super::*;
    use std::ffi::c_void;

    type Handle = *mut c_void;
    type Create = unsafe extern "C" fn(*mut Handle) -> i32;
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

    pub struct Cublas {
        pub path: String,
        handle: Handle,
        sgemm: Sgemm,
        set_math_mode: SetMathMode,
        _lib: libloading::Library,
    }

    const OP_N: i32 = 0;
    const OP_T: i32 = 1;
    /// `CUBLAS_DEFAULT_MATH` and `CUBLAS_TF32_TENSOR_OP_MATH`.
    const DEFAULT_MATH: i32 = 0;
    const TF32_TENSOR_OP_MATH: i32 = 3;

    impl Cublas {
        /// Opens cuBLAS and creates a handle (in the current, primary context).
        pub fn load() -> std::result::Result<Cublas, String> {
            let mut tried = Vec::new();
            for path in candidates() {
                // SAFETY: loading cuBLAS runs its initializers, which have no preconditions.
                let lib = match unsafe { libloading::Library::new(&path) } {
                    Ok(l) => l,
                    Err(e) => {
                        tried.push(format!("{path}: {e}"));
                        continue;
                    }
                };
                // SAFETY: the symbols have these C signatures in every cuBLAS 12 / 13.
                let (create, sgemm, set_math_mode) = unsafe {
                    let create: Create =
                        *lib.get(b"cublasCreate_v2\0").map_err(|e| e.to_string())?;
                    let sgemm: Sgemm = *lib.get(b"cublasSgemm_v2\0").map_err(|e| e.to_string())?;
                    let set_math_mode: SetMathMode =
                        *lib.get(b"cublasSetMathMode\0").map_err(|e| e.to_string())?;
                    (create, sgemm, set_math_mode)
                };
                let mut handle: Handle = std::ptr::null_mut();
                // SAFETY: `handle` is a valid out pointer.
                let st = unsafe { create(&mut handle) };
                if st != 0 {
                    return Err(format!("cublasCreate failed with status {st}"));
                }
                return Ok(Cublas {
                    path,
                    handle,
                    sgemm,
                    set_math_mode,
                    _lib: lib,
                });
            }
            Err(format!("not found (tried {})", tried.join("; ")))
        }

        /// The row-major `C = A·B` of `g` as cuBLAS's column-major `Cᵀ = Bᵀ·Aᵀ`, in TF32
        /// tensor-op math where `tf32`.
        pub fn sgemm(
            &self,
            gpu: &Gpu,
            g: &Gemm,
            tf32: bool,
            a: &DeviceBuffer<f32>,
            b: &DeviceBuffer<f32>,
            c: &mut DeviceBuffer<f32>,
        ) -> Result<()> {
            let (one, zero) = (1.0f32, 0.0f32);
            let trans_b = if g.b_layout == BLayout::NK {
                OP_T
            } else {
                OP_N
            };
            // Our buffers' queued work must be done before cuBLAS's stream touches them.
            gpu.synchronize()?;
            let mode = if tf32 {
                TF32_TENSOR_OP_MATH
            } else {
                DEFAULT_MATH
            };
            // SAFETY: a live handle; the mode is one of cuBLAS's math modes.
            let st = unsafe { (self.set_math_mode)(self.handle, mode) };
            if st != 0 {
                eprintln!("cublasSetMathMode failed with status {st}");
            }
            // SAFETY: the pointers are live device allocations of the sizes the shape needs
            // (checked by the caller's `gemm` of the same shape); cuBLAS only reads `a`, `b`.
            let st = unsafe {
                (self.sgemm)(
                    self.handle,
                    trans_b,
                    OP_N,
                    g.n as i32,
                    g.m as i32,
                    g.k as i32,
                    &one,
                    b.device_ptr() as *const f32,
                    g.ldb as i32,
                    a.device_ptr() as *const f32,
                    g.lda as i32,
                    &zero,
                    c.device_ptr() as *mut f32,
                    g.ldc as i32,
                )
            };
            if st != 0 {
                eprintln!("cublasSgemm failed with status {st}");
            }
            Ok(())
        }
    }

    fn candidates() -> Vec<String> {
        let mut v = Vec::new();
        if let Ok(p) = std::env::var("PAGESIFT_CUBLAS") {
            v.push(p);
        }
        for name in ["libcublas.so.13", "libcublas.so.12"] {
            v.push(name.to_string());
            v.push(format!("/usr/local/cuda/targets/x86_64-linux/lib/{name}"));
            v.push(format!("/usr/local/cuda/lib64/{name}"));
        }
        // Python wheels (nvidia-cublas-cu12 / -cu13, PyTorch's dependencies).
        for root in ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"] {
            if let Ok(dirs) = std::fs::read_dir(root) {
                for d in dirs.flatten() {
                    let py = d.path();
                    for sub in ["site-packages", "dist-packages"] {
                        for lib in ["nvidia/cublas/lib", "nvidia/cu13/lib"] {
                            for name in ["libcublas.so.13", "libcublas.so.12"] {
                                let p = py.join(sub).join(lib).join(name);
                                if p.exists() {
                                    v.push(p.display().to_string());
                                }
                            }
                        }
                    }
                }
            }
        }
        v
    }
}

//! The engine adapter (`pagesift_gpu::engine`): products of several weight matrices of every
//! format sharing one upload of the activations, against the f64 reference on the dequantized
//! weights, outputs poisoned first; its statistics; and its fallback paths (a matrix that does
//! not fit comes back `None`, bad calls are typed errors, and no driver is an error of the
//! constructor).

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::engine::{Adapter, Job, Offload};
use pagesift_gpu::ops::quant::PREFILL_MIN_TOKENS;
use pagesift_gpu::quant::{dequantize, quantize, QuantMatrix, WeightFormat};
use pagesift_gpu::{BLayout, Dtype, Error, Gemm};
use pagesift_tests::util::{poison_f32, random_f32_from};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::RwLock;

/// The device's memory reserve is the process's, so the test that sets it to the whole memory
/// runs alone (write) and the tests that upload share the device with each other (read).
static RESERVE: RwLock<()> = RwLock::new(());

const FORMATS: [WeightFormat; 6] = [
    WeightFormat::Q4_0,
    WeightFormat::Q8_0,
    WeightFormat::Q4K,
    WeightFormat::Bf16,
    WeightFormat::F16,
    WeightFormat::F32,
];

/// A random `n_out × n_in` matrix quantized in `format`: its bytes and dequantized values.
fn matrix(
    format: WeightFormat,
    n_out: usize,
    n_in: usize,
    rng: &mut StdRng,
) -> (Vec<u8>, Vec<f32>) {
    let w = random_f32_from(rng, n_out * n_in, -1.0..1.0);
    let bytes = quantize(format, &w, n_out, n_in).expect("quantize");
    let deq = dequantize(format, &bytes, n_out, n_in).expect("dequantize");
    (bytes, deq)
}

/// Checks `y` (`tokens × n_out`) against the f64 reference of `x · wᵀ`.
fn check(tag: &str, x: &[f32], w: &[f32], y: &[f32], tokens: usize, n_out: usize, n_in: usize) {
    check_in(tag, x, w, y, tokens, n_out, n_in, Dtype::F32);
}

/// [`check`] for inputs of `input` (their values in `x` and `w`).
#[allow(clippy::too_many_arguments)]
fn check_in(
    tag: &str,
    x: &[f32],
    w: &[f32],
    y: &[f32],
    tokens: usize,
    n_out: usize,
    n_in: usize,
    input: Dtype,
) {
    let g = Gemm::new(tokens, n_out, n_in, BLayout::NK);
    for t in 0..tokens {
        for j in 0..n_out {
            let want = output(&g, x, w, None, None, &[], (0, t, j));
            let tol = want.tolerance_for(&g, input, Dtype::F32);
            let v = y[t * n_out + j];
            let err = (f64::from(v) - want.value).abs();
            assert!(
                err <= tol,
                "{tag}: y[{t}][{j}] = {v:e}, reference {:e}, error {err:e} > {tol:e}",
                want.value
            );
        }
    }
}

#[test]
fn jobs_of_every_format_share_one_activation_upload() {
    let _shared = RESERVE.read().unwrap_or_else(|e| e.into_inner());
    let Some(gpu) = gpu_or_skip("jobs_of_every_format_share_one_activation_upload") else {
        return;
    };
    let emulated = is_emulated(&gpu);
    let adapter = Adapter::with_gpu(gpu).expect("adapter");
    let mut rng = StdRng::seed_from_u64(11);
    let (max_out, token_counts): (usize, &[usize]) = if emulated {
        (40, &[1, 3, 17])
    } else {
        (300, &[1, 2, 5, 16, 17, 40])
    };
    let mut calls = 0;
    let mut products = 0;
    for &tokens in token_counts {
        let n_in = 256 * rng.gen_range(1..=2);
        let x = random_f32_from(&mut rng, tokens * n_in, -1.0..1.0);
        // Two matrices of each of two formats (gate and up of one layer, say), sharing `x`.
        let f0 = FORMATS[rng.gen_range(0..FORMATS.len())];
        let f1 = FORMATS[rng.gen_range(0..FORMATS.len())];
        let shapes: Vec<(WeightFormat, usize)> = vec![
            (f0, rng.gen_range(1..=max_out)),
            (f1, rng.gen_range(1..=max_out)),
        ];
        let host: Vec<(Vec<u8>, Vec<f32>)> = shapes
            .iter()
            .map(|&(f, n_out)| matrix(f, n_out, n_in, &mut rng))
            .collect();
        let dev: Vec<_> = shapes
            .iter()
            .zip(&host)
            .map(|(&(f, n_out), (bytes, _))| {
                let m = QuantMatrix::new(f, bytes, n_out, n_in).expect("view");
                adapter.upload(&m).expect("upload").expect("fits")
            })
            .collect();
        let mut ys: Vec<Vec<f32>> = shapes
            .iter()
            .map(|&(_, n_out)| vec![poison_f32(); tokens * n_out])
            .collect();
        {
            let mut jobs: Vec<Job<'_>> = dev
                .iter()
                .zip(ys.iter_mut())
                .map(|(d, y)| Job::new(d, y))
                .collect();
            adapter.matmul(&x, tokens, n_in, &mut jobs).expect("matmul");
        }
        calls += 1;
        products += 2;
        for ((&(f, n_out), (_, w)), y) in shapes.iter().zip(&host).zip(&ys) {
            let tag = format!("{f} {tokens} tokens {n_out} x {n_in}");
            check(&tag, &x, w, y, tokens, n_out, n_in);
        }
    }
    let s = adapter.stats();
    assert_eq!(s.calls, calls);
    assert_eq!(s.jobs, products);
    assert!(
        s.bytes_in > 0 && s.bytes_out > 0 && s.weight_bytes > 0,
        "{s}"
    );
    assert!(s.kernel_ns > 0, "{s}");
}

/// With `set_prefill_half`, prefill-sized calls multiply on tensor cores in that type (the
/// reference takes the activations and weights rounded to it), smaller ones stay exact; a
/// type the tensor cores do not take is refused.
#[test]
fn prefill_half_rounds_prefill_calls_to_it() {
    let _shared = RESERVE.read().unwrap_or_else(|e| e.into_inner());
    let Some(gpu) = gpu_or_skip("prefill_half_rounds_prefill_calls_to_it") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        println!("SKIP prefill_half_rounds_prefill_calls_to_it: the device is below sm_80");
        return;
    }
    let emulated = is_emulated(&gpu);
    let mut adapter = Adapter::with_gpu(gpu).expect("adapter");
    assert_eq!(adapter.prefill_half(), None);
    match adapter.set_prefill_half(Some(Dtype::F32)) {
        Err(Error::InvalidArgument(a)) if a.message.contains("f16 or bf16") => {}
        other => panic!("an f32 prefill type must be refused, got {other:?}"),
    }
    let mut rng = StdRng::seed_from_u64(23);
    let (n_out, n_in) = if emulated { (70, 256) } else { (300, 1024) };
    for half in [Dtype::Bf16, Dtype::F16] {
        adapter.set_prefill_half(Some(half)).expect("a 16-bit type");
        for tokens in [3, PREFILL_MIN_TOKENS + 4] {
            let x = random_f32_from(&mut rng, tokens * n_in, -1.0..1.0);
            let (bytes, w) = matrix(WeightFormat::Q4_0, n_out, n_in, &mut rng);
            let m = QuantMatrix::new(WeightFormat::Q4_0, &bytes, n_out, n_in).expect("view");
            let d = adapter.upload(&m).expect("upload").expect("fits");
            let mut y = vec![poison_f32(); tokens * n_out];
            adapter
                .matmul(&x, tokens, n_in, &mut [Job::new(&d, &mut y)])
                .expect("matmul");
            let tag = format!("{} {tokens} tokens", half.name());
            if tokens >= PREFILL_MIN_TOKENS {
                let round = |v: &[f32]| -> Vec<f32> {
                    v.iter()
                        .map(|&v| match half {
                            Dtype::F16 => half::f16::from_f32(v).to_f32(),
                            _ => half::bf16::from_f32(v).to_f32(),
                        })
                        .collect()
                };
                check_in(&tag, &round(&x), &round(&w), &y, tokens, n_out, n_in, half);
            } else {
                check(&tag, &x, &w, &y, tokens, n_out, n_in);
            }
        }
    }
}

#[test]
fn a_matrix_that_does_not_fit_stays_with_the_engine() {
    let _alone = RESERVE.write().unwrap_or_else(|e| e.into_inner());
    let Some(gpu) = gpu_or_skip("a_matrix_that_does_not_fit_stays_with_the_engine") else {
        return;
    };
    let (_, total) = gpu.mem_info().expect("mem info");
    let adapter = Adapter::with_gpu(gpu.clone()).expect("adapter");
    let mut rng = StdRng::seed_from_u64(3);
    let (bytes, _) = matrix(WeightFormat::Q4_0, 8, 64, &mut rng);
    let m = QuantMatrix::new(WeightFormat::Q4_0, &bytes, 8, 64).expect("view");
    // A reserve of the whole memory: nothing fits.
    gpu.set_memory_reserve(total);
    assert!(adapter.upload(&m).expect("upload").is_none());
    gpu.set_memory_reserve(1 << 20);
    let dev = adapter.upload(&m).expect("upload").expect("fits now");
    assert_eq!((dev.n_out(), dev.n_in(), dev.bytes()), (8, 64, bytes.len()));
}

#[test]
fn bad_calls_are_typed_errors() {
    let _shared = RESERVE.read().unwrap_or_else(|e| e.into_inner());
    let Some(gpu) = gpu_or_skip("bad_calls_are_typed_errors") else {
        return;
    };
    let adapter = Adapter::with_gpu(gpu).expect("adapter");
    let mut rng = StdRng::seed_from_u64(5);
    let (bytes, _) = matrix(WeightFormat::Q8_0, 4, 64, &mut rng);
    let m = QuantMatrix::new(WeightFormat::Q8_0, &bytes, 4, 64).expect("view");
    let dev = adapter.upload(&m).expect("upload").expect("fits");
    let x = vec![0.5f32; 2 * 64];
    let mut y = vec![0f32; 8];
    // Activations of another width.
    let e = adapter
        .matmul(&x, 2, 32, &mut [Job::new(&dev, &mut y)])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("64 inputs"), "{e}");
    // Outputs too short.
    let mut short = vec![0f32; 7];
    let e = adapter
        .matmul(&x, 2, 64, &mut [Job::new(&dev, &mut short)])
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch(_)), "{e}");
    // Activations too short, and no tokens.
    let e = adapter
        .matmul(&x[..100], 2, 64, &mut [Job::new(&dev, &mut y)])
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch(_)), "{e}");
    let e = adapter
        .matmul(&x, 0, 64, &mut [Job::new(&dev, &mut y)])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // A good call still works after the refused ones, which counted nothing.
    adapter
        .matmul(&x, 2, 64, &mut [Job::new(&dev, &mut y)])
        .expect("matmul");
    assert_eq!(adapter.stats().calls, 1);
}

#[test]
fn wants_follows_the_offload_thresholds() {
    let _shared = RESERVE.read().unwrap_or_else(|e| e.into_inner());
    let Some(gpu) = gpu_or_skip("wants_follows_the_offload_thresholds") else {
        return;
    };
    let mut adapter = Adapter::with_gpu(gpu).expect("adapter");
    assert_eq!(adapter.offload(), Offload::default());
    assert!(adapter.wants(14336, 4096, 1));
    assert!(adapter.wants(4096, 4096, 64));
    assert!(!adapter.wants(4096, 4096, 65), "past max_tokens");
    assert!(!adapter.wants(4096, 4096, 0));
    assert!(!adapter.wants(64, 64, 1), "too small to pay for a call");
    assert!(!adapter.wants(4096, 4100, 1), "rows no block format has");
    adapter.set_offload(Offload {
        min_weight_bytes: 0,
        max_tokens: 8,
    });
    assert!(adapter.wants(64, 64, 1));
    assert!(!adapter.wants(64, 64, 9));
}

#[test]
fn without_a_driver_the_adapter_is_an_error() {
    const CHILD: &str = "PAGESIFT_ENGINE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        match Adapter::new(0) {
            Err(Error::DriverNotFound(_)) => {}
            Err(e) => panic!("expected DriverNotFound, got {e}"),
            Ok(_) => panic!("an adapter without a driver"),
        }
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = std::process::Command::new(exe)
        .args([
            "without_a_driver_the_adapter_is_an_error",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("PAGESIFT_GPU_LIB", "/nonexistent/libcuda.so.1")
        .env_remove("PAGESIFT_GPU_DEVICE")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bench engine` (the adapter's call against the same work without it) prints a row per shape
/// and token count with both times and their ratio.
#[test]
fn the_engine_bench_prints_both_times() {
    let Some(gpu) = gpu_or_skip("engine_gpu::the_engine_bench_prints_both_times") else {
        return;
    };
    let _shared = RESERVE.read().unwrap_or_else(|e| e.into_inner());
    let opts = pagesift_gpu::bench::EngineBenchOptions {
        format: WeightFormat::Q4_0,
        shapes: vec![(40, 256)],
        tokens: vec![1, 3],
    };
    let mut out = Vec::new();
    pagesift_gpu::bench::run_engine(&gpu, &opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("40x256")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (row, tokens) in rows.iter().zip(["1", "3"]) {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(f[1], tokens, "{row}");
        let bare: f64 = f[2].parse().unwrap();
        let through: f64 = f[3].parse().unwrap();
        let ratio: f64 = f[4].trim_end_matches('x').parse().unwrap();
        assert!(bare > 0.0 && through > 0.0, "{row}");
        assert!(
            (ratio - through / bare).abs() <= 0.01 * ratio + 0.002,
            "{row}"
        );
    }
}

//! `wgmma` with A in registers against A in shared memory (`pagesift_tests::wgmma_kernels`):
//! the 64 × 64 products of random bf16 and TF32 tiles, each once with A through a descriptor
//! and once with A in the threads' register fragments, must agree bit for bit, and equal the
//! host's reference of the tensor core's f32 accumulation (exactly on the emulated device,
//! within rounding on a GPU, whose accumulation order may differ). The mutant that loads the
//! next A fragment into the registers before the `wgmma_wait` of the step that reads them is
//! reported by the emulated device.
//!
//! Runs on a GPU of compute capability 9.0, or on the emulated device as one of 9.0
//! (`PAGESIFT_GPU_DEVICE=emulated`).

use half::bf16;
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{DeviceBuffer, Error, Gpu, LaunchConfig};
use pagesift_tests::wgmma_kernels::{self as wk, tf32_of, wgmma_reference, K_BF16, K_TF32, TILE};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The device for sm_90a kernels: a GPU of compute capability 9.0, or an emulated one of 9.0
/// in place of the emulated device; `None` (printed) for another GPU.
fn hopper(test: &str) -> Option<Gpu> {
    let gpu = gpu_or_skip(test)?;
    if is_emulated(&gpu) {
        let config = EmulatorConfig {
            compute_capability: (9, 0),
            ..EmulatorConfig::from_env().expect("emulator configuration")
        };
        return Some(Gpu::emulated(config).expect("emulated device"));
    }
    if gpu.compute_capability() != (9, 0) {
        eprintln!("SKIPPED {test}: needs compute capability 9.0 (sm_90a)");
        return None;
    }
    Some(gpu)
}

/// Random non-zero values of either sign with magnitudes in [1/64, 2): the products of two
/// are exact in f64 and so are their sums over a step, so the reference does not depend on
/// the order of the sum.
fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut r = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let m: f32 = r.gen_range(1.0 / 64.0..2.0);
            if r.gen() {
                m
            } else {
                -m
            }
        })
        .collect()
}

/// `got` equals `want` bit for bit on the emulated device; on a GPU within a few f32 ulps of
/// the sum of magnitudes (the tensor core's own accumulation order and rounding).
fn check_reference(what: &str, got: &[f32], want: &[f32], mag: &[f64], exact: bool) {
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let ok = if exact {
            g.to_bits() == w.to_bits()
        } else {
            ((g - w).abs() as f64) <= 8.0 * f32::EPSILON as f64 * m
        };
        assert!(
            ok,
            "{what}: c[{}][{}] = {g:e} ({:#x}), the reference is {w:e} ({:#x})",
            i / TILE,
            i % TILE,
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// The sums of the magnitudes of the products of each element of the tile.
fn magnitudes(a: &[f64], b: &[f64], k: usize) -> Vec<f64> {
    (0..TILE * TILE)
        .map(|e| {
            let (i, j) = (e / TILE, e % TILE);
            (0..k).map(|x| (a[i * k + x] * b[j * k + x]).abs()).sum()
        })
        .collect()
}

fn assert_same_bits(what: &str, regs: &[f32], desc: &[f32]) {
    for (i, (r, d)) in regs.iter().zip(desc).enumerate() {
        assert_eq!(
            r.to_bits(),
            d.to_bits(),
            "{what}: c[{}][{}] with A in registers is {r:e}, with A in shared memory {d:e}",
            i / TILE,
            i % TILE
        );
    }
}

#[test]
fn wgmma_bf16_with_a_in_registers_matches_a_in_shared_memory() {
    let test = "wgmma_bf16_with_a_in_registers_matches_a_in_shared_memory";
    let Some(gpu) = hopper(test) else {
        return;
    };
    let exact = is_emulated(&gpu);
    let stream = gpu.default_stream();
    for seed in [1u64, 2, 3] {
        let a: Vec<bf16> = random_values(TILE * K_BF16, 10 * seed)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let b: Vec<bf16> = random_values(TILE * K_BF16, 10 * seed + 1)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let a64: Vec<f64> = a.iter().map(|x| x.to_f64()).collect();
        let b64: Vec<f64> = b.iter().map(|x| x.to_f64()).collect();
        let want = wgmma_reference(&a64, &b64, K_BF16, 16);
        let mag = magnitudes(&a64, &b64, K_BF16);
        let da = DeviceBuffer::from_host(&gpu, &a).expect("upload a");
        let db = DeviceBuffer::from_host(&gpu, &b).expect("upload b");
        let mut out = Vec::new();
        for regs in [false, true] {
            let mut dc = DeviceBuffer::from_host(&gpu, &vec![f32::NAN; TILE * TILE]).expect("c");
            wk::wgmma_a_bf16::launch(
                &stream,
                LaunchConfig::grid_1d(1),
                regs,
                false,
                &da,
                &db,
                &mut dc,
            )
            .expect("launch");
            out.push(dc.to_host().expect("c"));
        }
        let what = format!("bf16, seed {seed}");
        assert!(out[0].iter().any(|&x| x != 0.0), "{what}: all zero");
        check_reference(
            &format!("{what}, A in shared memory"),
            &out[0],
            &want,
            &mag,
            exact,
        );
        assert_same_bits(&what, &out[1], &out[0]);
    }
}

#[test]
fn wgmma_tf32_with_a_in_registers_matches_a_in_shared_memory() {
    let test = "wgmma_tf32_with_a_in_registers_matches_a_in_shared_memory";
    let Some(gpu) = hopper(test) else {
        return;
    };
    let exact = is_emulated(&gpu);
    let stream = gpu.default_stream();
    for seed in [4u64, 5, 6] {
        // Full f32 values: both paths read only their top 19 bits.
        let a = random_values(TILE * K_TF32, 10 * seed);
        let b = random_values(TILE * K_TF32, 10 * seed + 1);
        assert!(a.iter().any(|&x| tf32_of(x) != x), "values beyond TF32");
        let a64: Vec<f64> = a.iter().map(|&x| tf32_of(x) as f64).collect();
        let b64: Vec<f64> = b.iter().map(|&x| tf32_of(x) as f64).collect();
        let want = wgmma_reference(&a64, &b64, K_TF32, 8);
        let mag = magnitudes(&a64, &b64, K_TF32);
        let da = DeviceBuffer::from_host(&gpu, &a).expect("upload a");
        let db = DeviceBuffer::from_host(&gpu, &b).expect("upload b");
        let mut out = Vec::new();
        for regs in [false, true] {
            let mut dc = DeviceBuffer::from_host(&gpu, &vec![f32::NAN; TILE * TILE]).expect("c");
            wk::wgmma_a_tf32::launch(&stream, LaunchConfig::grid_1d(1), regs, &da, &db, &mut dc)
                .expect("launch");
            out.push(dc.to_host().expect("c"));
        }
        let what = format!("tf32, seed {seed}");
        check_reference(
            &format!("{what}, A in shared memory"),
            &out[0],
            &want,
            &mag,
            exact,
        );
        assert_same_bits(&what, &out[1], &out[0]);
    }
}

/// The mutant: the next step's A fragment is loaded into the registers the pending `wgmma`
/// reads A from, before its `wgmma_wait`. The emulated device reports the write; on a GPU the
/// outcome is undefined, so only the launch is made.
#[test]
fn writing_a_registers_before_the_wgmma_wait_is_reported() {
    let test = "writing_a_registers_before_the_wgmma_wait_is_reported";
    let Some(gpu) = hopper(test) else {
        return;
    };
    let stream = gpu.default_stream();
    let a: Vec<bf16> = random_values(TILE * K_BF16, 7)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let da = DeviceBuffer::from_host(&gpu, &a).expect("upload a");
    let mut dc = DeviceBuffer::from_host(&gpu, &vec![0f32; TILE * TILE]).expect("c");
    let r = wk::wgmma_a_bf16::launch(
        &stream,
        LaunchConfig::grid_1d(1),
        true,
        true,
        &da,
        &da,
        &mut dc,
    )
    .and_then(|()| stream.synchronize());
    if !is_emulated(&gpu) {
        return;
    }
    match r {
        Err(Error::Emulator(e)) => assert!(
            e.message
                .contains("write to a wgmma A register before its wgmma.wait_group"),
            "reported, but not as a write to an A register: {e}"
        ),
        other => panic!("the early write of the A registers was not reported: {other:?}"),
    }
}

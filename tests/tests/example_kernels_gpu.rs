//! The example kernels of `pagesift_tests::example_kernels` run on the device (the GPU, or the
//! emulated one with `PAGESIFT_GPU_DEVICE=emulated`) against CPU references: the compiler's
//! semantics end to end (control flow, helpers, shared memory, shuffles, atomics, unrolling,
//! vector accesses, halves, `asm!`, bool parameters). Random data, outputs poisoned, shapes that
//! are not multiples of the block.

use half::{bf16, f16};
use pagesift_gpu::cpu::act::erf_f64;
use pagesift_gpu::{DeviceBuffer, Gpu, LaunchConfig};
use pagesift_tests::example_kernels::{self, ExampleAct};
use pagesift_tests::gpu_or_skip;
use rand::{Rng, SeedableRng};

fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-4.0f32..4.0)).collect()
}

fn upload<T: pagesift_gpu::DeviceRepr>(gpu: &Gpu, data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_host(gpu, data).expect("upload")
}

#[test]
fn bias_act_every_variant() {
    let Some(gpu) = gpu_or_skip("bias_act_every_variant") else {
        return;
    };
    let (n, cols) = (1000u32, 37u32);
    let x = random_f32(n as usize, 1);
    let bias = random_f32(cols as usize, 2);
    let (dx, db) = (upload(&gpu, &x), upload(&gpu, &bias));
    let stream = gpu.default_stream();
    for act in [ExampleAct::Identity, ExampleAct::Relu, ExampleAct::Gelu] {
        let mut dy = upload(&gpu, &vec![f32::NAN; n as usize + 5]);
        example_kernels::bias_act::launch(
            &stream,
            LaunchConfig::grid_1d(n.div_ceil(256)),
            act,
            &dx,
            &db,
            &mut dy,
            n,
            cols,
        )
        .expect("launch");
        let y = dy.to_host().expect("download");
        for i in 0..n as usize {
            let v = (x[i] + bias[i % cols as usize]) as f64;
            let want = match act {
                ExampleAct::Identity => v,
                ExampleAct::Relu => v.max(0.0),
                ExampleAct::Gelu => 0.5 * v * (1.0 + erf_f64(v * std::f64::consts::FRAC_1_SQRT_2)),
            };
            let tol = if act == ExampleAct::Gelu {
                2e-6 * want.abs().max(1.0)
            } else {
                0.0
            };
            assert!(
                (y[i] as f64 - want).abs() <= tol,
                "{act:?} i={i}: {} vs {want}",
                y[i]
            );
        }
        assert!(
            y[n as usize..].iter().all(|v| v.is_nan()),
            "{act:?} wrote past n"
        );
    }
}

#[test]
fn block_sum_reduces_with_shuffles_shared_memory_and_atomics() {
    let Some(gpu) = gpu_or_skip("block_sum_reduces_with_shuffles_shared_memory_and_atomics") else {
        return;
    };
    let n = 3001u32;
    let x = random_f32(n as usize, 3);
    let dx = upload(&gpu, &x);
    let mut total = upload(&gpu, &[0.0f32]);
    let stream = gpu.default_stream();
    example_kernels::block_sum::launch(&stream, LaunchConfig::grid_1d(5), &dx, &mut total, n)
        .expect("launch");
    let got = total.to_host().expect("download")[0] as f64;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let bound = 1e-6 * x.iter().map(|v| v.abs() as f64).sum::<f64>();
    assert!((got - want).abs() <= bound, "{got} vs {want}");
}

#[test]
fn tile_scale_both_variants_and_alignments() {
    let Some(gpu) = gpu_or_skip("tile_scale_both_variants_and_alignments") else {
        return;
    };
    let stream = gpu.default_stream();
    for (rows, cols) in [(13u32, 37u32), (9, 40), (1, 3)] {
        let x = random_f32((rows * cols) as usize, 4);
        let dx = upload(&gpu, &x);
        for (rpb, vec) in [(8u32, 1u32), (4, 2)] {
            let mut dy = upload(&gpu, &vec![f32::NAN; x.len() + 3]);
            let grid = [cols.div_ceil(128 * vec), rows.div_ceil(rpb), 1];
            example_kernels::tile_scale::launch(
                &stream,
                LaunchConfig::grid(grid),
                rpb,
                vec,
                &dx,
                &mut dy,
                rows,
                cols,
                -1.5,
            )
            .expect("launch");
            let y = dy.to_host().expect("download");
            for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                assert_eq!(*b, -1.5 * a, "rows={rows} cols={cols} rpb={rpb} i={i}");
            }
            assert!(y[x.len()..].iter().all(|v| v.is_nan()));
        }
    }
}

#[test]
fn tile_scale_rejects_a_variant_that_was_not_compiled() {
    let Some(gpu) = gpu_or_skip("tile_scale_rejects_a_variant_that_was_not_compiled") else {
        return;
    };
    let stream = gpu.default_stream();
    let dx = upload(&gpu, &[1.0f32; 4]);
    let mut dy = upload(&gpu, &[0.0f32; 4]);
    let err = example_kernels::tile_scale::launch(
        &stream,
        LaunchConfig::grid_1d(1),
        8,
        2,
        &dx,
        &mut dy,
        1,
        4,
        1.0,
    );
    assert!(err.is_err());
}

#[test]
fn half_axpy_packed_math_and_bf16_rounding() {
    let Some(gpu) = gpu_or_skip("half_axpy_packed_math_and_bf16_rounding") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        eprintln!("SKIPPED half_axpy_packed_math_and_bf16_rounding: needs sm_80");
        return;
    }
    let pairs = 301u32;
    let xs: Vec<f16> = random_f32(2 * pairs as usize, 5)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let ys: Vec<f16> = random_f32(2 * pairs as usize, 6)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let (dx, mut dy) = (upload(&gpu, &xs), upload(&gpu, &ys));
    let mut dz = upload(&gpu, &vec![bf16::from_bits(0x7fc1); 2 * pairs as usize]);
    let a = 0.75f32;
    let stream = gpu.default_stream();
    example_kernels::half_axpy::launch(
        &stream,
        LaunchConfig::grid_1d(pairs.div_ceil(128)),
        &dx,
        &mut dy,
        &mut dz,
        pairs,
        a,
    )
    .expect("launch");
    let (y, z) = (
        dy.to_host().expect("download"),
        dz.to_host().expect("download"),
    );
    for i in 0..xs.len() {
        // fma in f16: one rounding of a * x + y.
        let want = f16::from_f64(0.75 * xs[i].to_f64() + ys[i].to_f64());
        assert_eq!(y[i], want, "i={i}");
        assert_eq!(z[i], bf16::from_f32(xs[i].to_f32()), "i={i}");
    }
}

#[test]
fn clock_mix_asm_and_bool_parameter() {
    let Some(gpu) = gpu_or_skip("clock_mix_asm_and_bool_parameter") else {
        return;
    };
    let n = 77u32;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let x: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
    let dx = upload(&gpu, &x);
    let stream = gpu.default_stream();
    for add in [false, true] {
        let mut dy = upload(&gpu, &vec![0xdead_beefu32; n as usize]);
        example_kernels::clock_mix::launch(
            &stream,
            LaunchConfig::grid_1d(n.div_ceil(64)),
            &dx,
            &mut dy,
            n,
            add,
        )
        .expect("launch");
        let y = dy.to_host().expect("download");
        for i in 0..n as usize {
            let mut want = x[i] ^ (x[i] >> 7);
            if add {
                want = want.wrapping_add(i as u32);
            }
            assert_eq!(y[i], want, "add={add} i={i}");
        }
    }
}

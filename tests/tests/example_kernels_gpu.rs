//! The example kernels of `pagesift_tests::example_kernels` run on the device (the GPU, or the
//! emulated one with `PAGESIFT_GPU_DEVICE=emulated`) against CPU references: the compiler's
//! semantics end to end (control flow, helpers, shared memory, shuffles, atomics, unrolling,
//! vector accesses, halves, `asm!`, bool parameters). Random data, outputs poisoned, shapes that
//! are not multiples of the block.

use half::{bf16, f16};
use pagesift_gpu::cpu::act::erf_f64;
use pagesift_gpu::cpu::round;
use pagesift_gpu::{DeviceBuffer, Gpu, LaunchConfig};
use pagesift_tests::example_kernels::{self, ExampleAct};
use pagesift_tests::{gpu_or_skip, is_emulated};
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
        let want = round::f16_mul_add(f16::from_f32(a), xs[i], ys[i]);
        assert_eq!(y[i], want, "i={i}");
        assert_eq!(z[i], bf16::from_f32(xs[i].to_f32()), "i={i}");
    }
}

/// Operand bit patterns `[a, b, c]` of `n` fused multiply-adds in the 16-bit `fmt`: arbitrary
/// patterns (NaN, infinities, subnormals), moderate values, products exactly on a midpoint of
/// the format with an addend far below f32's resolution of the sum (or zero: a tie), and
/// products next to a midpoint with the addend that lands the sum on it or one of its ulps
/// either side.
fn fma_operands(fmt: round::Format, n: usize, seed: u64) -> [Vec<u16>; 3] {
    use round::Rounding::{NearestEven, TowardZero};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let m = fmt.fraction_bits();
    let rn = |x: f64| round::round_f64(x, fmt, NearestEven) as u16;
    let sign = |rng: &mut rand::rngs::StdRng| if rng.gen() { 0x8000u16 } else { 0 };
    let mut out: [Vec<u16>; 3] = Default::default();
    for i in 0..n {
        let ops: [u16; 3] = match i % 4 {
            0 => rng.gen(),
            1 => [(); 3].map(|_| rn(rng.gen_range(-8.0..8.0))),
            2 => {
                // An odd integer of m + 2 bits with a factor; both factors fit m + 1 bits.
                let (f1, f2) = loop {
                    let v: u64 = (1 << (m + 1)) | rng.gen_range(0..1u64 << (m + 1)) | 1;
                    if let Some(f) = (3..)
                        .step_by(2)
                        .take_while(|f| f * f <= v)
                        .find(|f| v.is_multiple_of(*f))
                    {
                        break (f, v / f);
                    }
                };
                let unit = |f: u64| f as f64 / (1u64 << (63 - f.leading_zeros())) as f64;
                let scale = 2f64.powi(rng.gen_range(-3..4));
                let (a, b) = (rn(unit(f1) * scale), rn(unit(f2) * 2.0));
                let p = fmt.to_f64(a.into()) * fmt.to_f64(b.into());
                let tiny = p * 2f64.powi(-rng.gen_range(26..40));
                [a | sign(&mut rng), b, rn(tiny) | sign(&mut rng)]
            }
            _ => {
                let (a, b) = (rn(rng.gen_range(-4.0..4.0)), rn(rng.gen_range(-4.0..4.0)));
                let p = fmt.to_f64(a.into()) * fmt.to_f64(b.into());
                let lower = round::round_f64(p.abs(), fmt, TowardZero);
                let mid = (fmt.to_f64(lower) + fmt.to_f64(lower + 1)) / 2.0 * p.signum();
                let c = rn(mid - p);
                let c = match rng.gen_range(0..3) {
                    0 => c,
                    1 if c & 0x7fff != 0 => c - 1,
                    _ => c + 1,
                };
                [a, b, c]
            }
        };
        for k in 0..3 {
            out[k].push(ops[k]);
        }
    }
    out
}

/// `fma.rn.f16x2` and `fma.rn.bf16x2` from `mul_add` on pairs: every lane bit for bit the
/// correctly rounded `a * b + c` of the CPU reference (NaN as any NaN), on random operands and
/// sums on or next to midpoints; a few million on a GPU.
#[test]
fn half2_fma_rounds_once_like_the_cpu_reference() {
    let Some(gpu) = gpu_or_skip("half2_fma_rounds_once_like_the_cpu_reference") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        eprintln!("SKIPPED half2_fma_rounds_once_like_the_cpu_reference: needs sm_80");
        return;
    }
    let ptx = example_kernels::half2_fma::VARIANTS[0].ptx;
    assert!(
        ptx.contains("fma.rn.f16x2") && ptx.contains("fma.rn.bf16x2"),
        "packed fma instructions expected:\n{ptx}"
    );
    let pairs: u32 = if is_emulated(&gpu) {
        8191
    } else {
        (1 << 21) + 77
    };
    let n = 2 * pairs as usize;
    let [a, b, c] = fma_operands(round::Format::F16, n, 14);
    let [ab, bb, cb] = fma_operands(round::Format::BF16, n, 15);
    let h = |v: &[u16]| v.iter().map(|&x| f16::from_bits(x)).collect::<Vec<_>>();
    let bh = |v: &[u16]| v.iter().map(|&x| bf16::from_bits(x)).collect::<Vec<_>>();
    let (a, b, c) = (h(&a), h(&b), h(&c));
    let (ab, bb, cb) = (bh(&ab), bh(&bb), bh(&cb));
    // Poisoned outputs, two elements longer than the kernel writes.
    let mut dd = upload(&gpu, &vec![f16::from_bits(0x7e5a); n + 2]);
    let mut ddb = upload(&gpu, &vec![bf16::from_bits(0x7f5a); n + 2]);
    let stream = gpu.default_stream();
    example_kernels::half2_fma::launch(
        &stream,
        LaunchConfig::grid_1d(pairs.div_ceil(256)),
        &upload(&gpu, &a),
        &upload(&gpu, &b),
        &upload(&gpu, &c),
        &mut dd,
        &upload(&gpu, &ab),
        &upload(&gpu, &bb),
        &upload(&gpu, &cb),
        &mut ddb,
        pairs,
    )
    .expect("launch");
    let (d, db) = (
        dd.to_host().expect("download"),
        ddb.to_host().expect("download"),
    );
    let same = |got: f64, want: f64, gb: u16, wb: u16| gb == wb || (got.is_nan() && want.is_nan());
    let (mut bad, mut twice) = (Vec::new(), [0usize; 2]);
    for i in 0..n {
        let want = round::f16_mul_add(a[i], b[i], c[i]);
        if !same(d[i].to_f64(), want.to_f64(), d[i].to_bits(), want.to_bits()) {
            bad.push(format!(
                "f16 {i}: {} * {} + {} = {:#06x}, want {:#06x}",
                a[i],
                b[i],
                c[i],
                d[i].to_bits(),
                want.to_bits()
            ));
        }
        let exact = a[i].to_f64() * b[i].to_f64() + c[i].to_f64();
        twice[0] += usize::from(!want.is_nan() && f16::from_f64(exact) != want);
        let want = round::bf16_mul_add(ab[i], bb[i], cb[i]);
        if !same(
            db[i].to_f64(),
            want.to_f64(),
            db[i].to_bits(),
            want.to_bits(),
        ) {
            bad.push(format!(
                "bf16 {i}: {} * {} + {} = {:#06x}, want {:#06x}",
                ab[i],
                bb[i],
                cb[i],
                db[i].to_bits(),
                want.to_bits()
            ));
        }
        let exact = ab[i].to_f64() * bb[i].to_f64() + cb[i].to_f64();
        twice[1] += usize::from(!want.is_nan() && bf16::from_f64(exact) != want);
    }
    assert!(
        bad.is_empty(),
        "{} of {} results differ:\n{}",
        bad.len(),
        2 * n,
        bad[..bad.len().min(20)].join("\n")
    );
    assert!(
        d[n..].iter().all(|v| v.to_bits() == 0x7e5a)
            && db[n..].iter().all(|v| v.to_bits() == 0x7f5a),
        "wrote past the pairs"
    );
    // The inputs include sums that rounding through f32 (f64 sum, then `half`'s from_f64) gets
    // wrong.
    assert!(twice[0] > 0 && twice[1] > 0, "no hard cases: {twice:?}");
    eprintln!(
        "half2_fma: {} results checked ({} f16 and {} bf16 that two roundings get wrong)",
        2 * n,
        twice[0],
        twice[1]
    );
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

/// The distance from `got` to the exact `want` in units of the f32 spacing at `want`.
fn ulps(got: f32, want: f64) -> f64 {
    if got.is_nan() && want.is_nan() || (got as f64) == want || got == want as f32 {
        return 0.0;
    }
    if !got.is_finite() || !want.is_finite() {
        return f64::INFINITY;
    }
    let a = (want as f32).abs().max(f32::MIN_POSITIVE);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
    (got as f64 - want).abs() / ulp
}

fn log_uniform(rng: &mut rand::rngs::StdRng, lo: f64, hi: f64) -> f32 {
    (lo.ln() + rng.gen::<f64>() * (hi.ln() - lo.ln())).exp() as f32
}

#[test]
fn special_functions_meet_their_documented_accuracy() {
    use example_kernels::SpecialFn as F;
    let Some(gpu) = gpu_or_skip("special_functions_meet_their_documented_accuracy") else {
        return;
    };
    let stream = gpu.default_stream();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let count = 20_000;
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        1e-40,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    // (function, inputs, reference, max ulps, max absolute error)
    type Reference = fn(f64) -> f64;
    let cases: Vec<(F, Vec<f32>, Reference, f64, f64)> = vec![
        (
            F::Exp,
            (0..count).map(|_| rng.gen_range(-104.0f32..89.0)).collect(),
            f64::exp,
            2.0,
            0.0,
        ),
        (
            F::Exp2,
            (0..count)
                .map(|_| rng.gen_range(-150.0f32..128.5))
                .collect(),
            f64::exp2,
            2.0,
            0.0,
        ),
        (
            F::Ln,
            (0..count)
                .map(|_| log_uniform(&mut rng, 1e-44, 3e38))
                .collect(),
            f64::ln,
            1.0,
            0.0,
        ),
        (
            F::Log2,
            (0..count)
                .map(|_| log_uniform(&mut rng, 1e-44, 3e38))
                .collect(),
            f64::log2,
            2.0,
            0.0,
        ),
        (
            F::Tanh,
            (0..count)
                .map(|_| rng.gen_range(-12.0f32..12.0) * if rng.gen() { 1.0 } else { 0.01 })
                .collect(),
            f64::tanh,
            3.0,
            0.0,
        ),
        (
            F::Erf,
            (0..count)
                .map(|_| rng.gen_range(-6.0f32..6.0) * if rng.gen() { 1.0 } else { 0.001 })
                .collect(),
            erf_f64,
            f64::INFINITY,
            2e-7,
        ),
        (
            F::Rsqrt,
            (0..count)
                .map(|_| log_uniform(&mut rng, 1e-37, 3e38))
                .collect(),
            |x: f64| 1.0 / x.sqrt(),
            1.5,
            0.0,
        ),
        (
            F::ExpFast,
            (0..count).map(|_| rng.gen_range(-80.0f32..80.0)).collect(),
            f64::exp,
            f64::INFINITY,
            0.0,
        ),
        (
            F::TanhFast,
            (0..count).map(|_| rng.gen_range(-12.0f32..12.0)).collect(),
            f64::tanh,
            f64::INFINITY,
            1e-3,
        ),
        (
            F::ErfFast,
            (0..count).map(|_| rng.gen_range(-6.0f32..6.0)).collect(),
            erf_f64,
            f64::INFINITY,
            1e-6,
        ),
    ];
    for (f, mut xs, reference, max_ulps, max_abs) in cases {
        xs.extend(edges);
        let dx = upload(&gpu, &xs);
        let mut dy = upload(&gpu, &vec![f32::from_bits(0x7fc0_dead); xs.len()]);
        let n = xs.len() as u32;
        example_kernels::special_fn::launch(
            &stream,
            LaunchConfig::grid_1d(n.div_ceil(128)),
            f,
            &dx,
            &mut dy,
            n,
        )
        .expect("launch");
        let ys = dy.to_host().expect("download");
        let (mut worst_ulps, mut worst_abs, mut worst_rel) = (0.0f64, 0.0f64, 0.0f64);
        for (&x, &y) in xs.iter().zip(&ys) {
            let want = reference(x as f64);
            let u = ulps(y, want);
            let abs = if want.is_finite() && y.is_finite() {
                (y as f64 - want).abs()
            } else {
                u
            };
            let rel = if want != 0.0 { abs / want.abs() } else { abs };
            worst_ulps = worst_ulps.max(u);
            worst_abs = worst_abs.max(abs);
            worst_rel = worst_rel.max(rel);
            let ok = match f {
                F::ExpFast => {
                    rel <= 2e-6 * (1.0 + (x as f64).abs()) || (want < 1e-30 && abs < 1e-30)
                }
                _ if max_abs > 0.0 => abs <= max_abs,
                _ => u <= max_ulps,
            };
            assert!(
                ok || (x.is_nan() && y.is_nan()),
                "{f:?}({x:e}) = {y:e}, want {want:e} ({u} ulp, abs {abs:e})"
            );
        }
        println!("{f:?}: max {worst_ulps:.2} ulp, abs {worst_abs:.2e}, rel {worst_rel:.2e} over {} inputs", xs.len());
    }
}

#[test]
fn chunk_reverse_through_dynamic_shared_memory() {
    let Some(gpu) = gpu_or_skip("chunk_reverse_through_dynamic_shared_memory") else {
        return;
    };
    let stream = gpu.default_stream();
    let v = example_kernels::chunk_reverse::VARIANTS;
    assert!(v[0].dynamic_shared && v[0].static_shared_bytes == 0);
    for n in [1u32, 127, 128, 300] {
        let x = random_f32(n as usize, 8);
        let dx = upload(&gpu, &x);
        let mut dy = upload(&gpu, &vec![f32::NAN; n as usize]);
        let cfg = LaunchConfig::grid_1d(n.div_ceil(128)).with_shared_mem(512);
        example_kernels::chunk_reverse::launch(&stream, cfg, &dx, &mut dy, n).expect("launch");
        let y = dy.to_host().expect("download");
        for (c, chunk) in x.chunks(128).enumerate() {
            for (t, &got) in y[c * 128..c * 128 + chunk.len()].iter().enumerate() {
                assert_eq!(got, chunk[chunk.len() - 1 - t], "n={n} chunk={c} t={t}");
            }
        }
    }
}

#[test]
fn mma_tile_bf16_on_tensor_cores() {
    let Some(gpu) = gpu_or_skip("mma_tile_bf16_on_tensor_cores") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        eprintln!("SKIPPED mma_tile_bf16_on_tensor_cores: needs sm_80");
        return;
    }
    let a: Vec<bf16> = random_f32(256, 9).into_iter().map(bf16::from_f32).collect();
    let bt: Vec<bf16> = random_f32(128, 10)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let (da, db) = (upload(&gpu, &a), upload(&gpu, &bt));
    let mut dc = upload(&gpu, &vec![f32::NAN; 128]);
    let stream = gpu.default_stream();
    example_kernels::mma_tile_bf16::launch(&stream, LaunchConfig::grid_1d(1), &da, &db, &mut dc)
        .expect("launch");
    let c = dc.to_host().expect("download");
    for i in 0..16 {
        for j in 0..8 {
            let want: f64 = (0..16)
                .map(|k| a[i * 16 + k].to_f64() * bt[j * 16 + k].to_f64())
                .sum();
            let got = c[i * 8 + j] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "c[{i}][{j}] = {got}, want {want}"
            );
        }
    }
}

#[test]
fn language_semantics_match_the_host() {
    let Some(gpu) = gpu_or_skip("language_semantics_match_the_host") else {
        return;
    };
    let n = 300usize;
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut x: Vec<f32> = (0..n).map(|_| rng.gen_range(-5.0f32..5.0)).collect();
    x[0] = f32::NAN;
    x[1] = 1e30;
    x[2] = -1e30;
    let mut k: Vec<i32> = (0..n).map(|_| rng.gen_range(-2000..2000)).collect();
    k[3] = i32::MAX;
    k[4] = i32::MIN;
    let (dx, dk) = (upload(&gpu, &x), upload(&gpu, &k));
    let mut dy = upload(&gpu, &vec![0xdead_beefu32; 12 * n]);
    let stream = gpu.default_stream();
    example_kernels::semantics::launch(
        &stream,
        LaunchConfig::grid_1d((n as u32).div_ceil(64)),
        &dx,
        &dk,
        &mut dy,
        n as u32,
    )
    .expect("launch");
    let y = dy.to_host().expect("download");
    for i in 0..n {
        let want = example_kernels::semantics_reference(&x, &k, i);
        assert_eq!(
            &y[12 * i..12 * i + 12],
            &want[..],
            "element {i}: x={} k={}",
            x[i],
            k[i]
        );
    }
}

/// `x as U` for every numeric `U`, as Rust computes it (f16 / bf16 as the kernels convert:
/// halves through f32 where the target has no direct conversion).
#[derive(Debug)]
struct Casts {
    i8: i8,
    i16: i16,
    i32: i32,
    i64: i64,
    u8: u8,
    u16: u16,
    u32: u32,
    u64: u64,
    f16: f16,
    bf16: bf16,
    f32: f32,
    f64: f64,
}

macro_rules! casts_of {
    ($v:expr, $f16:expr, $bf16:expr) => {{
        let v = $v;
        Casts {
            i8: v as i8,
            i16: v as i16,
            i32: v as i32,
            i64: v as i64,
            u8: v as u8,
            u16: v as u16,
            u32: v as u32,
            u64: v as u64,
            f16: $f16,
            bf16: $bf16,
            f32: v as f32,
            f64: v as f64,
        }
    }};
}

fn same_bits(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Runs `casts_from_<T>` on `xs` and compares every output with `expect`.
macro_rules! check_casts {
    ($gpu:expr, $kernel:ident, $xs:expr, $expect:expr) => {{
        let gpu: &Gpu = $gpu;
        let xs = $xs;
        let n = xs.len();
        let stream = gpu.default_stream();
        let dx = upload(gpu, &xs);
        let mut o_i8 = upload(gpu, &vec![0x5ai8; n]);
        let mut o_i16 = upload(gpu, &vec![0x5a5ai16; n]);
        let mut o_i32 = upload(gpu, &vec![0x5a5a_5a5ai32; n]);
        let mut o_i64 = upload(gpu, &vec![0x5a5a_5a5ai64; n]);
        let mut o_u8 = upload(gpu, &vec![0x5au8; n]);
        let mut o_u16 = upload(gpu, &vec![0x5a5au16; n]);
        let mut o_u32 = upload(gpu, &vec![0x5a5a_5a5au32; n]);
        let mut o_u64 = upload(gpu, &vec![0x5a5a_5a5au64; n]);
        let mut o_f16 = upload(gpu, &vec![f16::from_bits(0x7e5a); n]);
        let mut o_bf16 = upload(gpu, &vec![bf16::from_bits(0x7f5a); n]);
        let mut o_f32 = upload(gpu, &vec![f32::from_bits(0x7fc0_5a5a); n]);
        let mut o_f64 = upload(gpu, &vec![f64::from_bits(0x7ff8_0000_5a5a_5a5a); n]);
        example_kernels::$kernel::launch(
            &stream,
            LaunchConfig::grid_1d((n as u32).div_ceil(64)),
            &dx,
            &mut o_i8,
            &mut o_i16,
            &mut o_i32,
            &mut o_i64,
            &mut o_u8,
            &mut o_u16,
            &mut o_u32,
            &mut o_u64,
            &mut o_f16,
            &mut o_bf16,
            &mut o_f32,
            &mut o_f64,
            n as u32,
        )
        .expect("launch");
        let got = (
            o_i8.to_host().expect("download"),
            o_i16.to_host().expect("download"),
            o_i32.to_host().expect("download"),
            o_i64.to_host().expect("download"),
            o_u8.to_host().expect("download"),
            o_u16.to_host().expect("download"),
            o_u32.to_host().expect("download"),
            o_u64.to_host().expect("download"),
            o_f16.to_host().expect("download"),
            o_bf16.to_host().expect("download"),
            o_f32.to_host().expect("download"),
            o_f64.to_host().expect("download"),
        );
        for (i, &x) in xs.iter().enumerate() {
            let w: Casts = $expect(x);
            let what = format!("{} {:?}", stringify!($kernel), x);
            assert_eq!(got.0[i], w.i8, "{what} as i8");
            assert_eq!(got.1[i], w.i16, "{what} as i16");
            assert_eq!(got.2[i], w.i32, "{what} as i32");
            assert_eq!(got.3[i], w.i64, "{what} as i64");
            assert_eq!(got.4[i], w.u8, "{what} as u8");
            assert_eq!(got.5[i], w.u16, "{what} as u16");
            assert_eq!(got.6[i], w.u32, "{what} as u32");
            assert_eq!(got.7[i], w.u64, "{what} as u64");
            assert!(
                same_bits(got.8[i].to_f64(), w.f16.to_f64()),
                "{what} as f16: {} vs {}",
                got.8[i],
                w.f16
            );
            assert!(
                same_bits(got.9[i].to_f64(), w.bf16.to_f64()),
                "{what} as bf16: {} vs {}",
                got.9[i],
                w.bf16
            );
            assert!(
                same_bits(got.10[i] as f64, w.f32 as f64),
                "{what} as f32: {} vs {}",
                got.10[i],
                w.f32
            );
            assert!(
                same_bits(got.11[i], w.f64),
                "{what} as f64: {} vs {}",
                got.11[i],
                w.f64
            );
        }
    }};
}

fn float_inputs(rng: &mut rand::rngs::StdRng) -> Vec<f64> {
    let mut v = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e30,
        -1e30,
        3e9,
        -3e9,
        255.5,
        256.0,
        -128.5,
        -129.0,
        65504.0,
        65520.0,
        65536.5,
        1e-8,
        1e-40,
        0.999_999,
        -0.999_999,
        2147483647.0,
        -2147483648.0,
        4294967296.0,
        1.8446744073709552e19,
        -9.223372036854776e18,
    ];
    for _ in 0..200 {
        let mag = 10f64.powf(rng.gen_range(-10.0..25.0));
        v.push(if rng.gen() { mag } else { -mag });
    }
    // Midpoints of f16 and one f64 ulp either side (rounding through f32 makes ties of these).
    v.push(0.7692870795726776);
    for _ in 0..50 {
        let b = rng.gen_range(0..0x7bffu16);
        let mid = (f16::from_bits(b).to_f64() + f16::from_bits(b + 1).to_f64()) / 2.0;
        for x in [
            mid,
            f64::from_bits(mid.to_bits() + 1),
            f64::from_bits(mid.to_bits() - 1),
        ] {
            v.push(if rng.gen() { x } else { -x });
        }
    }
    v
}

#[test]
fn conversions_match_rust_as() {
    let Some(gpu) = gpu_or_skip("conversions_match_rust_as") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        eprintln!("SKIPPED conversions_match_rust_as: the bf16 results need sm_80");
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    macro_rules! ints {
        ($t:ty) => {{
            let mut v: Vec<$t> = vec![<$t>::MIN, <$t>::MAX, 0, 1, <$t>::MAX / 2, <$t>::MIN / 2];
            v.extend((0..100).map(|_| rng.gen::<$t>()));
            v
        }};
    }
    // f16: one rounding of the integer; bf16: through f32 (two roundings above 2^24), as the
    // language converts on sm_80.
    macro_rules! check_ints {
        ($($kernel:ident: $t:ty),*) => {$(
            check_casts!(&gpu, $kernel, ints!($t), |x: $t| casts_of!(
                x,
                round::f16_from_i128(x as i128),
                bf16::from_f32(x as f32)
            ));
        )*};
    }
    check_ints!(
        casts_from_i8: i8,
        casts_from_i16: i16,
        casts_from_i32: i32,
        casts_from_i64: i64,
        casts_from_u8: u8,
        casts_from_u16: u16,
        casts_from_u32: u32,
        casts_from_u64: u64
    );
    let floats = float_inputs(&mut rng);
    let f32s: Vec<f32> = floats.iter().map(|&x| x as f32).collect();
    check_casts!(&gpu, casts_from_f32, f32s, |x: f32| casts_of!(
        x,
        f16::from_f32(x),
        bf16::from_f32(x)
    ));
    check_casts!(&gpu, casts_from_f64, floats.clone(), |x: f64| casts_of!(
        x,
        round::f16_from_f64(x),
        bf16::from_f32(x as f32)
    ));
    let f16s: Vec<f16> = floats.iter().map(|&x| round::f16_from_f64(x)).collect();
    check_casts!(&gpu, casts_from_f16, f16s, |x: f16| {
        let w = casts_of!(x.to_f32(), x, bf16::from_f32(x.to_f32()));
        Casts {
            f64: x.to_f64(),
            ..w
        }
    });
    let bf16s: Vec<bf16> = floats.iter().map(|&x| round::bf16_from_f64(x)).collect();
    check_casts!(&gpu, casts_from_bf16, bf16s, |x: bf16| {
        let w = casts_of!(x.to_f32(), f16::from_f32(x.to_f32()), x);
        Casts {
            f64: x.to_f64(),
            ..w
        }
    });
}

//! Every kernel variant of the runtime crate and of the example kernels loads on the emulated
//! device: its PTX uses only instructions the emulator implements (an unimplemented one would be
//! a load error naming it).

use pagesift_gpu::driver::KernelArg;
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::KernelVariant;
use pagesift_tests::example_kernels;
use pagesift_tests::util::{
    emu_download, emu_launch, emu_upload, emulator, poisoned_f32, random_f32, Emu,
};

/// Loads each variant and looks up its entry; returns one line per failure.
fn load_all(variants: &[&KernelVariant]) -> Vec<String> {
    let emu = Emu::new(EmulatorConfig {
        compute_capability: (9, 0),
        memory_capacity: 16 << 20,
        ..EmulatorConfig::default()
    });
    let mut failures = Vec::new();
    for v in variants {
        match emu.module_load(v.ptx) {
            Ok(m) => {
                if let Err(e) = m.function(v.entry) {
                    failures.push(format!("{}: {e}", v.display_name()));
                }
            }
            Err(e) => failures.push(format!("{}: {}", v.display_name(), e.log)),
        }
    }
    failures
}

#[test]
fn every_example_kernel_variant_loads_on_the_emulator() {
    let families: [&[KernelVariant]; 5] = [
        example_kernels::bias_act::VARIANTS,
        example_kernels::block_sum::VARIANTS,
        example_kernels::tile_scale::VARIANTS,
        example_kernels::half_axpy::VARIANTS,
        example_kernels::clock_mix::VARIANTS,
    ];
    let mut variants: Vec<&KernelVariant> = families.iter().flat_map(|f| f.iter()).collect();
    variants.extend(pagesift_tests::intrinsic_kernels::all_variants());
    assert!(variants.len() >= 5);
    let failures = load_all(&variants);
    assert!(
        failures.is_empty(),
        "example variants the emulator cannot load:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_registry_variant_loads_on_the_emulator() {
    let variants = pagesift_gpu::kernels::registry();
    let failures = load_all(&variants);
    println!(
        "{} registry variants loaded on the emulator, {} failed",
        variants.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "variants the emulator cannot load:\n{}",
        failures.join("\n")
    );
}

/// Launches variant `v` on `e` with its block shape, no dynamic shared memory.
fn run(e: &Emu, v: &KernelVariant, grid: [u32; 3], args: &[KernelArg]) {
    emu_launch(e, v.ptx, v.entry, grid, v.block, 0, args)
        .unwrap_or_else(|err| panic!("{}: {err}", v.display_name()));
}

/// Random data in [-4, 4).
fn data(n: usize, seed: u64) -> Vec<f32> {
    random_f32(n, seed, -4.0..4.0)
}

#[test]
fn example_block_sum_runs_under_the_checks() {
    let e = emulator(64 << 20);
    let n = 5003;
    let x = data(n, 1);
    let px = emu_upload(&e, &x);
    let pt = emu_upload(&e, &[0.0f32]);
    let v = &example_kernels::block_sum::VARIANTS[0];
    let rec = emu_upload(&e, &[0u32; 8]);
    run(
        &e,
        v,
        [7, 1, 1],
        &[
            KernelArg::ptr(rec),
            KernelArg::ptr(px),
            KernelArg::from(n as u64),
            KernelArg::ptr(pt),
            KernelArg::from(1u64),
            KernelArg::from(n as u32),
        ],
    );
    assert_eq!(
        emu_download::<u32>(&e, rec, 8),
        vec![0; 8],
        "no fault recorded"
    );
    let got = emu_download::<f32>(&e, pt, 1)[0];
    let want: f64 = x.iter().map(|v| *v as f64).sum();
    assert!(
        (got as f64 - want).abs() <= 1e-3 * (1.0 + want.abs()),
        "{got} vs {want}"
    );
}

#[test]
fn example_tile_scale_and_bias_act_give_the_cpu_answers() {
    let e = emulator(64 << 20);
    let (rows, cols) = (13usize, 37usize);
    let x = data(rows * cols, 2);
    for v in example_kernels::tile_scale::VARIANTS {
        let px = emu_upload(&e, &x);
        let py = emu_upload(&e, &poisoned_f32(rows * cols));
        let vec = if v.block[1] == 8 { 1 } else { 2 };
        let grid = [
            cols.div_ceil(32 * 4 * vec) as u32,
            rows.div_ceil(v.block[1] as usize) as u32,
            1,
        ];
        let rec = emu_upload(&e, &[0u32; 8]);
        let len = KernelArg::from((rows * cols) as u64);
        let args = [
            KernelArg::ptr(rec),
            KernelArg::ptr(px),
            len.clone(),
            KernelArg::ptr(py),
            len,
            KernelArg::from(rows as u32),
            KernelArg::from(cols as u32),
            KernelArg::from(1.5f32),
        ];
        run(&e, v, grid, &args);
        assert_eq!(
            emu_download::<u32>(&e, rec, 8),
            vec![0; 8],
            "no fault recorded"
        );
        let y: Vec<f32> = emu_download(&e, py, rows * cols);
        for i in 0..rows * cols {
            assert_eq!(y[i], 1.5 * x[i], "{} element {i}", v.display_name());
        }
    }
    let n = 1000;
    let bias = data(cols, 3);
    for v in example_kernels::bias_act::VARIANTS {
        let px = emu_upload(&e, &x[..n.min(x.len())]);
        let pb = emu_upload(&e, &bias);
        let py = emu_upload(&e, &poisoned_f32(n));
        let n = n.min(x.len());
        let rec = emu_upload(&e, &[0u32; 8]);
        let args = [
            KernelArg::ptr(rec),
            KernelArg::ptr(px),
            KernelArg::from(n as u64),
            KernelArg::ptr(pb),
            KernelArg::from(cols as u64),
            KernelArg::ptr(py),
            KernelArg::from(n as u64),
            KernelArg::from(n as u32),
            KernelArg::from(cols as u32),
        ];
        run(&e, v, [n.div_ceil(256) as u32, 1, 1], &args);
        let y: Vec<f32> = emu_download(&e, py, n);
        for i in 0..n {
            let t = x[i] + bias[i % cols];
            let want = match v.consts[0].1 {
                "Identity" => t as f64,
                "Relu" => t.max(0.0) as f64,
                _ => 0.5 * t as f64 * (1.0 + erf(t as f64 * std::f64::consts::FRAC_1_SQRT_2)),
            };
            assert!(
                (y[i] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{} element {i}: {} vs {want}",
                v.display_name(),
                y[i]
            );
        }
    }
}

/// erf by its series / continued fraction (double precision, for a reference only).
fn erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse; integrate exp(-t^2) with Simpson's rule instead.
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for k in 1..n {
        s += f(k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

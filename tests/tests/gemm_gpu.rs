//! The GEMM kernels on the device against the f64 reference: every variant (tile × B layout)
//! directly, on random cases (shapes that are multiples of no tile, gaps between rows, batches,
//! misaligned views, every epilogue), and the operation's dispatch and validation.
//!
//! Shapes up to 1024 on a GPU; up to 70 × 70 × 40 on the emulated device. The checks (poisoned
//! outputs, the tolerance formula of [`pagesift_gpu::gemm::tolerance`]) are
//! [`pagesift_tests::gemm_check`].

use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::ops::gemm::{
    gemm, kernel_shared_bytes, mma_tile_serves, Kernel, Tile, F32_TILES, MMA_TILES, WGMMA_CC,
    WGMMA_TILES,
};
use pagesift_gpu::{bf16, f16, ActElement};
use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, Error, Gemm, Gpu, Precision};
use pagesift_tests::gemm_check::{check, check_typed, Case, Sizes};
use pagesift_tests::gemm_prop;
use pagesift_tests::util::{assert_length_mismatch, poisoned_device, random_f32};
use pagesift_tests::{gpu_or_skip, is_emulated};

fn check_variant(kernel: Kernel, layout: BLayout) {
    check_at(kernel, layout, Precision::F32);
}

fn check_at(kernel: Kernel, layout: BLayout, precision: Precision) {
    check_at_typed::<f32, f32>(kernel, layout, precision);
}

fn check_at_typed<T: ActElement, O: ActElement>(
    kernel: Kernel,
    layout: BLayout,
    precision: Precision,
) {
    let types = format!("{}_{}", T::DTYPE.name(), O::DTYPE.name());
    let name = format!("gemm_gpu::{types}_{precision:?}_{kernel}_{layout:?}");
    let Some(gpu) = gpu_or_skip(&name) else {
        return;
    };
    // A block that needs more shared memory than the device has (3xTF32's 128 × 128 on a
    // device of compute capability 8.0) must be refused, clearly and without a launch; on
    // the emulated device the kernel then runs on an emulated Hopper, which has room for it.
    let shared = kernel_shared_bytes(kernel, T::DTYPE, precision);
    let optin = gpu.props().max_shared_per_block_optin;
    if shared > optin {
        let case = Case {
            g: Gemm::new(67, 61, 37, layout).with_precision(precision),
            bias: false,
            residual: false,
            offsets: [0; 4],
            seed: 1,
        };
        match check_typed::<T, O>(&gpu, &case, kernel) {
            Err(e) if e.contains(&format!("needs {shared} bytes of shared memory")) => {
                eprintln!("{name}: refused on this device ({shared} bytes of shared memory, {optin} allowed): {e}");
            }
            other => panic!(
                "{name}: the kernel needs {shared} bytes of shared memory, the device allows {optin}, but the call gave {other:?}"
            ),
        }
        if !is_emulated(&gpu) {
            return;
        }
        let hopper = EmulatorConfig {
            compute_capability: (9, 0),
            max_shared_per_block_optin: 227 * 1024,
            ..EmulatorConfig::default()
        };
        let gpu = Gpu::emulated(hopper).expect("the emulated device opens");
        run_variant::<T, O>(&gpu, &name, kernel, layout, precision);
        return;
    }
    run_variant::<T, O>(&gpu, &name, kernel, layout, precision);
}

/// The random and fixed cases of one kernel variant on `gpu`.
fn run_variant<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    name: &str,
    kernel: Kernel,
    layout: BLayout,
    precision: Precision,
) {
    let gpu = gpu.clone();
    let runs = if is_emulated(&gpu) { 6 } else { 40 };
    let sizes = Sizes::for_gpu(&gpu);
    let max_m = match kernel {
        Kernel::Gemv { rows, .. } => rows as usize,
        _ => usize::MAX,
    };
    let cases = gemm_prop::cases(layout, precision, sizes, max_m);
    if let Err(e) = gemm_prop::check_cases::<T, O>(&gpu, kernel, cases, runs) {
        panic!("{name}: {e}");
    }
    // Fixed shapes: one element, primes, a single row / column, K of one.
    for (m, n, k) in [
        (1, 1, 1),
        (67, 61, 37),
        (1, 70, 33),
        (70, 1, 9),
        (33, 35, 1),
    ] {
        let case = Case {
            g: Gemm::new(m.min(max_m), n, k, layout)
                .with_act(Act::Gelu)
                .with_precision(precision),
            bias: true,
            residual: true,
            offsets: [1, 0, 3, 2],
            seed: (m * 1000 + n) as u64,
        };
        if let Err(e) = check_typed::<T, O>(&gpu, &case, kernel) {
            panic!("{name}: {e}");
        }
    }
    // Aligned operands whose tiles lie inside M × N but for an edge, with whole K steps
    // (320 and 64: turns of the pipeline's stages and fewer steps than stages), so that the
    // tensor-core kernels' fast main loop runs next to their edge loop; on the emulated
    // device (slower by far) for the 64 × 64 tiles only, at 192 and 64.
    let (m, n, ks) = if is_emulated(&gpu) {
        (67, 72, [192, 64])
    } else {
        (259, 136, [320, 64])
    };
    for k in ks {
        let case = Case {
            g: Gemm::new(m.min(max_m), n, k, layout)
                .with_act(Act::Silu)
                .with_scale(0.75, 0.5)
                .with_precision(precision),
            bias: true,
            residual: true,
            offsets: [0; 4],
            seed: k as u64,
        };
        if let Err(e) = check_typed::<T, O>(&gpu, &case, kernel) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn f32_128x128_kn() {
    check_variant(Kernel::Tiled(F32_TILES[0]), BLayout::KN);
}
#[test]
fn f32_128x128_nk() {
    check_variant(Kernel::Tiled(F32_TILES[0]), BLayout::NK);
}
#[test]
fn f32_128x64_kn() {
    check_variant(Kernel::Tiled(F32_TILES[1]), BLayout::KN);
}
#[test]
fn f32_128x64_nk() {
    check_variant(Kernel::Tiled(F32_TILES[1]), BLayout::NK);
}
#[test]
fn f32_64x64_kn() {
    check_variant(Kernel::Tiled(F32_TILES[2]), BLayout::KN);
}
#[test]
fn f32_64x64_nk() {
    check_variant(Kernel::Tiled(F32_TILES[2]), BLayout::NK);
}
#[test]
fn f32_32x128_kn() {
    check_variant(Kernel::Tiled(F32_TILES[3]), BLayout::KN);
}
#[test]
fn f32_32x128_nk() {
    check_variant(Kernel::Tiled(F32_TILES[3]), BLayout::NK);
}
#[test]
fn f32_32x128_split3_nk() {
    check_variant(Kernel::SplitK(F32_TILES[3], 3), BLayout::NK);
}
#[test]
fn f32_128x128_split3_nk() {
    check_variant(Kernel::SplitK(F32_TILES[0], 3), BLayout::NK);
}
#[test]
fn f32_128x64_split3_kn() {
    check_variant(Kernel::SplitK(F32_TILES[1], 3), BLayout::KN);
}
#[test]
fn f32_64x64_split3_nk() {
    check_variant(Kernel::SplitK(F32_TILES[2], 3), BLayout::NK);
}
#[test]
fn f32_gemv_1() {
    check_variant(Kernel::Gemv { rows: 1, splits: 1 }, BLayout::NK);
}
#[test]
fn f32_gemv_2() {
    check_variant(Kernel::Gemv { rows: 2, splits: 1 }, BLayout::NK);
}
#[test]
fn f32_gemv_4() {
    check_variant(Kernel::Gemv { rows: 4, splits: 1 }, BLayout::NK);
}
#[test]
fn f32_gemv_8() {
    check_variant(Kernel::Gemv { rows: 8, splits: 1 }, BLayout::NK);
}
#[test]
fn f32_gemv_1_split3() {
    check_variant(Kernel::Gemv { rows: 1, splits: 3 }, BLayout::NK);
}
#[test]
fn f32_gemv_8_split3() {
    check_variant(Kernel::Gemv { rows: 8, splits: 3 }, BLayout::NK);
}

/// The tensor-core kernel of the `bm × bn` tile (one of [`MMA_TILES`]) over `splits` slices.
fn mma(bm: u32, bn: u32, splits: u32) -> Kernel {
    let tile = Tile { bm, bn };
    assert!(
        MMA_TILES.contains(&tile),
        "{bm}x{bn} is not a tensor-core tile"
    );
    Kernel::Mma { tile, splits }
}

#[test]
fn tf32_mma256x128_kn() {
    check_at(mma(256, 128, 1), BLayout::KN, Precision::Tf32);
}
#[test]
fn tf32_mma256x128_nk() {
    check_at(mma(256, 128, 1), BLayout::NK, Precision::Tf32);
}
#[test]
fn tf32_mma256x128_split3_nk() {
    check_at(mma(256, 128, 3), BLayout::NK, Precision::Tf32);
}
#[test]
fn tf32x3_mma128x128_kn() {
    check_at(mma(128, 128, 1), BLayout::KN, Precision::Tf32x3);
}
#[test]
fn tf32x3_mma128x128_nk() {
    check_at(mma(128, 128, 1), BLayout::NK, Precision::Tf32x3);
}
#[test]
fn tf32_mma128x128_kn() {
    check_at(mma(128, 128, 1), BLayout::KN, Precision::Tf32);
}
#[test]
fn tf32_mma128x128_nk() {
    check_at(mma(128, 128, 1), BLayout::NK, Precision::Tf32);
}
#[test]
fn tf32x3_mma128x64_kn() {
    check_at(mma(128, 64, 1), BLayout::KN, Precision::Tf32x3);
}
#[test]
fn tf32x3_mma128x64_nk() {
    check_at(mma(128, 64, 1), BLayout::NK, Precision::Tf32x3);
}
#[test]
fn tf32_mma128x64_kn() {
    check_at(mma(128, 64, 1), BLayout::KN, Precision::Tf32);
}
#[test]
fn tf32_mma128x64_nk() {
    check_at(mma(128, 64, 1), BLayout::NK, Precision::Tf32);
}
#[test]
fn tf32x3_mma64x64_kn() {
    check_at(mma(64, 64, 1), BLayout::KN, Precision::Tf32x3);
}
#[test]
fn tf32x3_mma64x64_nk() {
    check_at(mma(64, 64, 1), BLayout::NK, Precision::Tf32x3);
}
#[test]
fn tf32_mma64x64_kn() {
    check_at(mma(64, 64, 1), BLayout::KN, Precision::Tf32);
}
#[test]
fn tf32_mma64x64_nk() {
    check_at(mma(64, 64, 1), BLayout::NK, Precision::Tf32);
}
#[test]
fn tf32x3_mma128x128_split3_nk() {
    check_at(mma(128, 128, 3), BLayout::NK, Precision::Tf32x3);
}
#[test]
fn tf32_mma128x64_split3_kn() {
    check_at(mma(128, 64, 3), BLayout::KN, Precision::Tf32);
}
#[test]
fn tf32x3_mma64x64_split3_kn() {
    check_at(mma(64, 64, 3), BLayout::KN, Precision::Tf32x3);
}

/// Every tensor-core tile in both layouts, one split along K and two decode kernels, for
/// 16-bit inputs `T` and output `O`.
fn check_16bit<T: ActElement, O: ActElement>() {
    for (bm, bn, layout) in [
        (256, 128, BLayout::KN),
        (128, 128, BLayout::NK),
        (128, 64, BLayout::KN),
        (64, 64, BLayout::NK),
    ] {
        check_at_typed::<T, O>(mma(bm, bn, 1), layout, Precision::F32);
        check_at_typed::<T, O>(mma(bm, bn, 1), flip(layout), Precision::F32);
    }
    check_at_typed::<T, O>(mma(128, 64, 3), BLayout::NK, Precision::F32);
    for (rows, splits) in [(1, 1), (8, 1), (8, 3)] {
        check_at_typed::<T, O>(Kernel::Gemv { rows, splits }, BLayout::NK, Precision::F32);
    }
}

fn flip(layout: BLayout) -> BLayout {
    match layout {
        BLayout::KN => BLayout::NK,
        BLayout::NK => BLayout::KN,
    }
}

#[test]
fn f16_mma_to_f32() {
    check_16bit::<f16, f32>();
}
#[test]
fn f16_mma_to_f16() {
    check_16bit::<f16, f16>();
}
#[test]
fn bf16_mma_to_f32() {
    check_16bit::<bf16, f32>();
}
#[test]
fn bf16_mma_to_bf16() {
    check_16bit::<bf16, bf16>();
}

/// The Hopper kernel of the `bm × bn` tile (one of [`WGMMA_TILES`]) over `splits` slices.
fn wgmma(bm: u32, bn: u32, splits: u32) -> Kernel {
    let tile = Tile { bm, bn };
    assert!(
        WGMMA_TILES.contains(&tile),
        "{bm}x{bn} is not a Hopper tile"
    );
    Kernel::Wgmma { tile, splits }
}

/// Every Hopper tile, whole and split in 3, at `precision` (f32 inputs: TF32, whose random
/// shapes with unaligned rows take the `mma.sync` tile instead), on a device of compute
/// capability 9.0: the GPU where it is one, else an emulated Hopper after the emulated device
/// of compute capability 8.0 refused it clearly. B `[K, N]` is refused on any device.
fn check_wgmma<T: ActElement, O: ActElement>(precision: Precision) {
    let name = format!("gemm_gpu::wgmma_{}_{}", T::DTYPE.name(), O::DTYPE.name());
    let Some(gpu) = gpu_or_skip(&name) else {
        return;
    };
    let case = Case {
        g: Gemm::new(67, 61, 37, BLayout::NK).with_precision(precision),
        bias: false,
        residual: false,
        offsets: [0; 4],
        seed: 3,
    };
    let kn = Case {
        g: Gemm::new(67, 61, 37, BLayout::KN).with_precision(precision),
        ..case.clone()
    };
    match check_typed::<T, O>(&gpu, &kn, wgmma(128, 128, 1)) {
        Err(e) if e.contains("takes B as [N, K]") => {}
        other => panic!("{name}: B [K, N] must be refused, got {other:?}"),
    }
    let hopper = if gpu.compute_capability() == WGMMA_CC {
        gpu
    } else if is_emulated(&gpu) {
        match check_typed::<T, O>(&gpu, &case, wgmma(128, 128, 1)) {
            Err(e) if e.contains("sm_90a") && e.contains("compute capability 9.0") => {
                eprintln!(
                    "{name}: refused on compute capability {:?}: {e}",
                    gpu.compute_capability()
                );
            }
            other => panic!(
                "{name}: an sm_90a kernel on compute capability 8.0 must be refused, got {other:?}"
            ),
        }
        // Two multiprocessors: the persistent TMA kernel's blocks take several tiles each,
        // their pipelines running on across tiles.
        let config = EmulatorConfig {
            compute_capability: WGMMA_CC,
            max_shared_per_block_optin: 227 * 1024,
            sm_count: 2,
            ..EmulatorConfig::default()
        };
        Gpu::emulated(config).expect("the emulated device opens")
    } else {
        eprintln!(
            "SKIPPED {name}: the Hopper kernels need compute capability 9.0, the device has {:?}",
            gpu.compute_capability()
        );
        return;
    };
    for tile in WGMMA_TILES {
        for splits in [1, 3] {
            let kernel = wgmma(tile.bm, tile.bn, splits);
            if !kernel.serves(T::DTYPE, precision) {
                match check_typed::<T, O>(&hopper, &case, kernel) {
                    Err(e) if e.contains("has no 3xTF32 variant") => continue,
                    other => panic!("{name}: {kernel} must refuse {precision:?}, got {other:?}"),
                }
            }
            run_variant::<T, O>(
                &hopper,
                &format!("{name}_{kernel}"),
                kernel,
                BLayout::NK,
                precision,
            );
            check_tma::<T, O>(&hopper, &format!("{name}_{kernel}_tma"), kernel, precision);
        }
    }
}

/// Operands the tensor memory accelerator reads (rows and batches 16-byte aligned), so that
/// the Hopper kernel goes through TMA (`gemm_tma`): shapes that are not multiples of the
/// tiles, K steps past K and splits of K, batches, every epilogue.
fn check_tma<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    name: &str,
    kernel: Kernel,
    precision: Precision,
) {
    // (36, 68, ..): aligned rows, so that the warps' chunks of 16 × 32 inside C take the
    // epilogue without edges next to those at the edge; (36, 264, ..) with a residual: warps
    // whose rows lie inside C across a whole tile of 256 columns, whose epilogue reads each
    // chunk's residual a chunk ahead.
    let shapes: &[(usize, usize, usize, usize)] = if is_emulated(gpu) {
        &[
            (67, 61, 64, 1),
            (20, 130, 136, 2),
            (36, 264, 64, 1),
            (5, 20, 8, 1),
            (36, 68, 64, 1),
        ]
    } else {
        &[
            (67, 61, 64, 1),
            (259, 136, 200, 1),
            (130, 300, 8, 2),
            (1, 257, 136, 1),
            (129, 129, 1000, 3),
        ]
    };
    for (i, &(m, n, k, batch)) in shapes.iter().enumerate() {
        let g = Gemm::new(m, n, k, BLayout::NK)
            .with_batch(batch, m * k, n * k, m * n)
            .with_act(if i % 2 == 0 { Act::Silu } else { Act::Relu })
            .with_scale(0.75, 0.5)
            .with_precision(precision);
        let case = Case {
            g,
            bias: true,
            residual: i % 2 == 0,
            offsets: [0; 4],
            seed: 7 + i as u64,
        };
        let r = pagesift_tests::gemm_check::check_with::<T, O>(
            gpu,
            &case,
            |s, g, a, b, bias, res, c| {
                assert!(
                    pagesift_gpu::ops::gemm::hopper_uses_tma(g, a, b)?,
                    "{name}: {g:?} must go through the tensor memory accelerator"
                );
                pagesift_gpu::ops::gemm::gemm_with(s, g, kernel, a, b, bias, res, c)
            },
        );
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{name}: {case:?}: {e}"),
            Err(e) => panic!("{name}: {case:?}: {e}"),
        }
    }
}

#[test]
fn f16_wgmma_to_f32() {
    check_wgmma::<f16, f32>(Precision::F32);
}
#[test]
fn f16_wgmma_to_f16() {
    check_wgmma::<f16, f16>(Precision::F32);
}
#[test]
fn bf16_wgmma_to_f32() {
    check_wgmma::<bf16, f32>(Precision::F32);
}
#[test]
fn bf16_wgmma_to_bf16() {
    check_wgmma::<bf16, bf16>(Precision::F32);
}

#[test]
fn tf32_wgmma() {
    check_wgmma::<f32, f32>(Precision::Tf32);
}
#[test]
fn tf32x3_wgmma() {
    check_wgmma::<f32, f32>(Precision::Tf32x3);
}

#[test]
fn every_kernel_is_tested_above() {
    // The tests above name each kernel of the operation; a new one must get its test.
    assert_eq!(
        pagesift_gpu::ops::gemm::kernels().len(),
        4 + 4 + 4 + 2 + 4 * 2 + 2 * 2
    );
}

#[test]
fn the_tensor_core_kernels_refuse_exact_f32() {
    let Some(gpu) = gpu_or_skip("gemm_gpu::mma_refuses_f32") else {
        return;
    };
    let stream = gpu.default_stream();
    let a = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    let b = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    let mut c = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    for kernel in [mma(128, 128, 1), wgmma(128, 128, 1)] {
        let e = pagesift_gpu::ops::gemm::gemm_with(
            &stream,
            &Gemm::new(8, 8, 8, BLayout::NK),
            kernel,
            &a,
            &b,
            None,
            None,
            &mut c,
        )
        .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_))
                && e.to_string().contains("computes f32 inputs in TF32"),
            "{kernel}: {e}"
        );
    }
}

#[test]
fn the_decode_kernel_refuses_what_it_cannot_compute() {
    let Some(gpu) = gpu_or_skip("gemm_gpu::decode_refusals") else {
        return;
    };
    let stream = gpu.default_stream();
    let a = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    let b = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    let mut c = DeviceBuffer::<f32>::alloc(&gpu, 64).unwrap();
    for (g, rows) in [
        (Gemm::new(3, 4, 4, BLayout::NK), 2),
        (Gemm::new(1, 4, 4, BLayout::KN), 8),
    ] {
        let e = pagesift_gpu::ops::gemm::gemm_with(
            &stream,
            &g,
            Kernel::Gemv { rows, splits: 1 },
            &a,
            &b,
            None,
            None,
            &mut c,
        )
        .unwrap_err();
        assert!(e.to_string().contains("decode kernel"), "{e}");
    }
}

#[test]
fn a_large_shape_through_dispatch() {
    let Some(gpu) = gpu_or_skip("gemm_gpu::a_large_shape_through_dispatch") else {
        return;
    };
    if is_emulated(&gpu) {
        eprintln!(
            "gemm_gpu::a_large_shape_through_dispatch: a GPU-sized shape, checked on a GPU only"
        );
        return;
    }
    let g = Gemm::new(1500, 2100, 1700, BLayout::NK).with_act(Act::Silu);
    let case = Case {
        g,
        bias: true,
        residual: false,
        offsets: [0, 0, 0, 0],
        seed: 7,
    };
    for tile in F32_TILES {
        check(&gpu, &case, Kernel::Tiled(tile)).unwrap_or_else(|e| panic!("{e}"));
    }
    // Through dispatch, a shape it splits along K.
    let split = Case {
        g: Gemm::new(96, 700, 4000, BLayout::KN).with_scale(0.5, 1.5),
        residual: true,
        ..case.clone()
    };
    check(&gpu, &split, Kernel::SplitK(F32_TILES[0], 7)).unwrap_or_else(|e| panic!("{e}"));
    for precision in [Precision::Tf32x3, Precision::Tf32] {
        for tile in MMA_TILES {
            if !mma_tile_serves(tile, precision == Precision::Tf32x3) {
                continue;
            }
            let c = Case {
                g: case.g.with_precision(precision),
                ..case.clone()
            };
            check(&gpu, &c, Kernel::Mma { tile, splits: 1 }).unwrap_or_else(|e| panic!("{e}"));
        }
        let c = Case {
            g: split.g.with_precision(precision),
            ..split.clone()
        };
        check(&gpu, &c, mma(128, 128, 5)).unwrap_or_else(|e| panic!("{e}"));
    }
    let decode = Case {
        g: Gemm::new(7, 4099, 3001, BLayout::NK).with_act(Act::Relu),
        residual: true,
        ..case
    };
    check(&gpu, &decode, Kernel::Gemv { rows: 8, splits: 1 }).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn zero_sizes_are_no_ops_and_k_zero_is_the_epilogue_alone() {
    let Some(gpu) = gpu_or_skip("gemm_gpu::zero_sizes") else {
        return;
    };
    let stream = gpu.default_stream();
    let a = DeviceBuffer::from_host(&gpu, &random_f32(64, 1, -1.0..1.0)).unwrap();
    let b = DeviceBuffer::from_host(&gpu, &random_f32(64, 2, -1.0..1.0)).unwrap();
    let mut c = poisoned_device(&gpu, 64).unwrap();
    for g in [
        Gemm::new(0, 8, 8, BLayout::KN),
        Gemm::new(8, 0, 8, BLayout::KN),
        Gemm::new(8, 8, 8, BLayout::KN).with_batch(0, 64, 64, 64),
    ] {
        gemm(&stream, &g, &a, &b, None, None, &mut c).unwrap();
    }
    let poison = c.to_host().unwrap();
    assert!(
        poison.iter().all(|v| v.is_nan()),
        "a zero-size GEMM wrote C"
    );
    // K = 0: C = relu(beta C + bias).
    let c0 = random_f32(64, 3, -1.0..1.0);
    let bias = random_f32(8, 4, -1.0..1.0);
    let mut c = DeviceBuffer::from_host(&gpu, &c0).unwrap();
    let db = DeviceBuffer::from_host(&gpu, &bias).unwrap();
    let g = Gemm::new(8, 8, 0, BLayout::NK)
        .with_scale(1.0, 0.5)
        .with_act(Act::Relu);
    gemm(
        &stream,
        &g,
        &a,
        &b,
        Some(&db as &dyn DeviceRead<f32>),
        None,
        &mut c,
    )
    .unwrap();
    let got = c.to_host().unwrap();
    for (i, v) in got.iter().enumerate() {
        let want = (0.5f32.mul_add(c0[i], 0.0) + bias[i % 8]).max(0.0);
        assert_eq!(v.to_bits(), want.to_bits(), "C[{i}]");
    }
}

#[test]
fn shapes_the_buffers_cannot_hold_are_errors_naming_the_operand() {
    let Some(gpu) = gpu_or_skip("gemm_gpu::shape_errors") else {
        return;
    };
    let stream = gpu.default_stream();
    let a = DeviceBuffer::<f32>::alloc(&gpu, 12).unwrap();
    let b = DeviceBuffer::<f32>::alloc(&gpu, 20).unwrap();
    let mut c = DeviceBuffer::<f32>::alloc(&gpu, 15).unwrap();
    let g = Gemm::new(3, 5, 4, BLayout::KN);
    gemm(&stream, &g, &a, &b, None, None, &mut c).unwrap();
    let e = gemm(
        &stream,
        &Gemm::new(4, 5, 4, BLayout::KN),
        &a,
        &b,
        None,
        None,
        &mut c,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("A holds 12"),
        "{e}"
    );
    let e = gemm(
        &stream,
        &Gemm::new(3, 5, 5, BLayout::NK),
        &a,
        &b,
        None,
        None,
        &mut c,
    )
    .unwrap_err();
    assert!(e.to_string().contains("A holds 12"), "{e}");
    let e = gemm(&stream, &g.with_lds(3, 5, 5), &a, &b, None, None, &mut c).unwrap_err();
    assert!(e.to_string().contains("lda = 3 is less than K = 4"), "{e}");
    let e = gemm(&stream, &g.with_lds(4, 5, 6), &a, &b, None, None, &mut c).unwrap_err();
    assert!(e.to_string().contains("C holds 15"), "{e}");
    let bias = DeviceBuffer::<f32>::alloc(&gpu, 4).unwrap();
    let e = gemm(
        &stream,
        &g,
        &a,
        &b,
        Some(&bias as &dyn DeviceRead<f32>),
        None,
        &mut c,
    )
    .unwrap_err();
    assert_length_mismatch(&e, 5, 4, "bias");
    let e = gemm(
        &stream,
        &Gemm::new(1 << 31, 1, 1, BLayout::KN),
        &a,
        &b,
        None,
        None,
        &mut c,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("M = 2147483648 must be below 2^31"),
        "{e}"
    );
    // Strides whose extent wraps around the address space are refused, not wrapped into a
    // small number that these buffers would hold.
    let huge = usize::MAX / 2 + 2;
    let e = gemm(
        &stream,
        &g.with_batch(3, huge, 0, 0),
        &a,
        &b,
        None,
        None,
        &mut c,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_))
            && e.to_string().contains("A's extent")
            && e.to_string().contains("overflows the address space"),
        "{e}"
    );
}

/// 3xTF32 through the dispatch on a device where no tensor-core block of it fits the shared
/// memory (99 KiB a block, as on compute capability 8.6): the GEMM runs on FFMA (exact f32,
/// which the precision's floor allows) and is right, instead of failing.
#[test]
fn tf32x3_takes_ffma_where_no_tensor_core_block_fits() {
    let small = EmulatorConfig {
        compute_capability: (8, 6),
        max_shared_per_block_optin: 99 * 1024,
        ..EmulatorConfig::default()
    };
    let gpu = Gpu::emulated(small).expect("the emulated device opens");
    for layout in [BLayout::NK, BLayout::KN] {
        let case = Case {
            g: Gemm::new(67, 61, 37, layout)
                .with_act(Act::Gelu)
                .with_precision(Precision::Tf32x3),
            bias: true,
            residual: true,
            offsets: [1, 0, 3, 2],
            seed: 7,
        };
        let r = pagesift_tests::gemm_check::check_with::<f32, f32>(
            &gpu,
            &case,
            |s, g, a, b, bias, res, c| gemm(s, g, a, b, bias, res, c),
        );
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{layout:?}: a wrong value: {e}"),
            Err(e) => panic!("{layout:?}: the dispatch failed: {e}"),
        }
    }
}

//! The GEMM comparison of `pagesift_gpu::bench::gemm` without a GPU: its shape and mode lists
//! (valid ones, and clear errors for the rest), and a run on the emulated device at tiny
//! shapes, which has no cuBLAS and prints our figures alone.

use pagesift_gpu::bench::gemm::{parse_modes, parse_shapes};
use pagesift_gpu::bench::{run_gemm, GemmBenchOptions, GemmMode, GemmShape};
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{BLayout, Dtype, Gpu, Precision};

#[test]
fn shapes_parse_with_and_without_layout() {
    let shapes = parse_shapes("4096x4096x4096,4096x4096x4096:KN, 1x14336x4096:nk").unwrap();
    assert_eq!(
        shapes,
        [
            GemmShape::nk(4096, 4096, 4096),
            GemmShape {
                m: 4096,
                n: 4096,
                k: 4096,
                layout: BLayout::KN
            },
            GemmShape::nk(1, 14336, 4096),
        ]
    );
    // A shape prints as it parses.
    for s in &shapes {
        assert_eq!(&s.to_string().parse::<GemmShape>().unwrap(), s);
    }
    assert_eq!(shapes[1].to_string(), "4096x4096x4096:KN");
    assert!(shapes[2].is_decode() && !shapes[0].is_decode());
    // M ≤ 8 with B [K, N] is no decode shape: the decode kernel reads B [N, K] only.
    assert!(!"1x64x64:KN".parse::<GemmShape>().unwrap().is_decode());
}

#[test]
fn bad_shapes_are_errors_naming_the_entry() {
    for (list, says) in [
        ("", "no shapes"),
        (" ", "no shapes"),
        ("1x2", "`1x2`: expected MxNxK"),
        ("1x2x3x4", "expected MxNxK"),
        ("4x4x4,", "shape ``: expected MxNxK"),
        ("0x4x4", "M = `0` is not a positive integer"),
        ("4xax4", "N = `a` is not a positive integer"),
        ("4x4x-1", "K = `-1`"),
        ("4x4x4:XY", "unknown B layout `XY`"),
        ("99999999999x99999999999x99999999999", "too large"),
    ] {
        let e = parse_shapes(list).expect_err(list);
        assert!(e.contains(says), "{list:?}: {e}");
    }
}

#[test]
fn modes_parse_in_any_case_without_duplicates() {
    assert_eq!(
        parse_modes("tf32, F32,Tf32x3,TF32, bf16,F16,BF16").unwrap(),
        [
            GemmMode::Tf32,
            GemmMode::F32,
            GemmMode::Tf32x3,
            GemmMode::Bf16,
            GemmMode::F16
        ]
    );
    assert_eq!(GemmBenchOptions::default().modes, GemmMode::ALL.to_vec());
    // A mode prints as it parses, and says what it runs.
    for m in GemmMode::ALL {
        assert_eq!(m.to_string().parse::<GemmMode>().unwrap(), m);
    }
    assert_eq!(
        (GemmMode::Bf16.input(), GemmMode::Bf16.precision()),
        (Dtype::Bf16, Precision::F32)
    );
    assert_eq!(
        (GemmMode::Tf32x3.input(), GemmMode::Tf32x3.precision()),
        (Dtype::F32, Precision::Tf32x3)
    );
    // On a decode shape the f32 inputs run the exact decode kernel: no TF32 rows.
    let decode = GemmShape::nk(1, 64, 64);
    let on_decode: Vec<GemmMode> = GemmMode::ALL
        .into_iter()
        .filter(|m| m.runs_on(decode))
        .collect();
    assert_eq!(on_decode, [GemmMode::F32, GemmMode::Bf16, GemmMode::F16]);
    for (list, says) in [
        ("", "no modes"),
        (
            "F8",
            "unknown mode `F8` (expected F32, Tf32x3, Tf32, Bf16 or F16)",
        ),
        ("F32,", "unknown mode ``"),
    ] {
        let e = parse_modes(list).expect_err(list);
        assert!(e.contains(says), "{list:?}: {e}");
    }
}

#[test]
fn emulated_run_prints_our_figures_without_cublas() {
    let gpu = Gpu::emulated(EmulatorConfig::default()).expect("the emulated device opens");
    let opts = GemmBenchOptions {
        shapes: Some(parse_shapes("33x17x9,4x17x9").unwrap()),
        modes: parse_modes("F32,Tf32x3,Tf32,Bf16").unwrap(),
    };
    let mut out = Vec::new();
    run_gemm(&gpu, &opts, &mut out).expect("the comparison runs");
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("no cuBLAS"), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.first().is_some_and(|s| s.ends_with("x9")))
        .collect();
    // Every mode for 33 rows; the decode shape runs F32 and the 16-bit modes.
    let labels: Vec<(&str, &str)> = rows.iter().map(|f| (f[0], f[1])).collect();
    assert_eq!(
        labels,
        [
            ("33x17x9", "F32"),
            ("33x17x9", "Tf32x3"),
            ("33x17x9", "Tf32"),
            ("33x17x9", "Bf16"),
            ("4x17x9", "F32"),
            ("4x17x9", "Bf16"),
        ],
        "{text}"
    );
    for f in &rows {
        assert_eq!(f.len(), 15, "{f:?}");
        let ours: f64 = f[2].parse().unwrap();
        assert!(ours.is_finite() && ours >= 0.0, "{f:?}");
        // No cuBLAS: its time, ratio and error are dashes.
        assert_eq!((f[3], f[4], f[6]), ("-", "-", "-"), "{f:?}");
        let err: f64 = f[5].parse().unwrap();
        // A bf16 C rounds each output to 8 significant bits: up to 2^-9 of Σ |a b|.
        let bound = match f[1] {
            "Tf32" => 1e-2,
            "Bf16" => 4e-3,
            _ => 1e-5,
        };
        assert!(err < bound, "{f:?}");
        // The fused epilogue's cost, then that of its bias, gelu and residual alone.
        for col in 8..12 {
            let cost: f64 = f[col].strip_suffix('%').unwrap().parse().unwrap();
            assert!(cost.is_finite() && cost > -100.0, "column {col}: {f:?}");
        }
        let decode = f[0] == "4x17x9";
        // Decode rows: weight GB/s, the copy's GB/s and our share of it; cuBLAS's share a dash.
        for col in [7, 12, 13] {
            assert_eq!(f[col] != "-", decode, "column {col}: {f:?}");
        }
        assert_eq!(f[14], "-", "{f:?}");
        if decode {
            assert!(f[13].ends_with('%'), "{f:?}");
        }
    }
}

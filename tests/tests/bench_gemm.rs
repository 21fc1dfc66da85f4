//! The GEMM comparison of `pagesift_gpu::bench::gemm` without a GPU: its shape and precision
//! lists (valid ones, and clear errors for the rest), and a run on the emulated device at tiny
//! shapes, which has no cuBLAS and prints our figures alone.

use pagesift_gpu::bench::gemm::{parse_precisions, parse_shapes, ALL_PRECISIONS};
use pagesift_gpu::bench::{run_gemm, GemmBenchOptions, GemmShape};
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{BLayout, Gpu, Precision};

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
fn precisions_parse_in_any_case_without_duplicates() {
    assert_eq!(
        parse_precisions("tf32, F32,Tf32x3,TF32").unwrap(),
        [Precision::Tf32, Precision::F32, Precision::Tf32x3]
    );
    assert_eq!(
        GemmBenchOptions::default().precisions,
        ALL_PRECISIONS.to_vec()
    );
    for (list, says) in [
        ("", "no precisions"),
        (
            "F16",
            "unknown precision `F16` (expected F32, Tf32x3 or Tf32)",
        ),
        ("F32,", "unknown precision ``"),
    ] {
        let e = parse_precisions(list).expect_err(list);
        assert!(e.contains(says), "{list:?}: {e}");
    }
}

#[test]
fn emulated_run_prints_our_figures_without_cublas() {
    let gpu = Gpu::emulated(EmulatorConfig::default()).expect("the emulated device opens");
    let opts = GemmBenchOptions {
        shapes: Some(parse_shapes("33x17x9,4x17x9").unwrap()),
        ..GemmBenchOptions::default()
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
    // Every precision for 33 rows; the decode shape runs F32 only.
    let labels: Vec<(&str, &str)> = rows.iter().map(|f| (f[0], f[1])).collect();
    assert_eq!(
        labels,
        [
            ("33x17x9", "F32"),
            ("33x17x9", "Tf32x3"),
            ("33x17x9", "Tf32"),
            ("4x17x9", "F32")
        ],
        "{text}"
    );
    for f in &rows {
        assert_eq!(f.len(), 12, "{f:?}");
        let ours: f64 = f[2].parse().unwrap();
        assert!(ours.is_finite() && ours >= 0.0, "{f:?}");
        // No cuBLAS: its time, ratio and error are dashes.
        assert_eq!((f[3], f[4], f[6]), ("-", "-", "-"), "{f:?}");
        let err: f64 = f[5].parse().unwrap();
        let bound = if f[1] == "Tf32" { 1e-2 } else { 1e-5 };
        assert!(err < bound, "{f:?}");
        assert!(f[8].ends_with('%'), "{f:?}");
        let decode = f[0] == "4x17x9";
        // Decode rows: weight GB/s, the copy's GB/s and our share of it; cuBLAS's share a dash.
        for col in [7, 9, 10] {
            assert_eq!(f[col] != "-", decode, "column {col}: {f:?}");
        }
        assert_eq!(f[11], "-", "{f:?}");
        if decode {
            assert!(f[10].ends_with('%'), "{f:?}");
        }
    }
}

//! The PTX that `ptx_kernel!` emits for a few small kernels, compared with the reference files
//! under `tests/snapshots/`. A difference fails with the first differing lines; after an
//! intended change of the compiler, `PAGESIFT_BLESS=1` rewrites the references (review the
//! diff before committing it).

use pagesift_gpu::KernelVariant;
use pagesift_tests::example_kernels;
use std::path::{Path, PathBuf};

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots")
}

fn bless() -> bool {
    std::env::var("PAGESIFT_BLESS").is_ok_and(|v| v == "1")
}

/// A readable description of where `actual` departs from `expected`.
fn describe_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let first = e
        .iter()
        .zip(&a)
        .position(|(x, y)| x != y)
        .unwrap_or(e.len().min(a.len()));
    // Align the ends too, so that an insertion shows as one block.
    let mut common_tail = 0;
    while common_tail < e.len() - first.min(e.len())
        && common_tail < a.len() - first.min(a.len())
        && e[e.len() - 1 - common_tail] == a[a.len() - 1 - common_tail]
    {
        common_tail += 1;
    }
    let mut out = format!(
        "expected {} lines, got {}; first difference at line {}:\n",
        e.len(),
        a.len(),
        first + 1
    );
    let ctx = first.saturating_sub(3);
    for (i, l) in e.iter().enumerate().take(first).skip(ctx) {
        out.push_str(&format!("  {:>5} | {l}\n", i + 1));
    }
    let (e_end, a_end) = (e.len() - common_tail, a.len() - common_tail);
    for (i, l) in e.iter().enumerate().take(e_end.min(first + 20)).skip(first) {
        out.push_str(&format!("- {:>5} | {l}\n", i + 1));
    }
    for (i, l) in a.iter().enumerate().take(a_end.min(first + 20)).skip(first) {
        out.push_str(&format!("+ {:>5} | {l}\n", i + 1));
    }
    out
}

fn check_snapshot(v: &KernelVariant) {
    let path = snapshot_dir().join(format!("{}.ptx", v.entry));
    if bless() {
        std::fs::create_dir_all(snapshot_dir()).expect("creating tests/snapshots");
        std::fs::write(&path, v.ptx).expect("writing the snapshot");
        println!("blessed {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no snapshot {} ({e}); run with PAGESIFT_BLESS=1 to create it",
            path.display()
        )
    });
    if expected != v.ptx {
        panic!(
            "the PTX of {} differs from {}\n{}\n(rerun with PAGESIFT_BLESS=1 if the change is intended)",
            v.display_name(),
            path.display(),
            describe_diff(&expected, v.ptx)
        );
    }
}

fn variant<'a>(variants: &'a [KernelVariant], entry: &str) -> &'a KernelVariant {
    variants
        .iter()
        .find(|v| v.entry == entry)
        .unwrap_or_else(|| panic!("no variant {entry}"))
}

#[test]
fn snapshot_bias_act_relu() {
    check_snapshot(variant(
        example_kernels::bias_act::VARIANTS,
        "bias_act__ACT_Relu",
    ));
}

#[test]
fn snapshot_block_sum() {
    check_snapshot(variant(example_kernels::block_sum::VARIANTS, "block_sum"));
}

#[test]
fn snapshot_tile_scale_4x2() {
    check_snapshot(variant(
        example_kernels::tile_scale::VARIANTS,
        "tile_scale__ROWS_PER_BLOCK_4__VEC_2",
    ));
}

#[test]
fn snapshot_clock_mix() {
    check_snapshot(variant(example_kernels::clock_mix::VARIANTS, "clock_mix"));
}

#[test]
fn diff_description_shows_the_changed_lines() {
    let d = describe_diff("a\nb\nc\nd\n", "a\nb\nX\nd\n");
    assert!(d.contains("first difference at line 3"), "{d}");
    assert!(d.contains("-     3 | c"), "{d}");
    assert!(d.contains("+     3 | X"), "{d}");
    assert!(!d.contains("| d"), "{d}");
}

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

/// A readable description of where `actual` departs from `expected`: a line diff (longest
/// common subsequence) showing the first 40 changed lines with two lines of context.
fn describe_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    // lcs[i][j]: length of the longest common subsequence of e[i..] and a[j..].
    let mut lcs = vec![vec![0u32; a.len() + 1]; e.len() + 1];
    for i in (0..e.len()).rev() {
        for j in (0..a.len()).rev() {
            lcs[i][j] = if e[i] == a[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (' ', '-', '+'), expected line number, text.
    let mut script: Vec<(char, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < e.len() || j < a.len() {
        if i < e.len() && j < a.len() && e[i] == a[j] {
            script.push((' ', i + 1, e[i]));
            i += 1;
            j += 1;
        } else if i < e.len() && (j == a.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            script.push(('-', i + 1, e[i]));
            i += 1;
        } else {
            script.push(('+', j + 1, a[j]));
            j += 1;
        }
    }
    let changed = script.iter().filter(|(k, _, _)| *k != ' ').count();
    let mut out = format!(
        "expected {} lines, got {}; {changed} lines differ:\n",
        e.len(),
        a.len()
    );
    let near = |k: usize| {
        script[k.saturating_sub(2)..(k + 3).min(script.len())]
            .iter()
            .any(|(c, _, _)| *c != ' ')
    };
    let mut shown = 0;
    let mut gap = false;
    for (k, (c, n, line)) in script.iter().enumerate() {
        if shown >= 40 {
            out.push_str("  ...\n");
            break;
        }
        if *c != ' ' || near(k) {
            if gap {
                out.push_str("  ...\n");
                gap = false;
            }
            out.push_str(&format!("{c} {n:>5} | {line}\n"));
            shown += usize::from(*c != ' ');
        } else {
            gap = true;
        }
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
    let d = describe_diff(
        "a\nb\nc\nd\ne\nf\ng\nh\ni\n",
        "a\nb\nc\nd\nX\nf\ng\nh\ni\nj\n",
    );
    assert!(d.contains("3 lines differ"), "{d}");
    assert!(d.contains("-     5 | e\n+     5 | X"), "{d}");
    assert!(d.contains("+    10 | j"), "{d}");
    assert!(d.contains("      4 | d"), "context before the change: {d}");
    assert!(!d.contains("| a"), "far context is left out: {d}");
}

use super::*;
use std::collections::HashSet;

#[test]
fn no_form_is_in_two_rows() {
    let mut seen = HashSet::new();
    for f in forms() {
        let texts = f.texts();
        assert!(!texts.is_empty(), "`{}` has no forms", f.syntax);
        for t in texts {
            assert!(
                seen.insert(t.clone()),
                "`{t}` is in two rows (or twice in `{}`)",
                f.syntax
            );
            assert!(
                !t.contains(['{', '}', '[', ']', '|', ' ']),
                "`{t}` of `{}`",
                f.syntax
            );
        }
    }
    assert_eq!(seen.len(), texts().count());
    assert!(
        seen.len() < 20_000,
        "{} forms: keep the table readable",
        seen.len()
    );
}

#[test]
fn every_form_has_example_operands() {
    for (text, form) in texts() {
        for e in form.examples(text) {
            assert!(e.starts_with(text) && e.ends_with(';'), "{e}");
        }
    }
}

#[test]
fn minimums_are_known_targets_at_or_above_the_floor() {
    for f in forms() {
        assert!(
            [70, 75, 80, 86, 89, 90].contains(&f.sm),
            "`{}`: sm_{}",
            f.syntax,
            f.sm
        );
        assert!(f.ptx >= (6, 0), "`{}`: PTX {:?}", f.syntax, f.ptx);
    }
}

#[test]
fn lookup_finds_rows_by_text() {
    let f = lookup("ld.global.nc.v4.f32").expect("a row");
    assert_eq!((f.family, f.emitted), (Family::Memory, true));
    assert_eq!(f.operand_count(), (2, 2));
    assert_eq!(
        f.examples("ld.global.nc.v4.f32"),
        ["ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];"]
    );
    let bf16 = lookup("add.rn.bf16x2").expect("a row");
    assert_eq!((bf16.sm, bf16.ptx), (90, (7, 8)));
    let cp = lookup("cp.async.cg.shared.global").expect("a row");
    assert_eq!(
        cp.examples("cp.async.cg.shared.global"),
        [
            "cp.async.cg.shared.global [smem], [%rd1], 16, %r1;",
            "cp.async.cg.shared.global [smem], [%rd1], 16;"
        ]
    );
    assert_eq!(
        lookup("mul.wide.s32").map(|f| f.examples("mul.wide.s32")),
        Some(vec!["mul.wide.s32 %rd1, %r1, %r2;".to_string()])
    );
    for missing in [
        "add.f32.rn",
        "mul24.lo.u32",
        "ld.global.v8.f32",
        "add.rn.xyz.f32",
    ] {
        assert!(lookup(missing).is_none(), "{missing}");
    }
    assert!(has_opcode("ld") && has_opcode("mma") && !has_opcode("mul24"));
}

#[test]
fn the_example_module_declares_what_examples_use() {
    let m = example_module("sm_80", (7, 0), &["bra $L__BB0;".to_string()]);
    for needle in [
        ".version 7.0",
        ".target sm_80",
        ".reg .pred %p<256>;",
        ".reg .f64 %fd<256>;",
        "smem[64]",
        "forms_param_0",
        "$L__BB0:",
        "\tbra $L__BB0;",
    ] {
        assert!(m.contains(needle), "{needle} in\n{m}");
    }
}

//! One compile-fail test per user-facing error of `ptx_kernel!`, and per way into the raw
//! driver layer safe code must not have, named after the rule it breaks (`tests/ui/<rule>.rs`,
//! with the expected diagnostics in `<rule>.stderr`).
//! Regenerate the expectations with `TRYBUILD=overwrite` and read the diff.

#[test]
fn ptx_kernel_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

//! Unit tests of the language features for kernels with several arrays and byte data:
//! packed slices at the wrapper, launches with named consts, byte arithmetic and byte-record
//! reads, two-dimensional arrays, views of dynamic shared memory, and the index wrap rule.

use crate::compile_for_test;
use quote::quote;

fn errors_of(tokens: proc_macro2::TokenStream) -> Vec<String> {
    match compile_for_test(tokens) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e,
    }
}

#[test]
fn a_packed_slice_parameter_is_an_error_at_the_parameter() {
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f16x2], y: &mut [bf16x2]) {
            y[0] = x[0] as bf16x2;
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("packed `f16x2`") && e.contains("`&[f16]`")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("packed `bf16x2`") && e.contains("`&mut [u32]`")),
        "{errs:?}"
    );
    // The wrapper still declares the module, with no host type `f16x2` in it.
    let out = crate::expand(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f16x2]) {}
    })
    .to_string();
    assert!(out.contains("pub mod k"), "{out}");
    assert!(!out.contains("DeviceRead < f16x2 >"), "{out}");
}

#[test]
fn the_wrapper_takes_const_arguments_by_name_too() {
    let out = crate::expand(quote! {
        #[variants(BM in [64], ACT in [Relu])]
        #[launch(block = 64)]
        pub fn k<const BM: u32, const ACT: crate::Act>(y: &mut [f32], n: u32) {
            y[0] = 1.0;
        }
        #[launch(block = 64)]
        pub fn plain(y: &mut [f32]) {
            y[0] = 1.0;
        }
    })
    .to_string();
    assert!(out.contains("pub struct Consts"), "{out}");
    assert!(out.contains("pub bm : u32"), "{out}");
    assert!(out.contains("pub act : crate :: Act"), "{out}");
    assert!(out.contains("pub fn launch_with"), "{out}");
    assert!(out.contains("let Consts { bm , act } = __consts"), "{out}");
    assert!(
        out.contains("launch (stream , cfg , bm , act , y , n)"),
        "{out}"
    );
    // A kernel without consts has no `Consts`.
    assert_eq!(out.matches("pub struct Consts").count(), 1, "{out}");
}

//! Unit tests of the language features for kernels with several arrays and byte data:
//! packed slices at the wrapper, launches with named consts, byte arithmetic and byte-record
//! reads, two-dimensional arrays, views of dynamic shared memory, and the index wrap rule.

use crate::compile_for_test;
use quote::quote;

fn ptx_of(tokens: proc_macro2::TokenStream) -> Vec<(String, String)> {
    match compile_for_test(tokens) {
        Ok(v) => v,
        Err(e) => panic!("errors: {e:#?}"),
    }
}

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

#[test]
fn byte_arithmetic_computes_at_16_bits_and_wraps_back() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(a: &[u8], b: &[i8], y: &mut [u8], z: &mut [i8]) {
            let i = thread_idx_x();
            y[i] = a[i] * a[i + 1] + 7;
            z[i] = -(b[i] >> 1) / 3;
            if a[i] == 250 { y[i] = !a[i]; }
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("mul.lo.u16"), "{text}");
    assert!(text.contains("add.u16"), "{text}");
    assert!(text.contains("cvt.u16.u8"), "{text}");
    assert!(text.contains("shr.s16"), "{text}");
    assert!(text.contains("neg.s16"), "{text}");
    assert!(text.contains("div.s16"), "{text}");
    assert!(text.contains("cvt.s16.s8"), "{text}");
    assert!(text.contains("setp.eq.u16"), "{text}");
    assert!(text.contains("not.b16"), "{text}");
    // No 8-bit arithmetic instruction (PTX has none).
    assert!(
        !text.contains("add.u8") && !text.contains("mul.lo.u8"),
        "{text}"
    );
}

#[test]
fn a_typed_read_of_byte_data_is_bounds_and_alignment_checked() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(w: &[u8], y: &mut [f32], z: &mut [u32]) {
            let i = thread_idx_x() * 18;
            y[0] = w.read::<f16>(i) as f32;
            z[0] = w.read::<u32>(i + 2);
            z[1] = w.read::<u8>(i + 3) as u32;
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("ld.global.u16"), "{text}");
    assert!(text.contains("ld.global.u32"), "{text}");
    assert!(text.contains("ld.global.u8"), "{text}");
    // The f16 and u32 reads test their alignment (1 and 3 bits); the byte read needs none.
    assert!(text.contains(", 1;"), "{text}");
    assert!(text.contains(", 3;"), "{text}");
    // Bounds over each value's bytes: the read of 2 bytes and of 4 (fault codes: elements in
    // the high half).
    assert!(text.contains(", 131072;"), "{text}");
    assert!(text.contains(", 262144;"), "{text}");
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], w: &[u8], y: &mut [f32]) {
            y[0] = x.read::<f32>(0);
            y[1] = w.read::<bool>(0) as f32;
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("reads typed values out of byte data")),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e.contains("takes the type it reads")),
        "{errs:?}"
    );
}

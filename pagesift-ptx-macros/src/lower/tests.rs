use crate::compile_for_test;
use quote::quote;

fn ptx_of(tokens: proc_macro2::TokenStream) -> Vec<(String, String)> {
    match compile_for_test(tokens) {
        Ok(v) => v,
        Err(e) => panic!("errors: {e:#?}"),
    }
}

/// Writes the PTX to `target/tmp/ptx-unit/` so that `ptxas` can be run on it by hand.
fn dump(name: &str, ptx: &[(String, String)]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    let _ = std::fs::create_dir_all(&dir);
    for (entry, text) in ptx {
        let _ = std::fs::write(dir.join(format!("{name}-{entry}.ptx")), text);
    }
}

#[test]
fn elementwise_kernel_with_enum_variants() {
    let ptx = ptx_of(quote! {
        #[variants(ACT in [Identity, Relu, Gelu])]
        #[launch(block = 256)]
        pub fn bias_act<const ACT: Act>(x: &[f32], bias: &[f32], y: &mut [f32], n: u32, cols: u32) {
            let i = block_idx_x() * block_dim_x() + thread_idx_x();
            if i < n {
                y[i] = act::<ACT>(x[i] + bias[i % cols]);
            }
        }

        fn act<const A: Act>(v: f32) -> f32 {
            match A {
                Act::Identity => v,
                Act::Relu => v.max(0.0),
                Act::Gelu => 0.5 * v * (1.0 + (v * 0.70710677).erf()),
            }
        }
    });
    dump("bias_act", &ptx);
    assert_eq!(ptx.len(), 3);
    assert_eq!(ptx[1].0, "bias_act__ACT_Relu");
    let relu = &ptx[1].1;
    assert!(
        relu.contains(".visible .entry bias_act__ACT_Relu("),
        "{relu}"
    );
    assert!(relu.contains("max.f32"), "{relu}");
    assert!(relu.contains(".reqntid 256, 1, 1"), "{relu}");
    assert!(!ptx[0].1.contains("max.f32"));
}

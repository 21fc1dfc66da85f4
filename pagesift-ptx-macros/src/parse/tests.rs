use super::*;
use crate::ctxt::Ctxt;
use syn::parse_quote;

fn program(items: Vec<syn::Item>) -> (Program, Vec<String>) {
    let cx = Ctxt::new();
    let p = parse_items(&cx, items);
    (p, cx.finish().iter().map(|e| e.to_string()).collect())
}

#[test]
fn kernel_signature_and_attributes() {
    let (p, errs) = program(vec![
        parse_quote! {
            #[variants(ACT in [Identity, Relu], BM in [64, 128])]
            #[launch(block = (16, 16))]
            #[target(sm_80)]
            pub fn k<const ACT: Act, const BM: u32>(x: &[f32], y: &mut [f16], n: u32) {
                let i = thread_idx_x();
                if i < n { y[i] = x[i] as f16; }
            }
        },
        parse_quote! { fn helper(v: f32) -> f32 { v * 2.0 } },
    ]);
    assert!(errs.is_empty(), "{errs:?}");
    let k = &p.fns[0];
    assert!(k.is_kernel && !p.fns[1].is_kernel);
    assert_eq!(k.consts.len(), 2);
    assert!(matches!(k.consts[0].ty, ConstTy::Enum(_)));
    assert!(matches!(k.consts[1].ty, ConstTy::Int(Scalar::U32)));
    assert_eq!(k.variants.len(), 2);
    assert_eq!(k.variants[1].rows.len(), 2);
    assert_eq!(k.launch.as_ref().map(|l| l.block.len()), Some(2));
    assert!(matches!(&k.target, Some(TargetAttr::Name(t, _)) if t == "sm_80"));
    assert!(matches!(
        k.params[1].ty.kind,
        TypeKind::Slice {
            elem: Scalar::F16,
            mutable: true
        }
    ));
    assert_eq!(k.body.stmts.len(), 1);
    assert!(k.body.tail.is_some() && p.fns[1].body.tail.is_some());
}

#[test]
fn tuple_variants_and_statements() {
    let (p, errs) = program(vec![parse_quote! {
        #[variants((BM, BN) in [(64, 64), (128, 64)])]
        pub fn k<const BM: u32, const BN: u32>(y: &mut [f32]) {
            let tile: Shared<[f32; BM * BN]>;
            let mut acc = [0.0f32; 4];
            #[unroll]
            for j in 0..4 { acc[j] += 1.0; }
            while true { break; }
            let r: u32 = asm!("mov.u32 {0}, %clock;", out(u32));
            y[0] = -1.5;
        }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    let k = &p.fns[0];
    assert_eq!(k.variants[0].names.len(), 2);
    assert_eq!(k.variants[0].rows.len(), 2);
    assert_eq!(k.body.stmts.len(), 6);
    let Stmt::Expr(Expr {
        kind: ExprKind::For { unroll, .. },
        ..
    }) = &k.body.stmts[2]
    else {
        panic!("expected a for loop")
    };
    assert!(*unroll);
}

#[test]
fn unsupported_syntax_is_reported_with_every_error() {
    let (_, errs) = program(vec![
        parse_quote! { enum E { A } },
        parse_quote! {
            pub fn k(x: &[f32], s: &str) {
                let f = |v: f32| v;
                let (a, b) = (1, 2);
                println!("x");
            }
        },
    ]);
    assert_eq!(errs.len(), 6, "{errs:?}");
    assert!(errs[0].contains("holds `fn` items"), "{errs:?}");
}

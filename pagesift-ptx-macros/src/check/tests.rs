use super::*;
use crate::parse::parse_items;
use syn::parse_quote;

fn checked(items: Vec<syn::Item>) -> (Vec<Vec<Variant>>, Vec<String>) {
    let cx = Ctxt::new();
    let prog = parse_items(&cx, items);
    let c = check_program(&cx, &prog);
    let variants = c.kernels.into_iter().map(|k| k.variants).collect();
    (
        variants,
        cx.finish().iter().map(|e| e.to_string()).collect(),
    )
}

#[test]
fn variants_are_the_cross_product_in_declaration_order() {
    let (v, errs) = checked(vec![parse_quote! {
        #[variants(BM in [64, 128], ACT in [Identity, Relu, Silu])]
        #[launch(block = (BM, 2))]
        pub fn k<const ACT: Act, const BM: u32>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    let v = &v[0];
    assert_eq!(v.len(), 6);
    assert_eq!(v[0].entry, "k__ACT_Identity__BM_64");
    assert_eq!(v[5].entry, "k__ACT_Silu__BM_128");
    assert_eq!(v[5].block, [128, 2, 1]);
    assert_eq!(
        v[0].consts[0],
        ("ACT".to_string(), ConstVal::Enum("Identity".into()))
    );
}

#[test]
fn tuple_variants_and_const_folding() {
    let (v, errs) = checked(vec![parse_quote! {
        #[variants((BM, BN) in [(64, 32), (16, 16)])]
        #[launch(block = 32)]
        pub fn k<const BM: u32, const BN: u32>(y: &mut [f32]) {
            let tile: Shared<[f32; BM * BN]>;
            if BM > 32 { y[0] = 1.0; } else { y[0] = 2.0; }
            tile[0] = 0.0;
        }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(v[0].len(), 2);
    assert_eq!(v[0][0].shared[0].2, 64 * 32);
    assert_eq!(v[0][0].static_shared_bytes(), 64 * 32 * 4);
    // `if BM > 32` is resolved: the statement is a block with only the taken branch.
    let TStmt::Expr(TExpr {
        kind: TKind::Block(b),
        ..
    }) = &v[0][0].body.stmts[0]
    else {
        panic!("expected the resolved branch")
    };
    assert_eq!(b.stmts.len(), 1);
}

#[test]
fn helpers_are_inlined_with_their_consts() {
    let (v, errs) = checked(vec![
        parse_quote! {
            #[variants(N in [3])]
            #[launch(block = 32)]
            pub fn k<const N: u32>(y: &mut [f32]) { y[0] = scale::<N>(2.0); }
        },
        parse_quote! { fn scale<const M: u32>(v: f32) -> f32 { v * (M as f32) } },
    ]);
    assert!(errs.is_empty(), "{errs:?}");
    let TStmt::Expr(TExpr {
        kind: TKind::Assign { value, .. },
        ..
    }) = &v[0][0].body.stmts[0]
    else {
        panic!("expected an assignment")
    };
    assert!(matches!(value.kind, TKind::Inline { .. }));
    assert_eq!(value.ty, Ty::Scalar(Scalar::F32));
}

#[test]
fn errors_are_collected_not_stopped_at_the_first() {
    let (_, errs) = checked(vec![parse_quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], n: u32) {
            x[0] = 1.0;
            let a = n + 1.5;
            let b = undefined_name;
            let c = x[0].frobnicate();
        }
    }]);
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(errs[0].contains("cannot assign through `&[f32]`"));
    assert!(
        errs[1].contains("mismatched types: `u32` + `f32`"),
        "{errs:?}"
    );
    assert!(errs[2].contains("cannot find `undefined_name`"));
    assert!(errs[3].contains("no method `frobnicate` on `f32`"));
}

#[test]
fn missing_variants_and_launch_are_errors() {
    let (v, errs) = checked(vec![parse_quote! {
        pub fn k<const N: u32>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert!(v[0].is_empty());
    assert!(
        errs.iter()
            .any(|e| e.contains("const parameter `N` has no values")),
        "{errs:?}"
    );
    let (_, errs) = checked(vec![
        parse_quote! { pub fn k(y: &mut [f32]) { y[0] = 1.0; } },
    ]);
    assert!(
        errs.iter()
            .any(|e| e.contains("needs `#[launch(block = N)]`")),
        "{errs:?}"
    );
}

#[test]
fn literals_take_their_type_from_context() {
    let (v, errs) = checked(vec![parse_quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], n: u64) {
            let a = 2 * n;
            let b = 1 + 2;
            y[0] = 3;
        }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    let vars = &v[0][0].vars;
    assert_eq!(
        vars.iter().find(|x| x.name == "a").map(|x| x.ty.clone()),
        Some(Ty::Scalar(Scalar::U64))
    );
    // `b` folds to a constant binding, not a variable.
    assert!(!vars.iter().any(|x| x.name == "b"));
}

#[test]
fn asm_templates_split_into_text_and_operands() {
    use super::ops::parse_asm_template;
    let p = parse_asm_template("mov.b64 {{{0}, {1}}}, {2};", 3).expect("valid");
    assert_eq!(
        p,
        vec![
            AsmPiece::Text("mov.b64 {".into()),
            AsmPiece::In(0),
            AsmPiece::Text(", ".into()),
            AsmPiece::In(1),
            AsmPiece::Text("}, ".into()),
            AsmPiece::In(2),
            AsmPiece::Text(";".into()),
        ]
    );
    assert!(parse_asm_template("add.u32 {0}, {3};", 2).is_err());
    assert!(parse_asm_template("add.u32 {0, x;", 2).is_err());
    assert!(parse_asm_template("add.u32 }", 2).is_err());
}

#[test]
fn constants_of_f32_type_fold_as_f32() {
    let (v, errs) = checked(vec![parse_quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32]) {
            if (16777217 as f32) == 16777216.0 && 0.1f32 + 0.2 == 0.3f32 {
                y[0] = 1.0;
            }
        }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    // Both comparisons hold in f32 (not in f64): the `if` is resolved to its branch.
    let body = &v[0][0].body;
    assert!(body.stmts.is_empty());
    let Some(TExpr {
        kind: TKind::Block(b),
        ..
    }) = body.tail.as_deref()
    else {
        panic!("expected the resolved branch, got {body:?}")
    };
    assert_eq!(b.stmts.len(), 1);
}

#[test]
fn launch_attributes_per_variant() {
    let (v, errs) = checked(vec![parse_quote! {
        #[variants(ACT in [Relu, Gelu], BM in [32, 64])]
        #[launch(
            block = 256,
            min_blocks = if BM > 32 { 2 } else { 1 },
            max_regs = match ACT { Act::Identity | Act::Relu => 32, _ => 0 },
        )]
        pub fn k<const ACT: Act, const BM: u32>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    let v = &v[0];
    assert_eq!(v.len(), 4);
    let by = |e: &str| v.iter().find(|x| x.entry == e).expect(e);
    assert_eq!(by("k__ACT_Relu__BM_32").max_regs, Some(32));
    assert_eq!(by("k__ACT_Relu__BM_32").min_blocks, 1);
    assert_eq!(by("k__ACT_Gelu__BM_64").max_regs, None);
    assert_eq!(by("k__ACT_Gelu__BM_64").min_blocks, 2);
}

#[test]
fn a_where_condition_leaves_combinations_out() {
    let (v, errs) = checked(vec![parse_quote! {
        #[variants(BM in [32, 64, 128], WIDE in [false, true], where !(WIDE && BM * 2 > 128))]
        #[launch(block = 32)]
        pub fn k<const BM: u32, const WIDE: bool>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert!(errs.is_empty(), "{errs:?}");
    let mut names: Vec<&str> = v[0].iter().map(|x| x.entry.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "k__BM_128__WIDE_false",
            "k__BM_32__WIDE_false",
            "k__BM_32__WIDE_true",
            "k__BM_64__WIDE_false",
            "k__BM_64__WIDE_true",
        ]
    );
}

#[test]
fn a_where_condition_must_be_a_constant_bool() {
    let (_, errs) = checked(vec![parse_quote! {
        #[variants(BM in [32, 64], where BM + 1)]
        #[launch(block = 32)]
        pub fn k<const BM: u32>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert!(!errs.is_empty());
    assert!(errs.iter().any(|e| e.contains("where")), "{errs:?}");
}

#[test]
fn max_regs_out_of_range_names_the_variant() {
    let (_, errs) = checked(vec![parse_quote! {
        #[variants(ACT in [Relu, Gelu])]
        #[launch(block = 256, max_regs = match ACT { Act::Relu => 16, _ => 0 })]
        pub fn k<const ACT: Act>(y: &mut [f32]) { y[0] = 1.0; }
    }]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("between 24 and 255"), "{errs:?}");
    assert!(errs[0].contains("ACT = Relu"), "{errs:?}");
}

#[test]
fn ldmatrix_takes_16_bit_or_untransposed_32_bit_elements() {
    let (_, errs) = checked(vec![parse_quote! {
        #[target(sm_80)]
        #[launch(block = 32)]
        pub fn k(y: &mut [u32]) {
            let s: Shared<[f32; 256]>;
            let h: Shared<[u8; 256]>;
            let a = s.ldmatrix_x4(lane_id() * 4);
            let b = s.ldmatrix_x2_trans(lane_id() * 4);
            let c = h.ldmatrix_x1(lane_id() * 16);
            y[lane_id()] = a[0] + b[0] + c[0];
        }
    }]);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].contains("`ldmatrix_x2_trans` loads 16-bit elements (or, not transposed, 32-bit ones), not `f32`"), "{errs:?}");
    assert!(errs[1].contains("not `u8`"), "{errs:?}");
}

#[test]
fn const_generic_arguments_may_be_expressions_in_braces() {
    let (variants, errs) = checked(vec![
        parse_quote! {
            fn scaled<const N: u32>(x: u32) -> u32 { x * N }
        },
        parse_quote! {
            #[variants(B in [2, 3])]
            #[launch(block = 32)]
            pub fn k<const B: u32>(y: &mut [u32]) {
                y[lane_id()] = scaled::<{ B * 4 + 1 }>(lane_id());
            }
        },
    ]);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(variants[0].len(), 2);
}

#[test]
fn a_library_uses_structs_and_other_libraries_of_the_invocation() {
    // Library `a` declares a struct that the kernel takes, uses the invocation's own struct,
    // and calls library `b` by the name the invocation gives it.
    let (variants, errs) = checked(vec![
        parse_quote! { pub struct Q { pub scale: u32 } },
        parse_quote! { mod b { fn twice(x: u32) -> u32 { 2 * x } } },
        parse_quote! {
            mod a {
                pub struct P { pub n: u32, pub on: bool }
                fn get(p: P, q: Q) -> u32 { if p.on { b::twice(p.n) * q.scale } else { 0 } }
            }
        },
        parse_quote! {
            #[launch(block = 32)]
            pub fn k(p: P, q: Q, y: &mut [u32]) { y[0] = a::get(p, q); }
        },
    ]);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(variants[0].len(), 1);
}

#[test]
fn use_names_the_host_type_of_a_library_struct() {
    let (_, errs) = checked(vec![
        parse_quote! { mod a { pub struct P { pub n: u32 } } },
        parse_quote! { pub struct Q { pub n: u32 } },
        parse_quote! { use other::kernels::P; },
        parse_quote! { use other::Q; },
        parse_quote! { use other::R; },
        parse_quote! { use other::*; },
        parse_quote! {
            #[launch(block = 32)]
            pub fn k(p: P, q: Q, y: &mut [u32]) { y[0] = p.n + q.n; }
        },
    ]);
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].contains("by its path: `use other_crate::kernels::Params;`"),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("`Q` is a struct of this invocation, which declares its host type"),
        "{errs:?}"
    );
    assert!(
        errs[2].contains("no helper library of this invocation defines a struct `R`"),
        "{errs:?}"
    );
}

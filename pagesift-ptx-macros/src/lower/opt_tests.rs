use super::*;
use crate::compile_for_test;
use crate::lower::widen::{widen_bf16_halves, widen_index_products};
use crate::ptx::{inst_text, CmpKind};
use crate::types::RegClass;
use quote::quote;

fn r(class: RegClass, n: u32) -> Operand {
    Operand::Reg(Reg { class, n })
}
fn r32(n: u32) -> Operand {
    r(RegClass::B32, n)
}
fn rd(n: u32) -> Operand {
    r(RegClass::B64, n)
}
fn f(n: u32) -> Operand {
    r(RegClass::F32, n)
}
fn p(n: u32) -> Reg {
    Reg {
        class: RegClass::Pred,
        n,
    }
}
fn inst(op: Op, args: Vec<Operand>) -> Item {
    Item::Inst {
        pred: None,
        op,
        args,
    }
}
fn bra(label: u32, pred: Option<(Reg, bool)>) -> Item {
    Item::Inst {
        pred,
        op: Op::Bra,
        args: vec![Operand::Label(label)],
    }
}
fn param(dst: Operand, ty: Scalar, i: u32) -> Item {
    inst(
        Op::Ld {
            space: Space::Param,
            ty,
            vec: 1,
            nc: false,
        },
        vec![dst, crate::lower::addr(Operand::Name(format!("p{i}")), 0)],
    )
}
fn store(a: Operand, v: Operand) -> Item {
    inst(
        Op::St {
            space: Space::Global,
            ty: Scalar::F32,
            vec: 1,
        },
        vec![crate::lower::addr(a, 0), v],
    )
}
fn text(body: &[Item]) -> Vec<String> {
    body.iter()
        .map(|it| match it {
            Item::Label(l) => format!("L{l}:"),
            Item::Inst { pred, op, args } => inst_text(pred, op, args).expect("known form"),
        })
        .collect()
}
fn cvt(to: Scalar, from: Scalar, d: Operand, s: Operand) -> Item {
    inst(Op::Cvt { to, from }, vec![d, s])
}
fn mul64(d: Operand, a: Operand, c: i128) -> Item {
    inst(
        Op::Bin(BinKind::Mul, Scalar::U64),
        vec![d, a, Operand::Int(c)],
    )
}

#[test]
fn zero_and_sign_extended_indices_multiply_wide() {
    let mut body = vec![
        param(r32(1), Scalar::U32, 0),
        param(r32(2), Scalar::I32, 1),
        param(rd(9), Scalar::U64, 2),
        cvt(Scalar::U64, Scalar::U32, rd(1), r32(1)),
        mul64(rd(2), rd(1), 4),
        cvt(Scalar::I64, Scalar::I32, rd(3), r32(2)),
        mul64(rd(4), rd(3), 8),
        // A genuine 64-bit index keeps the 64-bit product.
        mul64(rd(5), rd(9), 4),
        cvt(Scalar::U32, Scalar::U64, r32(3), rd(1)),
    ];
    widen_index_products(&mut body);
    let t = text(&body);
    assert_eq!(t[4], "mul.wide.u32 %rd2, %r1, 4;");
    assert_eq!(t[6], "mul.wide.s32 %rd4, %r2, 8;");
    assert_eq!(t[7], "mul.lo.u64 %rd5, %rd9, 4;");
    // Truncating the extension again is the 32-bit value itself.
    assert_eq!(t[8], "mov.u32 %r3, %r1;");
}

#[test]
fn an_extension_of_a_reassigned_register_holds_only_until_it_changes() {
    let mut body = vec![
        param(r32(1), Scalar::U32, 0),
        inst(Op::Mov(Scalar::U32), vec![r32(2), r32(1)]),
        cvt(Scalar::U64, Scalar::U32, rd(1), r32(2)),
        // %r2 is written again: %rd1 no longer is its extension.
        inst(
            Op::Bin(BinKind::Add, Scalar::U32),
            vec![r32(2), r32(2), Operand::Int(1)],
        ),
        mul64(rd(2), rd(1), 4),
        cvt(Scalar::U64, Scalar::U32, rd(3), r32(2)),
        Item::Label(0),
        // Control flow joins here: a fact about a reassigned register is dropped.
        mul64(rd(4), rd(3), 4),
    ];
    let before = text(&body);
    widen_index_products(&mut body);
    assert_eq!(text(&body), before);
    // The same with a product large enough not to fit the 32-bit immediate.
    let mut body = vec![
        param(r32(1), Scalar::U32, 0),
        cvt(Scalar::U64, Scalar::U32, rd(1), r32(1)),
        mul64(rd(2), rd(1), 1 << 33),
    ];
    let before = text(&body);
    widen_index_products(&mut body);
    assert_eq!(text(&body), before);
}

/// `let mut v = -0.0; if c { v = a } else { v = b }; y[0] = v` as the lowering emits it.
#[test]
fn arms_write_the_merged_register_and_the_dead_default_goes() {
    let mut body = vec![
        param(f(1), Scalar::F32, 0),
        param(rd(1), Scalar::U64, 1),
        inst(
            Op::Setp(CmpKind::Gt, Scalar::F32),
            vec![Operand::Reg(p(1)), f(1), Operand::F32(0)],
        ),
        inst(Op::Mov(Scalar::F32), vec![f(2), Operand::F32(0x8000_0000)]),
        bra(1, Some((p(1), true))),
        inst(Op::Bin(BinKind::Mul, Scalar::F32), vec![f(3), f(1), f(1)]),
        inst(Op::Mov(Scalar::F32), vec![f(2), f(3)]),
        bra(2, None),
        Item::Label(1),
        inst(Op::Bin(BinKind::Add, Scalar::F32), vec![f(4), f(1), f(1)]),
        inst(Op::Mov(Scalar::F32), vec![f(2), f(4)]),
        Item::Label(2),
        store(rd(1), f(2)),
        inst(Op::Ret, vec![]),
    ];
    super::optimize(&mut body);
    let t = text(&body);
    assert!(!t.iter().any(|s| s.starts_with("mov")), "{t:#?}");
    assert!(
        t.contains(&"mul.rn.f32 %f2, %f1, %f1;".to_string()),
        "{t:#?}"
    );
    assert!(
        t.contains(&"add.rn.f32 %f2, %f1, %f1;".to_string()),
        "{t:#?}"
    );
    assert!(
        t.contains(&"st.global.f32 [%rd1], %f2;".to_string()),
        "{t:#?}"
    );
}

#[test]
fn a_copy_whose_source_changes_while_it_is_live_stays() {
    // d = s; s = s * s; y[0] = d; y[1] = s
    let mut body = vec![
        param(f(1), Scalar::F32, 0),
        param(rd(1), Scalar::U64, 1),
        inst(Op::Mov(Scalar::F32), vec![f(2), f(1)]),
        inst(Op::Bin(BinKind::Mul, Scalar::F32), vec![f(1), f(1), f(1)]),
        store(rd(1), f(2)),
        store(rd(1), f(1)),
        inst(Op::Ret, vec![]),
    ];
    let before = text(&body);
    super::optimize(&mut body);
    assert_eq!(text(&body), before);
}

#[test]
fn a_default_kept_on_the_path_that_skips_the_assignment() {
    // v = -0.0; if c { v = x * x }; y[0] = v: the default is live where the branch is skipped,
    // and a predicated write is not a kill.
    let mut body = vec![
        param(f(1), Scalar::F32, 0),
        param(rd(1), Scalar::U64, 1),
        inst(
            Op::Setp(CmpKind::Gt, Scalar::F32),
            vec![Operand::Reg(p(1)), f(1), Operand::F32(0)],
        ),
        inst(Op::Mov(Scalar::F32), vec![f(2), Operand::F32(0x8000_0000)]),
        Item::Inst {
            pred: Some((p(1), false)),
            op: Op::Mov(Scalar::F32),
            args: vec![f(2), f(1)],
        },
        bra(1, Some((p(1), true))),
        inst(Op::Bin(BinKind::Mul, Scalar::F32), vec![f(3), f(1), f(1)]),
        inst(Op::Mov(Scalar::F32), vec![f(2), f(3)]),
        Item::Label(1),
        store(rd(1), f(2)),
        inst(Op::Ret, vec![]),
    ];
    super::optimize(&mut body);
    let t = text(&body);
    assert!(
        t.contains(&"mov.f32 %f2, 0f80000000;".to_string()),
        "{t:#?}"
    );
    assert!(t.contains(&"@%p1 mov.f32 %f2, %f1;".to_string()), "{t:#?}");
    assert!(
        t.contains(&"mul.rn.f32 %f2, %f1, %f1;".to_string()),
        "{t:#?}"
    );
}

#[test]
fn unread_results_of_side_effect_free_instructions_go() {
    let mut body = vec![
        param(f(1), Scalar::F32, 0),
        param(rd(1), Scalar::U64, 1),
        inst(Op::Bin(BinKind::Mul, Scalar::F32), vec![f(2), f(1), f(1)]),
        inst(Op::Bin(BinKind::Add, Scalar::F32), vec![f(3), f(2), f(1)]),
        // A load is kept even when unread.
        inst(
            Op::Ld {
                space: Space::Global,
                ty: Scalar::F32,
                vec: 1,
                nc: false,
            },
            vec![f(4), crate::lower::addr(rd(1), 0)],
        ),
        store(rd(1), f(1)),
        bra(5, None),
        Item::Label(5),
        inst(Op::Ret, vec![]),
    ];
    super::optimize(&mut body);
    let t = text(&body);
    assert_eq!(
        t,
        [
            "ld.param.f32 %f1, [p0];",
            "ld.param.u64 %rd1, [p1];",
            "ld.global.f32 %f4, [%rd1];",
            "st.global.f32 [%rd1], %f1;",
            "L5:",
            "ret;",
        ]
    );
}

fn ptx_body(tokens: proc_macro2::TokenStream) -> String {
    match compile_for_test(tokens) {
        Ok(v) => v.into_iter().map(|(_, t)| t).collect(),
        Err(e) => panic!("errors: {e:#?}"),
    }
}

#[test]
fn kernels_index_with_wide_products_and_select_values() {
    let ptx = ptx_body(quote! {
        #[launch(block = 128)]
        pub fn k(x: &[f32], y: &mut [f32], z: &mut [f32], n: u32, m: i32, big: u64) {
            // Unchecked: the bounds checks would add their own extensions and branches.
            unsafe {
                let i = block_idx_x() * 128 + thread_idx_x();
                let e = (i * 4) as u64;
                let v = x.load4_nc_unchecked(e);
                let s = x.get_unchecked(m as u64);
                let w = if v[0] > 0.0 { v[1] } else { v[2] * 2.0 };
                let c = if i + 1 == n { 0 } else { i + 1 };
                y.set_unchecked(e, w + s);
                y.set_unchecked(c, 1.0);
                z.set_unchecked(big, 2.0);
            }
        }
    });
    assert!(ptx.contains("mul.wide.u32"), "{ptx}");
    assert!(ptx.contains("mul.wide.s32"), "{ptx}");
    // The 64-bit parameter index keeps the 64-bit product.
    assert!(ptx.contains("mul.lo.u64"), "{ptx}");
    assert!(!ptx.contains("cvt.u64.u32"), "{ptx}");
    assert!(ptx.contains("selp.f32"), "{ptx}");
    assert!(ptx.contains("selp.b32"), "{ptx}");
    assert!(!ptx.contains(" bra "), "{ptx}");
}

#[test]
fn merged_array_values_need_no_moves() {
    let ptx = ptx_body(quote! {
        #[launch(block = 128)]
        pub fn k(x: &[f32], y: &mut [f32], flags: u32) {
            // Unchecked: a failed check's fault block zeroes the loaded registers.
            unsafe {
                let i = (block_idx_x() * 128 + thread_idx_x()) * 4;
                let a = x.load4_nc_unchecked(i);
                let mut v = [-0.0f32; 4];
                if (flags & 1) != 0 {
                    v = x.load4_nc_unchecked(i + 512);
                } else {
                    #[unroll]
                    for j in 0..4 {
                        v[j] = a[j] * a[j];
                    }
                }
                let mut o = a;
                #[unroll]
                for j in 0..4 {
                    o[j] = v[j] + a[j];
                }
                y.store4_unchecked(i, o);
            }
        }
    });
    let movs = ptx
        .lines()
        .filter(|l| l.trim().starts_with("mov.f32"))
        .count();
    assert_eq!(movs, 0, "{ptx}");
}

fn h(n: u32) -> Operand {
    r(RegClass::B16, n)
}
/// `mov.b32 {lo, hi}, w`.
fn unpack(lo: u32, hi: u32, w: u32) -> Item {
    inst(
        Op::MovBits(32),
        vec![Operand::Vec(vec![h(lo), h(hi)]), r32(w)],
    )
}
/// `cvt.u32.u16 t, half; shl.b32 u, t, 16`: a bf16 widened the long way.
fn widen_half(t: u32, half: u32, u: u32) -> [Item; 2] {
    [
        cvt(Scalar::U32, Scalar::U16, r32(t), h(half)),
        inst(
            Op::Bin(BinKind::Shl, Scalar::U32),
            vec![r32(u), r32(t), Operand::Int(16)],
        ),
    ]
}

#[test]
fn bf16_halves_widen_from_their_word() {
    let mut body = vec![param(r32(1), Scalar::U32, 0), unpack(1, 2, 1)];
    body.extend(widen_half(3, 1, 4));
    // A join both of whose paths keep the facts.
    body.push(bra(7, Some((p(1), false))));
    body.push(Item::Label(7));
    body.extend(widen_half(5, 2, 6));
    widen_bf16_halves(&mut body);
    let t = text(&body);
    assert_eq!(t[3], "shl.b32 %r4, %r1, 16;");
    assert_eq!(t[7], "and.b32 %r6, %r1, 4294901760;");
}

#[test]
fn a_half_is_not_widened_from_a_word_written_on_some_path() {
    // The word is written on one path to the join: the fact does not survive it.
    let mut body = vec![param(r32(1), Scalar::U32, 0), unpack(1, 2, 1)];
    body.push(bra(7, Some((p(1), false))));
    body.push(inst(Op::Mov(Scalar::U32), vec![r32(1), Operand::Int(3)]));
    body.push(Item::Label(7));
    body.extend(widen_half(3, 1, 4));
    let before = text(&body);
    widen_bf16_halves(&mut body);
    assert_eq!(text(&body), before);
    // A loop that writes the half after its use: on the back edge the fact is gone.
    let mut body = vec![param(r32(1), Scalar::U32, 0), unpack(1, 2, 1)];
    body.push(Item::Label(8));
    body.extend(widen_half(3, 1, 4));
    body.push(inst(Op::Mov(Scalar::U16), vec![h(1), Operand::Int(0)]));
    body.push(bra(8, Some((p(1), false))));
    let before = text(&body);
    widen_bf16_halves(&mut body);
    assert_eq!(text(&body), before);
    // A predicated unpack is no fact.
    let mut body = vec![param(r32(1), Scalar::U32, 0)];
    let Item::Inst { op, args, .. } = unpack(1, 2, 1) else {
        unreachable!()
    };
    body.push(Item::Inst {
        pred: Some((p(1), false)),
        op,
        args,
    });
    body.extend(widen_half(3, 1, 4));
    let before = text(&body);
    widen_bf16_halves(&mut body);
    assert_eq!(text(&body), before);
}

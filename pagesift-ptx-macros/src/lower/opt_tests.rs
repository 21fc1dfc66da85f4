use super::*;
use crate::ptx::{inst_text, Space};
use crate::types::RegClass;

fn r(class: RegClass, n: u32) -> Operand {
    Operand::Reg(Reg { class, n })
}
fn r32(n: u32) -> Operand {
    r(RegClass::B32, n)
}
fn rd(n: u32) -> Operand {
    r(RegClass::B64, n)
}
fn inst(op: Op, args: Vec<Operand>) -> Item {
    Item::Inst {
        pred: None,
        op,
        args,
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

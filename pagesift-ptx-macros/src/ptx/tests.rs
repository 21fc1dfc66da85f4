use super::*;

#[test]
fn opcodes_come_from_the_tables() {
    assert_eq!(
        opcode(&Op::Bin(BinKind::Add, Scalar::F32)).as_deref(),
        Ok("add.f32")
    );
    assert_eq!(
        opcode(&Op::Bin(BinKind::Mul, Scalar::U32)).as_deref(),
        Ok("mul.lo.u32")
    );
    assert_eq!(
        opcode(&Op::Bin(BinKind::Shr, Scalar::I32)).as_deref(),
        Ok("shr.s32")
    );
    assert_eq!(
        opcode(&Op::Bin(BinKind::Div, Scalar::F32)).as_deref(),
        Ok("div.rn.f32")
    );
    assert_eq!(
        opcode(&Op::Cvt {
            to: Scalar::F32,
            from: Scalar::U32
        })
        .as_deref(),
        Ok("cvt.rn.f32.u32")
    );
    assert_eq!(
        opcode(&Op::Cvt {
            to: Scalar::I32,
            from: Scalar::F32
        })
        .as_deref(),
        Ok("cvt.rzi.s32.f32")
    );
    assert_eq!(
        opcode(&Op::Cvt {
            to: Scalar::F32,
            from: Scalar::F16
        })
        .as_deref(),
        Ok("cvt.f32.f16")
    );
    assert_eq!(
        opcode(&Op::Ld {
            space: Space::Global,
            ty: Scalar::F32,
            vec: 4,
            nc: true
        })
        .as_deref(),
        Ok("ld.global.nc.v4.f32")
    );
    assert_eq!(
        opcode(&Op::Shfl(ShflKind::Bfly)).as_deref(),
        Ok("shfl.sync.bfly.b32")
    );
    assert_eq!(
        opcode(&Op::Atom {
            space: Space::Shared,
            kind: AtomKind::Cas,
            ty: Scalar::U32
        })
        .as_deref(),
        Ok("atom.shared.cas.b32")
    );
}

#[test]
fn an_operation_with_no_rule_is_an_error() {
    assert!(opcode(&Op::Bin(BinKind::Rem, Scalar::F32)).is_err());
    assert!(opcode(&Op::Un(UnKind::TanhApprox, Scalar::F64)).is_err());
    assert!(opcode(&Op::Ld {
        space: Space::Shared,
        ty: Scalar::F32,
        vec: 1,
        nc: true
    })
    .is_err());
    assert!(opcode(&Op::Atom {
        space: Space::Global,
        kind: AtomKind::Max,
        ty: Scalar::F32
    })
    .is_err());
}

#[test]
fn immediates_are_bit_exact() {
    let mut s = String::new();
    operand(&Operand::F32(1.0f32.to_bits()), &mut s);
    operand(&Operand::F64(0.5f64.to_bits()), &mut s);
    assert_eq!(s, "0f3F8000000d3FE0000000000000");
    let text = inst_text(
        &None,
        &Op::Ld {
            space: Space::Global,
            ty: Scalar::F32,
            vec: 1,
            nc: false,
        },
        &[
            Operand::Reg(Reg {
                class: RegClass::F32,
                n: 1,
            }),
            Operand::Addr(
                Box::new(Operand::Reg(Reg {
                    class: RegClass::B64,
                    n: 2,
                })),
                8,
            ),
        ],
    );
    assert_eq!(text.as_deref(), Ok("ld.global.f32 %f1, [%rd2+8];"));
}

#[test]
fn the_form_list_is_sorted_and_complete() {
    let forms = instruction_forms();
    for f in [
        "add.f32",
        "ld.global.nc.v4.f32",
        "shfl.sync.bfly.b32",
        "fma.rn.f32",
        "setp.lt.u32",
        "bar.sync",
    ] {
        assert!(forms.iter().any(|x| x == f), "{f} missing");
    }
    assert!(forms.windows(2).all(|w| w[0] < w[1]));
}

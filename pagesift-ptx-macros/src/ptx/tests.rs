use super::*;

#[test]
fn opcodes_come_from_the_tables() {
    let cases = [
        (Op::Bin(BinKind::Add, Scalar::F32), "add.rn.f32"),
        (Op::Bin(BinKind::Mul, Scalar::U32), "mul.lo.u32"),
        (Op::Bin(BinKind::Shr, Scalar::I32), "shr.s32"),
        (Op::Bin(BinKind::Div, Scalar::F32), "div.rn.f32"),
        (
            Op::Cvt {
                to: Scalar::F32,
                from: Scalar::U32,
            },
            "cvt.rn.f32.u32",
        ),
        (
            Op::Cvt {
                to: Scalar::I32,
                from: Scalar::F32,
            },
            "cvt.rzi.s32.f32",
        ),
        (
            Op::Cvt {
                to: Scalar::F32,
                from: Scalar::F16,
            },
            "cvt.f32.f16",
        ),
        (
            Op::Ld {
                space: Space::Global,
                ty: Scalar::F32,
                vec: 4,
                nc: true,
            },
            "ld.global.nc.v4.f32",
        ),
        (Op::Shfl(ShflKind::Bfly), "shfl.sync.bfly.b32"),
        (
            Op::Atom {
                space: Space::Shared,
                kind: AtomKind::Cas,
                ty: Scalar::U32,
            },
            "atom.shared.cas.b32",
        ),
        (
            Op::Atom {
                space: Space::Global,
                kind: AtomKind::Add,
                ty: Scalar::Bf16x2,
            },
            "atom.global.add.noftz.bf16x2",
        ),
        (Op::LdAcquire(Scalar::U64), "ld.acquire.gpu.global.u64"),
        (Op::StRelease(Scalar::F32), "st.release.gpu.global.f32"),
        (
            Op::Fence {
                sc: false,
                scope: FenceScope::Device,
            },
            "fence.acq_rel.gpu",
        ),
        (
            Op::Fence {
                sc: true,
                scope: FenceScope::System,
            },
            "fence.sc.sys",
        ),
        (Op::BarWarpSync, "bar.warp.sync"),
        (
            Op::Dp4a {
                a_signed: false,
                b_signed: true,
            },
            "dp4a.u32.s32",
        ),
        (Op::Prmt, "prmt.b32"),
        (Op::CvtPack(Scalar::F16x2), "cvt.rn.f16x2.f32"),
    ];
    for (op, want) in cases {
        assert_eq!(opcode(&op).as_deref(), Ok(want), "{op:?}");
    }
}

#[test]
fn an_operation_with_no_rule_is_an_error() {
    assert!(opcode(&Op::LdAcquire(Scalar::U16)).is_err());
    assert!(opcode(&Op::CvtPack(Scalar::F32)).is_err());
    assert!(opcode(&Op::Atom {
        space: Space::Global,
        kind: AtomKind::Min,
        ty: Scalar::F16,
    })
    .is_err());
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
        "add.rn.f32",
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

/// Operands of the right register classes for one instruction of `op` (no values matter:
/// `ptxas` checks the forms).
fn sample_operands(op: &Op) -> Option<Vec<Operand>> {
    use RegClass as C;
    let r = |class: RegClass, n: u32| Operand::Reg(Reg { class, n });
    let of = |s: Scalar, n: u32| r(s.reg_class(), n);
    let global = addr_of(Operand::Reg(Reg {
        class: C::B64,
        n: 1,
    }));
    let space_addr = |space: Space| match space {
        Space::Global => global.clone(),
        Space::Shared => addr_of(Operand::Name("smem".into())),
        Space::Param => addr_of(Operand::Name("forms_param_0".into())),
    };
    let vec_of = |s: Scalar, vec: u8| {
        if vec == 1 {
            of(s, 1)
        } else {
            Operand::Vec((1..=vec as u32).map(|n| of(s, n)).collect())
        }
    };
    Some(match op {
        Op::Mov(s) => vec![of(*s, 1), of(*s, 2)],
        Op::MovBits(16) => vec![r(C::B16, 1), r(C::B16, 2)],
        Op::MovBits(32) => vec![r(C::B32, 1), r(C::F32, 2)],
        Op::MovBits(_) => vec![r(C::B64, 1), r(C::F64, 2)],
        Op::Bin(BinKind::Shl | BinKind::Shr, s) => vec![of(*s, 1), of(*s, 2), r(C::B32, 3)],
        Op::Bin(_, s) => vec![of(*s, 1), of(*s, 2), of(*s, 3)],
        Op::Un(UnKind::Popc | UnKind::Clz, s) => vec![r(C::B32, 1), of(*s, 2)],
        Op::Un(_, s) => vec![of(*s, 1), of(*s, 2)],
        Op::Fma(s) => vec![of(*s, 1), of(*s, 2), of(*s, 3), of(*s, 4)],
        Op::Setp(_, s) => vec![r(C::Pred, 1), of(*s, 2), of(*s, 3)],
        Op::IsNan(s) => vec![r(C::Pred, 1), of(*s, 2)],
        Op::Selp(s) => vec![of(*s, 1), of(*s, 2), of(*s, 3), r(C::Pred, 1)],
        Op::Cvt { to, from } => vec![of(*to, 1), of(*from, 2)],
        Op::Ld { space, ty, vec, .. } => vec![vec_of(*ty, *vec), space_addr(*space)],
        Op::St { space, ty, vec } => vec![space_addr(*space), vec_of(*ty, *vec)],
        Op::Atom { space, kind, ty } => {
            let mut a = vec![of(*ty, 1), space_addr(*space), of(*ty, 2)];
            if *kind == AtomKind::Cas {
                a.push(of(*ty, 3));
            }
            a
        }
        Op::Shfl(_) => vec![
            r(C::B32, 1),
            r(C::B32, 2),
            Operand::Int(1),
            Operand::Int(31),
            Operand::Int(0xffff_ffff),
        ],
        Op::Vote(VoteKind::Ballot) => vec![r(C::B32, 1), r(C::Pred, 1), Operand::Int(0xffff_ffff)],
        Op::Vote(_) => vec![r(C::Pred, 1), r(C::Pred, 2), Operand::Int(0xffff_ffff)],
        Op::BarSync => vec![Operand::Int(0)],
        Op::Bra => vec![Operand::Label(0)],
        Op::Ret => vec![],
        Op::CvtaGlobal => vec![r(C::B64, 1), r(C::B64, 2)],
        Op::MulWide { .. } => vec![r(C::B64, 1), r(C::B32, 2), r(C::B32, 3)],
        Op::Bfe { .. } => vec![r(C::B32, 1), r(C::B32, 2), Operand::Int(8), Operand::Int(8)],
        Op::Bfi => vec![
            r(C::B32, 1),
            r(C::B32, 2),
            r(C::B32, 3),
            Operand::Int(8),
            Operand::Int(8),
        ],
        Op::CpAsync { bytes } => vec![
            space_addr(Space::Shared),
            global.clone(),
            Operand::Int(*bytes as i128),
        ],
        Op::CpAsyncCommit => vec![],
        Op::CpAsyncWait => vec![Operand::Int(0)],
        Op::Ldmatrix { n, .. } => vec![
            Operand::Vec((1..=*n).map(|i| of(Scalar::U32, i)).collect()),
            space_addr(Space::Shared),
        ],
        Op::Mma { ty, k } => {
            let (_, _, _, na, nb) = *crate::check::MmaType::SHAPES
                .iter()
                .find(|s| s.1 == *ty && s.2 == *k)?;
            let acc = if matches!(ty, crate::check::MmaType::S8 | crate::check::MmaType::U8) {
                Scalar::I32
            } else {
                Scalar::F32
            };
            let regs = |s: Scalar, from: u32, n: u32| {
                Operand::Vec((from..from + n).map(|i| of(s, i)).collect())
            };
            vec![
                regs(acc, 1, 4),
                regs(Scalar::U32, 1, na),
                regs(Scalar::U32, 5, nb),
                regs(acc, 5, 4),
            ]
        }
        Op::CvtTf32 => vec![r(C::B32, 1), r(C::F32, 2)],
        Op::BarWarpSync => vec![Operand::Int(0xffff_ffff)],
        Op::Fence { .. } => vec![],
        Op::LdAcquire(ty) => vec![of(*ty, 1), global],
        Op::StRelease(ty) => vec![global, of(*ty, 1)],
        Op::Dp4a { .. } | Op::Prmt => (1..=4).map(|n| r(C::B32, n)).collect(),
        Op::CvtPack(_) => vec![r(C::B32, 1), r(C::F32, 1), r(C::F32, 2)],
        Op::Asm { .. } => return None,
    })
}

fn addr_of(base: Operand) -> Operand {
    Operand::Addr(Box::new(base), 0)
}

/// Every instruction form of the tables, assembled by `ptxas` at the lowest target and PTX
/// ISA version `requirement` gives it (when `ptxas` is installed at `target/ptxas/ptxas`).
#[test]
fn every_form_assembles_at_its_declared_minimum() {
    let Some(ptxas) = crate::test_ptxas() else {
        eprintln!("SKIPPED every_form_assembles_at_its_declared_minimum: no ptxas (PAGESIFT_PTXAS or target/ptxas/ptxas)");
        return;
    };
    let mut groups: std::collections::BTreeMap<(u32, (u32, u32)), Vec<String>> = Default::default();
    for op in all_ops() {
        if opcode(&op).is_err() {
            continue;
        }
        let Some(args) = sample_operands(&op) else {
            continue;
        };
        let (sm, ver) = requirement(&op);
        let target = crate::check::Target::parse(&format!("sm_{sm}")).expect("a known target");
        let key = (sm, ver.max(target.min_ptx()));
        let text = inst_text(&None, &op, &args).expect("text");
        groups.entry(key).or_default().push(text);
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let mut total = 0;
    for ((sm, (maj, min)), insts) in &groups {
        let mut src = format!(
            ".version {maj}.{min}\n.target sm_{sm}\n.address_size 64\n\n.visible .entry forms(\n\t.param .u64 forms_param_0\n)\n{{\n"
        );
        for (ty, prefix) in RegClass::ALL.map(|c| c.decl()) {
            src.push_str(&format!("\t.reg .{ty} {prefix}<16>;\n"));
        }
        src.push_str("\t.shared .align 16 .b8 smem[64];\n$L__BB0:\n");
        for i in insts {
            src.push_str(&format!("\t{i}\n"));
        }
        src.push_str("}\n");
        let path = dir.join(format!("forms-sm_{sm}-{maj}.{min}.ptx"));
        std::fs::write(&path, &src).expect("write");
        let out = std::process::Command::new(&ptxas)
            .arg(format!("-arch=sm_{sm}"))
            .arg(&path)
            .arg("-o")
            .arg(path.with_extension("cubin"))
            .output()
            .expect("running ptxas");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "forms for sm_{sm} / PTX {maj}.{min} rejected:\n{log}\n(source at {})",
            path.display()
        );
        total += insts.len();
    }
    assert!(total > 300, "only {total} forms");
}

/// A form that `requirement` puts above sm_70 is really missing on the target below it (so
/// the declared minimum is the lowest).
#[test]
fn forms_above_sm_70_are_missing_below_their_minimum() {
    let Some(ptxas) = crate::test_ptxas() else {
        eprintln!("SKIPPED forms_above_sm_70_are_missing_below_their_minimum: no ptxas");
        return;
    };
    let below = |sm: u32| match sm {
        75 => 70,
        80 => 75,
        _ => 89,
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let mut checked = 0;
    for (k, op) in all_ops().into_iter().enumerate() {
        let (sm, _) = requirement(&op);
        let Some(args) = sample_operands(&op) else {
            continue;
        };
        if sm <= 70 || opcode(&op).is_err() {
            continue;
        }
        let lower = below(sm);
        let text = inst_text(&None, &op, &args).expect("text");
        let mut src = format!(
            ".version 7.8\n.target sm_{lower}\n.address_size 64\n\n.visible .entry f()\n{{\n"
        );
        for (ty, prefix) in RegClass::ALL.map(|c| c.decl()) {
            src.push_str(&format!("\t.reg .{ty} {prefix}<16>;\n"));
        }
        src.push_str(&format!("\t{text}\n}}\n"));
        let path = dir.join(format!("below-{k}.ptx"));
        std::fs::write(&path, &src).expect("write");
        let out = std::process::Command::new(&ptxas)
            .arg(format!("-arch=sm_{lower}"))
            .arg(&path)
            .arg("-o")
            .arg(path.with_extension("cubin"))
            .output()
            .expect("running ptxas");
        assert!(
            !out.status.success(),
            "`{text}` assembles for sm_{lower}, but requirement() says sm_{sm}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} forms above sm_70");
}

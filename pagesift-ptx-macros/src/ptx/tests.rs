use super::*;
use pagesift_ptx_isa as isa;

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
        (Op::Lop3, "lop3.b32"),
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

/// Every operation the IR can express (most have no rule for most types).
fn all_ops() -> Vec<Op> {
    let mut ops: Vec<Op> = Vec::new();
    let bins = [
        BinKind::Add,
        BinKind::Sub,
        BinKind::Mul,
        BinKind::Div,
        BinKind::Rem,
        BinKind::And,
        BinKind::Or,
        BinKind::Xor,
        BinKind::Shl,
        BinKind::Shr,
        BinKind::Min,
        BinKind::Max,
        BinKind::MulHi,
        BinKind::CopySign,
    ];
    let uns = [
        UnKind::Neg,
        UnKind::Not,
        UnKind::Abs,
        UnKind::Sqrt,
        UnKind::SqrtApprox,
        UnKind::RsqrtApprox,
        UnKind::Rcp,
        UnKind::RcpApprox,
        UnKind::RcpApproxFtz,
        UnKind::Ex2Approx,
        UnKind::Ex2ApproxFtz,
        UnKind::Lg2Approx,
        UnKind::TanhApprox,
        UnKind::SinApprox,
        UnKind::CosApprox,
        UnKind::Floor,
        UnKind::Ceil,
        UnKind::RoundEven,
        UnKind::Trunc,
        UnKind::Popc,
        UnKind::Clz,
    ];
    let cmps = [
        CmpKind::Eq,
        CmpKind::Ne,
        CmpKind::Lt,
        CmpKind::Le,
        CmpKind::Gt,
        CmpKind::Ge,
        CmpKind::Neu,
    ];
    for s in Scalar::ALL {
        ops.push(Op::Mov(s));
        ops.extend(bins.iter().map(|k| Op::Bin(*k, s)));
        ops.extend(uns.iter().map(|k| Op::Un(*k, s)));
        ops.extend(cmps.iter().map(|k| Op::Setp(*k, s)));
        ops.push(Op::Fma(s));
        ops.push(Op::IsNan(s));
        ops.push(Op::Selp(s));
        for t in Scalar::ALL {
            ops.push(Op::Cvt { to: t, from: s });
        }
        for space in [Space::Global, Space::Shared, Space::Param] {
            for vec in [1u8, 2, 4] {
                for nc in [false, true] {
                    ops.push(Op::Ld {
                        space,
                        ty: s,
                        vec,
                        nc,
                    });
                }
                ops.push(Op::St { space, ty: s, vec });
            }
            for kind in AtomKind::ALL {
                ops.push(Op::Atom { space, kind, ty: s });
            }
        }
    }
    for k in [ShflKind::Bfly, ShflKind::Down, ShflKind::Up, ShflKind::Idx] {
        ops.push(Op::Shfl(k));
    }
    for k in [VoteKind::All, VoteKind::Any, VoteKind::Ballot] {
        ops.push(Op::Vote(k));
    }
    ops.push(Op::Elect);
    for sc in [false, true] {
        for scope in FenceScope::ALL {
            ops.push(Op::Fence { sc, scope });
        }
    }
    for s in Scalar::ALL {
        ops.push(Op::LdAcquire(s));
        ops.push(Op::StRelease(s));
        ops.push(Op::CvtPack(s));
    }
    for a_signed in [false, true] {
        for b_signed in [false, true] {
            ops.push(Op::Dp4a { a_signed, b_signed });
        }
    }
    for (_, ty, k, _, _) in MmaType::SHAPES {
        ops.push(Op::Mma { ty, k });
    }
    for ty in [MmaType::F16, MmaType::Bf16, MmaType::Tf32] {
        for n in (8..=256).step_by(8) {
            ops.push(Op::Wgmma { ty, n });
        }
    }
    for n in [1, 2, 4] {
        for trans in [false, true] {
            ops.push(Op::Ldmatrix { n, trans });
            ops.push(Op::Stmatrix { n, trans });
        }
    }
    ops.extend([
        Op::CpAsync { bytes: 4 },
        Op::CpAsync { bytes: 8 },
        Op::CpAsync { bytes: 16 },
        Op::CpAsyncCommit,
        Op::CpAsyncWait,
        Op::WgmmaFence,
        Op::WgmmaCommit,
        Op::WgmmaWait,
        Op::FenceProxyAsync,
        Op::SetMaxNReg { inc: false },
        Op::SetMaxNReg { inc: true },
        Op::MbarInit,
        Op::MbarArrive,
        Op::MbarArriveTx,
        Op::MbarArriveCpAsync,
        Op::MbarTryWait,
        Op::TmaLoad,
        Op::TmaStore,
        Op::BulkCommit,
        Op::BulkWait { read: false },
        Op::BulkWait { read: true },
        Op::CvtaParam,
        Op::PrefetchTensormap,
        Op::PrefetchL2,
        Op::CvtTf32,
        Op::MovBits(16),
        Op::MovBits(32),
        Op::MovBits(64),
        Op::BarSync,
        Op::BarWarpSync,
        Op::Prmt,
        Op::Lop3,
        Op::Bra,
        Op::Ret,
        Op::CvtaGlobal,
        Op::MulWide { signed: false },
        Op::MulWide { signed: true },
        Op::Bfe { signed: false },
        Op::Bfe { signed: true },
        Op::Bfi,
    ]);
    ops
}

/// The emitted rows of the instruction table hold exactly the forms the lowering rules produce
/// (and, since `opcode` fails for a text with no row, every produced form has a row).
#[test]
fn emitted_rows_are_exactly_the_lowering_rules_forms() {
    use std::collections::BTreeSet;
    let produced: BTreeSet<String> = all_ops().iter().filter_map(|o| opcode(o).ok()).collect();
    let emitted: BTreeSet<String> = isa::texts()
        .filter(|(_, row)| row.emitted)
        .map(|(t, _)| t.to_string())
        .collect();
    let unmarked: Vec<&String> = produced.difference(&emitted).collect();
    let unused: Vec<&String> = emitted.difference(&produced).collect();
    assert!(
        unmarked.is_empty(),
        "produced by a lowering rule, in a row not marked emitted: {unmarked:?}"
    );
    assert!(
        unused.is_empty(),
        "in a row marked emitted, produced by no lowering rule: {unused:?}"
    );
    assert!(produced.len() > 600, "only {} forms", produced.len());
    for f in [
        "add.rn.f32",
        "ld.global.nc.v4.f32",
        "shfl.sync.bfly.b32",
        "bar.sync",
    ] {
        assert!(produced.contains(f), "{f} missing");
    }
}

/// Runs `ptxas` on `src` for `target` (`sm_80`, `sm_90a`); the log when it fails.
fn assemble(ptxas: &std::path::Path, name: &str, target: &str, src: &str) -> Result<(), String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let path = dir.join(format!("{name}.ptx"));
    std::fs::write(&path, src).expect("write");
    let out = std::process::Command::new(ptxas)
        .arg(format!("-arch={target}"))
        .arg(&path)
        .arg("-o")
        .arg(path.with_extension("cubin"))
        .output()
        .expect("running ptxas");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}\n(source at {})",
            String::from_utf8_lossy(&out.stderr),
            path.display()
        ))
    }
}

/// The known target named `name`.
fn target(name: &str) -> crate::check::Target {
    crate::check::Target::parse(name).expect("a known target")
}

/// Every form of the instruction table (emitted or not), assembled by `ptxas` at the lowest
/// target and PTX ISA version its row gives (when `ptxas` is installed at
/// `target/ptxas/ptxas`).
#[test]
fn every_form_assembles_at_its_declared_minimum() {
    let Some(ptxas) = crate::test_ptxas() else {
        eprintln!("SKIPPED every_form_assembles_at_its_declared_minimum: no ptxas (PAGESIFT_PTXAS or target/ptxas/ptxas)");
        return;
    };
    let mut groups: std::collections::BTreeMap<(String, (u32, u32)), Vec<String>> =
        Default::default();
    for (text, row) in isa::texts() {
        let key = (row.target(), row.ptx.max(target(&row.target()).min_ptx()));
        groups.entry(key).or_default().extend(row.examples(text));
    }
    let mut total = 0;
    for ((sm, ver), mut insts) in groups {
        insts.sort();
        let src = isa::example_module(&sm, ver, &insts);
        let name = format!("forms-{sm}-{}.{}", ver.0, ver.1);
        if let Err(log) = assemble(&ptxas, &name, &sm, &src) {
            panic!("forms for {sm} / PTX {}.{} rejected:\n{log}", ver.0, ver.1);
        }
        total += insts.len();
    }
    assert!(total > 5000, "only {total} forms");
}

/// A form whose row is above sm_70 is really missing on the next target below it (so the
/// declared minimum is the lowest; for a row of an architecture-specific target, `sm_90a`,
/// that is the same target without the suffix): `ptxas` reports an error on every such
/// instruction.
#[test]
fn forms_above_sm_70_are_missing_below_their_minimum() {
    let Some(ptxas) = crate::test_ptxas() else {
        eprintln!("SKIPPED forms_above_sm_70_are_missing_below_their_minimum: no ptxas");
        return;
    };
    let below = |sm: u32| {
        crate::check::Target::KNOWN
            .iter()
            .filter_map(|(n, _)| crate::check::Target::parse(n))
            .filter(|t| t.sm < sm && !t.name.ends_with('a'))
            .map(|t| t.sm)
            .max()
            .expect("a target below")
    };
    let mut groups: std::collections::BTreeMap<(u32, (u32, u32)), Vec<String>> = Default::default();
    for (text, row) in isa::texts().filter(|(_, row)| row.sm > 70) {
        let lower = if row.arch { row.sm } else { below(row.sm) };
        let key = (lower, row.ptx.max((7, 8)));
        groups
            .entry(key)
            .or_default()
            .push(row.examples(text).remove(0));
    }
    let mut checked = 0;
    for ((lower, ver), mut insts) in groups {
        insts.sort();
        let src = isa::example_module(&format!("sm_{lower}"), ver, &insts);
        let name = format!("below-sm_{lower}");
        let log = assemble(&ptxas, &name, &format!("sm_{lower}"), &src)
            .expect_err("forms above their target");
        // One error line per instruction: `..., line N; error ...`.
        let failed: std::collections::HashSet<usize> = log
            .lines()
            .filter(|l| l.contains("error"))
            .filter_map(|l| l.split(", line ").nth(1)?.split(';').next()?.parse().ok())
            .collect();
        for (n, line) in src.lines().enumerate() {
            if let Some(inst) = line
                .strip_prefix('\t')
                .filter(|l| insts.iter().any(|i| i == l))
            {
                assert!(
                    failed.contains(&(n + 1)),
                    "`{inst}` assembles for sm_{lower}, but its row says a later target"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "only {checked} forms above sm_70");
}

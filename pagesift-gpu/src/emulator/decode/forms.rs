//! The rule check for instruction forms as the emitter writes them.

use super::inst::Mods;
use super::*;

/// Whether the decoder has a rule for an instruction form as the emitter writes it (opcode with
/// modifiers, e.g. `ld.global.nc.v4.f32`): decodes it with synthesized register operands, trying
/// each operand count an instruction can have.
pub(crate) fn check_form(form: &str) -> Result<(), String> {
    let syms = HashMap::new();
    let mut ctx = Ctx {
        regs: HashMap::new(),
        syms: &syms,
        local_syms: HashMap::new(),
        labels: HashMap::from([("$L".to_string(), 0)]),
        consts: HashMap::new(),
        template: vec![0; FIRST_FREE as usize],
        mmas: Vec::new(),
    };
    for i in 0..8 {
        let s = ctx.new_slot();
        ctx.regs.insert(format!("%x{i}"), s);
    }
    let reg = |i: usize| Operand::Name(format!("%x{i}"));
    let (base, mods) = Mods::new(form);
    let width = if mods.parts.contains(&"v4") {
        4
    } else if mods.parts.contains(&"v2") {
        2
    } else {
        1
    };
    let value = |first: usize| {
        if width == 1 {
            reg(first)
        } else {
            Operand::Vector((first..first + width).map(reg).collect())
        }
    };
    let addr = Operand::Addr {
        base: Some("%x7".into()),
        offset: 0,
    };
    let candidates: Vec<Vec<Operand>> = match base {
        "ld" | "ldu" => vec![vec![value(0), addr]],
        "st" => vec![vec![addr, value(0)]],
        "atom" => vec![
            vec![reg(0), addr.clone(), reg(1)],
            vec![reg(0), addr, reg(1), reg(2)],
        ],
        "red" => vec![vec![addr, reg(1)]],
        "bra" => vec![vec![Operand::Name("$L".into())]],
        "bar" | "barrier" => (1..=4).map(|n| (0..n).map(reg).collect()).collect(),
        "mma" => {
            let v = |from: usize, n: usize| Operand::Vector((from..from + n).map(reg).collect());
            vec![
                vec![v(0, 4), v(0, 2), v(2, 1), v(4, 4)],
                vec![v(0, 4), v(0, 4), v(4, 2), v(4, 4)],
            ]
        }
        "ldmatrix" => {
            let n = ["x1", "x2", "x4"]
                .iter()
                .position(|x| mods.parts.contains(x))
                .map_or(1, |i| 1 << i);
            vec![vec![Operand::Vector((0..n).map(reg).collect()), addr]]
        }
        "cp" => vec![
            vec![],
            vec![Operand::Imm("0".into())],
            vec![addr.clone(), addr, Operand::Imm("16".into())],
        ],
        "lop3" => vec![vec![
            reg(0),
            reg(1),
            reg(2),
            reg(3),
            Operand::Imm("0x96".into()),
        ]],
        "shfl" => vec![vec![
            Operand::Pair("%x0".into(), "%x1".into()),
            reg(2),
            reg(3),
            reg(4),
            reg(5),
        ]],
        _ => (0..=5).map(|n| (0..n).map(reg).collect()).collect(),
    };
    let mut first_err = None;
    for ops in candidates {
        let raw = RawInst {
            line: 1,
            guard: None,
            opcode: form.to_string(),
            operands: ops,
        };
        match decode_inst(&mut ctx, &raw) {
            Ok(_) => return Ok(()),
            Err(e) if e.starts_with("expected") && e.contains("operand") => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.unwrap_or_else(|| "no operand count fits".to_string()))
}

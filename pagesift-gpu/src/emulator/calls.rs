//! Calls of `.func`s, expanded where they stand: the parameters copied in, the function's
//! body with its registers and labels renamed, each `ret` a branch to the end of this copy,
//! then the result copied out. Every thread runs the same instructions in the same order as
//! through a call and return, and a function's registers are its own (one set per function,
//! as a frame; the language has no recursion, and a recursive call is an error here).

use super::ptx::{Call, Func, Operand, PResult, ParseError, RawInst, Stmt};
use std::collections::{HashMap, HashSet};

/// `body` with each call replaced by the body of the function it names (already expanded
/// itself: `funcs` holds only functions defined before, so none can call itself).
pub(super) fn expand(
    body: Vec<Stmt>,
    funcs: &HashMap<String, Func>,
    sites: &mut u32,
) -> PResult<Vec<Stmt>> {
    if !body.iter().any(|s| matches!(s, Stmt::Call(_))) {
        return Ok(body);
    }
    let mut out = Vec::with_capacity(body.len());
    // The functions whose registers this body has declared.
    let mut declared = HashSet::new();
    for stmt in body {
        let Stmt::Call(c) = stmt else {
            out.push(stmt);
            continue;
        };
        let Some(f) = funcs.get(&c.func) else {
            return Err(ParseError {
                line: c.line,
                message: format!(
                    "call of `{}`, which is not a function defined before it",
                    c.func
                ),
            });
        };
        *sites += 1;
        splice(&mut out, &c, f, *sites, declared.insert(c.func.clone()))?;
    }
    Ok(out)
}

/// One call of `f` at call number `site`, its registers declared where `declare`.
fn splice(out: &mut Vec<Stmt>, c: &Call, f: &Func, site: u32, declare: bool) -> PResult<()> {
    let bad = |message: String| ParseError {
        line: c.line,
        message,
    };
    if c.args.len() != f.params.len() || c.ret.is_some() != f.ret.is_some() {
        return Err(bad(format!(
            "call of `{}` with {} argument(s) and {} result(s); it takes {} and gives {}",
            c.func,
            c.args.len(),
            c.ret.is_some() as u32,
            f.params.len(),
            f.ret.is_some() as u32
        )));
    }
    // The function's own names: registers declared in it, parameters, result.
    let mut regs: HashSet<String> = HashSet::new();
    let mut labels: HashSet<String> = HashSet::new();
    for s in &f.body {
        match s {
            Stmt::Reg { names } => {
                for (name, count) in names {
                    match count {
                        Some(n) => regs.extend((0..*n).map(|i| format!("{name}{i}"))),
                        None => {
                            regs.insert(name.clone());
                        }
                    }
                }
            }
            Stmt::Label(l) => {
                labels.insert(l.clone());
            }
            _ => {}
        }
    }
    regs.extend(f.params.iter().map(|(_, n)| n.clone()));
    regs.extend(f.ret.iter().map(|(_, n)| n.clone()));
    let prefix = format!("%__{}_", c.func);
    let reg = |n: &str| format!("{prefix}{}", n.trim_start_matches('%'));
    let label = |l: &str| format!("{l}$call{site}");
    let end = format!("$__ret$call{site}");
    let rename = |n: &str| {
        if regs.contains(n) {
            reg(n)
        } else if labels.contains(n) {
            label(n)
        } else {
            n.to_string()
        }
    };
    if declare {
        // Only the registers the body names (a function may declare many more).
        let mut used = Vec::new();
        let mut seen = HashSet::new();
        for s in &f.body {
            if let Stmt::Inst(i) = s {
                let mut names = Vec::new();
                if let Some((_, p)) = &i.guard {
                    names.push(p.as_str());
                }
                for o in &i.operands {
                    operand_names(o, &mut names);
                }
                for n in names {
                    if regs.contains(n) && seen.insert(n.to_string()) {
                        used.push((reg(n), None));
                    }
                }
            }
        }
        for (_, n) in f.params.iter().chain(f.ret.iter()) {
            if seen.insert(n.clone()) {
                used.push((reg(n), None));
            }
        }
        out.push(Stmt::Reg { names: used });
    }
    let mov = |ty: &str, dst: Operand, src: Operand| {
        Stmt::Inst(RawInst {
            line: c.line,
            guard: None,
            opcode: format!("mov.{ty}"),
            operands: vec![dst, src],
        })
    };
    for ((ty, name), arg) in f.params.iter().zip(&c.args) {
        out.push(mov(ty, Operand::Name(reg(name)), arg.clone()));
    }
    for s in &f.body {
        match s {
            Stmt::Reg { .. } => {}
            Stmt::Label(l) => out.push(Stmt::Label(label(l))),
            Stmt::Var(v) => {
                return Err(bad(format!(
                    "variable `{}` declared inside function `{}` is not supported",
                    v.name, c.func
                )))
            }
            Stmt::Call(inner) => {
                // Expanded when the function was parsed; left here only by a bug.
                return Err(bad(format!(
                    "call of `{}` left inside function `{}`",
                    inner.func, c.func
                )));
            }
            Stmt::Inst(i) => {
                let mut i = i.clone();
                i.guard = i.guard.map(|(neg, p)| (neg, rename(&p)));
                let base = i.opcode.split('.').next().unwrap_or("");
                if base == "ret" {
                    i.opcode = "bra.uni".into();
                    i.operands = vec![Operand::Name(end.clone())];
                } else if base == "exit" {
                    return Err(bad(format!("`exit` inside function `{}`", c.func)));
                } else {
                    i.operands = i
                        .operands
                        .iter()
                        .map(|o| rename_operand(o, &rename))
                        .collect();
                }
                out.push(Stmt::Inst(i));
            }
        }
    }
    out.push(Stmt::Label(end));
    if let (Some(dst), Some((ty, name))) = (&c.ret, &f.ret) {
        out.push(mov(
            ty,
            Operand::Name(dst.clone()),
            Operand::Name(reg(name)),
        ));
    }
    Ok(())
}

fn operand_names<'a>(o: &'a Operand, out: &mut Vec<&'a str>) {
    match o {
        Operand::Name(n) | Operand::Not(n) => out.push(n),
        Operand::Addr { base: Some(b), .. } => out.push(b),
        Operand::Vector(v) => v.iter().for_each(|x| operand_names(x, out)),
        Operand::Pair(a, b) => {
            out.push(a);
            out.push(b);
        }
        Operand::Tensor { map, coords } => {
            out.push(map);
            coords.iter().for_each(|x| operand_names(x, out));
        }
        Operand::Imm(_) | Operand::Addr { base: None, .. } | Operand::Sink => {}
    }
}

fn rename_operand(o: &Operand, rename: &dyn Fn(&str) -> String) -> Operand {
    match o {
        Operand::Name(n) => Operand::Name(rename(n)),
        Operand::Not(n) => Operand::Not(rename(n)),
        Operand::Addr { base, offset } => Operand::Addr {
            base: base.as_deref().map(rename),
            offset: *offset,
        },
        Operand::Vector(v) => {
            Operand::Vector(v.iter().map(|x| rename_operand(x, rename)).collect())
        }
        Operand::Pair(a, b) => Operand::Pair(rename(a), rename(b)),
        Operand::Tensor { map, coords } => Operand::Tensor {
            map: rename(map),
            coords: coords.iter().map(|x| rename_operand(x, rename)).collect(),
        },
        Operand::Imm(_) | Operand::Sink => o.clone(),
    }
}

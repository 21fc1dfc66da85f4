//! Decoding of a kernel entry and placement of a module's variables: parameters, registers,
//! shared and local arrays, labels, then each instruction statement ([`decode_inst`]).

use super::inst::{decode_inst, Ctx};
use super::*;

/// The byte size of a variable; an error when element size x vector width x count overflows.
pub(super) fn var_bytes(v: &VarDecl) -> Result<u64, String> {
    let elem = Ty::parse(&v.ty).map_or(1, |t| t.bytes() as u64) * v.vec as u64;
    elem.checked_mul(v.count.unwrap_or(1))
        .ok_or(format!("the size of `{}` overflows 64 bits", v.name))
}

/// `top` rounded up to `align` (a power of two), then `bytes` added: the next free offset of a
/// state space, or an error when that overflows.
fn place(top: u64, align: u64, bytes: u64, name: &str) -> Result<(u64, u64), String> {
    if !align.is_power_of_two() {
        return Err(format!(
            "alignment {align} of `{name}` is not a power of two"
        ));
    }
    let addr = top
        .checked_next_multiple_of(align)
        .ok_or(format!("`{name}` does not fit its state space"))?;
    let end = addr
        .checked_add(bytes)
        .ok_or(format!("`{name}` does not fit its state space"))?;
    Ok((addr, end))
}

/// The size of a `.global` / `.const` variable, which must fit `max_bytes` (the device's
/// memory), and the bytes of its initializer (the rest is zero): no host buffer of the full
/// size is built, so a huge array costs nothing here and fails, if at all, as an allocation.
pub(super) fn var_init(v: &VarDecl, max_bytes: u64) -> Result<(u64, Vec<u8>), String> {
    let ty = Ty::parse(&v.ty).ok_or(format!("unsupported variable type .{}", v.ty))?;
    let bytes = var_bytes(v)?;
    if bytes > max_bytes {
        return Err(format!(
            "out of device memory for `{}`: {bytes} bytes, the device has {max_bytes}",
            v.name
        ));
    }
    let esize = ty.bytes() as usize;
    if (v.init.len() as u64).saturating_mul(esize as u64) > bytes {
        return Err(format!("too many initializers for `{}`", v.name));
    }
    let mut out = Vec::with_capacity(v.init.len() * esize);
    for lit in &v.init {
        let bits = imm_bits(lit, ty).ok_or(format!("bad initializer `{lit}`"))?;
        out.extend_from_slice(&bits.to_le_bytes()[..esize]);
    }
    Ok((bytes, out))
}

/// The bits of a literal as an operand of type `ty`.
pub(super) fn imm_bits(lit: &str, ty: Ty) -> Option<u64> {
    let (neg, body) = match lit.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, lit),
    };
    let lower = body.to_ascii_lowercase();
    let fmt = ty.fmt().or(ty.packed());
    let as_float = |x: f64| -> u64 {
        let x = if neg { -x } else { x };
        match fmt {
            Some(f) => super::super::num::round_to(x, 0.0, f, Rnd::Rn),
            None => (x as i64) as u64 & ty.mask(),
        }
    };
    if let Some(h) = lower.strip_prefix("0f") {
        let bits = u32::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F32 || fmt.is_none() {
            (bits ^ if neg { 0x8000_0000 } else { 0 }) as u64
        } else {
            as_float(f32::from_bits(bits) as f64)
        });
    }
    if let Some(h) = lower.strip_prefix("0d") {
        let bits = u64::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F64 || fmt.is_none() {
            bits ^ if neg { 1 << 63 } else { 0 }
        } else {
            as_float(f64::from_bits(bits))
        });
    }
    if !lower.starts_with("0x")
        && (lower.contains('.') || lower.contains('e') || lower == "inf" || lower == "nan")
    {
        return Some(as_float(lower.parse::<f64>().ok()?));
    }
    let v = parse_int(lit)?;
    Some(match fmt {
        Some(_) => as_float((if neg { -v } else { v }) as f64),
        None => (v as u64) & if ty == Ty::Pred { 1 } else { ty.mask() },
    })
}

/// Decodes one entry of a module whose module-level symbols are already placed.
pub(in crate::emulator) fn decode_entry(
    e: &Entry,
    module_syms: &HashMap<String, Sym>,
    module_shared: u32,
    module_dynamic: &[(String, u32)],
    source: &[&str],
) -> DResult<Kernel> {
    let mut ctx = Ctx {
        regs: HashMap::new(),
        syms: module_syms,
        local_syms: HashMap::new(),
        labels: HashMap::new(),
        consts: HashMap::new(),
        template: vec![0; FIRST_FREE as usize],
        mmas: Vec::new(),
        wgmmas: Vec::new(),
        tmas: Vec::new(),
    };
    // Parameters, in u64 arithmetic checked against the device's parameter space.
    let mut params = Vec::new();
    let mut off = 0u64;
    for p in &e.params {
        let ty = Ty::parse(&p.ty).ok_or(DecodeError {
            line: 0,
            message: format!("unsupported parameter type .{}", p.ty),
        })?;
        let size = (ty.bytes() as u64).saturating_mul(p.count.unwrap_or(1));
        let align = if p.align > 0 { p.align } else { ty.bytes() } as u64;
        let (addr, end) = place(off, align, size, &p.name)
            .ok()
            .filter(|&(_, end)| end <= MAX_PARAM_BYTES)
            .ok_or_else(|| DecodeError {
                line: 0,
                message: format!(
                    "the parameters of `{}` exceed {MAX_PARAM_BYTES} bytes (at `{}`)",
                    e.name, p.name
                ),
            })?;
        ctx.local_syms.insert(
            p.name.clone(),
            Sym {
                space: Space::Param,
                addr,
            },
        );
        params.push(ParamSlot {
            offset: addr as u32,
            size: size as u32,
        });
        off = end;
    }
    let param_bytes = off as u32;
    // Declarations and labels.
    let mut shared = module_shared as u64;
    let mut local = 0u64;
    let mut n_inst = 0u32;
    let mut dynamic: Vec<(String, u32)> = module_dynamic.to_vec();
    for s in &e.body {
        match s {
            Stmt::Reg { names } => {
                for (name, count) in names {
                    match count {
                        Some(n) => {
                            if ctx.template.len() + *n as usize > MAX_SLOTS {
                                return Err(DecodeError {
                                    line: 0,
                                    message: format!(
                                        "more than {MAX_SLOTS} registers in `{}`",
                                        e.name
                                    ),
                                });
                            }
                            for i in 0..*n {
                                let slot = ctx.new_slot();
                                ctx.regs.insert(format!("{name}{i}"), slot);
                            }
                        }
                        None => {
                            let slot = ctx.new_slot();
                            ctx.regs.insert(name.clone(), slot);
                        }
                    }
                }
            }
            Stmt::Var(v) => {
                let align = v.align.max(1) as u64;
                let bad = |message: String| DecodeError {
                    line: v.line,
                    message,
                };
                match v.space {
                    Space::Shared if v.count == Some(0) => {
                        dynamic.push((v.name.clone(), v.align.max(1)))
                    }
                    Space::Shared | Space::Local => {
                        let top = if v.space == Space::Shared {
                            &mut shared
                        } else {
                            &mut local
                        };
                        let bytes = var_bytes(v).map_err(bad)?;
                        let (addr, end) = place(*top, align, bytes, &v.name).map_err(bad)?;
                        ctx.local_syms.insert(
                            v.name.clone(),
                            Sym {
                                space: v.space,
                                addr,
                            },
                        );
                        *top = end;
                    }
                    _ => {
                        return Err(DecodeError {
                            line: v.line,
                            message: "global variables inside a kernel are not supported".into(),
                        })
                    }
                }
            }
            Stmt::Label(l) => {
                ctx.labels.insert(l.clone(), n_inst);
            }
            Stmt::Inst(_) => n_inst += 1,
            Stmt::Call(c) => {
                // Calls are expanded when the module is parsed (`calls.rs`).
                return Err(DecodeError {
                    line: c.line,
                    message: format!("call of `{}` was not expanded", c.func),
                });
            }
        }
    }
    if ctx.template.len() > MAX_SLOTS {
        return Err(DecodeError {
            line: 0,
            message: format!("more than {MAX_SLOTS} registers in `{}`", e.name),
        });
    }
    if local > MAX_LOCAL {
        return Err(DecodeError {
            line: 0,
            message: format!(
                "more than {MAX_LOCAL} bytes of local memory in `{}`",
                e.name
            ),
        });
    }
    if shared > MAX_SHARED {
        return Err(DecodeError {
            line: 0,
            message: format!("too much shared memory in `{}`: {shared} bytes", e.name),
        });
    }
    // Dynamic shared memory starts after the static part, at the strictest alignment asked.
    let dyn_align = dynamic.iter().map(|d| d.1).max().unwrap_or(16).max(16) as u64;
    let dyn_base = shared.div_ceil(dyn_align) * dyn_align;
    for (name, _) in dynamic {
        ctx.local_syms.insert(
            name,
            Sym {
                space: Space::Shared,
                addr: dyn_base,
            },
        );
    }
    let mut code = Vec::with_capacity(n_inst as usize);
    let mut lines = Vec::with_capacity(n_inst as usize);
    let mut texts = Vec::with_capacity(n_inst as usize);
    for s in &e.body {
        if let Stmt::Inst(raw) = s {
            let inst = decode_inst(&mut ctx, raw).map_err(|m| DecodeError {
                line: raw.line,
                message: format!(
                    "`{}`: {m}",
                    source
                        .get(raw.line as usize - 1)
                        .map_or(raw.opcode.as_str(), |l| l.trim())
                ),
            })?;
            code.push(inst);
            lines.push(raw.line);
            texts.push(
                source
                    .get(raw.line as usize - 1)
                    .map_or(String::new(), |l| l.trim().to_string()),
            );
        }
    }
    let acc_uses = super::tensor::accumulator_uses(&ctx, &e.body, &mut code);
    // Falling off the end exits.
    code.push(Inst {
        op: Op::Exit,
        guard: S_SINK,
        guard_neg: false,
    });
    lines.push(lines.last().copied().unwrap_or(0));
    texts.push("(end of kernel)".to_string());
    Ok(Kernel {
        name: e.name.clone(),
        code,
        lines,
        texts,
        nslots: ctx.template.len(),
        template: ctx.template,
        params,
        param_bytes,
        static_shared: dyn_base.max(shared) as u32,
        local_bytes: local as u32,
        reqntid: e.reqntid,
        maxntid: e.maxntid,
        mmas: ctx.mmas,
        wgmmas: ctx.wgmmas,
        acc_uses,
        tmas: ctx.tmas,
    })
}

/// Allocates a module-level `.global` / `.const` variable and writes its initial bytes.
/// Receives the variable, its size in bytes and its initialized first bytes.
pub(in crate::emulator) type VarAlloc<'a> =
    dyn FnMut(&VarDecl, u64, &[u8]) -> Result<u64, String> + 'a;

/// The module-level variables as placed: their symbols, the bytes of static `.shared` they
/// take, and the dynamic shared arrays (`.extern .shared .b8 name[]`, with their alignment),
/// which each kernel places after its own static shared memory, as the hardware lays it out.
pub(in crate::emulator) type ModuleVars = (HashMap<String, Sym>, u32, Vec<(String, u32)>);

/// Places module-level variables: `.shared` at offsets from 0 (the dynamic arrays per kernel,
/// [`ModuleVars`]), `.global`/`.const` at addresses given by `alloc` (which also receives
/// their initial bytes).
/// `max_global` bounds each `.global`/`.const` variable (the device's memory); module-level
/// `.shared` totals more than [`MAX_SHARED`] are errors, never truncated.
pub(in crate::emulator) fn place_module_vars(
    vars: &[VarDecl],
    max_global: u64,
    alloc: &mut VarAlloc<'_>,
) -> DResult<ModuleVars> {
    let mut syms = HashMap::new();
    let mut shared = 0u64;
    let mut dynamic = Vec::new();
    for v in vars {
        let e = |message: String| DecodeError {
            line: v.line,
            message,
        };
        match v.space {
            Space::Shared if v.count == Some(0) => dynamic.push((v.name.clone(), v.align.max(1))),
            Space::Shared => {
                let align = v.align.max(1) as u64;
                let bytes = var_bytes(v).map_err(e)?;
                let (addr, end) = place(shared, align, bytes, &v.name).map_err(e)?;
                if end > MAX_SHARED {
                    return Err(e(format!(
                        "too much shared memory: `{}` ends at byte {end}",
                        v.name
                    )));
                }
                syms.insert(
                    v.name.clone(),
                    Sym {
                        space: Space::Shared,
                        addr,
                    },
                );
                shared = end;
            }
            Space::Global | Space::Const => {
                let (bytes, init) = var_init(v, max_global).map_err(e)?;
                let addr = alloc(v, bytes, &init).map_err(e)?;
                syms.insert(
                    v.name.clone(),
                    Sym {
                        space: v.space,
                        addr,
                    },
                );
            }
            _ => return Err(e(format!("unsupported module-level variable `{}`", v.name))),
        }
    }
    Ok((syms, shared as u32, dynamic))
}

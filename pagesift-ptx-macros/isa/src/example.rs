//! Example instructions of a form, from its operand signature: what the tests assemble with
//! `ptxas` and decode in the emulator.

use crate::{Form, Operand, Role, Ty, Type, Width};

/// The register name prefix of a type, as [`example_module`] declares the registers.
fn reg_prefix(t: Type) -> &'static str {
    use Type::*;
    match t {
        Pred => "%p",
        B8 | U8 | S8 | B16 | U16 | S16 | F16 | Bf16 => "%rs",
        B32 | U32 | S32 | F16x2 | Bf16x2 | Tf32 => "%r",
        B64 | U64 | S64 => "%rd",
        F32 => "%f",
        F64 => "%fd",
    }
}

/// The modifiers of a text after the opcode (`ld.global.v4.f32` -> `global v4 f32`).
fn modifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split('.').skip(1)
}

/// Fresh example registers, numbered from 1 per prefix.
#[derive(Default)]
struct Regs(Vec<(&'static str, u32)>);

impl Regs {
    fn next(&mut self, t: Type) -> String {
        let prefix = reg_prefix(t);
        let n = match self.0.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.0.push((prefix, 1));
                1
            }
        };
        format!("{prefix}{n}")
    }
}

impl Form {
    /// Instructions of the form `text` (one of this row's [`Form::texts`]) with example
    /// operands: one with every operand and, if the row has optional operands, one without
    /// them. The registers, the shared array `smem`, the parameter `forms_param_0` and the
    /// label `$L__BB0` are those [`example_module`] declares. A row with a second operand
    /// signature ([`Form::alt_operands`]) gives the examples of both, the first signature's
    /// first.
    ///
    /// Panics if an operand names a type modifier the text lacks (a bug in the row).
    pub fn examples(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for ops in [self.operands, self.alt_operands] {
            if ops.is_empty() && !out.is_empty() {
                continue;
            }
            out.push(example(ops, text, true));
            if ops.iter().any(|o| o.optional) {
                out.push(example(ops, text, false));
            }
        }
        out
    }
}

/// The example instruction `text` with the operands `ops` (without the optional ones unless
/// `optional`).
fn example(ops: &[Operand], text: &str, optional: bool) -> String {
    let types: Vec<Type> = modifiers(text).filter_map(Type::parse).collect();
    let spaces: Vec<&str> = modifiers(text)
        .filter(|m| matches!(*m, "global" | "shared" | "local" | "param" | "const"))
        .collect();
    let count = |prefix: &str| -> Option<u8> {
        modifiers(text).find_map(|m| m.strip_prefix(prefix)?.parse().ok())
    };
    let mut regs = Regs::default();
    let mut addrs = 0;
    let mut args = Vec::new();
    for o in ops.iter().filter(|o| optional || !o.optional) {
        let ty = match o.ty {
            Ty::Is(t) => Some(t),
            Ty::Nth(n) => types.get(n as usize).copied(),
            Ty::Wide(n) => types.get(n as usize).and_then(|t| t.wide()),
        }
        .unwrap_or_else(|| panic!("`{text}`: operand type {:?} is not in the form", o.ty));
        let arg = match o.role {
            Role::Imm(v) => v.to_string(),
            Role::Label => "$L__BB0".to_string(),
            Role::SharedAddr => "[smem]".to_string(),
            Role::TensorCoords => {
                let dims = modifiers(text)
                    .find_map(|m| m.strip_suffix('d')?.parse::<u8>().ok())
                    .unwrap_or_else(|| panic!("`{text}`: no .<n>d modifier"));
                let map = regs.next(Type::B64);
                let c: Vec<String> = (0..dims).map(|_| regs.next(ty)).collect();
                format!("[{map}, {{{}}}]", c.join(", "))
            }
            Role::Addr => {
                addrs += 1;
                match spaces.get(addrs - 1).copied() {
                    Some("shared") => "[smem]".to_string(),
                    Some("param") => "[forms_param_0]".to_string(),
                    _ => format!("[{}]", regs.next(Type::B64)),
                }
            }
            Role::DstPred => format!("{}|{}", regs.next(ty), regs.next(Type::Pred)),
            Role::Dst | Role::DstPair | Role::Src | Role::PredSrc => {
                let n = match o.width {
                    Width::One | Width::Parts => None,
                    Width::V => count("v"),
                    Width::X => Some(count("x").unwrap_or(1)),
                    Width::N(n) => Some(n),
                    Width::Accum => Some(
                        modifiers(text)
                            .find_map(|m| {
                                let n = m.strip_prefix("m64n")?.split('k').next()?;
                                let half = n.parse::<u16>().ok()? / 2;
                                u8::try_from(half).ok()
                            })
                            .unwrap_or_else(|| panic!("`{text}`: no m64n<n>k<k> shape")),
                    ),
                };
                match n {
                    None => regs.next(ty),
                    Some(n) => {
                        let v: Vec<String> = (0..n).map(|_| regs.next(ty)).collect();
                        format!("{{{}}}", v.join(", "))
                    }
                }
            }
        };
        args.push(arg);
    }
    if args.is_empty() {
        format!("{text};")
    } else {
        format!("{text} {};", args.join(", "))
    }
}

/// A module with one kernel `forms` whose body is `instructions` (from [`Form::examples`]),
/// for `target` (`sm_80`, [`Form::target`]) and PTX ISA version `ptx`: it declares 255
/// registers of each class (`%p`, `%rs`, `%r`, `%rd`, `%f`, `%fd`), the shared array `smem`,
/// the parameter `forms_param_0` and the label `$L__BB0`.
pub fn example_module(target: &str, ptx: (u32, u32), instructions: &[String]) -> String {
    let mut s = format!(
        ".version {}.{}\n.target {target}\n.address_size 64\n\n.visible .entry forms(\n\t.param .u64 forms_param_0\n)\n{{\n",
        ptx.0, ptx.1
    );
    for (ty, prefix) in [
        ("pred", "%p"),
        ("b16", "%rs"),
        ("b32", "%r"),
        ("b64", "%rd"),
        ("f32", "%f"),
        ("f64", "%fd"),
    ] {
        s.push_str(&format!("\t.reg .{ty} {prefix}<256>;\n"));
    }
    s.push_str("\t.shared .align 16 .b8 smem[64];\n$L__BB0:\n");
    for i in instructions {
        s.push_str(&format!("\t{i}\n"));
    }
    s.push_str("\tret;\n}\n");
    s
}

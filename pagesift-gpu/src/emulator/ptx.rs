//! PTX text -> module structure: a tokenizer and a parser of directives, declarations, labels and
//! instruction statements. Instruction semantics are not interpreted here (see `decode`).

use std::collections::HashMap;

/// One token and the 1-based source line it starts on.
#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    text: &'a str,
    line: u32,
}

/// A parse failure: the message and the line.
#[derive(Debug)]
pub(super) struct ParseError {
    pub line: u32,
    pub message: String,
}

pub(super) type PResult<T> = Result<T, ParseError>;

/// The deepest nesting of `{ }` blocks in a kernel body: PTX needs a handful, and the recursive
/// parser must not exhaust the host stack on hostile input.
const MAX_NESTING: u32 = 256;

fn err<T>(line: u32, message: impl Into<String>) -> PResult<T> {
    Err(ParseError {
        line,
        message: message.into(),
    })
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%' | b'.')
}

fn tokenize(src: &str) -> PResult<Vec<Token<'_>>> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            i += 2;
            while i < bytes.len() && !bytes[i..].starts_with(b"*/") {
                if bytes[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += 1;
            }
            i += 1;
            out.push(Token {
                text: &src[start..i.min(src.len())],
                line,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            let hex = bytes[i..].len() > 1
                && c == b'0'
                && matches!(bytes[i + 1], b'x' | b'X' | b'f' | b'F' | b'd' | b'D');
            i += 1;
            while i < bytes.len() {
                let b = bytes[i];
                let exp_sign =
                    !hex && matches!(b, b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E');
                if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token {
                text: &src[start..i],
                line,
            });
        } else if is_ident_char(c) {
            let start = i;
            while i < bytes.len() {
                if is_ident_char(bytes[i]) {
                    i += 1;
                } else if bytes[i..].starts_with(b"::") {
                    i += 2;
                } else {
                    break;
                }
            }
            out.push(Token {
                text: &src[start..i],
                line,
            });
        } else if b",;{}[]()+-!|@<>=:".contains(&c) {
            out.push(Token {
                text: &src[i..i + 1],
                line,
            });
            i += 1;
        } else {
            return err(line, format!("unexpected character `{}`", c as char));
        }
    }
    Ok(out)
}

/// A state space of a variable or memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Space {
    Global,
    Shared,
    Local,
    Const,
    Param,
}

/// A variable declaration (`.global`, `.shared`, `.local`, `.const`).
#[derive(Clone, Debug)]
pub(super) struct VarDecl {
    pub space: Space,
    pub align: u32,
    /// Element type suffix without the dot, e.g. `b8`, `f32`.
    pub ty: String,
    /// Elements per vector (`.v2`, `.v4`), 1 otherwise.
    pub vec: u32,
    pub name: String,
    /// `None` for a scalar, `Some(0)` for an unsized (`[]`) array.
    pub count: Option<u64>,
    /// Initializer literals, as written.
    pub init: Vec<String>,
    pub line: u32,
}

/// A kernel parameter.
#[derive(Clone, Debug)]
pub(super) struct ParamDecl {
    pub name: String,
    pub ty: String,
    pub align: u32,
    pub count: Option<u64>,
}

/// One operand of an instruction, as written.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Operand {
    /// A register, special register, symbol or label name.
    Name(String),
    /// `!%p`.
    Not(String),
    /// A numeric literal with its sign, as written.
    Imm(String),
    /// `[base+offset]`, `[base]` or `[offset]`.
    Addr { base: Option<String>, offset: i64 },
    /// `{a, b, ...}`.
    Vector(Vec<Operand>),
    /// `%p|%q`.
    Pair(String, String),
    /// `[map, {c0, c1, ..}]`: a tensor map's address and the coordinates of a box.
    Tensor { map: String, coords: Vec<Operand> },
    /// `_`.
    Sink,
}

/// An instruction statement.
#[derive(Clone, Debug)]
pub(super) struct RawInst {
    pub line: u32,
    /// `(negated, predicate)`.
    pub guard: Option<(bool, String)>,
    pub opcode: String,
    pub operands: Vec<Operand>,
}

/// A statement of a kernel body.
#[derive(Clone, Debug)]
pub(super) enum Stmt {
    Reg {
        names: Vec<(String, Option<u32>)>,
    },
    Var(VarDecl),
    Label(String),
    Inst(RawInst),
    /// `call.uni (ret), func, (args..)`, replaced by the function's body once parsed
    /// (`calls.rs`).
    Call(Call),
}

/// A direct call of a `.func`.
#[derive(Clone, Debug)]
pub(super) struct Call {
    pub line: u32,
    pub ret: Option<String>,
    pub func: String,
    pub args: Vec<Operand>,
}

/// A `.func` with parameters and result in registers: (type, name) of each.
#[derive(Clone, Debug)]
pub(super) struct Func {
    pub ret: Option<(String, String)>,
    pub params: Vec<(String, String)>,
    pub body: Vec<Stmt>,
}

/// A `.entry`.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub name: String,
    pub params: Vec<ParamDecl>,
    pub reqntid: Option<[u32; 3]>,
    pub maxntid: Option<[u32; 3]>,
    pub body: Vec<Stmt>,
}

/// A parsed module.
#[derive(Clone, Debug, Default)]
pub(super) struct Module {
    pub version: (u32, u32),
    pub target: String,
    pub vars: Vec<VarDecl>,
    pub entries: Vec<Entry>,
}

struct Parser<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.text)
    }
    fn line(&self) -> u32 {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(0, |t| t.line)
    }
    fn next(&mut self) -> PResult<&'a str> {
        match self.toks.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.text)
            }
            None => err(self.line(), "unexpected end of PTX"),
        }
    }
    fn eat(&mut self, s: &str) -> bool {
        if self.peek() == Some(s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, s: &str) -> PResult<()> {
        let line = self.line();
        let t = self.next()?;
        if t == s {
            Ok(())
        } else {
            err(line, format!("expected `{s}`, found `{t}`"))
        }
    }
    fn number(&mut self) -> PResult<u64> {
        let line = self.line();
        let t = self.next()?;
        // Out-of-range literals are errors, never wrapped or truncated into a small size.
        parse_int(t)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or(ParseError {
                line,
                message: format!("expected a number from 0 to {}, found `{t}`", u64::MAX),
            })
    }
    /// A number that must fit 32 bits (dimensions, alignments, register counts).
    fn number_u32(&mut self) -> PResult<u32> {
        let line = self.line();
        let n = self.number()?;
        u32::try_from(n).or(err(line, format!("{n} does not fit 32 bits")))
    }
    /// Skips to just past the next `;`.
    fn skip_statement(&mut self) -> PResult<()> {
        while self.next()? != ";" {}
        Ok(())
    }
}

/// Parses an integer literal (decimal, hex, octal, binary, optional `U` suffix, optional sign).
pub(super) fn parse_int(t: &str) -> Option<i128> {
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let t = t.trim_end_matches(['U', 'u']);
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else if let Some(b) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        i128::from_str_radix(b, 2).ok()?
    } else if t.len() > 1 && t.starts_with('0') && t.bytes().all(|c| c.is_ascii_digit()) {
        i128::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn strip_dot(t: &str) -> &str {
    t.strip_prefix('.').unwrap_or(t)
}

const TYPE_NAMES: &[&str] = &[
    "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16",
    "f16x2", "bf16", "bf16x2", "f32", "f64", "pred", "tf32", "e4m3", "e5m2",
];

/// Parses a whole module.
pub(super) fn parse_module(src: &str) -> PResult<Module> {
    let mut p = Parser {
        toks: tokenize(src)?,
        pos: 0,
    };
    let mut m = Module::default();
    // The functions defined so far (PTX defines a function before its calls) and the count
    // of calls expanded (each call's labels are its own).
    let mut funcs: HashMap<String, Func> = HashMap::new();
    let mut sites = 0u32;
    while let Some(t) = p.peek() {
        let line = p.line();
        match t {
            ".version" => {
                p.pos += 1;
                let v = p.next()?;
                let (a, b) = v.split_once('.').unwrap_or((v, "0"));
                m.version = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
            }
            ".target" => {
                p.pos += 1;
                m.target = p.next()?.to_string();
                while p.eat(",") {
                    p.next()?;
                }
            }
            ".address_size" => {
                p.pos += 1;
                let n = p.number()?;
                if n != 64 {
                    return err(
                        line,
                        format!(".address_size {n} is not supported (only 64)"),
                    );
                }
            }
            ".visible" | ".weak" | ".extern"
                if matches!(
                    p.toks.get(p.pos + 1).map(|t| t.text),
                    Some(".entry" | ".func")
                ) =>
            {
                p.pos += 1;
            }
            ".entry" => {
                p.pos += 1;
                let mut e = parse_entry(&mut p)?;
                e.body = super::calls::expand(std::mem::take(&mut e.body), &funcs, &mut sites)?;
                m.entries.push(e);
            }
            ".func" => {
                p.pos += 1;
                let (name, mut f) = parse_func(&mut p)?;
                f.body = super::calls::expand(std::mem::take(&mut f.body), &funcs, &mut sites)?;
                funcs.insert(name, f);
            }
            ".file" | ".section" | ".pragma" => p.skip_statement()?,
            ".global" | ".shared" | ".const" | ".extern" | ".visible" | ".weak" | ".local" => {
                let v = parse_var(&mut p)?;
                m.vars.push(v);
            }
            _ => return err(line, format!("unsupported module-level directive `{t}`")),
        }
    }
    Ok(m)
}

/// `.reqntid` / `.maxntid` dimensions: each at least 1, at most 1024 threads in all (so later
/// products of the three cannot overflow).
fn parse_dims(p: &mut Parser<'_>) -> PResult<[u32; 3]> {
    let line = p.line();
    let mut d = [1u32; 3];
    d[0] = p.number_u32()?;
    for v in d.iter_mut().skip(1) {
        if !p.eat(",") {
            break;
        }
        *v = p.number_u32()?;
    }
    let total = d.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
    if d.contains(&0) || total.is_none_or(|t| t > 1024) {
        return err(
            line,
            format!("block dimensions {d:?} are outside 1..=1024 threads"),
        );
    }
    Ok(d)
}

fn parse_entry(p: &mut Parser<'_>) -> PResult<Entry> {
    let name = p.next()?.to_string();
    let mut e = Entry {
        name,
        params: Vec::new(),
        reqntid: None,
        maxntid: None,
        body: Vec::new(),
    };
    if p.eat("(") {
        while !p.eat(")") {
            p.expect(".param")?;
            let mut prm = ParamDecl {
                name: String::new(),
                ty: String::new(),
                align: 0,
                count: None,
            };
            loop {
                let line = p.line();
                let t = p.next()?;
                match t {
                    ".align" => prm.align = p.number_u32()?,
                    ".ptr" | ".global" | ".shared" | ".const" | ".local" => {}
                    _ if t.starts_with('.') && TYPE_NAMES.contains(&strip_dot(t)) => {
                        prm.ty = strip_dot(t).to_string()
                    }
                    _ if t.starts_with('.') => {
                        return err(line, format!("unsupported parameter attribute `{t}`"))
                    }
                    _ => {
                        prm.name = t.to_string();
                        break;
                    }
                }
            }
            if p.eat("[") {
                prm.count = Some(p.number()?);
                p.expect("]")?;
            }
            e.params.push(prm);
            p.eat(",");
        }
    }
    loop {
        let line = p.line();
        match p.next()? {
            "{" => break,
            ".reqntid" => e.reqntid = Some(parse_dims(p)?),
            ".maxntid" => e.maxntid = Some(parse_dims(p)?),
            ".minnctapersm" | ".maxnreg" | ".maxclusterrank" => {
                p.number()?;
            }
            ".reqnctapercluster" | ".explicitcluster" | ".noreturn" => {
                while p.peek().is_some_and(|t| t != "{" && !t.starts_with('.')) {
                    p.pos += 1;
                }
            }
            ".pragma" => p.skip_statement()?,
            t => return err(line, format!("unsupported entry directive `{t}`")),
        }
    }
    parse_body(p, &mut e.body, 1)?;
    Ok(e)
}

/// `.func (.reg .ty ret) name(.reg .ty a, ..) { body }`, after `.func`.
fn parse_func(p: &mut Parser<'_>) -> PResult<(String, Func)> {
    fn reg_decl(p: &mut Parser<'_>) -> PResult<(String, String)> {
        let line = p.line();
        if !p.eat(".reg") {
            return err(
                line,
                "only register parameters and results (`.reg`) of functions are supported",
            );
        }
        let ty = strip_dot(p.next()?).to_string();
        if !TYPE_NAMES.contains(&ty.as_str()) {
            return err(line, format!("unknown register type `.{ty}`"));
        }
        Ok((ty, p.next()?.to_string()))
    }
    let mut ret = None;
    if p.eat("(") {
        ret = Some(reg_decl(p)?);
        p.expect(")")?;
    }
    let name = p.next()?.to_string();
    let mut params = Vec::new();
    if p.eat("(") {
        while !p.eat(")") {
            params.push(reg_decl(p)?);
            p.eat(",");
        }
    }
    while p.eat(".noreturn") {}
    p.expect("{")?;
    let mut body = Vec::new();
    parse_body(p, &mut body, 1)?;
    Ok((name, Func { ret, params, body }))
}

/// `call.uni (ret), func, (args..);` after its opcode.
fn parse_call(p: &mut Parser<'_>, line: u32) -> PResult<Call> {
    let mut ret = None;
    if p.eat("(") {
        ret = Some(p.next()?.to_string());
        p.expect(")")?;
        p.expect(",")?;
    }
    let func = p.next()?.to_string();
    let mut args = Vec::new();
    if p.eat(",") {
        p.expect("(")?;
        while !p.eat(")") {
            args.push(parse_operand(p, false)?);
            p.eat(",");
        }
    }
    p.expect(";")?;
    Ok(Call {
        line,
        ret,
        func,
        args,
    })
}

fn parse_var(p: &mut Parser<'_>) -> PResult<VarDecl> {
    let line = p.line();
    let mut v = VarDecl {
        space: Space::Global,
        align: 0,
        ty: String::new(),
        vec: 1,
        name: String::new(),
        count: None,
        init: Vec::new(),
        line,
    };
    loop {
        let line = p.line();
        let t = p.next()?;
        match t {
            ".extern" | ".visible" | ".weak" => {}
            ".global" => v.space = Space::Global,
            ".shared" => v.space = Space::Shared,
            ".local" => v.space = Space::Local,
            ".const" => v.space = Space::Const,
            ".align" => v.align = p.number_u32()?,
            ".v2" => v.vec = 2,
            ".v4" => v.vec = 4,
            _ if t.starts_with('.') && TYPE_NAMES.contains(&strip_dot(t)) => {
                v.ty = strip_dot(t).to_string()
            }
            _ if t.starts_with('.') => {
                return err(line, format!("unsupported variable attribute `{t}`"))
            }
            _ => {
                v.name = t.to_string();
                break;
            }
        }
    }
    if p.eat("[") {
        if p.eat("]") {
            v.count = Some(0);
        } else {
            v.count = Some(p.number()?);
            p.expect("]")?;
        }
    }
    if p.eat("=") {
        let braced = p.eat("{");
        loop {
            let mut lit = p.next()?.to_string();
            if lit == "-" {
                lit = format!("-{}", p.next()?);
            }
            if lit == "{" || lit == "}" {
                return err(line, "nested initializers are not supported");
            }
            v.init.push(lit);
            if !p.eat(",") {
                break;
            }
        }
        if braced {
            p.expect("}")?;
        }
    }
    p.expect(";")?;
    Ok(v)
}

/// Parses statements up to the `}` closing a block opened at nesting `depth`.
fn parse_body(p: &mut Parser<'_>, body: &mut Vec<Stmt>, depth: u32) -> PResult<()> {
    loop {
        let line = p.line();
        let t = p.next()?;
        match t {
            "}" => return Ok(()),
            "{" if depth >= MAX_NESTING => {
                return err(
                    line,
                    format!("blocks nested deeper than {MAX_NESTING} levels"),
                )
            }
            "{" => parse_body(p, body, depth + 1)?,
            ".reg" => {
                let ty_tok = p.next()?;
                let ty = strip_dot(ty_tok).to_string();
                if ty == "v2" || ty == "v4" {
                    return err(line, "vector registers are not supported");
                }
                if !TYPE_NAMES.contains(&ty.as_str()) {
                    return err(line, format!("unknown register type `{ty_tok}`"));
                }
                if ty == "b128" {
                    return err(line, "128-bit registers are not supported");
                }
                let mut names = Vec::new();
                loop {
                    let name = p.next()?.to_string();
                    let count = if p.eat("<") {
                        let n = p.number_u32()?;
                        p.expect(">")?;
                        Some(n)
                    } else {
                        None
                    };
                    names.push((name, count));
                    if !p.eat(",") {
                        break;
                    }
                }
                p.expect(";")?;
                let _ = ty;
                body.push(Stmt::Reg { names });
            }
            ".shared" | ".local" | ".global" | ".const" | ".extern" => {
                p.pos -= 1;
                body.push(Stmt::Var(parse_var(p)?));
            }
            ".pragma" | ".loc" | ".file" => {
                // `.loc` has no terminating semicolon: skip to the end of its line.
                if t == ".loc" {
                    while p.toks.get(p.pos).is_some_and(|tok| tok.line == line) {
                        p.pos += 1;
                    }
                } else {
                    p.skip_statement()?;
                }
            }
            _ if t.starts_with('.') => {
                return err(
                    line,
                    format!("unsupported directive `{t}` in a kernel body"),
                )
            }
            "call" | "call.uni" => body.push(Stmt::Call(parse_call(p, line)?)),
            "@" => {
                let (neg, pred) = if p.eat("!") {
                    (true, p.next()?)
                } else {
                    (false, p.next()?)
                };
                let inst_line = p.line();
                let opcode = p.next()?;
                let mut inst = parse_inst(p, opcode, inst_line)?;
                inst.guard = Some((neg, pred.to_string()));
                body.push(Stmt::Inst(inst));
            }
            _ => {
                if p.eat(":") {
                    body.push(Stmt::Label(t.to_string()));
                } else {
                    body.push(Stmt::Inst(parse_inst(p, t, line)?));
                }
            }
        }
    }
}

fn parse_inst(p: &mut Parser<'_>, opcode: &str, line: u32) -> PResult<RawInst> {
    let mut operands = Vec::new();
    if !p.eat(";") {
        loop {
            operands.push(parse_operand(p, true)?);
            if p.eat(";") {
                break;
            }
            p.expect(",")?;
        }
    }
    Ok(RawInst {
        line,
        guard: None,
        opcode: opcode.to_string(),
        operands,
    })
}

/// One operand; `{a, b}` vectors only where `vector` (they do not nest, so the recursion is one
/// level deep whatever the input).
fn parse_operand(p: &mut Parser<'_>, vector: bool) -> PResult<Operand> {
    let line = p.line();
    let t = p.next()?;
    match t {
        "{" if !vector => err(line, "nested vector operands are not supported"),
        "!" => Ok(Operand::Not(p.next()?.to_string())),
        "-" => Ok(Operand::Imm(format!("-{}", p.next()?))),
        // `_|p`: a pair whose first destination is discarded (`elect.sync`).
        "_" if p.eat("|") => Ok(Operand::Pair(t.to_string(), p.next()?.to_string())),
        "_" => Ok(Operand::Sink),
        "{" => {
            let mut v = Vec::new();
            loop {
                v.push(parse_operand(p, false)?);
                if p.eat("}") {
                    break;
                }
                p.expect(",")?;
            }
            Ok(Operand::Vector(v))
        }
        "[" => {
            let mut base = None;
            let mut offset: i64 = 0;
            let first = p.next()?;
            if let Some(v) = parse_int(first) {
                offset = v as i64;
            } else {
                base = Some(first.to_string());
            }
            if base.is_some() && p.eat(",") {
                // `[map, {c0, c1, ..}]`: a tensor map and the coordinates of a box.
                let Operand::Vector(coords) = parse_operand(p, vector)? else {
                    return err(
                        line,
                        "expected the coordinates `{c0, ..}` after a tensor map",
                    );
                };
                p.expect("]")?;
                return Ok(Operand::Tensor {
                    map: first.to_string(),
                    coords,
                });
            }
            loop {
                let line = p.line();
                match p.next()? {
                    "]" => break,
                    "+" | "-" => {
                        let mut neg = p.toks[p.pos - 1].text == "-";
                        let mut n = p.next()?;
                        if n == "-" {
                            neg = !neg;
                            n = p.next()?;
                        }
                        let v = parse_int(n).ok_or(ParseError {
                            line,
                            message: format!("bad address offset `{n}`"),
                        })?;
                        offset = offset.wrapping_add(if neg { -(v as i64) } else { v as i64 });
                    }
                    other => return err(line, format!("unsupported address syntax at `{other}`")),
                }
            }
            Ok(Operand::Addr { base, offset })
        }
        _ if t.as_bytes()[0].is_ascii_digit() => Ok(Operand::Imm(t.to_string())),
        _ if t.starts_with('.') || matches!(t, "," | ";" | "(" | ")" | "}" | "]") => {
            err(line, format!("unexpected `{t}` in operand list"))
        }
        _ => {
            if p.eat("|") {
                Ok(Operand::Pair(t.to_string(), p.next()?.to_string()))
            } else {
                Ok(Operand::Name(t.to_string()))
            }
        }
    }
}

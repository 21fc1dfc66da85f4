//! Calls of `#[noinline]` helpers: each instantiation is lowered once, on its first call, into
//! a PTX `.func` of the module ([`ptx::DevFunc`]) whose parameters and result are registers;
//! each call is one `call.uni`. The function's body starts by copying its parameters into
//! registers of its own and ends by copying its result into the result register, so that the
//! optimizer sees every value it needs read.

use super::{InlineCx, Lower, Store, Val};
use crate::check::TExpr;
use crate::ctxt::Sp as Span;
use crate::ptx::{self, Item, Op, Operand};
use crate::types::Ty;

/// Where the lowering of a `.func` stands.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum FuncState {
    NotYet,
    Lowering,
    Done,
}

impl Lower<'_> {
    /// A call of the variant's `.func` number `func` with `args`, of result type `ty`.
    pub(super) fn call(&mut self, func: usize, args: &[TExpr], ty: &Ty, span: Span) -> Val {
        let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
        match self.func_state[func] {
            FuncState::Done => {}
            FuncState::NotYet => self.lower_func(func, span),
            FuncState::Lowering => {
                self.error(
                    span,
                    format!(
                        "`#[noinline]` helper `{}` calls itself (recursion is not supported)",
                        self.v.funcs[func].name
                    ),
                );
                return Val::Unit;
            }
        }
        let name = self.v.funcs[func].name.clone();
        let result = self.fresh_of(ty);
        let mut pieces = Vec::new();
        let mut ops = Vec::new();
        let mut outs = Vec::new();
        let mut text = "call.uni ".to_string();
        if let Some(Val::Reg(r, _)) = &result {
            text.push('(');
            pieces.push(std::mem::take(&mut text));
            ops.push(Operand::Reg(*r));
            outs.push(true);
            text.push_str("), ");
        }
        text.push_str(&name);
        for (i, v) in vals.iter().enumerate() {
            text.push_str(if i == 0 { ", (" } else { ", " });
            pieces.push(std::mem::take(&mut text));
            ops.push(self.operand_reg(v, span));
            outs.push(false);
        }
        if !vals.is_empty() {
            text.push(')');
        }
        pieces.push(text);
        self.emit(Op::Asm { pieces, outs }, ops, span);
        result.unwrap_or(Val::Unit)
    }

    /// Lowers `.func` number `k` into `self.funcs_out`, with the state of the code around
    /// the call set aside.
    fn lower_func(&mut self, k: usize, span: Span) {
        self.func_state[k] = FuncState::Lowering;
        let v = self.v;
        let f = &v.funcs[k];
        let body = std::mem::take(&mut self.body);
        let loops = std::mem::take(&mut self.loops);
        let inlines = std::mem::take(&mut self.inlines);
        let facts = std::mem::take(&mut self.facts);
        let faults = self.faults.len();
        let mut params = Vec::new();
        for (i, id) in f.params.iter().enumerate() {
            let Ty::Scalar(s) = v.vars[*id].ty else {
                continue;
            };
            let name = format!("{}_param_{i}", f.name);
            let r = self.reg(s.reg_class());
            self.emit(
                Op::Mov(s),
                vec![Operand::Reg(r), Operand::Name(name.clone())],
                span,
            );
            self.vars.insert(*id, Store::Value(Val::Reg(r, s)));
            params.push((name, s));
        }
        let result = self.fresh_of(&f.ret);
        let end = self.label();
        self.inlines.push(InlineCx {
            end,
            result: result.clone(),
        });
        let value = self.block(&f.body);
        self.inlines.pop();
        if let Some(dst) = &result {
            if !matches!(value, Val::Unit) {
                self.assign_val(dst, &value, span);
            }
        }
        self.body.push(Item::Label(end));
        let ret = match result {
            Some(Val::Reg(r, s)) => {
                let name = format!("{}_result", f.name);
                self.emit(
                    Op::Mov(s),
                    vec![Operand::Name(name.clone()), Operand::Reg(r)],
                    span,
                );
                Some((name, s))
            }
            _ => None,
        };
        self.emit(Op::Ret, vec![], span);
        if self.faults.len() > faults {
            self.error(
                span,
                format!(
                    "`#[noinline]` helper `{}` holds a checked access that can fault; only kernels and inlined helpers may",
                    f.name
                ),
            );
        }
        let mut fbody = std::mem::replace(&mut self.body, body);
        super::opt::optimize(&mut fbody);
        super::drop_unused_labels(&mut fbody);
        self.funcs_out.push(ptx::DevFunc {
            name: f.name.clone(),
            params,
            ret,
            body: fbody,
        });
        self.loops = loops;
        self.inlines = inlines;
        self.facts = facts;
        self.func_state[k] = FuncState::Done;
    }
}

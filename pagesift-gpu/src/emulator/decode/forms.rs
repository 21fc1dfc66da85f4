//! The rule check for instruction forms: whether the decoder accepts a form of the instruction
//! table, tried on the example instructions its row's operand signature gives.

use super::inst::unknown_form;
use super::*;
use pagesift_ptx_isa as isa;

/// Whether the decoder has a rule for an instruction form (opcode with modifiers, e.g.
/// `ld.global.nc.v4.f32`): the form must be in the instruction table, and a module of its
/// example instructions (every operand, and without the optional ones) must decode.
pub(crate) fn check_form(form: &str) -> Result<(), String> {
    let row = isa::lookup(form).ok_or_else(|| unknown_form(form))?;
    let text = isa::example_module(&row.target(), row.ptx, &row.examples(form));
    let module = super::super::ptx::parse_module(&text)
        .map_err(|e| format!("line {}: {}", e.line, e.message))?;
    let source: Vec<&str> = text.lines().collect();
    for entry in &module.entries {
        decode_entry(entry, &HashMap::new(), 0, &[], &source).map_err(|e| e.message)?;
    }
    Ok(())
}

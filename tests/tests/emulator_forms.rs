//! Every instruction form of the instruction table (`pagesift-ptx-isa`) has an emulator rule,
//! the emitter's forms among them: a kernel the compiler emits never meets an instruction the
//! emulated device cannot run. A form outside the table is refused.

use pagesift_gpu::emulator::check_instruction_form;
use pagesift_ptx_isa as isa;

#[test]
fn every_emitter_form_has_an_emulator_rule() {
    let forms: Vec<&str> = isa::texts()
        .filter(|(_, row)| row.emitted)
        .map(|(t, _)| t)
        .collect();
    assert!(
        forms.len() > 600,
        "the form list is incomplete: {}",
        forms.len()
    );
    let missing: Vec<String> = forms
        .iter()
        .filter_map(|f| check_instruction_form(f).err().map(|e| format!("{f}: {e}")))
        .collect();
    println!(
        "{} of {} emitter forms have an emulator rule",
        forms.len() - missing.len(),
        forms.len()
    );
    assert!(
        missing.is_empty(),
        "forms without an emulator rule:\n{}",
        missing.join("\n")
    );
}

/// The forms only hand-written PTX uses (`brev`, `shf`, `redux`, `activemask`, ...) as well: the
/// table is the set of forms the emulated device runs.
#[test]
fn every_table_form_has_an_emulator_rule() {
    let missing: Vec<String> = isa::texts()
        .filter_map(|(f, _)| check_instruction_form(f).err().map(|e| format!("{f}: {e}")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} table forms without an emulator rule:\n{}",
        missing.len(),
        missing.join("\n")
    );
    for f in [
        "brev.b32",
        "shf.l.wrap.b32",
        "redux.sync.add.u32",
        "activemask.b32",
    ] {
        assert!(isa::lookup(f).is_some_and(|row| !row.emitted), "{f}");
    }
}

#[test]
fn forms_the_emulator_lacks_are_refused() {
    for f in [
        "mul24.lo.u32",
        "atom.global.max.f32",
        "ld.global.v8.f32",
        "add.rn.bogus.f32",
    ] {
        assert!(isa::lookup(f).is_none(), "{f} is in the table");
        assert!(check_instruction_form(f).is_err(), "{f} must have no rule");
    }
}

//! The `ptx_kernel!` compiler: a small Rust-syntax kernel language, compiled at `cargo build`
//! time to one PTX module per kernel variant plus a typed launch wrapper. Use it through
//! `pagesift_gpu::ptx_kernel!`. The pipeline, one folder per stage:
//!
//! `parse` (syn tokens -> kernel AST, helper libraries read) -> `check` (names, types, consts;
//! each variant checked with its values bound, helpers inlined) -> `lower` (virtual-register
//! PTX IR, bounds checks and their elision, IR passes) -> `ptx` (text, from the instruction
//! table) -> `wrap` (the generated Rust: variants, typed `launch`, structs, consts).
//!
//! The language reference follows (`REFERENCE.md`).
#![doc = include_str!("../REFERENCE.md")]

mod check;
mod ctxt;
#[cfg(test)]
mod feature_tests;
mod lower;
mod parse;
mod ptx;
mod types;
mod wrap;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

/// Compiles kernels written in the kernel language into PTX text and typed launch wrappers.
/// The language is described in the crate documentation.
#[proc_macro]
pub fn ptx_kernel(input: TokenStream) -> TokenStream {
    expand(input.into()).into()
}

/// parse -> check -> lower -> emit -> wrap; all errors of the invocation are reported together.
fn expand(tokens: TokenStream2) -> TokenStream2 {
    let cx = ctxt::Ctxt::new();
    let program = parse::parse_program(&cx, tokens);
    let mut checked = check::check_program(&cx, &program);
    let mut out = wrap::items(&program, &checked.items);
    for kernel in &mut checked.kernels {
        for variant in &mut kernel.variants {
            lower::settle_target(variant);
        }
    }
    for kernel in &checked.kernels {
        let mut emitted = Vec::new();
        for variant in &kernel.variants {
            let Some(func) = lower::lower_variant(&cx, variant) else {
                continue;
            };
            match ptx::emit_module(&func) {
                Ok(ptx) => emitted.push(wrap::Emitted { variant, func, ptx }),
                Err(e) => cx.error(kernel.sig.item.name.span(), format!("internal: {e}")),
            }
        }
        if !kernel.complete || emitted.len() != kernel.variants.len() {
            emitted.clear();
        }
        out.extend(wrap::kernel_module(&kernel.sig, &emitted));
    }
    out.extend(ctxt::to_compile_errors(&cx.finish()));
    out
}

/// Compiles an invocation's tokens to (entry, PTX) pairs, or the error messages.
#[cfg(test)]
pub(crate) fn compile_for_test(tokens: TokenStream2) -> Result<Vec<(String, String)>, Vec<String>> {
    let cx = ctxt::Ctxt::new();
    let program = parse::parse_program(&cx, tokens);
    let mut checked = check::check_program(&cx, &program);
    let mut out = Vec::new();
    for kernel in &mut checked.kernels {
        for variant in &mut kernel.variants {
            lower::settle_target(variant);
        }
    }
    for kernel in &checked.kernels {
        for variant in &kernel.variants {
            if let Some(func) = lower::lower_variant(&cx, variant) {
                match ptx::emit_module(&func) {
                    Ok(text) => out.push((func.entry.clone(), text)),
                    Err(e) => cx.error(proc_macro2::Span::call_site(), e),
                }
            }
        }
    }
    let errors = cx.finish();
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.iter().map(|e| e.to_string()).collect())
    }
}

/// NVIDIA's `ptxas` for the unit tests: `PAGESIFT_PTXAS`, else `target/ptxas/ptxas`.
#[cfg(test)]
pub(crate) fn test_ptxas() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("PAGESIFT_PTXAS") {
        return Some(p.into());
    }
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas/ptxas");
    local.is_file().then_some(local)
}

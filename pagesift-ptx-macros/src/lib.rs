//! The `ptx_kernel!` compiler. (Language reference: see below; filled in with the full text.)

mod check;
mod ctxt;
mod lower;
mod parse;
mod ptx;
mod types;
mod wrap;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

/// Compiles kernels written in the kernel language into PTX text and typed launch wrappers.
#[proc_macro]
pub fn ptx_kernel(input: TokenStream) -> TokenStream {
    expand(input.into()).into()
}

/// The list of every instruction form the PTX emitter can produce (for the emulator's tests).
#[doc(hidden)]
#[proc_macro]
pub fn __instruction_forms(_input: TokenStream) -> TokenStream {
    wrap::instruction_forms().into()
}

/// parse -> check -> lower -> emit -> wrap; all errors of the invocation are reported together.
fn expand(tokens: TokenStream2) -> TokenStream2 {
    let cx = ctxt::Ctxt::new();
    let program = parse::parse_program(&cx, tokens);
    let checked = check::check_program(&cx, &program);
    let mut out = TokenStream2::new();
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
    let checked = check::check_program(&cx, &program);
    let mut out = Vec::new();
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

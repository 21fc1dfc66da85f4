//! The `ptx_kernel!` compiler.

use proc_macro::TokenStream;

/// Compiles kernels written in the kernel language into PTX text and typed launch wrappers.
#[proc_macro]
pub fn ptx_kernel(input: TokenStream) -> TokenStream {
    let _ = input;
    TokenStream::new()
}

//! A context that gathers every error of an invocation, so that all are reported at once.

use proc_macro2::{Span, TokenStream};
use std::cell::RefCell;
use std::fmt::Display;

/// Collects `syn::Error`s; [`Ctxt::finish`] hands them back.
#[derive(Default)]
pub struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    /// An empty context.
    pub fn new() -> Ctxt {
        Ctxt::default()
    }

    /// Records an error at `span`.
    pub fn error(&self, span: Span, msg: impl Display) {
        self.errors.borrow_mut().push(syn::Error::new(span, msg));
    }

    /// Records an error produced by syn.
    pub fn syn_error(&self, err: syn::Error) {
        self.errors.borrow_mut().push(err);
    }

    /// How many errors were recorded.
    pub fn count(&self) -> usize {
        self.errors.borrow().len()
    }

    /// The recorded errors as `compile_error!` invocations (deduplicated by message and span).
    pub fn finish(self) -> Vec<syn::Error> {
        let mut out: Vec<syn::Error> = Vec::new();
        for e in self.errors.into_inner() {
            let key = (e.to_string(), format!("{:?}", e.span()));
            if !out
                .iter()
                .any(|o| (o.to_string(), format!("{:?}", o.span())) == key)
            {
                out.push(e);
            }
        }
        out
    }
}

/// The errors as tokens.
pub fn to_compile_errors(errors: &[syn::Error]) -> TokenStream {
    errors.iter().map(syn::Error::to_compile_error).collect()
}

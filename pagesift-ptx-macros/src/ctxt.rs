//! A context that gathers every error of an invocation, so that all are reported at once, and
//! the source ranges errors point at.

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use std::cell::RefCell;
use std::fmt::Display;

/// A source range: the spans of its first and last tokens (so that an error underlines a whole
/// expression on stable Rust, where spans cannot be joined).
#[derive(Clone, Copy, Debug)]
pub struct Sp {
    pub start: Span,
    pub end: Span,
}

impl Sp {
    /// The range of the macro invocation itself.
    pub fn call_site() -> Sp {
        Span::call_site().into()
    }

    /// The range of a syntax node.
    pub fn of(node: &impl quote::ToTokens) -> Sp {
        let mut tokens = node.to_token_stream().into_iter();
        let Some(first) = tokens.next() else {
            return Sp::call_site();
        };
        let start = first.span();
        let end = tokens.last().map_or(start, |t| t.span());
        Sp { start, end }
    }
}

impl From<Span> for Sp {
    fn from(s: Span) -> Sp {
        Sp { start: s, end: s }
    }
}

/// Collects `syn::Error`s; [`Ctxt::finish`] hands them back, and must be called: dropping a
/// context with unreported errors is a bug of the compiler (as serde's `Ctxt`).
#[derive(Default)]
pub struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
    finished: std::cell::Cell<bool>,
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !self.finished.get() && !self.errors.borrow().is_empty() && !std::thread::panicking() {
            panic!("ptx_kernel!: errors were recorded but never reported");
        }
    }
}

impl Ctxt {
    /// An empty context.
    pub fn new() -> Ctxt {
        Ctxt::default()
    }

    /// Records an error over `range`.
    pub fn error(&self, range: impl Into<Sp>, msg: impl Display) {
        let sp = range.into();
        let mut first = Punct::new('<', Spacing::Alone);
        first.set_span(sp.start);
        let mut last = Punct::new('>', Spacing::Alone);
        last.set_span(sp.end);
        let tokens: TokenStream = [TokenTree::Punct(first), TokenTree::Punct(last)]
            .into_iter()
            .collect();
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(tokens, msg));
    }

    /// Records an error produced by syn.
    pub fn syn_error(&self, err: syn::Error) {
        self.errors.borrow_mut().push(err);
    }

    /// How many errors were recorded.
    pub fn count(&self) -> usize {
        self.errors.borrow().len()
    }

    /// The recorded errors, deduplicated by message and position (variants of one kernel
    /// report the same error once).
    pub fn finish(self) -> Vec<syn::Error> {
        self.finished.set(true);
        let mut out: Vec<syn::Error> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for e in self.errors.take() {
            let key = format!("{e} @ {:?}", e.span());
            if !seen.contains(&key) {
                seen.push(key);
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

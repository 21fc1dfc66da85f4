//! The generated Rust: per kernel a module with `VARIANTS` (one `KernelVariant` per variant,
//! with its PTX) and a typed `launch`. Generated code names the runtime only by absolute path.

use crate::check::{Items, KernelSig, Variant};
use crate::parse::{ConstTy, Program};
use crate::ptx::Function;
use crate::types::{ConstVal, Scalar, Ty};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// One emitted variant: the checked form, the PTX function and its text.
pub struct Emitted<'a> {
    pub variant: &'a Variant,
    pub func: Function,
    pub ptx: String,
}

fn scalar_tokens(s: Scalar) -> TokenStream {
    match s {
        Scalar::F16 => quote!(::pagesift_gpu::__private::f16),
        Scalar::Bf16 => quote!(::pagesift_gpu::__private::bf16),
        other => {
            let id = format_ident!("{}", other.name());
            quote!(#id)
        }
    }
}

fn const_arg_name(name: &syn::Ident) -> syn::Ident {
    syn::Ident::new(&name.to_string().to_lowercase(), name.span())
}

/// The `Dtype` variant naming a scalar type on the host.
fn dtype_tokens(s: Scalar) -> TokenStream {
    let id = format_ident!(
        "{}",
        match s {
            Scalar::F16 => "F16",
            Scalar::Bf16 => "Bf16",
            Scalar::F32 => "F32",
            Scalar::F64 => "F64",
            Scalar::I8 => "I8",
            Scalar::I16 => "I16",
            Scalar::I32 => "I32",
            Scalar::I64 => "I64",
            Scalar::U8 => "U8",
            Scalar::U16 => "U16",
            Scalar::U32 => "U32",
            _ => "U64",
        }
    );
    quote!(::pagesift_gpu::__private::Dtype::#id)
}

/// The trait of a kernel's type parameter `T`: implemented for the types its `#[variants]`
/// list names, so that a launch with any other element type does not compile.
fn type_trait(t: &syn::Ident) -> syn::Ident {
    format_ident!("Elem{}", t)
}

/// The parameter structs, consts and library files of an invocation.
pub fn items(prog: &Program, items: &Items) -> TokenStream {
    let p = quote!(::pagesift_gpu::__private);
    let mut out = TokenStream::new();
    for f in &prog.files {
        let path = f.display().to_string();
        out.extend(quote!(
            const _: &[u8] = ::core::include_bytes!(#path);
        ));
    }
    for imp in &prog.imports {
        let item = &imp.item;
        out.extend(quote!(#item));
    }
    for (st, def) in prog.structs.iter().zip(&items.structs) {
        let name = &st.name;
        if let Some(imp) = prog.imports.iter().find(|i| i.name == *name) {
            out.extend(imported_layout(
                st,
                def,
                syn::spanned::Spanned::span(&imp.item),
            ));
            continue;
        }
        let vis = &st.vis;
        let attrs = &st.attrs;
        let fields = st.fields.iter().map(|(n, s, a, v)| {
            let t = scalar_tokens(*s);
            quote!(#(#a)* #v #n: #t)
        });
        let size = def.size as usize;
        let writes = st
            .fields
            .iter()
            .zip(&def.fields)
            .map(|((n, s, _, _), (_, _, off))| {
                let off = *off as usize;
                let bytes = match s {
                    Scalar::Bool => quote!([self.#n as u8]),
                    _ => quote!(self.#n.to_le_bytes()),
                };
                quote! {
                    let b = #bytes;
                    out[#off..#off + b.len()].copy_from_slice(&b);
                }
            });
        out.extend(quote! {
            #(#attrs)*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default, PartialEq)]
            #vis struct #name {
                #(#fields),*
            }

            impl #p::ParamStruct for #name {
                fn kernel_arg(&self) -> #p::KernelArg {
                    let mut out = [0u8; #size];
                    #(#writes)*
                    #p::KernelArg::blob(&out)
                }
            }
        });
    }
    for c in prog.consts.iter().filter(|c| c.module.is_none()) {
        let Some((_, ty, v)) = items.consts.iter().find(|(n, _, _)| c.name == n.as_str()) else {
            continue;
        };
        let id = &c.name;
        let vis = &c.vis;
        let attrs = &c.attrs;
        let t = scalar_tokens(*ty);
        let lit: TokenStream = match (ty, v) {
            (Scalar::Bool, ConstVal::Bool(b)) => quote!(#b),
            (Scalar::F32, ConstVal::Float(f)) => {
                let l = proc_macro2::Literal::f32_suffixed(*f as f32);
                quote!(#l)
            }
            (Scalar::F64, ConstVal::Float(f)) => {
                let l = proc_macro2::Literal::f64_suffixed(*f);
                quote!(#l)
            }
            (_, ConstVal::Int(i)) => {
                let l = syn::LitInt::new(&format!("{i}{}", ty.name()), Span::call_site());
                quote!(#l)
            }
            _ => continue,
        };
        out.extend(quote!(#(#attrs)* #vis const #id: #t = #lit;));
    }
    out
}

/// Compile-time checks that an imported host type (`use path::Name;`) has the layout the
/// kernels read: its size, each field's offset and type. A mismatch (the other crate built
/// the struct from another version of the library) fails the build at the `use`.
fn imported_layout(
    st: &crate::parse::StructItem,
    def: &crate::types::StructDef,
    at: Span,
) -> TokenStream {
    let name = &st.name;
    let size = def.size as usize;
    let size_msg = format!("`{name}`: the host type's size differs from the library's struct");
    let offsets = st
        .fields
        .iter()
        .zip(&def.fields)
        .map(|((n, _, _, _), (_, _, off))| {
            let off = *off as usize;
            let msg =
                format!("`{name}::{n}`: the host type's offset differs from the library's struct");
            quote_spanned!(at=> ::core::assert!(::core::mem::offset_of!(#name, #n) == #off, #msg);)
        });
    let types = st.fields.iter().map(|(n, s, _, _)| {
        let t = scalar_tokens(*s);
        quote_spanned!(at=> let _: #t = p.#n;)
    });
    let size_check = (!st.fields.is_empty())
        .then(|| quote_spanned!(at=> ::core::assert!(::core::mem::size_of::<#name>() == #size, #size_msg);));
    quote! {
        const _: () = {
            #size_check
            #(#offsets)*
        };
        const _: fn(&#name) = |p: &#name| {
            #(#types)*
        };
    }
}

/// The module of one kernel. With `variants` empty (the kernel has errors) the module still
/// declares `VARIANTS` and a `launch` of the right signature, so callers see only the errors.
pub fn kernel_module(sig: &KernelSig<'_>, variants: &[Emitted<'_>]) -> TokenStream {
    let f = sig.item;
    let name = &f.name;
    let name_str = name.to_string();
    let docs = &f.docs;
    let p = quote!(::pagesift_gpu::__private);

    // The type parameters: a trait each, implemented for its listed types.
    let mut type_traits = Vec::new();
    let mut type_generics = Vec::new();
    for (k, (t, vals)) in sig.type_values.iter().enumerate() {
        if let Some(Some(bound)) = f.type_bounds.get(k) {
            // The bound as written (a sealed trait of the caller's, implemented for exactly
            // the listed types; another type finds no variant at run time).
            type_generics.push(quote!(#t: #bound + #p::DeviceRepr));
            continue;
        }
        let tr = type_trait(t);
        let tys = vals.iter().map(|s| scalar_tokens(*s));
        let names: Vec<&str> = vals.iter().map(|s| s.name()).collect();
        let doc = format!(
            "The element types `{name_str}` is compiled for as `{t}`: {}.",
            names.join(", ")
        );
        type_traits.push(quote! {
            #[doc = #doc]
            pub trait #tr: #p::DeviceRepr {}
            #(impl #tr for #tys {})*
        });
        type_generics.push(quote!(#t: #tr));
    }
    let generics = if type_generics.is_empty() {
        quote!()
    } else {
        quote!(<#(#type_generics),*>)
    };
    let turbofish = if sig.type_values.is_empty() {
        quote!()
    } else {
        let ts = sig.type_values.iter().map(|(t, _)| t);
        quote!(::<#(#ts),*>)
    };

    // The launch signature: consts, then parameters.
    let mut const_args = Vec::new();
    let mut const_names = Vec::new();
    let mut const_fields = Vec::new();
    // The hidden first PTX parameter: the device's fault record.
    let mut kernel_args = vec![quote!(#p::fault_arg(stream)?)];
    let mut slice_lets = Vec::new();
    let mut accesses = Vec::new();
    let mut param_args = Vec::new();
    let mut param_meta = Vec::new();
    let mut param_names = Vec::new();
    for c in &f.consts {
        let arg = const_arg_name(&c.name);
        let ty = match &c.ty {
            ConstTy::Int(s) => scalar_tokens(*s),
            ConstTy::Bool => quote!(bool),
            ConstTy::Enum(path) => quote!(#path),
            ConstTy::Type => continue,
        };
        const_args.push(quote!(#arg: #ty));
        let field_doc = format!("The const parameter `{}`.", c.name);
        const_fields.push(quote!(#[doc = #field_doc] pub #arg: #ty));
        const_names.push(arg);
    }
    for (pi, ((param, ty), generic)) in f
        .params
        .iter()
        .zip(&sig.params)
        .zip(&sig.generic)
        .enumerate()
    {
        // A parameter named like a wrapper argument is an error already reported; rename it
        // here so the wrapper adds no follow-up errors.
        let arg = match param.name.to_string().as_str() {
            "stream" | "cfg" => format_ident!("{}_", param.name),
            _ => param.name.clone(),
        };
        let arg = &arg;
        let elem_tokens = |s: Scalar| match generic {
            Some(t) => quote!(#t),
            None => scalar_tokens(s),
        };
        // A slice is two PTX parameters, its address and its length in elements.
        let slice = format_ident!("__slice_{}", arg);
        let mut is_slice = true;
        let (arg_ty, text) = match ty {
            Some(Ty::Slice {
                elem,
                mutable: false,
            }) => {
                let e = elem_tokens(*elem);
                slice_lets.push(quote!(let #slice = #p::arg_read(stream, #arg)?;));
                (quote!(&impl #p::DeviceRead<#e>), format!("&[{elem}]"))
            }
            Some(Ty::Slice {
                elem,
                mutable: true,
            }) => {
                let e = elem_tokens(*elem);
                slice_lets.push(quote!(let #slice = #p::arg_write(stream, #arg)?;));
                (
                    quote!(&mut impl #p::DeviceWrite<#e>),
                    format!("&mut [{elem}]"),
                )
            }
            Some(Ty::Option(inner)) => match &**inner {
                Ty::Slice {
                    elem,
                    mutable: false,
                } => {
                    let e = elem_tokens(*elem);
                    slice_lets.push(quote!(let #slice = #p::arg_read_opt(stream, #arg)?;));
                    (
                        quote!(::core::option::Option<&dyn #p::DeviceRead<#e>>),
                        format!("Option<&[{elem}]>"),
                    )
                }
                Ty::Slice {
                    elem,
                    mutable: true,
                } => {
                    let e = elem_tokens(*elem);
                    slice_lets.push(quote!(let #slice = #p::arg_write_opt(stream, #arg)?;));
                    (
                        quote!(::core::option::Option<&mut dyn #p::DeviceWrite<#e>>),
                        format!("Option<&mut [{elem}]>"),
                    )
                }
                _ => {
                    is_slice = false;
                    kernel_args.push(quote!(match #arg {}));
                    (quote!(::core::convert::Infallible), "?".to_string())
                }
            },
            Some(Ty::Scalar(s)) => {
                is_slice = false;
                kernel_args.push(quote!(#p::KernelArg::from(#arg)));
                (scalar_tokens(*s), s.name().to_string())
            }
            Some(Ty::TensorMap { elem, write, .. }) => {
                is_slice = false;
                let e = elem_tokens(*elem);
                // The box each variant reads (by entry name).
                let arms = variants.iter().map(|v| {
                    let entry = &v.variant.entry;
                    let b = match v.variant.params.get(pi).map(|id| &v.variant.vars[*id].ty) {
                        Some(Ty::TensorMap { boxes, .. }) => *boxes,
                        _ => [0; 3],
                    };
                    let [b0, b1, b2] = b;
                    quote!(#entry => [#b0, #b1, #b2],)
                });
                let tm = format_ident!("__tmap_{}", arg);
                let pname = arg.to_string();
                let boxes = quote!(match __variant.entry { #(#arms)* _ => [0, 0, 0] });
                kernel_args.push(quote!(#tm.arg));
                accesses.push(quote!(#tm.access));
                if *write {
                    slice_lets.push(quote! {
                        let #tm = #p::arg_tensor_map_mut(stream, #arg, #boxes, #pname)?;
                    });
                    (
                        quote!(&#p::TensorMapMut<'_, #e>),
                        format!("TensorMapMut<{elem}>"),
                    )
                } else {
                    slice_lets.push(quote! {
                        let #tm = #p::arg_tensor_map(stream, #arg, #boxes, #pname)?;
                    });
                    (quote!(&#p::TensorMap<'_, #e>), format!("TensorMap<{elem}>"))
                }
            }
            Some(Ty::Struct(def)) => {
                is_slice = false;
                let sname = syn::Ident::new(&def.name, Span::call_site());
                kernel_args.push(quote!(#p::ParamStruct::kernel_arg(&#arg)));
                (quote!(#sname), def.name.clone())
            }
            _ => {
                is_slice = false;
                kernel_args.push(quote!(match #arg {}));
                (quote!(::core::convert::Infallible), "?".to_string())
            }
        };
        if is_slice {
            kernel_args.push(quote!(#slice.ptr));
            kernel_args.push(quote!(#slice.len));
            accesses.push(quote!(#slice.access));
        }
        param_args.push(quote!(#arg: #arg_ty));
        param_names.push(arg.clone());
        let pname = arg.to_string();
        param_meta.push(quote!((#pname, #text)));
    }

    let entries: Vec<TokenStream> = variants
        .iter()
        .map(|e| {
            let v = e.variant;
            let consts = v.consts.iter().map(|(n, val)| {
                let val = val.to_string();
                quote!((#n, #val))
            });
            let entry = &v.entry;
            let target = &v.target.name;
            let (maj, min) = e.func.ptx_version;
            let [bx, by, bz] = v.block;
            let shared = v.static_shared_bytes();
            let dynamic = v.dyn_shared.is_some() || !v.dyn_views.is_empty();
            let ptx = &e.ptx;
            let params = &param_meta;
            let ptx_params = e.func.params.len() as u32;
            let shared_names: Vec<String> = v
                .shared
                .iter()
                .map(|(id, _, _)| v.vars[*id].name.clone())
                .chain(v.dyn_shared.iter().map(|(id, _)| v.vars[*id].name.clone()))
                .chain(v.dyn_views.iter().map(|(id, ..)| v.vars[*id].name.clone()))
                .collect();
            quote! {
                #p::KernelVariant {
                    kernel: #name_str,
                    entry: #entry,
                    consts: &[#(#consts),*],
                    target: #target,
                    ptx_version: (#maj, #min),
                    block: [#bx, #by, #bz],
                    static_shared_bytes: #shared,
                    dynamic_shared: #dynamic,
                    params: &[#(#params),*],
                    ptx_params: #ptx_params,
                    shared: &[#(#shared_names),*],
                    ptx: #ptx,
                }
            }
        })
        .collect();

    // Variant selection from the const arguments and the element types.
    let conds: Vec<TokenStream> = variants
        .iter()
        .map(|e| {
            let parts: Vec<TokenStream> = f
                .consts
                .iter()
                .map(|c| {
                    let arg = const_arg_name(&c.name);
                    let val = e
                        .variant
                        .consts
                        .iter()
                        .find(|(n, _)| c.name == n.as_str())
                        .map(|(_, v)| v);
                    match (&c.ty, val) {
                        (ConstTy::Enum(path), Some(ConstVal::Enum(variant))) => {
                            let vid = syn::Ident::new(variant, Span::call_site());
                            quote!(::core::matches!(#arg, #path::#vid))
                        }
                        (ConstTy::Type, Some(ConstVal::Enum(t))) => {
                            let t_id = &c.name;
                            match Scalar::from_name(t) {
                                Some(s) => {
                                    let d = dtype_tokens(s);
                                    quote!(::core::matches!(<#t_id as #p::DeviceRepr>::DTYPE, #d))
                                }
                                None => quote!(false),
                            }
                        }
                        (ConstTy::Int(s), Some(ConstVal::Int(i))) => {
                            let lit =
                                syn::LitInt::new(&format!("{i}{}", s.name()), Span::call_site());
                            quote!(#arg == #lit)
                        }
                        (ConstTy::Bool, Some(ConstVal::Bool(b))) => quote!(#arg == #b),
                        _ => quote!(false),
                    }
                })
                .collect();
            if parts.is_empty() {
                quote!(true)
            } else {
                quote!(#(#parts)&&*)
            }
        })
        .collect();
    let describe: Vec<TokenStream> = f
        .consts
        .iter()
        .map(|c| {
            let arg = const_arg_name(&c.name);
            let cname = c.name.to_string();
            match &c.ty {
                ConstTy::Enum(path) => {
                    let mut names: Vec<String> = variants
                        .iter()
                        .filter_map(|e| e.variant.consts.iter().find(|(n, _)| c.name == n.as_str()).map(|(_, v)| v.to_string()))
                        .collect();
                    names.sort();
                    names.dedup();
                    let arms = names.iter().map(|n| {
                        let vid = syn::Ident::new(n, Span::call_site());
                        quote!(if ::core::matches!(#arg, #path::#vid) { #n } else)
                    });
                    quote!(::std::format!("{}={}", #cname, #(#arms)* { "(a value with no compiled variant)" }))
                }
                ConstTy::Type => {
                    let t_id = &c.name;
                    quote!(::std::format!("{}={}", #cname, <#t_id as #p::DeviceRepr>::DTYPE.name()))
                }
                _ => quote!(::std::format!("{}={}", #cname, #arg)),
            }
        })
        .collect();
    let indices = 0..variants.len();
    let n_args = kernel_args.len();
    let doc_launch = format!(
        "Launches `{name_str}` on `stream` with grid and dynamic shared memory from `cfg`; the block shape is the variant's (`VARIANTS[i].block`). Fails with the runtime's error when the const arguments select no compiled variant, a buffer belongs to another device, or the launch fails."
    );
    let doc_variants = format!("Every compiled variant of `{name_str}`, with its PTX.");
    let doc_variant = format!(
        "The variant of `{name_str}` that `launch` runs for these const arguments (and element types), if it was compiled."
    );
    // A kernel with `unsafe` code (in any variant, or in a helper it inlines) gets an
    // `unsafe fn launch`: the compiler cannot check its unchecked accesses.
    let is_unsafe = variants.iter().any(|e| e.variant.uses_unsafe);
    let unsafety = if is_unsafe { quote!(unsafe) } else { quote!() };
    let doc_safety = if is_unsafe {
        quote! {
            #[doc = ""]
            #[doc = "# Safety"]
            #[doc = ""]
            #[doc = "The kernel has `unsafe` code: every unchecked access it makes (`get_unchecked`, `set_unchecked`, the `_unchecked` vector forms, memory `asm!`) must lie inside the buffers passed here (their lengths as given), for every grid and argument this call passes. The bounds-checked accesses need nothing from the caller."]
        }
    } else {
        quote! {
            #[doc = ""]
            #[doc = "Every access of the kernel to a slice or shared array is bounds-checked: one out of bounds is skipped (a load gives 0) and the launch's first such access is reported as `Error::KernelFault` where the host next waits for the stream (its `synchronize`, the device's, a host read of a buffer it wrote)."]
        }
    };
    // `launch_with`: the const arguments by name, in a struct (none without consts).
    let launch_with = if const_fields.is_empty() {
        quote!()
    } else {
        let doc_consts = format!(
            "The const arguments of `{name_str}` by name, for `launch_with` (the const parameters' names in lower case)."
        );
        let doc_with = "`launch` with the const arguments by name: `launch_with(stream, cfg, Consts { .. }, params..)`, so that two of one type cannot be swapped unnoticed.";
        let call = quote! {
            launch #turbofish(stream, cfg, #(#const_names,)* #(#param_names),*)
        };
        let call = if is_unsafe {
            quote!(unsafe { #call })
        } else {
            call
        };
        quote! {
            #[doc = #doc_consts]
            pub struct Consts {
                #(#const_fields),*
            }

            #[doc = #doc_with]
            #doc_safety
            pub #unsafety fn launch_with #generics(
                stream: &#p::Stream,
                cfg: #p::LaunchConfig,
                __consts: Consts,
                #(#param_args),*
            ) -> #p::Result<()> {
                let Consts { #(#const_names),* } = __consts;
                #call
            }
        }
    };
    quote! {
        #(#docs)*
        #[allow(non_snake_case, unused_imports, clippy::too_many_arguments)]
        pub mod #name {
            use super::*;

            #(#type_traits)*

            #[doc = #doc_variants]
            pub static VARIANTS: &[#p::KernelVariant] = &[#(#entries),*];

            #[doc = #doc_variant]
            #[allow(unused_variables, clippy::needless_return)]
            pub fn variant #generics(#(#const_args),*) -> ::core::option::Option<&'static #p::KernelVariant> {
                #( if #conds { return ::core::option::Option::Some(&VARIANTS[#indices]); } )*
                ::core::option::Option::None
            }

            #[doc = #doc_launch]
            #doc_safety
            #[allow(unused_variables, unreachable_code, unsafe_code, clippy::needless_return)]
            pub #unsafety fn launch #generics(
                stream: &#p::Stream,
                cfg: #p::LaunchConfig,
                #(#const_args,)*
                #(#param_args),*
            ) -> #p::Result<()> {
                let ::core::option::Option::Some(__variant) = variant #turbofish(#(#const_names),*) else {
                    let __consts: ::std::vec::Vec<::std::string::String> = ::std::vec![#(#describe),*];
                    return ::core::result::Result::Err(#p::variant_not_compiled(#name_str, __consts.join(", ")));
                };
                #(#slice_lets)*
                let __args: [#p::KernelArg; #n_args] = [#(#kernel_args),*];
                let __accesses = [#(#accesses),*];
                // SAFETY: the arguments are the variant's parameters in order (the fault
                // record, each slice's address and length, the scalars) and `__accesses`
                // names every slice; the checked kernel stays inside them, and an unchecked one
                // is this function's caller's contract.
                unsafe { #p::launch(stream, __variant, &cfg, &__args, &__accesses) }
            }

            #launch_with
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    fn expand(tokens: proc_macro2::TokenStream) -> String {
        crate::expand(tokens).to_string()
    }

    #[test]
    fn the_wrapper_selects_variants_and_passes_typed_arguments() {
        let out = expand(quote! {
            #[variants(ACT in [Identity, Relu], BM in [64])]
            #[launch(block = 128)]
            pub fn k<const ACT: crate::Act, const BM: u32>(x: &[f16], y: &mut [f32], n: u32) {
                let i = thread_idx_x();
                if i < n { y[i] = x[i] as f32; }
            }
        });
        assert!(out.contains("pub mod k"), "{out}");
        assert!(
            out.contains("VARIANTS : & [:: pagesift_gpu :: __private :: KernelVariant]"),
            "{out}"
        );
        assert!(out.contains("act : crate :: Act , bm : u32"), "{out}");
        assert!(out.contains("x : & impl :: pagesift_gpu :: __private :: DeviceRead < :: pagesift_gpu :: __private :: f16 >"), "{out}");
        assert!(
            out.contains("y : & mut impl :: pagesift_gpu :: __private :: DeviceWrite < f32 >"),
            "{out}"
        );
        assert!(
            out.contains(":: core :: matches ! (act , crate :: Act :: Relu) && bm == 64u32"),
            "{out}"
        );
        assert!(
            out.contains(
                "let __slice_y = :: pagesift_gpu :: __private :: arg_write (stream , y) ?"
            ),
            "{out}"
        );
        // The fault record first, then each slice as address and length.
        assert!(
            out.contains("[:: pagesift_gpu :: __private :: fault_arg (stream) ? , __slice_x . ptr , __slice_x . len , __slice_y . ptr , __slice_y . len , :: pagesift_gpu :: __private :: KernelArg :: from (n)]"),
            "{out}"
        );
        assert!(
            out.contains("let __accesses = [__slice_x . access , __slice_y . access]"),
            "{out}"
        );
        assert!(out.contains("ptx_params : 6u32"), "{out}");
        assert!(out.contains("pub fn launch"), "{out}");
        assert!(!out.contains("unsafe fn launch"), "{out}");
        assert!(
            out.contains(":: pagesift_gpu :: __private :: KernelArg :: from (n)"),
            "{out}"
        );
        assert!(out.contains("entry : \"k__ACT_Relu__BM_64\""), "{out}");
        assert!(
            out.contains(
                "params : & [(\"x\" , \"&[f16]\") , (\"y\" , \"&mut [f32]\") , (\"n\" , \"u32\")]"
            ),
            "{out}"
        );
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn on_errors_the_wrapper_is_declared_without_variants() {
        let out = expand(quote! {
            #[launch(block = 128)]
            pub fn k(y: &mut [f32]) { y[0] = nope; }
        });
        assert!(out.contains("compile_error"), "{out}");
        assert!(
            out.contains("VARIANTS : & [:: pagesift_gpu :: __private :: KernelVariant] = & []"),
            "{out}"
        );
        assert!(
            out.contains("pub fn launch (stream : & :: pagesift_gpu :: __private :: Stream"),
            "{out}"
        );
        assert!(out.contains("variant_not_compiled"), "{out}");
    }
}

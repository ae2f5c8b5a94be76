//! `#[mttl::main]` and `#[mttl::remote]`.
//!
//! Both are thin: they check the item, then expand to calls of plain
//! functions and types of `mttl` (`mttl::start`, `mttl::RemoteFn`), where the
//! behaviour lives and is documented.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::{parse_macro_input, spanned::Spanned, FnArg, ItemFn, Pat, ReturnType, Type};

/// Marks the program's entry point. Node 0 runs the function; every other
/// node serves messages until it returns; then every node exits with the
/// code it returns (`()` is 0; `i32` is the code; `Result<(), E>` prints the
/// error and exits 1). Expands to a `fn main` that calls `mttl::start`.
///
/// ```ignore
/// #[mttl::main]
/// fn main() {
///     println!("rank 0 of {}", mttl::size());
/// }
/// ```
#[proc_macro_attribute]
pub fn main(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(Span::call_site(), "#[mttl::main] takes no arguments")
            .to_compile_error()
            .into();
    }
    let f = parse_macro_input!(item as ItemFn);
    if let Err(e) = check_plain(&f, "#[mttl::main]") {
        return e.to_compile_error().into();
    }
    if !f.sig.inputs.is_empty() {
        return syn::Error::new(
            f.sig.inputs.span(),
            "#[mttl::main] takes a function without parameters",
        )
        .to_compile_error()
        .into();
    }
    let attrs = &f.attrs;
    let vis = &f.vis;
    let name = &f.sig.ident;
    let output = &f.sig.output;
    let body = &f.block;
    quote! {
        #(#attrs)*
        #vis fn #name() {
            fn __mttl_main() #output #body
            ::std::process::exit(::mttl::start(__mttl_main));
        }
    }
    .into()
}

/// Registers a free function so that other nodes can call it with
/// `mttl::invoke(node, f, (args...))`. Its arguments and result must
/// implement `mttl::Encode` and `mttl::Decode`. Its id is derived from its
/// full path and signature, so every rank of a job must run the same build.
///
/// The function's name becomes a constant, an `mttl::RemoteFunction`, that
/// calls like the function (`f(x)`) and can be passed to `invoke` and its
/// family: a function without the attribute cannot, which the compiler
/// reports at the call. Being a constant, the name cannot also be a local
/// variable's in its scope (`let f = ...` is read as a pattern).
///
/// A function whose first parameter is `&mut T` (with `T` plain data) is a
/// member function: it is invoked on a global object through a
/// `GlobalPtr<T>` and runs at the object's owner.
///
/// ```ignore
/// #[mttl::remote]
/// fn add(a: i32, b: i32) -> i32 { a + b }
/// ```
#[proc_macro_attribute]
pub fn remote(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(Span::call_site(), "#[mttl::remote] takes no arguments")
            .to_compile_error()
            .into();
    }
    let f = parse_macro_input!(item as ItemFn);
    match expand_remote(&f) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn check_plain(f: &ItemFn, what: &str) -> syn::Result<()> {
    let sig = &f.sig;
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            format!("{what} functions cannot be generic"),
        ));
    }
    if sig.asyncness.is_some() {
        return Err(syn::Error::new(
            sig.asyncness.span(),
            format!("{what} functions cannot be async: mttl threads block instead"),
        ));
    }
    if sig.variadic.is_some() {
        return Err(syn::Error::new(
            sig.variadic.span(),
            format!("{what} functions cannot be variadic"),
        ));
    }
    Ok(())
}

fn expand_remote(f: &ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    check_plain(f, "#[mttl::remote]")?;
    let name = &f.sig.ident;
    let mut idents = Vec::new();
    let mut types: Vec<Type> = Vec::new();
    let mut object: Option<Type> = None;
    for (i, arg) in f.sig.inputs.iter().enumerate() {
        let FnArg::Typed(pt) = arg else {
            return Err(syn::Error::new(
                arg.span(),
                "#[mttl::remote] goes on free functions, not methods",
            ));
        };
        if i == 0 {
            if let Type::Reference(r) = &*pt.ty {
                if r.mutability.is_some() {
                    object = Some((*r.elem).clone());
                    continue;
                }
                return Err(syn::Error::new(
                    pt.ty.span(),
                    "a member function's object must be `&mut T`; other parameters must be owned values",
                ));
            }
        }
        if let Type::Reference(_) = &*pt.ty {
            return Err(syn::Error::new(
                pt.ty.span(),
                "remote arguments travel by value: take an owned type",
            ));
        }
        let ident = match &*pt.pat {
            Pat::Ident(p) => p.ident.clone(),
            _ => format_ident!("__mttl_arg{}", i),
        };
        idents.push(ident);
        types.push((*pt.ty).clone());
    }
    let ret = match &f.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, t) => quote!(#t),
    };
    let params = types
        .iter()
        .map(|t| quote!(#t).to_string())
        .collect::<Vec<_>>();
    let signature = match &object {
        Some(o) => format!(
            "fn(&mut {}{}{}) -> {}",
            quote!(#o),
            if params.is_empty() { "" } else { ", " },
            params.join(", "),
            ret
        ),
        None => format!("fn({}) -> {}", params.join(", "), ret),
    };
    let fn_name = name.to_string();
    let decode = quote! {
        let (#(#idents,)*): (#(#types,)*) = ::mttl::__private::decode(__mttl_args)?;
    };
    let encode = quote! {
        let mut __mttl_out = ::std::vec::Vec::new();
        ::mttl::__private::encode_into(&__mttl_result, &mut __mttl_out)?;
        ::std::result::Result::Ok(__mttl_out)
    };
    let body_name = format_ident!("__mttl_body_{}", name);
    let marker = format_ident!("__mttl_remote_{}", name);
    let (trampoline, callable) = match &object {
        None => (
            quote! {
                fn __mttl_call(__mttl_args: &[u8]) -> ::std::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    #decode
                    let __mttl_result: #ret = #body_name(#(#idents),*);
                    #encode
                }
            },
            quote!(::mttl::__private::Callable::Free(__mttl_call)),
        ),
        Some(obj) => (
            quote! {
                fn __mttl_call(__mttl_object: &mut [u8], __mttl_args: &[u8]) -> ::std::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    let __mttl_object: &mut #obj = ::mttl::__private::object_mut::<#obj>(__mttl_object)?;
                    #decode
                    let __mttl_result: #ret = #body_name(__mttl_object, #(#idents),*);
                    #encode
                }
            },
            quote!(::mttl::__private::Callable::Method { call: __mttl_call, object_size: ::std::mem::size_of::<#obj>() }),
        ),
    };
    let pointer = match &object {
        Some(o) => quote!(fn(&mut #o, #(#types),*) -> #ret),
        None => quote!(fn(#(#types),*) -> #ret),
    };
    // The function's name becomes a constant that calls like the function
    // (it derefs to a pointer to the body) and whose type, unlike a function
    // item's, implements `mttl::Remote`: only marked functions can be
    // invoked, which the compiler checks.
    let vis = &f.vis;
    let (shown, kept): (Vec<_>, Vec<_>) = f
        .attrs
        .iter()
        .partition(|a| a.path().is_ident("doc") || a.path().is_ident("cfg"));
    let cfgs: Vec<_> = shown.iter().filter(|a| a.path().is_ident("cfg")).collect();
    let mut body = f.clone();
    body.sig.ident = body_name.clone();
    body.vis = syn::Visibility::Inherited;
    body.attrs = kept.into_iter().cloned().collect();
    body.attrs.extend(cfgs.iter().map(|a| (**a).clone()));
    Ok(quote! {
        #(#shown)*
        #[allow(non_upper_case_globals)]
        #vis const #name: ::mttl::RemoteFunction<#marker, #pointer> =
            ::mttl::RemoteFunction::__new(#body_name);
        #(#cfgs)*
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        #vis struct #marker;
        #[doc(hidden)]
        #body
        #(#cfgs)*
        const _: () = {
            fn __mttl_type_id() -> ::std::any::TypeId {
                ::mttl::__private::type_id_of(&#name)
            }
            #trampoline
            ::mttl::__private::inventory::submit! {
                ::mttl::__private::RemoteFn {
                    name: ::std::concat!(::std::module_path!(), "::", #fn_name),
                    signature: #signature,
                    id: ::mttl::__private::fnv1a(&[::std::module_path!(), "::", #fn_name, #signature]),
                    type_id: __mttl_type_id,
                    callable: #callable,
                }
            }
        };
    })
}

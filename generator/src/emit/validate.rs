//! Tokens that enforce the validation keywords the IR carries ([`Checks`]): an
//! `impl idemgen_runtime::codegen::Validate` for every struct and union with something
//! to check, and per operation the `validate` method of its `Operation` impl, which the request
//! pipeline calls so that violations are a 400 problem before authorization and before any
//! idempotency claim. The messages and the comparisons live in the runtime's `check_*` helpers;
//! this module only decides which helper runs on which value.
//!
//! Convention inside the generated checks: `value` is a reference to the value being checked and
//! `path` a `&FieldPath` naming it; nested values shadow both in their own block. A `pattern` is
//! a `static cg::Pattern` in a block of its own, compiled on first use and kept.

use std::collections::BTreeMap;

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use crate::ir::names::ident;
use crate::ir::types::{Bound, Checks, Field, Requirements, TypeDef, TypeKind, TypeRef};
use crate::ir::{Api, OperationIr, ParamLocation};

use super::operations::request_ident;
use super::types::rust_type;
use super::types_path;

/// Aliases are expanded at most this deep (alias cycles are already broken by the IR).
const MAX_ALIAS_DEPTH: usize = 32;

/// Emits checks, knowing every type definition (to expand aliases and to know which named
/// types implement `Validate`).
pub struct Validation<'a> {
    defs: BTreeMap<&'a str, &'a TypeDef>,
}

impl<'a> Validation<'a> {
    /// The checker for the types of `api`.
    pub fn new(api: &'a Api) -> Validation<'a> {
        Validation {
            defs: api.types.iter().map(|d| (d.name.as_str(), d)).collect(),
        }
    }

    /// `impl Validate` for a struct or union with something to check (emitted inside `types`).
    pub fn type_impl(&self, def: &TypeDef) -> TokenStream {
        if !def.validated {
            return TokenStream::new();
        }
        let here = TokenStream::new();
        let body = match &def.kind {
            TypeKind::Struct {
                fields,
                extra,
                extra_checks,
                requirements,
                ..
            } => {
                let mut out = TokenStream::new();
                if let Some(requirements) = requirements {
                    out.extend(requirements_check(fields, requirements));
                }
                for f in fields.iter().filter(|f| !f.implied_tag) {
                    let inner = self.value(&f.field_type(), &f.checks, &here, 0);
                    if inner.is_empty() {
                        continue;
                    }
                    let field = ident(&f.name);
                    let wire = Literal::string(&f.wire);
                    out.extend(quote! {
                        {
                            let path = &cg::FieldPath::Property(path, #wire);
                            let value = &self.#field;
                            #inner
                        }
                    });
                }
                if let Some(extra) = extra {
                    let inner = self.value(extra, extra_checks, &here, 0);
                    if !inner.is_empty() {
                        out.extend(quote! {
                            for (key, value) in &self.additional_properties {
                                let path = &cg::FieldPath::Property(path, key);
                                #inner
                            }
                        });
                    }
                }
                out
            }
            TypeKind::Union { variants, .. } => {
                let arms = variants.iter().map(|v| {
                    let name = ident(&v.name);
                    let inner = self.value(&v.ty, &v.checks, &here, 0);
                    if inner.is_empty() {
                        quote!(Self::#name(_) => {})
                    } else {
                        quote!(Self::#name(value) => { #inner })
                    }
                });
                quote! {
                    match self {
                        #(#arms)*
                    }
                }
            }
            TypeKind::Alias(_) | TypeKind::StringEnum { .. } => return TokenStream::new(),
        };
        let name = ident(&def.name);
        quote! {
            impl cg::Validate for #name {
                fn validate(&self, path: &cg::FieldPath<'_>) -> cg::Checked {
                    #body
                    ::std::result::Result::Ok(())
                }
            }
        }
    }

    /// `fn validate(request: &…Request) -> Result<(), String>` of the operation's `Operation`
    /// impl, for an operation whose parameters or JSON body have anything to check; nothing
    /// otherwise (the trait's default accepts everything).
    pub fn request_method(&self, op: &OperationIr) -> TokenStream {
        if self.request_checks(op).next().is_none() {
            return TokenStream::new();
        }
        let request = request_ident(op);
        let checks = self.request_checks(op).map(|(root, field, inner)| {
            let root = Literal::string(&root);
            quote! {
                {
                    let path = &cg::FieldPath::Root(#root);
                    let value = &request.#field;
                    #inner
                }
            }
        });
        quote! {
            fn validate(request: &#request) -> cg::Checked {
                #(#checks)*
                ::std::result::Result::Ok(())
            }
        }
    }

    /// (path root, request field, checks) for every parameter and body with something to check.
    fn request_checks<'o>(
        &'o self,
        op: &'o OperationIr,
    ) -> impl Iterator<Item = (String, proc_macro2::Ident, TokenStream)> + 'o {
        let params = op.params.iter().filter_map(move |p| {
            let optional_array = !p.required && matches!(p.ty, TypeRef::Vec(_));
            let ty = if p.always_present() || optional_array {
                p.ty.clone()
            } else {
                TypeRef::Option(Box::new(p.ty.clone()))
            };
            let mut inner = self.value(&ty, &p.checks, &types_path(), 0);
            if inner.is_empty() {
                return None;
            }
            if optional_array {
                // An absent optional array is served empty; its item counts do not apply.
                inner = quote! {
                    if !value.is_empty() {
                        #inner
                    }
                };
            }
            let location = match p.location {
                ParamLocation::Path => "path",
                ParamLocation::Query => "query",
                ParamLocation::Header => "header",
            };
            Some((format!("{location}.{}", p.wire), ident(&p.field), inner))
        });
        let body = op.body.iter().filter_map(move |b| {
            let ty = b.kind.typed()?;
            let ty = if b.required {
                ty.clone()
            } else {
                TypeRef::Option(Box::new(ty.clone()))
            };
            let inner = self.value(&ty, &b.checks, &types_path(), 0);
            (!inner.is_empty()).then(|| ("body".to_string(), ident("body"), inner))
        });
        params.chain(body)
    }

    /// The target of the alias `name` and the checks it carries, when the alias has something to
    /// check and `depth` allows expanding it once more.
    fn alias(&self, name: &str, depth: usize) -> Option<(&'a TypeRef, &'a Checks)> {
        let def = self.defs.get(name).filter(|d| d.validated)?;
        match &def.kind {
            TypeKind::Alias(target) if depth < MAX_ALIAS_DEPTH => Some((target, &def.checks)),
            _ => None,
        }
    }

    /// `ty` without its `Option` layers, looking through aliases (which is what checking the
    /// alias would do: its target against its own checks): the number of layers, the type and
    /// checks inside them, and the alias depth reached.
    fn unwrap<'t>(
        &'t self,
        ty: &'t TypeRef,
        checks: &'t Checks,
        depth: usize,
    ) -> (usize, &'t TypeRef, &'t Checks, usize) {
        let (mut layers, mut ty, mut checks, mut depth) = (0, ty, checks, depth);
        loop {
            match ty {
                TypeRef::Option(inner) => {
                    layers += 1;
                    ty = inner;
                }
                TypeRef::Named(name) => match self.alias(name, depth) {
                    Some((target, alias_checks)) => {
                        ty = target;
                        checks = alias_checks;
                        depth += 1;
                    }
                    None => break,
                },
                _ => break,
            }
        }
        (layers, ty, checks, depth)
    }

    /// Statements checking `value: &ty` at `path` against `checks`; empty when nothing applies.
    fn value(
        &self,
        ty: &TypeRef,
        checks: &Checks,
        types: &TokenStream,
        depth: usize,
    ) -> TokenStream {
        let own = checks.own.for_type(ty);
        let support = quote!(cg);
        let mut out = TokenStream::new();
        match ty {
            TypeRef::Option(_) => {
                // Every `Option` layer is one pattern, `Some(Some(value))`: `Option<Option<T>>`
                // (optional and nullable), and layers behind aliases too (`Option<Metadata>`
                // with `type Metadata = Option<…>`, a `$ref` to a nullable component). Nested
                // `if let`s would trip clippy's `collapsible_if` and `collapsible_match` in the
                // user's crate.
                let (layers, inner_ty, inner_checks, depth) = self.unwrap(ty, checks, depth);
                let mut pattern = quote!(value);
                for _ in 0..layers {
                    pattern = quote!(::std::option::Option::Some(#pattern));
                }
                let inner = self.value(inner_ty, inner_checks, types, depth);
                if !inner.is_empty() {
                    out.extend(quote! {
                        if let #pattern = value {
                            #inner
                        }
                    });
                }
            }
            TypeRef::Boxed(inner_ty) => {
                let inner = self.value(inner_ty, checks, types, depth);
                if !inner.is_empty() {
                    let target = rust_type(inner_ty, types);
                    out.extend(quote! {
                        let value: &#target = value;
                        #inner
                    });
                }
            }
            TypeRef::String => {
                if let Some(n) = own.min_length {
                    let n = count(n);
                    out.extend(quote!(#support::check_min_length(path, value, #n)?;));
                }
                if let Some(n) = own.max_length {
                    let n = count(n);
                    out.extend(quote!(#support::check_max_length(path, value, #n)?;));
                }
                if let Some(serde_json::Value::String(expected)) = own.constant.as_deref() {
                    let shown = own
                        .constant
                        .as_ref()
                        .map(|c| c.to_string())
                        .unwrap_or_default();
                    out.extend(
                        quote!(#support::check_const(path, value.as_str(), #expected, #shown)?;),
                    );
                }
                if let Some(values) = &own.allowed {
                    out.extend(one_of(ty, values));
                }
                if let Some(source) = &own.pattern {
                    // A `static` of its own block: compiled on first use, once per process
                    // (inside a loop too), and never clashing with another pattern's.
                    let source = Literal::string(source);
                    out.extend(quote! {
                        {
                            static PATTERN: #support::Pattern = #support::Pattern::new(#source);
                            #support::check_pattern(path, value, &PATTERN)?;
                        }
                    });
                }
            }
            TypeRef::I32 | TypeRef::I64 | TypeRef::F64 => {
                let number = if *ty == TypeRef::F64 {
                    quote!(*value)
                } else {
                    quote!(*value as f64)
                };
                if let Some(bound) = own.minimum {
                    let bound = bound_tokens(bound);
                    out.extend(quote!(#support::check_minimum(path, #number, #bound)?;));
                }
                if let Some(bound) = own.maximum {
                    let bound = bound_tokens(bound);
                    out.extend(quote!(#support::check_maximum(path, #number, #bound)?;));
                }
                if let Some(factor) = own.multiple_of {
                    let factor = float(factor);
                    out.extend(quote!(#support::check_multiple_of(path, #number, #factor)?;));
                }
                if let Some(serde_json::Value::Number(n)) = own.constant.as_deref() {
                    let shown = n.to_string();
                    let expected = match ty {
                        TypeRef::F64 => n.as_f64().map(float),
                        _ => n
                            .as_i64()
                            .or_else(|| n.as_f64().map(|f| f as i64))
                            .map(integer),
                    };
                    if let Some(expected) = expected {
                        out.extend(
                            quote!(#support::check_const(path, value, &#expected, #shown)?;),
                        );
                    }
                }
                if let Some(values) = &own.allowed {
                    out.extend(one_of(ty, values));
                }
            }
            TypeRef::Vec(item) => {
                if let Some(n) = own.min_items {
                    let n = count(n);
                    out.extend(quote!(#support::check_min_items(path, value.len(), #n)?;));
                }
                if let Some(n) = own.max_items {
                    let n = count(n);
                    out.extend(quote!(#support::check_max_items(path, value.len(), #n)?;));
                }
                if own.unique_items {
                    out.extend(quote!(#support::check_unique_items(path, value)?;));
                }
                let none = Checks::default();
                let inner =
                    self.value(item, checks.items.as_deref().unwrap_or(&none), types, depth);
                if !inner.is_empty() {
                    out.extend(quote! {
                        for (i, value) in value.iter().enumerate() {
                            let path = &#support::FieldPath::Index(path, i);
                            #inner
                        }
                    });
                }
            }
            TypeRef::Map(item) => {
                if let Some(n) = own.min_properties {
                    let n = count(n);
                    out.extend(quote!(#support::check_min_properties(path, value.len(), #n)?;));
                }
                if let Some(n) = own.max_properties {
                    let n = count(n);
                    out.extend(quote!(#support::check_max_properties(path, value.len(), #n)?;));
                }
                let none = Checks::default();
                let inner = self.value(
                    item,
                    checks.values.as_deref().unwrap_or(&none),
                    types,
                    depth,
                );
                if !inner.is_empty() {
                    out.extend(quote! {
                        for (key, value) in value.iter() {
                            let path = &#support::FieldPath::Property(path, key);
                            #inner
                        }
                    });
                }
            }
            TypeRef::Named(name) => {
                let implements = |d: &&TypeDef| {
                    d.validated
                        && matches!(d.kind, TypeKind::Struct { .. } | TypeKind::Union { .. })
                };
                if let Some((target, alias_checks)) = self.alias(name, depth) {
                    out.extend(self.value(target, alias_checks, types, depth + 1));
                } else if self.defs.get(name.as_str()).is_some_and(implements) {
                    out.extend(quote!(#support::Validate::validate(value, path)?;));
                }
            }
            TypeRef::Bool | TypeRef::Json => {
                // `serde_json::Value` compares with strings, numbers and booleans directly.
                let expected = match own.constant.as_deref() {
                    Some(serde_json::Value::Bool(b)) => Some(quote!(&#b)),
                    Some(serde_json::Value::String(s)) => Some(quote!(#s)),
                    Some(serde_json::Value::Number(n)) => n
                        .as_i64()
                        .map(integer)
                        .or_else(|| n.as_f64().map(float))
                        .map(|n| quote!(&#n)),
                    _ => None,
                };
                if let (Some(expected), Some(constant)) = (expected, &own.constant) {
                    let shown = constant.to_string();
                    out.extend(quote!(#support::check_const(path, value, #expected, #shown)?;));
                }
                if let Some(values) = &own.allowed {
                    out.extend(one_of(ty, values));
                }
            }
            TypeRef::File => {
                if let Some(n) = own.min_length {
                    let n = count(n);
                    out.extend(quote!(#support::check_min_size(path, value, #n)?;));
                }
                if let Some(n) = own.max_length {
                    let n = count(n);
                    out.extend(quote!(#support::check_max_size(path, value, #n)?;));
                }
            }
            TypeRef::Uuid | TypeRef::DateTime | TypeRef::Date => {}
        }
        out
    }
}

/// The check of a struct's alternatives of required properties: how many alternatives have every
/// property they name present (a required field always is; an optional one when `Some`, `null`
/// included).
fn requirements_check(fields: &[Field], requirements: &Requirements) -> TokenStream {
    let held = requirements.alternatives.iter().map(|names| {
        // A required field, and a tag the union implies, are always present.
        let present: Vec<TokenStream> = names
            .iter()
            .filter_map(|wire| match fields.iter().find(|f| f.wire == *wire) {
                Some(f) if f.required || f.implied_tag => None,
                Some(f) => {
                    let field = ident(&f.name);
                    Some(quote!(self.#field.is_some()))
                }
                // `requirement_alternatives` admits declared properties only.
                None => Some(quote!(false)),
            })
            .collect();
        match present.as_slice() {
            [] => quote!(true),
            [one] => one.clone(),
            [first, rest @ ..] => quote!((#first #(&& #rest)*)),
        }
    });
    let shown = requirements
        .alternatives
        .iter()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let exactly_one = requirements.exactly_one;
    quote! {
        cg::check_requirements(
            path,
            [#(#held),*].into_iter().filter(|held| *held).count(),
            #exactly_one,
            #shown,
        )?;
    }
}

/// The check of an `enum` that is not a Rust enum (`Constraints::allowed`, already narrowed
/// to the values of `ty`): whether `value: &ty` is one of `values`.
fn one_of(ty: &TypeRef, values: &[serde_json::Value]) -> TokenStream {
    let shown = values
        .iter()
        .map(serde_json::Value::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let matched = match ty {
        TypeRef::String => {
            let strings = values.iter().filter_map(serde_json::Value::as_str);
            quote!([#(#strings),*].contains(&value.as_str()))
        }
        TypeRef::I32 | TypeRef::I64 => {
            let numbers = values
                .iter()
                .filter_map(serde_json::Value::as_i64)
                .map(integer);
            quote!([#(#numbers),*].contains(value))
        }
        TypeRef::F64 => {
            let numbers = values
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .map(float);
            quote!([#(#numbers),*].contains(value))
        }
        TypeRef::Bool => {
            let booleans = values.iter().filter_map(serde_json::Value::as_bool);
            quote!([#(#booleans),*].contains(value))
        }
        // `Constraints::for_type` keeps `allowed` for these types only.
        _ => return TokenStream::new(),
    };
    quote!(cg::check_one_of(path, #matched, #shown)?;)
}

fn bound_tokens(bound: Bound) -> TokenStream {
    match bound {
        Bound::Inclusive(n) => {
            let n = float(n);
            quote!(cg::Bound::Inclusive(#n))
        }
        Bound::Exclusive(n) => {
            let n = float(n);
            quote!(cg::Bound::Exclusive(#n))
        }
    }
}

/// An `f64` literal; negative numbers as a negated literal (a literal token has no sign).
fn float(n: f64) -> TokenStream {
    let literal = Literal::f64_unsuffixed(n.abs());
    if n < 0.0 {
        quote!(-#literal)
    } else {
        quote!(#literal)
    }
}

/// An integer literal; negative numbers as a negated literal.
fn integer(n: i64) -> TokenStream {
    if n == i64::MIN {
        return quote!(i64::MIN);
    }
    let literal = Literal::i64_unsuffixed(n.abs());
    if n < 0 {
        quote!(-#literal)
    } else {
        quote!(#literal)
    }
}

/// A `u64` literal without suffix.
fn count(n: u64) -> Literal {
    Literal::u64_unsuffixed(n)
}

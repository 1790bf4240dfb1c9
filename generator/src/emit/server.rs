//! Tokens for the server side: one description per operation (`impl Operation`, `impl
//! Idempotent`, and the endpoint impls binding it to the handler trait), the handler trait, and
//! the `router` that mounts the runtime's request pipeline (`cg::idempotent`, `cg::plain`,
//! `cg::transactional`, from `idemgen_runtime::codegen`) on every path. Generated code describes; the runtime executes.

use std::collections::BTreeMap;

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use crate::ir::names::ident;
use crate::ir::types::TypeRef;
use crate::ir::{Api, BodyKind, Idempotency, OperationIr, ParamLocation, SecurityIr};
use crate::spec::multipart::PartKind;
use crate::spec::security::{ApiKeyIn, SchemeKind};

use super::doc_attrs;
use super::operations::{input_ident, operation_ident, request_ident, response_ident, what};
use super::validate::Validation;

/// `const TOMBSTONES` and `resource_ref`, for an operation with `x-idempotency-tombstones`: the
/// pipeline tombstones each listed operation's records of the resource the path names when the
/// handler succeeds.
fn tombstones_items(op: &OperationIr) -> Option<TokenStream> {
    if op.tombstones.is_empty() {
        return None;
    }
    let request = request_ident(op);
    let ids = op
        .tombstones
        .iter()
        .map(|t| Literal::string(&t.operation_id));
    let values: Vec<TokenStream> = op
        .params_in(ParamLocation::Path)
        .map(|p| {
            let field = ident(&p.field);
            quote!(&request.#field)
        })
        .collect();
    let resource_ref = (!values.is_empty()).then(|| {
        quote! {
            fn resource_ref(request: &#request) -> ::std::string::String {
                cg::resource_scope(&[#(#values),*])
            }
        }
    });
    Some(quote! {
        const TOMBSTONES: &'static [&'static str] = &[#(#ids),*];
        #resource_ref
    })
}

/// `const SECURITY`, when the spec declares security for the operation.
fn security_const(op: &OperationIr) -> Option<TokenStream> {
    let alternatives = match &op.security {
        SecurityIr::Undeclared => return None,
        SecurityIr::Unreadable => {
            return Some(quote! { const SECURITY: cg::Security = cg::Security::UNREADABLE; });
        }
        SecurityIr::Declared(alternatives) => alternatives,
    };
    let alternatives = alternatives.iter().map(|alternative| {
        let requirements = alternative.iter().map(|r| {
            let name = Literal::string(&r.scheme);
            let kind = match &r.kind {
                SchemeKind::ApiKey { name, location } => {
                    // Header names are matched lower case (`http::HeaderMap`); query and
                    // cookie names as written.
                    let name = match location {
                        ApiKeyIn::Header => name.to_ascii_lowercase(),
                        ApiKeyIn::Query | ApiKeyIn::Cookie => name.clone(),
                    };
                    let name = Literal::string(&name);
                    let location = match location {
                        ApiKeyIn::Header => quote!(Header),
                        ApiKeyIn::Query => quote!(Query),
                        ApiKeyIn::Cookie => quote!(Cookie),
                    };
                    quote!(cg::SchemeKind::ApiKey { name: #name, location: cg::ApiKeyIn::#location })
                }
                SchemeKind::Http { scheme } => {
                    let scheme = Literal::string(scheme);
                    quote!(cg::SchemeKind::Http { scheme: #scheme })
                }
                SchemeKind::OAuth2 => quote!(cg::SchemeKind::OAuth2),
                SchemeKind::OpenIdConnect => quote!(cg::SchemeKind::OpenIdConnect),
                SchemeKind::MutualTls => quote!(cg::SchemeKind::MutualTls),
            };
            let scopes = r.scopes.iter().map(|s| Literal::string(s));
            quote! {
                cg::Requirement {
                    scheme: &cg::Scheme { name: #name, kind: #kind },
                    scopes: &[#(#scopes),*],
                }
            }
        });
        quote!(&[#(#requirements),*])
    });
    Some(quote! {
        const SECURITY: cg::Security = cg::Security::declared(&[#(#alternatives),*]);
    })
}

fn trait_ident(api: &Api) -> Ident {
    ident(&api.trait_name)
}

/// The unit struct describing an operation, its `Operation` (and `Idempotent`) impls, and the
/// endpoint impls that bind it to the handler trait.
pub fn description(api: &Api, op: &OperationIr, validation: &Validation<'_>) -> TokenStream {
    let trait_name = trait_ident(api);
    let name = operation_ident(op);
    let request = request_ident(op);
    let response = response_ident(op);
    let error = super::operations::error_ident(op);
    let result = quote!(::idemgen_runtime::HandlerResult<#name>);
    let id = Literal::string(&op.id);
    let has_body = op.body.is_some().then(|| {
        quote!(
            const HAS_BODY: bool = true;
        )
    });
    let security = security_const(op);
    let tombstones = tombstones_items(op);
    let summary = op
        .doc
        .as_deref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    let doc = doc_attrs(&format!(
        "{}{summary}. Describes the operation to the runtime's request pipeline.",
        what(op)
    ));
    let extract = extract_method(op);
    let validate = validation.request_method(op);
    let idempotent = op
        .idempotency
        .as_ref()
        .map(|idempotency| idempotent_impl(op, idempotency));
    let authorize = ident(&op.authorize_method);
    let method = ident(&op.method);
    let authorize_fn = quote! {
        fn authorize(api: &A, principal: &::idemgen_runtime::Principal, request: &#request) -> impl ::std::future::Future<Output = ::idemgen_runtime::Authorization> + ::std::marker::Send {
            api.#authorize(principal, request)
        }
    };
    let handle = if op.in_transaction() {
        quote! {
            impl<A: #trait_name> cg::TxEndpoint<A, A::Store> for #name {
                #authorize_fn

                fn handle(api: &A, principal: &::idemgen_runtime::Principal, tx: &mut ::idemgen_runtime::TxHandle<A::Store>, request: #request) -> impl ::std::future::Future<Output = #result> + ::std::marker::Send {
                    api.#method(principal, tx, request)
                }
            }
        }
    } else {
        quote! {
            impl<A: #trait_name> cg::PlainEndpoint<A> for #name {
                #authorize_fn

                fn handle(api: &A, principal: &::idemgen_runtime::Principal, request: #request) -> impl ::std::future::Future<Output = #result> + ::std::marker::Send {
                    api.#method(principal, request)
                }
            }
        }
    };
    quote! {
        #doc
        #[derive(Debug)]
        pub struct #name;

        impl cg::Operation for #name {
            const ID: &'static str = #id;
            #has_body
            #security
            #tombstones
            type Request = #request;
            type Response = #response;
            type Error = #error;

            #extract
            #validate
        }

        #idempotent

        #handle
    }
}

/// `impl Idempotent`: the key header, the fingerprint version, the stored headers, the semantic
/// input and the resource scope.
fn idempotent_impl(op: &OperationIr, idempotency: &Idempotency) -> TokenStream {
    let name = operation_ident(op);
    let input = input_ident(op);
    let key = &idempotency.key;
    let default_key = key.header == idemgen_protocol::key::DEFAULT_KEY_HEADER
        && key.max_length == idemgen_protocol::MAX_KEY_LEN as u64;
    let key = (!default_key).then(|| {
        let header = Literal::string(&key.header);
        let max = Literal::usize_unsuffixed(key.max_length as usize);
        quote!(const KEY: cg::KeyHeader = cg::KeyHeader::new(#header, #max);)
    });
    let version = Literal::i16_unsuffixed(idempotency.fingerprint_version);
    let retention = idempotency.retention.map(|secs| {
        let secs = Literal::u64_unsuffixed(secs);
        quote! {
            const RETENTION: ::std::option::Option<::std::time::Duration> =
                ::std::option::Option::Some(::std::time::Duration::from_secs(#secs));
        }
    });
    let stored = (!idempotency.stored_headers.is_empty()).then(|| {
        let stored = idempotency
            .stored_headers
            .iter()
            .map(|h| Literal::string(h));
        quote!(const STORED_HEADERS: &'static [&'static str] = &[#(#stored),*];)
    });
    let request = request_ident(op);
    let scope = (!idempotency.scope.is_empty()).then(|| {
        let values = idempotency.scope.iter().map(|field| {
            let field = ident(field);
            quote!(&request.#field)
        });
        quote! {
            fn resource_scope(request: &#request) -> ::std::string::String {
                cg::resource_scope(&[#(#values),*])
            }
        }
    });
    quote! {
        impl cg::Idempotent for #name {
            #key
            const FINGERPRINT_VERSION: i16 = #version;
            #stored
            #retention
            type SemanticInput<'a> = #input<'a>;

            fn semantic_input(request: &#request) -> #input<'_> {
                #input::new(request)
            }

            #scope
        }
    }
}

/// `fn extract`: every parameter and the body, read through `RequestParts` (400 naming what is
/// wrong).
fn extract_method(op: &OperationIr) -> TokenStream {
    let request = request_ident(op);
    let fields: Vec<TokenStream> = op
        .params
        .iter()
        .map(|p| {
            let field = ident(&p.field);
            let wire = Literal::string(&p.wire);
            let read = match (p.location, &p.ty) {
                (ParamLocation::Path, _) => quote!(parts.path(#wire)?),
                (ParamLocation::Query, TypeRef::Vec(_)) => {
                    let required = p.required;
                    quote!(parts.query_array(#wire, #required)?)
                }
                (ParamLocation::Query, _) if p.required => quote!(parts.required_query(#wire)?),
                (ParamLocation::Query, _) => quote!(parts.query(#wire)?),
                (ParamLocation::Header, _) if p.required => {
                    quote!(parts.required_header(#wire)?)
                }
                (ParamLocation::Header, _) => quote!(parts.header(#wire)?),
            };
            // Absent, a defaulted parameter takes its default.
            let read = match &p.default {
                Some(value) if !p.required => {
                    let expr = super::types::default_expr(value, &super::types_path());
                    if value.allocates() {
                        quote!(#read.unwrap_or_else(|| #expr))
                    } else {
                        quote!(#read.unwrap_or(#expr))
                    }
                }
                _ => read,
            };
            quote!(#field: #read,)
        })
        .collect();
    let body = op.body.as_ref().map(|b| {
        let read = match (&b.kind, b.required) {
            (BodyKind::Json(_), true) => quote!(parts.json_body()?),
            (BodyKind::Json(_), false) => quote!(parts.optional_json_body()?),
            (BodyKind::Form(_), true) => quote!(parts.form_body()?),
            (BodyKind::Form(_), false) => quote!(parts.optional_form_body()?),
            (BodyKind::Multipart { parts, .. }, required) => {
                let json = parts
                    .iter()
                    .filter(|p| matches!(p.kind, PartKind::Json { .. }))
                    .map(|p| Literal::string(&p.wire));
                if required {
                    quote!(parts.multipart_body(&[#(#json),*])?)
                } else {
                    quote!(parts.optional_multipart_body(&[#(#json),*])?)
                }
            }
            (BodyKind::Text, true) => quote!(parts.text_body()?),
            (BodyKind::Text, false) => quote!(parts.optional_text_body()?),
            (BodyKind::Bytes, true) => quote!(parts.bytes_body()?),
            (BodyKind::Bytes, false) => quote!(parts.optional_bytes_body()?),
        };
        quote!(body: #read,)
    });
    let parts = if fields.is_empty() && body.is_none() {
        quote!(_parts)
    } else {
        quote!(parts)
    };
    quote! {
        fn extract(#parts: &cg::RequestParts) -> cg::Extracted<#request> {
            ::std::result::Result::Ok(#request { #(#fields)* #body })
        }
    }
}

/// The handler trait.
pub fn handler_trait(api: &Api) -> TokenStream {
    let name = trait_ident(api);
    let doc = doc_attrs(&format!(
        "The handlers of the {}. Implement it and serve it with [`router`].",
        api.described()
    ));
    let methods = api.operations.iter().map(|op| {
        let request = request_ident(op);
        let name = operation_ident(op);
        let result = quote!(::idemgen_runtime::HandlerResult<#name>);
        let authorize = ident(&op.authorize_method);
        let method = ident(&op.method);
        let what = what(op);
        let authorize_sig = quote! {
            fn #authorize(&self, principal: &::idemgen_runtime::Principal, request: &#request) -> impl ::std::future::Future<Output = ::idemgen_runtime::Authorization> + ::std::marker::Send
        };
        let authorize_item = if op.safe {
            let doc = doc_attrs(&format!(
                "Decides whether `principal` may read {what}; every caller may unless overridden. `Err` is answered as is (a 403 problem, usually)."
            ));
            quote! {
                #doc
                #authorize_sig {
                    let _ = (principal, request);
                    ::std::future::ready(::std::result::Result::Ok(()))
                }
            }
        } else {
            let doc = doc_attrs(&format!(
                "Decides whether `principal` may attempt {what}. Runs on every attempt, replays included, before anything is executed or replayed; `Err` is answered as is (a 403 problem, usually). A write has no default: forgetting its authorization does not compile."
            ));
            quote! { #doc #authorize_sig; }
        };
        let summary = op.doc.as_deref().map(|d| format!("{d}\n\n")).unwrap_or_default();
        let handler_doc = match (&op.idempotency, op.tombstones.as_slice()) {
            (Some(idempotency), _) => {
                let key = &idempotency.key.header;
                let optional = if idempotency.key.declared_required {
                    String::new()
                } else {
                    format!(" The spec declares `{key}` optional, but the server requires it: a request without it is answered 400 `idempotency_key_missing`.")
                };
                format!(
                    "{summary}Handles {what}, once per `{key}`, inside the key's transaction: write through `tx` only, so that the write and the stored response commit together. A success is stored and replayed to retries; errors are not stored and free the key.{optional}"
                )
            }
            (None, []) => format!("{summary}Handles {what}."),
            (None, links) => format!(
                "{summary}Handles {what} inside a transaction of the runtime's, committed when it succeeds: write through `tx`. On success the pipeline tombstones, in the same transaction, the records of {} for the resource the path names, so that their late retries are answered 410; call `tx.tombstone::<{}>(principal, resource_ref)` for a resource referenced otherwise.",
                links
                    .iter()
                    .map(|l| format!("`{}`", l.operation_id))
                    .collect::<Vec<_>>()
                    .join(", "),
                links[0].name
            ),
        };
        let handler_doc = doc_attrs(&handler_doc);
        let tx = op
            .in_transaction()
            .then(|| quote!(tx: &mut ::idemgen_runtime::TxHandle<Self::Store>,));
        quote! {
            #authorize_item

            #handler_doc
            fn #method(&self, principal: &::idemgen_runtime::Principal, #tx request: #request) -> impl ::std::future::Future<Output = #result> + ::std::marker::Send;
        }
    });
    quote! {
        #doc
        pub trait #name: ::std::marker::Send + ::std::marker::Sync + 'static {
            /// Where the runtime's transactions run (`idemgen_runtime::PgStore`).
            type Store: ::idemgen_runtime::Store;

            #(#methods)*
        }
    }
}

/// `router`: every path, each method served by the runtime's pipeline for its operation.
pub fn router(api: &Api) -> TokenStream {
    let trait_name = trait_ident(api);
    let mut routes: BTreeMap<&str, Vec<TokenStream>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for op in api.operations.iter().filter(|op| op.routed) {
        let method = format_ident!("{}", op.http_method);
        let name = operation_ident(op);
        let serve = if op.is_idempotent() {
            quote!(idempotent)
        } else if op.in_transaction() {
            quote!(transactional)
        } else {
            quote!(plain)
        };
        if !routes.contains_key(op.path.as_str()) {
            order.push(&op.path);
        }
        routes
            .entry(&op.path)
            .or_default()
            .push(quote!(#method(cg::#serve::<#name, A, A::Store, Au>)));
    }
    let route_calls = order.iter().map(|path| {
        let mut methods = routes[path].iter();
        let first = methods.next();
        let rest: Vec<_> = methods.collect();
        let path = Literal::string(path);
        quote!(.route(#path, ::axum::routing::#first #(.#rest)*))
    });
    quote! {
        /// The axum router serving every operation of `server`'s API through the runtime's
        /// request pipeline: authentication (401), the body limit (413), the media type (415),
        /// parameters and body (400), the idempotency key (400), authorization on every attempt
        /// (403), then the handler (idempotent operations through the executor). Unknown paths
        /// and methods are answered 404 and 405 problems.
        pub fn router<A: #trait_name, Au: ::idemgen_runtime::Authenticator>(
            server: ::idemgen_runtime::Server<A, A::Store, Au>,
        ) -> ::axum::Router {
            ::axum::Router::new()
                #(#route_calls)*
                .fallback(cg::not_found)
                .method_not_allowed_fallback(cg::method_not_allowed)
                .with_state(server)
        }
    }
}

//! Tokens for the server side: the handler trait, `RouterConfig`, the `router` builder, and one
//! axum handler per operation (authenticate → extract → key → authorize → execute).

use std::collections::BTreeMap;

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use crate::ir::names::ident;
use crate::ir::types::TypeRef;
use crate::ir::{Api, BodyKind, OperationIr, ParamLocation};

use super::doc_attrs;
use super::operations::{input_ident, request_ident, response_ident, types_path};
use super::types::rust_type;
use super::validate::Validation;

fn trait_ident(api: &Api) -> Ident {
    ident(&api.trait_name)
}

/// The handler trait.
pub fn handler_trait(api: &Api) -> TokenStream {
    let name = trait_ident(api);
    let doc = doc_attrs(&format!(
        "The handlers of the {} API. Implement it and serve it with [`router`].",
        api.title
    ));
    let methods = api.operations.iter().map(|op| {
        let request = request_ident(op);
        let response = response_ident(op);
        let authorize = ident(&op.authorize_method);
        let method = ident(&op.method);
        let what = format!(
            "`{}` (`{} {}`)",
            op.id,
            op.http_method.to_ascii_uppercase(),
            op.path
        );
        let authorize_doc = doc_attrs(&format!(
            "Decides whether `principal` may attempt {what}. Runs on every attempt, replays included, before anything is executed or replayed; `Err` is answered as is (a 403 problem, usually)."
        ));
        let summary = op.doc.as_deref().map(|d| format!("{d}\n\n")).unwrap_or_default();
        if op.idempotent {
            let doc = doc_attrs(&format!(
                "{summary}Handles {what}. Runs once per idempotency key inside the key's transaction: write through `tx` only, so that the write and the stored response commit together. A 2xx response is stored and replayed to retries; anything else is not stored."
            ));
            quote! {
                #authorize_doc
                fn #authorize(&self, principal: &::idemgen_runtime::Principal, request: &#request) -> impl ::std::future::Future<Output = ::std::result::Result<(), ::idemgen_runtime::Problem>> + ::std::marker::Send;

                #doc
                fn #method(&self, principal: &::idemgen_runtime::Principal, tx: &mut ::idemgen_runtime::TxHandle<<Self::Store as ::idemgen_runtime::Store>::Tx>, request: #request) -> impl ::std::future::Future<Output = ::std::result::Result<#response, ::idemgen_runtime::HandlerError>> + ::std::marker::Send;
            }
        } else {
            let doc = doc_attrs(&format!("{summary}Handles {what}."));
            quote! {
                #authorize_doc
                fn #authorize(&self, principal: &::idemgen_runtime::Principal, request: &#request) -> impl ::std::future::Future<Output = ::std::result::Result<(), ::idemgen_runtime::Problem>> + ::std::marker::Send;

                #doc
                fn #method(&self, principal: &::idemgen_runtime::Principal, request: #request) -> impl ::std::future::Future<Output = ::std::result::Result<#response, ::idemgen_runtime::HandlerError>> + ::std::marker::Send;
            }
        }
    });
    quote! {
        #doc
        pub trait #name: ::std::marker::Send + ::std::marker::Sync + 'static {
            /// The store idempotent operations run on; their handlers get its transaction only.
            type Store: ::idemgen_runtime::Store;

            #(#methods)*
        }
    }
}

/// `RouterConfig` and its default.
pub fn router_config(api: &Api) -> TokenStream {
    let header = Literal::string(&api.key_header);
    quote! {
        /// Settings of the generated router.
        #[derive(::std::fmt::Debug, ::std::clone::Clone)]
        pub struct RouterConfig {
            /// The largest request body accepted; larger ones are answered 413 before anything
            /// else happens.
            pub body_limit: usize,
            /// The header idempotent operations read their key from.
            pub idempotency_key_header: ::http::HeaderName,
        }

        impl ::std::default::Default for RouterConfig {
            fn default() -> Self {
                Self {
                    body_limit: ::idemgen_runtime::server::DEFAULT_BODY_LIMIT,
                    idempotency_key_header: ::http::HeaderName::from_static(#header),
                }
            }
        }
    }
}

/// The shared state of the handlers, and `router`.
pub fn router(api: &Api) -> TokenStream {
    let trait_name = trait_ident(api);
    let mut routes: BTreeMap<&str, Vec<TokenStream>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for op in &api.operations {
        let method = format_ident!("{}", op.http_method);
        let handler = handler_ident(op);
        if !routes.contains_key(op.path.as_str()) {
            order.push(&op.path);
        }
        routes
            .entry(&op.path)
            .or_default()
            .push(quote!(#method(#handler::<A, Au>)));
    }
    let route_calls = order.iter().map(|path| {
        let mut methods = routes[path].iter();
        let first = methods.next();
        let rest: Vec<_> = methods.collect();
        let path = Literal::string(path);
        quote!(.route(#path, ::axum::routing::#first #(.#rest)*))
    });
    quote! {
        /// What every handler shares.
        struct RouterState<A: #trait_name, Au> {
            api: ::std::sync::Arc<A>,
            authenticator: ::std::sync::Arc<Au>,
            executor: ::idemgen_runtime::Executor<A::Store>,
            config: ::std::sync::Arc<RouterConfig>,
        }

        impl<A: #trait_name, Au> ::std::clone::Clone for RouterState<A, Au> {
            fn clone(&self) -> Self {
                Self {
                    api: ::std::sync::Arc::clone(&self.api),
                    authenticator: ::std::sync::Arc::clone(&self.authenticator),
                    executor: ::std::clone::Clone::clone(&self.executor),
                    config: ::std::sync::Arc::clone(&self.config),
                }
            }
        }

        /// The axum router serving every operation: authentication (401), parameter and body
        /// validation (400, 413), the idempotency key (400), authorization on every attempt
        /// (403), then the handler (idempotent operations through `executor`).
        pub fn router<A: #trait_name, Au: ::idemgen_runtime::Authenticator>(
            api: ::std::sync::Arc<A>,
            authenticator: ::std::sync::Arc<Au>,
            executor: ::idemgen_runtime::Executor<A::Store>,
            config: RouterConfig,
        ) -> ::axum::Router {
            let state = RouterState {
                api,
                authenticator,
                executor,
                config: ::std::sync::Arc::new(config),
            };
            ::axum::Router::new()
                #(#route_calls)*
                .with_state(state)
        }
    }
}

fn handler_ident(op: &OperationIr) -> Ident {
    format_ident!("handle_{}", op.method)
}

fn extract_ident(op: &OperationIr) -> Ident {
    format_ident!("extract_{}", op.method)
}

/// The functions that extract a request and handle one operation.
pub fn handler(api: &Api, op: &OperationIr, validation: &Validation<'_>) -> TokenStream {
    let trait_name = trait_ident(api);
    let handler = handler_ident(op);
    let extract = extract_ident(op);
    let request = request_ident(op);
    let response = response_ident(op);
    let method = ident(&op.method);
    let authorize = ident(&op.authorize_method);
    let id = Literal::string(&op.id);
    let extract_fn = extractor(op, validation);
    let doc = doc_attrs(&format!("Serves `{}`.", op.id));

    let call = if op.idempotent {
        let input = input_ident(op);
        let scope_values = op.params_in(ParamLocation::Path).map(|p| {
            let field = ident(&p.field);
            quote!(&request.#field)
        });
        let declared: Vec<Literal> = op
            .declared_success_headers()
            .iter()
            .map(|h| Literal::string(h))
            .collect();
        quote! {
            let key = match ::idemgen_runtime::http::key_from_headers(&parts.headers, &state.config.idempotency_key_header) {
                ::std::result::Result::Ok(key) => key,
                ::std::result::Result::Err(problem) => return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::Some(&principal.owner), problem),
            };
            if let ::std::result::Result::Err(problem) = state.api.#authorize(&principal, &request).await {
                return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::Some(&principal.owner), problem);
            }
            let fingerprint = match ::idemgen_runtime::Fingerprint::hs1(OPERATION, #input::FINGERPRINT_VERSION, &#input::new(&request)) {
                ::std::result::Result::Ok(fingerprint) => fingerprint,
                ::std::result::Result::Err(e) => return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::Some(&principal.owner), ::idemgen_runtime::Problem::new(::idemgen_runtime::ProblemKind::Internal).with_internal(e.to_string())),
            };
            let idempotent = ::idemgen_runtime::IdempotentRequest {
                scope: ::idemgen_runtime::Scope {
                    owner: principal.owner.clone(),
                    operation: ::std::borrow::ToOwned::to_owned(OPERATION),
                    resource_scope: ::idemgen_runtime::codegen_support::resource_scope(&[#(#scope_values),*]),
                    key,
                },
                fingerprint,
                fingerprint_version: #input::FINGERPRINT_VERSION,
                declared_headers: &[#(#declared),*],
                retention: ::std::option::Option::None,
            };
            let owner = principal.owner.clone();
            let api = ::std::sync::Arc::clone(&state.api);
            let result = state
                .executor
                .execute(
                    idempotent,
                    move |tx: &mut ::idemgen_runtime::TxHandle<<A::Store as ::idemgen_runtime::Store>::Tx>| {
                        ::std::boxed::Box::pin(async move { api.#method(&principal, tx, request).await })
                    },
                )
                .await;
            ::idemgen_runtime::codegen_support::respond_idempotent::<#response>(OPERATION, &owner, result)
        }
    } else {
        quote! {
            if let ::std::result::Result::Err(problem) = state.api.#authorize(&principal, &request).await {
                return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::Some(&principal.owner), problem);
            }
            let result = state.api.#method(&principal, request).await;
            ::idemgen_runtime::codegen_support::respond(OPERATION, &principal.owner, result)
        }
    };
    let takes_body = op.body.is_some();
    let (body_binding, body_arg) = if takes_body {
        (quote!(body), quote!(body,))
    } else {
        (quote!(_body), quote!())
    };
    let parts_mut = if op.params_in(ParamLocation::Path).next().is_some() {
        quote!(mut)
    } else {
        quote!()
    };
    let parts_arg = if op.params_in(ParamLocation::Path).next().is_some() {
        quote!(&mut parts)
    } else {
        quote!(&parts)
    };
    quote! {
        #extract_fn

        #doc
        async fn #handler<A: #trait_name, Au: ::idemgen_runtime::Authenticator>(
            ::axum::extract::State(state): ::axum::extract::State<RouterState<A, Au>>,
            request: ::axum::extract::Request,
        ) -> ::axum::response::Response {
            const OPERATION: &str = #id;
            let (#parts_mut parts, #body_binding) = request.into_parts();
            let principal = match state.authenticator.authenticate(&parts.headers).await {
                ::std::result::Result::Ok(principal) => principal,
                ::std::result::Result::Err(problem) => return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::None, problem),
            };
            let request: #request = match #extract(#parts_arg, #body_arg state.config.body_limit).await {
                ::std::result::Result::Ok(request) => request,
                ::std::result::Result::Err(problem) => return ::idemgen_runtime::codegen_support::reject(OPERATION, ::std::option::Option::Some(&principal.owner), problem),
            };
            #call
        }
    }
}

/// The function that parses a request's parameters and body (400, 413).
fn extractor(op: &OperationIr, validation: &Validation<'_>) -> TokenStream {
    let extract = extract_ident(op);
    let request = request_ident(op);
    let has_path = op.params_in(ParamLocation::Path).next().is_some();
    let has_query = op.params_in(ParamLocation::Query).next().is_some();
    let has_header = op.params_in(ParamLocation::Header).next().is_some();
    let parts_param = match (has_path, has_query || has_header) {
        (true, _) => quote!(parts: &mut ::http::request::Parts),
        (false, true) => quote!(parts: &::http::request::Parts),
        (false, false) => quote!(_parts: &::http::request::Parts),
    };
    let body_param = op.body.as_ref().map(|_| quote!(body: ::axum::body::Body,));
    let limit_param = if op.body.is_some() {
        quote!(body_limit: usize)
    } else {
        quote!(_body_limit: usize)
    };
    let path = has_path.then(|| {
        quote! {
            let path = match <::axum::extract::RawPathParams as ::axum::extract::FromRequestParts<()>>::from_request_parts(parts, &()).await {
                ::std::result::Result::Ok(path) => path,
                ::std::result::Result::Err(e) => return ::std::result::Result::Err(::idemgen_runtime::server::bad_request("the path cannot be decoded").with_internal(e.to_string())),
            };
        }
    });
    let query = has_query
        .then(|| quote!(let query = ::idemgen_runtime::codegen_support::query_pairs(&parts.uri)?;));
    let mut fields = Vec::new();
    let params = op.params.iter().map(|p| {
        let field = ident(&p.field);
        fields.push(field.clone());
        let wire = Literal::string(&p.wire);
        let location = p.location.as_str();
        let ty = rust_type(&p.ty, &types_path());
        let parse = |raw: TokenStream| {
            quote!(::idemgen_runtime::codegen_support::parse_param::<#ty>(#location, #wire, #raw))
        };
        match (p.location, &p.ty) {
            (ParamLocation::Path, _) => {
                let parse = parse(quote!(::idemgen_runtime::codegen_support::path_value(&path, #wire)?));
                quote!(let #field = #parse?;)
            }
            (ParamLocation::Query, TypeRef::Vec(item)) => {
                let item = rust_type(item, &types_path());
                let check = p.required.then(|| {
                    quote! {
                        if #field.is_empty() {
                            return ::std::result::Result::Err(::idemgen_runtime::server::bad_request(::std::format!("{} parameter `{}` is required", #location, #wire)));
                        }
                    }
                });
                quote! {
                    let #field = ::idemgen_runtime::codegen_support::query_values(&query, #wire)
                        .into_iter()
                        .map(|raw| ::idemgen_runtime::codegen_support::parse_param::<#item>(#location, #wire, raw))
                        .collect::<::std::result::Result<::std::vec::Vec<_>, _>>()?;
                    #check
                }
            }
            (where_, _) => {
                let raw = if where_ == ParamLocation::Query {
                    quote!(::idemgen_runtime::codegen_support::query_value(&query, #wire)?)
                } else {
                    quote!(::idemgen_runtime::codegen_support::header_value(&parts.headers, #wire)?)
                };
                let parse = parse(quote!(raw));
                if p.required {
                    quote! {
                        let #field = {
                            let raw = ::idemgen_runtime::codegen_support::required(#raw, #location, #wire)?;
                            #parse?
                        };
                    }
                } else {
                    quote! {
                        let #field = #raw.map(|raw| #parse).transpose()?;
                    }
                }
            }
        }
    }).collect::<Vec<_>>();
    let body = op.body.as_ref().map(|b| {
        let parse = match &b.kind {
            BodyKind::Json(ty) => {
                let ty = rust_type(ty, &types_path());
                quote!(::idemgen_runtime::server::json_body::<#ty>(&bytes)?)
            }
            BodyKind::Text => quote!(::idemgen_runtime::codegen_support::text_body(&bytes)?),
            BodyKind::Bytes => quote!(bytes),
        };
        if b.required {
            quote! {
                let bytes = ::idemgen_runtime::server::read_body(body, body_limit).await?;
                if bytes.is_empty() {
                    return ::std::result::Result::Err(::idemgen_runtime::server::bad_request("the request body is required"));
                }
                let body = #parse;
            }
        } else {
            quote! {
                let bytes = ::idemgen_runtime::server::read_body(body, body_limit).await?;
                let body = if bytes.is_empty() {
                    ::std::option::Option::None
                } else {
                    ::std::option::Option::Some(#parse)
                };
            }
        }
    });
    let body_field = op.body.as_ref().map(|_| quote!(body,));
    let doc = doc_attrs(&format!(
        "Parses and validates the parameters and body of `{}`.",
        op.id
    ));
    let finish = match validation.request_fn_ident(op) {
        Some(validate) => quote! {
            let request = #request { #(#fields,)* #body_field };
            #validate(&request).map_err(::idemgen_runtime::server::bad_request)?;
            ::std::result::Result::Ok(request)
        },
        None => quote!(::std::result::Result::Ok(#request { #(#fields,)* #body_field })),
    };
    let validate_fn = validation.request_fn(op);
    quote! {
        #validate_fn

        #doc
        async fn #extract(#parts_param, #body_param #limit_param) -> ::std::result::Result<#request, ::idemgen_runtime::Problem> {
            #path
            #query
            #(#params)*
            #body
            #finish
        }
    }
}

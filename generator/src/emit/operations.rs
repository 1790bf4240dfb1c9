//! Tokens for one operation's data: its request struct, its success and error enums with their
//! `Encode` impls (status, headers, body bytes: sent, and for successes of idempotent operations
//! stored and replayed as those same bytes), the handler's result type, and for idempotent
//! operations the semantic input.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use crate::ir::names::ident;
use crate::ir::types::TypeRef;
use crate::ir::{BodyKind, Idempotency, OperationIr, ParamIr, ResponseIr, StatusKey};

use super::types::rust_type;
use super::{Side, doc_attrs, types_path};

/// The type of a body carried as `kind`.
pub fn body_type(kind: &BodyKind) -> TokenStream {
    body_type_on(kind, Side::Server)
}

/// The type of a body carried as `kind`, on `side`.
pub fn body_type_on(kind: &BodyKind, side: Side) -> TokenStream {
    match (kind, side) {
        (BodyKind::Json(ty) | BodyKind::Form(ty) | BodyKind::Multipart { ty, .. }, _) => {
            rust_type(ty, &types_path())
        }
        (BodyKind::Text, _) => quote!(::std::string::String),
        (BodyKind::Bytes, Side::Server) => quote!(::axum::body::Bytes),
        (BodyKind::Bytes, Side::Client) => quote!(::idemgen_client::Bytes),
    }
}

/// The type of a parameter's field in the request struct.
pub fn param_type(ty: &TypeRef, required: bool) -> TokenStream {
    let inner = rust_type(ty, &types_path());
    if required || matches!(ty, TypeRef::Vec(_)) {
        inner
    } else {
        quote!(::std::option::Option<#inner>)
    }
}

/// `CreateWidget`: the unit struct describing the operation.
pub fn operation_ident(op: &OperationIr) -> Ident {
    ident(&op.name)
}

/// `CreateWidgetRequest`.
pub fn request_ident(op: &OperationIr) -> Ident {
    ident(&op.items.request)
}

/// `CreateWidgetResponse`: the 2xx responses.
pub fn response_ident(op: &OperationIr) -> Ident {
    ident(&op.items.response)
}

/// `CreateWidgetError`: the declared error responses a handler may answer with.
pub fn error_ident(op: &OperationIr) -> Ident {
    ident(&op.items.error)
}

/// `CreateWidgetSemanticInput`.
pub fn input_ident(op: &OperationIr) -> Ident {
    ident(&op.items.semantic_input)
}

/// ``createWidget` (`POST /widgets`)``, for docs.
pub fn what(op: &OperationIr) -> String {
    format!(
        "`{}` (`{} {}`)",
        op.id,
        op.http_method.to_ascii_uppercase(),
        op.path
    )
}

/// The request struct.
pub fn request_struct(op: &OperationIr) -> TokenStream {
    let name = request_ident(op);
    let doc = doc_attrs(&format!(
        "The request of {}: its parameters and body, parsed and validated.",
        what(op)
    ));
    let params = op.params.iter().map(|p| {
        let field = ident(&p.field);
        let ty = param_type(&p.ty, p.always_present());
        let doc = doc_attrs(p.doc.as_deref().unwrap_or(&format!(
            "The `{}` {} parameter.",
            p.wire,
            p.location.as_str()
        )));
        quote! { #doc pub #field: #ty, }
    });
    let body = op.body.as_ref().map(|b| {
        let ty = body_type(&b.kind);
        let ty = if b.required {
            ty
        } else {
            quote!(::std::option::Option<#ty>)
        };
        let doc = doc_attrs(&format!("The request body (`{}`).", b.media_type));
        quote! { #doc pub body: #ty, }
    });
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq)]
        pub struct #name {
            #(#params)*
            #body
        }
    }
}

/// How a response variant holds its data.
pub(super) enum Shape {
    Unit,
    Tuple,
    Struct,
}

pub(super) fn shape(r: &ResponseIr) -> Shape {
    if r.status.has_status_field() || !r.headers.is_empty() {
        Shape::Struct
    } else if r.body.is_some() {
        Shape::Tuple
    } else {
        Shape::Unit
    }
}

fn header_field_type(h: &crate::ir::HeaderIr) -> TokenStream {
    let ty = rust_type(&h.ty, &types_path());
    if h.required {
        ty
    } else {
        quote!(::std::option::Option<#ty>)
    }
}

/// The variants of a response enum.
pub(super) fn variants<'r>(
    responses: impl Iterator<Item = &'r ResponseIr>,
    side: Side,
) -> Vec<TokenStream> {
    let status_type = match side {
        Side::Server => quote!(::http::StatusCode),
        Side::Client => quote!(::idemgen_client::StatusCode),
    };
    let status_doc = match side {
        Side::Server => " The status to answer with.",
        Side::Client => " The status answered.",
    };
    responses
        .map(|r| {
            let variant = ident(&r.variant);
            let what = match r.status {
                StatusKey::Code(c) => c.to_string(),
                StatusKey::Range(c) => format!("{c}XX"),
                StatusKey::Default => "Any other status".to_string(),
            };
            let doc = doc_attrs(&match &r.doc {
                Some(d) => format!("{what}: {d}"),
                None => format!("{what}."),
            });
            match shape(r) {
                Shape::Unit => quote! { #doc #variant, },
                Shape::Tuple => {
                    let ty = r.body.as_ref().map(|b| body_type_on(&b.kind, side));
                    quote! { #doc #variant(#ty), }
                }
                Shape::Struct => {
                    let status = r.status.has_status_field().then(|| {
                        quote! {
                            #[doc = #status_doc]
                            status: #status_type,
                        }
                    });
                    let body = r.body.as_ref().map(|b| {
                        let ty = body_type_on(&b.kind, side);
                        let doc = doc_attrs(&format!("The body (`{}`).", b.media_type));
                        quote! { #doc body: #ty, }
                    });
                    let headers = r.headers.iter().map(|h| {
                        let field = ident(&h.field);
                        let ty = header_field_type(h);
                        let doc = doc_attrs(
                            h.doc
                                .as_deref()
                                .unwrap_or(&format!("The `{}` header.", h.wire)),
                        );
                        quote! { #doc #field: #ty, }
                    });
                    quote! { #doc #variant { #status #body #(#headers)* }, }
                }
            }
        })
        .collect()
}

fn pattern(r: &ResponseIr) -> TokenStream {
    let variant = ident(&r.variant);
    match shape(r) {
        Shape::Unit => quote!(Self::#variant),
        Shape::Tuple => quote!(Self::#variant(body)),
        Shape::Struct => {
            let status = r.status.has_status_field().then(|| quote!(status,));
            let body = r.body.as_ref().map(|_| quote!(body,));
            let headers = r.headers.iter().map(|h| ident(&h.field));
            quote!(Self::#variant { #status #body #(#headers,)* })
        }
    }
}

/// One arm of `Encode::encode`: the variant as status, headers and body bytes. A range or
/// `default` variant's status is checked (inside its class, never one the pipeline owns).
fn encode_arm(r: &ResponseIr, success: bool, idempotent: bool) -> TokenStream {
    let pat = pattern(r);
    let support = quote!(cg);
    let code = match r.status {
        StatusKey::Code(c) => {
            let c = Literal::u16_unsuffixed(c);
            quote!(#c)
        }
        StatusKey::Range(c) => {
            let c = Literal::u16_unsuffixed(c);
            quote!(#support::checked_status(status, ::std::option::Option::Some(#c), #success, #idempotent)?.as_u16())
        }
        StatusKey::Default => {
            quote!(#support::checked_status(status, ::std::option::Option::None, #success, #idempotent)?.as_u16())
        }
    };
    let mut expr = match &r.body {
        None => quote!(#support::empty(#code)),
        Some(b) => {
            let media = Literal::string(&b.media_type);
            match b.kind {
                // Responses are never read as multipart (`body_of` types only requests so).
                BodyKind::Json(_) | BodyKind::Multipart { .. } => {
                    quote!(#support::json(#code, #media, &body))
                }
                BodyKind::Form(_) => quote!(#support::form(#code, #media, &body)),
                BodyKind::Text => quote!(#support::bytes(#code, #media, body.into_bytes())),
                BodyKind::Bytes => quote!(#support::bytes(#code, #media, body.to_vec())),
            }
        }
    };
    for h in &r.headers {
        let field = ident(&h.field);
        let wire = Literal::string(&h.wire.to_ascii_lowercase());
        expr = if h.required {
            quote!(#expr?.header(#wire, &#field))
        } else {
            quote!(#expr?.optional_header(#wire, #field.as_ref()))
        };
    }
    quote!(#pat => #expr,)
}

/// The success enum: the 2xx responses, the only ones stored and replayed, with `Encode`.
pub fn success_enum(op: &OperationIr) -> TokenStream {
    let name = response_ident(op);
    let success: Vec<&ResponseIr> = op.success_responses().collect();
    let stored = if op.is_idempotent() {
        " They are stored with the key and replayed to retries."
    } else {
        ""
    };
    let doc = doc_attrs(&format!(
        "The successful responses of {}: one variant per declared {}.{stored}",
        what(op),
        op.successes_described()
    ));
    let variants = variants(success.iter().copied(), Side::Server);
    let idempotent = op.is_idempotent();
    let arms = success.iter().map(|r| encode_arm(r, true, idempotent));
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #name {
            #(#variants)*
        }

        impl cg::Encode for #name {
            fn encode(self) -> cg::Encoded {
                match self {
                    #(#arms)*
                }
            }
        }
    }
}

/// The error enum: the declared non-2xx responses a handler may answer with (never stored), and
/// its conversion into `HandlerError` (so that `?` works). An alias of `NoDeclaredError` when the
/// operation declares none beyond what the pipeline answers.
pub fn error_enum(op: &OperationIr) -> TokenStream {
    let name = error_ident(op);
    let errors: Vec<&ResponseIr> = op.error_responses().collect();
    if errors.is_empty() {
        let doc = doc_attrs(&format!(
            "{} declares no error response a handler answers itself; its errors are problems (`HandlerError::Problem`) or opaque failures.",
            what(op)
        ));
        return quote! {
            #doc
            pub type #name = cg::NoDeclaredError;
        };
    }
    let owned = idemgen_protocol::status::pipeline_statuses_prose(op.is_idempotent());
    let shared = format!(
        " A {} it answers carries a problem `type` of the service's own, never one of idemgen's (answered 500 otherwise), so that clients tell it apart from the pipeline's.",
        idemgen_protocol::status::shared_statuses_prose(op.is_idempotent())
            .replace(" and ", " or ")
    );
    let doc = doc_attrs(&format!(
        "The error responses a handler of {} may answer with: never stored. The statuses the request pipeline answers itself ({owned}) are not among them.{shared}",
        what(op)
    ));
    let variants = variants(errors.iter().copied(), Side::Server);
    let idempotent = op.is_idempotent();
    let arms = errors.iter().map(|r| encode_arm(r, false, idempotent));
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #name {
            #(#variants)*
        }

        impl cg::Encode for #name {
            fn encode(self) -> cg::Encoded {
                match self {
                    #(#arms)*
                }
            }
        }

        impl ::std::convert::From<#name> for ::idemgen_runtime::HandlerError<#name> {
            fn from(error: #name) -> Self {
                ::idemgen_runtime::HandlerError::Response(error)
            }
        }
    }
}

/// The semantic input struct(s) of an idempotent operation. Their JSON form is what `hs2` (and
/// `hs1`, for records of earlier releases) hashes, so it is frozen: path, query and header groups
/// present only when the operation has such parameters (header ones: marked
/// `x-idempotency-fingerprint: true`, keyed in lower case), absent optionals omitted, absent
/// values with a default at their default.
pub fn semantic_input(op: &OperationIr, idempotency: &Idempotency) -> TokenStream {
    let name = input_ident(op);
    let request = request_ident(op);
    let mut items = Vec::new();
    let mut fields = Vec::new();
    let mut inits = Vec::new();
    for (params, group, group_name) in [
        (&idempotency.input.path, "path", &op.items.path_input),
        (&idempotency.input.query, "query", &op.items.query_input),
        (&idempotency.input.header, "header", &op.items.header_input),
    ] {
        if params.is_empty() {
            continue;
        }
        let group_name = ident(group_name);
        let group_field = format_ident!("{group}");
        let (group_fields, group_inits): (Vec<_>, Vec<_>) = params.iter().map(input_field).unzip();
        let group_doc = doc_attrs(&format!(
            "The {group} parameters of `{}` as they enter its fingerprint.",
            op.id
        ));
        items.push(quote! {
            #group_doc
            #[derive(Debug, ::serde::Serialize)]
            pub struct #group_name<'a> {
                #(#group_fields)*
            }
        });
        let field_doc = doc_attrs(&format!("The {group} parameters."));
        fields.push(quote! { #field_doc pub #group_field: #group_name<'a>, });
        inits.push(quote!(#group_field: #group_name { #(#group_inits,)* }));
    }
    if let Some(body) = &idempotency.input.body {
        let skip = quote!(#[serde(skip_serializing_if = "::std::option::Option::is_none")]);
        let (field_ty, init, skip) = match (&body.kind, body.required) {
            (BodyKind::Bytes, true) => (
                quote!(cg::HexBytes<'a>),
                quote!(cg::HexBytes(&request.body)),
                None,
            ),
            (BodyKind::Bytes, false) => (
                quote!(::std::option::Option<cg::HexBytes<'a>>),
                quote!(request.body.as_deref().map(cg::HexBytes)),
                Some(skip),
            ),
            (BodyKind::Text, true) => (quote!(&'a str), quote!(&request.body), None),
            (BodyKind::Text, false) => (
                quote!(::std::option::Option<&'a str>),
                quote!(request.body.as_deref()),
                Some(skip),
            ),
            (BodyKind::Json(_) | BodyKind::Form(_) | BodyKind::Multipart { .. }, true) => {
                let ty = body_type(&body.kind);
                (quote!(&'a #ty), quote!(&request.body), None)
            }
            (BodyKind::Json(_) | BodyKind::Form(_) | BodyKind::Multipart { .. }, false) => {
                let ty = body_type(&body.kind);
                (
                    quote!(::std::option::Option<&'a #ty>),
                    quote!(request.body.as_ref()),
                    Some(skip),
                )
            }
        };
        fields.push(quote! {
            /// The request body.
            #skip
            pub body: #field_ty,
        });
        inits.push(quote!(body: #init));
    }
    let doc = if idempotency.input.header.is_empty() {
        doc_attrs(&format!(
            "What makes two attempts of `{}` the same request: its path and query parameters and its body, never the idempotency key or other transport headers (protocol.md, \"Fingerprint\").",
            op.id
        ))
    } else {
        doc_attrs(&format!(
            "What makes two attempts of `{}` the same request: its path and query parameters, its body and the headers marked `x-idempotency-fingerprint`, never the idempotency key or other transport headers (protocol.md, \"Fingerprint\").",
            op.id
        ))
    };
    let phantom = fields.is_empty().then(|| {
        quote! {
            #[serde(skip)]
            _request: ::std::marker::PhantomData<&'a #request>,
        }
    });
    let phantom_init = fields
        .is_empty()
        .then(|| quote!(_request: ::std::marker::PhantomData,));
    let unused_request = fields.is_empty().then(|| quote!(let _ = request;));
    quote! {
        #(#items)*

        #doc
        #[derive(Debug, ::serde::Serialize)]
        pub struct #name<'a> {
            #(#fields)*
            #phantom
        }

        impl<'a> #name<'a> {
            /// The semantic input of `request`.
            pub fn new(request: &'a #request) -> Self {
                #unused_request
                Self { #(#inits,)* #phantom_init }
            }
        }
    }
}

/// A parameter's field in a semantic input group, and its initialiser.
fn input_field(p: &ParamIr) -> (TokenStream, TokenStream) {
    let field = ident(&p.field);
    let wire = Literal::string(&p.wire);
    let inner = rust_type(&p.ty, &types_path());
    let doc = doc_attrs(&format!("`{}`.", p.wire));
    match (&p.ty, p.always_present()) {
        (TypeRef::Vec(item), _) => {
            let item = rust_type(item, &types_path());
            (
                quote! {
                    #doc
                    #[serde(rename = #wire, skip_serializing_if = "cg::is_empty")]
                    pub #field: &'a [#item],
                },
                quote!(#field: &request.#field),
            )
        }
        (_, true) => (
            quote! {
                #doc
                #[serde(rename = #wire)]
                pub #field: &'a #inner,
            },
            quote!(#field: &request.#field),
        ),
        (_, false) => (
            quote! {
                #doc
                #[serde(rename = #wire, skip_serializing_if = "::std::option::Option::is_none")]
                pub #field: ::std::option::Option<&'a #inner>,
            },
            quote!(#field: request.#field.as_ref()),
        ),
    }
}

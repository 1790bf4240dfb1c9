//! Tokens for one operation: its request struct, its response enum with `IntoResponse`, and for
//! idempotent operations its semantic input and its `ResponseCodec`.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use crate::ir::names::ident;
use crate::ir::types::TypeRef;
use crate::ir::{BodyKind, OperationIr, ParamLocation, ResponseIr, StatusKey};

use super::doc_attrs;
use super::types::rust_type;

/// `types::`: how the top-level module names generated types.
pub fn types_path() -> TokenStream {
    quote!(types::)
}

/// The type of a body carried as `kind`.
pub fn body_type(kind: &BodyKind) -> TokenStream {
    match kind {
        BodyKind::Json(ty) => rust_type(ty, &types_path()),
        BodyKind::Text => quote!(::std::string::String),
        BodyKind::Bytes => quote!(::axum::body::Bytes),
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

/// `CreateWidgetRequest` etc.
pub fn request_ident(op: &OperationIr) -> Ident {
    format_ident!("{}Request", op.name)
}

/// `CreateWidgetResponse`.
pub fn response_ident(op: &OperationIr) -> Ident {
    format_ident!("{}Response", op.name)
}

/// `CreateWidgetSemanticInput`.
pub fn input_ident(op: &OperationIr) -> Ident {
    format_ident!("{}SemanticInput", op.name)
}

/// The request struct.
pub fn request_struct(op: &OperationIr) -> TokenStream {
    let name = request_ident(op);
    let doc = doc_attrs(&format!(
        "The request of `{}` (`{} {}`): its parameters and body, parsed and validated.",
        op.id,
        op.http_method.to_ascii_uppercase(),
        op.path
    ));
    let params = op.params.iter().map(|p| {
        let field = ident(&p.field);
        let ty = param_type(&p.ty, p.required);
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
        #[derive(::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq)]
        pub struct #name {
            #(#params)*
            #body
        }
    }
}

/// How a response variant holds its data.
enum Shape {
    Unit,
    Tuple,
    Struct,
}

fn shape(r: &ResponseIr) -> Shape {
    if r.status.has_status_field() || !r.headers.is_empty() {
        Shape::Struct
    } else if r.body.is_some() {
        Shape::Tuple
    } else {
        Shape::Unit
    }
}

fn status_class(status: StatusKey) -> TokenStream {
    match status {
        StatusKey::Range(c) => {
            let c = Literal::u16_unsuffixed(c);
            quote!(::std::option::Option::Some(#c))
        }
        _ => quote!(::std::option::Option::None),
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

/// The response enum and its `IntoResponse`.
pub fn response_enum(op: &OperationIr) -> TokenStream {
    let name = response_ident(op);
    let doc = doc_attrs(&format!(
        "The responses `{}` declares: one variant per status.",
        op.id
    ));
    let variants = op.responses.iter().map(|r| {
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
                let ty = r.body.as_ref().map(|b| body_type(&b.kind));
                quote! { #doc #variant(#ty), }
            }
            Shape::Struct => {
                let status = r.status.has_status_field().then(|| {
                    quote! {
                        /// The status to answer with.
                        status: ::http::StatusCode,
                    }
                });
                let body = r.body.as_ref().map(|b| {
                    let ty = body_type(&b.kind);
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
    });
    let arms = op.responses.iter().map(into_response_arm);
    quote! {
        #doc
        #[derive(::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq)]
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #name {
            #(#variants)*
        }

        impl ::axum::response::IntoResponse for #name {
            fn into_response(self) -> ::axum::response::Response {
                match self {
                    #(#arms)*
                }
            }
        }
    }
}

fn status_expr(status: StatusKey) -> TokenStream {
    match status {
        StatusKey::Code(c) => {
            let c = Literal::u16_unsuffixed(c);
            quote!(::idemgen_runtime::codegen_support::status(#c))
        }
        _ => quote!(status),
    }
}

fn pattern(r: &ResponseIr, with_status: bool) -> TokenStream {
    let variant = ident(&r.variant);
    match shape(r) {
        Shape::Unit => quote!(Self::#variant),
        Shape::Tuple => quote!(Self::#variant(body)),
        Shape::Struct => {
            let status = (with_status && r.status.has_status_field()).then(|| quote!(status,));
            let body = r.body.as_ref().map(|_| quote!(body,));
            let headers = r.headers.iter().map(|h| ident(&h.field));
            let rest = (!with_status && r.status.has_status_field()).then(|| quote!(..));
            quote!(Self::#variant { #status #body #(#headers,)* #rest })
        }
    }
}

fn media_literal(media: &str) -> Literal {
    Literal::string(media)
}

fn into_response_arm(r: &ResponseIr) -> TokenStream {
    let pat = pattern(r, true);
    let status = status_expr(r.status);
    let check = r.status.has_status_field().then(|| {
        let class = status_class(r.status);
        quote! {
            let status = match ::idemgen_runtime::codegen_support::checked_status(status, #class) {
                ::std::result::Result::Ok(status) => status,
                ::std::result::Result::Err(problem) => return ::axum::response::IntoResponse::into_response(problem),
            };
        }
    });
    let build = match &r.body {
        None => quote!(::idemgen_runtime::codegen_support::empty_response(#status)),
        Some(b) => {
            let media = media_literal(&b.media_type);
            match b.kind {
                BodyKind::Json(_) => {
                    quote!(::idemgen_runtime::codegen_support::json_response(#status, #media, &body))
                }
                BodyKind::Text | BodyKind::Bytes => {
                    quote!(::idemgen_runtime::codegen_support::bytes_response(#status, #media, body))
                }
            }
        }
    };
    if r.headers.is_empty() {
        return quote! {
            #pat => {
                #check
                #build
            }
        };
    }
    let headers = r.headers.iter().map(|h| {
        let field = ident(&h.field);
        let wire = Literal::string(&h.wire.to_ascii_lowercase());
        if h.required {
            quote!(::idemgen_runtime::codegen_support::set_header(&mut response, #wire, &#field);)
        } else {
            quote! {
                if let ::std::option::Option::Some(value) = &#field {
                    ::idemgen_runtime::codegen_support::set_header(&mut response, #wire, value);
                }
            }
        }
    });
    quote! {
        #pat => {
            #check
            let mut response = #build;
            #(#headers)*
            response
        }
    }
}

/// The semantic input struct(s) of an idempotent operation.
pub fn semantic_input(op: &OperationIr) -> TokenStream {
    let name = input_ident(op);
    let request = request_ident(op);
    let version = Literal::i16_unsuffixed(op.fingerprint_version);
    let mut items = Vec::new();
    let mut fields = Vec::new();
    let mut inits = Vec::new();
    for (location, group) in [
        (ParamLocation::Path, "path"),
        (ParamLocation::Query, "query"),
    ] {
        let params: Vec<_> = op.params_in(location).collect();
        if params.is_empty() {
            continue;
        }
        let group_name = format_ident!(
            "{}{}Input",
            op.name,
            if group == "path" { "Path" } else { "Query" }
        );
        let group_field = format_ident!("{group}");
        let mut group_fields = Vec::new();
        let mut group_inits = Vec::new();
        for p in params {
            let field = ident(&p.field);
            let wire = Literal::string(&p.wire);
            let inner = rust_type(&p.ty, &types_path());
            let doc = doc_attrs(&format!("`{}`.", p.wire));
            match (&p.ty, p.required) {
                (TypeRef::Vec(item), _) => {
                    let item = rust_type(item, &types_path());
                    group_fields.push(quote! {
                        #doc
                        #[serde(rename = #wire, skip_serializing_if = "::idemgen_runtime::codegen_support::is_empty")]
                        pub #field: &'a [#item],
                    });
                    group_inits.push(quote!(#field: &request.#field));
                }
                (_, true) => {
                    group_fields.push(quote! {
                        #doc
                        #[serde(rename = #wire)]
                        pub #field: &'a #inner,
                    });
                    group_inits.push(quote!(#field: &request.#field));
                }
                (_, false) => {
                    group_fields.push(quote! {
                        #doc
                        #[serde(rename = #wire, skip_serializing_if = "::std::option::Option::is_none")]
                        pub #field: ::std::option::Option<&'a #inner>,
                    });
                    group_inits.push(quote!(#field: request.#field.as_ref()));
                }
            }
        }
        let group_doc = doc_attrs(&format!(
            "The {group} parameters of `{}` as they enter its fingerprint.",
            op.id
        ));
        items.push(quote! {
            #group_doc
            #[derive(::std::fmt::Debug, ::serde::Serialize)]
            pub struct #group_name<'a> {
                #(#group_fields)*
            }
        });
        let field_doc = doc_attrs(&format!("The {group} parameters."));
        fields.push(quote! { #field_doc pub #group_field: #group_name<'a>, });
        inits.push(quote!(#group_field: #group_name { #(#group_inits,)* }));
    }
    if let Some(body) = &op.body {
        let ty = match body.kind {
            BodyKind::Json(_) => body_type(&body.kind),
            BodyKind::Text => quote!(str),
            BodyKind::Bytes => quote!(::idemgen_runtime::codegen_support::HexBytes),
        };
        let (field_ty, init, skip) = match (&body.kind, body.required) {
            (BodyKind::Bytes, true) => (
                quote!(#ty<'a>),
                quote!(::idemgen_runtime::codegen_support::HexBytes(&request.body)),
                None,
            ),
            (BodyKind::Bytes, false) => (
                quote!(::std::option::Option<#ty<'a>>),
                quote!(
                    request
                        .body
                        .as_deref()
                        .map(::idemgen_runtime::codegen_support::HexBytes)
                ),
                Some(quote!(#[serde(skip_serializing_if = "::std::option::Option::is_none")])),
            ),
            (_, true) => (quote!(&'a #ty), quote!(&request.body), None),
            (_, false) => (
                quote!(::std::option::Option<&'a #ty>),
                quote!(request.body.as_deref()),
                Some(quote!(#[serde(skip_serializing_if = "::std::option::Option::is_none")])),
            ),
        };
        let init = match (&body.kind, body.required) {
            (BodyKind::Json(_), false) => quote!(request.body.as_ref()),
            _ => init,
        };
        fields.push(quote! {
            /// The request body.
            #skip
            pub body: #field_ty,
        });
        inits.push(quote!(body: #init));
    }
    let doc = doc_attrs(&format!(
        "What makes two attempts of `{}` the same request: its path and query parameters and its body, never the idempotency key or other transport headers (protocol.md, \"Fingerprint\").",
        op.id
    ));
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
        #[derive(::std::fmt::Debug, ::serde::Serialize)]
        pub struct #name<'a> {
            #(#fields)*
            #phantom
        }

        impl<'a> #name<'a> {
            /// `x-idempotency-fingerprint-version`: bump it when the meaning of this input changes.
            pub const FINGERPRINT_VERSION: i16 = #version;

            /// The semantic input of `request`.
            pub fn new(request: &'a #request) -> Self {
                #unused_request
                Self { #(#inits,)* #phantom_init }
            }
        }
    }
}

/// The `ResponseCodec` of an idempotent operation: 2xx variants stored, the rest never.
pub fn codec(op: &OperationIr) -> TokenStream {
    let name = response_ident(op);
    let id = &op.id;
    let success: Vec<&ResponseIr> = op
        .responses
        .iter()
        .filter(|r| r.status.can_be_success())
        .collect();
    let encode_arms = success.iter().map(|r| {
        let pat = pattern(r, true);
        let guard = r
            .status
            .has_status_field()
            .then(|| quote!(if status.is_success()));
        let status = match r.status {
            StatusKey::Code(_) => status_expr(r.status),
            _ => quote!(*status),
        };
        let (media, bytes) = match &r.body {
            None => (quote!(::std::option::Option::None), quote!(::std::vec::Vec::new())),
            Some(b) => {
                let media = media_literal(&b.media_type);
                let bytes = match b.kind {
                    BodyKind::Json(_) => quote!(::idemgen_runtime::codegen_support::encode_json(body)?),
                    BodyKind::Text => quote!(body.as_bytes().to_vec()),
                    BodyKind::Bytes => quote!(body.to_vec()),
                };
                (quote!(::std::option::Option::Some(#media)), bytes)
            }
        };
        let headers = r.headers.iter().map(|h| {
            let field = ident(&h.field);
            let wire = Literal::string(&h.wire.to_ascii_lowercase());
            if h.required {
                quote!(::idemgen_runtime::codegen_support::encode_header(&mut headers, #wire, #field)?;)
            } else {
                quote! {
                    if let ::std::option::Option::Some(value) = #field {
                        ::idemgen_runtime::codegen_support::encode_header(&mut headers, #wire, value)?;
                    }
                }
            }
        });
        let mutable = if r.headers.is_empty() {
            quote!()
        } else {
            quote!(mut)
        };
        quote! {
            #pat #guard => {
                let #mutable headers = ::idemgen_runtime::codegen_support::stored_headers(#media);
                #(#headers)*
                ::std::result::Result::Ok(::std::option::Option::Some(::idemgen_runtime::EncodedResponse {
                    status: #status,
                    headers,
                    body: #bytes,
                }))
            }
        }
    });
    let has_catch_all = op.responses.len()
        > success
            .iter()
            .filter(|r| !r.status.has_status_field())
            .count();
    let fallback =
        has_catch_all.then(|| quote!(_ => ::std::result::Result::Ok(::std::option::Option::None),));

    // Decode: exact codes first, then one 2xx catch-all (a `2XX` range, else `default`).
    let exact = success.iter().filter_map(|r| match r.status {
        StatusKey::Code(c) => Some((Literal::u16_unsuffixed(c), *r)),
        _ => None,
    });
    let exact_arms = exact.map(|(code, r)| {
        let build = rebuild(r);
        quote!(#code => ::std::result::Result::Ok(#build),)
    });
    let range = success
        .iter()
        .find(|r| matches!(r.status, StatusKey::Range(2)))
        .or_else(|| success.iter().find(|r| r.status == StatusKey::Default));
    let range_arm = range.map(|r| {
        let build = rebuild(r);
        quote!(status if (200..=299).contains(&status) => ::std::result::Result::Ok(#build),)
    });
    let stored_used = !success.is_empty();
    let stored = if stored_used {
        quote!(stored)
    } else {
        quote!(_stored)
    };
    let other_status = if stored_used {
        quote!(other => ::std::result::Result::Err(::idemgen_runtime::codegen_support::undeclared_status(#id, other)),)
    } else {
        quote!()
    };
    let decode_body = if stored_used {
        quote! {
            match stored.status {
                #(#exact_arms)*
                #range_arm
                #other_status
            }
        }
    } else {
        quote!(::std::result::Result::Err(::idemgen_runtime::codegen_support::undeclared_status(#id, _stored.status)))
    };
    let encode_body = if success.is_empty() {
        quote!(::std::result::Result::Ok(::std::option::Option::None))
    } else {
        quote! {
            match self {
                #(#encode_arms)*
                #fallback
            }
        }
    };
    quote! {
        impl ::idemgen_runtime::ResponseCodec for #name {
            fn encode_success(&self) -> ::std::result::Result<::std::option::Option<::idemgen_runtime::EncodedResponse>, ::idemgen_runtime::CodecError> {
                #encode_body
            }

            fn decode(#stored: &::idemgen_runtime::StoredResponse) -> ::std::result::Result<Self, ::idemgen_runtime::CodecError> {
                #decode_body
            }
        }
    }
}

/// The expression rebuilding a variant from `stored`.
fn rebuild(r: &ResponseIr) -> TokenStream {
    let variant = ident(&r.variant);
    let body = r.body.as_ref().map(|b| match b.kind {
        BodyKind::Json(_) => quote!(::idemgen_runtime::codegen_support::decode_json(
            &stored.body
        )?),
        BodyKind::Text => quote!(::idemgen_runtime::codegen_support::decode_text(
            &stored.body
        )?),
        BodyKind::Bytes => quote!(::axum::body::Bytes::from(stored.body.clone())),
    });
    match shape(r) {
        Shape::Unit => quote!(Self::#variant),
        Shape::Tuple => quote!(Self::#variant(#body)),
        Shape::Struct => {
            let status = r.status.has_status_field().then(
                || quote!(status: ::idemgen_runtime::codegen_support::stored_status(stored)?,),
            );
            let body = body.map(|b| quote!(body: #b,));
            let headers = r.headers.iter().map(|h| {
                let field = ident(&h.field);
                let wire = Literal::string(&h.wire.to_ascii_lowercase());
                if h.required {
                    quote!(#field: ::idemgen_runtime::codegen_support::decode_required_header(stored, #wire)?,)
                } else {
                    quote!(#field: ::idemgen_runtime::codegen_support::decode_header(stored, #wire)?,)
                }
            });
            quote!(Self::#variant { #status #body #(#headers)* })
        }
    }
}

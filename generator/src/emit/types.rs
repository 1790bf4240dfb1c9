//! Tokens for the `types` module: one item (or two, with its `Display`/`Deserialize` impl) per
//! [`TypeDef`].

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::ir::names::ident;
use crate::ir::types::{DefaultExpr, Field, TypeDef, TypeKind, TypeRef, UnionVariant, Usage};

use super::Side;
use super::doc_attrs;

/// The `use` at the top of the generated module and of its `types` module: the support crate's
/// `codegen`, as `cg`, which generated code names its helpers through (short paths keep each
/// attribute and check on one line).
pub fn module_prelude(side: Side) -> TokenStream {
    let support = side.support_crate();
    quote! {
        #[allow(unused_imports)]
        use #support::codegen as cg;
    }
}

/// How a type is written, with named types prefixed by `types_path` (empty inside `types`).
pub fn rust_type(ty: &TypeRef, types_path: &TokenStream) -> TokenStream {
    match ty {
        TypeRef::String => quote!(::std::string::String),
        TypeRef::Bool => quote!(bool),
        TypeRef::I32 => quote!(i32),
        TypeRef::I64 => quote!(i64),
        TypeRef::F64 => quote!(f64),
        TypeRef::Uuid => quote!(::uuid::Uuid),
        TypeRef::DateTime => quote!(::chrono::DateTime<::chrono::Utc>),
        TypeRef::Date => quote!(::chrono::NaiveDate),
        TypeRef::Json => quote!(::serde_json::Value),
        TypeRef::Named(name) => {
            let name = ident(name);
            quote!(#types_path #name)
        }
        TypeRef::Vec(item) => {
            let item = rust_type(item, types_path);
            quote!(::std::vec::Vec<#item>)
        }
        TypeRef::Map(value) => {
            let value = rust_type(value, types_path);
            quote!(::std::collections::BTreeMap<::std::string::String, #value>)
        }
        TypeRef::Option(inner) => {
            let inner = rust_type(inner, types_path);
            quote!(::std::option::Option<#inner>)
        }
        TypeRef::Boxed(inner) => {
            let inner = rust_type(inner, types_path);
            quote!(::std::boxed::Box<#inner>)
        }
        TypeRef::File => quote!(cg::FilePart),
    }
}

/// A `default` as a Rust expression, with named types prefixed by `types_path`.
pub fn default_expr(value: &DefaultExpr, types_path: &TokenStream) -> TokenStream {
    match value {
        DefaultExpr::Str(s) => quote!(::std::string::String::from(#s)),
        DefaultExpr::Bool(b) => quote!(#b),
        DefaultExpr::I32(n) => signed(i64::from(*n)),
        DefaultExpr::I64(n) => signed(*n),
        DefaultExpr::F64(f) => {
            let literal = Literal::f64_unsuffixed(f.abs());
            if *f < 0.0 {
                quote!(-#literal)
            } else {
                quote!(#literal)
            }
        }
        DefaultExpr::Variant { ty, variant } => {
            let ty = ident(ty);
            let variant = ident(variant);
            quote!(#types_path #ty::#variant)
        }
        DefaultExpr::Null => quote!(::std::option::Option::None),
        DefaultExpr::Some(inner) => {
            let inner = default_expr(inner, types_path);
            quote!(::std::option::Option::Some(#inner))
        }
        DefaultExpr::Vec(items) if items.is_empty() => quote!(::std::vec::Vec::new()),
        DefaultExpr::Vec(items) => {
            let items = items.iter().map(|i| default_expr(i, types_path));
            quote!(::std::vec![#(#items),*])
        }
        DefaultExpr::EmptyMap => quote!(::std::collections::BTreeMap::new()),
    }
}

/// An integer literal; negative numbers as a negated literal (a literal token has no sign).
fn signed(n: i64) -> TokenStream {
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

/// `default_limit`: the function a defaulted field's serde `default` names.
fn default_fn(field: &Field) -> proc_macro2::Ident {
    format_ident!("default_{}", field.name.trim_start_matches("r#"))
}

/// `impl Widget { pub fn default_limit() -> i32 { 20 } }`: the defaults of a struct's optional
/// properties, which serde fills in when a property is absent (and code building a value may
/// call).
fn default_fns(name: &proc_macro2::Ident, fields: &[Field]) -> TokenStream {
    let here = TokenStream::new();
    let fns: Vec<TokenStream> = fields
        .iter()
        .filter(|f| !f.implied_tag)
        .filter_map(|f| {
            let value = f.default.as_ref()?;
            let function = default_fn(f);
            let ty = rust_type(&f.field_type(), &here);
            let expr = default_expr(value, &here);
            let shown = f
                .default_json
                .as_ref()
                .map(|j| j.to_string())
                .unwrap_or_default();
            let doc = doc_attrs(&format!(
                "The default of `{}` (`{shown}`): its value when a message omits it.",
                f.wire
            ));
            Some(quote! {
                #doc
                pub fn #function() -> #ty {
                    #expr
                }
            })
        })
        .collect();
    if fns.is_empty() {
        return TokenStream::new();
    }
    quote! {
        impl #name {
            #(#fns)*
        }
    }
}

/// The definition of `def` (inside the `types` module, whose [`module_prelude`] names the
/// helpers of the side it is generated for).
pub fn type_def(def: &TypeDef) -> TokenStream {
    let name = ident(&def.name);
    let usage = def.usage;
    let serde = serde_derives(usage);
    let doc = doc_attrs(
        def.doc
            .as_deref()
            .unwrap_or(&format!("The `{}` schema.", def.name)),
    );
    let here = TokenStream::new();
    match &def.kind {
        TypeKind::Alias(target) => {
            let target = rust_type(target, &here);
            quote! {
                #doc
                pub type #name = #target;
            }
        }
        TypeKind::Struct {
            fields: field_defs,
            deny_unknown,
            extra,
            ..
        } => {
            let fields: Vec<TokenStream> = field_defs
                .iter()
                .filter(|f| !f.implied_tag)
                .map(|f| struct_field(&def.name, f, usage))
                .collect();
            let extra = extra.as_ref().map(|value| {
                let value = rust_type(value, &here);
                let name = format_ident!("additional_properties");
                quote! {
                    /// Properties not listed in the schema (`additionalProperties`).
                    #[serde(flatten)]
                    pub #name: ::std::collections::BTreeMap<::std::string::String, #value>,
                }
            });
            let deny = (*deny_unknown && extra.is_none() && usage.deserialize)
                .then(|| quote!(#[serde(deny_unknown_fields)]));
            let defaults = default_fns(&name, field_defs);
            quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, #serde)]
                #deny
                pub struct #name {
                    #(#fields)*
                    #extra
                }
                #defaults
            }
        }
        TypeKind::StringEnum { variants } => {
            let names: Vec<_> = variants.iter().map(|v| ident(&v.name)).collect();
            let wires: Vec<_> = variants.iter().map(|v| v.wire.as_str()).collect();
            let docs: Vec<_> = variants
                .iter()
                .map(|v| doc_attrs(&format!("`{}`.", v.wire)))
                .collect();
            let type_name = Literal::string(&def.name);
            quote! {
                #doc
                // Two attributes, each on one line: one list would be printed a derive a line.
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
                #[derive(#serde)]
                #[allow(clippy::enum_variant_names)]
                pub enum #name {
                    #(
                        #docs
                        #[serde(rename = #wires)]
                        #names,
                    )*
                }

                impl #name {
                    /// The value as it is sent.
                    pub fn as_str(self) -> &'static str {
                        match self {
                            #(Self::#names => #wires,)*
                        }
                    }
                }

                impl ::std::fmt::Display for #name {
                    fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(self.as_str())
                    }
                }

                impl ::std::str::FromStr for #name {
                    type Err = cg::UnknownValue;

                    fn from_str(value: &str) -> ::std::result::Result<Self, Self::Err> {
                        match value {
                            #(#wires => ::std::result::Result::Ok(Self::#names),)*
                            _ => ::std::result::Result::Err(cg::UnknownValue::new(#type_name, value)),
                        }
                    }
                }
            }
        }
        TypeKind::Union {
            discriminator,
            variants,
            tagged,
            decode_checked,
        } => match discriminator {
            Some(property) if *tagged => tagged_union(&name, doc, property, variants, usage),
            _ => union(
                &name,
                doc,
                discriminator.as_deref(),
                variants,
                usage,
                def.validated && *decode_checked,
            ),
        },
    }
}

/// The serde derives a type needs: `Serialize` where it is sent, `Deserialize` where it is read.
fn serde_derives(usage: Usage) -> TokenStream {
    match (usage.serialize, usage.deserialize) {
        (true, true) => quote!(::serde::Serialize, ::serde::Deserialize),
        (true, false) => quote!(::serde::Serialize),
        // Never neither: a type no operation uses gets both.
        _ => quote!(::serde::Deserialize),
    }
}

fn struct_field(owner: &str, field: &Field, usage: Usage) -> TokenStream {
    let name = ident(&field.name);
    let here = TokenStream::new();
    let ty = rust_type(&field.field_type(), &here);
    let doc = doc_attrs(
        field
            .doc
            .as_deref()
            .unwrap_or(&format!("The `{}` property.", field.wire)),
    );
    let wire = &field.wire;
    let rename = (name.to_string().trim_start_matches("r#") != wire.as_str())
        .then(|| quote!(#[serde(rename = #wire)]));
    // Optional: absent is `None` and not sent. An explicit `null` is refused unless the property
    // is nullable, and then kept apart from absent (`Some(None)`).
    // Through the module's `cg` (the support crate's `codegen`): short enough that each
    // attribute stays on one line, which halves the generated lines of real specs.
    if field.default.is_some() && !field.required {
        // Absent takes the default (so absent and the default are one value, sent and
        // fingerprinted alike); the value is always sent.
        let function = format!("{}::{}", ident(owner), default_fn(field));
        let attr = usage
            .deserialize
            .then(|| quote!(#[serde(default = #function)]));
        return quote! {
            #doc
            #rename
            #attr
            pub #name: #ty,
        };
    }
    let skip = (!field.required).then(|| {
        let with = if field.ty.is_option() {
            "cg::nullable"
        } else {
            "cg::some"
        };
        let deserialize = format!("{with}::deserialize");
        match (usage.serialize, usage.deserialize) {
            (true, true) => {
                quote!(#[serde(default, with = #with, skip_serializing_if = "cg::is_none")])
            }
            (true, false) => quote!(#[serde(skip_serializing_if = "cg::is_none")]),
            _ => quote!(#[serde(default, deserialize_with = #deserialize)]),
        }
    });
    // A required multipart array part: absent is the empty array (RFC 7578 cannot send one).
    let empty = (field.absent_is_empty && usage.deserialize).then(|| quote!(#[serde(default)]));
    quote! {
        #doc
        #rename
        #skip
        #empty
        pub #name: #ty,
    }
}

/// A union of structs whose tag is implied: serde's internally tagged enum. The tag is written
/// first on serialisation and checked on deserialisation (an unknown value is an error naming
/// it and the known ones); a variant with several tags reads them all and writes the first.
fn tagged_union(
    name: &proc_macro2::Ident,
    doc: TokenStream,
    property: &str,
    variants: &[UnionVariant],
    usage: Usage,
) -> TokenStream {
    let here = TokenStream::new();
    let serde = serde_derives(usage);
    let arms = variants.iter().map(|v| {
        let variant = ident(&v.name);
        let ty = rust_type(&v.ty, &here);
        let doc = doc_attrs(&format!(
            "`{property}`: {}.",
            v.tags
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let rename = v.tags.first().map(|t| quote!(rename = #t));
        let aliases = v.tags.iter().skip(1).map(|t| quote!(, alias = #t));
        quote! {
            #doc
            #[serde(#rename #(#aliases)*)]
            #variant(#ty),
        }
    });
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq, #serde)]
        #[serde(tag = #property)]
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #name {
            #(#arms)*
        }
    }
}

/// An untagged union whose alternatives have checks, read as JSON Schema reads `anyOf`: the
/// first alternative that decodes *and* passes its checks, else the first that decodes (whose
/// checks then say what is wrong), else serde's own error. serde's derived untagged enum takes
/// the first alternative that decodes, and a value a later alternative accepts (`"xxxx"` for
/// `[{maxLength: 3}, {pattern: '^x+$'}]`) was refused.
fn checked_untagged_union(
    name: &proc_macro2::Ident,
    doc: TokenStream,
    docs: &[TokenStream],
    names: &[proc_macro2::Ident],
    types: &[TokenStream],
    usage: Usage,
) -> TokenStream {
    let declaration = hand_decoded_enum(name, doc, docs, names, types, usage);
    let message = format!("data did not match any variant of untagged enum {name}");
    quote! {
        #declaration

        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                let value = <::serde_json::Value as ::serde::Deserialize>::deserialize(deserializer)?;
                let mut decoded = ::std::option::Option::None;
                #(
                    if let ::std::result::Result::Ok(alternative) = <#types as ::serde::Deserialize>::deserialize(&value) {
                        let candidate = Self::#names(alternative);
                        if cg::Validate::validate(&candidate, &cg::FieldPath::Root("")).is_ok() {
                            return ::std::result::Result::Ok(candidate);
                        }
                        decoded.get_or_insert(candidate);
                    }
                )*
                decoded.ok_or_else(|| ::serde::de::Error::custom(#message))
            }
        }
    }
}

/// The declaration of a union whose `Deserialize` is written by hand (a checked or a
/// discriminated one): `Serialize`, untagged, where it is sent.
fn hand_decoded_enum(
    name: &proc_macro2::Ident,
    doc: TokenStream,
    docs: &[TokenStream],
    names: &[proc_macro2::Ident],
    types: &[TokenStream],
    usage: Usage,
) -> TokenStream {
    let serialize = usage.serialize.then(|| quote!(::serde::Serialize));
    let untagged = usage.serialize.then(|| quote!(#[serde(untagged)]));
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq, #serialize)]
        #untagged
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #name {
            #(
                #docs
                #names(#types),
            )*
        }
    }
}

fn union(
    name: &proc_macro2::Ident,
    doc: TokenStream,
    discriminator: Option<&str>,
    variants: &[UnionVariant],
    usage: Usage,
    decode_checked: bool,
) -> TokenStream {
    let here = TokenStream::new();
    let names: Vec<_> = variants.iter().map(|v| ident(&v.name)).collect();
    let types: Vec<_> = variants.iter().map(|v| rust_type(&v.ty, &here)).collect();
    let docs: Vec<_> = variants
        .iter()
        .map(|v| {
            doc_attrs(&match v.tags.as_slice() {
                [] => format!("The `{}` alternative.", v.name),
                tags => format!(
                    "Selected by {}.",
                    tags.iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        })
        .collect();
    if discriminator.is_none() && usage.deserialize && decode_checked {
        return checked_untagged_union(name, doc, &docs, &names, &types, usage);
    }
    let Some(property) = discriminator.filter(|_| usage.deserialize) else {
        // Untagged both ways; a discriminated union that is only sent serialises untagged too.
        let serde = serde_derives(usage);
        return quote! {
            #doc
            #[derive(Debug, Clone, PartialEq, #serde)]
            #[serde(untagged)]
            #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
            pub enum #name {
                #(
                    #docs
                    #names(#types),
                )*
            }
        };
    };
    // Tagged: serialise untagged (each alternative carries its own tag property), deserialise by
    // looking at the tag first so that the error names the tag rather than every alternative.
    let arms = variants.iter().zip(&names).map(|(v, n)| {
        let tags = &v.tags;
        quote! {
            #(::std::option::Option::Some(#tags))|* => ::serde_json::from_value(value)
                .map(Self::#n)
                .map_err(::serde::de::Error::custom),
        }
    });
    let known = variants
        .iter()
        .flat_map(|v| v.tags.iter().map(|t| format!("`{t}`")))
        .collect::<Vec<_>>()
        .join(", ");
    let declaration = hand_decoded_enum(name, doc, &docs, &names, &types, usage);
    quote! {
        #declaration

        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                let value = <::serde_json::Value as ::serde::Deserialize>::deserialize(deserializer)?;
                let tag = value
                    .get(#property)
                    .and_then(::serde_json::Value::as_str)
                    .map(::std::borrow::ToOwned::to_owned);
                match tag.as_deref() {
                    #(#arms)*
                    ::std::option::Option::Some(other) => ::std::result::Result::Err(::serde::de::Error::custom(::std::format!("unknown `{}` {}; expected one of {}", #property, other, #known))),
                    ::std::option::Option::None => ::std::result::Result::Err(::serde::de::Error::missing_field(#property)),
                }
            }
        }
    }
}

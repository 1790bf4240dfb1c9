//! The IR's type model: what a use site refers to (`TypeRef`), what a schema becomes (`TypeDef`, `TypeKind`, fields and variants).

use super::*;

/// How a use site refers to a type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TypeRef {
    /// `String`.
    String,
    /// `bool`.
    Bool,
    /// `i32` (`format: int32`).
    I32,
    /// `i64` (integers without `int32`).
    I64,
    /// `f64`.
    F64,
    /// `uuid::Uuid` (`format: uuid`).
    Uuid,
    /// `chrono::DateTime<chrono::Utc>` (`format: date-time`).
    DateTime,
    /// `chrono::NaiveDate` (`format: date`).
    Date,
    /// `serde_json::Value`: anything, or what cannot be expressed.
    Json,
    /// A generated type in the `types` module.
    Named(String),
    /// `Vec<T>`.
    Vec(Box<TypeRef>),
    /// `BTreeMap<String, T>`.
    Map(Box<TypeRef>),
    /// `Option<T>`: a nullable value.
    Option(Box<TypeRef>),
    /// `Box<T>`: breaks a recursive type.
    Boxed(Box<TypeRef>),
    /// A file part of a multipart body (`FilePart`: bytes, filename, content type).
    File,
}

impl TypeRef {
    /// The type without `Option`/`Box` wrappers.
    pub fn innermost(&self) -> &TypeRef {
        match self {
            TypeRef::Option(t) | TypeRef::Boxed(t) => t.innermost(),
            t => t,
        }
    }

    /// Whether the type is `Option<…>`.
    pub fn is_option(&self) -> bool {
        matches!(self, TypeRef::Option(_))
    }

    /// `Option<self>`, unless it already is one.
    pub fn nullable(self) -> TypeRef {
        match self {
            TypeRef::Option(_) => self,
            t => TypeRef::Option(Box::new(t)),
        }
    }
}

/// A type emitted into the `types` module.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDef {
    /// The Rust name, unique in the module.
    pub name: String,
    /// The schema's `description` (or `title`).
    pub doc: Option<String>,
    /// What kind of type it is.
    pub kind: TypeKind,
    /// For an alias: the validation keywords of the aliased schema (`Name: {type: string,
    /// maxLength: 100}`), checked wherever the alias is used.
    pub checks: Checks,
    /// Whether values of this struct or union have anything to validate (their own fields'
    /// keywords, or a type they hold that does): the emitter implements `Validate` for these.
    pub validated: bool,
    /// How the generated code uses the type: it derives `Serialize` and `Deserialize` only where
    /// they are needed (set by `Api::from_spec`).
    pub usage: Usage,
}

/// Which directions a type is converted in: deserialised from requests (parameters, bodies),
/// serialised into responses and fingerprints. A component no operation uses gets both: it is
/// part of the spec's API, for the team to use as it likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// `Serialize`: in a response, or in an idempotent operation's semantic input.
    pub serialize: bool,
    /// `Deserialize`: in a request's parameters or body.
    pub deserialize: bool,
}

/// The named types `ty` holds directly (through `Option`, `Box`, `Vec`, maps).
pub fn named_in(ty: &TypeRef, out: &mut Vec<String>) {
    match ty {
        TypeRef::Named(n) => out.push(n.clone()),
        TypeRef::Option(t) | TypeRef::Boxed(t) | TypeRef::Vec(t) | TypeRef::Map(t) => {
            named_in(t, out)
        }
        _ => {}
    }
}

impl TypeDef {
    /// The named types this type holds directly.
    pub fn holds(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.kind {
            TypeKind::Struct { fields, extra, .. } => {
                for f in fields {
                    named_in(&f.ty, &mut out);
                }
                if let Some(extra) = extra {
                    named_in(extra, &mut out);
                }
            }
            TypeKind::Union { variants, .. } => {
                for v in variants {
                    named_in(&v.ty, &mut out);
                }
            }
            TypeKind::Alias(t) => named_in(t, &mut out),
            TypeKind::StringEnum { .. } => {}
        }
        out
    }
}

/// Alternatives of required properties beside an object's properties: `anyOf` (at least one
/// holds) or `oneOf` (exactly one holds) of schemas that only list `required` names, the way an
/// API says "`amount` or `amount_string`". The object is a struct, and the alternatives a check.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirements {
    /// `oneOf`: exactly one alternative holds; `anyOf`: at least one.
    pub exactly_one: bool,
    /// The property names each alternative requires (wire names, each declared by the object).
    pub alternatives: Vec<Vec<String>>,
}

/// The kinds of emitted type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// An object with known properties.
    Struct {
        /// The properties, in schema order.
        fields: Vec<Field>,
        /// `additionalProperties: false`: unknown properties are rejected.
        deny_unknown: bool,
        /// Typed `additionalProperties` next to known properties (a flattened map).
        extra: Option<TypeRef>,
        /// The validation keywords of the `additionalProperties` values.
        extra_checks: Box<Checks>,
        /// Alternatives of required properties written beside the properties
        /// ([`requirement_alternatives`]).
        requirements: Option<Box<Requirements>>,
    },
    /// A string `enum`.
    StringEnum {
        /// The values, in schema order.
        variants: Vec<EnumVariant>,
    },
    /// `oneOf`/`anyOf`.
    Union {
        /// The discriminator property, when the schema names one.
        discriminator: Option<String>,
        /// The alternatives, in schema order.
        variants: Vec<UnionVariant>,
        /// Internally tagged (`#[serde(tag = "…")]`): every alternative is a struct whose
        /// discriminator property is implied (set by [`imply_tags`]). Otherwise a discriminated
        /// union is read by its tag and written as its alternative, which carries the tag.
        tagged: bool,
        /// Decoded as `anyOf` reads: the first alternative that decodes and passes its checks
        /// (set by [`mark_validated`]). Only for an untagged union with checks that reaches no
        /// such union again, itself included: each level would decode its subtree once per
        /// alternative, and nested ones multiply (k^depth decodes of a recursive body).
        decode_checked: bool,
    },
    /// A named schema that is another type (`Id: {type: string}`).
    Alias(TypeRef),
}

/// A property of a struct.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The Rust field name (snake_case, unique in the struct).
    pub name: String,
    /// The JSON property name.
    pub wire: String,
    /// The property's `description`.
    pub doc: Option<String>,
    /// The type of the value, `Option` when it is nullable.
    pub ty: TypeRef,
    /// Whether the property is `required`.
    pub required: bool,
    /// The property schema's validation keywords.
    pub checks: Checks,
    /// The schema's `default` as written (on an optional property only: a required one is
    /// always sent, so its default means nothing).
    pub default_json: Option<serde_json::Value>,
    /// The default the generated code applies to an absent property: `default_json` written as
    /// a value of the field's type, when it is one (set by [`TypeSpace::finish`]).
    pub default: Option<DefaultExpr>,
    /// The discriminator property of the tagged unions this struct is used through, and only
    /// through (see [`imply_tags`]): no Rust field, since the union's variant implies it (serde
    /// writes and checks it). It still counts in the lock's shape: the JSON is the same.
    pub implied_tag: bool,
    /// A required array part of a multipart body sent one part per item: RFC 7578 cannot spell
    /// an empty array that way, so the server reads an absent part as the empty array. Not an array
    /// sent as one JSON part (`contentType: application/json`), which can spell `[]`.
    pub absent_is_empty: bool,
}

impl Field {
    /// The type of the field: `Option` unless required, defaulted or not nullable;
    /// `Option<Option<T>>` when optional and nullable (null and absent stay distinct). A
    /// defaulted property is its value's type: absent, it takes the default.
    pub fn field_type(&self) -> TypeRef {
        if self.required || self.default.is_some() {
            self.ty.clone()
        } else {
            // Absent is the outer `None`; a nullable property's `null` is `Some(None)`.
            TypeRef::Option(Box::new(self.ty.clone()))
        }
    }
}

/// A value of a string enum.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumVariant {
    /// The Rust variant name.
    pub name: String,
    /// The JSON string.
    pub wire: String,
}

/// An alternative of a union.
#[derive(Debug, Clone, PartialEq)]
pub struct UnionVariant {
    /// The Rust variant name.
    pub name: String,
    /// The alternative's type.
    pub ty: TypeRef,
    /// The discriminator values that select it (empty for untagged unions).
    pub tags: Vec<String>,
    /// The alternative's validation keywords (inline alternatives only).
    pub checks: Checks,
}

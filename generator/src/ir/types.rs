//! The type half of the IR: what Rust type every schema becomes.
//!
//! [`TypeSpace`] converts schemas (component schemas and inline ones) into [`TypeDef`]s named from
//! their context (`Widget`, `CreateWidgetRequestBody`, `WidgetColor`), and hands back a
//! [`TypeRef`] for each use. Component schemas are named first, in document order, so they keep
//! their own names; a `$ref` is registered before its target is converted, which makes recursive
//! schemas terminate, and targets are converted from a work queue rather than by recursion, so a
//! long chain of references cannot exhaust the stack. What cannot be expressed becomes
//! `serde_json::Value`; nothing here panics on a strange schema.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::loader::{FileId, Key, LoadedSpec, Node, NodeRef, RefTarget, Value};

use super::names::{Namespace, snake_name, type_name};

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

/// A `default` as a value of the type it is the default of, ready to be written as Rust.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultExpr {
    /// A `String`.
    Str(String),
    /// A `bool`.
    Bool(bool),
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// An `f64`.
    F64(f64),
    /// A value of the string enum `ty`.
    Variant {
        /// The enum's type name.
        ty: String,
        /// The variant's name.
        variant: String,
    },
    /// `None` of a nullable value (`default: null`).
    Null,
    /// `Some(…)` of a nullable value.
    Some(Box<DefaultExpr>),
    /// A list.
    Vec(Vec<DefaultExpr>),
    /// An empty map (`default: {}`).
    EmptyMap,
}

impl DefaultExpr {
    /// Whether writing the value allocates (a `String`, a non-empty list): `unwrap_or_else`
    /// rather than `unwrap_or`.
    pub fn allocates(&self) -> bool {
        match self {
            DefaultExpr::Str(_) => true,
            DefaultExpr::Vec(items) => !items.is_empty(),
            DefaultExpr::Some(inner) => inner.allocates(),
            _ => false,
        }
    }
}

/// Nesting of a `default` value deeper than this is not applied.
const MAX_DEFAULT_DEPTH: usize = 32;

/// `value` (a schema's `default`) as a value of `ty`, looking through aliases in `defs`: `None`
/// when it is not one (a string for an integer, a value no enum variant has, an `int32` out of
/// range) or its type has no literal form here (formatted strings, objects, unions, free-form
/// JSON): such defaults are not applied.
pub fn resolve_default<'d>(
    value: &serde_json::Value,
    ty: &TypeRef,
    defs: &dyn Fn(&str) -> Option<&'d TypeDef>,
) -> Option<DefaultExpr> {
    resolve_default_at(value, ty, defs, 0)
}

fn resolve_default_at<'d>(
    value: &serde_json::Value,
    ty: &TypeRef,
    defs: &dyn Fn(&str) -> Option<&'d TypeDef>,
    depth: usize,
) -> Option<DefaultExpr> {
    use serde_json::Value as J;
    if depth > MAX_DEFAULT_DEPTH {
        return None;
    }
    Some(match (ty, value) {
        (TypeRef::String, J::String(s)) => DefaultExpr::Str(s.clone()),
        (TypeRef::Bool, J::Bool(b)) => DefaultExpr::Bool(*b),
        (TypeRef::I32, J::Number(n)) => DefaultExpr::I32(i32::try_from(integer(n)?).ok()?),
        (TypeRef::I64, J::Number(n)) => DefaultExpr::I64(integer(n)?),
        (TypeRef::F64, J::Number(n)) => DefaultExpr::F64(n.as_f64().filter(|f| f.is_finite())?),
        (TypeRef::Option(_), J::Null) => DefaultExpr::Null,
        (TypeRef::Option(inner), value) => {
            DefaultExpr::Some(Box::new(resolve_default_at(value, inner, defs, depth + 1)?))
        }
        (TypeRef::Vec(item), J::Array(items)) => DefaultExpr::Vec(
            items
                .iter()
                .map(|v| resolve_default_at(v, item, defs, depth + 1))
                .collect::<Option<Vec<_>>>()?,
        ),
        (TypeRef::Map(_), J::Object(map)) if map.is_empty() => DefaultExpr::EmptyMap,
        (TypeRef::Named(name), value) => match &defs(name)?.kind {
            TypeKind::StringEnum { variants } => {
                let wire = value.as_str()?;
                let variant = variants.iter().find(|v| v.wire == wire)?;
                DefaultExpr::Variant {
                    ty: name.clone(),
                    variant: variant.name.clone(),
                }
            }
            TypeKind::Alias(target) => resolve_default_at(value, target, defs, depth + 1)?,
            _ => return None,
        },
        _ => return None,
    })
}

/// A JSON number that is an integer (`20`, or `20.0` as YAML may write it).
fn integer(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

/// A node of the document as JSON (`default`, `const` values).
pub fn json_of(node: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.clone()),
        Value::Seq(items) => J::Array(items.iter().map(json_of).collect()),
        Value::Map(map) => J::Object(
            map.entries()
                .iter()
                .map(|(k, v)| (k.text.clone(), json_of(v)))
                .collect(),
        ),
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

/// A numeric bound: `minimum`/`maximum`, exclusive by `exclusiveMinimum`/`exclusiveMaximum`
/// (the 3.0 boolean form and the 3.1 numeric form).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// The value may equal the bound.
    Inclusive(f64),
    /// The value must differ from the bound.
    Exclusive(f64),
}

/// The validation keywords of one schema, as far as they are enforced (`format`, `enum` of
/// non-strings and struct property counts are not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraints {
    /// `minLength` (characters).
    pub min_length: Option<u64>,
    /// `maxLength` (characters).
    pub max_length: Option<u64>,
    /// `pattern`: an ECMA-262 regular expression (compiled with the `u` flag, as JSON Schema
    /// 2020-12 recommends and the runtime's `check_pattern` does) that the string must match
    /// somewhere: JSON Schema patterns are not anchored, `^…$` anchors them. Only a pattern that
    /// compiles is kept (one that does not is the `pattern-invalid` finding; with that rule off it
    /// is ignored, like other nonsense values).
    pub pattern: Option<String>,
    /// `minimum` / `exclusiveMinimum`.
    pub minimum: Option<Bound>,
    /// `maximum` / `exclusiveMaximum`.
    pub maximum: Option<Bound>,
    /// `multipleOf` (positive).
    pub multiple_of: Option<f64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems: true`.
    pub unique_items: bool,
    /// `minProperties` (maps).
    pub min_properties: Option<u64>,
    /// `maxProperties` (maps).
    pub max_properties: Option<u64>,
    /// `const`, or an `enum` of one value, when it is a string, number or boolean: the value
    /// must equal it (`body.kind: must be "card"`). A string `enum` of one value is also the
    /// type of a one-variant enum, which enforces it by itself.
    pub constant: Option<Box<serde_json::Value>>,
    /// An `enum` of several values that is not a Rust enum (a string enum that is its own type):
    /// numbers, booleans, strings behind a nullable wrapper. The value must equal one of them
    /// (`query.size: must be one of 10, 20, 50`). Kept for a value whose type holds every value
    /// ([`Constraints::for_type`]); an enum listing an array or an object, or values of several
    /// types, is not enforced (`keyword-not-enforced` says so).
    pub allowed: Option<Box<[serde_json::Value]>>,
}

impl Constraints {
    /// Whether no keyword is set.
    pub fn is_empty(&self) -> bool {
        *self == Constraints::default()
    }

    /// The keywords that apply to values of `ty` (not looking through `Option`/`Box`): lengths
    /// to strings, bounds to numbers, item counts to arrays, property counts to maps; the rest
    /// (say `minLength` on an integer) is ignored, as JSON Schema ignores it.
    pub fn for_type(&self, ty: &TypeRef) -> Constraints {
        let mut out = Constraints::default();
        match ty {
            TypeRef::String => {
                out.min_length = self.min_length;
                out.max_length = self.max_length;
                out.pattern = self.pattern.clone();
                out.constant = self.constant.clone().filter(|c| c.is_string());
                out.allowed = self.allowed_of(|v| v.is_string().then(|| v.clone()));
            }
            TypeRef::I32 | TypeRef::I64 | TypeRef::F64 => {
                out.allowed = self.allowed_of(|v| {
                    let n = v.as_f64()?;
                    match ty {
                        TypeRef::F64 => Some(v.clone()),
                        // An integral value of the type's range, written as an integer.
                        _ if n.fract() != 0.0 => None,
                        TypeRef::I32 if n < f64::from(i32::MIN) || n > f64::from(i32::MAX) => None,
                        _ => v
                            .as_i64()
                            .or_else(|| (n.abs() < 9.0e18).then_some(n as i64))
                            .map(serde_json::Value::from),
                    }
                });
                out.minimum = self.minimum;
                out.maximum = self.maximum;
                out.multiple_of = self.multiple_of;
                out.constant = self.constant.clone().filter(|c| match &**c {
                    serde_json::Value::Number(n) => *ty == TypeRef::F64 || integer(n).is_some(),
                    _ => false,
                });
            }
            TypeRef::Bool => {
                out.constant = self.constant.clone().filter(|c| c.is_boolean());
                out.allowed = self.allowed_of(|v| v.is_boolean().then(|| v.clone()));
            }
            // A JSON value's enum is not checked: form fields arrive as strings (`"1"`), which a
            // comparison with the spec's `1` would refuse (`keyword-not-enforced` says so).
            TypeRef::Json => out.constant = self.constant.clone(),
            TypeRef::Vec(_) => {
                out.min_items = self.min_items;
                out.max_items = self.max_items;
                out.unique_items = self.unique_items;
            }
            TypeRef::Map(_) => {
                out.min_properties = self.min_properties;
                out.max_properties = self.max_properties;
            }
            TypeRef::File => {
                // A file's lengths count its bytes.
                out.min_length = self.min_length;
                out.max_length = self.max_length;
            }
            _ => {}
        }
        out
    }

    /// The `enum` values as a value of some type holds them, as `keep` maps them; `null` is
    /// left to the `Option` around the type. `None` when a value is not of the type (an
    /// `enum: ["1", "2"]` of an integer, a parameter read as one string whose enum lists
    /// numbers): such an enum is not enforced, and `keyword-not-enforced` says so, rather than
    /// refuse every request.
    fn allowed_of(
        &self,
        keep: impl Fn(&serde_json::Value) -> Option<serde_json::Value>,
    ) -> Option<Box<[serde_json::Value]>> {
        self.allowed
            .as_ref()?
            .iter()
            .filter(|v| !v.is_null())
            .map(keep)
            .collect()
    }
}

/// The validation keywords of a use site, shaped like its [`TypeRef`]: the value's own keywords,
/// and those of array items and map values. Named types carry their own (a `$ref` adds nothing
/// here); `Option`/`Box` wrappers are looked through.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks {
    /// Keywords on the value itself.
    pub own: Constraints,
    /// Keywords of the array's `items`.
    pub items: Option<Box<Checks>>,
    /// Keywords of the map's `additionalProperties`.
    pub values: Option<Box<Checks>>,
}

impl Checks {
    /// Whether nothing at all is checked.
    pub fn is_empty(&self) -> bool {
        self.own.is_empty() && self.items.is_none() && self.values.is_none()
    }

    /// The checks of a schema at a use site, following the same shapes as the type conversion.
    pub fn of(node: &Node) -> Checks {
        checks_of(node, 0)
    }
}

/// The collection of emitted types, and the converter from schemas.
#[derive(Debug)]
pub struct TypeSpace<'s> {
    spec: &'s LoadedSpec,
    defs: BTreeMap<String, TypeDef>,
    by_target: HashMap<RefTarget, String>,
    /// Inline schemas (and components) by their structure, descriptions left out: a schema equal
    /// to one already seen is that type again, not a copy of it.
    /// The value: the type, and the name of its definition when it has one of its own.
    by_shape: HashMap<String, (TypeRef, Option<String>)>,
    pending: VecDeque<(String, NodeRef<'s>)>,
    names: Namespace,
}

/// Nesting of inline schemas deeper than this becomes `serde_json::Value`.
const MAX_INLINE_DEPTH: usize = 64;

impl<'s> TypeSpace<'s> {
    /// The spec the types come from.
    pub fn spec(&self) -> &'s LoadedSpec {
        self.spec
    }

    /// An empty type space for `spec`, with every `components/schemas` name reserved in document
    /// order so that component schemas keep their names.
    pub fn new(spec: &'s LoadedSpec) -> TypeSpace<'s> {
        let mut space = TypeSpace {
            spec,
            defs: BTreeMap::new(),
            by_target: HashMap::new(),
            by_shape: HashMap::new(),
            pending: VecDeque::new(),
            names: Namespace::default(),
        };
        let root = spec.root();
        if let Some(schemas) = root
            .node
            .get("components")
            .and_then(|c| c.get("schemas"))
            .and_then(Node::as_map)
        {
            for (key, _) in schemas.entries() {
                let reference = format!(
                    "#/components/schemas/{}",
                    crate::loader::pointer::escape(&key.text)
                );
                let Ok(target) = spec.ref_target(root.file, &reference) else {
                    continue;
                };
                let name = space.register(target.clone(), &key.text);
                let node = spec
                    .document(target.file)
                    .and_then(|doc| crate::loader::pointer::lookup(doc, &target.pointer));
                if let Some(node) = node
                    && node.ref_target().is_none()
                    && matches!(shape_of(node), Shape::Defined)
                    && !is_nullable(node)
                {
                    // An inline schema written out exactly like a component is that component.
                    let key = space.shape_key(NodeRef {
                        file: target.file,
                        node,
                    });
                    space
                        .by_shape
                        .entry(key)
                        .or_insert((TypeRef::Named(name.clone()), Some(name)));
                }
            }
        }
        // Components first, in document order: the schemas inside them are named from them,
        // whatever order operations come in.
        space.drain();
        space
    }

    /// Converts every registered component schema (used or not), then returns the types sorted
    /// by name, with recursive fields boxed.
    pub fn finish(mut self) -> Vec<TypeDef> {
        self.drain();
        apply_defaults(&mut self.defs);
        box_recursion(&mut self.defs);
        let mut defs: Vec<TypeDef> = self.defs.into_values().collect();
        mark_validated(&mut defs);
        defs
    }

    /// The type of `schema` at a use site; inline types are named `hint`.
    pub fn type_of(&mut self, schema: NodeRef<'s>, hint: &str) -> TypeRef {
        let ty = self.convert(schema, hint, 0);
        self.drain();
        ty
    }

    /// The struct of a `multipart/form-data` body (`parts` as [`crate::spec::multipart::parts`]
    /// read them), named `hint`: its text and JSON parts typed as properties are, its file parts
    /// [`TypeRef::File`]. Its own definition even when the schema is a component's `$ref`, so
    /// the component keeps its JSON meaning. Returns the type and each part's field name.
    pub fn multipart(
        &mut self,
        schema: NodeRef<'s>,
        parts: &[crate::spec::multipart::PartSpec<'s>],
        hint: &str,
    ) -> (TypeRef, Vec<String>) {
        use crate::spec::multipart::PartKind;
        let at = self.spec.deref(schema);
        let name = self.names.claim(&type_name(hint));
        let required = required_of(at.node);
        let mut ns = Namespace::default();
        let mut fields = Vec::new();
        for part in parts {
            let wire = part.name;
            let property = self.spec.deref(part.schema);
            let ty = match part.kind {
                PartKind::File { many: false } => TypeRef::File,
                PartKind::File { many: true } => TypeRef::Vec(Box::new(TypeRef::File)),
                _ => self.convert(part.schema, &format!("{name}{}", type_name(wire)), 1),
            };
            let required = required.contains(wire);
            let checks = match part.kind {
                PartKind::File { many: true } => Checks {
                    own: Checks::of(property.node).own,
                    items: property.node.get("items").map(|items| {
                        Box::new(Checks::of(
                            self.spec
                                .deref(NodeRef {
                                    file: property.file,
                                    node: items,
                                })
                                .node,
                        ))
                    }),
                    values: None,
                },
                PartKind::File { many: false } => Checks::of(property.node),
                _ => Checks::of(part.schema.node),
            };
            // One JSON part (`contentType: application/json`) spells `[]`: absent is absent.
            let absent_is_empty = required
                && matches!(ty, TypeRef::Vec(_))
                && !matches!(part.kind, PartKind::Json { declared: true });
            fields.push(Field {
                name: ns.claim(&snake_name(wire)),
                wire: wire.to_string(),
                doc: description(property.node),
                ty,
                required,
                checks,
                default_json: if required || matches!(part.kind, PartKind::File { .. }) {
                    None
                } else {
                    self.default_of(part.schema)
                },
                default: None,
                implied_tag: false,
                absent_is_empty,
            });
        }
        let deny_unknown =
            at.node.get("additionalProperties").and_then(Node::as_bool) == Some(false);
        let names = fields.iter().map(|f| f.name.clone()).collect();
        self.defs.insert(
            name.clone(),
            TypeDef {
                name: name.clone(),
                doc: description(at.node),
                kind: TypeKind::Struct {
                    fields,
                    deny_unknown,
                    extra: None,
                    extra_checks: Box::default(),
                    requirements: None,
                },
                checks: Checks::default(),
                validated: false,
                usage: Usage::default(),
            },
        );
        self.drain();
        (TypeRef::Named(name), names)
    }

    /// Whether values of `ty` are written as one string (parameters, headers): primitives,
    /// string enums, and aliases of those.
    pub fn is_scalar(&self, ty: &TypeRef) -> bool {
        let mut ty = ty;
        for _ in 0..16 {
            match ty {
                TypeRef::String
                | TypeRef::Bool
                | TypeRef::I32
                | TypeRef::I64
                | TypeRef::F64
                | TypeRef::Uuid
                | TypeRef::DateTime
                | TypeRef::Date => return true,
                TypeRef::Named(name) => match self.defs.get(name).map(|d| &d.kind) {
                    Some(TypeKind::StringEnum { .. }) => return true,
                    Some(TypeKind::Alias(target)) => ty = target,
                    _ => return false,
                },
                _ => return false,
            }
        }
        false
    }

    /// The `default` of the schema at a use site: its own, else (for a `$ref`) its target's.
    pub fn default_of(&self, at: NodeRef<'s>) -> Option<serde_json::Value> {
        if let Some(value) = at.node.get("default") {
            return Some(json_of(value));
        }
        at.node.ref_target()?;
        self.spec.deref(at).node.get("default").map(json_of)
    }

    /// Reserves a type name for something that is not a schema (kept out of `types`).
    pub fn reserve(&mut self, name: &str) -> String {
        self.names.claim(name)
    }

    fn register(&mut self, target: RefTarget, raw_name: &str) -> String {
        if let Some(name) = self.by_target.get(&target) {
            return name.clone();
        }
        let name = self.names.claim(&type_name(raw_name));
        self.by_target.insert(target.clone(), name.clone());
        if let Some(node) = self
            .spec
            .document(target.file)
            .and_then(|doc| crate::loader::pointer::lookup(doc, &target.pointer))
        {
            self.pending.push_back((
                name.clone(),
                NodeRef {
                    file: target.file,
                    node,
                },
            ));
        }
        name
    }

    fn drain(&mut self) {
        while let Some((name, node)) = self.pending.pop_front() {
            if self.defs.contains_key(&name) {
                continue;
            }
            let def = self.define(&name, node, 0);
            self.defs.insert(name, def);
        }
    }

    /// Follows a `$ref` to the name of its target, registering it when new.
    fn named(&mut self, at: NodeRef<'s>, reference: &str) -> TypeRef {
        match self.spec.ref_target(at.file, reference) {
            Ok(target) => {
                let raw = self
                    .spec
                    .target_name(&target)
                    .unwrap_or_else(|| "Schema".to_string());
                TypeRef::Named(self.register(target, &raw))
            }
            Err(_) => TypeRef::Json,
        }
    }

    /// The type of a schema at a use site.
    fn convert(&mut self, at: NodeRef<'s>, hint: &str, depth: usize) -> TypeRef {
        if depth > MAX_INLINE_DEPTH {
            return TypeRef::Json;
        }
        if let Some(reference) = at.node.ref_target() {
            return self.named(at, reference);
        }
        if at.node.as_map().is_none() {
            // `true`/`{}` schemas accept anything; `false` accepts nothing we could type.
            return TypeRef::Json;
        }
        let nullable = is_nullable(at.node);
        let ty = match shape_of(at.node) {
            Shape::Primitive(ty) => ty,
            Shape::Array(items) => {
                let item = match items {
                    Some(items) => self.convert(
                        NodeRef {
                            file: at.file,
                            node: items,
                        },
                        &format!("{hint}Item"),
                        depth + 1,
                    ),
                    None => TypeRef::Json,
                };
                TypeRef::Vec(Box::new(item))
            }
            Shape::Map(values) => {
                let value = match values {
                    Some(values) => self.convert(
                        NodeRef {
                            file: at.file,
                            node: values,
                        },
                        &format!("{hint}Value"),
                        depth + 1,
                    ),
                    None => TypeRef::Json,
                };
                TypeRef::Map(Box::new(value))
            }
            Shape::Nullable(inner) => self
                .convert(
                    NodeRef {
                        file: at.file,
                        node: inner,
                    },
                    hint,
                    depth + 1,
                )
                .nullable(),
            Shape::SingleAllOf(inner) => self.convert(
                NodeRef {
                    file: at.file,
                    node: inner,
                },
                hint,
                depth + 1,
            ),
            Shape::Json => TypeRef::Json,
            Shape::Defined => {
                let key = self.shape_key(at);
                let hint = match at.node.get("title").and_then(Node::as_str) {
                    Some(title) if !type_name(title).is_empty() => type_name(title),
                    _ => type_name(hint),
                };
                if let Some(seen) = self.by_shape.get(&key).cloned() {
                    // The same structure seen before (a component or an earlier inline schema):
                    // that type, not a copy of it. The name this copy would have had stays
                    // usable, as an alias, so sharing (or a new operation taking the first
                    // place) never takes a name away.
                    let (seen, canonical) = seen;
                    if let Some(canonical) = canonical
                        && canonical != hint
                        && !self.names.contains(&hint)
                    {
                        let alias = self.names.claim(&hint);
                        self.defs.insert(
                            alias.clone(),
                            TypeDef {
                                name: alias,
                                doc: Some(format!("The same schema as [`{canonical}`].")),
                                kind: TypeKind::Alias(TypeRef::Named(canonical.clone())),
                                checks: Checks::default(),
                                validated: false,
                                usage: Usage::default(),
                            },
                        );
                    }
                    return seen;
                }
                let name = self.names.claim(&hint);
                let def = self.define(&name, at, depth + 1);
                let (ty, named) = if let TypeKind::Alias(target) = &def.kind {
                    // An inline schema that is just another type needs no name.
                    let target = target.clone();
                    (if nullable { target.nullable() } else { target }, None)
                } else {
                    self.defs.insert(name.clone(), def);
                    let ty = TypeRef::Named(name.clone());
                    (if nullable { ty.nullable() } else { ty }, Some(name))
                };
                self.by_shape.insert(key, (ty.clone(), named));
                return ty;
            }
        };
        if nullable { ty.nullable() } else { ty }
    }

    /// The structure of a schema as one string: every keyword that shapes the generated type or
    /// its checks, in source order, with `$ref`s replaced by the schema they point to and
    /// annotations (descriptions, titles, examples, extensions, …) left out. Two schemas with
    /// the same key generate the same type.
    fn shape_key(&self, at: NodeRef<'s>) -> String {
        let mut out = String::new();
        self.write_shape(at.file, at.node, &mut out);
        out
    }

    fn write_shape(&self, file: FileId, node: &Node, out: &mut String) {
        use std::fmt::Write as _;
        match &node.value {
            Value::Seq(items) => {
                out.push('[');
                for item in items {
                    self.write_shape(file, item, out);
                    out.push(',');
                }
                out.push(']');
            }
            Value::Map(map) => {
                out.push('{');
                for (key, value) in map.entries() {
                    let k = key.text.as_str();
                    if is_annotation(k) {
                        continue;
                    }
                    if k == "$ref"
                        && let Some(reference) = value.as_str()
                    {
                        match self.spec.ref_target(file, reference) {
                            Ok(target) => {
                                let _ = write!(out, "$ref={}#{:?},", target.file.0, target.pointer);
                            }
                            Err(_) => {
                                let _ = write!(out, "$ref?{reference:?},");
                            }
                        }
                        continue;
                    }
                    if matches!(
                        k,
                        "properties" | "patternProperties" | "$defs" | "definitions"
                    ) && let Some(properties) = value.as_map()
                    {
                        // Names are data here, not keywords: none is left out.
                        let _ = write!(out, "{k}={{");
                        for (name, schema) in properties.entries() {
                            let _ = write!(out, "{:?}:", name.text);
                            self.write_shape(file, schema, out);
                            out.push(',');
                        }
                        out.push_str("},");
                        continue;
                    }
                    let _ = write!(out, "{k:?}=");
                    if matches!(k, "enum" | "const" | "default") {
                        // Values, not schemas: written whole.
                        write_value(value, out);
                    } else {
                        self.write_shape(file, value, out);
                    }
                    out.push(',');
                }
                out.push('}');
            }
            _ => write_value(node, out),
        }
    }

    /// The definition of a named schema.
    fn define(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeDef {
        let doc = description(at.node);
        let kind = self.kind_of(name, at, depth);
        let checks = match kind {
            TypeKind::Alias(_) => Checks::of(at.node),
            _ => Checks::default(),
        };
        TypeDef {
            name: name.to_string(),
            doc,
            kind,
            checks,
            validated: false,
            usage: Usage::default(),
        }
    }

    fn kind_of(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeKind {
        if depth > MAX_INLINE_DEPTH {
            return TypeKind::Alias(TypeRef::Json);
        }
        if let Some(reference) = at.node.ref_target() {
            return TypeKind::Alias(self.named(at, reference));
        }
        let nullable = is_nullable(at.node);
        let wrap = |t: TypeRef| if nullable { t.nullable() } else { t };
        if let Some(variants) = string_enum(at.node) {
            let mut ns = Namespace::default();
            let variants = variants
                .into_iter()
                .map(|wire| EnumVariant {
                    name: ns.claim(&type_name(&wire)),
                    wire,
                })
                .collect();
            let kind = TypeKind::StringEnum { variants };
            if nullable {
                // A nullable enum: define the enum under a derived name, alias the nullable.
                let inner = self.names.claim(&format!("{name}Value"));
                self.defs.insert(
                    inner.clone(),
                    TypeDef {
                        name: inner.clone(),
                        doc: description(at.node),
                        kind,
                        checks: Checks::default(),
                        validated: false,
                        usage: Usage::default(),
                    },
                );
                return TypeKind::Alias(TypeRef::Named(inner).nullable());
            }
            return kind;
        }
        match shape_of(at.node) {
            Shape::Defined => {}
            _ => {
                let name_hint = name.to_string();
                // Primitive, array, map: an alias to the use-site type.
                let mut stripped = self.convert(at, &format!("{name_hint}Inner"), depth + 1);
                if nullable {
                    stripped = stripped.nullable();
                }
                return TypeKind::Alias(stripped);
            }
        }
        if requirement_alternatives(at.node).is_some() {
            return self.object(name, at, depth);
        }
        if let Some(alternatives) = union_members(at.node) {
            let non_null: Vec<&Node> = alternatives.into_iter().filter(|n| !is_null(n)).collect();
            return self.union(name, at, non_null, depth);
        }
        if let Some(members) = at.node.get("allOf").and_then(Node::as_seq) {
            return match self.merge_all_of(name, at, members, depth) {
                Some(kind) => kind,
                None => TypeKind::Alias(wrap(TypeRef::Json)),
            };
        }
        self.object(name, at, depth)
    }

    fn union(
        &mut self,
        name: &str,
        at: NodeRef<'s>,
        alternatives: Vec<&'s Node>,
        depth: usize,
    ) -> TypeKind {
        let discriminator = at
            .node
            .get("discriminator")
            .and_then(|d| d.get("propertyName"))
            .and_then(Node::as_str)
            .map(str::to_string);
        let mapping: Vec<(String, String)> = at
            .node
            .get("discriminator")
            .and_then(|d| d.get("mapping"))
            .and_then(Node::as_map)
            .map(|m| {
                m.entries()
                    .iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.text.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let mut ns = Namespace::default();
        let mut variants = Vec::new();
        for (i, alternative) in alternatives.into_iter().enumerate() {
            let node = NodeRef {
                file: at.file,
                node: alternative,
            };
            let reference = alternative.ref_target();
            let label = match reference {
                Some(r) => self
                    .spec
                    .ref_target(at.file, r)
                    .ok()
                    .and_then(|t| self.spec.target_name(&t))
                    .unwrap_or_else(|| format!("Variant{i}")),
                None => format!("Variant{i}"),
            };
            let ty = self.convert(node, &format!("{name}{}", type_name(&label)), depth + 1);
            let variant_name = match (&ty, reference) {
                (_, Some(_)) => type_name(&label),
                // `PetCat` inside `Pet` is the variant `Cat`; a remainder that cannot start a
                // name (`Pet2`, a titled alternative sharing its union's title) keeps the whole.
                (TypeRef::Named(n), None) => match n.strip_prefix(name) {
                    Some(rest) if rest.starts_with(|c: char| c.is_ascii_uppercase()) => {
                        rest.to_string()
                    }
                    _ => n.clone(),
                },
                (other, None) => primitive_label(other).unwrap_or(format!("Variant{i}")),
            };
            let variant_name = if variant_name.is_empty() {
                format!("Variant{i}")
            } else {
                variant_name
            };
            let mut tags = Vec::new();
            if discriminator.is_some()
                && let Some(r) = reference
            {
                let target = self.spec.ref_target(at.file, r).ok();
                for (value, mapped) in &mapping {
                    let same = mapped == r
                        || (target.is_some()
                            && self.spec.ref_target(at.file, mapped).ok() == target)
                        || mapped == &label;
                    if same {
                        tags.push(value.clone());
                    }
                }
                if tags.is_empty() {
                    tags.push(label.clone());
                }
            }
            variants.push(UnionVariant {
                name: ns.claim(&variant_name),
                ty,
                tags,
                checks: Checks::of(alternative),
            });
        }
        // A discriminator is only usable when every alternative is a named schema with a tag.
        let discriminator = discriminator.filter(|_| variants.iter().all(|v| !v.tags.is_empty()));
        TypeKind::Union {
            discriminator,
            variants,
            tagged: false,
            decode_checked: false,
        }
    }

    /// Merges `allOf` members that are objects into one struct; `None` when a member is not.
    fn merge_all_of(
        &mut self,
        name: &str,
        at: NodeRef<'s>,
        members: &'s [Node],
        depth: usize,
    ) -> Option<TypeKind> {
        let objects = all_of_objects(self.spec, at, members)?;
        let mut fields: Vec<Field> = Vec::new();
        let mut required: BTreeSet<String> = BTreeSet::new();
        let mut deny_unknown = false;
        let mut ns = Namespace::default();
        for object in &objects {
            required.extend(required_of(object.node));
            if object
                .node
                .get("additionalProperties")
                .and_then(Node::as_bool)
                == Some(false)
                && objects.len() == 1
            {
                deny_unknown = true;
            }
            for (wire, schema) in properties_of(object.node) {
                if fields.iter().any(|f| f.wire == *wire) {
                    continue;
                }
                let node = NodeRef {
                    file: object.file,
                    node: schema,
                };
                let ty = self.convert(node, &format!("{name}{}", type_name(wire)), depth + 1);
                fields.push(Field {
                    name: ns.claim(&snake_name(wire)),
                    wire: wire.to_string(),
                    doc: description(schema),
                    ty,
                    required: false,
                    checks: Checks::of(schema),
                    default_json: self.default_of(node),
                    default: None,
                    implied_tag: false,
                    absent_is_empty: false,
                });
            }
        }
        for field in &mut fields {
            field.required = required.contains(&field.wire);
            if field.required {
                field.default_json = None;
            }
        }
        Some(TypeKind::Struct {
            fields,
            deny_unknown,
            extra: None,
            extra_checks: Box::default(),
            requirements: None,
        })
    }

    fn object(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeKind {
        let required = required_of(at.node);
        let mut ns = Namespace::default();
        let mut fields = Vec::new();
        for (wire, schema) in properties_of(at.node) {
            let node = NodeRef {
                file: at.file,
                node: schema,
            };
            let ty = self.convert(node, &format!("{name}{}", type_name(wire)), depth + 1);
            let required = required.contains(wire.as_str());
            fields.push(Field {
                name: ns.claim(&snake_name(wire)),
                wire: wire.to_string(),
                doc: description(schema),
                ty,
                required,
                checks: Checks::of(schema),
                default_json: if required {
                    None
                } else {
                    self.default_of(node)
                },
                default: None,
                implied_tag: false,
                absent_is_empty: false,
            });
        }
        let additional = at.node.get("additionalProperties");
        let deny_unknown = additional.and_then(Node::as_bool) == Some(false);
        let (extra, extra_checks) = match additional {
            Some(node) if node.as_map().is_some_and(|m| !m.is_empty()) => {
                let checks = Checks::of(node);
                let node = NodeRef {
                    file: at.file,
                    node,
                };
                (
                    Some(self.convert(node, &format!("{name}Value"), depth + 1)),
                    checks,
                )
            }
            _ => (None, Checks::default()),
        };
        TypeKind::Struct {
            fields,
            deny_unknown,
            extra,
            extra_checks: Box::new(extra_checks),
            requirements: requirement_alternatives(at.node).map(Box::new),
        }
    }
}

/// The objects an `allOf` merges into one struct: the schema itself (its own properties count
/// too) and its members, `$ref`s followed and nested `allOf`s flattened (each node once, at most
/// 256); `None` when a member is not an object (a union, a string enum, a primitive, an array, a
/// map of typed values), and the whole is then any JSON value.
pub(crate) fn all_of_objects<'s>(
    spec: &'s LoadedSpec,
    at: NodeRef<'s>,
    members: &'s [Node],
) -> Option<Vec<NodeRef<'s>>> {
    let mut objects: Vec<NodeRef<'s>> = Vec::new();
    let mut stack: Vec<NodeRef<'s>> = members
        .iter()
        .rev()
        .map(|m| NodeRef {
            file: at.file,
            node: m,
        })
        .collect();
    objects.push(at);
    let mut seen = BTreeSet::new();
    while let Some(member) = stack.pop() {
        let member = spec.deref(member);
        if !seen.insert((member.file, member.node.span)) || objects.len() > 256 {
            continue;
        }
        if let Some(nested) = member.node.get("allOf").and_then(Node::as_seq) {
            objects.push(member);
            stack.extend(nested.iter().rev().map(|m| NodeRef {
                file: member.file,
                node: m,
            }));
            continue;
        }
        if union_members(member.node).is_some() || string_enum(member.node).is_some() {
            return None;
        }
        match shape_of(member.node) {
            // An object of any properties (`{type: object}`, `properties: {}`) adds nothing to
            // the struct, and takes nothing away.
            Shape::Defined | Shape::Json | Shape::Map(None) => objects.push(member),
            _ => return None,
        }
    }
    Some(objects)
}

/// What a schema is, before naming.
enum Shape<'n> {
    Primitive(TypeRef),
    Array(Option<&'n Node>),
    Map(Option<&'n Node>),
    /// A `oneOf`/`anyOf` whose only non-null alternative is this one.
    Nullable(&'n Node),
    /// A `oneOf`/`anyOf`/`allOf` with one alternative (no `null` beside it) and nothing else:
    /// that alternative, no looser.
    SingleAllOf(&'n Node),
    Json,
    /// Needs a named definition: object with properties, string enum, union, merged allOf.
    Defined,
}

fn shape_of(node: &Node) -> Shape<'_> {
    if let Some(members) = union_members(node) {
        let count = members.len();
        let non_null: Vec<&Node> = members.into_iter().filter(|n| !is_null(n)).collect();
        return match non_null.as_slice() {
            [] => Shape::Json,
            // `anyOf: [X, {type: null}]`: X or null.
            [one] if count > 1 => Shape::Nullable(one),
            // `anyOf: [X]`: exactly X (an `Option` would accept a null the schema forbids).
            [one] => Shape::SingleAllOf(one),
            _ => Shape::Defined,
        };
    }
    if let Some(members) = node.get("allOf").and_then(Node::as_seq) {
        if members.len() == 1 && node.get("properties").is_none() {
            return Shape::SingleAllOf(&members[0]);
        }
        return Shape::Defined;
    }
    if string_enum(node).is_some() {
        return Shape::Defined;
    }
    let types = types_of(node);
    let ty = match types.as_slice() {
        [] => {
            if node.get("properties").is_some() {
                "object"
            } else if node.get("items").is_some() {
                "array"
            } else if node.get("additionalProperties").is_some() {
                "object"
            } else {
                return Shape::Json;
            }
        }
        [one] => one.as_str(),
        _ => return Shape::Json,
    };
    let format = node.get("format").and_then(Node::as_str);
    match ty {
        "string" => Shape::Primitive(match format {
            Some("uuid") => TypeRef::Uuid,
            Some("date-time") => TypeRef::DateTime,
            Some("date") => TypeRef::Date,
            _ => TypeRef::String,
        }),
        "integer" => Shape::Primitive(match format {
            Some("int32") => TypeRef::I32,
            _ => TypeRef::I64,
        }),
        "number" => Shape::Primitive(TypeRef::F64),
        "boolean" => Shape::Primitive(TypeRef::Bool),
        "array" => Shape::Array(node.get("items")),
        "object" => {
            let has_properties = node
                .get("properties")
                .and_then(Node::as_map)
                .is_some_and(|m| !m.is_empty());
            if has_properties {
                return Shape::Defined;
            }
            match node.get("additionalProperties") {
                Some(n) if n.as_bool() == Some(false) => Shape::Defined,
                Some(n) if n.as_map().is_some_and(|m| !m.is_empty()) => Shape::Map(Some(n)),
                _ => Shape::Map(None),
            }
        }
        _ => Shape::Json,
    }
}

/// Keywords that describe a schema without changing the values it accepts or the type
/// generated for it.
fn is_annotation(keyword: &str) -> bool {
    keyword.starts_with("x-")
        || matches!(
            keyword,
            "description"
                | "title"
                | "example"
                | "examples"
                | "externalDocs"
                | "xml"
                | "deprecated"
                | "readOnly"
                | "writeOnly"
                | "$comment"
                | "summary"
        )
}

/// A data value (`enum`, `const`, `default`) written whole, every key kept.
fn write_value(node: &Node, out: &mut String) {
    use std::fmt::Write as _;
    match &node.value {
        Value::Seq(items) => {
            out.push('[');
            for item in items {
                write_value(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Map(map) => {
            out.push('{');
            for (key, value) in map.entries() {
                let _ = write!(out, "{:?}:", key.text);
                write_value(value, out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Null => out.push('~'),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => {
            let _ = write!(out, "{f:?}");
        }
        Value::Str(s) => {
            let _ = write!(out, "{s:?}");
        }
    }
}

/// The non-null `type`s of a schema (`type: [string, "null"]` → `[string]`).
fn types_of(node: &Node) -> Vec<String> {
    match node.get("type").map(|t| &t.value) {
        Some(Value::Str(s)) if s != "null" => vec![s.clone()],
        Some(Value::Seq(items)) => items
            .iter()
            .filter_map(Node::as_str)
            .filter(|s| *s != "null")
            .map(str::to_string)
            .collect(),
        None => type_of_values(node)
            .map(|t| vec![t.to_string()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Whether a schema admits `null` (3.0 `nullable: true`, 3.1 `type: [T, "null"]`, or an enum
/// listing `null`).
pub fn is_nullable(node: &Node) -> bool {
    if node.get("nullable").and_then(Node::as_bool) == Some(true) {
        return true;
    }
    if let Some(Value::Seq(items)) = node.get("type").map(|t| &t.value) {
        return items.iter().any(|i| i.as_str() == Some("null"));
    }
    node.get("enum")
        .and_then(Node::as_seq)
        .is_some_and(|values| values.iter().any(|v| v.value == Value::Null))
}

fn is_null(node: &Node) -> bool {
    node.get("type").and_then(Node::as_str) == Some("null")
        || node
            .get("enum")
            .and_then(Node::as_seq)
            .is_some_and(|v| v.len() == 1 && v[0].value == Value::Null)
}

/// The alternatives of required properties written beside an object's `properties` (see
/// [`Requirements`]): two or more `anyOf` (or `oneOf`) members, no `allOf` beside, each member
/// listing only `required` names (and annotations), each a property the object declares inline without a `default` (a property
/// with a default, or behind a `$ref` that may have one, is never absent once decoded, so its
/// presence could not be told). `None` otherwise: the schema is read as it was (a union).
pub(crate) fn requirement_alternatives(node: &Node) -> Option<Requirements> {
    let properties = node.get("properties").and_then(Node::as_map)?;
    let (exactly_one, members) = match (node.get("oneOf"), node.get("anyOf")) {
        (Some(members), None) => (true, members.as_seq()?),
        (None, Some(members)) => (false, members.as_seq()?),
        _ => return None,
    };
    // One alternative is that alternative (`shape_of`), and an `allOf` beside would be merged
    // by nothing: both stay as they were read.
    if members.len() < 2 || node.get("allOf").is_some() {
        return None;
    }
    let mut alternatives = Vec::new();
    for member in members {
        let map = member.as_map()?;
        if !map
            .entries()
            .iter()
            .all(|(k, _)| k.text == "required" || is_annotation(&k.text))
        {
            return None;
        }
        let names: Vec<String> = member
            .get("required")?
            .as_seq()?
            .iter()
            .map(|n| n.as_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        let declared = |name: &String| {
            properties
                .get(name)
                .is_some_and(|p| p.ref_target().is_none() && p.get("default").is_none())
        };
        if names.is_empty() || !names.iter().all(declared) {
            return None;
        }
        alternatives.push(names);
    }
    Some(Requirements {
        exactly_one,
        alternatives,
    })
}

fn union_members(node: &Node) -> Option<Vec<&Node>> {
    if const_alternatives(node).is_some() {
        return None;
    }
    let members = node
        .get("oneOf")
        .or_else(|| node.get("anyOf"))
        .and_then(Node::as_seq)?;
    Some(members.iter().collect())
}

/// The values of a `oneOf` (or `anyOf`) whose every alternative is one scalar `const` with
/// annotations (`oneOf: [{title: JOIN, const: 1}, …]`, Discord's 91 enums): the enum it
/// spells, read as `enum: [1, …]` is. `None` for any other schema.
pub(crate) fn const_alternatives(node: &Node) -> Option<Vec<&Node>> {
    let members = node
        .get("oneOf")
        .or_else(|| node.get("anyOf"))
        .and_then(Node::as_seq)?;
    if members.is_empty() || node.get("allOf").is_some() || node.get("enum").is_some() {
        return None;
    }
    members
        .iter()
        .map(|m| {
            let map = m.as_map()?;
            if !map
                .entries()
                .iter()
                .all(|(k, _)| k.text == "const" || is_annotation(&k.text))
            {
                return None;
            }
            let value = map.get("const")?;
            match value.value {
                Value::Str(_) | Value::Int(_) | Value::Bool(_) => Some(value),
                Value::Float(f) if f.is_finite() => Some(value),
                _ => None,
            }
        })
        .collect()
}

/// The values an `enum` lists, or a `oneOf` of constants spells ([`const_alternatives`]).
fn enum_values(node: &Node) -> Option<Vec<&Node>> {
    match node.get("enum").and_then(Node::as_seq) {
        Some(values) => Some(values.iter().collect()),
        None => const_alternatives(node),
    }
}

/// The type a schema without `type` has by the values it allows: those of its `const` or of a
/// `oneOf` of constants, when they are all strings, all integers, all numbers or all booleans.
fn type_of_values(node: &Node) -> Option<&'static str> {
    let values = match node.get("const") {
        Some(value) => vec![value],
        None => const_alternatives(node)?,
    };
    let all = |f: fn(&Value) -> bool| values.iter().all(|v| f(&v.value));
    if all(|v| matches!(v, Value::Str(_))) {
        Some("string")
    } else if all(|v| matches!(v, Value::Int(_))) {
        Some("integer")
    } else if all(|v| matches!(v, Value::Int(_) | Value::Float(_))) {
        Some("number")
    } else if all(|v| matches!(v, Value::Bool(_))) {
        Some("boolean")
    } else {
        None
    }
}

/// The values of a string enum, when the schema is one.
fn string_enum(node: &Node) -> Option<Vec<String>> {
    let values = enum_values(node)?;
    let types = types_of(node);
    if !(types.is_empty() || types == ["string"]) {
        return None;
    }
    let mut out = Vec::new();
    for v in values {
        match &v.value {
            Value::Str(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Value::Null => {}
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

fn properties_of(node: &Node) -> Vec<(&String, &Node)> {
    node.get("properties")
        .and_then(Node::as_map)
        .map(|m| m.entries().iter().map(|(k, v)| (&k.text, v)).collect())
        .unwrap_or_default()
}

fn required_of(node: &Node) -> BTreeSet<String> {
    node.get("required")
        .and_then(Node::as_seq)
        .map(|r| {
            r.iter()
                .filter_map(Node::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A schema's `description`, else its `title`.
pub fn description(node: &Node) -> Option<String> {
    node.get("description")
        .or_else(|| node.get("title"))
        .and_then(Node::as_str)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn primitive_label(ty: &TypeRef) -> Option<String> {
    Some(
        match ty {
            TypeRef::String => "String",
            TypeRef::Bool => "Bool",
            TypeRef::I32 => "I32",
            TypeRef::I64 => "I64",
            TypeRef::F64 => "F64",
            TypeRef::Uuid => "Uuid",
            TypeRef::DateTime => "DateTime",
            TypeRef::Date => "Date",
            TypeRef::Json => "Json",
            TypeRef::Vec(_) => "Array",
            TypeRef::Map(_) => "Map",
            _ => return None,
        }
        .to_string(),
    )
}

/// Decides which discriminated unions are internally tagged, and drops the tag field of their
/// alternatives. A struct's discriminator property is implied (no Rust field: the variant is the
/// tag) when the struct is used only as an alternative of discriminated unions on that property
/// (`other_uses` holds every type used anywhere else: operations, fields, aliases, lists, maps,
/// untagged unions), has that property as a string (or string enum) field, and every union it is
/// an alternative of is tagged; a union is tagged when every alternative is such a struct,
/// selected by exactly one tag. A
/// struct also used on its own (a response, a field) keeps its tag field, and its unions stay
/// read-by-tag, written-as-the-alternative: the JSON is the same either way.
pub fn imply_tags(defs: &mut [TypeDef], other_uses: &BTreeSet<String>) {
    let index: HashMap<String, usize> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    let variant_struct = |ty: &TypeRef| match ty {
        TypeRef::Named(n) => Some(n.clone()),
        TypeRef::Boxed(inner) => match &**inner {
            TypeRef::Named(n) => Some(n.clone()),
            _ => None,
        },
        _ => None,
    };
    // Every type used other than as a discriminated alternative, and per struct the unions (and
    // their properties) it is an alternative of.
    let mut other: BTreeSet<String> = other_uses.clone();
    let mut unions_of: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (u, def) in defs.iter().enumerate() {
        let mut held = Vec::new();
        match &def.kind {
            TypeKind::Union {
                discriminator: Some(property),
                variants,
                ..
            } => {
                for v in variants {
                    match variant_struct(&v.ty) {
                        Some(n) => unions_of.entry(n).or_default().push((u, property.clone())),
                        None => named_in(&v.ty, &mut held),
                    }
                }
            }
            _ => held = def.holds(),
        }
        other.extend(held);
    }
    let is_tag_type = |ty: &TypeRef| match ty {
        TypeRef::String => true,
        TypeRef::Named(n) => index
            .get(n)
            .is_some_and(|&i| matches!(defs[i].kind, TypeKind::StringEnum { .. })),
        _ => false,
    };
    let mut candidates: BTreeSet<String> = unions_of
        .iter()
        .filter(|(name, uses)| {
            let Some(&i) = index.get(*name) else {
                return false;
            };
            let property = &uses[0].1;
            !other.contains(*name)
                && uses.iter().all(|(_, p)| p == property)
                && matches!(&defs[i].kind, TypeKind::Struct { fields, .. }
                    if fields.iter().any(|f| f.wire == *property && is_tag_type(&f.ty)))
        })
        .map(|(name, _)| name.clone())
        .collect();
    // Fixed point: a union is tagged when all its alternatives are candidates; a candidate stays
    // one when all its unions are tagged.
    let mut tagged: BTreeSet<usize>;
    loop {
        tagged = defs
            .iter()
            .enumerate()
            .filter(|(_, d)| match &d.kind {
                TypeKind::Union {
                    discriminator: Some(_),
                    variants,
                    ..
                } => {
                    // One tag per alternative: one selected by two mapping values keeps its tag
                    // field, so the value sent is the value fingerprinted.
                    !variants.is_empty()
                        && variants.iter().all(|v| {
                            v.tags.len() == 1
                                && variant_struct(&v.ty).is_some_and(|n| candidates.contains(&n))
                        })
                }
                _ => false,
            })
            .map(|(u, _)| u)
            .collect();
        let before = candidates.len();
        candidates.retain(|n| unions_of[n].iter().all(|(u, _)| tagged.contains(u)));
        if candidates.len() == before {
            break;
        }
    }
    for u in &tagged {
        if let TypeKind::Union { tagged, .. } = &mut defs[*u].kind {
            *tagged = true;
        }
    }
    for name in &candidates {
        let property = unions_of[name][0].1.clone();
        if let TypeKind::Struct { fields, .. } = &mut defs[index[name]].kind {
            for f in fields.iter_mut().filter(|f| f.wire == property) {
                f.implied_tag = true;
            }
        }
    }
    // A tag is never absent where a union reads it, so its `default` (Adyen writes one beside
    // each one-value tag enum) is not applied: the alternative's shape, and so the lock, is the
    // same whether its union is tagged or not.
    for (name, uses) in &unions_of {
        let Some(&i) = index.get(name) else { continue };
        if let TypeKind::Struct { fields, .. } = &mut defs[i].kind {
            for f in fields
                .iter_mut()
                .filter(|f| uses.iter().any(|(_, p)| *p == f.wire))
            {
                f.default = None;
            }
        }
    }
    mark_validated(defs);
}

/// Sets [`Field::default`] on every optional property whose `default` is a value of its type.
fn apply_defaults(defs: &mut BTreeMap<String, TypeDef>) {
    let mut resolved = Vec::new();
    for (name, def) in defs.iter() {
        if let TypeKind::Struct { fields, .. } = &def.kind {
            for (i, field) in fields.iter().enumerate() {
                if let Some(value) = field.default_json.as_ref().filter(|_| !field.required)
                    && let Some(expr) = resolve_default(value, &field.ty, &|n| defs.get(n))
                {
                    resolved.push((name.clone(), i, expr));
                }
            }
        }
    }
    for (name, i, expr) in resolved {
        if let Some(TypeDef {
            kind: TypeKind::Struct { fields, .. },
            ..
        }) = defs.get_mut(&name)
            && let Some(field) = fields.get_mut(i)
        {
            field.default = Some(expr);
        }
    }
}

/// Boxes every by-value use of a named type that leads back to the type using it (directly or
/// through other types), so that recursive schemas have a finite size.
fn box_recursion(defs: &mut BTreeMap<String, TypeDef>) {
    break_alias_cycles(defs);
    let edges: BTreeMap<String, BTreeSet<String>> = defs
        .iter()
        .map(|(name, def)| (name.clone(), by_value_uses(def)))
        .collect();
    let reaches = |from: &str, to: &str| -> bool {
        let mut stack = vec![from.to_string()];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if !seen.insert(n.clone()) {
                continue;
            }
            if let Some(next) = edges.get(&n) {
                stack.extend(next.iter().cloned());
            }
        }
        false
    };
    let mut to_box: Vec<(String, String)> = Vec::new();
    for (name, uses) in &edges {
        for used in uses {
            if reaches(used, name) {
                to_box.push((name.clone(), used.clone()));
            }
        }
    }
    for (name, used) in to_box {
        let Some(def) = defs.get_mut(&name) else {
            continue;
        };
        match &mut def.kind {
            TypeKind::Struct { fields, .. } => {
                for field in fields {
                    field.ty = boxed(&field.ty, &used);
                }
            }
            TypeKind::Union { variants, .. } => {
                for variant in variants {
                    variant.ty = boxed(&variant.ty, &used);
                }
            }
            TypeKind::Alias(target) => *target = boxed(target, &used),
            TypeKind::StringEnum { .. } => {}
        }
    }
}

fn boxed(ty: &TypeRef, name: &str) -> TypeRef {
    match ty {
        TypeRef::Named(n) if n == name => TypeRef::Boxed(Box::new(ty.clone())),
        TypeRef::Option(inner) => TypeRef::Option(Box::new(boxed(inner, name))),
        other => other.clone(),
    }
}

/// Named types a definition holds by value (not behind `Vec`, a map or a `Box`).
fn by_value_uses(def: &TypeDef) -> BTreeSet<String> {
    fn direct(ty: &TypeRef, out: &mut BTreeSet<String>) {
        match ty {
            TypeRef::Named(n) => {
                out.insert(n.clone());
            }
            TypeRef::Option(inner) => direct(inner, out),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    match &def.kind {
        TypeKind::Struct { fields, .. } => fields.iter().for_each(|f| direct(&f.ty, &mut out)),
        TypeKind::Union { variants, .. } => variants.iter().for_each(|v| direct(&v.ty, &mut out)),
        TypeKind::Alias(t) => direct(t, &mut out),
        TypeKind::StringEnum { .. } => {}
    }
    out
}

/// A type alias that expands to itself (`type A = Vec<A>`) is not Rust; such aliases become
/// `serde_json::Value`.
fn break_alias_cycles(defs: &mut BTreeMap<String, TypeDef>) {
    fn all_named(ty: &TypeRef, out: &mut BTreeSet<String>) {
        match ty {
            TypeRef::Named(n) => {
                out.insert(n.clone());
            }
            TypeRef::Vec(t) | TypeRef::Map(t) | TypeRef::Option(t) | TypeRef::Boxed(t) => {
                all_named(t, out)
            }
            _ => {}
        }
    }
    let aliases: BTreeMap<String, BTreeSet<String>> = defs
        .iter()
        .filter_map(|(name, def)| match &def.kind {
            TypeKind::Alias(t) => {
                let mut out = BTreeSet::new();
                all_named(t, &mut out);
                Some((name.clone(), out))
            }
            _ => None,
        })
        .collect();
    let cyclic: Vec<String> = aliases
        .keys()
        .filter(|start| {
            let mut stack: Vec<&String> = aliases[*start].iter().collect();
            let mut seen = BTreeSet::new();
            while let Some(n) = stack.pop() {
                if n == *start {
                    return true;
                }
                if seen.insert(n.clone())
                    && let Some(next) = aliases.get(n)
                {
                    stack.extend(next.iter());
                }
            }
            false
        })
        .cloned()
        .collect();
    for name in cyclic {
        if let Some(def) = defs.get_mut(&name) {
            def.kind = TypeKind::Alias(TypeRef::Json);
        }
    }
}

/// The checks of `node` at a use site; see [`Checks`].
fn checks_of(node: &Node, depth: usize) -> Checks {
    if depth > MAX_INLINE_DEPTH || node.ref_target().is_some() || node.as_map().is_none() {
        return Checks::default();
    }
    let own = constraints_of(node);
    match shape_of(node) {
        Shape::Array(Some(items)) => Checks {
            own,
            items: Some(Box::new(checks_of(items, depth + 1))).filter(|c| !c.is_empty()),
            values: None,
        },
        Shape::Map(Some(values)) => Checks {
            own,
            items: None,
            values: Some(Box::new(checks_of(values, depth + 1))).filter(|c| !c.is_empty()),
        },
        Shape::Nullable(inner) | Shape::SingleAllOf(inner) => {
            let mut inner = checks_of(inner, depth + 1);
            if inner.own.is_empty() {
                inner.own = own;
            }
            inner
        }
        _ => Checks {
            own,
            items: None,
            values: None,
        },
    }
}

/// The enforced validation keywords written on one schema.
fn constraints_of(node: &Node) -> Constraints {
    let count = |key: &str| {
        node.get(key)
            .and_then(number)
            .filter(|n| *n >= 0.0 && n.fract() == 0.0)
            .map(|n| n as u64)
    };
    let bound = |inclusive: &str, exclusive: &str| {
        let limit = node.get(inclusive).and_then(number);
        let exclusive = node.get(exclusive);
        match (
            limit,
            exclusive.and_then(Node::as_bool),
            exclusive.and_then(number),
        ) {
            // 3.0: `exclusiveMinimum: true` next to `minimum`.
            (Some(limit), Some(true), _) => Some(Bound::Exclusive(limit)),
            // 3.1: `exclusiveMinimum: 5`; with a `minimum` too, the stricter one wins.
            (Some(limit), _, Some(ex)) => Some(if inclusive == "minimum" {
                if ex >= limit {
                    Bound::Exclusive(ex)
                } else {
                    Bound::Inclusive(limit)
                }
            } else if ex <= limit {
                Bound::Exclusive(ex)
            } else {
                Bound::Inclusive(limit)
            }),
            (None, _, Some(ex)) => Some(Bound::Exclusive(ex)),
            (Some(limit), _, None) => Some(Bound::Inclusive(limit)),
            (None, _, None) => None,
        }
    };
    Constraints {
        min_length: count("minLength"),
        max_length: count("maxLength"),
        pattern: node
            .get("pattern")
            .and_then(Node::as_str)
            .filter(|p| idemgen_protocol::pattern::compile(p).is_ok())
            .map(str::to_owned),
        minimum: bound("minimum", "exclusiveMinimum"),
        maximum: bound("maximum", "exclusiveMaximum"),
        multiple_of: node.get("multipleOf").and_then(number).filter(|n| *n > 0.0),
        min_items: count("minItems"),
        max_items: count("maxItems"),
        unique_items: node.get("uniqueItems").and_then(Node::as_bool) == Some(true),
        min_properties: count("minProperties"),
        max_properties: count("maxProperties"),
        constant: constant_of(node),
        allowed: allowed_of(node),
    }
}

/// An `enum` of several values, when it is not a string enum and every value is a scalar or
/// `null`; see [`Constraints::allowed`].
fn allowed_of(node: &Node) -> Option<Box<[serde_json::Value]>> {
    let values = enum_values(node)?;
    // A string enum that is its own type is a Rust enum, which checks itself; behind a nullable
    // or single-alternative wrapper it is a `String`, checked here.
    if values.len() < 2 || (string_enum(node).is_some() && matches!(shape_of(node), Shape::Defined))
    {
        return None;
    }
    values
        .iter()
        .map(|v| match v.value {
            Value::Str(_) | Value::Bool(_) | Value::Int(_) | Value::Null => Some(json_of(v)),
            Value::Float(f) if f.is_finite() => Some(json_of(v)),
            _ => None,
        })
        .collect()
}

/// `const`, else the one value of an `enum` of one, when it is a string, number or boolean.
fn constant_of(node: &Node) -> Option<Box<serde_json::Value>> {
    let value = node.get("const").or_else(|| {
        enum_values(node)
            .filter(|values| values.len() == 1)
            .map(|values| values[0])
    })?;
    match value.value {
        Value::Str(_) | Value::Bool(_) | Value::Int(_) => Some(Box::new(json_of(value))),
        Value::Float(f) if f.is_finite() => Some(Box::new(json_of(value))),
        _ => None,
    }
}

/// A finite JSON number.
fn number(node: &Node) -> Option<f64> {
    match node.value {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) if f.is_finite() => Some(f),
        _ => None,
    }
}

/// Keywords the generated code never checks, wherever they are written (`then` and `else` go
/// with `if`, and are reported with it).
const NEVER_CHECKED: [&str; 13] = [
    "not",
    "if",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
];

/// The JSON values a validation keyword constrains (JSON Schema ignores it on other values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applies {
    Strings,
    Numbers,
    Arrays,
    Objects,
    Any,
}

/// The validation keywords [`constraints_of`] reads, `enum` and `required`, with what they
/// constrain.
const CONSTRAINT_KEYWORDS: [(&str, Applies); 16] = [
    ("minLength", Applies::Strings),
    ("maxLength", Applies::Strings),
    ("pattern", Applies::Strings),
    ("minimum", Applies::Numbers),
    ("maximum", Applies::Numbers),
    ("exclusiveMinimum", Applies::Numbers),
    ("exclusiveMaximum", Applies::Numbers),
    ("multipleOf", Applies::Numbers),
    ("minItems", Applies::Arrays),
    ("maxItems", Applies::Arrays),
    ("uniqueItems", Applies::Arrays),
    ("minProperties", Applies::Objects),
    ("maxProperties", Applies::Objects),
    ("required", Applies::Objects),
    ("const", Applies::Any),
    ("enum", Applies::Any),
];

/// Keywords that shape an object, read by the type conversion, and ignored beside a `oneOf` or
/// `anyOf` of several alternatives (a union reads its alternatives only).
const BESIDE_A_UNION: [&str; 4] = ["properties", "additionalProperties", "items", "allOf"];

/// How the walk over a request's schemas meets a schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Reading {
    /// As the schema says.
    Schema,
    /// A multipart body's object, as a struct's keywords (its parts are read each as the IR
    /// types it, and walked apart).
    PartsOnly,
    /// A member of an `allOf` merged into one struct: its `properties` and `required` are the
    /// struct's; its other keywords are judged as a struct's.
    MergedMember,
    /// As a value of `ty` whatever the schema says (`None`: not read at all), and why: a
    /// parameter the IR reads as one string, a multipart file part, an `allOf` it cannot merge.
    Forced {
        /// The type the value is read as.
        ty: Option<TypeRef>,
        /// Why, as a clause (`the query parameter `f` is read as one string`).
        why: String,
    },
}

/// What the own keywords of a schema are checked against, as [`checks_of`] and the emitter's
/// `for_type` see it.
enum Judged {
    /// A value of this type, with [`Constraints::for_type`] of the schema's own keywords.
    Type(TypeRef),
    /// A string enum: its values are the check.
    StringEnum,
    /// An object with properties (a struct): property counts are not checked.
    Struct,
    /// `oneOf`/`anyOf` of several alternatives, or an `allOf` merged into a struct: the
    /// alternatives' keywords are checked, not the composition's.
    Composition(&'static str),
    /// A wrapper whose keywords are dropped, and why.
    Dropped(String),
}

fn judged(node: &Node, depth: usize) -> Judged {
    match shape_of(node) {
        Shape::Primitive(ty) => Judged::Type(ty),
        Shape::Array(_) => Judged::Type(TypeRef::Vec(Box::new(TypeRef::Json))),
        Shape::Map(_) => Judged::Type(TypeRef::Map(Box::new(TypeRef::Json))),
        Shape::Json => Judged::Type(TypeRef::Json),
        Shape::Nullable(inner) | Shape::SingleAllOf(inner) => {
            let wrapper = ["allOf", "oneOf", "anyOf"]
                .into_iter()
                .find(|k| node.get(k).is_some())
                .unwrap_or("allOf");
            if inner.ref_target().is_some() {
                Judged::Dropped(format!(
                    "beside an `{wrapper}` whose one alternative is a `$ref` the referenced schema is checked as it is"
                ))
            } else if inner.as_map().is_none() || depth > MAX_INLINE_DEPTH {
                Judged::Type(TypeRef::Json)
            } else if !constraints_of(inner).is_empty() {
                Judged::Dropped(format!(
                    "its `{wrapper}` alternative has keywords of its own, and only those are checked"
                ))
            } else {
                judged(inner, depth + 1)
            }
        }
        Shape::Defined => {
            if string_enum(node).is_some() {
                Judged::StringEnum
            } else if requirement_alternatives(node).is_some() {
                Judged::Struct
            } else if node.get("oneOf").is_some() {
                Judged::Composition("oneOf")
            } else if node.get("anyOf").is_some() {
                Judged::Composition("anyOf")
            } else if node.get("allOf").is_some() {
                Judged::Composition("allOf")
            } else {
                Judged::Struct
            }
        }
    }
}

/// Whether a node is a union the IR reads by its alternatives alone.
pub(crate) fn is_union(node: &Node) -> bool {
    matches!(shape_of(node), Shape::Defined)
        && union_members(node).is_some()
        && requirement_alternatives(node).is_none()
}

/// Whether `keyword`'s value was read into `c` (its value valid and its type one it applies to).
fn kept(keyword: &str, c: &Constraints) -> bool {
    match keyword {
        "minLength" => c.min_length.is_some(),
        "maxLength" => c.max_length.is_some(),
        "pattern" => c.pattern.is_some(),
        "minimum" | "exclusiveMinimum" => c.minimum.is_some(),
        "maximum" | "exclusiveMaximum" => c.maximum.is_some(),
        "multipleOf" => c.multiple_of.is_some(),
        "minItems" => c.min_items.is_some(),
        "maxItems" => c.max_items.is_some(),
        "uniqueItems" => c.unique_items,
        "minProperties" => c.min_properties.is_some(),
        "maxProperties" => c.max_properties.is_some(),
        "const" => c.constant.is_some(),
        "enum" => c.allowed.is_some() || c.constant.is_some(),
        _ => false,
    }
}

/// The JSON values of a type, as [`Applies`] names them (`None`: what no keyword constrains).
fn applies_to(ty: &TypeRef) -> Option<Applies> {
    match ty {
        TypeRef::String | TypeRef::Uuid | TypeRef::DateTime | TypeRef::Date | TypeRef::File => {
            Some(Applies::Strings)
        }
        TypeRef::I32 | TypeRef::I64 | TypeRef::F64 => Some(Applies::Numbers),
        TypeRef::Vec(_) => Some(Applies::Arrays),
        TypeRef::Map(_) => Some(Applies::Objects),
        TypeRef::Json => Some(Applies::Any),
        _ => None,
    }
}

/// Whether a keyword that constrains `applies` values can constrain a value of what the schema
/// itself describes (JSON Schema ignores `minLength` on an integer).
fn relevant(judgement: &Judged, applies: Applies) -> bool {
    match judgement {
        _ if applies == Applies::Any => true,
        Judged::Type(ty) => matches!(applies_to(ty), Some(a) if a == applies || a == Applies::Any),
        Judged::StringEnum => applies == Applies::Strings,
        Judged::Struct => applies == Applies::Objects,
        Judged::Composition(_) | Judged::Dropped(_) => true,
    }
}

/// The validation keywords written on one request schema that the generated server does not
/// check, each with why: a request the schema forbids is accepted all the same. Judged with the
/// functions the type conversion and the checks use ([`shape_of`], [`constraints_of`],
/// [`Constraints::for_type`]), so that what is reported is what the generated code leaves out;
/// `reading` is how the walk met the schema. Keywords that do not constrain the schema's type
/// (JSON Schema ignores `minLength` on an integer), annotations and `format` (an annotation in
/// JSON Schema) are not reported, nor are lengths and patterns of a string enum that all its
/// values meet. The schema's children (properties, items, alternatives) are judged on their own.
pub(crate) fn unenforced_keywords<'n>(
    node: &'n Node,
    openapi_31: bool,
    reading: &Reading,
) -> Vec<(&'n Key, String)> {
    let Some(map) = node.as_map() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let forced_why = match reading {
        Reading::Forced { why, .. } => Some(why.as_str()),
        _ => None,
    };
    for (key, _) in map.entries() {
        if NEVER_CHECKED.contains(&key.text.as_str()) {
            let why = forced_why.unwrap_or(
                "the generated server does not check it, and accepts requests it forbids",
            );
            out.push((key, format!("`{}` is not enforced: {why}", key.text)));
        }
    }
    let written: Vec<(&Key, &Node, Applies)> = map
        .entries()
        .iter()
        .filter_map(|(key, value)| {
            CONSTRAINT_KEYWORDS
                .iter()
                .find(|(k, _)| *k == key.text)
                .map(|(_, applies)| (key, value, *applies))
        })
        // Nothing to check: `uniqueItems: false`, a 3.0 `exclusiveMinimum: true` (it qualifies
        // `minimum`), `required: []`.
        .filter(|(key, value, _)| match key.text.as_str() {
            "uniqueItems" => value.as_bool() == Some(true),
            "exclusiveMinimum" | "exclusiveMaximum" => value.as_bool().is_none(),
            "required" => value.as_seq().is_some_and(|names| !names.is_empty()),
            // A pattern that does not compile is `pattern-invalid`'s.
            "pattern" => value
                .as_str()
                .is_some_and(|p| idemgen_protocol::pattern::compile(p).is_ok()),
            _ => true,
        })
        .collect();
    let own = constraints_of(node);
    let judgement = judged(node, 0);
    if let Reading::Forced { ty, why } = reading {
        let kept_as = ty.as_ref().map(|ty| own.for_type(ty)).unwrap_or_default();
        for (key, _, applies) in written {
            let keyword = key.text.as_str();
            if relevant(&judgement, applies) && !kept(keyword, &kept_as) {
                out.push((key, format!("`{keyword}` is not enforced: {why}")));
            }
        }
        return out;
    }
    if node.ref_target().is_some() {
        let why = if openapi_31 {
            "beside a `$ref` the referenced schema is checked as it is"
        } else {
            "OpenAPI 3.0 ignores every key beside a `$ref`"
        };
        for (key, _, _) in written {
            out.push((key, format!("`{}` is not enforced: {why}", key.text)));
        }
        return out;
    }
    let wrapper = matches!(shape_of(node), Shape::Nullable(_) | Shape::SingleAllOf(_));
    if is_union(node) || (wrapper && union_members(node).is_some()) {
        let union = if node.get("oneOf").is_some() {
            "oneOf"
        } else {
            "anyOf"
        };
        for (key, value) in map.entries() {
            let open =
                value.as_bool() == Some(true) || value.as_map().is_some_and(|m| m.is_empty());
            if BESIDE_A_UNION.contains(&key.text.as_str()) && !open {
                out.push((
                    key,
                    format!(
                        "`{}` is not enforced: beside `{union}` only its alternatives are read; write it in each alternative",
                        key.text
                    ),
                ));
            }
        }
    }
    for (key, value, applies) in written {
        let keyword = key.text.as_str();
        if !relevant(&judgement, applies) {
            continue;
        }
        let why = match (&judgement, keyword) {
            (_, "required") => required_unenforced(node, value, &judgement, reading),
            (Judged::StringEnum, "enum") => None,
            (_, "enum") => enum_unenforced(node, value, &own, &judgement),
            (Judged::StringEnum, "const") => {
                Some("beside a string `enum` only the enum's values are checked".to_string())
            }
            (Judged::StringEnum, _) => string_enum_breaks(node, keyword, &own),
            (Judged::Dropped(why), _) => Some(why.clone()),
            (Judged::Composition("allOf"), _) => Some(
                "the object an `allOf` merges is checked by its members' properties only".to_string(),
            ),
            (Judged::Composition(composition), _) => Some(format!(
                "the keywords of each `{composition}` alternative are checked, not those beside it; write it in each alternative"
            )),
            (Judged::Struct, "const") => Some(const_unenforced(value)),
            (Judged::Struct, _) => Some(
                if *reading == Reading::MergedMember {
                    "the object an `allOf` merges is a struct whose properties are not counted"
                } else {
                    "an object schema with `properties` or `additionalProperties: false` is a struct whose properties are not counted (a map, `additionalProperties` with a schema alone, is)"
                }
                .to_string(),
            ),
            (Judged::Type(ty), _) => {
                let c = own.for_type(ty);
                if kept(keyword, &c) {
                    None
                } else if keyword == "const" {
                    // A scalar of another type makes every value invalid: not this rule's.
                    matches!(value.value, Value::Seq(_) | Value::Map(_) | Value::Null)
                        .then(|| const_unenforced(value))
                        .or_else(|| {
                            typed_string(ty).map(|what| {
                                format!("the value is parsed as {what}, and only that is checked")
                            })
                        })
                } else {
                    type_unenforced(node, ty, keyword)
                }
            }
        };
        if let Some(why) = why {
            out.push((key, format!("`{keyword}` is not enforced: {why}")));
        }
    }
    out
}

/// Why `required` is not checked (`None`: it is, by the struct's fields).
fn required_unenforced(
    node: &Node,
    value: &Node,
    judgement: &Judged,
    reading: &Reading,
) -> Option<String> {
    match judgement {
        // Merged: the struct's fields are every member's properties, required by every
        // member's `required` (a name none of them declares is not checked: not judged here).
        _ if *reading == Reading::MergedMember => None,
        Judged::Composition("allOf") => None,
        Judged::Struct => {
            let declared: BTreeSet<&str> = node
                .get("properties")
                .and_then(Node::as_map)
                .map(|m| m.entries().iter().map(|(k, _)| k.text.as_str()).collect())
                .unwrap_or_default();
            let missing: Vec<String> = value
                .as_seq()
                .unwrap_or_default()
                .iter()
                .filter_map(Node::as_str)
                .filter(|name| !declared.contains(name))
                .map(|name| format!("`{name}`"))
                .collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "{} not among the object's `properties`, so {} presence is not checked",
                    missing.join(", ") + if missing.len() == 1 { " is" } else { " are" },
                    if missing.len() == 1 { "its" } else { "their" }
                )
            })
        }
        Judged::Type(TypeRef::Map(_)) => {
            Some("a map's keys are not checked for the names it requires".to_string())
        }
        Judged::Type(TypeRef::Json) => Some(
            "a schema without `type` or `properties` is read as any JSON value, and the names it requires are not checked".to_string(),
        ),
        Judged::Type(_) | Judged::StringEnum => None,
        Judged::Dropped(why) => Some(why.clone()),
        Judged::Composition(composition) => Some(format!(
            "beside `{composition}` only its alternatives are read; write it in each alternative"
        )),
    }
}

/// Why a length or pattern beside a string enum is not checked, when one of the enum's values
/// breaks it (the enum alone is checked; `None`: every value meets it, so it adds nothing).
fn string_enum_breaks(node: &Node, keyword: &str, own: &Constraints) -> Option<String> {
    let values = string_enum(node)?;
    let breaks = |value: &str| {
        let chars = value.chars().count() as u64;
        match keyword {
            "minLength" => own.min_length.is_some_and(|n| chars < n),
            "maxLength" => own.max_length.is_some_and(|n| chars > n),
            "pattern" => own.pattern.as_deref().is_some_and(|p| {
                idemgen_protocol::pattern::compile(p).is_ok_and(|re| !re.is_match(value))
            }),
            _ => false,
        }
    };
    let value = values.iter().find(|v| breaks(v))?;
    Some(format!(
        "beside a string `enum` only the enum's values are checked, and `{value}` does not meet it"
    ))
}

/// What a string of `ty` is parsed as, when its lengths, pattern and `const` are not checked.
fn typed_string(ty: &TypeRef) -> Option<&'static str> {
    match ty {
        TypeRef::Uuid => Some("a UUID (`format: uuid`)"),
        TypeRef::DateTime => Some("a date-time (`format: date-time`)"),
        TypeRef::Date => Some("a date (`format: date`)"),
        _ => None,
    }
}

/// Why a length, bound or count of a schema typed `ty` is not checked, if it would apply.
fn type_unenforced(node: &Node, ty: &TypeRef, keyword: &str) -> Option<String> {
    if let Some(what) = typed_string(ty) {
        return Some(format!(
            "the value is parsed as {what}, and only that is checked"
        ));
    }
    if *ty == TypeRef::Json {
        return Some(untyped(node));
    }
    Some(
        match keyword {
            "multipleOf" => "its value is not a positive number, so it is ignored",
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                "its value is not a finite number, so it is ignored"
            }
            _ => "its value is not a whole number of at least 0, so it is ignored",
        }
        .to_string(),
    )
}

/// Why a schema read as any JSON value checks nothing but a scalar `const`.
fn untyped(node: &Node) -> String {
    let types = types_of(node);
    if types.len() > 1 {
        format!(
            "a schema of several types ({}) is read as any JSON value, and the value is not checked against it",
            types
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        "a schema without `type` is read as any JSON value, and the value is not checked against it"
            .to_string()
    }
}

/// Why an `enum` is not checked (`None`: it is).
fn enum_unenforced(
    node: &Node,
    value: &Node,
    own: &Constraints,
    judgement: &Judged,
) -> Option<String> {
    let values = value.as_seq()?;
    Some(match judgement {
        Judged::Type(ty) => {
            if kept("enum", &own.for_type(ty)) {
                return None;
            }
            let scalars = values.iter().all(|v| {
                matches!(
                    v.value,
                    Value::Str(_) | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Null
                )
            });
            match ty {
                _ if !scalars => {
                    "only enums of strings, numbers, booleans and `null` are checked, not one listing an array or an object".to_string()
                }
                TypeRef::Json => untyped(node),
                TypeRef::Vec(_) | TypeRef::Map(_) => {
                    "only enums of strings, numbers and booleans are checked, not an array's or an object's".to_string()
                }
                _ if values.len() == 1 => {
                    "its one value is not of the schema's type, so it is ignored".to_string()
                }
                _ => format!(
                    "its values are not all {} (the schema's type), so it is ignored",
                    match ty {
                        TypeRef::I32 | TypeRef::I64 => "integers",
                        TypeRef::F64 => "numbers",
                        TypeRef::Bool => "booleans",
                        _ => "strings",
                    }
                ),
            }
        }
        Judged::Dropped(why) => why.clone(),
        Judged::Composition(composition) => format!(
            "the keywords of each `{composition}` alternative are checked, not those beside it; write it in each alternative"
        ),
        Judged::Struct | Judged::StringEnum => {
            "only enums of strings, numbers, booleans and `null` are checked, not one listing an array or an object".to_string()
        }
    })
}

/// Why a `const` is not checked.
fn const_unenforced(value: &Node) -> String {
    let what = match value.value {
        Value::Seq(_) => "an array",
        Value::Map(_) => "an object",
        _ => "null",
    };
    format!("only a string, number or boolean `const` is compared, not {what}")
}

/// Sets [`TypeDef::validated`] on every struct and union with something to check, directly or
/// through the types it holds (a fixed point, so recursive types terminate).
fn mark_validated(defs: &mut [TypeDef]) {
    fn uses(ty: &TypeRef, checks: &Checks, out: &mut Vec<String>) -> bool {
        let none = Checks::default();
        match ty {
            TypeRef::Named(n) => {
                out.push(n.clone());
                false
            }
            TypeRef::Option(t) | TypeRef::Boxed(t) => uses(t, checks, out),
            TypeRef::Vec(t) => {
                let inner = uses(t, checks.items.as_deref().unwrap_or(&none), out);
                inner || !checks.own.for_type(ty).is_empty()
            }
            TypeRef::Map(t) => {
                let inner = uses(t, checks.values.as_deref().unwrap_or(&none), out);
                inner || !checks.own.for_type(ty).is_empty()
            }
            _ => !checks.own.for_type(ty).is_empty(),
        }
    }
    // Per type: whether it checks something itself, and the named types it holds.
    let graph: BTreeMap<String, (bool, Vec<String>)> = defs
        .iter()
        .map(|def| {
            let name = &def.name;
            let mut named = Vec::new();
            let direct = match &def.kind {
                TypeKind::Struct {
                    fields,
                    extra,
                    extra_checks,
                    requirements,
                    ..
                } => {
                    let mut direct = requirements.is_some();
                    for f in fields.iter().filter(|f| !f.implied_tag) {
                        direct |= uses(&f.ty, &f.checks, &mut named);
                    }
                    if let Some(extra) = extra {
                        direct |= uses(extra, extra_checks, &mut named);
                    }
                    direct
                }
                TypeKind::Union { variants, .. } => {
                    let mut direct = false;
                    for v in variants {
                        direct |= uses(&v.ty, &v.checks, &mut named);
                    }
                    direct
                }
                TypeKind::Alias(target) => uses(target, &def.checks, &mut named),
                TypeKind::StringEnum { .. } => false,
            };
            (name.clone(), (direct, named))
        })
        .collect();
    let mut validated: BTreeSet<String> = graph
        .iter()
        .filter(|(_, (direct, _))| *direct)
        .map(|(n, _)| n.clone())
        .collect();
    loop {
        let before = validated.len();
        for (name, (_, named)) in &graph {
            if named.iter().any(|n| validated.contains(n)) {
                validated.insert(name.clone());
            }
        }
        if validated.len() == before {
            break;
        }
    }
    // Untagged unions with checks, and which of them reach one again (themselves included).
    let checked: BTreeSet<&String> = defs
        .iter()
        .filter(|d| {
            validated.contains(&d.name)
                && matches!(
                    d.kind,
                    TypeKind::Union {
                        discriminator: None,
                        ..
                    }
                )
        })
        .map(|d| &d.name)
        .collect();
    let reaches_checked = |from: &String| {
        let mut seen: BTreeSet<&String> = BTreeSet::new();
        let mut stack: Vec<&String> = graph
            .get(from)
            .map(|(_, n)| n.iter().collect())
            .unwrap_or_default();
        while let Some(name) = stack.pop() {
            if checked.contains(name) {
                return true;
            }
            if seen.insert(name)
                && let Some((_, named)) = graph.get(name)
            {
                stack.extend(named.iter());
            }
        }
        false
    };
    let decode_checked: BTreeSet<String> = checked
        .iter()
        .filter(|name| !reaches_checked(name))
        .map(|name| (*name).clone())
        .collect();
    for def in defs.iter_mut() {
        def.validated = validated.contains(&def.name);
        if let TypeKind::Union {
            decode_checked: flag,
            ..
        } = &mut def.kind
        {
            *flag = decode_checked.contains(&def.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One schema (YAML flow style) and the checks it yields.
    fn check(schema: &str, expected: Checks) {
        let node = crate::loader::yaml::parse(schema).unwrap();
        assert_eq!(Checks::of(&node), expected, "{schema}");
    }

    fn own(own: Constraints) -> Checks {
        Checks {
            own,
            ..Checks::default()
        }
    }

    #[test]
    fn validation_keywords_become_checks() {
        check(
            "{type: string, minLength: 1, maxLength: 100, pattern: '^a'}",
            own(Constraints {
                min_length: Some(1),
                max_length: Some(100),
                pattern: Some("^a".to_string()),
                ..Constraints::default()
            }),
        );
        // A pattern the engine cannot compile is not enforced (`check` reports it), nor is one
        // that is not a string; on a non-string type it does not apply.
        check(
            "{type: string, pattern: '(', minLength: 1}",
            own(Constraints {
                min_length: Some(1),
                ..Constraints::default()
            }),
        );
        check("{type: string, pattern: 12}", Checks::default());
        assert_eq!(
            Constraints {
                pattern: Some("^a".to_string()),
                ..Constraints::default()
            }
            .for_type(&TypeRef::I64),
            Constraints::default()
        );
        // 3.0 boolean exclusive bounds, and 3.1 numeric ones (the stricter bound wins).
        check(
            "{type: integer, minimum: 0, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false}",
            own(Constraints {
                minimum: Some(Bound::Exclusive(0.0)),
                maximum: Some(Bound::Inclusive(9.0)),
                ..Constraints::default()
            }),
        );
        check(
            "{type: number, exclusiveMinimum: 0.5, minimum: 1, exclusiveMaximum: 10, multipleOf: 0.25}",
            own(Constraints {
                minimum: Some(Bound::Inclusive(1.0)),
                maximum: Some(Bound::Exclusive(10.0)),
                multiple_of: Some(0.25),
                ..Constraints::default()
            }),
        );
        // Nonsense values are ignored rather than enforced.
        check(
            "{type: string, minLength: -1, maxLength: 1.5, multipleOf: 0}",
            Checks::default(),
        );
        check(
            "{type: array, minItems: 1, uniqueItems: true, items: {type: string, maxLength: 3, pattern: '^[a-z]+$'}}",
            Checks {
                own: Constraints {
                    min_items: Some(1),
                    unique_items: true,
                    ..Constraints::default()
                },
                items: Some(Box::new(own(Constraints {
                    max_length: Some(3),
                    pattern: Some("^[a-z]+$".to_string()),
                    ..Constraints::default()
                }))),
                values: None,
            },
        );
        check(
            "{type: object, maxProperties: 2, additionalProperties: {type: integer, maximum: 5}}",
            Checks {
                own: Constraints {
                    max_properties: Some(2),
                    ..Constraints::default()
                },
                items: None,
                values: Some(Box::new(own(Constraints {
                    maximum: Some(Bound::Inclusive(5.0)),
                    ..Constraints::default()
                }))),
            },
        );
        // A nullable alternative carries its own keywords; a `$ref` carries none here (the
        // referenced type validates itself).
        check(
            "{oneOf: [{type: 'null'}, {type: string, minLength: 2}]}",
            own(Constraints {
                min_length: Some(2),
                ..Constraints::default()
            }),
        );
        check("{$ref: '#/components/schemas/Name'}", Checks::default());
    }

    /// The keywords of one schema (YAML flow style) reported as not enforced, in order.
    fn unenforced(schema: &str, openapi_31: bool) -> Vec<String> {
        let node = crate::loader::yaml::parse(schema).unwrap();
        unenforced_keywords(&node, openapi_31, &Reading::Schema)
            .into_iter()
            .map(|(key, why)| {
                assert!(
                    why.starts_with(&format!("`{}` is not enforced: ", key.text)),
                    "{why}"
                );
                key.text.clone()
            })
            .collect()
    }

    #[test]
    fn keywords_the_checks_read_are_not_reported() {
        for schema in [
            "{type: string, minLength: 1, maxLength: 9, pattern: '^a', const: abc}",
            "{type: integer, minimum: 1, exclusiveMaximum: 9, multipleOf: 2, enum: [4]}",
            "{type: number, minimum: 0, exclusiveMinimum: true}",
            "{type: array, items: {type: string}, minItems: 1, maxItems: 3, uniqueItems: true}",
            "{type: object, additionalProperties: {type: string}, minProperties: 1, maxProperties: 2}",
            "{type: [string, 'null'], maxLength: 3}",
            "{anyOf: [{type: string}, {type: 'null'}], maxLength: 3}",
            "{type: boolean, enum: [true, false]}",
            // Enums of scalars that are not Rust enums are checked as values, and a string enum
            // behind a nullable or one-member wrapper (a `String`).
            "{type: integer, enum: [1, 2, 3]}",
            "{type: [number, 'null'], enum: [0.5, null]}",
            "{anyOf: [{type: string}, {type: 'null'}], enum: [x, y]}",
            "{allOf: [{type: string}], enum: [p, q]}",
            // A struct requires its declared properties by their fields.
            "{type: object, properties: {a: {}}, required: [a]}",
            // A merged `allOf` requires what any of its objects does.
            "{allOf: [{$ref: '#/A'}, {$ref: '#/B'}], required: [a]}",
            // A string enum is a Rust enum: its lengths and pattern add nothing it does not check.
            "{type: string, enum: [asc, desc], maxLength: 4, pattern: '^[a-z]+$'}",
            // Keywords that do not constrain the type, and annotations, are not judged.
            "{type: integer, minLength: 3, format: email, description: x, uniqueItems: false}",
            "{type: object, properties: {a: {type: string}}, maxLength: 3}",
            // Untyped, a scalar `const` is still compared.
            "{const: 5}",
            // A pattern that does not compile is `pattern-invalid`'s.
            "{type: string, format: uuid, pattern: '('}",
        ] {
            assert_eq!(unenforced(schema, true), Vec::<String>::new(), "{schema}");
        }
    }

    #[test]
    fn keywords_the_checks_leave_out_are_reported() {
        let cases: [(&str, &[&str]); 23] = [
            (
                "{not: {type: string}, if: {}, then: {}, else: {}}",
                &["not", "if"],
            ),
            (
                "{type: object, propertyNames: {}, patternProperties: {}, dependentRequired: {}}",
                &["propertyNames", "patternProperties", "dependentRequired"],
            ),
            (
                "{type: array, prefixItems: [], contains: {}, minContains: 1}",
                &["prefixItems", "contains", "minContains"],
            ),
            ("{type: array, enum: [[1], [2]]}", &["enum"]),
            ("{enum: [a, {b: 1}]}", &["enum"]),
            // Values of another type than the schema's, and of several types, are not checked.
            ("{type: integer, enum: ['1', '2']}", &["enum"]),
            ("{enum: [a, 1, true, null]}", &["enum"]),
            // A string enum's lengths and pattern are left to its values, which must meet them.
            (
                "{type: string, enum: [asc, descending], maxLength: 4, pattern: '^[a-z]{3,4}$'}",
                &["maxLength", "pattern"],
            ),
            // Beside a union only its alternatives are read.
            (
                "{oneOf: [{required: [a]}, {required: [b]}], properties: {c: {}}, required: [c]}",
                &["properties", "required"],
            ),
            // `required` of names the struct does not declare, of a map, of an untyped schema.
            (
                "{type: object, properties: {a: {}}, required: [a, b]}",
                &["required"],
            ),
            (
                "{type: object, additionalProperties: {type: string}, required: [a]}",
                &["required"],
            ),
            ("{required: [a]}", &["required"]),
            ("{allOf: [{$ref: '#/A'}], required: [a]}", &["required"]),
            // Beside a one-alternative `anyOf` only that alternative is read.
            (
                "{properties: {a: {}}, anyOf: [{required: [a]}]}",
                &["properties"],
            ),
            ("{type: array, const: [1]}", &["const"]),
            (
                "{type: string, format: uuid, maxLength: 36, pattern: '^[a-f0-9-]+$', const: x}",
                &["maxLength", "pattern", "const"],
            ),
            (
                "{type: string, format: date, minLength: 10}",
                &["minLength"],
            ),
            ("{minLength: 1, minimum: 0}", &["minLength", "minimum"]),
            ("{type: [string, integer], maxLength: 3}", &["maxLength"]),
            (
                "{type: object, properties: {a: {}}, minProperties: 1, maxProperties: 1}",
                &["minProperties", "maxProperties"],
            ),
            (
                "{oneOf: [{type: string}, {type: integer}], minLength: 2, enum: [ab, 3]}",
                &["minLength", "enum"],
            ),
            ("{allOf: [{$ref: '#/X'}], maxLength: 3}", &["maxLength"]),
            (
                "{type: string, minLength: -1, maxLength: 2.5}",
                &["minLength", "maxLength"],
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(unenforced(schema, true), expected, "{schema}");
        }
        // Read as something else: what that type does not check.
        let node =
            crate::loader::yaml::parse("{type: array, maxItems: 2, minLength: 1, items: {}}")
                .unwrap();
        let forced = Reading::Forced {
            ty: Some(TypeRef::String),
            why: "read as one string".to_string(),
        };
        let reported: Vec<_> = unenforced_keywords(&node, true, &forced)
            .into_iter()
            .map(|(k, why)| (k.text.clone(), why))
            .collect();
        assert_eq!(
            reported,
            [(
                "maxItems".to_string(),
                "`maxItems` is not enforced: read as one string".to_string()
            )]
        );
        // Inner keywords win over the wrapper's.
        assert_eq!(
            unenforced(
                "{anyOf: [{type: string, minLength: 1}, {type: 'null'}], maxLength: 3}",
                true
            ),
            ["maxLength"]
        );
        // Beside a `$ref`: said as each version reads it.
        let node =
            crate::loader::yaml::parse("{$ref: '#/X', maxLength: 3, description: d}").unwrap();
        let [(key, why)] = unenforced_keywords(&node, false, &Reading::Schema)
            .try_into()
            .unwrap();
        assert_eq!(key.text, "maxLength");
        assert!(
            why.ends_with("OpenAPI 3.0 ignores every key beside a `$ref`"),
            "{why}"
        );
        let [(_, why)] = unenforced_keywords(&node, true, &Reading::Schema)
            .try_into()
            .unwrap();
        assert!(
            why.ends_with("beside a `$ref` the referenced schema is checked as it is"),
            "{why}"
        );
    }

    #[test]
    fn alternatives_of_required_properties_beside_properties_make_a_struct() {
        let of = |schema: &str| {
            let node = crate::loader::yaml::parse(schema).unwrap();
            requirement_alternatives(&node)
        };
        assert_eq!(
            of(
                "{properties: {a: {}, b: {}}, anyOf: [{required: [a]}, {required: [b], description: d}]}"
            ),
            Some(Requirements {
                exactly_one: false,
                alternatives: vec![vec!["a".to_string()], vec!["b".to_string()]],
            })
        );
        assert!(
            of("{properties: {a: {}, b: {}}, oneOf: [{required: [a, b]}, {required: [b]}]}")
                .unwrap()
                .exactly_one
        );
        for union in [
            // Not only `required` in a member, a name the object does not declare, a property
            // whose presence a default (or a `$ref`, which may hold one) would hide, no
            // properties, both compositions.
            "{properties: {a: {}}, anyOf: [{required: [a], type: object}]}",
            "{properties: {a: {}}, anyOf: [{required: [a]}, {required: [z]}]}",
            "{properties: {a: {default: 1}}, anyOf: [{required: [a]}]}",
            "{properties: {a: {$ref: '#/X'}}, anyOf: [{required: [a]}]}",
            "{anyOf: [{required: [a]}, {required: [b]}]}",
            "{properties: {a: {}}, anyOf: [{required: [a]}], oneOf: [{required: [a]}]}",
            "{properties: {a: {}}, anyOf: [{required: []}, {required: [a]}]}",
            // One alternative (that alternative), an `allOf` beside.
            "{properties: {a: {}}, anyOf: [{required: [a]}]}",
            "{properties: {a: {}, b: {}}, allOf: [{$ref: '#/X'}], anyOf: [{required: [a]}, {required: [b]}]}",
        ] {
            assert_eq!(of(union), None, "{union}");
        }
        // The rule reads such an object as a struct: nothing beside the union is reported.
        assert_eq!(
            unenforced(
                "{type: object, properties: {a: {}, b: {}}, required: [a], anyOf: [{required: [a]}, {required: [b]}]}",
                true
            ),
            Vec::<String>::new()
        );
    }
}

//! `default` values: resolved through `$ref`s to a literal of the field's type, and applied to the fields that carry them.

use super::*;

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
pub(super) const MAX_DEFAULT_DEPTH: usize = 32;

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

pub(super) fn resolve_default_at<'d>(
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
pub(super) fn integer(n: &serde_json::Number) -> Option<i64> {
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

/// Sets [`Field::default`] on every optional property whose `default` is a value of its type.
pub(super) fn apply_defaults(defs: &mut BTreeMap<String, TypeDef>) {
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

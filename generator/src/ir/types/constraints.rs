//! The checks a schema's keywords become (`Constraints`, `Checks`): lengths, bounds, patterns, enums and constants, read once per schema.

use super::*;

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

/// The checks of `node` at a use site; see [`Checks`].
pub(super) fn checks_of(node: &Node, depth: usize) -> Checks {
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
pub(super) fn constraints_of(node: &Node) -> Constraints {
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
pub(super) fn allowed_of(node: &Node) -> Option<Box<[serde_json::Value]>> {
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
pub(super) fn constant_of(node: &Node) -> Option<Box<serde_json::Value>> {
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
pub(super) fn number(node: &Node) -> Option<f64> {
    match node.value {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) if f.is_finite() => Some(f),
        _ => None,
    }
}

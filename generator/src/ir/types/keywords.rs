//! Keyword judgement: which keywords a schema's Rust type does not enforce, where, and why (the verdict `ir/unenforced.rs` reports as `keyword-not-enforced`).

use super::*;

/// Keywords the generated code never checks, wherever they are written (`then` and `else` go
/// with `if`, and are reported with it).
pub(super) const NEVER_CHECKED: [&str; 13] = [
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
pub(super) enum Applies {
    Strings,
    Numbers,
    Arrays,
    Objects,
    Any,
}

/// The validation keywords [`constraints_of`] reads, `enum` and `required`, with what they
/// constrain.
pub(super) const CONSTRAINT_KEYWORDS: [(&str, Applies); 16] = [
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
pub(super) const BESIDE_A_UNION: [&str; 4] =
    ["properties", "additionalProperties", "items", "allOf"];

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
pub(super) enum Judged {
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

pub(super) fn judged(node: &Node, depth: usize) -> Judged {
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
pub(super) fn kept(keyword: &str, c: &Constraints) -> bool {
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
pub(super) fn applies_to(ty: &TypeRef) -> Option<Applies> {
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
pub(super) fn relevant(judgement: &Judged, applies: Applies) -> bool {
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
pub(super) fn required_unenforced(
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
pub(super) fn string_enum_breaks(node: &Node, keyword: &str, own: &Constraints) -> Option<String> {
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
pub(super) fn typed_string(ty: &TypeRef) -> Option<&'static str> {
    match ty {
        TypeRef::Uuid => Some("a UUID (`format: uuid`)"),
        TypeRef::DateTime => Some("a date-time (`format: date-time`)"),
        TypeRef::Date => Some("a date (`format: date`)"),
        _ => None,
    }
}

/// Why a length, bound or count of a schema typed `ty` is not checked, if it would apply.
pub(super) fn type_unenforced(node: &Node, ty: &TypeRef, keyword: &str) -> Option<String> {
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
pub(super) fn untyped(node: &Node) -> String {
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
pub(super) fn enum_unenforced(
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
pub(super) fn const_unenforced(value: &Node) -> String {
    let what = match value.value {
        Value::Seq(_) => "an array",
        Value::Map(_) => "an object",
        _ => "null",
    };
    format!("only a string, number or boolean `const` is compared, not {what}")
}

//! Readers of a schema node's shape: its types, nullability, unions, enums and constants, properties, required names and description.

use super::*;

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
pub(super) enum Shape<'n> {
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

pub(super) fn shape_of(node: &Node) -> Shape<'_> {
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
pub(super) fn is_annotation(keyword: &str) -> bool {
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
pub(super) fn write_value(node: &Node, out: &mut String) {
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
pub(super) fn types_of(node: &Node) -> Vec<String> {
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

pub(super) fn is_null(node: &Node) -> bool {
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

pub(super) fn union_members(node: &Node) -> Option<Vec<&Node>> {
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
pub(super) fn enum_values(node: &Node) -> Option<Vec<&Node>> {
    match node.get("enum").and_then(Node::as_seq) {
        Some(values) => Some(values.iter().collect()),
        None => const_alternatives(node),
    }
}

/// The type a schema without `type` has by the values it allows: those of its `const` or of a
/// `oneOf` of constants, when they are all strings, all integers, all numbers or all booleans.
pub(super) fn type_of_values(node: &Node) -> Option<&'static str> {
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
pub(super) fn string_enum(node: &Node) -> Option<Vec<String>> {
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

pub(super) fn properties_of(node: &Node) -> Vec<(&String, &Node)> {
    node.get("properties")
        .and_then(Node::as_map)
        .map(|m| m.entries().iter().map(|(k, v)| (&k.text, v)).collect())
        .unwrap_or_default()
}

pub(super) fn required_of(node: &Node) -> BTreeSet<String> {
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

pub(super) fn primitive_label(ty: &TypeRef) -> Option<String> {
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

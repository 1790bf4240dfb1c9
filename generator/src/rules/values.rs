//! `default-invalid` and `discriminator-invalid`: the generated code applies a schema's `default`
//! to absent values and turns a `discriminator` into a tagged enum, so both must agree with the
//! schema they are written on. Run on every keyword map of the schema walk in
//! [`super::patterns`] (each node once).

use super::{RuleId, Sink};
use crate::loader::{LoadedSpec, Node, NodeRef, Value};

/// Nesting of values compared here deeper than this counts as equal (never a false finding).
const MAX_DEPTH: usize = 64;

/// Checks one keyword map: its `default` against its own keywords, its `discriminator` against
/// its alternatives.
pub(super) fn check_map(spec: &LoadedSpec, at: NodeRef<'_>, sink: &mut Sink<'_>) {
    if let Some((_, default)) = at.node.entry("default") {
        check_default(
            at,
            NodeRef {
                file: at.file,
                node: default,
            },
            sink,
        );
    }
    if at.node.get("discriminator").is_some() {
        check_discriminator(spec, at, sink);
    }
}

/// Whether a map is a schema whose `default` we can judge: it states a type, an enum or a const
/// (a `$ref` beside the default is not followed; an operation or response object has none).
fn judged(schema: &Node) -> bool {
    schema.ref_target().is_none()
        && ["type", "enum", "const"]
            .iter()
            .any(|k| schema.get(k).is_some())
}

fn check_default(schema: NodeRef<'_>, default: NodeRef<'_>, sink: &mut Sink<'_>) {
    if !judged(schema.node) {
        return;
    }
    let Some(reason) = misfit(schema.node, default.node) else {
        return;
    };
    sink.report(
        RuleId::DefaultInvalid,
        super::at(default),
        None,
        format!(
            "the default {} {reason}: the generated code applies a default only when it is a value of its schema",
            shown(default.node)
        ),
    );
}

/// Why `value` is not a value of `schema` (its `type`, `format: int32`, `enum`, `const`, lengths
/// and bounds), if it is not.
fn misfit(schema: &Node, value: &Node) -> Option<String> {
    let nullable = schema.get("nullable").and_then(Node::as_bool) == Some(true);
    let types: Vec<&str> = match schema.get("type").map(|t| &t.value) {
        Some(Value::Str(t)) => vec![t.as_str()],
        Some(Value::Seq(items)) => items.iter().filter_map(Node::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let fits = |t: &str| match (t, &value.value) {
            ("string", Value::Str(_))
            | ("boolean", Value::Bool(_))
            | ("array", Value::Seq(_))
            | ("object", Value::Map(_))
            | ("null", Value::Null)
            | ("number", Value::Int(_) | Value::Float(_))
            | ("integer", Value::Int(_)) => true,
            ("integer", Value::Float(f)) => f.fract() == 0.0,
            _ => false,
        };
        let null_ok = nullable && value.value == Value::Null;
        if !null_ok && !types.iter().any(|t| fits(t)) {
            return Some(format!(
                "is {}, not {}",
                value.kind_name(),
                types.join(" or ")
            ));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Node::as_seq)
        && !values.iter().any(|v| same(v, value, 0))
    {
        return Some("is not one of the `enum` values".to_string());
    }
    if let Some(constant) = schema.get("const")
        && !same(constant, value, 0)
    {
        return Some(format!("is not the `const` value {}", shown(constant)));
    }
    let number = match value.value {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) => Some(f),
        _ => None,
    };
    if let Some(n) = number {
        if schema.get("format").and_then(Node::as_str) == Some("int32")
            && (n < f64::from(i32::MIN) || n > f64::from(i32::MAX))
        {
            return Some("is out of the `int32` range".to_string());
        }
        let limit = |key: &str| match schema.get(key).map(|n| &n.value) {
            Some(Value::Int(i)) => Some(*i as f64),
            Some(Value::Float(f)) => Some(*f),
            _ => None,
        };
        if limit("minimum").is_some_and(|m| n < m) {
            return Some("is below the `minimum`".to_string());
        }
        if limit("maximum").is_some_and(|m| n > m) {
            return Some("is above the `maximum`".to_string());
        }
    }
    if let Value::Str(s) = &value.value {
        let length = s.chars().count() as i64;
        let bound = |key: &str| match schema.get(key).map(|n| &n.value) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        };
        if bound("minLength").is_some_and(|m| length < m) {
            return Some("is shorter than the `minLength`".to_string());
        }
        if bound("maxLength").is_some_and(|m| length > m) {
            return Some("is longer than the `maxLength`".to_string());
        }
    }
    None
}

/// JSON equality of two data nodes (numbers by value, maps regardless of order).
fn same(a: &Node, b: &Node, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match (&a.value, &b.value) {
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => *x as f64 == *y,
        (Value::Seq(x), Value::Seq(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y, depth + 1))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.entries().len() == y.entries().len()
                && x.entries().iter().all(|(k, v)| {
                    b.get(&k.text)
                        .is_some_and(|other| same(v, other, depth + 1))
                })
        }
        (x, y) => x == y,
    }
}

/// A value as a message quotes it: a scalar as written, a list or map by its kind.
fn shown(node: &Node) -> String {
    match &node.value {
        Value::Str(s) => {
            let short: String = s.chars().take(40).collect();
            format!("`{short:?}`")
        }
        Value::Int(i) => format!("`{i}`"),
        Value::Float(f) => format!("`{f}`"),
        Value::Bool(b) => format!("`{b}`"),
        Value::Null => "`null`".to_string(),
        Value::Seq(_) | Value::Map(_) => format!("({})", node.kind_name()),
    }
}

/// A discriminated `oneOf`/`anyOf`: every `mapping` value names one of the alternatives, and
/// every alternative has the discriminator property.
fn check_discriminator(spec: &LoadedSpec, at: NodeRef<'_>, sink: &mut Sink<'_>) {
    let Some(discriminator) = at.node.get("discriminator") else {
        return;
    };
    let Some(property) = discriminator.get("propertyName").and_then(Node::as_str) else {
        return;
    };
    let Some(alternatives) = at
        .node
        .get("oneOf")
        .or_else(|| at.node.get("anyOf"))
        .and_then(Node::as_seq)
    else {
        // A discriminator on a base schema (`allOf` inheritance): not generated as a union.
        return;
    };
    let mut targets: Vec<*const Node> = Vec::new();
    for alternative in alternatives {
        let alternative = NodeRef {
            file: at.file,
            node: alternative,
        };
        let target = spec.deref(alternative);
        targets.push(std::ptr::from_ref(target.node));
        if target.node.get("type").and_then(Node::as_str) == Some("null") {
            continue;
        }
        if !has_property(spec, target, property, 0) {
            sink.report(
                RuleId::DiscriminatorInvalid,
                super::at(alternative),
                None,
                format!(
                    "this alternative has no `{property}` property: the discriminator cannot select it"
                ),
            );
        }
    }
    let Some(mapping) = discriminator.get("mapping").and_then(Node::as_map) else {
        return;
    };
    for (value, name) in mapping.entries() {
        let Some(text) = name.as_str() else {
            continue;
        };
        // A mapping value is a reference, or the name of a component schema.
        let (from, reference) = if text.contains('#') || text.contains('/') || text.contains('.') {
            (at.file, text.to_string())
        } else {
            (spec.root().file, format!("#/components/schemas/{text}"))
        };
        let resolved = spec
            .resolve_ref(from, &reference)
            .ok()
            .map(|target| spec.deref(target));
        let among = resolved.is_some_and(|t| targets.contains(&std::ptr::from_ref(t.node)));
        if !among {
            sink.report(
                RuleId::DiscriminatorInvalid,
                super::at(NodeRef {
                    file: at.file,
                    node: name,
                }),
                None,
                format!(
                    "the discriminator value `{}` maps to `{text}`, which is not one of the alternatives",
                    value.text
                ),
            );
        }
    }
}

/// Whether `schema` (or an `allOf` member of it, through `$ref`s) lists `property`.
fn has_property(spec: &LoadedSpec, schema: NodeRef<'_>, property: &str, depth: usize) -> bool {
    if depth > 16 {
        return true;
    }
    if schema
        .node
        .get("properties")
        .and_then(|p| p.get(property))
        .is_some()
    {
        return true;
    }
    schema
        .node
        .get("allOf")
        .and_then(Node::as_seq)
        .is_some_and(|members| {
            members.iter().any(|m| {
                let member = spec.deref(NodeRef {
                    file: schema.file,
                    node: m,
                });
                has_property(spec, member, property, depth + 1)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misfit_of(schema: &str, value: &str) -> Option<String> {
        let schema = crate::loader::yaml::parse(schema).unwrap();
        let value = crate::loader::yaml::parse(value).unwrap();
        misfit(&schema, &value)
    }

    #[test]
    fn defaults_are_judged_by_their_own_schema() {
        for (schema, value) in [
            (
                "{type: integer, format: int32, minimum: 1, maximum: 100}",
                "20",
            ),
            ("{type: integer}", "20.0"),
            ("{type: number}", "1"),
            ("{type: string, enum: [asc, desc]}", "desc"),
            ("{type: [string, 'null']}", "null"),
            ("{type: string, nullable: true}", "null"),
            ("{type: array, items: {type: string}}", "[]"),
            ("{type: object}", "{a: 1}"),
            ("{const: {a: [1, 2]}}", "{a: [1, 2.0]}"),
            ("{type: string, minLength: 3, maxLength: 3}", "EUR"),
        ] {
            assert_eq!(misfit_of(schema, value), None, "{schema} {value}");
        }
        for (schema, value, reason) in [
            ("{type: integer}", "first", "is a string, not integer"),
            ("{type: boolean}", "'false'", "is a string, not boolean"),
            ("{type: integer}", "1.5", "is a number, not integer"),
            ("{type: string}", "null", "is null, not string"),
            (
                "{type: string, enum: [asc, desc]}",
                "up",
                "is not one of the `enum` values",
            ),
            ("{const: 2}", "3", "is not the `const` value `2`"),
            (
                "{type: integer, format: int32}",
                "3000000000",
                "is out of the `int32` range",
            ),
            (
                "{type: integer, maximum: 10}",
                "20",
                "is above the `maximum`",
            ),
            (
                "{type: string, maxLength: 2}",
                "EUR",
                "is longer than the `maxLength`",
            ),
        ] {
            assert_eq!(
                misfit_of(schema, value).as_deref(),
                Some(reason),
                "{schema} {value}"
            );
        }
    }
}

//! Values for a probe's requests, from the spec: a string with a `pattern` is drawn from the
//! pattern (fresh for every `unique`, so a natural unique key such as a SKU differs between
//! checks); otherwise a schema's `example`/`examples` first, else a value synthesized from the
//! schema (required properties, the first enum value, formats, lengths and bounds). The same
//! `unique` gives the same value; [`fresh`] draws new patterned strings into an example.

use serde_json::{Map, Value};

use crate::loader::{LoadedSpec, Node, NodeRef, Value as Yaml};

/// Nesting deeper than this is left empty (`{}`/`[]`).
const MAX_DEPTH: usize = 24;

/// A node of the document as JSON (for `example` values).
pub fn to_json(node: &Node) -> Value {
    match &node.value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(i) => Value::from(*i),
        Yaml::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Yaml::Str(s) => Value::String(s.clone()),
        Yaml::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Map(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(k, v)| (k.text.clone(), to_json(v)))
                .collect(),
        ),
    }
}

/// An example of a media type object (`example`, the first of `examples`, or its schema's).
pub fn media_example(spec: &LoadedSpec, media: NodeRef<'_>) -> Option<Value> {
    if let Some(example) = media.node.get("example") {
        return Some(to_json(example));
    }
    if let Some(examples) = media.node.get("examples").and_then(Node::as_map)
        && let Some((_, first)) = examples.entries().first()
    {
        let first = spec.deref(NodeRef {
            file: media.file,
            node: first,
        });
        if let Some(value) = first.node.get("value") {
            return Some(to_json(value));
        }
    }
    None
}

/// A value valid for `schema`, `unique` mixed into free-form strings.
pub fn value<'s>(spec: &'s LoadedSpec, schema: NodeRef<'s>, unique: &str) -> Value {
    synth(spec, schema, unique, 0)
}

fn synth<'s>(spec: &'s LoadedSpec, at: NodeRef<'s>, unique: &str, depth: usize) -> Value {
    let at = spec.deref(at);
    let node = at.node;
    let file = at.file;
    let child = move |n: &'s Node| NodeRef { file, node: n };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(drawn) = patterned(node, unique) {
        return Value::String(drawn);
    }
    if let Some(example) = node.get("example") {
        return fresh(spec, at, &to_json(example), unique);
    }
    if let Some(first) = node
        .get("examples")
        .and_then(Node::as_seq)
        .and_then(|e| e.first())
    {
        return fresh(spec, at, &to_json(first), unique);
    }
    if let Some(value) = node.get("const") {
        return to_json(value);
    }
    if let Some(values) = node.get("enum").and_then(Node::as_seq)
        && let Some(first) = values.iter().find(|v| v.value != Yaml::Null)
    {
        return to_json(first);
    }
    if let Some(members) = node.get("allOf").and_then(Node::as_seq) {
        let mut merged = Map::new();
        for member in members {
            if let Value::Object(part) = synth(spec, child(member), unique, depth + 1) {
                merged.extend(part);
            }
        }
        if let Value::Object(own) = object(spec, at, unique, depth) {
            merged.extend(own);
        }
        return Value::Object(merged);
    }
    // Properties beside alternatives of required properties: the object, with what its first
    // alternative requires (`amount` of "`amount` or `amount_string`").
    if let Some(requirements) = crate::ir::types::requirement_alternatives(node) {
        let Value::Object(mut out) = object(spec, at, unique, depth) else {
            return Value::Object(Map::new());
        };
        let first = requirements
            .alternatives
            .first()
            .cloned()
            .unwrap_or_default();
        for name in first {
            if let Some(schema) = node.get("properties").and_then(|p| p.get(&name)) {
                let schema = child(schema);
                out.insert(name, synth(spec, schema, unique, depth + 1));
            }
        }
        return Value::Object(out);
    }
    if let Some(members) = node
        .get("oneOf")
        .or_else(|| node.get("anyOf"))
        .and_then(Node::as_seq)
        && let Some(first) = members
            .iter()
            .find(|m| m.get("type").and_then(Node::as_str) != Some("null"))
    {
        return synth(spec, child(first), unique, depth + 1);
    }
    match type_of(node).as_deref() {
        Some("object") => object(spec, at, unique, depth),
        Some("array") => {
            let count = node
                .get("minItems")
                .and_then(Node::as_int)
                .unwrap_or(0)
                .clamp(0, 8);
            let item = node.get("items");
            Value::Array(
                (0..count)
                    .map(|i| match item {
                        Some(item) => synth(spec, child(item), &format!("{unique}{i}"), depth + 1),
                        None => Value::Null,
                    })
                    .collect(),
            )
        }
        Some("string") => Value::String(string(node, unique)),
        Some("integer") => Value::from(integer(node)),
        Some("number") => {
            serde_json::Number::from_f64(number(node)).map_or(Value::from(1), Value::Number)
        }
        Some("boolean") => Value::Bool(true),
        Some("null") => Value::Null,
        _ => Value::Object(Map::new()),
    }
}

/// The required properties of an object schema.
fn object<'s>(spec: &'s LoadedSpec, at: NodeRef<'s>, unique: &str, depth: usize) -> Value {
    let required: Vec<&str> = at
        .node
        .get("required")
        .and_then(Node::as_seq)
        .map(|r| r.iter().filter_map(Node::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    if let Some(properties) = at.node.get("properties").and_then(Node::as_map) {
        for (name, schema) in properties.entries() {
            if required.contains(&name.text.as_str()) {
                let schema = NodeRef {
                    file: at.file,
                    node: schema,
                };
                out.insert(name.text.clone(), synth(spec, schema, unique, depth + 1));
            }
        }
    }
    Value::Object(out)
}

/// The schema's non-null type (`type: [string, "null"]` → string); inferred from its keywords.
fn type_of(node: &Node) -> Option<String> {
    match node.get("type").map(|t| &t.value) {
        Some(Yaml::Str(s)) => Some(s.clone()),
        Some(Yaml::Seq(items)) => items
            .iter()
            .filter_map(Node::as_str)
            .find(|t| *t != "null")
            .map(str::to_string),
        _ if node.get("properties").is_some() => Some("object".into()),
        _ if node.get("items").is_some() => Some("array".into()),
        _ => None,
    }
}

fn string(node: &Node, unique: &str) -> String {
    let base = match node.get("format").and_then(Node::as_str) {
        Some("uuid") => return uuid_like(unique),
        Some("date-time") => return "2026-01-01T00:00:00Z".into(),
        Some("date") => return "2026-01-01".into(),
        Some("email") => return format!("probe-{unique}@example.com"),
        Some("uri" | "url") => return format!("https://example.com/probe/{unique}"),
        _ => format!("probe-{unique}"),
    };
    let (min, max) = lengths(node);
    let max = max.max(1);
    let mut text = base;
    while text.len() < min {
        text.push('x');
    }
    text.truncate(max.max(min));
    text
}

/// A string schema's `pattern`, drawn within its lengths for `unique` (`None` without a pattern,
/// with an `enum` or `const` that decides, or when nothing was found).
fn patterned(node: &Node, unique: &str) -> Option<String> {
    let pattern = node.get("pattern").and_then(Node::as_str)?;
    if node.get("enum").is_some() || node.get("const").is_some() {
        return None;
    }
    let (min, max) = lengths(node);
    idemgen_protocol::pattern::sample(pattern, seed(unique), min, max)
}

/// A string schema's `minLength` (0 without one) and `maxLength` (`usize::MAX` without one).
fn lengths(node: &Node) -> (usize, usize) {
    let min = node
        .get("minLength")
        .and_then(Node::as_int)
        .unwrap_or(0)
        .max(0) as usize;
    let max = node
        .get("maxLength")
        .and_then(Node::as_int)
        .map_or(usize::MAX, |m| m.max(0) as usize);
    (min, max)
}

/// A seed for the pattern sampler from `unique`.
fn seed(unique: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(unique.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
}

/// `value` (an example) with each string under a `pattern` drawn anew for `unique`, following
/// the schema's `properties` (its `allOf` members' too) and `items`: an example's natural unique
/// key (a SKU) is then fresh per check while the rest keeps the spec's words.
pub fn fresh(spec: &LoadedSpec, schema: NodeRef<'_>, value: &Value, unique: &str) -> Value {
    fn walk(
        spec: &LoadedSpec,
        at: NodeRef<'_>,
        value: &Value,
        unique: &str,
        depth: usize,
    ) -> Value {
        let at = spec.deref(at);
        if depth > MAX_DEPTH {
            return value.clone();
        }
        let child = |n| NodeRef {
            file: at.file,
            node: n,
        };
        match value {
            Value::String(_) => {
                patterned(at.node, unique).map_or_else(|| value.clone(), Value::String)
            }
            Value::Array(items) => match at.node.get("items") {
                Some(item) => Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            walk(spec, child(item), v, &format!("{unique}{i}"), depth + 1)
                        })
                        .collect(),
                ),
                None => value.clone(),
            },
            Value::Object(fields) => {
                let mut schemas = vec![at];
                if let Some(members) = at.node.get("allOf").and_then(Node::as_seq) {
                    schemas.extend(members.iter().map(|m| spec.deref(child(m))));
                }
                Value::Object(
                    fields
                        .iter()
                        .map(|(name, v)| {
                            let property = schemas.iter().find_map(|s| {
                                s.node.get("properties").and_then(|p| p.get(name)).map(|n| {
                                    NodeRef {
                                        file: s.file,
                                        node: n,
                                    }
                                })
                            });
                            let v = match property {
                                Some(p) => walk(spec, p, v, &format!("{unique}.{name}"), depth + 1),
                                None => v.clone(),
                            };
                            (name.clone(), v)
                        })
                        .collect(),
                )
            }
            _ => value.clone(),
        }
    }
    walk(spec, schema, value, unique, 0)
}

fn integer(node: &Node) -> i64 {
    let minimum = node.get("minimum").and_then(Node::as_int);
    let exclusive = node.get("exclusiveMinimum").and_then(Node::as_int);
    let maximum = node.get("maximum").and_then(Node::as_int);
    let low = match (minimum, exclusive) {
        (_, Some(e)) => e + 1,
        (Some(m), _) => m,
        _ => 1,
    };
    maximum.map_or(low, |max| low.min(max))
}

fn number(node: &Node) -> f64 {
    let get = |k: &str| {
        node.get(k).and_then(|n| match n.value {
            Yaml::Int(i) => Some(i as f64),
            Yaml::Float(f) => Some(f),
            _ => None,
        })
    };
    let low = match (get("minimum"), get("exclusiveMinimum")) {
        (_, Some(e)) => e + 1.0,
        (Some(m), _) => m,
        _ => 1.0,
    };
    get("maximum").map_or(low, |max| low.min(max))
}

/// A UUID-shaped string (version 4 layout) derived from `unique`.
pub fn uuid_like(unique: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(unique.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The same body with one leaf changed (a string, else a number, else a boolean), for the check
/// that a reused key with another request is refused; `None` when nothing can change.
pub fn changed(body: &Value) -> Option<Value> {
    fn change(v: &mut Value) -> bool {
        match v {
            Value::String(s) => {
                s.push_str("-changed");
                true
            }
            Value::Number(n) => {
                *v = match n.as_i64() {
                    Some(i) => Value::from(i.wrapping_add(1)),
                    None => Value::from(n.as_f64().unwrap_or(0.0) + 1.0),
                };
                true
            }
            Value::Bool(b) => {
                *b = !*b;
                true
            }
            Value::Array(items) => items.iter_mut().any(change),
            Value::Object(map) => map.values_mut().any(change),
            Value::Null => false,
        }
    }
    let mut copy = body.clone();
    change(&mut copy).then_some(copy)
}

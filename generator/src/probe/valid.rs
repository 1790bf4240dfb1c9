//! Whether a value the probe is about to send is valid for its schema, as the spec states it:
//! `type` (and `nullable`), `enum`, `const`, string lengths, `pattern` (compiled as the
//! generated server compiles it), `format` (`uuid`, `date`, `date-time`, `email`), numeric
//! bounds and `multipleOf`, `required`, `properties`, `additionalProperties: false`, `items` and
//! their counts, and `allOf`/`anyOf`/`oneOf` (one alternative suffices: a synthesized object may
//! satisfy several). A body that fails is not sent: its checks are skipped with the reason,
//! since a server's 400 to it would prove nothing.

use serde_json::Value;

use crate::loader::{LoadedSpec, Node, NodeRef, Value as Yaml};

/// Deeper than this, a value is taken as valid (the synthesizer stops there too).
const MAX_DEPTH: usize = 32;

/// `Ok` when `value` is valid for `schema`; else where and why not (`/sku: does not match …`).
pub fn validate(spec: &LoadedSpec, schema: NodeRef<'_>, value: &Value) -> Result<(), String> {
    check(spec, schema, value, "", 0)
}

fn check(
    spec: &LoadedSpec,
    at: NodeRef<'_>,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let at = spec.deref(at);
    let node = at.node;
    let child = |n| NodeRef {
        file: at.file,
        node: n,
    };
    let here = || if path.is_empty() { "the body" } else { path };
    if value.is_null() && nullable(node) {
        return Ok(());
    }
    if let Some(members) = node.get("allOf").and_then(Node::as_seq) {
        for member in members {
            check(spec, child(member), value, path, depth + 1)?;
        }
    }
    for any in ["anyOf", "oneOf"] {
        if let Some(members) = node.get(any).and_then(Node::as_seq)
            && !members.is_empty()
        {
            let mut first_error = None;
            let fits = members.iter().any(|m| {
                check(spec, child(m), value, path, depth + 1)
                    .map_err(|e| first_error.get_or_insert(e).clone())
                    .is_ok()
            });
            if !fits {
                return Err(format!(
                    "{}: matches no alternative of its {any} (the first: {})",
                    here(),
                    first_error.unwrap_or_default()
                ));
            }
        }
    }
    if let Some(allowed) = node.get("enum").and_then(Node::as_seq)
        && !allowed.iter().any(|a| super::synth::to_json(a) == *value)
    {
        return Err(format!("{}: {value} is not one of its enum", here()));
    }
    if let Some(constant) = node.get("const")
        && super::synth::to_json(constant) != *value
    {
        return Err(format!("{}: {value} is not its const", here()));
    }
    if let Some(types) = types(node)
        && !types.iter().any(|t| is_type(value, t))
    {
        return Err(format!(
            "{}: {value} is not of type {}",
            here(),
            types.join(" or ")
        ));
    }
    match value {
        Value::String(s) => string(node, s, here()),
        Value::Number(n) => number(node, n.as_f64().unwrap_or(0.0), here()),
        Value::Array(items) => {
            let count = items.len() as i64;
            if node
                .get("minItems")
                .and_then(Node::as_int)
                .is_some_and(|m| count < m)
            {
                return Err(format!("{}: fewer items than its minItems", here()));
            }
            if node
                .get("maxItems")
                .and_then(Node::as_int)
                .is_some_and(|m| count > m)
            {
                return Err(format!("{}: more items than its maxItems", here()));
            }
            if let Some(schema) = node.get("items").filter(|i| i.as_map().is_some()) {
                for (i, item) in items.iter().enumerate() {
                    check(spec, child(schema), item, &format!("{path}/{i}"), depth + 1)?;
                }
            }
            Ok(())
        }
        Value::Object(fields) => {
            if let Some(required) = node.get("required").and_then(Node::as_seq) {
                for name in required.iter().filter_map(Node::as_str) {
                    if !fields.contains_key(name) {
                        return Err(format!("{}: its required `{name}` is missing", here()));
                    }
                }
            }
            let properties = node.get("properties");
            let closed = node.get("additionalProperties").and_then(Node::as_bool) == Some(false);
            for (name, field) in fields {
                match properties.and_then(|p| p.get(name)) {
                    Some(schema) => check(
                        spec,
                        child(schema),
                        field,
                        &format!("{path}/{name}"),
                        depth + 1,
                    )?,
                    None if closed && node.get("allOf").is_none() => {
                        return Err(format!(
                            "{}: `{name}` is not one of its properties (additionalProperties: false)",
                            here()
                        ));
                    }
                    None => {}
                }
            }
            Ok(())
        }
        Value::Bool(_) | Value::Null => Ok(()),
    }
}

/// `nullable: true` (3.0), or `null` among its types (3.1).
fn nullable(node: &Node) -> bool {
    node.get("nullable").and_then(Node::as_bool) == Some(true)
        || types(node).is_some_and(|t| t.iter().any(|t| t == "null"))
}

fn types(node: &Node) -> Option<Vec<String>> {
    match &node.get("type")?.value {
        Yaml::Str(s) => Some(vec![s.clone()]),
        Yaml::Seq(items) => Some(
            items
                .iter()
                .filter_map(Node::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    }
}

fn is_type(value: &Value, kind: &str) -> bool {
    match (kind, value) {
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("null", Value::Null)
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn string(node: &Node, s: &str, here: &str) -> Result<(), String> {
    let chars = s.chars().count() as i64;
    if node
        .get("minLength")
        .and_then(Node::as_int)
        .is_some_and(|m| chars < m)
    {
        return Err(format!("{here}: {s:?} is shorter than its minLength"));
    }
    if node
        .get("maxLength")
        .and_then(Node::as_int)
        .is_some_and(|m| chars > m)
    {
        return Err(format!("{here}: {s:?} is longer than its maxLength"));
    }
    if let Some(pattern) = node.get("pattern").and_then(Node::as_str)
        && let Ok(regex) = idemgen_protocol::pattern::compile(pattern)
        && !regex.is_match(s)
    {
        return Err(format!(
            "{here}: {s:?} does not match its pattern `{pattern}`"
        ));
    }
    let format_ok = match node.get("format").and_then(Node::as_str) {
        Some("uuid") => uuid(s),
        Some("date") => date(s),
        Some("date-time") => {
            s.len() >= 20 && date(&s[..10]) && matches!(s.as_bytes()[10], b'T' | b't')
        }
        Some("email") => s
            .split_once('@')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()),
        _ => true,
    };
    if !format_ok {
        return Err(format!("{here}: {s:?} is not of its format"));
    }
    Ok(())
}

fn uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

fn number(node: &Node, n: f64, here: &str) -> Result<(), String> {
    let get = |k: &str| {
        node.get(k).and_then(|v| match v.value {
            Yaml::Int(i) => Some(i as f64),
            Yaml::Float(f) => Some(f),
            _ => None,
        })
    };
    let flag = |k: &str| node.get(k).and_then(Node::as_bool) == Some(true);
    let out_of_bounds = get("minimum")
        .is_some_and(|m| n < m || (flag("exclusiveMinimum") && n == m))
        || get("maximum").is_some_and(|m| n > m || (flag("exclusiveMaximum") && n == m))
        || get("exclusiveMinimum").is_some_and(|m| n <= m)
        || get("exclusiveMaximum").is_some_and(|m| n >= m);
    if out_of_bounds {
        return Err(format!("{here}: {n} is out of its bounds"));
    }
    if let Some(step) = get("multipleOf").filter(|s| *s > 0.0)
        && ((n / step).round() * step - n).abs() > 1e-9 * n.abs().max(1.0)
    {
        return Err(format!("{here}: {n} is not a multiple of {step}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{MemoryFs, load_with};
    use serde_json::json;

    fn validated(schema: &str, value: Value) -> Result<(), String> {
        let mut fs = MemoryFs::new();
        fs.insert(
            "/s.yaml",
            format!(
                "openapi: 3.1.0\ninfo: {{title: t, version: '1'}}\npaths: {{}}\nschema: {schema}\n"
            ),
        );
        let spec = load_with(&fs, std::path::Path::new("/s.yaml")).unwrap();
        let root = spec.root();
        let schema = NodeRef {
            file: root.file,
            node: root.node.get("schema").unwrap(),
        };
        validate(&spec, schema, &value)
    }

    #[test]
    fn what_the_spec_states_is_checked_and_named() {
        let sku = "{type: object, required: [sku], properties: {sku: {type: string, pattern: '^[A-Z]{3}-[0-9]{4}$'}, n: {type: integer, minimum: 1, maximum: 9}}}";
        assert_eq!(validated(sku, json!({"sku": "ABC-1234", "n": 3})), Ok(()));
        let why = validated(sku, json!({"sku": "probe-1"})).unwrap_err();
        assert!(why.contains("/sku") && why.contains("pattern"), "{why}");
        let why = validated(sku, json!({"n": 3})).unwrap_err();
        assert!(why.contains("required `sku`"), "{why}");
        let why = validated(sku, json!({"sku": "ABC-1234", "n": 10})).unwrap_err();
        assert!(why.contains("/n") && why.contains("bounds"), "{why}");
        let why = validated(sku, json!({"sku": "ABC-1234", "n": 1.5})).unwrap_err();
        assert!(why.contains("type integer"), "{why}");
        assert!(validated("{type: string, format: uuid}", json!("nope")).is_err());
        assert!(validated("{type: string, enum: [a, b]}", json!("c")).is_err());
        assert!(validated("{type: [string, 'null'], maxLength: 2}", Value::Null).is_ok());
        assert!(
            validated(
                "{type: object, additionalProperties: false, properties: {a: {}}}",
                json!({"b": 1})
            )
            .is_err()
        );
        assert!(validated("{oneOf: [{type: integer}, {type: string}]}", json!("x")).is_ok());
        assert!(validated("{anyOf: [{type: integer}, {type: boolean}]}", json!("x")).is_err());
        assert!(
            validated(
                "{type: array, minItems: 1, items: {type: string}}",
                json!([])
            )
            .is_err()
        );
        assert!(validated("{type: number, exclusiveMinimum: 0}", json!(0)).is_err());
        assert!(validated("{type: number, multipleOf: 0.5}", json!(1.5)).is_ok());
    }
}

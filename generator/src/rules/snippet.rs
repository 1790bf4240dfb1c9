//! Fix-up snippets in the spec's own format. Every rule's help is written as prose, a YAML
//! snippet, and maybe more prose; for a spec written in JSON the snippet is shown as JSON, so that
//! it can be pasted as it is.

use crate::finding::Finding;
use crate::loader::{LoadedSpec, Node, Value};

/// Rewrites the snippet of every finding located in a JSON file as JSON.
pub fn adapt(spec: &LoadedSpec, findings: &mut [Finding]) {
    for finding in findings {
        let Some(file) = spec.sources().get(finding.file) else {
            continue;
        };
        if file.text.trim_start().starts_with('{') {
            finding.help = as_json(&finding.help);
        }
    }
}

/// `help` with its snippet (the paragraph after the first) as JSON; unchanged when that
/// paragraph is not a YAML mapping or sequence.
pub fn as_json(help: &str) -> String {
    let mut paragraphs: Vec<String> = help.split("\n\n").map(str::to_owned).collect();
    let Some(snippet) = paragraphs.get_mut(1) else {
        return help.to_owned();
    };
    let Ok(node) = crate::loader::yaml::parse(snippet) else {
        return help.to_owned();
    };
    if !matches!(node.value, Value::Map(_) | Value::Seq(_)) {
        return help.to_owned();
    }
    let mut out = String::new();
    write_json(&node, 0, &mut out);
    *snippet = out;
    paragraphs.join("\n\n")
}

fn write_json(node: &Node, indent: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match &node.value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(&b.to_string()),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(
            &serde_json::Number::from_f64(*f).map_or_else(|| "null".into(), |n| n.to_string()),
        ),
        Value::Str(s) => out.push_str(&serde_json::Value::String(s.clone()).to_string()),
        Value::Seq(items) if items.is_empty() => out.push_str("[]"),
        Value::Seq(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                write_json(item, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Map(map) if map.is_empty() => out.push_str("{}"),
        Value::Map(map) => {
            out.push_str("{\n");
            let entries = map.entries();
            for (i, (key, value)) in entries.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&serde_json::Value::String(key.text.clone()).to_string());
                out.push_str(": ");
                write_json(value, indent + 1, out);
                out.push_str(if i + 1 < entries.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_become_json_and_prose_stays() {
        let help = "make the header required:\n\n- name: Idempotency-Key\n  in: header\n  required: true\n\nthen rebuild.";
        assert_eq!(
            as_json(help),
            "make the header required:\n\n[\n  {\n    \"name\": \"Idempotency-Key\",\n    \"in\": \"header\",\n    \"required\": true\n  }\n]\n\nthen rebuild."
        );
        let version = "bump it:\n\nx-idempotency-fingerprint-version: 2";
        assert_eq!(
            as_json(version),
            "bump it:\n\n{\n  \"x-idempotency-fingerprint-version\": 2\n}"
        );
        // No snippet, or one that is not YAML structure: unchanged.
        assert_eq!(as_json("just prose"), "just prose");
        assert_eq!(as_json("prose:\n\nplain words"), "prose:\n\nplain words");
    }
}

//! The `x-idempotent` and `x-idempotency-*` extensions: types, ranges, typos and placement.

use super::{RuleId, Sink};
use crate::loader::{LoadedSpec, Node, NodeRef, Value};
use crate::spec::extensions::{
    FingerprintVersion, KNOWN, PREFIX, Retention, X_FINGERPRINT, X_FINGERPRINT_VERSION,
    X_IDEMPOTENT, X_RETENTION, X_TOMBSTONES, is_ours,
};
use crate::spec::{IGNORED_HEADERS, Operation, SAFE_METHODS};

/// Checks `x-idempotency-fingerprint` on the parameters of one operation: a boolean, on a header.
/// Path and query parameters are always part of the semantic input, and a marker that is not a
/// boolean (`"true"`) would leave its header out of it without a word.
pub(super) fn check_parameter_markers(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    for p in op.parameters(spec) {
        let Some((key, value)) = p.fingerprint_marker() else {
            continue;
        };
        let name = p.name.unwrap_or("?");
        let location = p.location.unwrap_or("?");
        let ignored =
            location == "header" && IGNORED_HEADERS.contains(&name.to_ascii_lowercase().as_str());
        let why = match location {
            "header" if ignored => Some(format!(
                "OpenAPI ignores the `{name}` header parameter, and so does idemgen: it is never part of the semantic input"
            )),
            "header" => None,
            "path" | "query" => Some(
                "idemgen reads it on header parameters only, and path and query parameters are always part of the semantic input".to_string(),
            ),
            _ => Some("idemgen reads it on header parameters only".to_string()),
        };
        if let Some(why) = why {
            let shown = if ignored { "header" } else { location };
            sink.report_with_help(
                RuleId::IdempotencyExtensionMisplaced,
                (p.node.file, key.span),
                Some(op),
                format!("`{X_FINGERPRINT}` on the {shown} parameter `{name}` has no effect: {why}"),
                format!(
                    "remove it:\n\n- name: {name}\n  in: {location}\n  # no {X_FINGERPRINT} here"
                ),
            );
            continue;
        }
        if value.as_bool().is_none() {
            // The key header never enters the semantic input, whatever its marker says.
            let effect = if p.is_header(&sink.config().header) {
                String::new()
            } else {
                ": the header is left out of the semantic input".to_string()
            };
            sink.report_with_help(
                RuleId::XIdempotentNotBoolean,
                (p.node.file, value.span),
                Some(op),
                format!(
                    "`{X_FINGERPRINT}` on the header `{name}` must be a boolean, found {}{effect}",
                    describe(value)
                ),
                format!("use a boolean, not a string or number:\n\n{X_FINGERPRINT}: true"),
            );
        }
    }
}

/// Checks the extensions written on one operation.
pub(super) fn check_operation(op: &Operation<'_>, sink: &mut Sink<'_>) {
    let Some(map) = op.node.node.as_map() else {
        return;
    };
    let file = op.node.file;
    for (key, value) in map.entries() {
        if key.text == X_IDEMPOTENT {
            match value.value {
                Value::Bool(true) if SAFE_METHODS.contains(&op.method) => sink.report(
                    RuleId::XIdempotentOnSafeMethod,
                    (file, key.span),
                    Some(op),
                    format!(
                        "{} is marked `x-idempotent: true`, but {} is a safe method",
                        op.display_name(),
                        op.method.to_ascii_uppercase()
                    ),
                ),
                Value::Bool(_) => {}
                _ => sink.report(
                    RuleId::XIdempotentNotBoolean,
                    (file, value.span),
                    Some(op),
                    format!(
                        "`x-idempotent` must be a boolean, found {}",
                        describe(value)
                    ),
                ),
            }
        } else if key.text == X_FINGERPRINT_VERSION {
            if let FingerprintVersion::Invalid(value) = op.fingerprint_version() {
                sink.report(
                    RuleId::FingerprintVersionInvalid,
                    (file, value.span),
                    Some(op),
                    format!(
                        "`{X_FINGERPRINT_VERSION}` must be an integer from 1 to 32767, found {}",
                        describe(value)
                    ),
                );
            }
        } else if key.text == X_TOMBSTONES {
            // Checked with every operation in view: `check_tombstones`.
        } else if key.text == X_RETENTION {
            match op.retention() {
                Retention::Invalid(value, why) => sink.report(
                    RuleId::RetentionInvalid,
                    (file, value.span),
                    Some(op),
                    format!("`{X_RETENTION}`: {why}"),
                ),
                Retention::Valid(_) if !op.is_idempotent() => sink.report_with_help(
                    RuleId::RetentionInvalid,
                    (file, key.span),
                    Some(op),
                    format!(
                        "`{X_RETENTION}` on {}, which is not idempotent: it keeps no records",
                        op.display_name()
                    ),
                    format!(
                        "remove it (or mark the operation `x-idempotent: true` if it is a write):\n\n{}:\n  # no {X_RETENTION} here",
                        op.method
                    ),
                ),
                Retention::Valid(_) | Retention::Absent => {}
            }
        } else if key.text == X_FINGERPRINT {
            sink.report_with_help(
                RuleId::IdempotencyExtensionMisplaced,
                (file, key.span),
                Some(op),
                format!(
                    "`{X_FINGERPRINT}` on {} has no effect: idemgen reads it on header parameters only",
                    op.display_name()
                ),
                format!(
                    "move it onto the header parameter whose value is part of the request:\n\nparameters:\n  - name: {}\n    in: header\n    {X_FINGERPRINT}: true",
                    op.node
                        .node
                        .get("parameters")
                        .and_then(Node::as_seq)
                        .unwrap_or_default()
                        .iter()
                        .filter(|p| p.get("in").and_then(Node::as_str) == Some("header"))
                        .filter_map(|p| p.get("name").and_then(Node::as_str))
                        .find(|n| !n.eq_ignore_ascii_case(&sink.config().header))
                        .unwrap_or("X-Account-Id")
                ),
            );
        } else if key.text.starts_with(PREFIX) {
            let suggested = suggestion(&key.text);
            let hint = suggested
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            let message = format!("unknown extension `{}`{hint}", key.text);
            match suggested {
                Some(known) => sink.report_with_help(
                    RuleId::UnknownIdempotencyExtension,
                    (file, key.span),
                    Some(op),
                    message,
                    format!(
                        "replace it with the extension it most likely means:\n\n{known}: {}",
                        yaml_scalar(value)
                    ),
                ),
                None => sink.report(
                    RuleId::UnknownIdempotencyExtension,
                    (file, key.span),
                    Some(op),
                    message,
                ),
            }
        }
    }
}

/// Checks `x-idempotency-tombstones`: an operationId, or a non-empty list of them, each naming
/// an idempotent operation of the spec.
pub(super) fn check_tombstones(
    spec: &LoadedSpec,
    op: &Operation<'_>,
    ops: &[Operation<'_>],
    sink: &mut Sink<'_>,
) {
    let Some(value) = op.tombstones_node() else {
        return;
    };
    let entries: Vec<&Node> = match value.as_seq() {
        Some(items) if !items.is_empty() => items.iter().collect(),
        _ => vec![value],
    };
    for entry in entries {
        check_tombstone(spec, op, ops, entry, sink);
    }
}

fn check_tombstone(
    spec: &LoadedSpec,
    op: &Operation<'_>,
    ops: &[Operation<'_>],
    value: &Node,
    sink: &mut Sink<'_>,
) {
    let file = op.node.file;
    let Some(target) = value.as_str() else {
        sink.report(
            RuleId::TombstoneTargetInvalid,
            (file, value.span),
            Some(op),
            format!(
                "`{X_TOMBSTONES}` must be the operationId of an idempotent operation (or a list of them), found {}",
                describe(value)
            ),
        );
        return;
    };
    let found = ops
        .iter()
        .find(|o| o.operation_id().and_then(Node::as_str) == Some(target));
    let problem = match found {
        None => format!("`{X_TOMBSTONES}` names `{target}`, but no operation has that operationId"),
        Some(o) if !o.is_idempotent() => format!(
            "`{X_TOMBSTONES}` names {}, which is not idempotent: it has no records to tombstone",
            o.display_name()
        ),
        Some(o) => {
            // The pipeline tombstones the target's records about the resource this operation's
            // path names; a target whose own path names its resource otherwise (other parameters,
            // or in another order) would never match. A target without path parameters (a
            // create) is about what its handler names, and is matched by that.
            let names = |o: &Operation<'_>| -> Vec<String> {
                o.parameters(spec)
                    .into_iter()
                    .filter(|p| p.location == Some("path"))
                    .filter_map(|p| p.name.map(str::to_owned))
                    .collect()
            };
            let (ours, theirs) = (names(op), names(o));
            if theirs.is_empty() || ours == theirs {
                return;
            }
            format!(
                "`{X_TOMBSTONES}` names {}, whose records are about its path parameters ({}), but this operation's path names the resource by ({}): deleting would tombstone none of them",
                o.display_name(),
                theirs.join(", "),
                ours.join(", ")
            )
        }
    };
    sink.report(
        RuleId::TombstoneTargetInvalid,
        (file, value.span),
        Some(op),
        problem,
    );
}

/// Reports idemgen extensions on the document root and on Path Items, where they have no effect.
pub(super) fn check_misplaced(spec: &LoadedSpec, sink: &mut Sink<'_>) {
    let root = spec.root();
    let mut owners: Vec<(NodeRef<'_>, String)> = vec![(root, "the document root".to_string())];
    if let Some(paths) = root.node.get("paths").and_then(Node::as_map) {
        for (path, item) in paths.entries() {
            let item = spec.deref(NodeRef {
                file: root.file,
                node: item,
            });
            owners.push((item, format!("the path item `{}`", path.text)));
        }
    }
    for (owner, what) in owners {
        let Some(map) = owner.node.as_map() else {
            continue;
        };
        for (key, value) in map.entries().iter().filter(|(k, _)| is_ours(&k.text)) {
            let message = format!(
                "`{}` on {what} has no effect: idemgen reads it on operations only",
                key.text
            );
            // Onto the first operation it can belong to: the path item's own, else the spec's.
            let target = match what.strip_prefix("the path item `") {
                Some(path) => {
                    let path = path.trim_end_matches('`');
                    owner
                        .node
                        .as_map()
                        .and_then(|m| {
                            m.entries()
                                .iter()
                                .find(|(k, _)| crate::spec::METHODS.contains(&k.text.as_str()))
                        })
                        .map(|(m, _)| (path.to_owned(), m.text.clone()))
                }
                None => crate::spec::operations(spec)
                    .first()
                    .map(|o| (o.path.to_owned(), o.method.to_owned())),
            };
            match target {
                Some((path, method)) => sink.report_with_help(
                    RuleId::IdempotencyExtensionMisplaced,
                    (owner.file, key.span),
                    None,
                    message,
                    format!(
                        "move it onto the operation itself:\n\npaths:\n  {path}:\n    {method}:\n      {}: {}",
                        key.text,
                        yaml_scalar(value)
                    ),
                ),
                None => sink.report(
                    RuleId::IdempotencyExtensionMisplaced,
                    (owner.file, key.span),
                    None,
                    message,
                ),
            }
        }
    }
}

/// A scalar as YAML writes it in a snippet (`true`, `1`, `"30d"`); anything else as flow JSON.
fn yaml_scalar(node: &Node) -> String {
    match &node.value {
        Value::Str(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Seq(items) => format!(
            "[{}]",
            items.iter().map(yaml_scalar).collect::<Vec<_>>().join(", ")
        ),
        Value::Map(map) => format!(
            "{{{}}}",
            map.entries()
                .iter()
                .map(|(k, v)| format!("{}: {}", k.text, yaml_scalar(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A short description of a value for messages: `the string "yes"`, `an integer (0)`.
fn describe(node: &Node) -> String {
    match &node.value {
        Value::Str(s) => format!("the string {s:?}"),
        Value::Int(i) => format!("the integer {i}"),
        Value::Float(f) => format!("the number {f}"),
        Value::Bool(b) => format!("the boolean {b}"),
        _ => node.kind_name().to_string(),
    }
}

/// The known extension closest to `key`, if it is a plausible typo of it.
fn suggestion(key: &str) -> Option<&'static str> {
    KNOWN
        .into_iter()
        .map(|known| (edit_distance(key, known), known))
        .filter(|(d, known)| *d <= known.len() / 4)
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_suggestions() {
        assert_eq!(
            suggestion("x-idempotency-fingerprint-versoin"),
            Some(X_FINGERPRINT_VERSION)
        );
        assert_eq!(suggestion("x-idempotency-ttl"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

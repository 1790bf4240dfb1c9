//! Media types the generator cannot honour are said out loud: bodies it carries as raw bytes
//! (XML, forms and multipart bodies without a schema; a form request body with one, and a
//! multipart one whose parts it can type, are typed), alternatives it drops beside the one it serves, event streams served
//! as one text body, and idempotent operations whose only success is a stream (which cannot be
//! stored and replayed).

use super::{RuleId, Sink};
use crate::loader::{LoadedSpec, Node, NodeRef};
use crate::spec::{Operation, is_flat_form, is_form, is_json};

/// Media types whose bodies arrive and leave as a stream of events or records.
const STREAMS: [&str; 4] = [
    "text/event-stream",
    "application/x-ndjson",
    "application/jsonl",
    "application/stream+json",
];

/// How to make a multipart body typed: an object of text, file and JSON parts.
const MULTIPART_HELP: &str = "give the body an object schema whose parts are text (a scalar, a string enum, an array of them), files (a binary string, or an array of them) or JSON (an object, or a part whose encoding says so):\n\nmultipart/form-data:\n  schema:\n    type: object\n    properties:\n      file: {type: string, format: binary}\n      title: {type: string}\n      meta: {oneOf: [{type: string}, {type: object}]}\n  encoding:\n    meta:\n      contentType: application/json";

fn essence(media: &str) -> String {
    media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn is_stream(media: &str) -> bool {
    STREAMS.contains(&essence(media).as_str())
}

/// What the generator makes of a media type it serves: typed JSON, text, or raw bytes.
fn typed(media: &str) -> bool {
    let m = essence(media);
    is_json(&m)
        || m.contains('*')
        || m == "application/octet-stream"
        || (m.starts_with("text/") && !is_stream(&m))
}

/// A form request body whose schema is flat fields: decoded into its type (`BodyKind::Form`).
fn typed_form(
    spec: &LoadedSpec,
    owner: NodeRef<'_>,
    request: bool,
    media: &str,
    entry: &Node,
) -> bool {
    request
        && is_form(media)
        && entry.get("schema").is_some_and(|schema| {
            is_flat_form(
                spec,
                NodeRef {
                    file: owner.file,
                    node: schema,
                },
            )
        })
}

/// The `content` entries of a Request Body or Response Object, and the one the generator serves
/// (the first JSON one, else the first): the same choice as the IR's.
fn content<'a>(spec: &'a LoadedSpec, owner: NodeRef<'a>) -> Option<(NodeRef<'a>, usize)> {
    let map = crate::spec::content(spec, owner)?;
    let entries = map.node.as_map()?.entries();
    if entries.is_empty() {
        return None;
    }
    let chosen = entries
        .iter()
        .position(|(k, _)| is_json(&k.text))
        .unwrap_or(0);
    Some((map, chosen))
}

/// Checks the request body and responses of one operation.
pub(super) fn check_operation(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    if let Some(body) = op.node.node.get("requestBody") {
        let body = spec.deref(NodeRef {
            file: op.node.file,
            node: body,
        });
        check_content(spec, op, body, "the request body", true, sink);
    }
    let mut successes = 0;
    let mut streams = 0;
    let responses = op.responses(spec);
    let any_2xx = responses.iter().any(|r| r.status.text.starts_with('2'));
    for response in &responses {
        let what = format!("response {}", response.status.text);
        check_content(spec, op, response.node, &what, false, sink);
        let success = response.status.text.starts_with('2')
            || (response.status.text == "default" && !any_2xx);
        if success {
            successes += 1;
            let media: Vec<&str> = crate::spec::content(spec, response.node)
                .and_then(|c| c.node.as_map())
                .map(|m| m.entries().iter().map(|(k, _)| k.text.as_str()).collect())
                .unwrap_or_default();
            if !media.is_empty() && media.iter().all(|m| is_stream(m)) {
                streams += 1;
            }
        }
    }
    if op.is_idempotent() && successes > 0 && streams == successes {
        let at = match op.responses_entry() {
            Some((key, _)) => (op.node.file, key.span),
            None => op.key_at(),
        };
        sink.report(
            RuleId::StreamNotReplayable,
            at,
            Some(op),
            format!(
                "idempotent operation {} succeeds only with a stream, which cannot be stored and replayed to a retry",
                op.display_name()
            ),
        );
    }
}

fn check_content(
    spec: &LoadedSpec,
    op: &Operation<'_>,
    owner: NodeRef<'_>,
    what: &str,
    request: bool,
    sink: &mut Sink<'_>,
) {
    let Some((map, chosen)) = content(spec, owner) else {
        return;
    };
    let Some(entries) = map.node.as_map().map(|m| m.entries()) else {
        return;
    };
    let served = &entries[chosen].0;
    for (i, (key, _)) in entries.iter().enumerate() {
        let message = if i != chosen {
            format!(
                "{what} of {}: `{}` is not generated, only `{}` is served",
                op.display_name(),
                key.text,
                served.text
            )
        } else if is_stream(&key.text) {
            format!(
                "{what} of {}: `{}` is served as one text body, not as a stream",
                op.display_name(),
                key.text
            )
        } else if request && crate::spec::multipart::is_multipart(&key.text) {
            let media = NodeRef {
                file: map.file,
                node: &entries[chosen].1,
            };
            let (at, why) = match crate::spec::multipart::parts(spec, media) {
                Some(Ok(_)) => continue,
                Some(Err(untyped)) => ((untyped.file, untyped.span), untyped.reason),
                None => ((map.file, key.span), "it has no schema".to_string()),
            };
            let fingerprint = if op.is_idempotent() {
                "; its fingerprint covers the bytes as sent (the same parts in another order or under another boundary are another request)"
            } else {
                ""
            };
            sink.report_with_help(
                RuleId::MediaTypeUntyped,
                at,
                Some(op),
                format!(
                    "{what} of {}: `{}` is carried as raw bytes, neither typed nor validated: {why}{fingerprint}",
                    op.display_name(),
                    key.text
                ),
                MULTIPART_HELP.to_string(),
            );
            continue;
        } else if !typed(&key.text)
            && !typed_form(spec, map, request, &key.text, &entries[chosen].1)
        {
            let fingerprint = if request && op.is_idempotent() {
                "; its fingerprint covers the bytes as sent (the same fields in another order are another request)"
            } else {
                ""
            };
            format!(
                "{what} of {}: `{}` is carried as raw bytes, neither typed nor validated{fingerprint}",
                op.display_name(),
                key.text
            )
        } else {
            continue;
        };
        sink.report(
            RuleId::MediaTypeUntyped,
            (map.file, key.span),
            Some(op),
            message,
        );
    }
}

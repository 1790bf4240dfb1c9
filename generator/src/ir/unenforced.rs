//! What the generated server does not check of a request's schemas, said out loud
//! (`keyword-not-enforced`): the walk over every schema a request is validated against, the
//! same ones [`super::Api::from_spec`] reads (parameters but the key header and the ones OpenAPI
//! ignores, and the request body's chosen media type when it is typed), with each schema judged
//! by [`super::types::unenforced_keywords`], beside the conversion whose checks it judges. The
//! rules layer reports what this finds; it lives here because only the IR knows what the
//! generated code checks.

use std::collections::HashSet;

use crate::loader::{FileId, LoadedSpec, Node, NodeRef, OpenApiVersion, Span};
use crate::spec::{self, Operation, is_json};

use super::types::unenforced_keywords;
use super::{IGNORED_HEADERS, raw_param_schema};

/// Calls `report` for every validation keyword of `op`'s request schemas that the generated
/// server does not check: where it is written, and why. `key_header` is the configured
/// idempotency key header (its schema is the idempotency rules' and the runtime's).
pub fn check_operation(
    spec: &LoadedSpec,
    op: &Operation<'_>,
    key_header: &str,
    report: &mut dyn FnMut((FileId, Span), String),
) {
    let mut roots: Vec<NodeRef<'_>> = Vec::new();
    for p in op.parameters(spec) {
        let (Some(wire), Some(location)) = (p.name, p.location) else {
            continue;
        };
        let read = match location {
            "path" | "query" => true,
            "header" => {
                !wire.eq_ignore_ascii_case(key_header)
                    && !IGNORED_HEADERS.contains(&wire.to_ascii_lowercase().as_str())
            }
            // Cookies are `parameter-unsupported`'s: never read.
            _ => false,
        };
        if let (true, Some(schema)) = (read, raw_param_schema(&p)) {
            roots.push(schema);
        }
    }
    if let Some(body) = op.node.node.get("requestBody") {
        let body = spec.deref(NodeRef {
            file: op.node.file,
            node: body,
        });
        roots.extend(typed_body_schema(spec, body));
    }
    let openapi_31 = spec.version() == OpenApiVersion::V3_1;
    let mut seen: HashSet<(FileId, Span)> = HashSet::new();
    let mut stack = roots;
    while let Some(at) = stack.pop() {
        if at.node.as_map().is_none() || !seen.insert((at.file, at.node.span)) {
            continue;
        }
        for (key, why) in unenforced_keywords(at.node, openapi_31) {
            report((at.file, key.span), why);
        }
        merged_additional_properties(spec, at, report);
        stack.extend(children(spec, at));
    }
}

/// The schema of the request body's media type the generated server decodes into a type (the
/// one [`super::Api::from_spec`] chooses: the first JSON one, else the first), when it is JSON,
/// a flat form or multipart; others arrive as bytes and are `media-type-untyped`'s.
fn typed_body_schema<'s>(spec: &'s LoadedSpec, body: NodeRef<'s>) -> Option<NodeRef<'s>> {
    let entries = body.node.get("content").and_then(Node::as_map)?.entries();
    let (media, entry) = entries
        .iter()
        .find(|(k, _)| is_json(&k.text))
        .or_else(|| entries.first())?;
    let schema = NodeRef {
        file: body.file,
        node: entry.get("schema")?,
    };
    let media = media.text.as_str();
    let typed = is_json(media)
        || media.contains('*')
        || (spec::is_form(media) && spec::is_flat_form(spec, schema))
        || spec::multipart::is_multipart(media);
    typed.then_some(schema)
}

/// The schemas a value of `at` is also checked against: a `$ref`'s target, properties, items,
/// `additionalProperties` and the alternatives of a composition. Not the insides of keywords
/// reported whole (`not`, `if`, `prefixItems`, …).
fn children<'s>(spec: &'s LoadedSpec, at: NodeRef<'s>) -> Vec<NodeRef<'s>> {
    let here = |node: &'s Node| NodeRef {
        file: at.file,
        node,
    };
    if let Some(reference) = at.node.ref_target() {
        // Unresolved references are `unresolved-ref`'s.
        return spec.resolve_ref(at.file, reference).into_iter().collect();
    }
    let mut out = Vec::new();
    if let Some(properties) = at.node.get("properties").and_then(Node::as_map) {
        out.extend(properties.entries().iter().map(|(_, p)| here(p)));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(schema) = at.node.get(key).filter(|n| n.as_map().is_some()) {
            out.push(here(schema));
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(members) = at.node.get(key).and_then(Node::as_seq) {
            out.extend(members.iter().map(here));
        }
    }
    out
}

/// `additionalProperties` of an object merged by an `allOf` of several schemas: the merged
/// struct neither refuses unknown properties nor types extra ones (`TypeSpace::merge_all_of`
/// denies unknown properties only for an object of its own), so unknown properties are accepted
/// unchecked. Reported on the composition and on each of its members that writes one.
fn merged_additional_properties(
    spec: &LoadedSpec,
    at: NodeRef<'_>,
    report: &mut dyn FnMut((FileId, Span), String),
) {
    let Some(members) = at.node.get("allOf").and_then(Node::as_seq) else {
        return;
    };
    if members.len() < 2 && at.node.get("properties").is_none() {
        // One member and nothing else: that member, no merge.
        return;
    }
    let merged = std::iter::once(at).chain(members.iter().map(|m| {
        spec.deref(NodeRef {
            file: at.file,
            node: m,
        })
    }));
    for object in merged {
        let Some((key, value)) = object.node.entry("additionalProperties") else {
            continue;
        };
        let open = value.as_bool() == Some(true) || value.as_map().is_some_and(|m| m.is_empty());
        if open {
            continue;
        }
        report(
            (object.file, key.span),
            "`additionalProperties` is not enforced where an `allOf` merges this schema with others: the merged object accepts properties none of them declares".to_string(),
        );
    }
}

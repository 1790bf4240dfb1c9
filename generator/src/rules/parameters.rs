//! `parameter-unsupported`: parameters the generated code would not read (or send) as the spec
//! serialises them. The server reads a query parameter as one `name=value` pair, an array as one
//! pair per item (`form`, exploded: OpenAPI's default), path and header values as written
//! (`simple`), and no cookies; any other serialisation would be misread without a word, so each
//! is reported where it is written.

use super::{RuleId, Sink, at};
use crate::loader::{LoadedSpec, Node, NodeRef, Value};
use crate::spec::{Operation, Parameter};

/// What a parameter's schema is, as far as its serialisation goes.
#[derive(PartialEq)]
enum Shape {
    /// A scalar, or nothing the generator can tell apart from one (`{}`, a composition).
    Scalar,
    /// An array of scalars.
    Array,
    /// An object, or an array of objects or arrays.
    Structured,
}

fn has_type(node: &Node, name: &str) -> bool {
    match node.get("type").map(|t| &t.value) {
        Some(Value::Str(t)) => t == name,
        Some(Value::Seq(types)) => types.iter().any(|t| t.as_str() == Some(name)),
        _ => false,
    }
}

fn is_object(node: &Node) -> bool {
    has_type(node, "object") || node.get("properties").is_some()
}

fn shape(spec: &LoadedSpec, schema: NodeRef<'_>) -> Shape {
    let node = schema.node;
    if is_object(node) {
        return Shape::Structured;
    }
    if !(has_type(node, "array") || node.get("items").is_some()) {
        return Shape::Scalar;
    }
    let Some(items) = node.get("items") else {
        return Shape::Array;
    };
    let items = spec.deref(NodeRef {
        file: schema.file,
        node: items,
    });
    if is_object(items.node) || has_type(items.node, "array") || items.node.get("items").is_some() {
        Shape::Structured
    } else {
        Shape::Array
    }
}

/// Reports each parameter of `op` whose serialisation the generated code does not follow.
pub(super) fn check_operation(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    for p in op.parameters(spec) {
        let (Some(name), Some(location)) = (p.name, p.location) else {
            continue;
        };
        if let Some((node, message)) = problem(spec, &p, name, location) {
            match help(location) {
                Some(help) => sink.report_with_help(
                    RuleId::ParameterUnsupported,
                    at(node),
                    Some(op),
                    message,
                    help.to_string(),
                ),
                None => sink.report(RuleId::ParameterUnsupported, at(node), Some(op), message),
            }
        }
    }
}

/// The fix for a cookie or a path parameter; the rule's own help is the query's.
fn help(location: &str) -> Option<&'static str> {
    match location {
        "cookie" => Some(
            "pass the value as a header the generated code reads, or read the cookie in a layer of your own before the router:\n\n- name: X-Session\n  in: header\n  schema:\n    type: string",
        ),
        "path" => Some(
            "write the parameter as a plain segment (`style: simple`, the default):\n\n- name: id\n  in: path\n  required: true\n  schema:\n    type: string",
        ),
        _ => None,
    }
}

fn problem<'a>(
    spec: &'a LoadedSpec,
    p: &Parameter<'a>,
    name: &str,
    location: &str,
) -> Option<(NodeRef<'a>, String)> {
    let param = p.node.node;
    let here = |node: &'a Node| NodeRef {
        file: p.node.file,
        node,
    };
    let style = param.get("style").filter(|s| s.as_str().is_some());
    let style_name = style.and_then(Node::as_str);
    match location {
        "cookie" => Some((
            here(param.get("in")?),
            format!(
                "cookie parameter `{name}` is not read by the generated server nor sent by the generated client (and is no part of a semantic input): cookie parameters are not supported"
            ),
        )),
        "path" => match style_name {
            Some(s @ ("matrix" | "label")) => Some((
                here(style?),
                format!(
                    "path parameter `{name}` has `style: {s}` (`{}`), but the generated code reads and writes the segment as it is (`style: simple`)",
                    if s == "matrix" {
                        ";name=value"
                    } else {
                        ".value"
                    }
                ),
            )),
            _ => None,
        },
        "query" => {
            let Some(site) = param.get("schema").map(here) else {
                return content_problem(spec, p, name);
            };
            let schema = spec.deref(site);
            match shape(spec, schema) {
                Shape::Scalar => None,
                Shape::Array => match style_name {
                    Some(s @ ("spaceDelimited" | "pipeDelimited")) => Some((
                        here(style?),
                        format!(
                            "query parameter `{name}` has `style: {s}` (one value, its items joined), but the generated code reads and sends one `{name}=` pair per item"
                        ),
                    )),
                    _ => {
                        let explode = param.get("explode")?;
                        (explode.as_bool() == Some(false)).then(|| {
                            (
                                here(explode),
                                format!(
                                    "query parameter `{name}` has `explode: false` (`?{name}=a,b`), but the generated code reads and sends one `{name}=` pair per item (`?{name}=a&{name}=b`)"
                                ),
                            )
                        })
                    }
                },
                Shape::Structured => {
                    let how = match style_name {
                        Some("deepObject") => format!("`style: deepObject`, `?{name}[key]=value`"),
                        _ => "each property its own query parameter".to_string(),
                    };
                    Some((
                        style.map(here).unwrap_or(site),
                        format!(
                            "query parameter `{name}` is an object or an array of them ({how}), but the generated code reads and sends one `{name}=` value, as a string"
                        ),
                    ))
                }
            }
        }
        _ => None,
    }
}

/// A `content` query parameter is one value in its media type, not a style: read and sent as one
/// string, as written, unless its schema is an array of scalars, which the generated code types
/// as a list and reads and sends as one pair per item.
fn content_problem<'a>(
    spec: &'a LoadedSpec,
    p: &Parameter<'a>,
    name: &str,
) -> Option<(NodeRef<'a>, String)> {
    let content = crate::spec::content(spec, p.node)?;
    let (media_type, media) = content.node.as_map()?.entries().first()?;
    let site = NodeRef {
        file: content.file,
        node: media.get("schema")?,
    };
    (shape(spec, spec.deref(site)) == Shape::Array).then(|| {
        (
            site,
            format!(
                "query parameter `{name}` is one `{}` array (`content`), but the generated code reads and sends one `{name}=` pair per item (`?{name}=a&{name}=b`)",
                media_type.text
            ),
        )
    })
}

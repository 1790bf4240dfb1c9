//! What a `multipart/form-data` request body's schema means part by part: the one reading the
//! `media-type-untyped` rule, the IR and the probe share, so that what is typed is exactly what
//! `check` stops reporting. A body is typed when its schema is an object whose every property is
//! a text part (a scalar or string enum, or an array of them as repeated parts), a file part
//! (`type: string` with `format: binary`, or 3.1's `contentMediaType`/`contentEncoding`, or an
//! array of those), or a JSON part (an object, an array of objects, or any property whose Encoding
//! Object declares `contentType: application/json`). Anything else is refused with its position.

use crate::loader::{FileId, LoadedSpec, Node, NodeRef, Span};

use super::is_json;

/// Whether a media type is `multipart/form-data`.
pub fn is_multipart(media: &str) -> bool {
    media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("multipart/form-data")
}

/// How one property travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// Text: a scalar, or one part per item of an array of scalars.
    Text,
    /// A file part (`FilePart`); `many`: an array of them, one part each.
    File {
        /// An array of files.
        many: bool,
    },
    /// JSON: an object (or one part per object of an array), or a part the Encoding Object
    /// declares JSON (`declared`: sent as one JSON part whatever its type).
    Json {
        /// Declared by `encoding.<name>.contentType`.
        declared: bool,
    },
}

/// One property of a multipart schema.
#[derive(Debug, Clone, Copy)]
pub struct PartSpec<'s> {
    /// The part name (the property name).
    pub name: &'s str,
    /// How it travels.
    pub kind: PartKind,
    /// The property's schema as written (a `$ref` not followed).
    pub schema: NodeRef<'s>,
}

/// Why a multipart schema is not typed, and where.
#[derive(Debug, Clone)]
pub struct Untyped {
    /// The file of the position.
    pub file: FileId,
    /// The position: the property (or the schema) that cannot be typed.
    pub span: Span,
    /// Why, in a phrase (`the part `tags` is a union …`).
    pub reason: String,
}

/// The parts of the Media Type Object `media` (a `content` entry), or why they cannot be typed.
/// `None` when it has no `schema` (nothing to type: the body stays bytes, which the rule reports
/// without a position of its own).
pub fn parts<'s>(
    spec: &'s LoadedSpec,
    media: NodeRef<'s>,
) -> Option<Result<Vec<PartSpec<'s>>, Untyped>> {
    let written = media.node.get("schema")?;
    let schema = spec.deref(NodeRef {
        file: media.file,
        node: written,
    });
    let encoding = media.node.get("encoding");
    Some(parts_of(spec, schema, encoding))
}

fn parts_of<'s>(
    spec: &'s LoadedSpec,
    schema: NodeRef<'s>,
    encoding: Option<&'s Node>,
) -> Result<Vec<PartSpec<'s>>, Untyped> {
    let node = schema.node;
    let refuse = |span: Span, reason: String| Untyped {
        file: schema.file,
        span,
        reason,
    };
    if let Some(k) = ["allOf", "oneOf", "anyOf", "not"]
        .into_iter()
        .find(|k| node.get(k).is_some())
    {
        return Err(refuse(
            node.span,
            format!("its schema is composed with `{k}`, which is not read part by part"),
        ));
    }
    if let Some(ty) = node.get("type")
        && ty.as_str() != Some("object")
    {
        return Err(refuse(ty.span, "its schema is not an object".to_string()));
    }
    if let Some(extra) = node.get("additionalProperties")
        && extra.as_bool().is_none()
    {
        return Err(refuse(
            extra.span,
            "its `additionalProperties` types parts of any name, which are not decoded".to_string(),
        ));
    }
    let Some(properties) = node.get("properties").and_then(Node::as_map) else {
        return Err(refuse(
            node.span,
            "its schema has no `properties` to read parts by".to_string(),
        ));
    };
    let mut out = Vec::new();
    for (key, written) in properties.entries() {
        let at = NodeRef {
            file: schema.file,
            node: written,
        };
        let declared_json = encoding
            .and_then(|e| e.get(&key.text))
            .and_then(|e| e.get("contentType"))
            .and_then(Node::as_str)
            .is_some_and(|types| types.split(',').all(|t| is_json(t.trim())));
        let kind = if declared_json {
            PartKind::Json { declared: true }
        } else {
            match part_kind(spec, at) {
                Some(kind) => kind,
                None => {
                    return Err(Untyped {
                        file: schema.file,
                        span: key.span,
                        reason: format!(
                            "the part `{}` is neither text, a file nor an object (declare `encoding.{}.contentType: application/json` to read it as JSON)",
                            key.text, key.text
                        ),
                    });
                }
            }
        };
        out.push(PartSpec {
            name: &key.text,
            kind,
            schema: at,
        });
    }
    Ok(out)
}

/// Text, file or JSON, by the property's schema.
fn part_kind(spec: &LoadedSpec, at: NodeRef<'_>) -> Option<PartKind> {
    let schema = spec.deref(at);
    if is_file(schema.node) {
        return Some(PartKind::File { many: false });
    }
    if super::is_scalar_schema(schema.node) {
        return Some(PartKind::Text);
    }
    if is_object(schema.node) {
        return Some(PartKind::Json { declared: false });
    }
    if schema.node.get("type").and_then(Node::as_str) == Some("array") {
        let items = spec.deref(NodeRef {
            file: schema.file,
            node: schema.node.get("items")?,
        });
        if is_file(items.node) {
            return Some(PartKind::File { many: true });
        }
        if super::is_scalar_schema(items.node) {
            return Some(PartKind::Text);
        }
        if is_object(items.node) {
            return Some(PartKind::Json { declared: false });
        }
    }
    None
}

/// A file: `type: string` (or no type, or `[string, "null"]`) with `format: binary`,
/// `contentMediaType` or `contentEncoding`.
pub fn is_file(node: &Node) -> bool {
    let string = match node.get("type") {
        None => true,
        Some(ty) => match ty.as_seq() {
            Some(types) => {
                types.iter().any(|t| t.as_str() == Some("string"))
                    && types
                        .iter()
                        .all(|t| matches!(t.as_str(), Some("string" | "null")))
            }
            None => ty.as_str() == Some("string"),
        },
    };
    string
        && (node.get("format").and_then(Node::as_str) == Some("binary")
            || node.get("contentMediaType").is_some()
            || node.get("contentEncoding").is_some())
}

/// An object that is not composed: `type: object` or properties without a type.
fn is_object(node: &Node) -> bool {
    let composed = ["allOf", "oneOf", "anyOf", "not"]
        .into_iter()
        .any(|k| node.get(k).is_some());
    !composed
        && match node.get("type") {
            Some(ty) => ty.as_str() == Some("object"),
            None => node.get("properties").is_some() || node.get("additionalProperties").is_some(),
        }
}

//! A typed view of the OpenAPI objects the rules (and the code generator) need: operations,
//! their merged parameters, and their responses, each with `$ref`s followed and positions kept.
//!
//! The view borrows from a [`LoadedSpec`]; it copies nothing but small structs of references.

pub mod extensions;
pub mod multipart;
pub mod paths;
pub mod security;

use crate::loader::{Key, LoadedSpec, Node, NodeRef};

/// The HTTP methods an OpenAPI 3.0/3.1 Path Item can hold, in the order the spec lists them.
pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Methods that are safe by definition and must not be marked idempotent.
pub const SAFE_METHODS: [&str; 4] = ["get", "head", "options", "trace"];

/// Header parameters OpenAPI says are ignored (they are transport, not input), lower case: the
/// IR reads none of them, and none is part of a semantic input.
pub const IGNORED_HEADERS: [&str; 3] = ["accept", "content-type", "authorization"];

/// One operation: a method under a path.
#[derive(Debug, Clone, Copy)]
pub struct Operation<'a> {
    /// The path template, e.g. `/widgets/{id}`.
    pub path: &'a str,
    /// The method key as written, lower case (`post`).
    pub method: &'a str,
    /// The Path Item the operation belongs to, after following its `$ref` if any.
    pub path_item: NodeRef<'a>,
    /// The Operation Object, after following a `$ref` written in its place (not OpenAPI, but
    /// published that way: DigitalOcean's spec writes every operation as one).
    pub node: NodeRef<'a>,
    /// The object as written under the method key: [`Operation::node`] itself, or the Reference
    /// Object that led to it.
    pub written: NodeRef<'a>,
    /// The method key (`post:`), in `path_item.file`.
    pub key: &'a Key,
}

/// A parameter of an operation, after merging Path Item parameters.
#[derive(Debug, Clone, Copy)]
pub struct Parameter<'a> {
    /// The `name` field, if it is a string.
    pub name: Option<&'a str>,
    /// The `in` field, if it is a string.
    pub location: Option<&'a str>,
    /// The parameter as listed: a Parameter Object or a Reference Object.
    pub site: NodeRef<'a>,
    /// The Parameter Object, after following `$ref`s.
    pub node: NodeRef<'a>,
    /// Whether it comes from the Path Item rather than the operation.
    pub inherited: bool,
}

/// A response of an operation.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    /// The status key as written (`201`, `4XX`, `default`).
    pub status: &'a Key,
    /// The Response Object, after following `$ref`s.
    pub node: NodeRef<'a>,
}

/// Every operation under `paths`, in document order.
pub fn operations(spec: &LoadedSpec) -> Vec<Operation<'_>> {
    let root = spec.root();
    let Some(paths) = root.node.get("paths").and_then(Node::as_map) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (path_key, item) in paths.entries() {
        if path_key.text.starts_with("x-") {
            continue;
        }
        let path_item = spec.deref(NodeRef {
            file: root.file,
            node: item,
        });
        let Some(map) = path_item.node.as_map() else {
            continue;
        };
        for (key, op) in map.entries() {
            if !METHODS.contains(&key.text.as_str()) || op.as_map().is_none() {
                continue;
            }
            let written = NodeRef {
                file: path_item.file,
                node: op,
            };
            let node = spec.deref(written);
            if node.node.as_map().is_none() {
                continue;
            }
            out.push(Operation {
                path: &path_key.text,
                method: &key.text,
                path_item,
                node,
                written,
                key,
            });
        }
    }
    out
}

impl<'a> Operation<'a> {
    /// Where the operation's method key is written (`post:`): in the file of the Path Item, which
    /// for an operation written as a `$ref` is not the file of [`Operation::node`].
    pub fn key_at(&self) -> (crate::loader::FileId, crate::loader::Span) {
        (self.written.file, self.key.span)
    }

    /// Whether the operation carries `x-idempotent: true` (on any method).
    pub fn marked_idempotent(&self) -> bool {
        self.node
            .node
            .get(extensions::X_IDEMPOTENT)
            .and_then(Node::as_bool)
            == Some(true)
    }

    /// Whether the operation is idempotent in idemgen's sense: marked `x-idempotent: true` and
    /// not a safe method (a GET needs no key; marking one is a finding, not an idempotent
    /// operation). The one definition the rules, the IR and the lock share.
    pub fn is_idempotent(&self) -> bool {
        self.marked_idempotent() && !SAFE_METHODS.contains(&self.method)
    }

    /// Whether the method is safe (GET, HEAD, OPTIONS, TRACE).
    pub fn is_safe(&self) -> bool {
        SAFE_METHODS.contains(&self.method)
    }

    /// `POST /widgets`.
    pub fn label(&self) -> String {
        format!("{} {}", self.method.to_ascii_uppercase(), self.path)
    }

    /// The `operationId` value node, if present.
    pub fn operation_id(&self) -> Option<&'a Node> {
        self.node.node.get("operationId")
    }

    /// `operationId` when it is a string, else the label; for messages.
    pub fn display_name(&self) -> String {
        match self.operation_id().and_then(Node::as_str) {
            Some(id) => format!("`{id}` ({})", self.label()),
            None => format!("`{}`", self.label()),
        }
    }

    /// The operation's parameters: its own, plus the Path Item's that it does not override
    /// (same `name` and `in`; header names compared case-insensitively).
    pub fn parameters(&self, spec: &'a LoadedSpec) -> Vec<Parameter<'a>> {
        let own = list_parameters(spec, self.node, false);
        let mut merged = own.clone();
        for p in list_parameters(spec, self.path_item, true) {
            if !own.iter().any(|o| same_parameter(o, &p)) {
                merged.push(p);
            }
        }
        merged
    }

    /// The `responses` key and map, if present.
    pub fn responses_entry(&self) -> Option<(&'a Key, &'a Node)> {
        self.node.node.entry("responses")
    }

    /// The declared responses, with `$ref`s followed.
    pub fn responses(&self, spec: &'a LoadedSpec) -> Vec<Response<'a>> {
        let Some(map) = self.responses_entry().and_then(|(_, v)| v.as_map()) else {
            return Vec::new();
        };
        map.entries()
            .iter()
            .filter(|(k, _)| !k.text.starts_with("x-"))
            .map(|(status, node)| Response {
                status,
                node: spec.deref(NodeRef {
                    file: self.node.file,
                    node,
                }),
            })
            .collect()
    }
}

impl<'a> Parameter<'a> {
    /// Whether this is the header `name`, compared case-insensitively.
    pub fn is_header(&self, name: &str) -> bool {
        self.location == Some("header") && self.name.is_some_and(|n| n.eq_ignore_ascii_case(name))
    }

    /// The parameter's schema, from `schema` or from the single entry of `content`, with
    /// `$ref`s followed.
    pub fn schema(&self, spec: &'a LoadedSpec) -> Option<NodeRef<'a>> {
        let param = self.node;
        let schema = match param.node.get("schema") {
            Some(node) => NodeRef {
                file: param.file,
                node,
            },
            None => {
                let content = content(spec, param)?;
                let (_, media) = content.node.as_map()?.entries().first()?;
                NodeRef {
                    file: content.file,
                    node: media.get("schema")?,
                }
            }
        };
        Some(spec.deref(schema))
    }
}

fn list_parameters<'a>(
    spec: &'a LoadedSpec,
    owner: NodeRef<'a>,
    inherited: bool,
) -> Vec<Parameter<'a>> {
    let Some(items) = owner.node.get("parameters").and_then(Node::as_seq) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| {
            let site = NodeRef {
                file: owner.file,
                node: item,
            };
            let node = spec.deref(site);
            Parameter {
                name: node.node.get("name").and_then(Node::as_str),
                location: node.node.get("in").and_then(Node::as_str),
                site,
                node,
                inherited,
            }
        })
        .collect()
}

fn same_parameter(a: &Parameter<'_>, b: &Parameter<'_>) -> bool {
    if a.location != b.location {
        return false;
    }
    match (a.name, b.name) {
        (Some(x), Some(y)) if a.location == Some("header") => x.eq_ignore_ascii_case(y),
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The `content` map of a Request Body, Response or Parameter Object at `owner`, following a
/// `$ref` written in place of the map (not OpenAPI, which allows none there, but published so
/// and read so by Spectral): the map's node and the file it is in, where the schemas under it
/// are resolved from.
pub fn content<'a>(spec: &'a LoadedSpec, owner: NodeRef<'a>) -> Option<NodeRef<'a>> {
    let node = owner.node.get("content")?;
    Some(spec.deref(NodeRef {
        file: owner.file,
        node,
    }))
}

/// Whether a media type is JSON (`application/json`, `application/problem+json`, …).
pub fn is_json(media: &str) -> bool {
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// Whether a media type is `application/x-www-form-urlencoded`.
pub fn is_form(media: &str) -> bool {
    media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

/// Whether a form body's schema decodes as flat fields (what `application/x-www-form-urlencoded`
/// carries without a convention for nesting): an object whose properties are all scalars
/// (`string`, `integer`, `number`, `boolean`, optionally nullable, or string enums), with no
/// typed `additionalProperties` and no composition. Anything else stays raw bytes.
pub fn is_flat_form(spec: &LoadedSpec, schema: NodeRef<'_>) -> bool {
    let schema = spec.deref(schema);
    let node = schema.node;
    let composed = ["allOf", "oneOf", "anyOf", "not"]
        .iter()
        .any(|k| node.get(k).is_some());
    let open_map = node
        .get("additionalProperties")
        .is_some_and(|ap| ap.as_bool() != Some(false));
    let is_object = match node.get("type") {
        None => true,
        Some(ty) => ty.as_str() == Some("object"),
    };
    let Some(properties) = node.get("properties").and_then(Node::as_map) else {
        return false;
    };
    !composed
        && !open_map
        && is_object
        && properties.entries().iter().all(|(_, property)| {
            let property = spec.deref(NodeRef {
                file: schema.file,
                node: property,
            });
            is_scalar_schema(property.node)
        })
}

/// A schema of one form field: a scalar type (or a list of them with `null`), or a string enum.
pub(crate) fn is_scalar_schema(node: &Node) -> bool {
    const SCALARS: [&str; 4] = ["string", "integer", "number", "boolean"];
    let structured = [
        "properties",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "additionalProperties",
    ]
    .iter()
    .any(|k| node.get(k).is_some());
    if structured {
        return false;
    }
    match node.get("type") {
        Some(ty) => match &ty.value {
            crate::loader::Value::Str(t) => SCALARS.contains(&t.as_str()),
            crate::loader::Value::Seq(types) => types.iter().all(|t| {
                t.as_str()
                    .is_some_and(|t| t == "null" || SCALARS.contains(&t))
            }),
            _ => false,
        },
        None => node.get("enum").is_some(),
    }
}

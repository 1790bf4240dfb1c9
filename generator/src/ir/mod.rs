//! The IR between the spec and the tokens: plain structs that say what `idemgen build` emits.
//!
//! [`Api::from_spec`] walks a checked [`LoadedSpec`] once; emission (`crate::emit`) reads only
//! these structs. Every name is final here (unique, escaped later only for keywords), so the
//! emitter never has to invent one.

pub mod names;
pub mod types;

use crate::loader::{LoadedSpec, Node, NodeRef};
use crate::rules::extensions::X_FINGERPRINT_VERSION;
use crate::spec::{self, Operation};

use names::{Namespace, snake_name, type_name};
use types::{Checks, TypeDef, TypeRef, TypeSpace};

/// Header parameters OpenAPI says are ignored (they are transport, not input).
const IGNORED_HEADERS: [&str; 3] = ["accept", "content-type", "authorization"];

/// The whole API to emit.
#[derive(Debug, Clone)]
pub struct Api {
    /// `info.title`.
    pub title: String,
    /// The handler trait's name (`WidgetsApi`).
    pub trait_name: String,
    /// The operations, in document order.
    pub operations: Vec<OperationIr>,
    /// The types of the `types` module, sorted by name.
    pub types: Vec<TypeDef>,
    /// The idempotency key header name, lower case.
    pub key_header: String,
}

/// One operation.
#[derive(Debug, Clone)]
pub struct OperationIr {
    /// The `operationId` (or `METHOD /path` when absent), as the runtime scopes keys by it.
    pub id: String,
    /// The UpperCamelCase base of the generated type names (`CreateWidget`).
    pub name: String,
    /// The trait method (`create_widget`).
    pub method: String,
    /// The authorization trait method (`authorize_create_widget`).
    pub authorize_method: String,
    /// The HTTP method, lower case.
    pub http_method: String,
    /// The path template (`/widgets/{id}`).
    pub path: String,
    /// `summary`/`description`.
    pub doc: Option<String>,
    /// Whether it is marked `x-idempotent: true` (and not a safe method).
    pub idempotent: bool,
    /// `x-idempotency-fingerprint-version` (default 1).
    pub fingerprint_version: i16,
    /// Path, query and header parameters (never the idempotency key header).
    pub params: Vec<ParamIr>,
    /// The request body.
    pub body: Option<BodyIr>,
    /// The declared responses, in document order.
    pub responses: Vec<ResponseIr>,
}

impl OperationIr {
    /// Parameters in `location`, in declaration order.
    pub fn params_in(&self, location: ParamLocation) -> impl Iterator<Item = &ParamIr> {
        self.params.iter().filter(move |p| p.location == location)
    }

    /// Names of the headers declared by its 2xx responses, lower case, sorted, unique.
    pub fn declared_success_headers(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .responses
            .iter()
            .filter(|r| r.status.can_be_success())
            .flat_map(|r| r.headers.iter().map(|h| h.wire.to_ascii_lowercase()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Where a parameter is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ParamLocation {
    /// In the path template.
    Path,
    /// In the query string.
    Query,
    /// In a request header.
    Header,
}

impl ParamLocation {
    /// The word used in messages (`path`, `query`, `header`).
    pub fn as_str(self) -> &'static str {
        match self {
            ParamLocation::Path => "path",
            ParamLocation::Query => "query",
            ParamLocation::Header => "header",
        }
    }
}

/// A parameter.
#[derive(Debug, Clone)]
pub struct ParamIr {
    /// The field name in the request struct.
    pub field: String,
    /// The name on the wire.
    pub wire: String,
    /// Where it is sent.
    pub location: ParamLocation,
    /// Whether it must be present (path parameters always are).
    pub required: bool,
    /// The value type: a scalar, or `Vec` of scalars for query arrays.
    pub ty: TypeRef,
    /// The schema's validation keywords.
    pub checks: Checks,
    /// Its `description`.
    pub doc: Option<String>,
}

/// How a body is carried.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyKind {
    /// A JSON document of this type.
    Json(TypeRef),
    /// `text/*`: a `String`.
    Text,
    /// Anything else: raw bytes.
    Bytes,
}

/// A request body.
#[derive(Debug, Clone)]
pub struct BodyIr {
    /// `requestBody.required`.
    pub required: bool,
    /// The media type served.
    pub media_type: String,
    /// How it is carried.
    pub kind: BodyKind,
    /// The JSON schema's validation keywords (empty for other bodies).
    pub checks: Checks,
}

/// A response status key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKey {
    /// One status, e.g. 201.
    Code(u16),
    /// A range, e.g. `4XX` → 4.
    Range(u16),
    /// `default`.
    Default,
}

impl StatusKey {
    /// Parses `201`, `4XX`, `default`.
    pub fn parse(key: &str) -> Option<StatusKey> {
        if key == "default" {
            return Some(StatusKey::Default);
        }
        if let Ok(code) = key.parse::<u16>() {
            return (100..=599).contains(&code).then_some(StatusKey::Code(code));
        }
        let bytes = key.as_bytes();
        if bytes.len() == 3 && bytes[1..].eq_ignore_ascii_case(b"xx") {
            let class = (bytes[0] as char).to_digit(10)?;
            return (1..=5)
                .contains(&class)
                .then_some(StatusKey::Range(class as u16));
        }
        None
    }

    /// Whether a response under this key may be a 2xx (stored and replayed).
    pub fn can_be_success(self) -> bool {
        match self {
            StatusKey::Code(c) => (200..300).contains(&c),
            StatusKey::Range(c) => c == 2,
            StatusKey::Default => true,
        }
    }

    /// Whether the variant carries its status (ranges and `default`).
    pub fn has_status_field(self) -> bool {
        !matches!(self, StatusKey::Code(_))
    }
}

/// A response body.
#[derive(Debug, Clone)]
pub struct ResponseBody {
    /// The media type sent as `Content-Type`.
    pub media_type: String,
    /// How it is carried.
    pub kind: BodyKind,
}

/// A typed response header.
#[derive(Debug, Clone)]
pub struct HeaderIr {
    /// The field name in the variant.
    pub field: String,
    /// The header name as declared.
    pub wire: String,
    /// Whether it is `required` (else `Option`).
    pub required: bool,
    /// A scalar type.
    pub ty: TypeRef,
    /// Its `description`.
    pub doc: Option<String>,
}

/// One declared response.
#[derive(Debug, Clone)]
pub struct ResponseIr {
    /// The status key.
    pub status: StatusKey,
    /// The enum variant name (`Status201`, `Status4xx`, `Default`).
    pub variant: String,
    /// Its `description`.
    pub doc: Option<String>,
    /// The body, if the response has content.
    pub body: Option<ResponseBody>,
    /// Declared headers (never `Content-Type`).
    pub headers: Vec<HeaderIr>,
}

impl Api {
    /// Builds the IR of a spec that passed `check`. `key_header` is the configured idempotency
    /// key header name.
    pub fn from_spec(spec: &LoadedSpec, key_header: &str) -> Api {
        let root = spec.root();
        let title = root
            .node
            .get("info")
            .and_then(|i| i.get("title"))
            .and_then(Node::as_str)
            .unwrap_or("Api")
            .to_string();
        let mut trait_name = type_name(&title);
        if !trait_name.ends_with("Api") {
            trait_name.push_str("Api");
        }
        let mut space = TypeSpace::new(spec);
        let mut op_names = Namespace::with_reserved(&[&trait_name, "RouterConfig", "RouterState"]);
        let mut methods = Namespace::with_reserved(&["router"]);
        let mut operations = Vec::new();
        for op in spec::operations(spec) {
            operations.push(operation_ir(
                spec,
                &op,
                key_header,
                &mut space,
                &mut op_names,
                &mut methods,
            ));
        }
        Api {
            title,
            trait_name,
            operations,
            types: space.finish(),
            key_header: key_header.to_ascii_lowercase(),
        }
    }
}

fn operation_ir<'s>(
    spec: &'s LoadedSpec,
    op: &Operation<'s>,
    key_header: &str,
    space: &mut TypeSpace<'s>,
    op_names: &mut Namespace,
    methods: &mut Namespace,
) -> OperationIr {
    let id = op
        .operation_id()
        .and_then(Node::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| op.label());
    let base = op
        .operation_id()
        .and_then(Node::as_str)
        .map(type_name)
        .unwrap_or_else(|| type_name(&format!("{} {}", op.method, op.path)));
    let name = op_names.claim(&base);
    let method = methods.claim(&snake_name(&name));
    let authorize_method = methods.claim(&format!("authorize_{method}"));
    let idempotent = crate::rules::is_idempotent(op) && !spec::SAFE_METHODS.contains(&op.method);
    let fingerprint_version = op
        .node
        .node
        .get(X_FINGERPRINT_VERSION)
        .and_then(Node::as_int)
        .and_then(|v| i16::try_from(v).ok())
        .filter(|v| *v >= 1)
        .unwrap_or(1);
    let doc = op
        .node
        .node
        .get("summary")
        .or_else(|| op.node.node.get("description"))
        .and_then(Node::as_str)
        .map(|s| s.trim().to_string());

    let mut fields = Namespace::with_reserved(&["body"]);
    let mut params = Vec::new();
    for p in op.parameters(spec) {
        let (Some(wire), Some(location)) = (p.name, p.location) else {
            continue;
        };
        let location = match location {
            "path" => ParamLocation::Path,
            "query" => ParamLocation::Query,
            "header" => {
                if wire.eq_ignore_ascii_case(key_header)
                    || IGNORED_HEADERS.contains(&wire.to_ascii_lowercase().as_str())
                {
                    continue;
                }
                ParamLocation::Header
            }
            _ => continue, // cookies are not supported
        };
        let required = location == ParamLocation::Path
            || p.node.node.get("required").and_then(Node::as_bool) == Some(true);
        let (ty, checks) = match raw_param_schema(&p) {
            Some(schema) => {
                let ty = space.type_of(schema, &format!("{name}{}", type_name(wire)));
                (param_type(space, ty, location), Checks::of(schema.node))
            }
            None => (TypeRef::String, Checks::default()),
        };
        params.push(ParamIr {
            field: fields.claim(&snake_name(wire)),
            wire: wire.to_string(),
            location,
            required,
            ty,
            checks,
            doc: types::description(p.node.node),
        });
    }

    let body = op.node.node.get("requestBody").and_then(|rb| {
        let rb = spec.deref(NodeRef {
            file: op.node.file,
            node: rb,
        });
        let required = rb.node.get("required").and_then(Node::as_bool) == Some(true);
        let (media_type, kind, schema) =
            body_of(rb, space, &format!("{name}RequestBody"), "application/json")?;
        let checks = match (&kind, schema) {
            (BodyKind::Json(_), Some(schema)) => Checks::of(schema),
            _ => Checks::default(),
        };
        Some(BodyIr {
            required,
            media_type,
            kind,
            checks,
        })
    });

    let mut variants = Namespace::default();
    let mut responses = Vec::new();
    for r in op.responses(spec) {
        let Some(status) = StatusKey::parse(&r.status.text) else {
            continue;
        };
        let variant = variants.claim(&match status {
            StatusKey::Code(c) => format!("Status{c}"),
            StatusKey::Range(c) => format!("Status{c}xx"),
            StatusKey::Default => "Default".to_string(),
        });
        let hint = match status {
            StatusKey::Code(c) => format!("{name}{c}Response"),
            StatusKey::Range(c) => format!("{name}{c}xxResponse"),
            StatusKey::Default => format!("{name}DefaultResponse"),
        };
        let body = body_of(r.node, space, &hint, "application/json")
            .map(|(media_type, kind, _)| ResponseBody { media_type, kind });
        let mut header_fields = Namespace::with_reserved(&["body", "status"]);
        let mut headers = Vec::new();
        if let Some(map) = r.node.node.get("headers").and_then(Node::as_map) {
            for (key, header) in map.entries() {
                if key.text.eq_ignore_ascii_case("content-type") {
                    continue;
                }
                let header = spec.deref(NodeRef {
                    file: r.node.file,
                    node: header,
                });
                let ty = header
                    .node
                    .get("schema")
                    .map(|s| {
                        let schema = NodeRef {
                            file: header.file,
                            node: s,
                        };
                        let ty = space.type_of(schema, &format!("{hint}{}", type_name(&key.text)));
                        param_type(space, ty, ParamLocation::Header)
                    })
                    .unwrap_or(TypeRef::String);
                headers.push(HeaderIr {
                    field: header_fields.claim(&snake_name(&key.text)),
                    wire: key.text.clone(),
                    required: header.node.get("required").and_then(Node::as_bool) == Some(true),
                    ty,
                    doc: types::description(header.node),
                });
            }
        }
        responses.push(ResponseIr {
            status,
            variant,
            doc: types::description(r.node.node),
            body,
            headers,
        });
    }

    OperationIr {
        id,
        name,
        method,
        authorize_method,
        http_method: op.method.to_string(),
        path: op.path.to_string(),
        doc,
        idempotent,
        fingerprint_version,
        params,
        body,
        responses,
    }
}

/// The media type, carrier and schema of a Request Body or Response Object's `content`; JSON
/// media types are preferred.
fn body_of<'s>(
    owner: NodeRef<'s>,
    space: &mut TypeSpace<'s>,
    hint: &str,
    fallback_media: &str,
) -> Option<(String, BodyKind, Option<&'s Node>)> {
    let content = owner.node.get("content").and_then(Node::as_map)?;
    let entries = content.entries();
    let chosen = entries
        .iter()
        .find(|(k, _)| is_json(&k.text))
        .or_else(|| entries.first())?;
    let media_type = if chosen.0.text.contains('*') {
        fallback_media.to_string()
    } else {
        chosen.0.text.clone()
    };
    let kind = if is_json(&chosen.0.text) || chosen.0.text.contains('*') {
        match chosen.1.get("schema") {
            Some(schema) => {
                let schema = NodeRef {
                    file: owner.file,
                    node: schema,
                };
                BodyKind::Json(space.type_of(schema, hint))
            }
            None => BodyKind::Json(TypeRef::Json),
        }
    } else if chosen.0.text.starts_with("text/") {
        BodyKind::Text
    } else {
        BodyKind::Bytes
    };
    Some((media_type, kind, chosen.1.get("schema")))
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

/// Parameters and headers are single strings on the wire: keep scalar types (and arrays of them
/// in the query), fall back to `String` for anything structured.
fn param_type(space: &TypeSpace<'_>, ty: TypeRef, location: ParamLocation) -> TypeRef {
    let ty = match ty {
        TypeRef::Option(inner) => *inner,
        other => other,
    };
    match ty {
        TypeRef::Vec(item) if location == ParamLocation::Query && space.is_scalar(&item) => {
            TypeRef::Vec(item)
        }
        t if space.is_scalar(&t) => t,
        _ => TypeRef::String,
    }
}

/// A parameter's schema as written (a `$ref` kept, so that the type keeps its component name).
fn raw_param_schema<'s>(p: &crate::spec::Parameter<'s>) -> Option<NodeRef<'s>> {
    let param = p.node.node;
    let schema = param.get("schema").or_else(|| {
        param
            .get("content")
            .and_then(Node::as_map)
            .and_then(|m| m.entries().first())
            .and_then(|(_, media)| media.get("schema"))
    })?;
    Some(NodeRef {
        file: p.node.file,
        node: schema,
    })
}

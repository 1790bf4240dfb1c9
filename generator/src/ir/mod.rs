//! The IR between the spec and the tokens: plain structs that say what `idemgen build` emits.
//!
//! [`Api::from_spec`] walks a checked [`LoadedSpec`] once; emission (`crate::emit`) reads only
//! these structs. Every name is final here (unique, escaped later only for keywords), so the
//! emitter never has to invent one.

pub mod names;
pub mod types;
pub mod unenforced;

use crate::loader::{LoadedSpec, Node, NodeRef};
use crate::spec::{self, IGNORED_HEADERS, Operation, is_json};

use names::{Namespace, snake_name, type_name};
use types::{Checks, TypeDef, TypeRef, TypeSpace};

/// The whole API to emit.
#[derive(Debug, Clone)]
pub struct Api {
    /// `info.title`.
    pub title: String,
    /// The handler trait's name (`WidgetsApi`).
    pub trait_name: String,
    /// The generated client's name (`WidgetsClient`).
    pub client_name: String,
    /// The struct `idemgen scaffold` implements the trait for (`WidgetsService`).
    pub service_name: String,
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
    /// The UpperCamelCase name of the unit struct describing the operation (`CreateWidget`), the
    /// base of its other items' names.
    pub name: String,
    /// The names of the operation's generated items, final: emitters and the scaffold read them,
    /// never derive them.
    pub items: ItemNames,
    /// The trait method (`create_widget`).
    pub method: String,
    /// The authorization trait method (`authorize_create_widget`).
    pub authorize_method: String,
    /// The HTTP method, lower case.
    pub http_method: String,
    /// The path template (`/widgets/{id}`).
    pub path: String,
    /// Whether the generated router registers the path (`spec::paths`; `path-unroutable`
    /// reports the others, which `router` leaves out rather than panic at start-up).
    pub routed: bool,
    /// `summary`/`description`.
    pub doc: Option<String>,
    /// Whether the method is safe (GET, HEAD, OPTIONS, TRACE): its authorization step may be
    /// left out (allowed by default); a write's never is.
    pub safe: bool,
    /// What makes the operation idempotent, for operations marked `x-idempotent: true` that are
    /// not safe methods. Computed once here: the emitted semantic input and the lock's hash both
    /// read this value, so they cannot drift apart.
    pub idempotency: Option<Idempotency>,
    /// `x-idempotency-tombstones`: the idempotent operations whose records for this operation's
    /// resource (its path parameters) it tombstones when it succeeds (its handler then runs in a
    /// transaction of the runtime's). Empty: none.
    pub tombstones: Vec<TombstoneLink>,
    /// Path, query and header parameters (never the idempotency key header).
    pub params: Vec<ParamIr>,
    /// The request body.
    pub body: Option<BodyIr>,
    /// The declared responses, in document order.
    pub responses: Vec<ResponseIr>,
    /// `security` (the operation's, else the document's), as the pipeline enforces it.
    pub security: SecurityIr,
}

/// An operation's `security`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityIr {
    /// Neither the operation nor the document declares any: the authenticator decides alone.
    Undeclared,
    /// Alternatives (any one suffices), each a set of requirements (all must hold). Empty, or
    /// with an empty alternative: anonymous callers are admitted.
    Declared(Vec<Vec<RequirementIr>>),
    /// Declared, but nothing of it can be read (`check` errors, unless turned off): every
    /// request is refused rather than served with less than the spec says.
    Unreadable,
}

/// One scheme as an operation requires it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementIr {
    /// The scheme's name in `components.securitySchemes`.
    pub scheme: String,
    /// What it is.
    pub kind: spec::security::SchemeKind,
    /// The scopes (roles) required.
    pub scopes: Vec<String>,
}

impl SecurityIr {
    /// The security of `op` as the spec declares it. A requirement `check` refuses (an unknown
    /// or unreadable scheme, scopes that are not strings) drops its whole alternative: what is
    /// generated never admits more than the spec says.
    fn of(spec: &LoadedSpec, op: &Operation<'_>) -> SecurityIr {
        let Some(security) = spec::security::of(spec, op) else {
            return SecurityIr::Undeclared;
        };
        if security.site.node.as_seq().is_none() {
            return SecurityIr::Unreadable;
        }
        let written = security.alternatives.len();
        let alternatives: Vec<Vec<RequirementIr>> = security
            .alternatives
            .iter()
            .filter(|a| a.node.node.as_map().is_some())
            .filter_map(|a| {
                a.requirements
                    .iter()
                    .map(|r| {
                        Some(RequirementIr {
                            scheme: r.name.text.clone(),
                            kind: spec::security::kind(r.scheme?.node).ok()?,
                            scopes: spec::security::scopes(r.scopes)?,
                        })
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .collect();
        if written > 0 && alternatives.is_empty() {
            // `security: []` is public; a list whose every entry was dropped is not.
            return SecurityIr::Unreadable;
        }
        SecurityIr::Declared(alternatives)
    }
}

impl OperationIr {
    /// Parameters in `location`, in declaration order.
    pub fn params_in(&self, location: ParamLocation) -> impl Iterator<Item = &ParamIr> {
        self.params.iter().filter(move |p| p.location == location)
    }

    /// Whether the operation is idempotent.
    pub fn is_idempotent(&self) -> bool {
        self.idempotency.is_some()
    }

    /// Whether the handler runs in a transaction of the runtime's: idempotent operations and
    /// those that tombstone the records of another.
    pub fn in_transaction(&self) -> bool {
        self.idempotency.is_some() || !self.tombstones.is_empty()
    }

    /// The responses a handler succeeds with (its success enum): the 2xx codes and a `2XX`
    /// range; when there are none, the redirects (3xx codes and a `3XX` range) of an operation
    /// without an idempotency key, whose answer a redirect is (GitHub's downloads answer only
    /// `302` with a `Location`); and `default` when nothing else is a success. An idempotent
    /// operation's redirects stay errors: only 2xx answers are stored and replayed.
    pub fn success_responses(&self) -> impl Iterator<Item = &ResponseIr> {
        let redirects_succeed = self.redirects_succeed();
        let default_is_success = !self.responses.iter().any(|r| {
            matches!(r.status, StatusKey::Code(200..=299) | StatusKey::Range(2))
                || (redirects_succeed && r.status.is_redirect())
        });
        self.responses.iter().filter(move |r| match r.status {
            StatusKey::Code(c) if (300..400).contains(&c) => redirects_succeed,
            StatusKey::Code(c) => (200..300).contains(&c),
            StatusKey::Range(3) => redirects_succeed,
            StatusKey::Range(c) => c == 2,
            StatusKey::Default => default_is_success,
        })
    }

    /// What the success enum's variants are, for its documentation.
    pub fn successes_described(&self) -> &'static str {
        if self.redirects_succeed() {
            "redirect (it declares no 2xx response)"
        } else {
            "2xx status"
        }
    }

    /// Whether the operation's successes are its redirects: it has no idempotency key, declares
    /// no 2xx response and at least one 3xx.
    pub fn redirects_succeed(&self) -> bool {
        !self.is_idempotent()
            && !self
                .responses
                .iter()
                .any(|r| matches!(r.status, StatusKey::Code(200..=299) | StatusKey::Range(2)))
            && self.responses.iter().any(|r| r.status.is_redirect())
    }

    /// The declared error responses a handler may answer with (its error enum): every other
    /// response, except the statuses only the request pipeline answers
    /// (`idemgen_protocol::status::answered_by_runtime`).
    pub fn error_responses(&self) -> impl Iterator<Item = &ResponseIr> {
        let success: Vec<StatusKey> = self.success_responses().map(|r| r.status).collect();
        let idempotent = self.is_idempotent();
        self.responses.iter().filter(move |r| {
            !success.contains(&r.status)
                && match r.status {
                    StatusKey::Code(c) => {
                        !idemgen_protocol::status::answered_by_runtime(c, idempotent)
                    }
                    StatusKey::Range(_) | StatusKey::Default => true,
                }
        })
    }
}

/// What makes an operation idempotent.
#[derive(Debug, Clone, PartialEq)]
pub struct Idempotency {
    /// `x-idempotency-fingerprint-version` (default 1).
    pub fingerprint_version: i16,
    /// Where the key comes from.
    pub key: KeyIr,
    /// What enters the fingerprint: path and query parameters, the body, and the header
    /// parameters marked `x-idempotency-fingerprint: true` (never the key header).
    pub input: SemanticInputIr,
    /// The path parameters the key is scoped to (request field names), in template order.
    pub scope: Vec<String>,
    /// Names of the headers declared by the 2xx responses, lower case, sorted, unique: stored
    /// with the result.
    pub stored_headers: Vec<String>,
    /// `x-idempotency-retention`, in seconds: how long the operation's records are kept
    /// (`None`: the executor's retention).
    pub retention: Option<u64>,
}

/// The key header of an idempotent operation.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyIr {
    /// The header name as the spec declares it (else as configured).
    pub header: String,
    /// The spec's `maxLength`, at most 255 (255 when it declares none).
    pub max_length: u64,
    /// The spec's `minLength`, at least 1 and at most `max_length` (1 when it declares none).
    /// The runtime accepts any key of 1 to `max_length` characters; a probe sends at least this.
    pub min_length: u64,
    /// Whether the spec declares the header `required: true`. The runtime requires the key
    /// either way; the generated docs say so when the spec does not.
    pub declared_required: bool,
}

/// The semantic input of an idempotent operation, field by field.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticInputIr {
    /// Path parameters.
    pub path: Vec<ParamIr>,
    /// Query parameters.
    pub query: Vec<ParamIr>,
    /// Header parameters marked `x-idempotency-fingerprint: true`, in declaration order, with
    /// `wire` in lower case: the keys of the `"header"` group.
    pub header: Vec<ParamIr>,
    /// The body.
    pub body: Option<BodyIr>,
}

/// One operation `x-idempotency-tombstones` names, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct TombstoneLink {
    /// The idempotent operation's id.
    pub operation_id: String,
    /// Its generated name (`CreateWidget`, the type that describes it).
    pub name: String,
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
#[derive(Debug, Clone, PartialEq)]
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
    /// The schema's `default` as written (optional query and header parameters only).
    pub default_json: Option<serde_json::Value>,
    /// The value an absent parameter takes: `default_json` as a value of its (scalar) type,
    /// when it is one. The request struct's field is then that type, not `Option`.
    pub default: Option<types::DefaultExpr>,
}

impl ParamIr {
    /// Whether the request struct's field holds a value even when the request has none: a
    /// required parameter, or one with an applied default (arrays are served empty instead).
    pub fn always_present(&self) -> bool {
        self.required || self.default.is_some()
    }
}

/// How a body is carried.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyKind {
    /// A JSON document of this type.
    Json(TypeRef),
    /// `application/x-www-form-urlencoded` request body: the fields of an object schema, decoded
    /// into this type (validated, and fingerprinted as decoded: field order does not matter).
    Form(TypeRef),
    /// `multipart/form-data` request body whose schema's parts are all typed
    /// ([`crate::spec::multipart`]): decoded into the struct `ty` by part name, validated, and
    /// fingerprinted as decoded (files by digest): part order and boundary do not matter.
    Multipart {
        /// The body struct.
        ty: TypeRef,
        /// Its parts, in schema order.
        parts: Vec<PartIr>,
    },
    /// `text/*`: a `String`.
    Text,
    /// Anything else: raw bytes.
    Bytes,
}

/// One part of a multipart body.
#[derive(Debug, Clone, PartialEq)]
pub struct PartIr {
    /// The part name.
    pub wire: String,
    /// The body struct's field.
    pub field: String,
    /// Text, file or JSON.
    pub kind: crate::spec::multipart::PartKind,
}

impl BodyKind {
    /// The type of a JSON, form or multipart body.
    pub fn typed(&self) -> Option<&TypeRef> {
        match self {
            BodyKind::Json(ty) | BodyKind::Form(ty) | BodyKind::Multipart { ty, .. } => Some(ty),
            BodyKind::Text | BodyKind::Bytes => None,
        }
    }
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
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

    /// Whether a response under this key is a redirect (a 3xx code or the `3XX` range).
    pub fn is_redirect(self) -> bool {
        match self {
            StatusKey::Code(c) => (300..400).contains(&c),
            StatusKey::Range(c) => c == 3,
            StatusKey::Default => false,
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
    /// The API as the generated docs name it: `info.title` and "API", once (`GitHub v3 REST
    /// API` stays as it is).
    pub fn described(&self) -> String {
        let title = self.title.trim_end();
        let last = title
            .rsplit(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("");
        if last.eq_ignore_ascii_case("api") {
            title.to_string()
        } else {
            format!("{title} API")
        }
    }

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
        let base = trait_name.strip_suffix("Api").filter(|b| !b.is_empty());
        let client_name = format!("{}Client", base.unwrap_or(&trait_name));
        let service_name = format!("{}Service", base.unwrap_or(&trait_name));
        let mut space = TypeSpace::new(spec);
        let mut op_names = Namespace::with_reserved(&[
            &trait_name,
            &client_name,
            &service_name,
            "Api",
            "Server",
            "Reply",
            "CallOptions",
            "Error",
            "ProblemDetails",
            "RetryPolicy",
        ]);
        let mut methods = Namespace::with_reserved(&["router"]);
        let mut operations = Vec::new();
        let unroutable: Vec<&str> = spec::paths::unroutable(spec)
            .iter()
            .map(|u| u.key.text.as_str())
            .collect();
        for op in spec::operations(spec) {
            let mut ir = operation_ir(
                spec,
                &op,
                key_header,
                &mut space,
                &mut op_names,
                &mut methods,
            );
            ir.routed = !unroutable.contains(&op.path);
            operations.push(ir);
        }
        // `x-idempotency-tombstones` names an operation by id; link it by its generated name.
        let names: Vec<(String, String, bool)> = operations
            .iter()
            .map(|o| (o.id.clone(), o.name.clone(), o.is_idempotent()))
            .collect();
        for (op, node) in operations.iter_mut().zip(spec::operations(spec)) {
            for (target, _) in node.tombstones_targets() {
                let link = names
                    .iter()
                    .find(|(id, _, idempotent)| id == target && *idempotent)
                    .map(|(id, name, _)| TombstoneLink {
                        operation_id: id.clone(),
                        name: name.clone(),
                    });
                if let Some(link) = link
                    && !op.tombstones.contains(&link)
                {
                    op.tombstones.push(link);
                }
            }
        }
        let mut types = space.finish();
        apply_param_defaults(&mut operations, &types);
        types::imply_tags(&mut types, &operation_uses(&operations));
        mark_usage(&operations, &mut types);
        Api {
            title,
            trait_name,
            client_name,
            service_name,
            operations,
            types,
            key_header: key_header.to_ascii_lowercase(),
        }
    }
}

/// Every named type an operation uses directly: parameters, bodies, response bodies and headers.
fn operation_uses(operations: &[OperationIr]) -> std::collections::BTreeSet<String> {
    let mut out = Vec::new();
    for op in operations {
        for p in &op.params {
            types::named_in(&p.ty, &mut out);
        }
        if let Some(ty) = op.body.as_ref().and_then(|b| b.kind.typed()) {
            types::named_in(ty, &mut out);
        }
        for r in &op.responses {
            if let Some(BodyKind::Json(ty) | BodyKind::Form(ty)) = r.body.as_ref().map(|b| &b.kind)
            {
                types::named_in(ty, &mut out);
            }
            for h in &r.headers {
                types::named_in(&h.ty, &mut out);
            }
        }
    }
    out.into_iter().collect()
}

/// Sets [`ParamIr::default`] on every optional scalar parameter whose `default` is a value of
/// its type, in the request and in the semantic input alike.
fn apply_param_defaults(operations: &mut [OperationIr], types: &[TypeDef]) {
    let defs: std::collections::HashMap<&str, &TypeDef> =
        types.iter().map(|d| (d.name.as_str(), d)).collect();
    let lookup = |name: &str| defs.get(name).copied();
    let resolve = |p: &mut ParamIr| {
        if p.required || matches!(p.ty, TypeRef::Vec(_)) {
            return;
        }
        if let Some(value) = &p.default_json {
            p.default = types::resolve_default(value, &p.ty, &lookup);
        }
    };
    for op in operations {
        op.params.iter_mut().for_each(resolve);
        if let Some(idempotency) = &mut op.idempotency {
            idempotency.input.path.iter_mut().for_each(resolve);
            idempotency.input.query.iter_mut().for_each(resolve);
        }
    }
}

/// Sets every type's [`types::Usage`] from where the operations use it: parameters and request
/// bodies are deserialised, responses and semantic inputs serialised; the types they hold inherit
/// the direction. Types no operation reaches get both.
fn mark_usage(operations: &[OperationIr], types: &mut [TypeDef]) {
    let index: std::collections::HashMap<String, usize> = types
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    for op in operations {
        for p in &op.params {
            types::named_in(&p.ty, &mut requests);
        }
        if let Some(ty) = op.body.as_ref().and_then(|b| b.kind.typed()) {
            types::named_in(ty, &mut requests);
            if op.is_idempotent() {
                types::named_in(ty, &mut responses);
            }
        }
        if op.is_idempotent() {
            for p in op
                .params
                .iter()
                .filter(|p| p.location != ParamLocation::Header)
            {
                types::named_in(&p.ty, &mut responses);
            }
        }
        for r in &op.responses {
            if let Some(BodyKind::Json(ty)) = r.body.as_ref().map(|b| &b.kind) {
                types::named_in(ty, &mut responses);
            }
        }
    }
    let reach = |roots: Vec<String>, types: &[TypeDef]| {
        let mut seen = vec![false; types.len()];
        let mut stack = roots;
        while let Some(name) = stack.pop() {
            let Some(&i) = index.get(&name) else { continue };
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            stack.extend(types[i].holds());
        }
        seen
    };
    let de = reach(requests, types);
    let ser = reach(responses, types);
    // A type no operation uses is for the user, both ways, and so is everything it holds.
    let unused: Vec<String> = types
        .iter()
        .enumerate()
        .filter(|(i, _)| !de[*i] && !ser[*i])
        .map(|(_, d)| d.name.clone())
        .collect();
    let both = reach(unused, types);
    for (i, def) in types.iter_mut().enumerate() {
        def.usage = types::Usage {
            serialize: ser[i] || both[i],
            deserialize: de[i] || both[i],
        };
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
    let (name, items) = claim_operation_name(op_names, &base);
    let method = methods.claim(&snake_name(&name));
    let authorize_method = methods.claim(&format!("authorize_{method}"));
    let doc = op
        .node
        .node
        .get("summary")
        .or_else(|| op.node.node.get("description"))
        .and_then(Node::as_str)
        .map(|s| s.trim().to_string());

    let mut fields = Namespace::with_reserved(&["body"]);
    let mut params = Vec::new();
    let mut fingerprinted = Vec::new();
    let mut key = None;
    for p in op.parameters(spec) {
        let (wire, location) = match param_read(&p, key_header) {
            ParamRead::Key(wire) => {
                key = Some(key_ir(spec, &p, wire));
                continue;
            }
            ParamRead::Value(wire, location) => (wire, location),
            ParamRead::Unread => continue,
        };
        if location == ParamLocation::Header && p.is_fingerprinted_header() {
            fingerprinted.push(params.len());
        }
        let required = location == ParamLocation::Path
            || p.node.node.get("required").and_then(Node::as_bool) == Some(true);
        let (ty, checks, default_json) = match raw_param_schema(spec, &p) {
            Some(schema) => {
                let ty = space.type_of(schema, &format!("{name}{}", type_name(wire)));
                let default_json = (!required).then(|| space.default_of(schema)).flatten();
                (
                    param_type(space, ty, location),
                    Checks::of(schema.node),
                    default_json,
                )
            }
            None => (TypeRef::String, Checks::default(), None),
        };
        params.push(ParamIr {
            field: fields.claim(&snake_name(wire)),
            wire: wire.to_string(),
            location,
            required,
            ty,
            checks,
            doc: types::description(p.node.node),
            default_json,
            default: None,
        });
    }

    let body = op.node.node.get("requestBody").and_then(|rb| {
        let rb = spec.deref(NodeRef {
            file: op.node.file,
            node: rb,
        });
        let required = rb.node.get("required").and_then(Node::as_bool) == Some(true);
        let (media_type, kind, schema) = body_of(
            rb,
            space,
            &format!("{name}RequestBody"),
            "application/json",
            true,
        )?;
        let checks = match (&kind, schema) {
            (BodyKind::Json(_) | BodyKind::Form(_), Some(schema)) => Checks::of(schema),
            // The struct's fields carry the parts' checks.
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
        let body = body_of(r.node, space, &hint, "application/json", false)
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

    let idempotency = op.is_idempotent().then(|| {
        let key = key.unwrap_or_else(|| KeyIr {
            header: key_header.to_string(),
            max_length: idemgen_protocol::MAX_KEY_LEN as u64,
            min_length: 1,
            declared_required: false,
        });
        let header = fingerprinted
            .iter()
            .map(|&i| ParamIr {
                wire: params[i].wire.to_ascii_lowercase(),
                ..params[i].clone()
            })
            .collect();
        idempotency_ir(op, key, &params, header, body.as_ref(), &responses)
    });
    OperationIr {
        id,
        name,
        items,
        method,
        authorize_method,
        http_method: op.method.to_string(),
        path: op.path.to_string(),
        routed: true,
        doc,
        safe: op.is_safe(),
        idempotency,
        tombstones: Vec::new(),
        params,
        body,
        responses,
        security: SecurityIr::of(spec, op),
    }
}

/// The Rust names of the items generated for one operation, all claimed together in the
/// module's namespace so that no item of one operation collides with another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemNames {
    /// `CreateWidgetRequest`: the parsed parameters and body.
    pub request: String,
    /// `CreateWidgetResponse`: the 2xx responses.
    pub response: String,
    /// `CreateWidgetError`: the declared error responses.
    pub error: String,
    /// `CreateWidgetSemanticInput`: what the fingerprint hashes.
    pub semantic_input: String,
    /// `CreateWidgetPathInput`: the path parameters inside the semantic input.
    pub path_input: String,
    /// `CreateWidgetQueryInput`: the query parameters inside the semantic input.
    pub query_input: String,
    /// `CreateWidgetHeaderInput`: the fingerprinted header parameters inside the semantic input.
    pub header_input: String,
    /// `CreateWidgetParams`: the client's query and header parameters.
    pub params: String,
}

/// The suffixes of an operation's items; the empty one is the unit struct itself. The one list:
/// [`ItemNames`] is built from it.
const OPERATION_ITEMS: [&str; 9] = [
    "",
    "Request",
    "Response",
    "Error",
    "SemanticInput",
    "PathInput",
    "QueryInput",
    "Params",
    "HeaderInput",
];

impl ItemNames {
    fn from_base(name: &str) -> ItemNames {
        let item = |suffix: &str| format!("{name}{suffix}");
        ItemNames {
            request: item(OPERATION_ITEMS[1]),
            response: item(OPERATION_ITEMS[2]),
            error: item(OPERATION_ITEMS[3]),
            semantic_input: item(OPERATION_ITEMS[4]),
            path_input: item(OPERATION_ITEMS[5]),
            query_input: item(OPERATION_ITEMS[6]),
            params: item(OPERATION_ITEMS[7]),
            header_input: item(OPERATION_ITEMS[8]),
        }
    }
}

/// `base` (or `base2`, …) such that no item derived from it collides with another operation's
/// or a reserved name, and the names of its items.
fn claim_operation_name(names: &mut Namespace, base: &str) -> (String, ItemNames) {
    let free = |names: &Namespace, candidate: &str| {
        OPERATION_ITEMS
            .iter()
            .all(|suffix| !names.contains(&format!("{candidate}{suffix}")))
    };
    let name = std::iter::once(base.to_string())
        .chain((2..).map(|n| format!("{base}{n}")))
        .find(|candidate| free(names, candidate))
        .unwrap_or_else(|| base.to_string());
    for suffix in OPERATION_ITEMS {
        names.claim(&format!("{name}{suffix}"));
    }
    let items = ItemNames::from_base(&name);
    (name, items)
}

/// The key header as an operation declares it.
fn key_ir(spec: &LoadedSpec, p: &crate::spec::Parameter<'_>, wire: &str) -> KeyIr {
    let max = idemgen_protocol::MAX_KEY_LEN as u64;
    let max_length = p
        .schema(spec)
        .and_then(|s| s.node.get("maxLength"))
        .and_then(Node::as_int)
        .and_then(|v| u64::try_from(v).ok())
        .filter(|v| *v >= 1)
        .map_or(max, |v| v.min(max));
    let min_length = p
        .schema(spec)
        .and_then(|s| s.node.get("minLength"))
        .and_then(Node::as_int)
        .and_then(|v| u64::try_from(v).ok())
        .map_or(1, |v| v.clamp(1, max_length));
    KeyIr {
        header: wire.to_string(),
        max_length,
        min_length,
        declared_required: p.node.node.get("required").and_then(Node::as_bool) == Some(true),
    }
}

/// The one computation of what makes `op` idempotent.
fn idempotency_ir(
    op: &Operation<'_>,
    key: KeyIr,
    params: &[ParamIr],
    header: Vec<ParamIr>,
    body: Option<&BodyIr>,
    responses: &[ResponseIr],
) -> Idempotency {
    let fingerprint_version = op.fingerprint_version().or_default();
    let located = |location| {
        params
            .iter()
            .filter(|p| p.location == location)
            .cloned()
            .collect::<Vec<_>>()
    };
    let path = located(ParamLocation::Path);
    let scope = path.iter().map(|p| p.field.clone()).collect();
    let mut stored_headers: Vec<String> = responses
        .iter()
        .filter(|r| r.status.can_be_success())
        .flat_map(|r| r.headers.iter().map(|h| h.wire.to_ascii_lowercase()))
        .collect();
    stored_headers.sort();
    stored_headers.dedup();
    Idempotency {
        fingerprint_version,
        key,
        input: SemanticInputIr {
            path,
            query: located(ParamLocation::Query),
            header,
            body: body.cloned(),
        },
        scope,
        stored_headers,
        retention: match op.retention() {
            spec::extensions::Retention::Valid(secs) => Some(secs),
            _ => None,
        },
    }
}

/// The media type, carrier and schema of a Request Body or Response Object's `content`; JSON
/// media types are preferred. A `request` body sent as a form with a schema is typed as one.
fn body_of<'s>(
    owner: NodeRef<'s>,
    space: &mut TypeSpace<'s>,
    hint: &str,
    fallback_media: &str,
    request: bool,
) -> Option<(String, BodyKind, Option<&'s Node>)> {
    // The schemas under `content` are in its file (another one when a `$ref` stands for it).
    let owner = spec::content(space.spec(), owner)?;
    let entries = owner.node.as_map()?.entries();
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
    } else if let (true, true, Some(schema)) = (
        request,
        spec::is_form(&chosen.0.text),
        chosen.1.get("schema"),
    ) && spec::is_flat_form(
        space.spec(),
        NodeRef {
            file: owner.file,
            node: schema,
        },
    ) {
        let schema = NodeRef {
            file: owner.file,
            node: schema,
        };
        BodyKind::Form(space.type_of(schema, hint))
    } else if let (true, Some(Ok(parts))) = (
        request,
        spec::multipart::is_multipart(&chosen.0.text)
            .then(|| {
                spec::multipart::parts(
                    space.spec(),
                    NodeRef {
                        file: owner.file,
                        node: &chosen.1,
                    },
                )
            })
            .flatten(),
    ) {
        let schema = NodeRef {
            file: owner.file,
            node: chosen.1.get("schema")?,
        };
        let (ty, fields) = space.multipart(schema, &parts, hint);
        BodyKind::Multipart {
            ty,
            parts: parts
                .iter()
                .zip(fields)
                .map(|(p, field)| PartIr {
                    wire: p.name.to_string(),
                    field,
                    kind: p.kind,
                })
                .collect(),
        }
    } else if chosen.0.text.to_ascii_lowercase().starts_with("text/") {
        BodyKind::Text
    } else {
        BodyKind::Bytes
    };
    Some((media_type, kind, chosen.1.get("schema")))
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

/// How the generated code reads a parameter.
pub(crate) enum ParamRead<'a> {
    /// The idempotency key header (its wire name): the runtime's.
    Key(&'a str),
    /// A path, query or header value (its wire name).
    Value(&'a str, ParamLocation),
    /// Not read: a header OpenAPI ignores, a cookie, a parameter without `name` or `in`.
    Unread,
}

/// How the generated code reads `p`, `key_header` being the idempotency key header.
pub(crate) fn param_read<'a>(p: &crate::spec::Parameter<'a>, key_header: &str) -> ParamRead<'a> {
    let (Some(wire), Some(location)) = (p.name, p.location) else {
        return ParamRead::Unread;
    };
    match location {
        "path" => ParamRead::Value(wire, ParamLocation::Path),
        "query" => ParamRead::Value(wire, ParamLocation::Query),
        "header" if wire.eq_ignore_ascii_case(key_header) => ParamRead::Key(wire),
        "header" if IGNORED_HEADERS.contains(&wire.to_ascii_lowercase().as_str()) => {
            ParamRead::Unread
        }
        "header" => ParamRead::Value(wire, ParamLocation::Header),
        // Cookies are not supported.
        _ => ParamRead::Unread,
    }
}

/// A parameter's schema as written (a `$ref` kept, so that the type keeps its component name).
fn raw_param_schema<'s>(
    spec: &'s LoadedSpec,
    p: &crate::spec::Parameter<'s>,
) -> Option<NodeRef<'s>> {
    if let Some(node) = p.node.node.get("schema") {
        return Some(NodeRef {
            file: p.node.file,
            node,
        });
    }
    let content = spec::content(spec, p.node)?;
    let (_, media) = content.node.as_map()?.entries().first()?;
    Some(NodeRef {
        file: content.file,
        node: media.get("schema")?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::types::{DefaultExpr, TypeKind};
    use super::*;
    use crate::loader::{MemoryFs, load_with};

    fn api(text: &str) -> Api {
        let mut fs = MemoryFs::new();
        fs.insert("/spec/openapi.yaml", text);
        let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).expect("the case loads");
        Api::from_spec(&spec, "Idempotency-Key")
    }

    fn def<'a>(api: &'a Api, name: &str) -> &'a TypeDef {
        api.types
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("no type {name}"))
    }

    fn field<'a>(api: &'a Api, ty: &str, wire: &str) -> &'a types::Field {
        match &def(api, ty).kind {
            TypeKind::Struct { fields, .. } => fields
                .iter()
                .find(|f| f.wire == wire)
                .unwrap_or_else(|| panic!("no {ty}.{wire}")),
            other => panic!("{ty} is not a struct: {other:?}"),
        }
    }

    const DEFAULTS: &str = r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /things/{id}:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
        - { name: id, in: path, required: true, schema: { type: string, default: x } }
        - { name: limit, in: query, schema: { type: integer, format: int32, default: 20 } }
        - { name: big, in: query, schema: { type: integer, format: int32, default: 3000000000 } }
        - { name: mode, in: query, schema: { $ref: '#/components/schemas/Mode' } }
        - { name: tags, in: query, schema: { type: array, items: { type: string }, default: [a] } }
        - { name: X-Trace, in: header, schema: { type: string, default: off } }
        - { name: X-Needed, in: header, required: true, schema: { type: string, default: no } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Thing' }
      responses:
        '201': { description: Created. }
components:
  schemas:
    Mode: { type: string, enum: [fast, slow], default: slow }
    Thing:
      type: object
      required: [code]
      properties:
        code: { type: string, default: c }
        size: { type: number, default: 1.5 }
        count: { type: integer, default: 20.0 }
        mode: { $ref: '#/components/schemas/Mode' }
        wrong: { type: integer, default: ten }
        note: { type: [string, 'null'], default: null }
        label: { type: [string, 'null'], default: hi }
        tags: { type: array, items: { $ref: '#/components/schemas/Mode' }, default: [fast] }
        meta: { type: object, additionalProperties: { type: string }, default: {} }
        when: { type: string, format: date-time, default: '2020-01-01T00:00:00Z' }
"#;

    #[test]
    fn defaults_lower_to_values_of_their_type_or_are_not_applied() {
        let api = api(DEFAULTS);
        let applied = |wire: &str| field(&api, "Thing", wire).default.clone();
        assert_eq!(applied("size"), Some(DefaultExpr::F64(1.5)));
        assert_eq!(applied("count"), Some(DefaultExpr::I64(20)));
        // Through a `$ref`: the referenced schema's default, as its enum's variant.
        assert_eq!(
            applied("mode"),
            Some(DefaultExpr::Variant {
                ty: "Mode".into(),
                variant: "Slow".into()
            })
        );
        assert_eq!(applied("note"), Some(DefaultExpr::Null));
        assert_eq!(
            applied("label"),
            Some(DefaultExpr::Some(Box::new(DefaultExpr::Str("hi".into()))))
        );
        assert_eq!(
            applied("tags"),
            Some(DefaultExpr::Vec(vec![DefaultExpr::Variant {
                ty: "Mode".into(),
                variant: "Fast".into()
            }]))
        );
        assert_eq!(applied("meta"), Some(DefaultExpr::EmptyMap));
        // Not a value of the type, or a type without a literal here: kept as written, not
        // applied, so the field stays optional.
        for wire in ["wrong", "when"] {
            let f = field(&api, "Thing", wire);
            assert!(f.default.is_none() && f.default_json.is_some(), "{wire}");
            assert!(f.field_type().is_option(), "{wire}");
        }
        assert!(!field(&api, "Thing", "size").field_type().is_option());
        // Required: the default means nothing.
        let code = field(&api, "Thing", "code");
        assert!(code.default_json.is_none() && code.default.is_none());

        let op = &api.operations[0];
        let param = |wire: &str| op.params.iter().find(|p| p.wire == wire).unwrap();
        assert_eq!(param("limit").default, Some(DefaultExpr::I32(20)));
        assert!(param("limit").always_present());
        assert_eq!(param("big").default, None, "out of int32");
        assert_eq!(
            param("mode").default,
            Some(DefaultExpr::Variant {
                ty: "Mode".into(),
                variant: "Slow".into()
            })
        );
        assert_eq!(
            param("X-Trace").default,
            Some(DefaultExpr::Str("off".into()))
        );
        // Arrays are served empty when absent; path and required parameters are always sent.
        for wire in ["tags", "id", "X-Needed"] {
            assert_eq!(param(wire).default, None, "{wire}");
        }
        // The semantic input's copies of the parameters have them too.
        let input = &op.idempotency.as_ref().unwrap().input;
        let limit = input.query.iter().find(|p| p.wire == "limit").unwrap();
        assert_eq!(limit.default, Some(DefaultExpr::I32(20)));
    }

    #[test]
    fn const_and_one_value_enums_become_checks_of_the_matching_type() {
        let own = |schema: &str| {
            let node = crate::loader::yaml::parse(schema).unwrap();
            types::Checks::of(&node).own
        };
        let constant =
            |schema: &str, ty: &TypeRef| own(schema).for_type(ty).constant.map(|c| c.to_string());
        assert_eq!(
            constant("{type: string, const: card}", &TypeRef::String).as_deref(),
            Some("\"card\"")
        );
        assert_eq!(
            constant("{type: boolean, enum: [true]}", &TypeRef::Bool).as_deref(),
            Some("true")
        );
        assert_eq!(
            constant("{type: integer, const: 2.0}", &TypeRef::I64).as_deref(),
            Some("2.0")
        );
        assert_eq!(constant("{const: 2}", &TypeRef::Json).as_deref(), Some("2"));
        // A const of another type does not apply (nothing could pass), nor does a non-scalar or
        // an enum of several values.
        assert_eq!(constant("{type: string, const: 5}", &TypeRef::String), None);
        assert_eq!(constant("{type: integer, const: 2.5}", &TypeRef::I64), None);
        assert_eq!(constant("{const: [1]}", &TypeRef::Json), None);
        assert_eq!(
            constant("{type: boolean, enum: [true, false]}", &TypeRef::Bool),
            None
        );
    }

    const UNIONS: &str = r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /a:
    post:
      operationId: a
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                pet: { $ref: '#/components/schemas/Pet' }
                other: { $ref: '#/components/schemas/OtherPet' }
                shared: { $ref: '#/components/schemas/Shared' }
                twice: { $ref: '#/components/schemas/Twice' }
                missing: { $ref: '#/components/schemas/Missing' }
      responses:
        '200':
          description: Fish, on its own.
          content:
            application/json:
              schema: { $ref: '#/components/schemas/Fish' }
components:
  schemas:
    Pet:
      oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Dog' }]
      discriminator: { propertyName: kind, mapping: { cat: '#/components/schemas/Cat', dog: '#/components/schemas/Dog' } }
    # Cat in a second union on the same property, under another tag: both tagged.
    OtherPet:
      oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Hamster' }]
      discriminator: { propertyName: kind, mapping: { kitty: '#/components/schemas/Cat', hamster: '#/components/schemas/Hamster' } }
    # Fish is also a response: it keeps its tag, and its union is read by tag.
    Shared:
      oneOf: [{ $ref: '#/components/schemas/Fish' }, { $ref: '#/components/schemas/Bird' }]
      discriminator: { propertyName: kind }
    # Two tags for one alternative: the tag sent is kept.
    Twice:
      oneOf: [{ $ref: '#/components/schemas/Ant' }, { $ref: '#/components/schemas/Bee' }]
      discriminator: { propertyName: kind, mapping: { ant: '#/components/schemas/Ant', emmet: '#/components/schemas/Ant', bee: '#/components/schemas/Bee' } }
    # An alternative without the property.
    Missing:
      oneOf: [{ $ref: '#/components/schemas/Rock' }, { $ref: '#/components/schemas/Wasp' }]
      discriminator: { propertyName: kind }
    Cat: { type: object, required: [kind], properties: { kind: { type: string }, lives: { type: integer } } }
    Dog: { type: object, required: [kind], properties: { kind: { type: string, enum: [dog] } } }
    Fish: { type: object, required: [kind], properties: { kind: { type: string } } }
    Bird: { type: object, required: [kind], properties: { kind: { type: string } } }
    Ant: { type: object, required: [kind], properties: { kind: { type: string } } }
    Bee: { type: object, required: [kind], properties: { kind: { type: string }, sting: { type: boolean } } }
    Wasp: { type: object, required: [kind], properties: { kind: { type: string }, nest: { type: boolean } } }
    Hamster: { type: object, required: [kind], properties: { kind: { type: string }, wheel: { type: boolean } } }
    Rock: { type: object, properties: { weight: { type: number } } }
"#;

    #[test]
    fn tags_are_implied_for_alternatives_used_only_through_tagged_unions() {
        let api = api(UNIONS);
        let tagged = |name: &str| match &def(&api, name).kind {
            TypeKind::Union {
                tagged,
                discriminator,
                ..
            } => (*tagged, discriminator.is_some()),
            other => panic!("{name} is not a union: {other:?}"),
        };
        assert_eq!(tagged("Pet"), (true, true));
        assert_eq!(tagged("OtherPet"), (true, true));
        assert_eq!(tagged("Shared"), (false, true));
        assert_eq!(tagged("Twice"), (false, true));
        // Without the property the discriminator is still read (the alternative is named).
        assert!(!tagged("Missing").0);
        let implied = |ty: &str| field(&api, ty, "kind").implied_tag;
        assert!(implied("Cat") && implied("Dog"));
        assert!(implied("Hamster"));
        // An alternative of an untagged union keeps its tag field, even when its sibling is the
        // one used elsewhere.
        for ty in ["Fish", "Bird", "Ant", "Bee", "Wasp"] {
            assert!(!implied(ty), "{ty}");
        }
        // The Pet union's tags come from the mapping; Shared's from the schema names.
        let tags = |name: &str| match &def(&api, name).kind {
            TypeKind::Union { variants, .. } => variants
                .iter()
                .map(|v| v.tags.join("|"))
                .collect::<Vec<_>>(),
            _ => unreachable!(),
        };
        assert_eq!(tags("Pet"), ["cat", "dog"]);
        assert_eq!(tags("OtherPet"), ["kitty", "hamster"]);
        assert_eq!(tags("Shared"), ["Fish", "Bird"]);
        assert_eq!(tags("Twice"), ["ant|emmet", "bee"]);
    }

    /// An untagged union with checks decodes as `anyOf` reads only when it reaches no such union
    /// again (itself included): a recursive or nested one would decode its subtree once per
    /// alternative at every level.
    #[test]
    fn only_unions_reaching_no_checked_union_decode_by_their_checks() {
        let api = api(r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /things:
    post:
      operationId: createThing
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                flat: { $ref: '#/components/schemas/Flat' }
                outer: { $ref: '#/components/schemas/Outer' }
                tree: { $ref: '#/components/schemas/Tree' }
      responses:
        '201': { description: Created }
components:
  schemas:
    Flat:
      anyOf: [{ type: string, maxLength: 3 }, { type: string, pattern: '^x+$' }]
    Outer:
      anyOf: [{ $ref: '#/components/schemas/Flat' }, { type: integer, minimum: 1 }]
    Tree:
      anyOf:
        - { type: object, properties: { next: { $ref: '#/components/schemas/Tree' }, v: { type: string, maxLength: 1 } } }
        - { type: object, properties: { next: { $ref: '#/components/schemas/Tree' }, v: { type: string, pattern: '^x+$' } } }
"#);
        let decode_checked = |name: &str| match &def(&api, name).kind {
            TypeKind::Union { decode_checked, .. } => *decode_checked,
            other => panic!("{name} is not a union: {other:?}"),
        };
        assert!(decode_checked("Flat"));
        assert!(!decode_checked("Outer"), "it holds Flat");
        assert!(!decode_checked("Tree"), "it holds itself");
    }
}

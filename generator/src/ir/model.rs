//! The IR's structs: the API, its operations, parameters, bodies, responses, security and idempotency, each as `idemgen build` emits it.

use super::*;

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
    pub(super) fn of(spec: &LoadedSpec, op: &Operation<'_>) -> SecurityIr {
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
pub(super) const OPERATION_ITEMS: [&str; 9] = [
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
    pub(super) fn from_base(name: &str) -> ItemNames {
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

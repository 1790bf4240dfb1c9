//! The request pipeline, once for every operation of every service: the axum handlers that a
//! generated `router` mounts, generic over the operation they serve.
//!
//! ```text
//! authenticate (401) → read the body under the limit (413) → extract and validate (400)
//!   → [idempotent] key (400) → authorize, on every attempt (403)
//!   → [idempotent] fingerprint the semantic input → scope → Executor::execute
//!   → respond: 2xx as encoded (and stored), replays as stored, errors as problem+json
//! ```
//!
//! The order is a protocol invariant (nothing is claimed before the request is known to be
//! well-formed and allowed), so it lives here and not in generated code.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use crate::executor::{
    CodecError, EncodedResponse, ExecuteError, Executor, IdempotentRequest, Outcome, ResponseCodec,
    TxHandle,
};
use crate::fingerprint::Fingerprint;
use crate::operation::{Encode, HandlerError, Idempotent, Operation, PlainEndpoint, TxEndpoint};
use crate::problem::{Problem, ProblemKind};
use crate::record::{Scope, StoredResponse};
use crate::server::{Authenticator, DEFAULT_BODY_LIMIT, Principal, bad_request, read_body};
use crate::store::{CommitError, Store};

/// Settings of the request pipeline.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The largest request body accepted; larger ones are answered 413 before anything else
    /// happens.
    pub body_limit: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// What every endpoint of a service shares: the user's API implementation `A`, the
/// authenticator, the executor on store `S`, and the settings. The state of a generated router.
pub struct Server<A, S: Store, Au> {
    api: Arc<A>,
    authenticator: Arc<Au>,
    executor: Executor<S>,
    config: Arc<ServerConfig>,
}

impl<A, S: Store, Au> Clone for Server<A, S, Au> {
    fn clone(&self) -> Self {
        Server {
            api: Arc::clone(&self.api),
            authenticator: Arc::clone(&self.authenticator),
            executor: self.executor.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<A, S: Store, Au> std::fmt::Debug for Server<A, S, Au> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<A, S: Store, Au> Server<A, S, Au> {
    /// A server for `api` (shared, so that the caller may keep a handle on it), authenticating
    /// with `authenticator` and running attempts on `executor`, with the default settings.
    pub fn new(api: Arc<A>, authenticator: Au, executor: Executor<S>) -> Server<A, S, Au> {
        Server {
            api,
            authenticator: Arc::new(authenticator),
            executor,
            config: Arc::new(ServerConfig::default()),
        }
    }

    /// The same server with other settings.
    pub fn with_config(mut self, config: ServerConfig) -> Server<A, S, Au> {
        self.config = Arc::new(config);
        self
    }

    /// The API implementation.
    pub fn api(&self) -> &Arc<A> {
        &self.api
    }

    /// The executor.
    pub fn executor(&self) -> &Executor<S> {
        &self.executor
    }

    /// The settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}

/// A request's parts as an operation's `extract` reads them: path, query, headers, body. The
/// accessors answer 400 problems naming the parameter.
#[derive(Debug)]
pub struct RequestParts {
    parts: Parts,
    path: Vec<(String, String)>,
    query: Result<Vec<(String, String)>, String>,
    body: Bytes,
}

impl RequestParts {
    /// The parts of a request whose route matched `path` parameters, with its body read.
    pub fn new(parts: Parts, path: Vec<(String, String)>, body: Bytes) -> RequestParts {
        let query = match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri) {
            Ok(axum::extract::Query(pairs)) => Ok(pairs),
            Err(e) => Err(e.to_string()),
        };
        RequestParts {
            parts,
            path,
            query,
            body,
        }
    }

    /// The request headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The value of path parameter `name`.
    pub fn path<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        let raw = self
            .path
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| bad_request(format!("path parameter `{name}` is missing")))?;
        crate::codegen::parse_param("path", name, raw)
    }

    fn query_pairs(&self) -> Result<&[(String, String)], Problem> {
        self.query.as_deref().map_err(|e| {
            bad_request("the query string cannot be decoded").with_internal(e.to_string())
        })
    }

    /// The value of query parameter `name`: `None` when absent, 400 when repeated or invalid.
    pub fn query<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Problem> {
        let pairs = self.query_pairs()?;
        let mut values = pairs.iter().filter(|(n, _)| n == name);
        let Some((_, first)) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(bad_request(format!(
                "query parameter `{name}` is given more than once"
            )));
        }
        crate::codegen::parse_param("query", name, first).map(Some)
    }

    /// The value of required query parameter `name`.
    pub fn required_query<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        self.query(name)?
            .ok_or_else(|| bad_request(format!("query parameter `{name}` is required")))
    }

    /// Every value of array query parameter `name` (`?tag=a&tag=b`), in order; 400 when
    /// `required` and there is none.
    pub fn query_array<T: DeserializeOwned>(
        &self,
        name: &str,
        required: bool,
    ) -> Result<Vec<T>, Problem> {
        let values = self
            .query_pairs()?
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| crate::codegen::parse_param("query", name, v))
            .collect::<Result<Vec<T>, Problem>>()?;
        if required && values.is_empty() {
            return Err(bad_request(format!("query parameter `{name}` is required")));
        }
        Ok(values)
    }

    /// The value of request header `name`: `None` when absent, 400 when repeated, not text or
    /// invalid.
    pub fn header<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Problem> {
        let mut values = self.parts.headers.get_all(name).iter();
        let Some(first) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(bad_request(format!(
                "header `{name}` is given more than once"
            )));
        }
        let raw = first
            .to_str()
            .map_err(|_| bad_request(format!("header `{name}` is not visible ASCII text")))?;
        crate::codegen::parse_param("header", name, raw).map(Some)
    }

    /// The value of required request header `name`.
    pub fn required_header<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        self.header(name)?
            .ok_or_else(|| bad_request(format!("header parameter `{name}` is required")))
    }

    fn required_body(&self) -> Result<&[u8], Problem> {
        if self.body.is_empty() {
            return Err(bad_request("the request body is required"));
        }
        Ok(&self.body)
    }

    /// 415 unless the request's `Content-Type` is one `accepts` (compared on its essence,
    /// parameters such as `charset` ignored).
    fn media_type(&self, what: &str, accepts: impl Fn(&str) -> bool) -> Result<(), Problem> {
        let essence = self
            .parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        match essence {
            Some(essence) if accepts(&essence) => Ok(()),
            Some(essence) => Err(Problem::new(ProblemKind::UnsupportedMediaType)
                .with_detail(format!("the body must be sent as {what}, not `{essence}`"))),
            None => Err(
                Problem::new(ProblemKind::UnsupportedMediaType).with_detail(format!(
                    "the body must be sent as {what}; the request has no Content-Type"
                )),
            ),
        }
    }

    fn json_media_type(&self) -> Result<(), Problem> {
        self.media_type("JSON (`Content-Type: application/json`)", |essence| {
            essence == "application/json" || essence.ends_with("+json")
        })
    }

    /// The JSON body (required): 415 unless sent as JSON, 400 when it does not parse as `T` or
    /// holds a NUL character (which no text column can store).
    pub fn json_body<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        let bytes = self.required_body()?;
        self.json_media_type()?;
        let value = crate::server::json_body(bytes)?;
        if let Some(path) = crate::codegen::nul_in_json(bytes) {
            return Err(bad_request(format!(
                "{path}: must not contain the NUL character (\\u0000)"
            )));
        }
        Ok(value)
    }

    /// The JSON body, `None` when the request has none.
    pub fn optional_json_body<T: DeserializeOwned>(&self) -> Result<Option<T>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.json_body().map(Some)
    }

    /// The text body (required): 415 unless sent as `text/*`, 400 when it is not UTF-8 or holds
    /// a NUL character.
    pub fn text_body(&self) -> Result<String, Problem> {
        let bytes = self.required_body()?;
        self.media_type("text (`Content-Type: text/…`)", |essence| {
            essence.starts_with("text/")
        })?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| bad_request("the request body is not UTF-8 text"))?;
        if text.contains('\0') {
            return Err(bad_request(
                "the request body must not contain the NUL character",
            ));
        }
        Ok(text)
    }

    /// The text body, `None` when the request has none.
    pub fn optional_text_body(&self) -> Result<Option<String>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.text_body().map(Some)
    }

    /// The raw body (required).
    pub fn bytes_body(&self) -> Result<Bytes, Problem> {
        self.required_body()?;
        Ok(self.body.clone())
    }

    /// The raw body, `None` when the request has none.
    pub fn optional_bytes_body(&self) -> Result<Option<Bytes>, Problem> {
        Ok((!self.body.is_empty()).then(|| self.body.clone()))
    }
}

/// The answer to a request no route matches: 404 problem+json (axum's default is an empty body).
pub async fn not_found() -> Response {
    Problem::new(ProblemKind::NotFound)
        .with_detail("no operation is served at this path")
        .into_response()
}

/// The answer to a method a route does not serve: 405 problem+json; axum adds `Allow`.
pub async fn method_not_allowed() -> Response {
    Problem::new(ProblemKind::MethodNotAllowed).into_response()
}

/// A request that passed authentication, extraction and validation.
struct Admitted<Op: Operation> {
    principal: Principal,
    request: Op::Request,
    headers: HeaderMap,
}

/// Steps before authorization: authenticate (401), read the body under the limit (413), extract
/// and validate (400). Nothing is claimed or executed yet.
async fn admit<Op: Operation, A, S: Store, Au: Authenticator>(
    server: &Server<A, S, Au>,
    request: axum::extract::Request,
) -> Result<Admitted<Op>, Response> {
    let (mut parts, body) = request.into_parts();
    if parts
        .headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
    {
        // Two credentials: which one the authenticator would pick is not the client's to guess.
        return Err(reject(
            Op::ID,
            None,
            bad_request("the Authorization header must be sent exactly once"),
        ));
    }
    let principal = match server.authenticator.authenticate(&parts.headers).await {
        Ok(principal) => principal,
        Err(problem) => return Err(reject(Op::ID, None, problem)),
    };
    let refuse = |problem| reject(Op::ID, Some(&principal.owner), problem);
    let path = match RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(path) => path
            .iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect(),
        Err(e) => {
            return Err(refuse(
                bad_request("the path cannot be decoded").with_internal(e.to_string()),
            ));
        }
    };
    let body = if Op::HAS_BODY {
        read_body(body, server.config.body_limit)
            .await
            .map_err(refuse)?
    } else {
        // A body the operation does not declare is not read; the connection is not kept busy
        // with it either (hyper discards it).
        drop(body);
        Bytes::new()
    };
    let raw = RequestParts::new(parts, path, body);
    let request = Op::extract(&raw).map_err(refuse)?;
    Op::validate(&request).map_err(|detail| refuse(bad_request(detail)))?;
    Ok(Admitted {
        principal,
        request,
        headers: raw.parts.headers,
    })
}

/// Serves an operation whose handler needs no transaction of the runtime's.
pub async fn plain<Op, A, S, Au>(
    State(server): State<Server<A, S, Au>>,
    request: axum::extract::Request,
) -> Response
where
    Op: PlainEndpoint<A>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let admitted = match admit::<Op, _, _, _>(&server, request).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    let Admitted {
        principal, request, ..
    } = admitted;
    if let Err(problem) = Op::authorize(&server.api, &principal, &request).await {
        return reject(Op::ID, Some(&principal.owner), problem);
    }
    let result = Op::handle(&server.api, &principal, request).await;
    let (outcome, response) = match result {
        Ok(response) => (
            "executed",
            encoded_response(Op::ID, response.encode(), false),
        ),
        Err(e) => handler_failed::<Op>(e, false),
    };
    log(Op::ID, &principal.owner, outcome, response.status());
    response
}

/// Serves an operation whose handler writes through a transaction of the runtime's without being
/// idempotent (it tombstones the records of another operation): committed when the handler
/// answers 2xx, rolled back otherwise.
pub async fn transactional<Op, A, S, Au>(
    State(server): State<Server<A, S, Au>>,
    request: axum::extract::Request,
) -> Response
where
    Op: TxEndpoint<A, S>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let admitted = match admit::<Op, _, _, _>(&server, request).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    let Admitted {
        principal, request, ..
    } = admitted;
    let owner = principal.owner.clone();
    if let Err(problem) = Op::authorize(&server.api, &principal, &request).await {
        return reject(Op::ID, Some(&owner), problem);
    }
    let store = server.executor.shared_store();
    let mut tx = match TxHandle::begin(store).await {
        Ok(tx) => tx,
        Err(e) => {
            return reject(
                Op::ID,
                Some(&owner),
                Problem::new(ProblemKind::ServiceUnavailable).with_internal(e.to_string()),
            );
        }
    };
    let result = Op::handle(&server.api, &principal, &mut tx, request).await;
    let (outcome, response) = match result {
        Ok(response) => match response.encode() {
            Ok(encoded) => match tx.commit().await {
                Ok(()) => ("executed", render(encoded)),
                Err(e) => {
                    let problem = Problem::new(ProblemKind::ServiceUnavailable);
                    let problem = match e {
                        CommitError::Rejected(why) => problem.with_internal(why),
                        CommitError::Unknown(why) => problem
                            .with_detail("the outcome is unknown; retry the request")
                            .with_internal(why),
                    };
                    ("commit_failed", problem.into_response())
                }
            },
            Err(e) => {
                let _ = tx.rollback().await;
                ("handler_error", encoded_response(Op::ID, Err(e), false))
            }
        },
        Err(e) => {
            let _ = tx.rollback().await;
            handler_failed::<Op>(e, false)
        }
    };
    log(Op::ID, &owner, outcome, response.status());
    response
}

/// What an idempotent attempt hands back to the pipeline: a fresh result (encoded once, sent and
/// stored as the same bytes) or a stored one (replayed as stored, never decoded).
enum Reply {
    Fresh(EncodedResponse),
    Stored(StoredResponse),
}

impl ResponseCodec for Reply {
    fn encode_success(&self) -> Result<Option<EncodedResponse>, CodecError> {
        match self {
            Reply::Fresh(encoded) => Ok(Some(encoded.clone())),
            Reply::Stored(_) => Ok(None),
        }
    }

    fn decode(stored: &StoredResponse) -> Result<Self, CodecError> {
        Ok(Reply::Stored(stored.clone()))
    }
}

/// Serves an idempotent operation: every arrival of its key is one write.
pub async fn idempotent<Op, A, S, Au>(
    State(server): State<Server<A, S, Au>>,
    request: axum::extract::Request,
) -> Response
where
    Op: Idempotent + TxEndpoint<A, S>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let admitted = match admit::<Op, _, _, _>(&server, request).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    let Admitted {
        principal,
        request,
        headers,
    } = admitted;
    let owner = principal.owner.clone();
    let key = match crate::http::key_from_headers(&headers, &Op::KEY) {
        Ok(key) => key,
        Err(problem) => return reject(Op::ID, Some(&owner), problem),
    };
    if let Err(problem) = Op::authorize(&server.api, &principal, &request).await {
        return reject(Op::ID, Some(&owner), problem);
    }
    let fingerprint = match Fingerprint::hs1(
        Op::ID,
        Op::FINGERPRINT_VERSION,
        &Op::semantic_input(&request),
    ) {
        Ok(fingerprint) => fingerprint,
        Err(e) => {
            return reject(
                Op::ID,
                Some(&owner),
                Problem::new(ProblemKind::Internal).with_internal(e.to_string()),
            );
        }
    };
    let attempt = IdempotentRequest {
        scope: Scope {
            owner: owner.clone(),
            operation: Op::ID.to_owned(),
            resource_scope: Op::resource_scope(&request),
            key,
        },
        fingerprint,
        fingerprint_version: Op::FINGERPRINT_VERSION,
        declared_headers: Op::STORED_HEADERS,
        retention: None,
        key_header: Op::KEY.name,
    };
    let api = Arc::clone(&server.api);
    let result = server
        .executor
        .execute(attempt, move |tx: &mut TxHandle<S>| {
            Box::pin(async move {
                match Op::handle(&api, &principal, tx, request).await {
                    Ok(response) => response
                        .encode()
                        .map(Reply::Fresh)
                        .map_err(|e| HandlerError::Internal(Box::new(e))),
                    Err(e) => Err(e),
                }
            })
        })
        .await;
    let (outcome, response) = respond_idempotent::<Op>(result);
    log(Op::ID, &owner, outcome, response.status());
    response
}

fn respond_idempotent<Op: Operation>(
    result: Result<Outcome<Reply>, ExecuteError<HandlerError<Op::Error>>>,
) -> (&'static str, Response) {
    match result {
        Ok(Outcome {
            response: Reply::Stored(stored),
            ..
        }) => ("replayed", crate::http::replay_response(&stored)),
        Ok(Outcome {
            response: Reply::Fresh(encoded),
            ..
        }) => ("executed", render(encoded)),
        Err(ExecuteError::Problem(problem)) => ("idempotency_problem", problem.into_response()),
        Err(ExecuteError::Handler(e)) => handler_failed::<Op>(e, true),
    }
}

/// The answer to a failed handler: its declared response, its problem (unless it is one of the
/// protocol's own), or an opaque 500/503/400. Causes are logged, never sent.
fn handler_failed<Op: Operation>(
    error: HandlerError<Op::Error>,
    idempotent: bool,
) -> (&'static str, Response) {
    match error {
        HandlerError::Response(declared) => (
            "declared_error",
            encoded_response(Op::ID, declared.encode(), idempotent),
        ),
        other => {
            let Some(problem) = other.to_problem(idempotent) else {
                unreachable!("only declared responses have no problem");
            };
            tracing::error!(operation = Op::ID, error = %other, cause = problem.internal().unwrap_or(""), "handler failed");
            // The cause is logged above; only the kind and a fixed detail are sent.
            let mut answer = Problem::new(problem.kind());
            if let Some(detail) = problem.detail() {
                answer = answer.with_detail(detail.to_owned());
            }
            let outcome = if matches!(other, HandlerError::Problem(_))
                && problem.kind() != ProblemKind::Internal
            {
                "handler_problem"
            } else {
                "handler_error"
            };
            (outcome, answer.into_response())
        }
    }
}

/// The response for an encoded result; an encoding failure (a handler bug) is an opaque 500, and
/// so is a declared error response whose status the pipeline owns.
fn encoded_response(
    operation: &'static str,
    encoded: Result<EncodedResponse, CodecError>,
    idempotent: bool,
) -> Response {
    match encoded {
        Ok(encoded)
            if encoded.status.is_success()
                || !idemgen_protocol::status::answered_by_runtime(
                    encoded.status.as_u16(),
                    idempotent,
                ) =>
        {
            render(encoded)
        }
        Ok(encoded) => {
            tracing::error!(
                operation,
                status = encoded.status.as_u16(),
                "a handler answered a status only the pipeline answers; answering 500"
            );
            Problem::new(ProblemKind::Internal).into_response()
        }
        Err(e) => {
            tracing::error!(operation, error = %e, "a response could not be encoded");
            Problem::new(ProblemKind::Internal).into_response()
        }
    }
}

/// An encoded result as an HTTP response.
fn render(encoded: EncodedResponse) -> Response {
    let mut response = Response::new(Body::from(encoded.body));
    *response.status_mut() = encoded.status;
    *response.headers_mut() = encoded.headers;
    response
}

/// Answers a request refused before its handler ran (401, 400, 413, 403), logging its line.
fn reject(operation: &'static str, owner: Option<&str>, problem: Problem) -> Response {
    let outcome = match problem.kind() {
        ProblemKind::Unauthenticated => "unauthenticated",
        ProblemKind::Forbidden => "forbidden",
        ProblemKind::PayloadTooLarge => "payload_too_large",
        ProblemKind::KeyMissing | ProblemKind::KeyInvalid | ProblemKind::InvalidRequest => {
            "invalid_request"
        }
        _ => "rejected",
    };
    let response = problem.into_response();
    log(operation, owner.unwrap_or(""), outcome, response.status());
    response
}

/// The one log line per request.
fn log(operation: &'static str, owner: &str, outcome: &'static str, status: StatusCode) {
    tracing::info!(
        operation,
        owner,
        outcome,
        status = status.as_u16(),
        "request"
    );
}

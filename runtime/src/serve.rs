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

use std::future::Future;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use idemgen_protocol::fingerprint::CanonicalInput;
use tracing::Instrument;

use crate::auth::{Authenticator, Credentials, Principal};
use crate::executor::{
    Disposition, EarlierFormats, ExecuteError, IdempotentRequest, Outcome, Phases, ResponseCodec,
    TxHandle,
};
use crate::operation::{
    Authorization, BoxError, HandlerError, HandlerResult, Idempotent, Operation,
};
use crate::problem::{Problem, ProblemKind};
use crate::request::{RequestParts, bad_request, read_body};
use crate::response::{CodecError, Encode, EncodedResponse, StoredResponse, render};
use crate::server::Server;
use crate::store::{CommitError, Scope, Store, StoreError};

/// Binds an operation to the method of the user's API `A` that handles it, when the handler
/// needs no transaction of the runtime's (reads, and writes that manage their own). Generated.
pub trait PlainEndpoint<A>: Operation {
    /// Decides whether `principal` may attempt the request, before anything is executed.
    fn authorize(
        api: &A,
        principal: &Principal,
        request: &Self::Request,
    ) -> impl Future<Output = Authorization> + Send;

    /// Runs the user's handler.
    fn handle(
        api: &A,
        principal: &Principal,
        request: Self::Request,
    ) -> impl Future<Output = HandlerResult<Self>> + Send;
}

/// Binds an operation to the method of the user's API `A` that handles it, when the handler
/// writes through a transaction of the runtime's: idempotent operations (the record completes in
/// that transaction) and operations that tombstone the records of another
/// (`x-idempotency-tombstones`). Generated.
pub trait TxEndpoint<A, S: Store>: Operation {
    /// Decides whether `principal` may attempt the request; runs on every attempt, replays
    /// included, before anything is executed or replayed.
    fn authorize(
        api: &A,
        principal: &Principal,
        request: &Self::Request,
    ) -> impl Future<Output = Authorization> + Send;

    /// Runs the user's handler inside `tx`.
    fn handle(
        api: &A,
        principal: &Principal,
        tx: &mut TxHandle<S>,
        request: Self::Request,
    ) -> impl Future<Output = HandlerResult<Self>> + Send;
}

/// The problem a client receives for this failure (`None` for a declared response, which is
/// answered with its own body). The cause of an opaque failure stays in the log-only text;
/// `idempotent`: the operation's 503 is the store's (`idempotency_store_unavailable`).
pub fn handler_problem<E>(error: &HandlerError<E>, idempotent: bool) -> Option<Problem> {
    match error {
        HandlerError::Response(_) => None,
        HandlerError::Problem(p) if p.handler_may_answer() => Some(p.clone()),
        HandlerError::Problem(p) => {
            Some(Problem::new(ProblemKind::Internal).with_internal(format!(
                "the handler answered `{}`, one of the protocol's own problems",
                p.kind().code()
            )))
        }
        HandlerError::Internal(cause) => Some(classify_internal(cause, idempotent)),
    }
}

/// How an opaque handler failure is answered. `idempotent`: the operation's 503 is the store's.
fn classify_internal(error: &BoxError, idempotent: bool) -> Problem {
    let unavailable = if idempotent {
        ProblemKind::StoreUnavailable
    } else {
        ProblemKind::ServiceUnavailable
    };
    // A handler's error is opaque (`?` boxes it): a driver error is classified where every
    // store error is, and a store error of the handler's (`tx.conn()`) is taken as it is.
    let classified = crate::store::classify_handler_driver(&**error);
    let store_error = classified
        .as_ref()
        .or_else(|| error.downcast_ref::<StoreError>());
    let problem = match store_error {
        Some(StoreError::Unavailable(_) | StoreError::LockTimeout) => Problem::new(unavailable),
        Some(StoreError::InvalidValue(_)) => Problem::new(ProblemKind::InvalidRequest)
            .with_detail("the request holds a value that cannot be stored"),
        Some(StoreError::Other(_)) | None => Problem::new(ProblemKind::Internal),
    };
    problem.with_internal(crate::store::describe_handler_error(&**error))
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
    let principal = {
        let security = Op::SECURITY;
        let credentials = Credentials::new(&parts.headers, parts.uri.query(), &security);
        if security.admits_anonymous() && credentials.presented().next().is_none() {
            // `security: []` or `- {}`, and no credential of the operation's schemes: served
            // without the authenticator (a public read, a webhook).
            Principal::anonymous()
        } else {
            let principal = match server.authenticator.authenticate(&credentials).await {
                Ok(principal) => principal,
                Err(problem) => return Err(reject(Op::ID, None, problem)),
            };
            if let Err(problem) = security.check(&credentials, &principal) {
                return Err(reject(Op::ID, Some(&principal.owner), problem));
            }
            principal
        }
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

/// The span of one request through the pipeline, a child of the span current where the router
/// was entered (a `TraceLayer`'s, which may carry a W3C trace context), so every span and log
/// line of the request shares its trace. Fields: the operation, and the outcome once known
/// (the metrics' vocabulary); never the key, a credential, the owner or the body.
fn request_span(operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        "idemgen.request",
        operation,
        outcome = tracing::field::Empty
    )
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
    plain_pipeline::<Op, A, S, Au>(server, request)
        .instrument(request_span(Op::ID))
        .await
}

async fn plain_pipeline<Op, A, S, Au>(
    server: Server<A, S, Au>,
    request: axum::extract::Request,
) -> Response
where
    Op: PlainEndpoint<A>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let started = std::time::Instant::now();
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
    let handler_started = std::time::Instant::now();
    let result = Op::handle(&server.api, &principal, request)
        .instrument(tracing::info_span!("idemgen.handler"))
        .await;
    let phases = Phases {
        handler: Some(handler_started.elapsed()),
        ..Phases::default()
    };
    let (outcome, response) = match result {
        Ok(response) => (
            "executed",
            encoded_response(Op::ID, response.encode(), false),
        ),
        Err(e) => handler_failed::<Op>(e, false),
    };
    log_timed(
        Op::ID,
        &principal.owner,
        outcome,
        response.status(),
        started,
        phases,
    );
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
    transactional_pipeline::<Op, A, S, Au>(server, request)
        .instrument(request_span(Op::ID))
        .await
}

async fn transactional_pipeline<Op, A, S, Au>(
    server: Server<A, S, Au>,
    request: axum::extract::Request,
) -> Response
where
    Op: TxEndpoint<A, S>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let started = std::time::Instant::now();
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
    let resource_ref = Op::resource_ref(&request);
    let handler_started = std::time::Instant::now();
    let result = async {
        let response = Op::handle(&server.api, &principal, &mut tx, request).await?;
        tombstone::<Op, S>(&mut tx, &owner, &resource_ref).await?;
        Ok(response)
    }
    .instrument(tracing::info_span!("idemgen.handler"))
    .await;
    let mut phases = Phases {
        handler: Some(handler_started.elapsed()),
        ..Phases::default()
    };
    let completion_started = std::time::Instant::now();
    let complete_span = tracing::info_span!("idemgen.complete");
    let (outcome, response) = match result {
        // Left inside a savepoint, or ended under the handler: the handler's bug, not the
        // store's (which the commit's refusal would answer 503).
        Ok(_) if !tx.intact() => {
            let _ = tx.rollback().instrument(complete_span).await;
            let problem =
                Problem::new(ProblemKind::Internal).with_internal(crate::store::TX_NOT_INTACT);
            ("handler_error", problem.into_response())
        }
        Ok(response) => match response.encode() {
            Ok(encoded) => match tx.commit().instrument(complete_span).await {
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
                let _ = tx.rollback().instrument(complete_span).await;
                ("handler_error", encoded_response(Op::ID, Err(e), false))
            }
        },
        Err(e) => {
            let _ = tx.rollback().instrument(complete_span).await;
            handler_failed::<Op>(e, false)
        }
    };
    phases.completion = Some(completion_started.elapsed());
    log_timed(Op::ID, &owner, outcome, response.status(), started, phases);
    response
}

/// `x-idempotency-tombstones`, after a handler succeeded and in its transaction: the records of
/// each listed operation about the resource the request's path names become tombstones. A
/// failure fails the attempt (its transaction rolls back), as a handler's own write would.
async fn tombstone<Op: Operation, S: Store>(
    tx: &mut TxHandle<S>,
    owner: &str,
    resource_ref: &str,
) -> Result<(), HandlerError<Op::Error>> {
    if resource_ref.is_empty() {
        return Ok(());
    }
    for operation in Op::TOMBSTONES {
        tx.tombstone_records(owner, operation, resource_ref)
            .await
            .map_err(|e| HandlerError::Internal(Box::new(e)))?;
    }
    Ok(())
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
    idempotent_pipeline::<Op, A, S, Au>(server, request)
        .instrument(request_span(Op::ID))
        .await
}

async fn idempotent_pipeline<Op, A, S, Au>(
    server: Server<A, S, Au>,
    request: axum::extract::Request,
) -> Response
where
    Op: Idempotent + TxEndpoint<A, S>,
    A: Send + Sync + 'static,
    S: Store,
    Au: Authenticator,
{
    let started = std::time::Instant::now();
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
    if principal.is_anonymous() {
        // `idemgen check` refuses an idempotent operation that admits anonymous callers; an
        // authenticator that returns no owner is refused here all the same: a key needs one.
        return reject(
            Op::ID,
            None,
            Problem::new(ProblemKind::Unauthenticated)
                .with_detail("this operation needs credentials: its keys are scoped to the caller"),
        );
    }
    let key = match crate::request::key_from_headers(&headers, &Op::KEY) {
        Ok(key) => key,
        Err(problem) => return reject(Op::ID, Some(&owner), problem),
    };
    if let Err(problem) = Op::authorize(&server.api, &principal, &request).await {
        return reject(Op::ID, Some(&owner), problem);
    }
    // `hs2` for new records; the converted input stays for records written under `hs1`.
    let (fingerprint, earlier) = match CanonicalInput::new(&Op::semantic_input(&request)) {
        Ok(input) => (
            input.hs2(Op::ID, Op::FINGERPRINT_VERSION),
            EarlierFormats::new(input),
        ),
        Err(e) => {
            // What the request itself holds: a number that is not finite (a form's `amount=NaN`
            // or `inf`), nesting past the bound. A request, not a server fault: 400, before any
            // claim.
            return reject(
                Op::ID,
                Some(&owner),
                bad_request(
                    "the request holds a value that cannot be fingerprinted (a number that is not finite, or nesting deeper than 200)",
                )
                .with_internal(e.to_string()),
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
        earlier: Some(earlier),
        declared_headers: Op::STORED_HEADERS,
        key_header: Op::KEY.name,
        retention: Op::RETENTION,
    };
    let api = Arc::clone(&server.api);
    let resource_ref = Op::resource_ref(&request);
    let logged_owner = owner.clone();
    server
        .executor
        .execute_finished(
            attempt,
            move |tx: &mut TxHandle<S>| {
                Box::pin(async move {
                    let owner = principal.owner.clone();
                    match Op::handle(&api, &principal, tx, request).await {
                        Ok(response) => {
                            tombstone::<Op, S>(tx, &owner, &resource_ref).await?;
                            response
                                .encode()
                                .map(Reply::Fresh)
                                .map_err(|e| HandlerError::Internal(Box::new(e)))
                        }
                        Err(e) => Err(e),
                    }
                })
            },
            // In the attempt's task: logged and counted even when the client is gone.
            move |result, phases| {
                let (outcome, response) = respond_idempotent::<Op>(result);
                log_timed(
                    Op::ID,
                    &logged_owner,
                    outcome,
                    response.status(),
                    started,
                    phases,
                );
                response
            },
        )
        .await
}

fn respond_idempotent<Op: Operation>(
    result: Result<Outcome<Reply>, ExecuteError<HandlerError<Op::Error>>>,
) -> (&'static str, Response) {
    match result {
        Ok(Outcome {
            response: Reply::Stored(stored),
            ..
        }) => ("replayed", crate::response::replay_response(&stored)),
        Ok(Outcome {
            response: Reply::Fresh(encoded),
            disposition,
        }) => {
            let outcome = if disposition == Disposition::TakenOver {
                "taken_over"
            } else {
                "executed"
            };
            (outcome, render(encoded))
        }
        Err(ExecuteError::Problem(problem)) => {
            let outcome = match problem.kind() {
                ProblemKind::InFlight => "in_flight",
                ProblemKind::KeyReused | ProblemKind::FingerprintVersionChanged => "mismatch",
                ProblemKind::ResourceGone => "gone",
                ProblemKind::StoreUnavailable => "store_unavailable",
                ProblemKind::OutcomeUnknown => "outcome_unknown",
                _ => "idempotency_problem",
            };
            (outcome, problem.into_response())
        }
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
            let Some(problem) = handler_problem(&other, idempotent) else {
                unreachable!("only declared responses have no problem");
            };
            // A problem the handler chose (404, 403, 400) is the service working: DEBUG. A 5xx
            // (an opaque failure, the store down) is what an operator must see: ERROR.
            let cause = problem.internal().unwrap_or("");
            if problem.kind().status().is_server_error() {
                tracing::error!(operation = Op::ID, error = %other, cause, "handler failed");
            } else {
                tracing::debug!(operation = Op::ID, error = %other, cause, "handler answered a problem");
            }
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
/// so is a declared error response whose status the pipeline owns, or a business 409/422 that
/// carries one of idemgen's problem types (a client would take it for the protocol's answer).
fn encoded_response(
    operation: &'static str,
    encoded: Result<EncodedResponse, CodecError>,
    idempotent: bool,
) -> Response {
    use idemgen_protocol::status::{answered_by_runtime, shared_with_handler};
    match encoded {
        Ok(encoded)
            if encoded.status.is_success()
                || !answered_by_runtime(encoded.status.as_u16(), idempotent) =>
        {
            if shared_with_handler(encoded.status.as_u16(), idempotent)
                && let Some(kind) = idemgen_type(&encoded.body)
            {
                tracing::error!(
                    operation,
                    status = encoded.status.as_u16(),
                    r#type = kind,
                    "a handler answered a business conflict with one of idemgen's problem types; answering 500"
                );
                return Problem::new(ProblemKind::Internal).into_response();
            }
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

/// The problem `type` of a JSON body, when it is one of idemgen's own (`None` for any other body:
/// a business problem's own type, no `type`, not JSON).
fn idemgen_type(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let kind = serde_json::from_slice::<Typed>(body).ok()?.kind?;
    idemgen_protocol::problem::is_idemgen_type(&kind).then_some(kind)
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

/// The metrics of requests, through the `metrics` façade (a no-op until the service installs a
/// recorder, e.g. a Prometheus exporter). Names follow OpenTelemetry's conventions: no `_total`
/// suffix, the unit in the description; attributes are only the operation and the outcome (the
/// `log` line's), never the key or the owner, so their number stays bounded.
const REQUESTS: &str = "idemgen.requests";
/// Seconds from the start of the pipeline to the response, for requests that reached their
/// handler or the executor (refusals, 400/401/403/413, are counted in [`REQUESTS`] only).
const REQUEST_DURATION: &str = "idemgen.request.duration";
/// Seconds taking the key (claim statements or the gated `BEGIN`, in-flight waits included),
/// for idempotent requests.
const CLAIM_DURATION: &str = "idemgen.claim.duration";
/// Seconds in the handler; not recorded for a replay (no handler ran).
const HANDLER_DURATION: &str = "idemgen.handler.duration";
/// Seconds completing the record and committing, or rolling back and releasing.
const COMPLETION_DURATION: &str = "idemgen.completion.duration";

fn describe_metrics() {
    static DESCRIBED: std::sync::Once = std::sync::Once::new();
    DESCRIBED.call_once(|| {
        metrics::describe_counter!(
            REQUESTS,
            metrics::Unit::Count,
            "Requests by operation and outcome (executed, replayed, in_flight, mismatch, gone, taken_over, store_unavailable, outcome_unknown, …)"
        );
        metrics::describe_histogram!(
            REQUEST_DURATION,
            metrics::Unit::Seconds,
            "Duration of admitted requests by operation and outcome"
        );
        metrics::describe_histogram!(
            CLAIM_DURATION,
            metrics::Unit::Seconds,
            "Time idempotent requests took to take their key (waits for an in-flight attempt included), by operation and outcome"
        );
        metrics::describe_histogram!(
            HANDLER_DURATION,
            metrics::Unit::Seconds,
            "Time in the handler, by operation and outcome (replays run none)"
        );
        metrics::describe_histogram!(
            COMPLETION_DURATION,
            metrics::Unit::Seconds,
            "Time completing the record and committing (or rolling back), by operation and outcome"
        );
    });
}

/// [`log`], the request's duration since `started`, and the duration of each phase that ran.
fn log_timed(
    operation: &'static str,
    owner: &str,
    outcome: &'static str,
    status: StatusCode,
    started: std::time::Instant,
    phases: Phases,
) {
    log(operation, owner, outcome, status);
    metrics::histogram!(REQUEST_DURATION, "operation" => operation, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
    for (name, took) in [
        (CLAIM_DURATION, phases.claim),
        (HANDLER_DURATION, phases.handler),
        (COMPLETION_DURATION, phases.completion),
    ] {
        if let Some(took) = took {
            metrics::histogram!(name, "operation" => operation, "outcome" => outcome)
                .record(took.as_secs_f64());
        }
    }
}

/// The one log line per request: ERROR for a 5xx, INFO otherwise (a 4xx is the client's
/// mistake or the service's declared answer, not the operator's problem). It names the
/// operation, owner, outcome and status, never the key, a credential or the body.
fn log(operation: &'static str, owner: &str, outcome: &'static str, status: StatusCode) {
    describe_metrics();
    // The request span (when the line is logged inside it, as the pipeline does).
    tracing::Span::current().record("outcome", outcome);
    metrics::counter!(REQUESTS, "operation" => operation, "outcome" => outcome).increment(1);
    if status.is_server_error() {
        tracing::error!(
            operation,
            owner,
            outcome,
            status = status.as_u16(),
            "request"
        );
    } else {
        tracing::info!(
            operation,
            owner,
            outcome,
            status = status.as_u16(),
            "request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn business_conflicts_keep_their_own_type() {
        let in_flight = format!(
            r#"{{"type":"{}","title":"x"}}"#,
            ProblemKind::InFlight.type_uri()
        );
        assert!(idemgen_type(in_flight.as_bytes()).is_some());
        for own in [
            &br#"{"type":"https://payments.example/problems/already-captured"}"#[..],
            br#"{"title":"no type"}"#,
            br#"[1,2]"#,
            b"not json",
        ] {
            assert_eq!(idemgen_type(own), None);
        }
        let answer = |status: u16, body: &str| {
            encoded_response(
                "capturePayment",
                Ok(EncodedResponse {
                    status: StatusCode::from_u16(status).unwrap(),
                    headers: HeaderMap::new(),
                    body: body.as_bytes().to_vec(),
                }),
                true,
            )
            .status()
            .as_u16()
        };
        let business = r#"{"type":"https://payments.example/problems/already-captured"}"#;
        assert_eq!(answer(409, business), 409);
        assert_eq!(answer(422, business), 422);
        assert_eq!(answer(409, &in_flight), 500);
        assert_eq!(answer(422, &in_flight), 500);
        // 410, 503 and 504 stay the protocol's, whatever the body.
        assert_eq!(answer(410, business), 500);
    }

    #[test]
    fn opaque_failures_are_classified_without_database_text() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let lost: BoxError = Box::new(sqlx::Error::Io(io));
        assert_eq!(
            classify_internal(&lost, true).kind(),
            ProblemKind::StoreUnavailable
        );
        assert_eq!(
            classify_internal(&lost, false).kind(),
            ProblemKind::ServiceUnavailable
        );
        let other: BoxError =
            "duplicate key value violates unique constraint \"widgets_pkey\"".into();
        let p = classify_internal(&other, true);
        assert_eq!(p.kind(), ProblemKind::Internal);
        assert!(
            !String::from_utf8(p.body_json())
                .unwrap()
                .contains("widgets_pkey")
        );
        assert!(p.internal().unwrap().contains("widgets_pkey"));
        let store: BoxError = Box::new(StoreError::Unavailable("pool timed out".into()));
        assert_eq!(
            classify_internal(&store, false).kind(),
            ProblemKind::ServiceUnavailable
        );
    }
}

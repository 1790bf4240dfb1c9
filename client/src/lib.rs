//! idemgen-client: the client side of the idemgen protocol, what `idemgen client` generates calls.
//!
//! One retry loop for every generated method: a call to an `x-idempotent` operation carries one
//! key (generated, or the caller's) on every attempt and is retried on connection errors,
//! timeouts, 409 (after `Retry-After`), 408, 503 and 504 — and 429 when the operation declares it —
//! with exponential backoff, full jitter and a total time budget. Safe methods are retried the
//! same way without a key (but not on 409). Any other call is repeated only when it surely never
//! reached the server (the connection could not be made). Never on 400, 401, 403, 410, 422 or
//! other answers: a repeat cannot change them (`idemgen_protocol::status::client_retries`).
//!
//! # The retry policy
//!
//! Every generated client has `with_policy`, for every call, and each call takes
//! [`CallOptions::policy`] for itself:
//!
//! ```
//! use std::time::Duration;
//! use idemgen_client::{CallOptions, Client, RetryPolicy};
//!
//! // Give up sooner than the default (5 attempts, 30 s in all, 10 s per attempt).
//! let policy = RetryPolicy {
//!     max_attempts: 3,
//!     budget: Duration::from_secs(5),
//!     attempt_timeout: Duration::from_secs(2),
//!     ..RetryPolicy::default()
//! };
//! // On a generated client: `WidgetsClient::new(url).with_policy(policy.clone())`; the same on
//! // the client it wraps:
//! let client = Client::new("http://127.0.0.1:8080").with_policy(policy.clone());
//! assert_eq!(client.policy(), &policy);
//! // One call without retries, with the key of a logical call that must not run twice:
//! let once = CallOptions {
//!     key: Some("order-42-charge".into()),
//!     policy: Some(RetryPolicy::off()),
//! };
//! # let _ = once;
//! ```
//!
//! HTTPS needs the `rustls` feature (reqwest with rustls); without it the client speaks HTTP.
//! A crate that only calls a generated client depends on this crate, never on the server runtime:
//! no sqlx, axum or hyper server is compiled for it.

use std::borrow::Cow;
use std::time::{Duration, Instant};

mod multipart;

#[doc(hidden)]
pub use multipart::{Files, Multipart};

pub use bytes::Bytes;
pub use http::header::InvalidHeaderValue as InvalidCredential;
pub use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use idemgen_protocol::status::{Repeatable, client_retries};
pub use idemgen_protocol::{DerivedKey, FilePart};

/// When and how often a call is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: never retried).
    pub max_attempts: u32,
    /// The time every attempt and wait of one call may take together; no retry starts after it.
    pub budget: Duration,
    /// The first backoff's ceiling; it doubles per attempt (full jitter: a random wait up to it).
    pub base_delay: Duration,
    /// The largest backoff ceiling, and the longest `Retry-After` honoured.
    pub max_delay: Duration,
    /// How long one attempt may take before it counts as a timeout.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            budget: Duration::from_secs(30),
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn off() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before attempt `attempt + 1`: full jitter up to `base_delay · 2^(attempt-1)`,
    /// capped by `max_delay`.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        let random = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as u32;
        ceiling.mul_f64(f64::from(random) / 1_000_000.0)
    }
}

/// Per-call settings: the idempotency key to use, and a policy other than the client's.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// The key for an `x-idempotent` operation; `None` generates one (UUIDv4) per call. Pass the
    /// same key to repeat a logical call across processes (e.g. after a crash).
    pub key: Option<String>,
    /// Overrides the client's retry policy for this call.
    pub policy: Option<RetryPolicy>,
}

impl CallOptions {
    /// Options with this idempotency key.
    pub fn with_key(key: impl Into<String>) -> CallOptions {
        CallOptions {
            key: Some(key.into()),
            policy: None,
        }
    }
}

/// A key derived for a downstream step (`tx.derive_key("charge")` in an idemgen handler): every
/// attempt of the upstream request sends the same key, so the downstream replays instead of
/// executing twice (docs/downstream.md).
impl From<&DerivedKey> for CallOptions {
    fn from(key: &DerivedKey) -> CallOptions {
        CallOptions::with_key(key.as_str())
    }
}

/// A connection to one server: the HTTP client, the base URL, headers sent with every call (for
/// example `Authorization`) and the retry policy.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    headers: HeaderMap,
    /// Query parameters sent with every call (an `apiKey` in the query).
    query: Vec<(String, String)>,
    policy: RetryPolicy,
}

impl Client {
    /// A client of the server at `base_url` (`http://localhost:8080`), with the default policy.
    /// Redirects are not followed: a `3xx` the spec declares is the call's typed answer (its
    /// `Location` a header field), and one it does not declare is an unexpected status. Pass a
    /// `reqwest::Client` that follows them to [`Client::with_http`] to have them followed.
    pub fn new(base_url: impl Into<String>) -> Client {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Client::with_http(http, base_url)
    }

    /// The same on a `reqwest::Client` of the caller's (TLS, proxies, pools).
    pub fn with_http(http: reqwest::Client, base_url: impl Into<String>) -> Client {
        let base: String = base_url.into();
        Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            headers: HeaderMap::new(),
            query: Vec::new(),
            policy: RetryPolicy::default(),
        }
    }

    /// Sends `name: value` with every call.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Client {
        self.headers.insert(name, value);
        self
    }

    /// Sends `Authorization: <scheme> <credentials>` with every call (an `http` security scheme
    /// other than bearer and basic).
    pub fn with_authorization(
        self,
        scheme: &str,
        credentials: &str,
    ) -> Result<Client, http::header::InvalidHeaderValue> {
        let value = HeaderValue::from_str(&format!("{scheme} {credentials}"))?;
        Ok(self.with_header(http::header::AUTHORIZATION, value))
    }

    /// Sends `Authorization: Bearer <token>` with every call (`http` bearer, `oauth2`,
    /// `openIdConnect`).
    pub fn with_bearer(self, token: &str) -> Result<Client, http::header::InvalidHeaderValue> {
        self.with_authorization("Bearer", token)
    }

    /// Sends `Authorization: Basic <base64(user:password)>` with every call (`http` basic).
    pub fn with_basic(
        self,
        user: &str,
        password: &str,
    ) -> Result<Client, http::header::InvalidHeaderValue> {
        self.with_authorization("Basic", &base64(format!("{user}:{password}").as_bytes()))
    }

    /// Sends the query parameter `name=value` with every call (an `apiKey` in the query).
    pub fn with_query(mut self, name: impl Into<String>, value: impl Into<String>) -> Client {
        self.query.push((name.into(), value.into()));
        self
    }

    /// Sends the cookie `name=value` with every call (an `apiKey` in a cookie), beside the
    /// others set this way.
    pub fn with_cookie(
        mut self,
        name: &str,
        value: &str,
    ) -> Result<Client, http::header::InvalidHeaderValue> {
        let cookie = match self
            .headers
            .get(http::header::COOKIE)
            .and_then(|v| v.to_str().ok())
        {
            Some(existing) => format!("{existing}; {name}={value}"),
            None => format!("{name}={value}"),
        };
        self.headers
            .insert(http::header::COOKIE, HeaderValue::from_str(&cookie)?);
        Ok(self)
    }

    /// Uses `policy` for every call that does not choose its own.
    pub fn with_policy(mut self, policy: RetryPolicy) -> Client {
        self.policy = policy;
        self
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Sends `call` with retries as its kind allows; the answer is the last attempt's. Generated
    /// methods call this and decode the answer.
    #[doc(hidden)]
    pub async fn send(&self, call: Call, options: &CallOptions) -> Result<Answer, Failure> {
        let policy = options.policy.as_ref().unwrap_or(&self.policy);
        let key = match &call.repeat {
            Repeat::Keyed { .. } => Some(
                options
                    .key
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            ),
            _ => None,
        };
        let repeatable = match call.repeat {
            Repeat::Keyed { .. } => Repeatable::Keyed,
            Repeat::Safe { .. } => Repeatable::Safe,
            Repeat::Unsafe => Repeatable::Unsafe,
        };
        let declares_429 = match call.repeat {
            Repeat::Keyed { declares_429, .. } | Repeat::Safe { declares_429 } => declares_429,
            Repeat::Unsafe => false,
        };
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let may_repeat = attempt < policy.max_attempts.max(1);
            let within_budget = |wait: Duration| started.elapsed() + wait < policy.budget;
            match self.request(&call, key.as_deref(), policy).send().await {
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    let failed = |error| Failure {
                        error,
                        attempts: attempt,
                        may_have_executed: repeatable != Repeatable::Safe,
                        key: key.clone(),
                    };
                    // A 409 is retried only when it is the protocol's in-flight answer, told
                    // apart from a handler's business conflict by its problem type, so its body
                    // is read first. Any other answer is judged by its status alone, and one
                    // that is retried is dropped unread (a body that breaks off cannot end the
                    // call).
                    let (body, response) = if status == StatusCode::CONFLICT {
                        (Some(response.bytes().await.map_err(failed)?), None)
                    } else {
                        (None, Some(response))
                    };
                    let problem_type = body.as_ref().and_then(|b| problem_type(&headers, b));
                    if may_repeat
                        && client_retries(
                            status.as_u16(),
                            problem_type.as_deref(),
                            repeatable,
                            declares_429,
                        )
                    {
                        let wait = retry_after(&headers, policy)
                            .unwrap_or_else(|| policy.backoff(attempt));
                        if within_budget(wait) {
                            drop(response);
                            tokio::time::sleep(wait).await;
                            continue;
                        }
                    }
                    let body = match (body, response) {
                        (Some(body), _) => body,
                        (None, Some(response)) => response.bytes().await.map_err(failed)?,
                        (None, None) => unreachable!("the answer or its body is kept"),
                    };
                    let replayed = headers
                        .get(idemgen_protocol::headers::IDEMPOTENT_REPLAYED)
                        .is_some_and(|v| v == "true");
                    return Ok(Answer {
                        status,
                        headers,
                        body,
                        replayed,
                        attempts: attempt,
                        key,
                    });
                }
                Err(error) => {
                    // A connection that could not be made never carried the request; anything
                    // later (a timeout, a reset, a lost answer) may have reached the server.
                    let unsent = error.is_connect();
                    if may_repeat && (unsent || repeatable != Repeatable::Unsafe) {
                        let wait = policy.backoff(attempt);
                        if within_budget(wait) {
                            tokio::time::sleep(wait).await;
                            continue;
                        }
                    }
                    return Err(Failure {
                        error,
                        attempts: attempt,
                        may_have_executed: !unsent && repeatable != Repeatable::Safe,
                        key,
                    });
                }
            }
        }
    }

    /// One attempt's request.
    fn request(
        &self,
        call: &Call,
        key: Option<&str>,
        policy: &RetryPolicy,
    ) -> reqwest::RequestBuilder {
        let mut url = format!("{}{}", self.base, call.path);
        let query = call
            .query
            .iter()
            .map(|(n, v)| (*n, v.as_str()))
            .chain(self.query.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        for (i, (name, value)) in query.enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&segment(name));
            url.push('=');
            url.push_str(&segment(value));
        }
        let mut request = self
            .http
            .request(call.method.clone(), url)
            .headers(self.headers.clone())
            .timeout(policy.attempt_timeout);
        for (name, value) in &call.headers {
            request = request.header(*name, value);
        }
        if let (Repeat::Keyed { header, .. }, Some(key)) = (&call.repeat, key) {
            request = request.header(*header, key);
        }
        if let Some((content_type, body)) = &call.body {
            request = request
                .header(http::header::CONTENT_TYPE, content_type.as_ref())
                .body(body.clone());
        }
        request
    }
}

/// Standard base64 with padding (RFC 4648), for `Basic` credentials.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `type` of a problem+json body (`None` for any other answer).
fn problem_type(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let is_problem = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(idemgen_protocol::problem::PROBLEM_JSON));
    if !is_problem {
        return None;
    }
    serde_json::from_slice::<ProblemDetails>(body)
        .ok()
        .map(|p| p.kind)
}

/// The `Retry-After` of a 409/429/503 (delay-seconds only), capped by the policy's `max_delay`.
fn retry_after(headers: &HeaderMap, policy: &RetryPolicy) -> Option<Duration> {
    let secs: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(policy.max_delay))
}

/// How a call may be repeated, as the spec says.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub enum Repeat {
    /// `x-idempotent`: a key in `header` on every attempt.
    Keyed {
        /// The key header (`Idempotency-Key`, or the name from idemgen.toml).
        header: &'static str,
        /// Whether the operation declares 429.
        declares_429: bool,
    },
    /// A safe method.
    Safe {
        /// Whether the operation declares 429.
        declares_429: bool,
    },
    /// Any other method without a key.
    Unsafe,
}

/// One call as a generated method describes it.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Call {
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    headers: Vec<(&'static str, String)>,
    body: Option<(Cow<'static, str>, Bytes)>,
    repeat: Repeat,
}

impl Call {
    /// A call of `method` on `path` (already expanded and encoded).
    pub fn new(method: Method, path: String, repeat: Repeat) -> Call {
        Call {
            method,
            path,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            repeat,
        }
    }

    /// Adds a query parameter.
    pub fn query(mut self, name: &'static str, value: String) -> Call {
        self.query.push((name, value));
        self
    }

    /// Adds a header parameter.
    pub fn header(mut self, name: &'static str, value: String) -> Call {
        self.headers.push((name, value));
        self
    }

    /// A JSON body.
    pub fn json<T: serde::Serialize + ?Sized>(
        mut self,
        content_type: &'static str,
        value: &T,
    ) -> Result<Call, serde_json::Error> {
        self.body = Some((content_type.into(), Bytes::from(serde_json::to_vec(value)?)));
        Ok(self)
    }

    /// A form body (`application/x-www-form-urlencoded`): the fields of `value`.
    pub fn form<T: serde::Serialize + ?Sized>(
        mut self,
        content_type: &'static str,
        value: &T,
    ) -> Result<Call, serde_urlencoded::ser::Error> {
        self.body = Some((
            content_type.into(),
            Bytes::from(serde_urlencoded::to_string(value)?),
        ));
        Ok(self)
    }

    /// A body sent as it is.
    pub fn bytes(mut self, content_type: &'static str, body: impl Into<Bytes>) -> Call {
        self.body = Some((content_type.into(), body.into()));
        self
    }

    /// A `multipart/form-data` body, with a fresh boundary in its `Content-Type`.
    pub fn multipart(mut self, form: &Multipart) -> Call {
        let (content_type, body) = form.encode();
        self.body = Some((content_type.into(), body));
        self
    }
}

/// A path segment or query component, percent-encoded (everything but RFC 3986's unreserved
/// characters).
#[doc(hidden)]
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte))
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The last attempt's answer, before decoding.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
    /// Whether it is a replay (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// Attempts made.
    pub attempts: u32,
    /// The key sent, for `x-idempotent` operations.
    pub key: Option<String>,
}

impl Answer {
    /// The body as JSON of `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Unexpected> {
        serde_json::from_slice(&self.body).map_err(|e| self.unexpected(format!("body: {e}")))
    }

    /// The body as form fields, decoded into `T`.
    pub fn form<T: serde::de::DeserializeOwned>(&self) -> Result<T, Unexpected> {
        serde_urlencoded::from_bytes(&self.body).map_err(|e| self.unexpected(format!("body: {e}")))
    }

    /// The body as text.
    pub fn text(&self) -> Result<String, Unexpected> {
        String::from_utf8(self.body.to_vec()).map_err(|_| self.unexpected("body: not UTF-8"))
    }

    /// A required header, parsed.
    pub fn header<T: std::str::FromStr>(&self, name: &str) -> Result<T, Unexpected> {
        self.optional_header(name)?
            .ok_or_else(|| self.unexpected(format!("header {name} missing")))
    }

    /// An optional header, parsed.
    pub fn optional_header<T: std::str::FromStr>(
        &self,
        name: &str,
    ) -> Result<Option<T>, Unexpected> {
        match self.headers.get(name) {
            None => Ok(None),
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Some)
                .ok_or_else(|| self.unexpected(format!("header {name}: cannot be read"))),
        }
    }

    /// Wraps a decoded value with what the call took.
    pub fn reply<T>(&self, value: T) -> Reply<T> {
        Reply {
            value,
            status: self.status,
            headers: self.headers.clone(),
            replayed: self.replayed,
            attempts: self.attempts,
            key: self.key.clone(),
        }
    }

    /// This answer as an error: a problem+json body becomes [`Error::Problem`], anything else
    /// [`Error::Unexpected`].
    pub fn error<E>(&self) -> Error<E> {
        let is_problem = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/problem+json"));
        if is_problem && let Ok(problem) = serde_json::from_slice::<ProblemDetails>(&self.body) {
            return Error::Problem(self.reply(problem));
        }
        Error::Unexpected(self.unexpected("undeclared status"))
    }

    /// The protocol's own answer at a status it shares with handlers (409, 422 of an
    /// `x-idempotent` operation: in flight, key reused, fingerprint version changed) as
    /// [`Error::Problem`]; `None` for anything else, a handler's business conflict included,
    /// which decodes as the declared response.
    pub fn protocol_problem<E>(&self) -> Option<Error<E>> {
        let code = self.status.as_u16();
        if !idemgen_protocol::status::shared_with_handler(code, true) {
            return None;
        }
        let kind = problem_type(&self.headers, &self.body)?;
        idemgen_protocol::problem::protocol_problem(code, &kind)?;
        match self.error() {
            problem @ Error::Problem(_) => Some(problem),
            _ => None,
        }
    }

    fn unexpected(&self, why: impl Into<String>) -> Unexpected {
        Unexpected {
            status: self.status,
            body: self.body.clone(),
            why: why.into(),
        }
    }
}

/// A decoded answer and what the call took.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    /// The declared response, typed.
    pub value: T,
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Whether the server replayed a stored result (`Idempotent-Replayed: true`): an earlier
    /// attempt of this call (or another call with the same key) executed.
    pub replayed: bool,
    /// Attempts made (1: no retry).
    pub attempts: u32,
    /// The idempotency key sent, for `x-idempotent` operations: repeat the logical call later
    /// with [`CallOptions::with_key`] to get the same result.
    pub key: Option<String>,
}

/// An RFC 9457 problem the server answered with, as every idemgen server sends them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ProblemDetails {
    /// The problem type URI.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// A short summary.
    #[serde(default)]
    pub title: String,
    /// The HTTP status.
    #[serde(default)]
    pub status: u16,
    /// What happened, for this request.
    #[serde(default)]
    pub detail: Option<String>,
    /// The stable code (idemgen servers: `key_reused`, `in_flight`, …).
    #[serde(default)]
    pub code: Option<String>,
}

/// An answer the client could not read as the spec declares it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unexpected answer {status}: {why}")]
pub struct Unexpected {
    /// Its status.
    pub status: StatusCode,
    /// Its body.
    pub body: Bytes,
    /// What did not match.
    pub why: String,
}

/// Why a call has no declared success answer.
#[derive(Debug, thiserror::Error)]
pub enum Error<E> {
    /// A declared error response (4xx/5xx the spec lists for the operation).
    #[error("declared error response {}", .0.status)]
    Response(Reply<E>),
    /// A problem the spec does not declare for the operation (for example the protocol's own
    /// 409, 410 or 422 on an operation that leaves them out).
    #[error("problem {}: {}", .0.status, .0.value.title)]
    Problem(Reply<ProblemDetails>),
    /// No answer: the last attempt failed in transport (or the budget ran out).
    #[error("transport: {0}")]
    Transport(#[from] Failure),
    /// An answer that does not match the spec.
    #[error(transparent)]
    Unexpected(#[from] Unexpected),
    /// The request could not be encoded.
    #[error("encoding the request: {0}")]
    Encode(#[from] serde_json::Error),
    /// A form body could not be encoded (a field that is not a scalar).
    #[error("encoding the form: {0}")]
    EncodeForm(#[from] serde_urlencoded::ser::Error),
}

impl<E> Error<E> {
    /// Whether the call may have executed on the server, so that its outcome is unknown to the
    /// caller: no answer after the request may have been sent (a timeout, a connection reset or
    /// closed after sending; [`Failure::may_have_executed`]), a 5xx answer (504, a gateway's 502,
    /// a 500 of a handler that failed after a downstream of its own), or a 2xx answer that does not
    /// read as the spec says. `false` for a 4xx answer (the server refused: nothing was
    /// executed, or what was is the declared result), for a connection that could not be made
    /// and for a request that could not be encoded. A handler that gets `true` must not write as
    /// if the call failed: answer 503/504 so that its client retries with the same key, which
    /// re-sends the same derived key downstream (docs/downstream.md).
    pub fn may_have_executed(&self) -> bool {
        let by_status = |status: StatusCode| status.is_server_error() || status.is_success();
        match self {
            Error::Response(reply) => by_status(reply.status),
            Error::Problem(reply) => by_status(reply.status),
            Error::Transport(failure) => failure.may_have_executed,
            Error::Unexpected(unexpected) => by_status(unexpected.status),
            Error::Encode(_) | Error::EncodeForm(_) => false,
        }
    }

    /// The status of the answer, when there was one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Error::Response(reply) => Some(reply.status),
            Error::Problem(reply) => Some(reply.status),
            Error::Unexpected(unexpected) => Some(unexpected.status),
            Error::Transport(_) | Error::Encode(_) | Error::EncodeForm(_) => None,
        }
    }
}

/// A call that got no answer.
#[derive(Debug, thiserror::Error)]
#[error("{} attempt(s), no answer{}", .attempts, if *.may_have_executed { " (it may have executed)" } else { "" })]
pub struct Failure {
    #[source]
    error: reqwest::Error,
    /// Attempts made.
    pub attempts: u32,
    /// Whether the server may have executed the call: repeat a keyed call with the same key
    /// ([`Failure::key`]) to learn its outcome.
    pub may_have_executed: bool,
    /// The key sent, for `x-idempotent` operations.
    pub key: Option<String>,
}

/// What generated client types call (serde adapters, the `FromStr` error of string enums).
#[doc(hidden)]
pub mod codegen {
    pub use idemgen_protocol::FilePart;
    pub use idemgen_protocol::codegen::{
        UnknownValue, deserialize_some, double_option, is_none, nullable, some,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_standard_base64() {
        // RFC 7617's example, and every padding length.
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn credentials_are_sent_where_their_scheme_says() {
        let client = Client::new("http://h")
            .with_basic("Aladdin", "open sesame")
            .unwrap()
            .with_cookie("sid", "s1")
            .unwrap()
            .with_cookie("theme", "dark")
            .unwrap()
            .with_query("api_key", "k 1");
        assert_eq!(
            client.headers[http::header::AUTHORIZATION],
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(client.headers[http::header::COOKIE], "sid=s1; theme=dark");
        let call = Call::new(
            Method::GET,
            "/a".into(),
            Repeat::Safe {
                declares_429: false,
            },
        )
        .query("q", "1".into());
        let request = client
            .request(&call, None, &RetryPolicy::default())
            .build()
            .unwrap();
        assert_eq!(request.url().as_str(), "http://h/a?q=1&api_key=k%201");
        assert!(Client::new("http://h").with_bearer("bad\ntoken").is_err());
    }

    /// What a one-connection loopback server does with the request it reads.
    #[derive(Clone, Copy)]
    enum Server {
        /// Closes the connection once the request arrived (reset after sending).
        Drop,
        /// Never answers.
        Hang,
        /// Answers with this status and a problem body.
        Status(u16),
    }

    /// Serves one connection on loopback as `server` says; returns the base URL and what the
    /// request's head was.
    async fn one_connection(server: Server) -> (String, tokio::sync::oneshot::Receiver<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (seen, head) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request arrives");
                request.extend_from_slice(&buf[..n]);
            }
            let _ = seen.send(String::from_utf8_lossy(&request).into_owned());
            match server {
                Server::Drop => drop(socket),
                Server::Hang => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                Server::Status(status) => {
                    let body = format!(
                        r#"{{"type":"https://idemgen.dev/problems/x","title":"t","status":{status}}}"#
                    );
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/problem+json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    socket.write_all(answer.as_bytes()).await.unwrap();
                }
            }
        });
        (base, head)
    }

    /// One keyed POST, without retries, with `options`.
    async fn keyed_call(base: &str, options: CallOptions) -> Result<(), Error<()>> {
        let client = Client::new(base).with_policy(RetryPolicy {
            attempt_timeout: Duration::from_millis(300),
            ..RetryPolicy::off()
        });
        let call = Call::new(
            Method::POST,
            "/charges".into(),
            Repeat::Keyed {
                header: "Idempotency-Key",
                declares_429: false,
            },
        );
        let answer = client.send(call, &options).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(answer.error())
        }
    }

    /// Real loopback servers: which failures of a downstream call may have executed it.
    #[tokio::test]
    async fn errors_say_whether_the_call_may_have_executed() {
        let cases = [
            (Server::Drop, true, "reset after sending"),
            (Server::Hang, true, "attempt timed out"),
            (Server::Status(504), true, "504"),
            (Server::Status(500), true, "500"),
            (Server::Status(503), true, "503"),
            (Server::Status(400), false, "400"),
            (Server::Status(402), false, "402"),
            (Server::Status(422), false, "422"),
        ];
        for (server, executed, what) in cases {
            let (base, _) = one_connection(server).await;
            let error = keyed_call(&base, CallOptions::default()).await.unwrap_err();
            assert_eq!(error.may_have_executed(), executed, "{what}: {error}");
            if let Server::Status(status) = server {
                assert_eq!(error.status().map(|s| s.as_u16()), Some(status), "{what}");
            }
        }
        // A connection that cannot be made never carried the request.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let error = keyed_call(&base, CallOptions::default()).await.unwrap_err();
        assert!(!error.may_have_executed(), "connect failure: {error}");
        assert_eq!(error.status(), None);
    }

    /// A derived key is the call's idempotency key, as is.
    #[tokio::test]
    async fn a_derived_key_is_sent_as_the_idempotency_key() {
        let key = DerivedKey::new(
            "alice",
            "createOrder",
            "",
            &idemgen_protocol::IdempotencyKey::new("k1").unwrap(),
            "charge",
        );
        let (base, head) = one_connection(Server::Status(201)).await;
        keyed_call(&base, CallOptions::from(&key)).await.unwrap();
        let head = head.await.unwrap().to_ascii_lowercase();
        assert!(
            head.contains(
                "idempotency-key: idg1-ff18da6ae4b1cdc330b88a307c7d05dc85a2396080f8f317\r\n"
            ),
            "{head}"
        );
    }
}

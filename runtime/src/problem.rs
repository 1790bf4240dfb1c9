//! RFC 9457 problem details: the response carrying one of the protocol's [`ProblemKind`]s (the
//! table of kinds, statuses and codes lives in `idemgen-protocol`).
//!
//! A [`Problem`] keeps what the client sees (`type`, `title`, `status`, `detail`) apart from what is
//! only logged ([`Problem::internal`]). Database and driver text never reaches a client: it can
//! only be attached with [`Problem::with_internal`], which is logged and never serialised.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use serde::Serialize;

use idemgen_protocol::problem::PROBLEM_JSON;
pub use idemgen_protocol::problem::ProblemKind;

/// An RFC 9457 problem response.
#[derive(Debug, Clone)]
pub struct Problem {
    kind: ProblemKind,
    detail: Option<String>,
    internal: Option<String>,
    /// Made from a failed downstream call (`From<idemgen_client::Error<E>>`): the one way a
    /// handler may answer the protocol's 504 outcome unknown.
    downstream: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    type_uri: String,
    title: &'static str,
    status: u16,
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl Problem {
    /// A problem of the given kind, with no detail.
    pub fn new(kind: ProblemKind) -> Problem {
        Problem {
            kind,
            detail: None,
            internal: None,
            downstream: false,
        }
    }

    /// Adds client-facing detail text. Never pass database or driver text here.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Problem {
        self.detail = Some(detail.into());
        self
    }

    /// Attaches text for the logs only; it is never sent to the client.
    pub fn with_internal(mut self, internal: impl Into<String>) -> Problem {
        self.internal = Some(internal.into());
        self
    }

    /// The kind of problem.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The client-facing detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Whether a handler may answer this problem as it is: a kind handlers may answer
    /// ([`ProblemKind::handler_may_answer`]), or the 504 of a downstream call whose outcome is
    /// unknown (made by `From<idemgen_client::Error<E>>`, feature `client`), which tells the
    /// client what the protocol's 504 does: retry with the same key.
    pub fn handler_may_answer(&self) -> bool {
        self.kind.handler_may_answer()
            || (self.downstream && self.kind == ProblemKind::OutcomeUnknown)
    }

    /// The log-only text, if any.
    pub fn internal(&self) -> Option<&str> {
        self.internal.as_deref()
    }

    /// The JSON body a client receives.
    pub fn body_json(&self) -> Vec<u8> {
        let body = Body {
            type_uri: self.kind.type_uri(),
            title: self.kind.title(),
            status: self.kind.status().as_u16(),
            code: self.kind.code(),
            detail: self.detail.as_deref(),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

impl From<ProblemKind> for Problem {
    fn from(kind: ProblemKind) -> Problem {
        Problem::new(kind)
    }
}

/// A call to another service through a generated client that failed, as the handler that made
/// it answers (feature `client`; docs/downstream.md): `handler(...).await.map_err(Problem::from)?`.
///
/// - The call may have executed ([`idemgen_client::Error::may_have_executed`]: no answer after
///   sending, a 5xx): 504 outcome unknown, so the client retries with the same key, whose attempt
///   re-sends the same derived key downstream and gets its replay.
/// - It surely did not (the connection could not be made) or the downstream asked to come back
///   later (409 in flight, 429): 503, retried too.
/// - Any other 4xx (the downstream refused the request as sent) or a request that could not be
///   encoded: 500, not retried. Map the downstream's business answers (a declined card) to your
///   own declared responses before this.
///
/// The downstream's text is kept for the logs only.
#[cfg(feature = "client")]
impl<E> From<idemgen_client::Error<E>> for Problem {
    fn from(error: idemgen_client::Error<E>) -> Problem {
        let status = error.status().map(|s| s.as_u16());
        let kind = if error.may_have_executed() {
            ProblemKind::OutcomeUnknown
        } else {
            match (&error, status) {
                (idemgen_client::Error::Transport(_), _) | (_, Some(409 | 429)) => {
                    ProblemKind::ServiceUnavailable
                }
                _ => ProblemKind::Internal,
            }
        };
        let mut problem =
            Problem::new(kind).with_internal(format!("a downstream call failed: {error}"));
        problem.downstream = true;
        match kind {
            ProblemKind::OutcomeUnknown => problem.with_detail(
                "The outcome of a call to another service is unknown; retry the request with the \
                 same idempotency key.",
            ),
            ProblemKind::ServiceUnavailable => problem
                .with_detail("Another service this request needs is unavailable; retry later."),
            _ => problem,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kind.title(), self.kind.code())?;
        if let Some(internal) = &self.internal {
            write!(f, ": {internal}")?;
        }
        Ok(())
    }
}

// `Problem` deliberately does not implement `std::error::Error`: a handler's `?` on a `Problem`
// must keep its status (`HandlerError::Problem`), not become an opaque 500 through the blanket
// conversion of errors.

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        // The log-only text: ERROR for a 5xx, DEBUG for a 4xx (a client that stalls mid-body or
        // sends an undecodable query is not an operator's problem, and must not flood the log).
        if let Some(internal) = &self.internal {
            if self.kind.status().is_server_error() {
                tracing::error!(code = self.kind.code(), internal = %internal, "problem response");
            } else {
                tracing::debug!(code = self.kind.code(), internal = %internal, "problem response");
            }
        }
        let mut response = (self.kind.status(), self.body_json()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.kind.retry_after() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.kind.closes_connection() {
            // HTTP/1: hyper closes the connection after this answer (the rest of the body is
            // never read); HTTP/2 has no such header and hyper leaves it out.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_text_never_reaches_the_body() {
        let p = Problem::new(ProblemKind::StoreUnavailable)
            .with_internal("error returned from database: relation \"x\" does not exist");
        let body = String::from_utf8(p.body_json()).unwrap();
        assert!(!body.contains("relation"));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], 503);
        assert_eq!(
            v["type"],
            "https://idemgen.dev/problems/idempotency_store_unavailable"
        );
    }

    #[test]
    fn only_408_closes_the_connection() {
        for kind in ProblemKind::ALL {
            let response = Problem::new(kind).into_response();
            let close = response.headers().get(header::CONNECTION);
            if kind.status().as_u16() == 408 {
                assert_eq!(close.map(|v| v.as_bytes()), Some(&b"close"[..]), "{kind:?}");
            } else {
                assert_eq!(close, None, "{kind:?}");
            }
        }
    }

    #[test]
    fn retry_after_on_409_and_503_only() {
        for kind in ProblemKind::ALL {
            let response = Problem::new(kind).into_response();
            let has = response.headers().contains_key(header::RETRY_AFTER);
            let status = response.status().as_u16();
            assert_eq!(has, status == 409 || status == 503, "{kind:?}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        }
    }
}

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

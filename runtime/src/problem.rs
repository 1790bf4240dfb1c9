//! RFC 9457 problem details: every error status the runtime answers with, and its stable type.
//!
//! A [`Problem`] keeps what the client sees (`type`, `title`, `status`, `detail`) apart from what is
//! only logged ([`Problem::internal`]). Database and driver text never reaches a client: it can
//! only be attached with [`Problem::with_internal`], which is logged and never serialised.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// The media type of problem bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The prefix of every problem `type` URI defined by idemgen.
pub const TYPE_PREFIX: &str = "https://idemgen.dev/problems/";

/// Every problem idemgen defines; `code` is the last segment of the stable `type` URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// 400: the operation requires an `Idempotency-Key` header and none was sent.
    KeyMissing,
    /// 400: the `Idempotency-Key` header is not a valid key.
    KeyInvalid,
    /// 400: a parameter or the body failed validation.
    InvalidRequest,
    /// 401: no or unknown credentials.
    Unauthenticated,
    /// 403: the authenticated caller may not perform this attempt (checked on replays too).
    Forbidden,
    /// 404: the resource does not exist.
    NotFound,
    /// 409: another attempt with this key is still running.
    InFlight,
    /// 410: the resource this key created has been deleted.
    ResourceGone,
    /// 413: the request body exceeds the configured limit.
    PayloadTooLarge,
    /// 422: the key was used before with a different request.
    KeyReused,
    /// 422: the key was used before under a different fingerprint version of the operation.
    FingerprintVersionChanged,
    /// 500: an unexpected server error (details only in the logs).
    Internal,
    /// 503: the idempotency store cannot be reached; nothing was executed.
    StoreUnavailable,
    /// 504: the outcome of the attempt is unknown; retry with the same key.
    OutcomeUnknown,
}

impl ProblemKind {
    /// The stable code: the last segment of the `type` URI.
    pub fn code(self) -> &'static str {
        match self {
            Self::KeyMissing => "idempotency_key_missing",
            Self::KeyInvalid => "idempotency_key_invalid",
            Self::InvalidRequest => "invalid_request",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::InFlight => "idempotency_request_in_flight",
            Self::ResourceGone => "idempotency_resource_gone",
            Self::PayloadTooLarge => "payload_too_large",
            Self::KeyReused => "idempotency_key_reused",
            Self::FingerprintVersionChanged => "idempotency_fingerprint_version_changed",
            Self::Internal => "internal_error",
            Self::StoreUnavailable => "idempotency_store_unavailable",
            Self::OutcomeUnknown => "idempotency_outcome_unknown",
        }
    }

    /// The HTTP status.
    pub fn status(self) -> StatusCode {
        match self {
            Self::KeyMissing | Self::KeyInvalid | Self::InvalidRequest => StatusCode::BAD_REQUEST,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::InFlight => StatusCode::CONFLICT,
            Self::ResourceGone => StatusCode::GONE,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::KeyReused | Self::FingerprintVersionChanged => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::OutcomeUnknown => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The short, fixed, human-readable summary.
    pub fn title(self) -> &'static str {
        match self {
            Self::KeyMissing => "Idempotency-Key header missing",
            Self::KeyInvalid => "Idempotency-Key header invalid",
            Self::InvalidRequest => "Invalid request",
            Self::Unauthenticated => "Authentication required",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "Not found",
            Self::InFlight => "A request with this idempotency key is in progress",
            Self::ResourceGone => "The resource created with this idempotency key was deleted",
            Self::PayloadTooLarge => "Request body too large",
            Self::KeyReused => "Idempotency key reused with a different request",
            Self::FingerprintVersionChanged => {
                "Idempotency key used under an earlier version of this operation"
            }
            Self::Internal => "Internal server error",
            Self::StoreUnavailable => "Idempotency store unavailable",
            Self::OutcomeUnknown => "Outcome unknown",
        }
    }

    /// The seconds a client should wait before retrying, where the protocol says to send it.
    pub fn retry_after(self) -> Option<u32> {
        match self {
            Self::InFlight | Self::StoreUnavailable => Some(1),
            _ => None,
        }
    }

    /// The full `type` URI.
    pub fn type_uri(self) -> String {
        format!("{TYPE_PREFIX}{}", self.code())
    }
}

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

impl std::error::Error for Problem {}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        if let Some(internal) = &self.internal {
            tracing::warn!(code = self.kind.code(), internal = %internal, "problem response");
        }
        let mut response = (self.kind.status(), self.body_json()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.kind.retry_after() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ProblemKind; 14] = [
        ProblemKind::KeyMissing,
        ProblemKind::KeyInvalid,
        ProblemKind::InvalidRequest,
        ProblemKind::Unauthenticated,
        ProblemKind::Forbidden,
        ProblemKind::NotFound,
        ProblemKind::InFlight,
        ProblemKind::ResourceGone,
        ProblemKind::PayloadTooLarge,
        ProblemKind::KeyReused,
        ProblemKind::FingerprintVersionChanged,
        ProblemKind::Internal,
        ProblemKind::StoreUnavailable,
        ProblemKind::OutcomeUnknown,
    ];

    /// The table in protocol.md, "Status codes and problem types": one row per kind.
    #[test]
    fn status_codes_match_the_protocol_table() {
        let table = include_str!("../../protocol.md");
        for kind in ALL {
            let row = format!("| {} | `{}` |", kind.status().as_u16(), kind.code());
            assert!(table.contains(&row), "protocol.md lacks the row {row}");
        }
        let codes: std::collections::HashSet<_> = ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ALL.len(), "codes are unique");
    }

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
    fn retry_after_on_409_and_503_only() {
        for kind in ALL {
            let response = Problem::new(kind).into_response();
            let has = response.headers().contains_key(header::RETRY_AFTER);
            let status = response.status().as_u16();
            assert_eq!(has, status == 409 || status == 503, "{kind:?}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        }
    }
}

//! Every problem the protocol defines: its status, its stable code and `type` URI, its title, and
//! whether it carries `Retry-After` (protocol.md, "Status codes and problem types").
//!
//! The response type that carries a problem (with client-facing detail kept apart from log-only
//! text) is the runtime's `Problem`; this module is the table both the runtime and the generator
//! read.

use http::StatusCode;

/// The media type of problem bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The prefix of every problem `type` URI defined by idemgen.
pub const TYPE_PREFIX: &str = "https://idemgen.dev/problems/";

/// Every problem idemgen defines; `code` is the last segment of the stable `type` URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// 400: the operation requires an idempotency key and none was sent.
    KeyMissing,
    /// 400: the key header's value is not a valid key.
    KeyInvalid,
    /// 400: a parameter or the body failed validation.
    InvalidRequest,
    /// 401: no or unknown credentials.
    Unauthenticated,
    /// 403: the authenticated caller may not perform this attempt (checked on replays too).
    Forbidden,
    /// 404: the resource (or the route) does not exist.
    NotFound,
    /// 405: the route exists, the method does not (`Allow` lists the methods).
    MethodNotAllowed,
    /// 408: the request body was not received within the server's body read timeout; nothing
    /// was claimed or executed, and the connection is closed (`Connection: close`).
    RequestTimeout,
    /// 409: another attempt with this key is still running.
    InFlight,
    /// 410: the resource this key created has been deleted.
    ResourceGone,
    /// 413: the request body exceeds the configured limit.
    PayloadTooLarge,
    /// 415: the body is not sent as the media type the operation declares (a JSON body without
    /// a JSON `Content-Type`).
    UnsupportedMediaType,
    /// 422: the key was used before with a different request.
    KeyReused,
    /// 422: the key was used before under a different fingerprint version of the operation.
    FingerprintVersionChanged,
    /// 500: an unexpected server error (details only in the logs).
    Internal,
    /// 503: the idempotency store cannot be reached; nothing was executed.
    StoreUnavailable,
    /// 503: a dependency of an operation without an idempotency key (its database) cannot be
    /// reached, or a downstream call of a handler surely did not execute.
    ServiceUnavailable,
    /// 504: the outcome of the attempt (its commit, or a downstream call of its handler) is
    /// unknown; retry with the same key.
    OutcomeUnknown,
}

impl ProblemKind {
    /// Every kind, in the order of the protocol's table.
    pub const ALL: [ProblemKind; 18] = [
        ProblemKind::KeyMissing,
        ProblemKind::KeyInvalid,
        ProblemKind::InvalidRequest,
        ProblemKind::Unauthenticated,
        ProblemKind::Forbidden,
        ProblemKind::NotFound,
        ProblemKind::MethodNotAllowed,
        ProblemKind::RequestTimeout,
        ProblemKind::InFlight,
        ProblemKind::ResourceGone,
        ProblemKind::PayloadTooLarge,
        ProblemKind::UnsupportedMediaType,
        ProblemKind::KeyReused,
        ProblemKind::FingerprintVersionChanged,
        ProblemKind::Internal,
        ProblemKind::StoreUnavailable,
        ProblemKind::ServiceUnavailable,
        ProblemKind::OutcomeUnknown,
    ];

    /// The stable code: the last segment of the `type` URI.
    pub fn code(self) -> &'static str {
        match self {
            Self::KeyMissing => "idempotency_key_missing",
            Self::KeyInvalid => "idempotency_key_invalid",
            Self::InvalidRequest => "invalid_request",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestTimeout => "request_timeout",
            Self::InFlight => "idempotency_request_in_flight",
            Self::ResourceGone => "idempotency_resource_gone",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::KeyReused => "idempotency_key_reused",
            Self::FingerprintVersionChanged => "idempotency_fingerprint_version_changed",
            Self::Internal => "internal_error",
            Self::StoreUnavailable => "idempotency_store_unavailable",
            Self::ServiceUnavailable => "service_unavailable",
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
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::InFlight => StatusCode::CONFLICT,
            Self::ResourceGone => StatusCode::GONE,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::KeyReused | Self::FingerprintVersionChanged => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::StoreUnavailable | Self::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::OutcomeUnknown => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The short, fixed, human-readable summary. It never names the key header (operations may
    /// read the key from another one); the `detail` of key problems does.
    pub fn title(self) -> &'static str {
        match self {
            Self::KeyMissing => "Idempotency key missing",
            Self::KeyInvalid => "Idempotency key invalid",
            Self::InvalidRequest => "Invalid request",
            Self::Unauthenticated => "Authentication required",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::RequestTimeout => "Request body not received in time",
            Self::InFlight => "A request with this idempotency key is in progress",
            Self::ResourceGone => "The resource created with this idempotency key was deleted",
            Self::PayloadTooLarge => "Request body too large",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::KeyReused => "Idempotency key reused with a different request",
            Self::FingerprintVersionChanged => {
                "Idempotency key used under an earlier version of this operation"
            }
            Self::Internal => "Internal server error",
            Self::StoreUnavailable => "Idempotency store unavailable",
            Self::ServiceUnavailable => "Service unavailable",
            Self::OutcomeUnknown => "Outcome unknown",
        }
    }

    /// The seconds a client should wait before retrying, where the protocol says to send it.
    pub fn retry_after(self) -> Option<u32> {
        match self {
            Self::InFlight | Self::StoreUnavailable | Self::ServiceUnavailable => Some(1),
            _ => None,
        }
    }

    /// The full `type` URI.
    pub fn type_uri(self) -> String {
        format!("{TYPE_PREFIX}{}", self.code())
    }

    /// Whether the answer closes the connection (`Connection: close`): 408, whose body was not
    /// read to its end.
    pub fn closes_connection(self) -> bool {
        self == Self::RequestTimeout
    }

    /// Whether a handler may answer with this problem. The others are the request pipeline's own
    /// answers (key problems, 401, 408, 409, 410, 413, 422, the store's 503, 504): a handler producing
    /// one would look to clients exactly like the protocol speaking, so the runtime answers an
    /// opaque 500 instead and logs the handler bug.
    pub fn handler_may_answer(self) -> bool {
        matches!(
            self,
            Self::InvalidRequest
                | Self::Forbidden
                | Self::NotFound
                | Self::Internal
                | Self::ServiceUnavailable
        )
    }
}

/// The protocol problem an answer of `status` with problem `type` is, if it is one: a kind the
/// request pipeline answers itself (not [`ProblemKind::handler_may_answer`]) whose status and
/// `type` URI both match. A handler's business problem (`"already captured"` at 409) is `None`,
/// whatever its status, and so is a type under another status than its kind's.
pub fn protocol_problem(status: u16, type_uri: &str) -> Option<ProblemKind> {
    let code = type_uri.strip_prefix(TYPE_PREFIX)?;
    ProblemKind::ALL.into_iter().find(|kind| {
        !kind.handler_may_answer() && kind.code() == code && kind.status().as_u16() == status
    })
}

/// Whether `type_uri` is one of the problem types idemgen defines (under [`TYPE_PREFIX`]): a
/// handler's business problem at a status the protocol shares (409, 422) must not use one, or a
/// client could take it for the protocol's answer.
pub fn is_idemgen_type(type_uri: &str) -> bool {
    type_uri.starts_with(TYPE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in protocol.md, "Status codes and problem types": one row per kind.
    #[test]
    fn status_codes_match_the_protocol_table() {
        let table = include_str!("../../protocol.md");
        for kind in ProblemKind::ALL {
            let row = format!("| {} | `{}` |", kind.status().as_u16(), kind.code());
            assert!(table.contains(&row), "protocol.md lacks the row {row}");
        }
        let codes: std::collections::HashSet<_> =
            ProblemKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ProblemKind::ALL.len(), "codes are unique");
    }

    #[test]
    fn protocol_answers_are_told_apart_by_type_and_status() {
        for kind in ProblemKind::ALL {
            let found = protocol_problem(kind.status().as_u16(), &kind.type_uri());
            if kind.handler_may_answer() {
                assert_eq!(found, None, "{kind:?}");
            } else {
                assert_eq!(found, Some(kind), "{kind:?}");
            }
        }
        let in_flight = ProblemKind::InFlight.type_uri();
        assert_eq!(protocol_problem(422, &in_flight), None);
        assert_eq!(
            protocol_problem(409, "https://payments.example/problems/already-captured"),
            None
        );
        assert_eq!(
            protocol_problem(
                409,
                "https://idemgen.dev/problems/idempotency_request_in_flight/x"
            ),
            None
        );
        assert!(is_idemgen_type(&in_flight));
        assert!(!is_idemgen_type(
            "https://payments.example/problems/already-captured"
        ));
    }

    #[test]
    fn handlers_cannot_speak_for_the_protocol() {
        // Every code beginning with `idempotency_` is the protocol speaking, and so is the
        // pipeline's own refusals (401, 405, 408, 413, 415).
        for kind in ProblemKind::ALL {
            assert_eq!(
                kind.handler_may_answer(),
                !kind.code().starts_with("idempotency_")
                    && !matches!(kind.status().as_u16(), 401 | 405 | 408 | 413 | 415),
                "{kind:?}"
            );
        }
    }
}

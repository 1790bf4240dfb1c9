//! The axum glue generated code calls: the `Idempotency-Key` extractor, the replay marker, and a
//! response rebuilt from a stored result.

use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::key::{IdempotencyKey, KeyError};
use crate::problem::{Problem, ProblemKind};
use crate::record::StoredResponse;

/// The default name of the key header.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The header that marks a replayed response.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Reads the key from `headers` under `name`: 400 problem when missing, repeated or invalid.
pub fn key_from_headers(headers: &HeaderMap, name: &HeaderName) -> Result<IdempotencyKey, Problem> {
    let mut values = headers.get_all(name).iter();
    let first = values
        .next()
        .ok_or_else(|| key_problem(&KeyError::Missing))?;
    if values.next().is_some() {
        return Err(key_problem(&KeyError::Repeated));
    }
    IdempotencyKey::parse_header_value(first.as_bytes()).map_err(|e| key_problem(&e))
}

fn key_problem(e: &KeyError) -> Problem {
    let kind = match e {
        KeyError::Missing => ProblemKind::KeyMissing,
        _ => ProblemKind::KeyInvalid,
    };
    Problem::new(kind).with_detail(e.to_string())
}

/// Extracts the `Idempotency-Key` header (default name), answering 400 problems.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKeyHeader(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        key_from_headers(&parts.headers, &IDEMPOTENCY_KEY).map(IdempotencyKeyHeader)
    }
}

/// Adds `Idempotent-Replayed: true` to a response.
pub fn mark_replayed(response: &mut Response) {
    response
        .headers_mut()
        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
}

/// The HTTP response for a stored result, marked as replayed.
pub fn replay_response(stored: &StoredResponse) -> Response {
    let mut response = (stored.status_code(), stored.body.clone()).into_response();
    let headers = response.headers_mut();
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    mark_replayed(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_repeated_and_invalid_keys_are_400() {
        let mut h = HeaderMap::new();
        let e = key_from_headers(&h, &IDEMPOTENCY_KEY).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyMissing);
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        assert_eq!(
            key_from_headers(&h, &IDEMPOTENCY_KEY).unwrap().as_str(),
            "a"
        );
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
        let e = key_from_headers(&h, &IDEMPOTENCY_KEY).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyInvalid);
        let mut h = HeaderMap::new();
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("has space"));
        assert_eq!(
            key_from_headers(&h, &IDEMPOTENCY_KEY)
                .unwrap_err()
                .kind()
                .status(),
            400
        );
    }

    #[test]
    fn replay_keeps_stored_headers_and_marks_it() {
        let stored = StoredResponse {
            status: 201,
            headers: vec![("location".into(), "/widgets/7".into())],
            body: b"{\"id\":7}".to_vec(),
        };
        let r = replay_response(&stored);
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["location"], "/widgets/7");
        assert_eq!(r.headers()["idempotent-replayed"], "true");
    }
}

//! The HTTP side of keys and replays: reading a key from its header (400 problems naming that
//! header), the replay marker, and a response rebuilt from a stored result.

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue};
use idemgen_protocol::{IdempotencyKey, KeyError, KeyHeader};

use crate::problem::{Problem, ProblemKind};
use crate::record::StoredResponse;

/// The default name of the key header.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The header that marks a replayed response.
pub const IDEMPOTENT_REPLAYED: HeaderName =
    HeaderName::from_static(idemgen_protocol::headers::IDEMPOTENT_REPLAYED);

/// Reads the key from `headers` under `key.name`: 400 problem, naming that header, when it is
/// missing, repeated, longer than `key.max_len` or otherwise invalid.
pub fn key_from_headers(headers: &HeaderMap, key: &KeyHeader) -> Result<IdempotencyKey, Problem> {
    let problem = |e: &KeyError| key_problem(e, key.name);
    let mut values = headers.get_all(key.name).iter();
    let first = values.next().ok_or_else(|| problem(&KeyError::Missing))?;
    if values.next().is_some() {
        return Err(problem(&KeyError::Repeated));
    }
    key.parse(first.as_bytes()).map_err(|e| problem(&e))
}

fn key_problem(e: &KeyError, header: &str) -> Problem {
    let kind = match e {
        KeyError::Missing => ProblemKind::KeyMissing,
        _ => ProblemKind::KeyInvalid,
    };
    Problem::new(kind).with_detail(e.detail(header))
}

/// Extracts the `Idempotency-Key` header (default name and limit), answering 400 problems; for
/// hand-written axum handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKeyHeader(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        key_from_headers(&parts.headers, &KeyHeader::DEFAULT).map(IdempotencyKeyHeader)
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
    // Built by hand: `(status, bytes).into_response()` would add its own
    // `Content-Type: application/octet-stream` before the stored one.
    let mut response = Response::new(axum::body::Body::from(stored.body.clone()));
    *response.status_mut() = stored.status_code();
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
        let key = KeyHeader::DEFAULT;
        let mut h = HeaderMap::new();
        let e = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyMissing);
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        assert_eq!(key_from_headers(&h, &key).unwrap().as_str(), "a");
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
        let e = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyInvalid);
        let mut h = HeaderMap::new();
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("has space"));
        assert_eq!(key_from_headers(&h, &key).unwrap_err().kind().status(), 400);
    }

    #[test]
    fn a_custom_header_is_named_in_every_key_problem() {
        let key = KeyHeader::new("PayPal-Request-Id", 108);
        let mut h = HeaderMap::new();
        let missing = key_from_headers(&h, &key).unwrap_err();
        assert!(missing.detail().unwrap().contains("PayPal-Request-Id"));
        // The default header is not this operation's key.
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("k"));
        assert_eq!(
            key_from_headers(&h, &key).unwrap_err().kind(),
            ProblemKind::KeyMissing
        );
        h.insert(
            "paypal-request-id",
            HeaderValue::from_str(&"k".repeat(109)).unwrap(),
        );
        let long = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(long.kind(), ProblemKind::KeyInvalid);
        assert_eq!(
            long.detail(),
            Some("the PayPal-Request-Id header is longer than 108 characters")
        );
        for problem in [missing, long] {
            let body = String::from_utf8(problem.body_json()).unwrap();
            assert!(!body.contains("Idempotency-Key"), "{body}");
        }
        h.insert("paypal-request-id", HeaderValue::from_static("k"));
        assert_eq!(key_from_headers(&h, &key).unwrap().as_str(), "k");
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
        let json = StoredResponse {
            headers: vec![("content-type".into(), "application/json".into())],
            ..stored
        };
        let r = replay_response(&json);
        let types: Vec<_> = r.headers().get_all("content-type").iter().collect();
        assert_eq!(types, ["application/json"], "only the stored content type");
    }
}

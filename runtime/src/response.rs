//! Responses in the forms the pipeline handles: [`EncodedResponse`] (a typed response encoded
//! once, sent and stored as the same bytes), [`StoredResponse`] (a 2xx result as a store keeps it,
//! allowlisted headers only), and the replay of a stored result, marked `Idempotent-Replayed`.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

/// A 2xx result in the form it is stored.
#[derive(Debug, Clone)]
pub struct EncodedResponse {
    /// The status (2xx).
    pub status: StatusCode,
    /// The response headers; only allowlisted ones are stored.
    pub headers: HeaderMap,
    /// The body bytes.
    pub body: Vec<u8>,
}

/// Why a response could not be encoded or rebuilt.
#[derive(Debug, thiserror::Error)]
#[error("response codec: {0}")]
pub struct CodecError(pub String);

/// A typed response in the form it is sent and stored: status, headers, body bytes. Generated
/// for an operation's success and error enums.
pub trait Encode: Sized {
    /// The response's status, headers (`Content-Type` and declared ones) and body bytes. `Err`
    /// is a handler bug (a header value that is not valid, a status outside its declared range)
    /// and is answered 500.
    fn encode(self) -> Result<EncodedResponse, CodecError>;
}

/// An operation without declared error responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDeclaredError {}

impl Encode for NoDeclaredError {
    fn encode(self) -> Result<EncodedResponse, CodecError> {
        match self {}
    }
}

impl EncodedResponse {
    /// A response with a JSON body.
    pub fn json<T: Serialize + ?Sized>(
        status: StatusCode,
        media_type: &'static str,
        body: &T,
    ) -> Result<EncodedResponse, CodecError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| CodecError(format!("encoding a response body: {e}")))?;
        Ok(Self::bytes(status, media_type, body))
    }

    /// A response with a raw body.
    pub fn bytes(
        status: StatusCode,
        media_type: &'static str,
        body: impl Into<Vec<u8>>,
    ) -> EncodedResponse {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(media_type),
        );
        EncodedResponse {
            status,
            headers,
            body: body.into(),
        }
    }

    /// A response without a body.
    pub fn empty(status: StatusCode) -> EncodedResponse {
        EncodedResponse {
            status,
            headers: HeaderMap::new(),
            body: Vec::new(),
        }
    }

    /// The same response with one more header (`name` lower case).
    pub fn header<V: std::fmt::Display + ?Sized>(
        mut self,
        name: &'static str,
        value: &V,
    ) -> Result<EncodedResponse, CodecError> {
        let value = HeaderValue::from_str(&value.to_string())
            .map_err(|_| CodecError(format!("header `{name}` has an invalid value")))?;
        self.headers.append(HeaderName::from_static(name), value);
        Ok(self)
    }

    /// The same response with one more header when `value` is present.
    pub fn optional_header<V: std::fmt::Display>(
        self,
        name: &'static str,
        value: Option<&V>,
    ) -> Result<EncodedResponse, CodecError> {
        match value {
            Some(value) => self.header(name, value),
            None => Ok(self),
        }
    }
}

pub use idemgen_protocol::headers::DEFAULT_HEADER_ALLOWLIST;

/// A 2xx result as stored and replayed: status, allowlisted headers, and body bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The status code (always 2xx).
    pub status: u16,
    /// Header names (lowercase) and values, in response order.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

/// Why a result cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreResultError {
    /// Only 2xx results are stored.
    #[error("only 2xx results are stored, got {0}")]
    NotSuccess(u16),
}

impl StoredResponse {
    /// Builds the stored form of a result, keeping only allowlisted headers: the defaults plus
    /// `declared` (the headers the operation declares). Values that are not visible text are
    /// dropped too.
    pub fn new(
        status: StatusCode,
        headers: &HeaderMap,
        body: Vec<u8>,
        declared: &[&str],
    ) -> Result<StoredResponse, StoreResultError> {
        if !status.is_success() {
            return Err(StoreResultError::NotSuccess(status.as_u16()));
        }
        let headers = headers
            .iter()
            .filter(|(name, _)| header_is_storable(name, declared))
            .filter_map(|(name, value)| {
                value
                    .to_str()
                    .ok()
                    .map(|v| (name.as_str().to_owned(), v.to_owned()))
            })
            .collect();
        Ok(StoredResponse {
            status: status.as_u16(),
            headers,
            body,
        })
    }

    /// The status as a `StatusCode`.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK)
    }

    /// The value of a stored header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Whether a header may be stored with a result (the protocol's allowlist plus `declared`).
pub fn header_is_storable(name: &HeaderName, declared: &[&str]) -> bool {
    idemgen_protocol::headers::header_is_storable(name.as_str(), declared)
}

/// The header that marks a replayed response.
pub const IDEMPOTENT_REPLAYED: HeaderName =
    HeaderName::from_static(idemgen_protocol::headers::IDEMPOTENT_REPLAYED);

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

/// An encoded result as an HTTP response.
pub(crate) fn render(encoded: EncodedResponse) -> Response {
    let mut response = Response::new(Body::from(encoded.body));
    *response.status_mut() = encoded.status;
    *response.headers_mut() = encoded.headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_responses_carry_their_headers() {
        let r = EncodedResponse::json(StatusCode::CREATED, "application/json", &[1, 2])
            .unwrap()
            .header("location", "/w/1")
            .unwrap()
            .optional_header::<u32>("x-n", None)
            .unwrap();
        assert_eq!(r.body, b"[1,2]");
        assert_eq!(r.headers["location"], "/w/1");
        assert_eq!(r.headers["content-type"], "application/json");
        assert!(r.headers.get("x-n").is_none());
        assert!(
            EncodedResponse::empty(StatusCode::OK)
                .header("x", "a\nb")
                .is_err()
        );
    }

    #[test]
    fn only_allowlisted_headers_are_stored() {
        let mut h = HeaderMap::new();
        h.insert("location", HeaderValue::from_static("/widgets/1"));
        h.insert("set-cookie", HeaderValue::from_static("session=secret"));
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("x-request-id", HeaderValue::from_static("r1"));
        h.insert("x-rate-limit", HeaderValue::from_static("9"));
        let stored = StoredResponse::new(
            StatusCode::CREATED,
            &h,
            b"{}".to_vec(),
            &["X-Rate-Limit", "Set-Cookie"],
        )
        .unwrap();
        let names: Vec<_> = stored.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"location"));
        assert!(names.contains(&"x-rate-limit"));
        assert!(
            !names.contains(&"set-cookie"),
            "Set-Cookie is never stored, even if declared"
        );
        assert!(!names.contains(&"authorization"));
        assert!(!names.contains(&"x-request-id"));
    }

    #[test]
    fn non_2xx_is_never_stored() {
        for status in [
            StatusCode::BAD_REQUEST,
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::FOUND,
        ] {
            assert!(StoredResponse::new(status, &HeaderMap::new(), vec![], &[]).is_err());
        }
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

//! What a store keeps per key: the scope, the record and its states, and the stored 2xx result.

use http::{HeaderMap, HeaderName, StatusCode};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use idemgen_protocol::{Fingerprint, IdempotencyKey};

/// Where a key lives: keys are never global (protocol.md, "Scope").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The authenticated identity that sent the request.
    pub owner: String,
    /// The operationId.
    pub operation: String,
    /// Empty unless the operation is scoped to a resource (e.g. `POST /widgets/{id}/publish`).
    pub resource_scope: String,
    /// The idempotency key.
    pub key: IdempotencyKey,
}

impl Scope {
    /// A scope for an operation that is not scoped to a resource.
    pub fn new(
        owner: impl Into<String>,
        operation: impl Into<String>,
        key: IdempotencyKey,
    ) -> Scope {
        Scope {
            owner: owner.into(),
            operation: operation.into(),
            resource_scope: String::new(),
            key,
        }
    }

    /// The same scope narrowed to one resource.
    pub fn with_resource_scope(mut self, resource: impl Into<String>) -> Scope {
        self.resource_scope = resource.into();
        self
    }
}

/// The token of one attempt's claim; completion and release are guarded by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimToken(pub Uuid);

impl ClaimToken {
    /// A fresh random token.
    pub fn generate() -> ClaimToken {
        ClaimToken(Uuid::new_v4())
    }
}

/// The lifecycle state of a record (protocol.md, "Records").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// An attempt holds the key and has not finished.
    Claimed,
    /// An attempt committed a 2xx result, which is replayed.
    Completed,
    /// The resource the key created was deleted; answers 410.
    Tombstone,
}

impl RecordState {
    /// The value stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Completed => "completed",
            Self::Tombstone => "tombstone",
        }
    }

    /// Parses the `state` column.
    pub fn parse(s: &str) -> Option<RecordState> {
        match s {
            "claimed" => Some(Self::Claimed),
            "completed" => Some(Self::Completed),
            "tombstone" => Some(Self::Tombstone),
            _ => None,
        }
    }
}

/// A record as read from a store.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its state.
    pub state: RecordState,
    /// The fingerprint of the request that claimed it (`None` for tombstones).
    pub fingerprint: Option<Fingerprint>,
    /// The fingerprint version of that request (`None` for tombstones).
    pub fingerprint_version: Option<i16>,
    /// The token of the attempt holding or having completed it.
    pub claim_token: Option<ClaimToken>,
    /// Whether a claim is older than the stale bound the reader asked about.
    pub stale: bool,
    /// The stored result of a completed record.
    pub response: Option<StoredResponse>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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
}

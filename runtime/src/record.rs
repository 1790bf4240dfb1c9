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

    /// The record key (protocol.md, "Record key"): SHA-256 of `idemgen-scope-1\n` and the owner,
    /// operation, resource scope and key, each as a 4-byte big-endian length and its UTF-8 bytes.
    /// The server computes the same bytes for the `scope_hash` column (migration 0002).
    pub fn hash(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(SCOPE_HASH_TAG);
        for part in [
            self.owner.as_str(),
            self.operation.as_str(),
            self.resource_scope.as_str(),
            self.key.as_str(),
        ] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            hasher.update(len.to_be_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.finalize().into()
    }
}

/// The version tag of the record key format; a new format is a new tag.
pub const SCOPE_HASH_TAG: &[u8] = b"idemgen-scope-1\n";

/// The advisory lock key of a record key: its first eight bytes, big-endian.
pub fn gate_key(hash: &[u8; 32]) -> i64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    i64::from_be_bytes(first)
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

    /// protocol.md, "Record key": the test vectors (also checked against the server's
    /// `idemgen_scope_hash` in the integration tests).
    const SCOPE_HASH_VECTORS: [(&str, &str, &str, &str, &str); 3] = [
        (
            "alice",
            "createWidget",
            "",
            "k1",
            "86445ffc6fff15e70ba8e25493044f00f7be4442aee5fe90f3a84c42966b1223",
        ),
        (
            "\u{fc}",
            "op",
            "",
            "k",
            "082872fe6032fa526d40d7f470969109cfb0c81a07179e2954d976a7cfbbdb71",
        ),
        (
            "tenant-7",
            "publishWidget",
            "w-42",
            "retry-1",
            "d0f2c67d981bf789ac1002d72908a1060dac81cc84f14d53b1d9c587b8cf8fd5",
        ),
    ];

    #[test]
    fn scope_hashes_match_the_protocol_vectors() {
        for (owner, operation, resource, key, hex) in SCOPE_HASH_VECTORS {
            let scope = Scope::new(owner, operation, IdempotencyKey::new(key).unwrap())
                .with_resource_scope(resource);
            assert_eq!(
                hex::encode(scope.hash()),
                hex,
                "{owner}/{operation}/{resource}/{key}"
            );
        }
        // Moving bytes between parts changes the key (the lengths frame them).
        let a = Scope::new("ab", "c", IdempotencyKey::new("k").unwrap());
        let b = Scope::new("a", "bc", IdempotencyKey::new("k").unwrap());
        assert_ne!(a.hash(), b.hash());
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

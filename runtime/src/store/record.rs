//! What a store keeps per key: the scope and its record key, the claim token, the record and its
//! states (the stored 2xx result is [`crate::response::StoredResponse`]).

use uuid::Uuid;

use idemgen_protocol::{Fingerprint, IdempotencyKey};

use crate::response::StoredResponse;

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
        idemgen_protocol::record_key(
            &self.owner,
            &self.operation,
            &self.resource_scope,
            self.key.as_str(),
        )
    }
}

pub use idemgen_protocol::SCOPE_HASH_TAG;

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

/// The id of a holder: one executor's lease (protocol.md, "Durability of claims"). Claims name
/// the holder that took them; a claim whose holder's lease has expired or ended is stale at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HolderId(pub Uuid);

impl HolderId {
    /// A fresh random holder id.
    pub fn generate() -> HolderId {
        HolderId(Uuid::new_v4())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

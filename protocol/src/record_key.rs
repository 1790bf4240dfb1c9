//! The record key (protocol.md, "Record key"): where a key's record lives, computed from its
//! scope. The runtime writes it as every record's primary key; `idemgen-records` finds a record
//! from the scope a person knows with it; the server's `idemgen_scope_hash` computes the same
//! bytes.

use sha2::{Digest, Sha256};

/// The version tag of the record key format; a new format is a new tag.
pub const SCOPE_HASH_TAG: &[u8] = b"idemgen-scope-1\n";

/// SHA-256 of [`SCOPE_HASH_TAG`] and the owner, operation, resource scope (empty unless the
/// operation is scoped to a resource) and key, each as a 4-byte big-endian length and its UTF-8
/// bytes.
pub fn record_key(owner: &str, operation: &str, resource_scope: &str, key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(SCOPE_HASH_TAG);
    for part in [owner, operation, resource_scope, key] {
        let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
        hasher.update(len.to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

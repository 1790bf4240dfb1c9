//! Derived keys `idemgen-derive-1` (frozen; protocol.md, "Derived keys").
//!
//! A handler that calls another idempotent API (a payment provider, another idemgen service)
//! passes that call a key derived from the request it is serving: the same on every attempt of
//! the same logical request, so a retry of the whole request re-sends the same downstream key and
//! gets the downstream's replay instead of a second charge; different for each step and each
//! request; independent of the process, the deployment and the strategy; and revealing nothing
//! of the client's key.
//!
//! The digest is SHA-256 of `idemgen-derive-1\n` followed by, for each of owner, operation,
//! resource scope, client key and step in that order, its UTF-8 length as a 4-byte big-endian
//! integer and its UTF-8 bytes (the framing of the record key, so that `("ab", "c")` and
//! `("a", "bc")` differ). Two spellings of it are frozen:
//! - [`DerivedKey::as_str`]: `idg1-` and the first 24 bytes of the digest in lowercase hex,
//!   53 characters of `[a-z0-9-]`, which fits every common key limit (64 characters, letters,
//!   digits and dashes) and our own key syntax;
//! - [`DerivedKey::uuid`]: the first 16 bytes as an RFC 9562 version 8 UUID, for APIs that accept
//!   only UUIDs or fewer than 53 characters.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::key::IdempotencyKey;

/// The version tag of the derived-key format; a new format is a new tag.
pub const DERIVE_TAG: &[u8] = b"idemgen-derive-1\n";

/// The prefix of [`DerivedKey::as_str`], naming the format's version.
pub const DERIVED_KEY_PREFIX: &str = "idg1-";

/// How many digest bytes [`DerivedKey::as_str`] spells (192 bits).
const KEY_BYTES: usize = 24;

/// A key for one downstream step of one logical request.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DerivedKey {
    text: String,
    digest: [u8; 32],
}

impl DerivedKey {
    /// The key of `step` (a name the handler chooses, stable across deployments: `"charge"`,
    /// `"reserve/3"`) for the request of `owner` to `operation` on `resource_scope` with the
    /// client's `key`.
    pub fn new(
        owner: &str,
        operation: &str,
        resource_scope: &str,
        key: &IdempotencyKey,
        step: &str,
    ) -> DerivedKey {
        let mut hasher = Sha256::new();
        hasher.update(DERIVE_TAG);
        for part in [owner, operation, resource_scope, key.as_str(), step] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            hasher.update(len.to_be_bytes());
            hasher.update(part.as_bytes());
        }
        let digest: [u8; 32] = hasher.finalize().into();
        let text = format!("{DERIVED_KEY_PREFIX}{}", hex::encode(&digest[..KEY_BYTES]));
        DerivedKey { text, digest }
    }

    /// `idg1-` and 48 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The key as one of ours (it always is one), for a call to another idemgen service.
    pub fn to_idempotency_key(&self) -> IdempotencyKey {
        IdempotencyKey::new(&self.text).expect("a derived key is visible ASCII under 255 bytes")
    }

    /// The digest's first 16 bytes as a version 8 UUID (RFC 9562 §5.8), lowercase and hyphenated.
    pub fn uuid(&self) -> String {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.digest[..16]);
        b[6] = (b[6] & 0x0f) | 0x80;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }
}

impl fmt::Display for DerivedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The client's key is never printed, and neither is the digest beyond the key itself.
impl fmt::Debug for DerivedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DerivedKey").field(&self.text).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// protocol.md, "Derived keys": the test vectors (computed apart, in Python's hashlib; the
    /// table in protocol.md is checked against the code below).
    const VECTORS: [(&str, &str, &str, &str, &str, &str, &str); 3] = [
        (
            "alice",
            "createOrder",
            "",
            "k1",
            "charge",
            "idg1-ff18da6ae4b1cdc330b88a307c7d05dc85a2396080f8f317",
            "ff18da6a-e4b1-8dc3-b0b8-8a307c7d05dc",
        ),
        (
            "alice",
            "createOrder",
            "",
            "k1",
            "reserve/1",
            "idg1-e92c742b8e30e5db66353859682ed836b9e1f51944349235",
            "e92c742b-8e30-85db-a635-3859682ed836",
        ),
        (
            "t\u{fc}",
            "shipOrder",
            "o-42",
            "retry-1",
            "label",
            "idg1-93b95f53e05d5b7b2e1a2863d24046b549d5c11fe03df310",
            "93b95f53-e05d-8b7b-ae1a-2863d24046b5",
        ),
    ];

    fn derive(owner: &str, op: &str, res: &str, key: &str, step: &str) -> DerivedKey {
        DerivedKey::new(owner, op, res, &IdempotencyKey::new(key).unwrap(), step)
    }

    #[test]
    fn derived_keys_match_the_protocol_vectors() {
        for (owner, op, res, key, step, text, uuid) in VECTORS {
            let derived = derive(owner, op, res, key, step);
            assert_eq!(derived.as_str(), text, "{owner}/{op}/{res}/{key}/{step}");
            assert_eq!(derived.uuid(), uuid, "{owner}/{op}/{res}/{key}/{step}");
        }
    }

    /// The first backticked text of a table cell (`` `tü` (U+00FC) `` is `tü`; `` `` `` is empty).
    fn cell(text: &str) -> &str {
        let text = text.trim();
        let start = text.find('`').expect("a backticked cell") + 1;
        let len = text[start..].find('`').expect("a closed backtick");
        &text[start..start + len]
    }

    #[test]
    fn protocol_md_s_table_is_what_the_code_derives() {
        let protocol = include_str!("../../protocol.md");
        let section = protocol
            .split("## Derived keys")
            .nth(1)
            .expect("protocol.md has a Derived keys section");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .skip_while(|l| !l.starts_with("| owner |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split('|').map(cell).collect())
            .collect();
        assert_eq!(rows.len(), VECTORS.len(), "rows of the table: {rows:?}");
        for (row, vector) in rows.iter().zip(VECTORS) {
            let [owner, op, res, key, step, text, uuid] = row[..] else {
                panic!("seven cells: {row:?}");
            };
            let derived = derive(owner, op, res, key, step);
            assert_eq!(derived.as_str(), text, "{row:?}");
            assert_eq!(derived.uuid(), uuid, "{row:?}");
            assert_eq!(
                (owner, op, res, key, step),
                (vector.0, vector.1, vector.2, vector.3, vector.4)
            );
        }
    }

    #[test]
    fn every_part_changes_the_key_and_framing_keeps_parts_apart() {
        let base = derive("alice", "createOrder", "", "k1", "charge");
        for other in [
            derive("bob", "createOrder", "", "k1", "charge"),
            derive("alice", "createRefund", "", "k1", "charge"),
            derive("alice", "createOrder", "o-1", "k1", "charge"),
            derive("alice", "createOrder", "", "k2", "charge"),
            derive("alice", "createOrder", "", "k1", "charge2"),
        ] {
            assert_ne!(base, other);
            assert_ne!(base.uuid(), other.uuid());
        }
        assert_ne!(
            derive("ab", "c", "", "k", "s"),
            derive("a", "bc", "", "k", "s")
        );
        assert_eq!(base, derive("alice", "createOrder", "", "k1", "charge"));
    }

    #[test]
    fn spellings_fit_common_limits_and_our_own_syntax() {
        let derived = derive("alice", "createOrder", "", "k1", "charge");
        let text = derived.as_str();
        assert_eq!(text.len(), 53);
        assert!(text.starts_with(DERIVED_KEY_PREFIX));
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert_eq!(derived.to_idempotency_key().as_str(), text);
        assert!(!text.contains("k1"));
        assert!(!format!("{derived:?}").contains("k1"));

        let uuid = derived.uuid();
        assert_eq!(uuid.len(), 36);
        let parts: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'), "version 8: {uuid}");
        assert!(
            matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
            "RFC 9562 variant: {uuid}"
        );
    }
}

//! The frozen request fingerprint format `hs1` (protocol.md, "Fingerprint").
//!
//! `hs1:` followed by the lowercase hex SHA-256 of the RFC 8785 (JCS) serialisation of
//! `{"input": <semantic input>, "operation": <operationId>, "version": <fingerprint version>}`.
//! The bytes are frozen: a different encoding gets a new tag, never an edit of this one, because a
//! changed fingerprint makes every stored record look like a conflict.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The tag of the only fingerprint format defined so far.
pub const HS1_TAG: &str = "hs1";

/// A request fingerprint, e.g. `hs1:9f86d0…`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

/// Why a semantic input cannot be fingerprinted.
#[derive(Debug, thiserror::Error)]
#[error("the semantic input cannot be canonicalised: {0}")]
pub struct FingerprintError(#[from] serde_json::Error);

#[derive(Serialize)]
struct Envelope<'a, T: ?Sized> {
    input: &'a T,
    operation: &'a str,
    version: i16,
}

impl Fingerprint {
    /// Computes the `hs1` fingerprint of a semantic input for an operation and version.
    pub fn hs1<T: Serialize + ?Sized>(
        operation: &str,
        version: i16,
        input: &T,
    ) -> Result<Fingerprint, FingerprintError> {
        let bytes = canonical_bytes(operation, version, input)?;
        let digest = Sha256::digest(&bytes);
        Ok(Fingerprint(format!("{HS1_TAG}:{}", hex::encode(digest))))
    }

    /// Wraps a fingerprint read back from the store.
    pub fn from_stored(text: String) -> Fingerprint {
        Fingerprint(text)
    }

    /// The fingerprint as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The exact bytes that `hs1` hashes: the JCS form of the envelope object.
pub fn canonical_bytes<T: Serialize + ?Sized>(
    operation: &str,
    version: i16,
    input: &T,
) -> Result<Vec<u8>, FingerprintError> {
    // Serialise to a Value first so that maps with non-string keys or NaN fail here, uniformly.
    let input = serde_json::to_value(input)?;
    let envelope = Envelope {
        input: &input,
        operation,
        version,
    };
    Ok(serde_json_canonicalizer::to_vec(&envelope)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[3,4]}}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "a" : { "x" : [3, 4], "y" : 2 }, "b" : 1 }"#).unwrap();
        assert_eq!(
            Fingerprint::hs1("op", 1, &a).unwrap(),
            Fingerprint::hs1("op", 1, &b).unwrap()
        );
    }

    #[test]
    fn operation_and_version_are_part_of_the_hash() {
        let input = json!({"name": "w"});
        let base = Fingerprint::hs1("createWidget", 1, &input).unwrap();
        assert_ne!(base, Fingerprint::hs1("createGadget", 1, &input).unwrap());
        assert_ne!(base, Fingerprint::hs1("createWidget", 2, &input).unwrap());
        assert!(base.as_str().starts_with("hs1:"));
        assert_eq!(base.as_str().len(), 4 + 64);
    }

    #[test]
    fn envelope_bytes_are_sorted_jcs() {
        let bytes = canonical_bytes("op", 3, &json!({"z": 1.0, "a": "é"})).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"input":{"a":"é","z":1},"operation":"op","version":3}"#
        );
    }
}

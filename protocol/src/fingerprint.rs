//! The frozen request fingerprint format `hs1` (protocol.md, "Fingerprint").
//!
//! `hs1:` followed by the lowercase hex SHA-256 of the RFC 8785 (JCS) serialisation of
//! `{"input": <semantic input>, "operation": <operationId>, "version": <fingerprint version>}`.
//! The bytes are frozen: a different encoding gets a new tag, never an edit of this one, because a
//! changed fingerprint makes every stored record look like a conflict.

use serde::Serialize;
use serde::ser::{self, Error as _};
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
    // Refuse hostile nesting before anything walks the input recursively (a stack overflow
    // aborts the whole process).
    input.serialize(DepthProbe { depth: 0 })?;
    // Serialise to a Value first so that maps with non-string keys or NaN fail here, uniformly.
    let input = serde_json::to_value(input)?;
    let envelope = Envelope {
        input: &input,
        operation,
        version,
    };
    Ok(serde_json_canonicalizer::to_vec(&envelope)?)
}

/// The deepest nesting of arrays and objects a semantic input may have. JSON parsed by serde_json
/// is at most 128 levels deep, so parsed input always fits; anything deeper is refused before it
/// is walked recursively.
pub const MAX_INPUT_DEPTH: usize = 200;

/// A serializer that only measures nesting, and stops descending past [`MAX_INPUT_DEPTH`].
#[derive(Clone, Copy)]
struct DepthProbe {
    depth: usize,
}

impl DepthProbe {
    fn nested(self) -> Result<DepthProbe, serde_json::Error> {
        if self.depth >= MAX_INPUT_DEPTH {
            return Err(serde_json::Error::custom(format!(
                "the input is nested deeper than {MAX_INPUT_DEPTH} levels"
            )));
        }
        Ok(DepthProbe {
            depth: self.depth + 1,
        })
    }
}

macro_rules! probe_scalars {
    ($($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method(self, _: $ty) -> Result<(), serde_json::Error> {
            Ok(())
        }
    )*};
}

impl ser::Serializer for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = DepthProbe;
    type SerializeTuple = DepthProbe;
    type SerializeTupleStruct = DepthProbe;
    type SerializeTupleVariant = DepthProbe;
    type SerializeMap = DepthProbe;
    type SerializeStruct = DepthProbe;
    type SerializeStructVariant = DepthProbe;

    probe_scalars!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_f32: f32,
        serialize_f64: f64, serialize_char: char, serialize_str: &str, serialize_bytes: &[u8],
        serialize_unit_struct: &'static str,
    );

    fn serialize_none(self) -> Result<(), serde_json::Error> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), serde_json::Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), serde_json::Error> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), serde_json::Error> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), serde_json::Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        v: &T,
    ) -> Result<(), serde_json::Error> {
        v.serialize(self.nested()?)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<DepthProbe, serde_json::Error> {
        self.nested()
    }
    fn serialize_tuple(self, _: usize) -> Result<DepthProbe, serde_json::Error> {
        self.nested()
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<DepthProbe, serde_json::Error> {
        self.nested()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<DepthProbe, serde_json::Error> {
        self.nested()?.nested()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<DepthProbe, serde_json::Error> {
        self.nested()
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<DepthProbe, serde_json::Error> {
        self.nested()
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<DepthProbe, serde_json::Error> {
        self.nested()?.nested()
    }
}

impl ser::SerializeSeq for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeTuple for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeMap for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Self::Error> {
        k.serialize(*self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeStruct for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for DepthProbe {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Self::Error> {
        v.serialize(*self)
    }
    fn end(self) -> Result<(), Self::Error> {
        Ok(())
    }
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

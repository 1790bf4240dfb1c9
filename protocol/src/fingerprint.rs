//! The frozen request fingerprint formats `hs2` and `hs1` (protocol.md, "Fingerprint").
//!
//! Both are a tag, `:`, and the lowercase hex SHA-256 of the canonical JSON of
//! `{"input": <semantic input>, "operation": <operationId>, "version": <fingerprint version>}`.
//! `hs1` is RFC 8785 (JCS), where every number is a double (`9007199254740993` hashes as
//! `9007199254740992`); `hs2`, what new records get, is the same except that integers keep their
//! exact decimal digits. The bytes are frozen: a different encoding gets a new tag, never an edit
//! of an existing one, because a changed fingerprint makes every stored record look like a
//! conflict. [`CanonicalInput`] converts a semantic input once, so that a caller can compute
//! `hs2` and, only when it meets a record written in `hs1`, `hs1` as well.

use serde::Serialize;
use serde::ser::{self, Error as _};
use sha2::{Digest, Sha256};

/// The tag of the first fingerprint format: JCS, integers as doubles. Records written by earlier
/// releases carry it and keep verifying in it.
pub const HS1_TAG: &str = "hs1";

/// The tag of the current fingerprint format: JCS with exact integers, for every new record.
pub const HS2_TAG: &str = "hs2";

/// A request fingerprint, e.g. `hs2:9f86d0…`.
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

    /// Computes the `hs2` fingerprint of a semantic input for an operation and version: what the
    /// runtime stores with every new record.
    pub fn hs2<T: Serialize + ?Sized>(
        operation: &str,
        version: i16,
        input: &T,
    ) -> Result<Fingerprint, FingerprintError> {
        Ok(CanonicalInput::new(input)?.hs2(operation, version))
    }

    /// The format's tag (`hs1`, `hs2`): the text before the first `:`.
    pub fn format(&self) -> &str {
        self.0.split_once(':').map_or(&self.0, |(tag, _)| tag)
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
    input.serialize(DepthProbe {
        depth: 0,
        finite: false,
    })?;
    // Serialise to a Value first so that maps with non-string keys or NaN fail here, uniformly.
    let input = serde_json::to_value(input)?;
    let envelope = Envelope {
        input: &input,
        operation,
        version,
    };
    Ok(serde_json_canonicalizer::to_vec(&envelope)?)
}

/// The exact bytes that `hs2` hashes: the envelope object in JCS form, integers as their exact
/// decimal digits.
pub fn canonical_bytes_hs2<T: Serialize + ?Sized>(
    operation: &str,
    version: i16,
    input: &T,
) -> Result<Vec<u8>, FingerprintError> {
    Ok(CanonicalInput::new(input)?.hs2_bytes(operation, version))
}

/// A semantic input checked and converted to JSON once, from which either format is computed.
///
/// The checks are `hs1`'s: nesting past [`MAX_INPUT_DEPTH`] and anything `serde_json::to_value`
/// refuses (map keys that are not strings or numbers, integers outside the 64-bit range) fail
/// here; a non-finite float, which `to_value` would turn into `null`, is refused too.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalInput(serde_json::Value);

impl CanonicalInput {
    /// Checks `input` and converts it.
    pub fn new<T: Serialize + ?Sized>(input: &T) -> Result<CanonicalInput, FingerprintError> {
        input.serialize(DepthProbe {
            depth: 0,
            finite: true,
        })?;
        Ok(CanonicalInput(serde_json::to_value(input)?))
    }

    /// The `hs2` fingerprint.
    pub fn hs2(&self, operation: &str, version: i16) -> Fingerprint {
        let digest = Sha256::digest(self.hs2_bytes(operation, version));
        Fingerprint(format!("{HS2_TAG}:{}", hex::encode(digest)))
    }

    /// The `hs1` fingerprint, the same as [`Fingerprint::hs1`] of the original input (both hash
    /// the JCS form of its `to_value`).
    pub fn hs1(&self, operation: &str, version: i16) -> Result<Fingerprint, FingerprintError> {
        let envelope = Envelope {
            input: &self.0,
            operation,
            version,
        };
        let digest = Sha256::digest(serde_json_canonicalizer::to_vec(&envelope)?);
        Ok(Fingerprint(format!("{HS1_TAG}:{}", hex::encode(digest))))
    }

    /// The bytes `hs2` hashes.
    pub fn hs2_bytes(&self, operation: &str, version: i16) -> Vec<u8> {
        // The envelope's keys are already in order: "input" < "operation" < "version".
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"input\":");
        write_hs2(&self.0, &mut out);
        out.extend_from_slice(b",\"operation\":");
        write_string(operation, &mut out);
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(version.to_string().as_bytes());
        out.push(b'}');
        out
    }

    /// The JSON value.
    pub fn value(&self) -> &serde_json::Value {
        &self.0
    }
}

/// Writes `value` in `hs2`'s canonical form: JCS (members sorted by UTF-16 code units, minimal
/// escapes, doubles in ECMAScript form) except that an integer held as `i64` or `u64` is written
/// as its exact digits. The walk is iterative, so depth costs no stack.
fn write_hs2(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    enum Step<'a> {
        Value(&'a Value),
        Raw(&'static [u8]),
        Key(&'a str),
    }
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        let value = match step {
            Step::Raw(bytes) => {
                out.extend_from_slice(bytes);
                continue;
            }
            Step::Key(key) => {
                write_string(key, out);
                out.push(b':');
                continue;
            }
            Step::Value(value) => value,
        };
        match value {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Number(n) => write_number(n, out),
            Value::String(s) => write_string(s, out),
            Value::Array(items) => {
                out.push(b'[');
                stack.push(Step::Raw(b"]"));
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push(Step::Value(item));
                    if i > 0 {
                        stack.push(Step::Raw(b","));
                    }
                }
            }
            Value::Object(members) => {
                out.push(b'{');
                stack.push(Step::Raw(b"}"));
                let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
                sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                for (i, (key, item)) in sorted.into_iter().enumerate().rev() {
                    stack.push(Step::Value(item));
                    stack.push(Step::Key(key));
                    if i > 0 {
                        stack.push(Step::Raw(b","));
                    }
                }
            }
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_u64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        // A double, in JCS's ECMAScript form (`100` for `100.0`, `1e+21`), as `hs1` writes it.
        // A `Number` never holds a non-finite float, so this cannot fail.
        serde_json_canonicalizer::to_writer(&f, out).expect("a finite double is canonical");
    }
}

/// Strings as serde_json writes them, which is JCS's minimal escaping: `\"`, `\\`, the short
/// forms `\b \f \n \r \t`, other controls as lowercase `\u00xx`, everything else verbatim.
fn write_string(s: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, s).expect("writing a string to memory cannot fail");
}

/// The deepest nesting of arrays and objects a semantic input may have. JSON parsed by serde_json
/// is at most 128 levels deep, so parsed input always fits; anything deeper is refused before it
/// is walked recursively.
pub const MAX_INPUT_DEPTH: usize = 200;

/// A serializer that only measures nesting, and stops descending past [`MAX_INPUT_DEPTH`]; with
/// `finite` (`hs2`) it refuses non-finite floats too.
#[derive(Clone, Copy)]
struct DepthProbe {
    depth: usize,
    finite: bool,
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
            finite: self.finite,
        })
    }

    fn float(self, finite: bool) -> Result<(), serde_json::Error> {
        if self.finite && !finite {
            return Err(serde_json::Error::custom(
                "the input holds a float that is not finite (NaN or infinite)",
            ));
        }
        Ok(())
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
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
        serialize_str: &str, serialize_bytes: &[u8], serialize_unit_struct: &'static str,
    );

    fn serialize_f32(self, v: f32) -> Result<(), serde_json::Error> {
        self.float(v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<(), serde_json::Error> {
        self.float(v.is_finite())
    }

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

    fn hs2_text(input: &serde_json::Value) -> String {
        String::from_utf8(canonical_bytes_hs2("op", 3, input).unwrap()).unwrap()
    }

    #[test]
    fn hs2_keeps_integers_exact_where_hs1_rounds_them() {
        let a = json!({"account": 9_007_199_254_740_993_u64});
        let b = json!({"account": 9_007_199_254_740_992_u64});
        assert_eq!(
            Fingerprint::hs1("op", 1, &a).unwrap(),
            Fingerprint::hs1("op", 1, &b).unwrap()
        );
        assert_ne!(
            Fingerprint::hs2("op", 1, &a).unwrap(),
            Fingerprint::hs2("op", 1, &b).unwrap()
        );
        assert_eq!(
            hs2_text(&json!({"max": u64::MAX, "min": i64::MIN, "n": -9_344_384_387_829_953_i64})),
            r#"{"input":{"max":18446744073709551615,"min":-9223372036854775808,"n":-9344384387829953},"operation":"op","version":3}"#
        );
    }

    #[test]
    fn hs2_integers_of_every_serde_width_are_exact() {
        #[derive(Serialize)]
        struct Wide {
            a: i128,
            b: u128,
            c: i8,
            d: u32,
        }
        let wide = Wide {
            a: -9_007_199_254_740_993,
            b: u128::from(u64::MAX),
            c: -1,
            d: 7,
        };
        assert_eq!(
            String::from_utf8(canonical_bytes_hs2("op", 1, &wide).unwrap()).unwrap(),
            r#"{"input":{"a":-9007199254740993,"b":18446744073709551615,"c":-1,"d":7},"operation":"op","version":1}"#
        );
        // Past the 64-bit range serde_json has no integer to hold it: refused, never rounded.
        let too_wide = Wide {
            a: i128::MIN,
            b: 0,
            c: 0,
            d: 0,
        };
        assert!(Fingerprint::hs2("op", 1, &too_wide).is_err());
    }

    #[test]
    fn hs2_writes_whole_floats_like_integers_and_other_floats_like_jcs() {
        // The same JSON number, whichever way it is held.
        assert_eq!(
            Fingerprint::hs2("op", 1, &json!({"n": 100})).unwrap(),
            Fingerprint::hs2("op", 1, &json!({"n": 100.0})).unwrap()
        );
        let floats = json!([
            1e21,
            0.1,
            1.5,
            -2.0,
            1e-7,
            100.0,
            123_456_789_012.5,
            -0.0,
            5e-324
        ]);
        let jcs = String::from_utf8(serde_json_canonicalizer::to_vec(&floats).unwrap()).unwrap();
        let mut out = Vec::new();
        write_hs2(&floats, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), jcs);
        assert_eq!(jcs, "[1e+21,0.1,1.5,-2,1e-7,100,123456789012.5,0,5e-324]");
    }

    #[test]
    fn hs2_strings_and_key_order_are_jcs() {
        // Every ASCII character and some beyond, as values and as keys: JCS (the canonicalizer
        // crate) and hs2 agree wherever no integer is involved.
        let mut members = serde_json::Map::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0xfb01, 0x20ac, 0x1f600, 0xfffd]) {
            let c = char::from_u32(c).unwrap();
            members.insert(format!("k{c}"), json!(format!("v{c}\u{7f}")));
        }
        members.insert(
            "nested".into(),
            json!({"b": [true, null, {"é": "x", "e": "y"}]}),
        );
        let value = serde_json::Value::Object(members);
        let jcs = String::from_utf8(serde_json_canonicalizer::to_vec(&value).unwrap()).unwrap();
        let mut out = Vec::new();
        write_hs2(&value, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), jcs);
        // UTF-16 order: U+FB01 sorts after U+1F600 (a surrogate pair, 0xD83D…).
        assert_eq!(
            hs2_text(&json!({"\u{fb01}": 1, "\u{1f600}": 2, "\u{20ac}": 3, "a": 4})),
            "{\"input\":{\"a\":4,\"\u{20ac}\":3,\"\u{1f600}\":2,\"\u{fb01}\":1},\"operation\":\"op\",\"version\":3}"
        );
    }

    #[test]
    fn canonical_input_gives_both_formats() {
        let input = json!({"z": [1, 2.5, "x"], "a": {"id": 9_007_199_254_740_993_u64}});
        let canonical = CanonicalInput::new(&input).unwrap();
        assert_eq!(
            canonical.hs1("op", 2).unwrap(),
            Fingerprint::hs1("op", 2, &input).unwrap()
        );
        assert_eq!(
            canonical.hs2("op", 2),
            Fingerprint::hs2("op", 2, &input).unwrap()
        );
        assert_eq!(canonical.hs2("op", 2).format(), HS2_TAG);
        assert_eq!(canonical.hs1("op", 2).unwrap().format(), HS1_TAG);
        assert_eq!(Fingerprint::from_stored("legacy".into()).format(), "legacy");
    }

    #[test]
    fn hs2_refuses_what_cannot_be_canonical() {
        let mut deep = json!(1);
        for _ in 0..=MAX_INPUT_DEPTH {
            deep = json!([deep]);
        }
        assert!(Fingerprint::hs2("op", 1, &deep).is_err());
        let mut not_deep = json!(1);
        for _ in 0..MAX_INPUT_DEPTH {
            not_deep = json!([not_deep]);
        }
        assert!(Fingerprint::hs2("op", 1, &not_deep).is_ok());
        let keyed: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(Fingerprint::hs2("op", 1, &keyed).is_err());
        assert!(Fingerprint::hs1("op", 1, &keyed).is_err());
        #[derive(Serialize)]
        struct F {
            x: f64,
        }
        assert!(Fingerprint::hs2("op", 1, &F { x: f64::NAN }).is_err());
        assert!(Fingerprint::hs2("op", 1, &F { x: f64::INFINITY }).is_err());
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

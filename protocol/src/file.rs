//! A file part of a `multipart/form-data` request body ([`FilePart`]), and how it enters a
//! semantic input (protocol.md, "File parts"): by the SHA-256 digest of its bytes, its filename
//! and its content type, never its bytes.
//!
//! The same type on both sides: the server (`idemgen-runtime`) decodes a part into it, the client
//! (`idemgen-client`) encodes it as a part; both re-export it as `FilePart`.

use bytes::Bytes;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use sha2::{Digest, Sha256};

/// The name a multipart decoder recognises in `deserialize_struct` to hand a [`FilePart`] its
/// part (no derived type can have it: it is not a Rust identifier).
#[doc(hidden)]
pub const FILE_PART_STRUCT: &str = "$idemgen::FilePart";

/// The fields a multipart decoder hands a [`FilePart`], in this order.
#[doc(hidden)]
pub const FILE_PART_FIELDS: &[&str] = &["filename", "content_type", "bytes"];

/// One file part of a `multipart/form-data` body: its bytes as sent, and the `filename` and
/// `Content-Type` the part declared.
///
/// Serialised (into a semantic input, hence a fingerprint) as
/// `{"sha256": <lowercase hex digest of the bytes>, "filename": …, "content_type": …}`, the
/// last two only when the part had them: the same file under another name or type is another
/// request, and the bytes themselves never reach a fingerprint or a log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilePart {
    /// The part's `filename` (`Content-Disposition: form-data; name="…"; filename="…"`).
    pub filename: Option<String>,
    /// The part's `Content-Type`, as sent (parameters included).
    pub content_type: Option<String>,
    /// The part's body.
    pub bytes: Bytes,
}

impl FilePart {
    /// A file of `bytes` without a filename or content type.
    pub fn new(bytes: impl Into<Bytes>) -> FilePart {
        FilePart {
            filename: None,
            content_type: None,
            bytes: bytes.into(),
        }
    }

    /// The same file named `filename`.
    pub fn with_filename(mut self, filename: impl Into<String>) -> FilePart {
        self.filename = Some(filename.into());
        self
    }

    /// The same file sent as `content_type`.
    pub fn with_content_type(mut self, content_type: impl Into<String>) -> FilePart {
        self.content_type = Some(content_type.into());
        self
    }

    /// The lowercase hex SHA-256 digest of the bytes: what a fingerprint holds of them.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Serialize for FilePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len =
            1 + usize::from(self.filename.is_some()) + usize::from(self.content_type.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("sha256", &self.sha256())?;
        if let Some(filename) = &self.filename {
            map.serialize_entry("filename", filename)?;
        }
        if let Some(content_type) = &self.content_type {
            map.serialize_entry("content_type", content_type)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for FilePart {
    /// Read from a multipart decoder (which recognises [`FILE_PART_STRUCT`]) or any map of
    /// `filename`, `content_type` and `bytes` (bytes, or a sequence of byte values).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FilePart, D::Error> {
        deserializer.deserialize_struct(FILE_PART_STRUCT, FILE_PART_FIELDS, FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = FilePart;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a file part")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FilePart, A::Error> {
        let mut file = FilePart::default();
        let mut bytes = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "filename" => file.filename = map.next_value()?,
                "content_type" => file.content_type = map.next_value()?,
                "bytes" => bytes = Some(map.next_value::<ByteBuf>()?.0),
                other => return Err(de::Error::unknown_field(other, FILE_PART_FIELDS)),
            }
        }
        file.bytes = bytes.ok_or_else(|| de::Error::missing_field("bytes"))?;
        Ok(file)
    }
}

/// Bytes from `visit_bytes`, `visit_byte_buf` or a sequence of `u8`.
struct ByteBuf(Bytes);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteBuf, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(Bytes::copy_from_slice(v)))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(Bytes::from(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ByteBuf, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(ByteBuf(Bytes::from(out)))
            }
        }
        deserializer.deserialize_byte_buf(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Fingerprint;

    /// protocol.md's file-part vector: the input it names, built from a `FilePart`.
    #[test]
    fn a_file_part_enters_the_input_as_its_digest_name_and_type() {
        let file = FilePart::new(&b"hello\n"[..])
            .with_filename("hello.txt")
            .with_content_type("text/plain");
        assert_eq!(
            serde_json::to_value(&file).unwrap(),
            serde_json::json!({
                "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
                "filename": "hello.txt",
                "content_type": "text/plain",
            })
        );
        let input = serde_json::json!({"body": {"document": file, "title": "Q3"}});
        assert_eq!(
            Fingerprint::hs2("uploadDocument", 1, &input)
                .unwrap()
                .as_str(),
            "hs2:6c09ba1751929513dfef558e77a8f558c4cd8eb1778b541ac69900f0ac7fc4e2"
        );
        // Absent name and type are left out, not null.
        let bare = FilePart::new(Bytes::new());
        assert_eq!(
            serde_json::to_value(&bare).unwrap(),
            serde_json::json!({"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"})
        );
    }

    #[test]
    fn a_file_part_reads_back_from_a_map_of_its_fields() {
        let file: FilePart = serde_json::from_value(serde_json::json!({
            "filename": "a.bin", "content_type": null, "bytes": [1, 2, 3]
        }))
        .unwrap();
        assert_eq!(file, FilePart::new(vec![1u8, 2, 3]).with_filename("a.bin"));
        let missing = serde_json::from_value::<FilePart>(serde_json::json!({"filename": "a"}));
        assert!(missing.unwrap_err().to_string().contains("bytes"));
    }
}

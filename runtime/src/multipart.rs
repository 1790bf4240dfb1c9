//! `multipart/form-data` request bodies (RFC 7578 over RFC 2046's framing), read from the body
//! the pipeline has already buffered under its limit: [`parse`] splits it into named parts, and
//! [`decode`] reads the parts into the operation's generated body type through serde, the way a
//! form body is read: text parts as the field's scalar (a string, number, boolean or string
//! enum), repeated parts as an array, a [`FilePart`] field as the part's bytes with its filename
//! and content type, an object field (or a part the spec's Encoding Object declares JSON) as
//! JSON. Every failure is a message naming the part (`body.<name>: …`) for a 400.

use bytes::Bytes;
use idemgen_protocol::file::{FILE_PART_FIELDS, FILE_PART_STRUCT};
use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};

/// The most parts a body may have (a bound on work per request beside the body size).
const MAX_PARTS: usize = 10_000;
/// The most bytes of one part's header section.
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// One part: its name, the filename and content type it declares, and its body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Part {
    pub(crate) name: String,
    pub(crate) filename: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Bytes,
}

/// The `boundary` parameter of a `multipart/form-data` content type (RFC 2046: 1–70 characters).
/// Given twice it is refused: a proxy that reads the other one would see other parts than the
/// server (RFC 2045 allows each parameter once).
pub(crate) fn boundary(content_type: &str) -> Result<String, String> {
    let (_, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    let mut boundaries = parameters(params)?
        .into_iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v);
    let boundary = boundaries
        .next()
        .ok_or("the multipart Content-Type has no `boundary` parameter")?;
    if boundaries.next().is_some() {
        return Err("the multipart Content-Type gives `boundary` more than once".to_string());
    }
    if boundary.is_empty() || boundary.len() > 70 || !boundary.bytes().all(is_bchar) {
        return Err(
            "the multipart boundary must be 1 to 70 characters of RFC 2046's set".to_string(),
        );
    }
    Ok(boundary)
}

fn is_bchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&b)
}

/// The parts of `body`, delimited by `boundary`, in order. A preamble before the first delimiter
/// and an epilogue after the last are ignored, as RFC 2046 says.
pub(crate) fn parse(body: &Bytes, boundary: &str) -> Result<Vec<Part>, String> {
    let dash = format!("--{boundary}");
    let delimiter = format!("\r\n--{boundary}");
    let bytes: &[u8] = body;
    let mut at = if bytes.starts_with(dash.as_bytes()) {
        0
    } else {
        memchr::memmem::find(bytes, delimiter.as_bytes())
            .map(|i| i + 2)
            .ok_or("the body has no multipart delimiter (`--` and the boundary)")?
    };
    let mut parts = Vec::new();
    loop {
        let mut next = at + dash.len();
        if bytes[next..].starts_with(b"--") {
            return Ok(parts);
        }
        while matches!(bytes.get(next), Some(b' ' | b'\t')) {
            next += 1;
        }
        if !bytes[next..].starts_with(b"\r\n") {
            return Err("a multipart delimiter is not followed by a line break".to_string());
        }
        let start = next + 2;
        let Some(len) = memchr::memmem::find(&bytes[start..], delimiter.as_bytes()) else {
            return Err("the body ends inside a part: no closing multipart delimiter".to_string());
        };
        if parts.len() == MAX_PARTS {
            return Err(format!("the body has more than {MAX_PARTS} parts"));
        }
        parts.push(part(body.slice(start..start + len), parts.len())?);
        at = start + len + 2;
    }
}

/// One part from its bytes (headers, an empty line, the body).
fn part(raw: Bytes, index: usize) -> Result<Part, String> {
    let (head, body) = if raw.starts_with(b"\r\n") {
        (&[][..], raw.slice(2..))
    } else if let Some(end) = memchr::memmem::find(&raw, b"\r\n\r\n") {
        (&raw[..end], raw.slice(end + 4..))
    } else if raw.ends_with(b"\r\n") {
        // Headers, the empty line and an empty body: the line break before the delimiter
        // belongs to the delimiter.
        (&raw[..raw.len() - 2], Bytes::new())
    } else {
        return Err(format!(
            "part {} has no empty line after its headers",
            index + 1
        ));
    };
    if head.len() > MAX_HEADER_BYTES {
        return Err(format!(
            "part {} has more than {MAX_HEADER_BYTES} bytes of headers",
            index + 1
        ));
    }
    let head = std::str::from_utf8(head)
        .map_err(|_| format!("the headers of part {} are not UTF-8", index + 1))?;
    let (mut disposition, mut content_type, mut encoding) = (None, None, None);
    for line in head.split("\r\n") {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("part {} has a malformed header line", index + 1));
        };
        if name.is_empty()
            || name.starts_with([' ', '\t'])
            || value.chars().any(|c| c.is_control() && c != '\t')
        {
            return Err(format!("part {} has a malformed header line", index + 1));
        }
        let value = value.trim().to_string();
        let slot = if name.eq_ignore_ascii_case("content-disposition") {
            &mut disposition
        } else if name.eq_ignore_ascii_case("content-type") {
            &mut content_type
        } else if name.eq_ignore_ascii_case("content-transfer-encoding") {
            &mut encoding
        } else {
            continue;
        };
        if slot.replace(value).is_some() {
            return Err(format!("part {} repeats the header `{name}`", index + 1));
        }
    }
    let disposition = disposition.ok_or_else(|| {
        format!(
            "part {} has no `Content-Disposition: form-data; name=\"…\"`",
            index + 1
        )
    })?;
    let (kind, params) = disposition.split_once(';').unwrap_or((&disposition, ""));
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return Err(format!(
            "part {} is not `Content-Disposition: form-data`",
            index + 1
        ));
    }
    let params = parameters(params).map_err(|e| format!("part {}: {e}", index + 1))?;
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
    };
    let name = param("name").ok_or_else(|| {
        format!(
            "part {} has no `name` in its Content-Disposition",
            index + 1
        )
    })?;
    if let Some(encoding) = encoding
        && !["7bit", "8bit", "binary"]
            .iter()
            .any(|e| encoding.eq_ignore_ascii_case(e))
    {
        return Err(format!(
            "body.{name}: Content-Transfer-Encoding `{encoding}` is not supported (RFC 7578 §4.7)"
        ));
    }
    Ok(Part {
        name,
        filename: param("filename"),
        content_type,
        body,
    })
}

/// `; key=value; key="quoted \" value"` → pairs, keys lower-cased.
fn parameters(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(' ' | '\t' | ';')) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ';' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!("the parameter `{}` has no value", key.trim()));
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    // `\"` and `\\` are escapes (RFC 822 quoted pairs, as our client and curl
                    // write them); any other backslash is the character itself, as browsers send
                    // a Windows path (RFC 7578 §4.2: they percent-encode `"` instead).
                    Some('\\') => match chars.peek() {
                        Some(&c @ ('"' | '\\')) => {
                            chars.next();
                            value.push(c);
                        }
                        Some(_) => value.push('\\'),
                        None => return Err("an unterminated quoted parameter".to_string()),
                    },
                    Some(c) => value.push(c),
                    None => return Err("an unterminated quoted parameter".to_string()),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ';' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim().to_string();
        }
        out.push((key.trim().to_ascii_lowercase(), value));
    }
}

/// Reads `parts` into `T`: fields by part name (in any order), parts named in `json` (and any
/// part read as an object) parsed as JSON. Unknown parts are refused when `T` refuses unknown
/// fields; a scalar or file given twice is refused.
/// `nul` finds a NUL character in a JSON part (the path below the part, `body.…`), which no text
/// column can store.
pub(crate) fn decode<T: DeserializeOwned>(
    parts: &[Part],
    json: &[&str],
    nul: &dyn Fn(&[u8]) -> Option<String>,
) -> Result<T, String> {
    // Parts grouped by name in the order names first appear (up to `MAX_PARTS` names: indexed,
    // not searched).
    let mut groups: Vec<(&str, Vec<&Part>)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for part in parts {
        match index.get(part.name.as_str()) {
            Some(&at) => groups[at].1.push(part),
            None => {
                index.insert(&part.name, groups.len());
                groups.push((&part.name, vec![part]));
            }
        }
    }
    let access = Parts {
        groups: groups.into_iter(),
        value: None,
        json,
        nul,
    };
    T::deserialize(Body(access)).map_err(|e| e.0)
}

/// A decoding failure: its message, naming the part.
#[derive(Debug)]
struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<M: std::fmt::Display>(msg: M) -> Error {
        Error(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Error {
        Error(format!("body.{field}: the part is required"))
    }

    fn unknown_field(field: &str, _expected: &'static [&'static str]) -> Error {
        Error(format!("body.{field}: is not a part of this request"))
    }

    fn duplicate_field(field: &'static str) -> Error {
        Error(format!("body.{field}: is given more than once"))
    }
}

/// The whole body: a map of part names.
struct Body<'p>(Parts<'p>);

impl<'de, 'p> de::Deserializer<'de> for Body<'p> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(self.0)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

struct Parts<'p> {
    groups: std::vec::IntoIter<(&'p str, Vec<&'p Part>)>,
    value: Option<(&'p str, Vec<&'p Part>)>,
    json: &'p [&'p str],
    nul: &'p dyn Fn(&[u8]) -> Option<String>,
}

impl<'de, 'p> MapAccess<'de> for Parts<'p> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((name, parts)) = self.groups.next() else {
            return Ok(None);
        };
        self.value = Some((name, parts));
        let key: StrDeserializer<'_, Error> = name.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (name, parts) = self
            .value
            .take()
            .ok_or_else(|| Error("a part value without its name".to_string()))?;
        let json = self.json.contains(&name);
        let nul = self.nul;
        seed.deserialize(Value {
            name,
            parts,
            json,
            nul,
        })
        .map_err(|e| name_the_part(name, e))
    }
}

/// Prefixes `body.<name>: ` unless the message names a part already.
fn name_the_part(name: &str, e: Error) -> Error {
    if e.0.starts_with("body.") {
        e
    } else {
        Error(format!("body.{name}: {}", e.0))
    }
}

/// The parts of one name, read as the field's type asks.
struct Value<'p> {
    name: &'p str,
    parts: Vec<&'p Part>,
    json: bool,
    nul: &'p dyn Fn(&[u8]) -> Option<String>,
}

impl<'p> Value<'p> {
    fn single(&self) -> Result<&'p Part, Error> {
        match self.parts.as_slice() {
            [one] => Ok(one),
            _ => Err(Error(format!(
                "body.{}: is given more than once",
                self.name
            ))),
        }
    }

    fn text(&self) -> Result<&'p str, Error> {
        let part = self.single()?;
        let text =
            std::str::from_utf8(&part.body).map_err(|_| Error("must be UTF-8 text".to_string()))?;
        if text.contains('\0') {
            return Err(Error("must not contain the NUL character".to_string()));
        }
        Ok(text)
    }

    fn json<'de, V: Visitor<'de>>(&self, visitor: V) -> Result<V::Value, Error> {
        let part = self.single()?;
        // Through a `serde_json::Value`: the part's bytes do not live as long as `'de`.
        let value: serde_json::Value =
            serde_json::from_slice(&part.body).map_err(|e| Error(format!("invalid JSON: {e}")))?;
        if let Some(path) = (self.nul)(&part.body) {
            let below = path.strip_prefix("body").unwrap_or(&path);
            return Err(Error(format!(
                "body.{}{below}: must not contain the NUL character (\\u0000)",
                self.name
            )));
        }
        de::Deserializer::deserialize_any(value, visitor).map_err(|e| Error(e.to_string()))
    }

    fn parse<T: std::str::FromStr>(&self, what: &str) -> Result<T, Error> {
        let text = self.text()?;
        text.trim()
            .parse()
            .map_err(|_| Error(format!("`{text}` is not {what}")))
    }
}

macro_rules! parse_number {
    ($($method:ident $ty:ty => $visit:ident, $what:literal;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                if self.json {
                    return self.json(visitor);
                }
                visitor.$visit(self.parse::<$ty>($what)?)
            }
        )*
    };
}

impl<'de, 'p> IntoDeserializer<'de, Error> for Value<'p> {
    type Deserializer = Value<'p>;

    fn into_deserializer(self) -> Value<'p> {
        self
    }
}

impl<'de, 'p> de::Deserializer<'de> for Value<'p> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.json {
            return self.json(visitor);
        }
        if self.parts.len() > 1 {
            return self.deserialize_seq(visitor);
        }
        visitor.visit_str(self.text()?)
    }

    parse_number! {
        deserialize_i8 i8 => visit_i8, "an integer";
        deserialize_i16 i16 => visit_i16, "an integer";
        deserialize_i32 i32 => visit_i32, "a 32-bit integer";
        deserialize_i64 i64 => visit_i64, "a 64-bit integer";
        deserialize_u8 u8 => visit_u8, "an integer";
        deserialize_u16 u16 => visit_u16, "an integer";
        deserialize_u32 u32 => visit_u32, "an integer";
        deserialize_u64 u64 => visit_u64, "an integer";
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.json {
            return self.json(visitor);
        }
        let n: f64 = self.parse("a number")?;
        if !n.is_finite() {
            return Err(Error("must be a finite number".to_string()));
        }
        visitor.visit_f64(n)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.json {
            return self.json(visitor);
        }
        match self.text()?.trim() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            other => Err(Error(format!("`{other}` is not `true` or `false`"))),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.json {
            return self.json(visitor);
        }
        visitor.visit_str(self.text()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bytes(&self.single()?.body)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.json {
            let part = self.single()?;
            if serde_json::from_slice::<serde_json::Value>(&part.body).is_ok_and(|v| v.is_null()) {
                return visitor.visit_none();
            }
        }
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // One JSON part holding an array is the array; otherwise each part is an item (an
        // array of objects travels as one JSON part per object).
        if self.json
            && let [one] = self.parts.as_slice()
            && one.body.trim_ascii_start().starts_with(b"[")
        {
            return self.json(visitor);
        }
        let (name, json, nul) = (self.name, self.json, self.nul);
        visitor.visit_seq(de::value::SeqDeserializer::new(self.parts.into_iter().map(
            move |part| Value {
                name,
                parts: vec![part],
                json,
                nul,
            },
        )))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.json(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == FILE_PART_STRUCT {
            let part = self.single()?;
            return visitor.visit_map(FileFields { part, next: 0 });
        }
        self.json(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.json {
            return self.json(visitor);
        }
        let text: StrDeserializer<'_, Error> = self.text()?.into_deserializer();
        visitor.visit_enum(text)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// A file part as the map [`idemgen_protocol::FilePart`] reads: filename, content type, bytes.
struct FileFields<'p> {
    part: &'p Part,
    next: usize,
}

impl<'de, 'p> MapAccess<'de> for FileFields<'p> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(key) = FILE_PART_FIELDS.get(self.next) else {
            return Ok(None);
        };
        let key: StrDeserializer<'_, Error> = key.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let field = self.next;
        self.next += 1;
        let text = |value: &Option<String>, what: &str| -> Result<Option<String>, Error> {
            match value {
                Some(v) if v.chars().any(char::is_control) => Err(Error(format!(
                    "its {what} must not contain control characters"
                ))),
                v => Ok(v.clone()),
            }
        };
        match field {
            0 => seed.deserialize(OptionalText(text(&self.part.filename, "filename")?)),
            1 => seed.deserialize(OptionalText(text(&self.part.content_type, "content type")?)),
            _ => seed.deserialize(de::value::BytesDeserializer::<Error>::new(&self.part.body)),
        }
    }
}

/// An optional string as a deserializer (`None` → `visit_none`).
struct OptionalText(Option<String>);

impl<'de> de::Deserializer<'de> for OptionalText {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Some(text) => visitor.visit_some(de::value::StringDeserializer::<Error>::new(text)),
            None => visitor.visit_none(),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgen_protocol::FilePart;
    use serde::Deserialize;

    fn body(text: &str) -> Bytes {
        Bytes::from(text.replace('\n', "\r\n"))
    }

    #[test]
    fn boundaries_are_read_quoted_or_bare_and_refused_when_missing_or_invalid() {
        assert_eq!(
            boundary("multipart/form-data; boundary=abc").unwrap(),
            "abc"
        );
        assert_eq!(
            boundary("multipart/form-data; charset=utf-8; BOUNDARY=\"a b:c\"").unwrap(),
            "a b:c"
        );
        assert!(
            boundary("multipart/form-data")
                .unwrap_err()
                .contains("no `boundary`")
        );
        assert!(boundary("multipart/form-data; boundary=").is_err());
        // Twice, the same or not: which one a proxy reads is not ours to guess.
        for twice in [
            "multipart/form-data; boundary=a; boundary=b",
            "multipart/form-data; boundary=a; BOUNDARY=a",
        ] {
            assert!(
                boundary(twice).unwrap_err().contains("more than once"),
                "{twice}"
            );
        }
        assert!(boundary(&format!("multipart/form-data; boundary={}", "x".repeat(71))).is_err());
        assert!(boundary("multipart/form-data; boundary=\"open").is_err());
        assert!(boundary("multipart/form-data; boundary=a\u{1}b").is_err());
    }

    #[test]
    fn a_backslash_escapes_only_a_quote_or_a_backslash() {
        let filename = |quoted: &str| {
            parameters(&format!("; name=\"f\"; filename={quoted}"))
                .unwrap()
                .into_iter()
                .find(|(k, _)| k == "filename")
                .map(|(_, v)| v)
                .unwrap()
        };
        // A browser's Windows path keeps its backslashes.
        assert_eq!(filename(r#""C:\dir\a.txt""#), r"C:\dir\a.txt");
        // Quoted pairs, as our client and curl write `"` and `\`.
        assert_eq!(filename(r#""a \"b\".bin""#), r#"a "b".bin"#);
        assert_eq!(filename(r#""a\\b""#), r"a\b");
        assert!(parameters(r#"; filename="a\"#).is_err());
    }

    #[test]
    fn parts_are_split_with_preamble_epilogue_padding_and_binary_bodies() {
        let raw = body(
            "preamble\n--XyZ  \nContent-Disposition: form-data; name=\"title\"\n\nQ3 report\n--XyZ\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".bin\"\nContent-Type: application/octet-stream\n\n\0\n--X\n--XyZ\ncontent-disposition: FORM-DATA; name=empty\n\n\n--XyZ--  \nepilogue",
        );
        let parts = parse(&raw, "XyZ").unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].name, "title");
        assert_eq!(&parts[0].body[..], b"Q3 report");
        assert_eq!(parts[1].filename.as_deref(), Some("a \"b\".bin"));
        assert_eq!(
            parts[1].content_type.as_deref(),
            Some("application/octet-stream")
        );
        // A line that starts like the delimiter but is not it stays content.
        assert_eq!(&parts[1].body[..], b"\0\r\n--X");
        assert_eq!(
            (parts[2].name.as_str(), &parts[2].body[..]),
            ("empty", &b""[..])
        );
        // Headers and the empty line right before the delimiter: an empty body.
        let tight = parse(
            &body("--b\nContent-Disposition: form-data; name=a\n\n--b--"),
            "b",
        )
        .unwrap();
        assert_eq!(
            (tight[0].name.as_str(), &tight[0].body[..]),
            ("a", &b""[..])
        );
        // No parts at all is a valid (empty) body.
        assert_eq!(parse(&body("--b--\n"), "b").unwrap(), []);
    }

    #[test]
    fn malformed_bodies_are_refused_with_the_reason() {
        for (raw, needle) in [
            ("no delimiter here", "no multipart delimiter"),
            (
                "--b\nContent-Disposition: form-data; name=a\n\nunterminated",
                "no closing multipart delimiter",
            ),
            ("--bX\n\n--b--", "not followed by a line break"),
            (
                "--b\nContent-Disposition: form-data; name=a\nno blank line\n--b--",
                "no empty line",
            ),
            (
                "--b\nContent-Type: text/plain\n\nx\n--b--",
                "no `Content-Disposition",
            ),
            (
                "--b\nContent-Disposition: attachment; name=a\n\nx\n--b--",
                "not `Content-Disposition: form-data`",
            ),
            (
                "--b\nContent-Disposition: form-data; filename=a\n\nx\n--b--",
                "no `name`",
            ),
            (
                "--b\nContent-Disposition: form-data; name=\"a\n\nx\n--b--",
                "unterminated",
            ),
            (
                "--b\nContent-Disposition: form-data; name=a\nContent-Disposition: form-data; name=b\n\nx\n--b--",
                "repeats the header",
            ),
            (
                "--b\nContent-Disposition: form-data; name=a\nContent-Transfer-Encoding: base64\n\neA==\n--b--",
                "body.a: Content-Transfer-Encoding",
            ),
            ("--b\n folded: header\n\nx\n--b--", "malformed header"),
        ] {
            let e = parse(&body(raw), "b").unwrap_err();
            assert!(e.contains(needle), "{raw:?}: {e}");
        }
        let huge = format!(
            "--b\nContent-Disposition: form-data; name=a\nX-Pad: {}\n\nx\n--b--",
            "p".repeat(MAX_HEADER_BYTES)
        );
        assert!(
            parse(&body(&huge), "b")
                .unwrap_err()
                .contains("bytes of headers")
        );
        let many: String = (0..=MAX_PARTS)
            .map(|_| "--b\nContent-Disposition: form-data; name=a\n\n\n")
            .collect::<String>()
            + "--b--";
        assert!(parse(&body(&many), "b").unwrap_err().contains("more than"));
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Invoice,
        Receipt,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Meta {
        pages: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Upload {
        title: String,
        size: i64,
        public: bool,
        kind: Kind,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        ratio: Option<f64>,
        file: FilePart,
        #[serde(default)]
        extra: Vec<FilePart>,
        #[serde(default)]
        meta: Option<Meta>,
        #[serde(default)]
        label: Option<String>,
    }

    fn no_nul(_: &[u8]) -> Option<String> {
        None
    }

    /// What the request module passes: a NUL escape anywhere is at `body.pages`.
    fn nul(bytes: &[u8]) -> Option<String> {
        memchr::memmem::find(bytes, br"\u0000").map(|_| "body.pages".to_string())
    }

    fn parts(fields: &[(&str, Option<&str>, &[u8])]) -> Vec<Part> {
        fields
            .iter()
            .map(|(name, filename, bytes)| Part {
                name: (*name).into(),
                filename: filename.map(Into::into),
                content_type: filename.map(|_| "image/png".into()),
                body: Bytes::copy_from_slice(bytes),
            })
            .collect()
    }

    #[test]
    fn parts_decode_into_typed_fields_in_any_order() {
        let decoded: Upload = decode(
            &parts(&[
                ("tags", None, b"a"),
                ("file", Some("x.png"), b"\x89PNG"),
                ("title", None, b"Q3"),
                ("meta", None, br#"{"pages": 3}"#),
                ("size", None, b"42"),
                ("public", None, b"true"),
                ("kind", None, b"receipt"),
                ("tags", None, b"b"),
                ("extra", Some("1.png"), b"1"),
                ("extra", Some("2.png"), b"2"),
                ("ratio", None, b"0.5"),
                ("label", None, br#""quoted""#),
            ]),
            &["label"],
            &no_nul,
        )
        .unwrap();
        assert_eq!(decoded.title, "Q3");
        assert_eq!((decoded.size, decoded.public), (42, true));
        assert_eq!(decoded.kind, Kind::Receipt);
        assert_eq!(decoded.tags, ["a", "b"]);
        assert_eq!(decoded.ratio, Some(0.5));
        assert_eq!(
            decoded.file,
            FilePart::new(&b"\x89PNG"[..])
                .with_filename("x.png")
                .with_content_type("image/png")
        );
        assert_eq!(decoded.extra.len(), 2);
        assert_eq!(&decoded.extra[1].bytes[..], b"2");
        assert_eq!(decoded.meta, Some(Meta { pages: 3 }));
        // A part the Encoding Object declares JSON is read as JSON.
        assert_eq!(decoded.label.as_deref(), Some("quoted"));
        // JSON arrays: one part holding the array, or one part per item.
        #[derive(Debug, Deserialize)]
        struct Rows {
            rows: Vec<Meta>,
        }
        for bodies in [
            vec![&br#" [{"pages": 1}, {"pages": 2}]"#[..]],
            vec![&br#"{"pages": 1}"#[..], &br#"{"pages": 2}"#[..]],
        ] {
            let fields: Vec<_> = bodies.iter().map(|b| ("rows", None, *b)).collect();
            let rows: Rows = decode(&parts(&fields), &["rows"], &no_nul).unwrap();
            assert_eq!(rows.rows, [Meta { pages: 1 }, Meta { pages: 2 }]);
        }
        let one: Rows = decode(
            &parts(&[("rows", None, br#"{"pages": 7}"#)]),
            &["rows"],
            &no_nul,
        )
        .unwrap();
        assert_eq!(one.rows, [Meta { pages: 7 }]);
    }

    #[test]
    fn bad_parts_are_refused_naming_the_part() {
        let base: [(&str, Option<&str>, &[u8]); 5] = [
            ("title", None, b"Q3"),
            ("size", None, b"1"),
            ("public", None, b"false"),
            ("kind", None, b"invoice"),
            ("file", Some("f"), b"x"),
        ];
        let with =
            |replace: &str, add: Option<(&'static str, Option<&'static str>, &'static [u8])>| {
                let mut fields: Vec<_> = base
                    .iter()
                    .filter(|(n, _, _)| *n != replace)
                    .copied()
                    .collect();
                fields.extend(add);
                decode::<Upload>(&parts(&fields), &[], &nul).unwrap_err()
            };
        assert!(decode::<Upload>(&parts(&base), &[], &nul).is_ok());
        for (e, needle) in [
            (with("title", None), "body.title: the part is required"),
            (with("file", None), "body.file: the part is required"),
            (
                with("", Some(("title", None, b"again"))),
                "body.title: is given more than once",
            ),
            (
                with("", Some(("file", Some("g"), b"y"))),
                "body.file: is given more than once",
            ),
            (
                with("", Some(("other", None, b"1"))),
                "body.other: is not a part of this request",
            ),
            (
                with("size", Some(("size", None, b"ten"))),
                "body.size: `ten` is not a 64-bit integer",
            ),
            (
                with("public", Some(("public", None, b"yes"))),
                "body.public: `yes` is not `true`",
            ),
            (
                with("kind", Some(("kind", None, b"memo"))),
                "body.kind: unknown variant `memo`",
            ),
            (
                with("title", Some(("title", None, b"\xff"))),
                "body.title: must be UTF-8",
            ),
            (
                with("title", Some(("title", None, b"a\0b"))),
                "body.title: must not contain the NUL",
            ),
            (
                with("", Some(("ratio", None, b"NaN"))),
                "body.ratio: must be a finite number",
            ),
            (
                with("", Some(("meta", None, b"{pages"))),
                "body.meta: invalid JSON",
            ),
            (
                with("", Some(("meta", None, br#"{"pages":1} x"#))),
                "body.meta: invalid JSON",
            ),
            (
                with("", Some(("meta", None, br#"{"pages":1,"n":"\u0000"}"#))),
                "body.meta.pages: must not contain the NUL",
            ),
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let mut control = parts(&base);
        control[4].filename = Some("a\u{7}b".into());
        let e = decode::<Upload>(&control, &[], &nul).unwrap_err();
        assert!(
            e.contains("body.file: its filename must not contain control"),
            "{e}"
        );
    }
}

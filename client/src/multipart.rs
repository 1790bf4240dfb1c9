//! `multipart/form-data` request bodies (RFC 7578) as generated clients build them: text parts
//! for scalars (an array as one part per item), JSON parts for objects and for parts the spec's
//! Encoding Object declares JSON, and file parts ([`FilePart`]) with their filename and content
//! type. The boundary is random and checked against every part's bytes.

use bytes::Bytes;
use idemgen_protocol::FilePart;

/// A multipart body being built, part by part, in the order the parts are added.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct Multipart {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
struct Part {
    name: &'static str,
    filename: Option<String>,
    content_type: Option<String>,
    body: Bytes,
}

impl Multipart {
    /// An empty body.
    pub fn new() -> Multipart {
        Multipart::default()
    }

    /// The field `name` of a scalar, array or object value: a string, number or boolean is one
    /// text part, an array one part per item, an object a JSON part, `null` (an absent optional)
    /// no part.
    pub fn field<T: serde::Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        match serde_json::to_value(value)? {
            serde_json::Value::Array(items) => {
                for item in items {
                    self.value(name, item)?;
                }
                Ok(())
            }
            other => self.value(name, other),
        }
    }

    fn value(
        &mut self,
        name: &'static str,
        value: serde_json::Value,
    ) -> Result<(), serde_json::Error> {
        let text = match value {
            serde_json::Value::Null => return Ok(()),
            serde_json::Value::String(s) => s,
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            structured => return self.json(name, &structured),
        };
        self.parts.push(Part {
            name,
            filename: None,
            content_type: None,
            body: Bytes::from(text),
        });
        Ok(())
    }

    /// The field `name` as one JSON part (`Content-Type: application/json`); `None` is no part.
    pub fn json<T: serde::Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let value = serde_json::to_value(value)?;
        if value.is_null() {
            return Ok(());
        }
        self.parts.push(Part {
            name,
            filename: None,
            content_type: Some("application/json".to_owned()),
            body: Bytes::from(serde_json::to_vec(&value)?),
        });
        Ok(())
    }

    /// One part named `name` per file of `files` (a file, an optional file, a list of files).
    pub fn files<F: Files + ?Sized>(&mut self, name: &'static str, files: &F) {
        files.each(&mut |file| self.file(name, file));
    }

    /// A file part named `name`.
    pub fn file(&mut self, name: &'static str, file: &FilePart) {
        self.parts.push(Part {
            name,
            filename: file.filename.clone(),
            content_type: file.content_type.clone(),
            body: file.bytes.clone(),
        });
    }

    /// The body's `Content-Type` (with its boundary) and bytes.
    pub fn encode(&self) -> (String, Bytes) {
        let boundary = loop {
            let candidate = format!("idemgen-{}", uuid::Uuid::new_v4().simple());
            let delimiter = format!("--{candidate}");
            if !self
                .parts
                .iter()
                .any(|p| contains(&p.body, delimiter.as_bytes()))
            {
                break candidate;
            }
        };
        (
            format!("multipart/form-data; boundary={boundary}"),
            Bytes::from(self.encode_with(&boundary)),
        )
    }

    /// The bytes of the body delimited by `boundary`.
    fn encode_with(&self, boundary: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for part in &self.parts {
            out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            let mut disposition = format!("form-data; name={}", quoted(part.name));
            if let Some(filename) = &part.filename {
                disposition.push_str(&format!("; filename={}", quoted(filename)));
            }
            out.extend_from_slice(format!("Content-Disposition: {disposition}\r\n").as_bytes());
            if let Some(content_type) = &part.content_type {
                let clean: String = content_type.chars().filter(|c| !c.is_control()).collect();
                out.extend_from_slice(format!("Content-Type: {clean}\r\n").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&part.body);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        out
    }
}

/// The files of a field: one [`FilePart`], an `Option` or a `Vec` of them.
#[doc(hidden)]
pub trait Files {
    /// Calls `f` with each file, in order.
    fn each(&self, f: &mut dyn FnMut(&FilePart));
}

impl Files for FilePart {
    fn each(&self, f: &mut dyn FnMut(&FilePart)) {
        f(self)
    }
}

impl<T: Files> Files for Option<T> {
    fn each(&self, f: &mut dyn FnMut(&FilePart)) {
        if let Some(files) = self {
            files.each(f);
        }
    }
}

impl<T: Files> Files for Vec<T> {
    fn each(&self, f: &mut dyn FnMut(&FilePart)) {
        for files in self {
            files.each(f);
        }
    }
}

/// A quoted-string: `"` and `\` escaped with a backslash, line breaks and other control
/// characters percent-encoded (as browsers write them), so a header never breaks.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_written_as_rfc_7578_says() {
        let mut form = Multipart::new();
        form.field("title", "Q3 \"final\"").unwrap();
        form.field("pages", &12).unwrap();
        form.field("tags", &["a", "b"]).unwrap();
        form.field("note", &Option::<String>::None).unwrap();
        form.field("meta", &serde_json::json!({"k": 1})).unwrap();
        form.json("label", "x").unwrap();
        form.files("none", &Option::<FilePart>::None);
        form.files(
            "file",
            &FilePart::new(&b"\x00\x01"[..])
                .with_filename("a\"b\n.bin")
                .with_content_type("application/octet-stream"),
        );
        form.files(
            "many",
            &vec![FilePart::new(&b"1"[..]), FilePart::new(&b"2"[..])],
        );
        let body = String::from_utf8_lossy(&form.encode_with("B")).into_owned();
        assert_eq!(
            body,
            "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nQ3 \"final\"\r\n\
             --B\r\nContent-Disposition: form-data; name=\"pages\"\r\n\r\n12\r\n\
             --B\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\na\r\n\
             --B\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\nb\r\n\
             --B\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{\"k\":1}\r\n\
             --B\r\nContent-Disposition: form-data; name=\"label\"\r\nContent-Type: application/json\r\n\r\n\"x\"\r\n\
             --B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\\\"b%0A.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\u{0}\u{1}\r\n\
             --B\r\nContent-Disposition: form-data; name=\"many\"\r\n\r\n1\r\n\
             --B\r\nContent-Disposition: form-data; name=\"many\"\r\n\r\n2\r\n\
             --B--\r\n"
        );
    }

    #[test]
    fn the_boundary_is_random_and_never_inside_a_part() {
        let mut form = Multipart::new();
        form.field("a", "x").unwrap();
        let (first, bytes) = form.encode();
        let (second, _) = form.encode();
        assert_ne!(first, second);
        let boundary = first
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        assert!(contains(&bytes, format!("--{boundary}--\r\n").as_bytes()));
        assert!(boundary.len() <= 70);
    }
}

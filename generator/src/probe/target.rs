//! One operation's requests as the probe builds them: a valid request (the probe config's body,
//! else examples, else values synthesized from the schemas, as JSON, a form or multipart parts),
//! fresh for every check and validated against the schema before it is sent, a second one that
//! differs in its semantic input (the body, else a query parameter, else a fingerprinted
//! header), and an invalid one (a body that cannot be the operation's, else a required query
//! parameter left out, else a query value of the wrong type).

use serde_json::Value;

use crate::ir::{OperationIr, ParamLocation};
use crate::loader::{LoadedSpec, Node, NodeRef};
use crate::spec::multipart::PartKind;

use super::chain::scalar;
use super::http::Request;
use super::{Declared4xx, Options, synth};

/// How the body is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Encoding {
    Json,
    Form,
    /// `multipart/form-data`: each property a part, sent as its kind says.
    Multipart(Vec<(String, PartKind)>),
}

/// Where an operation's bodies come from.
pub(super) struct BodyPlan<'s> {
    spec: &'s LoadedSpec,
    /// The media type's schema.
    schema: Option<NodeRef<'s>>,
    /// The media type's `example` (or first of `examples`).
    example: Option<Value>,
    /// The probe config's body, placeholders and all.
    configured: Option<Value>,
}

/// In a probe config's body: a string holding it is given this part fresh for every check.
pub const UNIQUE: &str = "{unique}";
/// In a probe config's body: a value that is this string is synthesized from its schema.
pub const SYNTHESIZE: &str = "{synthesize}";

impl BodyPlan<'_> {
    /// The valid body for `unique` (one check), and a second one that differs (for
    /// `changed-request`): valid where the schema leaves room, else the first with one leaf
    /// changed; `Err` says why no valid body could be made.
    pub fn bodies(&self, unique: &str) -> Result<(Value, Option<Value>), String> {
        let first = self.body(&format!("{unique}a"))?;
        let second = self
            .body(&format!("{unique}b"))
            .ok()
            .filter(|v| *v != first)
            .or_else(|| synth::changed(&first));
        Ok((first, second))
    }

    fn body(&self, unique: &str) -> Result<Value, String> {
        if let Some(configured) = &self.configured {
            // The config's words: sent as written but for its placeholders.
            return Ok(self.resolve(configured, self.schema, unique));
        }
        let example = self.example.as_ref().map(|example| match self.schema {
            Some(schema) => synth::fresh(self.spec, schema, example, unique),
            None => example.clone(),
        });
        if let Some(example) = example.filter(|e| self.valid(e).is_ok()) {
            return Ok(example);
        }
        let schema = self
            .schema
            .ok_or("the media type has neither a valid example nor a schema")?;
        let made = synth::value(self.spec, schema, unique);
        self.valid(&made).map(|()| made).map_err(|why| {
            format!(
                "no valid body could be made ({why}): give one in the probe config (docs/probe.md)"
            )
        })
    }

    /// Whether `value` is valid for the body's schema.
    pub fn valid(&self, value: &Value) -> Result<(), String> {
        match self.schema {
            Some(schema) => super::valid::validate(self.spec, schema, value),
            None => Ok(()),
        }
    }

    /// `value` with [`UNIQUE`] replaced by a fresh tag and [`SYNTHESIZE`] by a value of its
    /// property's schema.
    fn resolve(&self, value: &Value, schema: Option<NodeRef<'_>>, unique: &str) -> Value {
        match value {
            Value::String(s) if s == SYNTHESIZE => schema
                .map(|schema| synth::value(self.spec, schema, unique))
                .unwrap_or_else(|| Value::String(format!("probe-{unique}"))),
            Value::String(s) => Value::String(s.replace(UNIQUE, &short_tag(unique))),
            Value::Array(items) => {
                let item = schema.and_then(|s| {
                    let s = self.spec.deref(s);
                    s.node.get("items").map(|n| NodeRef {
                        file: s.file,
                        node: n,
                    })
                });
                Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| self.resolve(v, item, &format!("{unique}{i}")))
                        .collect(),
                )
            }
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(name, v)| {
                        let property = schema.and_then(|s| property(self.spec, s, name));
                        (
                            name.clone(),
                            self.resolve(v, property, &format!("{unique}.{name}")),
                        )
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// What [`UNIQUE`] stands for: 12 lowercase hex characters, a digest of the check's own tag (the
/// run's, the check's, the request's): distinct per check and per run.
fn short_tag(unique: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(unique.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The schema of property `name` of an object schema (its own, or an `allOf` member's).
fn property<'s>(spec: &'s LoadedSpec, schema: NodeRef<'s>, name: &str) -> Option<NodeRef<'s>> {
    let schema = spec.deref(schema);
    if let Some(found) = schema.node.get("properties").and_then(|p| p.get(name)) {
        return Some(NodeRef {
            file: schema.file,
            node: found,
        });
    }
    schema
        .node
        .get("allOf")
        .and_then(Node::as_seq)?
        .iter()
        .find_map(|m| {
            property(
                spec,
                NodeRef {
                    file: schema.file,
                    node: m,
                },
                name,
            )
        })
}

/// One operation's requests.
pub(super) struct Target<'s> {
    pub id: String,
    pub method: String,
    /// The path template (`/payments/{id}/capture`).
    pub template: String,
    pub key_header: String,
    /// The longest key the operation accepts: its header's `maxLength`, at most 255.
    pub max_key_length: usize,
    /// The shortest key its spec allows: the header's `minLength` (at least 1).
    pub min_key_length: usize,
    pub content_type: Option<String>,
    pub encoding: Encoding,
    /// Where its bodies come from (`None`: it has none).
    pub body: Option<BodyPlan<'s>>,
    /// The query parameters every request carries (the required ones), synthesized.
    pub query: Vec<(String, String)>,
    /// The header parameters marked `x-idempotency-fingerprint: true`, with a value each.
    pub headers: Vec<(String, String)>,
    /// How `changed-request` changes a request without a body to vary: a query parameter or a
    /// fingerprinted header, and the other value.
    pub alternative: Option<(ParamLocation, String, String)>,
    /// How `failure-not-stored` breaks a request without a body: a required query parameter
    /// left out (`None` value) or given a value of the wrong type.
    pub invalid_query: Option<(String, Option<String>)>,
    pub declared_4xx: Declared4xx,
    pub idempotent: bool,
}

impl<'s> Target<'s> {
    /// The requests of `op` (its spec node found by method and path), with values tagged `tag`;
    /// `configured` is the probe config's body.
    pub fn of(
        spec: &'s LoadedSpec,
        op: &OperationIr,
        tag: &str,
        configured: Option<Value>,
    ) -> Target<'s> {
        let view = crate::spec::operations(spec)
            .into_iter()
            .find(|o| o.method.eq_ignore_ascii_case(&op.http_method) && o.path == op.path);
        let body = view.and_then(|v| body_of(spec, v.node, configured));
        let key = op.idempotency.as_ref().map(|i| &i.key);
        let mut target = Target {
            id: op.id.clone(),
            method: op.http_method.clone(),
            template: op.path.clone(),
            key_header: key.map(|k| k.header.clone()).unwrap_or_default(),
            max_key_length: key.map_or(idemgen_protocol::MAX_KEY_LEN, |k| {
                usize::try_from(k.max_length).unwrap_or(idemgen_protocol::MAX_KEY_LEN)
            }),
            min_key_length: key.map_or(1, |k| usize::try_from(k.min_length).unwrap_or(1)),
            content_type: body.as_ref().map(|(ct, _, _)| ct.clone()),
            encoding: body.as_ref().map_or(Encoding::Json, |(_, e, _)| e.clone()),
            body: body.map(|(_, _, plan)| plan),
            query: Vec::new(),
            headers: Vec::new(),
            alternative: None,
            invalid_query: None,
            declared_4xx: Declared4xx::of(op),
            idempotent: op.is_idempotent(),
        };
        let Some(view) = view else {
            return target;
        };
        let fingerprinted: Vec<String> = op
            .idempotency
            .as_ref()
            .map(|i| i.input.header.iter().map(|p| p.wire.clone()).collect())
            .unwrap_or_default();
        for p in view.parameters(spec) {
            let (Some(name), Some(location)) = (p.name, p.location) else {
                continue;
            };
            let required = p.node.node.get("required").and_then(Node::as_bool) == Some(true);
            let schema = p.schema(spec);
            let value = |unique: &str| {
                schema
                    .map(|s| scalar(&synth::value(spec, s, unique)))
                    .unwrap_or_else(|| format!("probe{unique}"))
            };
            match location {
                "query" => {
                    if required {
                        target
                            .query
                            .push((name.to_owned(), value(&format!("{tag}q"))));
                        if target.invalid_query.is_none() {
                            target.invalid_query = Some((name.to_owned(), None));
                        }
                    }
                    // A query parameter is preferred to a header for `changed-request`; one with
                    // a `default` is not used (the other value may be the default, which the
                    // server applies to an absent one: the same request).
                    let other = value(&format!("{tag}q2"));
                    let defaulted =
                        schema.is_some_and(|s| spec.deref(s).node.get("default").is_some());
                    let differs = !target.query.iter().any(|(n, v)| n == name && *v == other);
                    if !defaulted
                        && differs
                        && target
                            .alternative
                            .as_ref()
                            .is_none_or(|(l, _, _)| *l == ParamLocation::Header)
                    {
                        target.alternative = Some((ParamLocation::Query, name.to_owned(), other));
                    }
                    let numeric = schema.is_some_and(|s| {
                        matches!(
                            spec.deref(s).node.get("type").and_then(Node::as_str),
                            Some("integer" | "number")
                        )
                    });
                    if numeric && target.invalid_query.is_none() {
                        target.invalid_query =
                            Some((name.to_owned(), Some("not-a-number".to_owned())));
                    }
                }
                "header" if fingerprinted.contains(&name.to_ascii_lowercase()) => {
                    let sent = value(&format!("{tag}h"));
                    let other = value(&format!("{tag}h2"));
                    if target.alternative.is_none() && other != sent {
                        target.alternative = Some((ParamLocation::Header, name.to_owned(), other));
                    }
                    target.headers.push((name.to_owned(), sent));
                }
                _ => {}
            }
        }
        target
    }

    /// One character more than the operation accepts.
    pub fn too_long_key(&self) -> String {
        "k".repeat(self.max_key_length + 1)
    }

    /// The valid request to `path`, with `key` and `body`.
    pub fn request(
        &self,
        options: &Options,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
    ) -> Request {
        self.build(options, path, key, body, &self.query, &self.headers)
    }

    /// The same request with the semantic input changed: `bodies`' second body, else (an
    /// operation without a body) a query parameter or a fingerprinted header with another value.
    pub fn changed_request(
        &self,
        options: &Options,
        path: &str,
        key: &str,
        bodies: Option<&(Value, Option<Value>)>,
    ) -> Option<Request> {
        if let Some((_, Some(second))) = bodies {
            return Some(self.request(options, path, Some(key), Some(second)));
        }
        let body = bodies.map(|(b, _)| b);
        let (location, name, other) = self.alternative.as_ref()?;
        let replace = |list: &[(String, String)]| {
            let mut list: Vec<(String, String)> =
                list.iter().filter(|(n, _)| n != name).cloned().collect();
            list.push((name.clone(), other.clone()));
            list
        };
        Some(match location {
            ParamLocation::Header => self.build(
                options,
                path,
                Some(key),
                body,
                &self.query,
                &replace(&self.headers),
            ),
            _ => self.build(
                options,
                path,
                Some(key),
                body,
                &replace(&self.query),
                &self.headers,
            ),
        })
    }

    /// A request the operation must refuse (and not store), with what makes it invalid.
    pub fn invalid_request(
        &self,
        options: &Options,
        path: &str,
        key: &str,
    ) -> Option<(Request, String)> {
        if self.body.is_some() {
            let invalid = Value::Array(vec![]);
            return Some((
                self.request(options, path, Some(key), Some(&invalid)),
                "an invalid body (`[]`)".into(),
            ));
        }
        let (name, value) = self.invalid_query.as_ref()?;
        let mut query: Vec<(String, String)> = self
            .query
            .iter()
            .filter(|(n, _)| n != name)
            .cloned()
            .collect();
        let what = match value {
            None => format!("the required query parameter `{name}` left out"),
            Some(v) => {
                query.push((name.clone(), v.clone()));
                format!("the query parameter `{name}={v}`")
            }
        };
        Some((
            self.build(options, path, Some(key), None, &query, &self.headers),
            what,
        ))
    }

    fn build(
        &self,
        options: &Options,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
        query: &[(String, String)],
        fingerprinted: &[(String, String)],
    ) -> Request {
        let mut headers = options.headers.clone();
        headers.extend(fingerprinted.iter().cloned());
        if let Some(key) = key {
            headers.push((self.key_header.clone(), key.to_string()));
        }
        let body = body.map(|b| match (&self.encoding, b) {
            (Encoding::Form, Value::Object(fields)) => (form(fields).into_bytes(), None),
            (Encoding::Multipart(kinds), Value::Object(fields)) => {
                let (bytes, boundary) = multipart(fields, kinds);
                (bytes, Some(boundary))
            }
            _ => (serde_json::to_vec(b).unwrap_or_default(), None),
        });
        if let (Some(ct), Some((_, boundary))) = (&self.content_type, &body) {
            let ct = match boundary {
                Some(boundary) => format!("{ct}; boundary={boundary}"),
                None => ct.clone(),
            };
            headers.push(("content-type".into(), ct));
        }
        let mut url = format!("{}{}", options.base_url.trim_end_matches('/'), path);
        for (i, (name, value)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&percent(name));
            url.push('=');
            url.push_str(&percent(value));
        }
        let body = body.map(|(bytes, _)| bytes);
        Request {
            method: self.method.to_ascii_uppercase(),
            url,
            headers,
            body,
        }
    }
}

/// A form body of an object's scalar fields (`a=1&b=x+y`).
fn form(fields: &serde_json::Map<String, Value>) -> String {
    fields
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| format!("{}={}", percent(k), percent(&scalar(v))))
        .collect::<Vec<_>>()
        .join("&")
}

/// A multipart body of an object's fields, each property a part as `kinds` says (a file part's
/// bytes are its synthesized string, named `probe.bin`), and its boundary: one that no part
/// holds.
fn multipart(
    fields: &serde_json::Map<String, Value>,
    kinds: &[(String, PartKind)],
) -> (Vec<u8>, String) {
    let mut parts: Vec<(&str, Option<&str>, Vec<u8>)> = Vec::new();
    for (name, value) in fields {
        let kind = kinds
            .iter()
            .find(|(n, _)| n == name)
            .map_or(PartKind::Text, |(_, k)| *k);
        let items: Vec<&Value> = match (kind, value) {
            (_, Value::Null) => continue,
            (PartKind::Json { declared: true }, v) => vec![v],
            (_, Value::Array(items)) => items.iter().collect(),
            (_, v) => vec![v],
        };
        for item in items {
            match kind {
                PartKind::File { .. } => {
                    parts.push((name, Some("probe.bin"), scalar(item).into_bytes()))
                }
                PartKind::Json { .. } => {
                    parts.push((name, None, serde_json::to_vec(item).unwrap_or_default()))
                }
                PartKind::Text => parts.push((name, None, scalar(item).into_bytes())),
            }
        }
    }
    let boundary = (0..)
        .map(|n| format!("idemgen-probe-{n}"))
        .find(|b| {
            let dash = format!("--{b}");
            !parts
                .iter()
                .any(|(_, _, bytes)| bytes.windows(dash.len()).any(|w| w == dash.as_bytes()))
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, filename, bytes) in parts {
        out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let name = name.replace(['"', '\\', '\r', '\n'], "_");
        match filename {
            Some(filename) => out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
            ),
            None => out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        out.extend_from_slice(&bytes);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (out, boundary)
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(super) fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The request body of an operation node: (media type, how it is encoded, where its values come
/// from). JSON preferred, else a form, else multipart parts it can type.
fn body_of<'s>(
    spec: &'s LoadedSpec,
    node: NodeRef<'s>,
    configured: Option<Value>,
) -> Option<(String, Encoding, BodyPlan<'s>)> {
    let body = node.node.get("requestBody")?;
    let body = spec.deref(NodeRef {
        file: node.file,
        node: body,
    });
    // The media types are in the map's file (another one when a `$ref` stands for it).
    let body = crate::spec::content(spec, body)?;
    let content = body.node.as_map()?;
    let (media_type, encoding, media) = content
        .entries()
        .iter()
        .find(|(k, _)| crate::spec::is_json(&k.text))
        .map(|(k, m)| (k, Encoding::Json, m))
        .or_else(|| {
            content
                .entries()
                .iter()
                .find(|(k, _)| crate::spec::is_form(&k.text))
                .map(|(k, m)| (k, Encoding::Form, m))
        })
        .or_else(|| {
            content.entries().iter().find_map(|(k, m)| {
                if !crate::spec::multipart::is_multipart(&k.text) {
                    return None;
                }
                let media = NodeRef {
                    file: body.file,
                    node: m,
                };
                let parts = crate::spec::multipart::parts(spec, media)?.ok()?;
                let kinds = parts.iter().map(|p| (p.name.to_string(), p.kind)).collect();
                Some((k, Encoding::Multipart(kinds), m))
            })
        })?;
    let media = NodeRef {
        file: body.file,
        node: media,
    };
    let schema = media.node.get("schema").map(|s| NodeRef {
        file: media.file,
        node: s,
    });
    let example = synth::media_example(spec, media);
    if schema.is_none() && example.is_none() && configured.is_none() {
        return None;
    }
    let plan = BodyPlan {
        spec,
        schema,
        example,
        configured,
    };
    Some((media_type.text.clone(), encoding, plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{MemoryFs, load_with};

    const SPEC: &str = r#"
openapi: 3.1.0
info: { title: t, version: '1' }
paths: {}
components:
  schemas:
    Item:
      type: object
      required: [sku, name]
      properties:
        sku: { type: string, pattern: '^[A-Z]{3}-[0-9]{4}$', example: ABC-1234 }
        name: { type: string, maxLength: 40 }
        tags: { type: array, items: { type: string, pattern: '^t[0-9]$' } }
"#;

    fn plan<'s>(
        spec: &'s LoadedSpec,
        example: Option<Value>,
        configured: Option<Value>,
    ) -> BodyPlan<'s> {
        let root = spec.root();
        let schema = root
            .node
            .get("components")
            .unwrap()
            .get("schemas")
            .unwrap()
            .get("Item")
            .unwrap();
        BodyPlan {
            spec,
            schema: Some(NodeRef {
                file: root.file,
                node: schema,
            }),
            example,
            configured,
        }
    }

    #[test]
    fn bodies_are_fresh_per_check_valid_and_keep_the_configs_words() {
        let mut fs = MemoryFs::new();
        fs.insert("/s.yaml", SPEC);
        let spec = load_with(&fs, std::path::Path::new("/s.yaml")).unwrap();
        // Synthesized: the sku drawn from its pattern, another one per check.
        let synthesized = plan(&spec, None, None);
        let (a, second) = synthesized.bodies("run-first").unwrap();
        let (b, _) = synthesized.bodies("run-storm").unwrap();
        assert!(synthesized.valid(&a).is_ok() && synthesized.valid(&b).is_ok());
        assert_ne!(a["sku"], b["sku"], "{a} {b}");
        assert_ne!(a["sku"], "ABC-1234");
        assert_ne!(Some(&a), second.as_ref());
        // An example keeps its words but for strings under a pattern.
        let example = serde_json::json!({"sku": "ABC-1234", "name": "Bolt", "tags": ["t1"]});
        let from_example = plan(&spec, Some(example), None);
        let (c, _) = from_example.bodies("run-first").unwrap();
        assert_eq!(c["name"], "Bolt");
        assert_ne!(c["sku"], "ABC-1234");
        assert!(from_example.valid(&c).is_ok(), "{c}");
        // An invalid example is not sent: the synthesized body is.
        let invalid = plan(&spec, Some(serde_json::json!({"name": 1})), None);
        assert!(invalid.valid(&invalid.bodies("x").unwrap().0).is_ok());
        // The config's body: sent as written but for its placeholders.
        let configured = plan(
            &spec,
            None,
            Some(serde_json::json!({"sku": "{synthesize}", "name": "bolt-{unique}", "extra": 1})),
        );
        let (d, _) = configured.bodies("run-first").unwrap();
        let (e, _) = configured.bodies("run-storm").unwrap();
        assert_eq!(d["extra"], 1);
        let name = d["name"].as_str().unwrap();
        assert!(name.starts_with("bolt-") && name.len() == 17, "{name}");
        assert_ne!(d["name"], e["name"]);
        assert!(
            idemgen_protocol::pattern::compile("^[A-Z]{3}-[0-9]{4}$")
                .unwrap()
                .is_match(d["sku"].as_str().unwrap())
        );
    }

    #[test]
    fn forms_and_queries_are_percent_encoded() {
        let fields = serde_json::json!({"name": "a b&c", "n": 3, "gone": null});
        let Value::Object(fields) = fields else {
            unreachable!()
        };
        assert_eq!(form(&fields), "n=3&name=a%20b%26c");
        assert_eq!(percent("é/?"), "%C3%A9%2F%3F");
    }

    #[test]
    fn multipart_bodies_send_each_property_as_its_kind_of_part() {
        let fields = serde_json::json!({
            "file": "probe-a", "title": "x", "tags": ["a", "b"], "meta": {"k": 1}, "gone": null
        });
        let Value::Object(fields) = fields else {
            unreachable!()
        };
        let kinds = vec![
            ("file".to_string(), PartKind::File { many: false }),
            ("tags".to_string(), PartKind::Text),
            ("meta".to_string(), PartKind::Json { declared: false }),
        ];
        let (body, boundary) = multipart(&fields, &kinds);
        assert_eq!(boundary, "idemgen-probe-0");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "--idemgen-probe-0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"probe.bin\"\r\nContent-Type: application/octet-stream\r\n\r\nprobe-a\r\n\
             --idemgen-probe-0\r\nContent-Disposition: form-data; name=\"meta\"\r\n\r\n{\"k\":1}\r\n\
             --idemgen-probe-0\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\na\r\n\
             --idemgen-probe-0\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\nb\r\n\
             --idemgen-probe-0\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nx\r\n\
             --idemgen-probe-0--\r\n"
        );
        // A boundary no part holds.
        let holds = serde_json::json!({"title": "--idemgen-probe-0"});
        let Value::Object(holds) = holds else {
            unreachable!()
        };
        assert_eq!(multipart(&holds, &[]).1, "idemgen-probe-1");
    }
}

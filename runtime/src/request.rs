//! What the pipeline reads from a request before anything is claimed: the body under a limit,
//! the parameters and body an operation's `extract` asks for ([`RequestParts`]), and the
//! idempotency key from its header. Every failure is a 400/413/415 problem naming what is wrong.

use axum::body::{Body, Bytes};
use http::request::Parts;
use http::{HeaderMap, HeaderName};
use idemgen_protocol::{IdempotencyKey, KeyError, KeyHeader};
use serde::de::DeserializeOwned;

use crate::problem::{Problem, ProblemKind};

/// A request's parts as an operation's `extract` reads them: path, query, headers, body. The
/// accessors answer 400 problems naming the parameter.
#[derive(Debug)]
pub struct RequestParts {
    pub(crate) parts: Parts,
    path: Vec<(String, String)>,
    query: Result<Vec<(String, String)>, String>,
    body: Bytes,
}

impl RequestParts {
    /// The parts of a request whose route matched `path` parameters, with its body read.
    pub fn new(parts: Parts, path: Vec<(String, String)>, body: Bytes) -> RequestParts {
        let query = match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri) {
            Ok(axum::extract::Query(pairs)) => Ok(pairs),
            Err(e) => Err(e.to_string()),
        };
        RequestParts {
            parts,
            path,
            query,
            body,
        }
    }

    /// The request headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The value of path parameter `name`.
    pub fn path<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        let raw = self
            .path
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| bad_request(format!("path parameter `{name}` is missing")))?;
        parse_param("path", name, raw)
    }

    fn query_pairs(&self) -> Result<&[(String, String)], Problem> {
        self.query.as_deref().map_err(|e| {
            bad_request("the query string cannot be decoded").with_internal(e.to_string())
        })
    }

    /// The value of query parameter `name`: `None` when absent, 400 when repeated or invalid.
    pub fn query<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Problem> {
        let pairs = self.query_pairs()?;
        let mut values = pairs.iter().filter(|(n, _)| n == name);
        let Some((_, first)) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(bad_request(format!(
                "query parameter `{name}` is given more than once"
            )));
        }
        parse_param("query", name, first).map(Some)
    }

    /// The value of required query parameter `name`.
    pub fn required_query<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        self.query(name)?
            .ok_or_else(|| bad_request(format!("query parameter `{name}` is required")))
    }

    /// Every value of array query parameter `name` (`?tag=a&tag=b`), in order; 400 when
    /// `required` and there is none.
    pub fn query_array<T: DeserializeOwned>(
        &self,
        name: &str,
        required: bool,
    ) -> Result<Vec<T>, Problem> {
        let values = self
            .query_pairs()?
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| parse_param("query", name, v))
            .collect::<Result<Vec<T>, Problem>>()?;
        if required && values.is_empty() {
            return Err(bad_request(format!("query parameter `{name}` is required")));
        }
        Ok(values)
    }

    /// The value of request header `name`: `None` when absent, 400 when repeated, not text or
    /// invalid.
    pub fn header<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Problem> {
        let mut values = self.parts.headers.get_all(name).iter();
        let Some(first) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(bad_request(format!(
                "header `{name}` is given more than once"
            )));
        }
        let raw = first
            .to_str()
            .map_err(|_| bad_request(format!("header `{name}` is not visible ASCII text")))?;
        parse_param("header", name, raw).map(Some)
    }

    /// The value of required request header `name`.
    pub fn required_header<T: DeserializeOwned>(&self, name: &str) -> Result<T, Problem> {
        self.header(name)?
            .ok_or_else(|| bad_request(format!("header parameter `{name}` is required")))
    }

    fn required_body(&self) -> Result<&[u8], Problem> {
        if self.body.is_empty() {
            return Err(bad_request("the request body is required"));
        }
        Ok(&self.body)
    }

    /// 415 unless the request's `Content-Type` is one `accepts` (compared on its essence,
    /// parameters such as `charset` ignored).
    fn media_type(&self, what: &str, accepts: impl Fn(&str) -> bool) -> Result<(), Problem> {
        let essence = self
            .parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        match essence {
            Some(essence) if accepts(&essence) => Ok(()),
            Some(essence) => Err(Problem::new(ProblemKind::UnsupportedMediaType)
                .with_detail(format!("the body must be sent as {what}, not `{essence}`"))),
            None => Err(
                Problem::new(ProblemKind::UnsupportedMediaType).with_detail(format!(
                    "the body must be sent as {what}; the request has no Content-Type"
                )),
            ),
        }
    }

    fn json_media_type(&self) -> Result<(), Problem> {
        self.media_type("JSON (`Content-Type: application/json`)", |essence| {
            essence == "application/json" || essence.ends_with("+json")
        })
    }

    /// The JSON body (required): 415 unless sent as JSON, 400 when it does not parse as `T` or
    /// holds a NUL character (which no text column can store).
    pub fn json_body<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        let bytes = self.required_body()?;
        self.json_media_type()?;
        let value = json_body(bytes)?;
        if let Some(path) = nul_in_json(bytes) {
            return Err(bad_request(format!(
                "{path}: must not contain the NUL character (\\u0000)"
            )));
        }
        Ok(value)
    }

    /// The JSON body, `None` when the request has none.
    pub fn optional_json_body<T: DeserializeOwned>(&self) -> Result<Option<T>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.json_body().map(Some)
    }

    /// The form body (required): 415 unless sent as `application/x-www-form-urlencoded`, 400
    /// when a field is missing, repeated, not of its type, or holds a NUL character. Decoded, so
    /// the same fields in another order are the same request; an empty body is the empty form
    /// (valid when every field is optional).
    pub fn form_body<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        // An empty form is a form: a client whose fields are all absent sends no bytes.
        let bytes: &[u8] = &self.body;
        if bytes.is_empty() {
            return serde_urlencoded::from_bytes(bytes)
                .map_err(|e| bad_request(format!("invalid form body: {e}")));
        }
        self.media_type(
            "a form (`Content-Type: application/x-www-form-urlencoded`)",
            |essence| essence == "application/x-www-form-urlencoded",
        )?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes)
            .map_err(|e| bad_request(format!("invalid form body: {e}")))?;
        if let Some((name, _)) = pairs
            .iter()
            .find(|(n, v)| n.contains('\0') || v.contains('\0'))
        {
            return Err(bad_request(format!(
                "body.{name}: must not contain the NUL character"
            )));
        }
        let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded::parse(bytes));
        serde_path_to_error::deserialize(deserializer)
            .map_err(|e| bad_request(format!("{}: {}", field_path(e.path()), e.inner())))
    }

    /// The form body, `None` when the request has none.
    pub fn optional_form_body<T: DeserializeOwned>(&self) -> Result<Option<T>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.form_body().map(Some)
    }

    /// The `multipart/form-data` body (required): 415 unless sent as multipart, 400 when it has
    /// no boundary, is malformed, or a part is missing, repeated, unknown (to a closed schema),
    /// not of its type or holds a NUL character, naming the part (`body.<name>: …`). Parts are
    /// read by name, so their order and the boundary do not matter; those named in `json` (the
    /// Encoding Object's `contentType: application/json`) and object-typed ones are read as JSON.
    pub fn multipart_body<T: DeserializeOwned>(&self, json: &[&str]) -> Result<T, Problem> {
        self.required_body()?;
        self.media_type(
            "multipart (`Content-Type: multipart/form-data; boundary=…`)",
            |essence| essence == "multipart/form-data",
        )?;
        let content_type = self
            .parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let boundary = crate::multipart::boundary(content_type).map_err(bad_request)?;
        let parts = crate::multipart::parse(&self.body, &boundary)
            .map_err(|e| bad_request(format!("invalid multipart body: {e}")))?;
        crate::multipart::decode(&parts, json, &nul_in_json).map_err(bad_request)
    }

    /// The multipart body, `None` when the request has none.
    pub fn optional_multipart_body<T: DeserializeOwned>(
        &self,
        json: &[&str],
    ) -> Result<Option<T>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.multipart_body(json).map(Some)
    }

    /// The text body (required): 415 unless sent as `text/*`, 400 when it is not UTF-8 or holds
    /// a NUL character.
    pub fn text_body(&self) -> Result<String, Problem> {
        let bytes = self.required_body()?;
        self.media_type("text (`Content-Type: text/…`)", |essence| {
            essence.starts_with("text/")
        })?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| bad_request("the request body is not UTF-8 text"))?;
        if text.contains('\0') {
            return Err(bad_request(
                "the request body must not contain the NUL character",
            ));
        }
        Ok(text)
    }

    /// The text body, `None` when the request has none.
    pub fn optional_text_body(&self) -> Result<Option<String>, Problem> {
        if self.body.is_empty() {
            return Ok(None);
        }
        self.text_body().map(Some)
    }

    /// The raw body (required).
    pub fn bytes_body(&self) -> Result<Bytes, Problem> {
        self.required_body()?;
        Ok(self.body.clone())
    }

    /// The raw body, `None` when the request has none.
    pub fn optional_bytes_body(&self) -> Result<Option<Bytes>, Problem> {
        Ok((!self.body.is_empty()).then(|| self.body.clone()))
    }
}

/// A 400 `invalid_request` problem with client-facing detail.
pub fn bad_request(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemKind::InvalidRequest).with_detail(detail)
}

/// The default request body limit (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// Reads a request body of at most `limit` bytes: 413 `payload_too_large` beyond it, 400 when
/// the body cannot be read. Nothing else happens before the body is complete, so an oversized
/// request never takes a claim.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, Problem> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            // `serve`'s body read timeout, wherever it sits in the chain of causes.
            let timed_out =
                std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .find_map(|e| e.downcast_ref::<crate::listen::BodyTimeout>());
            if too_large {
                Err(Problem::new(ProblemKind::PayloadTooLarge)
                    .with_detail(format!("the request body exceeds {limit} bytes")))
            } else if let Some(timeout) = timed_out {
                Err(Problem::new(ProblemKind::RequestTimeout).with_detail(timeout.to_string()))
            } else {
                Err(bad_request("the request body could not be read").with_internal(e.to_string()))
            }
        }
    }
}

/// Parses a JSON body into `T`: 400 with a client-facing description of what is wrong, never
/// server internals. A value of the wrong type or variant names its field as the other checks do
/// (`body.items[2].unit: unknown variant `box`, expected …`); a body that is not JSON says where
/// it stops being JSON (`invalid JSON body: … at line 1 column 9`).
pub fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let inner = e.inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                let what = inner.to_string();
                let suffix = format!(" at line {} column {}", inner.line(), inner.column());
                let what = what.strip_suffix(&suffix).unwrap_or(&what);
                bad_request(format!("{}: {what}", field_path(e.path())))
            }
            _ => bad_request(format!("invalid JSON body: {inner}")),
        }
    })?;
    deserializer
        .end()
        .map_err(|e| bad_request(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// Where in the body a decoding error is: `body`, `body.unit`, `body.items[2].name`.
fn field_path(path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    match path.as_str() {
        "." => "body".to_owned(),
        p if p.starts_with('[') => format!("body{p}"),
        p => format!("body.{p}"),
    }
}

/// The default name of the key header.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Reads the key from `headers` under `key.name`: 400 problem, naming that header, when it is
/// missing, repeated, longer than `key.max_len` or otherwise invalid.
pub fn key_from_headers(headers: &HeaderMap, key: &KeyHeader) -> Result<IdempotencyKey, Problem> {
    let problem = |e: &KeyError| key_problem(e, key.name);
    let mut values = headers.get_all(key.name).iter();
    let first = values.next().ok_or_else(|| problem(&KeyError::Missing))?;
    if values.next().is_some() {
        return Err(problem(&KeyError::Repeated));
    }
    key.parse(first.as_bytes()).map_err(|e| problem(&e))
}

fn key_problem(e: &KeyError, header: &str) -> Problem {
    let kind = match e {
        KeyError::Missing => ProblemKind::KeyMissing,
        _ => ProblemKind::KeyInvalid,
    };
    Problem::new(kind).with_detail(e.detail(header))
}

/// Parses one parameter value into `T`: as a JSON string first (strings, UUIDs, date-times,
/// string enums), then as a JSON literal (numbers, booleans). 400 naming the parameter otherwise.
pub fn parse_param<T: DeserializeOwned>(
    location: &str,
    name: &str,
    raw: &str,
) -> Result<T, Problem> {
    if raw.contains('\0') {
        return Err(bad_request(format!(
            "{location} parameter `{name}` must not contain the NUL character"
        )));
    }
    if let Ok(value) = serde_json::from_value::<T>(serde_json::Value::String(raw.to_owned())) {
        return Ok(value);
    }
    let literal = raw.trim();
    if !literal.is_empty()
        && !literal.starts_with(['"', '[', '{'])
        && let Ok(value) = serde_json::from_str::<T>(literal)
    {
        return Ok(value);
    }
    Err(bad_request(format!(
        "{location} parameter `{name}` has an invalid value"
    )))
}

/// The path (`body.items[2].name`) of the first JSON string that holds a NUL character (`\u0000`),
/// if any: PostgreSQL cannot store one in text, so it is refused as invalid input before any
/// claim instead of failing in the handler. Only bodies whose bytes contain the escape are
/// parsed again to find it.
pub fn nul_in_json(bytes: &[u8]) -> Option<String> {
    if !has_nul_escape(bytes) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut path = String::from("body");
    find_nul(&value, &mut path).then_some(path)
}

/// Whether `\u0000` appears as an escape (not as an escaped backslash followed by `u0000`).
fn has_nul_escape(bytes: &[u8]) -> bool {
    let mut backslashes = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\\' {
            backslashes += 1;
            continue;
        }
        if backslashes % 2 == 1 && *b == b'u' && bytes.get(i + 1..i + 5) == Some(b"0000") {
            return true;
        }
        backslashes = 0;
    }
    false
}

fn find_nul(value: &serde_json::Value, path: &mut String) -> bool {
    use std::fmt::Write;
    match value {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            let len = path.len();
            let _ = write!(path, "[{i}]");
            let found = find_nul(item, path);
            if !found {
                path.truncate(len);
            }
            found
        }),
        serde_json::Value::Object(map) => map.iter().any(|(key, item)| {
            if key.contains('\0') {
                return true; // a NUL in a property name is named by the object holding it
            }
            let len = path.len();
            let _ = write!(path, ".{key}");
            let found = find_nul(item, path);
            if !found {
                path.truncate(len);
            }
            found
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[tokio::test]
    async fn body_over_the_limit_is_413() {
        let err = read_body(Body::from(vec![b'x'; 2048]), 1024)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ProblemKind::PayloadTooLarge);
        let ok = read_body(Body::from(vec![b'x'; 1024]), 1024).await.unwrap();
        assert_eq!(ok.len(), 1024);
    }

    fn form_request(content_type: &str, body: &'static str) -> RequestParts {
        let request = http::Request::builder()
            .header(http::header::CONTENT_TYPE, content_type)
            .body(())
            .unwrap();
        let (parts, ()) = request.into_parts();
        RequestParts::new(parts, Vec::new(), Bytes::from_static(body.as_bytes()))
    }

    #[test]
    fn form_bodies_are_decoded_typed_and_refused_with_problems() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Payment {
            amount: i64,
            currency: String,
            #[serde(default)]
            capture: Option<bool>,
        }
        const FORM: &str = "application/x-www-form-urlencoded";
        let a: Payment = form_request(FORM, "amount=100&currency=EUR&capture=true")
            .form_body()
            .unwrap();
        let b: Payment = form_request(
            "application/x-www-form-urlencoded; charset=utf-8",
            "currency=EUR&capture=true&amount=100",
        )
        .form_body()
        .unwrap();
        assert_eq!(a, b, "field order does not matter");
        assert_eq!(a.amount, 100);
        let e = form_request(FORM, "amount=ten&currency=EUR")
            .form_body::<Payment>()
            .unwrap_err();
        assert_eq!(e.kind(), ProblemKind::InvalidRequest);
        let e = form_request(FORM, "amount=1&amount=2&currency=EUR")
            .form_body::<Payment>()
            .unwrap_err();
        assert_eq!(e.kind(), ProblemKind::InvalidRequest, "a repeated field");
        let e = form_request(FORM, "amount=1&currency=E%00R")
            .form_body::<Payment>()
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some("body.currency: must not contain the NUL character")
        );
        let e = form_request("application/json", "{}")
            .form_body::<Payment>()
            .unwrap_err();
        assert_eq!(e.kind(), ProblemKind::UnsupportedMediaType);
        let none: Option<Payment> = form_request(FORM, "").optional_form_body().unwrap();
        assert_eq!(none, None);
        // A required form of optional fields may be empty; one with required fields may not.
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Filters {
            #[serde(default)]
            limit: Option<i32>,
        }
        let empty: Filters = form_request(FORM, "").form_body().unwrap();
        assert_eq!(empty, Filters { limit: None });
        let e = form_request(FORM, "").form_body::<Payment>().unwrap_err();
        assert_eq!(e.kind(), ProblemKind::InvalidRequest);
        // A field of the wrong type is named.
        let e = form_request(FORM, "amount=five&currency=eur")
            .form_body::<Payment>()
            .unwrap_err();
        assert!(
            e.detail().unwrap().starts_with("body.amount: "),
            "{:?}",
            e.detail()
        );
    }

    #[test]
    fn bad_json_is_400() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct W {
            name: String,
        }
        let e = json_body::<W>(b"{\"nam\": 1}").unwrap_err();
        assert_eq!(e.kind().status(), 400);
        assert!(e.detail().unwrap().contains("name"));
    }

    /// A value of the wrong type or variant, at any depth, names its field the way the
    /// generated checks do (`body.sku: …`); JSON that does not parse says where.
    #[test]
    fn decoding_errors_name_their_field() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(rename_all = "lowercase")]
        enum Unit {
            Each,
            Case,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Line {
            unit: Unit,
            quantity: u32,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Order {
            sku: String,
            lines: Vec<Line>,
            unit: Option<Unit>,
        }
        let detail = |body: &str| {
            json_body::<Order>(body.as_bytes())
                .unwrap_err()
                .detail()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            detail(r#"{"sku":"a","lines":[],"unit":"box"}"#),
            "body.unit: unknown variant `box`, expected `each` or `case`"
        );
        assert_eq!(
            detail(r#"{"sku":"a","lines":[{"unit":"each","quantity":"five"}]}"#),
            "body.lines[0].quantity: invalid type: string \"five\", expected u32"
        );
        assert_eq!(
            detail(r#"{"sku":7,"lines":[]}"#),
            "body.sku: invalid type: integer `7`, expected a string"
        );
        assert_eq!(detail(r#"{"lines":[]}"#), "body: missing field `sku`");
        assert_eq!(
            detail(r#""x""#),
            "body: invalid type: string \"x\", expected struct Order"
        );
        assert!(detail(r#"{"sku":"#).starts_with("invalid JSON body: EOF while parsing"));
        assert!(
            detail(r#"{"sku":"a","lines":[]} x"#)
                .starts_with("invalid JSON body: trailing characters")
        );
    }

    #[test]
    fn missing_repeated_and_invalid_keys_are_400() {
        let key = KeyHeader::DEFAULT;
        let mut h = HeaderMap::new();
        let e = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyMissing);
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        assert_eq!(key_from_headers(&h, &key).unwrap().as_str(), "a");
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
        let e = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(e.kind(), ProblemKind::KeyInvalid);
        let mut h = HeaderMap::new();
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("has space"));
        assert_eq!(key_from_headers(&h, &key).unwrap_err().kind().status(), 400);
    }

    #[test]
    fn a_custom_header_is_named_in_every_key_problem() {
        let key = KeyHeader::new("PayPal-Request-Id", 108);
        let mut h = HeaderMap::new();
        let missing = key_from_headers(&h, &key).unwrap_err();
        assert!(missing.detail().unwrap().contains("PayPal-Request-Id"));
        // The default header is not this operation's key.
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("k"));
        assert_eq!(
            key_from_headers(&h, &key).unwrap_err().kind(),
            ProblemKind::KeyMissing
        );
        h.insert(
            "paypal-request-id",
            HeaderValue::from_str(&"k".repeat(109)).unwrap(),
        );
        let long = key_from_headers(&h, &key).unwrap_err();
        assert_eq!(long.kind(), ProblemKind::KeyInvalid);
        assert_eq!(
            long.detail(),
            Some("the PayPal-Request-Id header is longer than 108 characters")
        );
        for problem in [missing, long] {
            let body = String::from_utf8(problem.body_json()).unwrap();
            assert!(!body.contains("Idempotency-Key"), "{body}");
        }
        h.insert("paypal-request-id", HeaderValue::from_static("k"));
        assert_eq!(key_from_headers(&h, &key).unwrap().as_str(), "k");
    }

    #[test]
    fn params_parse_as_strings_then_literals() {
        assert_eq!(parse_param::<String>("query", "q", "12").unwrap(), "12");
        assert_eq!(parse_param::<i64>("query", "q", "12").unwrap(), 12);
        assert!(parse_param::<bool>("query", "q", "true").unwrap());
        assert_eq!(
            parse_param::<uuid::Uuid>("path", "id", "6a2f41a3-c54c-fce8-32d2-0324e1c32e22")
                .unwrap(),
            uuid::Uuid::parse_str("6a2f41a3-c54c-fce8-32d2-0324e1c32e22").unwrap()
        );
        let e = parse_param::<i32>("query", "limit", "ten").unwrap_err();
        assert_eq!(e.kind(), ProblemKind::InvalidRequest);
        assert!(e.detail().unwrap().contains("`limit`"));
        assert!(parse_param::<i64>("query", "q", "[1]").is_err());
    }

    #[test]
    fn nul_characters_are_found_and_named() {
        assert_eq!(
            nul_in_json(br#"{"name":"a\u0000b"}"#).as_deref(),
            Some("body.name")
        );
        assert_eq!(
            nul_in_json(br#"{"items":[{"n":"x"},{"n":"\u0000"}]}"#).as_deref(),
            Some("body.items[1].n")
        );
        // An escaped backslash followed by `u0000` is text, not a NUL.
        assert_eq!(nul_in_json(br#"{"name":"a\\u0000b"}"#), None);
        assert_eq!(nul_in_json(br#"{"name":"ok"}"#), None);
        assert!(parse_param::<String>("query", "q", "a\0b").is_err());
    }
}

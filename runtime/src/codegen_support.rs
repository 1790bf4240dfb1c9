//! Helpers that `idemgen build` output calls: parameter parsing with 400 problems, typed
//! responses to HTTP and to the stored form, the resource scope, and the one log line per request.
//!
//! Generated code stays short and readable by calling these; each rule (how a parameter is
//! parsed, how a scope is joined, what is logged) has its home here instead of being repeated in
//! every generated handler. Not meant for hand-written code, but nothing stops it.

use std::fmt::Display;

use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::executor::{CodecError, ExecuteError, Outcome};
use crate::problem::{Problem, ProblemKind};
use crate::record::StoredResponse;
use crate::server::{HandlerError, bad_request};

/// The query string as decoded `(name, value)` pairs, in order; 400 when it is not
/// `application/x-www-form-urlencoded`.
pub fn query_pairs(uri: &http::Uri) -> Result<Vec<(String, String)>, Problem> {
    match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(axum::extract::Query(pairs)) => Ok(pairs),
        Err(e) => {
            Err(bad_request("the query string cannot be decoded").with_internal(e.to_string()))
        }
    }
}

/// The one value of query parameter `name`: `None` when absent, 400 when repeated.
pub fn query_value<'a>(
    pairs: &'a [(String, String)],
    name: &str,
) -> Result<Option<&'a str>, Problem> {
    let mut values = pairs.iter().filter(|(n, _)| n == name);
    let first = values.next().map(|(_, v)| v.as_str());
    if values.next().is_some() {
        return Err(bad_request(format!(
            "query parameter `{name}` is given more than once"
        )));
    }
    Ok(first)
}

/// Every value of the array query parameter `name` (`?tag=a&tag=b`), in order.
pub fn query_values<'a>(pairs: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The value of request header `name`: `None` when absent, 400 when repeated or not text.
pub fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Problem> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad_request(format!(
            "header `{name}` is given more than once"
        )));
    }
    first
        .to_str()
        .map(Some)
        .map_err(|_| bad_request(format!("header `{name}` is not visible ASCII text")))
}

/// The value of path parameter `name` from the matched route; 400 when the route has none.
pub fn path_value<'a>(
    params: &'a axum::extract::RawPathParams,
    name: &str,
) -> Result<&'a str, Problem> {
    params
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .ok_or_else(|| bad_request(format!("path parameter `{name}` is missing")))
}

/// A present value, or 400 naming the missing `location` parameter.
pub fn required<T>(value: Option<T>, location: &str, name: &str) -> Result<T, Problem> {
    value.ok_or_else(|| bad_request(format!("{location} parameter `{name}` is required")))
}

/// Parses one parameter value into `T`: as a JSON string first (strings, UUIDs, date-times,
/// string enums), then as a JSON literal (numbers, booleans). 400 naming the parameter otherwise.
pub fn parse_param<T: DeserializeOwned>(
    location: &str,
    name: &str,
    raw: &str,
) -> Result<T, Problem> {
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

/// The status for a declared code (100..=599); anything else is 500.
pub fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `skip_serializing_if` for array parameters in a semantic input: an absent array is empty.
pub fn is_empty<T>(values: &&[T]) -> bool {
    values.is_empty()
}

/// A binary body in a semantic input: serialised as lowercase hex text.
#[derive(Debug, Clone, Copy)]
pub struct HexBytes<'a>(pub &'a [u8]);

impl Serialize for HexBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(self.0))
    }
}

/// Parses a text body: 400 when it is not UTF-8.
pub fn text_body(bytes: &[u8]) -> Result<String, Problem> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad_request("the request body is not UTF-8 text"))
}

/// The resource scope of a request: its path parameter values, in template order, joined with
/// `/` after escaping `%` and `/` inside each value, so that different values never join to the
/// same scope. Empty when the path has no parameters.
pub fn resource_scope(values: &[&dyn Display]) -> String {
    values
        .iter()
        .map(|v| v.to_string().replace('%', "%25").replace('/', "%2F"))
        .collect::<Vec<_>>()
        .join("/")
}

/// A response with a JSON body of the given media type; a body that cannot be serialised
/// becomes a 500 problem (logged).
pub fn json_response<T: Serialize + ?Sized>(
    status: StatusCode,
    media_type: &'static str,
    body: &T,
) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => bytes_response(status, media_type, bytes),
        Err(e) => Problem::new(ProblemKind::Internal)
            .with_internal(format!("serialising a response body: {e}"))
            .into_response(),
    }
}

/// A response with a raw body of the given media type.
pub fn bytes_response(
    status: StatusCode,
    media_type: &'static str,
    body: impl Into<axum::body::Body>,
) -> Response {
    let mut response = (status, body.into()).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
    response
}

/// A response with no body.
pub fn empty_response(status: StatusCode) -> Response {
    status.into_response()
}

/// Adds a typed header to a response; a value that is not a valid header value is dropped and
/// logged (a handler bug, not the client's).
pub fn set_header<V: Display + ?Sized>(response: &mut Response, name: &'static str, value: &V) {
    match HeaderValue::from_str(&value.to_string()) {
        Ok(v) => {
            response
                .headers_mut()
                .append(HeaderName::from_static(name), v);
        }
        Err(_) => tracing::error!(
            header = name,
            "dropping a response header whose value is not valid"
        ),
    }
}

/// The status of a range or `default` variant, checked against what it declares: a handler that
/// answers `Status4xx` with 200 is answered 500 instead.
pub fn checked_status(status: StatusCode, class: Option<u16>) -> Result<StatusCode, Problem> {
    match class {
        Some(c) if status.as_u16() / 100 != c => Err(Problem::new(ProblemKind::Internal)
            .with_internal(format!(
                "the handler answered {status} in a response declared for {c}XX"
            ))),
        _ => Ok(status),
    }
}

/// Serialises a body for storage.
pub fn encode_json<T: Serialize + ?Sized>(body: &T) -> Result<Vec<u8>, CodecError> {
    serde_json::to_vec(body).map_err(|e| CodecError(format!("encoding a stored body: {e}")))
}

/// Rebuilds a stored JSON body.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    serde_json::from_slice(bytes).map_err(|e| CodecError(format!("decoding a stored body: {e}")))
}

/// Rebuilds a stored text body.
pub fn decode_text(bytes: &[u8]) -> Result<String, CodecError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| CodecError("a stored text body is not UTF-8".to_owned()))
}

/// Headers for the stored form of a response: its `Content-Type`.
pub fn stored_headers(media_type: Option<&'static str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(media_type) = media_type {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
    }
    headers
}

/// Adds a typed header to the stored form of a response.
pub fn encode_header<V: Display + ?Sized>(
    headers: &mut HeaderMap,
    name: &'static str,
    value: &V,
) -> Result<(), CodecError> {
    let value = HeaderValue::from_str(&value.to_string())
        .map_err(|_| CodecError(format!("header `{name}` has an invalid value")))?;
    headers.append(HeaderName::from_static(name), value);
    Ok(())
}

/// Rebuilds a typed header from a stored response; `None` when it was not stored.
pub fn decode_header<T: DeserializeOwned>(
    stored: &StoredResponse,
    name: &str,
) -> Result<Option<T>, CodecError> {
    match stored.header(name) {
        None => Ok(None),
        Some(raw) => parse_param("header", name, raw)
            .map(Some)
            .map_err(|_| CodecError(format!("stored header `{name}` has an invalid value"))),
    }
}

/// Rebuilds a required typed header from a stored response.
pub fn decode_required_header<T: DeserializeOwned>(
    stored: &StoredResponse,
    name: &str,
) -> Result<T, CodecError> {
    decode_header(stored, name)?
        .ok_or_else(|| CodecError(format!("stored response lacks header `{name}`")))
}

/// A status read back from the store.
pub fn stored_status(stored: &StoredResponse) -> Result<StatusCode, CodecError> {
    StatusCode::from_u16(stored.status)
        .map_err(|_| CodecError(format!("stored status {} is invalid", stored.status)))
}

/// The error for a stored status that the operation does not declare as a success.
pub fn undeclared_status(operation: &str, status: u16) -> CodecError {
    CodecError(format!(
        "status {status} is not a stored response of `{operation}`"
    ))
}

/// Answers a request that was refused before its handler ran (401, 400, 413, 403), logging the
/// one line for the request.
pub fn reject(operation: &'static str, owner: Option<&str>, problem: Problem) -> Response {
    let outcome = match problem.kind() {
        ProblemKind::Unauthenticated => "unauthenticated",
        ProblemKind::Forbidden => "forbidden",
        ProblemKind::PayloadTooLarge => "payload_too_large",
        ProblemKind::KeyMissing | ProblemKind::KeyInvalid | ProblemKind::InvalidRequest => {
            "invalid_request"
        }
        _ => "rejected",
    };
    let response = problem.into_response();
    log(operation, owner.unwrap_or(""), outcome, response.status());
    response
}

/// Answers an idempotent request from the executor's result: replays are marked, problems are
/// problem+json, handler errors are an opaque 500 (cause logged).
pub fn respond_idempotent<R: IntoResponse>(
    operation: &'static str,
    owner: &str,
    result: Result<Outcome<R>, ExecuteError<HandlerError>>,
) -> Response {
    let (outcome, response) = match result {
        Ok(outcome) => {
            let replayed = outcome.replayed();
            let mut response = outcome.response.into_response();
            if replayed {
                crate::http::mark_replayed(&mut response);
            }
            (if replayed { "replayed" } else { "executed" }, response)
        }
        Err(ExecuteError::Problem(problem)) => ("idempotency_problem", problem.into_response()),
        Err(ExecuteError::Handler(e)) => handler_failed(operation, &e),
    };
    log(operation, owner, outcome, response.status());
    response
}

/// Answers a request of an operation that is not idempotent.
pub fn respond(
    operation: &'static str,
    owner: &str,
    result: Result<impl IntoResponse, HandlerError>,
) -> Response {
    let (outcome, response) = match result {
        Ok(response) => ("executed", response.into_response()),
        Err(e) => handler_failed(operation, &e),
    };
    log(operation, owner, outcome, response.status());
    response
}

fn handler_failed(operation: &'static str, e: &HandlerError) -> (&'static str, Response) {
    tracing::error!(operation, error = %e, "handler failed");
    // 503 when the database was unreachable (nothing committed), else 500; the cause is logged
    // above and never sent.
    (
        "handler_error",
        Problem::new(e.to_problem().kind()).into_response(),
    )
}

fn log(operation: &'static str, owner: &str, outcome: &'static str, status: StatusCode) {
    tracing::info!(
        operation,
        owner,
        outcome,
        status = status.as_u16(),
        "request"
    );
}

/// Where a value sits in a request, for validation messages: `body.tags[2]`, `query.limit`.
///
/// Built on the stack as validation descends, so nothing is allocated unless a check fails.
#[derive(Debug, Clone, Copy)]
pub enum FieldPath<'a> {
    /// The start: `body`, or a parameter such as `query.limit`.
    Root(&'a str),
    /// A property of an object.
    Property(&'a FieldPath<'a>, &'a str),
    /// An element of an array.
    Index(&'a FieldPath<'a>, usize),
}

impl Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldPath::Root(name) => f.write_str(name),
            FieldPath::Property(parent, name) => write!(f, "{parent}.{name}"),
            FieldPath::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Generated request types whose schemas carry validation keywords (`minLength`, `maximum`,
/// `minItems`, …) implement this; the generated extractors call it and answer `Err` with a 400
/// problem before authorization and before any idempotency claim.
pub trait Validate {
    /// Checks the value against its schema's validation keywords; `Err` holds the client-facing
    /// detail, naming the path of the first failing value.
    fn validate(&self, path: &FieldPath<'_>) -> Result<(), String>;
}

/// A numeric bound of `minimum`/`maximum` (`exclusiveMinimum`/`exclusiveMaximum` make it
/// exclusive: the 3.0 boolean form and the 3.1 numeric form both end here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// The value may equal the bound.
    Inclusive(f64),
    /// The value must differ from the bound.
    Exclusive(f64),
}

/// `minLength`: at least `min` characters (Unicode scalar values, as JSON Schema counts).
pub fn check_min_length(path: &FieldPath<'_>, value: &str, min: u64) -> Result<(), String> {
    if (value.chars().count() as u64) < min {
        return Err(format!(
            "{path}: must have at least {min} character{}",
            plural(min)
        ));
    }
    Ok(())
}

/// `maxLength`: at most `max` characters (Unicode scalar values).
pub fn check_max_length(path: &FieldPath<'_>, value: &str, max: u64) -> Result<(), String> {
    if value.chars().count() as u64 > max {
        return Err(format!(
            "{path}: must have at most {max} character{}",
            plural(max)
        ));
    }
    Ok(())
}

/// `minimum` / `exclusiveMinimum`.
pub fn check_minimum(path: &FieldPath<'_>, value: f64, bound: Bound) -> Result<(), String> {
    match bound {
        Bound::Inclusive(min) if value < min || value.is_nan() => {
            Err(format!("{path}: must be at least {min}"))
        }
        Bound::Exclusive(min) if value <= min || value.is_nan() => {
            Err(format!("{path}: must be greater than {min}"))
        }
        _ => Ok(()),
    }
}

/// `maximum` / `exclusiveMaximum`.
pub fn check_maximum(path: &FieldPath<'_>, value: f64, bound: Bound) -> Result<(), String> {
    match bound {
        Bound::Inclusive(max) if value > max || value.is_nan() => {
            Err(format!("{path}: must be at most {max}"))
        }
        Bound::Exclusive(max) if value >= max || value.is_nan() => {
            Err(format!("{path}: must be less than {max}"))
        }
        _ => Ok(()),
    }
}

/// `multipleOf`: the quotient is an integer (within `f64` rounding, so that `0.3` is a
/// multiple of `0.1`).
pub fn check_multiple_of(path: &FieldPath<'_>, value: f64, factor: f64) -> Result<(), String> {
    let quotient = value / factor;
    let ok = quotient.is_finite()
        && (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0);
    if !ok {
        return Err(format!("{path}: must be a multiple of {factor}"));
    }
    Ok(())
}

/// `minItems`.
pub fn check_min_items(path: &FieldPath<'_>, len: usize, min: u64) -> Result<(), String> {
    if (len as u64) < min {
        return Err(format!(
            "{path}: must have at least {min} item{}",
            plural(min)
        ));
    }
    Ok(())
}

/// `maxItems`.
pub fn check_max_items(path: &FieldPath<'_>, len: usize, max: u64) -> Result<(), String> {
    if len as u64 > max {
        return Err(format!(
            "{path}: must have at most {max} item{}",
            plural(max)
        ));
    }
    Ok(())
}

/// `uniqueItems: true`: no two elements are equal (quadratic; request arrays are small, and
/// not every element type can be hashed or ordered).
pub fn check_unique_items<T: PartialEq>(path: &FieldPath<'_>, items: &[T]) -> Result<(), String> {
    for (i, item) in items.iter().enumerate() {
        if let Some(j) = items[..i].iter().position(|earlier| earlier == item) {
            return Err(format!(
                "{path}: items must be unique ([{j}] and [{i}] are equal)"
            ));
        }
    }
    Ok(())
}

/// `minProperties` (maps only).
pub fn check_min_properties(path: &FieldPath<'_>, len: usize, min: u64) -> Result<(), String> {
    if (len as u64) < min {
        return Err(format!(
            "{path}: must have at least {min} propert{}",
            if min == 1 { "y" } else { "ies" }
        ));
    }
    Ok(())
}

/// `maxProperties` (maps only).
pub fn check_max_properties(path: &FieldPath<'_>, len: usize, max: u64) -> Result<(), String> {
    if len as u64 > max {
        return Err(format!(
            "{path}: must have at most {max} propert{}",
            if max == 1 { "y" } else { "ies" }
        ));
    }
    Ok(())
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_messages_name_the_path() {
        let body = FieldPath::Root("body");
        let tags = FieldPath::Property(&body, "tags");
        let tag = FieldPath::Index(&tags, 2);
        assert_eq!(tag.to_string(), "body.tags[2]");
        // Characters, not bytes: "é" is one character, two bytes.
        assert!(check_max_length(&tag, "éé", 2).is_ok());
        assert_eq!(
            check_min_length(&FieldPath::Property(&body, "name"), "", 1).unwrap_err(),
            "body.name: must have at least 1 character"
        );
        let limit = FieldPath::Root("query.limit");
        assert!(check_minimum(&limit, 1.0, Bound::Inclusive(1.0)).is_ok());
        assert_eq!(
            check_minimum(&limit, 1.0, Bound::Exclusive(1.0)).unwrap_err(),
            "query.limit: must be greater than 1"
        );
        assert_eq!(
            check_maximum(&limit, 101.0, Bound::Inclusive(100.0)).unwrap_err(),
            "query.limit: must be at most 100"
        );
        assert!(check_maximum(&limit, f64::NAN, Bound::Inclusive(100.0)).is_err());
        assert!(check_multiple_of(&limit, 0.3, 0.1).is_ok());
        assert!(check_multiple_of(&limit, 7.0, 2.0).is_err());
        assert!(check_min_items(&tags, 0, 1).is_err());
        assert!(check_max_items(&tags, 3, 3).is_ok());
        assert_eq!(
            check_unique_items(&tags, &["a", "b", "a"]).unwrap_err(),
            "body.tags: items must be unique ([0] and [2] are equal)"
        );
        assert!(check_min_properties(&body, 0, 1).is_err());
        assert!(check_max_properties(&body, 2, 1).is_err());
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
    fn scopes_of_different_values_differ() {
        assert_eq!(resource_scope(&[]), "");
        assert_eq!(resource_scope(&[&"w_1"]), "w_1");
        let a = resource_scope(&[&"a/b", &"c"]);
        let b = resource_scope(&[&"a", &"b/c"]);
        assert_ne!(a, b);
        assert_eq!(resource_scope(&[&"50%", &7]), "50%25/7");
    }

    #[test]
    fn repeated_query_values_are_400_unless_arrays() {
        let uri: http::Uri = "/w?tag=a&tag=b%20c&limit=3".parse().unwrap();
        let pairs = query_pairs(&uri).unwrap();
        assert_eq!(query_values(&pairs, "tag"), ["a", "b c"]);
        assert_eq!(query_value(&pairs, "limit").unwrap(), Some("3"));
        assert_eq!(query_value(&pairs, "none").unwrap(), None);
        assert_eq!(query_value(&pairs, "tag").unwrap_err().kind().status(), 400);
    }

    #[test]
    fn status_classes_are_enforced() {
        assert!(checked_status(StatusCode::NOT_FOUND, Some(4)).is_ok());
        assert!(checked_status(StatusCode::OK, Some(4)).is_err());
        assert!(checked_status(StatusCode::OK, None).is_ok());
    }
}

//! What only `idemgen build` output names: the traits that describe an operation, the pipeline's
//! axum handlers a generated `router` mounts, the resource scope, the pieces of response codecs,
//! and the `Validate` checks, each rule in one function.
//!
//! Not part of the runtime's API: hidden from its documentation (as progenitor-client hides its
//! helpers) and free to change with the generator that calls it. The top layer: it imports every
//! module below it and nothing imports it.

use std::fmt::Display;
use std::sync::OnceLock;

use http::StatusCode;
use serde::Serialize;

pub use crate::auth::{ApiKeyIn, Requirement, Scheme, SchemeKind, Security};
pub use crate::operation::{Idempotent, Operation};
use crate::problem::Problem;
pub use crate::request::RequestParts;
pub use crate::response::{CodecError, Encode, EncodedResponse, NoDeclaredError};
pub use crate::serve::{
    PlainEndpoint, TxEndpoint, idempotent, method_not_allowed, not_found, plain, transactional,
};
pub use idemgen_protocol::codegen::{
    UnknownValue, deserialize_some, double_option, is_none, nullable, some,
};
pub use idemgen_protocol::{FilePart, KeyHeader};

/// What a generated `Operation::extract` returns.
pub type Extracted<T> = Result<T, Problem>;

/// What a validation check returns: `Err` is the client-facing detail.
pub type Checked = Result<(), String>;

/// What a generated `Encode::encode` returns.
pub type Encoded = Result<EncodedResponse, CodecError>;

/// A response with a JSON body and the declared `code`.
pub fn json<T: Serialize + ?Sized>(code: u16, media_type: &'static str, body: &T) -> Encoded {
    EncodedResponse::json(status(code), media_type, body)
}

/// A response with a form body (`application/x-www-form-urlencoded`) and the declared `code`.
pub fn form<T: Serialize + ?Sized>(code: u16, media_type: &'static str, body: &T) -> Encoded {
    let text = serde_urlencoded::to_string(body)
        .map_err(|e| CodecError(format!("encoding a form body: {e}")))?;
    Ok(EncodedResponse::bytes(status(code), media_type, text))
}

/// A response with a raw body and the declared `code`.
pub fn bytes(code: u16, media_type: &'static str, body: impl Into<Vec<u8>>) -> Encoded {
    Ok(EncodedResponse::bytes(status(code), media_type, body))
}

/// A response without a body and the declared `code`.
pub fn empty(code: u16) -> Encoded {
    Ok(EncodedResponse::empty(status(code)))
}

/// The status of a declared code (100..=599, as the IR guarantees); anything else is 500.
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

/// A status a handler chose for a range (`4XX`: `class` 4) or `default` (`class` `None`)
/// response, checked: inside its class, and never one of the statuses only the pipeline answers
/// (`idempotent` operations own more of them). Anything else is a handler bug, answered 500.
pub fn checked_status(
    status: StatusCode,
    class: Option<u16>,
    success: bool,
    idempotent: bool,
) -> Result<StatusCode, CodecError> {
    let code = status.as_u16();
    let in_class = match class {
        Some(c) => code / 100 == c,
        None => status.is_success() == success,
    };
    if !in_class {
        return Err(CodecError(format!(
            "the handler answered {status} in a response declared for {}",
            class.map_or_else(|| "`default`".to_owned(), |c| format!("{c}XX"))
        )));
    }
    if !success && idemgen_protocol::status::answered_by_runtime(code, idempotent) {
        return Err(CodecError(format!(
            "the handler answered {status}, which only the request pipeline answers"
        )));
    }
    Ok(status)
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

/// `minLength` of a file part (`format: binary`): at least `min` bytes.
pub fn check_min_size(path: &FieldPath<'_>, value: &FilePart, min: u64) -> Result<(), String> {
    if (value.len() as u64) < min {
        return Err(format!(
            "{path}: must have at least {min} byte{}",
            plural(min)
        ));
    }
    Ok(())
}

/// `maxLength` of a file part (`format: binary`): at most `max` bytes.
pub fn check_max_size(path: &FieldPath<'_>, value: &FilePart, max: u64) -> Result<(), String> {
    if value.len() as u64 > max {
        return Err(format!(
            "{path}: must have at most {max} byte{}",
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

/// A `pattern` keyword: an ECMA-262 regular expression, compiled on first use and then kept for
/// the life of the process. Generated code puts each one in a `static`, so every pattern is
/// compiled once, not per request.
///
/// Compiled by [`idemgen_protocol::pattern::compile`], the one rule `idemgen check` also applies
/// (rule `pattern-invalid`), so generated code never holds a pattern that does not compile.
///
/// A regular pattern (no lookaround, no backreference) is matched in time linear in the value,
/// `^(a+)+$` included; one that needs backtracking runs within a step budget
/// ([`idemgen_protocol::pattern::BACKTRACK_LIMIT`]), and a value the budget does not decide is
/// refused (400) rather than left to run (`idemgen check` reports the nested quantifiers that
/// lead there: `pattern-nested-quantifier`).
pub struct Pattern {
    source: &'static str,
    compiled: OnceLock<Result<idemgen_protocol::pattern::Regex, String>>,
}

impl Pattern {
    /// The pattern `source`, not compiled yet.
    pub const fn new(source: &'static str) -> Pattern {
        Pattern {
            source,
            compiled: OnceLock::new(),
        }
    }

    /// The pattern as written in the spec.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Whether `value` matches anywhere (JSON Schema patterns are not anchored: `^…$` anchors
    /// them); `Err` when the pattern does not compile (then on every call, compiled once).
    pub fn is_match(&self, value: &str) -> Result<bool, &str> {
        Ok(self.compiled()?.is_match(value))
    }

    fn compiled(&self) -> Result<&idemgen_protocol::pattern::Regex, &str> {
        self.compiled
            .get_or_init(|| idemgen_protocol::pattern::compile(self.source))
            .as_ref()
            .map_err(String::as_str)
    }
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pattern").field(&self.source).finish()
    }
}

/// `pattern`: the string matches the regular expression somewhere. A pattern that does not
/// compile (which `idemgen check` refuses, so generated code never has one) fails every value
/// with a detail that says so, rather than passing them unchecked or panicking.
pub fn check_pattern(path: &FieldPath<'_>, value: &str, pattern: &Pattern) -> Result<(), String> {
    match pattern.compiled().map(|regex| regex.matches(value)) {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(format!(
            "{path}: must match the pattern {}",
            pattern.source()
        )),
        Ok(Err(idemgen_protocol::pattern::Undecided)) => Err(format!(
            "{path}: could not be checked against the pattern {} within its matching budget",
            pattern.source()
        )),
        Err(e) => Err(format!(
            "{path}: cannot be checked: the pattern {} does not compile as an ECMA-262 regular expression ({e})",
            pattern.source()
        )),
    }
}

/// `const` (or an `enum` of one value): the value is `expected`, which the detail shows as the
/// spec writes it (`shown`, JSON: `"card"`, `5`, `true`).
pub fn check_const<T: PartialEq<U> + ?Sized, U: ?Sized>(
    path: &FieldPath<'_>,
    value: &T,
    expected: &U,
    shown: &str,
) -> Result<(), String> {
    if value != expected {
        return Err(format!("{path}: must be {shown}"));
    }
    Ok(())
}

/// `enum` of values that are not a Rust enum (numbers, booleans, a mix of scalars): `matched`
/// says whether the value equals one of them, which the detail shows as the spec writes them
/// (`shown`, JSON: `10, 20, 50`).
pub fn check_one_of(path: &FieldPath<'_>, matched: bool, shown: &str) -> Result<(), String> {
    if !matched {
        return Err(format!("{path}: must be one of {shown}"));
    }
    Ok(())
}

/// Alternatives of required properties (`anyOf`/`oneOf` of `required` lists beside an object's
/// properties): `held` of them are met; `exactly_one` (`oneOf`) wants one, else at least one
/// (`anyOf`). The detail shows them as `shown` (`` `amount` or `amount_string` ``).
pub fn check_requirements(
    path: &FieldPath<'_>,
    held: usize,
    exactly_one: bool,
    shown: &str,
) -> Result<(), String> {
    match (exactly_one, held) {
        (true, 1) | (false, 1..) => Ok(()),
        (true, _) => Err(format!("{path}: must have exactly one of {shown}")),
        (false, _) => Err(format!("{path}: must have {shown}")),
    }
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
        let kind = FieldPath::Property(&body, "kind");
        assert!(check_const(&kind, "card", "card", "\"card\"").is_ok());
        assert_eq!(
            check_const(&kind, "bank", "card", "\"card\"").unwrap_err(),
            "body.kind: must be \"card\""
        );
        assert_eq!(
            check_const(&limit, &4, &5, "5").unwrap_err(),
            "query.limit: must be 5"
        );
        assert!(check_const(&limit, &true, &true, "true").is_ok());
    }

    #[test]
    fn patterns_are_ecma_262_and_match_anywhere() {
        let body = FieldPath::Root("body");
        let last4 = FieldPath::Property(&body, "last4");
        static DIGITS: Pattern = Pattern::new("^[0-9]{4}$");
        assert!(check_pattern(&last4, "1234", &DIGITS).is_ok());
        assert_eq!(
            check_pattern(&last4, "abcd", &DIGITS).unwrap_err(),
            "body.last4: must match the pattern ^[0-9]{4}$"
        );
        // ECMA-262 `$` without the `m` flag: the end of the input, not before a final newline.
        assert!(check_pattern(&last4, "1234\n", &DIGITS).is_err());
        assert!(check_pattern(&last4, "12345", &DIGITS).is_err());
        // Unanchored: a match anywhere in the value will do.
        let lower = Pattern::new("[a-z]");
        assert!(check_pattern(&body, "ABCdEF", &lower).is_ok());
        assert!(check_pattern(&body, "ABC", &lower).is_err());
        // Lookahead, which Rust's `regex` crate lacks.
        let password = Pattern::new("^(?=.*[0-9]).{8,}$");
        assert!(check_pattern(&body, "abcdefg1", &password).is_ok());
        assert!(check_pattern(&body, "abcdefgh", &password).is_err());
        assert!(check_pattern(&body, "abc1", &password).is_err());
        // The `u` flag: `.` is one code point (an emoji is two UTF-16 units), `\u{…}` escapes.
        let one = Pattern::new("^.$");
        assert!(check_pattern(&body, "😀", &one).is_ok());
        assert!(check_pattern(&body, "é", &Pattern::new("^\\u{e9}$")).is_ok());
        assert!(check_pattern(&body, "", &Pattern::new("^$")).is_ok());
        // The pattern is compiled once and kept.
        assert!(DIGITS.compiled.get().is_some());
        assert_eq!(format!("{DIGITS:?}"), "Pattern(\"^[0-9]{4}$\")");
    }

    #[test]
    fn a_pattern_that_does_not_compile_fails_every_value_without_panicking() {
        let path = FieldPath::Root("query.q");
        let alternatives = "a|".repeat(idemgen_protocol::pattern::MAX_ALTERNATIVES + 1) + "a";
        let lookarounds = "(?=".repeat(idemgen_protocol::pattern::MAX_LOOKAROUND_DEPTH + 1)
            + "a"
            + &")".repeat(idemgen_protocol::pattern::MAX_LOOKAROUND_DEPTH + 1);
        let invalid = ["(", "[a-", "a{2,1}", "(?<n>a)(?<n>b)", "x**"];
        for source in invalid
            .iter()
            .copied()
            .chain([alternatives.as_str(), lookarounds.as_str()])
        {
            let source: &'static str = Box::leak(source.to_owned().into_boxed_str());
            let pattern = Pattern::new(source);
            for value in ["", "a", "(("] {
                let detail = check_pattern(&path, value, &pattern).unwrap_err();
                assert!(
                    detail.starts_with(&format!(
                        "query.q: cannot be checked: the pattern {source} does not compile as an ECMA-262 regular expression ("
                    )),
                    "{detail}"
                );
            }
        }
    }

    #[test]
    fn pattern_limits_count_structure_not_text() {
        // At the limits: compiled and matched (on a test thread's 2 MiB stack, in debug too).
        let alternatives = "a|".repeat(idemgen_protocol::pattern::MAX_ALTERNATIVES) + "b";
        let lookarounds = "(?=".repeat(idemgen_protocol::pattern::MAX_LOOKAROUND_DEPTH)
            + "."
            + &")".repeat(idemgen_protocol::pattern::MAX_LOOKAROUND_DEPTH);
        for (source, value) in [(alternatives, "b"), (lookarounds, "x")] {
            let pattern = Pattern::new(Box::leak(source.into_boxed_str()));
            assert_eq!(
                pattern.is_match(value),
                Ok(true),
                "{}",
                &pattern.source()[..20]
            );
        }
    }

    /// The generated check of `^(a+)+$` on a 41-character value that almost matches: a 400
    /// detail at once (a backtracking engine took 4.7 s at 26 characters, doubling per
    /// character), so no request holds a worker.
    #[test]
    fn a_catastrophic_pattern_is_answered_at_once() {
        static NESTED: Pattern = Pattern::new("^(a+)+$");
        let body = FieldPath::Root("body");
        let hostile = "a".repeat(40) + "!";
        let started = std::time::Instant::now();
        let detail = check_pattern(&body, &hostile, &NESTED).unwrap_err();
        assert_eq!(detail, "body: must match the pattern ^(a+)+$");
        assert!(check_pattern(&body, &"a".repeat(100_000), &NESTED).is_ok());
        // Microseconds for one pass; the bound only tells a pass from a backtracking run.
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// A pattern that needs backtracking (a lookahead) nesting a repetition, on a value that
    /// almost matches: refused within its budget, with a detail that says so.
    #[test]
    fn a_backtracking_pattern_is_refused_within_its_budget() {
        static LOOKING: Pattern = Pattern::new("^((?=a)a+)+$");
        let body = FieldPath::Root("body");
        let started = std::time::Instant::now();
        let detail = check_pattern(&body, &("a".repeat(40) + "!"), &LOOKING).unwrap_err();
        assert_eq!(
            detail,
            "body: could not be checked against the pattern ^((?=a)a+)+$ within its matching budget"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(check_pattern(&body, &"a".repeat(1000), &LOOKING).is_ok());
        assert!(
            check_pattern(&body, "b", &LOOKING)
                .unwrap_err()
                .contains("must match")
        );
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
    fn status_classes_are_enforced() {
        assert!(checked_status(StatusCode::NOT_FOUND, Some(4), false, true).is_ok());
        assert!(checked_status(StatusCode::OK, Some(4), false, true).is_err());
        assert!(checked_status(StatusCode::OK, None, true, true).is_ok());
        assert!(checked_status(StatusCode::CREATED, Some(2), true, true).is_ok());
        // `default` on the success side must be 2xx, on the error side must not be.
        assert!(checked_status(StatusCode::NOT_FOUND, None, true, false).is_err());
        assert!(checked_status(StatusCode::OK, None, false, false).is_err());
        // A `4XX` handler response may not say 410 for an idempotent operation (the protocol's
        // alone); 409 and 422 are shared with business conflicts (their type is checked later).
        assert!(checked_status(StatusCode::GONE, Some(4), false, true).is_err());
        assert!(checked_status(StatusCode::GONE, Some(4), false, false).is_ok());
        assert!(checked_status(StatusCode::CONFLICT, Some(4), false, true).is_ok());
        assert!(checked_status(StatusCode::UNPROCESSABLE_ENTITY, Some(4), false, true).is_ok());
        assert!(checked_status(StatusCode::UNAUTHORIZED, Some(4), false, false).is_err());
    }
}

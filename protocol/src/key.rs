//! Idempotency key syntax (protocol.md, "Key").
//!
//! A key is 1 to 255 characters of visible ASCII (0x21 to 0x7E). Clients send it either bare
//! (`Idempotency-Key: 4f1c…`, as Stripe-style clients do) or as an RFC 8941 structured-field string
//! (`Idempotency-Key: "4f1c…"`, as the IETF draft specifies); both normalise to the same key.
//! An operation may accept less than 255 characters (its spec's `maxLength`), and may read the key
//! from another header (`PayPal-Request-Id`): [`KeyHeader`] carries both.

use std::fmt;

/// The longest key accepted, in characters (= bytes: keys are ASCII).
pub const MAX_KEY_LEN: usize = 255;

/// The default name of the key header.
pub const DEFAULT_KEY_HEADER: &str = "Idempotency-Key";

/// Where an operation reads its key from, and how long the key may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHeader {
    /// The header name as the spec declares it (`Idempotency-Key`); matched case-insensitively.
    pub name: &'static str,
    /// The longest key accepted: the spec's `maxLength`, at most [`MAX_KEY_LEN`].
    pub max_len: usize,
}

impl KeyHeader {
    /// `Idempotency-Key`, up to 255 characters.
    pub const DEFAULT: KeyHeader = KeyHeader::new(DEFAULT_KEY_HEADER, MAX_KEY_LEN);

    /// A key header; `max_len` is capped at [`MAX_KEY_LEN`].
    pub const fn new(name: &'static str, max_len: usize) -> KeyHeader {
        KeyHeader {
            name,
            max_len: if max_len > MAX_KEY_LEN || max_len == 0 {
                MAX_KEY_LEN
            } else {
                max_len
            },
        }
    }

    /// Parses a header value under this header's limit.
    pub fn parse(&self, raw: &[u8]) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::parse_header_value_within(raw, self.max_len)
    }
}

/// A validated idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

/// Why a header value is not a valid key. The messages do not name the header (operations may
/// use another one); [`KeyError::detail`] does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No key header was sent.
    #[error("the idempotency key header is required for this operation")]
    Missing,
    /// The header was sent more than once.
    #[error("the idempotency key header must be sent exactly once")]
    Repeated,
    /// The key is empty.
    #[error("the idempotency key is empty")]
    Empty,
    /// The key is longer than the operation accepts (at most [`MAX_KEY_LEN`]).
    #[error("the idempotency key is longer than {max} characters")]
    TooLong {
        /// The longest key the operation accepts.
        max: usize,
    },
    /// The key contains a character outside 0x21..=0x7E.
    #[error("the idempotency key may contain only visible ASCII characters (0x21-0x7E)")]
    InvalidCharacter,
    /// A value starting with `"` is not a well-formed structured-field string.
    #[error("the idempotency key is not a valid structured-field string")]
    MalformedString,
}

impl KeyError {
    /// The client-facing description, naming the header the operation reads (`header`).
    pub fn detail(&self, header: &str) -> String {
        match self {
            KeyError::Missing => format!("the {header} header is required for this operation"),
            KeyError::Repeated => format!("the {header} header must be sent exactly once"),
            KeyError::Empty => format!("the {header} header is empty"),
            KeyError::TooLong { max } => {
                format!("the {header} header is longer than {max} characters")
            }
            KeyError::InvalidCharacter => {
                format!("the {header} header may contain only visible ASCII characters (0x21-0x7E)")
            }
            KeyError::MalformedString => {
                format!("the {header} header is not a valid structured-field string")
            }
        }
    }
}

impl IdempotencyKey {
    /// Parses a header value in either accepted form; surrounding spaces and tabs are ignored.
    pub fn parse_header_value(raw: &[u8]) -> Result<IdempotencyKey, KeyError> {
        Self::parse_header_value_within(raw, MAX_KEY_LEN)
    }

    /// Parses a header value, accepting at most `max_len` characters (capped at [`MAX_KEY_LEN`]).
    pub fn parse_header_value_within(
        raw: &[u8],
        max_len: usize,
    ) -> Result<IdempotencyKey, KeyError> {
        let trimmed = trim_ows(raw);
        let key = if trimmed.first() == Some(&b'"') {
            unquote_sf_string(trimmed)?
        } else {
            trimmed.to_vec()
        };
        Self::validate(key, max_len.min(MAX_KEY_LEN))
    }

    /// Validates an already-unquoted key.
    pub fn new(key: impl Into<String>) -> Result<IdempotencyKey, KeyError> {
        Self::validate(key.into().into_bytes(), MAX_KEY_LEN)
    }

    fn validate(bytes: Vec<u8>, max_len: usize) -> Result<IdempotencyKey, KeyError> {
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        if bytes.len() > max_len {
            return Err(KeyError::TooLong { max: max_len });
        }
        if !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(KeyError::InvalidCharacter);
        }
        // All bytes are ASCII, so this cannot fail.
        String::from_utf8(bytes)
            .map(IdempotencyKey)
            .map_err(|_| KeyError::InvalidCharacter)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn trim_ows(raw: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = raw.iter().position(|b| !is_ows(b)).unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &raw[start..end]
}

/// RFC 8941 §4.2.5: `"` then chars 0x20..=0x7E with `\"` and `\\` escapes, then `"`, and nothing
/// after it (parameters are not accepted).
fn unquote_sf_string(raw: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut iter = raw.iter().skip(1);
    while let Some(&b) = iter.next() {
        match b {
            b'\\' => match iter.next() {
                Some(&e @ (b'"' | b'\\')) => out.push(e),
                _ => return Err(KeyError::MalformedString),
            },
            b'"' => {
                return if iter.next().is_none() {
                    Ok(out)
                } else {
                    Err(KeyError::MalformedString)
                };
            }
            0x20..=0x7e => out.push(b),
            _ => return Err(KeyError::InvalidCharacter),
        }
    }
    Err(KeyError::MalformedString)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str, expect: Result<&str, KeyError>) {
        let got = IdempotencyKey::parse_header_value(raw.as_bytes());
        assert_eq!(
            got.as_ref().map(IdempotencyKey::as_str),
            expect.as_ref().map(|s| *s),
            "input {raw:?}"
        );
    }

    #[test]
    fn key_syntax() {
        check("4f1c-9a", Ok("4f1c-9a"));
        check("\"4f1c-9a\"", Ok("4f1c-9a"));
        check("  abc\t", Ok("abc"));
        check(r#""a\"b\\c""#, Ok(r#"a"b\c"#));
        check("a\"b", Ok("a\"b"));
        check("", Err(KeyError::Empty));
        check("\"\"", Err(KeyError::Empty));
        check("a b", Err(KeyError::InvalidCharacter));
        check("\"a b\"", Err(KeyError::InvalidCharacter));
        check("caf\u{e9}", Err(KeyError::InvalidCharacter));
        check("a\u{7f}", Err(KeyError::InvalidCharacter));
        check("\"abc", Err(KeyError::MalformedString));
        check("\"abc\";p=1", Err(KeyError::MalformedString));
        check(r#""a\nb""#, Err(KeyError::MalformedString));
        check(&"k".repeat(255), Ok(&"k".repeat(255)));
        check(&"k".repeat(256), Err(KeyError::TooLong { max: 255 }));
        check(
            &format!("\"{}\"", "k".repeat(256)),
            Err(KeyError::TooLong { max: 255 }),
        );
    }

    #[test]
    fn an_operation_may_accept_shorter_keys_under_another_header() {
        let paypal = KeyHeader::new("PayPal-Request-Id", 108);
        assert!(paypal.parse("k".repeat(108).as_bytes()).is_ok());
        let e = paypal.parse("k".repeat(109).as_bytes()).unwrap_err();
        assert_eq!(e, KeyError::TooLong { max: 108 });
        assert_eq!(
            e.detail(paypal.name),
            "the PayPal-Request-Id header is longer than 108 characters"
        );
        assert_eq!(
            KeyError::Missing.detail(paypal.name),
            "the PayPal-Request-Id header is required for this operation"
        );
        // A limit above the protocol's is capped; 0 means "not declared".
        assert_eq!(KeyHeader::new("K", 1000).max_len, MAX_KEY_LEN);
        assert_eq!(KeyHeader::new("K", 0).max_len, MAX_KEY_LEN);
    }

    #[test]
    fn control_characters_are_rejected() {
        for b in (0u8..0x20).chain([0x7f]) {
            if b == b' ' || b == b'\t' {
                continue;
            }
            let raw = [b'a', b, b'b'];
            assert!(
                IdempotencyKey::parse_header_value(&raw).is_err(),
                "byte {b:#x} accepted"
            );
        }
    }
}

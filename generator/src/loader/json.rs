//! Parses JSON text (RFC 8259) into the same [`Node`] tree as `yaml.rs`, with spans.
//!
//! Parser: `jsonc-parser` (dprint's; maintained, no dependencies), for its byte range on every
//! value and key; saphyr refuses valid JSON such as surrogate-pair escapes. All JSONC/JSON5
//! extensions are off, and its two leniencies left (non-JSON whitespace, raw control characters
//! in strings) are refused by a pass here. A lone surrogate escape is an error, not U+FFFD.

use std::collections::HashMap;

use jsonc_parser::ast::{ObjectPropName, Value as JsonValue};
use jsonc_parser::common::{Range, Ranged};
use jsonc_parser::errors::{ParseError, ParseErrorKind};
use jsonc_parser::{CollectOptions, ParseOptions, ParseStringErrorKind};

use super::node::{Key, Map, Node, Value};
use super::source::{Pos, Span};
use super::yaml::{MAX_DEPTH, SyntaxError};

/// Strict JSON: every extension of the parser off.
const STRICT: ParseOptions = ParseOptions {
    allow_comments: false,
    allow_loose_object_property_names: false,
    allow_trailing_commas: false,
    allow_missing_commas: false,
    allow_single_quoted_strings: false,
    allow_hexadecimal_numbers: false,
    allow_unary_plus_numbers: false,
    allow_bare_decimal_point_numbers: false,
    allow_non_finite_numbers: false,
    allow_extended_string_escapes: false,
};

/// Parses `text` as exactly one JSON value. A byte order mark at the start is skipped and takes
/// no column: the first character after it is at column 1, as editors show it.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut locator = Locator::new(body);
    let parsed = jsonc_parser::parse_to_ast(body, &CollectOptions::default(), &STRICT);
    // The parser accepted everything before its error (or the whole text): look there for what
    // it is lenient about, so that the first problem in the text is the one reported.
    let checked_up_to = match &parsed {
        Ok(_) => body.len(),
        Err(e) => e.range().start,
    };
    if let Some((offset, message)) = leniency(body, checked_up_to) {
        return Err(SyntaxError {
            message,
            pos: locator.pos(offset),
        });
    }
    let root = parsed.map_err(|e| SyntaxError {
        message: describe(&e),
        pos: locator.pos(e.range().start),
    })?;
    match root.value {
        Some(value) => convert(value, 0, &mut locator),
        None => Err(SyntaxError {
            message: "the file is empty".to_string(),
            pos: Pos { line: 1, col: 1 },
        }),
    }
}

/// Our wording for the parser's errors: lower-case sentence fragments, as `yaml.rs` gives them.
fn describe(error: &ParseError) -> String {
    match error.kind() {
        ParseErrorKind::CommentsNotAllowed => "comments are not allowed in JSON".into(),
        ParseErrorKind::TrailingCommasNotAllowed => {
            "a trailing comma is not allowed in JSON".into()
        }
        ParseErrorKind::SingleQuotedStringsNotAllowed => {
            "strings must be in double quotes in JSON".into()
        }
        ParseErrorKind::ExpectedStringObjectProperty => {
            "object keys must be strings in double quotes".into()
        }
        ParseErrorKind::NestingDepthExceeded => format!("nesting deeper than {MAX_DEPTH} levels"),
        ParseErrorKind::MultipleRootJsonValues => {
            "expected a single JSON value, found more after it".into()
        }
        // The detail is `d83d (unpaired high surrogate)` and the like.
        ParseErrorKind::String(ParseStringErrorKind::InvalidUnicodeEscapeSequence(detail)) => {
            match detail.split_once(" (") {
                Some((hex, why)) => format!(
                    "invalid Unicode escape `\\u{hex}`: {}",
                    why.trim_end_matches(')')
                ),
                None => format!("invalid Unicode escape `\\u{detail}`"),
            }
        }
        ParseErrorKind::UnexpectedWord => "unexpected word: a JSON value is an object, an array, \
            a string in double quotes, a number, `true`, `false` or `null`"
            .into(),
        ParseErrorKind::UnexpectedToken => "unexpected character".into(),
        kind => lower_first(&kind.to_string()),
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Finds, before `limit`, what strict JSON forbids and the parser lets through: whitespace other
/// than space, tab, line feed and carriage return between tokens, and unescaped control
/// characters (U+0000 to U+001F) inside strings. Returns the byte offset and a message.
fn leniency(text: &str, limit: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let limit = limit.min(bytes.len());
    let mut in_string = false;
    let mut i = 0;
    while i < limit {
        let b = bytes[i];
        if in_string {
            match b {
                b'"' => in_string = false,
                // The escaped character is ASCII in valid JSON; skipping one byte of anything
                // else only lands inside the string, which is all this pass needs to know.
                b'\\' => i += 1,
                0x00..=0x1F => {
                    return Some((
                        i,
                        format!(
                            "control character U+{b:04X} must be escaped in a JSON string (`\\n`, `\\t`, `\\u{b:04x}`)"
                        ),
                    ));
                }
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b' ' | b'\t' | b'\n' | b'\r' => {}
                0x0B | 0x0C | 0x80.. => {
                    let c = text.get(i..).and_then(|t| t.chars().next()).unwrap_or('?');
                    return Some((
                        i,
                        format!(
                            "unexpected character U+{:04X}: JSON whitespace is only space, tab, line feed and carriage return",
                            u32::from(c)
                        ),
                    ));
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Converts byte offsets into [`Pos`]itions (1-based line, 1-based column in characters), moving
/// forward through the text: the conversion visits offsets in increasing order, so the whole
/// document costs one pass.
struct Locator<'t> {
    text: &'t str,
    offset: usize,
    pos: Pos,
}

impl<'t> Locator<'t> {
    fn new(text: &'t str) -> Self {
        Locator {
            text,
            offset: 0,
            pos: Pos { line: 1, col: 1 },
        }
    }

    fn pos(&mut self, offset: usize) -> Pos {
        if offset < self.offset {
            // Not reached by the conversion's order; correct anyway, from the start.
            self.offset = 0;
            self.pos = Pos { line: 1, col: 1 };
        }
        let Some(skipped) = self.text.get(self.offset..offset) else {
            // Not a character boundary inside the text: nothing better than where we are.
            return self.pos;
        };
        for c in skipped.chars() {
            if c == '\n' {
                self.pos.line = self.pos.line.saturating_add(1);
                self.pos.col = 1;
            } else {
                self.pos.col = self.pos.col.saturating_add(1);
            }
        }
        self.offset = offset;
        self.pos
    }

    fn span(&mut self, range: Range) -> Span {
        let start = self.pos(range.start);
        let end = self.pos(range.end);
        Span { start, end }
    }
}

/// Builds our node from the parser's, `depth` collections deep. Recursion is bounded by
/// [`MAX_DEPTH`] (and the parser bounds its own); offsets are visited in increasing order.
fn convert(value: JsonValue<'_>, depth: usize, at: &mut Locator<'_>) -> Result<Node, SyntaxError> {
    match value {
        JsonValue::NullKeyword(n) => Ok(leaf(Value::Null, at.span(n.range))),
        JsonValue::BooleanLit(b) => Ok(leaf(Value::Bool(b.value), at.span(b.range))),
        JsonValue::StringLit(s) => Ok(leaf(Value::Str(s.value.into_owned()), at.span(s.range))),
        JsonValue::NumberLit(n) => {
            let span = at.span(n.range);
            number(n.value).map(|v| leaf(v, span)).ok_or(SyntaxError {
                message: format!("`{}` is not a number", n.value),
                pos: span.start,
            })
        }
        JsonValue::Array(array) => {
            let start = open(array.range, depth, at)?;
            let items = array
                .elements
                .into_iter()
                .map(|item| convert(item, depth + 1, at))
                .collect::<Result<Vec<_>, _>>()?;
            let end = at.pos(array.range.end);
            Ok(leaf(Value::Seq(items), Span { start, end }))
        }
        JsonValue::Object(object) => {
            let start = open(object.range, depth, at)?;
            let mut seen: HashMap<String, Pos> = HashMap::with_capacity(object.properties.len());
            let mut entries = Vec::with_capacity(object.properties.len());
            for property in object.properties {
                let (text, key_range) = match property.name {
                    ObjectPropName::String(s) => (s.value.into_owned(), s.range),
                    ObjectPropName::Word(w) => (w.value.to_owned(), w.range),
                };
                let key_span = at.span(key_range);
                if let Some(first) = seen.get(&text) {
                    return Err(SyntaxError {
                        message: format!(
                            "duplicate key `{text}` (first defined at line {})",
                            first.line
                        ),
                        pos: key_span.start,
                    });
                }
                seen.insert(text.clone(), key_span.start);
                let value = convert(property.value, depth + 1, at)?;
                entries.push((
                    Key {
                        text,
                        span: key_span,
                        plain: false,
                    },
                    value,
                ));
            }
            let end = at.pos(object.range.end);
            Ok(leaf(
                Value::Map(Map::from_entries(entries)),
                Span { start, end },
            ))
        }
    }
}

/// The start of a collection `depth` collections deep, refused past [`MAX_DEPTH`].
fn open(range: Range, depth: usize, at: &mut Locator<'_>) -> Result<Pos, SyntaxError> {
    let start = at.pos(range.start());
    if depth >= MAX_DEPTH {
        return Err(SyntaxError {
            message: format!("nesting deeper than {MAX_DEPTH} levels"),
            pos: start,
        });
    }
    Ok(start)
}

fn leaf(value: Value, span: Span) -> Node {
    Node { value, span }
}

/// A JSON number: an integer that fits an `i64` is [`Value::Int`]; any other number, integers
/// beyond `i64` included, is [`Value::Float`] (the nearest `f64`), as `yaml.rs` resolves them.
fn number(text: &str) -> Option<Value> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::Int(i));
    }
    text.parse::<f64>().ok().map(Value::Float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::yaml;

    fn err(text: &str) -> SyntaxError {
        match parse(text) {
            Ok(node) => panic!("{text:?} should not parse, got {node:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn spans_match_the_yaml_parser_on_json_text() {
        // Every existing diagnostic points where it did when JSON went through saphyr: the same
        // start for every node and key. (Ends are exact here; saphyr's end of the last value of
        // a flow mapping takes in the space before `}`.)
        for text in [
            include_str!("../../tests/fixtures/clean-3.0.json"),
            include_str!("../../tests/fixtures/key-missing.json"),
            "{\"a\": [1, 2.5, true, null, \"x\"],\n \"b\": {}, \"c\": []}",
            "{\n  \"é\": {\"ünï\": \"çødé\", \"n\": -12},\n  \"x\": [[], [{}]]\n}\n",
            "\r\n{\"crlf\": \"yes\",\r\n  \"k\": 1}\r\n",
        ] {
            let ours = flatten(&parse(text).expect("JSON parses"));
            let theirs = flatten(&yaml::parse(text).expect("YAML parses"));
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a, b, "{text}");
            }
            assert_eq!(ours.len(), theirs.len(), "{text}");
        }
    }

    #[test]
    fn spans_cover_exactly_the_written_text() {
        let text = "{\"k\": { \"v\": \"1.0.0\" }, \"n\": [ -1.5e2 ]}";
        let root = parse(text).expect("parses");
        let slice = |span: Span| -> String {
            let from = usize::try_from(span.start.col - 1).expect("col");
            let to = usize::try_from(span.end.col - 1).expect("col");
            text.chars().skip(from).take(to - from).collect()
        };
        let (key, k) = root.entry("k").expect("k");
        assert_eq!(slice(key.span), "\"k\"");
        assert_eq!(slice(k.span), "{ \"v\": \"1.0.0\" }");
        assert_eq!(slice(k.get("v").expect("v").span), "\"1.0.0\"");
        let n = root.get("n").expect("n");
        assert_eq!(slice(n.span), "[ -1.5e2 ]");
        assert_eq!(slice(n.as_seq().expect("seq")[0].span), "-1.5e2");
        assert_eq!(slice(root.span), text);
    }

    /// Every node and key of a tree as `line:col-line:col kind`, in document order.
    fn flatten(root: &Node) -> Vec<String> {
        let mut out = Vec::new();
        root.walk(|key, node| {
            if let Some(k) = key {
                out.push(format!("{:?} key {}", k.span.start, k.text));
            }
            let value = match &node.value {
                Value::Map(_) => "map".to_string(),
                Value::Seq(_) => "seq".to_string(),
                other => format!("{other:?}"),
            };
            out.push(format!("{:?} {value}", node.span.start));
        });
        out
    }

    #[test]
    fn surrogate_pairs_decode_and_lone_surrogates_are_errors() {
        let root = parse(r#"{"t": "\ud83d\udc4d", "e": "\u00e9\n"}"#).expect("parses");
        assert_eq!(root.get("t").and_then(Node::as_str), Some("👍"));
        assert_eq!(root.get("e").and_then(Node::as_str), Some("é\n"));
        for (text, message, pos) in [
            (
                "{\n  \"t\": \"ok \\ud83d then\"}",
                "invalid Unicode escape `\\ud83d`: unpaired high surrogate",
                Pos { line: 2, col: 12 },
            ),
            (
                r#"["\udc4d"]"#,
                "invalid Unicode escape `\\udc4d`: unpaired low surrogate",
                Pos { line: 1, col: 3 },
            ),
            (
                r#"["\ud83d\u0041"]"#,
                "invalid Unicode escape `\\ud83d`: high surrogate not followed by low surrogate",
                Pos { line: 1, col: 3 },
            ),
        ] {
            let e = err(text);
            assert_eq!(e.message, message, "{text}");
            assert_eq!(e.pos, pos, "{text}");
        }
    }

    #[test]
    fn numbers_resolve_like_yaml() {
        let root = parse("[1, -0, 1.5e3, 18446744073709551616, -9223372036854775808, 1E400]")
            .expect("parses");
        let items: Vec<&Value> = root
            .as_seq()
            .expect("array")
            .iter()
            .map(|n| &n.value)
            .collect();
        assert_eq!(items[0], &Value::Int(1));
        assert_eq!(items[1], &Value::Int(0));
        assert_eq!(items[2], &Value::Float(1500.0));
        assert_eq!(items[3], &Value::Float(18_446_744_073_709_551_616.0));
        assert_eq!(items[4], &Value::Int(i64::MIN));
        assert_eq!(items[5], &Value::Float(f64::INFINITY));
        let yaml = yaml::parse("[1, -0, 1.5e3, 18446744073709551616, -9223372036854775808, 1E400]")
            .expect("YAML parses");
        assert_eq!(root, yaml);
    }

    #[test]
    fn extensions_of_json_are_errors_at_their_position() {
        let cases: [(&str, &str, Pos); 13] = [
            ("[1, 2,]", "trailing comma", Pos { line: 1, col: 6 }),
            ("{\"a\": 1,\n}", "trailing comma", Pos { line: 1, col: 8 }),
            ("{\n// c\n\"a\": 1}", "comments", Pos { line: 2, col: 1 }),
            ("{\"a\": 1 /* c */}", "comments", Pos { line: 1, col: 9 }),
            ("{'a': 1}", "double quotes", Pos { line: 1, col: 2 }),
            ("{a: 1}", "keys must be strings", Pos { line: 1, col: 2 }),
            ("[0x1F]", "exadecimal", Pos { line: 1, col: 2 }),
            ("[NaN]", "unexpected character", Pos { line: 1, col: 2 }),
            ("[NaN ]", "unexpected word", Pos { line: 1, col: 2 }),
            ("[+1]", "plus", Pos { line: 1, col: 2 }),
            (
                "[\"a\tb\"]",
                "control character U+0009",
                Pos { line: 1, col: 4 },
            ),
            ("[1,\u{a0}2]", "U+00A0", Pos { line: 1, col: 4 }),
            ("{} {}", "single JSON value", Pos { line: 1, col: 4 }),
        ];
        for (text, fragment, pos) in cases {
            let e = err(text);
            assert!(
                e.message.contains(fragment),
                "{text:?}: `{}` lacks `{fragment}`",
                e.message
            );
            assert_eq!(e.pos, pos, "{text:?}: {}", e.message);
        }
        // Invalid escapes and leading zeros are the parser's own refusals.
        assert!(parse(r#"["\x41"]"#).is_err());
        assert!(parse("[01]").is_err());
        assert!(parse("[1.]").is_err());
        assert!(parse("[.5]").is_err());
        assert!(parse("[\"a\" \"b\"]").is_err());
    }

    #[test]
    fn the_first_problem_in_the_text_is_reported() {
        // A raw tab before a trailing comma: the tab, which comes first.
        let e = err("{\"a\": \"x\ty\",\n \"b\": [1,]}");
        assert!(e.message.contains("U+0009"), "{}", e.message);
        assert_eq!(e.pos, Pos { line: 1, col: 9 });
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let e = err("{\"a\": 1,\n \"b\": {\"a\": 2},\n \"a\": 3}");
        assert_eq!(e.message, "duplicate key `a` (first defined at line 1)");
        assert_eq!(e.pos, Pos { line: 3, col: 2 });
        // The same words as the YAML parser.
        let y = yaml::parse("a: 1\nb: {a: 2}\na: 3\n").expect_err("duplicate");
        assert_eq!(y.message, e.message);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        for text in [
            "[".repeat(10_000),
            "{\"a\":".repeat(10_000),
            format!("{}{}", "[".repeat(257), "]".repeat(257)),
        ] {
            let e = err(&text);
            assert_eq!(e.message, "nesting deeper than 256 levels");
            assert_eq!(e.pos.line, 1);
        }
        // Exactly at the limit is fine; one more is refused at the collection that opens it.
        let ok = format!("{}{}", "[".repeat(256), "]".repeat(256));
        assert!(parse(&ok).is_ok());
        let e = err(&format!("{}{}", "[".repeat(257), "]".repeat(257)));
        assert_eq!(e.pos, Pos { line: 1, col: 257 });
    }

    #[test]
    fn byte_order_mark_is_skipped_and_takes_no_column() {
        let root = parse("\u{FEFF}{\"a\": 1}").expect("parses");
        assert_eq!(root.span.start, Pos { line: 1, col: 1 });
        assert_eq!(
            root.entry("a").map(|(k, _)| k.span.start),
            Some(Pos { line: 1, col: 2 })
        );
        // Only at the start.
        assert!(parse("{\"a\":\u{FEFF} 1}").is_err());
    }

    #[test]
    fn empty_text_is_an_error() {
        for text in ["", "  \n\t\r\n", "\u{FEFF}"] {
            let e = err(text);
            assert_eq!(e.message, "the file is empty", "{text:?}");
            assert_eq!(e.pos, Pos { line: 1, col: 1 });
        }
    }

    #[test]
    fn scalars_and_strings_as_roots() {
        assert_eq!(
            parse("\"x\"").expect("parses").value,
            Value::Str("x".into())
        );
        assert_eq!(parse(" true ").expect("parses").value, Value::Bool(true));
        assert_eq!(parse("null").expect("parses").value, Value::Null);
        // Escaped quotes and backslashes do not end a string for the strictness pass.
        let root = parse(r#"{"q": "a\"b\\", "r": "\/"}"#).expect("parses");
        assert_eq!(root.get("q").and_then(Node::as_str), Some("a\"b\\"));
        assert_eq!(root.get("r").and_then(Node::as_str), Some("/"));
    }
}

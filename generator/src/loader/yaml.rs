//! Parses YAML 1.2 (and therefore JSON) text into a [`Node`] tree with spans, on top of
//! `saphyr-parser`'s event stream.
//!
//! Building our own tree rather than using `saphyr::MarkedYamlOwned` gives every mapping key a
//! span (diagnostics point at keys such as `responses:`), keeps key order, indexes large maps,
//! and lets us bound nesting depth and alias expansion so that hostile input cannot exhaust the
//! stack or memory.

use std::borrow::Cow;
use std::collections::HashMap;

use saphyr::Scalar;
use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span as YamlSpan};

use super::node::{Key, Map, Node, Value};
use super::source::{Pos, Span};

/// The deepest nesting of sequences and mappings accepted.
pub const MAX_DEPTH: usize = 256;
/// The most nodes that alias expansion (`*anchor`) may copy in one document.
pub const MAX_ALIAS_NODES: usize = 100_000;

/// Why a text could not be read as a single YAML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What went wrong, as a sentence fragment (`did not find expected key`).
    pub message: String,
    /// Where it went wrong.
    pub pos: Pos,
}

/// Converts a parser marker (1-based line, 0-based column) into a [`Pos`].
fn pos(mark: Marker) -> Pos {
    Pos {
        line: u32::try_from(mark.line()).unwrap_or(u32::MAX).max(1),
        col: u32::try_from(mark.col().saturating_add(1)).unwrap_or(u32::MAX),
    }
}

fn span(s: YamlSpan) -> Span {
    Span {
        start: pos(s.start),
        end: pos(s.end),
    }
}

/// A collection being built.
enum Open {
    Seq {
        start: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        start: Pos,
        anchor: usize,
        entries: Vec<(Key, Node)>,
        pending_key: Option<Key>,
        seen: HashMap<String, Pos>,
    },
}

struct Builder {
    stack: Vec<Open>,
    anchors: HashMap<usize, Node>,
    alias_budget: usize,
    root: Option<Node>,
    documents: usize,
}

/// Parses `text` as exactly one YAML document.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        alias_budget: MAX_ALIAS_NODES,
        root: None,
        documents: 0,
    };
    while let Some(event) = parser.next_event() {
        let (event, ev_span) = event.map_err(|e| SyntaxError {
            message: e.info().to_string(),
            pos: pos(*e.marker()),
        })?;
        builder.on_event(event, ev_span)?;
    }
    builder.root.ok_or(SyntaxError {
        message: "the file is empty".to_string(),
        pos: Pos { line: 1, col: 1 },
    })
}

impl Builder {
    fn on_event(&mut self, event: Event<'_>, ev_span: YamlSpan) -> Result<(), SyntaxError> {
        let at = pos(ev_span.start);
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => Ok(()),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(SyntaxError {
                        message: "expected a single YAML document, found a second one".into(),
                        pos: at,
                    });
                }
                Ok(())
            }
            Event::SequenceStart(anchor, _) => {
                self.check_depth(at)?;
                self.stack.push(Open::Seq {
                    start: at,
                    anchor,
                    items: Vec::new(),
                });
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                self.check_depth(at)?;
                self.stack.push(Open::Map {
                    start: at,
                    anchor,
                    entries: Vec::new(),
                    pending_key: None,
                    seen: HashMap::new(),
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let end = pos(ev_span.end).max(at);
                let (node, anchor) = match self.stack.pop() {
                    Some(Open::Seq {
                        start,
                        anchor,
                        items,
                    }) => (node(Value::Seq(items), start, end), anchor),
                    Some(Open::Map {
                        start,
                        anchor,
                        entries,
                        ..
                    }) => (
                        node(Value::Map(Map::from_entries(entries)), start, end),
                        anchor,
                    ),
                    None => {
                        return Err(SyntaxError {
                            message: "unbalanced collection end".into(),
                            pos: at,
                        });
                    }
                };
                self.insert(node, anchor)
            }
            Event::Scalar(text, style, anchor, tag) => {
                if self.expecting_key() {
                    let plain = style == ScalarStyle::Plain;
                    return self.insert_key(text.into_owned(), span(ev_span), anchor, plain);
                }
                let value = scalar_value(text, style, tag.as_ref());
                self.insert(
                    Node {
                        value,
                        span: span(ev_span),
                    },
                    anchor,
                )
            }
            Event::Alias(id) => {
                let Some(target) = self.anchors.get(&id) else {
                    return Err(SyntaxError {
                        message: "alias refers to an unknown anchor".into(),
                        pos: at,
                    });
                };
                let size = count_nodes(target, self.alias_budget);
                if size > self.alias_budget {
                    return Err(SyntaxError {
                        message: format!(
                            "alias expansion exceeds {MAX_ALIAS_NODES} nodes (a \"billion laughs\" document?)"
                        ),
                        pos: at,
                    });
                }
                self.alias_budget -= size;
                if self.expecting_key() {
                    let text = target.as_str().map(str::to_string).ok_or(SyntaxError {
                        message: "mapping keys must be scalars".into(),
                        pos: at,
                    })?;
                    return self.insert_key(text, span(ev_span), 0, false);
                }
                let copy = target.clone();
                self.insert(copy, 0)
            }
        }
    }

    fn check_depth(&self, at: Pos) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
                pos: at,
            });
        }
        Ok(())
    }

    fn expecting_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Open::Map {
                pending_key: None,
                ..
            })
        )
    }

    fn insert_key(
        &mut self,
        text: String,
        key_span: Span,
        anchor: usize,
        plain: bool,
    ) -> Result<(), SyntaxError> {
        if anchor > 0 {
            self.anchors.insert(
                anchor,
                Node {
                    value: Value::Str(text.clone()),
                    span: key_span,
                },
            );
        }
        if let Some(Open::Map {
            pending_key, seen, ..
        }) = self.stack.last_mut()
        {
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
            *pending_key = Some(Key {
                text,
                span: key_span,
                plain,
            });
        }
        Ok(())
    }

    fn insert(&mut self, node: Node, anchor: usize) -> Result<(), SyntaxError> {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
                Ok(())
            }
            Some(Open::Seq { items, .. }) => {
                items.push(node);
                Ok(())
            }
            Some(Open::Map {
                entries,
                pending_key,
                ..
            }) => match pending_key.take() {
                Some(key) => {
                    entries.push((key, node));
                    Ok(())
                }
                None => Err(SyntaxError {
                    message: "mapping keys must be scalars".into(),
                    pos: node.span.start,
                }),
            },
        }
    }
}

fn node(value: Value, start: Pos, end: Pos) -> Node {
    Node {
        value,
        span: Span { start, end },
    }
}

/// Resolves a scalar with the YAML 1.2 core schema; quoted scalars are always strings.
fn scalar_value(
    text: Cow<'_, str>,
    style: ScalarStyle,
    tag: Option<&Cow<'_, saphyr_parser::Tag>>,
) -> Value {
    let raw = text.to_string();
    match Scalar::parse_from_cow_and_metadata(text, style, tag) {
        Some(Scalar::Null) => Value::Null,
        Some(Scalar::Boolean(b)) => Value::Bool(b),
        Some(Scalar::Integer(i)) => Value::Int(i),
        Some(Scalar::FloatingPoint(f)) => Value::Float(f.into_inner()),
        Some(Scalar::String(s)) => Value::Str(s.into_owned()),
        None => Value::Str(raw),
    }
}

/// Counts the nodes of `node`, stopping early once the count passes `limit`.
fn count_nodes(node: &Node, limit: usize) -> usize {
    let mut count = 0usize;
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        count += 1;
        if count > limit {
            return count;
        }
        match &n.value {
            Value::Seq(items) => stack.extend(items.iter()),
            Value::Map(m) => stack.extend(m.entries().iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_text_and_span() {
        let root = parse("responses:\n  200:\n    description: ok\n").expect("parses");
        let (key, value) = root.entry("responses").expect("responses");
        assert_eq!(key.span.start, Pos { line: 1, col: 1 });
        let (status, _) = value.entry("200").expect("status key is text");
        assert_eq!(status.span.start, Pos { line: 2, col: 3 });
    }

    #[test]
    fn json_flow_style_is_read() {
        let root = parse("{\"a\": [1, 2.5, true, null, \"x\"],\n \"b\": {}}").expect("parses");
        let a = root.get("a").and_then(Node::as_seq).expect("a");
        assert_eq!(a[0].value, Value::Int(1));
        assert_eq!(a[1].value, Value::Float(2.5));
        assert_eq!(a[2].value, Value::Bool(true));
        assert_eq!(a[3].value, Value::Null);
        assert_eq!(a[4].value, Value::Str("x".into()));
        assert_eq!(
            root.entry("b").map(|(k, _)| k.span.start),
            Some(Pos { line: 2, col: 2 })
        );
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let root = parse("a: \"true\"\nb: '12'\n").expect("parses");
        assert_eq!(root.get("a").and_then(Node::as_str), Some("true"));
        assert_eq!(root.get("b").and_then(Node::as_str), Some("12"));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = parse("a: 1\nb: 2\na: 3\n").expect_err("duplicate");
        assert!(err.message.contains("duplicate key `a`"), "{}", err.message);
        assert_eq!(err.pos, Pos { line: 3, col: 1 });
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        // The parser's own flow-level limit or ours, whichever trips first: an error either way.
        let flow = "[".repeat(10_000);
        let err = parse(&flow).expect_err("too deep");
        assert!(
            err.message.contains("nesting") || err.message.contains("recursion limit"),
            "{}",
            err.message
        );
        let block: String = (0..1_000)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        let err = parse(&block).expect_err("too deep");
        assert!(
            err.message.contains("nesting deeper than 256"),
            "{}",
            err.message
        );
    }

    #[test]
    fn aliases_copy_their_anchor_and_bombs_are_refused() {
        let root = parse("a: &x {k: v}\nb: *x\n").expect("parses");
        assert_eq!(
            root.get("b")
                .and_then(|b| b.get("k"))
                .and_then(Node::as_str),
            Some("v")
        );
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&bomb).expect_err("bomb");
        assert!(err.message.contains("alias expansion"), "{}", err.message);
    }

    #[test]
    fn second_document_is_an_error() {
        let err = parse("a: 1\n---\nb: 2\n").expect_err("two documents");
        assert_eq!(err.pos.line, 2);
    }

    #[test]
    fn empty_text_is_an_error() {
        assert!(parse("").is_err());
        assert!(parse("# only a comment\n").is_err());
    }
}

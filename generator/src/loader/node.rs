//! The YAML/JSON tree the loader builds: plain values with a source span on every node and key.
//!
//! The tree is deliberately independent of the YAML crate: rules and the future code generator
//! walk these types only, so a parser upgrade touches `loader/yaml.rs` and nothing else.

use std::collections::HashMap;

use super::source::Span;

/// Maps with more entries than this get a hash index for key look-ups.
const INDEX_THRESHOLD: usize = 12;

/// One node of a loaded document: a value and where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value of the node.
    pub value: Value,
    /// Where the node is written in its file.
    pub span: Span,
}

/// The value of a [`Node`], resolved with the YAML 1.2 core schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`, `~` or an empty plain scalar.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in an `i64`.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string, including every quoted scalar.
    Str(String),
    /// A sequence (JSON array).
    Seq(Vec<Node>),
    /// A mapping (JSON object), in source order.
    Map(Map),
}

/// A mapping key: its text as written (`200` stays `"200"`) and its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The scalar text of the key.
    pub text: String,
    /// Where the key is written.
    pub span: Span,
    /// Whether the key is a plain YAML scalar (unquoted: `200:`), which YAML reads as a number
    /// when it looks like one; JSON keys are always strings.
    pub plain: bool,
}

/// A mapping that keeps source order and finds keys in constant time when it is large.
#[derive(Debug, Clone, Default)]
pub struct Map {
    entries: Vec<(Key, Node)>,
    index: Option<HashMap<String, usize>>,
}

impl PartialEq for Map {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Map {
    /// Builds a map from entries whose keys are unique.
    pub fn from_entries(entries: Vec<(Key, Node)>) -> Self {
        let index = (entries.len() > INDEX_THRESHOLD).then(|| {
            entries
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.text.clone(), i))
                .collect()
        });
        Map { entries, index }
    }

    /// The entries in source order.
    pub fn entries(&self) -> &[(Key, Node)] {
        &self.entries
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry (key and value) for `key`, matched exactly.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        let found = match &self.index {
            Some(index) => index.get(key).and_then(|&i| self.entries.get(i)),
            None => self.entries.iter().find(|(k, _)| k.text == key),
        };
        found.map(|(k, v)| (k, v))
    }

    /// The value for `key`, matched exactly.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }
}

impl Node {
    /// The mapping inside this node, if it is one.
    pub fn as_map(&self) -> Option<&Map> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The sequence inside this node, if it is one.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// The string inside this node, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer inside this node, if it is an integer.
    pub fn as_int(&self) -> Option<i64> {
        match self.value {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The boolean inside this node, if it is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.value {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value of `key` when this node is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map().and_then(|m| m.get(key))
    }

    /// The key and value of `key` when this node is a mapping.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        self.as_map().and_then(|m| m.entry(key))
    }

    /// The target of this node when it is a Reference Object (`{$ref: "..."}`).
    pub fn ref_target(&self) -> Option<&str> {
        self.get("$ref").and_then(Node::as_str)
    }

    /// A short name of the node's kind for messages: `a string`, `a mapping`, ...
    pub fn kind_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a sequence",
            Value::Map(_) => "a mapping",
        }
    }

    /// Calls `visit` on every node of the tree, parents before children, with each node's key
    /// when it is the value of a mapping entry. Iterative, so deep trees cannot overflow the stack.
    pub fn walk<'a>(&'a self, mut visit: impl FnMut(Option<&'a Key>, &'a Node)) {
        let mut stack: Vec<(Option<&'a Key>, &'a Node)> = vec![(None, self)];
        while let Some((key, node)) = stack.pop() {
            visit(key, node);
            match &node.value {
                Value::Map(m) => stack.extend(m.entries().iter().rev().map(|(k, v)| (Some(k), v))),
                Value::Seq(s) => stack.extend(s.iter().rev().map(|v| (None, v))),
                _ => {}
            }
        }
    }
}

impl Drop for Node {
    /// Drops deep trees iteratively so that a pathological document cannot overflow the stack.
    fn drop(&mut self) {
        let mut pending: Vec<Node> = Vec::new();
        take_children(&mut self.value, &mut pending);
        while let Some(mut node) = pending.pop() {
            take_children(&mut node.value, &mut pending);
        }
    }
}

fn take_children(value: &mut Value, pending: &mut Vec<Node>) {
    match value {
        Value::Seq(items) => pending.append(items),
        Value::Map(map) => {
            map.index = None;
            pending.extend(std::mem::take(&mut map.entries).into_iter().map(|(_, v)| v));
        }
        _ => {}
    }
}

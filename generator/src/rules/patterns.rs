//! `pattern-invalid`: every `pattern` of a schema is a regular expression the generated code can
//! enforce, compiled by the runtime's own rule (`idemgen_protocol::pattern::compile`). The walk
//! over every schema is shared: each keyword map it reaches is also given to [`super::values`]
//! (`default-invalid`, `discriminator-invalid`).

use std::collections::HashSet;

use idemgen_protocol::pattern::compile;

use super::{RuleId, Sink};
use crate::loader::{self, LoadedSpec, Node, NodeRef, Value, is_name_map_key};

/// What the keys of a mapping are in the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Keywords (`type`, `pattern`, `properties`, …).
    Keywords,
    /// Names (`properties`' property names, `schemas`' component names): a property named
    /// `pattern` is a schema, not a regular expression.
    Names,
}

/// Keys whose values are data, never schemas: the loader's (a `pattern` inside an example is part
/// of it), and JSON Schema's `examples` array.
fn is_data_key(key: &str) -> bool {
    loader::is_data_key(key) || key == "examples"
}

/// Reports every `pattern` keyword that does not compile, at its value (and runs the checks of
/// [`super::values`] on every keyword map): in the root document and
/// in everything its `$ref`s reach (each node once), skipping data (`example`, `examples`,
/// `default`, `enum`, `const`, `x-` extensions). The walk keeps its own stack.
pub(super) fn check(spec: &LoadedSpec, sink: &mut Sink<'_>) {
    let mut seen: HashSet<*const Node> = HashSet::new();
    let mut stack: Vec<(NodeRef<'_>, Keys)> = vec![(spec.root(), Keys::Keywords)];
    while let Some((at, keys)) = stack.pop() {
        let file = at.file;
        match (&at.node.value, keys) {
            (Value::Seq(items), _) => {
                stack.extend(
                    items
                        .iter()
                        .rev()
                        .map(|node| (NodeRef { file, node }, Keys::Keywords)),
                );
            }
            (Value::Map(map), Keys::Names) => {
                stack.extend(
                    map.entries()
                        .iter()
                        .rev()
                        .map(|(_, node)| (NodeRef { file, node }, Keys::Keywords)),
                );
            }
            (Value::Map(map), Keys::Keywords) => {
                if !seen.insert(std::ptr::from_ref(at.node)) {
                    continue;
                }
                super::values::check_map(spec, at, sink);
                let mut children = Vec::new();
                for (key, value) in map.entries() {
                    let key = key.text.as_str();
                    match (key, &value.value) {
                        ("$ref", Value::Str(reference)) => {
                            // Unresolved references are `unresolved-ref`'s.
                            if let Ok(target) = spec.resolve_ref(file, reference) {
                                children.push((target, Keys::Keywords));
                            }
                        }
                        ("pattern", _) => check_pattern(NodeRef { file, node: value }, sink),
                        _ if is_data_key(key) => {}
                        _ if is_name_map_key(key) => {
                            children.push((NodeRef { file, node: value }, Keys::Names));
                        }
                        _ => children.push((NodeRef { file, node: value }, Keys::Keywords)),
                    }
                }
                stack.extend(children.into_iter().rev());
            }
            _ => {}
        }
    }
}

/// One `pattern` value: a string that compiles.
fn check_pattern(value: NodeRef<'_>, sink: &mut Sink<'_>) {
    let message = match &value.node.value {
        Value::Str(source) => match compile(source) {
            Ok(regex) => {
                if idemgen_protocol::pattern::nested_quantifier(source) == Some(true) {
                    let how = if regex.is_linear() {
                        "the generated server matches it in time linear in the value, but a backtracking engine (most validators, browsers and clients) takes time exponential in the length of a value that almost matches"
                    } else if regex.is_bounded() {
                        "it needs a backtracking engine (a lookaround or a backreference); the generated server's stops at its step budget and refuses a value it did not decide with 400, so a value that almost matches can be refused although it matches"
                    } else {
                        "it needs a backtracking engine, and the generated server's has no budget for it: a value that almost matches takes time exponential in its length and can hold a worker"
                    };
                    sink.report(
                        RuleId::PatternNestedQuantifier,
                        super::at(value),
                        None,
                        format!(
                            "the pattern `{}` repeats a repetition: {how}",
                            shorten(source)
                        ),
                    );
                }
                return;
            }
            Err(e) => format!(
                "the pattern `{}` is not an ECMA-262 regular expression ({e}): the generated code cannot enforce it",
                shorten(source)
            ),
        },
        _ => format!(
            "`pattern` must be a string (an ECMA-262 regular expression), found {}",
            value.node.kind_name()
        ),
    };
    sink.report(RuleId::PatternInvalid, super::at(value), None, message);
}

/// `source`, cut to its first 80 characters (a message quotes it; a pathological one is long).
fn shorten(source: &str) -> String {
    match source.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &source[..end]),
        None => source.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgen_protocol::pattern::{MAX_ALTERNATIVES, MAX_LOOKAROUND_DEPTH};

    #[test]
    fn patterns_compile_as_the_runtime_compiles_them() {
        for ok in [
            "^[0-9]{4}$",
            "[a-z]",
            "^(?=.*[0-9]).{8,}$",
            "^\\p{Lu}",
            "^\\u{1F600}$",
        ] {
            assert!(compile(ok).is_ok(), "{ok}");
        }
        // Errors in both grammars (`\_` and a lone `{` are Annex B identity escapes: accepted).
        for bad in ["^([0-9]{4}$", "[z-a]", "(?<n>a)(?<n>b)"] {
            assert!(compile(bad).is_err(), "{bad}");
        }
        // The engine's stack: at the limits, then beyond them (refused before compiling).
        let alternatives = |n: usize| "a|".repeat(n) + "b";
        let lookarounds = |n: usize| "(?=".repeat(n) + "." + &")".repeat(n);
        assert!(compile(&alternatives(MAX_ALTERNATIVES)).is_ok());
        assert!(compile(&lookarounds(MAX_LOOKAROUND_DEPTH)).is_ok());
        assert_eq!(
            compile(&alternatives(50_000)).unwrap_err(),
            "more than 1000 alternatives, more than the engine's stack allows"
        );
        assert!(compile(&lookarounds(MAX_LOOKAROUND_DEPTH + 1)).is_err());
        // Escaped or in a class, `|` and `(?=` are characters.
        assert!(compile(&("\\|[|(?=]".repeat(2000) + "x")).is_ok());
        assert_eq!(shorten(&"é".repeat(100)), format!("{}…", "é".repeat(80)));
    }
}

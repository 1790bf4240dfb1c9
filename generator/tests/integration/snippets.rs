//! Every help snippet, followed literally, fixes what its finding reports: for each rule fixture,
//! each finding's snippet (the paragraph after the first of its help) is merged into the spec at
//! the finding's position, and the spec checked again must have no finding of that rule.
//!
//! Following literally means what a reader does with it:
//! - when the help says to *move*, *replace* or *remove*, the entry the finding points at goes
//!   first;
//! - a snippet starting at `paths` or `components` is pasted at the document root;
//! - otherwise, for each top-level key of the snippet, the nearest mapping around the finding
//!   that has that key gets the snippet's value merged in, else the innermost mapping around the
//!   finding gets the key;
//! - merging goes key by key in mappings; a list of objects with `name`s (parameters) merges
//!   item by item by name; anything else is replaced;
//! - a snippet that is a list of one mapping (`- name: …`) is merged into the list item around
//!   the finding.

use std::path::Path;

use idemgen::loader::node::{Node, Value as Yaml};
use idemgen::loader::source::Span;
use idemgen::{Config, RuleId};
use serde_json::Value;

use crate::common::rule_fixture;

/// Rules whose snippet is not a patch to paste, with why.
const NOT_PASTE: [(RuleId, &str); 13] = [
    (
        RuleId::CallbacksNotGenerated,
        "a warning that nothing is generated: the fix is code of the author's, or the rule turned off in idemgen.toml",
    ),
    (
        RuleId::KeywordNotEnforced,
        "a warning about a keyword the generated server does not check: the fix (another keyword, or a check in the handler) is the author's",
    ),
    (
        RuleId::PathUnroutable,
        "the fix is a new path key, and what its suffix meant moved into a method or a parameter: the API's author's",
    ),
    (
        RuleId::ParameterUnsupported,
        "a warning about a choice (change how the API serialises the parameter, or accept one string): either fix is the author's",
    ),
    (
        RuleId::TombstoneTargetInvalid,
        "the fix is naming the operation that created the resource, which only the author knows (the fixture has none)",
    ),
    (
        RuleId::RefSiblingsIgnored,
        "the fix is an edit of the referenced file, which the snippet names",
    ),
    (
        RuleId::MediaTypeUntyped,
        "a warning about a choice (serve JSON, or accept raw bytes): either fix is the author's",
    ),
    (
        RuleId::DefaultInvalid,
        "the right default (or none) is the author's choice among the schema's values",
    ),
    (
        RuleId::DiscriminatorInvalid,
        "which alternative a tag means is the author's choice",
    ),
    (
        RuleId::KeyFingerprinted,
        "the fix is removing a marker; the snippet shows the header without it beside one with it",
    ),
    (
        RuleId::FingerprintShapeChanged,
        "the fix is a version bump against a lock file beside the spec (tested in build.rs)",
    ),
    (
        RuleId::NoOperations,
        "the fix is pointing the check at the root document, not an edit of this one",
    ),
    (
        RuleId::UnresolvedRef,
        "the fix depends on which component the reference meant; the snippet shows the form",
    ),
];

fn json_of(node: &Node) -> Value {
    match &node.value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(i) => Value::from(*i),
        Yaml::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Yaml::Str(s) => Value::String(s.clone()),
        Yaml::Seq(items) => Value::Array(items.iter().map(json_of).collect()),
        Yaml::Map(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(k, v)| (k.text.clone(), json_of(v)))
                .collect(),
        ),
    }
}

/// A step of a path into the document.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn contains(outer: Span, inner: Span) -> bool {
    (outer.start.line, outer.start.col) <= (inner.start.line, inner.start.col)
        && (inner.end.line, inner.end.col) <= (outer.end.line, outer.end.col)
}

/// The path of the deepest node (or key) whose span contains `at`.
fn path_to(node: &Node, at: Span, path: &mut Vec<Step>) {
    match &node.value {
        Yaml::Map(map) => {
            for (key, value) in map.entries() {
                if contains(key.span, at) || contains(value.span, at) {
                    path.push(Step::Key(key.text.clone()));
                    path_to(value, at, path);
                    return;
                }
            }
        }
        Yaml::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                if contains(item.span, at) {
                    path.push(Step::Index(i));
                    path_to(item, at, path);
                    return;
                }
            }
        }
        _ => {}
    }
}

fn get_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

fn merge(into: &mut Value, from: &Value) {
    let named = |items: &[Value]| {
        !items.is_empty()
            && items
                .iter()
                .all(|i| i.get("name").is_some_and(Value::is_string))
    };
    if let (Value::Array(a), Value::Array(b)) = (&mut *into, from)
        && named(b)
    {
        for item in b {
            match a.iter_mut().find(|x| x.get("name") == item.get("name")) {
                Some(existing) => merge(existing, item),
                None => a.push(item.clone()),
            }
        }
        return;
    }
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// Removes the entry `path` ends in (its innermost mapping key).
fn remove(doc: &mut Value, path: &[Step]) {
    let Some(at) = path.iter().rposition(|s| matches!(s, Step::Key(_))) else {
        return;
    };
    let Step::Key(key) = &path[at] else {
        unreachable!()
    };
    if let Some(Value::Object(parent)) = get_mut(doc, &path[..at]) {
        parent.remove(key);
    }
}

/// Pastes `snippet` into `doc` around `path`, as the module docs say. A snippet that is a list
/// of one mapping (`- name: …`) is an item of the list around the finding, merged into it.
fn paste(doc: &mut Value, path: &[Step], snippet: &Value) {
    if let Value::Array(items) = snippet
        && let [item @ Value::Object(_)] = items.as_slice()
    {
        let item_path = (0..=path.len())
            .rev()
            .map(|n| &path[..n])
            .find(|p| matches!(p.last(), Some(Step::Index(_))))
            .expect("a list item encloses the finding");
        merge(get_mut(doc, item_path).expect("the item"), item);
        return;
    }
    let Value::Object(snippet) = snippet else {
        panic!("a snippet to paste is a mapping: {snippet}");
    };
    for (key, value) in snippet {
        if key == "paths" || key == "components" {
            merge(doc, &serde_json::json!({ key: value }));
            continue;
        }
        let ancestors: Vec<&[Step]> = (0..=path.len()).rev().map(|n| &path[..n]).collect();
        let has_key = ancestors.iter().find(|p| {
            get_mut(doc, p).is_some_and(|v| v.as_object().is_some_and(|m| m.contains_key(key)))
        });
        let target = has_key.copied().or_else(|| {
            ancestors
                .iter()
                .copied()
                .find(|p| get_mut(doc, p).is_some_and(|v| v.is_object()))
        });
        let object = get_mut(doc, target.expect("a mapping encloses the finding"))
            .and_then(Value::as_object_mut)
            .expect("a mapping");
        match object.get_mut(key) {
            Some(existing) => merge(existing, value),
            None => {
                object.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The fixture, checked, then each finding of its rule fixed by its snippet; the rule's
/// findings left afterwards.
fn findings_after_pasting(rule: RuleId) -> Vec<String> {
    let name = rule_fixture(rule);
    let path = Path::new("tests/fixtures").join(&name);
    let report = idemgen::check(&path, &Config::default()).expect("the fixture loads");
    let ours: Vec<_> = report.findings.iter().filter(|f| f.rule == rule).collect();
    assert!(!ours.is_empty(), "{name} reports {rule}");
    let text = std::fs::read_to_string(&path).unwrap();
    let tree = idemgen::loader::yaml::parse(&text).expect("the fixture parses");
    let mut doc = json_of(&tree);
    let root = report.spec.root_file();
    for finding in ours {
        assert_eq!(
            finding.file, root,
            "{rule}: a finding in the fixture itself"
        );
        let snippet = finding
            .help
            .split("\n\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{rule}: the help has a snippet: {}", finding.help));
        let snippet = json_of(
            &idemgen::loader::yaml::parse(snippet)
                .unwrap_or_else(|e| panic!("{rule}: the snippet parses: {e:?}\n{snippet}")),
        );
        let mut at = Vec::new();
        path_to(&tree, finding.span, &mut at);
        let prose = finding.help.split("\n\n").next().unwrap_or_default();
        if ["move", "replace", "remove"]
            .iter()
            .any(|verb| prose.starts_with(verb))
        {
            remove(&mut doc, &at);
        }
        paste(&mut doc, &at, &snippet);
    }
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(path.parent().unwrap()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    let fixed = dir.path().join(path.file_name().unwrap());
    std::fs::write(&fixed, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let again = idemgen::check(&fixed, &Config::default()).expect("the fixed spec loads");
    again
        .findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.message.clone())
        .collect()
}

#[test]
fn every_snippet_followed_literally_fixes_its_finding() {
    let mut broken = Vec::new();
    for rule in RuleId::ALL {
        if NOT_PASTE.iter().any(|(r, _)| *r == rule) {
            continue;
        }
        match std::panic::catch_unwind(|| findings_after_pasting(rule)) {
            Ok(left) if left.is_empty() => {}
            Ok(left) => broken.push(format!("{rule}: {left:?}")),
            Err(_) => broken.push(format!("{rule}: its snippet cannot be pasted")),
        }
    }
    assert!(
        broken.is_empty(),
        "snippets that do not fix:\n{}",
        broken.join("\n")
    );
}

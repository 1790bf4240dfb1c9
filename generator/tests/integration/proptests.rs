//! The loader and the rules never panic: on byte and line mutations of real fixtures, and on
//! random documents built from OpenAPI vocabulary (with `$ref`s that may dangle or loop).

use std::path::Path;

use idemgen::loader::{MemoryFs, load_with};
use idemgen::report::{Format, human, render};
use idemgen::{Config, check_loaded};
use proptest::prelude::*;

const FIXTURES: [&str; 4] = [
    include_str!("../fixtures/clean-3.1.yaml"),
    include_str!("../fixtures/clean-3.0.json"),
    include_str!("../fixtures/split/paths/widgets.yaml"),
    include_str!("../fixtures/rules/error-response-not-problem-json.yaml"),
];

/// Loads `text` as `spec.yaml` beside a valid `common.yaml`, checks it and renders every format.
fn exercise(text: &str) {
    let mut fs = MemoryFs::new();
    fs.insert("spec.yaml", text);
    fs.insert("common.yaml", include_str!("../fixtures/rules/common.yaml"));
    match load_with(&fs, Path::new("spec.yaml")) {
        Ok(spec) => {
            let report = check_loaded(spec, &Config::default());
            for format in [Format::Human, Format::Json, Format::Sarif, Format::Github] {
                let _ = render(&report, format, true);
            }
        }
        Err(e) => {
            assert!(
                !e.problems.is_empty(),
                "a load error has at least one problem"
            );
            let _ = human::render_load_error(&e, false);
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            prop::sample::select(b" :-{}[],'\"#&*!|>\n\t$~/".to_vec())
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in mutations {
        let len = bytes.len().max(1);
        match *m {
            Mutation::Flip(i, b) => {
                if let Some(x) = bytes.get_mut(i % len) {
                    *x = b;
                }
            }
            Mutation::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
            Mutation::Delete(i) => {
                if !bytes.is_empty() {
                    bytes.remove(i % len);
                }
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[derive(Debug, Clone)]
enum LineEdit {
    Remove(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Indent(usize, usize),
}

fn line_edit() -> impl Strategy<Value = LineEdit> {
    prop_oneof![
        any::<usize>().prop_map(LineEdit::Remove),
        any::<usize>().prop_map(LineEdit::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| LineEdit::Swap(a, b)),
        (any::<usize>(), 0usize..6).prop_map(|(a, n)| LineEdit::Indent(a, n)),
    ]
}

fn edit_lines(text: &str, edits: &[LineEdit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match *e {
            LineEdit::Remove(i) => {
                lines.remove(i % n);
            }
            LineEdit::Duplicate(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            LineEdit::Swap(a, b) => lines.swap(a % n, b % n),
            LineEdit::Indent(i, k) => {
                let l = &mut lines[i % n];
                *l = format!("{}{}", " ".repeat(k), l.trim_start());
            }
        }
    }
    lines.join("\n")
}

const KEYS: [&str; 32] = [
    "openapi",
    "paths",
    "/w",
    "/v",
    "post",
    "get",
    "put",
    "parameters",
    "$ref",
    "name",
    "in",
    "required",
    "schema",
    "type",
    "maxLength",
    "minLength",
    "responses",
    "400",
    "4XX",
    "content",
    "application/problem+json",
    "components",
    "x-idempotent",
    "x-idempotency-fingerprint-version",
    "x-idempotency-oops",
    "operationId",
    "header",
    "swagger",
    "style",
    "explode",
    "/a/{b}.json",
    "/a/{c}",
];
const STRINGS: [&str; 18] = [
    "3.1.0",
    "3.0.3",
    "2.0",
    "header",
    "Idempotency-Key",
    "string",
    "#/components/parameters/A",
    "#/components",
    "#",
    "common.yaml#/components/parameters/IdempotencyKey",
    "#/paths/~1w",
    "missing.yaml",
    "#/x/~2",
    "",
    "cookie",
    "query",
    "deepObject",
    "object",
];

fn json_tree() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..70_000).prop_map(Value::from),
        prop::sample::select(STRINGS.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(KEYS.to_vec()).prop_map(str::to_string),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn byte_mutations_never_panic(which in 0usize..FIXTURES.len(), mutations in prop::collection::vec(mutation(), 1..8)) {
        exercise(&apply(FIXTURES[which], &mutations));
    }

    #[test]
    fn line_edits_never_panic(which in 0usize..FIXTURES.len(), edits in prop::collection::vec(line_edit(), 1..6)) {
        exercise(&edit_lines(FIXTURES[which], &edits));
    }

    #[test]
    fn random_documents_never_panic(mut tree in json_tree(), version in prop::sample::select(vec!["3.1.0", "3.0.3"])) {
        if let Some(map) = tree.as_object_mut() {
            map.insert("openapi".into(), serde_json::Value::from(version));
        }
        let text = serde_json::to_string_pretty(&tree).expect("serialises");
        exercise(&text);
    }
}

#[test]
fn a_random_document_can_pass_the_loader() {
    // The generators above are only useful if some of their documents load: check the shape.
    let text = r##"{"openapi": "3.1.0", "paths": {"/w": {"post": {"x-idempotent": true, "parameters": [{"$ref": "#/components/parameters/A"}]}}}, "components": {"parameters": {"A": {"name": "Idempotency-Key", "in": "header"}}}}"##;
    let mut fs = MemoryFs::new();
    fs.insert("spec.yaml", text);
    let spec = load_with(&fs, Path::new("spec.yaml")).expect("loads");
    let report = check_loaded(spec, &Config::default());
    assert!(report.errors() > 0);
}

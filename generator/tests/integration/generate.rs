//! No spec makes `build`, `client` or `scaffold` panic: every fixture of the suite, and random
//! specs built from schema vocabulary chosen to break names (titles shared by a union and its
//! alternatives, names that are digits, keywords, Unicode or empty, case-only differences,
//! `$ref` cycles), are checked, and every one without errors is lowered and emitted on both sides.
//! Emission parses its own output with `syn`, so `Ok` also means the code is valid Rust syntax.

use std::path::{Path, PathBuf};

use idemgen::emit::{self, client::emit_client};
use idemgen::ir::Api;
use idemgen::loader::{MemoryFs, load_with};
use idemgen::{Config, check, check_loaded};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Map, Value, json};

/// Lowers and emits a checked spec on every side; every step must succeed.
fn generate_all(report: &idemgen::CheckReport, header: &str) -> usize {
    let api = Api::from_spec(&report.spec, header);
    let server = emit::emit(&api, "openapi.yaml").expect("server emission");
    let client = emit_client(&api, "openapi.yaml").expect("client emission");
    idemgen::scaffold::render(&api, "crate::api").expect("scaffold");
    server.len() + client.len()
}

fn spec_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading fixtures") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            spec_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn every_fixture_without_errors_generates_on_every_side() {
    let mut files = Vec::new();
    spec_files(Path::new("tests/fixtures"), &mut files);
    files.sort();
    let mut generated = 0;
    for file in &files {
        let config = Config::discover(file, None).unwrap_or_default();
        // Fixtures that are not roots (shared components, split files) fail to load or have no
        // operations; either way nothing may panic.
        let Ok(report) = check(file, &config) else {
            continue;
        };
        if report.errors() == 0 {
            assert!(generate_all(&report, &config.header) > 0, "{file:?}");
            generated += 1;
        }
    }
    // The walk found the fixtures (clean specs, both build fixtures, rule fixtures that only warn).
    assert!(generated >= 5, "only {generated} fixtures generated");
}

/// Names chosen to collide, to be keywords, digits, Unicode or empty once turned into Rust.
const NAMES: [&str; 22] = [
    "Widget",
    "widget",
    "Widget2",
    "WidgetRequest",
    "Tracing Configuration",
    "200",
    "2",
    "",
    "self",
    "Self",
    "type",
    "types",
    "Api",
    "Error",
    "Reply",
    "日本語",
    "Ünïcode",
    "a b",
    "+1",
    "-1",
    "_",
    "x-y",
];

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(NAMES.to_vec()).prop_map(str::to_owned)
}

/// A schema: scalars, objects, arrays, maps, enums and unions, with titles, bounds and
/// nullability, referring to components `C0`…`C3` (which may not all exist: a dangling `$ref` is
/// a check error, and then nothing is generated).
fn schema() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "string", "format": "uuid"})),
        Just(json!({"type": "string", "format": "date-time"})),
        Just(json!({"type": "string", "maxLength": 4, "minLength": 1})),
        Just(json!({"type": "integer", "format": "int64", "minimum": 0})),
        Just(json!({"type": "number", "exclusiveMaximum": 10})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"type": "null"})),
        prop::collection::vec(name(), 1..4).prop_map(|v| json!({"type": "string", "enum": v})),
        (0usize..4).prop_map(|i| json!({"$ref": format!("#/components/schemas/C{i}")})),
    ];
    scalar.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map(name(), inner.clone(), 0..4),
                any::<bool>(),
                prop::option::of(name()),
                any::<bool>(),
            )
                .prop_map(|(props, require, title, nullable)| {
                    let required: Vec<&String> = if require {
                        props.keys().take(1).collect()
                    } else {
                        vec![]
                    };
                    let mut s = json!({
                        "type": if nullable { json!(["object", "null"]) } else { json!("object") },
                        "properties": props,
                        "maxProperties": 9,
                    });
                    if !required.is_empty() {
                        s["required"] = json!(required);
                    }
                    if let Some(t) = title {
                        s["title"] = json!(t);
                    }
                    s
                }),
            (inner.clone(), any::<bool>()).prop_map(|(items, unique)| json!({
                "type": "array", "items": items, "maxItems": 3, "uniqueItems": unique
            })),
            inner
                .clone()
                .prop_map(|v| json!({"type": "object", "additionalProperties": v})),
            (
                prop::sample::select(vec!["oneOf", "anyOf", "allOf"]),
                prop::collection::vec(inner, 1..4),
                prop::option::of(name()),
            )
                .prop_map(|(kind, alternatives, title)| {
                    // Titled alternatives sharing their union's title: OpenAI's shape.
                    let alternatives: Vec<Value> = alternatives
                        .into_iter()
                        .map(|mut a| {
                            if let (Some(t), Some(obj)) = (&title, a.as_object_mut())
                                && !obj.contains_key("$ref")
                            {
                                obj.insert("title".into(), json!(t));
                            }
                            a
                        })
                        .collect();
                    let mut s = json!({ kind: alternatives });
                    if let Some(t) = title {
                        s["title"] = json!(t);
                    }
                    s
                }),
        ]
    })
}

/// An operation: an id, a method, maybe idempotent (with everything `check` requires), a body,
/// a query parameter and a response schema.
fn operation() -> impl Strategy<Value = (String, String, Value)> {
    (
        name(),
        prop::sample::select(vec!["get", "post", "put", "patch", "delete"]),
        any::<bool>(),
        prop::option::of(schema()),
        prop::option::of((name(), schema())),
        schema(),
    )
        .prop_map(|(id, method, idempotent, body, query, response)| {
            let mut op = Map::new();
            op.insert("operationId".into(), json!(id));
            let mut params = vec![];
            if let Some((q, s)) = query {
                params.push(json!({"name": q, "in": "query", "schema": s}));
            }
            let mut responses = json!({
                "200": {"description": "ok", "content": {"application/json": {"schema": response}}},
                "503": {"$ref": "#/components/responses/Problem"},
            });
            if idempotent && method != "get" {
                op.insert("x-idempotent".into(), json!(true));
                params.push(json!({"$ref": "#/components/parameters/Key"}));
                for status in [
                    "400", "401", "403", "409", "410", "413", "415", "422", "500", "504",
                ] {
                    responses[status] = json!({"$ref": "#/components/responses/Problem"});
                }
            }
            if !params.is_empty() {
                op.insert("parameters".into(), json!(params));
            }
            if let Some(b) = body
                && method != "get"
            {
                op.insert(
                    "requestBody".into(),
                    json!({"required": true, "content": {"application/json": {"schema": b}}}),
                );
            }
            op.insert("responses".into(), responses);
            (id, method.to_owned(), Value::Object(op))
        })
}

fn document() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(operation(), 1..4),
        prop::collection::vec(schema(), 0..5),
        name(),
    )
        .prop_map(|(ops, components, title)| {
            let mut paths = Map::new();
            for (i, (_, method, op)) in ops.into_iter().enumerate() {
                let path = format!("/r{i}/{{id}}");
                let mut item = Map::new();
                item.insert(
                    "parameters".into(),
                    json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]),
                );
                item.insert(method, op);
                paths.insert(path, Value::Object(item));
            }
            let schemas: Map<String, Value> = components
                .into_iter()
                .enumerate()
                .map(|(i, s)| (format!("C{i}"), s))
                .collect();
            json!({
                "openapi": "3.1.0",
                "info": {"title": title, "version": "1"},
                "paths": paths,
                "components": {
                    "schemas": schemas,
                    "parameters": {"Key": {
                        "name": "Idempotency-Key", "in": "header", "required": true,
                        "schema": {"type": "string", "minLength": 1, "maxLength": 255,
                                   "pattern": "^[\\x21-\\x7E]+$"}
                    }},
                    "responses": {"Problem": {
                        "description": "A problem",
                        "content": {"application/problem+json": {"schema": {"type": "object"}}}
                    }}
                }
            })
        })
}

/// Runs one random document through load, check and (without errors) every emitter; returns
/// whether it generated.
fn exercise(doc: &Value) -> bool {
    let mut fs = MemoryFs::new();
    fs.insert("spec.json", serde_json::to_string(doc).expect("serialises"));
    let Ok(spec) = load_with(&fs, Path::new("spec.json")) else {
        return false;
    };
    let config = Config::default();
    let report = check_loaded(spec, &config);
    if report.errors() > 0 {
        return false;
    }
    generate_all(&report, &config.header);
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_specs_generate_or_are_refused_but_never_panic(doc in document()) {
        exercise(&doc);
    }
}

#[test]
fn the_generator_of_random_specs_reaches_emission() {
    // The property above is only worth its cases if many of them get past `check`.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = document();
    let mut generated = 0;
    for _ in 0..64 {
        let doc = strategy
            .new_tree(&mut runner)
            .expect("a document")
            .current();
        if exercise(&doc) {
            generated += 1;
        }
    }
    assert!(
        generated >= 16,
        "only {generated} of 64 random specs reached emission"
    );
}

#[test]
fn a_union_sharing_its_title_with_an_inline_alternative_generates() {
    // OpenAI's `Tracing Configuration`: this panicked in `ir/names.rs` (an identifier `2`).
    let doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "T", "version": "1"},
        "paths": {"/x": {"post": {
            "operationId": "makeX",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/TracingConfiguration"}}}},
            "responses": {"200": {"description": "ok"}, "503": {"description": "down"}}
        }}},
        "components": {"schemas": {"TracingConfiguration": {
            "title": "Tracing Configuration",
            "oneOf": [
                {"type": "string", "enum": ["auto"], "title": "Tracing Configuration"},
                {"type": "object", "title": "Tracing Configuration", "properties": {"mode": {"type": "string"}}}
            ]
        }}}
    });
    assert!(exercise(&doc), "the spec checks clean and generates");
}

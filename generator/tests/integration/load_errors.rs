//! Specs that cannot be checked: each gives a clear message at a position, never a panic. A file
//! that cannot be read or parsed, or is not OpenAPI, stops the load; a reference that does not
//! resolve does not: it is reported at its `$ref` (as an `unresolved-ref` finding by `check`), all
//! of them in one run, with the rest of the spec loaded.

use idemgen::loader::SourceMap;
use idemgen::loader::{LoadError, Problem, load};

use crate::common::fixture;

fn located(problems: &[Problem], sources: &SourceMap) -> Vec<(String, String)> {
    problems
        .iter()
        .map(|p| {
            let location = p
                .location
                .map(|(file, span)| {
                    let path = sources
                        .get(file)
                        .map(|f| f.display_path())
                        .unwrap_or_default();
                    format!("{path}:{}:{}", span.start.line, span.start.col)
                })
                .unwrap_or_default();
            (p.message.clone(), location)
        })
        .collect()
}

/// The problems of a fixture: those that stopped its load, else those of its references.
fn problems(name: &str) -> Vec<(String, String)> {
    match load(&fixture(name)) {
        Ok(spec) => located(spec.ref_problems(), spec.sources()),
        Err(LoadError { problems, sources }) => located(&problems, &sources),
    }
}

/// Expected problems as (message fragment, `path:line:col` or "" when there is no position).
#[track_caller]
fn case(name: &str, expected: &[(&str, &str)]) {
    let got = problems(name);
    assert_eq!(got.len(), expected.len(), "{name}: {got:#?}");
    for ((message, location), (fragment, at)) in got.iter().zip(expected) {
        assert!(
            message.contains(fragment),
            "{name}: `{message}` does not contain `{fragment}`"
        );
        assert_eq!(location, at, "{name}: position of `{message}`");
    }
}

#[test]
fn load_error_cases() {
    let dir = "tests/fixtures/load";
    case(
        "load/swagger-2.0.yaml",
        &[(
            "Swagger 2.0 documents are not supported",
            &format!("{dir}/swagger-2.0.yaml:1:1"),
        )],
    );
    case(
        "load/not-openapi.yaml",
        &[("no `openapi` field", &format!("{dir}/not-openapi.yaml:1:1"))],
    );
    case(
        "load/unsupported-version.yaml",
        &[(
            "unsupported OpenAPI version `4.0.0`",
            &format!("{dir}/unsupported-version.yaml:1:10"),
        )],
    );
    case(
        "load/invalid-yaml.yaml",
        &[(
            "invalid YAML: while parsing a flow mapping",
            &format!("{dir}/invalid-yaml.yaml:8:16"),
        )],
    );
    case(
        "load/cyclic-ref.yaml",
        &[
            (
                "cyclic $ref: #/components/parameters/A -> #/components/parameters/B -> #/components/parameters/A",
                &format!("{dir}/cyclic-ref.yaml:8:17"),
            ),
            ("cyclic $ref", &format!("{dir}/cyclic-ref.yaml:14:13")),
            ("cyclic $ref", &format!("{dir}/cyclic-ref.yaml:16:13")),
        ],
    );
    case(
        "load/missing-ref-file.yaml",
        &[(
            "cannot read `tests/fixtures/load/paths/does-not-exist.yaml`",
            &format!("{dir}/missing-ref-file.yaml:5:11"),
        )],
    );
    case(
        "load/missing-ref-pointer.yaml",
        &[
            (
                "nothing at `#/components/responses/Nope`",
                &format!("{dir}/missing-ref-pointer.yaml:9:17"),
            ),
            (
                "nothing at `#/components/responses/AlsoNope`",
                &format!("{dir}/missing-ref-pointer.yaml:11:17"),
            ),
        ],
    );
    case(
        "load/no-such-file.yaml",
        &[("cannot read `tests/fixtures/load/no-such-file.yaml`", "")],
    );
}

#[test]
fn in_memory_specs_resolve_relative_refs_and_report_bad_ones() {
    use idemgen::loader::{MemoryFs, load_with};
    use std::path::Path;

    let mut fs = MemoryFs::new();
    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.yaml'}\n  /b: {$ref: 'http://example.com/b.yaml'}\n  /c: {$ref: 'paths/a.yaml#bad-pointer'}\n",
    );
    fs.insert(
        "api/paths/a.yaml",
        "get: {responses: {'200': {description: ok}}}\n",
    );
    // Both reference problems in one run: the remote one and the bad pointer.
    let spec = load_with(&fs, Path::new("api/openapi.yaml")).expect("references do not stop it");
    let messages: Vec<&str> = spec
        .ref_problems()
        .iter()
        .map(|p| p.message.as_str())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("remote reference"), "{messages:?}");
    assert!(messages[1].contains("invalid JSON pointer"), "{messages:?}");

    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.yaml'}\n  /c: {$ref: './paths/../paths/a.yaml#bad-pointer'}\n",
    );
    let spec = load_with(&fs, Path::new("api/openapi.yaml")).expect("loads");
    assert!(
        spec.ref_problems()[0]
            .message
            .contains("invalid JSON pointer")
    );

    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.yaml'}\n  /c: {$ref: './paths/../paths/a.yaml'}\n",
    );
    let spec = load_with(&fs, Path::new("api/openapi.yaml")).expect("loads");
    assert_eq!(
        spec.sources().files().count(),
        2,
        "one file reached by two paths is read once"
    );
    let target = spec
        .ref_target(spec.root_file(), "paths/a.yaml#/get")
        .expect("target");
    assert_eq!(target.name().as_deref(), Some("get"));

    // A referenced file that does not parse stops the load, and the dangling references found
    // in the same run come along.
    fs.insert("api/paths/a.yaml", "get: {responses: [\n");
    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.yaml'}\ncomponents:\n  schemas:\n    W: {$ref: '#/components/schemas/Nope'}\n",
    );
    let err = load_with(&fs, Path::new("api/openapi.yaml")).expect_err("a file does not parse");
    let messages: Vec<&str> = err.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("invalid YAML"), "{messages:?}");
    assert!(
        messages[1].contains("#/components/schemas/Nope"),
        "{messages:?}"
    );
}

/// Square's spec: `$ref`s inside example values are data (never fetched), and its one dangling
/// local reference is reported at each of its places in the same run.
#[test]
fn refs_in_data_are_values_and_dangling_refs_are_findings() {
    use idemgen::loader::{MemoryFs, load_with};
    use std::path::Path;

    let mut fs = MemoryFs::new();
    fs.insert(
        "openapi.yaml",
        r#"openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /items:
    post:
      operationId: upsertItem
      x-example-payload: {$ref: 'https://example.com/x'}
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Item'}
            example: {object: {$ref: 'https://example.com/a'}}
            examples:
              one: {value: {$ref: 'https://example.com/b'}}
              two: {$ref: '#/components/examples/Two'}
      responses:
        '200': {description: ok}
components:
  examples:
    Two: {value: {$ref: 'https://example.com/c'}}
  schemas:
    Item:
      type: object
      default: {$ref: 'https://example.com/d'}
      properties:
        default: {$ref: '#/components/schemas/Toggle'}
        example: {$ref: '#/components/schemas/Toggle'}
        override: {$ref: '#/components/schemas/CatalogModifierToggleOverrideType'}
        again: {$ref: '#/components/schemas/CatalogModifierToggleOverrideType'}
      enum: [{$ref: 'https://example.com/e'}]
    Toggle: {type: boolean, examples: [{$ref: 'https://example.com/f'}]}
"#,
    );
    let spec = load_with(&fs, Path::new("openapi.yaml")).expect("loads");
    let problems: Vec<String> = spec
        .ref_problems()
        .iter()
        .map(|p| {
            let (_, span) = p.location.expect("at its $ref");
            format!("{}:{}", span.start.line, p.message)
        })
        .collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    for (problem, line) in problems.iter().zip(["28", "29"]) {
        assert!(problem.starts_with(line), "{problem}");
        assert!(
            problem.contains("CatalogModifierToggleOverrideType"),
            "{problem}"
        );
    }
    // Properties named `default` and `example` are schemas, and were followed.
    let report = idemgen::check_loaded(spec, &idemgen::Config::default());
    let unresolved = report
        .findings
        .iter()
        .filter(|f| f.rule == idemgen::RuleId::UnresolvedRef)
        .count();
    assert_eq!(unresolved, 2);
}

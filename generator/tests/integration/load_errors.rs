//! Specs that cannot be checked: each gives a clear message at a position, never a panic.

use idemgen::loader::load;

use crate::common::fixture;

/// Loads a fixture that must fail; returns (message, `path:line:col`) per problem.
fn problems(name: &str) -> Vec<(String, String)> {
    let err = match load(&fixture(name)) {
        Ok(_) => panic!("{name} should not load"),
        Err(e) => e,
    };
    err.problems
        .iter()
        .map(|p| {
            let location = p
                .location
                .map(|(file, span)| {
                    let path = err
                        .sources
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
    let err = load_with(&fs, Path::new("api/openapi.yaml")).expect_err("remote ref");
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(
        err.problems[0].message.contains("remote reference"),
        "{err}"
    );

    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.yaml'}\n  /c: {$ref: './paths/../paths/a.yaml#bad-pointer'}\n",
    );
    let err = load_with(&fs, Path::new("api/openapi.yaml")).expect_err("bad pointer");
    assert!(
        err.problems[0].message.contains("invalid JSON pointer"),
        "{err}"
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
}

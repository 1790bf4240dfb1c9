//! One line per case: a fixture, a config tweak, and the findings expected as `rule@line:col`.

use idemgen::{Config, Level, RuleId};

use crate::common::{check_fixture, rule_fixture, summary};

#[track_caller]
fn case(fixture: &str, expected: &[&str]) {
    case_with(fixture, &Config::default(), expected);
}

#[track_caller]
fn case_with(fixture: &str, config: &Config, expected: &[&str]) {
    let report = check_fixture(fixture, config);
    assert_eq!(summary(&report), expected, "findings of {fixture}");
}

#[test]
fn clean_specs_have_no_findings() {
    case("clean-3.1.yaml", &[]);
    case("clean-3.0.json", &[]);
}

/// `keyword-not-enforced` reads each schema as the IR reads it: a parameter read as one string
/// (and what is inside it), multipart file parts (bytes, lengths only) beside text parts (as
/// their schemas say), an `allOf` it cannot merge (properties beside it unread too), and one it
/// merges (its members' `required` are the struct's, their property counts are not checked).
#[test]
fn keywords_are_judged_as_the_generated_code_reads_the_schema() {
    case(
        "rules/keyword-not-enforced-reading.yaml",
        &[
            "keyword-not-enforced@11:33",
            "keyword-not-enforced@11:69",
            "parameter-unsupported@14:19",
            "keyword-not-enforced@14:66",
            "keyword-not-enforced@24:15",
            "keyword-not-enforced@26:71",
            "keyword-not-enforced@30:57",
            "keyword-not-enforced@45:19",
            "keyword-not-enforced@49:86",
            "keyword-not-enforced@54:19",
        ],
    );
}

#[test]
fn each_rule_fixture_reports_exactly_its_rule() {
    case(
        "rules/idempotency-key-missing.yaml",
        &["idempotency-key-missing@5:5"],
    );
    case(
        "rules/idempotency-key-not-required.yaml",
        &["idempotency-key-not-required@11:21"],
    );
    case(
        "rules/idempotency-key-not-string.yaml",
        &["idempotency-key-not-string@12:26"],
    );
    case(
        "rules/idempotency-key-max-length.yaml",
        &["idempotency-key-max-length@12:59"],
    );
    case(
        "rules/idempotency-key-min-length.yaml",
        &["idempotency-key-min-length@12:45"],
    );
    case(
        "rules/required-response-missing.yaml",
        &["required-response-missing@10:7"],
    );
    case(
        "rules/recommended-response-missing.yaml",
        &["recommended-response-missing@10:7"],
    );
    case(
        "rules/error-response-not-problem-json.yaml",
        &[
            "error-response-not-problem-json@14:11",
            "error-response-not-problem-json@16:9",
        ],
    );
    case(
        "rules/operation-id-missing.yaml",
        &["operation-id-missing@5:5"],
    );
    case(
        "rules/operation-id-duplicate.yaml",
        &["operation-id-duplicate@16:20"],
    );
    case(
        "rules/x-idempotent-not-boolean.yaml",
        &[
            "x-idempotent-not-boolean@7:21",
            "x-idempotent-not-boolean@10:95",
        ],
    );
    case(
        "rules/fingerprint-version-invalid.yaml",
        &["fingerprint-version-invalid@8:42"],
    );
    case(
        "rules/unknown-idempotency-extension.yaml",
        &["unknown-idempotency-extension@8:7"],
    );
    case(
        "rules/idempotency-extension-misplaced.yaml",
        &[
            "idempotency-extension-misplaced@5:5",
            "idempotency-extension-misplaced@9:7",
            "idempotency-extension-misplaced@12:62",
        ],
    );
    case(
        "rules/idempotency-key-fingerprinted.yaml",
        &["idempotency-key-fingerprinted@12:11"],
    );
    case(
        "rules/x-idempotent-on-safe-method.yaml",
        &["x-idempotent-on-safe-method@7:7"],
    );
    case(
        "rules/idempotency-key-without-x-idempotent.yaml",
        &["idempotency-key-without-x-idempotent@5:5"],
    );
    // Names a safe (non-idempotent) operation, an unknown one, and is not a string.
    case(
        "rules/tombstone-target-invalid.yaml",
        &[
            "tombstone-target-invalid@12:33",
            "tombstone-target-invalid@18:33",
            // A list is read entry by entry; an empty one names nothing.
            "tombstone-target-invalid@24:34",
            "tombstone-target-invalid@30:33",
            // The target's records are about `gid`, the deleter's path names `id`.
            "tombstone-target-invalid@49:33",
        ],
    );
    case(
        "rules/idempotency-key-pattern.yaml",
        &["idempotency-key-pattern@12:19"],
    );
    // The delete declares a 5XX range, which covers 503.
    case(
        "rules/unavailable-response-missing.yaml",
        &["unavailable-response-missing@7:7"],
    );
    case("rules/no-operations.yaml", &["no-operations@4:1"]);
    // The `$ref` inside `example` is data: neither fetched nor reported.
    case("rules/unresolved-ref.yaml", &["unresolved-ref@12:30"]);
    // `summary` may stand beside a `$ref`; `x-idempotent` is not read there.
    case(
        "rules/ref-siblings-ignored.yaml",
        &["ref-siblings-ignored@8:7"],
    );
    // A multipart schema without properties is raw bytes (said at the schema), and so is one
    // without a schema (at its media type) and one with a union part it cannot type (at the
    // part); typed parts (files, file arrays, text, text arrays, objects, a union declared JSON
    // by its Encoding Object) are not reported. The event stream beside JSON is dropped.
    case(
        "rules/media-type-untyped.yaml",
        &[
            "media-type-untyped@10:21",
            "media-type-untyped@16:13",
            "media-type-untyped@43:11",
            "media-type-untyped@57:17",
        ],
    );
    // A suffix after a parameter, a renamed parameter, a fragment, a query, a custom method.
    case(
        "rules/path-unroutable.yaml",
        &[
            "path-unroutable@10:3",
            "path-unroutable@16:3",
            "path-unroutable@22:3",
            "path-unroutable@28:3",
            "path-unroutable@34:3",
        ],
    );
    // Scalars with `explode: false`, exploded arrays, a `content` object and headers are read as
    // written; a `content` array is not (one pair per item, not one JSON value).
    case(
        "rules/parameter-unsupported.yaml",
        &[
            "parameter-unsupported@6:53",
            "parameter-unsupported@10:31",
            "parameter-unsupported@11:46",
            "parameter-unsupported@12:42",
            "parameter-unsupported@13:44",
            "parameter-unsupported@14:44",
            "parameter-unsupported@18:72",
        ],
    );
    // An empty `callbacks: {}` says nothing and is not reported.
    case(
        "rules/keyword-not-enforced.yaml",
        &[
            "keyword-not-enforced@10:57",
            "keyword-not-enforced@13:53",
            "keyword-not-enforced@48:7",
            "keyword-not-enforced@50:45",
            "keyword-not-enforced@51:51",
            "keyword-not-enforced@52:43",
            "keyword-not-enforced@53:52",
            "keyword-not-enforced@56:11",
            "keyword-not-enforced@57:30",
            "keyword-not-enforced@60:11",
            "keyword-not-enforced@74:7",
        ],
    );
    case(
        "rules/callbacks-not-generated.yaml",
        &[
            "callbacks-not-generated@7:7",
            "callbacks-not-generated@23:1",
        ],
    );
    case(
        "rules/stream-not-replayable.yaml",
        &["stream-not-replayable@10:7", "media-type-untyped@14:13"],
    );
    // `security: []` and an optional `- {}` on idempotent operations; a public read is fine.
    case(
        "rules/idempotent-anonymous.yaml",
        &["idempotent-anonymous@10:7", "idempotent-anonymous@22:7"],
    );
    // Not a number and a unit; a bare number; on an operation without records.
    case(
        "rules/retention-invalid.yaml",
        &[
            "retention-invalid@8:32",
            "retention-invalid@20:32",
            "retention-invalid@30:7",
        ],
    );
    // A bare `200:`; quoted codes and a range are strings.
    case(
        "rules/response-code-unquoted.yaml",
        &["response-code-unquoted@8:9"],
    );
    // A repetition of a repetition, linear on the server and behind a lookahead; a slug is not.
    case(
        "rules/pattern-nested-quantifier.yaml",
        &[
            "pattern-nested-quantifier@17:47",
            "pattern-nested-quantifier@19:47",
        ],
    );
    case(
        "rules/security-scheme-unknown.yaml",
        &["security-scheme-unknown@12:11"],
    );
    // Scopes that are not a list, `security` that is not one, an apiKey `in: body`.
    case(
        "rules/security-invalid.yaml",
        &[
            "security-invalid@10:18",
            "security-invalid@21:17",
            "security-invalid@30:13",
        ],
    );
    // Not in `example`, `default` or `x-` data; a property called `pattern` is a schema; `\_`
    // fails with the `u` flag; a number is not a pattern.
    case(
        "rules/pattern-invalid.yaml",
        &[
            "pattern-invalid@16:48",
            "pattern-invalid@34:41",
            "pattern-invalid@35:60",
        ],
    );
    // Not a response called `default`, a property called `default` or data in an example.
    case(
        "rules/default-invalid.yaml",
        &[
            "default-invalid@10:56",
            "default-invalid@13:62",
            "default-invalid@27:55",
            "default-invalid@30:40",
        ],
    );
    // An alternative with the property through `allOf` is fine, and so is a bare name.
    case(
        "rules/discriminator-invalid.yaml",
        &["discriminator-invalid@19:11", "discriminator-invalid@24:16"],
    );
}

#[test]
fn an_operation_written_as_a_ref_is_read_from_its_target() {
    // DigitalOcean writes every operation as `post: {$ref: file.yml}`: the operation is read
    // there, with positions in that file.
    let mut fs = idemgen::loader::MemoryFs::new();
    fs.insert(
        "spec.yaml",
        "openapi: 3.1.0\ninfo: {title: T, version: '1'}\npaths:\n  /droplets:\n    post:\n      $ref: 'resources/droplets_create.yml'\n",
    );
    fs.insert(
        "resources/droplets_create.yml",
        "operationId: droplets_create\nx-idempotent: true\nresponses:\n  '202': {description: Accepted}\n",
    );
    let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
    let report = idemgen::check_loaded(spec, &Config::default());
    assert_eq!(report.operations, 1);
    assert_eq!(report.idempotent_operations, 1, "x-idempotent is read");
    let key_missing = report
        .findings
        .iter()
        .find(|f| f.rule == RuleId::KeyMissing)
        .expect("the key header is missing");
    let at = idemgen::report::locate(&report.spec, key_missing);
    // At the method key, in the root file that writes it: not a position of the other file.
    assert_eq!(
        (at.path.as_str(), at.start.line, at.start.col),
        ("spec.yaml", 5, 5)
    );
    let in_target = report
        .findings
        .iter()
        .map(|f| idemgen::report::locate(&report.spec, f))
        .any(|l| l.path == "resources/droplets_create.yml");
    assert!(
        in_target,
        "findings about the operation's content point into its file"
    );
    assert!(
        !report
            .findings
            .iter()
            .any(|f| f.rule == RuleId::OperationIdMissing),
        "the operationId of the referenced file is found"
    );
    // And the generator sees the same operation.
    let mut fs = idemgen::loader::MemoryFs::new();
    fs.insert(
        "spec.yaml",
        "openapi: 3.1.0\ninfo: {title: T, version: '1'}\npaths:\n  /droplets:\n    get:\n      $ref: 'ops.yml#/list'\n",
    );
    fs.insert(
        "ops.yml",
        "list:\n  operationId: listDroplets\n  responses:\n    '200': {description: OK, content: {application/json: {schema: {type: array, items: {type: string}}}}}\n    '503': {description: Down}\n",
    );
    let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
    let api = idemgen::ir::Api::from_spec(&spec, "Idempotency-Key");
    assert_eq!(api.operations[0].id, "listDroplets");
    assert_eq!(api.operations[0].responses.len(), 2);
}

#[test]
fn unavailable_responses_are_one_finding_and_default_covers_them() {
    let mut fs = idemgen::loader::MemoryFs::new();
    let mut paths = String::new();
    for i in 0..5 {
        paths.push_str(&format!(
            "  /r{i}:\n    get:\n      operationId: get{i}\n      responses:\n        '200': {{description: OK}}\n"
        ));
    }
    paths.push_str("  /d:\n    get:\n      operationId: withDefault\n      responses:\n        '200': {description: OK}\n        default: {description: Error}\n");
    fs.insert(
        "spec.yaml",
        format!("openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\npaths:\n{paths}"),
    );
    let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
    let report = idemgen::check_loaded(spec, &Config::default());
    let found: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule == RuleId::UnavailableResponseMissing)
        .collect();
    assert_eq!(found.len(), 1, "one finding for the spec");
    assert_eq!(found[0].operations.len(), 5, "{:?}", found[0].operations);
    assert!(!found[0].operations.contains(&"GET /d".to_string()));
    assert!(
        found[0]
            .message
            .starts_with("5 operations without an idempotency key")
            && found[0].message.ends_with("and 2 more"),
        "{}",
        found[0].message
    );
}

#[test]
fn every_rule_has_a_fixture() {
    for rule in RuleId::ALL {
        let name = crate::common::rule_fixture(rule);
        let report = check_fixture(&name, &Config::default());
        assert!(
            report.findings.iter().any(|f| f.rule == rule),
            "{name} does not trigger {rule}"
        );
    }
}

#[test]
fn split_spec_points_into_the_referenced_files() {
    let report = check_fixture("split/openapi.yaml", &Config::default());
    let paths: Vec<String> = report
        .findings
        .iter()
        .map(|f| idemgen::report::locate(&report.spec, f).path)
        .collect();
    assert_eq!(
        paths,
        [
            "tests/fixtures/split/components/parameters.yaml",
            "tests/fixtures/split/paths/widgets.yaml",
            "tests/fixtures/split/paths/widgets.yaml",
        ]
    );
    assert_eq!(
        summary(&report),
        [
            "idempotency-key-max-length@8:16",
            "recommended-response-missing@7:3",
            "required-response-missing@7:3",
        ]
    );
    assert_eq!(
        report.findings[0].operations,
        ["POST /widgets", "POST /gadgets"],
        "a shared parameter is reported once, for both operations"
    );
}

#[test]
fn config_changes_what_is_checked() {
    let header = Config {
        header: "X-Request-Key".into(),
        ..Config::default()
    };
    case_with("clean-3.0.json", &header, &["idempotency-key-missing@6:7"]);

    let tight = Config {
        max_key_length: 64,
        ..Config::default()
    };
    case_with(
        "clean-3.0.json",
        &tight,
        &["idempotency-key-max-length@15:72"],
    );

    let more_statuses = Config {
        required_statuses: vec![200, 404],
        ..Config::default()
    };
    case_with(
        "rules/recommended-response-missing.yaml",
        &more_statuses,
        &[
            "recommended-response-missing@10:7",
            "required-response-missing@10:7",
        ],
    );

    let mut off = Config::default();
    off.levels
        .insert(RuleId::RecommendedResponseMissing, Level::Off);
    case_with("rules/recommended-response-missing.yaml", &off, &[]);

    let mut promoted = Config::default();
    promoted.levels.insert(RuleId::KeyMinLength, Level::Error);
    let report = check_fixture("rules/idempotency-key-min-length.yaml", &promoted);
    assert_eq!(report.errors(), 1);
    assert_eq!(report.warnings(), 0);
}

#[test]
fn idempotency_key_header_matches_case_insensitively_and_by_location() {
    // clean-3.1.yaml declares `idempotency-key` (lower case) on the path item; it counts.
    case("clean-3.1.yaml", &[]);
    let report = check_fixture("clean-3.1.yaml", &Config::default());
    assert_eq!(report.idempotent_operations, 1);
    assert_eq!(report.operations, 2);
}

#[test]
fn fix_up_snippets_match_the_spec_format() {
    let report = check_fixture("key-missing.json", &Config::default());
    let finding = report
        .findings
        .iter()
        .find(|f| f.rule == RuleId::KeyMissing)
        .expect("the key is missing");
    let snippet = finding.help.split("\n\n").nth(1).expect("a snippet");
    let json: serde_json::Value = serde_json::from_str(snippet).expect("the snippet is JSON");
    assert_eq!(json["parameters"][0]["name"], "Idempotency-Key");
    // The same rule on a YAML spec keeps its YAML snippet.
    let yaml = check_fixture(&rule_fixture(RuleId::KeyMissing), &Config::default());
    let help = &yaml.findings[0].help;
    assert!(help.contains("- name: Idempotency-Key"), "{help}");
}

/// The findings of the idempotency-key rule family.
fn key_findings(report: &idemgen::CheckReport) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.rule.as_str().starts_with("idempotency-key-"))
        .map(|f| f.rule.to_string())
        .collect()
}

#[test]
fn the_key_missing_snippet_followed_literally_leaves_no_key_finding() {
    let report = check_fixture("key-missing.json", &Config::default());
    let finding = report
        .findings
        .iter()
        .find(|f| f.rule == RuleId::KeyMissing)
        .expect("the key is missing");
    let snippet: serde_json::Value =
        serde_json::from_str(finding.help.split("\n\n").nth(1).expect("a snippet")).unwrap();
    let mut spec: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/key-missing.json")).unwrap();
    spec["paths"]["/w"]["post"]["parameters"] = snippet["parameters"].clone();
    let mut fs = idemgen::loader::MemoryFs::new();
    fs.insert("spec.json", spec.to_string());
    let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.json")).unwrap();
    let fixed = idemgen::check_loaded(spec, &Config::default());
    assert_eq!(key_findings(&fixed), Vec::<String>::new());
}

#[test]
fn messages_name_the_header_as_the_spec_spells_it_and_a_custom_header_is_suggested() {
    let mut fs = idemgen::loader::MemoryFs::new();
    fs.insert(
        "spec.yaml",
        "openapi: 3.1.0\ninfo: {title: T, version: '1'}\npaths:\n  /a:\n    post:\n      operationId: a\n      x-idempotent: true\n      parameters:\n        - {name: idempotency-key, in: header, schema: {type: string}}\n      responses:\n        '201': {description: ok}\n  /b:\n    post:\n      operationId: b\n      x-idempotent: true\n      parameters:\n        - {name: PayPal-Request-Id, in: header, required: true, schema: {type: string}}\n      responses:\n        '201': {description: ok}\n",
    );
    let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
    let report = idemgen::check_loaded(spec, &Config::default());
    let not_required = report
        .findings
        .iter()
        .find(|f| f.rule == RuleId::KeyNotRequired)
        .expect("a is optional");
    assert!(
        not_required.message.contains("`idempotency-key`"),
        "{}",
        not_required.message
    );
    let missing = report
        .findings
        .iter()
        .find(|f| f.rule == RuleId::KeyMissing)
        .expect("b has no Idempotency-Key");
    assert!(
        missing.help.contains("header = \"PayPal-Request-Id\""),
        "{}",
        missing.help
    );
    assert!(missing.help.contains("idemgen.toml"), "{}", missing.help);
}

#[test]
fn only_flat_forms_are_typed_the_rest_is_said_to_be_bytes() {
    let spec = |property: &str| {
        format!(
            "openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\npaths:\n  /p:\n    post:\n      operationId: p\n      requestBody:\n        required: true\n        content:\n          application/x-www-form-urlencoded:\n            schema:\n              type: object\n              properties:\n                amount: {{type: integer}}\n                {property}\n      responses:\n        '201': {{description: ok}}\n        '503': {{description: down}}\n"
        )
    };
    for (property, flat) in [
        ("note: {type: [string, 'null']}", true),
        ("kind: {enum: [a, b]}", true),
        ("tags: {type: array, items: {type: string}}", false),
        (
            "address: {type: object, properties: {line1: {type: string}}}",
            false,
        ),
    ] {
        let mut fs = idemgen::loader::MemoryFs::new();
        fs.insert("spec.yaml", spec(property));
        let loaded = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
        let api = idemgen::ir::Api::from_spec(&loaded, "Idempotency-Key");
        let kind = &api.operations[0].body.as_ref().expect("a body").kind;
        assert_eq!(
            matches!(kind, idemgen::ir::BodyKind::Form(_)),
            flat,
            "{property}: {kind:?}"
        );
        let report = idemgen::check_loaded(loaded, &Config::default());
        let untyped = report
            .findings
            .iter()
            .any(|f| f.rule == RuleId::MediaTypeUntyped);
        assert_eq!(
            untyped, !flat,
            "{property}: said out loud exactly when not typed"
        );
    }
}

#[test]
fn multipart_bodies_are_typed_exactly_when_check_does_not_report_them() {
    use idemgen::spec::multipart::PartKind;
    let spec = |property: &str, encoding: &str| {
        format!(
            "openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\npaths:\n  /p:\n    post:\n      operationId: p\n      requestBody:\n        required: true\n        content:\n          multipart/form-data:\n            schema:\n              type: object\n              properties:\n                title: {{type: string}}\n                {property}\n            encoding: {{{encoding}}}\n      responses:\n        '201': {{description: ok}}\n        '503': {{description: down}}\n"
        )
    };
    for (property, encoding, kind) in [
        (
            "file: {type: string, format: binary}",
            "",
            Some(PartKind::File { many: false }),
        ),
        (
            "file: {type: string, contentMediaType: image/png}",
            "",
            Some(PartKind::File { many: false }),
        ),
        (
            "file: {type: string, contentEncoding: base64}",
            "",
            Some(PartKind::File { many: false }),
        ),
        (
            "file: {type: [string, 'null'], format: binary}",
            "",
            Some(PartKind::File { many: false }),
        ),
        (
            "files: {type: array, items: {type: string, format: binary}}",
            "",
            Some(PartKind::File { many: true }),
        ),
        (
            "tags: {type: array, items: {type: integer}}",
            "",
            Some(PartKind::Text),
        ),
        ("kind: {enum: [a, b]}", "", Some(PartKind::Text)),
        (
            "meta: {type: object, properties: {a: {type: string}}}",
            "",
            Some(PartKind::Json { declared: false }),
        ),
        (
            "rows: {type: array, items: {type: object}}",
            "",
            Some(PartKind::Json { declared: false }),
        ),
        (
            "any: {oneOf: [{type: string}, {type: integer}]}",
            "any: {contentType: application/json}",
            Some(PartKind::Json { declared: true }),
        ),
        ("any: {oneOf: [{type: string}, {type: integer}]}", "", None),
        (
            "any: {oneOf: [{type: string}, {type: integer}]}",
            "any: {contentType: text/plain}",
            None,
        ),
        (
            "nested: {type: array, items: {type: array, items: {type: string}}}",
            "",
            None,
        ),
    ] {
        let mut fs = idemgen::loader::MemoryFs::new();
        fs.insert("spec.yaml", spec(property, encoding));
        let loaded = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
        let api = idemgen::ir::Api::from_spec(&loaded, "Idempotency-Key");
        let body = &api.operations[0].body.as_ref().expect("a body").kind;
        let got = match body {
            idemgen::ir::BodyKind::Multipart { parts, .. } => {
                assert_eq!(parts[0].kind, PartKind::Text, "title");
                Some(parts[1].kind)
            }
            idemgen::ir::BodyKind::Bytes => None,
            other => panic!("{property}: {other:?}"),
        };
        assert_eq!(got, kind, "{property} with {encoding:?}");
        let report = idemgen::check_loaded(loaded, &Config::default());
        let untyped: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule == RuleId::MediaTypeUntyped)
            .collect();
        assert_eq!(
            untyped.is_empty(),
            kind.is_some(),
            "{property}: said out loud exactly when not typed: {untyped:?}"
        );
        if kind.is_none() {
            // At the part that cannot be typed, with the way out.
            assert_eq!(untyped[0].span.start.line, 15, "{:?}", untyped[0]);
            assert!(untyped[0].message.contains("contentType: application/json"));
        }
    }
}

#[test]
fn security_that_cannot_be_read_is_generated_as_refusing_everyone() {
    use idemgen::ir::SecurityIr;
    let op = |security: &str| {
        let mut fs = idemgen::loader::MemoryFs::new();
        fs.insert(
            "spec.yaml",
            format!(
                "openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\n{security}\npaths:\n  /a:\n    get:\n      operationId: a\n      responses:\n        '200': {{description: ok}}\ncomponents:\n  securitySchemes:\n    bearer: {{type: http, scheme: bearer}}\n    odd: {{type: apiKey, in: body, name: k}}\n"
            ),
        );
        let spec = idemgen::loader::load_with(&fs, std::path::Path::new("spec.yaml")).unwrap();
        idemgen::ir::Api::from_spec(&spec, "Idempotency-Key").operations[0]
            .security
            .clone()
    };
    // Every alternative unreadable (an unknown scheme, a scheme `check` refuses), or not a list:
    // never public, even when the rules that report it are turned off.
    for security in [
        "security: [{gateway: []}]",
        "security: [{odd: []}]",
        "security: {bearer: []}",
    ] {
        assert_eq!(op(security), SecurityIr::Unreadable, "{security}");
    }
    // One readable alternative is kept; `security: []` stays public.
    assert!(
        matches!(op("security: [{gateway: []}, {bearer: []}]"), SecurityIr::Declared(a) if a.len() == 1)
    );
    assert_eq!(op("security: []"), SecurityIr::Declared(vec![]));
    assert_eq!(op(""), SecurityIr::Undeclared);
}

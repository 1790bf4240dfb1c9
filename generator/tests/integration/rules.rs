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
        &["x-idempotent-not-boolean@7:21"],
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
        &["idempotency-extension-misplaced@5:5"],
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
            "tombstone-target-invalid@24:33",
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

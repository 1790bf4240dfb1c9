//! SARIF output validated against the OASIS SARIF 2.1.0 schema (vendored in tests/schemas/), plus
//! the properties GitHub code scanning relies on.

use idemgen::report::{Format, render};
use idemgen::{Config, RuleId};
use serde_json::Value;

use crate::common::check_fixture;

/// The `language` patterns of the rtm.5 schema (on `run` and `toolComponent`) have a stray `]`
/// that the `regex` format check of the draft-04 meta-schema rejects; later revisions of the
/// schema use the pattern below. idemgen never writes `language`, so substituting it does not
/// weaken the validation of idemgen's output.
const LANGUAGE_PATTERN_AS_PUBLISHED: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
const LANGUAGE_PATTERN_FIXED: &str = "^[a-zA-Z]{2}(-[a-zA-Z]{2})?$";

fn validator() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string("tests/schemas/sarif-2.1.0-rtm.5.json").expect("schema file");
    let mut schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    for owner in ["run", "toolComponent"] {
        let pattern = &mut schema["definitions"][owner]["properties"]["language"]["pattern"];
        assert_eq!(
            pattern, LANGUAGE_PATTERN_AS_PUBLISHED,
            "the vendored schema changed"
        );
        *pattern = Value::from(LANGUAGE_PATTERN_FIXED);
    }
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn sarif_of(fixture: &str) -> Value {
    let report = check_fixture(fixture, &Config::default());
    serde_json::from_str(&render(&report, Format::Sarif, false)).expect("SARIF is JSON")
}

#[test]
fn sarif_validates_against_the_2_1_0_schema() {
    let validator = validator();
    for fixture in [
        "split/openapi.yaml",
        "clean-3.1.yaml",
        "rules/error-response-not-problem-json.yaml",
    ] {
        let log = sarif_of(fixture);
        let errors: Vec<String> = validator
            .iter_errors(&log)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{fixture}: {errors:#?}");
    }
}

#[test]
fn the_schema_rejects_a_broken_log() {
    // Guards against a validator that accepts anything.
    let mut log = sarif_of("split/openapi.yaml");
    log["runs"][0]["results"][0]["level"] = Value::from("fatal");
    assert!(!validator().is_valid(&log));
}

#[test]
fn sarif_has_what_github_code_scanning_reads() {
    let log = sarif_of("split/openapi.yaml");
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), RuleId::ALL.len());
    for rule in rules {
        assert!(rule["id"].is_string());
        assert!(rule["shortDescription"]["text"].is_string());
        assert!(rule["help"]["text"].is_string());
    }
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    let first = &results[0];
    assert_eq!(first["ruleId"], "idempotency-key-max-length");
    assert_eq!(
        rules[first["ruleIndex"].as_u64().expect("index") as usize]["id"],
        first["ruleId"]
    );
    assert_eq!(first["level"], "error");
    let location = &first["locations"][0]["physicalLocation"];
    assert_eq!(
        location["artifactLocation"]["uri"],
        "tests/fixtures/split/components/parameters.yaml"
    );
    assert_eq!(location["region"]["startLine"], 8);
    assert_eq!(location["region"]["startColumn"], 16);
    assert_eq!(results[1]["level"], "warning");
}

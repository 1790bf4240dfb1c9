use std::path::{Path, PathBuf};

use idemgen::report::locate;
use idemgen::{CheckReport, Config, check};

/// A fixture path relative to the package root (the working directory of tests), so that
/// printed paths are relative too.
pub fn fixture(name: &str) -> PathBuf {
    Path::new("tests/fixtures").join(name)
}

/// The fixture that triggers `rule`: `rules/<id>.yaml`, or `rules/<id>/openapi.yaml` for rules
/// that need files beside the spec (the fingerprint lock).
pub fn rule_fixture(rule: idemgen::RuleId) -> String {
    if rule == idemgen::RuleId::FingerprintShapeChanged {
        format!("rules/{}/openapi.yaml", rule.as_str())
    } else {
        format!("rules/{}.yaml", rule.as_str())
    }
}

/// Checks a fixture with `config`, failing the test if it does not load.
pub fn check_fixture(name: &str, config: &Config) -> CheckReport {
    match check(&fixture(name), config) {
        Ok(r) => r,
        Err(e) => panic!("{name} should load: {e}"),
    }
}

/// Findings as `rule@line:col` strings, in report order.
pub fn summary(report: &CheckReport) -> Vec<String> {
    report
        .findings
        .iter()
        .map(|f| {
            let loc = locate(&report.spec, f);
            format!("{}@{}:{}", f.rule, loc.start.line, loc.start.col)
        })
        .collect()
}

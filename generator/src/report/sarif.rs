//! SARIF 2.1.0 output for code scanning (GitHub, Azure DevOps, ...).
//!
//! Every rule is listed in `tool.driver.rules` with its summary, help and configured level;
//! results refer to rules by `ruleId` and `ruleIndex`; columns count Unicode code points.

use serde_json::{Value, json};

use super::locate;
use crate::CheckReport;
use crate::finding::Level;
use crate::finding::RuleId;

/// Renders the report as a SARIF 2.1.0 log, listing rule levels as the report's config sets them.
pub fn render(report: &CheckReport) -> String {
    let config = &report.config;
    let rules: Vec<Value> = RuleId::ALL
        .iter()
        .map(|rule| {
            let level = config.level(*rule);
            let help = rule.help(&config.header, config.max_key_length);
            json!({
                "id": rule.as_str(),
                "name": pascal_case(rule.as_str()),
                "shortDescription": { "text": rule.summary() },
                "fullDescription": { "text": rule.summary() },
                "help": {
                    "text": help,
                    "markdown": markdown_help(&help),
                },
                "defaultConfiguration": {
                    "level": sarif_level(level),
                    "enabled": level != Level::Off,
                },
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let loc = locate(&report.spec, f);
            let mut region = json!({
                "startLine": loc.start.line,
                "startColumn": loc.start.col,
            });
            if loc.end > loc.start {
                region["endLine"] = json!(loc.end.line);
                region["endColumn"] = json!(loc.end.col);
            }
            let index = RuleId::ALL.iter().position(|r| *r == f.rule).unwrap_or(0);
            json!({
                "ruleId": f.rule.as_str(),
                "ruleIndex": index,
                "level": sarif_level(f.level),
                "message": { "text": f.message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&loc.path) },
                        "region": region,
                    },
                    "logicalLocations": [{ "fullyQualifiedName": loc.pointer, "kind": "member" }],
                }],
                "properties": { "operations": f.operations },
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "idemgen",
                    "version": env!("CARGO_PKG_VERSION"),
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

fn sarif_level(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Off => "none",
    }
}

/// `idempotency-key-missing` → `IdempotencyKeyMissing`.
fn pascal_case(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The help text with its snippet in a fenced YAML block.
fn markdown_help(help: &str) -> String {
    match help.split_once("\n\n") {
        Some((intro, snippet)) => format!("{intro}\n\n```yaml\n{snippet}\n```"),
        None => help.to_string(),
    }
}

/// A relative URI reference for a path: `/` separators, reserved characters percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_uris_cannot_hold() {
        assert_eq!(uri("specs/my api#1.yaml"), "specs/my%20api%231.yaml");
        assert_eq!(uri("a/b.yaml"), "a/b.yaml");
        assert_eq!(pascal_case("operation-id-missing"), "OperationIdMissing");
    }
}

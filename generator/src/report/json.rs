//! The `--format json` document. Its schema is stable and documented in `docs/check-json.md`;
//! fields are only ever added, and `schema_version` changes if one is removed or changes meaning.

use serde::Serialize;

use super::locate;
use crate::CheckReport;

/// The version of the JSON document's schema.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    tool: Tool,
    spec: Spec<'a>,
    summary: Summary,
    findings: Vec<JsonFinding<'a>>,
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct Spec<'a> {
    path: String,
    openapi: &'a str,
}

#[derive(Serialize)]
struct Summary {
    errors: usize,
    warnings: usize,
    operations: usize,
    idempotent_operations: usize,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    rule: &'static str,
    level: &'static str,
    message: &'a str,
    path: String,
    line: u32,
    column: u32,
    end_line: u32,
    end_column: u32,
    pointer: String,
    operations: &'a [String],
    help: &'a str,
}

/// Renders the report as pretty-printed JSON followed by a newline.
pub fn render(report: &CheckReport) -> String {
    let spec = &report.spec;
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "idemgen",
            version: env!("CARGO_PKG_VERSION"),
        },
        spec: Spec {
            path: spec.sources().file(spec.root_file()).display_path(),
            openapi: spec.version_text(),
        },
        summary: Summary {
            errors: report.errors(),
            warnings: report.warnings(),
            operations: report.operations,
            idempotent_operations: report.idempotent_operations,
        },
        findings: report
            .findings
            .iter()
            .map(|f| {
                let loc = locate(spec, f);
                JsonFinding {
                    rule: f.rule.as_str(),
                    level: f.level.as_str(),
                    message: &f.message,
                    path: loc.path,
                    line: loc.start.line,
                    column: loc.start.col,
                    end_line: loc.end.line,
                    end_column: loc.end.col,
                    pointer: loc.pointer,
                    operations: &f.operations,
                    help: &f.help,
                }
            })
            .collect(),
    };
    let mut text =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

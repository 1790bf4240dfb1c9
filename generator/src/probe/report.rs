//! The probe's output: human (per operation, every check with what was sent and what came back
//! when it failed), JSON, and JUnit XML (one test case per operation and check) for CI.

use std::fmt::Write as _;

use super::http::{Exchange, excerpt};
use super::{CHECKS, Outcome, ProbeReport};

/// The one-line explanation of a check.
pub fn explain(check: &str) -> &'static str {
    CHECKS
        .iter()
        .find(|(id, _)| *id == check)
        .map_or("", |(_, what)| what)
}

fn counts(report: &ProbeReport) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for r in &report.results {
        match r.outcome {
            Outcome::Passed => c.0 += 1,
            Outcome::Failed { .. } => c.1 += 1,
            Outcome::Skipped { .. } => c.2 += 1,
        }
    }
    c
}

fn evidence(out: &mut String, exchange: &Exchange, indent: &str) {
    let sent = &exchange.sent;
    let _ = writeln!(out, "{indent}sent: {} {}", sent.method, sent.url);
    for (name, value) in &sent.headers {
        let _ = writeln!(out, "{indent}      {name}: {}", value.escape_debug());
    }
    if let Some(body) = &sent.body {
        let _ = writeln!(out, "{indent}      body: {}", excerpt(body, 120));
    }
    let got = &exchange.got;
    let _ = writeln!(out, "{indent}got:  {}", got.status);
    for name in [
        "content-type",
        "location",
        "idempotent-replayed",
        "retry-after",
    ] {
        if let Some(value) = got.header(name) {
            let _ = writeln!(out, "{indent}      {name}: {value}");
        }
    }
    if !got.body.is_empty() {
        let _ = writeln!(out, "{indent}      body: {}", excerpt(&got.body, 200));
    }
}

/// Human output.
pub fn human(report: &ProbeReport) -> String {
    let mut out = String::new();
    if !report.dry_run.is_empty() {
        let _ = writeln!(
            out,
            "dry run: every request the probe would send, in order (path parameters without --path-param are filled from a resource it would first create with the same-prefix POST):\n"
        );
        for (what, request) in &report.dry_run {
            let _ = writeln!(out, "# {what}\n{request}");
        }
        return out;
    }
    let mut operation = "";
    for r in &report.results {
        if r.operation != operation {
            operation = &r.operation;
            let _ = writeln!(out, "{operation}");
        }
        match &r.outcome {
            Outcome::Passed => {
                let _ = writeln!(out, "  pass  {:20} {}", r.check, explain(r.check));
            }
            Outcome::Skipped { reason } => {
                let _ = writeln!(out, "  skip  {:20} {reason}", r.check);
            }
            Outcome::Failed { why, evidence: e } => {
                let _ = writeln!(out, "  FAIL  {:20} {why}", r.check);
                let _ = writeln!(out, "        expected: {}", explain(r.check));
                if let Some(e) = e {
                    evidence(&mut out, e, "        ");
                }
            }
        }
    }
    let (passed, failed, skipped) = counts(report);
    let _ = writeln!(
        out,
        "\nidemgen probe: {passed} passed, {failed} failed, {skipped} skipped"
    );
    out
}

/// JSON output: `{"passed","failed","skipped","results":[{"operation","check","outcome",
/// "why"|"reason","explanation","evidence":{"sent","got"}}]}`.
pub fn json(report: &ProbeReport) -> String {
    let (passed, failed, skipped) = counts(report);
    let results: Vec<serde_json::Value> = report
        .results
        .iter()
        .map(|r| {
            let mut v = serde_json::json!({
                "operation": r.operation,
                "check": r.check,
                "explanation": explain(r.check),
            });
            match &r.outcome {
                Outcome::Passed => v["outcome"] = "passed".into(),
                Outcome::Skipped { reason } => {
                    v["outcome"] = "skipped".into();
                    v["reason"] = reason.clone().into();
                }
                Outcome::Failed { why, evidence } => {
                    v["outcome"] = "failed".into();
                    v["why"] = why.clone().into();
                    v["evidence"] = serde_json::to_value(evidence).unwrap_or_default();
                }
            }
            v
        })
        .collect();
    let doc = serde_json::json!({
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
        "results": results,
        "dry_run": report.dry_run,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn xml(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: one test suite, one test case per operation and check.
pub fn junit(report: &ProbeReport) -> String {
    let (passed, failed, skipped) = counts(report);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"idemgen probe\" tests=\"{}\" failures=\"{failed}\" skipped=\"{skipped}\">",
        passed + failed + skipped
    );
    for r in &report.results {
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}\">",
            xml(&r.operation),
            xml(r.check)
        );
        match &r.outcome {
            Outcome::Passed => {}
            Outcome::Skipped { reason } => {
                let _ = write!(out, "<skipped message=\"{}\"/>", xml(reason));
            }
            Outcome::Failed { why, evidence: e } => {
                let mut detail = String::new();
                if let Some(e) = e {
                    evidence(&mut detail, e, "");
                }
                let _ = write!(
                    out,
                    "<failure message=\"{}\">{}</failure>",
                    xml(why),
                    xml(&detail)
                );
            }
        }
        let _ = writeln!(out, "</testcase>");
    }
    out.push_str("</testsuite>\n");
    out
}

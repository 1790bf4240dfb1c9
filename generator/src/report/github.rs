//! GitHub Actions workflow commands: one `::error` or `::warning` annotation per finding.

use std::fmt::Write;

use super::locate;
use crate::CheckReport;
use crate::finding::Level;
use crate::loader::LoadError;

/// Escapes a command's message: `%`, CR and LF.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a command property: as [`escape_data`], plus `:` and `,`.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Renders one annotation per finding.
pub fn render(report: &CheckReport) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let loc = locate(&report.spec, f);
        let command = if f.level == Level::Error {
            "error"
        } else {
            "warning"
        };
        let mut props = format!(
            "file={},line={},col={}",
            escape_property(&loc.path),
            loc.start.line,
            loc.start.col
        );
        if loc.end > loc.start {
            let _ = write!(props, ",endLine={},endColumn={}", loc.end.line, loc.end.col);
        }
        let _ = writeln!(
            out,
            "::{command} {props},title={}::{}",
            escape_property(f.rule.as_str()),
            escape_data(&format!("{}\n\nhelp: {}", f.message, f.help))
        );
    }
    out
}

/// Renders the problems that stopped a spec from loading as error annotations.
pub fn render_load_error(error: &LoadError) -> String {
    let mut out = String::new();
    for p in &error.problems {
        let mut props = String::from("title=idemgen");
        if let Some((file, span)) = p.location
            && let Some(source) = error.sources.get(file)
        {
            props = format!(
                "file={},line={},col={},{props}",
                escape_property(&source.display_path()),
                span.start.line,
                span.start.col
            );
        }
        let _ = writeln!(out, "::error {props}::{}", escape_data(&p.message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_follow_the_toolkit() {
        assert_eq!(escape_data("50% done\r\nnext"), "50%25 done%0D%0Anext");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
    }
}

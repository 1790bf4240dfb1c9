//! Renders a [`CheckReport`] (or a [`LoadError`]) in the output formats `idemgen check` offers.
//!
//! Every renderer returns a `String`; the binary decides where it goes. Paths are printed as the
//! loader recorded them (relative to the working directory when the spec was given relatively),
//! so output is reproducible across machines.

pub mod github;
pub mod human;
pub mod json;
pub mod sarif;

use crate::CheckReport;
use crate::finding::Finding;
use crate::loader::{FileId, LoadedSpec, Pos};

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// rustc-style diagnostics with code frames.
    Human,
    /// The JSON document described in `docs/check-json.md`.
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=...::message`).
    Github,
}

/// Renders `report` in `format`; `color` only affects [`Format::Human`].
pub fn render(report: &CheckReport, format: Format, color: bool) -> String {
    match format {
        Format::Human => human::render(report, color),
        Format::Json => json::render(report),
        Format::Sarif => sarif::render(report),
        Format::Github => github::render(report),
    }
}

/// A finding's position, resolved for printing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file path as printed.
    pub path: String,
    /// The start of the finding.
    pub start: Pos,
    /// The end of the finding.
    pub end: Pos,
    /// The JSON pointer of the node within its file.
    pub pointer: String,
}

/// Resolves where `finding` points.
pub fn locate(spec: &LoadedSpec, finding: &Finding) -> Located {
    Located {
        path: path_of(spec, finding.file),
        start: finding.span.start,
        end: finding.span.end,
        pointer: spec.pointer_of(finding.file, finding.span),
    }
}

fn path_of(spec: &LoadedSpec, file: FileId) -> String {
    spec.sources()
        .get(file)
        .map(|f| f.display_path())
        .unwrap_or_default()
}

/// `1 error`, `2 warnings`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

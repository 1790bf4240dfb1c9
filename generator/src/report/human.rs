//! rustc-style diagnostics: `error[rule-id]: message`, ` --> file:line:col`, a code frame with a
//! caret under the problem, a `help:` with a YAML snippet, and a summary line.
//!
//! The renderer emits ANSI styles only when asked (`color`); the binary asks when stdout is a
//! terminal and `NO_COLOR` is unset (via `anstream`).

use std::fmt::Write;

use anstyle::{AnsiColor, Style};

use super::{locate, plural};
use crate::CheckReport;
use crate::finding::Level;
use crate::loader::{LoadError, Pos, SourceFile};

struct Styles {
    error: Style,
    warning: Style,
    help: Style,
    gutter: Style,
    bold: Style,
}

impl Styles {
    fn new(color: bool) -> Self {
        if !color {
            let plain = Style::new();
            return Styles {
                error: plain,
                warning: plain,
                help: plain,
                gutter: plain,
                bold: plain,
            };
        }
        Styles {
            error: AnsiColor::Red.on_default().bold(),
            warning: AnsiColor::Yellow.on_default().bold(),
            help: AnsiColor::Cyan.on_default().bold(),
            gutter: AnsiColor::Blue.on_default().bold(),
            bold: Style::new().bold(),
        }
    }

    fn level(&self, level: Level) -> Style {
        match level {
            Level::Error => self.error,
            _ => self.warning,
        }
    }
}

/// Renders every finding and a summary line.
pub fn render(report: &CheckReport, color: bool) -> String {
    let s = Styles::new(color);
    let mut out = String::new();
    for finding in &report.findings {
        let loc = locate(&report.spec, finding);
        let level = finding.level;
        let _ = writeln!(
            out,
            "{}{}[{}]{}{}: {}{}",
            s.level(level).render(),
            level.as_str(),
            finding.rule,
            s.level(level).render_reset(),
            s.bold.render(),
            finding.message,
            s.bold.render_reset()
        );
        let source = report.spec.sources().get(finding.file);
        frame(&mut out, &s, &loc.path, source, loc.start, loc.end);
        if finding.operations.len() > 1 {
            let width = gutter_width(loc.start);
            let _ = writeln!(
                out,
                "{:width$} {}={} note: shared by {} operations: {}",
                "",
                s.gutter.render(),
                s.gutter.render_reset(),
                finding.operations.len(),
                finding.operations.join(", ")
            );
        }
        help(&mut out, &s, &finding.help);
        out.push('\n');
    }
    let errors = report.errors();
    let warnings = report.warnings();
    let counts = format!(
        "{}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    );
    let scope = format!(
        "{} of {} marked x-idempotent",
        report.idempotent_operations,
        plural(report.operations, "operation")
    );
    let (style, word) = match (errors, warnings) {
        (0, 0) => (s.help, "ok"),
        (0, _) => (s.warning, "warning"),
        _ => (s.error, "error"),
    };
    let _ = writeln!(
        out,
        "{}{word}{}: idemgen check: {counts} ({scope})",
        style.render(),
        style.render_reset()
    );
    out
}

/// Renders the problems that stopped a spec from loading.
pub fn render_load_error(error: &LoadError, color: bool) -> String {
    let s = Styles::new(color);
    let mut out = String::new();
    for problem in &error.problems {
        let _ = writeln!(
            out,
            "{}error{}{}: {}{}",
            s.error.render(),
            s.error.render_reset(),
            s.bold.render(),
            problem.message,
            s.bold.render_reset()
        );
        if let Some((file, span)) = problem.location {
            let source = error.sources.get(file);
            let path = source.map(SourceFile::display_path).unwrap_or_default();
            frame(&mut out, &s, &path, source, span.start, span.end);
        }
        if let Some(text) = &problem.help {
            help(&mut out, &s, text);
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{}error{}: idemgen check: the spec could not be loaded ({})",
        s.error.render(),
        s.error.render_reset(),
        plural(error.problems.len(), "problem")
    );
    out
}

/// The widest source excerpt shown in a code frame, in characters.
const MAX_FRAME_WIDTH: usize = 120;

fn gutter_width(start: Pos) -> usize {
    start.line.to_string().len()
}

/// ` --> path:line:col` and the source line with a caret under the span.
fn frame(
    out: &mut String,
    s: &Styles,
    path: &str,
    source: Option<&SourceFile>,
    start: Pos,
    end: Pos,
) {
    let width = gutter_width(start);
    let g = s.gutter.render();
    let r = s.gutter.render_reset();
    let _ = writeln!(
        out,
        "{:width$}{g}-->{r} {path}:{}:{}",
        "", start.line, start.col
    );
    let Some(line) = source.and_then(|f| f.line(start.line)) else {
        return;
    };
    let line: Vec<char> = line
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    let col = usize::try_from(start.col)
        .unwrap_or(1)
        .saturating_sub(1)
        .min(line.len());
    // Long lines (minified JSON) are cut to a window around the column.
    let (line, col) = if line.len() > MAX_FRAME_WIDTH {
        let from = col.saturating_sub(MAX_FRAME_WIDTH / 3);
        let to = (from + MAX_FRAME_WIDTH).min(line.len());
        let mut shown = String::new();
        if from > 0 {
            shown.push_str("...");
        }
        shown.extend(&line[from..to]);
        if to < line.len() {
            shown.push_str("...");
        }
        (shown, col - from + if from > 0 { 3 } else { 0 })
    } else {
        (line.into_iter().collect::<String>(), col)
    };
    let chars = line.chars().count();
    let len = if end.line == start.line && end.col > start.col {
        usize::try_from(end.col - start.col).unwrap_or(1)
    } else if end.line > start.line {
        line.trim_end().chars().count().saturating_sub(col)
    } else {
        1
    }
    .clamp(1, chars.saturating_sub(col).max(1));
    let _ = writeln!(out, "{:width$} {g}|{r}", "");
    let _ = writeln!(out, "{g}{}{r} {g}|{r} {line}", start.line);
    let _ = writeln!(
        out,
        "{:width$} {g}|{r} {:col$}{}{}{}",
        "",
        "",
        s.bold.render(),
        "^".repeat(len),
        s.bold.render_reset()
    );
    let _ = writeln!(out, "{:width$} {g}|{r}", "");
}

/// `help: first line` followed by the snippet, indented under the message.
fn help(out: &mut String, s: &Styles, text: &str) {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let _ = writeln!(
        out,
        "{}help{}: {first}",
        s.help.render(),
        s.help.render_reset()
    );
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let _ = writeln!(out, "      {line}");
    }
}

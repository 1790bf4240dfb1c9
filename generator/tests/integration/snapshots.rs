//! Snapshots of what a user sees. Paths in them are relative (fixtures are checked by relative
//! path), so they are the same on every machine.

use idemgen::Config;
use idemgen::loader::load;
use idemgen::report::{Format, human, render};

use crate::common::{check_fixture, fixture};

#[test]
fn human_output_of_split_spec() {
    let report = check_fixture("split/openapi.yaml", &Config::default());
    insta::assert_snapshot!(render(&report, Format::Human, false));
}

#[test]
fn human_output_of_every_rule() {
    let mut out = String::new();
    for rule in idemgen::RuleId::ALL {
        let report = check_fixture(&crate::common::rule_fixture(rule), &Config::default());
        out.push_str(&render(&report, Format::Human, false));
        out.push_str("----\n");
    }
    insta::assert_snapshot!(out);
}

#[test]
fn human_output_of_clean_spec() {
    let report = check_fixture("clean-3.1.yaml", &Config::default());
    insta::assert_snapshot!(render(&report, Format::Human, false));
}

#[test]
fn human_output_with_color_has_ansi_styles_and_same_text() {
    let report = check_fixture("rules/idempotency-key-missing.yaml", &Config::default());
    let colored = render(&report, Format::Human, true);
    let plain = render(&report, Format::Human, false);
    assert!(colored.contains("\u{1b}["), "styles expected");
    assert_eq!(strip_ansi(&colored), plain);
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn json_output_of_split_spec() {
    let report = check_fixture("split/openapi.yaml", &Config::default());
    insta::assert_snapshot!(render(&report, Format::Json, false));
}

#[test]
fn json_output_of_clean_spec() {
    let report = check_fixture("clean-3.0.json", &Config::default());
    insta::assert_snapshot!(render(&report, Format::Json, false));
}

#[test]
fn human_output_of_load_errors() {
    let mut out = String::new();
    for name in [
        "load/swagger-2.0.yaml",
        "load/invalid-yaml.yaml",
        "load/cyclic-ref.yaml",
        "load/missing-ref-file.yaml",
    ] {
        // A cycle or a missing file is a finding at its `$ref`; the others stop the load.
        match load(&fixture(name)) {
            Ok(spec) => {
                let report = idemgen::check_loaded(spec, &Config::default());
                out.push_str(&render(&report, Format::Human, false));
            }
            Err(e) => out.push_str(&human::render_load_error(&e, false)),
        }
        out.push_str("----\n");
    }
    insta::assert_snapshot!(out);
}

#[test]
fn code_frames_of_minified_json_show_a_window_around_the_column() {
    use idemgen::loader::{MemoryFs, load_with};
    let padding = format!("\"x-pad\": \"{}\", ", "p".repeat(5_000));
    let text = format!(
        "{{{padding}\"openapi\": \"3.1.0\", \"paths\": {{\"/w\": {{\"post\": {{\"x-idempotent\": \"yes\"}}}}}}}}"
    );
    let mut fs = MemoryFs::new();
    fs.insert("min.json", text);
    let spec = load_with(&fs, std::path::Path::new("min.json")).expect("loads");
    let report = idemgen::check_loaded(spec, &Config::default());
    let out = render(&report, Format::Human, false);
    let finding = out
        .find("error[x-idempotent-not-boolean]")
        .expect("the finding");
    let frame: Vec<&str> = out[finding..]
        .lines()
        .skip_while(|l| !l.starts_with("1 |"))
        .take(2)
        .collect();
    assert!(
        frame[0].len() < 140,
        "frame line is cut: {}",
        frame[0].len()
    );
    assert!(
        frame[0].contains("\"x-idempotent\": \"yes\""),
        "{}",
        frame[0]
    );
    let caret = frame[1].find('^').expect("caret");
    assert_eq!(
        &frame[0][caret..caret + 5],
        "\"yes\"",
        "caret under the value:\n{}\n{}",
        frame[0],
        frame[1]
    );
}

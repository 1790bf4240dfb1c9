//! `.json` files are read by the JSON parser: every valid JSON document loads (surrogate-pair
//! escapes included), findings point at the written text, and what is not JSON is a load error
//! that says "invalid JSON" at a position. Other files still go through the YAML parser.

use std::path::Path;

use idemgen::loader::{LoadError, MemoryFs, Node, Value, load_with};
use idemgen::report::{Format, human, locate, render};
use idemgen::{Config, check_loaded};
use proptest::prelude::*;

use crate::common::check_fixture;

/// A minimal OpenAPI document in JSON around `info_title` (written as is, escapes included).
fn spec_with_title(info_title: &str) -> String {
    format!(
        "{{\"openapi\": \"3.1.0\", \"info\": {{\"title\": \"{info_title}\", \"version\": \"1\"}}, \"paths\": {{}}}}"
    )
}

fn load_text(path: &str, text: &str) -> Result<idemgen::LoadedSpec, LoadError> {
    let mut fs = MemoryFs::new();
    fs.insert(path, text);
    load_with(&fs, Path::new(path))
}

fn title(spec: &idemgen::LoadedSpec) -> Option<String> {
    spec.root()
        .node
        .get("info")
        .and_then(|i| i.get("title"))
        .and_then(Node::as_str)
        .map(str::to_owned)
}

#[test]
fn a_surrogate_pair_escape_loads_as_its_character() {
    // How Python's json.dumps writes 👍 (Twilio's spec has such escapes).
    for path in ["twilio.json", "TWILIO.JSON", "api/Spec.Json"] {
        let spec = load_text(path, &spec_with_title(r"\ud83d\udc4d"))
            .unwrap_or_else(|e| panic!("{path} should load: {e}"));
        assert_eq!(title(&spec).as_deref(), Some("👍"), "{path}");
    }
    // Other escapes decode too; a literal character is kept.
    let spec = load_text("s.json", &spec_with_title(r"caf\u00e9 \u2714 \/ \t 👍")).expect("loads");
    assert_eq!(title(&spec).as_deref(), Some("café ✔ / \t 👍"));
}

#[test]
fn a_byte_order_mark_is_tolerated_and_takes_no_column() {
    let text =
        "{\"openapi\": \"3.1.0\", \"paths\": {\"/w\": {\"post\": {\"x-idempotent\": \"yes\"}}}}";
    let columns = |text: &str| -> Vec<u32> {
        let report = check_loaded(
            load_text("bom.json", text).expect("loads"),
            &Config::default(),
        );
        report
            .findings
            .iter()
            .map(|f| locate(&report.spec, f).start.col)
            .collect()
    };
    let plain = columns(text);
    assert!(!plain.is_empty());
    // As the YAML parser counts it: the first character after the mark is column 1.
    assert_eq!(columns(&format!("\u{FEFF}{text}")), plain);
}

/// A JSON spec written with escapes and non-ASCII text, a `$ref` to another JSON file and one to
/// a YAML file: each finding is at the line and column (in characters, escapes counted as
/// written) of the text it is about, with the right JSON pointer and an exact end.
#[test]
fn findings_on_json_specs_point_at_the_written_text() {
    let report = check_fixture("load/unicode.json", &Config::default());
    let mut found: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            let loc = locate(&report.spec, f);
            format!(
                "{} {}:{}:{}-{} {}",
                f.rule, loc.path, loc.start.line, loc.start.col, loc.end.col, loc.pointer
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            // `"1000"` in the referenced JSON file (4 characters).
            "idempotency-key-max-length tests/fixtures/load/unicode-common.json:7:68-72 /components/parameters/IdempotencyKey/schema/maxLength",
            // `responses` after a line of escapes and accented text.
            "unavailable-response-missing tests/fixtures/load/unicode.json:7:9-20 /paths/~1wïdgets/post/responses",
            // `"yes"`: column 98 counts characters (`é` is one), byte 99.
            "x-idempotent-not-boolean tests/fixtures/load/unicode.json:6:98-103 /paths/~1wïdgets/post/x-idempotent",
        ]
    );
    // The code frame puts the caret under `"yes"`.
    let out = render(&report, Format::Human, false);
    let at = out
        .find("error[x-idempotent-not-boolean]")
        .expect("the finding");
    let frame: Vec<&str> = out[at..]
        .lines()
        .skip_while(|l| !l.starts_with("6 |"))
        .take(2)
        .collect();
    let caret = frame[1].find('^').expect("caret");
    let under: String = frame[0]
        .chars()
        .skip(frame[1][..caret].chars().count())
        .take(5)
        .collect();
    assert_eq!(under, "\"yes\"", "{}\n{}", frame[0], frame[1]);
}

/// Loads `text` as `spec.json` and returns its one problem as `message @ line:col`.
fn json_error(text: &str) -> String {
    let err = load_text("spec.json", text).expect_err("should not load");
    assert_eq!(err.problems.len(), 1, "{err}");
    let problem = &err.problems[0];
    let (_, span) = problem.location.expect("a position");
    // The rendered error names the format and never panics.
    let shown = human::render_load_error(&err, false);
    assert!(shown.contains("error: invalid JSON: "), "{shown}");
    assert!(
        err.to_string().starts_with(&format!(
            "spec.json:{}:{}: invalid JSON: ",
            span.start.line, span.start.col
        )),
        "{err}"
    );
    format!(
        "{} @ {}:{}",
        problem.message, span.start.line, span.start.col
    )
}

#[test]
fn what_is_not_json_is_an_invalid_json_error_at_its_position() {
    let cases: [(String, &str, &str); 9] = [
        (
            "{\"openapi\": \"3.1.0\",\n \"info\": {\"title\": \"half \\ud83d\", \"version\": \"1\"}}".into(),
            "invalid JSON: invalid Unicode escape `\\ud83d`: unpaired high surrogate",
            "2:26",
        ),
        (
            "{\"openapi\": \"3.1.0\",\n \"paths\": {},\n}".into(),
            "invalid JSON: a trailing comma is not allowed in JSON",
            "2:13",
        ),
        (
            "{\"openapi\": \"3.1.0\", // the version\n \"paths\": {}}".into(),
            "invalid JSON: comments are not allowed in JSON",
            "1:22",
        ),
        (
            "{\"openapi\": \"3.1.0\",\n \"paths\": {},\n \"openapi\": \"3.0.3\"}".into(),
            "invalid JSON: duplicate key `openapi` (first defined at line 1)",
            "3:2",
        ),
        (
            "[".repeat(10_000),
            "invalid JSON: nesting deeper than 256 levels",
            "1:",
        ),
        (
            format!("{{\"openapi\": \"3.1.0\", \"x\": {}{}}}", "[".repeat(300), "]".repeat(300)),
            "invalid JSON: nesting deeper than 256 levels",
            // The root object and 255 arrays are 256 levels: the 256th `[` is one too many.
            "1:282",
        ),
        (
            "{\"openapi\": \"3.1.0\", \"info\": {\"title\": \"tab\there\"}}".into(),
            "invalid JSON: control character U+0009 must be escaped",
            "1:44",
        ),
        ("  \n".into(), "invalid JSON: the file is empty", "1:1"),
        // YAML in a `.json` file: the extension decides the parser.
        (
            "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\n".into(),
            "invalid JSON: unexpected word",
            "1:1",
        ),
    ];
    for (text, message, at) in &cases {
        let got = json_error(text);
        let (got_message, got_at) = got.split_once(" @ ").expect("formatted");
        assert!(
            got_message.starts_with(message),
            "{got} does not start with {message}"
        );
        assert!(got_at.starts_with(at), "{got}: expected at {at}");
    }
}

#[test]
fn a_referenced_json_file_is_read_as_json() {
    let mut fs = MemoryFs::new();
    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {$ref: 'paths/a.json'}\n",
    );
    // Valid JSON that saphyr refuses: it loads.
    fs.insert(
        "api/paths/a.json",
        "{\"get\": {\"summary\": \"\\ud83d\\udc4d\", \"responses\": {\"200\": {\"description\": \"ok\"}}}}",
    );
    let spec = load_with(&fs, Path::new("api/openapi.yaml")).expect("loads");
    let target = spec
        .resolve_ref(spec.root_file(), "paths/a.json#/get/summary")
        .expect("resolves");
    assert_eq!(target.node.as_str(), Some("👍"));

    // Not JSON: the error is in that file, and says JSON.
    fs.insert("api/paths/a.json", "{\"get\": {\"responses\": {},}}\n");
    let err = load_with(&fs, Path::new("api/openapi.yaml")).expect_err("does not parse");
    assert_eq!(
        err.to_string(),
        "api/paths/a.json:1:25: invalid JSON: a trailing comma is not allowed in JSON"
    );
}

#[test]
fn json_numbers_are_integers_when_they_fit_and_floats_otherwise() {
    let spec = load_text(
        "n.json",
        "{\"openapi\": \"3.1.0\", \"paths\": {}, \"x-n\": [1, -0, 1.5e3, 18446744073709551616, -9223372036854775808, 2.5E-1]}",
    )
    .expect("loads");
    let numbers: Vec<Value> = spec
        .root()
        .node
        .get("x-n")
        .and_then(Node::as_seq)
        .expect("x-n")
        .iter()
        .map(|n| n.value.clone())
        .collect();
    assert_eq!(
        numbers,
        [
            Value::Int(1),
            Value::Int(0),
            Value::Float(1500.0),
            // Beyond i64: the nearest float, as the YAML parser resolves it.
            Value::Float(18_446_744_073_709_551_616.0),
            Value::Int(i64::MIN),
            Value::Float(0.25),
        ]
    );
}

#[test]
fn yaml_files_still_go_through_the_yaml_parser() {
    // YAML-only syntax (block style, comments, anchors) in a `.yaml` file.
    let spec = load_text(
        "spec.yaml",
        "# a comment\nopenapi: 3.1.0\ninfo: &i {title: t, version: '1'}\nx-copy: *i\npaths: {}\n",
    )
    .expect("loads");
    assert_eq!(
        spec.root()
            .node
            .get("x-copy")
            .and_then(|c| c.get("title"))
            .and_then(Node::as_str),
        Some("t")
    );
    // JSON text in a `.yaml` file is YAML as before (JSON is YAML).
    let spec = load_text("spec.yml", &spec_with_title("plain")).expect("loads");
    assert_eq!(title(&spec).as_deref(), Some("plain"));
    // And its errors still say YAML.
    let err = load_text("spec.yaml", "openapi: 3.1.0\npaths: {a: [\n").expect_err("broken");
    assert!(
        err.problems[0].message.starts_with("invalid YAML: "),
        "{err}"
    );
}

const JSON_FIXTURES: [&str; 4] = [
    include_str!("../fixtures/clean-3.0.json"),
    include_str!("../fixtures/key-missing.json"),
    include_str!("../fixtures/load/unicode.json"),
    include_str!("../fixtures/load/unicode-common.json"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// Byte edits of JSON specs, loaded as `.json`: a spec or a located "invalid JSON" error,
    /// never a panic.
    #[test]
    fn mutated_json_never_panics(
        which in 0usize..JSON_FIXTURES.len(),
        edits in prop::collection::vec(
            (any::<usize>(), prop::sample::select(b" \t\n{}[],:\"\\/u0123456789abcdefE.-+*#xtrueflsn\x0b\xc3\xa9".to_vec()), any::<bool>()),
            1..6,
        ),
    ) {
        let mut bytes = JSON_FIXTURES[which].as_bytes().to_vec();
        for (at, byte, insert) in edits {
            let at = at % (bytes.len() + 1);
            if insert || at == bytes.len() {
                bytes.insert(at, byte);
            } else {
                bytes[at] = byte;
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match load_text("spec.json", &text) {
            Ok(spec) => {
                let report = check_loaded(spec, &Config::default());
                let _ = render(&report, Format::Human, false);
            }
            Err(e) => {
                prop_assert!(!e.problems.is_empty());
                let first = &e.problems[0];
                if first.message.starts_with("invalid JSON: ") {
                    prop_assert!(first.location.is_some(), "{}", first.message);
                }
                let _ = human::render_load_error(&e, false);
            }
        }
    }
}

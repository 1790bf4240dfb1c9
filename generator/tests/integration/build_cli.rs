//! The `build`, `scaffold` and `fingerprint` commands: exit codes and what they print.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn idemgen(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idemgen"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idemgen");
    if let Some(input) = stdin {
        // A command that answers without reading all of its input closes the pipe first; what
        // it answered is what the test checks.
        if let Err(e) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn build_check_passes_on_committed_output_and_fails_on_drift() {
    let ok = idemgen(
        &[
            "build",
            "tests/fixtures/build/widgets/openapi.yaml",
            "--out",
            "tests/compile/src/widgets",
            "--check",
        ],
        None,
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert_eq!(text(&ok.stdout), "up to date\n");

    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("openapi.yaml");
    std::fs::copy("tests/fixtures/build/widgets/openapi.yaml", &spec).unwrap();
    let out = dir.path().join("api");
    let (spec, out) = (spec.to_str().unwrap(), out.to_str().unwrap());
    let drift = idemgen(&["build", spec, "--out", out, "--check"], None);
    assert_eq!(drift.status.code(), Some(1));
    let stderr = text(&drift.stderr);
    assert!(
        stderr.contains("missing: ")
            && stderr.contains("mod.rs")
            && stderr.contains("idemgen.lock"),
        "{stderr}"
    );
    assert!(!Path::new(out).exists(), "--check writes nothing");

    let built = idemgen(&["build", spec, "--out", out], None);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let stdout = text(&built.stdout);
    assert!(
        stdout.contains("wrote ") && !stdout.contains("unchanged"),
        "{stdout}"
    );
    // A second build changes nothing, and says so.
    let again = text(&idemgen(&["build", spec, "--out", out], None).stdout);
    assert_eq!(again.matches("unchanged ").count(), 2, "{again}");
    assert!(!again.contains("wrote "), "{again}");
    assert_eq!(
        idemgen(&["build", spec, "--out", out, "--check"], None)
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn build_refuses_specs_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("api");
    let output = idemgen(
        &[
            "build",
            "tests/fixtures/rules/idempotency-key-missing.yaml",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("error[idempotency-key-missing]"),
        "{stderr}"
    );
    assert!(stderr.contains("not generating code"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn scaffold_never_overwrites_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("service.rs");
    let file = file.to_str().unwrap();
    let spec = "tests/fixtures/build/widgets/openapi.yaml";
    let first = idemgen(&["scaffold", spec, "--out", file], None);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    std::fs::write(file, "// mine\n").unwrap();
    let again = idemgen(&["scaffold", spec, "--out", file], None);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(file).unwrap(), "// mine\n");
    let forced = idemgen(&["scaffold", spec, "--out", file, "--force"], None);
    assert_eq!(forced.status.code(), Some(0));
    assert!(
        std::fs::read_to_string(file)
            .unwrap()
            .contains("impl WidgetsApi for WidgetsService")
    );
}

/// `--store sqlite`: the skeleton's store is `SqliteStore` and the `main.rs` opens a file (the
/// compiled snapshot is `build::sqlite_scaffold_is_the_committed_snapshot`); `--store
/// tokio-postgres` writes `TokioPgStore` and its pool; a store the command does not know is a
/// usage error.
#[test]
fn scaffold_store_sqlite_writes_a_service_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (service, main) = (dir.path().join("service.rs"), dir.path().join("main.rs"));
    let spec = "tests/fixtures/build/widgets/openapi.yaml";
    let args = |store: &str| {
        vec![
            "scaffold".to_string(),
            spec.into(),
            "--out".into(),
            service.display().to_string(),
            "--main".into(),
            main.display().to_string(),
            "--store".into(),
            store.into(),
            "--force".into(),
        ]
    };
    let run = |store: &str| {
        let args = args(store);
        idemgen(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
    };
    let sqlite = run("sqlite");
    assert_eq!(sqlite.status.code(), Some(0), "{}", text(&sqlite.stderr));
    let skeleton = std::fs::read_to_string(&service).unwrap();
    assert!(skeleton.contains("type Store = idemgen_runtime::SqliteStore;"));
    let served = std::fs::read_to_string(&main).unwrap();
    assert!(served.contains("SqliteStore::open(&path)"), "{served}");
    assert!(!served.contains("PgStore") && !served.contains("DATABASE_URL"));
    let postgres = run("postgres");
    assert_eq!(postgres.status.code(), Some(0));
    assert!(
        std::fs::read_to_string(&main)
            .unwrap()
            .contains("PgStore::new")
    );
    let tokio = run("tokio-postgres");
    assert_eq!(tokio.status.code(), Some(0), "{}", text(&tokio.stderr));
    assert!(
        std::fs::read_to_string(&service)
            .unwrap()
            .contains("type Store = idemgen_runtime::TokioPgStore;")
    );
    assert!(
        std::fs::read_to_string(&main)
            .unwrap()
            .contains("TokioPgStore::pool(&url, 16)")
    );
    let unknown = run("mysql");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("possible values: postgres, tokio-postgres, sqlite"),
        "{}",
        text(&unknown.stderr)
    );
}

/// `--main-only` (a move between the stores) writes the `main.rs` of the other store and leaves
/// the skeleton, the user's handlers, as it is, even with `--force`; without `--main` it is a
/// usage error.
#[test]
fn scaffold_main_only_leaves_the_handlers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (service, main) = (dir.path().join("service.rs"), dir.path().join("main.rs"));
    let (service, main) = (service.to_str().unwrap(), main.to_str().unwrap());
    let spec = "tests/fixtures/build/widgets/openapi.yaml";
    std::fs::write(service, "// my handlers\n").unwrap();
    std::fs::write(main, "// my main, on PostgreSQL\n").unwrap();
    let moved = idemgen(
        &[
            "scaffold",
            spec,
            "--out",
            service,
            "--main",
            main,
            "--store",
            "sqlite",
            "--main-only",
            "--force",
        ],
        None,
    );
    assert_eq!(moved.status.code(), Some(0), "{}", text(&moved.stderr));
    assert_eq!(
        std::fs::read_to_string(service).unwrap(),
        "// my handlers\n"
    );
    let served = std::fs::read_to_string(main).unwrap();
    assert!(served.contains("SqliteStore::open(&path)"), "{served}");
    assert!(served.contains("mod service;"), "{served}");
    assert!(!text(&moved.stdout).contains("service.rs"));
    let alone = idemgen(&["scaffold", spec, "--out", service, "--main-only"], None);
    assert_eq!(alone.status.code(), Some(2));
    assert!(
        text(&alone.stderr).contains("--main"),
        "{}",
        text(&alone.stderr)
    );
}

/// Every `hs2-vector` and `hs1-vector` block of protocol.md, through the command line: `hs2` by
/// default (what new records get), `hs1` with `--format hs1`.
#[test]
fn fingerprint_matches_the_protocol_vectors() {
    let protocol = std::fs::read_to_string("../protocol.md").unwrap();
    let vectors_of = |format: &str| -> Vec<serde_json::Value> {
        protocol
            .split(&format!("```json {format}-vector\n"))
            .skip(1)
            .map(|block| serde_json::from_str(block.split("```").next().unwrap()).unwrap())
            .collect()
    };
    let (hs1, hs2) = (vectors_of("hs1"), vectors_of("hs2"));
    assert!(hs1.len() >= 7 && hs2.len() >= 9);
    let runs = hs2
        .iter()
        .map(|v| (v, None))
        .chain(hs1.iter().map(|v| (v, Some("hs1"))));
    for (v, format) in runs {
        let input = serde_json::to_string(&v["input"]).unwrap();
        let version = v["version"].to_string();
        let mut args = vec![
            "fingerprint",
            "--operation",
            v["operation"].as_str().unwrap(),
            "--version",
            &version,
        ];
        if let Some(format) = format {
            args.extend(["--format", format]);
        }
        let output = idemgen(&args, Some(&input));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert_eq!(
            text(&output.stdout).trim(),
            v["fingerprint"].as_str().unwrap(),
            "{input} {format:?}"
        );
    }
    // `--format hs2` is the default spelled out, and an unknown format is a usage error.
    let odd = r#"{"body":{"ledger_id":9007199254740993}}"#;
    let explicit = idemgen(
        &[
            "fingerprint",
            "--operation",
            "createTransfer",
            "--version",
            "1",
            "--format",
            "hs2",
        ],
        Some(odd),
    );
    assert_eq!(
        text(&explicit.stdout).trim(),
        "hs2:53c5e4dfb5a48b70bd9701ec3e1e5e1a81a6a8466f2effe943a131f5395bf25e"
    );
    let unknown = idemgen(
        &[
            "fingerprint",
            "--operation",
            "x",
            "--version",
            "1",
            "--format",
            "hs3",
        ],
        Some("{}"),
    );
    assert_eq!(unknown.status.code(), Some(2));
    let bad = idemgen(
        &["fingerprint", "--operation", "x", "--version", "1"],
        Some("{nope"),
    );
    assert_eq!(bad.status.code(), Some(2));
    let zero = idemgen(
        &["fingerprint", "--operation", "x", "--version", "0"],
        Some("{}"),
    );
    assert_eq!(zero.status.code(), Some(2));
}

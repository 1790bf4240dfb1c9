//! What users compile: `cargo tree` of the workspace's stand-in user crates. A crate that only
//! calls a generated client (generator/tests/clientonly) compiles no server, and a build script
//! using `idemgen::Builder` (generator/tests/buildscript, `default-features = false`) compiles
//! only the engine: no argument parser, HTTP client, TLS stack or template engine. A service on
//! SQLite alone (examples/notes: the runtime without its default `postgres` feature) compiles
//! no PostgreSQL driver.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `cargo tree` of package `package` with `args`, as text (`--prefix depth`, offline: the
/// workspace's lock file decides, nothing is fetched).
fn cargo_tree(package: &str, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(cargo)
        .current_dir(&workspace)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            package,
            "--prefix",
            "depth",
        ])
        .args(args)
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The crate names in a `--prefix depth` tree (`3sqlx-core v0.9.0 (…)` → `sqlx-core`).
fn names(lines: &[&str]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|l| l.trim_start_matches(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_crate_that_only_calls_a_generated_client_compiles_no_server() {
    let tree = cargo_tree("idemgen-clientonly-tests", &["-e", "normal"]);
    let lines: Vec<&str> = tree.lines().collect();
    let crates = names(&lines);
    for expected in ["idemgen-client", "idemgen-protocol", "reqwest"] {
        assert!(crates.contains(expected), "{expected} missing:\n{tree}");
    }
    for server in [
        "idemgen-runtime",
        "sqlx",
        "sqlx-core",
        "sqlx-postgres",
        "axum",
        "axum-core",
    ] {
        assert!(!crates.contains(server), "{server} is compiled:\n{tree}");
    }
    // hyper is there for reqwest, as a client only.
    let features = cargo_tree("idemgen-clientonly-tests", &["-e", "normal,features"]);
    assert!(features.contains("hyper feature \"client\""), "{features}");
    assert!(!features.contains("hyper feature \"server\""), "{features}");
    assert!(!features.contains("tokio feature \"full\""), "{features}");
}

#[test]
fn a_build_script_compiles_only_the_engine() {
    let tree = cargo_tree("idemgen-buildscript-tests", &["-e", "normal,build"]);
    // The subtree of the build dependency `idemgen` (depth 1) in the crate's tree.
    let mut subtree = Vec::new();
    let mut inside = false;
    for line in tree.lines() {
        let depth: String = line.chars().take_while(char::is_ascii_digit).collect();
        if depth == "1" {
            inside = line[1..].starts_with("idemgen v");
        }
        if inside {
            subtree.push(line);
        }
    }
    let crates = names(&subtree);
    assert!(
        crates.contains("idemgen"),
        "no idemgen build dependency:\n{tree}"
    );
    for engine in ["saphyr", "syn", "prettyplease", "idemgen-protocol"] {
        assert!(crates.contains(engine), "{engine} missing: {crates:?}");
    }
    for cli in [
        "clap",
        "clap_builder",
        "ureq",
        "rustls",
        "askama",
        "askama_derive",
    ] {
        assert!(
            !crates.contains(cli),
            "{cli} is compiled by the build script: {crates:?}"
        );
    }
}

#[test]
fn a_service_on_sqlite_compiles_no_postgresql_driver() {
    let tree = cargo_tree("idemgen-example-notes", &["-e", "normal"]);
    let lines: Vec<&str> = tree.lines().collect();
    let crates = names(&lines);
    for expected in ["idemgen-runtime", "sqlx-sqlite", "libsqlite3-sys"] {
        assert!(crates.contains(expected), "{expected} missing:\n{tree}");
    }
    assert!(
        !crates.contains("sqlx-postgres"),
        "sqlx-postgres is compiled:\n{tree}"
    );
    // And a service on PostgreSQL (the default features) compiles no SQLite.
    let widgets = cargo_tree("widgets", &["-e", "normal"]);
    let lines: Vec<&str> = widgets.lines().collect();
    let crates = names(&lines);
    assert!(crates.contains("sqlx-postgres"), "{widgets}");
    assert!(!crates.contains("libsqlite3-sys"), "{widgets}");
}

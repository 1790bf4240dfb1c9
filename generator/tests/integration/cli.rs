//! The binary: exit codes 0/1/2, output formats, config discovery and colour.

use std::path::Path;
use std::process::{Command, Output};

fn idemgen(args: &[&str]) -> Output {
    idemgen_env(args, &[])
}

fn idemgen_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idemgen"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run idemgen")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn exit_codes() {
    for (args, expected) in [
        (vec!["check", "tests/fixtures/clean-3.1.yaml"], 0),
        (vec!["check", "tests/fixtures/clean-3.0.json"], 0),
        (
            vec!["check", "tests/fixtures/rules/idempotency-key-missing.yaml"],
            1,
        ),
        (
            vec![
                "check",
                "tests/fixtures/rules/idempotency-key-min-length.yaml",
            ],
            0,
        ),
        (
            vec![
                "check",
                "--deny-warnings",
                "tests/fixtures/rules/idempotency-key-min-length.yaml",
            ],
            1,
        ),
        (
            vec!["check", "--deny-warnings", "tests/fixtures/clean-3.1.yaml"],
            0,
        ),
        (vec!["check", "tests/fixtures/load/swagger-2.0.yaml"], 2),
        (vec!["check", "tests/fixtures/load/invalid-yaml.yaml"], 2),
        // A reference cycle is a finding, not a load failure.
        (vec!["check", "tests/fixtures/load/cyclic-ref.yaml"], 1),
        (vec!["check", "tests/fixtures/no-such-file.yaml"], 2),
        (
            vec![
                "check",
                "--format",
                "sarif",
                "tests/fixtures/load/not-openapi.yaml",
            ],
            2,
        ),
        (vec!["check"], 2),
        (
            vec!["check", "--format", "xml", "tests/fixtures/clean-3.1.yaml"],
            2,
        ),
        (vec!["lint", "tests/fixtures/clean-3.1.yaml"], 2),
        (
            vec![
                "check",
                "--config",
                "tests/fixtures/no-such-config.toml",
                "tests/fixtures/clean-3.1.yaml",
            ],
            2,
        ),
    ] {
        let out = idemgen(&args);
        assert_eq!(
            code(&out),
            expected,
            "idemgen {args:?}\n{}{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn load_errors_go_to_stderr_with_a_position() {
    let out = idemgen(&["check", "tests/fixtures/load/swagger-2.0.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--> tests/fixtures/load/swagger-2.0.yaml:1:1"),
        "{stderr}"
    );
    assert!(stdout(&out).is_empty());
    let out = idemgen(&[
        "check",
        "--format",
        "github",
        "tests/fixtures/load/swagger-2.0.yaml",
    ]);
    assert!(stdout(&out).starts_with(
        "::error file=tests/fixtures/load/swagger-2.0.yaml,line=1,col=1,title=idemgen::"
    ));
}

#[test]
fn every_format_renders_through_the_binary() {
    let spec = "tests/fixtures/split/openapi.yaml";
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&idemgen(&["check", "--format", "json", spec])))
            .expect("json");
    assert_eq!(json["summary"]["errors"], 2);
    let sarif: serde_json::Value =
        serde_json::from_str(&stdout(&idemgen(&["check", "--format", "sarif", spec])))
            .expect("sarif");
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(
        stdout(&idemgen(&["check", "--format", "github", spec]))
            .lines()
            .count(),
        3
    );
    assert!(stdout(&idemgen(&["check", spec])).contains("error[idempotency-key-max-length]"));
}

#[test]
fn colour_only_when_forced_and_never_with_no_color() {
    let spec = "tests/fixtures/rules/idempotency-key-missing.yaml";
    assert!(
        !stdout(&idemgen(&["check", spec])).contains('\u{1b}'),
        "piped output is plain"
    );
    assert!(stdout(&idemgen_env(&["check", spec], &[("CLICOLOR_FORCE", "1")])).contains('\u{1b}'));
    let no_color = idemgen_env(
        &["check", spec],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
    );
    assert!(!stdout(&no_color).contains('\u{1b}'));
}

#[test]
fn config_beside_the_spec_and_explicit_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("openapi.yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/rules/idempotency-key-min-length.yaml"),
        &spec,
    )
    .expect("copy");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rules/common.yaml"),
        dir.path().join("common.yaml"),
    )
    .expect("copy");
    let spec = spec.to_string_lossy().into_owned();
    assert_eq!(code(&idemgen(&["check", &spec])), 0, "warning only");

    std::fs::write(
        dir.path().join("idemgen.toml"),
        "[rules]\nidempotency-key-min-length = \"error\"\n",
    )
    .expect("write");
    assert_eq!(
        code(&idemgen(&["check", &spec])),
        1,
        "config beside the spec promotes the warning"
    );

    let explicit = dir.path().join("other.toml");
    std::fs::write(&explicit, "[rules]\nidempotency-key-min-length = \"off\"\n").expect("write");
    let out = idemgen(&[
        "check",
        "--deny-warnings",
        "--config",
        &explicit.to_string_lossy(),
        &spec,
    ]);
    assert_eq!(code(&out), 0, "--config wins over idemgen.toml");

    std::fs::write(&explicit, "max-key-length = \"long\"\n").expect("write");
    let out = idemgen(&["check", "--config", &explicit.to_string_lossy(), &spec]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid config"));
}

#[test]
fn help_lists_the_check_subcommand() {
    let out = idemgen(&["--help"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("check"));
}

#[test]
fn rules_and_help_say_what_check_checks() {
    let rules = idemgen(&["rules"]);
    assert_eq!(code(&rules), 0);
    let text = stdout(&rules);
    for rule in idemgen::RuleId::ALL {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{} ", rule.as_str())))
            .unwrap_or_else(|| panic!("`idemgen rules` lacks {rule}:\n{text}"));
        assert!(line.contains(rule.default_level().as_str()), "{line}");
        assert!(line.contains(rule.summary()), "{line}");
    }
    for key in [
        "header =",
        "max-key-length =",
        "required-statuses =",
        "recommended-statuses =",
        "[rules]",
        "Exit codes",
    ] {
        assert!(text.contains(key), "`idemgen rules` lacks `{key}`");
    }
    let help = stdout(&idemgen(&["check", "--help"]));
    assert!(help.contains("idemgen rules"), "{help}");
    assert!(help.contains("Exit codes: 0"), "{help}");
    // The documentation lists every rule too.
    let docs = std::fs::read_to_string("docs/rules.md").unwrap();
    for rule in idemgen::RuleId::ALL {
        assert!(
            docs.contains(&format!("`{}`", rule.as_str())),
            "docs/rules.md lacks {rule}"
        );
    }
}

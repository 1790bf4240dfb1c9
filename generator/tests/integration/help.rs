//! `--help` of `idemgen` and of every subcommand, as a user sees it: snapshots, so a change to a
//! flag or a help text shows up in review.

use std::process::Command;

/// Every subcommand, in the order `idemgen --help` lists them.
const SUBCOMMANDS: [&str; 7] = [
    "check",
    "rules",
    "build",
    "client",
    "scaffold",
    "fingerprint",
    "probe",
];

/// The standard output of `idemgen <args> --help`, which must succeed with nothing on standard
/// error. Plain and at a fixed width: no colour, 100 columns even if clap learns to wrap by the
/// terminal.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_idemgen"))
        .args(args)
        .arg("--help")
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .output()
        .expect("run idemgen");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(stderr.is_empty(), "{args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands `idemgen --help` lists under `Commands:`, without clap's own `help`.
fn listed_subcommands() -> Vec<String> {
    help(&[])
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_subcommand_has_a_help_snapshot() {
    assert_eq!(listed_subcommands(), SUBCOMMANDS);
}

#[test]
fn idemgen_help() {
    insta::assert_snapshot!(help(&[]));
}

#[test]
fn check_help() {
    insta::assert_snapshot!(help(&["check"]));
}

#[test]
fn rules_help() {
    insta::assert_snapshot!(help(&["rules"]));
}

#[test]
fn build_help() {
    insta::assert_snapshot!(help(&["build"]));
}

#[test]
fn client_help() {
    insta::assert_snapshot!(help(&["client"]));
}

#[test]
fn scaffold_help() {
    insta::assert_snapshot!(help(&["scaffold"]));
}

#[test]
fn fingerprint_help() {
    insta::assert_snapshot!(help(&["fingerprint"]));
}

#[test]
fn probe_help() {
    insta::assert_snapshot!(help(&["probe"]));
}

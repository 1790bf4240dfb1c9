//! The Promela model of the protocol (`model/idempotency.pml`), checked with spin: the real
//! model has no error, and each deliberately broken variant is caught.

use std::path::{Path, PathBuf};
use std::process::Command;

fn model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/idempotency.pml")
}

fn require_spin() {
    let found = Command::new("spin")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "the protocol model needs the spin model checker: `apt-get install -y spin`"
    );
}

/// Generates the verifier with `spin -a`, compiles it with `cc`, runs it; returns its output.
fn check(defines: &[&str]) -> String {
    require_spin();
    let dir = std::env::temp_dir().join(format!("idemgen-spin-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(model(), dir.join("idempotency.pml")).expect("model/idempotency.pml");
    let run = |cmd: &mut Command| {
        let out = cmd
            .current_dir(&dir)
            .output()
            .expect("running the model checker");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, text) = run(Command::new("spin")
        .args(defines)
        .args(["-a", "idempotency.pml"]));
    assert!(ok, "spin -a failed:\n{text}");
    let (ok, text) = run(Command::new("cc").args(["-DSAFETY", "-o", "pan", "pan.c"]));
    assert!(ok, "compiling pan failed:\n{text}");
    let (_, text) = run(&mut Command::new(dir.join("pan")));
    let _ = std::fs::remove_dir_all(&dir);
    text
}

#[test]
fn the_protocol_never_commits_two_writes_for_one_key() {
    let out = check(&[]);
    assert!(out.contains("errors: 0"), "spin found a violation:\n{out}");
    assert!(!out.contains("assertion violated"), "{out}");
    // The search covered the whole state space (not a trivially small one).
    let stored: u64 = out
        .lines()
        .find(|l| l.contains("states, stored"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("pan reports its states");
    assert!(
        stored > 1000,
        "suspiciously small state space: {stored}\n{out}"
    );
    eprintln!("spin: {stored} states, errors: 0");
}

#[test]
fn an_unguarded_completion_is_caught() {
    let out = check(&["-DUNGUARDED"]);
    assert!(
        out.contains("assertion violated"),
        "spin missed the bug:\n{out}"
    );
    assert!(!out.contains("errors: 0"), "{out}");
}

#[test]
fn a_write_committed_apart_from_its_completion_is_caught() {
    let out = check(&["-DSPLIT"]);
    assert!(
        out.contains("assertion violated"),
        "spin missed the bug:\n{out}"
    );
    assert!(!out.contains("errors: 0"), "{out}");
}

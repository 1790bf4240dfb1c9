//! How `check`, `build` and `client` grow with the spec (a plain harness, not a timed test).
//!
//! `cargo bench -p idemgen --bench growth` writes synthetic specs of four families at four sizes
//! and runs each command on each in a child process of its own, printing the best of three wall
//! times, the child's peak resident memory (`VmHWM`, Linux) and, per family and command, the
//! growth exponent: the slope of log(time) over log(size), 1.0 for linear, 2.0 for quadratic.
//!
//! - `schemas`: N object schemas of eight strings, one `GET` each answering one of them.
//! - `operations`: N idempotent `POST`s (key header, protocol errors, a query parameter) whose
//!   bodies are one of 50 schemas chained by `$ref`, the last with a keyword the server does
//!   not check (every operation reports it through the chain).
//! - `allof`: N schemas in `allOf` chains of depth 8 (each member the one before plus a
//!   property of its own), one idempotent `POST` per chain's last schema.
//! - `files`: N schemas in N files of their own, one `GET` each, joined by relative `$ref`s.
//!
//! `IDEMGEN_GROWTH_SIZES=250,500` sets the sizes; `IDEMGEN_GROWTH_KEEP=dir` keeps the specs
//! there (`bench/growth/run.sh` runs Spectral on them).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use idemgen::Config;

const FAMILIES: [&str; 4] = ["schemas", "operations", "allof", "files"];
const COMMANDS: [&str; 3] = ["check", "build", "client"];
const RUNS: usize = 3;
const CHAIN: usize = 50;
const ALL_OF_DEPTH: usize = 8;

const ERRORS: [&str; 7] = ["400", "401", "403", "422", "500", "503", "504"];

fn header(s: &mut String) {
    s.push_str("openapi: 3.1.0\ninfo:\n  title: Growth\n  version: 1.0.0\n");
}

fn components_common(s: &mut String) {
    s.push_str("  parameters:\n    IdempotencyKey:\n      name: Idempotency-Key\n      in: header\n      required: true\n      schema:\n        type: string\n        minLength: 1\n        maxLength: 255\n");
    s.push_str("  responses:\n    Problem:\n      description: A problem document.\n      content:\n        application/problem+json:\n          schema:\n            $ref: '#/components/schemas/Problem'\n");
}

fn idempotent_post(s: &mut String, path: &str, id: &str, body: &str) {
    let _ = write!(
        s,
        "  {path}:\n    post:\n      operationId: {id}\n      x-idempotent: true\n      x-idempotency-fingerprint-version: 1\n      parameters:\n        - $ref: '#/components/parameters/IdempotencyKey'\n        - name: dry_run\n          in: query\n          schema:\n            type: boolean\n      requestBody:\n        required: true\n        content:\n          application/json:\n            schema:\n              $ref: '#/components/schemas/{body}'\n      responses:\n        '201':\n          description: Created.\n          content:\n            application/json:\n              schema:\n                $ref: '#/components/schemas/{body}'\n"
    );
    for status in ERRORS {
        let _ = writeln!(
            s,
            "        '{status}':\n          $ref: '#/components/responses/Problem'"
        );
    }
}

const PROBLEM: &str = "    Problem:\n      type: object\n      properties:\n        type: {type: string}\n        title: {type: string}\n        status: {type: integer}\n";

/// The spec of `family` at size `n`, written under `dir`; returns the root file.
fn write_spec(dir: &Path, family: &str, n: usize) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut s = String::new();
    header(&mut s);
    s.push_str("paths:\n");
    match family {
        "schemas" | "files" => {
            for i in 0..n {
                let target = if family == "files" {
                    format!("schemas/thing{i}.yaml")
                } else {
                    format!("#/components/schemas/Thing{i}")
                };
                let _ = write!(
                    s,
                    "  /things{i}:\n    get:\n      operationId: getThing{i}\n      responses:\n        '200':\n          description: The thing.\n          content:\n            application/json:\n              schema:\n                $ref: '{target}'\n"
                );
            }
            if family == "files" {
                std::fs::create_dir_all(dir.join("schemas"))?;
                for i in 0..n {
                    let mut t = String::from("type: object\nproperties:\n");
                    for j in 0..8 {
                        let _ = write!(t, "  field{j}:\n    type: string\n");
                    }
                    std::fs::write(dir.join(format!("schemas/thing{i}.yaml")), t)?;
                }
            } else {
                s.push_str("components:\n  schemas:\n");
                for i in 0..n {
                    let _ = write!(s, "    Thing{i}:\n      type: object\n      properties:\n");
                    for j in 0..8 {
                        let _ = write!(s, "        field{j}:\n          type: string\n");
                    }
                }
            }
        }
        "operations" => {
            for i in 0..n {
                let body = format!("Link{}", i % CHAIN);
                idempotent_post(
                    &mut s,
                    &format!("/links{i}"),
                    &format!("createLink{i}"),
                    &body,
                );
            }
            s.push_str("components:\n");
            components_common(&mut s);
            s.push_str("  schemas:\n");
            s.push_str(PROBLEM);
            for k in 0..CHAIN {
                let _ = write!(
                    s,
                    "    Link{k}:\n      type: object\n      required: [name]\n      properties:\n        name: {{type: string, maxLength: 100}}\n        count: {{type: integer, minimum: 0}}\n"
                );
                if k + 1 < CHAIN {
                    let _ = writeln!(
                        s,
                        "        next:\n          $ref: '#/components/schemas/Link{}'",
                        k + 1
                    );
                } else {
                    s.push_str(
                        "        last:\n          type: string\n          not: {const: none}\n",
                    );
                }
            }
        }
        "allof" => {
            let chains = n.div_ceil(ALL_OF_DEPTH);
            for c in 0..chains {
                let tip = format!("Chain{c}Level{}", ALL_OF_DEPTH - 1);
                idempotent_post(
                    &mut s,
                    &format!("/chains{c}"),
                    &format!("createChain{c}"),
                    &tip,
                );
            }
            s.push_str("components:\n");
            components_common(&mut s);
            s.push_str("  schemas:\n");
            s.push_str(PROBLEM);
            for c in 0..chains {
                for d in 0..ALL_OF_DEPTH {
                    if d == 0 {
                        let _ = write!(
                            s,
                            "    Chain{c}Level0:\n      type: object\n      required: [field0]\n      properties:\n        field0: {{type: string, maxLength: 64}}\n"
                        );
                    } else {
                        let _ = write!(
                            s,
                            "    Chain{c}Level{d}:\n      allOf:\n        - $ref: '#/components/schemas/Chain{c}Level{}'\n        - type: object\n          properties:\n            field{d}: {{type: string, maxLength: 64}}\n",
                            d - 1
                        );
                    }
                }
            }
        }
        other => unreachable!("no family {other}"),
    }
    let root = dir.join("openapi.yaml");
    std::fs::write(&root, s)?;
    Ok(root)
}

/// Runs `command` on `spec` `RUNS` times in this process; prints the best time in seconds and
/// the peak resident memory in KiB.
fn child(command: &str, spec: &Path) -> Result<(), String> {
    let config = Config::default();
    let out = spec.parent().unwrap_or(Path::new(".")).join("out");
    let mut best = Duration::MAX;
    let mut findings = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        match command {
            "check" => {
                let report = idemgen::check(spec, &config).map_err(|e| e.to_string())?;
                findings = std::hint::black_box(report.findings.len());
            }
            "build" | "client" => {
                let plan = if command == "build" {
                    idemgen::build::plan(spec, &out, &config)
                } else {
                    idemgen::build::plan_client(spec, &out, &config)
                }
                .map_err(|e| e.to_string())?;
                if plan.files.is_empty() {
                    return Err(format!("{command}: the spec did not pass check"));
                }
                findings = std::hint::black_box(plan.report.findings.len());
            }
            other => return Err(format!("no command {other}")),
        }
        best = best.min(start.elapsed());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    println!("{} {peak_kib} {findings}", best.as_secs_f64());
    Ok(())
}

/// One measurement: the size, the best time in seconds, the peak RSS in KiB.
type Point = (f64, f64, f64);

/// The slope of the least-squares line through (ln x, ln y).
fn exponent(points: &[(f64, f64)]) -> f64 {
    let pts: Vec<(f64, f64)> = points.iter().map(|(x, y)| (x.ln(), y.ln())).collect();
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let (Some(command), Some(spec)) = (args.get(i + 1), args.get(i + 2)) else {
            eprintln!("usage: growth --child COMMAND SPEC");
            std::process::exit(2);
        };
        if let Err(e) = child(command, Path::new(spec)) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    let sizes: Vec<usize> = std::env::var("IDEMGEN_GROWTH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![250, 500, 1000, 2000]);
    let keep = std::env::var("IDEMGEN_GROWTH_KEEP").ok().map(PathBuf::from);
    let base = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("idemgen-growth-{}", std::process::id()))
    });
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cannot find this benchmark's executable: {e}");
            std::process::exit(2);
        }
    };
    println!("| family | size | spec KB | command | best of {RUNS} s | peak RSS MB | findings |");
    println!("|---|---:|---:|---|---:|---:|---:|");
    let mut failed = false;
    let mut summary = Vec::new();
    for family in FAMILIES {
        let mut series: Vec<(&str, Vec<Point>)> =
            COMMANDS.iter().map(|c| (*c, Vec::new())).collect();
        for &n in &sizes {
            let dir = base.join(format!("{family}-{n}"));
            let spec = match write_spec(&dir, family, n) {
                Ok(spec) => spec,
                Err(e) => {
                    eprintln!("cannot write {}: {e}", dir.display());
                    std::process::exit(2);
                }
            };
            let kb = dir_size(&dir) as f64 / 1024.0;
            for (command, points) in &mut series {
                let out = Command::new(&exe)
                    .args(["--child", command])
                    .arg(&spec)
                    .output();
                let line = match out {
                    Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
                    Ok(o) => {
                        eprintln!(
                            "{family} {n} {command}: {}",
                            String::from_utf8_lossy(&o.stderr).trim()
                        );
                        failed = true;
                        continue;
                    }
                    Err(e) => {
                        eprintln!("cannot run the child: {e}");
                        std::process::exit(2);
                    }
                };
                let fields: Vec<f64> = line
                    .split_whitespace()
                    .filter_map(|f| f.parse().ok())
                    .collect();
                let [secs, kib, findings] = fields[..] else {
                    eprintln!("{family} {n} {command}: unreadable child output {line:?}");
                    failed = true;
                    continue;
                };
                println!(
                    "| {family} | {n} | {kb:.0} | {command} | {secs:.4} | {:.1} | {findings} |",
                    kib / 1024.0
                );
                points.push((n as f64, secs, kib));
            }
        }
        for (command, points) in series {
            if points.len() >= 2 {
                let time: Vec<(f64, f64)> = points.iter().map(|p| (p.0, p.1)).collect();
                let memory: Vec<(f64, f64)> = points.iter().map(|p| (p.0, p.2)).collect();
                let (first, last) = (points[0], points[points.len() - 1]);
                summary.push(format!(
                    "| {family} | {command} | {:.2} | {:.2} | {:.1}x for {:.0}x the size |",
                    exponent(&time),
                    exponent(&memory),
                    last.1 / first.1,
                    last.0 / first.0
                ));
            }
        }
    }
    println!();
    println!("| family | command | time exponent | memory exponent | time, largest / smallest |");
    println!("|---|---|---:|---:|---|");
    for line in summary {
        println!("{line}");
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&base);
    }
    if failed {
        std::process::exit(1);
    }
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.metadata() {
                Ok(m) if m.is_dir() => {
                    if path.file_name().is_some_and(|n| n != "out") {
                        stack.push(path);
                    }
                }
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

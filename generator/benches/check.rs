//! Benchmark of `idemgen::check` on a synthetic ~1 MB spec (a plain harness, not a timed test).
//!
//! `cargo bench -p idemgen --bench check` prints the spec size and the min/median/max wall time
//! of loading and checking it. Set `IDEMGEN_BENCH_SPEC=path` to also keep the generated spec at
//! `path`, e.g. to measure the release binary with `/usr/bin/time -v idemgen check path`.

use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use idemgen::{Config, check};

const OPERATIONS: usize = 700;
const SCHEMAS: usize = 200;
const RUNS: usize = 15;

/// A spec with `OPERATIONS` path items (every other one idempotent, one in ten flawed) and
/// `SCHEMAS` component schemas that reference each other.
fn synthetic_spec() -> String {
    let mut s =
        String::from("openapi: 3.1.0\ninfo:\n  title: Synthetic\n  version: 1.0.0\npaths:\n");
    for i in 0..OPERATIONS {
        let idempotent = i % 2 == 0;
        let flawed = i % 10 == 0;
        let _ = write!(
            s,
            "  /resources{i}/{{id}}:\n    parameters:\n      - name: id\n        in: path\n        required: true\n        schema:\n          type: string\n    post:\n      operationId: createResource{i}\n      summary: Creates resource number {i} with a description long enough to be realistic.\n"
        );
        if idempotent {
            s.push_str("      x-idempotent: true\n      x-idempotency-fingerprint-version: 1\n");
        }
        s.push_str("      parameters:\n");
        if flawed {
            s.push_str("        - name: Idempotency-Key\n          in: header\n          schema:\n            type: string\n            maxLength: 4096\n");
        } else {
            s.push_str("        - $ref: \"#/components/parameters/IdempotencyKey\"\n");
        }
        let _ = write!(
            s,
            "        - name: X-Trace-{i}\n          in: header\n          schema:\n            type: string\n      requestBody:\n        required: true\n        content:\n          application/json:\n            schema:\n              $ref: \"#/components/schemas/Schema{}\"\n      responses:\n        \"201\":\n          description: Created.\n          content:\n            application/json:\n              schema:\n                $ref: \"#/components/schemas/Schema{}\"\n",
            i % SCHEMAS,
            (i + 1) % SCHEMAS
        );
        let statuses: &[&str] = if flawed {
            &["400", "422", "500"]
        } else {
            &[
                "400", "401", "403", "409", "410", "422", "500", "503", "504",
            ]
        };
        for status in statuses {
            let _ = writeln!(
                s,
                "        \"{status}\":\n          $ref: \"#/components/responses/Problem\""
            );
        }
    }
    s.push_str("components:\n  parameters:\n    IdempotencyKey:\n      name: Idempotency-Key\n      in: header\n      required: true\n      schema:\n        type: string\n        minLength: 1\n        maxLength: 255\n");
    s.push_str("  responses:\n    Problem:\n      description: A problem document.\n      content:\n        application/problem+json:\n          schema:\n            $ref: \"#/components/schemas/Problem\"\n");
    s.push_str("  schemas:\n    Problem:\n      type: object\n      properties:\n        type: {type: string}\n        title: {type: string}\n        status: {type: integer}\n");
    for i in 0..SCHEMAS {
        let _ = write!(
            s,
            "    Schema{i}:\n      type: object\n      required: [name]\n      properties:\n        name: {{type: string, maxLength: 100}}\n        count: {{type: integer, minimum: 0}}\n        next:\n          $ref: \"#/components/schemas/Schema{}\"\n        tags:\n          type: array\n          items: {{type: string}}\n",
            (i + 1) % SCHEMAS
        );
    }
    s
}

fn main() {
    let spec = synthetic_spec();
    let dir = std::env::temp_dir().join(format!("idemgen-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(2);
    }
    let path = dir.join("openapi.yaml");
    if let Err(e) = std::fs::write(&path, &spec) {
        eprintln!("cannot write {}: {e}", path.display());
        std::process::exit(2);
    }
    if let Ok(keep) = std::env::var("IDEMGEN_BENCH_SPEC")
        && let Err(e) = std::fs::write(&keep, &spec)
    {
        eprintln!("cannot write {keep}: {e}");
    }
    let config = Config::default();
    let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
    let mut findings = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        match check(black_box(&path), &config) {
            Ok(report) => findings = black_box(report.findings.len()),
            Err(e) => {
                eprintln!("the synthetic spec does not load: {e}");
                std::process::exit(2);
            }
        }
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "check: {:.2} MB, {OPERATIONS} operations, {findings} findings; {RUNS} runs: min {:?}, median {:?}, max {:?}",
        spec.len() as f64 / 1e6,
        times[0],
        times[RUNS / 2],
        times[RUNS - 1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! `idemgen probe` against deliberately broken servers: a small axum server that keeps the
//! protocol, and copies of it with one defect each. Every defect is caught by the check that
//! names it, and the correct server passes everything. (The widgets example, a real server on
//! PostgreSQL, is probed by its own e2e tests.)

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use idemgen::loader::{MemoryFs, load_with};
use idemgen::probe::{self, Options, Outcome};

const SPEC: &str = r#"
openapi: 3.0.3
info: { title: Things, version: 1.0.0 }
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties:
                name: { type: string, minLength: 1 }
      responses:
        '201':
          description: Created.
          headers:
            Location: { schema: { type: string } }
          content:
            application/json:
              schema: { type: object }
        '400': { $ref: '#/components/responses/Problem' }
        '401': { $ref: '#/components/responses/Problem' }
        '403': { $ref: '#/components/responses/Problem' }
        '409': { $ref: '#/components/responses/Problem' }
        '422': { $ref: '#/components/responses/Problem' }
        '500': { $ref: '#/components/responses/Problem' }
        '503': { $ref: '#/components/responses/Problem' }
        '504': { $ref: '#/components/responses/Problem' }
components:
  responses:
    Problem:
      description: A problem.
      content:
        application/problem+json:
          schema: { type: object }
"#;

/// One deliberate defect of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    /// No idempotency at all: every request executes, the key is not even read.
    NoIdempotency,
    /// Replays lack `Idempotent-Replayed: true`.
    NoReplayHeader,
    /// Replays send a different body than the first answer.
    ReplaysAnotherBody,
    /// A reused key with another body is replayed instead of refused with 422.
    No422,
    /// A failure (500) is stored, and the key is spent.
    StoresFailures,
    /// Keys are global: another owner's request replays the first owner's result.
    GlobalKeys,
    /// A request without a key executes.
    MissingKeyAccepted,
    /// A 409 for a key in flight has no `Retry-After`.
    NoRetryAfter,
    /// Not a defect: a stateful API (a capture) whose only execution that succeeds is the first;
    /// every later one answers its declared 409 with a business problem type of its own.
    CapturedOnce,
}

/// The problem type of the `CapturedOnce` server's business conflict.
const ALREADY_CAPTURED: &str = "https://things.example/problems/already-captured";

enum Entry {
    InFlight,
    Done {
        request: Bytes,
        status: StatusCode,
        body: String,
    },
}

struct Server {
    defect: Defect,
    /// The longest key accepted.
    key_limit: usize,
    /// The shortest key accepted.
    key_min: usize,
    records: Mutex<HashMap<(String, String), Entry>>,
    next: AtomicU64,
}

/// A problem of the protocol's, typed as idemgen types it (the probe tells the protocol's 409
/// and 422 apart from business conflicts by their type).
fn problem(status: StatusCode, code: &str) -> Response {
    typed_problem(
        status,
        &format!("{}{code}", idemgen_protocol::problem::TYPE_PREFIX),
        code,
    )
}

fn typed_problem(status: StatusCode, kind: &str, code: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        format!(
            r#"{{"type":"{kind}","title":"{code}","status":{},"code":"{code}"}}"#,
            status.as_u16()
        ),
    )
        .into_response()
}

fn answer(status: StatusCode, body: &str, replay: bool, defect: Defect) -> Response {
    let mut response = (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::CREATED
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(body)
    {
        let location = format!("/things/{}", v["id"]);
        response
            .headers_mut()
            .insert("location", location.parse().unwrap());
    }
    if replay && defect != Defect::NoReplayHeader {
        response
            .headers_mut()
            .insert("idempotent-replayed", "true".parse().unwrap());
    }
    response
}

async fn create(State(server): State<Arc<Server>>, headers: HeaderMap, request: Bytes) -> Response {
    let defect = server.defect;
    let owner = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("anonymous")
        .to_string();
    let valid_name = serde_json::from_slice::<serde_json::Value>(&request)
        .ok()
        .and_then(|v| v.get("name").and_then(|n| n.as_str().map(str::to_owned)));
    let execute = |name: &str| {
        let id = server.next.fetch_add(1, Ordering::SeqCst);
        format!(r#"{{"id":{id},"name":"{name}"}}"#)
    };
    let key = headers
        .get("idempotency-key")
        .map(|v| v.as_bytes().to_vec());
    let key = match (defect, key) {
        (Defect::NoIdempotency, _) | (Defect::MissingKeyAccepted, None) => {
            return match valid_name {
                Some(name) => answer(StatusCode::CREATED, &execute(&name), false, defect),
                None => problem(StatusCode::BAD_REQUEST, "invalid_request"),
            };
        }
        (_, None) => return problem(StatusCode::BAD_REQUEST, "idempotency_key_missing"),
        (_, Some(key)) => key,
    };
    let visible = key.len() >= server.key_min.max(1)
        && key.len() <= server.key_limit
        && key.iter().all(|b| (0x21..=0x7e).contains(b));
    if !visible {
        return problem(StatusCode::BAD_REQUEST, "idempotency_key_invalid");
    }
    let key = String::from_utf8(key).unwrap();
    let scope = if defect == Defect::GlobalKeys {
        (String::new(), key)
    } else {
        (owner, key)
    };
    {
        let mut records = server.records.lock().unwrap();
        match records.get(&scope) {
            Some(Entry::InFlight) => {
                let mut response = problem(StatusCode::CONFLICT, "idempotency_request_in_flight");
                if defect != Defect::NoRetryAfter {
                    response
                        .headers_mut()
                        .insert("retry-after", "1".parse().unwrap());
                }
                return response;
            }
            Some(Entry::Done {
                request: stored,
                status,
                body,
            }) => {
                if *stored != request && defect != Defect::No422 {
                    return problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
                }
                if defect == Defect::ReplaysAnotherBody {
                    let name = valid_name.unwrap_or_default();
                    return answer(*status, &execute(&name), true, defect);
                }
                return answer(*status, body, true, defect);
            }
            None => {
                records.insert(scope.clone(), Entry::InFlight);
            }
        }
    }
    let Some(name) = valid_name else {
        let mut records = server.records.lock().unwrap();
        if defect == Defect::StoresFailures {
            records.insert(
                scope,
                Entry::Done {
                    request,
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    body: r#"{"title":"failed"}"#.into(),
                },
            );
            return problem(StatusCode::INTERNAL_SERVER_ERROR, "internal_error");
        }
        records.remove(&scope);
        return problem(StatusCode::BAD_REQUEST, "invalid_request");
    };
    // Long enough for 20 concurrent requests to find the key in flight.
    tokio::time::sleep(Duration::from_millis(100)).await;
    if defect == Defect::CapturedOnce && server.next.load(Ordering::SeqCst) > 1 {
        // A business answer: not stored, the key free again.
        server.records.lock().unwrap().remove(&scope);
        return typed_problem(StatusCode::CONFLICT, ALREADY_CAPTURED, "already_captured");
    }
    let body = execute(&name);
    server.records.lock().unwrap().insert(
        scope,
        Entry::Done {
            request,
            status: StatusCode::CREATED,
            body: body.clone(),
        },
    );
    answer(StatusCode::CREATED, &body, false, defect)
}

/// Serves the things server with `defect` on a free port, on a runtime of its own thread.
fn serve(defect: Defect) -> String {
    serve_with_limit(defect, 255)
}

/// The same, accepting keys of at most `key_limit` characters.
fn serve_with_limit(defect: Defect, key_limit: usize) -> String {
    serve_with_bounds(defect, 1, key_limit)
}

/// The same, accepting keys of `key_min` to `key_limit` characters.
fn serve_with_bounds(defect: Defect, key_min: usize, key_limit: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let state = Arc::new(Server {
        defect,
        key_limit,
        key_min,
        records: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
    });
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new()
                .route("/things", axum::routing::post(create))
                .with_state(state);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{address}")
}

fn probe_failures(defect: Defect) -> BTreeSet<&'static str> {
    probe_failures_of(SPEC, defect, serve(defect))
}

fn probe_failures_of(spec: &str, defect: Defect, base_url: String) -> BTreeSet<&'static str> {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", spec);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let options = Options {
        base_url,
        headers: vec![("Authorization".into(), "Bearer alice".into())],
        other_headers: vec![("Authorization".into(), "Bearer bob".into())],
        ..Options::default()
    };
    let report = probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs");
    assert_eq!(report.results.len(), probe::CHECKS.len(), "{defect:?}");
    for r in &report.results {
        assert!(
            !matches!(r.outcome, Outcome::Skipped { .. })
                || (r.check == "problem-json" || r.check == "problem-types"),
            "{defect:?}: {} skipped: {:?}",
            r.check,
            r.outcome
        );
    }
    report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .map(|r| r.check)
        .collect()
}

#[test]
fn the_spec_of_the_probed_servers_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.yaml");
    std::fs::write(&path, SPEC).unwrap();
    let report = idemgen::check(&path, &idemgen::Config::default()).unwrap();
    assert_eq!(report.errors(), 0, "{:?}", report.findings);
}

#[test]
fn a_server_that_keeps_the_protocol_passes_every_check() {
    assert_eq!(probe_failures(Defect::None), BTreeSet::new());
}

#[test]
fn key_lengths_are_checked_against_the_operations_own_max_length() {
    // The spec says 40: a server that keeps 40 passes, one that keeps the protocol's 255
    // accepts 41 characters, one that caps keys at 39 refuses a key the spec allows.
    let spec = SPEC.replace("maxLength: 255", "maxLength: 40");
    for (limit, failed) in [
        (40, vec![]),
        (255, vec!["key-malformed"]),
        (39, vec!["key-at-limit"]),
    ] {
        let got = probe_failures_of(&spec, Defect::None, serve_with_limit(Defect::None, limit));
        let want: BTreeSet<&str> = failed.into_iter().collect();
        assert_eq!(
            got, want,
            "a server keeping keys of at most {limit} characters"
        );
    }
    // UUID-sized keys (exactly 36): every key the probe sends fits, so a correct server passes.
    let uuid = SPEC.replace("maxLength: 255", "minLength: 36, maxLength: 36");
    let got = probe_failures_of(&uuid, Defect::None, serve_with_bounds(Defect::None, 36, 36));
    assert_eq!(
        got,
        BTreeSet::new(),
        "a server keeping keys of exactly 36 characters"
    );
}

#[test]
fn each_defect_is_caught_by_the_check_that_names_it() {
    let cases: [(Defect, &[&str]); 8] = [
        (
            Defect::NoIdempotency,
            &[
                "key-missing",
                "key-malformed",
                "retry-replays",
                "changed-request",
                "concurrent",
            ],
        ),
        (Defect::NoReplayHeader, &["retry-replays"]),
        (Defect::ReplaysAnotherBody, &["retry-replays"]),
        (Defect::No422, &["changed-request"]),
        (Defect::StoresFailures, &["failure-not-stored"]),
        (Defect::GlobalKeys, &["owners-independent"]),
        (Defect::MissingKeyAccepted, &["key-missing"]),
        (Defect::NoRetryAfter, &["concurrent"]),
    ];
    for (defect, expected) in cases {
        let failed = probe_failures(defect);
        let expected: BTreeSet<&str> = expected.iter().copied().collect();
        assert_eq!(failed, expected, "{defect:?}");
    }
}

#[test]
fn business_answers_skip_checks_and_never_fail_them() {
    // The first execution (key-at-limit's) succeeds; every later one is a business 409.
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", SPEC);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let options = Options {
        base_url: serve(Defect::CapturedOnce),
        headers: vec![("Authorization".into(), "Bearer alice".into())],
        other_headers: vec![("Authorization".into(), "Bearer bob".into())],
        ..Options::default()
    };
    let report = probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs");
    assert!(!report.failed(), "{:#?}", report.results);
    let outcome = |check: &str| {
        &report
            .results
            .iter()
            .find(|r| r.check == check)
            .unwrap()
            .outcome
    };
    for check in ["key-missing", "key-malformed", "key-at-limit"] {
        assert_eq!(outcome(check), &Outcome::Passed, "{check}");
    }
    for check in [
        "first-succeeds",
        "retry-replays",
        "changed-request",
        "failure-not-stored",
        "concurrent",
        "owners-independent",
    ] {
        match outcome(check) {
            Outcome::Skipped { reason } => assert!(
                reason.contains("business 409") && reason.contains(ALREADY_CAPTURED),
                "{check}: {reason}"
            ),
            other => panic!("{check}: {other:?}"),
        }
    }
    // The protocol's own 409 is no business answer: a server whose in-flight 409 lacks
    // Retry-After still fails (each_defect_is_caught_by_the_check_that_names_it).
}

#[test]
fn an_unreachable_server_is_a_connection_error_not_a_failed_check() {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", SPEC);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let options = Options {
        base_url: "http://127.0.0.1:9".into(),
        ..Options::default()
    };
    let error = probe::run(&spec, "Idempotency-Key", &options).unwrap_err();
    assert!(error.to_string().contains("cannot reach"), "{error}");
}

fn idemgen(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_idemgen"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("running idemgen")
}

#[test]
fn the_command_line_exit_codes_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("openapi.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let spec = spec.to_str().unwrap();

    // A server that keeps the protocol: 0, in every format.
    let base = serve(Defect::None);
    let human = idemgen(&[
        "probe",
        spec,
        "--base-url",
        &base,
        "--header",
        "Authorization: Bearer a",
    ]);
    assert_eq!(human.status.code(), Some(0), "{human:?}");
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.contains("pass  retry-replays"), "{text}");
    assert!(
        text.contains("skip  owners-independent   no second credential"),
        "{text}"
    );
    let junit = idemgen(&["probe", spec, "--base-url", &base, "--format", "junit"]);
    let xml = String::from_utf8(junit.stdout).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains(r#"<testcase classname="createThing" name="concurrent">"#),
        "{xml}"
    );

    // A defect: 1, and JSON names the failed check with its evidence.
    let broken = serve(Defect::No422);
    let json = idemgen(&["probe", spec, "--base-url", &broken, "--format", "json"]);
    assert_eq!(json.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["failed"], 1);
    let failed = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["outcome"] == "failed")
        .unwrap();
    assert_eq!(failed["check"], "changed-request");
    assert_eq!(failed["evidence"]["got"]["status"], 201);

    // --dry-run sends nothing: it works without a server.
    let dry = idemgen(&[
        "probe",
        spec,
        "--base-url",
        "http://127.0.0.1:9",
        "--dry-run",
    ]);
    assert_eq!(dry.status.code(), Some(0));
    let text = String::from_utf8(dry.stdout).unwrap();
    assert!(
        text.contains("# createThing concurrent (20 copies at once)"),
        "{text}"
    );
    assert!(text.contains("Idempotency-Key: has\\ttab"), "{text}");

    // Connection, usage and spec errors: 2.
    let unreachable = idemgen(&["probe", spec, "--base-url", "http://127.0.0.1:9"]);
    assert_eq!(unreachable.status.code(), Some(2));
    let usage = idemgen(&["probe", spec, "--base-url", &base, "--header", "no colon"]);
    assert_eq!(usage.status.code(), Some(2));
    let unknown = idemgen(&["probe", spec, "--base-url", &base, "--only", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    let help = idemgen(&["probe", "--help"]);
    assert!(
        String::from_utf8(help.stdout)
            .unwrap()
            .contains("CREATES REAL RESOURCES")
    );
}

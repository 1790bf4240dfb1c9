//! `idemgen probe` against a server not built with idemgen: an inventory service whose items have
//! a natural unique key (a `sku` under a `pattern`, a business 409 when it exists) and whose
//! problems are RFC 9457's `about:blank`, as a hand-written service answers. It keeps the IETF
//! draft's semantics, so it passes with none of its main checks skipped; copies with one defect
//! each are caught by the check that names it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use idemgen::loader::{MemoryFs, load_with};
use idemgen::probe::{self, Options, Outcome, ProbeReport};

const SPEC: &str = r#"
openapi: 3.0.3
info: { title: Inventory, version: 1.0.0 }
paths:
  /items:
    post:
      operationId: createItem
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [sku, name, quantity]
              additionalProperties: false
              properties:
                sku: { type: string, pattern: '^[A-Z]{3}-[0-9]{4}$', example: ABC-1234 }
                name: { type: string, minLength: 1, maxLength: 40 }
                quantity: { type: integer, minimum: 1, maximum: 1000 }
      responses:
        '201':
          description: Created.
          content: { application/json: { schema: { type: object } } }
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
      description: A problem (RFC 9457).
      content: { application/problem+json: { schema: { type: object } } }
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    /// A request without a key is executed.
    ExecutesWithoutKey,
    /// No claim while a request runs: concurrent requests with one key all execute (and the
    /// sku check races, as a check-then-insert does).
    StormExecutesTwice,
}

#[derive(Clone)]
enum Entry {
    InFlight,
    Done { request: Bytes, body: String },
}

struct Server {
    defect: Defect,
    records: Mutex<HashMap<(String, String), Entry>>,
    skus: Mutex<HashSet<String>>,
    next: AtomicU64,
}

/// An RFC 9457 problem with the default type, as most hand-written services answer.
fn about_blank(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        format!(
            r#"{{"type":"about:blank","title":"{}","status":{},"detail":"{detail}"}}"#,
            status.canonical_reason().unwrap_or_default(),
            status.as_u16()
        ),
    )
        .into_response()
}

fn created(body: &str, replayed: bool) -> Response {
    let mut response = (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        body.to_owned(),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", "true".parse().unwrap());
    }
    response
}

/// The item of a valid body: the sku under its pattern, a name, a quantity in bounds, nothing
/// else.
fn item(body: &[u8]) -> Option<(String, String, i64)> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let fields = value.as_object()?;
    if fields
        .keys()
        .any(|k| !matches!(k.as_str(), "sku" | "name" | "quantity"))
    {
        return None;
    }
    let sku = fields.get("sku")?.as_str()?;
    let b = sku.as_bytes();
    let valid_sku = b.len() == 8
        && b[..3].iter().all(u8::is_ascii_uppercase)
        && b[3] == b'-'
        && b[4..].iter().all(u8::is_ascii_digit);
    let name = fields.get("name")?.as_str()?;
    let quantity = fields.get("quantity")?.as_i64()?;
    (valid_sku && (1..=40).contains(&name.chars().count()) && (1..=1000).contains(&quantity))
        .then(|| (sku.to_owned(), name.to_owned(), quantity))
}

impl Server {
    /// The business write: a new item, or a business 409 when its sku exists (not stored).
    async fn execute(&self, sku: &str, name: &str, quantity: i64) -> Result<String, Response> {
        let exists = |skus: &HashSet<String>| skus.contains(sku);
        if self.defect == Defect::StormExecutesTwice {
            // Check, then insert after the work: concurrent requests all pass the check.
            if exists(&self.skus.lock().unwrap()) {
                return Err(about_blank(StatusCode::CONFLICT, "the sku exists"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if !self.skus.lock().unwrap().insert(sku.to_owned()) {
                return Err(about_blank(StatusCode::CONFLICT, "the sku exists"));
            }
        }
        self.skus.lock().unwrap().insert(sku.to_owned());
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        Ok(format!(
            r#"{{"id":{id},"sku":"{sku}","name":"{name}","quantity":{quantity}}}"#
        ))
    }
}

async fn create(State(s): State<Arc<Server>>, headers: HeaderMap, request: Bytes) -> Response {
    let Some(owner) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return about_blank(StatusCode::UNAUTHORIZED, "no credentials");
    };
    let owner = owner.to_owned();
    let Some((sku, name, quantity)) = item(&request) else {
        return about_blank(StatusCode::BAD_REQUEST, "the body is not a valid item");
    };
    let key = match headers.get("idempotency-key") {
        None if s.defect == Defect::ExecutesWithoutKey => {
            return match s.execute(&sku, &name, quantity).await {
                Ok(body) => created(&body, false),
                Err(refused) => refused,
            };
        }
        None => return about_blank(StatusCode::BAD_REQUEST, "Idempotency-Key is required"),
        Some(key) => key.as_bytes().to_vec(),
    };
    if key.is_empty() || key.len() > 255 || !key.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return about_blank(
            StatusCode::BAD_REQUEST,
            "Idempotency-Key is not a valid key",
        );
    }
    let scope = (owner, String::from_utf8(key).unwrap());
    let claims = s.defect != Defect::StormExecutesTwice;
    {
        let mut records = s.records.lock().unwrap();
        match records.get(&scope).cloned() {
            Some(Entry::InFlight) => {
                let mut r = about_blank(StatusCode::CONFLICT, "a request with this key is running");
                r.headers_mut().insert("retry-after", "1".parse().unwrap());
                return r;
            }
            Some(Entry::Done {
                request: stored,
                body,
            }) => {
                if stored != request {
                    return about_blank(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "this key was used with another request",
                    );
                }
                return created(&body, true);
            }
            None if claims => {
                records.insert(scope.clone(), Entry::InFlight);
            }
            None => {}
        }
    }
    let outcome = s.execute(&sku, &name, quantity).await;
    let mut records = s.records.lock().unwrap();
    match outcome {
        Ok(body) => {
            records.insert(
                scope,
                Entry::Done {
                    request,
                    body: body.clone(),
                },
            );
            created(&body, false)
        }
        Err(refused) => {
            records.remove(&scope);
            refused
        }
    }
}

fn serve(defect: Defect) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let state = Arc::new(Server {
        defect,
        records: Mutex::new(HashMap::new()),
        skus: Mutex::new(HashSet::new()),
        next: AtomicU64::new(1),
    });
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new()
                .route("/items", axum::routing::post(create))
                .with_state(state);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{address}")
}

fn probe(defect: Defect) -> ProbeReport {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", SPEC);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let options = Options {
        base_url: serve(defect),
        headers: vec![("Authorization".into(), "alice".into())],
        other_headers: vec![("Authorization".into(), "bob".into())],
        ..Options::default()
    };
    probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs")
}

fn failures(report: &ProbeReport) -> BTreeSet<&'static str> {
    report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .map(|r| r.check)
        .collect()
}

#[test]
fn the_spec_of_the_inventory_server_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.yaml");
    std::fs::write(&path, SPEC).unwrap();
    let report = idemgen::check(&path, &idemgen::Config::default()).unwrap();
    assert_eq!(report.errors(), 0, "{:?}", report.findings);
}

#[test]
fn a_server_with_natural_keys_and_its_own_problem_types_passes_with_no_main_check_skipped() {
    let report = probe(Defect::None);
    for r in &report.results {
        match r.check {
            // Its problem types are `about:blank`: protocol.md's are not its contract.
            "problem-types" => assert!(
                matches!(&r.outcome, Outcome::Skipped { reason } if reason.contains("problem types of its own")),
                "{:?}",
                r.outcome
            ),
            _ => assert_eq!(r.outcome, Outcome::Passed, "{}: {:?}", r.check, r.outcome),
        }
    }
    assert_eq!(report.results.len(), probe::CHECKS.len());
}

#[test]
fn a_copy_that_executes_without_a_key_fails_key_missing() {
    let report = probe(Defect::ExecutesWithoutKey);
    assert_eq!(failures(&report), BTreeSet::from(["key-missing"]));
    let missing = report
        .results
        .iter()
        .find(|r| r.check == "key-missing")
        .unwrap();
    let Outcome::Failed { why, .. } = &missing.outcome else {
        unreachable!()
    };
    assert!(why.contains("201") && why.contains("executed"), "{why}");
}

#[test]
fn a_copy_whose_storm_executes_twice_is_caught_and_said_to_run_twice() {
    let report = probe(Defect::StormExecutesTwice);
    assert_eq!(failures(&report), BTreeSet::from(["concurrent"]));
    let storm = report
        .results
        .iter()
        .find(|r| r.check == "concurrent")
        .unwrap();
    let Outcome::Failed { why, .. } = &storm.outcome else {
        unreachable!()
    };
    assert!(why.contains("distinct 2xx bodies"), "{why}");
}

//! `idemgen probe` against a stateful payments API (create → capture → refund, with business
//! 409s and 422s), linked by OpenAPI `links`: every check runs on a resource of its own, brought
//! into the state its operation needs, so a correct server passes every check; copies with one
//! defect each are caught by the check that names it.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use idemgen::loader::{MemoryFs, load_with};
use idemgen::probe::{self, OperationConfig, Options, Outcome, ProbeReport};

const SPEC: &str = r##"
openapi: 3.1.0
info: { title: Payments, version: 1.0.0 }
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      parameters: [{ $ref: '#/components/parameters/Key' }]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [amount]
              properties: { amount: { type: integer, minimum: 100, maximum: 100 } }
      responses:
        '201':
          description: Authorized.
          content: { application/json: { schema: { $ref: '#/components/schemas/Payment' } } }
          links:
            capture:
              operationId: capturePayment
              parameters: { id: '$response.body#/id' }
            refundAtOnce:
              operationId: createRefund
              parameters: { id: '$response.body#/id' }
        '400': { $ref: '#/components/responses/Problem' }
        '401': { $ref: '#/components/responses/Problem' }
        '403': { $ref: '#/components/responses/Problem' }
        '409': { $ref: '#/components/responses/Problem' }
        '422': { $ref: '#/components/responses/Problem' }
        '500': { $ref: '#/components/responses/Problem' }
        '503': { $ref: '#/components/responses/Problem' }
        '504': { $ref: '#/components/responses/Problem' }
  /payments/{id}/capture:
    post:
      operationId: capturePayment
      x-idempotent: true
      parameters:
        - { $ref: '#/components/parameters/Key' }
        - { name: id, in: path, required: true, schema: { type: string } }
        - { name: descriptor, in: query, schema: { type: string, maxLength: 22 } }
        - { name: final_amount, in: query, schema: { type: integer } }
      responses:
        '200':
          description: Captured.
          content: { application/json: { schema: { $ref: '#/components/schemas/Payment' } } }
          links:
            refund:
              operationRef: '#/paths/~1payments~1{id}~1refunds/post'
              parameters: { id: '$request.path.id' }
        '400': { $ref: '#/components/responses/Problem' }
        '401': { $ref: '#/components/responses/Problem' }
        '403': { $ref: '#/components/responses/Problem' }
        '404': { $ref: '#/components/responses/Problem' }
        '409': { $ref: '#/components/responses/Problem' }
        '422': { $ref: '#/components/responses/Problem' }
        '500': { $ref: '#/components/responses/Problem' }
        '503': { $ref: '#/components/responses/Problem' }
        '504': { $ref: '#/components/responses/Problem' }
  /payments/{id}/refunds:
    post:
      operationId: createRefund
      x-idempotent: true
      parameters:
        - { $ref: '#/components/parameters/Key' }
        - { name: id, in: path, required: true, schema: { type: string } }
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [amount]
              properties: { amount: { type: integer, minimum: 1, maximum: 10 } }
      responses:
        '201':
          description: Refunded.
          content: { application/json: { schema: { type: object } } }
        '400': { $ref: '#/components/responses/Problem' }
        '401': { $ref: '#/components/responses/Problem' }
        '403': { $ref: '#/components/responses/Problem' }
        '404': { $ref: '#/components/responses/Problem' }
        '409': { $ref: '#/components/responses/Problem' }
        '422': { $ref: '#/components/responses/Problem' }
        '500': { $ref: '#/components/responses/Problem' }
        '503': { $ref: '#/components/responses/Problem' }
        '504': { $ref: '#/components/responses/Problem' }
components:
  parameters:
    Key:
      name: Idempotency-Key
      in: header
      required: true
      schema: { type: string, minLength: 1, maxLength: 64, pattern: '^[!-~]+$' }
  responses:
    Problem:
      description: A problem.
      content: { application/problem+json: { schema: { type: object } } }
  schemas:
    Payment:
      type: object
      required: [id, state]
      properties: { id: { type: string }, state: { type: string } }
"##;

/// One deliberate defect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    /// Concurrent captures with one key all execute (the in-flight claim is missing).
    CaptureStormExecutesTwice,
    /// Keys up to 255 characters are accepted although the spec says 64.
    LongKeysAccepted,
    /// A refund's replay is another refund.
    RefundReplayDiffers,
    /// Captures ignore keys altogether: every request runs the handler (a business 409 once the
    /// payment is captured).
    CaptureIgnoresKeys,
    /// A refund's key reused with another body runs the handler again, which answers a business
    /// 422, instead of the protocol's 422.
    RefundRerunsChangedRequests,
}

#[derive(Clone)]
enum Entry {
    InFlight,
    Done {
        request: String,
        status: u16,
        body: String,
    },
}

#[derive(Clone, Copy, PartialEq)]
enum PaymentState {
    Authorized,
    Captured { refunded: i64 },
}

struct Payment {
    owner: String,
    state: PaymentState,
}

struct Server {
    defect: Defect,
    records: Mutex<HashMap<(String, String, String), Entry>>,
    payments: Mutex<HashMap<String, Payment>>,
    next: AtomicU64,
}

const PROTOCOL: &str = "https://idemgen.dev/problems/";

fn problem(status: u16, kind: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/problem+json")],
        format!(r#"{{"type":"{kind}","title":"{kind}","status":{status}}}"#),
    )
        .into_response()
}

fn protocol(status: u16, code: &str) -> Response {
    problem(status, &format!("{PROTOCOL}{code}"))
}

fn json(status: u16, body: &str, replayed: bool) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
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

/// What a handler answers: a status and a body, stored when 2xx.
enum Answer {
    Ok(u16, String),
    Refused(Response),
}

impl Server {
    /// The idempotency layer around `handler`: key syntax, records per (owner, operation, key),
    /// in-flight 409, 422 on another request, 2xx stored and replayed.
    async fn idempotent(
        &self,
        operation: &str,
        headers: &HeaderMap,
        request: String,
        handler: impl FnOnce(&str) -> Answer,
    ) -> Response {
        let Some(owner) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
            return protocol(401, "unauthenticated");
        };
        let owner = owner.to_owned();
        if self.defect == Defect::CaptureIgnoresKeys && operation == "capturePayment" {
            return match handler(&owner) {
                Answer::Ok(status, body) => json(status, &body, false),
                Answer::Refused(response) => response,
            };
        }
        let Some(key) = headers
            .get("idempotency-key")
            .map(|v| v.as_bytes().to_vec())
        else {
            return protocol(400, "idempotency_key_missing");
        };
        let limit = if self.defect == Defect::LongKeysAccepted {
            255
        } else {
            64
        };
        if key.is_empty() || key.len() > limit || !key.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return protocol(400, "idempotency_key_invalid");
        }
        let scope = (
            owner.clone(),
            operation.to_owned(),
            String::from_utf8(key).unwrap(),
        );
        let claims =
            !(self.defect == Defect::CaptureStormExecutesTwice && operation == "capturePayment");
        {
            let mut records = self.records.lock().unwrap();
            match records.get(&scope).cloned() {
                Some(Entry::InFlight) => {
                    let mut r = protocol(409, "idempotency_request_in_flight");
                    r.headers_mut().insert("retry-after", "1".parse().unwrap());
                    return r;
                }
                Some(Entry::Done {
                    request: stored,
                    status,
                    body,
                }) => {
                    if stored != request {
                        if self.defect == Defect::RefundRerunsChangedRequests
                            && operation == "createRefund"
                        {
                            return problem(
                                422,
                                "https://payments.example/problems/refund-exceeds-payment",
                            );
                        }
                        return protocol(422, "idempotency_key_reused");
                    }
                    if self.defect == Defect::RefundReplayDiffers && operation == "createRefund" {
                        let n = self.next.fetch_add(1, Ordering::SeqCst);
                        return json(status, &format!(r#"{{"refund_id":"re_{n}"}}"#), true);
                    }
                    return json(status, &body, true);
                }
                None if claims => {
                    records.insert(scope.clone(), Entry::InFlight);
                }
                None => {}
            }
        }
        // Long enough for 20 concurrent requests to meet the claim.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = handler(&owner);
        let mut records = self.records.lock().unwrap();
        match answer {
            Answer::Ok(status, body) => {
                records.insert(
                    scope,
                    Entry::Done {
                        request,
                        status,
                        body: body.clone(),
                    },
                );
                json(status, &body, false)
            }
            Answer::Refused(response) => {
                records.remove(&scope);
                response
            }
        }
    }
}

fn amount(body: &Bytes, low: i64, high: i64) -> Option<i64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let amount = value.as_object()?.get("amount")?.as_i64()?;
    (low..=high).contains(&amount).then_some(amount)
}

async fn create(State(s): State<Arc<Server>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = String::from_utf8_lossy(&body).into_owned();
    let s2 = Arc::clone(&s);
    s.idempotent("createPayment", &headers, request, move |owner| {
        if amount(&body, 100, 100).is_none() {
            return Answer::Refused(protocol(400, "invalid_request"));
        }
        let id = format!("pay_{}", s2.next.fetch_add(1, Ordering::SeqCst));
        s2.payments.lock().unwrap().insert(
            id.clone(),
            Payment {
                owner: owner.to_owned(),
                state: PaymentState::Authorized,
            },
        );
        Answer::Ok(201, format!(r#"{{"id":"{id}","state":"authorized"}}"#))
    })
    .await
}

async fn capture(
    State(s): State<Arc<Server>>,
    UrlPath(id): UrlPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = query.unwrap_or_default();
    let bad_amount = query.split('&').any(|pair| {
        pair.strip_prefix("final_amount=")
            .is_some_and(|v| v.parse::<i64>().is_err())
    });
    if bad_amount {
        return protocol(400, "invalid_request");
    }
    let request = format!("{id}?{query}");
    let s2 = Arc::clone(&s);
    s.idempotent("capturePayment", &headers, request, move |owner| {
        let mut payments = s2.payments.lock().unwrap();
        let Some(payment) = payments.get_mut(&id).filter(|p| p.owner == owner) else {
            return Answer::Refused(protocol(404, "not_found"));
        };
        if payment.state != PaymentState::Authorized
            && s2.defect != Defect::CaptureStormExecutesTwice
        {
            return Answer::Refused(problem(
                409,
                "https://payments.example/problems/already-captured",
            ));
        }
        payment.state = PaymentState::Captured { refunded: 0 };
        let n = s2.next.fetch_add(1, Ordering::SeqCst);
        Answer::Ok(
            200,
            format!(r#"{{"id":"{id}","state":"captured","capture":"cap_{n}"}}"#),
        )
    })
    .await
}

async fn refund(
    State(s): State<Arc<Server>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = format!("{id} {}", String::from_utf8_lossy(&body));
    let s2 = Arc::clone(&s);
    s.idempotent("createRefund", &headers, request, move |owner| {
        let Some(amount) = amount(&body, 1, 10) else {
            return Answer::Refused(protocol(400, "invalid_request"));
        };
        let mut payments = s2.payments.lock().unwrap();
        let Some(payment) = payments.get_mut(&id).filter(|p| p.owner == owner) else {
            return Answer::Refused(protocol(404, "not_found"));
        };
        let PaymentState::Captured { refunded } = payment.state else {
            return Answer::Refused(problem(
                409,
                "https://payments.example/problems/not-captured",
            ));
        };
        if refunded + amount > 10 {
            return Answer::Refused(problem(
                422,
                "https://payments.example/problems/refund-exceeds-payment",
            ));
        }
        payment.state = PaymentState::Captured {
            refunded: refunded + amount,
        };
        let n = s2.next.fetch_add(1, Ordering::SeqCst);
        Answer::Ok(
            201,
            format!(r#"{{"refund_id":"re_{n}","amount":{amount}}}"#),
        )
    })
    .await
}

/// Serves the payments server with `defect`; with `own_types`, every problem type of the
/// protocol's is rewritten to one of the server's own (`https://payments.example/problems/…`),
/// as a server not built with idemgen answers.
fn serve(defect: Defect) -> String {
    serve_typed(defect, false)
}

/// Rewrites protocol.md's problem types in a response body to the server's own.
async fn own_types(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let text = String::from_utf8_lossy(&bytes).replace(PROTOCOL, OWN);
    let mut response = Response::from_parts(parts, axum::body::Body::from(text));
    response.headers_mut().remove("content-length");
    response
}

/// The prefix of the server's own problem types.
const OWN: &str = "https://payments.example/problems/";

fn serve_typed(defect: Defect, own: bool) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let state = Arc::new(Server {
        defect,
        records: Mutex::new(HashMap::new()),
        payments: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
    });
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let mut app = axum::Router::new()
                .route("/payments", axum::routing::post(create))
                .route("/payments/{id}/capture", axum::routing::post(capture))
                .route("/payments/{id}/refunds", axum::routing::post(refund))
                .with_state(state);
            if own {
                app = app.layer(axum::middleware::map_response(own_types));
            }
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{address}")
}

fn probe_with(defect: Defect, tweak: impl FnOnce(&mut Options)) -> ProbeReport {
    probe_of(serve(defect), tweak)
}

fn probe_of(base_url: String, tweak: impl FnOnce(&mut Options)) -> ProbeReport {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", SPEC);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let mut options = Options {
        base_url,
        headers: vec![("Authorization".into(), "alice".into())],
        other_headers: vec![("Authorization".into(), "bob".into())],
        ..Options::default()
    };
    tweak(&mut options);
    probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs")
}

fn failures(report: &ProbeReport) -> BTreeSet<(String, &'static str)> {
    report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .map(|r| (r.operation.clone(), r.check))
        .collect()
}

#[test]
fn the_spec_of_the_payments_server_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.yaml");
    std::fs::write(&path, SPEC).unwrap();
    let report = idemgen::check(&path, &idemgen::Config::default()).unwrap();
    assert_eq!(report.errors(), 0, "{:?}", report.findings);
}

#[test]
fn a_correct_stateful_server_passes_every_check_of_every_operation() {
    let report = probe_with(Defect::None, |_| {});
    assert_eq!(report.results.len(), 3 * probe::CHECKS.len());
    for r in &report.results {
        assert_eq!(
            r.outcome,
            Outcome::Passed,
            "{} {}: {:?}",
            r.operation,
            r.check,
            r.outcome
        );
    }
}

#[test]
fn each_defect_is_caught_by_the_check_that_names_it() {
    let cases = [
        (
            Defect::CaptureStormExecutesTwice,
            vec![("capturePayment", "concurrent")],
        ),
        (
            Defect::LongKeysAccepted,
            vec![
                ("capturePayment", "key-malformed"),
                ("createPayment", "key-malformed"),
                ("createRefund", "key-malformed"),
            ],
        ),
        (
            Defect::RefundReplayDiffers,
            vec![("createRefund", "retry-replays")],
        ),
        // The storm's one success beside business 409s is the handler running 20 times.
        (
            Defect::CaptureIgnoresKeys,
            vec![
                ("capturePayment", "key-missing"),
                ("capturePayment", "key-malformed"),
                ("capturePayment", "retry-replays"),
                ("capturePayment", "changed-request"),
                ("capturePayment", "concurrent"),
            ],
        ),
        // A business 422 has the draft's status but not protocol.md's type, which this server
        // uses everywhere else.
        (
            Defect::RefundRerunsChangedRequests,
            vec![("createRefund", "problem-types")],
        ),
    ];
    for (defect, expected) in cases {
        let got = failures(&probe_with(defect, |_| {}));
        let expected: BTreeSet<(String, &str)> = expected
            .into_iter()
            .map(|(op, check)| (op.to_owned(), check))
            .collect();
        assert_eq!(got, expected, "{defect:?}");
    }
}

#[test]
fn with_problem_types_of_its_own_the_server_passes_and_a_storm_that_runs_twice_is_caught() {
    let report = probe_of(serve_typed(Defect::None, true), |_| {});
    assert_eq!(report.results.len(), 3 * probe::CHECKS.len());
    for r in &report.results {
        match r.check {
            "problem-types" => assert!(
                matches!(&r.outcome, Outcome::Skipped { reason } if reason.contains("of its own")),
                "{} {:?}",
                r.operation,
                r.outcome
            ),
            _ => assert_eq!(
                r.outcome,
                Outcome::Passed,
                "{} {}: {:?}",
                r.operation,
                r.check,
                r.outcome
            ),
        }
    }
    let report = probe_of(serve_typed(Defect::CaptureStormExecutesTwice, true), |_| {});
    let expected: BTreeSet<(String, &str)> =
        BTreeSet::from([("capturePayment".to_owned(), "concurrent")]);
    assert_eq!(failures(&report), expected);
    let storm = report
        .results
        .iter()
        .find(|r| r.operation == "capturePayment" && r.check == "concurrent")
        .unwrap();
    assert!(
        matches!(&storm.outcome, Outcome::Failed { why, .. } if why.contains("distinct 2xx bodies")),
        "{:?}",
        storm.outcome
    );
    // The probe config skips protocol.md's types by name; a check that does not exist is refused.
    let report = probe_of(serve_typed(Defect::None, false), |o| {
        o.skip = vec!["problem-types".into()];
    });
    assert!(report.results.iter().all(|r| r.check != "problem-types"
        || r.outcome
            == Outcome::Skipped {
                reason: "skipped by the probe config".into()
            }));
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", SPEC);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).unwrap();
    let options = Options {
        base_url: "http://127.0.0.1:9".into(),
        skip: vec!["problem-type".into()],
        ..Options::default()
    };
    let error = probe::run(&spec, "Idempotency-Key", &options).unwrap_err();
    assert!(error.to_string().contains("`problem-type`"), "{error}");
}

#[test]
fn the_probe_config_and_targeted_path_params_override_links() {
    // Refunds without the capture step (the config's setup): every refund meets the business
    // 409 `not-captured`, so its checks are skipped with that reason, never failed.
    let report = probe_with(Defect::None, |o| {
        o.only = vec!["createRefund".into()];
        o.operations.insert(
            "createRefund".into(),
            OperationConfig {
                setup: Some(vec!["createPayment".into()]),
                ..OperationConfig::default()
            },
        );
    });
    assert!(failures(&report).is_empty(), "{:#?}", report.results);
    let first = report
        .results
        .iter()
        .find(|r| r.check == "first-succeeds")
        .unwrap();
    match &first.outcome {
        Outcome::Skipped { reason } => assert!(
            reason.contains("business 409") && reason.contains("not-captured"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    // A targeted path parameter: no setup at all, the given (unknown) payment answers 404 on
    // the first request, which the probe reports as the server's answer.
    let report = probe_with(Defect::None, |o| {
        o.only = vec!["capturePayment".into()];
        o.path_params
            .insert("capturePayment.id".into(), "pay_missing".into());
    });
    let first = report
        .results
        .iter()
        .find(|r| r.check == "first-succeeds")
        .unwrap();
    assert!(
        matches!(&first.outcome, Outcome::Skipped { reason } if reason.contains("business 404")),
        "{:?}",
        first.outcome
    );
}

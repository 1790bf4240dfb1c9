//! Observing the service, and composing it: the widgets app with its own routes and tower-http
//! layers (`widgets::compose`) served in process by `idemgen_runtime::serve` on loopback, on a
//! real PostgreSQL. Spans are captured by a `tracing` layer of the test's (hierarchy and fields)
//! and exported to OpenTelemetry's in-memory exporter (the caller's `traceparent`); the phase
//! histograms are read from the binary's `GET /metrics` (its metrics listener).

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use reqwest::header::HeaderMap;
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use crate::support::*;

/// A span as the capturing layer saw it: name, parent (an index into the capture), fields.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

/// Every span created while it is the subscriber's, in creation order.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

/// A span's index in the capture, kept in its extensions.
struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is registered");
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut all = self.0.lock().unwrap();
        all.push(Captured {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        span.extensions_mut().insert(Index(all.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is registered");
        if let Some(Index(i)) = span.extensions().get::<Index>() {
            values.record(&mut Fields(&mut self.0.lock().unwrap()[*i].fields));
        }
    }
}

impl Capture {
    fn spans(&self) -> Vec<Captured> {
        self.0.lock().unwrap().clone()
    }
}

/// The widgets app composed as `serve` composes it, on a fresh database, served in process on
/// a loopback port until dropped.
struct Composed {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _db: idemgen_runtime::testing::TestDb,
}

impl Drop for Composed {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

const ORIGIN: &str = "https://app.example";

async fn composed(strategy: &str) -> Composed {
    let db = fresh_db().await;
    let pool = db.pool(8).await.expect("a pool");
    let config = widgets::config::Config::from_lookup(|name| match name {
        "WIDGETS_STRATEGY" => Some(strategy.to_owned()),
        "WIDGETS_CORS_ORIGINS" => Some(format!("{ORIGIN}, https://admin.example")),
        _ => None,
    })
    .expect("configuration");
    let (router, _server) = widgets::app_and_server(&config, pool).await.expect("app");
    let app = widgets::compose::compose(router, &config.cors_origins);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(idemgen_runtime::serve(
        listener,
        app,
        config.serving.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    Composed {
        base,
        stop: Some(stop),
        _db: db,
    }
}

/// A create of `name` under `key` for tok1 (alice), with extra headers.
async fn post(base: &str, key: &str, name: &str, extra: &[(&str, &str)]) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/widgets"))
        .bearer_auth("tok1")
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(serde_json::json!({ "name": name }).to_string());
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    request.send().await.expect("the service answers")
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
        .to_str()
        .unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzip body");
    out
}

/// The OpenTelemetry spans exported so far, once `want` of them are named `name`.
async fn exported(exporter: &InMemorySpanExporter, name: &str, want: usize) -> Vec<SpanData> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spans = exporter.get_finished_spans().unwrap();
        if spans.iter().filter(|s| s.name == name).count() >= want {
            return spans;
        }
        assert!(
            Instant::now() < deadline,
            "{name} spans never ended: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One request, then its retry, under both strategies: every span of ours is a child of
/// `TraceLayer`'s `http.request`, carries the operation and the outcome, nests the claim, the
/// handler and the completion (a replay: the claim and the replay, no handler), names no key,
/// token, owner or body, and is in the trace of the request's `traceparent`.
#[tokio::test]
async fn request_spans_nest_under_the_trace_layer_in_the_callers_trace() {
    for strategy in ["separate-claim", "in-transaction"] {
        let capture = Capture::default();
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(capture.clone());
        // This test's runtime is current-thread: every task of the service runs on this thread.
        let _default = tracing::subscriber::set_default(subscriber);

        let service = composed(strategy).await;
        let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let caller_span = "00f067aa0ba902b7";
        let traceparent = format!("00-{trace_id}-{caller_span}-01");
        let key = format!("span-key-{strategy}");
        let first = post(
            &service.base,
            &key,
            "Spanned",
            &[("traceparent", &traceparent)],
        )
        .await;
        assert_eq!(first.status(), 201, "{strategy}");
        let second = post(
            &service.base,
            &key,
            "Spanned",
            &[("traceparent", &traceparent)],
        )
        .await;
        assert_eq!(second.status(), 201, "{strategy}");
        assert_eq!(header(second.headers(), "idempotent-replayed"), "true");
        // A plain read and a transactional delete (it tombstones the create's record).
        let widget: serde_json::Value = first.json().await.unwrap();
        let path = format!("/widgets/{}", widget["id"].as_str().unwrap());
        let http = reqwest::Client::new();
        let read = http
            .get(format!("{}{path}", service.base))
            .bearer_auth("tok1")
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200);
        let deleted = http
            .delete(format!("{}{path}", service.base))
            .bearer_auth("tok1")
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 204);
        let exported = exported(&exporter, "http.request", 4).await;

        // The hierarchy and fields, as `tracing` sees them.
        let spans = capture.spans();
        let children = |of: usize| -> Vec<(usize, &Captured)> {
            spans
                .iter()
                .enumerate()
                .filter(|(_, s)| s.parent == Some(of))
                .collect()
        };
        let http: Vec<usize> = (0..spans.len())
            .filter(|i| spans[*i].name == "http.request")
            .collect();
        assert_eq!(http.len(), 4, "{strategy}: {spans:#?}");
        let mut outcomes = Vec::new();
        for h in &http {
            let requests = children(*h);
            assert_eq!(requests.len(), 1, "{strategy}: {spans:#?}");
            let (r, request) = requests[0];
            assert_eq!(request.name, "idemgen.request");
            let outcome = request.fields.get("outcome").expect("outcome recorded");
            let mut phases: Vec<&str> = children(r).iter().map(|(_, s)| s.name).collect();
            phases.sort();
            phases.dedup();
            outcomes.push((
                spans[*h].fields["path"].replace(&path, "/widgets/{id}"),
                request.fields["operation"].clone(),
                outcome.clone(),
                phases,
            ));
        }
        let expected = |path: &str, operation: &str, outcome: &str, phases: &[&'static str]| {
            (
                path.to_owned(),
                operation.to_owned(),
                outcome.to_owned(),
                phases.to_vec(),
            )
        };
        assert_eq!(
            outcomes,
            [
                expected(
                    "/widgets",
                    "createWidget",
                    "executed",
                    &["idemgen.claim", "idemgen.complete", "idemgen.handler"]
                ),
                expected(
                    "/widgets",
                    "createWidget",
                    "replayed",
                    &["idemgen.claim", "idemgen.replay"]
                ),
                expected(
                    "/widgets/{id}",
                    "getWidget",
                    "executed",
                    &["idemgen.handler"]
                ),
                expected(
                    "/widgets/{id}",
                    "deleteWidget",
                    "executed",
                    &["idemgen.complete", "idemgen.handler"]
                ),
            ],
            "{strategy}"
        );
        // The caller's trace id is in the first two requests' spans (the others sent none).
        for h in &http[..2] {
            assert_eq!(spans[*h].fields["trace_id"], trace_id, "{strategy}");
        }
        for span in &spans {
            for value in span.fields.values() {
                for secret in [key.as_str(), "tok1", "alice", "Spanned"] {
                    assert!(
                        !value.contains(secret),
                        "{strategy}: span {} holds {secret:?}: {value}",
                        span.name
                    );
                }
            }
        }

        // The same spans in OpenTelemetry: the two creates' in the caller's trace, under the
        // caller's span; the read and the delete (no `traceparent`) in traces of their own.
        let trace_id = TraceId::from_hex(trace_id).unwrap();
        let caller_span = SpanId::from_hex(caller_span).unwrap();
        let (callers, own): (Vec<&SpanData>, Vec<&SpanData>) = exported
            .iter()
            .filter(|s| s.name == "http.request")
            .partition(|s| s.span_context.trace_id() == trace_id);
        assert_eq!(
            (callers.len(), own.len()),
            (2, 2),
            "{strategy}: {exported:#?}"
        );
        for s in &callers {
            assert_eq!(s.parent_span_id, caller_span, "{strategy}");
            assert!(s.parent_span_is_remote);
        }
        for s in &own {
            assert_eq!(s.parent_span_id, SpanId::INVALID, "{strategy}: a root");
        }
        let by_id = |id: SpanId| exported.iter().find(|s| s.span_context.span_id() == id);
        let mut in_callers_trace = Vec::new();
        for span in exported.iter().filter(|s| s.name.starts_with("idemgen.")) {
            // Every idemgen span descends from an `http.request`, in its trace.
            let mut up = span;
            while up.name != "http.request" {
                up = by_id(up.parent_span_id)
                    .unwrap_or_else(|| panic!("{strategy}: {} has no exported parent", up.name));
                assert_eq!(up.span_context.trace_id(), span.span_context.trace_id());
            }
            if span.span_context.trace_id() == trace_id {
                in_callers_trace.push(span.name.as_ref());
            }
        }
        in_callers_trace.sort();
        in_callers_trace.dedup();
        assert_eq!(
            in_callers_trace,
            [
                "idemgen.claim",
                "idemgen.complete",
                "idemgen.handler",
                "idemgen.replay",
                "idemgen.request"
            ],
            "{strategy}"
        );
        drop(service);
        provider.shutdown().unwrap();
    }
}

/// The generated router merged with the service's routes under tower-http's CORS and
/// compression: a browser's preflight for an idempotent POST may send `Idempotency-Key`, the
/// replay marker is exposed to its script, gzip bodies decompress to the stored bytes, and a
/// replay's body is the first answer's byte for byte.
#[tokio::test]
async fn composed_with_cors_and_compression_replays_byte_for_byte() {
    let service = composed("separate-claim").await;
    let http = reqwest::Client::new();

    let health = http
        .get(format!("{}/healthz", service.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok\n");

    let preflight = |origin: &'static str| {
        http.request(
            reqwest::Method::OPTIONS,
            format!("{}/widgets", service.base),
        )
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, idempotency-key",
        )
        .send()
    };
    let allowed = preflight(ORIGIN).await.unwrap();
    assert!(allowed.status().is_success(), "{}", allowed.status());
    let h = allowed.headers();
    assert_eq!(header(h, "access-control-allow-origin"), ORIGIN);
    assert!(header(h, "access-control-allow-methods").contains("POST"));
    let allowed_headers = header(h, "access-control-allow-headers").to_ascii_lowercase();
    for name in ["idempotency-key", "authorization", "content-type"] {
        assert!(allowed_headers.contains(name), "{allowed_headers}");
    }
    let refused = preflight("https://evil.example").await.unwrap();
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none(),
        "another origin is not allowed: {:?}",
        refused.headers()
    );

    let browser = [("origin", ORIGIN), ("accept-encoding", "gzip")];
    let first = post(&service.base, "gz-1", "Compressed widget", &browser).await;
    assert_eq!(first.status(), 201);
    let h = first.headers().clone();
    assert_eq!(header(&h, "content-encoding"), "gzip");
    assert_eq!(header(&h, "access-control-allow-origin"), ORIGIN);
    let exposed = header(&h, "access-control-expose-headers").to_ascii_lowercase();
    for name in ["idempotent-replayed", "location", "retry-after"] {
        assert!(exposed.contains(name), "{exposed}");
    }
    let first_body = gunzip(&first.bytes().await.unwrap());
    let widget: serde_json::Value = serde_json::from_slice(&first_body).unwrap();
    assert_eq!(widget["name"], "Compressed widget");
    assert_eq!(
        header(&h, "location"),
        format!("/widgets/{}", widget["id"].as_str().unwrap())
    );

    let replay = post(&service.base, "gz-1", "Compressed widget", &browser).await;
    assert_eq!(replay.status(), 201);
    assert_eq!(header(replay.headers(), "idempotent-replayed"), "true");
    assert_eq!(header(replay.headers(), "content-encoding"), "gzip");
    assert_eq!(header(replay.headers(), "location"), header(&h, "location"));
    let replay_body = gunzip(&replay.bytes().await.unwrap());
    assert_eq!(
        replay_body, first_body,
        "a replay is the first answer's bytes"
    );

    // Without `Accept-Encoding` the same replay comes uncompressed, the same bytes again.
    let plain = post(&service.base, "gz-1", "Compressed widget", &[]).await;
    assert!(plain.headers().get("content-encoding").is_none());
    assert_eq!(plain.bytes().await.unwrap().as_ref(), &first_body[..]);

    // A problem answer goes through the same layers: still problem+json once decompressed.
    let reused = post(&service.base, "gz-1", "Another widget entirely", &browser).await;
    assert_eq!(reused.status(), 422);
    assert_eq!(
        header(reused.headers(), "content-type"),
        "application/problem+json"
    );
    let problem: serde_json::Value = serde_json::from_slice(&gunzip_or_plain(
        reused.headers().get("content-encoding").is_some(),
        &reused.bytes().await.unwrap(),
    ))
    .unwrap();
    assert_eq!(problem["status"], 422);
}

fn gunzip_or_plain(gzipped: bool, bytes: &[u8]) -> Vec<u8> {
    if gzipped {
        gunzip(bytes)
    } else {
        bytes.to_vec()
    }
}

/// `<name>_count{operation="createWidget",outcome="<outcome>"}` from `GET /metrics`, 0 when
/// absent; and the matching `_sum`.
async fn histogram(base: &str, name: &str, outcome: &str) -> (u64, f64) {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels = format!("{{operation=\"createWidget\",outcome=\"{outcome}\"}} ");
    let value = |suffix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{suffix}{labels}")))
            .map(|v| v.trim().parse::<f64>().unwrap())
            .unwrap_or(0.0)
    };
    (value("_count") as u64, value("_sum"))
}

/// For an executed create each phase histogram moves by one, with time in it; its replay moves
/// the claim's only (no handler ran, nothing was completed). Both strategies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phase_histograms_move_for_executions_and_replays_record_no_handler_time() {
    for strategy in ["separate-claim", "in-transaction"] {
        let db = fresh_db().await;
        let server = Server::start(&db, &[("WIDGETS_STRATEGY", strategy)]).await;
        let base = server.base.as_str();
        let metrics = server.metrics.as_str();
        let phases = [
            "idemgen_claim_duration",
            "idemgen_handler_duration",
            "idemgen_completion_duration",
        ];
        let mut before = Vec::new();
        for name in phases {
            before.push((
                histogram(metrics, name, "executed").await,
                histogram(metrics, name, "replayed").await,
            ));
        }
        let key = format!("phases-{strategy}");
        let answer = create(base, "tok1", &key, serde_json::json!({"name": "Timed"})).await;
        assert_eq!(answer.status, 201, "{strategy}");
        let mut executed = Vec::new();
        for (name, (was, _)) in phases.iter().zip(&before) {
            let now = histogram(metrics, name, "executed").await;
            assert_eq!(now.0, was.0 + 1, "{strategy}: {name} counts the execution");
            assert!(now.1 > was.1, "{strategy}: {name} has time in it");
            executed.push(now);
        }
        let replay = create(base, "tok1", &key, serde_json::json!({"name": "Timed"})).await;
        assert!(replay.replayed(), "{strategy}");
        let claim = histogram(metrics, phases[0], "replayed").await;
        assert_eq!(claim.0, (before[0].1).0 + 1, "{strategy}: a replay claims");
        for (i, name) in phases.iter().enumerate().skip(1) {
            assert_eq!(
                histogram(metrics, name, "replayed").await.0,
                (before[i].1).0,
                "{strategy}: a replay records no {name}"
            );
            assert_eq!(histogram(metrics, name, "executed").await, executed[i]);
        }
        drop(server);
    }
}

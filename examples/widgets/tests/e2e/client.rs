//! The generated client (`idemgen client`, `widgets::client`) against the real server: retries
//! through a faulty proxy and across PostgreSQL restarts create each widget exactly once, a 409
//! is waited out (`Retry-After`) into the replay, and 422 and 410 surface at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idemgen_client::{CallOptions, Client, Error, HeaderValue, RetryPolicy};
use idemgen_runtime::ProblemKind;
use idemgen_runtime::testing::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use widgets::client::types::NewWidget;
use widgets::client::types::PublishRequest;
use widgets::client::{
    CreateWidgetError, CreateWidgetResponse, ListWidgetsParams, PublishWidgetError, WidgetsClient,
};

use crate::support::*;

fn client(base: &str, policy: RetryPolicy) -> WidgetsClient {
    // One connection per request, so that the proxy's faults are per request.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    WidgetsClient::from_client(
        Client::with_http(http, base)
            .with_header(
                http::header::AUTHORIZATION,
                HeaderValue::from_static("Bearer tok1"),
            )
            .with_policy(policy),
    )
}

fn new_widget(name: &str) -> NewWidget {
    serde_json::from_value(json!({ "name": name })).unwrap()
}

/// What the proxy does to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Forwards the request and the response.
    None,
    /// Forwards the request, reads the whole response, then closes without sending it.
    DropResponse,
    /// Resets the connection before anything reaches the server.
    ResetBefore,
    /// Forwards, then holds the response longer than the client waits for it.
    Delay,
}

/// The faults, by connection, in a fixed cycle.
const CYCLE: [Fault; 7] = [
    Fault::DropResponse,
    Fault::None,
    Fault::ResetBefore,
    Fault::Delay,
    Fault::None,
    Fault::DropResponse,
    Fault::None,
];

#[derive(Default)]
struct Injected {
    connections: AtomicUsize,
    dropped: AtomicUsize,
    reset: AtomicUsize,
    delayed: AtomicUsize,
}

/// Reads one HTTP/1.1 message (headers, then `Content-Length` bytes of body).
async fn read_message(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap_or(0))
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf);
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Closes `stream` with a TCP reset (zero linger: the close sends RST at once, so the
/// deprecation's concern, a drop blocking while data drains, does not arise).
#[allow(deprecated)]
fn reset(stream: TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// A proxy on a free port in front of `upstream`, injecting [`CYCLE`]'s faults.
async fn faulty_proxy(upstream: String, delay: Duration) -> (String, Arc<Injected>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let injected = Arc::new(Injected::default());
    let counts = injected.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut downstream, _)) = listener.accept().await else {
                return;
            };
            let n = counts.connections.fetch_add(1, Ordering::SeqCst);
            let fault = CYCLE[n % CYCLE.len()];
            let (upstream, counts) = (upstream.clone(), counts.clone());
            tokio::spawn(async move {
                let Some(request) = read_message(&mut downstream).await else {
                    return;
                };
                if fault == Fault::ResetBefore {
                    counts.reset.fetch_add(1, Ordering::SeqCst);
                    reset(downstream);
                    return;
                }
                let mut server = TcpStream::connect(&upstream).await.unwrap();
                server.write_all(&request).await.unwrap();
                let Some(response) = read_message(&mut server).await else {
                    return;
                };
                match fault {
                    Fault::DropResponse => {
                        counts.dropped.fetch_add(1, Ordering::SeqCst);
                        reset(downstream);
                    }
                    Fault::Delay => {
                        counts.delayed.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        let _ = downstream.write_all(&response).await;
                    }
                    _ => {
                        let _ = downstream.write_all(&response).await;
                    }
                }
            });
        }
    });
    (format!("http://{address}"), injected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_through_a_faulty_proxy_create_each_widget_once() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let upstream = server.base.trim_start_matches("http://").to_owned();
    let timeout = Duration::from_millis(500);
    let (proxied, injected) = faulty_proxy(upstream, timeout * 2).await;
    let policy = RetryPolicy {
        max_attempts: 8,
        budget: Duration::from_secs(30),
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        attempt_timeout: timeout,
    };
    let through_proxy = client(&proxied, policy.clone());
    let direct = client(&server.base, policy);
    const N: usize = 24;
    let (mut retries, mut replayed_first) = (0, 0);
    for i in 0..N {
        let name = format!("w{i}");
        let reply = through_proxy
            .create_widget(&new_widget(&name), &CallOptions::default())
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        retries += reply.attempts - 1;
        replayed_first += usize::from(reply.replayed);
        let CreateWidgetResponse::Status201 { body, location } = reply.value;
        assert_eq!(body.name, name);
        assert_eq!(location, format!("/widgets/{}", body.id));
        // The same logical call again, with its key: the replay names the same widget.
        let key = reply.key.expect("a keyed call reports its key");
        let again = direct
            .create_widget(&new_widget(&name), &CallOptions::with_key(key))
            .await
            .unwrap();
        assert!(again.replayed);
        let CreateWidgetResponse::Status201 { body: replayed, .. } = again.value;
        assert_eq!(replayed, body);
    }
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, N as i64);
    let (dropped, reset, delayed) = (
        injected.dropped.load(Ordering::SeqCst),
        injected.reset.load(Ordering::SeqCst),
        injected.delayed.load(Ordering::SeqCst),
    );
    assert!(dropped > 0 && reset > 0 && delayed > 0, "every fault ran");
    // Every dropped or delayed response was of a request the server executed: its retry replays.
    assert!(
        replayed_first >= dropped,
        "{replayed_first} replays, {dropped} dropped"
    );
    eprintln!(
        "client through faults: {N} logical creates, {} connections, faults: {dropped} responses \
         dropped, {reset} resets before the server, {delayed} delayed past the timeout; \
         {retries} retries, {replayed_first} answered by a replay; {N} widgets",
        injected.connections.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_twice_under_16_creating_tasks_loses_and_doubles_nothing() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a cluster of this test's own");
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    // A claim whose attempt died with the database (its release failed too) holds the key until
    // it is stale; a short stale window lets the retries take it over within the test.
    let server = Server::start(&db, &[("WIDGETS_STALE_CLAIM", "2s")]).await;
    let policy = RetryPolicy {
        max_attempts: 40,
        budget: Duration::from_secs(60),
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(500),
        attempt_timeout: Duration::from_secs(5),
    };
    let calls = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let stop_at = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (client, calls, retries) = (
            client(&server.base, policy.clone()),
            calls.clone(),
            retries.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < stop_at {
                let reply = client
                    .create_widget(&new_widget(&format!("t{t}-{i}")), &CallOptions::default())
                    .await
                    .unwrap_or_else(|e| panic!("task {t} call {i}: {e}"));
                assert_eq!(reply.status.as_u16(), 201);
                calls.fetch_add(1, Ordering::SeqCst);
                retries.fetch_add(reply.attempts as usize - 1, Ordering::SeqCst);
                i += 1;
            }
        }));
    }
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let c = &cluster;
        tokio::task::block_in_place(|| c.restart_immediate()).expect("restart");
    }
    for task in tasks {
        task.await.unwrap();
    }
    let calls = calls.load(Ordering::SeqCst) as i64;
    let rows = count(&db, "SELECT count(*) FROM widgets").await;
    let duplicates = count(
        &db,
        "SELECT count(*) FROM (SELECT name FROM widgets GROUP BY name HAVING count(*) > 1) d",
    )
    .await;
    eprintln!(
        "client across 2 PostgreSQL restarts: {calls} logical creates from 16 tasks, {} retries, \
         {rows} rows, {duplicates} duplicates",
        retries.load(Ordering::SeqCst)
    );
    assert!(retries.load(Ordering::SeqCst) > 0, "the restarts were felt");
    assert_eq!(rows, calls);
    assert_eq!(duplicates, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_is_waited_out_into_the_replay_and_422_and_410_surface_at_once() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    // Hold the business write of a first attempt: its claim commits, its insert waits.
    let (locked, is_locked) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let url = db.url.clone();
    let holder = tokio::spawn(async move {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let mut lock = conn.begin().await.unwrap();
        sqlx::query("LOCK TABLE widgets IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *lock)
            .await
            .unwrap();
        locked.send(()).unwrap();
        let _ = released.await;
        lock.rollback().await.unwrap();
    });
    is_locked.await.unwrap();
    let base = server.base.clone();
    let first =
        tokio::spawn(async move { create(&base, "tok1", "held", json!({"name": "held"})).await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(
        &db,
        "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'held'",
    )
    .await
        == 0
    {
        assert!(Instant::now() < deadline, "the first attempt never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Without retries the 409 is the answer: the protocol's (told apart from a business 409 of
    // the operation's by its problem type), so a problem, not the declared response.
    let once = client(&server.base, RetryPolicy::off())
        .create_widget(&new_widget("held"), &CallOptions::with_key("held"))
        .await;
    match once {
        Err(Error::Problem(reply)) => {
            assert_eq!(reply.value.kind, ProblemKind::InFlight.type_uri());
            assert_eq!(reply.status.as_u16(), 409);
            assert_eq!(reply.attempts, 1);
        }
        other => panic!("{other:?}"),
    }
    // With retries the client honours Retry-After (1 s) until the first attempt commits.
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        release.send(()).unwrap();
    });
    let started = Instant::now();
    let waited = client(&server.base, RetryPolicy::default())
        .create_widget(&new_widget("held"), &CallOptions::with_key("held"))
        .await
        .expect("the replay, after the wait");
    assert!(waited.replayed);
    assert!(waited.attempts >= 2, "{}", waited.attempts);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    releaser.await.unwrap();
    holder.await.unwrap();
    assert_eq!(first.await.unwrap().status.as_u16(), 201);

    let retrying = client(&server.base, RetryPolicy::default());
    // 422: the same key with another body, answered at once (no retry can change it).
    let reused = retrying
        .create_widget(&new_widget("other"), &CallOptions::with_key("held"))
        .await;
    match reused {
        Err(Error::Problem(reply)) => {
            assert_eq!(reply.value.kind, ProblemKind::KeyReused.type_uri());
            assert_eq!(reply.attempts, 1);
        }
        other => panic!("{other:?}"),
    }
    // 410: the created widget deleted, a late retry of its create.
    let created = retrying
        .create_widget(&new_widget("gone"), &CallOptions::with_key("gone"))
        .await
        .unwrap();
    let CreateWidgetResponse::Status201 { body, .. } = created.value;
    retrying
        .delete_widget(&body.id, &CallOptions::default())
        .await
        .expect("deleted");
    let late = retrying
        .create_widget(&new_widget("gone"), &CallOptions::with_key("gone"))
        .await;
    match late {
        Err(Error::Response(reply)) => {
            assert!(matches!(reply.value, CreateWidgetError::Status410(_)));
            assert_eq!(reply.attempts, 1);
        }
        other => panic!("{other:?}"),
    }
}

/// A business conflict is the handler's declared 409 with the service's own problem type: the
/// client returns it at once as the declared error (no retry, unlike the protocol's in-flight
/// 409), nothing is stored, and a retry with the same key runs the handler again.
#[tokio::test]
async fn a_business_409_is_the_declared_error_never_retried_nor_stored() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let retrying = client(&server.base, RetryPolicy::default());
    let created = retrying
        .create_widget(&new_widget("one channel"), &CallOptions::default())
        .await
        .unwrap();
    let CreateWidgetResponse::Status201 { body, .. } = created.value;
    let on = |channel: &str| -> PublishRequest {
        serde_json::from_value(json!({ "channel": channel })).unwrap()
    };
    retrying
        .publish_widget(&body.id, &on("news"), &CallOptions::with_key("pub-news"))
        .await
        .expect("published");
    for attempt in 0..2 {
        let second = retrying
            .publish_widget(&body.id, &on("blog"), &CallOptions::with_key("pub-blog"))
            .await;
        match second {
            Err(Error::Response(reply)) => {
                let PublishWidgetError::Status409(problem) = &reply.value else {
                    panic!("{:?}", reply.value);
                };
                assert_eq!(problem.r#type, widgets::service::ALREADY_PUBLISHED);
                assert_eq!(reply.attempts, 1, "a business 409 is not retried");
                assert!(!reply.replayed, "attempt {attempt}: never stored");
            }
            other => panic!("{other:?}"),
        }
    }
    // Not stored: the key's record was released, no result row exists for it, and the other
    // channel's event is the only one.
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'pub-blog' AND response_status IS NOT NULL",
        )
        .await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM outbox WHERE channel = 'blog'").await,
        0
    );
    // Republishing on the same channel with a new key succeeds (no conflict).
    retrying
        .publish_widget(&body.id, &on("news"), &CallOptions::with_key("pub-news-2"))
        .await
        .expect("same channel again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_without_a_key_is_never_repeated_once_it_may_have_arrived() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let direct = client(&server.base, RetryPolicy::default());
    let created = direct
        .create_widget(&new_widget("doomed"), &CallOptions::default())
        .await
        .unwrap();
    let CreateWidgetResponse::Status201 { body, .. } = created.value;
    // The proxy's first connection executes the request and drops the answer.
    let upstream = server.base.trim_start_matches("http://").to_owned();
    let (proxied, injected) = faulty_proxy(upstream, Duration::from_secs(1)).await;
    let through_proxy = client(&proxied, RetryPolicy::default());
    let deleted = through_proxy
        .delete_widget(&body.id, &CallOptions::default())
        .await;
    match deleted {
        Err(Error::Transport(failure)) => {
            assert_eq!(failure.attempts, 1, "DELETE without a key is not repeated");
            assert!(failure.may_have_executed);
            assert_eq!(failure.key, None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(injected.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        0,
        "it had executed"
    );
    // A safe read through the same proxy (its next connection is clean, the one after that is
    // reset before it reaches the server) is repeated past the fault.
    through_proxy
        .list_widgets(&ListWidgetsParams::default(), &CallOptions::default())
        .await
        .unwrap();
    let listed = through_proxy
        .list_widgets(&ListWidgetsParams::default(), &CallOptions::default())
        .await
        .expect("a GET is retried");
    assert!(listed.attempts >= 2, "{}", listed.attempts);
    // No server at all: nothing can have arrived, so even a write without a key is retried,
    // until the policy gives up.
    let nowhere = client(
        "http://127.0.0.1:9",
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        },
    );
    match nowhere
        .delete_widget(&body.id, &CallOptions::default())
        .await
    {
        Err(Error::Transport(failure)) => {
            assert_eq!(failure.attempts, 3);
            assert!(!failure.may_have_executed);
        }
        other => panic!("{other:?}"),
    }
}

/// `idemgen probe` against the real service: every check of both idempotent operations passes,
/// the second credential included (`publishWidget`'s path parameter from a create it makes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idemgen_probe_passes_every_check_against_the_service() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let base = server.base.clone();
    let report = tokio::task::spawn_blocking(move || {
        let spec_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml");
        let spec = idemgen::loader::load(&spec_path).expect("the example spec loads");
        let options = idemgen::probe::Options {
            base_url: base,
            headers: vec![("Authorization".into(), "Bearer tok1".into())],
            other_headers: vec![("Authorization".into(), "Bearer tok2".into())],
            ..Default::default()
        };
        idemgen::probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs")
    })
    .await
    .unwrap();
    let text = idemgen::probe::report::human(&report);
    assert!(!report.failed(), "{text}");
    assert_eq!(
        report.results.len(),
        2 * idemgen::probe::CHECKS.len(),
        "{text}"
    );
    assert!(
        report
            .results
            .iter()
            .all(|r| r.outcome == idemgen::probe::Outcome::Passed),
        "{text}"
    );
}

/// A proxy whose first connection forwards the request's head and only part of its body, so the
/// server's body read timeout answers 408; it forwards that answer and closes. Later
/// connections are forwarded whole. Returns its base URL and how many connections it took.
async fn body_stalling_proxy(upstream: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut downstream, _)) = listener.accept().await else {
                return;
            };
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Some(request) = read_message(&mut downstream).await else {
                    return;
                };
                let mut server = TcpStream::connect(&upstream).await.unwrap();
                let sent = if n == 0 {
                    let head = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    &request[..head + 3]
                } else {
                    &request[..]
                };
                server.write_all(sent).await.unwrap();
                let Some(response) = read_message(&mut server).await else {
                    return;
                };
                let _ = downstream.write_all(&response).await;
            });
        }
    });
    (format!("http://{address}"), connections)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_client_repeats_a_408_with_the_same_key_into_one_widget() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[("WIDGETS_BODY_TIMEOUT", "300ms")]).await;
    let upstream = server.base.trim_start_matches("http://").to_owned();
    let (proxied, connections) = body_stalling_proxy(upstream).await;
    let policy = RetryPolicy {
        max_attempts: 3,
        budget: Duration::from_secs(10),
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        attempt_timeout: Duration::from_secs(5),
    };
    let reply = client(&proxied, policy)
        .create_widget(&new_widget("slow"), &CallOptions::default())
        .await
        .expect("the call succeeds after the 408");
    assert_eq!(reply.attempts, 2, "one 408, then the repeat");
    assert!(
        !reply.replayed,
        "the 408 executed nothing: the repeat executes"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    let CreateWidgetResponse::Status201 { body, .. } = reply.value;
    assert_eq!(body.name, "slow");
    // The repeat carried the same key: asking again with it replays.
    let key = reply.key.expect("a keyed call");
    let again = client(&server.base, RetryPolicy::default())
        .create_widget(&new_widget("slow"), &CallOptions::with_key(key))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 1);
}

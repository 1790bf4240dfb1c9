//! Cancellation safety: clients that reset their connection at random points of their requests,
//! under load, never leave a pooled connection whose transaction state differs from what sqlx
//! believes (ARCHITECTURE.md, "Cancellation safety"). Afterwards every key is retried to
//! completion: one widget per key, every acknowledged create replays with its first body, no
//! connection of the service sits idle inside a transaction, and the service's log holds neither
//! `there is already a transaction in progress` nor `there is no transaction in progress`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// A small xorshift generator: the test's randomness, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const CLIENTS: u64 = 24;
const REQUESTS_PER_CLIENT: u64 = 60;
const KEYS: u64 = 120;

fn create_request(port: u16, key: &str) -> Vec<u8> {
    let body = json!({"name": format!("w-{key}")}).to_string();
    format!(
        "POST /widgets HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer tok1\r\n\
         Idempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A transactional request (the pipeline's own `BEGIN` … `ROLLBACK`): a delete of a widget that
/// does not exist, answered 404 after its transaction rolled back.
fn delete_request(port: u16, rng: &mut Rng) -> Vec<u8> {
    let id = uuid::Uuid::from_u64_pair(rng.next(), rng.next());
    format!(
        "DELETE /widgets/{id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer tok1\r\n\r\n"
    )
    .into_bytes()
}

/// A read on the service's pool (statements outside any transaction of the runtime's).
fn list_request(port: u16) -> Vec<u8> {
    format!("GET /widgets HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer tok1\r\n\r\n")
        .into_bytes()
}

/// Parses a complete HTTP/1.1 response with a `Content-Length` body, if `buf` holds one.
fn parse_response(buf: &[u8]) -> Option<(u16, bool, Value)> {
    let text = std::str::from_utf8(buf).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
    let mut length = 0;
    let mut replayed = false;
    for line in head.lines().skip(1) {
        let (name, value) = line.split_once(':')?;
        let name = name.trim().to_ascii_lowercase();
        if name == "content-length" {
            length = value.trim().parse().ok()?;
        } else if name == "idempotent-replayed" {
            replayed = value.trim() == "true";
        }
    }
    if body.len() < length {
        return None;
    }
    let body = serde_json::from_str(&body[..length]).unwrap_or(Value::Null);
    Some((status, replayed, body))
}

/// Sends `request` and resets the connection (RST: zero linger) at a random point: inside the
/// request's bytes, or a random delay after all of them were sent; a quarter of the requests
/// wait for their answer instead. Returns the answer when one was read.
async fn send_or_abort(port: u16, request: &[u8], rng: &mut Rng) -> Option<(u16, bool, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    stream.set_nodelay(true).ok()?;
    stream.set_zero_linger().ok()?;
    let mode = rng.below(8);
    if mode == 0 {
        // Cut inside the request: its head or its body.
        let cut = 1 + rng.below(request.len() as u64 - 1) as usize;
        let _ = stream.write_all(&request[..cut]).await;
        tokio::time::sleep(Duration::from_micros(rng.below(500))).await;
        return None;
    }
    stream.write_all(request).await.ok()?;
    let wait = if mode <= 2 {
        // Read the answer (bounded: a stuck server fails the test below, not here).
        Duration::from_secs(10)
    } else {
        // Reset a random moment after the request: mostly while its statements run.
        Duration::from_micros(rng.below(4000))
    };
    let mut buf = Vec::new();
    let read = tokio::time::timeout(wait, async {
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(answer) = parse_response(&buf) {
                return Some(answer);
            }
        }
    })
    .await;
    read.ok().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_resetting_mid_request_never_share_a_transaction_and_every_key_executes_once() {
    let db = fresh_db().await;
    let log = std::env::temp_dir().join(format!("widgets-cancel-{}.txt", uuid::Uuid::new_v4()));
    // A small pool: connections are reused by many requests, as under wrk.
    let server = Server::start_with(
        &db,
        &[("WIDGETS_POOL_SIZE", "6"), ("RUST_LOG", "info")],
        Launch {
            log: Some(log.clone()),
            ..Launch::default()
        },
    )
    .await;
    let port: u16 = server.base.rsplit(':').next().unwrap().parse().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("cancellation test seed {seed}");

    // Phase 1: concurrent clients, each request reset at a random point or read to its end.
    let acknowledged: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let acknowledged = Arc::clone(&acknowledged);
        clients.push(tokio::spawn(async move {
            let mut rng = Rng(seed.wrapping_mul(c + 1) | 1);
            let mut answers = 0u64;
            for _ in 0..REQUESTS_PER_CLIENT {
                let kind = rng.below(4);
                let key = format!("cancel-{}", rng.below(KEYS));
                let request = match kind {
                    0 | 1 => create_request(port, &key),
                    2 => delete_request(port, &mut rng),
                    _ => list_request(port),
                };
                let Some((status, _replayed, body)) = send_or_abort(port, &request, &mut rng).await
                else {
                    continue;
                };
                answers += 1;
                if kind <= 1 && (status == 201 || status == 200) {
                    let mut acks = acknowledged.lock().unwrap();
                    match acks.get(&key) {
                        Some(first) => assert_eq!(
                            first, &body,
                            "{key}: a second acknowledgement differs from the first"
                        ),
                        // The first answer read may be a replay (the first was reset).
                        None => {
                            acks.insert(key, body);
                        }
                    }
                }
            }
            answers
        }));
    }
    let mut answers = 0;
    for client in clients {
        answers += client.await.expect("a client task panicked");
    }
    let phase1 = started.elapsed();

    // Phase 2: every key retried to completion (409 while an interrupted attempt still runs).
    let http = reqwest::Client::new();
    let mut firsts = acknowledged.lock().unwrap().clone();
    let acknowledged_in_phase1 = firsts.len();
    for k in 0..KEYS {
        let key = format!("cancel-{k}");
        let deadline = Instant::now() + Duration::from_secs(15);
        let answer = loop {
            let answer = call(
                &http,
                &server.base,
                reqwest::Method::POST,
                "/widgets",
                Some("tok1"),
                Some(&key),
                Some(json!({"name": format!("w-{key}")})),
            )
            .await;
            if answer.status.is_success() {
                break answer;
            }
            assert!(
                matches!(
                    answer.status,
                    StatusCode::CONFLICT
                        | StatusCode::SERVICE_UNAVAILABLE
                        | StatusCode::GATEWAY_TIMEOUT
                ),
                "{key}: {answer:?}"
            );
            assert!(
                Instant::now() < deadline,
                "{key} never completed: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        match firsts.get(&key) {
            Some(first) => {
                assert!(
                    answer.replayed(),
                    "{key}: acknowledged before, not replayed"
                );
                assert_eq!(
                    &answer.body, first,
                    "{key}: the replay differs from the first body"
                );
            }
            None => {
                firsts.insert(key.clone(), answer.body.clone());
            }
        }
        // And once more: every key now replays its first body.
        let again = create(
            &server.base,
            "tok1",
            &key,
            json!({"name": format!("w-{key}")}),
        )
        .await;
        assert_eq!(again.status, StatusCode::CREATED, "{key}: {again:?}");
        assert!(again.replayed(), "{key}: {again:?}");
        assert_eq!(&again.body, &firsts[&key], "{key}");
    }

    // One widget per key.
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        KEYS as i64,
        "one widget per key"
    );
    let distinct = count(&db, "SELECT count(DISTINCT name) FROM widgets").await;
    assert_eq!(distinct, KEYS as i64);

    // No connection of the service's pools sits inside a transaction nobody owns (a closed
    // connection's backend may take a moment to exit: wait up to 5 s for it).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stuck = loop {
        let stuck = count(
            &db,
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()
                AND state LIKE 'idle in transaction%'",
        )
        .await;
        if stuck == 0 || std::time::Instant::now() >= deadline {
            break stuck;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        stuck, 0,
        "a pooled connection was left inside a transaction"
    );

    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    // The log is the service's (every request line at INFO), so the grep below is not vacuous:
    // before `PgTx` closed connections left in doubt, one of these notices appeared in every run.
    let requests = text.lines().filter(|l| l.contains("operation=")).count();
    assert!(requests as u64 >= KEYS, "{requests} request lines:\n{text}");
    for notice in [
        "there is already a transaction in progress",
        "there is no transaction in progress",
        "current transaction is aborted",
    ] {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(notice)).collect();
        assert!(
            lines.is_empty(),
            "{} line(s) of {notice:?} in the service's log (seed {seed}), e.g. {:?}",
            lines.len(),
            lines.first()
        );
    }
    eprintln!(
        "{} requests in {phase1:?} ({answers} answered, the rest reset), {acknowledged_in_phase1} \
         keys acknowledged before the retries; log of {} lines",
        CLIENTS * REQUESTS_PER_CLIENT,
        text.lines().count()
    );
}

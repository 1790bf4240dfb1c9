use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemgen_testdb::{AutoFailover, Kill, PgBouncer, PoolMode, TestDb, shared_cluster};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection as _;

use crate::support::*;

/// What a client got for one key: its first 2xx body, when it was sent and answered.
#[derive(Debug, Clone)]
struct Ack {
    body: Value,
    sent: Instant,
    at: Instant,
    replayed: bool,
}

#[derive(Default)]
struct Tally {
    acks: Mutex<HashMap<String, Ack>>,
    /// Answers no retry may get: anything but 201, 409 (in flight), 503, 504, or no answer.
    unexpected: Mutex<Vec<String>>,
    attempts: AtomicUsize,
}

/// Creates `key` through the processes in turn until a definite answer (a 2xx), or `budget`.
async fn create_until_definite(
    client: &reqwest::Client,
    bases: &[String],
    start: usize,
    key: &str,
    tally: &Tally,
    budget: Duration,
) -> Option<Ack> {
    let deadline = Instant::now() + budget;
    let body = json!({"name": format!("w-{key}")});
    let mut i = start;
    while Instant::now() < deadline {
        tally.attempts.fetch_add(1, Ordering::Relaxed);
        let base = &bases[i % bases.len()];
        i += 1;
        let sent = Instant::now();
        let answer = client
            .post(format!("{base}/widgets"))
            .bearer_auth("tok1")
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await;
        let Ok(resp) = answer else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let status = resp.status();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let Ok(bytes) = resp.bytes().await else {
            continue;
        };
        match status {
            StatusCode::CREATED => {
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                return Some(Ack {
                    body,
                    sent,
                    at: Instant::now(),
                    replayed,
                });
            }
            StatusCode::CONFLICT
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => {
                tally.unexpected.lock().unwrap().push(format!(
                    "{key}: {other} {}",
                    String::from_utf8_lossy(&bytes)
                ));
                return None;
            }
        }
    }
    tally
        .unexpected
        .lock()
        .unwrap()
        .push(format!("{key}: no definite answer within {budget:?}"));
    None
}

/// The first create acknowledged as executed (not a replay) whose request was sent once the
/// killed server was gone (`gone`): it can only have been written by the new primary.
fn first_write_after(tally: &Tally, gone: Instant) -> Option<Instant> {
    tally
        .acks
        .lock()
        .unwrap()
        .values()
        .filter(|a| !a.replayed && a.sent >= gone)
        .map(|a| a.at)
        .min()
}

/// Waits for [`first_write_after`] `gone`; the time from the kill's start `t` to it.
async fn wait_first_write_after(
    tally: &Tally,
    t: Instant,
    gone: Instant,
    limit: Duration,
) -> Duration {
    let deadline = t + limit;
    loop {
        if let Some(at) = first_write_after(tally, gone) {
            return at - t;
        }
        assert!(
            Instant::now() < deadline,
            "no create was acknowledged within {limit:?} of the kill"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `f` until it succeeds, at most 5 times 1 s apart (a psql call that timed out under load);
/// the last error fails the test.
async fn retrying<T, E: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> Result<T, E>) -> T {
    let mut tries = 0;
    loop {
        match tokio::task::block_in_place(&mut f) {
            Ok(v) => return v,
            Err(e) if tries >= 4 => panic!("{what}: {e:?}"),
            Err(_) => tries += 1,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

/// pg_auto_failover (a monitor, two synchronous nodes) under four widgets processes (one per
/// strategy and store) behind one multi-host URL and 16 retrying clients. The primary is killed twice
/// (its keeper first, so nothing restarts it): node a with `pg_ctl -m immediate`, then, once a
/// has rejoined as the standby, node b with SIGKILL of its whole process group. The monitor
/// promotes each time; the processes' pools follow the new writer. Afterwards every
/// acknowledged create replays its first body, and the last primary holds one widget per key.
/// A fifth process pinned to node a answers 503 while a is a rejoined standby, replays included
/// (the demoted writer: never a read from a replica).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_processes_through_two_automatic_failovers_lose_no_acknowledged_create() {
    let began = Instant::now();
    let formation = blocking(|| AutoFailover::start("app"))
        .await
        .expect("a pg_auto_failover formation (monitor, nodes a and b)");
    let formed = began.elapsed();
    let url = formation.url();
    let log_dir = std::env::temp_dir().join(format!("widgets-failover-{}", std::process::id()));
    std::fs::create_dir_all(&log_dir).unwrap();
    let launch = |name: &str| Launch {
        log: Some(log_dir.join(format!("{name}.log"))),
        ..Launch::default()
    };
    let mut servers = Vec::new();
    // Each strategy on each store: sqlx's pools follow the writer through `WriterHosts`,
    // TokioPgStore's through tokio-postgres's own `read-write` host selection.
    let processes = [
        ("sqlx", "separate-claim"),
        ("sqlx", "in-transaction"),
        ("tokio-postgres", "separate-claim"),
        ("tokio-postgres", "in-transaction"),
    ];
    for (n, (store, strategy)) in processes.into_iter().enumerate() {
        let env = [
            ("WIDGETS_STORE", store),
            ("WIDGETS_STRATEGY", strategy),
            ("WIDGETS_STALE_CLAIM", "2s"),
            ("WIDGETS_POOL_SIZE", "8"),
        ];
        servers.push(Server::start_on_url(&url, &env, launch(&format!("p{n}"))).await);
    }
    // Pinned to node a alone: the demoted writer once a comes back as a standby.
    let pinned = Server::start_on_url(
        &formation.node_url(0),
        &[("WIDGETS_STALE_CLAIM", "2s"), ("WIDGETS_POOL_SIZE", "4")],
        launch("pinned"),
    )
    .await;
    let pinned_first = create(&pinned.base, "tok1", "pinned-1", json!({"name": "pinned"})).await;
    assert_eq!(
        pinned_first.status,
        StatusCode::CREATED,
        "{:?}",
        pinned_first.body
    );

    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base.clone()).collect());
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let mut clients = Vec::new();
    for c in 0..16usize {
        let (bases, tally, stop, http) = (bases.clone(), tally.clone(), stop.clone(), http.clone());
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{c}-{n}");
                n += 1;
                let ack = create_until_definite(
                    &http,
                    &bases,
                    c + n,
                    &key,
                    &tally,
                    Duration::from_secs(60),
                )
                .await;
                if let Some(ack) = ack {
                    tally.acks.lock().unwrap().insert(key, ack);
                }
            }
        }));
    }
    let acked = |tally: &Tally| tally.acks.lock().unwrap().len();

    // Kill 1: node a (the primary) with -m immediate.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // a starts as the primary: waited for (a monitor query may time out under load), not
    // asserted from one poll.
    wait_writer(&formation, 0, Duration::from_secs(10)).await;
    let sync = retrying("a's synchronous_standby_names", || {
        formation.setting(0, "synchronous_standby_names")
    })
    .await;
    assert!(
        sync.contains("pgautofailover_standby_"),
        "synchronous: {sync:?}"
    );
    // The connection budget under load: every process's pools and probes on the primary.
    let (sessions_on_primary, max_connections): (i64, String) = {
        let mut conn = sqlx::PgConnection::connect(&formation.node_url(0))
            .await
            .expect("connecting to node a");
        sqlx::query_as(
            "SELECT count(*) FILTER (WHERE backend_type = 'client backend' \
                                       AND pid <> pg_backend_pid()), \
                    current_setting('max_connections') FROM pg_stat_activity",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap()
    };
    let before_first = acked(&tally);
    let (mut formation, kill1, gone1) = blocking(move || {
        let mut f = formation;
        let at = Instant::now();
        f.kill(0, Kill::Immediate).expect("killing node a");
        (f, at, Instant::now())
    })
    .await;
    // The monitor polled from the moment the server is gone, beside the clients (it cannot
    // promote before: a live primary passes its health checks).
    let (to_write1, promoted1) = tokio::join!(
        wait_first_write_after(&tally, kill1, gone1, Duration::from_secs(60)),
        wait_writer(&formation, 1, Duration::from_secs(60)),
    );
    let promoted1 = promoted1 - kill1;

    // Node a rejoins as b's standby; the pinned process now reaches a server in recovery.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rejoin_began = Instant::now();
    let mut formation = blocking(move || {
        formation
            .rejoin(0)
            .expect("node a rejoining as the standby");
        formation
    })
    .await;
    let rejoined = rejoin_began.elapsed();
    // A key the pinned process wrote before a died (its record is on a, replicated) and a new
    // one, each asked three times: 503 is all a server in recovery may answer, never a replay.
    for key in ["pinned-1", "pinned-2"] {
        for _ in 0..3 {
            let a = create(&pinned.base, "tok1", key, json!({"name": "pinned"})).await;
            assert_eq!(
                a.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "the demoted writer answered {key} with {:?}",
                a.body
            );
            assert!(!a.replayed());
        }
    }
    let standby_rows = {
        let mut conn = sqlx::PgConnection::connect(&formation.node_url(0))
            .await
            .expect("connecting to node a, the standby");
        let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(in_recovery, "node a is a standby now");
        // The 503s came from a server in recovery, not from no connection: the pinned
        // process's pool holds sessions on a.
        let sessions: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'app' \
              AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert!(
            sessions > 0,
            "the pinned process is connected to the standby"
        );
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM widgets WHERE name = 'pinned'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        rows
    };
    assert_eq!(
        standby_rows, 1,
        "the pinned key's widget is on the standby, unread"
    );

    // Kill 2: node b (the primary now) with SIGKILL of its keeper and postmaster.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_second = acked(&tally);
    let (formation, kill2, gone2) = blocking(move || {
        let at = Instant::now();
        formation.kill(1, Kill::Sigkill).expect("killing node b");
        (formation, at, Instant::now())
    })
    .await;
    let (to_write2, promoted2) = tokio::join!(
        wait_first_write_after(&tally, kill2, gone2, Duration::from_secs(60)),
        wait_writer(&formation, 0, Duration::from_secs(60)),
    );
    let promoted2 = promoted2 - kill2;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let unexpected = tally.unexpected.lock().unwrap().clone();
    assert!(
        unexpected.is_empty(),
        "answers no retry may get: {unexpected:?}"
    );

    // Every acknowledged key replays its first body, through every process in turn: each of
    // them, on either store, reads from the last writer.
    let acks: Vec<(String, Ack)> = tally.acks.lock().unwrap().clone().into_iter().collect();
    let lost = Arc::new(Mutex::new(Vec::new()));
    let chunks: Vec<Vec<(String, Ack)>> = acks
        .chunks(acks.len().div_ceil(16).max(1))
        .map(<[_]>::to_vec)
        .collect();
    let mut checks = Vec::new();
    for (c, chunk) in chunks.into_iter().enumerate() {
        let (bases, http, lost) = (bases.clone(), http.clone(), lost.clone());
        checks.push(tokio::spawn(async move {
            for (n, (key, ack)) in chunk.into_iter().enumerate() {
                let base = &bases[(c + n) % bases.len()];
                let a = call(
                    &http,
                    base,
                    reqwest::Method::POST,
                    "/widgets",
                    Some("tok1"),
                    Some(&key),
                    Some(json!({"name": format!("w-{key}")})),
                )
                .await;
                if a.status != StatusCode::CREATED || !a.replayed() || a.body != ack.body {
                    lost.lock()
                        .unwrap()
                        .push(format!("{key}: {} {:?}", a.status, a.body));
                }
            }
        }));
    }
    for c in checks {
        c.await.unwrap();
    }
    let lost = lost.lock().unwrap().clone();

    // One widget per key on the last primary, and every acknowledged key's widget is there.
    let mut conn = sqlx::PgConnection::connect(&formation.node_url(0))
        .await
        .expect("connecting to the last primary");
    let duplicates: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT name FROM widgets GROUP BY owner, name \
          HAVING count(*) > 1) d",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let names: Vec<String> = acks.iter().map(|(k, _)| format!("w-{k}")).collect();
    let present: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT name) FROM widgets WHERE name = ANY($1)")
            .bind(&names)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let total = acks.len();
    println!(
        "pg_auto_failover, 4 processes, 16 clients: formation up in {:.1} s; keys acknowledged: \
         {before_first} before kill 1 (-m immediate of a), {} between, {} after kill 2 (SIGKILL \
         of b), {total} in all; {} attempts; kill to first successful write: {:.2} s and {:.2} s \
         (the monitor reported the new writer by {:.2} s and {:.2} s); a rejoined as the standby in \
         {:.1} s; lost acknowledgements: {}; keys \
         with two widgets: {duplicates}; client sessions on the primary under load: \
         {sessions_on_primary} of max_connections {max_connections}; test {:.1} s",
        formed.as_secs_f64(),
        before_second - before_first,
        total - before_second,
        tally.attempts.load(Ordering::Relaxed),
        to_write1.as_secs_f64(),
        to_write2.as_secs_f64(),
        promoted1.as_secs_f64(),
        promoted2.as_secs_f64(),
        rejoined.as_secs_f64(),
        lost.len(),
        began.elapsed().as_secs_f64(),
    );
    assert!(
        before_first > 0,
        "creates were acknowledged before the first kill"
    );
    assert!(before_second > before_first, "and between the kills");
    assert!(total > before_second, "and after the second");
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
    assert_eq!(duplicates, 0, "a key with two widgets");
    assert_eq!(
        present as usize, total,
        "every acknowledged widget is on the last primary"
    );
    drop(servers);
    drop(pinned);
    drop(formation);
    let _ = std::fs::remove_dir_all(&log_dir);
}

/// Waits (at most `limit`, polling every 100 ms) until the monitor reports node `i` as the
/// writer (its keeper reports each second); when it first did. A failed monitor query (psql's
/// 2 s connect timeout under load) is polled again, not a failure.
async fn wait_writer(formation: &AutoFailover, i: usize, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        let writer = tokio::task::block_in_place(|| formation.writer());
        if writer.as_ref().is_ok_and(|w| *w == Some(i)) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "the monitor never made node {} the writer: {writer:?}, {:?}\n{}",
            formation.name(i),
            formation.states(),
            formation.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server connections of each database's pool in the transaction-mode PgBouncer below.
const SERVERS: u32 = 2;

/// Through PgBouncer in transaction mode, the claim pool's `SET synchronous_commit = off` would
/// be session state left on server connections that other clients then use. With
/// `WIDGETS_POOLER=transaction` the process leaves it out: after creates, replays and reads
/// through the pooler, on either store, every server connection of the pool still has
/// `synchronous_commit = on`. The control shows the check sees such a leak.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_a_transaction_pooler_the_claim_pool_leaves_no_session_state() {
    let cluster = shared_cluster().expect("the throwaway cluster");
    let bouncer = PgBouncer::start("127.0.0.1", cluster.port(), PoolMode::Transaction, SERVERS)
        .expect("PgBouncer in transaction mode");
    // Each server connection of the database's pool, held at once: its synchronous_commit.
    let settings = |db: String| {
        let options = bouncer.options(&db);
        async move {
            let mut conns = Vec::new();
            let mut seen = Vec::new();
            for _ in 0..SERVERS {
                let mut c = sqlx::PgConnection::connect_with(&options).await.unwrap();
                sqlx::Executor::execute(&mut c, "BEGIN").await.unwrap();
                let row: (String, i32) = sqlx::query_as(
                    "SELECT current_setting('synchronous_commit'), pg_backend_pid()",
                )
                .persistent(false)
                .fetch_one(&mut c)
                .await
                .unwrap();
                seen.push(row);
                conns.push(c);
            }
            for mut c in conns {
                sqlx::Executor::execute(&mut c, "ROLLBACK").await.unwrap();
            }
            seen
        }
    };

    // Control: a session-level SET through the pooler stays on the server connection.
    let control = TestDb::new().await.unwrap();
    let mut leaker = sqlx::PgConnection::connect_with(&bouncer.options(&control.name))
        .await
        .unwrap();
    sqlx::Executor::execute(&mut leaker, "SET synchronous_commit = off")
        .await
        .unwrap();
    drop(leaker);
    let seen = settings(control.name.clone()).await;
    assert!(
        seen.iter().any(|(s, _)| s == "off"),
        "the control's SET reached a pooled server connection: {seen:?}"
    );

    for store in ["sqlx", "tokio-postgres"] {
        serve_through(&bouncer, store, &settings).await;
    }
}

/// Creates, replays and reads through `bouncer` on one process of `store`; then every server
/// connection (`settings`) still has `synchronous_commit = on`.
async fn serve_through<F: std::future::Future<Output = Vec<(String, i32)>>>(
    bouncer: &PgBouncer,
    store: &str,
    settings: &impl Fn(String) -> F,
) {
    let db = TestDb::new().await.unwrap();
    let pooled = format!(
        "postgres://postgres@127.0.0.1:{}/{}",
        bouncer.port(),
        db.name
    );
    let server = Server::start_on_url(
        &pooled,
        &[
            ("WIDGETS_STORE", store),
            ("WIDGETS_POOLER", "transaction"),
            ("WIDGETS_MIGRATION_URL", db.url.as_str()),
            ("WIDGETS_POOL_SIZE", "8"),
        ],
        Launch::default(),
    )
    .await;
    let mut tasks = Vec::new();
    for c in 0..8 {
        let base = server.base.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..10 {
                let key = format!("t{c}-{n}");
                let body = json!({"name": key});
                let first = create(&base, "tok1", &key, body.clone()).await;
                assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
                let again = create(&base, "tok1", &key, body).await;
                assert_eq!(again.status, StatusCode::CREATED);
                assert!(again.replayed());
                assert_eq!(again.body, first.body);
                let id = first.body["id"].as_str().unwrap().to_string();
                let got = call(
                    &reqwest::Client::new(),
                    &base,
                    reqwest::Method::GET,
                    &format!("/widgets/{id}"),
                    Some("tok1"),
                    None,
                    None,
                )
                .await;
                assert_eq!(got.status, StatusCode::OK, "{:?}", got.body);
                assert_eq!(got.body, first.body);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let list = call(
        &reqwest::Client::new(),
        &server.base,
        reqwest::Method::GET,
        "/widgets?limit=100",
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["items"].as_array().unwrap().len(), 80);
    let seen = settings(db.name.clone()).await;
    assert_eq!(seen.len(), SERVERS as usize);
    assert!(
        seen.iter().all(|(s, _)| s == "on"),
        "{store}: a server connection was left with the claim pool's setting: {seen:?}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 80);
}

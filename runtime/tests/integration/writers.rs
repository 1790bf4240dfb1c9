//! Multi-host writer discovery: a libpq-style URL listing a standby and a primary; the pool
//! connects to the writer, refuses the standby while it is in recovery (503s, never a replay
//! read from it), and follows the writer once the standby is promoted; its idle ping
//! (`ping_if_idle_for`) across a restart of the same writer; the same on `TokioPgStore`'s pool.

use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError, HandlerFuture};
use idemgen_runtime::{
    Executor, ExecutorConfig, PgStore, Store, Strategy, TokioPgStore, TxHandle, WriterHosts,
};
use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::PgPoolOptions;

use crate::failover::{NO_LAG, Pair, pair};
use crate::support::*;

/// The failover both stores' multi-host pools go through, the pair's standby listed first: a
/// create on the writer; the primary stopped, both strategies answer 503 (never a replay read
/// from the standby in recovery) and `during_outage` checks the pool; the standby promoted,
/// retries replay there within 30 s (`writer_port` then names the standby), and new creates of
/// both strategies write on it.
async fn follows_the_writer_after_a_failover<S, F>(
    pair: Pair,
    store: &str,
    [separate, in_tx]: [Executor<S>; 2],
    writer: fn(String) -> F,
    writer_port: impl AsyncFn() -> u16,
    during_outage: impl FnOnce(),
) where
    S: Store,
    F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    assert_eq!(writer_port().await, pair.primary.port(), "{store}");
    let before = request(scope("alice", "before"), json!({"k": 1}), 1);
    let first = separate
        .execute(before.clone(), writer("before".into()))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);

    // The primary dies; the standby (which has the record: synchronous) is still in recovery.
    let pair = tokio::task::spawn_blocking(move || {
        pair.primary
            .stop("immediate")
            .expect("stopping the primary");
        pair
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    for exec in [&separate, &in_tx] {
        match exec.execute(before.clone(), writer("before".into())).await {
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            other => panic!("{store}: no writer, yet: {other:?}"),
        }
    }
    during_outage();

    // Promoted, the standby is the writer: the pool follows it.
    let promoted = Instant::now();
    let pair = tokio::task::spawn_blocking(move || {
        idemgen_testdb::promote(&pair.standby).expect("promoting the standby");
        pair
    })
    .await
    .unwrap();
    let replay = loop {
        match separate
            .execute(before.clone(), writer("before".into()))
            .await
        {
            Ok(outcome) => break outcome,
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            Err(other) => panic!("{store}: {other:?}"),
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(30),
            "{store}: the pool never found the new writer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "multi-host ({store}): first success {:?} after the promotion began",
        promoted.elapsed()
    );
    assert_eq!(replay.disposition, Disposition::Replayed);
    assert_eq!(replay.response.body, first.response.body);
    assert_eq!(writer_port().await, pair.standby.port(), "{store}");
    for (exec, label) in [(&separate, "after-separate"), (&in_tx, "after-in-tx")] {
        let done = exec
            .execute(
                request(scope("alice", label), json!({"k": 2}), 1),
                writer(label.into()),
            )
            .await
            .unwrap_or_else(|e| panic!("{store} {label}: {e:?}"));
        assert_eq!(done.disposition, Disposition::Executed, "{store} {label}");
    }
    // The writes are on the new writer.
    let mut direct = sqlx::PgConnection::connect(&pair.standby.url("app"))
        .await
        .unwrap();
    let labels: Vec<String> = sqlx::query_scalar("SELECT label FROM business_writes ORDER BY id")
        .fetch_all(&mut direct)
        .await
        .unwrap();
    assert_eq!(
        labels,
        ["before", "after-separate", "after-in-tx"],
        "{store}"
    );
}

/// Both strategies on one store.
fn executors<S: Store + Clone>(store: S) -> [Executor<S>; 2] {
    [Strategy::SeparateClaim, Strategy::InTransaction].map(|strategy| {
        Executor::new(
            store.clone(),
            ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            },
        )
    })
}

/// `WriterHosts` on a URL with `target_session_attrs=read-write`: discovery skips the standby,
/// and the pool never follows a server in recovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_multi_host_url_finds_the_writer_and_follows_it_after_a_failover() {
    let pair = pair(true, NO_LAG).await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/app?target_session_attrs=read-write",
        pair.standby.port(),
        pair.primary.port()
    );
    let hosts = WriterHosts::parse(&url)
        .unwrap()
        .watch_every(Duration::from_millis(200));
    assert_eq!(hosts.hosts().len(), 2);
    let pool = hosts
        .connect(
            PgPoolOptions::new()
                .max_connections(8)
                .acquire_timeout(Duration::from_secs(2)),
        )
        .await
        .expect("a pool on the writer");
    let primary_port = pair.primary.port();
    follows_the_writer_after_a_failover(
        pair,
        "sqlx",
        executors(PgStore::new(pool.clone())),
        pg_id_writer,
        async || pool.connect_options().get_port(),
        || {
            assert_eq!(
                pool.connect_options().get_port(),
                primary_port,
                "the pool never follows a server in recovery"
            )
        },
    )
    .await;
}

/// `TokioPgStore::pool` on a URL listing a standby before the primary, without
/// `target_session_attrs`: its connections go to the writer (the store makes `read-write` the
/// default for several hosts) and follow the standby once it is promoted; a read-only session
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_postgres_on_a_multi_host_url_finds_the_writer_and_follows_it_after_a_failover() {
    let pair = pair(true, NO_LAG).await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/app",
        pair.standby.port(),
        pair.primary.port()
    );
    let pool = TokioPgStore::pool(&url, 8).expect("a pool");
    let server_port = async || {
        let client = pool.get().await.expect("a connection");
        let row = client
            .query_one("SELECT inet_server_port()", &[])
            .await
            .unwrap();
        u16::try_from(row.get::<_, i32>(0)).unwrap()
    };
    follows_the_writer_after_a_failover(
        pair,
        "tokio-postgres",
        executors(TokioPgStore::new(pool.clone())),
        tokio_pg_id_writer,
        server_port,
        || {},
    )
    .await;
    // A store never writes through a read-only session.
    let read_only = TokioPgStore::pool(&format!("{url}?target_session_attrs=read-only"), 1)
        .expect_err("refused")
        .to_string();
    assert!(read_only.contains("read-only"), "{read_only}");
}

/// Holds every connection `pool` can give at once (`n`), runs one statement on each, and
/// returns how many of those first statements failed.
async fn failed_first_statements(pool: &sqlx::PgPool, n: usize) -> usize {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(pool.acquire().await.expect("a connection"));
    }
    let mut failed = 0;
    for conn in &mut held {
        if sqlx::query("SELECT 1").execute(&mut **conn).await.is_err() {
            failed += 1;
        }
    }
    failed
}

/// `WriterHosts::connect` sets the pool's `before_acquire` hook, which replaces one the caller's
/// options had (sqlx keeps one); `ping_if_idle_for` pings idle connections in its own hook. The
/// server restarted (the same writer: the pool does not switch), a pool with the ping replaces
/// its dead idle connections before handing them out; the same pool without it hands them out
/// and their first statements fail (what a `before_acquire` ping lost to `connect` did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_pool_pings_idle_connections_and_replaces_those_a_restart_killed() {
    const CONNECTIONS: usize = 4;
    // A cluster of this test's own, so restarting it disturbs no other test.
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a dedicated cluster");
    let db = TestDb::on_cluster(&cluster).await.expect("database");
    // A host that refuses connections first: the URL is a real host list.
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!(
        "postgres://postgres@127.0.0.1:{refused},127.0.0.1:{}/{}",
        cluster.port(),
        db.name
    );
    let options = || {
        PgPoolOptions::new()
            .max_connections(CONNECTIONS as u32)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(10))
    };
    let pinged = WriterHosts::parse(&url)
        .unwrap()
        .ping_if_idle_for(Duration::from_millis(100))
        .connect(options())
        .await
        .expect("a pool on the writer");
    let unpinged = WriterHosts::parse(&url)
        .unwrap()
        .connect(options())
        .await
        .expect("a pool on the writer");
    for pool in [&pinged, &unpinged] {
        assert_eq!(pool.connect_options().get_port(), cluster.port());
        assert_eq!(failed_first_statements(pool, CONNECTIONS).await, 0);
        // A connection goes back to the pool in a task of sqlx's.
        let back = Instant::now();
        while pool.num_idle() < CONNECTIONS {
            assert!(
                back.elapsed() < Duration::from_secs(5),
                "connections never back"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart_immediate().expect("restarting the server");
        cluster
    })
    .await
    .unwrap();
    // Idle for longer than the ping threshold.
    tokio::time::sleep(Duration::from_millis(300)).await;

    assert_eq!(
        failed_first_statements(&pinged, CONNECTIONS).await,
        0,
        "with the idle ping, no connection the restart killed is handed out"
    );
    assert_eq!(pinged.connect_options().get_port(), cluster.port());
    let unpinged_failures = failed_first_statements(&unpinged, CONNECTIONS).await;
    assert!(
        unpinged_failures > 0,
        "without the ping the dead connections are handed out (else this test shows nothing)"
    );
    eprintln!(
        "idle ping: 0 of {CONNECTIONS} first statements failed with it, \
         {unpinged_failures} of {CONNECTIONS} without"
    );
}

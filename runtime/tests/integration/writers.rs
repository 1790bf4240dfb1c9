//! Multi-host writer discovery: a libpq-style URL listing a standby and a primary; the pool
//! connects to the writer, refuses the standby while it is in recovery (503s, never a replay
//! read from it), and follows the writer once the standby is promoted; its idle ping
//! (`ping_if_idle_for`) across a restart of the same writer; the same on `TokioPgStore`'s pool.

use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Strategy, TokioPgStore, WriterHosts};
use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::PgPoolOptions;

use crate::failover::{NO_LAG, pair};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_multi_host_url_finds_the_writer_and_follows_it_after_a_failover() {
    let pair = pair(true, NO_LAG).await;
    // The standby first: discovery must skip it.
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
    assert_eq!(pool.connect_options().get_port(), pair.primary.port());
    let exec = |strategy| {
        Executor::new(
            PgStore::new(pool.clone()),
            ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            },
        )
    };
    let (separate, in_tx) = (exec(Strategy::SeparateClaim), exec(Strategy::InTransaction));
    let before = request(scope("alice", "before"), json!({"k": 1}), 1);
    let first = separate
        .execute(before.clone(), pg_id_writer("before".into()))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);

    // The primary dies; the standby (which has the record: synchronous) is still in recovery.
    let primary_port = pair.primary.port();
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
        match exec
            .execute(before.clone(), pg_id_writer("before".into()))
            .await
        {
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            other => panic!("no writer, yet: {other:?}"),
        }
    }
    assert_eq!(
        pool.connect_options().get_port(),
        primary_port,
        "the pool never follows a server in recovery"
    );

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
            .execute(before.clone(), pg_id_writer("before".into()))
            .await
        {
            Ok(outcome) => break outcome,
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            Err(other) => panic!("{other:?}"),
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(30),
            "the pool never found the new writer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "multi-host: first success {:?} after the promotion began",
        promoted.elapsed()
    );
    assert_eq!(replay.disposition, Disposition::Replayed);
    assert_eq!(replay.response.body, first.response.body);
    assert_eq!(pool.connect_options().get_port(), pair.standby.port());
    for (exec, label) in [(&separate, "after-separate"), (&in_tx, "after-in-tx")] {
        let done = exec
            .execute(
                request(scope("alice", label), json!({"k": 2}), 1),
                pg_id_writer(label.into()),
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: {e:?}"));
        assert_eq!(done.disposition, Disposition::Executed, "{label}");
    }
    // The writes are on the new writer.
    let mut direct = sqlx::PgConnection::connect(&pair.standby.url("app"))
        .await
        .unwrap();
    let labels: Vec<String> = sqlx::query_scalar("SELECT label FROM business_writes ORDER BY id")
        .fetch_all(&mut direct)
        .await
        .unwrap();
    assert_eq!(labels, ["before", "after-separate", "after-in-tx"]);
}

/// `TokioPgStore::pool` on a URL listing a standby before the primary, without
/// `target_session_attrs`: its connections go to the writer (the store makes `read-write` the
/// default for several hosts), answer 503 while only the standby is up and in recovery, and go
/// to the standby once it is promoted, where retries replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_postgres_on_a_multi_host_url_finds_the_writer_and_follows_it_after_a_failover() {
    let pair = pair(true, NO_LAG).await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/app",
        pair.standby.port(),
        pair.primary.port()
    );
    let pool = TokioPgStore::pool(&url, 8).expect("a pool");
    let server_port = |pool: idemgen_runtime::deadpool_postgres::Pool| async move {
        let client = pool.get().await.expect("a connection");
        let row = client
            .query_one("SELECT inet_server_port()", &[])
            .await
            .unwrap();
        u16::try_from(row.get::<_, i32>(0)).unwrap()
    };
    assert_eq!(server_port(pool.clone()).await, pair.primary.port());
    let exec = |strategy| {
        Executor::new(
            TokioPgStore::new(pool.clone()),
            ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            },
        )
    };
    let (separate, in_tx) = (exec(Strategy::SeparateClaim), exec(Strategy::InTransaction));
    let before = request(scope("alice", "before"), json!({"k": 1}), 1);
    let first = separate
        .execute(before.clone(), tokio_pg_id_writer("before".into()))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);

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
        match exec
            .execute(before.clone(), tokio_pg_id_writer("before".into()))
            .await
        {
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            other => panic!("no writer, yet: {other:?}"),
        }
    }

    let promoted = Instant::now();
    let pair = tokio::task::spawn_blocking(move || {
        idemgen_testdb::promote(&pair.standby).expect("promoting the standby");
        pair
    })
    .await
    .unwrap();
    let replay = loop {
        match separate
            .execute(before.clone(), tokio_pg_id_writer("before".into()))
            .await
        {
            Ok(outcome) => break outcome,
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
            Err(other) => panic!("{other:?}"),
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(30),
            "the pool never found the new writer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "multi-host (tokio-postgres): first success {:?} after the promotion began",
        promoted.elapsed()
    );
    assert_eq!(replay.disposition, Disposition::Replayed);
    assert_eq!(replay.response.body, first.response.body);
    assert_eq!(server_port(pool.clone()).await, pair.standby.port());
    for (exec, label) in [(&separate, "after-separate"), (&in_tx, "after-in-tx")] {
        let done = exec
            .execute(
                request(scope("alice", label), json!({"k": 2}), 1),
                tokio_pg_id_writer(label.into()),
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: {e:?}"));
        assert_eq!(done.disposition, Disposition::Executed, "{label}");
    }
    let mut direct = sqlx::PgConnection::connect(&pair.standby.url("app"))
        .await
        .unwrap();
    let labels: Vec<String> = sqlx::query_scalar("SELECT label FROM business_writes ORDER BY id")
        .fetch_all(&mut direct)
        .await
        .unwrap();
    assert_eq!(labels, ["before", "after-separate", "after-in-tx"]);
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

//! Multi-host writer discovery: a libpq-style URL listing a standby and a primary; the pool
//! connects to the writer, refuses the standby while it is in recovery (503s, never a replay
//! read from it), and follows the writer once the standby is promoted.

use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Strategy, WriterHosts};
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

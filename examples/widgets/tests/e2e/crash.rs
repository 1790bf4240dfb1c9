//! SIGKILL in the middle of a write, then a restart, on both stores: with a separate claim the
//! retry after the stale window creates exactly one row, and the claim the kill strands is what
//! `idemgen-records` lists and releases; in transaction nothing is stranded and the retry creates
//! one row at once.
//! SIGTERM in the middle of a write: the request is drained, then the process exits.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use sqlx::Connection;

use idemgen_runtime::testing::TestDb;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_write_then_retried_after_the_stale_window_creates_one_row() {
    killed_mid_write_with_a_claim("sqlx").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tokio_postgres_killed_mid_write_then_retried_after_the_stale_window_creates_one_row() {
    killed_mid_write_with_a_claim("tokio-postgres").await;
}

async fn killed_mid_write_with_a_claim(store: &str) {
    let db = fresh_db().await;
    let mut server = Server::start(
        &db,
        &[("WIDGETS_STALE_CLAIM", "2s"), ("WIDGETS_STORE", store)],
    )
    .await;

    strand(&db, &mut server, "crash-1").await;

    let server = server.restart(&[]).await;
    // Within the stale window the key is still held by the dead attempt.
    let early = create(&server.base, "tok1", "crash-1", json!({"name": "Phoenix"})).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{early:?}");
    assert_eq!(early.header("retry-after"), Some("1"));
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let late = create(&server.base, "tok1", "crash-1", json!({"name": "Phoenix"})).await;
    assert_eq!(late.status, StatusCode::CREATED, "{late:?}");
    let again = create(&server.base, "tok1", "crash-1", json!({"name": "Phoenix"})).await;
    assert!(again.replayed());
    assert_eq!(again.body, late.body);
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        1,
        "exactly one row"
    );
}

/// In transaction, SIGKILL while the business write waits on a table lock: no claim was
/// committed, so nothing is stranded. The dead process's transaction ends when its server
/// process reads the closed connection (once the lock is let go); until then the key's gate
/// answers 409, and the retry after the restart then creates exactly one row, without waiting
/// for any stale window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_transaction_killed_mid_write_strands_nothing_and_the_retry_creates_one_row() {
    killed_mid_write_in_transaction("sqlx").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tokio_postgres_in_transaction_killed_mid_write_strands_nothing_and_the_retry_creates_one_row()
 {
    killed_mid_write_in_transaction("tokio-postgres").await;
}

async fn killed_mid_write_in_transaction(store: &str) {
    let db = fresh_db().await;
    let env = [
        ("WIDGETS_STALE_CLAIM", "300s"),
        ("WIDGETS_STRATEGY", "in-transaction"),
        ("WIDGETS_STORE", store),
    ];
    let mut server = Server::start(&db, &env).await;
    let (mut locker, pending) = create_behind_a_table_lock(&db, &server, "crash-tx").await;
    let waiting = "SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock'
                      AND query LIKE 'INSERT INTO widgets%'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&db, waiting).await == 0 {
        assert!(
            Instant::now() < deadline,
            "the write never reached the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill9();
    assert!(pending.await.is_err(), "the request died with the server");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    assert_eq!(
        count(&db, "SELECT count(*) FROM idempotency_records").await,
        0,
        "nothing was committed, so nothing is stranded"
    );
    let server = server.restart(&[]).await;
    let started = Instant::now();
    let created = loop {
        let answer = create(&server.base, "tok1", "crash-tx", json!({"name": "Phoenix"})).await;
        if answer.status != StatusCode::CONFLICT {
            break answer;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the dead attempt's gate was never let go: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let again = create(&server.base, "tok1", "crash-tx", json!({"name": "Phoenix"})).await;
    assert!(again.replayed());
    assert_eq!(again.body, created.body);
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        1,
        "exactly one row"
    );
}

/// Starts `key`'s create with the business write blocked on a table lock (the claim commits,
/// the insert waits), waits for its claim, then kills the server with SIGKILL: the claim is stranded, held by a dead process.
async fn strand(db: &TestDb, server: &mut Server, key: &str) {
    let (mut locker, pending) = create_behind_a_table_lock(db, server, key).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let claimed = format!(
        "SELECT count(*) FROM idempotency_records WHERE idempotency_key = '{key}' AND state = 'claimed'"
    );
    while count(db, &claimed).await == 0 {
        assert!(Instant::now() < deadline, "the claim never appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The handler reaches the lock.
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.kill9();
    assert!(pending.await.is_err(), "the request died with the server");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
}

/// Starts a create of `key` while another session holds `widgets` locked, so its business write
/// waits; returns that session, inside its transaction (`ROLLBACK` lets go), and the request.
async fn create_behind_a_table_lock(
    db: &TestDb,
    server: &Server,
    key: &str,
) -> (sqlx::PgConnection, tokio::task::JoinHandle<Answer>) {
    let mut locker = db.connect().await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE widgets IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let base = server.base.clone();
    let key = key.to_owned();
    let pending =
        tokio::spawn(async move { create(&base, "tok1", &key, json!({"name": "Phoenix"})).await });
    (locker, pending)
}

/// The operator's view of a claim stranded by SIGKILL: while the dead process's lease runs the
/// holder counts as alive and `release` refuses; once it lapses the claim is listed and counted
/// as stranded and released; the key then executes once, and its record is what the service
/// replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_stranded_by_sigkill_is_listed_released_and_its_key_then_executes_once() {
    stranded_claim_listed_and_released("sqlx").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tokio_postgres_a_claim_stranded_by_sigkill_is_listed_released_and_its_key_then_executes_once()
 {
    stranded_claim_listed_and_released("tokio-postgres").await;
}

async fn stranded_claim_listed_and_released(store: &str) {
    let db = fresh_db().await;
    // The default stale window (5 min): only the lease's lapse (5 s) frees the key by itself.
    let mut server = Server::start(&db, &[("WIDGETS_STORE", store)]).await;
    strand(&db, &mut server, "stranded-1").await;
    let which = [
        "--owner",
        "alice",
        "--operation",
        "createWidget",
        "--key",
        "stranded-1",
    ];
    let shown = records_json(&db, &[&["show"][..], &which].concat()).await;
    assert_eq!(shown["state"], "claimed", "{shown}");
    let holder = shown["holder"]
        .as_str()
        .expect("the claim names its holder")
        .to_owned();
    // Renewed every second, the dead process's lease runs on for 4 s or more after the kill.
    assert_eq!(shown["lease_alive"], true, "{shown}");
    let (code, out) = records(&db, &[&["release"][..], &which, &["--yes"]].concat()).await;
    assert_eq!(code, 1, "a live lease's claim was released: {out}");
    assert!(out.contains("alive"), "{out}");
    // The lease lapses within `lease_expiry` of the last renewal.
    let deadline = Instant::now() + Duration::from_secs(15);
    while records_json(&db, &["stats"]).await["stranded_claims"] != 1 {
        assert!(
            Instant::now() < deadline,
            "the dead holder's lease never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let claims = records_json(&db, &["list", "--state", "claimed"]).await;
    let claims = claims.as_array().unwrap();
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0]["key"], "stranded-1");
    assert_eq!(claims[0]["holder"], holder.as_str());
    assert_eq!(claims[0]["lease_alive"], false);
    let (code, out) = records(&db, &[&["release"][..], &which, &["--yes"]].concat()).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("lease has expired"), "{out}");
    let (code, out) = records(&db, &[&["show"][..], &which].concat()).await;
    assert_eq!(code, 1, "the released claim is gone: {out}");

    let server = server.restart(&[]).await;
    let first = create(
        &server.base,
        "tok1",
        "stranded-1",
        json!({"name": "Phoenix"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert!(!first.replayed());
    let again = create(
        &server.base,
        "tok1",
        "stranded-1",
        json!({"name": "Phoenix"}),
    )
    .await;
    assert!(again.replayed());
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        1,
        "executed once"
    );
    // The record support finds by (owner, operation, key) is what the retry replayed.
    let record = records_json(&db, &[&["show", "--body"][..], &which].concat()).await;
    assert_eq!(record["state"], "completed");
    assert_eq!(record["response_status"], 201);
    let stored: serde_json::Value =
        serde_json::from_str(record["response_body"].as_str().unwrap()).unwrap();
    assert_eq!(stored, again.body);
    let location = record["response_headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "location")
        .map(|h| h[1].as_str().unwrap().to_owned());
    assert_eq!(location.as_deref(), again.header("location"));
    assert_eq!(records_json(&db, &["stats"]).await["stranded_claims"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_request_in_flight_before_exiting() {
    let db = fresh_db().await;
    let mut server = Server::start(&db, &[]).await;
    let mut locker = db.connect().await.unwrap();
    let mut lock_tx = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE widgets IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock_tx)
        .await
        .unwrap();
    let base = server.base.clone();
    let pending =
        tokio::spawn(
            async move { create(&base, "tok1", "drain-1", json!({"name": "Drained"})).await },
        );
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(
        &db,
        "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'drain-1'",
    )
    .await
        == 0
    {
        assert!(Instant::now() < deadline, "the claim never appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SIGTERM while the write waits on the lock; release the lock a little later.
    let terminated = tokio::task::spawn_blocking(move || server.terminate_and_wait());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !terminated.is_finished(),
        "the server waits for the request in flight"
    );
    lock_tx.rollback().await.unwrap();
    let exited_cleanly = terminated.await.unwrap();
    assert!(exited_cleanly, "the server exits 0 after draining");
    let answer = pending
        .await
        .expect("the in-flight request was answered, not cut");
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 1);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM idempotency_records WHERE state = 'completed'"
        )
        .await,
        1
    );
}

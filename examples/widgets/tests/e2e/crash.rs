//! SIGKILL in the middle of a write, then a restart: the retry after the stale window creates
//! exactly one row. SIGTERM in the middle of a write: the request is drained, then the process
//! exits.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use sqlx::Connection;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_write_then_retried_after_the_stale_window_creates_one_row() {
    let db = fresh_db().await;
    let mut server = Server::start(&db, &[("WIDGETS_STALE_CLAIM", "2s")]).await;

    // Block the business write: the claim commits, the insert waits on the table lock.
    let mut locker = db.connect().await.unwrap();
    let mut lock_tx = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE widgets IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock_tx)
        .await
        .unwrap();
    let base = server.base.clone();
    let pending =
        tokio::spawn(
            async move { create(&base, "tok1", "crash-1", json!({"name": "Phoenix"})).await },
        );
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&db, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'crash-1' AND state = 'claimed'").await == 0 {
        assert!(Instant::now() < deadline, "the claim never appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.kill9();
    assert!(
        pending.await.is_err(),
        "the client's request died with the server"
    );
    lock_tx.rollback().await.unwrap();

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

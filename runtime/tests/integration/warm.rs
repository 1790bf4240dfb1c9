//! The connections the PostgreSQL store keeps between its own statements (store/postgres/warm.rs): kept
//! after a statement completed, back in the pool within the window (the saturated window when
//! someone may be waiting on the pool), never kept after a statement cut in flight, and never in
//! the way of `Pool::close`.

use std::time::{Duration, Instant};

use idemgen_runtime::engine::{ClaimToken, Disposition};
use idemgen_runtime::{PgStore, Store};
use serde_json::json;
use sqlx::Connection as _;

use crate::support::*;

/// Waits up to `limit` for `ready`, checking every 10 ms; how long it took.
async fn within(limit: Duration, mut ready: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ready() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Waits until every connection of `pool` is idle in it (the set-up's included): up to 2 s.
async fn settled(pool: &sqlx::PgPool) {
    let all_idle = within(Duration::from_secs(2), || {
        pool.num_idle() == pool.size() as usize
    })
    .await;
    assert!(
        all_idle.is_some(),
        "the set-up's connections never went back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_kept_between_statements_and_back_in_the_pool_within_the_window() {
    let (_db, pool) = fresh_pg(4).await;
    let store = PgStore::new(pool.clone());
    settled(&pool).await;
    let size = pool.size();
    for n in 0..3 {
        let req = request(scope("alice", &format!("kept-{n}")), json!({}), 1);
        claim_fresh(&store, &req, ClaimToken::generate()).await;
    }
    // The claims went through one connection, still out of the pool: kept, not handed back
    // through sqlx's release test (which takes a round trip, long done after 30 ms).
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(pool.size(), size);
    assert_eq!(
        pool.num_idle(),
        size as usize - 1,
        "the connection went back to the pool"
    );
    // Unused, it goes back within the window (200 ms) and the sweeper's next round.
    let back = within(Duration::from_secs(2), || pool.num_idle() == size as usize).await;
    assert!(back.is_some(), "the kept connection never went back");
    assert!(back.unwrap() < Duration::from_millis(800), "{back:?}");
    // And the store takes it from the pool again.
    let req = request(scope("alice", "kept-again"), json!({}), 1);
    claim_fresh(&store, &req, ClaimToken::generate()).await;
    assert_eq!(pool.size(), size);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_at_its_maximum_gets_the_connection_back_within_the_saturated_window() {
    let (_db, pool) = fresh_pg(2).await;
    let store = PgStore::new(pool.clone());
    // One connection held elsewhere; the store's claim takes the other, the last one.
    let held = pool.acquire().await.unwrap();
    let req = request(scope("alice", "saturated"), json!({}), 1);
    claim_fresh(&store, &req, ClaimToken::generate()).await;
    // Someone waiting for a connection gets it within the saturated window (20 ms) and the
    // sweeper's round, long before the window of a pool with room (200 ms).
    let started = Instant::now();
    let waiter = tokio::time::timeout(Duration::from_millis(120), pool.acquire()).await;
    assert!(
        waiter.is_ok(),
        "the store kept the last connection from a waiter ({:?})",
        started.elapsed()
    );
    drop(held);
}

/// Under saturation the store still keeps its connection between back-to-back statements (for
/// the saturated window): far fewer trips through the pool's release than statements, about one
/// per saturated window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_still_spares_back_to_back_statements_the_release_test() {
    let (db, _pool) = fresh_pg(2).await;
    let releases = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = releases.clone();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_release(move |_, _| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(true) })
        })
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let store = PgStore::new(pool.clone());
    let held = pool.acquire().await.unwrap();
    // Warm up the store's statement on its connection, then count for 200 ms.
    let warm = request(scope("alice", "warm-up"), json!({}), 1);
    claim_fresh(&store, &warm, ClaimToken::generate()).await;
    let before = releases.load(std::sync::atomic::Ordering::SeqCst);
    let started = Instant::now();
    let mut claims = 0;
    while started.elapsed() < Duration::from_millis(200) {
        let req = request(scope("alice", &format!("busy-{claims}")), json!({}), 1);
        claim_fresh(&store, &req, ClaimToken::generate()).await;
        claims += 1;
    }
    let elapsed = started.elapsed();
    let released = releases.load(std::sync::atomic::Ordering::SeqCst) - before;
    // Without keeping, every claim's connection goes back through the release: as many as claims.
    let per_window = (elapsed.as_millis() / 20) as usize + 3;
    assert!(
        released < claims && released <= per_window,
        "{released} releases for {claims} back-to-back claims in {elapsed:?} on a saturated pool"
    );
    drop(held);
}

/// A connection kept while the pool had room goes back within the saturated window once the
/// pool fills up, not at the end of its 200 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_kept_before_the_pool_filled_up_goes_back_within_the_saturated_window() {
    let (_db, pool) = fresh_pg(3).await;
    let store = PgStore::new(pool.clone());
    settled(&pool).await;
    let req = request(scope("alice", "before-full"), json!({}), 1);
    claim_fresh(&store, &req, ClaimToken::generate()).await;
    // Kept with its 200 ms window; a waiter must get it well before that, counted from here.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(150);
    // The pool fills up behind the kept connection.
    let mut held = Vec::new();
    while pool.size() < 3 || pool.num_idle() > 0 {
        held.push(pool.acquire().await.unwrap());
        assert!(held.len() <= 3, "the store's connection was not kept");
    }
    let waiter = tokio::time::timeout_at(deadline, pool.acquire()).await;
    assert!(
        waiter.is_ok(),
        "a connection kept before the pool filled up stayed kept past 150 ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cut_in_flight_leaves_its_connection_to_sqlx() {
    let (db, pool) = fresh_pg(4).await;
    let store = PgStore::new(pool.clone());
    let req = request(scope("alice", "cut"), json!({}), 1);
    let token = ClaimToken::generate();
    claim_fresh(&store, &req, token).await;
    // Another session holds the record's row lock: the release waits for it (up to 5 s).
    let mut held = hold_record_lock(&db, &req.scope).await;
    // Cut well inside the window (200 ms), where a finished statement's connection is kept.
    let cut =
        tokio::time::timeout(Duration::from_millis(50), store.release(&req.scope, token)).await;
    assert!(
        cut.is_err(),
        "the release did not wait for the lock: {cut:?}"
    );
    // The lock is still held. Had the cut connection been kept, the next statement would first
    // wait for the release's answer, behind the lock; it runs on another connection at once.
    let started = Instant::now();
    let other = request(scope("alice", "after-cut"), json!({}), 1);
    tokio::time::timeout(
        Duration::from_secs(2),
        claim_fresh(&store, &other, ClaimToken::generate()),
    )
    .await
    .expect("the next statement waited behind the cut one");
    assert!(started.elapsed() < Duration::from_secs(2));
    let (state, _) = pg_record(&pool, &other.scope).await.expect("claimed");
    assert_eq!(state, "claimed");
    // Once the lock goes, the store's statements still get their own answers.
    sqlx::raw_sql("ROLLBACK").execute(&mut held).await.unwrap();
    store
        .release(&other.scope, ClaimToken::generate())
        .await
        .unwrap();
    assert!(
        pg_record(&pool, &other.scope).await.is_some(),
        "another token's release deleted it"
    );
    store.release(&req.scope, token).await.unwrap();
    assert_eq!(pg_record(&pool, &req.scope).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_pool_does_not_wait_for_the_store() {
    let (_db, pool) = fresh_pg(4).await;
    let store = PgStore::new(pool.clone());
    settled(&pool).await;
    let req = request(scope("alice", "closing"), json!({}), 1);
    claim_fresh(&store, &req, ClaimToken::generate()).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        pool.num_idle(),
        pool.size() as usize - 1,
        "nothing was kept"
    );
    // The store (and the connection it keeps) is alive while the pool closes: the connection is
    // handed back as the pool closes, not when the window ends (200 ms).
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), pool.close())
        .await
        .expect("closing the pool waited for the store's kept connection");
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(pool.size(), 0);
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_pool_of_one_keeps_its_connection_and_still_serves_a_waiting_claim() {
    let (db, pool) = fresh_pg(4).await;
    let claims = db.pool(1).await.unwrap();
    let store = PgStore::new(pool.clone()).with_claim_pool(claims.clone());
    let first = request(scope("alice", "one-0"), json!({}), 1);
    claim_fresh(&store, &first, ClaimToken::generate()).await;
    // The claim pool's one connection is kept, though the pool is at its maximum: only the
    // store's statements use it, and they take the kept one before waiting for the pool.
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!((claims.size(), claims.num_idle()), (1, 0));
    // Two claims at once: one takes the kept connection, the other waits for the pool, and
    // gets the connection when the first is done, not when the window ends.
    let (a, b) = (
        request(scope("alice", "one-a"), json!({}), 1),
        request(scope("alice", "one-b"), json!({}), 1),
    );
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), async {
        tokio::join!(
            claim_fresh(&store, &a, ClaimToken::generate()),
            claim_fresh(&store, &b, ClaimToken::generate()),
        )
    })
    .await
    .expect("a claim waited for the pool without end");
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    for req in [&a, &b] {
        assert_eq!(pg_record(&pool, &req.scope).await.unwrap().0, "claimed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_keeps_its_connection_and_a_dropped_one_rolls_back_at_once() {
    let (db, pool) = fresh_pg(4).await;
    let store = PgStore::new(pool.clone());
    settled(&pool).await;
    let size = pool.size();
    let mut tx = store.begin().await.unwrap();
    sqlx::query("INSERT INTO business_writes (label) VALUES ('kept')")
        .execute(tx.conn())
        .await
        .unwrap();
    store.commit(tx).await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(pool.size(), size);
    assert_eq!(
        pool.num_idle(),
        size as usize - 1,
        "the committed connection was not kept"
    );

    // Dropped while open, a transaction's ROLLBACK is only queued: its connection must go through
    // sqlx's release test, which sends it, not wait in the store for its next statement.
    let mut tx = store.begin().await.unwrap();
    sqlx::query("SELECT id FROM business_writes WHERE label = 'kept' FOR UPDATE")
        .execute(tx.conn())
        .await
        .unwrap();
    drop(tx);
    let mut other = db.connect().await.unwrap();
    let mut unlocked = false;
    let started = Instant::now();
    while !unlocked && started.elapsed() < Duration::from_millis(150) {
        let mut check = other.begin().await.unwrap();
        unlocked =
            sqlx::query("SELECT id FROM business_writes WHERE label = 'kept' FOR UPDATE NOWAIT")
                .execute(&mut *check)
                .await
                .is_ok();
        check.rollback().await.ok();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        unlocked,
        "the dropped transaction still held its row lock after 150 ms"
    );
}

/// The state `pg_stat_activity` shows for the backend `pid` (`idle`, `idle in transaction`, …).
async fn backend_state(pool: &sqlx::PgPool, pid: i32) -> Option<String> {
    sqlx::query_scalar("SELECT state FROM pg_stat_activity WHERE pid = $1")
        .bind(pid)
        .fetch_optional(pool)
        .await
        .unwrap()
        .flatten()
}

/// The in-transaction gate's other outcomes end their transaction with a `ROLLBACK` of their
/// own and keep the connection: busy (another attempt holds the key) and a record found (read in
/// the rollback's round trip). Each time the one connection of the store's pool is left idle
/// outside any transaction, and is still the same connection, not closed as in doubt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_s_rollbacks_leave_their_connection_clean_and_kept() {
    let (db, pool) = fresh_pg(8).await;
    let single = db.pool(1).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&single)
        .await
        .unwrap();
    let gated = idemgen_runtime::Executor::new(
        PgStore::new(single.clone()),
        idemgen_runtime::ExecutorConfig {
            in_flight_wait: Duration::from_millis(200),
            ..config(idemgen_runtime::Strategy::InTransaction)
        },
    );
    let holder = idemgen_runtime::Executor::new(
        PgStore::new(pool.clone()),
        config(idemgen_runtime::Strategy::InTransaction),
    );
    let req = request(scope("alice", "gate-paths"), json!({}), 1);
    // Another attempt holds the key's gate inside its transaction for a second.
    let first = {
        let (holder, req) = (holder.clone(), req.clone());
        tokio::spawn(async move {
            holder
                .execute(
                    req,
                    pg_slow_id_writer("held".into(), Duration::from_millis(1000)),
                )
                .await
        })
    };
    let started = Instant::now();
    loop {
        let locks: i64 = sqlx::query_scalar(ADVISORY_LOCKS_HERE)
            .fetch_one(&pool)
            .await
            .unwrap();
        if locks > 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Busy, round after round, then 409.
    let busy = gated
        .execute(
            req.clone(),
            pg_slow_id_writer("never".into(), Duration::ZERO),
        )
        .await;
    assert_eq!(problem_status(&busy), Some(409), "{busy:?}");
    assert_eq!(backend_state(&pool, pid).await.as_deref(), Some("idle"));
    // The record found by the gate (this store has not seen the key), read as it rolls back.
    let won = first.await.unwrap().unwrap();
    let replayed = gated
        .execute(req, pg_slow_id_writer("never".into(), Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(replayed.disposition, Disposition::Replayed);
    assert_eq!(replayed.response, won.response);
    assert_eq!(backend_state(&pool, pid).await.as_deref(), Some("idle"));
    assert_eq!(pg_write_ids(&pool, "never").await, Vec::<i64>::new());
    // Still the same connection, and it commits the next attempt outside any transaction left.
    let next = request(scope("alice", "after-gate"), json!({}), 1);
    let done = gated
        .execute(next, pg_slow_id_writer("next".into(), Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(done.disposition, Disposition::Executed);
    assert_eq!(pg_write_ids(&pool, "next").await.len(), 1);
    let now: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&single)
        .await
        .unwrap();
    assert_eq!(now, pid, "the connection was closed instead of kept");
}

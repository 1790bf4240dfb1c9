//! Cancellation safety of the store's transactions (ARCHITECTURE.md, "Cancellation safety"): a
//! `BEGIN`, gated `BEGIN`, `COMMIT` or `ROLLBACK` whose future is dropped after it was sent (a
//! client that disconnected) never hands the pool a connection whose server-side transaction
//! state differs from what sqlx believes. Without the guard in `PgTx`, a cancelled `BEGIN` left
//! the server inside a transaction sqlx did not count: the next request's autocommit statements
//! ran inside it, invisible to everyone else, and a cancelled gated `BEGIN` kept the key's
//! advisory lock.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{ClaimToken, Gate};
use idemgen_runtime::{PgStore, Store, TokioPgStore, TxHandle};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, PgPool};

use crate::support::*;

/// Polls `fut` once (its statement is written and flushed, its answer not yet read) and drops it.
/// Returns its output when it finished in that one poll.
async fn poll_once_then_drop<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        Poll::Ready(match fut.as_mut().poll(cx) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        })
    })
    .await
}

/// Waits until every connection of `pool` is back (idle or closed): the pool's return task has
/// flushed what the dropped future left behind.
async fn settled(pool: &PgPool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pool.size() != pool.num_idle() as u32 {
        assert!(Instant::now() < deadline, "a connection never came back");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Makes sure `pool` holds an idle connection (a cancelled statement may have closed the last).
async fn warm(pool: &PgPool) {
    drop(pool.acquire().await.unwrap());
    settled(pool).await;
}

/// Backends of this database, other than `observer`'s, idle inside a transaction, once closed
/// connections had up to five seconds to end (a closed backend ends its transaction as it exits; one the
/// pool kept would stay).
async fn idle_in_transaction(observer: &mut PgConnection) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()
                AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(&mut *observer)
        .await
        .unwrap();
        if n == 0 || Instant::now() >= deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An autocommit insert through `pool` must be visible at once to another connection: it did not
/// run inside a transaction left open by a cancelled request.
async fn autocommit_is_visible(pool: &PgPool, observer: &mut PgConnection, n: i32) {
    sqlx::query("INSERT INTO cancel_probe (n) VALUES ($1)")
        .bind(n)
        .execute(pool)
        .await
        .unwrap();
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM cancel_probe WHERE n = $1")
        .bind(n)
        .fetch_one(&mut *observer)
        .await
        .unwrap();
    assert_eq!(
        seen, 1,
        "row {n}: an autocommit insert ran inside a transaction a cancelled request left open"
    );
}

async fn one_connection_store() -> (PgPool, Arc<PgStore>, PgConnection) {
    let (db, _) = fresh_pg(2).await;
    // One connection: every request reuses the connection the cancelled one had. Without the
    // ping before each checkout, an idle connection is handed out within the first poll, so that
    // poll reaches the `BEGIN`.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect(&db.url)
        .await
        .unwrap();
    let mut observer = db.connect().await.unwrap();
    sqlx::query("CREATE TABLE cancel_probe (n int NOT NULL)")
        .execute(&mut observer)
        .await
        .unwrap();
    let store = Arc::new(PgStore::new(pool.clone()));
    (pool, store, observer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_begin_leaves_no_transaction_for_the_next_request() {
    let (pool, store, mut observer) = one_connection_store().await;
    let mut cancelled = 0;
    // At least 80 rounds, and more (up to 400) until 10 BEGINs were cut in flight: how many a
    // single poll cuts depends on the machine's load.
    let mut rounds = 0;
    while rounds < 80 || (cancelled < 10 && rounds < 400) {
        let n = rounds;
        rounds += 1;
        warm(&pool).await;
        match poll_once_then_drop(TxHandle::begin(Arc::clone(&store))).await {
            None => cancelled += 1,
            Some(begun) => drop(begun.unwrap()),
        }
        settled(&pool).await;
        assert_eq!(idle_in_transaction(&mut observer).await, 0, "round {n}");
        autocommit_is_visible(&pool, &mut observer, n).await;
    }
    eprintln!("{cancelled} of {rounds} BEGINs cut in flight");
    // The server sometimes answers within the one poll; most BEGINs are cut in flight.
    assert!(
        cancelled >= 10,
        "only {cancelled} BEGINs were cut in flight"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_commit_or_rollback_leaves_the_connection_idle_and_the_commit_lands_or_not_atomically()
 {
    let (pool, store, mut observer) = one_connection_store().await;
    for n in 0..40 {
        let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
        for part in [0, 1] {
            sqlx::query("INSERT INTO cancel_probe (n) VALUES ($1)")
                .bind(10_000 + n * 2 + part)
                .execute(tx.conn().await.unwrap())
                .await
                .unwrap();
        }
        if n % 2 == 0 {
            poll_once_then_drop(tx.commit()).await;
        } else {
            poll_once_then_drop(tx.rollback()).await;
        }
        settled(&pool).await;
        assert_eq!(idle_in_transaction(&mut observer).await, 0, "round {n}");
        // Both rows of the transaction or neither: a COMMIT sent lands whole (as with a lost
        // acknowledgement), a ROLLBACK sent leaves nothing.
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM cancel_probe WHERE n IN ($1, $2)")
            .bind(10_000 + n * 2)
            .bind(10_000 + n * 2 + 1)
            .fetch_one(&mut observer)
            .await
            .unwrap();
        let expected = if n % 2 == 0 { 2 } else { 0 };
        // The connection close that ends a cancelled COMMIT may be processed a moment later.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut rows = rows;
        while rows != expected && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            rows = sqlx::query_scalar("SELECT count(*) FROM cancel_probe WHERE n IN ($1, $2)")
                .bind(10_000 + n * 2)
                .bind(10_000 + n * 2 + 1)
                .fetch_one(&mut observer)
                .await
                .unwrap();
        }
        assert_eq!(rows, expected, "round {n}");
        autocommit_is_visible(&pool, &mut observer, n).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_gated_begin_frees_the_keys_gate() {
    let (pool, store, mut observer) = one_connection_store().await;
    let req = request(scope("alice", "gate-cancel"), json!({"n": 1}), 1);
    let claim = |token| claim_of(&req, token);
    for n in 0..30 {
        warm(&pool).await;
        let first = claim(ClaimToken::generate());
        if let Some(gate) = poll_once_then_drop(store.begin_gated(&first)).await {
            drop(gate.unwrap());
        }
        settled(&pool).await;
        // A closed connection's backend releases the lock as it exits; one the pool kept would
        // hold it for good.
        let deadline = Instant::now() + Duration::from_secs(5);
        let locks = loop {
            let locks: i64 = sqlx::query_scalar(ADVISORY_LOCKS_HERE)
                .fetch_one(&mut observer)
                .await
                .unwrap();
            if locks == 0 || Instant::now() >= deadline {
                break locks;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(locks, 0, "round {n}: a cancelled gate still holds the key");
        assert_eq!(idle_in_transaction(&mut observer).await, 0, "round {n}");
        // The key's gate opens for the next attempt.
        let next = claim(ClaimToken::generate());
        match store.begin_gated(&next).await.unwrap() {
            Gate::Open(tx) => store.rollback(tx).await.unwrap(),
            Gate::Busy => panic!("round {n}: the gate is busy"),
            Gate::Existing(_) => panic!("round {n}: a record appeared"),
        }
        autocommit_is_visible(&pool, &mut observer, 20_000 + n).await;
    }
}

/// The tokio-postgres store: a `BEGIN`, gated `BEGIN`, claim sent with its `BEGIN` or completion
/// (sent with its `COMMIT`) whose future is dropped after its first poll closes its connection
/// instead of pooling it. No
/// backend is left inside a transaction, the key's gate opens for the next attempt, the next
/// request's statements run outside anyone's transaction, and a completion cancelled with its
/// `COMMIT` queued committed the attempt's write and record together or neither; one left alone
/// after its first poll commits both (the first poll queued the completion with its `COMMIT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_cancelled_begins_and_completions_leave_no_transaction_open() {
    let (db, pool) = fresh_pg(2).await;
    let mut observer = db.connect().await.unwrap();
    sqlx::query("CREATE TABLE cancel_probe (n int NOT NULL)")
        .execute(&mut observer)
        .await
        .unwrap();
    let store = TokioPgStore::new(TokioPgStore::pool(&db.url, 1).unwrap());
    let begun = store.clone().with_begin_at_claim(true);
    let response = idemgen_runtime::engine::StoredResponse {
        status: 201,
        headers: vec![],
        body: b"made".to_vec(),
    };
    let (mut committed, mut rolled_back) = (0, 0);
    for n in 0..20 {
        let req = request(
            scope("alice", &format!("tokio-cancel-{n}")),
            json!({"n": n}),
            1,
        );
        // A gated BEGIN and a plain BEGIN, each cancelled after its first poll.
        if let Some(gate) =
            poll_once_then_drop(store.begin_gated(&claim_of(&req, ClaimToken::generate()))).await
        {
            drop(gate.unwrap());
        }
        if let Some(tx) = poll_once_then_drop(store.begin()).await {
            drop(tx.unwrap());
        }
        // A claim sent with its BEGIN (`with_begin_at_claim`), cancelled after its first poll,
        // once one before it prepared the claim on this connection: both went out together.
        let warm_begun = request(
            scope("dave", &format!("tokio-warm-begun-{n}")),
            json!({}),
            1,
        );
        match begun
            .claim_and_begin(&claim_of(&warm_begun, ClaimToken::generate()))
            .await
            .unwrap()
        {
            (idemgen_runtime::engine::ClaimOutcome::Claimed { .. }, Some(tx)) => {
                begun.rollback(tx).await.unwrap()
            }
            other => panic!("round {n}: the claim did not begin the transaction: {other:?}"),
        }
        let cancelled = request(scope("dave", &format!("tokio-begun-{n}")), json!({}), 1);
        if let Some(claimed) = poll_once_then_drop(
            begun.claim_and_begin(&claim_of(&cancelled, ClaimToken::generate())),
        )
        .await
        {
            drop(claimed.unwrap());
        }
        // A completion on this connection first, so that the cancelled one's statement is
        // prepared and its first poll sends it with its COMMIT.
        let warm_req = request(
            scope("carol", &format!("tokio-warm-{n}")),
            json!({"n": n}),
            1,
        );
        let warm_token = ClaimToken::generate();
        store.claim(&claim_of(&warm_req, warm_token)).await.unwrap();
        let mut warm_tx = store.begin().await.unwrap();
        assert!(
            store
                .complete(&mut warm_tx, &warm_req.scope, warm_token, &response, None)
                .await
                .unwrap()
        );
        store.commit(warm_tx).await.unwrap();
        // A completion cancelled with its COMMIT sent: the claim, the write, then the drop.
        let token = ClaimToken::generate();
        let claim = claim_of(&req, token);
        assert!(matches!(
            store.claim(&claim).await.unwrap(),
            idemgen_runtime::engine::ClaimOutcome::Claimed { .. }
        ));
        let mut tx = store.begin().await.unwrap();
        let label = format!("tokio-cancel-{n}");
        tx.client()
            .execute("INSERT INTO business_writes (label) VALUES ($1)", &[&label])
            .await
            .unwrap();
        // Even rounds drop the completion at once, racing its connection's task (aborted with
        // the connection) for the write of what the first poll queued. Odd rounds wait, without
        // polling the completion again, for the record to complete: the first poll queued the
        // completion and its COMMIT together, and the connection's task sent both.
        let settle = n % 2 == 1;
        {
            let mut done =
                std::pin::pin!(store.complete(&mut tx, &req.scope, token, &response, None));
            match std::future::poll_fn(|cx| Poll::Ready(done.as_mut().poll(cx))).await {
                Poll::Ready(out) => assert!(out.unwrap(), "round {n}: the completion completed"),
                Poll::Pending if settle => {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while pg_record(&pool, &req.scope).await.map(|r| r.0).as_deref()
                        != Some("completed")
                    {
                        assert!(
                            Instant::now() < deadline,
                            "round {n}: the first poll's COMMIT never committed"
                        );
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
                Poll::Pending => {}
            }
        }
        drop(tx);
        let deadline = Instant::now() + Duration::from_secs(5);
        let locks = loop {
            let locks: i64 = sqlx::query_scalar(ADVISORY_LOCKS_HERE)
                .fetch_one(&mut observer)
                .await
                .unwrap();
            if locks == 0 || Instant::now() >= deadline {
                break locks;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(locks, 0, "round {n}: a cancelled gate still holds the key");
        assert_eq!(idle_in_transaction(&mut observer).await, 0, "round {n}");
        // Write and record together, or neither.
        let writes = pg_write_ids(&pool, &label).await.len();
        let (state, _) = pg_record(&pool, &req.scope)
            .await
            .expect("the claim's record");
        match (state.as_str(), writes) {
            ("completed", 1) => committed += 1,
            ("claimed", 0) if !settle => rolled_back += 1,
            other => panic!("round {n}: record and write disagree: {other:?}"),
        }
        // The next request: a gate that opens, and an autocommit write everyone sees.
        let next = request(scope("bob", &format!("tokio-next-{n}")), json!({"n": n}), 1);
        match store
            .begin_gated(&claim_of(&next, ClaimToken::generate()))
            .await
            .unwrap()
        {
            Gate::Open(tx) => store.rollback(tx).await.unwrap(),
            other => panic!("round {n}: the gate did not open: {other:?}"),
        }
        let probe = store.begin().await.unwrap();
        probe
            .client()
            .execute("INSERT INTO cancel_probe (n) VALUES ($1)", &[&(30_000 + n)])
            .await
            .unwrap();
        store.commit(probe).await.unwrap();
        let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM cancel_probe WHERE n = $1")
            .bind(30_000 + n)
            .fetch_one(&mut observer)
            .await
            .unwrap();
        assert_eq!(seen, 1, "round {n}: a committed write is not visible");
    }
    eprintln!("cancelled completions: {committed} committed, {rolled_back} rolled back");
    // Every settled round committed; the others went either way, each atomically.
    assert!(committed >= 10, "{committed} committed");
}

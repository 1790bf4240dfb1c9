//! The SQLite store beyond the contract suite: the model's store assumptions checked against
//! SQLite's locking, storms with real concurrency, cancellation safety, problem answers for a file
//! that cannot be written or is locked too long, processes killed with SIGKILL in the middle of a
//! write transaction, and several processes on one file. No PostgreSQL: every test here runs on a
//! file in a temporary directory.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{
    ClaimOutcome, ClaimToken, Disposition, ExecuteError, Gate, IdempotentRequest, RecordState,
    StoredResponse,
};
use idemgen_runtime::{
    Executor, ExecutorConfig, ProblemKind, SqlitePool, SqliteStore, Store, Strategy, TxHandle,
};
use serde_json::json;
use sqlx::pool::PoolOptions;

use crate::support::*;

fn stored(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    }
}

/// A second store on the same file, with its own pool and its own in-process gates: what another
/// process sharing the file sees.
async fn other_process(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("idemgen.db"))
        .await
        .expect("a second store on the file")
}

/// The state and stored body of the record of `req`, read directly.
async fn record_of(
    pool: &SqlitePool,
    req: &IdempotentRequest,
) -> Option<(String, Option<Vec<u8>>)> {
    sqlx::query_as(
        "SELECT state, response_body FROM idempotency_records
          WHERE owner = ?1 AND operation = ?2 AND resource_scope = ?3 AND idempotency_key = ?4",
    )
    .bind(&req.scope.owner)
    .bind(&req.scope.operation)
    .bind(&req.scope.resource_scope)
    .bind(req.scope.key.as_str())
    .fetch_optional(pool)
    .await
    .expect("reading a record")
}

// ---------------------------------------------------------------------------------------------
// The model's assumptions (model.rs), on SQLite's locking.
// ---------------------------------------------------------------------------------------------

/// model.rs assumes an in-doubt completion's transaction holds off every other write of the
/// record until it ends, and that the write then re-checks its guard on the record as the
/// transaction left it. On SQLite the completion holds the file's write lock: the token-guarded
/// release waits for it (inside `busy_timeout`); committed, the release deletes nothing; rolled
/// back, it deletes the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_release_waits_for_the_open_completion_and_rechecks_the_record() {
    let (store, _dir) = fresh_sqlite().await;
    let store = Arc::new(store);
    for commit in [true, false] {
        let req = request(scope("alice", &format!("ordered-{commit}")), json!({}), 1);
        let token = ClaimToken::generate();
        let claimed = store.claim(&claim_of(&req, token)).await.unwrap();
        assert!(matches!(
            claimed,
            ClaimOutcome::Claimed { taken_over: false }
        ));
        let mut tx = store.begin().await.unwrap();
        assert!(
            store
                .complete(&mut tx, &req.scope, token, &stored("done"), None)
                .await
                .unwrap()
        );
        let release = tokio::spawn({
            let store = Arc::clone(&store);
            let scope = req.scope.clone();
            async move { store.release(&scope, token).await }
        });
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            !release.is_finished(),
            "the release went ahead of the open completion"
        );
        if commit {
            store.commit(tx).await.unwrap();
        } else {
            store.rollback(tx).await.unwrap();
        }
        release.await.unwrap().unwrap();
        let record = record_of(store.pool(), &req).await;
        if commit {
            let (state, body) = record.expect("the completed record");
            assert_eq!(
                state, "completed",
                "the release deleted a committed completion"
            );
            assert_eq!(body, Some(b"done".to_vec()));
        } else {
            assert_eq!(record, None, "rolled back: the release freed the key");
        }
    }
}

/// model.rs's in-transaction attempts hold the key's gate: two attempts of one process never both
/// open a transaction for a key. The second is answered `Busy` at once (it takes no connection and
/// does not wait for the write lock), and opens once the first ended without a record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_gated_key_is_busy_for_the_same_process_at_once() {
    let (store, _dir) = fresh_sqlite().await;
    let req = request(scope("alice", "gated"), json!({}), 1);
    let first = match store
        .begin_gated(&claim_of(&req, ClaimToken::generate()))
        .await
    {
        Ok(Gate::Open(tx)) => tx,
        other => panic!("expected an open gate, got {other:?}"),
    };
    let asked = Instant::now();
    let second = store
        .begin_gated(&claim_of(&req, ClaimToken::generate()))
        .await;
    assert!(matches!(second, Ok(Gate::Busy)), "{second:?}");
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "Busy waited {:?} (for the write lock?)",
        asked.elapsed()
    );
    // Another key is not gated by this one: it waits for the write lock, then opens.
    let other = request(scope("alice", "gated-other"), json!({}), 1);
    let other_gate = tokio::spawn({
        let store = store.clone();
        async move {
            let claim = claim_of(&other, ClaimToken::generate());
            matches!(store.begin_gated(&claim).await, Ok(Gate::Open(_)))
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !other_gate.is_finished(),
        "the write lock is the first one's"
    );
    store.rollback(first).await.unwrap();
    assert!(other_gate.await.unwrap(), "the other key opened after");
    let again = store
        .begin_gated(&claim_of(&req, ClaimToken::generate()))
        .await;
    assert!(matches!(again, Ok(Gate::Open(_))), "{again:?}");
}

/// Across processes (two stores on one file, each with its own gates) the write lock is the gate:
/// the second process's gated `BEGIN IMMEDIATE` waits for the first's transaction, then finds its
/// committed record; a separate claim of the key waits too and cannot slip in between the gate's
/// look and the completed insert (so the primary key never has to turn a completed insert away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_processes_are_ordered_by_the_write_lock() {
    let (store, dir) = fresh_sqlite().await;
    let other = other_process(&dir).await;
    let req = request(scope("alice", "two-processes"), json!({}), 1);
    let token = ClaimToken::generate();
    let mut tx = match store.begin_gated(&claim_of(&req, token)).await {
        Ok(Gate::Open(tx)) => tx,
        other => panic!("expected an open gate, got {other:?}"),
    };
    let gated = tokio::spawn({
        let (other, req) = (other.clone(), req.clone());
        async move {
            other
                .begin_gated(&claim_of(&req, ClaimToken::generate()))
                .await
        }
    });
    let claimed = tokio::spawn({
        let (other, req) = (other.clone(), req.clone());
        async move { other.claim(&claim_of(&req, ClaimToken::generate())).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !gated.is_finished(),
        "the other process's gate went ahead of the write lock"
    );
    assert!(
        !claimed.is_finished(),
        "the other process's claim slipped in"
    );
    assert!(
        store
            .insert_completed(&mut tx, &claim_of(&req, token), &stored("first"), None)
            .await
            .unwrap(),
        "the gated insert is the only record"
    );
    store.commit(tx).await.unwrap();
    match gated.await.unwrap() {
        Ok(Gate::Existing(Some(record))) => {
            assert_eq!(record.state, RecordState::Completed);
            assert_eq!(record.claim_token, Some(token));
        }
        other => panic!("expected the committed record, got {other:?}"),
    }
    match claimed.await.unwrap() {
        Ok(ClaimOutcome::Existing(record)) => assert_eq!(record.state, RecordState::Completed),
        other => panic!("expected the committed record, got {other:?}"),
    }
}

/// model.rs's takeover: a holder stalled *before* its first write holds no write lock, so its
/// stale claim is taken over; the holder then writes, its completion fails on the token and its
/// write rolls back, and it answers with the taker's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_stale_claim_holding_no_write_lock_is_taken_over() {
    let mut cfg = config(Strategy::SeparateClaim);
    cfg.stale_claim = Duration::from_millis(200);
    cfg.in_flight_wait = Duration::from_millis(50);
    let env = sqlite_env(cfg).await;
    let Ledger::Sqlite(pool, _) = &env.ledger else {
        unreachable!()
    };
    let req = request(scope("alice", "stalled"), json!({}), 1);
    let slow = tokio::spawn({
        let (exec, req) = (env.exec.clone(), req.clone());
        async move {
            exec.execute(req, |tx: &mut TxHandle<SqliteStore>| {
                Box::pin(async move {
                    // A slow downstream call before the first write: no lock held.
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    sqlite_slow_id_writer("slow".into(), Duration::ZERO)(tx).await
                })
            })
            .await
        }
    });
    // Under load the slow attempt may take a while to claim: wait for its claim, then past
    // `stale_claim` (its handler sleeps 700 ms after claiming).
    let deadline = Instant::now() + Duration::from_secs(30);
    while record_of(pool, &req).await.is_none() {
        assert!(Instant::now() < deadline, "the slow attempt never claimed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(350)).await;
    let fast = env
        .exec
        .execute(
            req.clone(),
            sqlite_slow_id_writer("fast".into(), Duration::ZERO),
        )
        .await
        .unwrap();
    assert_eq!(fast.disposition, Disposition::TakenOver);
    let slow = slow.await.unwrap().unwrap();
    assert_eq!(slow.disposition, Disposition::Replayed);
    assert_eq!(slow.response.body, fast.response.body);
    assert!(
        sqlite_write_ids(pool, "slow").await.is_empty(),
        "the stalled write rolled back"
    );
    assert_eq!(sqlite_write_ids(pool, "fast").await.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Storms: real concurrency, one write per key.
// ---------------------------------------------------------------------------------------------

/// `keys` keys, `per_key` simultaneous attempts of each (the same request), spread over `stores`
/// (stores on one file: one per process). Returns the writes per key.
async fn storm(strategy: Strategy, keys: usize, per_key: usize, processes: usize) -> Vec<usize> {
    let (first, dir) = fresh_sqlite().await;
    let mut stores = vec![first];
    for _ in 1..processes {
        stores.push(other_process(&dir).await);
    }
    let pool = stores[0].pool().clone();
    let execs: Vec<_> = stores
        .into_iter()
        .map(|store| {
            let mut cfg = config(strategy);
            cfg.in_flight_wait = Duration::from_secs(3);
            Executor::new(store, cfg)
        })
        .collect();
    let barrier = Arc::new(tokio::sync::Barrier::new(keys * per_key));
    let mut tasks = Vec::new();
    for k in 0..keys {
        for i in 0..per_key {
            let exec = execs[(k + i) % execs.len()].clone();
            let barrier = barrier.clone();
            let req = request(scope("alice", &format!("storm-{k}")), json!({"k": k}), 1);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let writer = sqlite_slow_id_writer(format!("storm-{k}"), Duration::from_millis(2));
                (k, exec.execute(req, writer).await)
            }));
        }
    }
    let mut bodies: Vec<HashSet<String>> = vec![HashSet::new(); keys];
    let mut executed = vec![0; keys];
    for t in tasks {
        let (k, result) = t.await.unwrap();
        match result {
            Ok(o) => {
                match o.disposition {
                    Disposition::Executed => executed[k] += 1,
                    Disposition::Replayed => {}
                    other => panic!("key {k}: unexpected {other:?}"),
                }
                bodies[k].insert(o.response.body);
            }
            // 409: another attempt holds the key. 503: the write lock was not had within
            // `busy_timeout` on loaded cores, a legitimate answer that executed nothing.
            other => assert!(
                matches!(problem_status(&other), Some(409 | 503)),
                "key {k}: {other:?}"
            ),
        }
    }
    // Every key converges: a retry until it succeeds replays the one write (or executes it, when
    // every attempt of the storm answered 503).
    for k in 0..keys {
        let (done, was_executed) = converge(&execs[k % execs.len()], || {
            let req = request(scope("alice", &format!("storm-{k}")), json!({"k": k}), 1);
            (req, format!("storm-{k}"))
        })
        .await;
        executed[k] += usize::from(was_executed);
        bodies[k].insert(done);
    }
    let mut writes = Vec::new();
    for k in 0..keys {
        let ids = sqlite_write_ids(&pool, &format!("storm-{k}")).await;
        assert_eq!(ids.len(), 1, "key {k}: {} committed writes", ids.len());
        assert_eq!(executed[k], 1, "key {k}: executed {} times", executed[k]);
        assert_eq!(
            bodies[k].iter().collect::<Vec<_>>(),
            [&format!("write {}", ids[0])],
            "key {k}: every success is the committed write"
        );
        writes.push(ids.len());
    }
    writes
}

/// Retries the request `make` builds until it succeeds, answering 409 (held) or 503 (lock wait
/// timed out) meanwhile: its body, and whether it executed.
async fn converge(
    exec: &Executor<SqliteStore>,
    make: impl Fn() -> (IdempotentRequest, String),
) -> (String, bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (req, label) = make();
        let result = exec
            .execute(req, sqlite_slow_id_writer(label, Duration::ZERO))
            .await;
        match result {
            Ok(o) => match o.disposition {
                Disposition::Executed => return (o.response.body, true),
                Disposition::Replayed => return (o.response.body, false),
                other => panic!("a retry: unexpected {other:?}"),
            },
            other => {
                assert!(
                    matches!(problem_status(&other), Some(409 | 503)),
                    "a retry: {other:?}"
                );
                assert!(Instant::now() < deadline, "no convergence: {other:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_storm_sixty_four_attempts_one_key_separate_claim() {
    assert_eq!(storm(Strategy::SeparateClaim, 1, 64, 1).await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_storm_sixty_four_attempts_one_key_in_transaction() {
    assert_eq!(storm(Strategy::InTransaction, 1, 64, 1).await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_storm_many_keys_two_stores_on_one_file_separate_claim() {
    let writes = storm(Strategy::SeparateClaim, 32, 8, 2).await;
    eprintln!(
        "sqlite storm, separate claim, 32 keys x 8 attempts, 2 stores: writes per key {writes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_storm_many_keys_two_stores_on_one_file_in_transaction() {
    let writes = storm(Strategy::InTransaction, 32, 8, 2).await;
    eprintln!(
        "sqlite storm, in transaction, 32 keys x 8 attempts, 2 stores: writes per key {writes:?}"
    );
}

/// Retention on SQLite: 10,000 expired records are deleted in batches of [`CLEANUP_BATCH`], each
/// its own short write transaction, while live attempts, 50 or more, are in flight (from before the purge
/// to after it): every one executes, none answers 503; unexpired records stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_cleanup_drains_expired_rows_in_batches_while_claims_proceed() {
    use idemgen_runtime::retention::{CLEANUP_BATCH, purge_expired};
    let env = sqlite_env(config(Strategy::SeparateClaim)).await;
    let Ledger::Sqlite(pool, _) = &env.ledger else {
        unreachable!()
    };
    for (prefix, n, expires) in [("old", 10_000, "- 3600000"), ("young", 100, "+ 86400000")] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n})
             INSERT INTO idempotency_records (scope_hash, owner, operation, idempotency_key, state,
                 fingerprint, fingerprint_version, claim_token, claimed_at, response_status,
                 response_headers, response_body, completed_at, expires_at)
             SELECT randomblob(32), 'carol', 'createThing', '{prefix}-' || i, 'completed',
                    'hs2:x', 1, randomblob(16), 0, 201, '[]', x'', 0,
                    CAST(unixepoch('subsec') * 1000 AS INTEGER) {expires}
               FROM g"
        )))
        .execute(pool)
        .await
        .unwrap();
    }
    let store = env.exec.store();
    assert_eq!(
        store.purge_expired_batch(CLEANUP_BATCH).await.unwrap(),
        CLEANUP_BATCH as u64,
        "one statement deletes one batch"
    );
    // At least 50 claims, one after another, until one that started after the purge ended.
    let (first_tx, first) = tokio::sync::oneshot::channel();
    let purged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let claims = {
        let (env, purged) = (env.clone(), purged.clone());
        tokio::spawn(async move {
            let mut first_tx = Some(first_tx);
            let mut done = Vec::new();
            for i in 0.. {
                let after_purge = purged.load(std::sync::atomic::Ordering::SeqCst);
                let req = request(scope("alice", &format!("live-{i}")), json!({}), 1);
                let o = attempt(&env, req, Plan::created("live")).await.unwrap();
                assert_eq!(o.disposition, Disposition::Executed, "live-{i}");
                done.push(Instant::now());
                if let Some(tx) = first_tx.take() {
                    let _ = tx.send(());
                }
                if after_purge && done.len() >= 50 {
                    break;
                }
            }
            done
        })
    };
    // The purge starts once the claims run, so the two overlap.
    first.await.unwrap();
    let purge_started = Instant::now();
    let deleted = purge_expired(store).await.unwrap();
    let purge_ended = Instant::now();
    purged.store(true, std::sync::atomic::Ordering::SeqCst);
    let done = claims.await.unwrap();
    let during = done
        .iter()
        .filter(|at| (purge_started..purge_ended).contains(at))
        .count();
    eprintln!(
        "sqlite cleanup: purge {:?}, {during} of {} claims completed during it",
        purge_ended - purge_started,
        done.len()
    );
    // In flight through the whole purge: one completed before it began, one after it ended.
    // (Completing *during* it is not asserted: SQLite's busy handler sleeps, so the purge's
    // back-to-back batches may hold the claims' writes off until it ends.)
    assert!(done[0] < purge_started);
    assert!(
        *done.last().unwrap() > purge_ended,
        "the claims ended before the purge: no overlap tested"
    );
    assert_eq!(deleted, 10_000 - CLEANUP_BATCH as u64);
    let count = |owner: &'static str| {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM idempotency_records WHERE owner = ?1")
            .bind(owner)
            .fetch_one(pool)
    };
    assert_eq!(
        count("carol").await.unwrap(),
        100,
        "unexpired records are kept"
    );
    assert_eq!(
        count("alice").await.unwrap(),
        i64::try_from(done.len()).unwrap()
    );
}

// ---------------------------------------------------------------------------------------------
// Problem answers.
// ---------------------------------------------------------------------------------------------

/// A file that cannot be written (opened read-only here: the tests run as root, whom file modes
/// do not stop) answers 503 with no driver text; nothing executes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_file_that_cannot_be_written_is_503_without_driver_text() {
    let (store, dir) = fresh_sqlite().await;
    drop(store);
    let path = dir.path().join("idemgen.db");
    let pool = PoolOptions::new()
        .max_connections(2)
        .connect_with(SqliteStore::connect_options(&path).read_only(true))
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    let refused = store.check().await;
    assert!(
        matches!(
            refused,
            Err(idemgen_runtime::engine::StoreError::Unavailable(_))
        ),
        "the start-up check refuses a file it cannot write: {refused:?}"
    );
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let env = Env {
            exec: Executor::new(store.clone(), config(strategy)),
            business: sqlite_business(),
            ledger: Ledger::Sqlite(pool.clone(), Arc::new(tempfile::tempdir().unwrap())),
        };
        let result = attempt(
            &env,
            request(scope("alice", "ro"), json!({}), 1),
            Plan::created("x"),
        )
        .await;
        let Err(ExecuteError::Problem(p)) = result else {
            panic!("expected a problem, got {result:?}");
        };
        assert_eq!(p.kind(), ProblemKind::StoreUnavailable, "{strategy:?}: {p}");
        assert_eq!(p.kind().status(), 503);
        let body = String::from_utf8(p.body_json()).unwrap().to_lowercase();
        for driver_text in ["readonly", "read-only", "sqlite", "attempt to write"] {
            assert!(!body.contains(driver_text), "driver text leaked: {body}");
        }
        assert!(
            p.internal().is_some_and(|i| i.contains("readonly")),
            "the cause is kept for the logs: {:?}",
            p.internal()
        );
        assert_eq!(env.ledger.count("x").await, 0);
    }
}

/// A handler's own SQLite failure is answered without database text: a file that cannot be
/// written or a write lock held past `busy_timeout` is the store's 503; a constraint violation
/// an opaque 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_handlers_database_failures_are_classified_without_database_text() {
    use idemgen_runtime::HandlerError;
    let (store, dir) = fresh_sqlite().await;
    let path = dir.path().join("idemgen.db");
    let read_only: SqlitePool = PoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteStore::connect_options(&path).read_only(true))
        .await
        .unwrap();
    let short: SqlitePool = PoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteStore::connect_options(&path).busy_timeout(Duration::from_millis(100)))
        .await
        .unwrap();
    let insert = "INSERT INTO business_writes (id, label) VALUES (1, 'x')";
    let not_writable = sqlx::query(insert).execute(&read_only).await.unwrap_err();
    let held = store.begin().await.unwrap();
    let locked = sqlx::query(insert).execute(&short).await.unwrap_err();
    store.rollback(held).await.unwrap();
    sqlx::query(insert).execute(store.pool()).await.unwrap();
    let duplicate = sqlx::query(insert).execute(store.pool()).await.unwrap_err();
    for (error, kind) in [
        (not_writable, ProblemKind::StoreUnavailable),
        (locked, ProblemKind::StoreUnavailable),
        (duplicate, ProblemKind::Internal),
    ] {
        let cause = error.to_string();
        let handler: HandlerError<()> = error.into();
        let p = idemgen_runtime::engine::handler_problem(&handler, true).unwrap();
        assert_eq!(p.kind(), kind, "{cause}");
        let body = String::from_utf8(p.body_json()).unwrap();
        assert!(
            !body.contains("code:") && !body.contains("database"),
            "{body}"
        );
        assert_eq!(p.internal(), Some(cause.as_str()));
    }
}

/// A writer holding the file's write lock longer than `busy_timeout` makes the claim fail with
/// `LockTimeout`, answered 503 (the client retries with the same key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_write_lock_held_past_busy_timeout_is_503() {
    let (holder, dir) = fresh_sqlite().await;
    let path = dir.path().join("idemgen.db");
    let pool = PoolOptions::new()
        .max_connections(2)
        .connect_with(SqliteStore::connect_options(&path).busy_timeout(Duration::from_millis(200)))
        .await
        .unwrap();
    let store = SqliteStore::new(pool);
    store
        .check()
        .await
        .expect("a short busy timeout passes the check");
    let req = request(scope("alice", "locked"), json!({}), 1);
    let held = holder.begin().await.unwrap();
    let claimed = store.claim(&claim_of(&req, ClaimToken::generate())).await;
    assert!(
        matches!(
            claimed,
            Err(idemgen_runtime::engine::StoreError::LockTimeout)
        ),
        "{claimed:?}"
    );
    let env = Env {
        exec: Executor::new(store, config(Strategy::SeparateClaim)),
        business: sqlite_business(),
        ledger: Ledger::Sqlite(
            holder.pool().clone(),
            Arc::new(tempfile::tempdir().unwrap()),
        ),
    };
    let result = attempt(&env, req.clone(), Plan::created("locked")).await;
    assert_eq!(problem_status(&result), Some(503), "{result:?}");
    holder.rollback(held).await.unwrap();
    let retry = attempt(&env, req, Plan::created("locked")).await.unwrap();
    assert_eq!(retry.disposition, Disposition::Executed);
}

/// The store refuses a pool built without its settings (here: the default rollback journal).
#[tokio::test]
async fn sqlite_check_refuses_a_pool_without_wal() {
    let dir = tempfile::tempdir().unwrap();
    let pool = PoolOptions::new()
        .max_connections(1)
        .connect_with(
            idemgen_runtime::SqliteConnectOptions::new()
                .filename(dir.path().join("plain.db"))
                .create_if_missing(true),
        )
        .await
        .unwrap();
    let err = SqliteStore::new(pool)
        .check()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("journal_mode=delete"), "{err}");
}

/// Processes opening one fresh file at once migrate one at a time (the migrations run under
/// `BEGIN IMMEDIATE`): every open succeeds and the schema is there once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_stores_opening_one_fresh_file_at_once_migrate_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { SqliteStore::open(path).await })
        })
        .collect();
    let mut stores = Vec::new();
    for open in opens {
        stores.push(open.await.unwrap().expect("every open succeeds"));
    }
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _idemgen_migrations")
        .fetch_all(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(versions, [1]);
}

/// A transaction SQLite ended by itself (as it does on `SQLITE_FULL`, `SQLITE_IOERR` or
/// `SQLITE_NOMEM`, during a statement or the `COMMIT`) leaves sqlx's count of the connection's
/// transaction depth at 1; the handle's end fails. The pool's only connection must not stay in
/// that state: the next `begin`, gated or not, opens a write transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_transaction_sqlite_ended_by_itself_does_not_poison_the_pooled_connection() {
    let (seed, dir) = fresh_sqlite().await;
    drop(seed);
    let pool = PoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteStore::connect_options(dir.path().join("idemgen.db")))
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    let req = request(scope("alice", "self-ended"), json!({}), 1);
    for end in ["drop", "commit", "rollback"] {
        let mut tx = store.begin().await.unwrap();
        sqlx::raw_sql("ROLLBACK").execute(tx.conn()).await.unwrap();
        match end {
            "drop" => drop(tx),
            "commit" => assert!(store.commit(tx).await.is_err(), "{end}: nothing to commit"),
            _ => assert!(
                store.rollback(tx).await.is_err(),
                "{end}: nothing to roll back"
            ),
        }
        let mut tx = store
            .begin()
            .await
            .unwrap_or_else(|e| panic!("{end}: {e:?}"));
        sqlx::query("INSERT INTO business_writes (label) VALUES (?1)")
            .bind(format!("after-{end}"))
            .execute(tx.conn())
            .await
            .unwrap();
        store.commit(tx).await.unwrap();
        assert_eq!(
            sqlite_write_ids(&pool, &format!("after-{end}")).await.len(),
            1,
            "{end}"
        );
        let mut tx = store.begin().await.unwrap();
        sqlx::raw_sql("ROLLBACK").execute(tx.conn()).await.unwrap();
        drop(tx);
        match store
            .begin_gated(&claim_of(&req, ClaimToken::generate()))
            .await
        {
            Ok(Gate::Open(tx)) => store.rollback(tx).await.unwrap(),
            other => panic!("{end}: the gated begin failed: {other:?}"),
        }
    }
}

/// A lease about as long as a renewal's wait for the write lock would lapse under a live holder
/// while a handler holds the lock: the executor widens it to the SQLite store's minimum (three
/// busy timeouts), and keeps a longer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_lease_expiry_below_three_busy_timeouts_is_widened() {
    let (store, _dir) = fresh_sqlite().await;
    assert_eq!(store.min_lease_expiry(), Some(Duration::from_secs(15)));
    for (configured, used) in [
        (Some(Duration::from_secs(5)), Some(Duration::from_secs(15))),
        (Some(Duration::from_secs(60)), Some(Duration::from_secs(60))),
        (None, None),
    ] {
        let mut cfg = config(Strategy::SeparateClaim);
        cfg.lease_expiry = configured;
        let exec = Executor::new(store.clone(), cfg);
        assert_eq!(exec.config().lease_expiry, used, "{configured:?}");
        exec.shutdown().await;
    }
    // The default is widened without a warning (a clean start logs none); a value the service
    // chose is widened with one.
    for (cfg, warnings) in [
        (ExecutorConfig::default(), 0),
        (
            ExecutorConfig {
                lease_expiry: Some(Duration::from_secs(6)),
                ..ExecutorConfig::default()
            },
            1,
        ),
    ] {
        let counted = Arc::new(AtomicUsize::new(0));
        let exec = tracing::subscriber::with_default(Warnings(Arc::clone(&counted)), || {
            Executor::new(store.clone(), cfg)
        });
        assert_eq!(exec.config().lease_expiry, Some(Duration::from_secs(15)));
        assert_eq!(counted.load(Ordering::SeqCst), warnings);
        exec.shutdown().await;
    }
}

/// Counts the events at WARN or ERROR it sees.
struct Warnings(Arc<AtomicUsize>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() <= tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

// ---------------------------------------------------------------------------------------------
// Cancellation safety.
// ---------------------------------------------------------------------------------------------

/// Polls `fut` once (its command is queued on the connection's worker) and drops it.
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

/// Whether the file's write lock is free: another store (another process's view) can take it
/// within 300 ms.
async fn write_lock_is_free(path: &std::path::Path) -> bool {
    let pool: SqlitePool = PoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteStore::connect_options(path).busy_timeout(Duration::from_millis(300)))
        .await
        .unwrap();
    let free = sqlx::raw_sql("BEGIN IMMEDIATE; ROLLBACK")
        .execute(&pool)
        .await
        .is_ok();
    pool.close().await;
    free
}

/// A `BEGIN IMMEDIATE`, gated `BEGIN`, `COMMIT` or `ROLLBACK` whose future is dropped after it
/// was queued never hands the pool a connection inside a transaction, nor keeps the write lock or
/// the key's gate: the pool's one connection then runs an autocommit write that every other
/// connection sees, and the key opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_cancelled_transaction_control_never_leaves_a_connection_in_a_transaction() {
    let (seed, dir) = fresh_sqlite().await;
    drop(seed);
    let path = dir.path().join("idemgen.db");
    // No ping before handing out a connection: with the connection idle, the one poll takes it
    // at once and queues the `BEGIN`, which the drop then cuts (a ping would be all it queued).
    let pool: SqlitePool = PoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(SqliteStore::connect_options(&path))
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    let observer = other_process(&dir).await;
    let req = request(scope("alice", "cancelled"), json!({}), 1);
    for case in ["begin", "gated begin", "commit", "rollback"] {
        for _ in 0..20 {
            // The connection back in the pool, idle (it returns in a task of its own).
            let deadline = Instant::now() + Duration::from_secs(10);
            while pool.num_idle() != 1 {
                assert!(
                    Instant::now() < deadline,
                    "{case}: the connection never came back"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            match case {
                "begin" => drop(poll_once_then_drop(store.begin()).await),
                "gated begin" => {
                    let claim = claim_of(&req, ClaimToken::generate());
                    drop(poll_once_then_drop(store.begin_gated(&claim)).await)
                }
                "commit" | "rollback" => {
                    let mut tx = store.begin().await.unwrap();
                    sqlx::query("INSERT INTO business_writes (label) VALUES (?1)")
                        .bind(format!("cancelled-{case}"))
                        .execute(tx.conn())
                        .await
                        .unwrap();
                    if case == "commit" {
                        drop(poll_once_then_drop(store.commit(tx)).await);
                    } else {
                        drop(poll_once_then_drop(store.rollback(tx)).await);
                    }
                }
                _ => unreachable!(),
            }
            // The pool's only connection: an autocommit write on it must be visible to others at
            // once, which it is not when the connection is still inside a transaction.
            let label = format!("after-{case}");
            sqlx::query("INSERT INTO business_writes (label) VALUES (?1)")
                .bind(&label)
                .execute(&pool)
                .await
                .unwrap();
            let seen = sqlite_write_ids(observer.pool(), &label).await.len();
            assert!(
                seen >= 1,
                "{case}: the connection was left inside a transaction"
            );
            assert!(
                write_lock_is_free(&path).await,
                "{case}: the write lock was kept"
            );
        }
        let claim = claim_of(&req, ClaimToken::generate());
        match store.begin_gated(&claim).await {
            Ok(Gate::Open(tx)) => store.rollback(tx).await.unwrap(),
            other => panic!("{case}: the key's gate was kept: {other:?}"),
        }
    }
    // A queued `COMMIT` runs although its caller left, and so does a queued `ROLLBACK`: every
    // cut commit committed its row, and no cut rollback did.
    for (case, rows) in [("commit", 20), ("rollback", 0)] {
        let label = format!("cancelled-{case}");
        assert_eq!(
            sqlite_write_ids(observer.pool(), &label).await.len(),
            rows,
            "{case}: rows of 20 cut {case}s"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Processes: SIGKILL in the middle of a write transaction; several processes on one file.
// ---------------------------------------------------------------------------------------------

/// Set in a child process: the database file, the strategy and the round.
const CHILD_FILE: &str = "IDEMGEN_SQLITE_CHILD_FILE";
const CHILD_STRATEGY: &str = "IDEMGEN_SQLITE_CHILD_STRATEGY";
const CHILD_ROUND: &str = "IDEMGEN_SQLITE_CHILD_ROUND";

/// How many creates a crashing child acknowledges before it starts the write it dies in.
const ACKED: usize = 24;

fn child_strategy() -> Strategy {
    match std::env::var(CHILD_STRATEGY).as_deref() {
        Ok("in_transaction") => Strategy::InTransaction,
        _ => Strategy::SeparateClaim,
    }
}

fn strategy_name(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::SeparateClaim => "separate_claim",
        Strategy::InTransaction => "in_transaction",
    }
}

fn crash_request(round: &str, k: usize) -> IdempotentRequest {
    request(
        scope("alice", &format!("crash-{round}-{k}")),
        json!({"k": k}),
        1,
    )
}

fn say(line: String) {
    use std::io::Write;
    println!("{line}");
    std::io::stdout().flush().unwrap();
}

/// Runs in a child process of [`sqlite_a_writer_killed_mid_transaction_leaves_every_acknowledged_create`]:
/// [`ACKED`] creates, four at a time, each printed once acknowledged (`ACKED <k> <body>`); then
/// one more whose handler writes and prints `HOLDING` inside its write transaction, and hangs
/// there (holding the file's write lock) while the other tasks queue for the lock, until the
/// process is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by sqlite_a_writer_killed_mid_transaction_leaves_every_acknowledged_create"]
async fn sqlite_crash_child() {
    let file = std::env::var(CHILD_FILE).expect("run by the parent test");
    let round = std::env::var(CHILD_ROUND).unwrap();
    let store = SqliteStore::open(&file).await.unwrap();
    let exec = Executor::new(store, config(child_strategy()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (exec, next, round) = (exec.clone(), next.clone(), round.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let label = format!("crash-{round}-{k}");
                let req = crash_request(&round, k);
                if k == ACKED {
                    let _ = exec
                        .execute(req, move |tx: &mut TxHandle<SqliteStore>| {
                            Box::pin(async move {
                                sqlx::query("INSERT INTO business_writes (label) VALUES (?1)")
                                    .bind(label)
                                    .execute(tx.conn().await.map_err(|e| e.to_string())?)
                                    .await
                                    .map_err(|e| e.to_string())?;
                                say("HOLDING".into());
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                                Ok::<_, String>(TestResponse {
                                    status: 201,
                                    body: "never".into(),
                                    headers: vec![],
                                })
                            })
                        })
                        .await;
                    return;
                }
                let writer = sqlite_slow_id_writer(label, Duration::ZERO);
                if let Ok(o) = exec.execute(req, writer).await {
                    say(format!("ACKED {k} {}", o.response.body));
                }
                if k > ACKED {
                    // Queued behind the holder's write lock until the kill.
                    continue;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Runs a child test of this binary with `env`, returning it with its stdout piped.
fn spawn_child(test: &str, env: &[(&str, String)]) -> std::process::Child {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::piped())
        .env_remove("DATABASE_URL");
    for (k, v) in env {
        command.env(k, v);
    }
    command.spawn().expect("the child process")
}

/// A process writing to a SQLite file is killed with SIGKILL while it holds a write transaction
/// (its handler wrote and hangs; its other attempts queue for the lock). Two rounds per strategy
/// on one file: afterwards the file passes `PRAGMA integrity_check`, every create the child
/// acknowledged replays with the body it was acknowledged with (one business row each), and the
/// interrupted key executes once on retry (its write died with the process).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_writer_killed_mid_transaction_leaves_every_acknowledged_create() {
    let (store, dir) = fresh_sqlite().await;
    let file = dir.path().join("idemgen.db");
    let pool = store.pool().clone();
    let mut retry_cfg = config(Strategy::SeparateClaim);
    retry_cfg.in_flight_wait = Duration::from_millis(100);
    let exec = Executor::new(store, retry_cfg);
    let mut tally = Vec::new();
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        for round in 0..2 {
            let round = format!("{}-{round}", strategy_name(strategy));
            let mut child = spawn_child(
                "sqlite::sqlite_crash_child",
                &[
                    (CHILD_FILE, file.display().to_string()),
                    (CHILD_STRATEGY, strategy_name(strategy).into()),
                    (CHILD_ROUND, round.clone()),
                ],
            );
            let stdout = child.stdout.take().unwrap();
            let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if lines_tx.send(line).is_err() {
                        return;
                    }
                }
            });
            let mut acked: HashMap<usize, String> = HashMap::new();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            loop {
                let line = tokio::time::timeout_at(deadline, lines.recv())
                    .await
                    .expect("the child holds its transaction within a minute")
                    .expect("the child ended before holding its transaction");
                // libtest may print the test's name on the same line first.
                if line.ends_with("HOLDING") {
                    break;
                }
                if let Some(ack) = line.split("ACKED ").nth(1) {
                    let (k, body) = ack.split_once(' ').unwrap();
                    acked.insert(k.parse().unwrap(), body.to_string());
                }
            }
            // Killed while holding the write transaction.
            tokio::time::sleep(Duration::from_millis(100)).await;
            child.kill().expect("SIGKILL");
            child.wait().unwrap();
            while let Ok(line) = lines.try_recv() {
                if let Some(ack) = line.split("ACKED ").nth(1) {
                    let (k, body) = ack.split_once(' ').unwrap();
                    acked.insert(k.parse().unwrap(), body.to_string());
                }
            }
            let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(integrity, "ok", "round {round}: the file is damaged");
            assert!(
                acked.len() >= ACKED - 4,
                "round {round}: only {} acknowledged",
                acked.len()
            );
            for (k, body) in &acked {
                let label = format!("crash-{round}-{k}");
                let replay = exec
                    .execute(
                        crash_request(&round, *k),
                        sqlite_slow_id_writer(label.clone(), Duration::ZERO),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("round {round}, key {k}: {e:?}"));
                assert_eq!(
                    replay.disposition,
                    Disposition::Replayed,
                    "round {round}, key {k}"
                );
                assert_eq!(&replay.response.body, body, "round {round}, key {k}");
                assert_eq!(sqlite_write_ids(&pool, &label).await.len(), 1);
            }
            // The interrupted key: its claim (separate claim) waits for the dead holder's lease,
            // then executes once; in-transaction, nothing of it was committed.
            let label = format!("crash-{round}-{ACKED}");
            // The dead holder's lease lapses within its expiry (the SQLite store's minimum).
            let freed_within = exec.config().lease_expiry.unwrap() + Duration::from_secs(5);
            let started = Instant::now();
            let retried = loop {
                let writer = sqlite_slow_id_writer(label.clone(), Duration::ZERO);
                match exec.execute(crash_request(&round, ACKED), writer).await {
                    Ok(o) => break o,
                    Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight => {
                        assert!(
                            started.elapsed() < freed_within,
                            "round {round}: the interrupted key never freed"
                        );
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(other) => panic!("round {round}: {other:?}"),
                }
            };
            assert!(
                matches!(
                    retried.disposition,
                    Disposition::Executed | Disposition::TakenOver
                ),
                "{:?}",
                retried.disposition
            );
            let ids = sqlite_write_ids(&pool, &label).await;
            assert_eq!(
                ids.len(),
                1,
                "round {round}: the interrupted key executed once"
            );
            assert_eq!(retried.response.body, format!("write {}", ids[0]));
            tally.push((round, acked.len(), retried.disposition, started.elapsed()));
        }
    }
    let dupes: Vec<(String, i64)> = sqlx::query_as(
        "SELECT label, count(*) FROM business_writes GROUP BY label HAVING count(*) > 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(dupes.is_empty(), "{dupes:?}");
    eprintln!(
        "sqlite kill -9 mid-transaction: (round, acknowledged creates replayed, interrupted key, freed after) {tally:?}"
    );
}

/// How many keys the processes sharing a file race for, and how many processes.
const SHARED_KEYS: usize = 48;
const PROCESSES: usize = 3;

/// Runs in a child process of [`sqlite_processes_sharing_a_file_write_once_per_key`]: every key
/// once, in an order of its own, eight at a time; prints `OUTCOME <k> <disposition> <body>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by sqlite_processes_sharing_a_file_write_once_per_key"]
async fn sqlite_sharing_child() {
    let file = std::env::var(CHILD_FILE).expect("run by the parent test");
    let seed: usize = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let store = SqliteStore::open(&file).await.unwrap();
    let mut cfg = config(child_strategy());
    cfg.in_flight_wait = Duration::from_secs(5);
    let exec = Executor::new(store, cfg);
    let order: Vec<usize> = (0..SHARED_KEYS)
        .map(|i| (i * 7 + seed * 13) % SHARED_KEYS)
        .collect();
    let sem = Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = Vec::new();
    for k in order {
        let (exec, sem) = (exec.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.unwrap();
            let req = request(scope("alice", &format!("shared-{k}")), json!({"k": k}), 1);
            let writer = sqlite_slow_id_writer(format!("shared-{k}"), Duration::from_millis(3));
            match exec.execute(req, writer).await {
                Ok(o) => say(format!(
                    "OUTCOME {k} {:?} {}",
                    o.disposition, o.response.body
                )),
                // The write lock not had within `busy_timeout` on loaded cores: nothing executed.
                Err(ExecuteError::Problem(p)) if p.kind().status() == 503 => {
                    say(format!("OUTCOME {k} unavailable -"))
                }
                Err(e) => say(format!("OUTCOME {k} failed {e:?}")),
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Three processes on one file run the same creates of 48 keys at once, each in its own order:
/// exactly one business write and one execution per key across the processes, and every answer
/// carries that write's result. Both strategies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_processes_sharing_a_file_write_once_per_key() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let (store, dir) = fresh_sqlite().await;
        let file = dir.path().join("idemgen.db");
        let children: Vec<_> = (0..PROCESSES)
            .map(|p| {
                spawn_child(
                    "sqlite::sqlite_sharing_child",
                    &[
                        (CHILD_FILE, file.display().to_string()),
                        (CHILD_STRATEGY, strategy_name(strategy).into()),
                        (CHILD_ROUND, p.to_string()),
                    ],
                )
            })
            .collect();
        let outputs = tokio::task::spawn_blocking(move || {
            children
                .into_iter()
                .map(|c| c.wait_with_output().expect("a child's output"))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        let mut executed = [0; SHARED_KEYS];
        let mut bodies: Vec<HashSet<String>> = vec![HashSet::new(); SHARED_KEYS];
        let mut outcomes = 0;
        for out in outputs {
            assert!(out.status.success(), "a child failed: {out:?}");
            for line in String::from_utf8(out.stdout).unwrap().lines() {
                let Some(rest) = line.split("OUTCOME ").nth(1) else {
                    continue;
                };
                outcomes += 1;
                let mut parts = rest.splitn(3, ' ');
                let k: usize = parts.next().unwrap().parse().unwrap();
                match parts.next().unwrap() {
                    "Executed" => executed[k] += 1,
                    "Replayed" => {}
                    "unavailable" => continue,
                    other => panic!("{strategy:?}, key {k}: {other} {:?}", parts.next()),
                }
                bodies[k].insert(parts.next().unwrap().to_string());
            }
        }
        assert_eq!(
            outcomes,
            SHARED_KEYS * PROCESSES,
            "{strategy:?}: every attempt answered"
        );
        // Every key converges: retried until it succeeds, it replays the one write (or executes
        // it, when every process's attempt answered 503).
        let exec = Executor::new(store.clone(), config(strategy));
        for k in 0..SHARED_KEYS {
            let (done, was_executed) = converge(&exec, || {
                let req = request(scope("alice", &format!("shared-{k}")), json!({"k": k}), 1);
                (req, format!("shared-{k}"))
            })
            .await;
            executed[k] += usize::from(was_executed);
            bodies[k].insert(done);
        }
        for k in 0..SHARED_KEYS {
            let ids = sqlite_write_ids(store.pool(), &format!("shared-{k}")).await;
            assert_eq!(ids.len(), 1, "{strategy:?}, key {k}: {} writes", ids.len());
            assert_eq!(executed[k], 1, "{strategy:?}, key {k}");
            assert_eq!(
                bodies[k].iter().collect::<Vec<_>>(),
                [&format!("write {}", ids[0])],
                "{strategy:?}, key {k}"
            );
        }
        eprintln!(
            "sqlite, {PROCESSES} processes on one file, {strategy:?}: {SHARED_KEYS} keys, one write each"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_stored_status_out_of_range_is_answered_as_an_error() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let env = sqlite_env(config(strategy)).await;
        let Ledger::Sqlite(pool, _) = &env.ledger else {
            unreachable!()
        };
        let pool = pool.clone();
        a_stored_status_out_of_range_is_an_error(env, "bad-status", || async move {
            sqlx::query("UPDATE idempotency_records SET response_status = 70000")
                .execute(&pool)
                .await
                .unwrap();
        })
        .await;
    }
}

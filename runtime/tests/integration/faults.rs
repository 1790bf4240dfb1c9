//! Faults between the runtime and PostgreSQL: lost commit acknowledgements (a TCP proxy that cuts
//! the connection around `COMMIT`), a server restart under load, and an exhausted pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError, HandlerFuture};
use idemgen_runtime::{
    Executor, ExecutorConfig, PgStore, ProblemKind, Store, Strategy, TokioPgStore, TxHandle,
};
use idemgen_testdb::TestDb;
use idemgen_testdb::proxy::{CommitFault, FaultProxy};
use serde_json::json;
use sqlx::postgres::{PgPoolOptions, PgSslMode};

use crate::support::*;

/// What the lost-commit run saw, per strategy.
#[derive(Debug, Default)]
struct LostCommitCounts {
    attempts: usize,
    faults: usize,
    outcome_unknown: usize,
    reconciled: usize,
    clean_successes: usize,
    retries_replayed: usize,
    retries_executed: usize,
    duplicates: usize,
    /// Per fault: (504s, reconciled successes).
    by_fault: std::collections::BTreeMap<String, (usize, usize)>,
}

/// The fault for attempt `i`: 40% cut after the server answered COMMIT, 20% cut right after
/// forwarding it, 20% COMMIT never forwarded, 20% no fault.
fn fault_for(i: usize) -> Option<CommitFault> {
    match i % 5 {
        0 | 1 => Some(CommitFault::CutAfterReply),
        2 => Some(CommitFault::CutAfterForward),
        3 => Some(CommitFault::DropCommit),
        _ => None,
    }
}

/// Which PostgreSQL store a fault run drives.
#[derive(Debug, Clone, Copy)]
enum Driver {
    Sqlx,
    TokioPostgres,
    /// The tokio-postgres store, separate-claim attempts begun with their claim.
    TokioPostgresBegunAtClaim,
}

const ATTEMPTS: usize = 100;

/// `PgStore` on a pool of 4 whose every connection goes through `proxy`.
async fn proxied_pg_store(db: &TestDb, proxy: &FaultProxy) -> PgStore {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(
            db.options
                .clone()
                .port(proxy.port())
                .ssl_mode(PgSslMode::Disable),
        )
        .await
        .expect("pool through the proxy");
    PgStore::new(pool)
}

/// `TokioPgStore` on a pool of 4 whose every connection goes through `proxy`.
fn proxied_tokio_pg_store(db: &TestDb, proxy: &FaultProxy) -> TokioPgStore {
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}?sslmode=disable",
        db.options.get_username(),
        proxy.port(),
        db.name
    );
    TokioPgStore::new(TokioPgStore::pool(&url, 4).expect("pool through the proxy"))
}

async fn lost_commit_acknowledgements(strategy: Strategy, driver: Driver) -> LostCommitCounts {
    let (db, direct) = fresh_pg(4).await;
    let upstream = (std::net::Ipv4Addr::LOCALHOST, db.options.get_port()).into();
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    let config = ExecutorConfig {
        strategy,
        // A claim left by a lost commit is taken over quickly by the retry.
        stale_claim: Duration::from_millis(200),
        in_flight_wait: Duration::from_secs(2),
        ..ExecutorConfig::default()
    };
    // Every statement of the runtime (claims, business transactions, the read-back after a lost
    // acknowledgement) goes through the proxy; faults hit only the armed COMMIT.
    match driver {
        Driver::Sqlx => {
            let exec = Executor::new(proxied_pg_store(&db, &proxy).await, config);
            lost_commit_run(&exec, &proxy, &direct, pg_id_writer, strategy).await
        }
        Driver::TokioPostgres | Driver::TokioPostgresBegunAtClaim => {
            // The store sends the completion and COMMIT together: the proxy loses COMMIT's
            // answer (and, cutting, whatever of the completion's had not yet come back).
            let store = proxied_tokio_pg_store(&db, &proxy)
                .with_begin_at_claim(matches!(driver, Driver::TokioPostgresBegunAtClaim));
            let exec = Executor::new(store, config);
            lost_commit_run(&exec, &proxy, &direct, tokio_pg_id_writer, strategy).await
        }
    }
}

async fn lost_commit_run<S, H>(
    exec: &Executor<S>,
    proxy: &FaultProxy,
    direct: &sqlx::PgPool,
    writer: fn(String) -> H,
    strategy: Strategy,
) -> LostCommitCounts
where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let mut counts = LostCommitCounts::default();
    for i in 0..ATTEMPTS {
        let label = format!("lost-{i}");
        let req = request(scope("alice", &label), json!({"i": i}), 1);
        let fault = fault_for(i);
        let cuts_before = proxy.cuts();
        if let Some(fault) = fault {
            proxy.arm(fault);
            counts.faults += 1;
        }
        let result = exec.execute(req.clone(), writer(label.clone())).await;
        counts.attempts += 1;
        assert_eq!(proxy.disarm(), None, "attempt {i}: the armed fault fired");
        assert_eq!(
            proxy.cuts() - cuts_before,
            u64::from(fault.is_some()),
            "attempt {i}: one cut per armed fault"
        );
        let ids = pg_write_ids(direct, &label).await;
        assert!(ids.len() <= 1, "attempt {i}: duplicate writes {ids:?}");
        match result {
            Ok(outcome) => {
                assert_eq!(outcome.disposition, Disposition::Executed, "attempt {i}");
                assert_eq!(ids.len(), 1, "attempt {i}: a success has its write");
                assert_eq!(outcome.response.body, format!("write {}", ids[0]));
                if let Some(fault) = fault {
                    counts.reconciled += 1;
                    counts.by_fault.entry(format!("{fault:?}")).or_default().1 += 1;
                } else {
                    counts.clean_successes += 1;
                }
            }
            Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::OutcomeUnknown => {
                assert!(
                    fault.is_some(),
                    "attempt {i}: 504 without a fault: {:?}",
                    p.internal()
                );
                assert_eq!(p.kind().status(), 504);
                counts.outcome_unknown += 1;
                counts
                    .by_fault
                    .entry(format!("{:?}", fault.unwrap()))
                    .or_default()
                    .0 += 1;
            }
            other => panic!("attempt {i} ({fault:?}): unexpected outcome {other:?}"),
        }
        match fault {
            // The server committed and the read-back on a fresh connection must see it.
            Some(CommitFault::CutAfterReply) | None => {
                assert_eq!(ids.len(), 1, "attempt {i} ({fault:?}) must have committed");
            }
            // The server never saw COMMIT: nothing committed, the client was told 504.
            Some(CommitFault::DropCommit) => {
                assert!(ids.is_empty(), "attempt {i}: a dropped COMMIT committed");
            }
            Some(CommitFault::CutAfterForward) => {}
        }
        // The client retries with the same key, without faults, until it has an answer.
        let mut retries = 0;
        let retry = loop {
            retries += 1;
            assert!(retries <= 20, "attempt {i}: the retry never converged");
            match exec.execute(req.clone(), writer(label.clone())).await {
                Ok(outcome) => break outcome,
                Err(ExecuteError::Problem(p))
                    if matches!(
                        p.kind(),
                        ProblemKind::InFlight | ProblemKind::OutcomeUnknown
                    ) =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("attempt {i}: retry failed: {other:?}"),
            }
        };
        let ids = pg_write_ids(direct, &label).await;
        assert_eq!(ids.len(), 1, "attempt {i}: converged to exactly one write");
        assert_eq!(retry.response.body, format!("write {}", ids[0]));
        match retry.disposition {
            Disposition::Replayed => counts.retries_replayed += 1,
            Disposition::Executed | Disposition::TakenOver => counts.retries_executed += 1,
            Disposition::NotStored => panic!("attempt {i}: 201 not stored"),
        }
        let (state, body) = pg_record(direct, &req.scope).await.expect("a record");
        assert_eq!(state, "completed");
        assert_eq!(body, Some(format!("write {}", ids[0]).into_bytes()));
    }
    counts.duplicates = pg_duplicates(direct).await.len();
    assert_eq!(counts.duplicates, 0);
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, ATTEMPTS, "one write per key, every key");
    // Every dropped COMMIT was a 504, and at least one lost acknowledgement of a COMMIT that did
    // land was reconciled by the read-back.
    assert!(counts.outcome_unknown >= ATTEMPTS / 5);
    assert!(counts.reconciled >= 2 * ATTEMPTS / 5);
    eprintln!("lost commit acknowledgements, {strategy:?}: {counts:?}");
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_separate_claim() {
    let counts = lost_commit_acknowledgements(Strategy::SeparateClaim, Driver::Sqlx).await;
    // The dropped COMMITs left their claim behind: the retry took it over and executed.
    assert!(counts.retries_executed >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_separate_claim_on_tokio_postgres() {
    let counts = lost_commit_acknowledgements(Strategy::SeparateClaim, Driver::TokioPostgres).await;
    assert!(counts.retries_executed >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_separate_claim_begun_at_the_claim_on_tokio_postgres() {
    let counts =
        lost_commit_acknowledgements(Strategy::SeparateClaim, Driver::TokioPostgresBegunAtClaim)
            .await;
    assert!(counts.retries_executed >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_in_transaction_on_tokio_postgres() {
    let counts = lost_commit_acknowledgements(Strategy::InTransaction, Driver::TokioPostgres).await;
    assert!(counts.retries_executed >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_in_transaction() {
    let counts = lost_commit_acknowledgements(Strategy::InTransaction, Driver::Sqlx).await;
    assert!(counts.retries_executed >= 20);
}

/// What one pool-exhaustion run measured.
#[derive(Debug)]
struct PoolRun {
    /// From the first write's start to the last answer.
    total: Duration,
    /// When the last slow write answered, from the start.
    last_write: Duration,
    /// Each duplicate's time to its answer, from its own start.
    duplicate_latencies: Vec<Duration>,
    duplicate_409: usize,
    duplicate_replayed: usize,
    /// Most backends seen at once waiting on a lock (duplicates holding a connection).
    max_lock_waiters: i64,
    /// The longest lock wait seen. A duplicate's claim may wait a moment on the unique check
    /// while the original's completed row is being committed (PostgreSQL waits for an
    /// in-progress updater of a conflicting row); it must never wait for the original's handler.
    max_lock_wait: Duration,
}

/// A lock wait this long means a statement waited for a handler (which runs [`SLOW`]), not for
/// a commit in progress.
const HANDLER_WAIT: Duration = Duration::from_millis(150);

const SLOW_WRITES: usize = 32;
const DUPLICATES: usize = 16;
const SLOW: Duration = Duration::from_millis(300);
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(200);
/// Connections of the business pool: the first this many writes run at once and may complete
/// while their duplicates wait, so those duplicates may replay instead of answering 409.
const BUSINESS_POOL: u32 = 4;

/// 32 concurrent slow writes (distinct keys) on a business pool of 4 connections, then one
/// duplicate of each of 16 in-flight keys.
async fn pool_exhaustion(strategy: Strategy, claim_pool: bool, driver: Driver) -> PoolRun {
    let (db, direct) = fresh_pg(2).await;
    let config = ExecutorConfig {
        strategy,
        in_flight_wait: IN_FLIGHT_WAIT,
        ..ExecutorConfig::default()
    };
    match driver {
        Driver::Sqlx => {
            let pool = |n: u32| {
                PgPoolOptions::new()
                    .max_connections(n)
                    .acquire_timeout(Duration::from_secs(20))
                    .connect_with(db.options.clone())
            };
            let mut store = PgStore::new(pool(BUSINESS_POOL).await.unwrap());
            if claim_pool {
                store = store.with_claim_pool(pool(2).await.unwrap());
            }
            let exec = Executor::new(store, config);
            pool_exhaustion_run(&exec, &direct, pg_slow_id_writer, claim_pool).await
        }
        Driver::TokioPostgres | Driver::TokioPostgresBegunAtClaim => {
            let pool = |n: u32| TokioPgStore::pool(&db.url, n as usize).unwrap();
            let mut store = TokioPgStore::new(pool(BUSINESS_POOL))
                .with_begin_at_claim(matches!(driver, Driver::TokioPostgresBegunAtClaim));
            if claim_pool {
                store = store.with_claim_pool(pool(2));
            }
            let exec = Executor::new(store, config);
            pool_exhaustion_run(&exec, &direct, tokio_pg_slow_id_writer, claim_pool).await
        }
    }
}

async fn pool_exhaustion_run<S, H>(
    exec: &Executor<S>,
    direct: &sqlx::PgPool,
    writer: fn(String, Duration) -> H,
    claim_pool: bool,
) -> PoolRun
where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let strategy = exec.config().strategy;
    let req = |i: usize| request(scope("alice", &format!("slow-{i}")), json!({"i": i}), 1);
    let run = async {
        let start = Instant::now();
        let writes: Vec<_> = (0..SLOW_WRITES)
            .map(|i| {
                let (exec, req) = (exec.clone(), req(i));
                tokio::spawn(async move {
                    let r = exec.execute(req, writer(format!("slow-{i}"), SLOW)).await;
                    (r, start.elapsed())
                })
            })
            .collect();
        // Wait until every write has claimed its key (separate claim: committed claims, some may
        // already be completed; in-transaction: reservations are invisible until commit, so give
        // them a moment to begin).
        match strategy {
            Strategy::SeparateClaim => loop {
                let claimed: i64 = sqlx::query_scalar("SELECT count(*) FROM idempotency_records")
                    .fetch_one(direct)
                    .await
                    .unwrap();
                if claimed as usize == SLOW_WRITES {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            },
            Strategy::InTransaction => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        let duplicates: Vec<_> = (0..DUPLICATES)
            .map(|i| {
                let (exec, req) = (exec.clone(), req(i));
                tokio::spawn(async move {
                    let own_start = Instant::now();
                    let r = exec.execute(req, writer(format!("dup-{i}"), SLOW)).await;
                    (r, own_start.elapsed())
                })
            })
            .collect();
        // Sample how many backends wait on a lock while the writes run.
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (direct, stop) = (direct.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut max, mut longest) = (0i64, 0f64);
                while !stop.load(Ordering::Relaxed) {
                    let (n, waited): (i64, f64) = sqlx::query_as(
                        "SELECT count(*),
                                COALESCE(EXTRACT(EPOCH FROM max(clock_timestamp() - l.waitstart)), 0)::float8
                           FROM pg_stat_activity a
                           LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
                          WHERE a.wait_event_type = 'Lock' AND a.datname = current_database()",
                    )
                    .fetch_one(&direct)
                    .await
                    .unwrap();
                    max = max.max(n);
                    longest = longest.max(waited);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                (max, Duration::from_secs_f64(longest))
            })
        };
        let mut bodies = Vec::new();
        let mut last_write = Duration::ZERO;
        for w in writes {
            let (r, at) = w.await.unwrap();
            let outcome = r.unwrap_or_else(|e| panic!("a slow write failed: {e:?}"));
            assert_eq!(outcome.disposition, Disposition::Executed);
            bodies.push(outcome.response.body);
            last_write = last_write.max(at);
        }
        let mut run = PoolRun {
            total: Duration::ZERO,
            last_write,
            duplicate_latencies: Vec::new(),
            duplicate_409: 0,
            duplicate_replayed: 0,
            max_lock_waiters: 0,
            max_lock_wait: Duration::ZERO,
        };
        for (i, d) in duplicates.into_iter().enumerate() {
            let (r, latency) = d.await.unwrap();
            run.duplicate_latencies.push(latency);
            match r {
                Ok(o) => {
                    assert_eq!(o.disposition, Disposition::Replayed, "duplicate {i}");
                    assert_eq!(o.response.body, bodies[i], "duplicate {i} replays its key");
                    run.duplicate_replayed += 1;
                }
                Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight => {
                    run.duplicate_409 += 1;
                }
                Err(other) => panic!("duplicate {i}: {other:?}"),
            }
        }
        run.total = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        (run.max_lock_waiters, run.max_lock_wait) = sampler.await.unwrap();
        run
    };
    // Nothing deadlocks: the whole run is bounded.
    let mut run = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("pool exhaustion run deadlocked");
    assert!(
        pg_duplicates(direct).await.is_empty(),
        "no duplicate writes"
    );
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, SLOW_WRITES, "no duplicate ever wrote");
    run.duplicate_latencies.sort();
    eprintln!(
        "pool exhaustion, {strategy:?}, claim pool {claim_pool}: total {:?}, last write {:?}, \
         duplicates: {} x 409, {} replayed, latency min {:?} max {:?}; max lock waiters {}, longest lock wait {:?}",
        run.total,
        run.last_write,
        run.duplicate_409,
        run.duplicate_replayed,
        run.duplicate_latencies[0],
        run.duplicate_latencies[DUPLICATES - 1],
        run.max_lock_waiters,
        run.max_lock_wait,
    );
    run
}

/// The claim is short and runs on its own small pool: duplicates of in-flight keys get their 409
/// after the in-flight wait, long before the slow writes drain the business pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_separate_claim_with_claim_pool() {
    prompt_409s_with_a_claim_pool(Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_pool_exhaustion_separate_claim_with_claim_pool() {
    prompt_409s_with_a_claim_pool(Driver::TokioPostgres).await;
}

async fn prompt_409s_with_a_claim_pool(driver: Driver) {
    let run = pool_exhaustion(Strategy::SeparateClaim, true, driver).await;
    assert_eq!(run.duplicate_409 + run.duplicate_replayed, DUPLICATES);
    assert!(
        run.duplicate_409 >= DUPLICATES - BUSINESS_POOL as usize,
        "every duplicate of a key whose write is still queued: 409 ({} of {DUPLICATES})",
        run.duplicate_409
    );
    let slowest = *run.duplicate_latencies.iter().max().unwrap();
    assert!(
        slowest < IN_FLIGHT_WAIT + Duration::from_millis(400),
        "duplicates answered promptly: {slowest:?}"
    );
    assert!(
        slowest * 3 < run.last_write,
        "well before the writes finish"
    );
    assert!(
        run.max_lock_wait < HANDLER_WAIT,
        "nobody waits on a lock held for a handler: {:?} ({} at once)",
        run.max_lock_wait,
        run.max_lock_waiters
    );
}

/// One shared pool of 4 (`PgStore::new`): the claim statement of a duplicate queues for a
/// connection behind the business transactions (the pool is FIFO), so it is answered only once
/// the backlog drains (measured: ~2.4 s, when the originals have committed and the duplicates
/// replay). Nothing deadlocks and nothing is written twice. Prompt 409s under pool exhaustion
/// need `PgStore::with_claim_pool` (the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_separate_claim_shared_pool() {
    let run = pool_exhaustion(Strategy::SeparateClaim, false, Driver::Sqlx).await;
    assert_eq!(run.duplicate_409 + run.duplicate_replayed, DUPLICATES);
    assert!(
        run.max_lock_wait < HANDLER_WAIT,
        "nobody waits on a lock held for a handler: {:?} ({} at once)",
        run.max_lock_wait,
        run.max_lock_waiters
    );
}

/// In-transaction strategy on a pool of 4: duplicates queue for a connection like everything
/// else; by the time they get one the originals have committed, and they replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_in_transaction() {
    let run = pool_exhaustion(Strategy::InTransaction, false, Driver::Sqlx).await;
    assert_eq!(run.duplicate_409 + run.duplicate_replayed, DUPLICATES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_pool_exhaustion_in_transaction() {
    let run = pool_exhaustion(Strategy::InTransaction, false, Driver::TokioPostgres).await;
    assert_eq!(run.duplicate_409 + run.duplicate_replayed, DUPLICATES);
}

/// With 2 slow writes and 2 duplicates on a pool of 4: does an unrelated request find a free
/// connection? Neither strategy's duplicates hold one while they wait (separate claim: the claim
/// is committed apart; in-transaction: the advisory gate sends duplicates away at once).
async fn unrelated_request_latency(strategy: Strategy, driver: Driver) -> (Duration, i64, usize) {
    let (db, direct) = fresh_pg(2).await;
    let config = ExecutorConfig {
        strategy,
        in_flight_wait: Duration::from_millis(600),
        ..ExecutorConfig::default()
    };
    match driver {
        Driver::Sqlx => {
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(20))
                .connect_with(db.options.clone())
                .await
                .unwrap();
            let exec = Executor::new(PgStore::new(pool), config);
            unrelated_request_run(&exec, &direct, pg_slow_id_writer).await
        }
        Driver::TokioPostgres | Driver::TokioPostgresBegunAtClaim => {
            let store = TokioPgStore::new(TokioPgStore::pool(&db.url, 4).unwrap())
                .with_begin_at_claim(matches!(driver, Driver::TokioPostgresBegunAtClaim));
            let exec = Executor::new(store, config);
            unrelated_request_run(&exec, &direct, tokio_pg_slow_id_writer).await
        }
    }
}

async fn unrelated_request_run<S, H>(
    exec: &Executor<S>,
    direct: &sqlx::PgPool,
    writer: fn(String, Duration) -> H,
) -> (Duration, i64, usize)
where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let strategy = exec.config().strategy;
    let req = |k: &str| request(scope("alice", k), json!({}), 1);
    let slow: Vec<_> = (0..2)
        .map(|i| {
            let (exec, req) = (exec.clone(), req(&format!("held-{i}")));
            tokio::spawn(async move {
                exec.execute(
                    req,
                    writer(format!("held-{i}"), Duration::from_millis(1500)),
                )
                .await
            })
        })
        .collect();
    // Both slow writes hold their transaction (their rows are being written).
    loop {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND state = 'idle in transaction'",
        )
        .fetch_one(direct)
        .await
        .unwrap();
        if n >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let dups: Vec<_> = (0..2)
        .map(|i| {
            let (exec, req) = (exec.clone(), req(&format!("held-{i}")));
            tokio::spawn(async move {
                exec.execute(req, writer(format!("dup-{i}"), Duration::ZERO))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let lock_waiters: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND datname = current_database()",
    )
    .fetch_one(direct)
    .await
    .unwrap();
    let start = Instant::now();
    let unrelated = exec
        .execute(req("unrelated"), writer("unrelated".into(), Duration::ZERO))
        .await
        .expect("the unrelated request succeeds");
    let latency = start.elapsed();
    assert_eq!(unrelated.disposition, Disposition::Executed);
    let mut conflicts = 0;
    for d in dups {
        match d.await.unwrap() {
            Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight => conflicts += 1,
            other => panic!("a duplicate of a held key: {other:?}"),
        }
    }
    for s in slow {
        assert_eq!(s.await.unwrap().unwrap().disposition, Disposition::Executed);
    }
    assert!(pg_duplicates(direct).await.is_empty());
    eprintln!(
        "unrelated request, {strategy:?}: latency {latency:?}, lock waiters {lock_waiters}, \
         duplicate 409s {conflicts}"
    );
    (latency, lock_waiters, conflicts)
}

/// The in-transaction reservation is gated by an advisory lock: a duplicate of a key held by an
/// unfinished transaction gives its connection back and polls, instead of waiting on the unique
/// index with the connection held (which, before the gate, left 2 lock waiters and made the
/// unrelated request wait about 450 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_transaction_duplicates_hold_no_connection() {
    in_transaction_duplicates_free_their_connection(Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_in_transaction_duplicates_hold_no_connection() {
    in_transaction_duplicates_free_their_connection(Driver::TokioPostgres).await;
}

async fn in_transaction_duplicates_free_their_connection(driver: Driver) {
    let (latency, lock_waiters, conflicts) =
        unrelated_request_latency(Strategy::InTransaction, driver).await;
    assert_eq!(lock_waiters, 0, "no duplicate waits on the index");
    assert_eq!(conflicts, 2);
    assert!(
        latency < Duration::from_millis(300),
        "the unrelated request found a free connection: {latency:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_claim_duplicates_hold_no_connection() {
    separate_claim_duplicates_free_their_connection(Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_separate_claim_duplicates_hold_no_connection() {
    separate_claim_duplicates_free_their_connection(Driver::TokioPostgres).await;
}

/// Begun at the claim, a duplicate's claim finds the key held and its `BEGIN` is rolled back
/// with it: the connection goes back to the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_begun_at_the_claim_duplicates_hold_no_connection() {
    separate_claim_duplicates_free_their_connection(Driver::TokioPostgresBegunAtClaim).await;
}

async fn separate_claim_duplicates_free_their_connection(driver: Driver) {
    let (latency, lock_waiters, conflicts) =
        unrelated_request_latency(Strategy::SeparateClaim, driver).await;
    assert_eq!(lock_waiters, 0);
    assert_eq!(conflicts, 2);
    assert!(
        latency < Duration::from_millis(300),
        "the unrelated request found a free connection: {latency:?}"
    );
}

/// PostgreSQL restarts (immediate shutdown, as a crash) twice while 16 clients keep creating
/// records, retrying with the same key on 503 / 504 / 409. Afterwards every key has exactly one
/// write with a completed record holding that write's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_under_load() {
    use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
    const CLIENTS: usize = 16;
    const KEYS_PER_CLIENT: usize = 10;
    // A cluster of this test's own, so restarting it disturbs no other test.
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a dedicated cluster");
    let cluster = Arc::new(cluster);
    let db = TestDb::on_cluster(&cluster).await.expect("database");
    let direct = db.pool(2).await.unwrap();
    idemgen_runtime::migrate(&mut direct.acquire().await.unwrap())
        .await
        .unwrap();
    sqlx::query("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .execute(&direct)
        .await
        .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(1))
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let exec = Executor::new(
        PgStore::new(pool),
        ExecutorConfig {
            strategy: Strategy::SeparateClaim,
            // Claims orphaned by the crash are taken over by the retry.
            stale_claim: Duration::from_millis(400),
            in_flight_wait: Duration::from_millis(200),
            ..ExecutorConfig::default()
        },
    );
    let restarted = Arc::new(AtomicBool::new(false));
    let restarts = {
        let (cluster, restarted) = (cluster.clone(), restarted.clone());
        tokio::spawn(async move {
            for pause in [200, 500] {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let c = cluster.clone();
                tokio::task::spawn_blocking(move || c.restart_immediate())
                    .await
                    .unwrap()
                    .expect("restart");
            }
            restarted.store(true, Ordering::SeqCst);
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (exec, restarted) = (exec.clone(), restarted.clone());
            tokio::spawn(async move {
                let mut seen: Vec<u16> = Vec::new();
                let mut handler_errors: Vec<String> = Vec::new();
                let mut k = 0;
                // At least KEYS_PER_CLIENT keys, and keep creating until both restarts are over.
                while k < KEYS_PER_CLIENT || !restarted.load(Ordering::SeqCst) {
                    k += 1;
                    let label = format!("r-{c}-{k}");
                    let req = request(scope("alice", &label), json!({"k": k}), 1);
                    let mut tries = 0;
                    loop {
                        tries += 1;
                        assert!(tries <= 300, "{label} never converged");
                        let writer = pg_slow_id_writer(label.clone(), Duration::from_millis(20));
                        match exec.execute(req.clone(), writer).await {
                            Ok(_) => break,
                            Err(ExecuteError::Problem(p)) => seen.push(p.kind().status().as_u16()),
                            // The handler's own query failed (its connection died).
                            Err(ExecuteError::Handler(e)) => handler_errors.push(e),
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                (seen, handler_errors, k)
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut handler_errors = Vec::new();
    let mut keys = 0;
    for c in clients {
        let (seen, errors, created) = tokio::time::timeout(Duration::from_secs(60), c)
            .await
            .expect("clients finish")
            .unwrap();
        for s in seen {
            *statuses.entry(s).or_default() += 1;
        }
        handler_errors.extend(errors);
        keys += created;
    }
    restarts.await.unwrap();
    // The only problems: store unavailable, outcome unknown, in flight.
    for status in statuses.keys() {
        assert!(
            [503, 504, 409].contains(status),
            "unexpected status {status}: {statuses:?}"
        );
    }
    // A handler whose query fails mid-outage is the handler's error (the generated code answers
    // 500 for it); every one of them is a lost connection, never anything else.
    for e in &handler_errors {
        let e = e.to_lowercase();
        assert!(
            [
                "connection",
                "terminat",
                "shutdown",
                "closed",
                "broken pipe",
                "reset",
                "eof",
                "i/o",
                "io error"
            ]
            .iter()
            .any(|w| e.contains(w)),
            "handler error not caused by the outage: {e}"
        );
    }
    let direct = db.pool(2).await.unwrap();
    assert!(pg_duplicates(&direct).await.is_empty(), "no duplicates");
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM business_writes b
          WHERE NOT EXISTS (SELECT 1 FROM idempotency_records r
                             WHERE r.idempotency_key = b.label AND r.state = 'completed'
                               AND r.response_body = convert_to('write ' || b.id, 'UTF8'))",
    )
    .fetch_one(&direct)
    .await
    .unwrap();
    assert_eq!(
        orphans, 0,
        "every write has the completed record of its result"
    );
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, keys, "every key: one write");
    let faults = statuses.get(&503).copied().unwrap_or(0)
        + statuses.get(&504).copied().unwrap_or(0)
        + handler_errors.len();
    eprintln!(
        "restart under load: {keys} keys, 2 restarts, problems by status {statuses:?}, \
         handler errors from lost connections {}, duplicates 0",
        handler_errors.len()
    );
    assert!(faults > 0, "the restarts were felt");
}

/// With the separate-claim strategy and the default `stale_claim` (300 s) and lease: a key
/// answered 504 (the connection cut right after `COMMIT` was sent, or before it) is released
/// behind the in-doubt transaction, so its retry gets the replay (the commit landed) or executes
/// once (it did not) within about a second, never a second write and never a wait for
/// `stale_claim`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_answered_504_is_released_behind_the_in_doubt_commit_and_its_retry_converges_at_once()
{
    released_after_504(Driver::Sqlx).await;
}

/// The same on `TokioPgStore`, whose completion travels with its `COMMIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_key_answered_504_is_released_behind_the_in_doubt_commit_and_its_retry_converges_at_once()
 {
    released_after_504(Driver::TokioPostgres).await;
}

async fn released_after_504(driver: Driver) {
    let (db, direct) = fresh_pg(4).await;
    let upstream = (std::net::Ipv4Addr::LOCALHOST, db.options.get_port()).into();
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    match driver {
        Driver::Sqlx => {
            let exec = Executor::new(
                proxied_pg_store(&db, &proxy).await,
                ExecutorConfig::default(),
            );
            released_after_504_run(&exec, &proxy, &direct, pg_id_writer).await;
        }
        Driver::TokioPostgres | Driver::TokioPostgresBegunAtClaim => {
            let store = proxied_tokio_pg_store(&db, &proxy)
                .with_begin_at_claim(matches!(driver, Driver::TokioPostgresBegunAtClaim));
            let exec = Executor::new(store, ExecutorConfig::default());
            released_after_504_run(&exec, &proxy, &direct, tokio_pg_id_writer).await;
        }
    }
}

async fn released_after_504_run<S, H>(
    exec: &Executor<S>,
    proxy: &FaultProxy,
    direct: &sqlx::PgPool,
    writer: fn(String) -> H,
) where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    const KEYS: usize = 30;
    assert_eq!(exec.config().stale_claim, Duration::from_secs(300));
    let (mut unknown, mut replayed, mut executed) = (0, 0, 0);
    let mut slowest = Duration::ZERO;
    for i in 0..KEYS {
        let label = format!("in-doubt-{i}");
        let req = request(scope("alice", &label), json!({"i": i}), 1);
        let fault = if i % 2 == 0 {
            CommitFault::CutAfterForward
        } else {
            CommitFault::DropCommit
        };
        proxy.arm(fault);
        let first = exec.execute(req.clone(), writer(label.clone())).await;
        assert_eq!(proxy.disarm(), None, "key {i}: the armed fault fired");
        match first {
            Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::OutcomeUnknown => {
                unknown += 1;
            }
            // A COMMIT forwarded before the cut may be visible to the read-back already.
            Ok(outcome) if fault == CommitFault::CutAfterForward => {
                assert_eq!(outcome.disposition, Disposition::Executed);
                continue;
            }
            other => panic!("key {i} ({fault:?}): {other:?}"),
        }
        // The client's retry, at once and then every 50 ms.
        let since = Instant::now();
        let retry = loop {
            match exec.execute(req.clone(), writer(label.clone())).await {
                Ok(outcome) => break outcome,
                Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight => {
                    assert!(
                        since.elapsed() < Duration::from_secs(10),
                        "key {i} ({fault:?}): still held {:?} after the 504",
                        since.elapsed()
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("key {i} ({fault:?}): retry failed: {other:?}"),
            }
        };
        let took = since.elapsed();
        slowest = slowest.max(took);
        let ids = pg_write_ids(direct, &label).await;
        assert_eq!(
            ids.len(),
            1,
            "key {i} ({fault:?}): exactly one write: {ids:?}"
        );
        assert_eq!(retry.response.body, format!("write {}", ids[0]));
        match retry.disposition {
            Disposition::Replayed => replayed += 1,
            Disposition::Executed => executed += 1,
            other => panic!("key {i}: {other:?}"),
        }
        if fault == CommitFault::DropCommit {
            assert_eq!(
                retry.disposition,
                Disposition::Executed,
                "key {i}: the COMMIT never reached the server; the retry executes"
            );
        }
        let (state, body) = pg_record(direct, &req.scope).await.expect("a record");
        assert_eq!(state, "completed", "key {i}");
        assert_eq!(body, Some(format!("write {}", ids[0]).into_bytes()));
    }
    assert_eq!(pg_duplicates(direct).await.len(), 0);
    assert!(unknown >= KEYS / 2, "{unknown} answers 504");
    assert!(
        // Seconds, not `stale_claim`'s 300 (bounded loosely: a loaded CI machine is slow).
        slowest < Duration::from_secs(5),
        "a retry after 504 took {slowest:?}"
    );
    eprintln!(
        "after 504: {unknown} keys, retries replayed {replayed}, executed {executed}; slowest retry \
         {slowest:?} (stale_claim 300 s)"
    );
}

/// The argument behind releasing after 504, on the real statements: while the completion's
/// transaction is open (in doubt), the token-guarded release on another connection waits for its
/// row lock; committed, the release deletes nothing; rolled back, it deletes the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_waits_for_the_in_doubt_completion_and_rechecks_the_row() {
    use idemgen_runtime::Store;
    use idemgen_runtime::engine::{ClaimToken, StoredResponse};
    let (_db, pool) = fresh_pg(6).await;
    let store = Arc::new(PgStore::new(pool.clone()));
    for commit in [true, false] {
        let req = request(scope("alice", &format!("ordered-{commit}")), json!({}), 1);
        let token = ClaimToken::generate();
        claim_fresh(&*store, &req, token).await;
        let mut tx = store.begin().await.unwrap();
        let stored = StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: b"done".to_vec(),
        };
        assert!(
            store
                .complete(&mut tx, &req.scope, token, &stored, None)
                .await
                .unwrap()
        );
        let release = tokio::spawn({
            let store = Arc::clone(&store);
            let scope = req.scope.clone();
            async move { store.release(&scope, token).await }
        });
        // The release is blocked on the completion's row lock.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock'
                    AND query LIKE 'DELETE FROM idempotency_records%'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if waiting == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the release never waited");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!release.is_finished(), "the release went ahead of the lock");
        if commit {
            store.commit(tx).await.unwrap();
        } else {
            store.rollback(tx).await.unwrap();
        }
        release.await.unwrap().unwrap();
        let record = pg_record(&pool, &req.scope).await;
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

/// A release behind a row lock that is not let go (a server yet to notice a half-open
/// connection holds it) gives up after its 5 s `lock_timeout` instead of holding its claim-pool
/// connection: it deletes nothing, and the same release succeeds once the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_behind_a_lock_never_let_go_gives_up_and_deletes_nothing() {
    let (db, pool) = fresh_pg(4).await;
    let store = PgStore::new(pool.clone());
    release_behind_a_lock_never_let_go(&db, &pool, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_release_behind_a_lock_never_let_go_gives_up_and_deletes_nothing() {
    let (db, pool, store) = fresh_tokio_pg(4).await;
    release_behind_a_lock_never_let_go(&db, &pool, &store).await;
}

async fn release_behind_a_lock_never_let_go<S: Store>(db: &TestDb, pool: &sqlx::PgPool, store: &S) {
    use idemgen_runtime::engine::{ClaimToken, StoreError};
    let req = request(scope("alice", "held"), json!({}), 1);
    let token = ClaimToken::generate();
    claim_fresh(store, &req, token).await;
    // Another session holds the record's row lock, as an in-doubt completion does.
    let mut held = hold_record_lock(db, &req.scope).await;
    let started = Instant::now();
    let gave_up = tokio::time::timeout(Duration::from_secs(30), store.release(&req.scope, token))
        .await
        .expect("the release waited for the lock without a limit");
    let waited = started.elapsed();
    assert!(
        matches!(gave_up, Err(StoreError::LockTimeout)),
        "{gave_up:?}"
    );
    assert!(
        waited >= Duration::from_millis(4_900) && waited < Duration::from_secs(30),
        "{waited:?}"
    );
    let (state, _) = pg_record(pool, &req.scope).await.expect("still claimed");
    assert_eq!(state, "claimed");
    // The lock's session ends: the release goes through.
    sqlx::raw_sql("ROLLBACK").execute(&mut held).await.unwrap();
    store.release(&req.scope, token).await.unwrap();
    assert_eq!(pg_record(pool, &req.scope).await, None);
}

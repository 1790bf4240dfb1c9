//! Claims committed without waiting for their WAL flush (`synchronous_commit = off` on the claim
//! pool) across a server crash: a lost claim only frees a key whose write cannot have committed,
//! and a committed write always brings its claim with it (WAL is sequential).

use std::future::Future;
use std::sync::Arc;

use idemgen_runtime::engine::{ClaimOutcome, ClaimRequest, ClaimToken, Disposition};
use idemgen_runtime::{Executor, PgStore, Store, Strategy, TokioPgStore, TxHandle};
use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::Executor as _;
use sqlx::postgres::PgPoolOptions;

use crate::support::*;

/// A crash-testable cluster: fsync on, and a WAL writer so lazy that an asynchronous commit
/// stays in shared memory until something else flushes it.
fn lazy_wal_cluster() -> Cluster {
    Cluster::start(&ClusterOptions {
        fsync: true,
        max_connections: 50,
        settings: vec![("wal_writer_delay".into(), "'10s'".into())],
    })
    .expect("dedicated cluster")
}

async fn setup(db: &TestDb) {
    let mut conn = db.connect().await.unwrap();
    idemgen_runtime::migrate(&mut conn).await.unwrap();
    conn.execute("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .await
        .unwrap();
}

/// How the store's claims commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claims {
    /// A claim pool whose sessions run with `synchronous_commit = off` (what services did
    /// before the store set it per statement), with the store's default on top.
    SessionOff,
    /// The store's default: each claim statement sets it for its own transaction; the claim
    /// pool's sessions keep the server's `synchronous_commit = on`.
    StoreDefault,
    /// `PgStore::with_synchronous_claims(true)`: claims wait for their flush.
    Synchronous,
}

/// A PostgreSQL store as these tests open it on one database: the store, its claims on a pool of
/// their own, and a sqlx pool for the checks.
trait Driver: Store + Sized {
    fn open(db: &TestDb, claims: Claims) -> impl Future<Output = (Self, sqlx::PgPool)> + Send;
    fn business() -> Arc<dyn Business<Self>>;
}

impl Driver for PgStore {
    async fn open(db: &TestDb, claims: Claims) -> (PgStore, sqlx::PgPool) {
        let pool = db.pool(4).await.unwrap();
        let mut options = PgPoolOptions::new().max_connections(4);
        if claims == Claims::SessionOff {
            options = options.after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("SET synchronous_commit = off").await?;
                    Ok(())
                })
            });
        }
        let claim_pool = options.connect_with(db.options.clone()).await.unwrap();
        let store = PgStore::new(pool.clone())
            .with_claim_pool(claim_pool)
            .with_synchronous_claims(claims == Claims::Synchronous);
        (store, pool)
    }
    fn business() -> Arc<dyn Business<PgStore>> {
        pg_business()
    }
}

impl Driver for TokioPgStore {
    async fn open(db: &TestDb, claims: Claims) -> (TokioPgStore, sqlx::PgPool) {
        assert_ne!(
            claims,
            Claims::SessionOff,
            "sessions with synchronous_commit = off are a sqlx pool's set-up"
        );
        let pool = db.pool(4).await.unwrap();
        let store = TokioPgStore::new(TokioPgStore::pool(&db.url, 4).unwrap())
            .with_claim_pool(TokioPgStore::pool(&db.url, 4).unwrap())
            .with_synchronous_claims(claims == Claims::Synchronous);
        (store, pool)
    }
    fn business() -> Arc<dyn Business<TokioPgStore>> {
        tokio_pg_business()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_claim_lost_in_a_crash_frees_only_an_unwritten_key() {
    let losses = crash_rounds::<PgStore>(Claims::SessionOff).await;
    assert!(
        losses > 0,
        "the crash never lost an asynchronous claim: the test did not bite"
    );
    eprintln!("durability: {losses}/5 asynchronous claims lost in the crash, 0 duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stores_default_claim_commits_asynchronously_and_loses_only_unwritten_keys() {
    default_claims_lost_only_unwritten::<PgStore>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_the_stores_default_claim_commits_asynchronously_and_loses_only_unwritten_keys()
 {
    default_claims_lost_only_unwritten::<TokioPgStore>().await;
}

async fn default_claims_lost_only_unwritten<S: Driver>() {
    let losses = crash_rounds::<S>(Claims::StoreDefault).await;
    assert!(
        losses > 0,
        "the crash never lost a claim of the store's default: its commit waited for the flush"
    );
    eprintln!("durability: {losses}/5 claims (store default) lost in the crash, 0 duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_claims_survive_a_crash() {
    let losses = crash_rounds::<PgStore>(Claims::Synchronous).await;
    assert_eq!(losses, 0, "a synchronous claim was lost in the crash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_synchronous_claims_survive_a_crash() {
    let losses = crash_rounds::<TokioPgStore>(Claims::Synchronous).await;
    assert_eq!(losses, 0, "a synchronous claim was lost in the crash");
}

/// Five rounds of: claim a fresh key, crash the server before the business transaction, then
/// check that no write exists without its record and that the retry executes exactly once.
/// Returns how many claims the crashes lost.
async fn crash_rounds<S: Driver>(claims: Claims) -> i64 {
    let cluster = lazy_wal_cluster();
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    setup(&db).await;
    let mut losses = 0;
    for round in 0..5 {
        let (store, pool) = S::open(&db, claims).await;
        let s = scope("alice", &format!("crash-{round}"));
        let req = request(s.clone(), json!({"n": round}), 1);
        let claim = ClaimRequest {
            scope: &s,
            fingerprint: &req.fingerprint,
            fingerprint_version: 1,
            token: ClaimToken::generate(),
            holder: None,
            stale_after: std::time::Duration::from_secs(300),
            retention: None,
        };
        let outcome = store.claim(&claim).await.unwrap();
        assert!(matches!(
            outcome,
            ClaimOutcome::Claimed { taken_over: false }
        ));
        // The server dies before the business transaction could commit.
        pool.close().await;
        drop(store);
        cluster.restart_immediate().unwrap();
        let (store, pool) = store_after_restart::<S>(&db, claims).await;
        let survived = store
            .read(&s, std::time::Duration::from_secs(300))
            .await
            .unwrap()
            .is_some();
        if !survived {
            losses += 1;
        }
        // Whether or not the claim survived, no write exists without its record ...
        let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(writes, round, "no write committed for the crashed attempt");
        if survived {
            // A surviving claim blocks the key until it is stale; release it as takeover would.
            sqlx::query("DELETE FROM idempotency_records WHERE idempotency_key = $1")
                .bind(s.key.as_str())
                .execute(&pool)
                .await
                .unwrap();
        }
        // ... and the retry executes exactly once.
        let env = Env {
            exec: Executor::new(store, config(Strategy::SeparateClaim)),
            business: S::business(),
            ledger: Ledger::Pg(pool.clone()),
        };
        let retry = attempt(&env, req.clone(), Plan::created(&format!("w{round}")))
            .await
            .unwrap();
        assert_eq!(retry.disposition, Disposition::Executed);
        let again = attempt(&env, req, Plan::created("never")).await.unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
        assert_eq!(env.ledger.count(&format!("w{round}")).await, 1);
        assert_eq!(env.ledger.count("never").await, 0);
        pool.close().await;
    }
    losses
}

async fn store_after_restart<S: Driver>(db: &TestDb, claims: Claims) -> (S, sqlx::PgPool) {
    // Connections need the server back up; TestDb::connect retries until it is.
    drop(db.connect().await.unwrap());
    S::open(db, claims).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_write_brings_its_async_claim_through_a_crash() {
    committed_write_through_a_crash::<PgStore>(Claims::SessionOff).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_write_brings_its_claim_of_the_stores_default_through_a_crash() {
    committed_write_through_a_crash::<PgStore>(Claims::StoreDefault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_committed_write_brings_its_claim_of_the_stores_default_through_a_crash() {
    committed_write_through_a_crash::<TokioPgStore>(Claims::StoreDefault).await;
}

async fn committed_write_through_a_crash<S: Driver>(claims: Claims) {
    let cluster = lazy_wal_cluster();
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    setup(&db).await;
    let (store, pool) = S::open(&db, claims).await;
    let env = Env {
        exec: Executor::new(store, config(Strategy::SeparateClaim)),
        business: S::business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let req = request(scope("alice", "flushed"), json!({}), 1);
    let first = attempt(&env, req.clone(), Plan::created("kept"))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);
    pool.close().await;
    drop(env);
    cluster.restart_immediate().unwrap();
    let (store, pool) = store_after_restart::<S>(&db, claims).await;
    let env = Env {
        exec: Executor::new(store, config(Strategy::SeparateClaim)),
        business: Arc::new(NoWrites),
        ledger: Ledger::Pg(pool.clone()),
    };
    // The synchronous business commit flushed all WAL before it, the async claim included:
    // the record is completed and the retry replays.
    let retry = attempt(&env, req, Plan::created("again")).await.unwrap();
    assert_eq!(retry.disposition, Disposition::Replayed);
    assert_eq!(retry.response, first.response);
    assert_eq!(env.ledger.count("kept").await, 1);
}

/// A business writer that must never be called.
struct NoWrites;

impl<S: Store> Business<S> for NoWrites {
    fn write<'a>(
        &'a self,
        _tx: &'a mut TxHandle<S>,
        _label: String,
    ) -> idemgen_runtime::engine::HandlerFuture<'a, (), String> {
        Box::pin(async { Err("a replay ran the handler".to_owned()) })
    }
}

/// protocol.md, "Durability of claims": a claim committed asynchronously and lost in a crash
/// while its attempt is still running, before its handler's first database touch. The retry
/// claims the key afresh; while its handler runs, the first handler writes, its completion
/// matches no row (its token is not the claim's), it rolls back and answers 409; the retry
/// completes: one write. Rounds until a crash loses the claim (the WAL writer, or a lease
/// renewal's synchronous commit, may have flushed it first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_attempt_whose_async_claim_a_crash_lost_still_makes_one_write() {
    live_attempt_after_a_lost_claim::<PgStore>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_live_attempt_whose_async_claim_a_crash_lost_still_makes_one_write() {
    live_attempt_after_a_lost_claim::<TokioPgStore>().await;
}

async fn live_attempt_after_a_lost_claim<S: Driver>() {
    let cluster = lazy_wal_cluster();
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    setup(&db).await;
    let mut lost = false;
    for round in 0..8 {
        let (store, pool) = S::open(&db, Claims::StoreDefault).await;
        let first_exec = Executor::new(store, config(Strategy::SeparateClaim));
        let req = request(scope("alice", &format!("live-{round}")), json!({}), 1);
        let first_label = format!("first-{round}");
        // The first attempt claims, then waits before touching the database (as a handler
        // calling another service first does): it holds no connection.
        let (first, go) = paused_attempt(&first_exec, &req, &first_label).await;
        cluster.restart_immediate().unwrap();
        let (retry_store, retry_pool) = store_after_restart::<S>(&db, Claims::StoreDefault).await;
        let survived = retry_store
            .read(&req.scope, std::time::Duration::from_secs(300))
            .await
            .unwrap()
            .is_some();
        if survived {
            // The claim was flushed before the crash: the first attempt simply completes.
            go.notify_one();
            let done = first.await.unwrap().unwrap();
            assert_eq!(done.disposition, Disposition::Executed, "round {round}");
            assert_eq!(pg_write_ids(&retry_pool, &first_label).await.len(), 1);
            pool.close().await;
            retry_pool.close().await;
            continue;
        }
        lost = true;
        // The retry, in another process's executor, claims afresh; its handler waits too.
        let retry_exec = Executor::new(retry_store, config(Strategy::SeparateClaim));
        let retry_label = format!("retry-{round}");
        let (retry, retry_go) = paused_attempt(&retry_exec, &req, &retry_label).await;
        // The first handler goes on: it writes, its completion is guarded by a token that is not
        // the record's, so its write rolls back and it answers 409 (the retry is in flight).
        go.notify_one();
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), first)
            .await
            .expect("the first attempt never finished")
            .unwrap();
        assert_eq!(problem_status(&first), Some(409), "{first:?}");
        assert_eq!(
            pg_write_ids(&retry_pool, &first_label).await,
            Vec::<i64>::new()
        );
        // The retry completes, and the key is answered by its write from then on.
        retry_go.notify_one();
        let retried = retry.await.unwrap().unwrap();
        assert_eq!(retried.disposition, Disposition::Executed);
        assert_eq!(pg_write_ids(&retry_pool, &retry_label).await.len(), 1);
        let env = Env {
            exec: retry_exec,
            business: S::business(),
            ledger: Ledger::Pg(retry_pool.clone()),
        };
        let again = attempt(&env, req, Plan::created("never")).await.unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
        assert_eq!(again.response, retried.response);
        assert_eq!(pg_write_ids(&retry_pool, "never").await, Vec::<i64>::new());
        eprintln!("durability: a live attempt's claim lost in round {round}, one write");
        pool.close().await;
        retry_pool.close().await;
        break;
    }
    assert!(
        lost,
        "no crash lost an asynchronous claim in 8 rounds: the test did not bite"
    );
}

/// An attempt of `req` on `exec`, spawned, whose handler has claimed the key and waits, before
/// touching the database, until the returned `Notify` lets it write `label`.
async fn paused_attempt<S: Driver>(
    exec: &Executor<S>,
    req: &idemgen_runtime::engine::IdempotentRequest,
    label: &str,
) -> (tokio::task::JoinHandle<Attempt>, Arc<tokio::sync::Notify>) {
    let (started, go) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let attempt = {
        let (exec, req, label) = (exec.clone(), req.clone(), label.to_owned());
        let (started, go) = (started.clone(), go.clone());
        let business = S::business();
        tokio::spawn(async move {
            exec.execute(req, move |tx: &mut TxHandle<S>| {
                Box::pin(async move {
                    assert!(!tx.is_open(), "no transaction before the first touch");
                    started.notify_one();
                    go.notified().await;
                    business.write(tx, label.clone()).await?;
                    Ok(TestResponse {
                        status: 201,
                        body: format!("made {label}"),
                        headers: vec![],
                    })
                })
            })
            .await
        })
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), started.notified())
        .await
        .expect("the attempt never claimed");
    (attempt, go)
}

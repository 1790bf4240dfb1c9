//! What the PostgreSQL stores send per attempt, counted by `pg_stat_statements` on a dedicated
//! cluster: replays of a key the store has seen with a record are one plain read (in-transaction:
//! no gated `BEGIN`, no `ROLLBACK`; separate claim: no claim statement), fresh keys take the gate
//! or the claim first, and a store that has not seen a key's record finds it through the gate or
//! the claim once, then reads first. The same counts hold for the sqlx store and the
//! tokio-postgres store (and for the latter with its transaction begun at the claim).

use std::sync::Arc;

use idemgen_runtime::engine::Disposition;
use idemgen_runtime::{Executor, PgStore, Store, Strategy, TokioPgStore};
use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::PgPool;

use crate::support::*;

/// Calls so far of the statements whose text contains each of `needles`.
async fn calls(observer: &PgPool, needles: &[&str]) -> Vec<i64> {
    let mut counts = Vec::new();
    for needle in needles {
        let n: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND strpos(query, $1) > 0",
        )
        .bind(*needle)
        .fetch_one(observer)
        .await
        .unwrap();
        counts.push(n);
    }
    counts
}

/// The gate's `SELECT`, the look before it, `ROLLBACK` and `BEGIN` (the in-transaction
/// strategy's only `BEGIN`s are the gate's). `pg_stat_statements` counts statements that
/// completed: a gate that raised (the key has a record) counts its `BEGIN`, not its `SELECT`.
const GATE: &str = "idemgen_gate(";
const LOOK: &str = "AND NOT pg_is_in_recovery()";
const ROLLBACK: &str = "ROLLBACK";
const BEGIN: &str = "BEGIN";
const ALL: [&str; 4] = [GATE, LOOK, ROLLBACK, BEGIN];

/// A dedicated cluster with `pg_stat_statements`, migrated, with the business table.
async fn counted_cluster() -> (Cluster, TestDb, PgPool) {
    let cluster = Cluster::start(&ClusterOptions {
        fsync: false,
        max_connections: 30,
        settings: vec![(
            "shared_preload_libraries".into(),
            "'pg_stat_statements'".into(),
        )],
    })
    .expect("dedicated cluster");
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    let pool = db.pool(8).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    idemgen_runtime::migrate(&mut conn).await.unwrap();
    for statement in [
        "CREATE EXTENSION pg_stat_statements",
        "CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    drop(conn);
    (cluster, db, pool)
}

/// A store of one kind on the counted database: each call is a new store (another process, with
/// nothing seen).
type NewStore<S> = Box<dyn Fn() -> S>;

fn sqlx_stores(pool: &PgPool) -> NewStore<PgStore> {
    let pool = pool.clone();
    Box::new(move || PgStore::new(pool.clone()))
}

fn tokio_stores(db: &TestDb, begin_at_claim: bool) -> NewStore<TokioPgStore> {
    let url = db.url.clone();
    Box::new(move || {
        let pool = TokioPgStore::pool(&url, 8).expect("tokio-postgres pool");
        TokioPgStore::new(pool).with_begin_at_claim(begin_at_claim)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_transaction_replays_of_a_seen_key_are_one_read_and_fresh_keys_take_the_gate_first() {
    let (_cluster, _db, pool) = counted_cluster().await;
    in_transaction_counts(&pool, sqlx_stores(&pool), pg_business()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_transaction_counts_on_the_tokio_postgres_store() {
    let (_cluster, db, pool) = counted_cluster().await;
    in_transaction_counts(&pool, tokio_stores(&db, false), tokio_pg_business()).await;
}

async fn in_transaction_counts<S: Store>(
    pool: &PgPool,
    stores: NewStore<S>,
    business: Arc<dyn Business<S>>,
) {
    let env = |store: S| Env {
        exec: Executor::new(store, config(Strategy::InTransaction)),
        business: business.clone(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let first = env(stores());
    let req = request(scope("alice", "counted"), json!({"n": 1}), 1);
    let base = calls(pool, &ALL).await;
    let delta = |now: Vec<i64>| -> Vec<i64> { now.iter().zip(&base).map(|(a, b)| a - b).collect() };

    // A fresh key: the gate, and no look before it.
    let created = attempt(&first, req.clone(), Plan::created("once"))
        .await
        .unwrap();
    assert_eq!(created.disposition, Disposition::Executed);
    assert_eq!(delta(calls(pool, &ALL).await), [1, 0, 0, 1]);

    // Its replays through the store that completed it: one read each, no gate, no rollback.
    for _ in 0..5 {
        let again = attempt(&first, req.clone(), Plan::created("never"))
            .await
            .unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
        assert_eq!(again.response, created.response);
    }
    assert_eq!(delta(calls(pool, &ALL).await), [1, 5, 0, 1]);

    // Another store (another process) has not seen the key: its gate finds the record and rolls
    // back (two round trips), then it reads first too.
    let other = env(stores());
    for _ in 0..3 {
        let again = attempt(&other, req.clone(), Plan::created("never"))
            .await
            .unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
    }
    assert_eq!(delta(calls(pool, &ALL).await), [1, 7, 1, 2]);

    // A different request under the key is judged from the read as from the gate: 422.
    let reused = attempt(
        &first,
        request(scope("alice", "counted"), json!({"n": 2}), 1),
        Plan::created("never"),
    )
    .await;
    assert!(
        matches!(&reused, Err(e) if format!("{e:?}").contains("KeyReused")),
        "{reused:?}"
    );
    assert_eq!(delta(calls(pool, &ALL).await), [1, 8, 1, 2]);
    assert_eq!(first.ledger.count("once").await, 1);
    assert_eq!(first.ledger.count("never").await, 0);
}

/// The claim statement (its first CTE).
const CLAIM: &str = "WITH existing AS";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_claim_replays_of_a_seen_key_are_one_read_and_fresh_keys_claim_first() {
    let (_cluster, _db, pool) = counted_cluster().await;
    separate_claim_counts(&pool, sqlx_stores(&pool), pg_business()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_claim_counts_on_the_tokio_postgres_store() {
    let (_cluster, db, pool) = counted_cluster().await;
    separate_claim_counts(&pool, tokio_stores(&db, false), tokio_pg_business()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_claim_counts_on_the_tokio_postgres_store_begun_at_the_claim() {
    let (_cluster, db, pool) = counted_cluster().await;
    separate_claim_counts(&pool, tokio_stores(&db, true), tokio_pg_business()).await;
}

async fn separate_claim_counts<S: Store>(
    pool: &PgPool,
    stores: NewStore<S>,
    business: Arc<dyn Business<S>>,
) {
    let env = |store: S| Env {
        exec: Executor::new(store, config(Strategy::SeparateClaim)),
        business: business.clone(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let first = env(stores());
    let req = request(scope("alice", "claimed"), json!({"n": 1}), 1);
    let base = calls(pool, &[CLAIM, LOOK]).await;
    let delta = |now: Vec<i64>| -> Vec<i64> { now.iter().zip(&base).map(|(a, b)| a - b).collect() };

    let created = attempt(&first, req.clone(), Plan::created("once"))
        .await
        .unwrap();
    assert_eq!(created.disposition, Disposition::Executed);
    assert_eq!(delta(calls(pool, &[CLAIM, LOOK]).await), [1, 0]);
    for _ in 0..5 {
        let again = attempt(&first, req.clone(), Plan::created("never"))
            .await
            .unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
        assert_eq!(again.response, created.response);
    }
    assert_eq!(delta(calls(pool, &[CLAIM, LOOK]).await), [1, 5]);

    // A store that has not seen the key: the claim statement finds the record once.
    let other = env(stores());
    for _ in 0..3 {
        let again = attempt(&other, req.clone(), Plan::created("never"))
            .await
            .unwrap();
        assert_eq!(again.disposition, Disposition::Replayed);
    }
    assert_eq!(delta(calls(pool, &[CLAIM, LOOK]).await), [2, 7]);

    // A key in flight (never completed, so not seen) takes the claim statement, which waits for
    // the attempt holding it as always: 409 once the in-flight wait is over.
    let busy = request(scope("alice", "in-flight"), json!({"n": 1}), 1);
    let slow = {
        let first = first.clone();
        let busy = busy.clone();
        let mut plan = Plan::created("slow");
        plan.delay = std::time::Duration::from_millis(2_500);
        tokio::spawn(async move { attempt(&first, busy, plan).await })
    };
    // Until the slow attempt holds its claim (a fixed sleep is not enough on a loaded machine).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let claimed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM idempotency_records WHERE state = 'claimed'")
                .fetch_one(pool)
                .await
                .unwrap();
        if claimed == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slow attempt never claimed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let waited = attempt(&first, busy.clone(), Plan::created("never")).await;
    assert!(
        matches!(&waited, Err(e) if format!("{e:?}").contains("InFlight")),
        "{waited:?}"
    );
    assert_eq!(
        slow.await.unwrap().unwrap().disposition,
        Disposition::Executed
    );
    assert_eq!(first.ledger.count("once").await, 1);
    assert_eq!(first.ledger.count("slow").await, 1);
    assert_eq!(first.ledger.count("never").await, 0);
}

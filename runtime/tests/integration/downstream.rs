//! Calls a handler makes to other services (docs/downstream.md): derived keys for downstream
//! steps, and a separate-claim attempt holding no pool connection before its first write.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use idemgen_protocol::{DerivedKey, IdempotencyKey};
use idemgen_runtime::engine::{Disposition, ExecuteError, Scope};
use idemgen_runtime::{Executor, PgStore, ProblemKind, Store, Strategy, TokioPgStore, TxHandle};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Barrier;

use crate::support::*;

/// Connections of the business pool, which the claims share (`PgStore::new`).
const POOL: u32 = 4;
/// Attempts beyond the pool's size.
const EXTRA: usize = 8;
/// How long an attempt waits for a pool connection before the pool gives up (503).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the "downstream" waits for every attempt to be in flight before failing.
const DOWNSTREAM_WAIT: Duration = Duration::from_secs(8);

/// How a handler orders its downstream call and its first touch of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// The downstream call first, then the write (what docs/downstream.md prescribes).
    DownstreamFirst,
    /// The database touched first, then the downstream call: the connection is held across
    /// it, as every separate-claim attempt did before its transaction began lazily.
    DatabaseFirst,
}

#[derive(Debug, Default)]
struct PoolRun {
    executed: usize,
    /// 503: the pool timed out (on a claim or on the handler's first touch).
    unavailable: usize,
    /// The downstream never saw every attempt in flight.
    downstream_failed: usize,
    /// `is_open` before the handler's first touch, per attempt.
    open_before: Vec<bool>,
}

/// `POOL + EXTRA` concurrent separate-claim attempts on a pool of `POOL` whose downstream (a
/// barrier) answers only once all of them are in flight.
async fn downstream_under_a_small_pool(order: Order) -> (PoolRun, i64) {
    let (db, direct) = fresh_pg(2).await;
    let pool = PgPoolOptions::new()
        .max_connections(POOL)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let exec = Executor::new(PgStore::new(pool), config(Strategy::SeparateClaim));
    downstream_run(exec, pg_business(), order, &direct).await
}

async fn downstream_run<S: Store>(
    exec: Executor<S>,
    business: Arc<dyn Business<S>>,
    order: Order,
    direct: &sqlx::PgPool,
) -> (PoolRun, i64) {
    let attempts = POOL as usize + EXTRA;
    let downstream = Arc::new(Barrier::new(attempts));
    let tasks: Vec<_> = (0..attempts)
        .map(|i| {
            let (exec, downstream, business) = (exec.clone(), downstream.clone(), business.clone());
            let req = request(scope("alice", &format!("ds-{i}")), json!({"i": i}), 1);
            tokio::spawn(async move {
                exec.execute(req, move |tx: &mut TxHandle<S>| {
                    Box::pin(async move {
                        let open_before = tx.is_open();
                        if order == Order::DatabaseFirst {
                            tx.tx().await.map_err(|e| e.to_string())?;
                        }
                        tokio::time::timeout(DOWNSTREAM_WAIT, downstream.wait())
                            .await
                            .map_err(|_| "downstream: not every attempt arrived".to_owned())?;
                        business.write(tx, format!("ds-{i}")).await?;
                        assert!(tx.is_open(), "the write began the transaction");
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: format!("{open_before} ds-{i}"),
                            headers: vec![],
                        })
                    })
                })
                .await
            })
        })
        .collect();
    let mut run = PoolRun::default();
    for task in tasks {
        match task.await.unwrap() {
            Ok(outcome) => {
                assert_eq!(outcome.disposition, Disposition::Executed);
                run.executed += 1;
                run.open_before
                    .push(outcome.response.body.starts_with("true"));
            }
            Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::StoreUnavailable => {
                run.unavailable += 1;
            }
            Err(ExecuteError::Handler(why)) if why.starts_with("downstream") => {
                run.downstream_failed += 1;
            }
            Err(other) => panic!("unexpected outcome: {other:?}"),
        }
    }
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(direct)
        .await
        .unwrap();
    (run, writes)
}

/// With the downstream call before the first write, 12 attempts on a pool of 4 all wait for the
/// downstream at once, none holding a connection, and all commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_before_the_first_write_holds_no_connection() {
    let (run, writes) = downstream_under_a_small_pool(Order::DownstreamFirst).await;
    downstream_first_all_commit(run, writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_downstream_before_the_first_write_holds_no_connection() {
    let (db, direct, _) = fresh_tokio_pg(2).await;
    let store = TokioPgStore::new(TokioPgStore::pool(&db.url, POOL as usize).unwrap());
    let exec = Executor::new(store, config(Strategy::SeparateClaim));
    let (run, writes) =
        downstream_run(exec, tokio_pg_business(), Order::DownstreamFirst, &direct).await;
    downstream_first_all_commit(run, writes);
}

fn downstream_first_all_commit(run: PoolRun, writes: i64) {
    eprintln!("downstream first: {run:?}, {writes} writes");
    assert_eq!(run.executed, POOL as usize + EXTRA, "{run:?}");
    assert_eq!(writes as usize, POOL as usize + EXTRA);
    assert!(
        run.open_before.iter().all(|open| !open),
        "no transaction before the handler touched the database"
    );
}

/// The same load with the connection taken before the downstream call (the old behaviour of
/// every separate-claim attempt, whose transaction began before the handler): the first 4 hold
/// the pool while waiting for a downstream that needs the others, the others time out on the
/// pool (503), and nothing commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_held_across_the_downstream_call_exhausts_the_pool() {
    let (run, writes) = downstream_under_a_small_pool(Order::DatabaseFirst).await;
    eprintln!("database first: {run:?}, {writes} writes");
    assert_eq!(run.executed, 0, "{run:?}");
    assert_eq!(writes, 0);
    assert_eq!(
        run.unavailable, EXTRA,
        "the attempts beyond the pool: {run:?}"
    );
    assert_eq!(run.downstream_failed, POOL as usize, "{run:?}");
}

/// A claim pool apart and a business pool closed: the claim succeeds, the handler's first touch
/// cannot begin the transaction, and whatever the handler makes of that error (its own error, or
/// swallowed and a 201 returned) the attempt answers 503 and releases its claim (a retry
/// executes); nothing is stored. The same when the handler never touches the database and the
/// completion begins the transaction. A handler that asked for a derived key may have called
/// downstream: the answer is then 504 (outcome unknown), never the 503's "nothing executed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_cannot_begin_answers_503_and_releases_the_claim() {
    let (db, direct) = fresh_pg(2).await;
    let business = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let claims = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let exec = Executor::new(
        PgStore::new(business.clone()).with_claim_pool(claims),
        config(Strategy::SeparateClaim),
    );
    business.close().await;
    cannot_begin(&exec, &direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_transaction_that_cannot_begin_answers_503_and_releases_the_claim() {
    let (db, direct, _) = fresh_tokio_pg(2).await;
    let business = TokioPgStore::pool(&db.url, 2).unwrap();
    let exec = Executor::new(
        TokioPgStore::new(business.clone())
            .with_claim_pool(TokioPgStore::pool(&db.url, 2).unwrap()),
        config(Strategy::SeparateClaim),
    );
    business.close();
    cannot_begin(&exec, &direct).await;
}

async fn cannot_begin<S: Store>(exec: &Executor<S>, direct: &sqlx::PgPool) {
    /// How the handler touches the database, if it does.
    #[derive(Debug, Clone, Copy)]
    enum Touch {
        Not,
        MapsTheError,
        SwallowsTheError,
    }
    for (touch, derives, expected) in [
        (Touch::MapsTheError, false, ProblemKind::StoreUnavailable),
        (
            Touch::SwallowsTheError,
            false,
            ProblemKind::StoreUnavailable,
        ),
        (Touch::Not, false, ProblemKind::StoreUnavailable),
        (Touch::Not, true, ProblemKind::OutcomeUnknown),
        (Touch::MapsTheError, true, ProblemKind::OutcomeUnknown),
    ] {
        let case = format!("{touch:?}, derives {derives}");
        let s = scope("alice", &format!("closed-{touch:?}-{derives}"));
        let result = exec
            .execute(
                request(s.clone(), json!({}), 1),
                move |tx: &mut TxHandle<S>| {
                    Box::pin(async move {
                        if derives {
                            // The downstream call would be made with this key here.
                            assert!(tx.derive_key("charge").is_some());
                        }
                        match touch {
                            Touch::Not => {}
                            // The handler turns the store's error into its own.
                            Touch::MapsTheError => {
                                tx.tx()
                                    .await
                                    .map_err(|_| "handler's own error".to_owned())?;
                            }
                            // The handler goes on without its write.
                            Touch::SwallowsTheError => {
                                assert!(tx.tx().await.is_err());
                            }
                        }
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: "made".into(),
                            headers: vec![],
                        })
                    })
                },
            )
            .await;
        match result {
            Err(ExecuteError::Problem(p)) => assert_eq!(p.kind(), expected, "{case}"),
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(
            pg_record(direct, &s).await,
            None,
            "the claim was released, nothing stored ({case})"
        );
    }
}

/// What one attempt's handler saw: its strategy, the `charge` key and its UUID spelling, the
/// `reserve/1` key, and whether the transaction was open.
type Seen = (Strategy, String, String, String, bool);

/// protocol.md's first derived-key vector: owner `alice`, `createOrder`, no resource scope,
/// client key `k1`, step `charge`.
const CHARGE_K1: &str = "idg1-ff18da6ae4b1cdc330b88a307c7d05dc85a2396080f8f317";

/// `derive_key` is the same on every attempt of one logical request, whichever executor (two
/// "processes") and strategy runs it, including a retry after a failed attempt and a replay
/// (which runs no handler); it differs for another step and another client key; outside an
/// attempt there is none. The in-transaction strategy's transaction is open before the handler
/// runs, the separate claim's is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_keys_are_stable_across_attempts_processes_and_strategies() {
    let (_db, pool) = fresh_pg(8).await;
    let separate = Executor::new(PgStore::new(pool.clone()), config(Strategy::SeparateClaim));
    let in_tx = Executor::new(PgStore::new(pool.clone()), config(Strategy::InTransaction));
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let order_scope =
        |key: &str| Scope::new("alice", "createOrder", IdempotencyKey::new(key).unwrap());
    // Attempt 1 (separate claim) fails after deriving, attempt 2 (in-transaction, another
    // executor) fails too, attempt 3 (separate claim) succeeds, attempt 4 replays.
    let plan = [
        (Strategy::SeparateClaim, true),
        (Strategy::InTransaction, true),
        (Strategy::SeparateClaim, false),
        (Strategy::InTransaction, false),
    ];
    let mut replayed = 0;
    for (n, (strategy, fail)) in plan.into_iter().enumerate() {
        let exec = match strategy {
            Strategy::SeparateClaim => &separate,
            Strategy::InTransaction => &in_tx,
        };
        let seen = seen.clone();
        let result = exec
            .execute(
                request(order_scope("k1"), json!({"sku": "a"}), 1),
                move |tx: &mut TxHandle<PgStore>| {
                    Box::pin(async move {
                        let charge = tx.derive_key("charge").expect("inside an attempt");
                        let reserve = tx.derive_key("reserve/1").expect("inside an attempt");
                        seen.lock().unwrap().push((
                            strategy,
                            charge.to_string(),
                            charge.uuid(),
                            reserve.to_string(),
                            tx.is_open(),
                        ));
                        if fail {
                            return Err(format!("attempt {n} failed after the downstream call"));
                        }
                        sqlx::query("INSERT INTO business_writes (label) VALUES ('order')")
                            .execute(tx.conn().await.map_err(|e| e.to_string())?)
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok(TestResponse {
                            status: 201,
                            body: charge.to_string(),
                            headers: vec![],
                        })
                    })
                },
            )
            .await;
        match result {
            Ok(o) if o.disposition == Disposition::Replayed => {
                assert_eq!(o.response.body, CHARGE_K1, "the replay names the same key");
                replayed += 1;
            }
            Ok(o) => assert_eq!(o.response.body, CHARGE_K1),
            Err(ExecuteError::Handler(_)) if fail => {}
            other => panic!("attempt {n}: {other:?}"),
        }
    }
    assert_eq!(replayed, 1);
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(
        seen.len(),
        3,
        "three attempts ran the handler, the replay did not"
    );
    for (strategy, charge, uuid, reserve, open) in seen.iter() {
        assert_eq!(charge, CHARGE_K1, "{strategy:?}");
        assert_eq!(uuid, "ff18da6a-e4b1-8dc3-b0b8-8a307c7d05dc");
        assert_eq!(
            reserve,
            "idg1-e92c742b8e30e5db66353859682ed836b9e1f51944349235"
        );
        assert_eq!(
            *open,
            *strategy == Strategy::InTransaction,
            "the transaction is open before the handler only under the in-transaction strategy"
        );
    }
    let orders: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(orders, 1);

    // Another client key, or the same key from another owner: another downstream key.
    let other = Arc::new(Mutex::new(Vec::new()));
    for (owner, key) in [("alice", "k2"), ("bob", "k1")] {
        let other = other.clone();
        let s = Scope::new(owner, "createOrder", IdempotencyKey::new(key).unwrap());
        separate
            .execute(
                request(s, json!({"sku": "a"}), 1),
                move |tx: &mut TxHandle<PgStore>| {
                    Box::pin(async move {
                        other.lock().unwrap().push(tx.derive_key("charge").unwrap());
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: String::new(),
                            headers: vec![],
                        })
                    })
                },
            )
            .await
            .unwrap();
    }
    let other = std::mem::take(&mut *other.lock().unwrap());
    assert_eq!(other.len(), 2);
    assert!(other.iter().all(|k| k.as_str() != CHARGE_K1));
    assert_ne!(other[0], other[1]);
    assert_eq!(
        other[1],
        DerivedKey::new(
            "bob",
            "createOrder",
            "",
            &IdempotencyKey::new("k1").unwrap(),
            "charge"
        )
    );

    // Outside an attempt: no client key, no derived key.
    let tx = TxHandle::begin(Arc::new(PgStore::new(pool.clone())))
        .await
        .unwrap();
    assert!(tx.derive_key("charge").is_none());
    assert!(tx.is_open(), "TxHandle::begin begins at once");
    tx.rollback().await.unwrap();
}

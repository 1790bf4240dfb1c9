//! Nested transactions inside an attempt: a handler's `begin` on its connection is a savepoint
//! of the attempt's transaction. Ended, it is part of the attempt's write; leaked (its handle
//! forgotten, so the driver still counts it), committing would end only the savepoint and lose
//! the write after the client was told it succeeded, so the attempt is refused with nothing
//! written; likewise when a failed nested `begin` made sqlx roll the transaction back under the
//! handler. On `TokioPgStore`, whose handlers share the client, savepoints are statements the
//! handler sends.

use std::time::Duration;

use idemgen_runtime::engine::{Disposition, ExecuteError, HandlerFuture};
use idemgen_runtime::{PgStore, SqliteStore, Store, Strategy, TxHandle};
use serde_json::json;
use sqlx::Connection as _;

use crate::support::*;

const STRATEGIES: [Strategy; 2] = [Strategy::SeparateClaim, Strategy::InTransaction];

/// Defines `$name`: a handler on `$store` writing `label` inside a savepoint it commits, and
/// `label-undone` inside one it rolls back; with `leak`, a third write inside a savepoint whose
/// handle it forgets. `$insert` is the business insert in the store's placeholder syntax.
macro_rules! nested_handler {
    ($name:ident, $store:ty, $insert:literal) => {
        fn $name(
            label: &'static str,
            leak: bool,
        ) -> impl for<'a> FnOnce(&'a mut TxHandle<$store>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static {
            move |tx: &mut TxHandle<$store>| {
                Box::pin(async move {
                    let err = |e: sqlx::Error| e.to_string();
                    let conn = tx.conn().await.map_err(|e| e.to_string())?;
                    let mut kept = conn.begin().await.map_err(err)?;
                    sqlx::query($insert)
                        .bind(label)
                        .execute(&mut *kept)
                        .await
                        .map_err(err)?;
                    kept.commit().await.map_err(err)?;
                    let mut undone = conn.begin().await.map_err(err)?;
                    sqlx::query($insert)
                        .bind(format!("{label}-undone"))
                        .execute(&mut *undone)
                        .await
                        .map_err(err)?;
                    undone.rollback().await.map_err(err)?;
                    if leak {
                        let mut leaked = conn.begin().await.map_err(err)?;
                        sqlx::query($insert)
                            .bind(format!("{label}-leaked"))
                            .execute(&mut *leaked)
                            .await
                            .map_err(err)?;
                        std::mem::forget(leaked);
                    }
                    Ok(TestResponse {
                        status: 201,
                        body: format!("made {label}"),
                        headers: vec![],
                    })
                })
            }
        }
    };
}

nested_handler!(
    pg_nested,
    PgStore,
    "INSERT INTO business_writes (label) VALUES ($1)"
);
nested_handler!(
    sqlite_nested,
    SqliteStore,
    "INSERT INTO business_writes (label) VALUES (?1)"
);

/// How many of the database's connections are idle inside a transaction, once the ones closed
/// behind a refused attempt are gone (closing runs in the background): polled for up to 5 s.
async fn settled_open_transactions(pool: &sqlx::PgPool) -> i64 {
    let mut open = 0;
    for _ in 0..50 {
        open = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    open
}

/// An executor on a fresh database under `strategy`, and that database's pool.
async fn pg_env_and_pool(strategy: Strategy) -> (Env<PgStore>, sqlx::PgPool) {
    let (_db, pool) = fresh_pg(8).await;
    let env = Env {
        exec: idemgen_runtime::Executor::new(PgStore::new(pool.clone()), config(strategy)),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    (env, pool)
}

fn assert_refused<T: std::fmt::Debug>(result: &Result<T, ExecuteError<String>>) {
    match result {
        Err(ExecuteError::Problem(p)) => assert_eq!(
            p.kind().status().as_u16(),
            500,
            "a transaction left so is the handler's bug: {p:?}"
        ),
        other => panic!("the attempt must be refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoints_a_handler_ends_are_part_of_the_attempt_on_postgres() {
    for strategy in STRATEGIES {
        let label = match strategy {
            Strategy::SeparateClaim => "nested-separate",
            Strategy::InTransaction => "nested-in-tx",
        };
        let env = pg_env(config(strategy)).await;
        ended_savepoints_are_part_of_the_attempt(&env, label, || pg_nested(label, false)).await;
    }
}

/// One attempt of `label` through `handler` (which writes `label` in a savepoint it ends and
/// `label-undone` in one it rolls back), then its retry: one write, the undone one absent, and
/// the retry a replay of the same response.
async fn ended_savepoints_are_part_of_the_attempt<S, H>(
    env: &Env<S>,
    label: &str,
    handler: impl Fn() -> H,
) where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let strategy = env.exec.config().strategy;
    let req = request(scope("alice", label), json!({"n": 1}), 1);
    let done = env.exec.execute(req.clone(), handler()).await.unwrap();
    assert_eq!(done.disposition, Disposition::Executed, "{strategy:?}");
    assert_eq!(env.ledger.count(label).await, 1, "{strategy:?}");
    let undone = format!("{label}-undone");
    assert_eq!(env.ledger.count(&undone).await, 0, "{strategy:?}");
    let again = env.exec.execute(req, handler()).await.unwrap();
    assert_eq!(again.disposition, Disposition::Replayed, "{strategy:?}");
    assert_eq!(again.response, done.response);
    assert_eq!(env.ledger.count(label).await, 1, "{strategy:?}: one write");
}

/// The write of a handler that leaked a savepoint is never committed nor acknowledged: 500, no
/// business row (not even the savepoints it ended), no record, no connection left inside the
/// transaction, and a retry with the same key executes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaked_savepoint_refuses_the_attempt_on_postgres() {
    for strategy in STRATEGIES {
        let (env, pool) = pg_env_and_pool(strategy).await;
        let req = request(scope("alice", "leaky"), json!({"n": 1}), 1);
        let refused = env
            .exec
            .execute(req.clone(), pg_nested("leaky", true))
            .await;
        assert_refused(&refused);
        for label in ["leaky", "leaky-undone", "leaky-leaked"] {
            assert_eq!(env.ledger.count(label).await, 0, "{strategy:?}: {label}");
        }
        assert_eq!(
            pg_record(&pool, &req.scope).await,
            None,
            "{strategy:?}: no record"
        );
        assert_eq!(
            settled_open_transactions(&pool).await,
            0,
            "{strategy:?}: no connection inside the refused transaction"
        );
        let retried = env
            .exec
            .execute(req, pg_nested("leaky", false))
            .await
            .unwrap();
        assert_eq!(retried.disposition, Disposition::Executed, "{strategy:?}");
        assert_eq!(env.ledger.count("leaky").await, 1, "{strategy:?}");
    }
}

/// In `$handle`'s transaction (either store's): writes `outer`, then `inner` inside a savepoint
/// whose handle it forgets, and commits, which must be rejected.
macro_rules! commit_inside_a_leaked_savepoint {
    ($handle:ident) => {{
        let conn = $handle.conn().await.unwrap();
        sqlx::query("INSERT INTO business_writes (label) VALUES ('outer')")
            .execute(&mut *conn)
            .await
            .unwrap();
        let mut leaked = conn.begin().await.unwrap();
        sqlx::query("INSERT INTO business_writes (label) VALUES ('inner')")
            .execute(&mut *leaked)
            .await
            .unwrap();
        std::mem::forget(leaked);
        let err = $handle.commit().await.unwrap_err();
        assert!(
            matches!(err, idemgen_runtime::engine::CommitError::Rejected(_)),
            "{err:?}"
        );
    }};
}

/// Outside an attempt ([`TxHandle::begin`], the pipeline's transactional operations) the store's
/// commit refuses a transaction left inside a savepoint and rolls all of it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_left_inside_a_savepoint_is_rejected_on_postgres() {
    let (_db, pool) = fresh_pg(4).await;
    let store = std::sync::Arc::new(PgStore::new(pool.clone()));
    let mut handle = TxHandle::begin(store).await.unwrap();
    commit_inside_a_leaked_savepoint!(handle);
    let ledger = Ledger::Pg(pool.clone());
    assert_eq!(ledger.count("outer").await, 0);
    assert_eq!(ledger.count("inner").await, 0);
    assert_eq!(settled_open_transactions(&pool).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaked_savepoint_refuses_the_attempt_on_sqlite() {
    for strategy in STRATEGIES {
        let env = sqlite_env(config(strategy)).await;
        let req = request(scope("alice", "leaky"), json!({"n": 1}), 1);
        let refused = env
            .exec
            .execute(req.clone(), sqlite_nested("leaky", true))
            .await;
        assert_refused(&refused);
        for label in ["leaky", "leaky-undone", "leaky-leaked"] {
            assert_eq!(env.ledger.count(label).await, 0, "{strategy:?}: {label}");
        }
        let record = env
            .exec
            .store()
            .read(&req.scope, Duration::from_secs(300))
            .await
            .unwrap();
        assert!(record.is_none(), "{strategy:?}: no record, got {record:?}");
        // The file's write lock is free again: the retry takes it and commits.
        let retried = tokio::time::timeout(
            Duration::from_secs(20),
            env.exec.execute(req, sqlite_nested("leaky", false)),
        )
        .await
        .expect("the retry waited on a write lock left held")
        .unwrap();
        assert_eq!(retried.disposition, Disposition::Executed, "{strategy:?}");
        assert_eq!(env.ledger.count("leaky").await, 1, "{strategy:?}");
        assert_eq!(env.ledger.count("leaky-undone").await, 0, "{strategy:?}");
    }
}

/// A transaction dropped open inside a leaked savepoint (a cancelled request, a panicking
/// handler): the rollback sqlx queues would end only the savepoint, so the connection is closed
/// instead of going back to the pool inside the transaction. Its next user, on a pool of one,
/// commits on a connection of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_dropped_inside_a_leaked_savepoint_never_returns_to_the_pool() {
    let (db, pool) = fresh_pg(4).await;
    let single = db.pool(1).await.unwrap();
    let store = std::sync::Arc::new(PgStore::new(single.clone()));
    let mut handle = TxHandle::begin(store).await.unwrap();
    let conn = handle.conn().await.unwrap();
    sqlx::query("INSERT INTO business_writes (label) VALUES ('outer')")
        .execute(&mut *conn)
        .await
        .unwrap();
    std::mem::forget(conn.begin().await.unwrap());
    drop(handle);
    sqlx::query("INSERT INTO business_writes (label) VALUES ('next user')")
        .execute(&single)
        .await
        .unwrap();
    let ledger = Ledger::Pg(pool.clone());
    assert_eq!(
        ledger.count("next user").await,
        1,
        "committed, not inside 'outer'"
    );
    assert_eq!(ledger.count("outer").await, 0);
    assert_eq!(settled_open_transactions(&pool).await, 0);
}

/// [`a_commit_left_inside_a_savepoint_is_rejected_on_postgres`] on SQLite: rejected, nothing
/// written, and the file's write lock free again for the next transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_left_inside_a_savepoint_is_rejected_on_sqlite() {
    let (store, _dir) = fresh_sqlite().await;
    let pool = store.pool().clone();
    let store = std::sync::Arc::new(store);
    let mut handle = TxHandle::begin(store.clone()).await.unwrap();
    commit_inside_a_leaked_savepoint!(handle);
    assert!(sqlite_write_ids(&pool, "outer").await.is_empty());
    assert!(sqlite_write_ids(&pool, "inner").await.is_empty());
    let mut next = tokio::time::timeout(Duration::from_secs(20), TxHandle::begin(store))
        .await
        .expect("the write lock was left held")
        .unwrap();
    sqlx::query("INSERT INTO business_writes (label) VALUES ('next')")
        .execute(next.conn().await.unwrap())
        .await
        .unwrap();
    next.commit().await.unwrap();
    assert_eq!(sqlite_write_ids(&pool, "next").await.len(), 1);
}

/// A nested `begin` that fails at the first level (here in a transaction a failed statement
/// aborted; a cancelled one does the same) makes sqlx roll back the whole transaction, and what
/// the handler runs next runs outside it. Completing would write the record outside any
/// transaction and answer 201 for writes that were rolled back: the attempt is refused instead,
/// with no record and none of the transaction's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_ended_under_its_handler_refuses_the_attempt_on_postgres() {
    fn ended_under(
        label: &'static str,
    ) -> impl for<'a> FnOnce(&'a mut TxHandle<PgStore>) -> HandlerFuture<'a, TestResponse, String>
    + Send
    + 'static {
        move |tx: &mut TxHandle<PgStore>| {
            Box::pin(async move {
                let conn = tx.conn().await.map_err(|e| e.to_string())?;
                sqlx::query("INSERT INTO business_writes (label) VALUES ($1)")
                    .bind(label)
                    .execute(&mut *conn)
                    .await
                    .map_err(|e| e.to_string())?;
                // Errors the handler ignores: the statement aborts the transaction, the
                // savepoint is refused, and sqlx's guard then rolls back the transaction.
                let _ = sqlx::query("SELECT 1 / 0").execute(&mut *conn).await;
                assert!(conn.begin().await.is_err());
                Ok(TestResponse {
                    status: 201,
                    body: format!("made {label}"),
                    headers: vec![],
                })
            })
        }
    }
    for strategy in STRATEGIES {
        let (env, pool) = pg_env_and_pool(strategy).await;
        let req = request(scope("alice", "ended"), json!({"n": 1}), 1);
        let refused = env.exec.execute(req.clone(), ended_under("ended")).await;
        assert_refused(&refused);
        assert_eq!(env.ledger.count("ended").await, 0, "{strategy:?}");
        assert_eq!(
            pg_record(&pool, &req.scope).await,
            None,
            "{strategy:?}: no record"
        );
        assert_eq!(settled_open_transactions(&pool).await, 0, "{strategy:?}");
        let retried = env
            .exec
            .execute(req, pg_nested("ended", false))
            .await
            .unwrap();
        assert_eq!(retried.disposition, Disposition::Executed, "{strategy:?}");
        assert_eq!(env.ledger.count("ended").await, 1, "{strategy:?}");
    }
}

/// A handler on `TokioPgStore` writing `label` inside a savepoint it releases and
/// `label-undone` inside one it rolls back, as statements: it shares the client (`&Client`),
/// so tokio-postgres's `transaction()` is out of its reach.
fn tokio_pg_statement_savepoints(
    label: &'static str,
) -> impl for<'a> FnOnce(
    &'a mut TxHandle<idemgen_runtime::TokioPgStore>,
) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<idemgen_runtime::TokioPgStore>| {
        Box::pin(async move {
            let err = |e: idemgen_runtime::tokio_postgres::Error| e.to_string();
            let conn = tx.conn().await.map_err(|e| e.to_string())?;
            let insert = "INSERT INTO business_writes (label) VALUES ($1)";
            conn.batch_execute("SAVEPOINT kept").await.map_err(err)?;
            conn.execute(insert, &[&label]).await.map_err(err)?;
            conn.batch_execute("RELEASE SAVEPOINT kept")
                .await
                .map_err(err)?;
            conn.batch_execute("SAVEPOINT undone").await.map_err(err)?;
            conn.execute(insert, &[&format!("{label}-undone")])
                .await
                .map_err(err)?;
            conn.batch_execute("ROLLBACK TO SAVEPOINT undone")
                .await
                .map_err(err)?;
            Ok(TestResponse {
                status: 201,
                body: format!("made {label}"),
                headers: vec![],
            })
        })
    }
}

/// On `TokioPgStore` a handler's savepoints are statements: one rolled back takes only its own
/// write with it, one released is part of the attempt, and a retry replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoints_a_handler_sends_are_part_of_the_attempt_on_tokio_postgres() {
    for strategy in STRATEGIES {
        let label = match strategy {
            Strategy::SeparateClaim => "statement-separate",
            Strategy::InTransaction => "statement-in-tx",
        };
        let env = tokio_pg_env(config(strategy)).await;
        ended_savepoints_are_part_of_the_attempt(&env, label, || {
            tokio_pg_statement_savepoints(label)
        })
        .await;
    }
}

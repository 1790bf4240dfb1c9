//! A deploy that changes an operation's strategy: the records of one strategy met by attempts
//! of the other, on one PostgreSQL database.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use idemgen_runtime::engine::Disposition;
use idemgen_runtime::{Executor, PgStore, Store, Strategy, TokioPgStore, TxHandle};
use serde_json::json;
use tokio::sync::Notify;

use crate::support::*;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An in-transaction attempt's key gets a record that did not go through its gate (a separate
/// claim's, as in a deploy that changes strategy) while its handler runs: its completing insert finds
/// the record, its write is rolled back, and it replays the record that won.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_transaction_completion_that_meets_another_record_rolls_back_and_replays_it() {
    // One connection for the in-transaction executor: after the rollback the same connection
    // must serve the next attempt, outside any transaction.
    let (db, pool) = fresh_pg(8).await;
    let single = db.pool(1).await.unwrap();
    let gated = Env {
        exec: Executor::new(
            PgStore::new(single.clone()),
            config(Strategy::InTransaction),
        ),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let claimed = Env {
        exec: Executor::new(PgStore::new(pool.clone()), config(Strategy::SeparateClaim)),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let backend = || {
        let single = single.clone();
        Box::pin(async move {
            sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
                .fetch_one(&single)
                .await
                .unwrap()
        }) as BoxFut<'static, i32>
    };
    completion_meets_another_record(gated, claimed, &pool, backend).await;
}

/// The same on `TokioPgStore`, whose completing insert travels with `COMMIT`: the insert fails
/// on the primary key, the `COMMIT` behind it rolls the write back, and the connection is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_an_in_transaction_completion_that_meets_another_record_rolls_back_and_replays_it()
 {
    let (db, pool, store) = fresh_tokio_pg(8).await;
    let single = TokioPgStore::pool(&db.url, 1).unwrap();
    let gated = Env {
        exec: Executor::new(
            TokioPgStore::new(single.clone()),
            config(Strategy::InTransaction),
        ),
        business: tokio_pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let claimed = Env {
        exec: Executor::new(store, config(Strategy::SeparateClaim)),
        business: tokio_pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let backend = || {
        let single = single.clone();
        Box::pin(async move {
            let client = single.get().await.unwrap();
            client
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get::<_, i32>(0)
        }) as BoxFut<'static, i32>
    };
    completion_meets_another_record(gated, claimed, &pool, backend).await;
}

async fn completion_meets_another_record<S: Store>(
    gated: Env<S>,
    claimed: Env<S>,
    pool: &sqlx::PgPool,
    backend: impl Fn() -> BoxFut<'static, i32>,
) {
    let connection = backend().await;
    let req = request(scope("alice", "switched"), json!({"n": 1}), 1);
    // The gated attempt writes, then waits in its handler until the other strategy's attempt
    // has completed the key.
    let (wrote, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let first = {
        let (exec, req) = (gated.exec.clone(), req.clone());
        let (business, wrote, release) = (gated.business.clone(), wrote.clone(), release.clone());
        tokio::spawn(async move {
            exec.execute(req, move |tx: &mut TxHandle<S>| {
                Box::pin(async move {
                    business.write(tx, "gated".into()).await?;
                    wrote.notify_one();
                    release.notified().await;
                    Ok::<_, String>(TestResponse {
                        status: 201,
                        body: "made gated".into(),
                        headers: vec![],
                    })
                })
            })
            .await
        })
    };
    tokio::time::timeout(Duration::from_secs(20), wrote.notified())
        .await
        .expect("the gated attempt never wrote");
    let won = attempt(&claimed, req.clone(), Plan::created("claimed"))
        .await
        .unwrap();
    assert_eq!(won.disposition, Disposition::Executed);
    release.notify_one();
    let lost = first.await.unwrap().unwrap();
    assert_eq!(lost.disposition, Disposition::Replayed);
    assert_eq!(lost.response, won.response);
    assert_eq!(
        gated.ledger.count("gated").await,
        0,
        "the loser's write rolled back"
    );
    assert_eq!(gated.ledger.count("claimed").await, 1);

    // The one connection is clean, and still the same one (not closed as in doubt): the next
    // attempt commits on it, and its completed record is what a replay finds.
    let next = request(scope("alice", "after"), json!({"n": 2}), 1);
    let done = attempt(&gated, next.clone(), Plan::created("next"))
        .await
        .unwrap();
    assert_eq!(done.disposition, Disposition::Executed);
    assert_eq!(gated.ledger.count("next").await, 1);
    let again = attempt(&claimed, next, Plan::created("never"))
        .await
        .unwrap();
    assert_eq!(again.disposition, Disposition::Replayed);
    assert_eq!(again.response, done.response);
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(open, 0, "no connection is left inside a transaction");
    assert_eq!(backend().await, connection, "the connection was kept");
}

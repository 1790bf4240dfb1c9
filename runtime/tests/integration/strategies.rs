//! A deploy that changes an operation's strategy: the records of one strategy met by attempts
//! of the other, on one PostgreSQL database.

use std::time::Duration;

use idemgen_runtime::engine::Disposition;
use idemgen_runtime::{Executor, PgStore, Strategy};
use serde_json::json;

use crate::support::*;

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
    let req = request(scope("alice", "switched"), json!({"n": 1}), 1);
    let mut slow = Plan::created("gated");
    slow.delay = Duration::from_millis(600);
    let first = {
        let (gated, req) = (gated.clone(), req.clone());
        tokio::spawn(async move { attempt(&gated, req, slow).await })
    };
    // Until the gated attempt has written (its row is not visible, its id is taken).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let used: Option<i64> =
            sqlx::query_scalar("SELECT last_value FROM business_writes_id_seq WHERE is_called")
                .fetch_optional(&pool)
                .await
                .unwrap();
        if used.is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the gated attempt never wrote"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let won = attempt(&claimed, req.clone(), Plan::created("claimed"))
        .await
        .unwrap();
    assert_eq!(won.disposition, Disposition::Executed);
    let lost = first.await.unwrap().unwrap();
    assert_eq!(lost.disposition, Disposition::Replayed);
    assert_eq!(lost.response, won.response);
    assert_eq!(
        gated.ledger.count("gated").await,
        0,
        "the loser's write rolled back"
    );
    assert_eq!(gated.ledger.count("claimed").await, 1);

    // The one connection is clean: the next attempt commits on it, and its completed record is
    // what a replay finds.
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
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(open, 0, "no connection is left inside a transaction");
}

//! Cleanup drains 10,000 expired rows in batches while live claims proceed.

use std::time::Duration;

use idemgen_runtime::engine::Disposition;
use idemgen_runtime::retention::{CLEANUP_BATCH, purge_expired};
use idemgen_runtime::{Store, Strategy};
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cleanup_drains_expired_rows_in_batches_while_claims_proceed() {
    drains_while_claims_proceed(pg_env(config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_postgres_cleanup_drains_expired_rows_in_batches_while_claims_proceed() {
    drains_while_claims_proceed(tokio_pg_env(config(Strategy::SeparateClaim)).await).await;
}

async fn drains_while_claims_proceed<S: Store>(env: Env<S>) {
    let Ledger::Pg(pool) = &env.ledger else {
        unreachable!()
    };
    for (prefix, expires) in [
        ("old", "now() - interval '1 hour'"),
        ("young", "now() + interval '1 day'"),
    ] {
        let n = if prefix == "old" { 10_000 } else { 100 };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO idempotency_records (scope_hash, owner, operation, idempotency_key, state,
                 fingerprint, fingerprint_version, claim_token, claimed_at, response_status,
                 response_headers, response_body, completed_at, expires_at)
             SELECT idemgen_scope_hash('carol', 'createThing', '', '{prefix}-' || g),
                    'carol', 'createThing', '{prefix}-' || g, 'completed', 'hs1:x', 1,
                    gen_random_uuid(), now(), 201, '[]', '\\x', now(), {expires}
               FROM generate_series(1, {n}) g"
        )))
        .execute(pool)
        .await
        .unwrap();
    }
    // Claims run while the cleanup drains.
    let claims = {
        let env = env.clone();
        tokio::spawn(async move {
            let mut executed = 0;
            for i in 0..50 {
                let req = request(scope("alice", &format!("live-{i}")), json!({}), 1);
                let o = attempt(&env, req, Plan::created("live")).await.unwrap();
                if o.disposition == Disposition::Executed {
                    executed += 1;
                }
            }
            executed
        })
    };
    let deleted = purge_expired(env.exec.store()).await.unwrap();
    assert_eq!(claims.await.unwrap(), 50, "claims proceeded during cleanup");
    assert_eq!(deleted, 10_000);
    assert!(
        10_000 / CLEANUP_BATCH as u64 >= 10,
        "the drain took several batches"
    );
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idempotency_records WHERE owner = 'carol'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(left, 100, "unexpired records are kept");
    let live: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idempotency_records WHERE owner = 'alice'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(live, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_skips_rows_locked_by_a_live_transaction() {
    skips_locked_rows(pg_env(config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_cleanup_skips_rows_locked_by_a_live_transaction() {
    skips_locked_rows(tokio_pg_env(config(Strategy::SeparateClaim)).await).await;
}

async fn skips_locked_rows<S: Store>(env: Env<S>) {
    let Ledger::Pg(pool) = &env.ledger else {
        unreachable!()
    };
    sqlx::query(
        "INSERT INTO idempotency_records (scope_hash, owner, operation, idempotency_key, state,
             fingerprint, fingerprint_version, claim_token, claimed_at, response_status,
             response_headers, response_body, completed_at, expires_at)
         SELECT idemgen_scope_hash('carol', 'op', '', 'k' || g),
                'carol', 'op', 'k' || g, 'completed', 'hs1:x', 1, gen_random_uuid(), now(), 200,
                '[]', '\\x', now(), now() - interval '1 minute'
           FROM generate_series(1, 3) g",
    )
    .execute(pool)
    .await
    .unwrap();
    let mut locker = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM idempotency_records WHERE idempotency_key = 'k1' FOR UPDATE")
        .execute(&mut *locker)
        .await
        .unwrap();
    let deleted = tokio::time::timeout(Duration::from_secs(5), purge_expired(env.exec.store()))
        .await
        .expect("cleanup never waits on a locked row")
        .unwrap();
    assert_eq!(deleted, 2);
    locker.rollback().await.unwrap();
    assert_eq!(purge_expired(env.exec.store()).await.unwrap(), 1);
}

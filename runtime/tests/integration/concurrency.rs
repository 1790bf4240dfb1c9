//! Real concurrency on PostgreSQL: 64 simultaneous attempts with one key, directly and through
//! PgBouncer (transaction and session pooling).

use std::time::Duration;

use idemgen_runtime::Strategy;
use idemgen_runtime::engine::Disposition;
use serde_json::json;

use crate::support::*;
use idemgen_testdb::PoolMode;

fn storm_config(strategy: Strategy) -> idemgen_runtime::ExecutorConfig {
    let mut cfg = config(strategy);
    cfg.in_flight_wait = Duration::from_millis(500);
    cfg
}

async fn storm(strategy: Strategy) {
    storm_on(pg_env(storm_config(strategy)).await).await;
}

async fn storm_on<S: idemgen_runtime::Store>(env: Env<S>) {
    let req = request(scope("alice", "storm"), json!({"name": "w"}), 1);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (env, req, barrier) = (env.clone(), req.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let mut plan = Plan::created("storm");
            plan.delay = Duration::from_millis(50);
            plan.label = format!("storm-{i}");
            barrier.wait().await;
            attempt(&env, req, plan).await
        }));
    }
    let (mut executed, mut replayed, mut conflicts) = (0, 0, 0);
    let mut bodies = std::collections::HashSet::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(o) if o.disposition == Disposition::Executed => {
                executed += 1;
                bodies.insert(o.response.body);
            }
            Ok(o) if o.disposition == Disposition::Replayed => {
                replayed += 1;
                bodies.insert(o.response.body);
            }
            other => {
                assert_eq!(
                    problem_status(&other),
                    Some(409),
                    "unexpected outcome {other:?}"
                );
                conflicts += 1;
            }
        }
    }
    let Ledger::Pg(pool) = &env.ledger else {
        unreachable!()
    };
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(rows, 1, "exactly one business row");
    assert_eq!(executed, 1, "exactly one attempt executed");
    assert_eq!(executed + replayed + conflicts, 64);
    assert_eq!(bodies.len(), 1, "every success carries the same body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim() {
    storm(Strategy::SeparateClaim).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_in_transaction() {
    storm(Strategy::InTransaction).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim_on_tokio_postgres() {
    storm_on(tokio_pg_env(storm_config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_in_transaction_on_tokio_postgres() {
    storm_on(tokio_pg_env(storm_config(Strategy::InTransaction)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim_begun_at_the_claim_on_tokio_postgres() {
    storm_on(tokio_pg_begin_at_claim_env(storm_config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim_on_tokio_postgres_through_pgbouncer_transaction_mode()
 {
    storm_on(tokio_pgbouncer_transaction_env(storm_config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_in_transaction_on_tokio_postgres_through_pgbouncer_transaction_mode()
 {
    storm_on(tokio_pgbouncer_transaction_env(storm_config(Strategy::InTransaction)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim_through_pgbouncer_transaction_mode() {
    let env = pgbouncer_env(storm_config(Strategy::SeparateClaim), PoolMode::Transaction).await;
    storm_on(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_in_transaction_through_pgbouncer_transaction_mode() {
    let env = pgbouncer_env(storm_config(Strategy::InTransaction), PoolMode::Transaction).await;
    storm_on(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_separate_claim_through_pgbouncer_session_mode() {
    let env = pgbouncer_env(storm_config(Strategy::SeparateClaim), PoolMode::Session).await;
    storm_on(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_attempts_one_key_in_transaction_through_pgbouncer_session_mode() {
    let env = pgbouncer_env(storm_config(Strategy::InTransaction), PoolMode::Session).await;
    storm_on(env).await;
}

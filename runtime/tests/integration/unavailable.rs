//! A store that cannot be reached answers 503 with no driver text; nothing executes.

use std::time::Duration;

use idemgen_runtime::engine::ExecuteError;
use idemgen_runtime::{Executor, PgStore, ProblemKind, Store, Strategy, TokioPgStore};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;

use crate::support::*;

/// A port nothing listens on: connection refused.
fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("postgres://nobody@127.0.0.1:{port}/none")
}

#[tokio::test]
async fn unreachable_store_is_503_without_driver_text() {
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy(&refused_url())
        .unwrap();
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let env = Env {
            exec: Executor::new(PgStore::new(pool.clone()), config(strategy)),
            business: pg_business(),
            ledger: Ledger::Mem(Default::default()),
        };
        answers_503_without_driver_text(&env).await;
    }
}

#[tokio::test]
async fn tokio_postgres_unreachable_store_is_503_without_driver_text() {
    let pool = TokioPgStore::pool(&refused_url(), 2).unwrap();
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let env = Env {
            exec: Executor::new(TokioPgStore::new(pool.clone()), config(strategy)),
            business: tokio_pg_business(),
            ledger: Ledger::Mem(Default::default()),
        };
        answers_503_without_driver_text(&env).await;
    }
}

async fn answers_503_without_driver_text<S: Store>(env: &Env<S>) {
    let result = attempt(
        env,
        request(scope("alice", "k"), json!({}), 1),
        Plan::created("x"),
    )
    .await;
    let Err(ExecuteError::Problem(p)) = result else {
        panic!("expected a problem, got {result:?}");
    };
    assert_eq!(p.kind(), ProblemKind::StoreUnavailable);
    let body = String::from_utf8(p.body_json()).unwrap();
    assert!(
        !body.to_lowercase().contains("connect"),
        "driver text leaked: {body}"
    );
    assert!(p.internal().is_some(), "the cause is kept for the logs");
}

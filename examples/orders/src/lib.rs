//! The two-service example (docs/downstream.md): an orders service ([`orders_api`], generated
//! from `specs/orders/openapi.yaml`) whose `createOrder` charges through a payments service
//! ([`payments_api`], from `specs/payments/openapi.yaml`) with the generated
//! [`payments_client`] and a key derived from the order's own key. Each service has its own
//! database and executor; `cargo run -p idemgen-example-orders` serves both.

#[rustfmt::skip]
pub mod orders_api;
/// The generated client of the orders API (what the tests and a shop front call).
#[rustfmt::skip]
pub mod orders_client;
#[rustfmt::skip]
pub mod payments_api;
/// The generated client of the payments API, which the orders service calls.
#[rustfmt::skip]
pub mod payments_client;
pub mod auth;
pub mod orders;
pub mod payments;

use std::sync::Arc;

use anyhow::Context;
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Server};

/// The orders service's development tokens (`token`, owner). Never use them in production.
pub const DEV_TOKENS: [(&str, &str); 2] = [("tok1", "alice"), ("tok2", "bob")];
/// The token the orders service presents to the payments service, and the owner it maps to.
pub const PAYMENTS_TOKEN: (&str, &str) = ("orders-service-secret", "orders-service");

/// The payments service's server: the state of its router.
pub type PaymentsServer = Server<payments::Payments, PgStore, auth::Tokens>;
/// The orders service's server: the state of its router.
pub type OrdersServer = Server<orders::Orders, PgStore, auth::Tokens>;

/// Applies the runtime's migrations and `sql` (recorded in its own table, `table`).
async fn migrate(pool: &sqlx::PgPool, table: &str, sql: &'static str) -> anyhow::Result<()> {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    let mut conn = pool.acquire().await.context("connecting to the database")?;
    idemgen_runtime::migrate(&mut conn)
        .await
        .context("runtime migrations")?;
    let mut migrator = Migrator::with_migrations(vec![Migration::new(
        1,
        table.to_owned().into(),
        MigrationType::Simple,
        sql.into_sql_str(),
        false,
    )]);
    migrator.dangerous_set_table_name(format!("_{table}_migrations"));
    migrator
        .run_direct(None, &mut *conn, false)
        .await
        .with_context(|| format!("{table} migrations"))?;
    Ok(())
}

/// The payments service on `pool` (migrated here): its router and server.
pub async fn payments_app(pool: sqlx::PgPool) -> anyhow::Result<(axum::Router, PaymentsServer)> {
    migrate(
        &pool,
        "payments",
        include_str!("../migrations/0001_payments.sql"),
    )
    .await?;
    let executor = Executor::new(PgStore::new(pool), ExecutorConfig::default());
    let auth = auth::Tokens::new([PAYMENTS_TOKEN]);
    let server = Server::new(Arc::new(payments::Payments), auth, executor);
    Ok((payments_api::router(server.clone()), server))
}

/// The orders service on `pool` (migrated here), charging through `payments`: its router and
/// server.
pub async fn orders_app(
    pool: sqlx::PgPool,
    payments: payments_client::PaymentsClient,
) -> anyhow::Result<(axum::Router, OrdersServer)> {
    migrate(
        &pool,
        "orders",
        include_str!("../migrations/0001_orders.sql"),
    )
    .await?;
    let executor = Executor::new(PgStore::new(pool), ExecutorConfig::default());
    let auth = auth::Tokens::new(DEV_TOKENS);
    let server = Server::new(Arc::new(orders::Orders::new(payments)), auth, executor);
    Ok((orders_api::router(server.clone()), server))
}

/// A client of the payments service at `base_url` with the orders service's token and `policy`
/// (its retries of one charge: they send the same derived key).
pub fn payments_client(
    base_url: &str,
    policy: idemgen_client::RetryPolicy,
) -> anyhow::Result<payments_client::PaymentsClient> {
    let inner = idemgen_client::Client::new(base_url).with_policy(policy);
    payments_client::PaymentsClient::from_client(inner)
        .with_bearer(PAYMENTS_TOKEN.0)
        .context("the payments token")
}

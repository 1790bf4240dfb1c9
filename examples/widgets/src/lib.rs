//! The widgets example service: an idemgen-generated API ([`api`], checked in, kept fresh by CI
//! with `idemgen build --check`) implemented by hand-written code on PostgreSQL.

#[rustfmt::skip]
pub mod api;
pub mod auth;
pub mod config;
pub mod repo;
pub mod service;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use idemgen_runtime::store::PgStore;
use idemgen_runtime::{Executor, ExecutorConfig, Server, ServerConfig, Strategy};
use sqlx::postgres::PgPoolOptions;

use crate::config::Config;

/// The example's own migrations, applied after the runtime's.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "0001_widgets",
    include_str!("../migrations/0001_widgets.sql"),
)];

/// How often the retention cleanup runs when a retention is configured.
const CLEANUP_EVERY: Duration = Duration::from_secs(60);

/// Applies the runtime's migrations (the idempotency records) and the example's own.
pub async fn migrate(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await.context("connecting to the database")?;
    idemgen_runtime::migrate(&mut conn)
        .await
        .context("runtime migrations")?;
    idemgen_runtime::migrate::apply(&mut conn, "widgets_schema_migrations", MIGRATIONS)
        .await
        .context("widgets migrations")?;
    Ok(())
}

/// Builds the router for `config` on `pool`, with the migrations applied.
pub async fn app(config: &Config, pool: sqlx::PgPool) -> anyhow::Result<axum::Router> {
    migrate(&pool).await?;
    // Claims get their own small pool, so duplicates get their 409 promptly even while every
    // business connection is busy; their commits skip the WAL flush (protocol.md, "Durability of
    // claims": the business commit's flush makes them durable).
    let claim_pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(5))
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::Executor::execute(&mut *conn, "SET synchronous_commit = off").await?;
                Ok(())
            })
        })
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .context("connecting the claim pool")?;
    let store = PgStore::new(pool.clone()).with_claim_pool(claim_pool);
    let executor = Executor::new(
        store,
        ExecutorConfig {
            strategy: Strategy::SeparateClaim,
            stale_claim: config.stale_claim,
            retention: config.retention,
            ..ExecutorConfig::default()
        },
    );
    if config.retention.is_some() {
        let store = Arc::new(PgStore::new(pool.clone()));
        tokio::spawn(idemgen_runtime::retention::run_cleanup(
            store,
            CLEANUP_EVERY,
        ));
    }
    let service = service::Widgets::new(pool);
    let auth = auth::TokenAuth::new(config.tokens.clone());
    let server = Server::new(Arc::new(service), auth, executor).with_config(ServerConfig {
        body_limit: config.body_limit,
    });
    Ok(api::router(server))
}

/// Runs the service until SIGTERM or Ctrl-C, then drains in-flight requests.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(config.pool_size)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&config.database_url)
        .await
        .context("connecting to DATABASE_URL")?;
    let router = app(&config, pool).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(listen = %config.listen, "widgets listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving")?;
    tracing::info!("drained; bye");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}

//! The widgets example service: an idemgen-generated API ([`api`], checked in, kept fresh by CI
//! with `idemgen build --check`) implemented by hand-written code on PostgreSQL.

#[rustfmt::skip]
pub mod api;
pub mod auth;
/// The generated client of the same spec (`idemgen client`), which the e2e tests drive the
/// service through.
#[rustfmt::skip]
pub mod client;
pub mod compose;
pub mod config;
pub mod repo;
pub mod service;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use idemgen_runtime::testing::{Cluster, ClusterOptions, TestDb};
use idemgen_runtime::{
    Executor, ExecutorConfig, PgStore, Pooler, Server, ServerConfig, TokioPgStore, WriterHosts,
};
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::config::{Config, StoreKind};

/// The example's own migrations, applied after the runtime's by sqlx's migrator (recorded in
/// `_widgets_migrations`).
pub fn migrator() -> sqlx::migrate::Migrator {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    let mut migrator = Migrator::with_migrations(vec![Migration::new(
        1,
        "widgets".into(),
        MigrationType::Simple,
        include_str!("../migrations/0001_widgets.sql").into_sql_str(),
        false,
    )]);
    migrator.dangerous_set_table_name("_widgets_migrations");
    migrator
}

/// The claim pool's size, beside `WIDGETS_POOL_SIZE` business connections (docs/scaling.md,
/// "Connection budget").
pub const CLAIM_POOL_SIZE: u32 = 4;

/// A pooled connection idle longer than this is pinged before it is handed out.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// The options both pools are built from. sqlx's default (`test_before_acquire`) pings every
/// connection before handing it out: one more round trip on every request's path, on top of the
/// one its return to the pool already costs (sqlx pings there too, dropping a broken
/// connection). Here only a connection idle for longer than [`PING_IF_IDLE_FOR`] is pinged
/// (sqlx's documented pattern), so a busy service pays nothing and one that sat idle across a
/// server restart still finds its dead connections before using them. What is left: a
/// connection returned within that second before the server went away is handed out unpinged and
/// its first statement fails (503, which clients retry), once per such connection
/// (docs/benchmarks.md, "The example's pools").
pub fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IF_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// How often the retention cleanup runs when a retention is configured.
const CLEANUP_EVERY: Duration = Duration::from_secs(60);

/// Applies the runtime's migrations (the idempotency records) and the example's own.
pub async fn migrate(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await.context("connecting to the database")?;
    migrate_on(&mut conn).await
}

async fn migrate_on(conn: &mut sqlx::PgConnection) -> anyhow::Result<()> {
    idemgen_runtime::migrate(conn)
        .await
        .context("runtime migrations")?;
    migrator()
        .run_direct(None, conn, false)
        .await
        .context("widgets migrations")?;
    Ok(())
}

/// The hosts of a URL that lists several (`h1:5432,h2:5432` in its authority), parsed by
/// [`WriterHosts`]; `None` for a URL of one host, which sqlx parses as it is.
pub fn several_hosts(url: &str) -> anyhow::Result<Option<WriterHosts>> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if !hosts.contains(',') {
        return Ok(None);
    }
    Ok(Some(WriterHosts::parse(url)?))
}

/// A pool on `url` set up for `pooler` ([`Pooler::connect_options`]). A URL listing several
/// hosts gets a pool on the writable one that follows the writer after a failover
/// ([`WriterHosts::connect`], one probe connection of its own).
pub async fn connect_pool(
    url: &str,
    pooler: Pooler,
    options: PgPoolOptions,
) -> anyhow::Result<sqlx::PgPool> {
    match several_hosts(url)? {
        // `connect` sets the pool's `before_acquire` hook, replacing `pool_options()`'s idle
        // ping: it pings there instead.
        Some(hosts) => Ok(hosts
            .map_options(|o| pooler.connect_options(o))
            .ping_if_idle_for(PING_IF_IDLE_FOR)
            .connect(options)
            .await?),
        None => {
            let parsed: PgConnectOptions = url.parse().context("parsing the database URL")?;
            Ok(options.connect_with(pooler.connect_options(parsed)).await?)
        }
    }
}

/// Runs the migrations on `WIDGETS_MIGRATION_URL` when set (its writer, when it lists several
/// hosts), else on `pool`.
async fn run_migrations(config: &Config, pool: &sqlx::PgPool) -> anyhow::Result<()> {
    match &config.migration_url {
        Some(url) => migrate_url(url, "WIDGETS_MIGRATION_URL").await,
        None => migrate(pool).await,
    }
}

/// Runs the migrations on a connection of their own to `url` (`name` says which setting it is),
/// on its writer when it lists several hosts.
async fn migrate_url(url: &str, name: &str) -> anyhow::Result<()> {
    let options = match several_hosts(url)? {
        Some(hosts) => hosts.find_writer().await?,
        None => url.parse().with_context(|| format!("parsing {name}"))?,
    };
    let mut conn = sqlx::PgConnection::connect_with(&options)
        .await
        .with_context(|| format!("connecting to {name}"))?;
    let migrated = migrate_on(&mut conn).await;
    let _ = conn.close().await;
    migrated
}

/// The widgets service's server on sqlx (`PgStore`): the state of its router.
pub type WidgetsServer = Server<service::Widgets, PgStore, auth::TokenAuth>;

/// The widgets service's server on tokio-postgres (`TokioPgStore`).
pub type TokioWidgetsServer =
    Server<service::Widgets<repo::TokioPostgres>, TokioPgStore, auth::TokenAuth>;

/// Builds the router for `config` on `pool`, with the migrations applied.
pub async fn app(config: &Config, pool: sqlx::PgPool) -> anyhow::Result<axum::Router> {
    Ok(app_and_server(config, pool).await?.0)
}

/// The router, and its server (whose executor `serve` shuts down after draining).
pub async fn app_and_server(
    config: &Config,
    pool: sqlx::PgPool,
) -> anyhow::Result<(axum::Router, WidgetsServer)> {
    run_migrations(config, &pool).await?;
    // Claims get their own small pool, so duplicates get their 409 promptly even while every
    // business connection is busy. Their commits skip the WAL flush by the store's default, set
    // per statement (protocol.md, "Durability of claims": the business commit's flush makes them
    // durable), so the pool needs no session setting, and none can leak through a transaction
    // pooler to other clients' server connections (docs/scaling.md, "PgBouncer").
    let claim_options = pool_options()
        .max_connections(CLAIM_POOL_SIZE)
        .acquire_timeout(Duration::from_secs(5));
    // The claim pool follows the writer as the business pool does when DATABASE_URL lists
    // several hosts; otherwise it connects where `pool` does.
    let multi_host = config
        .database_url
        .as_deref()
        .filter(|url| several_hosts(url).is_ok_and(|h| h.is_some()));
    let claim_pool = match multi_host {
        Some(url) => connect_pool(url, config.pooler, claim_options).await,
        None => claim_options
            .connect_with(
                config
                    .pooler
                    .connect_options(pool.connect_options().as_ref().clone()),
            )
            .await
            .map_err(Into::into),
    }
    .context("connecting the claim pool")?;
    let store = PgStore::new(pool.clone())
        .with_claim_pool(claim_pool)
        .with_pooler(config.pooler);
    // A pooler other than WIDGETS_POOLER says is refused here, not under load.
    store
        .check()
        .await
        .context("the database does not match WIDGETS_POOLER")?;
    let executor = Executor::new(store, executor_config(config));
    if config.retention.is_some() {
        let store = Arc::new(PgStore::new(pool.clone()).with_pooler(config.pooler));
        tokio::spawn(idemgen_runtime::retention::run_cleanup(
            store,
            CLEANUP_EVERY,
        ));
    }
    let service = service::Widgets::new(pool).with_pooler(config.pooler);
    let server = server_of(config, service, executor);
    Ok((routes(server.clone()), server))
}

/// The router on tokio-postgres (`WIDGETS_STORE=tokio-postgres`) for `config`, on `url`, with
/// the migrations applied; and its server. Business and claim pools are the store's
/// ([`TokioPgStore::pool`]: a URL listing several hosts connects to the writable one).
pub async fn tokio_app_and_server(
    config: &Config,
    url: &str,
) -> anyhow::Result<(axum::Router, TokioWidgetsServer)> {
    let migration_url = config.migration_url.as_deref();
    migrate_url(
        migration_url.unwrap_or(url),
        if migration_url.is_some() {
            "WIDGETS_MIGRATION_URL"
        } else {
            "DATABASE_URL"
        },
    )
    .await?;
    let pool =
        TokioPgStore::pool(url, config.pool_size as usize).context("the pool on DATABASE_URL")?;
    // Claims get their own small pool, as on sqlx (`app_and_server`).
    let claim_pool = TokioPgStore::pool(url, CLAIM_POOL_SIZE as usize).context("the claim pool")?;
    // Every idempotent handler here writes before anything else (no downstream call first), so
    // an attempt's transaction begins with its claim: a create in three round trips.
    let store = TokioPgStore::new(pool.clone())
        .with_claim_pool(claim_pool)
        .with_begin_at_claim(true)
        .with_pooler(config.pooler);
    // A transaction pooler WIDGETS_POOLER did not name is refused here, not under load.
    store
        .check()
        .await
        .context("the database does not match WIDGETS_POOLER")?;
    let executor = Executor::new(store.clone(), executor_config(config));
    if config.retention.is_some() {
        tokio::spawn(idemgen_runtime::retention::run_cleanup(
            Arc::new(store),
            CLEANUP_EVERY,
        ));
    }
    let service = service::Widgets::on_tokio_postgres(pool).with_tokio_pooler(config.pooler);
    let server = server_of(config, service, executor);
    Ok((routes(server.clone()), server))
}

/// The executor's settings from `config`: strategy, stale-claim timeout, retention.
fn executor_config(config: &Config) -> ExecutorConfig {
    ExecutorConfig {
        strategy: config.strategy,
        stale_claim: config.stale_claim,
        retention: config.retention,
        ..ExecutorConfig::default()
    }
}

/// The server of `service` on `executor`, with the tokens and body limit of `config`.
fn server_of<D: repo::Database>(
    config: &Config,
    service: service::Widgets<D>,
    executor: Executor<D::Store>,
) -> Server<service::Widgets<D>, D::Store, auth::TokenAuth> {
    let auth = auth::TokenAuth::new(config.tokens.clone());
    Server::new(Arc::new(service), auth, executor).with_config(ServerConfig {
        body_limit: config.body_limit,
    })
}

/// The generated router of `server` (and, built with `bench-plain-route`, `POST /plain/widgets`).
fn routes<D: repo::Database>(
    server: Server<service::Widgets<D>, D::Store, auth::TokenAuth>,
) -> axum::Router {
    #[cfg(feature = "bench-plain-route")]
    let plain = axum::Router::new()
        .route(
            "/plain/widgets",
            axum::routing::post(
                idemgen_runtime::codegen::transactional::<
                    api::CreateWidget,
                    service::Widgets<D>,
                    D::Store,
                    auth::TokenAuth,
                >,
            ),
        )
        .with_state(server.clone());
    let router = api::router(server);
    #[cfg(feature = "bench-plain-route")]
    let router = plain.merge(router);
    router
}

/// Runs the service with `idemgen_runtime::serve` (timeouts, connection limit: `config.serving`)
/// until SIGTERM or Ctrl-C, then drains in-flight requests for at most the shutdown grace. Without
/// `DATABASE_URL` it starts a throwaway local PostgreSQL first (the harness the tests use).
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let (url, _cluster) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let (cluster, url) = throwaway_database().await?;
            (url, Some(cluster))
        }
    };
    let metrics = if config.metrics {
        Some(install_metrics()?)
    } else {
        None
    };
    // The router, and how to end its executor's lease once drained.
    let (router, end_lease): (axum::Router, EndLease) = match config.store {
        StoreKind::Sqlx => {
            let pool = connect_pool(
                &url,
                config.pooler,
                pool_options()
                    .max_connections(config.pool_size)
                    .acquire_timeout(Duration::from_secs(5)),
            )
            .await
            .context("connecting to DATABASE_URL")?;
            let (router, server) = app_and_server(&config, pool).await?;
            (
                router,
                Box::new(move || Box::pin(async move { server.executor().shutdown().await })),
            )
        }
        StoreKind::TokioPostgres => {
            let (router, server) = tokio_app_and_server(&config, &url).await?;
            (
                router,
                Box::new(move || Box::pin(async move { server.executor().shutdown().await })),
            )
        }
    };
    let router = compose::compose(router, &config.cors_origins);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    // One signal stops both listeners.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // `GET /metrics` on a listener of its own: never on the API's, where anyone could ask for
    // it (80 bytes in, tens of KB out).
    let metrics_served = match metrics {
        Some(handle) => {
            let metrics_listener = tokio::net::TcpListener::bind(config.metrics_listen)
                .await
                .with_context(|| format!("binding {} for metrics", config.metrics_listen))?;
            tracing::info!(listen = %config.metrics_listen, "metrics listening");
            let mut stop = stop_rx.clone();
            Some(tokio::spawn(idemgen_runtime::serve(
                metrics_listener,
                metrics_route(handle),
                idemgen_runtime::ServeConfig {
                    max_connections: 16,
                    ..idemgen_runtime::ServeConfig::default()
                },
                async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                },
            )))
        }
        None => None,
    };
    tracing::info!(listen = %config.listen, "widgets listening");
    idemgen_runtime::serve(listener, router, config.serving.clone(), async move {
        idemgen_runtime::shutdown_signal().await;
        let _ = stop_tx.send(true);
    })
    .await
    .context("serving")?;
    if let Some(metrics_served) = metrics_served {
        let _ = metrics_served.await;
    }
    // Drained: end the executor's lease, so that a claim of a request cut at the deadline is
    // taken over at once by its retry (on another replica) instead of after the lease lapses.
    let _ = tokio::time::timeout(Duration::from_secs(5), end_lease()).await;
    tracing::info!("bye");
    Ok(())
}

/// Ends a server's executor lease (`Executor::shutdown`), whichever store it runs on.
type EndLease =
    Box<dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>;

/// Installs the process's `metrics` recorder: a Prometheus exporter rendered by
/// [`metrics_route`], with histogram buckets from 0.1 ms to 10 s for `idemgen.request.duration`
/// and the phases' `idemgen.claim.duration`, `idemgen.handler.duration` and
/// `idemgen.completion.duration`.
/// Once per process (the recorder is global).
pub fn install_metrics() -> anyhow::Result<metrics_exporter_prometheus::PrometheusHandle> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&[
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0,
        ])
        .context("histogram buckets")?
        .install_recorder()
        .context("installing the metrics recorder")
}

/// `GET /metrics`: the Prometheus text format (`idemgen_requests{operation, outcome}`,
/// `idemgen_request_duration_bucket{…}`, `idemgen_claim_duration_bucket{…}`, …). Unauthenticated, as scrapers expect: [`serve`] serves
/// it on a listener of its own (`WIDGETS_METRICS_LISTEN`), never the API's.
pub fn metrics_route(handle: metrics_exporter_prometheus::PrometheusHandle) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let handle = handle.clone();
            async move {
                (
                    [(
                        http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    handle.render(),
                )
            }
        }),
    )
}

/// A PostgreSQL cluster of this process's own, from the local server binaries, with a fresh
/// database; stopped and removed when the process exits.
async fn throwaway_database() -> anyhow::Result<(Cluster, String)> {
    let options = ClusterOptions {
        fsync: true,
        ..ClusterOptions::default()
    };
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&options))
        .await?
        .context("no DATABASE_URL, and no throwaway PostgreSQL could be started")?;
    let db = TestDb::on_cluster(&cluster)
        .await
        .context("creating the throwaway database")?;
    tracing::warn!(
        url = %db.url,
        "DATABASE_URL is unset: serving on a throwaway PostgreSQL; its data is deleted on exit"
    );
    println!("DATABASE_URL={}", db.url);
    Ok((cluster, db.url))
}

#[cfg(test)]
mod tests {
    use super::several_hosts;

    #[test]
    fn only_a_url_listing_several_hosts_goes_through_writer_hosts() {
        for one in [
            "postgres://app:secret@db:5432/widgets",
            // A comma in the password is no host list.
            "postgres://app:a,b@db:5432/widgets",
            "postgres:///widgets?host=/var/run/postgresql",
            "postgres://db/widgets?application_name=a,b",
        ] {
            assert!(several_hosts(one).unwrap().is_none(), "{one}");
        }
        let hosts = several_hosts(
            "postgres://app@h1:5433,h2/widgets?target_session_attrs=read-write&sslmode=disable",
        )
        .unwrap()
        .expect("two hosts");
        let got: Vec<_> = hosts
            .hosts()
            .iter()
            .map(|h| (h.get_host().to_string(), h.get_port()))
            .collect();
        assert_eq!(got, [("h1".to_string(), 5433), ("h2".to_string(), 5432)]);
        let err = several_hosts("postgres://h1,h2/widgets?target_session_attrs=standby")
            .unwrap_err()
            .to_string();
        assert!(err.contains("target_session_attrs"), "{err}");
    }
}

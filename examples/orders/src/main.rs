//! `cargo run -p idemgen-example-orders`: the payments service and the orders service, each on
//! its own database, in one process (README.md).
//!
//! `PAYMENTS_DATABASE_URL` and `ORDERS_DATABASE_URL` name the databases; unset, both are created
//! on a throwaway local PostgreSQL (development only: deleted on exit). `PAYMENTS_LISTEN`
//! (default `127.0.0.1:8082`) and `ORDERS_LISTEN` (default `127.0.0.1:8081`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use idemgen_runtime::testing::{Cluster, ClusterOptions, TestDb};
use sqlx::postgres::PgPoolOptions;

fn listen(var: &str, default: &str) -> anyhow::Result<SocketAddr> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_owned())
        .parse()
        .with_context(|| format!("{var} must be host:port"))
}

async fn pool(url: &str) -> anyhow::Result<sqlx::PgPool> {
    PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let urls = (
        std::env::var("PAYMENTS_DATABASE_URL").ok(),
        std::env::var("ORDERS_DATABASE_URL").ok(),
    );
    // Kept alive until the end of `main`: the throwaway cluster stops when dropped.
    let mut _cluster = None;
    let (payments_url, orders_url) = match urls {
        (Some(p), Some(o)) => (p, o),
        (None, None) => {
            let cluster =
                tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
                    .await?
                    .context("no *_DATABASE_URL, and no throwaway PostgreSQL could be started")?;
            let payments = TestDb::on_cluster(&cluster).await?;
            let orders = TestDb::on_cluster(&cluster).await?;
            tracing::warn!(
                payments = %payments.url,
                orders = %orders.url,
                "no *_DATABASE_URL: serving on a throwaway PostgreSQL; its data is deleted on exit"
            );
            _cluster = Some(cluster);
            (payments.url, orders.url)
        }
        _ => anyhow::bail!("set both PAYMENTS_DATABASE_URL and ORDERS_DATABASE_URL, or neither"),
    };
    let payments_addr = listen("PAYMENTS_LISTEN", "127.0.0.1:8082")?;
    let orders_addr = listen("ORDERS_LISTEN", "127.0.0.1:8081")?;
    let (payments_router, payments_server) =
        idemgen_example_orders::payments_app(pool(&payments_url).await?).await?;
    let client = idemgen_example_orders::payments_client(
        &format!("http://{payments_addr}"),
        idemgen_client::RetryPolicy::default(),
    )?;
    let (orders_router, orders_server) =
        idemgen_example_orders::orders_app(pool(&orders_url).await?, client).await?;
    let payments_listener = tokio::net::TcpListener::bind(payments_addr)
        .await
        .with_context(|| format!("binding {payments_addr}"))?;
    let orders_listener = tokio::net::TcpListener::bind(orders_addr)
        .await
        .with_context(|| format!("binding {orders_addr}"))?;
    tracing::info!(payments = %payments_addr, orders = %orders_addr, "listening");
    let config = idemgen_runtime::ServeConfig::default();
    let (payments, orders) = tokio::join!(
        idemgen_runtime::serve(
            payments_listener,
            payments_router,
            config.clone(),
            idemgen_runtime::shutdown_signal(),
        ),
        idemgen_runtime::serve(
            orders_listener,
            orders_router,
            config,
            idemgen_runtime::shutdown_signal(),
        ),
    );
    payments.context("serving payments")?;
    orders.context("serving orders")?;
    // Drained: end both executors' leases (claims of requests cut at the deadline are taken
    // over at once by their retries).
    let shutdown = async {
        orders_server.executor().shutdown().await;
        payments_server.executor().shutdown().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), shutdown).await;
    Ok(())
}

//! The notes service on SQLite: no database server, nothing to install. Environment:
//! `NOTES_DB` (the database file, default `notes.db`, created if missing), `LISTEN` (default
//! `127.0.0.1:8080`), `RUST_LOG` (default `info,sqlx=warn`). Served by `idemgen_runtime::serve`
//! with its production defaults; stops on Ctrl-C or SIGTERM after the requests in flight.

use std::time::Duration;

use idemgen_runtime::{ExecutorConfig, ServeConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let path = std::env::var("NOTES_DB").unwrap_or_else(|_| "notes.db".to_owned());
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
    let store = idemgen_example_notes::open(&path).await?;
    let (router, server) = idemgen_example_notes::app(store, ExecutorConfig::default());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    tracing::info!(%listen, database = %path, "notes listening");
    idemgen_runtime::serve(
        listener,
        router,
        ServeConfig::default(),
        idemgen_runtime::shutdown_signal(),
    )
    .await?;
    // Drained: end the executor's lease, so that a claim of a request cut at the deadline is
    // taken over at once by its retry instead of after the lease lapses.
    let _ = tokio::time::timeout(Duration::from_secs(5), server.executor().shutdown()).await;
    Ok(())
}

//! `cargo run -p widgets`: the widgets service. See README.md for the configuration.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let config = widgets::config::Config::from_env()?;
    widgets::serve(config).await
}

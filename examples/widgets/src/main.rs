//! `cargo run -p widgets`: the widgets service. See README.md for the configuration.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Colours only on a terminal: a log collector gets plain `key=value` lines.
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let config = widgets::config::Config::from_env()?;
    widgets::serve(config).await
}

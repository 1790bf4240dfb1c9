//! `cargo run -p widgets`: the widgets service. See README.md for the configuration.

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Spans go to OpenTelemetry as well as to the log: `compose::request_span` makes the caller's
    // `traceparent` the parent of each request's spans (and its trace id a field of every log
    // line). This provider has no exporter, so spans end here; to ship them, add one, e.g.
    // `opentelemetry-otlp`'s `SpanExporter` with `.with_batch_exporter(exporter)`.
    // `OTEL_SDK_DISABLED=true` (OpenTelemetry's own switch) leaves the layer out.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let otel = std::env::var("OTEL_SDK_DISABLED")
        .map_or(true, |v| !v.trim().eq_ignore_ascii_case("true"))
        .then(|| widgets::compose::otel_layer(provider.tracer("widgets")));
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    tracing_subscriber::registry()
        .with(filter)
        // Colours only on a terminal: a log collector gets plain `key=value` lines.
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
        )
        .with(otel)
        .init();
    let config = widgets::config::Config::from_env()?;
    let served = widgets::serve(config).await;
    let _ = provider.shutdown();
    served
}

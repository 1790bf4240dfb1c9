//! The wiring a team writes around a generated router: its own routes (a health check, the
//! metrics) merged beside the API, and tower-http layers over all of it — request spans carrying
//! the caller's W3C trace context, CORS for browser clients, gzip.
//!
//! ```text
//! TraceLayer (span `http.request`, parent from `traceparent`)
//!   └ CorsLayer (preflights answered here; `Idempotency-Key` allowed, replay headers exposed)
//!       └ CompressionLayer (gzip when the client accepts it)
//!           └ Router: generated routes (`idemgen.request` spans, children of `http.request`)
//!                     + GET /healthz (GET /metrics: on a listener of its own)
//! ```
//!
//! Not here, on purpose: tower-http's `TimeoutLayer` and `RequestBodyLimitLayer`. Both answer
//! with bodies of their own (an empty 408, a plain-text 413) where the pipeline answers
//! problem+json, and the timeout would cut the pipeline's future at an arbitrary await;
//! `idemgen_runtime::serve` already bounds reading the head and the body
//! (`ServeConfig::header_read_timeout`, `body_read_timeout`) and the pipeline bounds the body's
//! size (`ServerConfig::body_limit`: 413 problem+json).

use axum::Router;
use http::{HeaderName, HeaderValue, Method, header};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TraceId};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The generated router `api` with the service's own routes and layers. `cors_origins`: the
/// browser origins allowed to call the API (none: no cross-origin access). `GET /metrics` is
/// not here: it is served on a listener of its own ([`crate::serve`]).
pub fn compose(api: Router, cors_origins: &[HeaderValue]) -> Router {
    api.route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .layer(CompressionLayer::new())
        .layer(cors(cors_origins))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
}

/// CORS for the API's browser clients: the methods the spec serves, the request headers an
/// idempotent call sends (`Idempotency-Key` among them), and the response headers the protocol
/// defines exposed to the page's script (`Idempotent-Replayed` on a replay, `Location` of a
/// create, `Retry-After` of a 409 or 503): without `Access-Control-Expose-Headers` a browser
/// hides them.
pub fn cors(origins: &[HeaderValue]) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins.iter().cloned()))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("idempotency-key"),
        ])
        .expose_headers([
            HeaderName::from_static("idempotent-replayed"),
            header::LOCATION,
            header::RETRY_AFTER,
        ])
}

/// The span of one HTTP request (`http.request`: method and path, never the query, which may
/// hold an API key, nor any header), its OpenTelemetry parent the W3C trace context of the
/// request's `traceparent`/`tracestate`, when it has a valid one. `trace_id` puts the trace in
/// every log line of the request. The parent takes effect when the subscriber has a
/// `tracing_opentelemetry` layer (as `main.rs` installs); without one the span is a plain span.
pub fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
    let span = tracing::info_span!(
        "http.request",
        method = %request.method(),
        path = request.uri().path(),
        trace_id = tracing::field::Empty,
    );
    let parent = TraceContextPropagator::new().extract(&Headers(request.headers()));
    if span.set_parent(parent).is_ok() {
        let trace_id = span.context().span().span_context().trace_id();
        if trace_id != TraceId::INVALID {
            span.record("trace_id", tracing::field::display(trace_id));
        }
    }
    span
}

/// The `tracing-opentelemetry` layer `main.rs` installs, for `tracer`: spans without the
/// attributes that cost an allocation per span and say little in a service's traces (source
/// location, thread) and without busy/idle timing (a clock read on every poll). Measured in
/// docs/benchmarks.md, "Metrics and tracing on the HTTP path".
pub fn otel_layer<S>(
    tracer: opentelemetry_sdk::trace::SdkTracer,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
}

/// A request's headers as the propagator reads them.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

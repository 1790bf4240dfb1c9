//! What metrics and tracing cost on the HTTP path:
//! `cargo run --release -p widgets --example observe_overhead [seconds-per-round] [rounds]`.
//!
//! Serves the composed widgets app (`widgets::compose`: `TraceLayer`, CORS, gzip) in process on a
//! throwaway PostgreSQL (the `testing` harness, fsync off; or `DATABASE_URL`) and loads it from
//! 16 concurrent in-process clients (reqwest, keep-alive) with replays of 100 completed keys and
//! with creates under fresh keys. Each round runs four settings back to back, in turn:
//!
//! * **off**: the metrics recorder switched off (it hands out no-op handles, as with no
//!   recorder installed) and the `tracing` filter at `OFF` (no span or event is built);
//! * **metrics**: the Prometheus recorder recording (as widgets installs it), tracing off;
//! * **metrics + log**: also a `fmt` layer at INFO (every span and line formatted, to a sink);
//! * **+ otel**: also the `tracing-opentelemetry` layer of widgets' `main.rs` (an SDK tracer
//!   provider without exporter).
//!
//! It prints, per round and setting, requests per second and this process's CPU time per request
//! (user + system from `/proc/self/stat`: the server and its load generator, not PostgreSQL),
//! then each setting's ratio to "off" over the rounds (median, min and max). The machine may be shared:
//! the alternation puts every setting under the same load from the neighbours, the spread says
//! how much that moved; CPU per request is the steadier of the two there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idemgen_runtime::testing::TestDb;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt as _;

const CLIENTS: usize = 16;

/// The Prometheus recorder behind a switch: off, it registers no-op handles.
struct Switched {
    on: AtomicBool,
    inner: metrics_exporter_prometheus::PrometheusRecorder,
}

impl Recorder for Switched {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description)
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description)
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description)
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Setting {
    Off,
    Metrics,
    MetricsAndLog,
    WithOpenTelemetry,
}

const SETTINGS: [(Setting, &str); 4] = [
    (Setting::Off, "off"),
    (Setting::Metrics, "metrics"),
    (Setting::MetricsAndLog, "metrics+log"),
    (Setting::WithOpenTelemetry, "metrics+log+otel"),
];

#[derive(Clone, Copy, Debug)]
enum Scenario {
    Replay,
    Create,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(Ok(3.0), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(6), |a| a.parse())?;
    let round = Duration::from_secs_f64(secs);

    // The switches: a recorder that can be turned off, a filter and an OpenTelemetry layer that
    // can be reloaded.
    let recorder = Arc::new(Switched {
        on: AtomicBool::new(false),
        inner: metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets(&[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0,
            ])?
            .build_recorder(),
    });
    let handle = recorder.inner.handle();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(2));
            handle.run_upkeep();
        }
    });
    metrics::set_global_recorder(ArcRecorder(Arc::clone(&recorder)))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let (filter, filter_handle) = reload::Layer::new(LevelFilter::OFF);
    let (otel, otel_handle) = reload::Layer::new(None);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(std::io::sink),
        )
        .with(otel)
        .init();
    let tracer = provider.tracer("widgets");
    let set = |setting: Setting| -> anyhow::Result<()> {
        recorder
            .on
            .store(!matches!(setting, Setting::Off), Ordering::SeqCst);
        let traced = matches!(setting, Setting::MetricsAndLog | Setting::WithOpenTelemetry);
        filter_handle.reload(if traced {
            LevelFilter::INFO
        } else {
            LevelFilter::OFF
        })?;
        let with_otel = matches!(setting, Setting::WithOpenTelemetry);
        otel_handle.modify(|layer| {
            *layer = with_otel.then(|| widgets::compose::otel_layer(tracer.clone()));
        })?;
        Ok(())
    };

    let db = TestDb::new().await.map_err(anyhow::Error::msg)?;
    let pool = db
        .pool(CLIENTS as u32 + 4)
        .await
        .map_err(anyhow::Error::msg)?;
    let config = widgets::config::Config::from_lookup(|_| None)?;
    let (router, _server) = widgets::app_and_server(&config, pool).await?;
    let app = widgets::compose::compose(router, &[]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(idemgen_runtime::serve(
        listener,
        app,
        config.serving.clone(),
        std::future::pending(),
    ));
    let http = reqwest::Client::new();
    for k in 0..100 {
        let answer = post(&http, &base, &format!("replay-{k}")).await?;
        anyhow::ensure!(answer == 201, "setting up replay-{k}: {answer}");
    }

    println!("{CLIENTS} clients, {rounds} rounds of {secs} s per setting and scenario");
    for scenario in [Scenario::Replay, Scenario::Create] {
        let mut rates = vec![Vec::new(); SETTINGS.len()];
        let mut cpu = vec![Vec::new(); SETTINGS.len()];
        // A warm-up round, not counted.
        set(Setting::Off)?;
        load(&http, &base, scenario, round / 2, usize::MAX).await?;
        for r in 0..rounds {
            for (i, (setting, _)) in SETTINGS.iter().enumerate() {
                set(*setting)?;
                let cpu_before = cpu_seconds()?;
                let (rate, requests) = load(&http, &base, scenario, round, r * 10 + i).await?;
                rates[i].push(rate);
                cpu[i].push((cpu_seconds()? - cpu_before) / requests as f64 * 1e6);
            }
            let line: Vec<String> = SETTINGS
                .iter()
                .enumerate()
                .map(|(i, (_, name))| format!("{name} {:.0}/s {:.0} µs", rates[i][r], cpu[i][r]))
                .collect();
            println!("{scenario:?} round {r}: {}", line.join(", "));
        }
        for (i, (_, name)) in SETTINGS.iter().enumerate().skip(1) {
            let spread = |values: &[Vec<f64>]| {
                let mut ratios: Vec<f64> =
                    (0..rounds).map(|r| values[i][r] / values[0][r]).collect();
                ratios.sort_by(f64::total_cmp);
                (
                    ratios[ratios.len() / 2],
                    ratios[0],
                    ratios[ratios.len() - 1],
                )
            };
            let (median, min, max) = spread(&rates);
            let (cpu_median, cpu_min, cpu_max) = spread(&cpu);
            println!(
                "{scenario:?}: {name} / off: throughput {median:.3} (min {min:.3}, max {max:.3}); \
                 CPU per request {cpu_median:.3} (min {cpu_min:.3}, max {cpu_max:.3})"
            );
        }
    }
    set(Setting::Off)?;
    let _ = provider.shutdown();
    Ok(())
}

/// The recorder shared with the switch.
struct ArcRecorder(Arc<Switched>);

impl Recorder for ArcRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_counter(key, unit, description)
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_gauge(key, unit, description)
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_histogram(key, unit, description)
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.0.register_counter(key, metadata)
    }
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.0.register_gauge(key, metadata)
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        self.0.register_histogram(key, metadata)
    }
}

async fn post(http: &reqwest::Client, base: &str, key: &str) -> anyhow::Result<u16> {
    let response = http
        .post(format!("{base}/widgets"))
        .header("authorization", "Bearer tok1")
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(r#"{"name":"bench"}"#)
        .send()
        .await?;
    let status = response.status().as_u16();
    response.bytes().await?;
    Ok(status)
}

/// This process's CPU time so far (all threads, user + system), in seconds.
fn cpu_seconds() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name (which is in parentheses and may hold spaces): utime and
    // stime are the 12th and 13th, in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Requests per second of `CLIENTS` clients running `scenario` for `time`, and how many were
/// made; `tag` keeps the creates' keys fresh.
async fn load(
    http: &reqwest::Client,
    base: &str,
    scenario: Scenario,
    time: Duration,
    tag: usize,
) -> anyhow::Result<(f64, u64)> {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + time;
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let (http, base, done) = (http.clone(), base.to_owned(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                let key = match scenario {
                    Scenario::Replay => format!("replay-{}", (client * 7 + n) % 100),
                    Scenario::Create => format!("create-{tag}-{client}-{n}"),
                };
                let status = post(&http, &base, &key).await?;
                anyhow::ensure!(status == 201, "{scenario:?} {key}: {status}");
                done.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let requests = done.load(Ordering::Relaxed);
    Ok((requests as f64 / started.elapsed().as_secs_f64(), requests))
}

//! What the generated client costs per call against a hand-written reqwest call on the same
//! endpoint: `cargo run --release -p widgets --example client_overhead`.
//!
//! Serves the widgets app in process on a throwaway PostgreSQL (the `testing` harness; or
//! `DATABASE_URL`), then alternates rounds of sequential calls — a `GET /widgets/{id}` and a
//! replayed `POST /widgets` — made by the generated client and by plain reqwest (same headers,
//! body parsed into the same type), and prints the mean latency of each and their ratio.

use std::time::{Duration, Instant};

use idemgen_client::{CallOptions, Client, HeaderValue};
use idemgen_runtime::testing::TestDb;
use widgets::client::types::{NewWidget, Widget};
use widgets::client::{CreateWidgetResponse, GetWidgetResponse, WidgetsClient};

const ROUNDS: usize = 10;
const CALLS: usize = 300;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let db = TestDb::new().await.map_err(anyhow::Error::msg)?;
    let pool = db.pool(8).await.map_err(anyhow::Error::msg)?;
    let config = widgets::config::Config::from_lookup(|_| None)?;
    let app = widgets::app(&config, pool).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let http = reqwest::Client::new();
    let generated = WidgetsClient::from_client(Client::with_http(http.clone(), &base).with_header(
        http::header::AUTHORIZATION,
        HeaderValue::from_static("Bearer tok1"),
    ));
    let new: NewWidget = serde_json::from_value(serde_json::json!({"name": "bench"}))?;
    let created = generated
        .create_widget(&new, &CallOptions::with_key("overhead"))
        .await?;
    let CreateWidgetResponse::Status201 { body: widget, .. } = created.value;

    let mut times = [Duration::ZERO; 4];
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..CALLS {
            let reply = generated
                .get_widget(&widget.id, &CallOptions::default())
                .await?;
            let GetWidgetResponse::Status200(got) = reply.value;
            assert_eq!(got.id, widget.id);
        }
        times[0] += t.elapsed();
        let t = Instant::now();
        for _ in 0..CALLS {
            let got: Widget = http
                .get(format!("{base}/widgets/{}", widget.id))
                .header("authorization", "Bearer tok1")
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            assert_eq!(got.id, widget.id);
        }
        times[1] += t.elapsed();
        let t = Instant::now();
        for _ in 0..CALLS {
            let reply = generated
                .create_widget(&new, &CallOptions::with_key("overhead"))
                .await?;
            assert!(reply.replayed);
        }
        times[2] += t.elapsed();
        let t = Instant::now();
        for _ in 0..CALLS {
            let response = http
                .post(format!("{base}/widgets"))
                .header("authorization", "Bearer tok1")
                .header("idempotency-key", "overhead")
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&new)?)
                .send()
                .await?
                .error_for_status()?;
            assert!(response.headers().contains_key("idempotent-replayed"));
            let got: Widget = response.json().await?;
            assert_eq!(got.id, widget.id);
        }
        times[3] += t.elapsed();
    }
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / (ROUNDS * CALLS) as f64;
    println!("| call | generated client µs | hand-written reqwest µs | ratio |");
    println!("|---|---:|---:|---:|");
    for (what, generated, hand) in [
        ("GET /widgets/{id}", times[0], times[1]),
        ("POST /widgets (replay)", times[2], times[3]),
    ] {
        println!(
            "| {what} | {:.1} | {:.1} | {:.3} |",
            per_call(generated),
            per_call(hand),
            per_call(generated) / per_call(hand)
        );
    }
    Ok(())
}

//! What a derived key adds to a downstream call (docs/downstream.md, "Figures"): the payments
//! service in process on a throwaway PostgreSQL, called over loopback HTTP through the generated
//! client, alternating blocks of calls keyed by a fresh UUID (a plain keyed call) and by a key
//! derived from an upstream key (`DerivedKey::new` per call, then `CallOptions::from`).
//!
//! `cargo run --release -p idemgen-example-orders --example derive_overhead`

use std::time::{Duration, Instant};

use idemgen_client::{CallOptions, RetryPolicy};
use idemgen_example_orders::payments_client::types::NewCharge;
use idemgen_protocol::{DerivedKey, IdempotencyKey};
use idemgen_runtime::testing::TestDb;

const BLOCKS: usize = 6;
const PER_BLOCK: usize = 100;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let db = TestDb::new().await?;
    let (router, _) = idemgen_example_orders::payments_app(db.pool(8).await?).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(idemgen_runtime::serve(
        listener,
        router,
        idemgen_runtime::ServeConfig::default(),
        std::future::pending(),
    ));
    let client = idemgen_example_orders::payments_client(&base, RetryPolicy::default())?;
    let charge = |n: usize| NewCharge {
        reference: format!("bench {n}"),
        amount: 100,
        currency: "EUR".into(),
    };
    let (mut plain, mut derived) = (Vec::new(), Vec::new());
    let mut n = 0;
    for block in 0..BLOCKS {
        for _ in 0..PER_BLOCK {
            n += 1;
            let started = Instant::now();
            let options = if block % 2 == 0 {
                CallOptions::with_key(uuid::Uuid::new_v4().to_string())
            } else {
                let upstream = IdempotencyKey::new(uuid::Uuid::new_v4().to_string())?;
                let key = DerivedKey::new("alice", "createOrder", "", &upstream, "charge");
                CallOptions::from(&key)
            };
            client.create_charge(&charge(n), &options).await?;
            let took = started.elapsed();
            if block % 2 == 0 {
                plain.push(took);
            } else {
                derived.push(took);
            }
        }
    }
    let derive_only = {
        let upstream = IdempotencyKey::new("k1")?;
        let started = Instant::now();
        for i in 0..10_000 {
            std::hint::black_box(DerivedKey::new(
                "alice",
                "createOrder",
                "",
                &upstream,
                &i.to_string(),
            ));
        }
        started.elapsed() / 10_000
    };
    let (p, d) = (median(plain), median(derived));
    println!(
        "median call: plain key {p:?}, derived key {d:?}, ratio {:.3}; DerivedKey::new alone {derive_only:?} ({BLOCKS} alternating blocks of {PER_BLOCK})",
        d.as_secs_f64() / p.as_secs_f64()
    );
    Ok(())
}

//! `cargo run --release -p idemgen-bench -- --json PATH`: what idempotency costs.
//!
//! Every scenario runs in one process against one PostgreSQL server with `fsync = on` (the test
//! harness's throwaway cluster when `DATABASE_URL` is unset), so the ratios compare like with like:
//!
//! * `plain_create` — the business insert in a transaction, no idempotency (the floor);
//! * `plain_plus_row` — the same transaction writing one more keyed row (a second floor: what
//!   "idempotency is one more row" would cost at best);
//! * `idempotent_create_claim` — the executor, separate-claim strategy (claim commits on its own,
//!   by the store's default without waiting for its WAL flush; protocol.md argues why that is
//!   safe);
//! * `idempotent_create_claim_sync` — the same with `PgStore::with_synchronous_claims(true)`:
//!   the claim's commit waits for its flush;
//! * `idempotent_create_in_tx` — the executor, in-transaction strategy (one commit);
//! * `replay` — retries of completed keys;
//! * `same_key_storm` — N concurrent attempts on one key: writes per key and time to settle.
//!
//! Per scenario and client count: throughput, p50/p99 latency, and per request: commits
//! (`pg_stat_database`), statements (`pg_stat_statements`, when the server ships it) and WAL
//! flushes (`pg_stat_wal.wal_sync`).
//!
//! `--db-delay-ms X` puts PostgreSQL X ms away in each direction (an [`idemgen_testdb::DelayProxy`]
//! between the measured pools and the server; the counters' own pool goes around it) and adds
//! round trips per request, counted by the proxy.
//!
//! The same scenarios then run on tokio-postgres (`TokioPgStore`, the pipelining store) against
//! floors on that driver, each named with `_tokio_postgres` after it, its ratios against its own
//! floors (`tokio_pg.rs`), among them `plain_plus_record_tokio_postgres` (the in-transaction
//! create's writes without its gate or executor) and, beside the create, `gated_record_tokio_postgres`
//! (the same with the gate). Every floor's pool pings no connection at checkout.
//!
//! `--rounds n` runs each client count's scenarios n times in turn: the figures are the medians
//! of the rounds, each ratio taken within its round and given with its range, and the JSON keeps
//! every round's figures (`per_round`).
//!
//! `--sqlite` runs the same comparison on `SqliteStore` instead, against SQLite floors, with no
//! PostgreSQL (`sqlite.rs`).

mod sqlite;
mod tokio_pg;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use http::{HeaderMap, StatusCode};
use idemgen_protocol::{Fingerprint, IdempotencyKey};
use idemgen_runtime::codegen::{CodecError, EncodedResponse};
use idemgen_runtime::engine::{
    ExecuteError, HandlerFuture, IdempotentRequest, ResponseCodec, Scope, StoredResponse,
};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Strategy, TxHandle};
use idemgen_testdb::{Cluster, ClusterOptions, DelayCounters, DelayProxy, TestDb};
use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor as _, PgPool};

#[derive(Parser, Debug)]
#[command(about = "Measure idempotency's cost against a plain insert, side by side.")]
struct Args {
    /// Write the results as JSON to this path.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Seconds per scenario and client count.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Client counts.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Run only these scenarios (besides the two floors, which every ratio needs).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The SQLite store against SQLite floors (one file, WAL, synchronous=FULL), no PostgreSQL.
    #[arg(long)]
    sqlite: bool,
    /// Put PostgreSQL this many milliseconds away in each direction (0.5: half a millisecond),
    /// through a delaying proxy that also counts round trips.
    #[arg(long)]
    db_delay_ms: Option<f64>,
    /// Run every client count's scenarios this many times in turn: each figure is then the
    /// median of the rounds, and each ratio, taken within its round, is given with its range.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
}

#[derive(Debug, Clone, Serialize)]
struct ScenarioResult {
    name: String,
    clients: usize,
    requests: u64,
    throughput_rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// PostgreSQL only (`pg_stat_database`).
    commits_per_request: Option<f64>,
    statements_per_request: Option<f64>,
    /// PostgreSQL only (`pg_stat_wal`).
    wal_flushes_per_request: Option<f64>,
    /// `--db-delay-ms` only: round trips between the pools and PostgreSQL, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    round_trips_per_request: Option<f64>,
    ratio_to_plain: Option<f64>,
    ratio_to_plus_row: Option<f64>,
    /// tokio-postgres only: against `plain_plus_record_tokio_postgres`, the in-transaction
    /// create's writes without its gate or executor.
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_plus_record: Option<f64>,
    /// `same_key_storm` only: committed business writes per key (must be 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    writes_per_key: Option<f64>,
    /// `same_key_storm` only: median time from the first attempt to the last answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    settle_ms: Option<f64>,
    /// How many rounds the figures above are the medians of (`--rounds`).
    rounds: usize,
    /// More than one round: each round's figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    per_round: Vec<RoundFigures>,
}

/// One round's figures of a scenario, its ratios taken against the floors of the same round.
#[derive(Debug, Clone, Serialize)]
struct RoundFigures {
    throughput_rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    ratio_to_plain: Option<f64>,
    ratio_to_plus_row: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_plus_record: Option<f64>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The rounds of one client count as one result per scenario: each figure the median of its
/// rounds (writes per key the largest: it must be 1 in every round), requests summed, and each
/// round's figures kept. Every round runs the same scenarios in the same order.
fn merge_rounds(rounds: Vec<Vec<ScenarioResult>>) -> Vec<ScenarioResult> {
    if rounds.len() == 1 {
        return rounds.into_iter().next().unwrap_or_default();
    }
    let first = &rounds[0];
    (0..first.len())
        .map(|i| {
            let runs: Vec<&ScenarioResult> = rounds.iter().map(|r| &r[i]).collect();
            let med = |f: fn(&ScenarioResult) -> f64| median(runs.iter().map(|s| f(s)).collect());
            let med_opt = |f: fn(&ScenarioResult) -> Option<f64>| {
                let v: Option<Vec<f64>> = runs.iter().map(|s| f(s)).collect();
                v.map(median)
            };
            ScenarioResult {
                name: runs[0].name.clone(),
                clients: runs[0].clients,
                requests: runs.iter().map(|s| s.requests).sum(),
                throughput_rps: med(|s| s.throughput_rps),
                p50_ms: med(|s| s.p50_ms),
                p99_ms: med(|s| s.p99_ms),
                commits_per_request: med_opt(|s| s.commits_per_request),
                statements_per_request: med_opt(|s| s.statements_per_request),
                wal_flushes_per_request: med_opt(|s| s.wal_flushes_per_request),
                round_trips_per_request: med_opt(|s| s.round_trips_per_request),
                ratio_to_plain: med_opt(|s| s.ratio_to_plain),
                ratio_to_plus_row: med_opt(|s| s.ratio_to_plus_row),
                ratio_to_plus_record: med_opt(|s| s.ratio_to_plus_record),
                writes_per_key: runs
                    .iter()
                    .map(|s| s.writes_per_key)
                    .collect::<Option<Vec<f64>>>()
                    .and_then(|v| v.into_iter().reduce(f64::max)),
                settle_ms: med_opt(|s| s.settle_ms),
                rounds: runs.len(),
                per_round: runs
                    .iter()
                    .map(|s| RoundFigures {
                        throughput_rps: s.throughput_rps,
                        p50_ms: s.p50_ms,
                        p99_ms: s.p99_ms,
                        ratio_to_plain: s.ratio_to_plain,
                        ratio_to_plus_row: s.ratio_to_plus_row,
                        ratio_to_plus_record: s.ratio_to_plus_record,
                    })
                    .collect(),
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct Report {
    server: String,
    seconds_per_run: f64,
    scenarios: Vec<ScenarioResult>,
}

/// The created resource as the bench's "API" answers it.
struct Created(uuid::Uuid);

impl ResponseCodec for Created {
    fn encode_success(&self) -> Result<Option<EncodedResponse>, CodecError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::LOCATION,
            format!("/things/{}", self.0)
                .parse()
                .map_err(|_| CodecError("location".into()))?,
        );
        Ok(Some(EncodedResponse {
            status: StatusCode::CREATED,
            headers,
            body: format!("{{\"id\":\"{}\"}}", self.0).into_bytes(),
        }))
    }

    fn decode(stored: &StoredResponse) -> Result<Self, CodecError> {
        let v: serde_json::Value =
            serde_json::from_slice(&stored.body).map_err(|e| CodecError(e.to_string()))?;
        let id = v["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| CodecError("id".into()))?;
        Ok(Created(id))
    }
}

async fn insert_thing(
    conn: &mut sqlx::PgConnection,
    owner: &str,
) -> Result<uuid::Uuid, sqlx::Error> {
    let id = uuid::Uuid::new_v4();
    sqlx::query("INSERT INTO things (id, owner, name) VALUES ($1, $2, 'bench')")
        .bind(id)
        .bind(owner)
        .execute(conn)
        .await?;
    Ok(id)
}

fn request(owner: &str, key: &str) -> IdempotentRequest {
    let input = serde_json::json!({"body": {"name": "bench"}});
    IdempotentRequest {
        scope: Scope::new(owner, "createThing", IdempotencyKey::new(key).expect("key")),
        fingerprint: Fingerprint::hs2("createThing", 1, &input).expect("fingerprint"),
        fingerprint_version: 1,
        earlier: None,
        declared_headers: &[],
        key_header: "Idempotency-Key",
        retention: None,
    }
}

async fn idempotent_create(
    exec: &Executor<PgStore>,
    owner: &str,
    key: &str,
) -> anyhow::Result<bool> {
    let owner_in = owner.to_owned();
    let result = exec
        .execute(
            request(owner, key),
            move |tx: &mut TxHandle<PgStore>| -> HandlerFuture<'_, Created, anyhow::Error> {
                Box::pin(async move {
                    let id = insert_thing(tx.conn().await?, &owner_in).await?;
                    tx.set_resource_ref(id.to_string());
                    Ok(Created(id))
                })
            },
        )
        .await;
    match result {
        Ok(o) => Ok(o.replayed()),
        Err(ExecuteError::Problem(p)) => anyhow::bail!("problem: {p}"),
        Err(ExecuteError::Handler(e)) => anyhow::bail!("handler: {e}"),
    }
}

/// Database-wide counters read before and after a run.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    commits: i64,
    statements: Option<i64>,
    wal_syncs: i64,
}

async fn counters(admin: &PgPool) -> anyhow::Result<Counters> {
    let mut conn = admin.acquire().await?;
    conn.execute("SELECT pg_stat_clear_snapshot()").await?;
    let commits: i64 = sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut *conn)
    .await?;
    let statements: Option<i64> = sqlx::query_scalar(
        "SELECT sum(calls)::bigint FROM pg_stat_statements
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(&mut *conn)
    .await
    .ok()
    .flatten();
    let wal_syncs: i64 = sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(&mut *conn)
        .await?;
    Ok(Counters {
        commits,
        statements,
        wal_syncs,
    })
}

type Op = Arc<dyn Fn(usize, u64) -> futures_box::BoxFut + Send + Sync>;

mod futures_box {
    /// A boxed request future.
    pub type BoxFut =
        std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>;
}

/// Runs `op` from `clients` tasks for `duration`; returns (requests, sorted latencies).
async fn drive(clients: usize, duration: Duration, op: Op) -> anyhow::Result<(u64, Vec<Duration>)> {
    let stop_at = Instant::now() + duration;
    let seq = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (op, seq) = (op.clone(), seq.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < stop_at {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                op(c, n).await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort();
    Ok((all.len() as u64, all))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1000.0
}

/// The pools a scenario measured, closed before its counters are read.
enum Pools<'a> {
    Sqlx(&'a [PgPool]),
    Tokio(&'a idemgen_runtime::deadpool_postgres::Pool),
}

struct Bench {
    /// How the measured pools connect (through the delay proxy with `--db-delay-ms`).
    options: PgConnectOptions,
    admin: PgPool,
    seconds: f64,
    /// The delay proxy's counters, with `--db-delay-ms`.
    delay: Option<Arc<DelayCounters>>,
}

impl Bench {
    async fn pool(&self, size: usize) -> anyhow::Result<PgPool> {
        Ok(PgPoolOptions::new()
            .max_connections(size as u32)
            .min_connections(size as u32)
            // No ping per checkout: the floors' round trips are their statements' alone
            // (BEGIN, the inserts, COMMIT), as a pipelining driver's pool (deadpool's fast
            // recycling) pings none either.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(self.options.clone())
            .await?)
    }

    /// Runs one measured scenario; the pools are closed before the counters are read, so every
    /// backend has flushed its statistics.
    async fn measure(
        &self,
        name: &str,
        clients: usize,
        pools: Pools<'_>,
        op: Op,
    ) -> anyhow::Result<ScenarioResult> {
        let before = counters(&self.admin).await?;
        let trips_before = self.delay.as_ref().map(|d| d.round_trips());
        let (requests, lat) = drive(clients, Duration::from_secs_f64(self.seconds), op).await?;
        let trips = self
            .delay
            .as_ref()
            .zip(trips_before)
            .map(|(d, b)| (d.round_trips() - b) as f64 / requests.max(1) as f64);
        match pools {
            Pools::Sqlx(pools) => {
                for p in pools {
                    p.close().await;
                }
            }
            // Dropping its idle clients closes their connections.
            Pools::Tokio(pool) => pool.close(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = counters(&self.admin).await?;
        let per = |d: i64| d as f64 / requests.max(1) as f64;
        Ok(ScenarioResult {
            name: name.into(),
            clients,
            requests,
            throughput_rps: requests as f64 / self.seconds,
            p50_ms: percentile(&lat, 0.50),
            p99_ms: percentile(&lat, 0.99),
            // The two counter reads themselves commit once each.
            commits_per_request: Some(per(after.commits - before.commits - 2)),
            statements_per_request: match (before.statements, after.statements) {
                (Some(b), Some(a)) => Some(per(a - b - 8)),
                _ => None,
            },
            wal_flushes_per_request: Some(per(after.wal_syncs - before.wal_syncs)),
            round_trips_per_request: trips,
            ratio_to_plain: None,
            ratio_to_plus_row: None,
            ratio_to_plus_record: None,
            writes_per_key: None,
            settle_ms: None,
            rounds: 1,
            per_round: Vec::new(),
        })
    }

    /// The plain create plus one more row with a unique key in the same transaction.
    async fn plain_plus_row(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let p = pool.clone();
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (p, key) = (p.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let owner = format!("owner-{c}");
                let mut tx = p.begin().await?;
                insert_thing(&mut tx, &owner).await?;
                sqlx::query("INSERT INTO plain_keys (owner, key) VALUES ($1, $2)")
                    .bind(&owner)
                    .bind(&key)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            })
        });
        self.measure("plain_plus_row", clients, Pools::Sqlx(&[pool]), op)
            .await
    }

    async fn plain(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let p = pool.clone();
        let op: Op = Arc::new(move |c, _| {
            let p = p.clone();
            Box::pin(async move {
                let mut tx = p.begin().await?;
                insert_thing(&mut tx, &format!("owner-{c}")).await?;
                tx.commit().await?;
                Ok(())
            })
        });
        self.measure("plain_create", clients, Pools::Sqlx(&[pool]), op)
            .await
    }

    async fn idempotent(
        &self,
        name: &str,
        clients: usize,
        strategy: Strategy,
        synchronous_claims: bool,
    ) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let store = PgStore::new(pool.clone()).with_synchronous_claims(synchronous_claims);
        let pools = vec![pool];
        let exec = Executor::new(
            store,
            ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            },
        );
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (exec, key) = (exec.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let replayed = idempotent_create(&exec, &format!("owner-{c}"), &key).await?;
                anyhow::ensure!(!replayed, "a fresh key replayed");
                Ok(())
            })
        });
        self.measure(name, clients, Pools::Sqlx(&pools), op).await
    }

    async fn replay(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let exec = Executor::new(PgStore::new(pool.clone()), ExecutorConfig::default());
        let run = uuid::Uuid::new_v4().simple().to_string();
        const KEYS: u64 = 500;
        for k in 0..KEYS {
            idempotent_create(&exec, "replayer", &format!("{run}-{k}")).await?;
        }
        let op: Op = Arc::new(move |_, n| {
            let (exec, key) = (exec.clone(), format!("{run}-{}", n % KEYS));
            Box::pin(async move {
                let replayed = idempotent_create(&exec, "replayer", &key).await?;
                anyhow::ensure!(replayed, "a completed key executed again");
                Ok(())
            })
        });
        self.measure("replay", clients, Pools::Sqlx(&[pool]), op)
            .await
    }

    /// Rounds of `clients` simultaneous attempts on one fresh key each.
    async fn storm(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients.min(32)).await?;
        let exec = Executor::new(PgStore::new(pool.clone()), ExecutorConfig::default());
        let before = counters(&self.admin).await?;
        let run = uuid::Uuid::new_v4().simple().to_string();
        let owner = format!("storm-{run}");
        let deadline = Instant::now() + Duration::from_secs_f64(self.seconds);
        let (mut rounds, mut attempts) = (0u64, 0u64);
        let mut settle = Vec::new();
        let mut lat = Vec::new();
        while Instant::now() < deadline || rounds == 0 {
            let key = format!("{run}-{rounds}");
            let barrier = Arc::new(tokio::sync::Barrier::new(clients));
            let started = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let (exec, key, owner, barrier) =
                    (exec.clone(), key.clone(), owner.clone(), barrier.clone());
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let t = Instant::now();
                    // 409 after the in-flight wait is a legitimate answer in a storm.
                    let _ = idempotent_create(&exec, &owner, &key).await;
                    t.elapsed()
                }));
            }
            for t in tasks {
                lat.push(t.await?);
            }
            settle.push(started.elapsed());
            rounds += 1;
            attempts += clients as u64;
        }
        pool.close().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = counters(&self.admin).await?;
        let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM things WHERE owner = $1")
            .bind(&owner)
            .fetch_one(&self.admin)
            .await?;
        lat.sort();
        settle.sort();
        let per = |d: i64| d as f64 / attempts.max(1) as f64;
        Ok(ScenarioResult {
            name: "same_key_storm".into(),
            clients,
            requests: attempts,
            throughput_rps: attempts as f64 / self.seconds,
            p50_ms: percentile(&lat, 0.5),
            p99_ms: percentile(&lat, 0.99),
            commits_per_request: Some(per(after.commits - before.commits - 2)),
            statements_per_request: None,
            wal_flushes_per_request: Some(per(after.wal_syncs - before.wal_syncs)),
            round_trips_per_request: None,
            ratio_to_plain: None,
            ratio_to_plus_row: None,
            ratio_to_plus_record: None,
            writes_per_key: Some(writes as f64 / rounds as f64),
            settle_ms: Some(percentile(&settle, 0.5)),
            rounds: 1,
            per_round: Vec::new(),
        })
    }

    /// One round at `clients`: the floors, then the wanted scenarios, per driver, each group's
    /// ratios against its own floors.
    async fn round(
        &self,
        clients: usize,
        wanted: &impl Fn(&str) -> bool,
    ) -> anyhow::Result<Vec<ScenarioResult>> {
        let mut scenarios = Vec::new();
        let plain = self.plain(clients).await.context("plain_create")?;
        let plain_rps = plain.throughput_rps;
        let plus_row = self
            .plain_plus_row(clients)
            .await
            .context("plain_plus_row")?;
        let plus_row_rps = plus_row.throughput_rps;
        let mut group = vec![plain, plus_row];
        for (name, strategy, synchronous_claims) in [
            ("idempotent_create_claim", Strategy::SeparateClaim, false),
            (
                "idempotent_create_claim_sync",
                Strategy::SeparateClaim,
                true,
            ),
            ("idempotent_create_in_tx", Strategy::InTransaction, false),
        ] {
            if wanted(name) {
                group.push(
                    self.idempotent(name, clients, strategy, synchronous_claims)
                        .await
                        .context(name)?,
                );
            }
        }
        if wanted("replay") {
            group.push(self.replay(clients).await.context("replay")?);
        }
        if wanted("same_key_storm") {
            group.push(self.storm(clients).await.context("same_key_storm")?);
        }
        for s in &mut group {
            s.ratio_to_plain = Some(s.throughput_rps / plain_rps);
            s.ratio_to_plus_row = Some(s.throughput_rps / plus_row_rps);
        }
        scenarios.extend(group);
        // tokio-postgres: its scenarios against its own floors.
        let plain = self
            .plain_tokio(clients, false)
            .await
            .context("plain_create_tokio_postgres")?;
        let plus_row = self
            .plain_tokio(clients, true)
            .await
            .context("plain_plus_row_tokio_postgres")?;
        let plus_record = self
            .plus_record_tokio(clients, false)
            .await
            .context("plain_plus_record_tokio_postgres")?;
        let (plain_rps, plus_row_rps, plus_record_rps) = (
            plain.throughput_rps,
            plus_row.throughput_rps,
            plus_record.throughput_rps,
        );
        let mut group = vec![plain, plus_row, plus_record];
        for (name, strategy, begin_at_claim) in [
            (
                "idempotent_create_claim_tokio_postgres",
                Strategy::SeparateClaim,
                false,
            ),
            (
                "idempotent_create_claim_begun_tokio_postgres",
                Strategy::SeparateClaim,
                true,
            ),
            (
                "idempotent_create_in_tx_tokio_postgres",
                Strategy::InTransaction,
                false,
            ),
        ] {
            if wanted(name) {
                group.push(
                    self.idempotent_tokio(name, clients, strategy, begin_at_claim)
                        .await
                        .context(name)?,
                );
            }
        }
        if wanted("gated_record_tokio_postgres") {
            group.push(
                self.plus_record_tokio(clients, true)
                    .await
                    .context("gated_record_tokio_postgres")?,
            );
        }
        if wanted("replay_tokio_postgres") {
            group.push(self.replay_tokio(clients).await.context("replay")?);
        }
        for s in &mut group {
            s.ratio_to_plain = Some(s.throughput_rps / plain_rps);
            s.ratio_to_plus_row = Some(s.throughput_rps / plus_row_rps);
            s.ratio_to_plus_record = Some(s.throughput_rps / plus_record_rps);
        }
        scenarios.extend(group);
        Ok(scenarios)
    }
}

fn markdown(report: &Report) -> String {
    let mut out = String::from(
        "| scenario | clients | req/s | p50 ms | p99 ms | commits/req | statements/req | WAL flushes/req | round trips/req | × plain | × plain_plus_row | × plain_plus_record | writes/key |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for s in &report.scenarios {
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.name,
            s.clients,
            s.throughput_rps,
            s.p50_ms,
            s.p99_ms,
            s.commits_per_request
                .map_or("–".into(), |v| format!("{v:.2}")),
            s.statements_per_request
                .map_or("–".into(), |v| format!("{v:.2}")),
            s.wal_flushes_per_request
                .map_or("–".into(), |v| format!("{v:.2}")),
            s.round_trips_per_request
                .map_or("–".into(), |v| format!("{v:.2}")),
            ratio_cell(s.ratio_to_plain, s, |r| r.ratio_to_plain),
            ratio_cell(s.ratio_to_plus_row, s, |r| r.ratio_to_plus_row),
            ratio_cell(s.ratio_to_plus_record, s, |r| r.ratio_to_plus_record),
            s.writes_per_key.map_or("–".into(), |v| format!("{v:.2}")),
        ));
    }
    out
}

/// A ratio, with its range over the rounds when there were several.
fn ratio_cell(
    median: Option<f64>,
    s: &ScenarioResult,
    of: fn(&RoundFigures) -> Option<f64>,
) -> String {
    let Some(median) = median else {
        return "–".into();
    };
    let each: Vec<f64> = s.per_round.iter().filter_map(of).collect();
    match (
        each.iter().copied().reduce(f64::min),
        each.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) if each.len() > 1 => format!("{median:.2} ({lo:.2}–{hi:.2})"),
        _ => format!("{median:.2}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    if args.sqlite {
        let mut scenarios = Vec::new();
        for &clients in &args.clients {
            let mut rounds = Vec::new();
            for _ in 0..args.rounds {
                rounds.push(sqlite::run(args.seconds, &[clients], &wanted).await?);
            }
            scenarios.extend(merge_rounds(rounds));
        }
        let report = Report {
            server: "SQLite file (WAL, synchronous=FULL)".into(),
            seconds_per_run: args.seconds,
            scenarios,
        };
        println!("{}", markdown(&report));
        if let Some(path) = &args.json {
            std::fs::write(path, serde_json::to_vec_pretty(&report)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }
    // fsync stays ON: commits cost what they cost in production.
    let (cluster, db) = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => (None, TestDb::new().await.map_err(anyhow::Error::msg)?),
        _ => {
            let cluster = Cluster::start(&ClusterOptions {
                fsync: true,
                max_connections: 300,
                ..ClusterOptions::default()
            })
            .map_err(anyhow::Error::msg)?;
            let db = TestDb::on_cluster(&cluster)
                .await
                .map_err(anyhow::Error::msg)?;
            (Some(cluster), db)
        }
    };
    let server = if cluster.is_some() {
        "throwaway cluster, fsync=on"
    } else {
        "DATABASE_URL"
    };
    let admin = db.pool(4).await.map_err(anyhow::Error::msg)?;
    {
        let mut conn = admin.acquire().await?;
        idemgen_runtime::migrate(&mut conn).await?;
        conn.execute(
            "CREATE TABLE things (id uuid PRIMARY KEY, owner text NOT NULL, name text NOT NULL,
                                  created_at timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
        conn.execute("CREATE TABLE plain_keys (owner text, key text, PRIMARY KEY (owner, key))")
            .await?;
        let _ = conn
            .execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await;
    }
    let (options, delay, _proxy) = match args.db_delay_ms {
        None => (db.options.clone(), None, None),
        Some(ms) => {
            anyhow::ensure!(
                ms.is_finite() && ms >= 0.0,
                "--db-delay-ms: a delay of 0 or more milliseconds"
            );
            let upstream = tokio::net::lookup_host((db.options.get_host(), db.options.get_port()))
                .await?
                .next()
                .context("the database's address")?;
            let proxy = DelayProxy::start(
                "127.0.0.1:0".parse()?,
                upstream,
                Duration::from_secs_f64(ms / 1000.0),
            )?;
            let options = db
                .options
                .clone()
                .host("127.0.0.1")
                .port(proxy.addr().port());
            (options, Some(proxy.counters().clone()), Some(proxy))
        }
    };
    let server = match args.db_delay_ms {
        Some(ms) => format!("{server}, {ms} ms away each way"),
        None => server.to_owned(),
    };
    let bench = Bench {
        options,
        admin,
        seconds: args.seconds,
        delay,
    };
    let mut scenarios = Vec::new();
    for &clients in &args.clients {
        let mut rounds = Vec::new();
        for round in 1..=args.rounds {
            eprintln!(
                "bench: {clients} client(s), round {round} of {}",
                args.rounds
            );
            rounds.push(bench.round(clients, &wanted).await?);
        }
        scenarios.extend(merge_rounds(rounds));
    }
    let report = Report {
        server,
        seconds_per_run: args.seconds,
        scenarios,
    };
    println!("{}", markdown(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(cluster);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, rps: f64, ratio: f64, writes: Option<f64>) -> ScenarioResult {
        ScenarioResult {
            name: name.into(),
            clients: 16,
            requests: rps as u64,
            throughput_rps: rps,
            p50_ms: 1000.0 / rps,
            p99_ms: 2000.0 / rps,
            commits_per_request: Some(1.0),
            statements_per_request: None,
            wal_flushes_per_request: Some(0.5),
            round_trips_per_request: None,
            ratio_to_plain: Some(ratio),
            ratio_to_plus_row: Some(ratio * 2.0),
            ratio_to_plus_record: None,
            writes_per_key: writes,
            settle_ms: None,
            rounds: 1,
            per_round: Vec::new(),
        }
    }

    #[test]
    fn rounds_merge_into_medians_of_ratios_taken_within_each_round() {
        let rounds = vec![
            vec![
                result("a", 100.0, 0.5, None),
                result("storm", 10.0, 0.1, Some(1.0)),
            ],
            vec![
                result("a", 300.0, 0.9, None),
                result("storm", 30.0, 0.3, Some(2.0)),
            ],
            vec![
                result("a", 200.0, 0.6, None),
                result("storm", 20.0, 0.2, Some(1.0)),
            ],
        ];
        let merged = merge_rounds(rounds);
        assert_eq!(merged.len(), 2);
        let a = &merged[0];
        assert_eq!((a.name.as_str(), a.requests), ("a", 600));
        assert_eq!(a.throughput_rps, 200.0);
        assert_eq!(a.ratio_to_plain, Some(0.6));
        assert_eq!(a.ratio_to_plus_row, Some(1.2));
        assert_eq!(a.ratio_to_plus_record, None);
        assert_eq!((a.rounds, a.per_round.len()), (3, 3));
        assert_eq!(
            ratio_cell(a.ratio_to_plain, a, |r| r.ratio_to_plain),
            "0.60 (0.50–0.90)"
        );
        // A storm that wrote twice in one round reports it, whatever the median.
        assert_eq!(merged[1].writes_per_key, Some(2.0));
    }

    #[test]
    fn one_round_is_reported_as_measured() {
        let merged = merge_rounds(vec![vec![result("a", 100.0, 0.5, None)]]);
        assert!(merged[0].per_round.is_empty());
        assert_eq!(
            ratio_cell(merged[0].ratio_to_plain, &merged[0], |r| r.ratio_to_plain),
            "0.50"
        );
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}

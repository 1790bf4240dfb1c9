//! `--sqlite`: the same comparison on the embedded store, one SQLite file in a temporary
//! directory with the store's settings (WAL, `synchronous = FULL`, `busy_timeout` 5 s) for every
//! scenario, floors included, so the ratios compare like with like. No PostgreSQL.
//!
//! * `sqlite_plain_create` — the business insert in a `BEGIN IMMEDIATE` transaction (the floor);
//! * `sqlite_plain_plus_row` — the same transaction writing one more keyed row;
//! * `sqlite_idempotent_create_claim` / `sqlite_idempotent_create_in_tx` — the executor on
//!   `SqliteStore`, each strategy;
//! * `sqlite_replay` — retries of completed keys;
//! * `sqlite_same_key_storm` — N simultaneous attempts on one key: writes per key.
//!
//! Commit and WAL counters are PostgreSQL's statistics views and are not reported here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{ExecuteError, HandlerFuture};
use idemgen_runtime::{
    Executor, ExecutorConfig, SqliteConnection, SqlitePool, SqliteStore, Strategy, TxHandle,
};
use sqlx::pool::PoolOptions;

use crate::{Created, Op, ScenarioResult, drive, percentile, request};

async fn insert_thing(conn: &mut SqliteConnection, owner: &str) -> Result<uuid::Uuid, sqlx::Error> {
    let id = uuid::Uuid::new_v4();
    sqlx::query("INSERT INTO things (id, owner, name) VALUES (?1, ?2, 'bench')")
        .bind(id.as_bytes().as_slice())
        .bind(owner)
        .execute(conn)
        .await?;
    Ok(id)
}

async fn idempotent_create(
    exec: &Executor<SqliteStore>,
    owner: &str,
    key: &str,
) -> anyhow::Result<bool> {
    let owner_in = owner.to_owned();
    let result = exec
        .execute(
            request(owner, key),
            move |tx: &mut TxHandle<SqliteStore>| -> HandlerFuture<'_, Created, anyhow::Error> {
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

/// The SQLite bench: one file, its directory removed at the end.
pub struct SqliteBench {
    path: std::path::PathBuf,
    seconds: f64,
    _dir: tempfile::TempDir,
}

impl SqliteBench {
    /// A fresh file with the runtime's migrations and the bench's tables.
    pub async fn new(seconds: f64) -> anyhow::Result<SqliteBench> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("bench.db");
        let store = SqliteStore::open(&path).await?;
        sqlx::raw_sql(
            "CREATE TABLE things (id BLOB PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL,
                                  created_at INTEGER NOT NULL DEFAULT (unixepoch()));
             CREATE TABLE plain_keys (owner TEXT, key TEXT, PRIMARY KEY (owner, key));",
        )
        .execute(store.pool())
        .await?;
        store.pool().close().await;
        Ok(SqliteBench {
            path,
            seconds,
            _dir: dir,
        })
    }

    /// A pool of `size` with the store's settings (the floors use them too).
    async fn pool(&self, size: usize) -> anyhow::Result<SqlitePool> {
        Ok(PoolOptions::new()
            .max_connections(size as u32)
            .min_connections(size as u32)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(SqliteStore::connect_options(&self.path))
            .await?)
    }

    async fn measure(
        &self,
        name: &str,
        clients: usize,
        pool: SqlitePool,
        op: Op,
    ) -> anyhow::Result<ScenarioResult> {
        let (requests, lat) = drive(clients, Duration::from_secs_f64(self.seconds), op).await?;
        pool.close().await;
        Ok(ScenarioResult {
            name: name.into(),
            clients,
            requests,
            throughput_rps: requests as f64 / self.seconds,
            p50_ms: percentile(&lat, 0.50),
            p99_ms: percentile(&lat, 0.99),
            commits_per_request: None,
            statements_per_request: None,
            wal_flushes_per_request: None,
            round_trips_per_request: None,
            ratio_to_plain: None,
            ratio_to_plus_row: None,
            ratio_to_plus_record: None,
            writes_per_key: None,
            settle_ms: None,
            rounds: 1,
            per_round: Vec::new(),
        })
    }

    pub async fn plain(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let p = pool.clone();
        let op: Op = Arc::new(move |c, _| {
            let p = p.clone();
            Box::pin(async move {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                insert_thing(&mut tx, &format!("owner-{c}")).await?;
                tx.commit().await?;
                Ok(())
            })
        });
        self.measure("sqlite_plain_create", clients, pool, op).await
    }

    pub async fn plain_plus_row(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let p = pool.clone();
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (p, key) = (p.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let owner = format!("owner-{c}");
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                insert_thing(&mut tx, &owner).await?;
                sqlx::query("INSERT INTO plain_keys (owner, key) VALUES (?1, ?2)")
                    .bind(&owner)
                    .bind(&key)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            })
        });
        self.measure("sqlite_plain_plus_row", clients, pool, op)
            .await
    }

    pub async fn idempotent(
        &self,
        name: &str,
        clients: usize,
        strategy: Strategy,
    ) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let exec = Executor::new(
            SqliteStore::new(pool.clone()),
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
        self.measure(name, clients, pool, op).await
    }

    pub async fn replay(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients).await?;
        let exec = Executor::new(SqliteStore::new(pool.clone()), ExecutorConfig::default());
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
        self.measure("sqlite_replay", clients, pool, op).await
    }

    /// Rounds of `clients` simultaneous attempts on one fresh key each; writes per key.
    pub async fn storm(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.pool(clients.min(32)).await?;
        let exec = Executor::new(SqliteStore::new(pool.clone()), ExecutorConfig::default());
        let run = uuid::Uuid::new_v4().simple().to_string();
        let owner = format!("storm-{run}");
        let deadline = Instant::now() + Duration::from_secs_f64(self.seconds);
        let (mut rounds, mut attempts) = (0u64, 0u64);
        let mut lat = Vec::new();
        while Instant::now() < deadline || rounds == 0 {
            let key = format!("{run}-{rounds}");
            let barrier = Arc::new(tokio::sync::Barrier::new(clients));
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
            rounds += 1;
            attempts += clients as u64;
        }
        let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM things WHERE owner = ?1")
            .bind(&owner)
            .fetch_one(&pool)
            .await?;
        pool.close().await;
        lat.sort();
        Ok(ScenarioResult {
            name: "sqlite_same_key_storm".into(),
            clients,
            requests: attempts,
            throughput_rps: attempts as f64 / self.seconds,
            p50_ms: percentile(&lat, 0.5),
            p99_ms: percentile(&lat, 0.99),
            commits_per_request: None,
            statements_per_request: None,
            wal_flushes_per_request: None,
            round_trips_per_request: None,
            ratio_to_plain: None,
            ratio_to_plus_row: None,
            ratio_to_plus_record: None,
            writes_per_key: Some(writes as f64 / rounds as f64),
            settle_ms: None,
            rounds: 1,
            per_round: Vec::new(),
        })
    }
}

/// Every SQLite scenario at each client count, with its ratios to the SQLite floors of the same
/// run.
pub async fn run(
    seconds: f64,
    clients: &[usize],
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<ScenarioResult>> {
    use anyhow::Context;
    let bench = SqliteBench::new(seconds).await?;
    let mut scenarios = Vec::new();
    for &clients in clients {
        eprintln!("bench (sqlite): {clients} client(s)");
        let plain = bench.plain(clients).await.context("sqlite_plain_create")?;
        let plus_row = bench
            .plain_plus_row(clients)
            .await
            .context("sqlite_plain_plus_row")?;
        let (plain_rps, plus_row_rps) = (plain.throughput_rps, plus_row.throughput_rps);
        let mut group = vec![plain, plus_row];
        for (name, strategy) in [
            ("sqlite_idempotent_create_claim", Strategy::SeparateClaim),
            ("sqlite_idempotent_create_in_tx", Strategy::InTransaction),
        ] {
            if wanted(name) {
                group.push(
                    bench
                        .idempotent(name, clients, strategy)
                        .await
                        .context(name)?,
                );
            }
        }
        if wanted("sqlite_replay") {
            group.push(bench.replay(clients).await.context("sqlite_replay")?);
        }
        if wanted("sqlite_same_key_storm") {
            group.push(
                bench
                    .storm(clients)
                    .await
                    .context("sqlite_same_key_storm")?,
            );
        }
        for s in &mut group {
            s.ratio_to_plain = Some(s.throughput_rps / plain_rps);
            s.ratio_to_plus_row = Some(s.throughput_rps / plus_row_rps);
        }
        scenarios.extend(group);
    }
    Ok(scenarios)
}

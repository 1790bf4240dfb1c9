//! PostgreSQL restarted under load (`pg_ctl restart -m fast`, then `-m immediate`) with the
//! executor's defaults: `stale_claim` 300 s and a 5 s holder lease. A key whose attempt the
//! restart cut is stranded only until the store answers again: its failed release is retried by
//! the background task, a claim left by a commit in doubt is released behind it, so the key
//! executes seconds after the server is back, not after `stale_claim`. Afterwards: one write per
//! key, and every acknowledged key replays its first result. On both PostgreSQL stores.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError, HandlerFuture};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Store, TokioPgStore, TxHandle};
use idemgen_testdb::{Cluster, ClusterOptions, TestDb};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;

use crate::support::*;

/// One key as its client saw it.
#[derive(Debug)]
struct KeyRun {
    label: String,
    /// When its first attempt failed (a 503, 504, 409 or a handler's lost connection).
    first_failure: Option<Instant>,
    /// When it was acknowledged, and with what body.
    done: Instant,
    body: String,
    disposition: Disposition,
}

/// A restart: its `pg_ctl stop` mode, when the stop began, when the server was back.
type Restart = (&'static str, Instant, Instant);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarts_fast_and_immediate_strand_keys_for_seconds_not_stale_claim() {
    restarts_under_load(
        |db| async move {
            let pool = PgPoolOptions::new()
                .max_connections(12)
                .acquire_timeout(Duration::from_secs(1))
                .connect_with(db.options.clone())
                .await
                .unwrap();
            PgStore::new(pool)
        },
        pg_slow_id_writer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_restarts_fast_and_immediate_strand_keys_for_seconds_not_stale_claim() {
    restarts_under_load(
        |db| async move { TokioPgStore::new(TokioPgStore::pool(&db.url, 12).unwrap()) },
        tokio_pg_slow_id_writer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_begun_at_the_claim_restarts_strand_keys_for_seconds_not_stale_claim() {
    restarts_under_load(
        |db| async move {
            TokioPgStore::new(TokioPgStore::pool(&db.url, 12).unwrap()).with_begin_at_claim(true)
        },
        tokio_pg_slow_id_writer,
    )
    .await;
}

async fn restarts_under_load<S, F, H>(
    store: impl FnOnce(TestDb) -> F,
    writer: fn(String, Duration) -> H,
) where
    S: Store,
    F: Future<Output = S>,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    const CLIENTS: usize = 12;
    const KEYS_PER_CLIENT: usize = 8;
    // A cluster of this test's own, so restarting it disturbs no other test.
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a dedicated cluster");
    let cluster = Arc::new(cluster);
    let db = TestDb::on_cluster(&cluster).await.expect("database");
    let direct = db.pool(2).await.unwrap();
    idemgen_runtime::migrate(&mut direct.acquire().await.unwrap())
        .await
        .unwrap();
    sqlx::query("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .execute(&direct)
        .await
        .unwrap();
    drop(direct);
    let exec = Executor::new(store(db.clone()).await, ExecutorConfig::default());
    assert_eq!(exec.config().stale_claim, Duration::from_secs(300));

    // The restarts: when each stop began and when the server was back.
    let restarts: Arc<Mutex<Vec<Restart>>> = Arc::default();
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let restarter = {
        let (cluster, restarts, over) = (cluster.clone(), restarts.clone(), over.clone());
        tokio::spawn(async move {
            for (pause, mode) in [(300, "fast"), (700, "immediate")] {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let c = cluster.clone();
                let stopped = Instant::now();
                tokio::task::spawn_blocking(move || {
                    c.stop(mode)?;
                    c.start_again()
                })
                .await
                .unwrap()
                .expect("restart");
                restarts
                    .lock()
                    .unwrap()
                    .push((mode, stopped, Instant::now()));
            }
            over.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (exec, over) = (exec.clone(), over.clone());
            tokio::spawn(async move {
                let mut runs = Vec::new();
                let mut k = 0;
                while k < KEYS_PER_CLIENT || !over.load(std::sync::atomic::Ordering::SeqCst) {
                    k += 1;
                    let label = format!("restart-{c}-{k}");
                    let req = request(scope("alice", &label), json!({"k": k}), 1);
                    let mut first_failure = None;
                    let started = Instant::now();
                    let outcome = loop {
                        assert!(
                            started.elapsed() < Duration::from_secs(40),
                            "{label} never converged"
                        );
                        let attempt = writer(label.clone(), Duration::from_millis(10));
                        match exec.execute(req.clone(), attempt).await {
                            Ok(outcome) => break outcome,
                            Err(ExecuteError::Problem(p)) => {
                                let status = p.kind().status().as_u16();
                                assert!([503, 504, 409].contains(&status), "{label}: {p:?}");
                            }
                            // The handler's own query lost its connection.
                            Err(ExecuteError::Handler(_)) => {}
                        }
                        first_failure.get_or_insert_with(Instant::now);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    };
                    runs.push(KeyRun {
                        label,
                        first_failure,
                        done: Instant::now(),
                        body: outcome.response.body,
                        disposition: outcome.disposition,
                    });
                }
                runs
            })
        })
        .collect();
    let mut runs = Vec::new();
    for client in clients {
        runs.extend(
            tokio::time::timeout(Duration::from_secs(90), client)
                .await
                .expect("clients finish")
                .unwrap(),
        );
    }
    restarter.await.unwrap();
    let restarts = restarts.lock().unwrap().clone();
    assert_eq!(restarts.len(), 2);

    // One write per key, each with the completed record of its result.
    let direct = db.pool(2).await.unwrap();
    assert!(pg_duplicates(&direct).await.is_empty(), "no duplicates");
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, runs.len(), "every key: one write");
    // Every acknowledged key replays its first result.
    for run in &runs {
        let req = request(
            scope("alice", &run.label),
            json!({"k": run.label.rsplit('-').next().unwrap().parse::<usize>().unwrap()}),
            1,
        );
        let again = exec
            .execute(req, writer(run.label.clone(), Duration::ZERO))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", run.label));
        assert_eq!(again.disposition, Disposition::Replayed, "{}", run.label);
        assert_eq!(again.response.body, run.body, "{}", run.label);
    }
    assert!(
        runs.iter().all(|r| r.disposition != Disposition::TakenOver),
        "a live holder's claim was taken over"
    );

    // Stranded keys: their first attempt failed during a restart (from its stop until the server
    // was back). How long after the server was back each executed.
    let mut stranded: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for run in &runs {
        let Some(failed) = run.first_failure else {
            continue;
        };
        // The restart window this failure belongs to (failures show up to a second after the
        // server is back: the pool reconnects).
        if let Some((mode, _, up)) = restarts
            .iter()
            .find(|(_, stopped, up)| failed >= *stopped && failed <= *up + Duration::from_secs(1))
        {
            stranded
                .entry(mode)
                .or_default()
                .push(run.done.saturating_duration_since(*up));
        }
    }
    let mut report = Vec::new();
    for (mode, stopped, up) in &restarts {
        let mut waits = stranded.get(mode).cloned().unwrap_or_default();
        waits.sort();
        let max = waits.last().copied().unwrap_or_default();
        let median = waits.get(waits.len() / 2).copied().unwrap_or_default();
        report.push(format!(
            "-m {mode}: down {:?}, {} stranded keys executed within {max:?} of the server's \
             return (median {median:?})",
            up.duration_since(*stopped),
            waits.len()
        ));
        assert!(
            max < Duration::from_secs(10),
            "-m {mode}: a stranded key waited {max:?} after the server was back"
        );
    }
    let total: usize = stranded.values().map(Vec::len).sum();
    assert!(total > 0, "the restarts stranded no key: {report:?}");
    eprintln!(
        "restarts under load, {} keys, stale_claim 300 s: {}",
        runs.len(),
        report.join("; ")
    );
}

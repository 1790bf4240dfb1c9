//! Random schedules of concurrent attempts on a few keys, with takeovers (a short stale bound),
//! handler failures, non-2xx answers, panics, stalled "zombie" handlers that resume after being
//! taken over, and claims orphaned by a crashed process, on every store and both strategies.
//!
//! On SQLite a handler's first write takes the file's write lock until its commit, which every
//! other writer waits for: its handlers wait (the delay, a zombie's stall) *before* writing, as a
//! SQLite service's handlers should, and under the in-transaction strategy (whose transaction
//! holds the lock from the gate on) a zombie, stalled far past every writer's `busy_timeout`,
//! becomes a plain attempt.
//! After each schedule: at most one committed business write per key, a completed record's
//! stored response is the one that write produced, and a retry converges on exactly one write.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemgen_runtime::engine::{
    ClaimRequest, ClaimToken, Disposition, ExecuteError, HandlerFuture, RecordState,
};
use idemgen_runtime::{
    Executor, ExecutorConfig, MemoryStore, PgStore, ProblemKind, SqliteStore, Store,
    Strategy as ExecStrategy, TokioPgStore, TxHandle,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use tokio::sync::watch;

use crate::support::*;

const KEYS: u8 = 2;
const STALE: Duration = Duration::from_millis(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Writes, answers 201.
    Succeed,
    /// Writes, then fails (the handler returns Err).
    Fail,
    /// Writes, then answers 409 (not stored).
    NotStored,
    /// Writes, then panics.
    Panic,
    /// Writes, then stalls until the rest of the schedule is over (long past the stale bound),
    /// then answers 201: a paused process that wakes up after being taken over.
    Zombie,
    /// No attempt: a claim taken by a process that crashed right after claiming.
    Orphan,
}

#[derive(Debug, Clone, Copy)]
struct Step {
    key: u8,
    at: u64,
    delay: u64,
    behaviour: Behaviour,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..KEYS,
        0u64..50,
        0u64..45,
        prop_oneof![
            5 => Just(Behaviour::Succeed),
            1 => Just(Behaviour::Fail),
            1 => Just(Behaviour::NotStored),
            1 => Just(Behaviour::Panic),
            1 => Just(Behaviour::Zombie),
            1 => Just(Behaviour::Orphan),
        ],
    )
        .prop_map(|(key, at, delay, behaviour)| Step {
            key,
            at,
            delay,
            behaviour,
        })
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store plus a business table whose writes carry unique ids.
trait World: Send + Sync + 'static {
    type S: Store;
    fn store(&self) -> Self::S;
    /// The business write inside the attempt's transaction; returns the write's unique id.
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<Self::S>,
        label: String,
    ) -> HandlerFuture<'a, i64, String>;
    /// The ids of the committed writes labelled `label`.
    fn writes<'a>(&'a self, label: &'a str) -> BoxFut<'a, Vec<i64>>;
    /// Whether handlers wait before their write rather than after (SQLite: a write holds the
    /// file's write lock until the commit).
    fn waits_before_writing(&self) -> bool {
        false
    }
    /// Whether an attempt stalled under `strategy` would hold every other writer off (SQLite's
    /// one write lock, taken by the in-transaction gate): zombies then run as plain attempts.
    fn stall_blocks_every_writer(&self, strategy: ExecStrategy) -> bool {
        let _ = strategy;
        false
    }
}

struct SqliteWorld {
    store: SqliteStore,
    _dir: Arc<tempfile::TempDir>,
}

impl World for SqliteWorld {
    type S = SqliteStore;
    fn store(&self) -> SqliteStore {
        self.store.clone()
    }
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<SqliteStore>,
        label: String,
    ) -> HandlerFuture<'a, i64, String> {
        Box::pin(async move {
            sqlx::query_scalar("INSERT INTO business_writes (label) VALUES (?1) RETURNING id")
                .bind(label)
                .fetch_one(tx.conn().await.map_err(|e| e.to_string())?)
                .await
                .map_err(|e| e.to_string())
        })
    }
    fn writes<'a>(&'a self, label: &'a str) -> BoxFut<'a, Vec<i64>> {
        Box::pin(sqlite_write_ids(self.store.pool(), label))
    }
    fn waits_before_writing(&self) -> bool {
        true
    }
    fn stall_blocks_every_writer(&self, strategy: ExecStrategy) -> bool {
        strategy == ExecStrategy::InTransaction
    }
}

struct PgWorld {
    store: PgStore,
    pool: sqlx::PgPool,
}

impl World for PgWorld {
    type S = PgStore;
    fn store(&self) -> PgStore {
        self.store.clone()
    }
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<PgStore>,
        label: String,
    ) -> HandlerFuture<'a, i64, String> {
        Box::pin(async move {
            sqlx::query_scalar("INSERT INTO business_writes (label) VALUES ($1) RETURNING id")
                .bind(label)
                .fetch_one(tx.conn().await.map_err(|e| e.to_string())?)
                .await
                .map_err(|e| e.to_string())
        })
    }
    fn writes<'a>(&'a self, label: &'a str) -> BoxFut<'a, Vec<i64>> {
        Box::pin(pg_write_ids(&self.pool, label))
    }
}

/// `TokioPgStore`: the handler's insert on the attempt's tokio-postgres client; the writes are
/// counted through sqlx, from outside the store.
struct TokioPgWorld {
    store: TokioPgStore,
    pool: sqlx::PgPool,
}

impl World for TokioPgWorld {
    type S = TokioPgStore;
    fn store(&self) -> TokioPgStore {
        self.store.clone()
    }
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<TokioPgStore>,
        label: String,
    ) -> HandlerFuture<'a, i64, String> {
        Box::pin(async move { tokio_pg_insert_write(tx, &label).await })
    }
    fn writes<'a>(&'a self, label: &'a str) -> BoxFut<'a, Vec<i64>> {
        Box::pin(pg_write_ids(&self.pool, label))
    }
}

struct MemWorld {
    store: MemoryStore,
    next_id: AtomicI64,
    log: Arc<Mutex<Vec<(String, i64)>>>,
}

impl World for MemWorld {
    type S = MemoryStore;
    fn store(&self) -> MemoryStore {
        self.store.clone()
    }
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<MemoryStore>,
        label: String,
    ) -> HandlerFuture<'a, i64, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let log = self.log.clone();
        Box::pin(async move {
            tx.tx()
                .await
                .map_err(|e| e.to_string())?
                .on_commit(move || log.lock().unwrap().push((label, id)));
            Ok(id)
        })
    }
    fn writes<'a>(&'a self, label: &'a str) -> BoxFut<'a, Vec<i64>> {
        let ids = self
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, _)| l == label)
            .map(|(_, id)| *id)
            .collect();
        Box::pin(async move { ids })
    }
}

/// What the schedules saw, over all cases.
#[derive(Debug, Default)]
struct Tally {
    schedules: AtomicUsize,
    attempts: AtomicUsize,
    executed: AtomicUsize,
    taken_over: AtomicUsize,
    replayed: AtomicUsize,
    conflicts: AtomicUsize,
    failures: AtomicUsize,
    panics: AtomicUsize,
    zombies: AtomicUsize,
    orphans: AtomicUsize,
}

fn bump(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The handler of a step: writes, waits, then behaves as the step says.
fn handler<W: World>(
    world: Arc<W>,
    label: String,
    step: Step,
    gate: Option<watch::Receiver<bool>>,
) -> impl for<'a> FnOnce(&'a mut TxHandle<W::S>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<W::S>| {
        Box::pin(async move {
            let wait = async {
                tokio::time::sleep(Duration::from_millis(step.delay)).await;
                if step.behaviour == Behaviour::Zombie
                    && let Some(mut gate) = gate
                {
                    let _ = gate.wait_for(|woken| *woken).await;
                }
            };
            let id = if world.waits_before_writing() {
                wait.await;
                world.write(tx, label).await?
            } else {
                let id = world.write(tx, label).await?;
                wait.await;
                id
            };
            let status = match step.behaviour {
                Behaviour::Fail => return Err("handler failed".to_owned()),
                Behaviour::Panic => panic!("simulated handler crash (expected in this test)"),
                Behaviour::NotStored => 409,
                Behaviour::Zombie | Behaviour::Succeed | Behaviour::Orphan => 201,
            };
            Ok(TestResponse {
                status,
                body: format!("write {id}"),
                headers: vec![],
            })
        })
    }
}

async fn run_schedule<W: World>(
    world: Arc<W>,
    strategy: ExecStrategy,
    case: usize,
    steps: Vec<Step>,
    tally: &Tally,
) {
    let exec = Executor::new(
        world.store(),
        ExecutorConfig {
            strategy,
            stale_claim: STALE,
            in_flight_wait: Duration::from_millis(40),
            ..ExecutorConfig::default()
        },
    );
    let owner = format!("case-{case}");
    let label = |key: u8| format!("c{case}-k{key}");
    let req = |key: u8| request(scope(&owner, &format!("k{key}")), json!({"key": key}), 1);
    let (wake_zombies, zombie_gate) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut zombies = Vec::new();
    let mut orphans = Vec::new();
    let steps: Vec<Step> = if world.stall_blocks_every_writer(strategy) {
        steps
            .into_iter()
            .map(|mut s| {
                if s.behaviour == Behaviour::Zombie {
                    s.behaviour = Behaviour::Succeed;
                }
                s
            })
            .collect()
    } else {
        steps
    };
    for step in steps.clone() {
        let (exec, world, req, label) =
            (exec.clone(), world.clone(), req(step.key), label(step.key));
        let gate = zombie_gate.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(step.at)).await;
            if step.behaviour == Behaviour::Orphan {
                let claim = ClaimRequest {
                    scope: &req.scope,
                    fingerprint: &req.fingerprint,
                    fingerprint_version: req.fingerprint_version,
                    token: ClaimToken::generate(),
                    holder: None,
                    stale_after: STALE,
                    retention: None,
                };
                // The process dies right after its claim: nothing else happens.
                exec.store().claim(&claim).await.expect("orphan claim");
                return None;
            }
            let handler = handler(world, label, step, Some(gate));
            Some((step, exec.execute(req, handler).await))
        });
        match step.behaviour {
            Behaviour::Zombie => zombies.push(task),
            // In-transaction: an orphan's claim statement may wait on a zombie's uncommitted
            // reservation, so it is awaited after the zombies wake.
            Behaviour::Orphan => orphans.push(task),
            _ => tasks.push(task),
        }
    }
    let mut results = Vec::new();
    for t in tasks {
        results.extend(t.await.unwrap());
    }
    // The rest of the schedule is over: the zombies wake up, long after their claims went stale.
    tokio::time::sleep(STALE).await;
    wake_zombies.send(true).unwrap();
    for t in zombies.into_iter().chain(orphans) {
        results.extend(t.await.unwrap());
    }
    bump(&tally.schedules);
    tally.orphans.fetch_add(
        steps
            .iter()
            .filter(|s| s.behaviour == Behaviour::Orphan)
            .count(),
        Ordering::Relaxed,
    );
    // Check every answer.
    let mut bodies: Vec<Vec<String>> = vec![Vec::new(); KEYS as usize];
    for (step, result) in results {
        bump(&tally.attempts);
        match result {
            Ok(o) => match o.disposition {
                Disposition::Executed | Disposition::TakenOver | Disposition::Replayed => {
                    assert_eq!(o.response.status, 201);
                    bump(match o.disposition {
                        Disposition::Executed => &tally.executed,
                        Disposition::TakenOver => &tally.taken_over,
                        _ => &tally.replayed,
                    });
                    if step.behaviour == Behaviour::Zombie {
                        bump(&tally.zombies);
                    }
                    bodies[step.key as usize].push(o.response.body);
                }
                Disposition::NotStored => {
                    assert_eq!(step.behaviour, Behaviour::NotStored, "{step:?}");
                    assert_eq!(o.response.status, 409);
                }
            },
            Err(ExecuteError::Handler(_)) => {
                assert_eq!(step.behaviour, Behaviour::Fail, "{step:?}");
                bump(&tally.failures);
            }
            Err(ExecuteError::Problem(p)) => match p.kind() {
                ProblemKind::InFlight => bump(&tally.conflicts),
                ProblemKind::Internal => {
                    assert_eq!(step.behaviour, Behaviour::Panic, "{step:?}: {p}");
                    bump(&tally.panics);
                }
                other => panic!("{step:?}: unexpected problem {other:?}: {p}"),
            },
        }
    }
    // The invariants, per key, then convergence.
    for key in 0..KEYS {
        let ids = world.writes(&label(key)).await;
        assert!(ids.len() <= 1, "key {key}: {} committed writes", ids.len());
        let record = exec.store().read(&req(key).scope, STALE).await.unwrap();
        match (&record, ids.first()) {
            (Some(r), Some(id)) => {
                assert_eq!(
                    r.state,
                    RecordState::Completed,
                    "a write has a completed record"
                );
                let stored = r
                    .response
                    .as_ref()
                    .expect("a completed record has a result");
                assert_eq!(stored.body, format!("write {id}").into_bytes());
            }
            (Some(r), None) => assert_eq!(r.state, RecordState::Claimed, "no write, no completion"),
            (None, Some(id)) => panic!("key {key}: write {id} without a record"),
            (None, None) => {}
        }
        for body in &bodies[key as usize] {
            assert_eq!(
                Some(body),
                ids.first().map(|id| format!("write {id}")).as_ref(),
                "key {key}: every success is the committed write"
            );
        }
    }
    // A client retries each key until it gets an answer: exactly one write, whatever happened.
    tokio::time::sleep(STALE).await;
    let retries: Vec<_> = (0..KEYS)
        .map(|key| {
            let (exec, world, req, label) = (exec.clone(), world.clone(), req(key), label(key));
            tokio::spawn(async move {
                let mut tries = 0;
                let outcome = loop {
                    tries += 1;
                    assert!(tries < 50, "key {key} never converged");
                    let succeed = Step {
                        key,
                        at: 0,
                        delay: 0,
                        behaviour: Behaviour::Succeed,
                    };
                    let handler = handler(world.clone(), label.clone(), succeed, None);
                    match exec.execute(req.clone(), handler).await {
                        Ok(o) => break o,
                        Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight => {
                            tokio::time::sleep(STALE).await;
                        }
                        Err(other) => panic!("key {key}: retry failed: {other:?}"),
                    }
                };
                let ids = world.writes(&label).await;
                assert_eq!(ids.len(), 1, "key {key}: converged on one write");
                assert_eq!(outcome.response.body, format!("write {}", ids[0]));
            })
        })
        .collect();
    for r in retries {
        r.await.expect("convergence");
    }
}

fn run_cases<W: World>(
    make: impl FnOnce() -> BoxFut<'static, W>,
    strategy: ExecStrategy,
    cases: u32,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let world = Arc::new(rt.block_on(make()));
    let tally = Tally::default();
    let case = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(step(), 1..8), |steps| {
            let n = case.fetch_add(1, Ordering::Relaxed);
            let schedule = run_schedule(world.clone(), strategy, n, steps.clone(), &tally);
            rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(30), schedule)
                    .await
                    .unwrap_or_else(|_| panic!("schedule hung: {steps:?}"))
            });
            Ok(())
        })
        .unwrap();
    eprintln!("interleavings, {strategy:?}: {tally:?}");
    assert!(tally.schedules.load(Ordering::Relaxed) >= cases as usize);
}

fn pg_world() -> BoxFut<'static, PgWorld> {
    Box::pin(async {
        let (_db, pool) = fresh_pg(40).await;
        PgWorld {
            store: PgStore::new(pool.clone()),
            pool,
        }
    })
}

fn tokio_pg_world() -> BoxFut<'static, TokioPgWorld> {
    Box::pin(async {
        let (_db, pool, store) = fresh_tokio_pg(40).await;
        TokioPgWorld { store, pool }
    })
}

fn sqlite_world() -> BoxFut<'static, SqliteWorld> {
    Box::pin(async {
        let (store, dir) = fresh_sqlite().await;
        SqliteWorld { store, _dir: dir }
    })
}

fn mem_world() -> BoxFut<'static, MemWorld> {
    Box::pin(async {
        MemWorld {
            store: MemoryStore::new(),
            next_id: AtomicI64::new(1),
            log: Arc::default(),
        }
    })
}

#[test]
fn interleavings_postgres_separate_claim() {
    run_cases(pg_world, ExecStrategy::SeparateClaim, 32);
}

#[test]
fn interleavings_postgres_in_transaction() {
    run_cases(pg_world, ExecStrategy::InTransaction, 32);
}

#[test]
fn interleavings_tokio_postgres_separate_claim() {
    run_cases(tokio_pg_world, ExecStrategy::SeparateClaim, 32);
}

#[test]
fn interleavings_tokio_postgres_in_transaction() {
    run_cases(tokio_pg_world, ExecStrategy::InTransaction, 32);
}

#[test]
fn interleavings_sqlite_separate_claim() {
    run_cases(sqlite_world, ExecStrategy::SeparateClaim, 32);
}

#[test]
fn interleavings_sqlite_in_transaction() {
    run_cases(sqlite_world, ExecStrategy::InTransaction, 32);
}

#[test]
fn interleavings_memory_separate_claim() {
    run_cases(mem_world, ExecStrategy::SeparateClaim, 64);
}

#[test]
fn interleavings_memory_in_transaction() {
    run_cases(mem_world, ExecStrategy::InTransaction, 64);
}

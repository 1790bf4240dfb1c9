//! PgBouncer in front of PostgreSQL (the contract suite and the storms also run through it, see
//! contract.rs and concurrency.rs): the start-up check of the store's [`Pooler`] against the
//! pools, and PgBouncer restarted under load, in both pooling modes and both strategies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{Disposition, ExecuteError, HandlerFuture};
use idemgen_runtime::{
    Executor, ExecutorConfig, PgStore, Pooler, PoolerError, Store, Strategy, TokioPgStore, TxHandle,
};
use idemgen_testdb::{Cluster, ClusterOptions, PgBouncer, PoolMode, TestDb};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;

use crate::support::*;

/// A pool through `bouncer` with sqlx's default connect options (statement cache on).
async fn default_pool(bouncer: &PgBouncer, db: &idemgen_testdb::TestDb) -> sqlx::PgPool {
    PgPoolOptions::new()
        .max_connections(4)
        .connect_with(bouncer.options(&db.name))
        .await
        .expect("a pool through PgBouncer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_a_transaction_pooler_the_store_was_not_told_about() {
    let (db, _direct) = fresh_pg(2).await;
    let bouncer = shared_bouncer(PoolMode::Transaction, &db);
    for declared in [Pooler::Direct, Pooler::Session] {
        let store = PgStore::new(default_pool(bouncer, &db).await).with_pooler(declared);
        let err = store
            .check()
            .await
            .expect_err("an undeclared transaction pooler");
        assert!(
            matches!(
                err,
                PoolerError::UndeclaredTransactionPooler { pool: "business", configured, .. }
                    if configured == declared
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("Pooler::Transaction"), "{err}");
    }
    // The claim pool is checked too.
    let store = PgStore::new(bouncer_pool(bouncer, &db, 4).await)
        .with_claim_pool(default_pool(bouncer, &db).await)
        .with_pooler(Pooler::Transaction);
    let err = store
        .check()
        .await
        .expect_err("a claim pool with the cache on");
    assert!(
        matches!(err, PoolerError::StatementCacheOn { pool: "claim" }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_the_statement_cache_behind_a_transaction_pooler() {
    let (db, _direct) = fresh_pg(2).await;
    let bouncer = shared_bouncer(PoolMode::Transaction, &db);
    let store = PgStore::new(default_pool(bouncer, &db).await).with_pooler(Pooler::Transaction);
    let err = store.check().await.expect_err("the statement cache is on");
    assert!(
        matches!(err, PoolerError::StatementCacheOn { pool: "business" }),
        "{err:?}"
    );
    assert!(err.to_string().contains("connect_options"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_accepts_matching_configurations() {
    let (db, direct) = fresh_pg(4).await;
    // Direct, declared direct; and a transaction pooler's settings on a direct pool (slower,
    // never wrong).
    PgStore::new(direct.clone()).check().await.expect("direct");
    let uncached = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(Pooler::Transaction.connect_options(db.options.clone()))
        .await
        .unwrap();
    PgStore::new(uncached)
        .with_pooler(Pooler::Transaction)
        .check()
        .await
        .expect("transaction settings, direct");
    let transaction = shared_bouncer(PoolMode::Transaction, &db);
    PgStore::new(bouncer_pool(transaction, &db, 4).await)
        .with_pooler(Pooler::Transaction)
        .check()
        .await
        .expect("transaction pooler, declared");
    // A session pooler needs nothing: declared or not, the check passes (it cannot tell it from
    // a direct connection, and need not).
    let session = shared_bouncer(PoolMode::Session, &db);
    for declared in [Pooler::Session, Pooler::Direct] {
        PgStore::new(bouncer_pool(session, &db, 4).await)
            .with_pooler(declared)
            .check()
            .await
            .expect("session pooler");
    }
}

/// `TokioPgStore::check` refuses an undeclared transaction pooler (its statements are then
/// prepared on their connection) and accepts a declared one, a session pooler and direct
/// connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_check_refuses_an_undeclared_transaction_pooler_only() {
    let (db, _direct) = fresh_pg(2).await;
    let through = |mode| {
        let url = bouncer_url(shared_bouncer(mode, &db), &db);
        TokioPgStore::new(TokioPgStore::pool(&url, 4).unwrap())
    };
    let refused = through(PoolMode::Transaction)
        .check()
        .await
        .expect_err("a transaction pooler");
    assert!(
        matches!(
            refused,
            PoolerError::TransactionPoolerUnsupported {
                pool: "business",
                ..
            }
        ),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("Pooler::Transaction"),
        "{refused}"
    );
    through(PoolMode::Transaction)
        .with_pooler(Pooler::Transaction)
        .check()
        .await
        .expect("a declared transaction pooler");
    through(PoolMode::Session)
        .check()
        .await
        .expect("a session pooler");
    TokioPgStore::new(TokioPgStore::pool(&db.url, 4).unwrap())
        .check()
        .await
        .expect("direct connections");
}

/// Behind PgBouncer in transaction mode, `TokioPgStore` declared for it leaves no prepared
/// statement on any server connection: after 12 clients over the pooler's 8 server connections
/// ran fresh creates, retries and replays on both strategies, each of the 8 (held at once, so
/// all of them) has none. A statement prepared the usual way through the same pooler is then
/// found on one: what an undeclared store would leave for the next client there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_postgres_declared_for_a_transaction_pooler_leaves_no_prepared_statement() {
    use idemgen_runtime::tokio_postgres;
    let (separate, url) = tokio_pgbouncer_transaction_env_at(ExecutorConfig::default()).await;
    let in_tx = Env {
        exec: Executor::new(
            separate.exec.store().clone(),
            ExecutorConfig {
                strategy: Strategy::InTransaction,
                ..ExecutorConfig::default()
            },
        ),
        ..separate.clone()
    };
    let mut tasks = Vec::new();
    for t in 0..16 {
        let env = if t % 2 == 0 {
            separate.clone()
        } else {
            in_tx.clone()
        };
        tasks.push(tokio::spawn(async move {
            for n in 0..10 {
                let label = format!("t{t}-{n}");
                let req = request(scope("alice", &label), json!({"n": n}), 1);
                for _ in 0..2 {
                    let done = attempt(&env, req.clone(), Plan::created(&label))
                        .await
                        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
                    assert_eq!(done.response.status, 201, "{label}");
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for t in 0..16 {
        for n in 0..10 {
            assert_eq!(separate.ledger.count(&format!("t{t}-{n}")).await, 1);
        }
    }
    // Every server connection at once: eight clients, each inside a transaction.
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("a client through PgBouncer");
        tokio::spawn(connection);
        clients.push(client);
    }
    let seen = sample(&clients).await;
    let pids: std::collections::HashSet<i32> = seen.iter().map(|(pid, _)| *pid).collect();
    assert_eq!(pids.len(), 8, "every server connection sampled: {seen:?}");
    assert!(
        seen.iter().all(|(_, statements)| *statements == 0),
        "prepared statements left on server connections: {seen:?}"
    );
    // The probe sees a statement left the usual way.
    let (leaver, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let left = leaver.prepare("SELECT 1").await.unwrap();
    let seen = sample(&clients).await;
    assert!(
        seen.iter().any(|(_, statements)| *statements > 0),
        "a named statement is visible to the probe: {seen:?}"
    );
    drop(left);
}

/// Each client's server connection: its backend pid and the named statements prepared there,
/// all sampled inside one transaction per client (so no two clients share one).
async fn sample(clients: &[idemgen_runtime::tokio_postgres::Client]) -> Vec<(i32, i64)> {
    let mut seen = Vec::new();
    for client in clients {
        client.batch_execute("BEGIN").await.unwrap();
    }
    for client in clients {
        let row = client
            .query_one(
                "SELECT pg_backend_pid(), \
                        (SELECT count(*) FROM pg_prepared_statements \
                          WHERE statement NOT LIKE '%pg_prepared_statements%')",
                &[],
            )
            .await
            .unwrap();
        seen.push((row.get::<_, i32>(0), row.get::<_, i64>(1)));
    }
    for client in clients {
        client.batch_execute("COMMIT").await.unwrap();
    }
    seen
}

/// What a restart-under-load test restarts.
#[derive(Debug, Clone, Copy)]
enum Restarted {
    /// PgBouncer: stopped (SIGTERM, every connection closed) and started again, twice.
    PgBouncer,
    /// PostgreSQL behind it: `-m fast`, then `-m immediate`.
    Postgres,
}

/// Clients create keys through the executor and PgBouncer while PgBouncer, or PostgreSQL
/// behind it, is restarted twice; then every key has one write and replays its first result.
async fn restarted_under_load(mode: PoolMode, strategy: Strategy, what: Restarted, driver: Driver) {
    // A server of this test's own when it is the one restarted.
    let cluster = match what {
        Restarted::PgBouncer => None,
        Restarted::Postgres => Some(Arc::new(
            tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
                .await
                .unwrap()
                .expect("a dedicated cluster"),
        )),
    };
    let db = match &cluster {
        Some(c) => TestDb::on_cluster(c).await.expect("database"),
        None => fresh_pg(2).await.0,
    };
    if cluster.is_some() {
        let setup = db.pool(2).await.unwrap();
        idemgen_runtime::migrate(&mut setup.acquire().await.unwrap())
            .await
            .unwrap();
        sqlx::query("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
            .execute(&setup)
            .await
            .unwrap();
    }
    // A PgBouncer of this test's own: restarting it (or its server) disturbs no other test.
    let (host, port) = (db.options.get_host().to_string(), db.options.get_port());
    let bouncer = tokio::task::spawn_blocking(move || PgBouncer::start(&host, port, mode, 16))
        .await
        .unwrap()
        .expect("a dedicated PgBouncer");
    let bouncer = Arc::new(bouncer);
    // A lease longer than a restart can take on a loaded machine. While the pooler or the
    // server is down the executor's renewals fail too, and a lease that lapses makes this live
    // executor's own claims stale, so its retries would take them over: the protocol's answer to
    // a holder that stopped renewing (leases.rs), not what this test is about. Here every claim a
    // cut attempt left must be released behind by its token, or its key would wait out
    // `stale_claim` (the 40 s convergence bound fails), and nothing is ever taken over.
    let config = ExecutorConfig {
        strategy,
        lease_expiry: Some(Duration::from_secs(60)),
        ..ExecutorConfig::default()
    };
    match driver {
        Driver::Sqlx => {
            let pool = PgPoolOptions::new()
                .max_connections(12)
                .acquire_timeout(Duration::from_secs(1))
                .connect_with(pooler_for(mode).connect_options(bouncer.options(&db.name)))
                .await
                .unwrap();
            let store = PgStore::new(pool).with_pooler(pooler_for(mode));
            store.check().await.expect("pooler check");
            let exec = Executor::new(store, config);
            let writer = |label, delay| Box::new(pg_slow_id_writer(label, delay)) as _;
            under_restarts(exec, writer, bouncer, cluster, db, (mode, strategy, what)).await;
        }
        Driver::TokioPostgres => {
            let pool = TokioPgStore::pool(&bouncer_url(&bouncer, &db), 12).unwrap();
            let store = TokioPgStore::new(pool).with_pooler(pooler_for(mode));
            store.check().await.expect("pooler check");
            let exec = Executor::new(store, config);
            let writer = |label, delay| Box::new(tokio_pg_typed_slow_id_writer(label, delay)) as _;
            under_restarts(exec, writer, bouncer, cluster, db, (mode, strategy, what)).await;
        }
    }
}

/// A handler writing its key's label, then sleeping the given time inside its transaction.
type SlowWriter<S> = fn(String, Duration) -> BoxedWriter<S>;
type BoxedWriter<S> = Box<
    dyn for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
>;

/// [`restarted_under_load`] on `exec`, once set up.
async fn under_restarts<S: Store>(
    exec: Executor<S>,
    writer: SlowWriter<S>,
    bouncer: Arc<PgBouncer>,
    cluster: Option<Arc<Cluster>>,
    db: TestDb,
    (mode, strategy, what): (PoolMode, Strategy, Restarted),
) {
    const CLIENTS: usize = 8;
    const KEYS_PER_CLIENT: usize = 6;
    let over = Arc::new(AtomicBool::new(false));
    let restarter = {
        let (bouncer, cluster, over) = (bouncer.clone(), cluster.clone(), over.clone());
        tokio::spawn(async move {
            for (pause, pg_mode) in [(300, "fast"), (700, "immediate")] {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let (b, c) = (bouncer.clone(), cluster.clone());
                tokio::task::spawn_blocking(move || match c {
                    Some(c) => {
                        c.stop(pg_mode)?;
                        c.start_again()
                    }
                    None => {
                        b.stop()?;
                        std::thread::sleep(Duration::from_millis(200));
                        b.start_again()
                    }
                })
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("restarting {what:?}: {e}"));
            }
            over.store(true, Ordering::SeqCst);
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (exec, over) = (exec.clone(), over.clone());
            tokio::spawn(async move {
                let mut runs = Vec::new();
                let mut failures = 0usize;
                let mut k = 0;
                while k < KEYS_PER_CLIENT || !over.load(Ordering::SeqCst) {
                    k += 1;
                    let label = format!("bounce-{c}-{k}");
                    let req = request(scope("alice", &label), json!({"k": k}), 1);
                    let started = Instant::now();
                    let mut last = String::new();
                    let outcome = loop {
                        assert!(
                            started.elapsed() < Duration::from_secs(40),
                            "{label} never converged: {last}"
                        );
                        let writer = writer(label.clone(), Duration::from_millis(10));
                        match exec.execute(req.clone(), writer).await {
                            Ok(outcome) => break outcome,
                            Err(ExecuteError::Problem(p)) => {
                                let status = p.kind().status().as_u16();
                                assert!([503, 504, 409].contains(&status), "{label}: {p:?}");
                                last = format!("{p:?}");
                            }
                            // The handler's own query lost its connection.
                            Err(ExecuteError::Handler(e)) => last = e,
                        }
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    };
                    runs.push((label, k, outcome.response.body, outcome.disposition));
                }
                (runs, failures)
            })
        })
        .collect();
    let (mut runs, mut failures) = (Vec::new(), 0);
    for client in clients {
        let (r, f) = tokio::time::timeout(Duration::from_secs(90), client)
            .await
            .expect("clients finish")
            .unwrap();
        runs.extend(r);
        failures += f;
    }
    restarter.await.unwrap();
    let direct = db.pool(2).await.unwrap();
    assert!(
        failures > 0,
        "the restarts cut no attempt: the test proved nothing"
    );
    assert!(pg_duplicates(&direct).await.is_empty(), "no duplicates");
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, runs.len(), "every key: one write");
    for (label, k, body, disposition) in &runs {
        assert_ne!(*disposition, Disposition::TakenOver, "{label}");
        let again = exec
            .execute(
                request(scope("alice", label), json!({"k": k}), 1),
                writer(label.clone(), Duration::ZERO),
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: {e:?}"));
        assert_eq!(again.disposition, Disposition::Replayed, "{label}");
        assert_eq!(&again.response.body, body, "{label}");
    }
    eprintln!(
        "{} behind PgBouncer {mode:?}, {strategy:?}, {what:?} restarted: {} keys, {failures} \
         failed attempts across 2 restarts",
        std::any::type_name::<S>(),
        runs.len()
    );
}

/// Which store a restart-under-load test runs.
#[derive(Debug, Clone, Copy)]
enum Driver {
    /// `PgStore`.
    Sqlx,
    /// `TokioPgStore`, its handler's statement unnamed (as behind a transaction pooler).
    TokioPostgres,
}

macro_rules! restart_tests {
    ($($name:ident: $mode:ident, $strategy:ident, $what:ident $(, $driver:ident)?;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let driver = [$(Driver::$driver,)? Driver::Sqlx][0];
            restarted_under_load(PoolMode::$mode, Strategy::$strategy, Restarted::$what, driver)
                .await;
        }
    )*};
}

restart_tests! {
    pgbouncer_transaction_mode_restarted_under_load_separate_claim: Transaction, SeparateClaim, PgBouncer;
    pgbouncer_transaction_mode_restarted_under_load_in_transaction: Transaction, InTransaction, PgBouncer;
    pgbouncer_session_mode_restarted_under_load_separate_claim: Session, SeparateClaim, PgBouncer;
    pgbouncer_session_mode_restarted_under_load_in_transaction: Session, InTransaction, PgBouncer;
    postgres_behind_pgbouncer_transaction_mode_restarted_under_load_separate_claim: Transaction, SeparateClaim, Postgres;
    postgres_behind_pgbouncer_transaction_mode_restarted_under_load_in_transaction: Transaction, InTransaction, Postgres;
    postgres_behind_pgbouncer_session_mode_restarted_under_load_separate_claim: Session, SeparateClaim, Postgres;
    postgres_behind_pgbouncer_session_mode_restarted_under_load_in_transaction: Session, InTransaction, Postgres;
    tokio_postgres_pgbouncer_transaction_mode_restarted_under_load_separate_claim: Transaction, SeparateClaim, PgBouncer, TokioPostgres;
    tokio_postgres_pgbouncer_transaction_mode_restarted_under_load_in_transaction: Transaction, InTransaction, PgBouncer, TokioPostgres;
    tokio_postgres_behind_pgbouncer_transaction_mode_restarted_under_load_separate_claim: Transaction, SeparateClaim, Postgres, TokioPostgres;
    tokio_postgres_behind_pgbouncer_transaction_mode_restarted_under_load_in_transaction: Transaction, InTransaction, Postgres, TokioPostgres;
}

/// Creates per second of `CREATES` fresh keys from `CONCURRENCY` tasks on `exec`; asserts one
/// write each.
async fn creates_per_second(exec: &Executor<PgStore>, direct: &sqlx::PgPool, tag: &str) -> f64 {
    const CREATES: usize = 400;
    const CONCURRENCY: usize = 16;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (exec, next, tag) = (exec.clone(), next.clone(), tag.to_string());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= CREATES {
                        break;
                    }
                    let label = format!("{tag}-{i}");
                    let req = request(scope("alice", &label), json!({"i": i}), 1);
                    let done = exec
                        .execute(req, pg_slow_id_writer(label.clone(), Duration::ZERO))
                        .await
                        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
                    assert_eq!(done.disposition, Disposition::Executed, "{label}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = CREATES as f64 / started.elapsed().as_secs_f64();
    let writes: i64 =
        sqlx::query_scalar("SELECT count(*) FROM business_writes WHERE label LIKE $1 || '-%'")
            .bind(tag)
            .fetch_one(direct)
            .await
            .unwrap();
    assert_eq!(writes as usize, CREATES, "{tag}: one write per create");
    rate
}

/// Creates through PgBouncer and direct, both strategies, side by side: every configuration
/// writes once per create (asserted), and the rates are printed with their ratio to direct. In the
/// suite one round; the measurement of docs/scaling.md is five, alternating the configurations:
/// `IDEMGEN_THROUGHPUT_ROUNDS=5 cargo test -p idemgen-runtime --test integration
/// pgbouncer::throughput -- --nocapture` (rates are figures, never assertions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_through_pgbouncer_against_direct() {
    let rounds: usize = std::env::var("IDEMGEN_THROUGHPUT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let (db, direct) = fresh_pg(4).await;
    // PgBouncers of its own, with server pools for every executor's pool of 16 (two per mode).
    let (host, port) = (db.options.get_host().to_string(), db.options.get_port());
    let start = |mode| PgBouncer::start(&host, port, mode, 40).expect("PgBouncer");
    let (transaction, session) = (start(PoolMode::Transaction), start(PoolMode::Session));
    let (transaction, session) = (&transaction, &session);
    let configs: Vec<(&str, Option<&PgBouncer>)> = vec![
        ("direct", None),
        ("pgbouncer-transaction", Some(transaction)),
        ("pgbouncer-session", Some(session)),
    ];
    let mut executors = Vec::new();
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        for (name, bouncer) in &configs {
            let (pool, pooler) = match bouncer {
                None => (db.pool(16).await.unwrap(), Pooler::Direct),
                Some(b) => (bouncer_pool(b, &db, 16).await, pooler_for(b.mode())),
            };
            let store = PgStore::new(pool).with_pooler(pooler);
            store.check().await.expect("pooler check");
            let config = ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            };
            executors.push((format!("{strategy:?} {name}"), Executor::new(store, config)));
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); executors.len()];
    for round in 0..rounds {
        // Alternate the order every round, so no configuration always runs first.
        let mut order: Vec<usize> = (0..executors.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let tag = format!("tp{round}x{i}");
            rates[i].push(creates_per_second(&executors[i].1, &direct, &tag).await);
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (i, (name, _)) in executors.iter().enumerate() {
        let base = median(&rates[i / 3 * 3]);
        let (lo, hi) = rates[i]
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        eprintln!(
            "{name:40} median {:7.0}/s  range {lo:6.0}–{hi:6.0}  ratio to direct {:.2}",
            median(&rates[i]),
            median(&rates[i]) / base
        );
    }
}

/// Behind a transaction pooler a claim commits in a transaction of its own, and that `COMMIT`'s
/// acknowledgement can be lost (a pooler restarted, a connection cut): the claim exists, held by
/// a live holder, while the attempt answered 503. The executor releases it behind, so the retry
/// executes at once instead of answering 409 until `stale_claim` (300 s by default). Shown with
/// the fault proxy cutting the claim's `COMMIT` after the server answered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_commit_acknowledgement_is_lost_is_released_behind() {
    use idemgen_testdb::proxy::{CommitFault, FaultProxy};
    let (db, direct) = fresh_pg(4).await;
    let upstream = (std::net::Ipv4Addr::LOCALHOST, db.options.get_port()).into();
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    // Only claims and releases go through the proxy (the claim pool), wrapped as behind a
    // transaction pooler.
    let claims = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(
            Pooler::Transaction.connect_options(
                db.options
                    .clone()
                    .port(proxy.port())
                    .ssl_mode(sqlx::postgres::PgSslMode::Disable),
            ),
        )
        .await
        .unwrap();
    let business = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(Pooler::Transaction.connect_options(db.options.clone()))
        .await
        .unwrap();
    let exec = Executor::new(
        PgStore::new(business)
            .with_claim_pool(claims)
            .with_pooler(Pooler::Transaction),
        ExecutorConfig::default(),
    );
    assert_eq!(exec.config().stale_claim, Duration::from_secs(300));
    // A first create registers the executor's lease (its renewals commit through the claim pool
    // too), so the armed fault hits the claim's COMMIT.
    exec.execute(
        request(scope("alice", "warm"), json!({"k": 0}), 1),
        pg_id_writer("warm".into()),
    )
    .await
    .expect("a first create");
    let req = request(scope("alice", "lost-claim"), json!({"k": 1}), 1);
    proxy.arm(CommitFault::CutAfterReply);
    match exec
        .execute(req.clone(), pg_id_writer("lost-claim".into()))
        .await
    {
        Err(ExecuteError::Problem(p)) => assert_eq!(p.kind().status().as_u16(), 503),
        other => panic!("the claim's acknowledgement was lost: {other:?}"),
    }
    assert_eq!(proxy.disarm(), None, "the armed fault fired");
    assert!(pg_write_ids(&direct, "lost-claim").await.is_empty());
    let started = Instant::now();
    let retry = loop {
        match exec
            .execute(req.clone(), pg_id_writer("lost-claim".into()))
            .await
        {
            Ok(outcome) => break outcome,
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "the lost claim still holds the key: {e:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(retry.disposition, Disposition::Executed);
    assert_eq!(pg_write_ids(&direct, "lost-claim").await.len(), 1);
}

//! Holder leases (protocol.md, "Durability of claims"): a claim whose holder stopped renewing its
//! lease (a process killed with SIGKILL, an executor dropped without shutting down) is taken over
//! after the lease expiry instead of `stale_claim`; a clean shutdown frees its claims at once; a
//! release that failed while the store was down is retried when it returns, and a late release
//! of a claim someone else took over deletes nothing; a live holder whose lease is expired under
//! it loses its claim and its write rolls back.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idemgen_runtime::engine::{
    ClaimOutcome, ClaimRequest, ClaimToken, Disposition, HandlerFuture, IdempotentRequest,
};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, Store, Strategy, TokioPgStore, TxHandle};
use idemgen_testdb::{Switch, TestDb};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Notify;

use crate::support::*;

/// A short lease, so that the tests of both stores run in about a second.
fn short_lease() -> ExecutorConfig {
    ExecutorConfig {
        lease_expiry: Some(Duration::from_millis(300)),
        lease_renewal: Duration::from_millis(100),
        ..config(Strategy::SeparateClaim)
    }
}

/// A retrying client's executor: the default stale-claim timeout (300 s), a short in-flight wait.
fn retrier() -> ExecutorConfig {
    ExecutorConfig {
        in_flight_wait: Duration::from_millis(50),
        ..config(Strategy::SeparateClaim)
    }
}

/// Claims `req`'s key for `holder`'s lease, as an attempt of that executor does before its
/// handler runs (and then, in these tests, never goes on). The executor's lease is registered
/// first by one attempt of its own.
async fn claim_for<S: Store + Clone>(holder: &Executor<S>, req: &IdempotentRequest) {
    let warm = Env {
        exec: holder.clone(),
        business: Arc::new(NoBusiness),
        ledger: Ledger::Mem(Default::default()),
    };
    let warm_up = request(
        scope("warm", &format!("{:?}", holder.holder_id())),
        json!({}),
        1,
    );
    attempt(&warm, warm_up, Plan::created("warm-up"))
        .await
        .expect("the warm-up attempt registers the lease");
    let claimed = holder
        .store()
        .claim(&ClaimRequest {
            scope: &req.scope,
            fingerprint: &req.fingerprint,
            fingerprint_version: req.fingerprint_version,
            token: ClaimToken::generate(),
            holder: Some(holder.holder_id()),
            stale_after: Duration::from_secs(300),
            retention: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        claimed,
        ClaimOutcome::Claimed { taken_over: false }
    ));
}

/// A handler write that does nothing (for warm-up attempts on either store).
struct NoBusiness;

impl<S: Store> Business<S> for NoBusiness {
    fn write<'a>(
        &'a self,
        _tx: &'a mut TxHandle<S>,
        _label: String,
    ) -> idemgen_runtime::engine::HandlerFuture<'a, (), String> {
        Box::pin(async { Ok(()) })
    }
}

/// Retries `req` on `env` every 20 ms until it executes; returns how long that took.
async fn retry_until_executed<S: Store>(
    env: &Env<S>,
    req: &IdempotentRequest,
    label: &str,
    within: Duration,
) -> (Disposition, Duration) {
    let start = Instant::now();
    loop {
        let result = attempt(env, req.clone(), Plan::created(label)).await;
        match result {
            Ok(outcome) => return (outcome.disposition, start.elapsed()),
            Err(_) => assert_eq!(problem_status(&result), Some(409), "{result:?}"),
        }
        assert!(
            start.elapsed() < within,
            "{label}: still held after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn dropped_holder_loses_its_claims<S: Store + Clone>(env: Env<S>) {
    let holder = Executor::new(env.exec.store().clone(), short_lease());
    let req = request(scope("alice", "dropped"), json!({"n": 1}), 1);
    claim_for(&holder, &req).await;
    let taker = Env {
        exec: Executor::new(env.exec.store().clone(), retrier()),
        ..env.clone()
    };
    // While the holder renews its lease, its claim is held, well past the lease expiry.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let held = attempt(&taker, req.clone(), Plan::created("taker")).await;
    assert_eq!(problem_status(&held), Some(409), "{held:?}");
    // Dropped without a shutdown (a process that died): the renewals stop, the lease lapses.
    drop(holder);
    let (disposition, after) =
        retry_until_executed(&taker, &req, "taker", Duration::from_secs(3)).await;
    assert_eq!(disposition, Disposition::TakenOver);
    assert!(
        after < Duration::from_millis(1500),
        "taken over after {after:?}"
    );
    assert_eq!(env.ledger.count("taker").await, 1);
    eprintln!("dropped holder: its claim was taken over {after:?} after the drop (lease 300 ms)");
}

async fn shut_down_holder_frees_its_claims_at_once<S: Store + Clone>(env: Env<S>) {
    // The default lease (5 s): only the shutdown can free the claim within this test.
    let holder = Executor::new(env.exec.store().clone(), config(Strategy::SeparateClaim));
    let req = request(scope("alice", "shut-down"), json!({"n": 1}), 1);
    claim_for(&holder, &req).await;
    let taker = Env {
        exec: Executor::new(env.exec.store().clone(), retrier()),
        ..env.clone()
    };
    let held = attempt(&taker, req.clone(), Plan::created("taker")).await;
    assert_eq!(problem_status(&held), Some(409), "{held:?}");
    holder.shutdown().await;
    let taken = attempt(&taker, req.clone(), Plan::created("taker")).await;
    assert_eq!(taken.unwrap().disposition, Disposition::TakenOver);
    // After its shutdown the executor still works, with claims that name no holder.
    let later = Env {
        exec: holder.clone(),
        ..env.clone()
    };
    let after = request(scope("alice", "after-shutdown"), json!({}), 1);
    assert_eq!(
        attempt(&later, after, Plan::created("after"))
            .await
            .unwrap()
            .disposition,
        Disposition::Executed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_executors_claims_are_taken_over_once_its_lease_lapses() {
    dropped_holder_loses_its_claims(mem_env(config(Strategy::SeparateClaim))).await;
    dropped_holder_loses_its_claims(pg_env(config(Strategy::SeparateClaim)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_executors_claims_are_taken_over_at_once() {
    shut_down_holder_frees_its_claims_at_once(mem_env(config(Strategy::SeparateClaim))).await;
    shut_down_holder_frees_its_claims_at_once(pg_env(config(Strategy::SeparateClaim)).await).await;
}

/// The environment variable that makes [`child_holder`] run (in a child process).
const CHILD_URL: &str = "IDEMGEN_LEASE_CHILD_URL";

/// How many keys the killed process holds at once.
const CHILD_KEYS: usize = 16;

/// Which store the child holds its keys on: `tokio-postgres`, or by default sqlx's.
const CHILD_DRIVER: &str = "IDEMGEN_LEASE_CHILD_DRIVER";

/// The child's attempts: [`CHILD_KEYS`] keys claimed at once by `exec`, each attempt writing
/// through `write`, printing `CLAIMED` and hanging in its handler until the process is killed.
async fn hold_keys<S, H>(exec: Executor<S>, write: fn() -> H)
where
    S: Store,
    H: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let attempts: Vec<_> = (0..CHILD_KEYS)
        .map(|k| {
            let exec = exec.clone();
            tokio::spawn(async move {
                let req = request(scope("alice", &format!("killed-{k}")), json!({"k": k}), 1);
                exec.execute(req, write()).await
            })
        })
        .collect();
    for a in attempts {
        let _ = a.await;
    }
}

fn claimed_and_hang() -> Result<TestResponse, String> {
    println!("CLAIMED");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    Ok(TestResponse {
        status: 201,
        body: "never".into(),
        headers: vec![],
    })
}

fn sqlx_child_write()
-> impl for<'a> FnOnce(&'a mut TxHandle<PgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    |tx: &mut TxHandle<PgStore>| {
        Box::pin(async move {
            sqlx::query("INSERT INTO business_writes (label) VALUES ('child')")
                .execute(tx.conn().await.map_err(|e| e.to_string())?)
                .await
                .map_err(|e| e.to_string())?;
            let done = claimed_and_hang();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            done
        })
    }
}

fn tokio_child_write()
-> impl for<'a> FnOnce(&'a mut TxHandle<TokioPgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    |tx: &mut TxHandle<TokioPgStore>| {
        Box::pin(async move {
            tx.conn()
                .await
                .map_err(|e| e.to_string())?
                .execute("INSERT INTO business_writes (label) VALUES ('child')", &[])
                .await
                .map_err(|e| e.to_string())?;
            let done = claimed_and_hang();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            done
        })
    }
}

/// Runs in a child process of [`a_killed_process_loses_its_claims_within_the_lease_expiry`]: an
/// executor with the default lease, on the store [`CHILD_DRIVER`] names, claims [`CHILD_KEYS`]
/// keys at once; each attempt writes, prints `CLAIMED` and hangs in its handler until the process
/// is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_killed_process_loses_its_claims_within_the_lease_expiry"]
async fn child_holder() {
    let url = std::env::var(CHILD_URL).expect("run by the parent test");
    if std::env::var(CHILD_DRIVER).as_deref() == Ok("tokio-postgres") {
        let pool = TokioPgStore::pool(&url, CHILD_KEYS + 2).unwrap();
        let exec = Executor::new(TokioPgStore::new(pool), ExecutorConfig::default());
        hold_keys(exec, tokio_child_write).await;
    } else {
        let pool = PgPoolOptions::new()
            .max_connections(CHILD_KEYS as u32 + 2)
            .connect(&url)
            .await
            .unwrap();
        let exec = Executor::new(PgStore::new(pool), ExecutorConfig::default());
        hold_keys(exec, sqlx_child_write).await;
    }
}

/// A process holding claims on 16 keys (default lease: 5 s expiry, renewed every second) is
/// killed with SIGKILL mid-handler, a while after it claimed. Its keys are held (409) right
/// after, and each executes once the lease lapsed: between 4 s (the last renewal may be a second
/// old) and 5 s plus the retries' poll after the kill, instead of `stale_claim` (300 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_loses_its_claims_within_the_lease_expiry() {
    killed_holder("sqlx").await;
}

/// [`a_killed_process_loses_its_claims_within_the_lease_expiry`] with the killed process on
/// `TokioPgStore` (its retries on `PgStore`: the two stores share the records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tokio_postgres_process_loses_its_claims_within_the_lease_expiry() {
    killed_holder("tokio-postgres").await;
}

async fn killed_holder(driver: &str) {
    let (db, pool) = fresh_pg(CHILD_KEYS as u32 + 4).await;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "leases::child_holder",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_URL, &db.url)
        .env(CHILD_DRIVER, driver)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the child process");
    let stdout = child.stdout.take().unwrap();
    let claimed = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // libtest may print the test's name on the same line first.
            .filter(|line| line.ends_with("CLAIMED"))
            .take(CHILD_KEYS)
            .count()
    });
    let claimed = tokio::time::timeout(Duration::from_secs(60), claimed)
        .await
        .expect("the child claims within a minute")
        .unwrap();
    assert_eq!(claimed, CHILD_KEYS, "the child ended before claiming");
    // Let its lease be renewed a few times, so the kill falls between renewals.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    child.kill().expect("SIGKILL");
    let killed = Instant::now();
    child.wait().unwrap();
    let env = Env {
        exec: Executor::new(PgStore::new(pool.clone()), retrier()),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let req = |k: usize| request(scope("alice", &format!("killed-{k}")), json!({"k": k}), 1);
    let early = attempt(&env, req(0), Plan::created("retry-0")).await;
    assert_eq!(problem_status(&early), Some(409), "{early:?}");
    let retries: Vec<_> = (0..CHILD_KEYS)
        .map(|k| {
            let env = env.clone();
            tokio::spawn(async move {
                let label = format!("retry-{k}");
                let (disposition, _) =
                    retry_until_executed(&env, &req(k), &label, Duration::from_secs(20)).await;
                (disposition, killed.elapsed())
            })
        })
        .collect();
    let mut times = Vec::new();
    for r in retries {
        let (disposition, after) = r.await.unwrap();
        assert_eq!(disposition, Disposition::TakenOver);
        times.push(after);
    }
    times.sort();
    let (first, last) = (times[0], times[CHILD_KEYS - 1]);
    assert!(
        first >= Duration::from_secs(3) && last < Duration::from_secs(7),
        "taken over between {first:?} and {last:?} after the kill"
    );
    // Exactly one write per key: the killed process's transactions died with its connections.
    assert_eq!(env.ledger.count("child").await, 0);
    for k in 0..CHILD_KEYS {
        assert_eq!(env.ledger.count(&format!("retry-{k}")).await, 1);
        let (state, _) = pg_record(&pool, &req(k).scope).await.unwrap();
        assert_eq!(state, "completed");
    }
    assert!(pg_duplicates(&pool).await.is_empty());
    eprintln!(
        "kill -9 ({driver}): {CHILD_KEYS} stranded keys executed between {first:?} and {last:?} after the \
         kill (lease expiry 5 s, renewal 1 s; stale_claim alone: 300 s)"
    );
}

/// A free loopback port nothing listens on: connections to it are refused.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An executor whose store reaches the database through a switch (its pools fail fast while the
/// switch points nowhere), with `direct` for the test's own reads.
struct Outage {
    _db: TestDb,
    switch: Switch,
    db_port: u16,
    holder: Executor<PgStore>,
    direct: sqlx::PgPool,
}

async fn outage() -> Outage {
    let (db, direct) = fresh_pg(4).await;
    let db_port = db.options.get_port();
    let switch = Switch::start(db_port).unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_millis(300))
        .connect_with(db.options.clone().port(switch.port()))
        .await
        .unwrap();
    let holder = Executor::new(PgStore::new(pool), config(Strategy::SeparateClaim));
    Outage {
        _db: db,
        switch,
        db_port,
        holder,
        direct,
    }
}

/// Runs an attempt on the outage's executor whose handler writes, then waits until the store is
/// down and fails: its rollback and its release both fail. Returns once the release is
/// deferred, the store still down.
async fn release_fails_while_down(o: &Outage, req: &IdempotentRequest) {
    let down = Arc::new(Notify::new());
    let attempt = {
        let (exec, req, down) = (o.holder.clone(), req.clone(), down.clone());
        tokio::spawn(async move {
            exec.execute(req, move |tx: &mut TxHandle<PgStore>| {
                Box::pin(async move {
                    sqlx::query("INSERT INTO business_writes (label) VALUES ('first')")
                        .execute(tx.conn().await.map_err(|e| e.to_string())?)
                        .await
                        .map_err(|e| e.to_string())?;
                    down.notified().await;
                    Err::<TestResponse, _>("the handler failed".to_owned())
                })
            })
            .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while pg_record(&o.direct, &req.scope).await.is_none() {
        assert!(Instant::now() < deadline, "the claim never appeared");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    o.switch.switch_to(dead_port());
    // The switch cuts open connections within 20 ms.
    tokio::time::sleep(Duration::from_millis(100)).await;
    down.notify_one();
    let failed = attempt.await.unwrap();
    assert!(failed.is_err(), "{failed:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while o.holder.deferred_releases() == 0 {
        assert!(Instant::now() < deadline, "the release was not deferred");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (state, _) = pg_record(&o.direct, &req.scope).await.unwrap();
    assert_eq!(state, "claimed", "the release failed: the claim is left");
}

/// The store goes down while an attempt fails; its release fails too. While the store is down
/// the key is held (409 to another process reaching the database, for up to `stale_claim`
/// before: the holder is alive and renews its lease); when the store returns, the background
/// task releases it and a retry executes as a fresh claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_failed_while_the_store_was_down_is_retried_when_it_returns() {
    let o = outage().await;
    let req = request(scope("alice", "outage"), json!({"n": 1}), 1);
    release_fails_while_down(&o, &req).await;
    let other = Env {
        exec: Executor::new(PgStore::new(o.direct.clone()), retrier()),
        business: pg_business(),
        ledger: Ledger::Pg(o.direct.clone()),
    };
    let held = attempt(&other, req.clone(), Plan::created("retry")).await;
    assert_eq!(problem_status(&held), Some(409), "{held:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    o.switch.switch_to(o.db_port);
    let back = Instant::now();
    while pg_record(&o.direct, &req.scope).await.is_some() {
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the claim was not released"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let freed = back.elapsed();
    assert_eq!(o.holder.deferred_releases(), 0);
    let retry = attempt(&other, req.clone(), Plan::created("retry")).await;
    // Released, not taken over: the holder's lease never lapsed.
    assert_eq!(retry.unwrap().disposition, Disposition::Executed);
    assert_eq!(other.ledger.count("first").await, 0);
    assert_eq!(other.ledger.count("retry").await, 1);
    eprintln!(
        "store outage: the key whose release failed was free {freed:?} after the store returned \
         (1 s outage; before: held until stale_claim, 300 s)"
    );
}

/// The same failed release, but while the store is down for the holder another process takes
/// the claim over (its `stale_claim` is short) and runs a slow handler; the holder's late
/// release, when the store returns, is guarded by its token and deletes nothing: the taker
/// completes, exactly one write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_release_of_a_claim_taken_over_deletes_nothing() {
    let o = outage().await;
    let req = request(scope("alice", "late-release"), json!({"n": 1}), 1);
    release_fails_while_down(&o, &req).await;
    let taker = Env {
        exec: Executor::new(
            PgStore::new(o.direct.clone()),
            ExecutorConfig {
                stale_claim: Duration::from_millis(1),
                ..retrier()
            },
        ),
        business: pg_business(),
        ledger: Ledger::Pg(o.direct.clone()),
    };
    let proceed = Arc::new(Notify::new());
    let taking = {
        let (taker, req, proceed) = (taker.clone(), req.clone(), proceed.clone());
        tokio::spawn(async move {
            taker
                .exec
                .execute(req, move |tx: &mut TxHandle<PgStore>| {
                    Box::pin(async move {
                        sqlx::query("INSERT INTO business_writes (label) VALUES ('taker')")
                            .execute(tx.conn().await.map_err(|e| e.to_string())?)
                            .await
                            .map_err(|e| e.to_string())?;
                        proceed.notified().await;
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: "made taker".into(),
                            headers: vec![],
                        })
                    })
                })
                .await
        })
    };
    // The taker holds the claim (its write in progress) before the store returns.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND state = 'idle in transaction'",
        )
        .fetch_one(&o.direct)
        .await
        .unwrap();
        if waiting >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the taker never took over");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    o.switch.switch_to(o.db_port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while o.holder.deferred_releases() > 0 {
        assert!(Instant::now() < deadline, "the late release never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (state, _) = pg_record(&o.direct, &req.scope).await.unwrap();
    assert_eq!(
        state, "claimed",
        "the late release deleted the taker's claim"
    );
    proceed.notify_one();
    let taken = taking.await.unwrap().expect("the taker completes");
    assert_eq!(taken.disposition, Disposition::TakenOver);
    assert_eq!(taker.ledger.count("first").await, 0);
    assert_eq!(taker.ledger.count("taker").await, 1);
    let (state, body) = pg_record(&o.direct, &req.scope).await.unwrap();
    assert_eq!(state, "completed");
    assert_eq!(body.as_deref(), Some(&b"made taker"[..]));
}

/// A live, slow holder whose lease is forced into the past mid-handler (as when it paused longer
/// than the expiry) loses its claim: the next attempt takes over and executes, the holder's
/// completion fails on its token and its write rolls back, and it answers with the taker's
/// result. Exactly one write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_holder_whose_lease_expires_mid_handler_loses_its_claim_safely() {
    let (_db, pool) = fresh_pg(8).await;
    // No renewal during the test: only the forced expiry ends the lease.
    let holder = Executor::new(
        PgStore::new(pool.clone()),
        ExecutorConfig {
            lease_expiry: Some(Duration::from_secs(120)),
            lease_renewal: Duration::from_secs(120),
            ..config(Strategy::SeparateClaim)
        },
    );
    let req = request(scope("alice", "paused"), json!({"n": 1}), 1);
    let proceed = Arc::new(Notify::new());
    let slow = {
        let (holder, req, proceed) = (holder.clone(), req.clone(), proceed.clone());
        tokio::spawn(async move {
            holder
                .execute(req, move |tx: &mut TxHandle<PgStore>| {
                    Box::pin(async move {
                        sqlx::query("INSERT INTO business_writes (label) VALUES ('paused')")
                            .execute(tx.conn().await.map_err(|e| e.to_string())?)
                            .await
                            .map_err(|e| e.to_string())?;
                        proceed.notified().await;
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: "made paused".into(),
                            headers: vec![],
                        })
                    })
                })
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while pg_record(&pool, &req.scope).await.is_none() {
        assert!(Instant::now() < deadline, "the claim never appeared");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taker = Env {
        exec: Executor::new(PgStore::new(pool.clone()), retrier()),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let held = attempt(&taker, req.clone(), Plan::created("taker")).await;
    assert_eq!(problem_status(&held), Some(409), "{held:?}");
    let expired = sqlx::query(
        "UPDATE idempotency_holders
            SET expires_at = clock_timestamp() - interval '1 second',
                heartbeat_at = clock_timestamp() - interval '121 seconds'
          WHERE holder_id = $1",
    )
    .bind(holder.holder_id().0)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(expired.rows_affected(), 1, "the holder's lease row");
    let taken = attempt(&taker, req.clone(), Plan::created("taker")).await;
    assert_eq!(taken.unwrap().disposition, Disposition::TakenOver);
    proceed.notify_one();
    let original = slow.await.unwrap().expect("the original answers");
    // Its completion lost on the token: it answers with the taker's stored result.
    assert_eq!(original.disposition, Disposition::Replayed);
    assert_eq!(original.response.body, "made taker");
    assert_eq!(
        taker.ledger.count("paused").await,
        0,
        "its write rolled back"
    );
    assert_eq!(taker.ledger.count("taker").await, 1);
    assert!(pg_duplicates(&pool).await.is_empty());
}

//! The contract every store keeps, under both strategies. Each case is an `async fn(Env<S>)`; the
//! `contract!` macro runs it on PostgreSQL (directly, and through PgBouncer in transaction and in
//! session pooling mode; and on tokio-postgres, the pipelining store, directly (its
//! separate-claim attempts also beginning their transaction with the claim) and through
//! PgBouncer in both modes), on SQLite (a temporary file) and in memory, separate-claim and
//! in-transaction.

use std::sync::Arc;
use std::time::Duration;

use idemgen_protocol::Fingerprint;
use idemgen_runtime::engine::{
    ClaimOutcome, ClaimRequest, ClaimToken, Disposition, ExecuteError, RecordState, StoredResponse,
};
use idemgen_runtime::{Executor, ExecutorConfig, PgStore, ProblemKind, Store, Strategy};
use serde_json::json;
use tokio::sync::Notify;

use crate::support::*;
use idemgen_testdb::PoolMode;

macro_rules! contract {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres_separate_claim() {
                super::$case(pg_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres_in_transaction() {
                super::$case(pg_env(config(Strategy::InTransaction)).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_separate_claim() {
                super::$case(tokio_pg_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_in_transaction() {
                super::$case(tokio_pg_env(config(Strategy::InTransaction)).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_begin_at_claim() {
                super::$case(tokio_pg_begin_at_claim_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_pgbouncer_session_separate_claim() {
                super::$case(tokio_pgbouncer_session_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_pgbouncer_session_in_transaction() {
                super::$case(tokio_pgbouncer_session_env(config(Strategy::InTransaction)).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_pgbouncer_transaction_separate_claim() {
                super::$case(tokio_pgbouncer_transaction_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn tokio_postgres_pgbouncer_transaction_in_transaction() {
                super::$case(tokio_pgbouncer_transaction_env(config(Strategy::InTransaction)).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn pgbouncer_transaction_separate_claim() {
                super::$case(pgbouncer_env(config(Strategy::SeparateClaim), PoolMode::Transaction).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn pgbouncer_transaction_in_transaction() {
                super::$case(pgbouncer_env(config(Strategy::InTransaction), PoolMode::Transaction).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn pgbouncer_session_separate_claim() {
                super::$case(pgbouncer_env(config(Strategy::SeparateClaim), PoolMode::Session).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn pgbouncer_session_in_transaction() {
                super::$case(pgbouncer_env(config(Strategy::InTransaction), PoolMode::Session).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite_separate_claim() {
                super::$case(sqlite_env(config(Strategy::SeparateClaim)).await, Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite_in_transaction() {
                super::$case(sqlite_env(config(Strategy::InTransaction)).await, Strategy::InTransaction).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory_separate_claim() {
                super::$case(mem_env(config(Strategy::SeparateClaim)), Strategy::SeparateClaim).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory_in_transaction() {
                super::$case(mem_env(config(Strategy::InTransaction)), Strategy::InTransaction).await;
            }
        }
    )*};
}

contract!(
    first_attempt_executes_and_retry_replays,
    changed_request_is_rejected,
    non_2xx_is_not_stored_and_frees_the_key,
    handler_error_rolls_back_and_frees_the_key,
    duplicate_in_flight_gets_409_then_replays,
    slow_handler_is_taken_over_and_its_write_rolled_back,
    owners_never_share_keys,
    resource_scopes_never_share_keys,
    deleted_resource_answers_410,
    only_allowlisted_headers_are_stored,
    expired_records_are_purged_and_unexpired_kept,
    an_operations_retention_overrides_the_executors,
    new_records_are_hs2,
    hs1_record_of_the_previous_release_replays_across_the_upgrade,
    stale_hs1_claim_is_taken_over_and_keeps_hs1,
    a_staged_completion_holds_its_stale_claim_until_the_commit,
);

async fn first_attempt_executes_and_retry_replays<S: Store>(env: Env<S>, _: Strategy) {
    let req = request(scope("alice", "k1"), json!({"name": "w"}), 1);
    let first = attempt(&env, req.clone(), Plan::created("w1"))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);
    assert_eq!(first.response.status, 201);
    let retry = attempt(&env, req, Plan::created("w1-again")).await.unwrap();
    assert_eq!(retry.disposition, Disposition::Replayed);
    assert_eq!(
        retry.response, first.response,
        "a replay returns the stored result"
    );
    assert_eq!(env.ledger.count("w1").await, 1);
    assert_eq!(
        env.ledger.count("w1-again").await,
        0,
        "a replay never runs the handler"
    );
}

async fn changed_request_is_rejected<S: Store>(env: Env<S>, _: Strategy) {
    let s = scope("alice", "k2");
    attempt(
        &env,
        request(s.clone(), json!({"name": "a"}), 1),
        Plan::created("a"),
    )
    .await
    .unwrap();
    let changed = attempt(
        &env,
        request(s.clone(), json!({"name": "b"}), 1),
        Plan::created("b"),
    )
    .await;
    match changed {
        Err(ExecuteError::Problem(p)) => assert_eq!(p.kind(), ProblemKind::KeyReused),
        other => panic!("expected 422 key reused, got {other:?}"),
    }
    let new_version = attempt(
        &env,
        request(s, json!({"name": "a"}), 2),
        Plan::created("c"),
    )
    .await;
    match new_version {
        Err(ExecuteError::Problem(p)) => {
            assert_eq!(p.kind(), ProblemKind::FingerprintVersionChanged);
            assert_eq!(p.kind().status(), 422);
        }
        other => panic!("expected 422 version changed, got {other:?}"),
    }
    assert_eq!(env.ledger.count("b").await + env.ledger.count("c").await, 0);
}

async fn non_2xx_is_not_stored_and_frees_the_key<S: Store>(env: Env<S>, _: Strategy) {
    let req = request(scope("alice", "k3"), json!({}), 1);
    let mut plan = Plan::created("refused");
    plan.status = 503;
    let first = attempt(&env, req.clone(), plan).await.unwrap();
    assert_eq!(first.disposition, Disposition::NotStored);
    assert_eq!(first.response.status, 503);
    assert_eq!(
        env.ledger.count("refused").await,
        0,
        "a non-2xx result rolls back"
    );
    let retry = attempt(&env, req, Plan::created("ok")).await.unwrap();
    assert_eq!(
        retry.disposition,
        Disposition::Executed,
        "the key was freed"
    );
    assert_eq!(env.ledger.count("ok").await, 1);
}

async fn handler_error_rolls_back_and_frees_the_key<S: Store>(env: Env<S>, _: Strategy) {
    let req = request(scope("alice", "k4"), json!({}), 1);
    let mut plan = Plan::created("boom");
    plan.fail = true;
    match attempt(&env, req.clone(), plan).await {
        Err(ExecuteError::Handler(e)) => assert_eq!(e, "handler failed"),
        other => panic!("expected the handler error, got {other:?}"),
    }
    assert_eq!(env.ledger.count("boom").await, 0);
    let retry = attempt(&env, req, Plan::created("fine")).await.unwrap();
    assert_eq!(retry.disposition, Disposition::Executed);
}

async fn duplicate_in_flight_gets_409_then_replays<S: Store + Clone>(env: Env<S>, _: Strategy) {
    let mut env = env;
    let mut cfg = env.exec.config().clone();
    cfg.in_flight_wait = Duration::from_millis(150);
    env.exec = idemgen_runtime::Executor::new(clone_store(&env), cfg);
    let req = request(scope("alice", "k5"), json!({}), 1);
    let gate = Arc::new(Notify::new());
    let started = Arc::new(Notify::new());
    let first = {
        let (env, req, gate, started) = (env.clone(), req.clone(), gate.clone(), started.clone());
        tokio::spawn(async move {
            let business = env.business.clone();
            env.exec
                .execute(req, move |tx: &mut idemgen_runtime::TxHandle<S>| {
                    Box::pin(async move {
                        business.write(tx, "slow".into()).await?;
                        started.notify_one();
                        gate.notified().await;
                        Ok::<_, String>(TestResponse {
                            status: 201,
                            body: "slow".into(),
                            headers: vec![],
                        })
                    })
                })
                .await
        })
    };
    started.notified().await;
    let duplicate = attempt(&env, req.clone(), Plan::created("dup")).await;
    assert_eq!(problem_status(&duplicate), Some(409), "{duplicate:?}");
    gate.notify_one();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.disposition, Disposition::Executed);
    let later = attempt(&env, req, Plan::created("dup")).await.unwrap();
    assert_eq!(later.disposition, Disposition::Replayed);
    assert_eq!(later.response.body, "slow");
    assert_eq!(
        env.ledger.count("slow").await + env.ledger.count("dup").await,
        1
    );
}

/// The executor's store is behind an `Arc`; tests that change settings rebuild it on a clone.
fn clone_store<S: Store + Clone>(env: &Env<S>) -> S {
    env.exec.store().clone()
}

async fn slow_handler_is_taken_over_and_its_write_rolled_back<S: Store + Clone>(
    env: Env<S>,
    strategy: Strategy,
) {
    let mut env = env;
    let mut cfg = env.exec.config().clone();
    cfg.stale_claim = Duration::from_millis(200);
    cfg.in_flight_wait = Duration::from_millis(50);
    env.exec = idemgen_runtime::Executor::new(clone_store(&env), cfg);
    let req = request(scope("alice", "k6"), json!({"n": 1}), 1);
    let mut slow = Plan::created("slow");
    slow.delay = Duration::from_millis(700);
    let first = {
        let (env, req) = (env.clone(), req.clone());
        tokio::spawn(async move { attempt(&env, req, slow).await })
    };
    tokio::time::sleep(Duration::from_millis(350)).await;
    let second = attempt(&env, req.clone(), Plan::created("fast")).await;
    let first = first.await.unwrap();
    let sqlite = matches!(env.ledger, Ledger::Sqlite(..));
    match strategy {
        Strategy::SeparateClaim if sqlite => {
            // SQLite: the slow attempt holds the file's write lock from its first write to its
            // commit, so the takeover (a write) waits for it, then finds the record completed and
            // replays it: still one write, the slow one. A holder stalled *before* its first write
            // is taken over (sqlite.rs, `a_stale_claim_holding_no_write_lock_is_taken_over`).
            let second = second.unwrap();
            assert_eq!(second.disposition, Disposition::Replayed);
            assert_eq!(second.response.body, "made slow");
            assert_eq!(first.unwrap().disposition, Disposition::Executed);
            assert_eq!(env.ledger.count("slow").await, 1);
            assert_eq!(env.ledger.count("fast").await, 0);
        }
        Strategy::SeparateClaim => {
            let second = second.unwrap();
            assert_eq!(second.disposition, Disposition::TakenOver);
            // The slow attempt's completion failed on the token: its write never committed,
            // and it answers with the winner's stored result.
            let first = first.unwrap();
            assert_eq!(first.disposition, Disposition::Replayed);
            assert_eq!(first.response.body, "made fast");
            assert_eq!(env.ledger.count("slow").await, 0);
            assert_eq!(env.ledger.count("fast").await, 1);
        }
        Strategy::InTransaction => {
            // An uncommitted reservation cannot be taken over: the duplicate waits, then 409.
            assert_eq!(problem_status(&second), Some(409), "{second:?}");
            assert_eq!(first.unwrap().disposition, Disposition::Executed);
            assert_eq!(env.ledger.count("slow").await, 1);
            assert_eq!(env.ledger.count("fast").await, 0);
        }
    }
}

async fn owners_never_share_keys<S: Store>(env: Env<S>, _: Strategy) {
    let input = json!({"name": "same"});
    let a = attempt(
        &env,
        request(scope("alice", "shared"), input.clone(), 1),
        Plan::created("alice-w"),
    )
    .await
    .unwrap();
    let b = attempt(
        &env,
        request(scope("bob", "shared"), input, 1),
        Plan::created("bob-w"),
    )
    .await
    .unwrap();
    assert_eq!(
        b.disposition,
        Disposition::Executed,
        "bob gets his own execution"
    );
    assert_ne!(
        a.response.body, b.response.body,
        "bob never sees alice's result"
    );
    assert_eq!(env.ledger.count("bob-w").await, 1);
}

async fn resource_scopes_never_share_keys<S: Store>(env: Env<S>, _: Strategy) {
    let s1 = scope("alice", "pub").with_resource_scope("widget-1");
    let s2 = scope("alice", "pub").with_resource_scope("widget-2");
    attempt(&env, request(s1, json!({}), 1), Plan::created("p1"))
        .await
        .unwrap();
    let second = attempt(&env, request(s2, json!({}), 1), Plan::created("p2"))
        .await
        .unwrap();
    assert_eq!(second.disposition, Disposition::Executed);
}

async fn deleted_resource_answers_410<S: Store>(env: Env<S>, _: Strategy) {
    let s = scope("alice", "k7");
    let req = request(s.clone(), json!({}), 1);
    let mut plan = Plan::created("made");
    plan.resource_ref = Some("thing-7".into());
    attempt(&env, req.clone(), plan).await.unwrap();
    let store = env.exec.store();
    let mut tx = store.begin().await.unwrap();
    let n = store
        .tombstone_resource(&mut tx, "alice", "createThing", "thing-7")
        .await
        .unwrap();
    assert_eq!(n, 1);
    store.commit(tx).await.unwrap();
    let retry = attempt(&env, req, Plan::created("again")).await;
    match retry {
        Err(ExecuteError::Problem(p)) => assert_eq!(p.kind(), ProblemKind::ResourceGone),
        other => panic!("expected 410, got {other:?}"),
    }
    let record = store
        .read(&s, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert!(
        record.fingerprint.is_none() && record.response.is_none(),
        "a tombstone keeps nothing"
    );
    assert_eq!(env.ledger.count("again").await, 0);
}

async fn only_allowlisted_headers_are_stored<S: Store>(env: Env<S>, _: Strategy) {
    let req = request(scope("alice", "k8"), json!({}), 1);
    let mut plan = Plan::created("h");
    plan.headers = vec![
        ("location".into(), "/things/1".into()),
        ("set-cookie".into(), "session=secret".into()),
        ("x-debug".into(), "internal".into()),
    ];
    attempt(&env, req.clone(), plan).await.unwrap();
    let replay = attempt(&env, req, Plan::created("h2")).await.unwrap();
    assert_eq!(replay.disposition, Disposition::Replayed);
    let names: Vec<_> = replay
        .response
        .headers
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        names,
        ["location"],
        "Set-Cookie and undeclared headers are never stored"
    );
}

async fn expired_records_are_purged_and_unexpired_kept<S: Store + Clone>(env: Env<S>, _: Strategy) {
    // An executor keeping records 1 ms, on the same store: its records expire, the others' not.
    let mut short_lived = env.clone();
    short_lived.exec = Executor::new(
        env.exec.store().clone(),
        ExecutorConfig {
            retention: Some(Duration::from_millis(1)),
            ..env.exec.config().clone()
        },
    );
    let short = request(scope("alice", "short"), json!({}), 1);
    let forever = request(scope("alice", "forever"), json!({}), 1);
    attempt(&short_lived, short.clone(), Plan::created("s1"))
        .await
        .unwrap();
    attempt(&env, forever.clone(), Plan::created("f1"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let deleted = idemgen_runtime::retention::purge_expired(env.exec.store())
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let again = attempt(&short_lived, short, Plan::created("s2"))
        .await
        .unwrap();
    assert_eq!(
        again.disposition,
        Disposition::Executed,
        "an expired key executes again"
    );
    let kept = attempt(&env, forever, Plan::created("f2")).await.unwrap();
    assert_eq!(
        kept.disposition,
        Disposition::Replayed,
        "records without TTL are kept"
    );
}

/// `x-idempotency-retention`: the request's retention (its operation's) wins over the
/// executor's, in both directions.
async fn an_operations_retention_overrides_the_executors<S: Store + Clone>(
    env: Env<S>,
    _: Strategy,
) {
    // The executor keeps records forever; this operation 1 ms.
    let mut short = request(scope("alice", "op-short"), json!({}), 1);
    short.retention = Some(Duration::from_millis(1));
    // An executor keeping records 1 ms; this operation a day.
    let mut short_lived = env.clone();
    short_lived.exec = Executor::new(
        env.exec.store().clone(),
        ExecutorConfig {
            retention: Some(Duration::from_millis(1)),
            ..env.exec.config().clone()
        },
    );
    let mut long = request(scope("alice", "op-long"), json!({}), 1);
    long.retention = Some(Duration::from_secs(86_400));
    attempt(&env, short.clone(), Plan::created("s1"))
        .await
        .unwrap();
    attempt(&short_lived, long.clone(), Plan::created("l1"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let deleted = idemgen_runtime::retention::purge_expired(env.exec.store())
        .await
        .unwrap();
    assert_eq!(
        deleted, 1,
        "only the operation's short-lived record expired"
    );
    let again = attempt(&env, short, Plan::created("s2")).await.unwrap();
    assert_eq!(again.disposition, Disposition::Executed);
    let kept = attempt(&short_lived, long, Plan::created("l2"))
        .await
        .unwrap();
    assert_eq!(kept.disposition, Disposition::Replayed);
}

/// PostgreSQL-specific: the store answers on the writer, so a fresh store on the same pool sees
/// every record (nothing is cached in the process).
#[tokio::test]
async fn postgres_reads_go_to_the_database_not_the_process() {
    let env = pg_env(config(Strategy::SeparateClaim)).await;
    let req = request(scope("alice", "k9"), json!({}), 1);
    attempt(&env, req.clone(), Plan::created("once"))
        .await
        .unwrap();
    let Ledger::Pg(pool) = &env.ledger else {
        unreachable!()
    };
    let other = Env {
        exec: idemgen_runtime::Executor::new(
            PgStore::new(pool.clone()),
            config(Strategy::InTransaction),
        ),
        business: env.business.clone(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let replay = attempt(&other, req, Plan::created("twice")).await.unwrap();
    assert_eq!(replay.disposition, Disposition::Replayed);
}

fn stored_fingerprint(record: Option<idemgen_runtime::engine::Record>) -> Fingerprint {
    record
        .expect("a record")
        .fingerprint
        .expect("a fingerprint")
}

async fn new_records_are_hs2<S: Store>(env: Env<S>, _: Strategy) {
    let s = scope("alice", "k-hs2");
    let input = json!({"body": {"ledger_id": 9_007_199_254_740_993_u64}});
    attempt(
        &env,
        request(s.clone(), input.clone(), 1),
        Plan::created("odd"),
    )
    .await
    .unwrap();
    let record = env.exec.store().read(&s, Duration::from_secs(60)).await;
    assert_eq!(
        stored_fingerprint(record.unwrap()),
        Fingerprint::hs2("createThing", 1, &input).unwrap()
    );
    // The request the issue is about: another 64-bit id under the same key is a 422 now, where
    // hs1 (both ids the same double) replayed the other request's result.
    let other = json!({"body": {"ledger_id": 9_007_199_254_740_992_u64}});
    assert_eq!(
        Fingerprint::hs1("createThing", 1, &input).unwrap(),
        Fingerprint::hs1("createThing", 1, &other).unwrap()
    );
    let reused = attempt(&env, request(s, other, 1), Plan::created("even")).await;
    match reused {
        Err(ExecuteError::Problem(p)) => assert_eq!(p.kind(), ProblemKind::KeyReused),
        other => panic!("expected 422 key reused, got {other:?}"),
    }
    assert_eq!(env.ledger.count("even").await, 0);
}

/// A record the previous release completed (an `hs1`-only request through the same store), retried
/// by this release: it replays, and a different request under the key still gets 422.
async fn hs1_record_of_the_previous_release_replays_across_the_upgrade<S: Store>(
    env: Env<S>,
    _: Strategy,
) {
    let s = scope("alice", "k-upgrade");
    let input = json!({"body": {"name": "w", "ledger_id": 9_007_199_254_740_993_u64}});
    let before = attempt(
        &env,
        hs1_request(s.clone(), input.clone(), 1),
        Plan::created("before"),
    )
    .await
    .unwrap();
    assert_eq!(before.disposition, Disposition::Executed);
    let read = || env.exec.store().read(&s, Duration::from_secs(60));
    let stored = stored_fingerprint(read().await.unwrap());
    assert_eq!(stored.format(), "hs1");

    let retry = attempt(
        &env,
        request(s.clone(), input.clone(), 1),
        Plan::created("after"),
    )
    .await
    .unwrap();
    assert_eq!(retry.disposition, Disposition::Replayed);
    assert_eq!(retry.response, before.response);
    assert_eq!(env.ledger.count("after").await, 0);
    // The record keeps the fingerprint it was written with.
    assert_eq!(stored_fingerprint(read().await.unwrap()), stored);

    let changed = attempt(
        &env,
        request(
            s.clone(),
            json!({"body": {"name": "other", "ledger_id": 1}}),
            1,
        ),
        Plan::created("changed"),
    )
    .await;
    match changed {
        Err(ExecuteError::Problem(p)) => assert_eq!(p.kind(), ProblemKind::KeyReused),
        other => panic!("expected 422 key reused, got {other:?}"),
    }
    let bumped = attempt(&env, request(s.clone(), input, 2), Plan::created("bumped")).await;
    match bumped {
        Err(ExecuteError::Problem(p)) => {
            assert_eq!(p.kind(), ProblemKind::FingerprintVersionChanged)
        }
        other => panic!("expected 422 version changed, got {other:?}"),
    }
    // Compared as hs1, the record keeps hs1's meaning: an id that is the same double replays.
    let same_double = json!({"body": {"name": "w", "ledger_id": 9_007_199_254_740_992_u64}});
    let replayed = attempt(&env, request(s, same_double, 1), Plan::created("double"))
        .await
        .unwrap();
    assert_eq!(replayed.disposition, Disposition::Replayed);
    assert_eq!(
        env.ledger.count("changed").await + env.ledger.count("double").await,
        0
    );
    assert_eq!(env.ledger.count("before").await, 1);
}

/// A claim the previous release committed and then died holding (an `hs1` claim gone stale) is
/// taken over by this release's retry of the same request, and the record stays `hs1`.
async fn stale_hs1_claim_is_taken_over_and_keeps_hs1<S: Store + Clone>(env: Env<S>, _: Strategy) {
    let mut env = env;
    let mut cfg = env.exec.config().clone();
    cfg.stale_claim = Duration::from_millis(100);
    cfg.in_flight_wait = Duration::from_millis(400);
    env.exec = Executor::new(clone_store(&env), cfg.clone());
    let s = scope("alice", "k-stale-hs1");
    let input = json!({"body": {"ledger_id": 9_007_199_254_740_993_u64}});
    let hs1 = Fingerprint::hs1("createThing", 1, &input).unwrap();
    let claimed = env
        .exec
        .store()
        .claim(&ClaimRequest {
            scope: &s,
            fingerprint: &hs1,
            fingerprint_version: 1,
            token: ClaimToken::generate(),
            holder: None,
            stale_after: cfg.stale_claim,
            retention: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        claimed,
        ClaimOutcome::Claimed { taken_over: false }
    ));
    // A different request under the key is refused while the old claim is held, stale or not.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let other = json!({"body": {"ledger_id": 7}});
    let refused = attempt(&env, request(s.clone(), other, 1), Plan::created("other")).await;
    assert_eq!(problem_status(&refused), Some(422), "{refused:?}");

    let taken = attempt(
        &env,
        request(s.clone(), input.clone(), 1),
        Plan::created("taken"),
    )
    .await
    .unwrap();
    assert_eq!(taken.disposition, Disposition::TakenOver);
    let record = env.exec.store().read(&s, cfg.stale_claim).await.unwrap();
    assert_eq!(stored_fingerprint(record), hs1);
    let retry = attempt(&env, request(s, input, 1), Plan::created("retry"))
        .await
        .unwrap();
    assert_eq!(retry.disposition, Disposition::Replayed);
    assert_eq!(retry.response, taken.response);
    assert_eq!(env.ledger.count("taken").await, 1);
    assert_eq!(
        env.ledger.count("retry").await + env.ledger.count("other").await,
        0
    );
}

/// A claim gone stale whose completion its attempt has already staged (the completion's `UPDATE`
/// in the open transaction) is not taken over: a claim arriving meanwhile waits for the commit,
/// or is told the key is held, and the commit lands. Were it taken over, the attempt that did
/// the work would be refused at its commit, answered 503 for a write it was about to keep.
async fn a_staged_completion_holds_its_stale_claim_until_the_commit<S: Store + Clone>(
    env: Env<S>,
    _: Strategy,
) {
    let stale_after = Duration::from_millis(100);
    let store = clone_store(&env);
    let s = scope("alice", "k-staged");
    let fp = Fingerprint::hs2("createThing", 1, &json!({"body": {"n": 1}})).unwrap();
    let claim = |token| ClaimRequest {
        scope: &s,
        fingerprint: &fp,
        fingerprint_version: 1,
        token,
        holder: None,
        stale_after,
        retention: None,
    };
    let first = ClaimToken::generate();
    let claimed = store.claim(&claim(first)).await.unwrap();
    assert!(matches!(
        claimed,
        ClaimOutcome::Claimed { taken_over: false }
    ));
    let response = StoredResponse {
        status: 201,
        headers: vec![],
        body: b"first".to_vec(),
    };
    let mut tx = store.begin().await.unwrap();
    assert!(
        store
            .complete(&mut tx, &s, first, &response, None)
            .await
            .unwrap(),
        "the holder of the claim completes it"
    );
    tokio::time::sleep(stale_after + Duration::from_millis(50)).await;
    // The claim is stale by now; another attempt asks for it while the completion is staged.
    let (other_store, other_scope, other_fp) = (store.clone(), s.clone(), fp.clone());
    let other = tokio::spawn(async move {
        other_store
            .claim(&ClaimRequest {
                scope: &other_scope,
                fingerprint: &other_fp,
                fingerprint_version: 1,
                token: ClaimToken::generate(),
                holder: None,
                stale_after,
                retention: None,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    store
        .commit(tx)
        .await
        .expect("the staged completion commits: its claim was not taken over");
    match other.await.unwrap().unwrap() {
        ClaimOutcome::Existing(_) => {}
        ClaimOutcome::Claimed { taken_over } => {
            panic!("a staged completion's claim was claimed again (taken_over: {taken_over})")
        }
    }
    let record = store.read(&s, stale_after).await.unwrap().expect("record");
    assert_eq!(record.state, RecordState::Completed);
    assert_eq!(record.claim_token, Some(first));
    assert_eq!(record.response.expect("stored").body, b"first");
}

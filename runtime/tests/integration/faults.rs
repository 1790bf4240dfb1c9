//! Faults between the runtime and PostgreSQL: lost commit acknowledgements (a TCP proxy that cuts
//! the connection around `COMMIT`), a server restart under load, and an exhausted pool.

use std::time::Duration;

use idemgen_runtime::store::PgStore;
use idemgen_runtime::{Disposition, ExecuteError, Executor, ExecutorConfig, ProblemKind, Strategy};
use idemgen_testdb::proxy::{CommitFault, FaultProxy};
use serde_json::json;
use sqlx::postgres::{PgPoolOptions, PgSslMode};

use crate::support::*;

/// What the lost-commit run saw, per strategy.
#[derive(Debug, Default)]
struct LostCommitCounts {
    attempts: usize,
    faults: usize,
    outcome_unknown: usize,
    reconciled: usize,
    clean_successes: usize,
    retries_replayed: usize,
    retries_executed: usize,
    duplicates: usize,
    /// Per fault: (504s, reconciled successes).
    by_fault: std::collections::BTreeMap<String, (usize, usize)>,
}

/// The fault for attempt `i`: 40% cut after the server answered COMMIT, 20% cut right after
/// forwarding it, 20% COMMIT never forwarded, 20% no fault.
fn fault_for(i: usize) -> Option<CommitFault> {
    match i % 5 {
        0 | 1 => Some(CommitFault::CutAfterReply),
        2 => Some(CommitFault::CutAfterForward),
        3 => Some(CommitFault::DropCommit),
        _ => None,
    }
}

async fn lost_commit_acknowledgements(strategy: Strategy) -> LostCommitCounts {
    const ATTEMPTS: usize = 100;
    let (db, direct) = fresh_pg(4).await;
    let upstream = (std::net::Ipv4Addr::LOCALHOST, db.options.get_port()).into();
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    // Every statement of the runtime (claims, business transactions, the read-back after a lost
    // acknowledgement) goes through the proxy; faults hit only the armed COMMIT.
    let proxied = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(
            db.options
                .clone()
                .port(proxy.port())
                .ssl_mode(PgSslMode::Disable),
        )
        .await
        .expect("pool through the proxy");
    let exec = Executor::new(
        PgStore::new(proxied),
        ExecutorConfig {
            strategy,
            // A claim left by a lost commit is taken over quickly by the retry.
            stale_claim: Duration::from_millis(200),
            in_flight_wait: Duration::from_secs(2),
            ..ExecutorConfig::default()
        },
    );
    let mut counts = LostCommitCounts::default();
    for i in 0..ATTEMPTS {
        let label = format!("lost-{i}");
        let req = request(scope("alice", &label), json!({"i": i}), 1);
        let fault = fault_for(i);
        let cuts_before = proxy.cuts();
        if let Some(fault) = fault {
            proxy.arm(fault);
            counts.faults += 1;
        }
        let result = exec.execute(req.clone(), pg_id_writer(label.clone())).await;
        counts.attempts += 1;
        assert_eq!(proxy.disarm(), None, "attempt {i}: the armed fault fired");
        assert_eq!(
            proxy.cuts() - cuts_before,
            u64::from(fault.is_some()),
            "attempt {i}: one cut per armed fault"
        );
        let ids = pg_write_ids(&direct, &label).await;
        assert!(ids.len() <= 1, "attempt {i}: duplicate writes {ids:?}");
        match result {
            Ok(outcome) => {
                assert_eq!(outcome.disposition, Disposition::Executed, "attempt {i}");
                assert_eq!(ids.len(), 1, "attempt {i}: a success has its write");
                assert_eq!(outcome.response.body, format!("write {}", ids[0]));
                if let Some(fault) = fault {
                    counts.reconciled += 1;
                    counts.by_fault.entry(format!("{fault:?}")).or_default().1 += 1;
                } else {
                    counts.clean_successes += 1;
                }
            }
            Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::OutcomeUnknown => {
                assert!(
                    fault.is_some(),
                    "attempt {i}: 504 without a fault: {:?}",
                    p.internal()
                );
                assert_eq!(p.kind().status(), 504);
                counts.outcome_unknown += 1;
                counts
                    .by_fault
                    .entry(format!("{:?}", fault.unwrap()))
                    .or_default()
                    .0 += 1;
            }
            other => panic!("attempt {i} ({fault:?}): unexpected outcome {other:?}"),
        }
        match fault {
            // The server committed and the read-back on a fresh connection must see it.
            Some(CommitFault::CutAfterReply) | None => {
                assert_eq!(ids.len(), 1, "attempt {i} ({fault:?}) must have committed");
            }
            // The server never saw COMMIT: nothing committed, the client was told 504.
            Some(CommitFault::DropCommit) => {
                assert!(ids.is_empty(), "attempt {i}: a dropped COMMIT committed");
            }
            Some(CommitFault::CutAfterForward) => {}
        }
        // The client retries with the same key, without faults, until it has an answer.
        let mut retries = 0;
        let retry = loop {
            retries += 1;
            assert!(retries <= 20, "attempt {i}: the retry never converged");
            match exec.execute(req.clone(), pg_id_writer(label.clone())).await {
                Ok(outcome) => break outcome,
                Err(ExecuteError::Problem(p))
                    if matches!(
                        p.kind(),
                        ProblemKind::InFlight | ProblemKind::OutcomeUnknown
                    ) =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("attempt {i}: retry failed: {other:?}"),
            }
        };
        let ids = pg_write_ids(&direct, &label).await;
        assert_eq!(ids.len(), 1, "attempt {i}: converged to exactly one write");
        assert_eq!(retry.response.body, format!("write {}", ids[0]));
        match retry.disposition {
            Disposition::Replayed => counts.retries_replayed += 1,
            Disposition::Executed | Disposition::TakenOver => counts.retries_executed += 1,
            Disposition::NotStored => panic!("attempt {i}: 201 not stored"),
        }
        let (state, body) = pg_record(&direct, &req.scope).await.expect("a record");
        assert_eq!(state, "completed");
        assert_eq!(body, Some(format!("write {}", ids[0]).into_bytes()));
    }
    counts.duplicates = pg_duplicates(&direct).await.len();
    assert_eq!(counts.duplicates, 0);
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM business_writes")
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(writes as usize, ATTEMPTS, "one write per key, every key");
    // Every dropped COMMIT was a 504, and at least one lost acknowledgement of a COMMIT that did
    // land was reconciled by the read-back.
    assert!(counts.outcome_unknown >= ATTEMPTS / 5);
    assert!(counts.reconciled >= 2 * ATTEMPTS / 5);
    eprintln!("lost commit acknowledgements, {strategy:?}: {counts:?}");
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_separate_claim() {
    let counts = lost_commit_acknowledgements(Strategy::SeparateClaim).await;
    // The dropped COMMITs left their claim behind: the retry took it over and executed.
    assert!(counts.retries_executed >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_acknowledgement_in_transaction() {
    let counts = lost_commit_acknowledgements(Strategy::InTransaction).await;
    assert!(counts.retries_executed >= 20);
}

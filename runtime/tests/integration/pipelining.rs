//! What pipelining saves, counted where it happens: every connection of a store goes through a
//! delay proxy, which counts the round trips (server answers after the client spoke) of each
//! request on a warm connection. The sqlx store, the baseline, waits for every answer before it
//! speaks again, so its proxy adds no delay: its count is exact without one, and a delay would let
//! its pool's background ping of a returned connection fall inside a measured request. The
//! tokio-postgres store's proxy holds each chunk 10 ms each way, far longer than the gaps between
//! the writes of one pipelined batch, so a batch whose statements leave in two writes counts once,
//! as it costs once across a network.

use std::time::Duration;

use std::sync::Arc;

use idemgen_runtime::engine::{Disposition, ExecuteError};
use idemgen_runtime::{
    Executor, ExecutorConfig, PgStore, ProblemKind, Store, Strategy, TokioPgStore, TxHandle,
};
use idemgen_testdb::DelayProxy;
use serde_json::json;
use sqlx::postgres::{PgPoolOptions, PgSslMode};
use tokio::sync::Notify;

use crate::support::*;

/// Round trips of a fresh create and of its replay on a connection whose statements a first
/// create and replay prepared: the fewest of three of each.
#[derive(Debug, PartialEq, Eq)]
struct Trips {
    create: u64,
    replay: u64,
}

fn one_connection_config(strategy: Strategy) -> ExecutorConfig {
    ExecutorConfig {
        strategy,
        // No lease: its renewals would share the counted connection.
        lease_expiry: None,
        ..ExecutorConfig::default()
    }
}

async fn count<S: Store, H>(
    exec: &Executor<S>,
    proxy: &DelayProxy,
    owner: &str,
    writer: fn(String) -> H,
) -> Trips
where
    H: for<'a> FnOnce(
            &'a mut idemgen_runtime::TxHandle<S>,
        ) -> idemgen_runtime::engine::HandlerFuture<'a, TestResponse, String>
        + Send
        + 'static,
{
    let mut trips = Vec::new();
    for key in ["warm", "counted-1", "counted-2", "counted-3"] {
        let req = request(scope(owner, key), json!({"k": key}), 1);
        let before = proxy.counters().round_trips();
        let created = exec
            .execute(req.clone(), writer(format!("{owner}-{key}")))
            .await
            .unwrap();
        assert_eq!(created.disposition, Disposition::Executed);
        let between = proxy.counters().round_trips();
        let replayed = exec
            .execute(req, writer(format!("{owner}-{key}")))
            .await
            .unwrap();
        assert_eq!(replayed.disposition, Disposition::Replayed);
        assert_eq!(replayed.response.body, created.response.body);
        let after = proxy.counters().round_trips();
        trips.push(Trips {
            create: between - before,
            replay: after - between,
        });
    }
    // The fewest of the counted requests: what the store sends. A pool's background work (sqlx
    // tests a connection the store hands back after 200 ms with a round trip of its own) can only
    // add to one of them.
    let counted = &trips[1..];
    Trips {
        create: counted.iter().map(|t| t.create).min().unwrap(),
        replay: counted.iter().map(|t| t.replay).min().unwrap(),
    }
}

async fn proxy_to(db: &idemgen_testdb::TestDb, one_way: Duration) -> DelayProxy {
    let upstream = (std::net::Ipv4Addr::LOCALHOST, db.options.get_port()).into();
    DelayProxy::start((std::net::Ipv4Addr::LOCALHOST, 0).into(), upstream, one_way)
        .expect("delay proxy")
}

/// Round trips of the sqlx store, then of the tokio-postgres store (beginning separate-claim
/// transactions with the claim when `begin_at_claim`).
async fn round_trips(strategy: Strategy, begin_at_claim: bool) -> (Trips, Trips) {
    let (db, direct) = fresh_pg(2).await;
    let proxy = proxy_to(&db, Duration::ZERO).await;
    let sqlx_pool = PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(
            db.options
                .clone()
                .port(proxy.addr().port())
                .ssl_mode(PgSslMode::Disable),
        )
        .await
        .expect("sqlx pool through the proxy");
    let sqlx = Executor::new(PgStore::new(sqlx_pool), one_connection_config(strategy));
    let sqlx_trips = count(&sqlx, &proxy, "sqlx", pg_id_writer).await;
    let proxy = proxy_to(&db, Duration::from_millis(10)).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}?sslmode=disable",
        db.options.get_username(),
        proxy.addr().port(),
        db.name
    );
    let pool = TokioPgStore::pool(&url, 1).expect("tokio-postgres pool through the proxy");
    let store = TokioPgStore::new(pool).with_begin_at_claim(begin_at_claim);
    let tokio = Executor::new(store, one_connection_config(strategy));
    let tokio_trips = count(&tokio, &proxy, "tokio", tokio_pg_id_writer).await;
    assert!(pg_duplicates(&direct).await.is_empty());
    (sqlx_trips, tokio_trips)
}

/// In-transaction: the gate with `BEGIN`, the handler's insert, the completed record with
/// `COMMIT`: three, where the sqlx store sends the record and `COMMIT` apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_transaction_create_makes_three_round_trips_and_its_replay_one() {
    let (sqlx, tokio) = round_trips(Strategy::InTransaction, false).await;
    eprintln!("in-transaction round trips: sqlx {sqlx:?}, tokio-postgres {tokio:?}");
    assert_eq!(
        tokio,
        Trips {
            create: 3,
            replay: 1
        }
    );
    assert_eq!(
        sqlx.create,
        tokio.create + 1,
        "the completion's own round trip"
    );
}

/// Separate claim: the claim, `BEGIN`, the handler's insert, the completion with `COMMIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_claim_create_makes_four_round_trips_and_its_replay_one() {
    let (sqlx, tokio) = round_trips(Strategy::SeparateClaim, false).await;
    eprintln!("separate-claim round trips: sqlx {sqlx:?}, tokio-postgres {tokio:?}");
    assert_eq!(
        tokio,
        Trips {
            create: 4,
            replay: 1
        }
    );
    assert_eq!(
        sqlx.create,
        tokio.create + 1,
        "the completion's own round trip"
    );
}

/// Separate claim with the transaction begun in the claim's round trip: the claim with `BEGIN`,
/// the handler's insert, the completion with `COMMIT`: an in-transaction create's three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_claim_create_begun_at_its_claim_makes_three_round_trips() {
    let (sqlx, tokio) = round_trips(Strategy::SeparateClaim, true).await;
    eprintln!(
        "separate claim begun at the claim, round trips: sqlx {sqlx:?}, tokio-postgres {tokio:?}"
    );
    assert_eq!(
        tokio,
        Trips {
            create: 3,
            replay: 1
        }
    );
    assert_eq!(
        sqlx.create,
        tokio.create + 2,
        "the completion's and the BEGIN's own round trips"
    );
}

/// Begun with the claim, the attempt's transaction is open when its handler runs, and the claim
/// committed apart from it: another connection sees the key claimed while the handler runs. A
/// duplicate meanwhile gets 409, its own `BEGIN` rolled back (the only transaction open on the
/// database is the first attempt's), and the retry after it replays the one write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn begun_at_the_claim_the_claim_commits_first_and_a_duplicate_leaves_no_transaction() {
    let (_db, direct, store) = fresh_tokio_pg(4).await;
    let exec = Executor::new(
        store.with_begin_at_claim(true),
        ExecutorConfig {
            in_flight_wait: Duration::from_millis(150),
            ..config(Strategy::SeparateClaim)
        },
    );
    let req = request(scope("alice", "begun"), json!({}), 1);
    let (started, gate) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let first = {
        let (exec, req, started, gate) = (exec.clone(), req.clone(), started.clone(), gate.clone());
        tokio::spawn(async move {
            exec.execute(req, move |tx: &mut TxHandle<TokioPgStore>| {
                Box::pin(async move {
                    let open_at_start = tx.is_open();
                    started.notify_one();
                    gate.notified().await;
                    if !open_at_start {
                        return Err("the transaction was not open when the handler began".into());
                    }
                    tokio_pg_id_writer("begun".into())(tx).await
                })
            })
            .await
        })
    };
    started.notified().await;
    let state: Option<String> = sqlx::query_scalar(
        "SELECT state FROM idempotency_records WHERE owner = 'alice' AND idempotency_key = 'begun'",
    )
    .fetch_optional(&direct)
    .await
    .unwrap();
    assert_eq!(
        state.as_deref(),
        Some("claimed"),
        "the claim is committed, seen by another connection, before the handler writes"
    );
    let duplicate = exec
        .execute(req.clone(), tokio_pg_id_writer("duplicate".into()))
        .await;
    assert!(
        matches!(&duplicate, Err(ExecuteError::Problem(p)) if p.kind() == ProblemKind::InFlight),
        "{duplicate:?}"
    );
    let in_transaction: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(&direct)
    .await
    .unwrap();
    assert_eq!(
        in_transaction, 1,
        "only the first attempt's transaction is open: the duplicate's BEGIN was rolled back"
    );
    gate.notify_one();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.disposition, Disposition::Executed);
    let retry = exec
        .execute(req, tokio_pg_id_writer("retry".into()))
        .await
        .unwrap();
    assert_eq!(retry.disposition, Disposition::Replayed);
    assert_eq!(retry.response.body, first.response.body);
    let labels: Vec<String> = sqlx::query_scalar("SELECT label FROM business_writes")
        .fetch_all(&direct)
        .await
        .unwrap();
    assert_eq!(labels, ["begun"]);
}

//! Each PostgreSQL of the two services restarted under load: the payments database's cluster
//! (`pg_ctl stop -m fast`, then `-m immediate`, then started again), then the orders database's,
//! each its own cluster, while concurrent clients create orders, each logical request retried
//! with its one key until it is acknowledged (a bounded budget). Afterwards, for every logical
//! request: exactly one charge and one order, the charge recorded under the key derived from the
//! order's, and its acknowledged order replays naming the same charge (docs/downstream.md).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemgen_client::{CallOptions, RetryPolicy};
use idemgen_example_orders::orders_client::{CreateOrderResponse, OrdersClient, types::NewOrder};
use idemgen_protocol::{DerivedKey, IdempotencyKey};
use idemgen_runtime::testing::{Cluster, ClusterOptions, TestDb};
use sqlx::postgres::PgPoolOptions;
use tokio::net::TcpListener;

const CLIENTS: usize = 10;
/// Logical requests each client makes at least (more while the restarts are under way).
const REQUESTS_PER_CLIENT: usize = 4;
/// How long one logical request may take, all its retries included.
const BUDGET: Duration = Duration::from_secs(30);

/// One logical request as its client saw it.
#[derive(Debug)]
struct Run {
    sku: String,
    key: String,
    /// Attempts that failed before the acknowledgement.
    retries: u32,
    first_failure: Option<Instant>,
    done: Instant,
    order_id: uuid::Uuid,
    charge_id: uuid::Uuid,
}

/// A restart: which service's cluster, its `pg_ctl stop` mode, when the stop began, when the
/// server was back.
type Restart = (&'static str, &'static str, Instant, Instant);

/// Sets its flag when dropped, the restarter's panic included.
struct Over(Arc<AtomicBool>);

impl Drop for Over {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn cluster() -> Arc<Cluster> {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a dedicated PostgreSQL cluster");
    Arc::new(cluster)
}

/// A pool that gives up on a dead server quickly (the handler answers 503, the client retries).
async fn pool(db: &TestDb) -> sqlx::PgPool {
    PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(1))
        .connect_with(db.options.clone())
        .await
        .unwrap()
}

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(idemgen_runtime::serve(
        listener,
        router,
        idemgen_runtime::ServeConfig::default(),
        std::future::pending(),
    ));
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_postgres_restarted_under_load_one_charge_and_one_order_per_logical_request() {
    let began = Instant::now();
    let (payments_cluster, orders_cluster) = tokio::join!(cluster(), cluster());
    assert_ne!(payments_cluster.port(), orders_cluster.port());
    let payments_db = TestDb::on_cluster(&payments_cluster)
        .await
        .expect("payments database");
    let orders_db = TestDb::on_cluster(&orders_cluster)
        .await
        .expect("orders database");
    let (router, _) = idemgen_example_orders::payments_app(pool(&payments_db).await)
        .await
        .unwrap();
    let payments_addr = serve(router).await;
    // The orders service does not retry a charge itself: a payments outage reaches the upstream
    // client as a 503/504, and the whole request is retried, re-sending the same derived key.
    let payments = idemgen_example_orders::payments_client(
        &format!("http://{payments_addr}"),
        RetryPolicy {
            attempt_timeout: Duration::from_secs(5),
            ..RetryPolicy::off()
        },
    )
    .unwrap();
    let (router, _) = idemgen_example_orders::orders_app(pool(&orders_db).await, payments)
        .await
        .unwrap();
    let orders_addr = serve(router).await;
    // The clients' retry is this test's loop (it counts them): one attempt per call.
    let orders = OrdersClient::from_client(
        idemgen_client::Client::new(format!("http://{orders_addr}")).with_policy(RetryPolicy {
            attempt_timeout: Duration::from_secs(10),
            ..RetryPolicy::off()
        }),
    )
    .with_bearer("tok1")
    .unwrap();
    let setup = began.elapsed();

    let restarts: Arc<Mutex<Vec<Restart>>> = Arc::default();
    let over = Arc::new(AtomicBool::new(false));
    let restarter = {
        let clusters = [
            ("payments", payments_cluster.clone()),
            ("orders", orders_cluster.clone()),
        ];
        let (restarts, over) = (restarts.clone(), over.clone());
        tokio::spawn(async move {
            // The clients stop once the restarts are over, or failed.
            let _over = Over(over);
            for (service, cluster) in clusters {
                for mode in ["fast", "immediate"] {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    let c = cluster.clone();
                    let stopped = Instant::now();
                    tokio::task::spawn_blocking(move || {
                        c.stop(mode)?;
                        c.start_again()
                    })
                    .await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("restarting {service}'s cluster -m {mode}: {e}"));
                    restarts
                        .lock()
                        .unwrap()
                        .push((service, mode, stopped, Instant::now()));
                }
            }
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (orders, over) = (orders.clone(), over.clone());
            tokio::spawn(async move {
                let mut runs = Vec::new();
                let mut n = 0;
                while n < REQUESTS_PER_CLIENT || !over.load(Ordering::SeqCst) {
                    n += 1;
                    let (sku, key) = (format!("r-{c}-{n}"), format!("order-r-{c}-{n}"));
                    let body = NewOrder {
                        sku: sku.clone(),
                        quantity: 3,
                    };
                    let started = Instant::now();
                    let (mut retries, mut first_failure) = (0, None);
                    let created = loop {
                        match orders
                            .create_order(&body, &CallOptions::with_key(&key))
                            .await
                        {
                            Ok(reply) => {
                                let CreateOrderResponse::Status201(created) = reply.value;
                                break created;
                            }
                            Err(e) => {
                                // Unavailable, unknown outcome, in progress, the handler's own
                                // query cut, or the connection itself: all retried with the key.
                                let status = e.status().map(|s| s.as_u16());
                                assert!(
                                    matches!(status, None | Some(409 | 500 | 502 | 503 | 504)),
                                    "{sku}: {e}"
                                );
                                assert!(
                                    started.elapsed() < BUDGET,
                                    "{sku} not acknowledged within {BUDGET:?}: {e}"
                                );
                            }
                        }
                        retries += 1;
                        first_failure.get_or_insert_with(Instant::now);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    };
                    runs.push(Run {
                        sku,
                        key,
                        retries,
                        first_failure,
                        done: Instant::now(),
                        order_id: created.id,
                        charge_id: created.charge_id,
                    });
                }
                runs
            })
        })
        .collect();
    let mut runs = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(50);
    for client in clients {
        runs.extend(
            tokio::time::timeout_at(deadline, client)
                .await
                .expect("the clients finish")
                .unwrap(),
        );
    }
    restarter.await.unwrap();
    let restarts = restarts.lock().unwrap().clone();
    assert_eq!(restarts.len(), 4);

    // Every logical request: exactly one charge and one order, the order naming the charge
    // its client was acknowledged.
    let payments_db = payments_db.pool(2).await.unwrap();
    let orders_db = orders_db.pool(2).await.unwrap();
    let charges: Vec<(String, uuid::Uuid)> = sqlx::query_as("SELECT reference, id FROM charges")
        .fetch_all(&payments_db)
        .await
        .unwrap();
    let order_rows: Vec<(String, uuid::Uuid, uuid::Uuid)> =
        sqlx::query_as("SELECT sku, id, charge_id FROM orders")
            .fetch_all(&orders_db)
            .await
            .unwrap();
    let mut charges_of: BTreeMap<String, Vec<uuid::Uuid>> = BTreeMap::new();
    for (reference, id) in &charges {
        charges_of.entry(reference.clone()).or_default().push(*id);
    }
    let mut orders_of: BTreeMap<String, Vec<(uuid::Uuid, uuid::Uuid)>> = BTreeMap::new();
    for (sku, id, charge_id) in &order_rows {
        orders_of
            .entry(sku.clone())
            .or_default()
            .push((*id, *charge_id));
    }
    let duplicates = charges_of.values().filter(|v| v.len() > 1).count()
        + orders_of.values().filter(|v| v.len() > 1).count();
    for run in &runs {
        assert_eq!(
            charges_of.get(&format!("{} x3", run.sku)),
            Some(&vec![run.charge_id]),
            "{}: one charge, the acknowledged one",
            run.sku
        );
        assert_eq!(
            orders_of.get(&run.sku),
            Some(&vec![(run.order_id, run.charge_id)]),
            "{}: one order, naming it",
            run.sku
        );
    }
    assert_eq!(duplicates, 0);
    // Each charge is recorded under the key derived from its order's key.
    let charge_keys: BTreeMap<String, String> = sqlx::query_as(
        "SELECT resource_ref, idempotency_key FROM idempotency_records
          WHERE operation = 'createCharge' AND owner = 'orders-service'",
    )
    .fetch_all(&payments_db)
    .await
    .unwrap()
    .into_iter()
    .collect();
    for run in &runs {
        let derived = DerivedKey::new(
            "alice",
            "createOrder",
            "",
            &IdempotencyKey::new(&run.key).unwrap(),
            "charge",
        )
        .to_string();
        assert_eq!(
            charge_keys.get(&run.charge_id.to_string()),
            Some(&derived),
            "{}: the charge's key is derived from {}",
            run.sku,
            run.key
        );
    }
    assert_eq!(charges.len(), runs.len(), "no charge without its request");
    assert_eq!(order_rows.len(), runs.len(), "no order without its request");

    // Every acknowledged order replays, naming the same charge.
    for run in &runs {
        let body = NewOrder {
            sku: run.sku.clone(),
            quantity: 3,
        };
        let again = orders
            .create_order(&body, &CallOptions::with_key(&run.key))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", run.sku));
        assert!(again.replayed, "{}: a replay", run.sku);
        let CreateOrderResponse::Status201(replayed) = again.value;
        assert_eq!(
            (replayed.id, replayed.charge_id),
            (run.order_id, run.charge_id),
            "{}",
            run.sku
        );
    }

    // Stranded requests: their first attempt failed during a restart (from its stop until a
    // second after the server was back: the pools reconnect; the restarts are further apart).
    // How long after the stop, and after the server was back, the last of them was acknowledged.
    let mut stranded: BTreeMap<usize, Vec<&Run>> = BTreeMap::new();
    for run in &runs {
        let Some(failed) = run.first_failure else {
            continue;
        };
        if let Some(i) = restarts.iter().rposition(|(_, _, stopped, up)| {
            failed >= *stopped && failed <= *up + Duration::from_secs(1)
        }) {
            stranded.entry(i).or_default().push(run);
        }
    }
    let mut report = Vec::new();
    for (i, (service, mode, stopped, up)) in restarts.iter().enumerate() {
        let runs = stranded.get(&i).map(Vec::as_slice).unwrap_or_default();
        let last = runs.iter().map(|r| r.done).max().unwrap_or(*up);
        report.push(format!(
            "{service} -m {mode}: down {:?}, {} stranded, the last acknowledged {:?} after the \
             stop ({:?} after the server was back)",
            up.duration_since(*stopped),
            runs.len(),
            last.saturating_duration_since(*stopped),
            last.saturating_duration_since(*up),
        ));
        assert!(
            last.saturating_duration_since(*up) < Duration::from_secs(15),
            "{service} -m {mode}: a stranded request waited {:?} after the server was back",
            last.saturating_duration_since(*up)
        );
    }
    let stranded_total: usize = stranded.values().map(Vec::len).sum();
    assert!(
        stranded_total > 0,
        "the restarts stranded no request: {report:?}"
    );
    let retries: u32 = runs.iter().map(|r| r.retries).sum();
    eprintln!(
        "two services, each PostgreSQL restarted under load ({CLIENTS} clients): {} logical \
         requests, {retries} retries, {} charges, {} orders, duplicates {duplicates}; {}; \
         setup {setup:?}, total {:?}",
        runs.len(),
        charges.len(),
        order_rows.len(),
        report.join("; "),
        began.elapsed()
    );
}

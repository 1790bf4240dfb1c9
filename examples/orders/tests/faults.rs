//! The two services over real loopback HTTP, each on its own real PostgreSQL database, with
//! faults injected (docs/downstream.md): a cutting proxy in front of each service drops a
//! response after the service committed, and a constraint makes the orders write fail after the
//! charge. For every logical request: exactly one charge and one order, the order naming the
//! charge, and the payments service saw the key derived from the order's key.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idemgen_client::{CallOptions, RetryPolicy};
use idemgen_example_orders::orders_client::{CreateOrderResponse, OrdersClient, types::NewOrder};
use idemgen_protocol::{DerivedKey, IdempotencyKey};
use idemgen_runtime::testing::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The key the orders service derives for a step of `owner`'s order with client key `key`.
fn derived(owner: &str, operation: &str, key: &str, step: &str) -> String {
    DerivedKey::new(
        owner,
        operation,
        "",
        &IdempotencyKey::new(key).unwrap(),
        step,
    )
    .to_string()
}

/// Logical requests per fault.
const REQUESTS: usize = 4;

/// A TCP proxy that, while armed, cuts the connection as the first bytes of a response come back
/// from the service (which has committed by then: the runtime answers after its commit).
struct CuttingProxy {
    addr: SocketAddr,
    /// Responses still to cut.
    armed: AtomicU64,
    cuts: AtomicU64,
}

impl CuttingProxy {
    async fn start(target: SocketAddr) -> Arc<CuttingProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Arc::new(CuttingProxy {
            addr: listener.local_addr().unwrap(),
            armed: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
        });
        let state = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    state.forward(client, server).await;
                });
            }
        });
        proxy
    }

    fn arm(&self, responses: u64) {
        self.armed.store(responses, Ordering::SeqCst);
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    async fn forward(&self, client: TcpStream, server: TcpStream) {
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        let upstream = async {
            let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        };
        let downstream = async {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match server_read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let cut = self
                    .armed
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if cut {
                    self.cuts.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                if client_write.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        };
        // Either direction ending ends both: dropping the halves closes both connections.
        tokio::select! {
            () = upstream => {}
            () = downstream => {}
        }
    }
}

/// Both services, their databases and the proxies in front of them.
struct Stack {
    orders: OrdersClient,
    /// The same client without retries: what the first attempt answered.
    orders_once: OrdersClient,
    orders_db: sqlx::PgPool,
    payments_db: sqlx::PgPool,
    /// Between the orders service and the payments service.
    to_payments: Arc<CuttingProxy>,
    /// Between the client and the orders service.
    to_orders: Arc<CuttingProxy>,
    _dbs: (TestDb, TestDb),
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

/// The client's retries: quick backoff, a bounded budget.
fn quick(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        budget: Duration::from_secs(20),
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        attempt_timeout: Duration::from_secs(10),
    }
}

/// `payments_policy`: how the orders service retries one charge itself.
async fn stack(payments_policy: RetryPolicy) -> Stack {
    let payments_db = TestDb::new().await.expect("payments database");
    let orders_db = TestDb::new().await.expect("orders database");
    let payments_pool = payments_db.pool(8).await.unwrap();
    let orders_pool = orders_db.pool(8).await.unwrap();
    let (router, _) = idemgen_example_orders::payments_app(payments_pool.clone())
        .await
        .unwrap();
    let to_payments = CuttingProxy::start(serve(router).await).await;
    let client =
        idemgen_example_orders::payments_client(&to_payments.url(), payments_policy).unwrap();
    let (router, _) = idemgen_example_orders::orders_app(orders_pool.clone(), client)
        .await
        .unwrap();
    let to_orders = CuttingProxy::start(serve(router).await).await;
    let orders_once = OrdersClient::from_client(
        idemgen_client::Client::new(to_orders.url()).with_policy(quick(1)),
    )
    .with_bearer("tok1")
    .unwrap();
    let orders = OrdersClient::from_client(
        idemgen_client::Client::new(to_orders.url()).with_policy(quick(5)),
    )
    .with_bearer("tok1")
    .unwrap();
    Stack {
        orders,
        orders_once,
        orders_db: orders_pool,
        payments_db: payments_pool,
        to_payments,
        to_orders,
        _dbs: (payments_db, orders_db),
    }
}

fn order(sku: &str) -> NewOrder {
    NewOrder {
        sku: sku.to_owned(),
        quantity: 3,
    }
}

impl Stack {
    /// The charges and orders of `sku`: (charge ids, the orders' charge ids).
    async fn rows(&self, sku: &str) -> (Vec<uuid::Uuid>, Vec<uuid::Uuid>) {
        let charges = sqlx::query_scalar("SELECT id FROM charges WHERE reference = $1")
            .bind(format!("{sku} x3"))
            .fetch_all(&self.payments_db)
            .await
            .unwrap();
        let orders = sqlx::query_scalar("SELECT charge_id FROM orders WHERE sku = $1")
            .bind(sku)
            .fetch_all(&self.orders_db)
            .await
            .unwrap();
        (charges, orders)
    }

    /// Exactly one charge and one order for `sku`, the order naming the charge `charge_id` (what
    /// the acknowledged reply said), and the payments service keyed it by the derived key.
    async fn exactly_once(&self, sku: &str, key: &str, charge_id: uuid::Uuid) {
        let (charges, orders) = self.rows(sku).await;
        assert_eq!(
            charges,
            vec![charge_id],
            "{sku}: one charge, the acknowledged one"
        );
        assert_eq!(orders, vec![charge_id], "{sku}: one order, naming it");
        let expected = derived("alice", "createOrder", key, "charge");
        let keys: Vec<String> = sqlx::query_scalar(
            "SELECT idempotency_key FROM idempotency_records
              WHERE operation = 'createCharge' AND owner = 'orders-service' AND resource_ref = $1",
        )
        .bind(charge_id.to_string())
        .fetch_all(&self.payments_db)
        .await
        .unwrap();
        assert_eq!(
            keys,
            vec![expected],
            "{sku}: the charge's key is derived from {key}"
        );
    }

    async fn totals(&self) -> (i64, i64) {
        let charges = sqlx::query_scalar("SELECT count(*) FROM charges")
            .fetch_one(&self.payments_db)
            .await
            .unwrap();
        let orders = sqlx::query_scalar("SELECT count(*) FROM orders")
            .fetch_one(&self.orders_db)
            .await
            .unwrap();
        (charges, orders)
    }
}

/// The payments service's response is cut after it committed; the orders service does not
/// retry the charge itself (one attempt), so it answers 504 and the client retries with the same
/// key: the retry re-sends the same derived key, the payments service replays, one order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_response_dropped_the_upstream_answers_504_and_the_retry_replays_downstream() {
    let stack = stack(RetryPolicy {
        attempt_timeout: Duration::from_secs(10),
        ..RetryPolicy::off()
    })
    .await;
    // What the first attempt answers: 504, charged but not ordered; the retry orders once.
    for i in 0..REQUESTS {
        let (sku, key) = (format!("u-{i}"), format!("order-u-{i}"));
        stack.to_payments.arm(1);
        let first = stack
            .orders_once
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .expect_err("the charge's answer was cut");
        assert_eq!(
            first.status().map(|s| s.as_u16()),
            Some(504),
            "{sku}: {first}"
        );
        assert!(first.may_have_executed(), "{sku}");
        let (charges, orders) = stack.rows(&sku).await;
        assert_eq!(
            (charges.len(), orders.len()),
            (1, 0),
            "{sku}: charged, not ordered"
        );
        let reply = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        assert_eq!(reply.attempts, 1, "{sku}");
        let CreateOrderResponse::Status201(created) = reply.value;
        assert_eq!(
            created.charge_id, charges[0],
            "{sku}: the charge was replayed"
        );
        stack.exactly_once(&sku, &key, created.charge_id).await;
    }
    // The client retrying on its own.
    for i in 0..REQUESTS {
        let (sku, key) = (format!("a-{i}"), format!("order-a-{i}"));
        stack.to_payments.arm(1);
        let reply = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        // The first attempt was answered 504 (the charge's outcome unknown), the second created.
        assert_eq!(reply.attempts, 2, "{sku}");
        assert!(!reply.replayed, "{sku}: the order was written by the retry");
        let CreateOrderResponse::Status201(created) = reply.value;
        stack.exactly_once(&sku, &key, created.charge_id).await;
    }
    assert_eq!(
        stack.to_payments.cuts.load(Ordering::SeqCst),
        2 * REQUESTS as u64
    );
    let totals = stack.totals().await;
    eprintln!(
        "downstream response dropped: {} logical requests, {} cuts, (charges, orders) {totals:?}",
        2 * REQUESTS,
        2 * REQUESTS
    );
    assert_eq!(totals, (2 * REQUESTS as i64, 2 * REQUESTS as i64));
}

/// The same cut with the orders service retrying the charge itself (the default policy): the
/// payments client's own retry gets the replay, and the order is answered on the first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_response_dropped_the_downstream_clients_retry_replays() {
    let stack = stack(quick(5)).await;
    for i in 0..REQUESTS {
        let (sku, key) = (format!("r-{i}"), format!("order-r-{i}"));
        stack.to_payments.arm(1);
        let reply = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        assert_eq!(reply.attempts, 1, "{sku}");
        let CreateOrderResponse::Status201(created) = reply.value;
        stack.exactly_once(&sku, &key, created.charge_id).await;
    }
    assert_eq!(
        stack.to_payments.cuts.load(Ordering::SeqCst),
        REQUESTS as u64
    );
    assert_eq!(stack.totals().await, (REQUESTS as i64, REQUESTS as i64));
}

/// The orders service's response is cut after both services committed: the client's retry is
/// replayed by the orders service (no second charge call), naming the same charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_response_dropped_the_retry_replays_upstream() {
    let stack = stack(quick(5)).await;
    for i in 0..REQUESTS {
        let (sku, key) = (format!("b-{i}"), format!("order-b-{i}"));
        stack.to_orders.arm(1);
        let reply = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        assert_eq!(reply.attempts, 2, "{sku}");
        assert!(
            reply.replayed,
            "{sku}: the retry is the orders service's replay"
        );
        let CreateOrderResponse::Status201(created) = reply.value;
        stack.exactly_once(&sku, &key, created.charge_id).await;
    }
    assert_eq!(stack.to_orders.cuts.load(Ordering::SeqCst), REQUESTS as u64);
    assert_eq!(stack.to_payments.cuts.load(Ordering::SeqCst), 0);
    assert_eq!(stack.totals().await, (REQUESTS as i64, REQUESTS as i64));
}

/// The orders write fails after the charge succeeded (a constraint refuses every order): the
/// client gets a 500 whose call may have executed, nothing is stored upstream, one charge exists.
/// Once the constraint is gone, the client's retry with the same key re-sends the same derived
/// key: the payments service replays the charge and the order is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_write_failed_after_the_charge_the_retry_replays_downstream_and_writes_once() {
    let stack = stack(quick(5)).await;
    for i in 0..REQUESTS {
        let (sku, key) = (format!("c-{i}"), format!("order-c-{i}"));
        sqlx::query("ALTER TABLE orders ADD CONSTRAINT refuse_orders CHECK (false) NOT VALID")
            .execute(&stack.orders_db)
            .await
            .unwrap();
        let failed = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .expect_err("the order write is refused");
        assert_eq!(
            failed.status().map(|s| s.as_u16()),
            Some(500),
            "{sku}: {failed}"
        );
        assert!(failed.may_have_executed(), "{sku}: a 5xx may have executed");
        let (charges, orders) = stack.rows(&sku).await;
        assert_eq!(
            (charges.len(), orders.len()),
            (1, 0),
            "{sku}: charged, not ordered"
        );
        sqlx::query("ALTER TABLE orders DROP CONSTRAINT refuse_orders")
            .execute(&stack.orders_db)
            .await
            .unwrap();
        let reply = stack
            .orders
            .create_order(&order(&sku), &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        assert!(!reply.replayed, "{sku}: the order is written by the retry");
        let CreateOrderResponse::Status201(created) = reply.value;
        assert_eq!(
            created.charge_id, charges[0],
            "{sku}: the charge was replayed"
        );
        stack.exactly_once(&sku, &key, created.charge_id).await;
    }
    assert_eq!(stack.totals().await, (REQUESTS as i64, REQUESTS as i64));
}

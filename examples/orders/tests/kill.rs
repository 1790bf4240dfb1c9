//! The orders service killed (SIGKILL) after the payments service committed the charge and
//! before the order committed: real processes (the example's binary, both services in it), real
//! databases. The restarted service takes the dead process's claim over once its lease lapses,
//! the retry re-sends the same derived key, payments replays the charge: one charge, one order.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idemgen_client::{CallOptions, RetryPolicy};
use idemgen_example_orders::orders_client::{CreateOrderResponse, OrdersClient, types::NewOrder};
use idemgen_runtime::testing::TestDb;

/// Logical requests, each with its own kill.
const REQUESTS: usize = 2;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The example's binary on two databases and two ports; killed when dropped.
struct Services(Child);

impl Services {
    fn start(payments_db: &str, orders_db: &str, ports: (u16, u16)) -> Services {
        let child = Command::new(env!("CARGO_BIN_EXE_idemgen-example-orders"))
            .env("PAYMENTS_DATABASE_URL", payments_db)
            .env("ORDERS_DATABASE_URL", orders_db)
            .env("PAYMENTS_LISTEN", format!("127.0.0.1:{}", ports.0))
            .env("ORDERS_LISTEN", format!("127.0.0.1:{}", ports.1))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the example's binary");
        Services(child)
    }

    /// SIGKILL, and wait for the process to be gone.
    fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until something accepts connections on `port`.
async fn ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn client(port: u16, policy: RetryPolicy) -> OrdersClient {
    let inner = idemgen_client::Client::new(format!("http://127.0.0.1:{port}")).with_policy(policy);
    OrdersClient::from_client(inner)
        .with_bearer("tok1")
        .unwrap()
}

async fn count(pool: &sqlx::PgPool, sql: &'static str, bind: &str) -> i64 {
    sqlx::query_scalar(sql)
        .bind(bind)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_killed_between_the_charge_and_the_order_the_retry_orders_once() {
    let payments_db = TestDb::new().await.expect("payments database");
    let orders_db = TestDb::new().await.expect("orders database");
    let payments = payments_db.pool(2).await.unwrap();
    let orders = orders_db.pool(2).await.unwrap();
    let ports = (free_port(), free_port());
    let mut services = Services::start(&payments_db.url, &orders_db.url, ports);
    ready(ports.0).await;
    ready(ports.1).await;
    for i in 0..REQUESTS {
        let (sku, key) = (format!("k-{i}"), format!("order-k-{i}"));
        let body = NewOrder {
            sku: sku.clone(),
            quantity: 3,
        };
        // The order's write waits behind a lock the test holds, after the charge committed.
        let mut locker = orders.begin().await.unwrap();
        sqlx::query("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *locker)
            .await
            .unwrap();
        let first = {
            let (client, body, key) = (
                client(ports.1, RetryPolicy::off()),
                body.clone(),
                key.clone(),
            );
            tokio::spawn(async move {
                client
                    .create_order(&body, &CallOptions::with_key(key))
                    .await
            })
        };
        let charged = Instant::now() + Duration::from_secs(30);
        let reference = format!("{sku} x3");
        while count(
            &payments,
            "SELECT count(*) FROM charges WHERE reference = $1",
            &reference,
        )
        .await
            == 0
        {
            assert!(
                Instant::now() < charged,
                "{sku}: the charge never committed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Charged, not ordered: kill the process serving the attempt.
        services.kill();
        let lost = first
            .await
            .unwrap()
            .expect_err("the process died mid-request");
        assert!(lost.may_have_executed(), "{sku}: {lost}");
        locker.rollback().await.unwrap();
        assert_eq!(
            count(&orders, "SELECT count(*) FROM orders WHERE sku = $1", &sku).await,
            0,
            "{sku}: the killed attempt's order never committed"
        );
        services = Services::start(&payments_db.url, &orders_db.url, ports);
        ready(ports.0).await;
        ready(ports.1).await;
        // The retry waits (409) until the dead process's lease lapses (5 s), then takes over.
        let patient = RetryPolicy {
            max_attempts: 40,
            budget: Duration::from_secs(40),
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(10),
        };
        let started = Instant::now();
        let reply = client(ports.1, patient)
            .create_order(&body, &CallOptions::with_key(&key))
            .await
            .unwrap_or_else(|e| panic!("{sku}: {e}"));
        eprintln!(
            "{sku}: the retry after the kill answered 201 in {:?}, {} attempt(s)",
            started.elapsed(),
            reply.attempts
        );
        let CreateOrderResponse::Status201(created) = reply.value;
        let charges: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT id FROM charges WHERE reference = $1")
                .bind(&reference)
                .fetch_all(&payments)
                .await
                .unwrap();
        assert_eq!(
            charges,
            vec![created.charge_id],
            "{sku}: one charge, replayed"
        );
        let ordered: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT charge_id FROM orders WHERE sku = $1")
                .bind(&sku)
                .fetch_all(&orders)
                .await
                .unwrap();
        assert_eq!(ordered, vec![created.charge_id], "{sku}: one order");
    }
    let totals: (i64, i64) = (
        sqlx::query_scalar("SELECT count(*) FROM charges")
            .fetch_one(&payments)
            .await
            .unwrap(),
        sqlx::query_scalar("SELECT count(*) FROM orders")
            .fetch_one(&orders)
            .await
            .unwrap(),
    );
    eprintln!("upstream killed: {REQUESTS} logical requests, (charges, orders) {totals:?}");
    assert_eq!(totals, (REQUESTS as i64, REQUESTS as i64));
}

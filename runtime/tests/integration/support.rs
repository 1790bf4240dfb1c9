use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode};
use idemgen_protocol::fingerprint::CanonicalInput;
use idemgen_protocol::{Fingerprint, IdempotencyKey};
use idemgen_runtime::codegen::{CodecError, EncodedResponse};
use idemgen_runtime::engine::{
    EarlierFormats, ExecuteError, HandlerFuture, IdempotentRequest, Outcome, ResponseCodec, Scope,
    StoredResponse,
};
use idemgen_runtime::{
    Executor, ExecutorConfig, MemoryStore, PgStore, Pooler, SqlitePool, SqliteStore, Store,
    Strategy, TokioPgStore, TxHandle,
};
use idemgen_testdb::{PgBouncer, PoolMode, TestDb};
use sqlx::postgres::PgPoolOptions;

/// A response as a handler returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResponse {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

impl ResponseCodec for TestResponse {
    fn encode_success(&self) -> Result<Option<EncodedResponse>, CodecError> {
        let status = StatusCode::from_u16(self.status).map_err(|e| CodecError(e.to_string()))?;
        if !status.is_success() {
            return Ok(None);
        }
        let mut headers = HeaderMap::new();
        for (n, v) in &self.headers {
            headers.append(
                http::HeaderName::from_bytes(n.as_bytes())
                    .map_err(|e| CodecError(e.to_string()))?,
                HeaderValue::from_str(v).map_err(|e| CodecError(e.to_string()))?,
            );
        }
        Ok(Some(EncodedResponse {
            status,
            headers,
            body: self.body.clone().into_bytes(),
        }))
    }

    fn decode(stored: &StoredResponse) -> Result<Self, CodecError> {
        Ok(TestResponse {
            status: stored.status,
            body: String::from_utf8(stored.body.clone()).map_err(|e| CodecError(e.to_string()))?,
            headers: stored.headers.clone(),
        })
    }
}

/// The business write a handler performs inside its transaction, per store.
pub trait Business<S: Store>: Send + Sync + 'static {
    fn write<'a>(&'a self, tx: &'a mut TxHandle<S>, label: String)
    -> HandlerFuture<'a, (), String>;
}

struct PgBusiness;

impl Business<PgStore> for PgBusiness {
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<PgStore>,
        label: String,
    ) -> HandlerFuture<'a, (), String> {
        Box::pin(async move {
            sqlx::query("INSERT INTO business_writes (label) VALUES ($1)")
                .bind(label)
                .execute(tx.conn().await.map_err(|e| e.to_string())?)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

struct TokioPgBusiness;

impl Business<TokioPgStore> for TokioPgBusiness {
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<TokioPgStore>,
        label: String,
    ) -> HandlerFuture<'a, (), String> {
        Box::pin(async move {
            let client = tx.conn().await.map_err(|e| e.to_string())?;
            let insert = client
                .prepare_cached("INSERT INTO business_writes (label) VALUES ($1)")
                .await
                .map_err(|e| e.to_string())?;
            client
                .execute(&insert, &[&label])
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// [`TokioPgBusiness`] behind a transaction pooler: its statement unnamed, with its parameter
/// type (`query_typed`), as a handler writes there.
struct TokioPgTypedBusiness;

impl Business<TokioPgStore> for TokioPgTypedBusiness {
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<TokioPgStore>,
        label: String,
    ) -> HandlerFuture<'a, (), String> {
        Box::pin(async move {
            use idemgen_runtime::tokio_postgres::types::Type;
            let client = tx.conn().await.map_err(|e| e.to_string())?;
            client
                .query_typed(
                    "INSERT INTO business_writes (label) VALUES ($1)",
                    &[(&label, Type::TEXT)],
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

#[derive(Default, Clone)]
struct MemBusiness(Arc<Mutex<Vec<String>>>);

impl Business<MemoryStore> for MemBusiness {
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<MemoryStore>,
        label: String,
    ) -> HandlerFuture<'a, (), String> {
        let log = self.0.clone();
        Box::pin(async move {
            tx.tx()
                .await
                .map_err(|e| e.to_string())?
                .on_commit(move || log.lock().unwrap().push(label));
            Ok(())
        })
    }
}

struct SqliteBusiness;

impl Business<SqliteStore> for SqliteBusiness {
    fn write<'a>(
        &'a self,
        tx: &'a mut TxHandle<SqliteStore>,
        label: String,
    ) -> HandlerFuture<'a, (), String> {
        Box::pin(async move {
            sqlx::query("INSERT INTO business_writes (label) VALUES (?1)")
                .bind(label)
                .execute(tx.conn().await.map_err(|e| e.to_string())?)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// Which committed business writes exist.
pub enum Ledger {
    Pg(sqlx::PgPool),
    Mem(Arc<Mutex<Vec<String>>>),
    /// A SQLite file's pool, and the temporary directory the file lives in (removed when the
    /// last clone goes).
    Sqlite(SqlitePool, Arc<tempfile::TempDir>),
}

impl Ledger {
    pub async fn count(&self, label: &str) -> usize {
        match self {
            Ledger::Pg(pool) => {
                let n: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM business_writes WHERE label = $1")
                        .bind(label)
                        .fetch_one(pool)
                        .await
                        .expect("counting business writes");
                n as usize
            }
            Ledger::Mem(log) => log.lock().unwrap().iter().filter(|l| *l == label).count(),
            Ledger::Sqlite(pool, _) => sqlite_write_ids(pool, label).await.len(),
        }
    }
}

/// An executor with its business writer and ledger.
pub struct Env<S: Store> {
    pub exec: Executor<S>,
    pub business: Arc<dyn Business<S>>,
    pub ledger: Ledger,
}

impl<S: Store> Clone for Env<S> {
    fn clone(&self) -> Self {
        Env {
            exec: self.exec.clone(),
            business: self.business.clone(),
            ledger: match &self.ledger {
                Ledger::Pg(p) => Ledger::Pg(p.clone()),
                Ledger::Mem(m) => Ledger::Mem(m.clone()),
                Ledger::Sqlite(p, dir) => Ledger::Sqlite(p.clone(), dir.clone()),
            },
        }
    }
}

/// A fresh database with the runtime's migrations and a business table.
pub async fn fresh_pg(pool_size: u32) -> (TestDb, sqlx::PgPool) {
    let db = TestDb::new().await.expect("test database");
    let pool = db.pool(pool_size).await.expect("pool");
    let mut conn = pool.acquire().await.expect("connection");
    idemgen_runtime::migrate(&mut conn)
        .await
        .expect("migrations");
    sqlx::query("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .execute(&mut *conn)
        .await
        .expect("business table");
    (db, pool)
}

pub fn pg_business() -> Arc<dyn Business<PgStore>> {
    Arc::new(PgBusiness)
}

pub fn tokio_pg_business() -> Arc<dyn Business<TokioPgStore>> {
    Arc::new(TokioPgBusiness)
}

pub async fn pg_env(config: ExecutorConfig) -> Env<PgStore> {
    let (_db, pool) = fresh_pg(40).await;
    Env {
        exec: Executor::new(PgStore::new(pool.clone()), config),
        business: Arc::new(PgBusiness),
        ledger: Ledger::Pg(pool),
    }
}

/// The tokio-postgres store on a fresh database, and the database's sqlx pool (for the ledger
/// and for direct reads).
pub async fn fresh_tokio_pg(pool_size: usize) -> (TestDb, sqlx::PgPool, TokioPgStore) {
    let (db, pool) = fresh_pg(4).await;
    // The URL sqlx wrote, its own `statement-cache-capacity` included.
    let tokio_pool = TokioPgStore::pool(&db.url, pool_size).expect("tokio-postgres pool");
    (db, pool, TokioPgStore::new(tokio_pool))
}

pub async fn tokio_pg_env(config: ExecutorConfig) -> Env<TokioPgStore> {
    let (_db, pool, store) = fresh_tokio_pg(40).await;
    Env {
        exec: Executor::new(store, config),
        business: Arc::new(TokioPgBusiness),
        ledger: Ledger::Pg(pool),
    }
}

/// [`tokio_pg_env`] whose separate-claim attempts begin their transaction with the claim
/// (`with_begin_at_claim`).
pub async fn tokio_pg_begin_at_claim_env(config: ExecutorConfig) -> Env<TokioPgStore> {
    let (_db, pool, store) = fresh_tokio_pg(40).await;
    Env {
        exec: Executor::new(store.with_begin_at_claim(true), config),
        business: Arc::new(TokioPgBusiness),
        ledger: Ledger::Pg(pool),
    }
}

pub fn mem_env(config: ExecutorConfig) -> Env<MemoryStore> {
    let business = MemBusiness::default();
    Env {
        exec: Executor::new(MemoryStore::new(), config),
        ledger: Ledger::Mem(business.0.clone()),
        business: Arc::new(business),
    }
}

/// A fresh SQLite file in its own temporary directory, opened by the store (migrated, WAL), with
/// a business table. No server of any kind.
pub async fn fresh_sqlite() -> (SqliteStore, Arc<tempfile::TempDir>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(dir.path().join("idemgen.db"))
        .await
        .expect("opening the SQLite store");
    sqlx::query(
        "CREATE TABLE business_writes (id INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL)",
    )
    .execute(store.pool())
    .await
    .expect("business table");
    (store, Arc::new(dir))
}

pub fn sqlite_business() -> Arc<dyn Business<SqliteStore>> {
    Arc::new(SqliteBusiness)
}

pub async fn sqlite_env(config: ExecutorConfig) -> Env<SqliteStore> {
    let (store, dir) = fresh_sqlite().await;
    Env {
        ledger: Ledger::Sqlite(store.pool().clone(), dir),
        exec: Executor::new(store, config),
        business: Arc::new(SqliteBusiness),
    }
}

/// The ids of the committed business rows labelled `label` in a SQLite file.
pub async fn sqlite_write_ids(pool: &SqlitePool, label: &str) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM business_writes WHERE label = ?1 ORDER BY id")
        .bind(label)
        .fetch_all(pool)
        .await
        .expect("reading business writes")
}

/// [`pg_slow_id_writer`] on SQLite: one business row, a body naming its id, then `delay`.
pub fn sqlite_slow_id_writer(
    label: String,
    delay: Duration,
) -> impl for<'a> FnOnce(&'a mut TxHandle<SqliteStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<SqliteStore>| {
        Box::pin(async move {
            let id: i64 =
                sqlx::query_scalar("INSERT INTO business_writes (label) VALUES (?1) RETURNING id")
                    .bind(&label)
                    .fetch_one(tx.conn().await.map_err(|e| e.to_string())?)
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::time::sleep(delay).await;
            Ok(TestResponse {
                status: 201,
                body: format!("write {id}"),
                headers: vec![],
            })
        })
    }
}

pub fn config(strategy: Strategy) -> ExecutorConfig {
    ExecutorConfig {
        strategy,
        ..ExecutorConfig::default()
    }
}

pub fn scope(owner: &str, key: &str) -> Scope {
    Scope::new(owner, "createThing", IdempotencyKey::new(key).unwrap())
}

/// A request as the pipeline builds it: `hs2`, with its input kept for `hs1` records.
pub fn request(scope: Scope, input: serde_json::Value, version: i16) -> IdempotentRequest {
    let input = CanonicalInput::new(&input).unwrap();
    IdempotentRequest {
        fingerprint: input.hs2(&scope.operation, version),
        earlier: Some(EarlierFormats::new(input)),
        scope,
        fingerprint_version: version,
        declared_headers: &[],
        key_header: "Idempotency-Key",
        retention: None,
    }
}

/// A request as the previous release built it: `hs1` only.
pub fn hs1_request(scope: Scope, input: serde_json::Value, version: i16) -> IdempotentRequest {
    IdempotentRequest {
        fingerprint: Fingerprint::hs1(&scope.operation, version, &input).unwrap(),
        earlier: None,
        scope,
        fingerprint_version: version,
        declared_headers: &[],
        key_header: "Idempotency-Key",
        retention: None,
    }
}

/// What a test handler does.
#[derive(Clone)]
pub struct Plan {
    pub label: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
    pub fail: bool,
    pub resource_ref: Option<String>,
}

impl Plan {
    pub fn created(label: &str) -> Plan {
        Plan {
            label: label.into(),
            status: 201,
            headers: vec![],
            delay: Duration::ZERO,
            fail: false,
            resource_ref: None,
        }
    }
}

pub type Attempt = Result<Outcome<TestResponse>, ExecuteError<String>>;

/// Runs one attempt whose handler writes `plan.label` and answers `plan.status`.
pub async fn attempt<S: Store>(env: &Env<S>, req: IdempotentRequest, plan: Plan) -> Attempt {
    let business = env.business.clone();
    env.exec
        .execute(req, move |tx: &mut TxHandle<S>| {
            Box::pin(async move {
                business.write(tx, plan.label.clone()).await?;
                if let Some(r) = &plan.resource_ref {
                    tx.set_resource_ref(r.clone());
                }
                tokio::time::sleep(plan.delay).await;
                if plan.fail {
                    return Err("handler failed".to_owned());
                }
                Ok(TestResponse {
                    status: plan.status,
                    body: format!("made {}", plan.label),
                    headers: plan.headers,
                })
            })
        })
        .await
}

pub fn problem_status(result: &Attempt) -> Option<u16> {
    match result {
        Err(ExecuteError::Problem(p)) => Some(p.kind().status().as_u16()),
        _ => None,
    }
}

/// A handler that inserts one business row labelled `label` and answers 201 with a body naming
/// the row's id, so a stored result can be matched to the write that produced it.
pub fn pg_id_writer(
    label: String,
) -> impl for<'a> FnOnce(&'a mut TxHandle<PgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    pg_slow_id_writer(label, Duration::ZERO)
}

/// [`pg_id_writer`] that then sleeps `delay` inside its transaction (a slow handler).
pub fn pg_slow_id_writer(
    label: String,
    delay: Duration,
) -> impl for<'a> FnOnce(&'a mut TxHandle<PgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<PgStore>| {
        Box::pin(async move {
            let id: i64 =
                sqlx::query_scalar("INSERT INTO business_writes (label) VALUES ($1) RETURNING id")
                    .bind(&label)
                    .fetch_one(tx.conn().await.map_err(|e| e.to_string())?)
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::time::sleep(delay).await;
            Ok(TestResponse {
                status: 201,
                body: format!("write {id}"),
                headers: vec![],
            })
        })
    }
}

/// [`pg_id_writer`] on the tokio-postgres store.
pub fn tokio_pg_id_writer(
    label: String,
) -> impl for<'a> FnOnce(&'a mut TxHandle<TokioPgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    tokio_pg_slow_id_writer(label, Duration::ZERO)
}

/// [`tokio_pg_slow_id_writer`] with its statement unnamed and typed (`query_typed`), as a handler
/// writes behind a transaction pooler.
pub fn tokio_pg_typed_slow_id_writer(
    label: String,
    delay: Duration,
) -> impl for<'a> FnOnce(&'a mut TxHandle<TokioPgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<TokioPgStore>| {
        Box::pin(async move {
            use idemgen_runtime::tokio_postgres::types::Type;
            let client = tx.conn().await.map_err(|e| e.to_string())?;
            let row = client
                .query_typed_one(
                    "INSERT INTO business_writes (label) VALUES ($1) RETURNING id",
                    &[(&label, Type::TEXT)],
                )
                .await
                .map_err(|e| e.to_string())?;
            let id: i64 = row.get(0);
            tokio::time::sleep(delay).await;
            Ok(TestResponse {
                status: 201,
                body: format!("write {id}"),
                headers: vec![],
            })
        })
    }
}

/// A business row labelled `label`, written in the attempt's transaction on `TokioPgStore`: its
/// id. The insert is prepared once per connection (a `&str` would be prepared on every call, a
/// round trip of its own).
pub async fn tokio_pg_insert_write(
    tx: &mut TxHandle<TokioPgStore>,
    label: &str,
) -> Result<i64, String> {
    let client = tx.conn().await.map_err(|e| e.to_string())?;
    let insert = client
        .prepare_cached("INSERT INTO business_writes (label) VALUES ($1) RETURNING id")
        .await
        .map_err(|e| e.to_string())?;
    let row = client
        .query_one(&insert, &[&label])
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

/// [`tokio_pg_id_writer`] that then sleeps `delay` inside its transaction (a slow handler).
pub fn tokio_pg_slow_id_writer(
    label: String,
    delay: Duration,
) -> impl for<'a> FnOnce(&'a mut TxHandle<TokioPgStore>) -> HandlerFuture<'a, TestResponse, String>
+ Send
+ 'static {
    move |tx: &mut TxHandle<TokioPgStore>| {
        Box::pin(async move {
            let id = tokio_pg_insert_write(tx, &label).await?;
            tokio::time::sleep(delay).await;
            Ok(TestResponse {
                status: 201,
                body: format!("write {id}"),
                headers: vec![],
            })
        })
    }
}

/// The ids of the committed business rows labelled `label`.
pub async fn pg_write_ids(pool: &sqlx::PgPool, label: &str) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM business_writes WHERE label = $1 ORDER BY id")
        .bind(label)
        .fetch_all(pool)
        .await
        .expect("reading business writes")
}

/// The state and stored body of the record of `scope`, read directly.
pub async fn pg_record(pool: &sqlx::PgPool, scope: &Scope) -> Option<(String, Option<Vec<u8>>)> {
    sqlx::query_as(
        "SELECT state, response_body FROM idempotency_records
          WHERE owner = $1 AND operation = $2 AND resource_scope = $3 AND idempotency_key = $4",
    )
    .bind(&scope.owner)
    .bind(&scope.operation)
    .bind(&scope.resource_scope)
    .bind(scope.key.as_str())
    .fetch_optional(pool)
    .await
    .expect("reading a record")
}

/// Labels with more than one committed business write.
pub async fn pg_duplicates(pool: &sqlx::PgPool) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT label, count(*) FROM business_writes GROUP BY label HAVING count(*) > 1")
        .fetch_all(pool)
        .await
        .expect("counting duplicates")
}

/// The process's PgBouncer in `mode`, in front of the test server (started on first use).
pub fn shared_bouncer(mode: PoolMode, db: &TestDb) -> &'static PgBouncer {
    static SESSION: OnceLock<Result<PgBouncer, String>> = OnceLock::new();
    static TRANSACTION: OnceLock<Result<PgBouncer, String>> = OnceLock::new();
    let cell = match mode {
        PoolMode::Session => &SESSION,
        PoolMode::Transaction => &TRANSACTION,
    };
    let (host, port) = (db.options.get_host().to_string(), db.options.get_port());
    // In session mode each client connection holds a server connection: the server pool must
    // hold the largest client pool a test opens on one database (`pgbouncer_env`'s 12), or
    // clients wait for `query_wait_timeout`.
    let servers = match mode {
        PoolMode::Session => 16,
        PoolMode::Transaction => 8,
    };
    cell.get_or_init(|| PgBouncer::start(&host, port, mode, servers).map_err(|e| e.to_string()))
        .as_ref()
        .unwrap_or_else(|e| panic!("starting PgBouncer ({mode:?}): {e}"))
}

/// The store's [`Pooler`] for a PgBouncer mode.
pub fn pooler_for(mode: PoolMode) -> Pooler {
    match mode {
        PoolMode::Session => Pooler::Session,
        PoolMode::Transaction => Pooler::Transaction,
    }
}

/// A pool of `size` on `db` through `bouncer`, with the connect options its pooler needs.
pub async fn bouncer_pool(bouncer: &PgBouncer, db: &TestDb, size: u32) -> sqlx::PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(pooler_for(bouncer.mode()).connect_options(bouncer.options(&db.name)))
        .await
        .expect("a pool through PgBouncer")
}

/// As [`pg_env`], but the executor's store reaches PostgreSQL through PgBouncer in `mode`
/// (declared with its [`Pooler`] and checked); the ledger counts on a direct pool.
pub async fn pgbouncer_env(config: ExecutorConfig, mode: PoolMode) -> Env<PgStore> {
    let (db, direct) = fresh_pg(4).await;
    let bouncer = shared_bouncer(mode, &db);
    // Smaller than `pg_env`'s 40: PgBouncer's server pools are per test database, and the test
    // server's `max_connections` is shared by the whole run.
    let pool = bouncer_pool(bouncer, &db, 12).await;
    let store = PgStore::new(pool).with_pooler(pooler_for(mode));
    store.check().await.expect("the store's pooler check");
    Env {
        exec: Executor::new(store, config),
        business: Arc::new(PgBusiness),
        ledger: Ledger::Pg(direct),
    }
}

/// A `postgres://` URL of `db` through `bouncer`, for tokio-postgres.
pub fn bouncer_url(bouncer: &PgBouncer, db: &TestDb) -> String {
    let options = bouncer.options(&db.name);
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        db.name
    )
}

/// As [`tokio_pg_env`], but the store reaches PostgreSQL through PgBouncer in session mode
/// (checked); the ledger counts on a direct pool.
pub async fn tokio_pgbouncer_session_env(config: ExecutorConfig) -> Env<TokioPgStore> {
    let (db, direct) = fresh_pg(4).await;
    let bouncer = shared_bouncer(PoolMode::Session, &db);
    let pool =
        TokioPgStore::pool(&bouncer_url(bouncer, &db), 12).expect("a pool through PgBouncer");
    let store = TokioPgStore::new(pool);
    store.check().await.expect("the store's pooler check");
    Env {
        exec: Executor::new(store, config),
        business: Arc::new(TokioPgBusiness),
        ledger: Ledger::Pg(direct),
    }
}

/// As [`tokio_pgbouncer_session_env`], in transaction mode: the store declared for it
/// (`with_pooler`), the handler's statement sent unnamed.
pub async fn tokio_pgbouncer_transaction_env(config: ExecutorConfig) -> Env<TokioPgStore> {
    tokio_pgbouncer_transaction_env_at(config).await.0
}

/// [`tokio_pgbouncer_transaction_env`], and the URL of its database through PgBouncer.
pub async fn tokio_pgbouncer_transaction_env_at(
    config: ExecutorConfig,
) -> (Env<TokioPgStore>, String) {
    let (db, direct) = fresh_pg(4).await;
    let bouncer = shared_bouncer(PoolMode::Transaction, &db);
    let url = bouncer_url(bouncer, &db);
    let pool = TokioPgStore::pool(&url, 12).expect("a pool through PgBouncer");
    let store = TokioPgStore::new(pool).with_pooler(Pooler::Transaction);
    store.check().await.expect("the store's pooler check");
    let env = Env {
        exec: Executor::new(store, config),
        business: Arc::new(TokioPgTypedBusiness),
        ledger: Ledger::Pg(direct),
    };
    (env, url)
}

/// The claim of `req`'s key with `token`: no lease, the default stale-claim timeout, kept
/// forever.
pub fn claim_of(
    req: &IdempotentRequest,
    token: idemgen_runtime::engine::ClaimToken,
) -> idemgen_runtime::engine::ClaimRequest<'_> {
    idemgen_runtime::engine::ClaimRequest {
        scope: &req.scope,
        fingerprint: &req.fingerprint,
        fingerprint_version: req.fingerprint_version,
        token,
        holder: None,
        stale_after: Duration::from_secs(300),
        retention: None,
    }
}

/// Claims the fresh key of `req` with `token` on the store directly ([`claim_of`]).
pub async fn claim_fresh<S: Store>(
    store: &S,
    req: &IdempotentRequest,
    token: idemgen_runtime::engine::ClaimToken,
) {
    use idemgen_runtime::engine::ClaimOutcome;
    let claimed = store.claim(&claim_of(req, token)).await.unwrap();
    assert!(matches!(claimed, ClaimOutcome::Claimed { .. }));
}

/// A session of its own inside a transaction that holds the row lock of `scope`'s record, as an
/// in-doubt completion does; `ROLLBACK` on it lets go.
pub async fn hold_record_lock(db: &TestDb, scope: &Scope) -> sqlx::PgConnection {
    let mut holder = db.connect().await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM idempotency_records WHERE scope_hash = $1 FOR UPDATE")
        .bind(&scope.hash()[..])
        .execute(&mut holder)
        .await
        .unwrap();
    holder
}

/// Counts the advisory locks held in the current database (`pg_locks` shows the whole
/// cluster's, other tests' included).
pub const ADVISORY_LOCKS_HERE: &str = "SELECT count(*) FROM pg_locks
     WHERE locktype = 'advisory'
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// After a create of `env`'s completed under `key`, its stored status is rewritten by `corrupt`
/// (what no store writes): a retry is answered as a store failure (503, the cause logged), never
/// a replay under a substituted status, and the handler does not run again.
pub async fn a_stored_status_out_of_range_is_an_error<S: Store, F, Fut>(
    env: Env<S>,
    key: &str,
    corrupt: F,
) where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let req = || request(scope("alice", key), serde_json::json!({"n": 1}), 1);
    let first = attempt(&env, req(), Plan::created("stored")).await;
    assert!(first.is_ok(), "{first:?}");
    corrupt().await;
    for round in 0..2 {
        let retry = attempt(&env, req(), Plan::created("stored")).await;
        assert_eq!(
            problem_status(&retry),
            Some(503),
            "retry {round}: {retry:?}"
        );
        let Err(ExecuteError::Problem(problem)) = &retry else {
            unreachable!()
        };
        assert!(
            format!("{problem:?}").contains("is not a 2xx"),
            "{problem:?}"
        );
    }
    assert_eq!(env.ledger.count("stored").await, 1, "the handler ran again");
}

//! The SQLite store (sqlx's SQLite driver, libsqlite3 compiled in): one file, no server.
//!
//! SQLite has one writer per file. A write transaction opened with `BEGIN IMMEDIATE` holds the
//! file's write lock from its `BEGIN` to its end, so it never fails later on a lock it could not
//! upgrade to; readers (WAL mode) never wait for it, nor it for them. That single lock does what
//! PostgreSQL's row locks and advisory gates do:
//! - the separate-claim strategy's claim is a read, and an insert of its own (autocommit) only when
//!   the key has no record, so replays and duplicates write nothing and never wait for the lock
//!   (they may wait for a pooled connection while writers waiting for it hold them all: up to
//!   the pool's `acquire_timeout`, [`BUSY_TIMEOUT`] in [`SqliteStore::open`]);
//! - the business write and the completion share one `BEGIN IMMEDIATE` transaction; the
//!   completion is guarded by the claim token, and a takeover, a release or another completion
//!   waits for the write lock of a transaction in doubt and then re-checks its guard on the record
//!   as that transaction left it (the model's assumption, `tests/integration/sqlite.rs`);
//! - in-transaction strategy: the attempt's transaction opens with `BEGIN IMMEDIATE` and looks for
//!   a record under the write lock. The key's *gate* is this store's in-process set of keys whose
//!   gated transaction is open: [`Gate::Busy`] means another attempt *of this process* holds the
//!   key, answered at once, before any connection is taken. An attempt of another process on the
//!   same file is held off by the write lock itself: the duplicate waits in its `BEGIN IMMEDIATE`
//!   (up to `busy_timeout`) and then finds the committed record (a replay) or none (the first
//!   attempt rolled back). The primary key stays the final arbiter, as on PostgreSQL.
//!
//! A wait for the write lock longer than `busy_timeout` (`SQLITE_BUSY`, `SQLITE_LOCKED`) is
//! [`StoreError::LockTimeout`]; a file that cannot be opened, read or written (read-only, disk
//! full, I/O error, not a database) is [`StoreError::Unavailable`]: both answer 503, and the
//! driver's text stays in logs.
//!
//! The store sets its connections' pragmas ([`SqliteStore::connect_options`]): WAL, `busy_timeout`
//! 5 s, `synchronous = FULL` (an acknowledged create survives a power loss, not only a crash of
//! the process: ARCHITECTURE.md, "Choices and why"), foreign keys on.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, Executor as _, Row, SqlSafeStr};
use sqlx_core::transaction::TransactionManager;
use sqlx_sqlite::{
    Sqlite, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqliteRow,
    SqliteSynchronous, SqliteTransactionManager,
};

mod error;

pub(crate) use error::{classify, classify_ref, is_sqlite};

use super::rules::{self, ClaimStatements, ClaimStep, RecordRow, ResponseRow};
use super::{ClaimOutcome, ClaimRequest, CommitError, Gate, Store, StoreError};
use super::{ClaimToken, HolderId, Record, Scope, TX_NOT_INTACT};
use crate::response::StoredResponse;

/// How long a statement waits for the file's write lock before failing with `SQLITE_BUSY`
/// (answered 503). It bounds how long a handler may hold its write transaction before other
/// writers give up on it.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The shortest lease expiry the store keeps leases with ([`Store::min_lease_expiry`]): three
/// times [`BUSY_TIMEOUT`]. A renewal is a write and may wait for the write lock up to
/// `busy_timeout` (and as long again for a pooled connection while writers hold them all), so a
/// lease about as long as that wait would lapse under a live holder while a handler holds the
/// lock.
pub const MIN_LEASE_EXPIRY: Duration = Duration::from_secs(3 * BUSY_TIMEOUT.as_secs());

/// The pool size [`SqliteStore::open`] uses: one writer at a time, readers beside it.
pub const POOL_SIZE: u32 = 8;

/// The keys whose gated transaction is open in this process.
type Gates = Arc<Mutex<HashSet<[u8; 32]>>>;

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    gates: Gates,
}

/// A key's in-process gate, held by the gated transaction; freed when it ends.
#[derive(Debug)]
struct GateGuard {
    gates: Gates,
    hash: [u8; 32],
}

impl GateGuard {
    /// Takes the gate of `hash`, unless another transaction of this store holds it.
    fn take(gates: &Gates, hash: [u8; 32]) -> Option<GateGuard> {
        let mut held = gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.insert(hash).then(|| GateGuard {
            gates: Arc::clone(gates),
            hash,
        })
    }
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        self.gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.hash);
    }
}

/// The business transaction handlers write through: queries only, no commit or rollback.
///
/// It owns its pooled connection and drives the transaction with sqlx's SQLite transaction
/// manager (a handler's nested `begin` is a savepoint). Dropped while open, it rolls back.
///
/// Cancellation safety (ARCHITECTURE.md, "Cancellation safety"): sqlx's SQLite driver runs every
/// command of a connection, in order, on the connection's own worker thread, which counts the
/// transaction depth itself and carries on with a command whose future was dropped: a `BEGIN`
/// that succeeded after its caller left is rolled back by the worker at once, and a `COMMIT` or
/// `ROLLBACK` whose answer nobody received makes it ignore the next queued rollback. So whenever
/// this handle is dropped before its end was acknowledged (open, or with a `BEGIN`, `COMMIT` or
/// `ROLLBACK` unanswered), it queues a rollback, which reaches the worker before any command of
/// the connection's next user and rolls back exactly what is still open: no pooled connection is
/// ever handed on inside a transaction. A transaction SQLite rolled back by itself stays counted
/// open by the worker: the handle closes its connection when its commit or rollback fails, and
/// the store's `begin` closes and replaces a connection so left.
#[derive(Debug)]
pub struct SqliteTx {
    conn: PoolConnection<Sqlite>,
    ended: bool,
    /// The key's in-process gate (in-transaction strategy), held until the transaction ends and
    /// freed when the handle is dropped, after its rollback is queued.
    _gate: Option<GateGuard>,
}

impl SqliteTx {
    /// The connection to run queries on, inside the attempt's transaction. Issuing transaction
    /// control statements (`COMMIT`, `ROLLBACK`) through it is not supported.
    pub fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }

    /// Opens the write transaction (`BEGIN IMMEDIATE`: the file's write lock, waited for up to
    /// `busy_timeout`).
    async fn begin(
        conn: PoolConnection<Sqlite>,
        gate: Option<GateGuard>,
    ) -> Result<SqliteTx, sqlx::Error> {
        let mut tx = SqliteTx {
            conn,
            ended: false,
            _gate: gate,
        };
        // Cancelled or failed here: dropped unended, `tx` queues a rollback (a no-op when the
        // worker has no transaction open).
        SqliteTransactionManager::begin(
            &mut tx.conn,
            Some(AssertSqlSafe("BEGIN IMMEDIATE").into_sql_str()),
        )
        .await?;
        Ok(tx)
    }

    async fn commit(mut self) -> Result<(), sqlx::Error> {
        if let Err(e) = SqliteTransactionManager::commit(&mut self.conn).await {
            // SQLite may have rolled the transaction back by itself, where the driver still
            // counts it open: the connection is closed after the queued rollback, never reused.
            self.conn.close_on_drop();
            return Err(e);
        }
        self.ended = true;
        Ok(())
    }

    async fn rollback(mut self) -> Result<(), sqlx::Error> {
        if !self.intact() {
            // The whole transaction, savepoints included (if it is still open); the worker's
            // count is off, so the connection is closed, never reused.
            self.conn.close_on_drop();
            if SqliteTransactionManager::get_transaction_depth(&self.conn) > 1 {
                self.conn.execute("ROLLBACK").await?;
            }
            self.ended = true;
            return Ok(());
        }
        if let Err(e) = SqliteTransactionManager::rollback(&mut self.conn).await {
            self.conn.close_on_drop();
            return Err(e);
        }
        self.ended = true;
        Ok(())
    }

    /// Whether the driver counts this transaction alone: not a savepoint a handler began and
    /// leaked (the driver's `COMMIT` or `ROLLBACK` would end only that), nor none.
    fn intact(&self) -> bool {
        SqliteTransactionManager::get_transaction_depth(&self.conn) == 1
    }
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        if !self.ended {
            if !self.intact() {
                // The queued rollback would end only a savepoint the handler leaked: closing
                // the connection ends the whole transaction.
                self.conn.close_on_drop();
            }
            // Queued before the connection returns to the pool, so it runs before anything of
            // the next user; the worker rolls back only a transaction it still counts.
            SqliteTransactionManager::start_rollback(&mut self.conn);
        }
        // The gate is freed after the rollback is queued (field order), so a duplicate that
        // takes it next waits for the write lock until the rollback ran.
    }
}

/// The current instant in integer milliseconds since the Unix epoch, by the host's clock.
macro_rules! now {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// Whether a record is a stale claim, given the placeholder of the stale-claim timeout in
/// milliseconds: claimed longer ago than that, or claimed for a holder whose lease has expired or
/// ended (protocol.md, "Durability of claims").
macro_rules! stale {
    ($millis:literal) => {
        concat!(
            "(state = 'claimed'
              AND (claimed_at < ",
            now!(),
            " - ",
            $millis,
            "
                   OR (holder_id IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM idempotency_holders h
                                        WHERE h.holder_id = idempotency_records.holder_id
                                          AND h.expires_at > ",
            now!(),
            "))))"
        )
    };
}

/// Every statement finds a record by its key, `scope_hash`, bound as `?1`.
const SELECT_RECORD: &str = concat!(
    "SELECT state, fingerprint, fingerprint_version, claim_token, ",
    stale!("?2"),
    " AS stale, response_status, response_headers, response_body
       FROM idempotency_records
      WHERE scope_hash = ?1"
);

/// The claim, written only after [`SELECT_RECORD`] found no record; the primary key decides
/// between two such inserts. The expiry is set here, with the claim.
const CLAIM: &str = concat!(
    "INSERT INTO idempotency_records
        (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
         fingerprint_version, claim_token, claimed_at, expires_at, holder_id)
     VALUES (?1, ?2, ?3, ?4, ?5, 'claimed', ?6, ?7, ?8, ",
    now!(),
    ", ",
    now!(),
    " + ?9, ?10)
     ON CONFLICT DO NOTHING"
);

/// A takeover installs the taker's token and holder, guarded by the old token and by the claim
/// still being stale, judged again under the write lock.
const TAKE_OVER: &str = concat!(
    "UPDATE idempotency_records
        SET claim_token = ?4, claimed_at = ",
    now!(),
    ", holder_id = ?7
      WHERE scope_hash = ?1 AND state = 'claimed' AND fingerprint = ?2
        AND fingerprint_version = ?3 AND claim_token = ?5
        AND ",
    stale!("?6")
);

/// Registers or renews a holder's lease.
const RENEW_LEASE: &str = concat!(
    "INSERT INTO idempotency_holders (holder_id, heartbeat_at, expires_at)
     VALUES (?1, ",
    now!(),
    ", ",
    now!(),
    " + ?2)
     ON CONFLICT (holder_id) DO UPDATE
        SET heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at"
);

/// Leases that lapsed more than an hour ago (their claims are stale either way).
const PURGE_LEASES: &str = concat!(
    "DELETE FROM idempotency_holders WHERE expires_at < ",
    now!(),
    " - 3600000 AND holder_id <> ?1"
);

/// A write that changes nothing, to learn whether the file can be written: SQLite opens a file
/// the process may not write read-only without an error, and `BEGIN IMMEDIATE` succeeds on it.
const WRITE_PROBE: &str = "UPDATE idempotency_holders SET expires_at = expires_at WHERE 0";

const END_LEASE: &str = "DELETE FROM idempotency_holders WHERE holder_id = ?1";

/// The separate-claim completion, guarded by the claim token.
const COMPLETE: &str = concat!(
    "UPDATE idempotency_records
        SET state = 'completed', response_status = ?3, response_headers = ?4,
            response_body = ?5, resource_ref = ?6, completed_at = ",
    now!(),
    "
      WHERE scope_hash = ?1 AND state = 'claimed' AND claim_token = ?2"
);

/// The in-transaction strategy's only write to the records: the completed record, once, under
/// the write lock. A record that did not go through the gate makes it do nothing.
const INSERT_COMPLETED: &str = concat!(
    "INSERT INTO idempotency_records
        (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
         fingerprint_version, claim_token, claimed_at, response_status, response_headers,
         response_body, resource_ref, completed_at, expires_at)
     VALUES (?1, ?2, ?3, ?4, ?5, 'completed', ?6, ?7, ?8, ",
    now!(),
    ", ?9, ?10, ?11, ?12, ",
    now!(),
    ", ",
    now!(),
    " + ?13)
     ON CONFLICT DO NOTHING"
);

const RELEASE: &str = "DELETE FROM idempotency_records
      WHERE scope_hash = ?1 AND state = 'claimed' AND claim_token = ?2";

const TOMBSTONE: &str = "UPDATE idempotency_records
        SET state = 'tombstone', fingerprint = NULL, fingerprint_version = NULL,
            response_status = NULL, response_headers = NULL, response_body = NULL
      WHERE owner = ?1 AND operation = ?2 AND resource_ref = ?3 AND state = 'completed'";

/// One batch of the retention purge: its own short write transaction, so the write lock is free
/// between batches. Writers waiting in SQLite's busy handler (which sleeps) may still wait out
/// several batches, up to the whole purge (sqlite.rs prints how many claims completed during
/// it: from one to nearly all, run to run).
const PURGE: &str = concat!(
    "DELETE FROM idempotency_records
      WHERE rowid IN (SELECT rowid FROM idempotency_records
                       WHERE expires_at IS NOT NULL AND expires_at < ",
    now!(),
    "
                       ORDER BY expires_at
                       LIMIT ?1)"
);

impl SqliteStore {
    /// The store's connection settings for the database file at `path` (created if missing):
    /// WAL, `busy_timeout` [`BUSY_TIMEOUT`], `synchronous = FULL`, foreign keys on. Build a pool
    /// from them for [`SqliteStore::new`] (or use [`SqliteStore::open`]).
    pub fn connect_options(path: impl AsRef<Path>) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
    }

    /// Opens (or creates) the database file at `path` with the store's settings and a pool of
    /// [`POOL_SIZE`] (a connection waited for up to [`BUSY_TIMEOUT`]), applies the runtime's
    /// SQLite migrations ([`crate::migrate_sqlite`]) and checks the settings
    /// ([`SqliteStore::check`]). The application's own tables may live in
    /// the same file: its handlers write them through the attempt's transaction.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let options = SqliteStore::connect_options(path);
        // Turning a new file to WAL takes an exclusive lock that `busy_timeout` does not wait
        // for: processes opening one fresh file at once retry here, for as long as a writer
        // would wait.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let pool = loop {
            match PoolOptions::<Sqlite>::new()
                .max_connections(POOL_SIZE)
                // Writers waiting in the busy handler hold their connections: a read (a replay,
                // a claim's look) may wait for one, as long as a writer waits for the lock.
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(options.clone())
                .await
                .map_err(classify)
            {
                Err(StoreError::LockTimeout) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => break other?,
            }
        };
        let mut conn = pool.acquire().await.map_err(classify)?;
        crate::migrate::migrate_sqlite(&mut conn)
            .await
            .map_err(|e| match e {
                sqlx::migrate::MigrateError::Execute(e) => classify(e),
                other => StoreError::Other(format!("migrating: {other}")),
            })?;
        drop(conn);
        let store = SqliteStore::new(pool);
        store.check().await?;
        Ok(store)
    }

    /// A store on `pool`, whose connections must have been opened with
    /// [`SqliteStore::connect_options`] (checked by [`SqliteStore::check`]) on a file migrated
    /// by [`crate::migrate_sqlite`].
    pub fn new(pool: SqlitePool) -> SqliteStore {
        SqliteStore {
            pool,
            gates: Gates::default(),
        }
    }

    /// A pooled connection the driver counts outside any transaction. When SQLite ends a
    /// transaction by itself (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM`, in a statement or
    /// the `COMMIT`), sqlx's SQLite worker keeps counting it open: the rollback queued when its
    /// handle is dropped fails without a word, and every later `BEGIN IMMEDIATE` on that
    /// connection would be refused. Such a connection is closed and another one taken.
    async fn acquire_outside_transaction(&self) -> Result<PoolConnection<Sqlite>, StoreError> {
        loop {
            let mut conn = self.pool.acquire().await.map_err(classify)?;
            if SqliteTransactionManager::get_transaction_depth(&conn) == 0 {
                return Ok(conn);
            }
            tracing::warn!("closing a SQLite connection left inside a transaction SQLite ended");
            conn.close_on_drop();
        }
    }

    /// The pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Checks that the pool's connections carry the store's settings (WAL, `synchronous = FULL`
    /// and a `busy_timeout`) and that the file can be written, so a pool built otherwise or a
    /// write-protected file fails at start-up, not under load.
    pub async fn check(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        if !journal.eq_ignore_ascii_case("wal") || synchronous < 2 || busy <= 0 {
            return Err(StoreError::Other(format!(
                "the SQLite pool runs with journal_mode={journal}, synchronous={synchronous}, \
                 busy_timeout={busy}: build it with SqliteStore::connect_options (wal, FULL, a \
                 busy timeout)"
            )));
        }
        // A file this process may not write is opened read-only without an error.
        sqlx::query(WRITE_PROBE)
            .execute(&mut *conn)
            .await
            .map_err(classify)?;
        Ok(())
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn record_from_row(row: &SqliteRow) -> Result<Record, StoreError> {
    let get_err = |e: sqlx::Error| StoreError::Other(format!("decoding a record: {e}"));
    let token: Option<Vec<u8>> = row.try_get("claim_token").map_err(get_err)?;
    let claim_token = token
        .map(|t| uuid::Uuid::from_slice(&t))
        .transpose()
        .map_err(|e| StoreError::Other(format!("decoding a claim token: {e}")))?;
    let status: Option<i64> = row.try_get("response_status").map_err(get_err)?;
    let response = match status {
        Some(status) => {
            let headers: Option<String> = row.try_get("response_headers").map_err(get_err)?;
            let headers = match headers {
                Some(h) => serde_json::from_str(&h)
                    .map_err(|e| StoreError::Other(format!("decoding stored headers: {e}")))?,
                None => Vec::new(),
            };
            let body: Option<Vec<u8>> = row.try_get("response_body").map_err(get_err)?;
            Some(ResponseRow {
                status,
                headers,
                body: body.unwrap_or_default(),
            })
        }
        None => None,
    };
    let stale: Option<i64> = row.try_get("stale").map_err(get_err)?;
    RecordRow {
        state: row.try_get("state").map_err(get_err)?,
        fingerprint: row.try_get("fingerprint").map_err(get_err)?,
        fingerprint_version: row.try_get("fingerprint_version").map_err(get_err)?,
        claim_token,
        stale: stale.unwrap_or(0) != 0,
        response,
    }
    .into_record()
}

async fn read_on(
    conn: &mut SqliteConnection,
    hash: &[u8; 32],
    stale_after: Duration,
) -> Result<Option<Record>, StoreError> {
    let row = sqlx::query(SELECT_RECORD)
        .bind(&hash[..])
        .bind(millis(stale_after))
        .fetch_optional(conn)
        .await
        .map_err(classify)?;
    row.as_ref().map(record_from_row).transpose()
}

fn headers_json(response: &StoredResponse) -> Result<String, StoreError> {
    serde_json::to_string(&response.headers)
        .map_err(|e| StoreError::Other(format!("encoding headers: {e}")))
}

fn uuid_bytes(id: uuid::Uuid) -> Vec<u8> {
    id.as_bytes().to_vec()
}

/// The claim's statements on one connection: a read first (a replay or a duplicate writes
/// nothing and never waits for the file's write lock), then [`CLAIM`], an autocommit insert;
/// [`TAKE_OVER`].
struct SqliteClaim<'c> {
    conn: &'c mut SqliteConnection,
    hash: [u8; 32],
}

#[async_trait]
impl ClaimStatements for SqliteClaim<'_> {
    async fn insert_or_read(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<ClaimStep, StoreError> {
        if let Some(existing) = read_on(&mut *self.conn, &self.hash, request.stale_after).await? {
            return Ok(ClaimStep::Held(existing));
        }
        let scope = request.scope;
        let inserted = sqlx::query(CLAIM)
            .bind(&self.hash[..])
            .bind(&scope.owner)
            .bind(&scope.operation)
            .bind(&scope.resource_scope)
            .bind(scope.key.as_str())
            .bind(request.fingerprint.as_str())
            .bind(request.fingerprint_version)
            .bind(uuid_bytes(request.token.0))
            .bind(request.retention.map(millis))
            .bind(request.holder.map(|h| uuid_bytes(h.0)))
            .execute(&mut *self.conn)
            .await
            .map_err(classify)?;
        // Not inserted: another attempt's claim landed between the read and the insert.
        Ok(if inserted.rows_affected() == 1 {
            ClaimStep::Inserted
        } else {
            ClaimStep::Vanished
        })
    }

    async fn take_over(
        &mut self,
        request: &ClaimRequest<'_>,
        held_by: Option<ClaimToken>,
    ) -> Result<bool, StoreError> {
        let taken = sqlx::query(TAKE_OVER)
            .bind(&self.hash[..])
            .bind(request.fingerprint.as_str())
            .bind(request.fingerprint_version)
            .bind(uuid_bytes(request.token.0))
            .bind(held_by.map(|t| uuid_bytes(t.0)))
            .bind(millis(request.stale_after))
            .bind(request.holder.map(|h| uuid_bytes(h.0)))
            .execute(&mut *self.conn)
            .await
            .map_err(classify)?;
        Ok(taken.rows_affected() == 1)
    }
}

#[async_trait]
impl Store for SqliteStore {
    type Tx = SqliteTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        let mut statements = SqliteClaim {
            conn: &mut conn,
            hash: request.scope.hash(),
        };
        rules::claim(&mut statements, request).await
    }

    async fn begin(&self) -> Result<SqliteTx, StoreError> {
        let conn = self.acquire_outside_transaction().await?;
        SqliteTx::begin(conn, None).await.map_err(classify)
    }

    async fn begin_gated(&self, request: &ClaimRequest<'_>) -> Result<Gate<SqliteTx>, StoreError> {
        let hash = request.scope.hash();
        // Another attempt of this process holds the key: answered before taking a connection.
        let Some(gate) = GateGuard::take(&self.gates, hash) else {
            return Ok(Gate::Busy);
        };
        let conn = self.acquire_outside_transaction().await?;
        let mut tx = SqliteTx::begin(conn, Some(gate)).await.map_err(classify)?;
        // A file that cannot be written fails here (503), not in the handler's first write.
        sqlx::query(WRITE_PROBE)
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        // Under the write lock: no other transaction can insert the key's record until this one
        // ends, and every record committed before is visible.
        match read_on(tx.conn(), &hash, request.stale_after).await? {
            None => Ok(Gate::Open(tx)),
            Some(record) => {
                tx.rollback().await.map_err(classify)?;
                Ok(Gate::Existing(Some(record)))
            }
        }
    }

    async fn insert_completed(
        &self,
        tx: &mut SqliteTx,
        request: &ClaimRequest<'_>,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let scope = request.scope;
        let hash = scope.hash();
        let done = sqlx::query(INSERT_COMPLETED)
            .bind(&hash[..])
            .bind(&scope.owner)
            .bind(&scope.operation)
            .bind(&scope.resource_scope)
            .bind(scope.key.as_str())
            .bind(request.fingerprint.as_str())
            .bind(request.fingerprint_version)
            .bind(uuid_bytes(request.token.0))
            .bind(i64::from(response.status))
            .bind(headers_json(response)?)
            .bind(&response.body)
            .bind(resource_ref)
            .bind(request.retention.map(millis))
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        Ok(done.rows_affected() == 1)
    }

    async fn complete(
        &self,
        tx: &mut SqliteTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let hash = scope.hash();
        let done = sqlx::query(COMPLETE)
            .bind(&hash[..])
            .bind(uuid_bytes(token.0))
            .bind(i64::from(response.status))
            .bind(headers_json(response)?)
            .bind(&response.body)
            .bind(resource_ref)
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        Ok(done.rows_affected() == 1)
    }

    fn tx_intact(&self, tx: &mut SqliteTx) -> bool {
        tx.intact()
    }

    async fn commit(&self, tx: SqliteTx) -> Result<(), CommitError> {
        if !tx.intact() {
            // A `COMMIT` would end only a savepoint, or nothing at all.
            let _ = tx.rollback().await;
            return Err(CommitError::Rejected(TX_NOT_INTACT.into()));
        }
        tx.commit().await.map_err(|e| match &e {
            // An I/O error while writing the commit to the WAL: it may or may not be there.
            sqlx::Error::Database(db)
                if db
                    .code()
                    .and_then(|c| c.parse::<i64>().ok())
                    .is_some_and(|c| c & 0xff == 10) =>
            {
                CommitError::Unknown(e.to_string())
            }
            // Refused (busy, full, constraint): the dropped handle rolls back whatever is open.
            sqlx::Error::Database(_) => CommitError::Rejected(e.to_string()),
            // The worker went away with the COMMIT queued or unanswered.
            _ => CommitError::Unknown(e.to_string()),
        })
    }

    async fn rollback(&self, tx: SqliteTx) -> Result<(), StoreError> {
        tx.rollback().await.map_err(classify)
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        let hash = scope.hash();
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        sqlx::query(RELEASE)
            .bind(&hash[..])
            .bind(uuid_bytes(token.0))
            .execute(&mut *conn)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        read_on(&mut conn, &scope.hash(), stale_after).await
    }

    async fn tombstone_resource(
        &self,
        tx: &mut SqliteTx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(TOMBSTONE)
            .bind(owner)
            .bind(operation)
            .bind(resource_ref)
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        Ok(done.rows_affected())
    }

    async fn renew_lease(
        &self,
        holder: HolderId,
        expires_after: Duration,
    ) -> Result<bool, StoreError> {
        // One write transaction: one wait for the write lock (two autocommit writes would wait
        // twice) and one sync of the WAL.
        let mut tx = SqliteTx::begin(self.acquire_outside_transaction().await?, None)
            .await
            .map_err(classify)?;
        sqlx::query(RENEW_LEASE)
            .bind(uuid_bytes(holder.0))
            .bind(millis(expires_after))
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        sqlx::query(PURGE_LEASES)
            .bind(uuid_bytes(holder.0))
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(true)
    }

    fn min_lease_expiry(&self) -> Option<Duration> {
        Some(MIN_LEASE_EXPIRY)
    }

    async fn end_lease(&self, holder: HolderId) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        sqlx::query(END_LEASE)
            .bind(uuid_bytes(holder.0))
            .execute(&mut *conn)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        let done = sqlx::query(PURGE)
            .bind(batch_size)
            .execute(&mut *conn)
            .await
            .map_err(classify)?;
        Ok(done.rows_affected())
    }
}

//! The PostgreSQL store (sqlx). Every read and reconciliation goes to the pool it is given, which
//! must point at the writer: a replica's absence of a record never authorises an execution.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgRow, PgTransactionManager};
use sqlx::{AssertSqlSafe, Executor as _, PgConnection, Row, SqlSafeStr, SqlStr};
use sqlx_core::transaction::TransactionManager;

mod error;
mod pooler;
mod warm;
mod writer;

#[cfg(feature = "tokio-postgres")]
pub(in crate::store) use error::classify_sqlstate;
pub(crate) use error::{classify, classify_ref};
#[cfg(feature = "tokio-postgres")]
pub(in crate::store) use pooler::PROBE_ROUNDS;
pub use pooler::{Pooler, PoolerError};
pub use writer::{WriterHosts, WriterUrlError};

use super::rules::{self, ClaimStatements, ClaimStep, RecordRow, ResponseRow};
use super::{ClaimOutcome, ClaimRequest, CommitError, Gate, Store, StoreError};
use super::{ClaimToken, HolderId, Record, RecordState, Scope, TX_NOT_INTACT, gate_key};
use crate::response::StoredResponse;
use warm::{Taken, Warm};

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    /// The business pool, and the connections the store's statements keep from it (warm.rs).
    pool: Arc<Warm>,
    /// The claim pool (the business pool unless [`PgStore::with_claim_pool`]), likewise.
    claim_pool: Arc<Warm>,
    pooler: Pooler,
    synchronous_claims: bool,
    /// Record keys this store saw with a record (shared by its clones): their record is looked
    /// up before a claim or the gate.
    seen: Arc<SeenKeys>,
}

/// The record keys a store has seen with a record: completed by it, or found by a claim, its gate
/// or a look. Only a hint for the order of statements, never an answer: a key in the set is
/// looked up first ([`LOOK`]: a plain read; one round trip if it has a completed record or a
/// tombstone, the claim or the gate after it if not), any other key takes the claim or the gate
/// first (one round trip if it has no record; for the gate, two if it has). At most
/// [`SeenKeys::CAPACITY`] keys; when full it starts again empty.
#[derive(Debug, Default)]
pub(in crate::store) struct SeenKeys(Mutex<HashSet<[u8; 32]>>);

impl SeenKeys {
    const CAPACITY: usize = 65_536;

    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(in crate::store) fn contains(&self, hash: &[u8; 32]) -> bool {
        self.set().contains(hash)
    }

    pub(in crate::store) fn insert(&self, hash: [u8; 32]) {
        let mut set = self.set();
        if set.len() >= Self::CAPACITY {
            set.clear();
        }
        set.insert(hash);
    }

    pub(in crate::store) fn remove(&self, hash: &[u8; 32]) {
        self.set().remove(hash);
    }
}

/// A connection for the store's statements outside the business transaction. Behind a
/// transaction pooler they get a transaction of their own, so that every message of theirs
/// reaches the same server connection (pooler.rs). Otherwise the connection is kept for the
/// store's next statement once these completed (warm.rs); dropped unfinished (an error, or the
/// future cancelled), it goes back to the pool through sqlx's release test.
enum Work<'a> {
    Direct(Taken, &'a Arc<Warm>),
    Wrapped(PgTx),
}

impl<'a> Work<'a> {
    async fn acquire(warm: &'a Arc<Warm>, pooler: Pooler) -> Result<Work<'a>, StoreError> {
        if pooler.wraps() {
            let conn = warm.take().await.map_err(classify)?;
            Ok(Work::Wrapped(
                PgTx::begin(conn, None, None).await.map_err(classify)?,
            ))
        } else {
            Ok(Work::Direct(warm.take().await.map_err(classify)?, warm))
        }
    }

    fn conn(&mut self) -> &mut PgConnection {
        match self {
            Work::Direct(taken, _) => taken.conn(),
            Work::Wrapped(tx) => tx.conn(),
        }
    }

    /// After the statements completed: commits the wrapping transaction, if any, or keeps the
    /// connection for the next.
    async fn finish(self) -> Result<(), StoreError> {
        match self {
            Work::Direct(taken, warm) => {
                warm.keep(taken);
                Ok(())
            }
            Work::Wrapped(tx) => tx.commit().await.map_err(classify),
        }
    }
}

/// The business transaction handlers write through: queries only, no commit or rollback.
///
/// It owns its pooled connection and drives the transaction with sqlx's own transaction manager
/// (so a handler's nested `begin` is a savepoint, as inside a `sqlx::Transaction`), because the
/// in-transaction strategy opens it with a custom `BEGIN` whose failure must not hand an aborted
/// connection back to the pool. Dropped while open, it rolls back, as `sqlx::Transaction` does.
///
/// Cancellation safety (ARCHITECTURE.md, "Cancellation safety"): while a `BEGIN`, `COMMIT` or
/// `ROLLBACK` of its own is unanswered, or after one failed, the server's transaction state is
/// not known (sqlx counts a transaction only once `BEGIN` is answered, and forgets one only once
/// `COMMIT` is). Dropped then (its future cancelled), it closes the connection instead of handing
/// it back to the pool, so no other request's statements can run inside, or after a stray
/// `ROLLBACK` of, this transaction.
///
/// Ended (committed or rolled back, answered) and outside any nested transaction, its connection
/// is kept for the store's next statement (warm.rs) when it came from a store that keeps them.
#[derive(Debug)]
pub struct PgTx {
    /// Present until the transaction is dropped.
    conn: Option<Taken>,
    state: TxState,
    /// Where an ended transaction's connection is kept, if anywhere.
    home: Option<Arc<Warm>>,
}

/// What a [`PgTx`] knows of its connection's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    /// Inside the transaction: dropping queues a `ROLLBACK` (sqlx's depth is right).
    Open,
    /// A transaction-control statement is unanswered or failed: dropping closes the connection.
    InDoubt,
    /// Committed or rolled back, acknowledged: the connection is idle and may be reused.
    Ended,
}

impl PgTx {
    /// The connection to run queries on, inside the attempt's transaction. Issuing transaction
    /// control statements (`COMMIT`, `ROLLBACK`) through it is not supported.
    pub fn conn(&mut self) -> &mut PgConnection {
        let taken = self
            .conn
            .as_mut()
            .expect("a PgTx has its connection until dropped");
        taken.conn()
    }

    /// A connection about to begin: in doubt until the `BEGIN` is answered. `home` keeps it
    /// once the transaction ended.
    fn beginning(conn: Taken, home: Option<Arc<Warm>>) -> PgTx {
        PgTx {
            conn: Some(conn),
            state: TxState::InDoubt,
            home,
        }
    }

    async fn begin(
        conn: Taken,
        home: Option<Arc<Warm>>,
        statement: Option<SqlStr>,
    ) -> Result<PgTx, sqlx::Error> {
        let mut tx = PgTx::beginning(conn, home);
        // Cancelled or failed before the answer: `tx` is dropped in doubt and closes.
        PgTransactionManager::begin(tx.conn(), statement).await?;
        tx.state = TxState::Open;
        Ok(tx)
    }

    /// sqlx's count of transactions on the connection. 1 is this one; more, a savepoint a
    /// handler began and leaked (sqlx's `COMMIT` or `ROLLBACK` would end only that); 0, the
    /// transaction ended under the handler (a nested `begin` that failed or was cancelled at the
    /// first level queues a plain `ROLLBACK`, and the handler's next statements run outside any
    /// transaction).
    fn depth(&mut self) -> usize {
        PgTransactionManager::get_transaction_depth(self.conn())
    }

    /// Whether sqlx counts this transaction alone ([`Store::tx_intact`]).
    fn intact(&mut self) -> bool {
        self.depth() == 1
    }

    async fn commit(mut self) -> Result<(), sqlx::Error> {
        self.state = TxState::InDoubt;
        PgTransactionManager::commit(self.conn()).await?;
        self.state = TxState::Ended;
        Ok(())
    }

    async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.state = TxState::InDoubt;
        match self.depth() {
            1 => PgTransactionManager::rollback(self.conn()).await?,
            // Ended under the handler, a `ROLLBACK` perhaps still queued: nothing of this
            // transaction is left to roll back, and the connection, left in doubt, is closed.
            0 => return Ok(()),
            // The whole transaction, savepoints included. sqlx still counts them: dropped ended
            // with a depth, the connection is closed.
            _ => {
                self.conn().execute("ROLLBACK").await?;
            }
        }
        self.state = TxState::Ended;
        Ok(())
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        let Some(mut taken) = self.conn.take() else {
            return;
        };
        match self.state {
            // Queues the ROLLBACK; the pool flushes it before the connection is reused. Inside a
            // savepoint a handler leaked, that ROLLBACK would end only the savepoint, and a
            // transaction that ended under the handler has none: closing the connection ends
            // whatever is open.
            TxState::Open => {
                if PgTransactionManager::get_transaction_depth(taken.conn()) != 1 {
                    // (`PgTx::intact`, on the connection already taken out of `self`.)
                    taken.conn().close_on_drop();
                } else {
                    PgTransactionManager::start_rollback(taken.conn());
                }
            }
            // The server may be inside a transaction sqlx does not count, or outside one it
            // still counts: the connection must not serve anyone else. Closing it ends any
            // transaction still open on the server (a COMMIT already sent may still land, as
            // with any lost acknowledgement).
            TxState::InDoubt => taken.conn().close_on_drop(),
            // Idle, nothing queued: kept for the store's next statement. Unless sqlx still
            // counts a transaction (a handler's savepoint never ended, so the `COMMIT` or
            // `ROLLBACK` only ended that): the server is still inside the outer one, and the
            // connection must not serve anyone else.
            TxState::Ended => {
                if PgTransactionManager::get_transaction_depth(taken.conn()) != 0 {
                    taken.conn().close_on_drop();
                } else if let Some(home) = &self.home {
                    home.keep(taken);
                }
            }
        }
    }
}

/// SQLSTATEs raised by `idemgen_gate` (migration 0002).
pub(in crate::store) const GATE_BUSY: &str = "IG001";
pub(in crate::store) const GATE_RECORD: &str = "IG002";
/// SQLSTATE `read_only_sql_transaction`: the gate (or any write) on a server in recovery.
pub(in crate::store) const READ_ONLY: &str = "25006";

impl PgStore {
    /// A store on a pool connected to the writer. Claims share that pool: when every connection
    /// is busy with slow business transactions, a duplicate's claim queues behind them instead of
    /// answering 409 at once. Give claims their own small pool with
    /// [`PgStore::with_claim_pool`] to keep duplicates prompt under pool exhaustion.
    pub fn new(pool: PgPool) -> PgStore {
        let pool = Warm::new(pool, false);
        PgStore {
            claim_pool: Arc::clone(&pool),
            pool,
            pooler: Pooler::Direct,
            synchronous_claims: false,
            seen: Arc::default(),
        }
    }

    /// Declares the pooler between the store's pools and PostgreSQL (default
    /// [`Pooler::Direct`]); with [`Pooler::Transaction`], build both pools with
    /// [`Pooler::connect_options`]. [`PgStore::check`] verifies the pools agree, at start-up.
    pub fn with_pooler(mut self, pooler: Pooler) -> PgStore {
        self.pooler = pooler;
        self
    }

    /// The declared pooler.
    pub fn pooler(&self) -> Pooler {
        self.pooler
    }

    /// Checks at start-up that the pools match the declared [`Pooler`], so a misconfiguration
    /// fails here with a clear error instead of under load: a transaction-mode pooler the store
    /// was not told about (detected by behaviour, see [`PoolerError::UndeclaredTransactionPooler`]
    /// for what it can and cannot see), or, with [`Pooler::Transaction`], a pool whose sqlx
    /// statement cache is on.
    pub async fn check(&self) -> Result<(), PoolerError> {
        pooler::check_pool(self.pool.pool(), "business", self.pooler).await?;
        pooler::check_pool(self.claim_pool.pool(), "claim", self.pooler).await
    }

    /// Whether claims wait for their own WAL flush (default `false`: a claim commits with
    /// `synchronous_commit = off`, set for its own transaction only; the business commit's flush
    /// makes it durable before any write of its attempt is acknowledged, see protocol.md,
    /// "Durability of claims"). `true` commits claims as the session's setting says. Takeovers
    /// and releases always follow the session's setting.
    pub fn with_synchronous_claims(mut self, synchronous: bool) -> PgStore {
        self.synchronous_claims = synchronous;
        self
    }

    /// Uses a separate pool for claim and release statements, so that duplicates get their 409
    /// promptly while every business connection is busy (protocol.md, "States and transitions").
    /// The pool must be the store's alone (not the business pool, nor one other code uses): the
    /// store keeps its connections between statements by counting only its own waiters.
    pub fn with_claim_pool(mut self, claim_pool: PgPool) -> PgStore {
        self.claim_pool = Warm::new(claim_pool, true);
        self
    }

    /// Where a business transaction's connection is kept once it ended: not behind a
    /// transaction pooler, whose store statements run in wrapping transactions of their own.
    fn home(&self) -> Option<Arc<Warm>> {
        (!self.pooler.wraps()).then(|| Arc::clone(&self.pool))
    }

    /// The business pool.
    pub fn pool(&self) -> &PgPool {
        self.pool.pool()
    }

    /// Tombstones the record that created `resource_ref`, on a connection inside the caller's own
    /// delete transaction. Returns how many records changed.
    async fn tombstone_resource_on(
        conn: &mut PgConnection,
        persistent: bool,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(TOMBSTONE)
            .bind(owner)
            .bind(operation)
            .bind(resource_ref)
            .persistent(persistent)
            .execute(conn)
            .await
            .map_err(classify)?;
        Ok(done.rows_affected())
    }
}

/// Turns the completed records about a resource into tombstones (`$3`: the resource reference).
pub(in crate::store) const TOMBSTONE: &str = "UPDATE idempotency_records
        SET state = 'tombstone', fingerprint = NULL, fingerprint_version = NULL,
            response_status = NULL, response_headers = NULL, response_body = NULL
      WHERE owner = $1 AND operation = $2 AND resource_ref = $3 AND state = 'completed'";

/// Deletes up to `$1` expired records, skipping rows another transaction holds.
pub(in crate::store) const PURGE_EXPIRED: &str = "DELETE FROM idempotency_records
      WHERE ctid IN (SELECT ctid FROM idempotency_records
                      WHERE expires_at IS NOT NULL AND expires_at < clock_timestamp()
                      ORDER BY expires_at
                      LIMIT $1
                      FOR UPDATE SKIP LOCKED)";

/// Whether a record is a stale claim, given the placeholder of the stale-claim timeout in
/// seconds: claimed longer ago than that, or claimed for a holder whose lease has expired or
/// ended (protocol.md, "Durability of claims"). Both by the database clock. A claim without a
/// holder (an earlier release's, or an executor's without a lease) has the timeout only.
macro_rules! stale {
    ($secs:literal) => {
        concat!(
            "(state = 'claimed'
              AND (claimed_at < clock_timestamp() - make_interval(secs => ",
            $secs,
            ")
                   OR (holder_id IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM idempotency_holders h
                                        WHERE h.holder_id = idempotency_records.holder_id
                                          AND h.expires_at > clock_timestamp()))))"
        )
    };
}

/// Unless the placeholder (a boolean: synchronous claims asked for) is true, makes the claim
/// statement's own transaction commit without waiting for its WAL flush: `set_config(.., true)`
/// is local to the transaction, so it ends with the claim's autocommit (or, behind a transaction
/// pooler, its wrapping transaction) and never reaches the business transaction or another
/// client's server connection. Why it is safe: protocol.md, "Durability of claims". Takeovers
/// and releases keep the session's setting: they are rare, and a release lost in a crash would
/// hold its key, for a holder still alive, until `stale_claim` (behind a transaction pooler a
/// takeover shares the claim's wrapping transaction and commits asynchronously with it: safe, as
/// the taker's business commit flushes it).
macro_rules! async_commit {
    ($sync:literal) => {
        concat!(
            "(CASE WHEN ",
            $sync,
            "::bool THEN NULL ELSE set_config('synchronous_commit', 'off', true) = 'off' END)"
        )
    };
}

/// Every statement finds a record by its key, `scope_hash` (protocol.md, "Record key"), bound
/// as `$1`: one 32-byte primary key instead of four text columns.
pub(in crate::store) const SELECT_RECORD: &str = concat!(
    "SELECT state, fingerprint, fingerprint_version, claim_token, ",
    stale!("$2"),
    " AS stale,
        response_status, response_headers, response_body
   FROM idempotency_records
  WHERE scope_hash = $1"
);

/// The look before a claim or the gate, for keys the store has seen with a record: the key's
/// record, if any, in one round trip that writes nothing, takes no lock and, outside a
/// transaction pooler, begins nothing. A server in recovery returns no row (claims and the gate
/// refuse a standby, and the attempt goes on to them: a lagging record is never replayed). Plain
/// on purpose: a join that also reported the recovery state cost a replay 20 % of its server
/// throughput (pgbench, prepared). A claim it finds is not an answer (the attempt claims or takes
/// the gate, which judge its staleness), so the statement does not judge it: without the lease's
/// sub-query it opens and locks one table, and a replay's look executed in 10.7–11.6 µs instead of
/// 12.6–13.2 (`pg_stat_statements`, two alternated runs of `bench/http/run.sh`).
pub(in crate::store) const LOOK: &str =
    "SELECT state, fingerprint, fingerprint_version, claim_token, false AS stale,
        response_status, response_headers, response_body
   FROM idempotency_records
  WHERE scope_hash = $1 AND NOT pg_is_in_recovery()";

/// One round trip for both outcomes: read the record that holds the key, and insert the claim
/// only when there is none, so replays and duplicates write nothing (no tuple, no transaction
/// id). `inserted` false with no record: the holder committed after this statement's snapshot
/// or released its claim; the caller asks again. The expiry is set here, with the claim, so that
/// completing the record changes no indexed column.
/// The holder's lease is looked up inside the same statement (a claim of a holder whose lease
/// lapsed is reported stale), so claiming stays one round trip.
pub(in crate::store) const CLAIM: &str = concat!(
    "WITH existing AS (
        SELECT state, fingerprint, fingerprint_version, claim_token, ",
    stale!("$8"),
    " AS stale,
               response_status, response_headers, response_body
          FROM idempotency_records
         WHERE scope_hash = $1),
     ins AS (
        INSERT INTO idempotency_records
            (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
             fingerprint_version, claim_token, claimed_at, expires_at, holder_id)
        SELECT $1, $2, $3, $4, $5, 'claimed', $6, $7, $9, clock_timestamp(),
               clock_timestamp() + make_interval(secs => $10), $11
         WHERE NOT EXISTS (SELECT 1 FROM existing)
        ON CONFLICT DO NOTHING
        RETURNING 1)
     SELECT EXISTS (SELECT 1 FROM ins) AS inserted, ",
    async_commit!("$12"),
    " AS async_commit, e.*
       FROM (SELECT 1) AS one
       LEFT JOIN existing e ON true"
);

/// A takeover installs the taker's token and holder, guarded by the old token and by the claim
/// still being stale (its age, or its holder's lease), judged again under the row lock.
pub(in crate::store) const TAKE_OVER: &str = concat!(
    "UPDATE idempotency_records
        SET claim_token = $4, claimed_at = clock_timestamp(), holder_id = $7
      WHERE scope_hash = $1 AND state = 'claimed' AND fingerprint = $2
        AND fingerprint_version = $3 AND claim_token = $5
        AND ",
    stale!("$6")
);

/// Registers or renews a holder's lease, by the database clock; in the same statement, drops
/// leases that lapsed more than an hour ago (their claims are stale either way: a missing lease
/// counts as expired).
pub(in crate::store) const RENEW_LEASE: &str = "WITH purged AS (
        DELETE FROM idempotency_holders
         WHERE expires_at < clock_timestamp() - interval '1 hour' AND holder_id <> $1)
     INSERT INTO idempotency_holders (holder_id, heartbeat_at, expires_at)
     VALUES ($1, clock_timestamp(), clock_timestamp() + make_interval(secs => $2))
     ON CONFLICT (holder_id) DO UPDATE
        SET heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at";

pub(in crate::store) const END_LEASE: &str = "DELETE FROM idempotency_holders WHERE holder_id = $1";

/// [`COMPLETE`]'s text, for the statements built on it.
macro_rules! complete {
    () => {
        "UPDATE idempotency_records
        SET state = 'completed', response_status = $3, response_headers = $4,
            response_body = $5, resource_ref = $6, completed_at = clock_timestamp()
      WHERE scope_hash = $1 AND state = 'claimed' AND claim_token = $2"
    };
}
#[cfg(feature = "tokio-postgres")]
pub(in crate::store) use complete;

/// The separate-claim completion, guarded by the claim token.
const COMPLETE: &str = complete!();

/// [`INSERT_COMPLETED`]'s insert, for the statements built on it.
macro_rules! insert_completed {
    () => {
        "INSERT INTO idempotency_records
        (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
         fingerprint_version, claim_token, claimed_at, response_status, response_headers,
         response_body, resource_ref, completed_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, clock_timestamp(), $9, $10, $11, $12,
             clock_timestamp(), clock_timestamp() + make_interval(secs => $13))"
    };
}
#[cfg(feature = "tokio-postgres")]
pub(in crate::store) use insert_completed;

/// The in-transaction strategy's only write to the records: the completed record, once, behind
/// the gate. The primary key stays the final arbiter: a record that did not go through the gate
/// (a separate claim) makes this insert do nothing, and the attempt rolls back.
const INSERT_COMPLETED: &str = concat!(insert_completed!(), " ON CONFLICT DO NOTHING");

/// A release, guarded by the token. It waits for the record's row lock only while an attempt's
/// transaction still holds it (a commit in doubt, after a 504), and for at most 5 s
/// (`lock_timeout`, set for its own transaction by the uncorrelated subquery, evaluated before
/// the row is locked): then it deletes nothing and fails, and the executor retries it in the
/// background. Without it, a server yet to notice a half-open connection would hold a claim-pool
/// connection until it did (with default TCP keepalives, hours).
pub(in crate::store) const RELEASE: &str = "DELETE FROM idempotency_records
      WHERE scope_hash = $1 AND state = 'claimed' AND claim_token = $2
        AND (SELECT set_config('lock_timeout', '5s', true)) IS NOT NULL";

/// The business transaction's `BEGIN` behind a transaction pooler: the server connection it
/// lands on may hold statements other clients prepared (with the cache off sqlx still names the
/// statements of a handler, per client connection, and never closes them), whose names would
/// collide with this client's.
pub(in crate::store) const BEGIN_DEALLOCATING: &str = "BEGIN; DEALLOCATE ALL";

/// After the gate found a record: `ROLLBACK` and [`SELECT_RECORD`] in one simple-query round trip,
/// with the record key and the stale-claim timeout (in milliseconds) as literals.
pub(in crate::store) fn rollback_and_read(hash: &[u8; 32], stale_after: Duration) -> String {
    let millis = stale_after.as_millis().min(i64::MAX as u128);
    SELECT_RECORD
        .replace("$1", &format!("'\\x{}'::bytea", hex::encode(hash)))
        .replace("$2", &format!("{millis}::float8 / 1000"))
        .replacen("SELECT", "ROLLBACK; SELECT", 1)
}

/// `BEGIN` and the gate in one simple-query round trip. Its only literals are an integer and a
/// hash the runtime computed from the scope, never client text.
pub(in crate::store) fn gated_begin(hash: &[u8; 32], pooler: Pooler) -> String {
    let begin = if pooler == Pooler::Transaction {
        BEGIN_DEALLOCATING
    } else {
        "BEGIN"
    };
    format!(
        "{begin}; SELECT idemgen_gate({}, '\\x{}'::bytea)",
        gate_key(hash),
        hex::encode(hash)
    )
}

fn record_from_row(row: &PgRow) -> Result<Record, StoreError> {
    let get_err = |e: sqlx::Error| StoreError::Other(format!("decoding a record: {e}"));
    let status: Option<i16> = row.try_get("response_status").map_err(get_err)?;
    let response = match status {
        Some(status) => {
            let headers: Option<sqlx::types::Json<Vec<(String, String)>>> =
                row.try_get("response_headers").map_err(get_err)?;
            let body: Option<Vec<u8>> = row.try_get("response_body").map_err(get_err)?;
            Some(ResponseRow {
                status: status.into(),
                headers: headers.map(|h| h.0).unwrap_or_default(),
                body: body.unwrap_or_default(),
            })
        }
        None => None,
    };
    RecordRow {
        state: row.try_get("state").map_err(get_err)?,
        fingerprint: row.try_get("fingerprint").map_err(get_err)?,
        fingerprint_version: row
            .try_get::<Option<i16>, _>("fingerprint_version")
            .map_err(get_err)?
            .map(i64::from),
        claim_token: row.try_get("claim_token").map_err(get_err)?,
        stale: row
            .try_get::<Option<bool>, _>("stale")
            .map_err(get_err)?
            .unwrap_or(false),
        response,
    }
    .into_record()
}

/// The `response_status` column of `response` (`smallint`): a status past it is refused, never
/// written as another.
pub(in crate::store) fn stored_status(response: &StoredResponse) -> Result<i16, StoreError> {
    i16::try_from(response.status)
        .map_err(|_| StoreError::Other(format!("status {} does not fit", response.status)))
}

pub(in crate::store) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

async fn read_on(
    conn: &mut PgConnection,
    persistent: bool,
    hash: &[u8; 32],
    stale_after: Duration,
) -> Result<Option<Record>, StoreError> {
    let row = sqlx::query(SELECT_RECORD)
        .bind(&hash[..])
        .bind(secs(stale_after))
        .persistent(persistent)
        .fetch_optional(conn)
        .await
        .map_err(classify)?;
    row.as_ref().map(record_from_row).transpose()
}

/// [`LOOK`] on `conn`: the key's record, if any (none on a server in recovery).
async fn look_on(
    conn: &mut PgConnection,
    persistent: bool,
    hash: &[u8; 32],
) -> Result<Option<Record>, StoreError> {
    let row = sqlx::query(LOOK)
        .bind(&hash[..])
        .persistent(persistent)
        .fetch_optional(conn)
        .await
        .map_err(classify)?;
    row.as_ref().map(record_from_row).transpose()
}

/// The claim's statements on one connection: [`CLAIM`] (insert or read in one round trip) and
/// [`TAKE_OVER`].
struct PgClaim<'c> {
    conn: &'c mut PgConnection,
    persistent: bool,
    synchronous: bool,
    hash: [u8; 32],
}

#[async_trait]
impl ClaimStatements for PgClaim<'_> {
    async fn insert_or_read(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<ClaimStep, StoreError> {
        let scope = request.scope;
        let row = sqlx::query(CLAIM)
            .bind(&self.hash[..])
            .bind(&scope.owner)
            .bind(&scope.operation)
            .bind(&scope.resource_scope)
            .bind(scope.key.as_str())
            .bind(request.fingerprint.as_str())
            .bind(request.fingerprint_version)
            .bind(secs(request.stale_after))
            .bind(request.token.0)
            .bind(request.retention.map(secs))
            .bind(request.holder.map(|h| h.0))
            .bind(self.synchronous)
            .persistent(self.persistent)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(classify)?;
        let decode = |e: sqlx::Error| StoreError::Other(format!("decoding a claim: {e}"));
        if row.try_get::<bool, _>("inserted").map_err(decode)? {
            return Ok(ClaimStep::Inserted);
        }
        if row
            .try_get::<Option<String>, _>("state")
            .map_err(decode)?
            .is_none()
        {
            return Ok(ClaimStep::Vanished);
        }
        record_from_row(&row).map(ClaimStep::Held)
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
            .bind(request.token.0)
            .bind(held_by.map(|t| t.0))
            .bind(secs(request.stale_after))
            .bind(request.holder.map(|h| h.0))
            .persistent(self.persistent)
            .execute(&mut *self.conn)
            .await
            .map_err(classify)?;
        Ok(taken.rows_affected() == 1)
    }
}

/// Claims the key, or takes over a stale claim with the same fingerprint, on `conn`.
async fn claim_on(
    conn: &mut PgConnection,
    persistent: bool,
    synchronous: bool,
    request: &ClaimRequest<'_>,
) -> Result<ClaimOutcome, StoreError> {
    let mut statements = PgClaim {
        conn,
        persistent,
        synchronous,
        hash: request.scope.hash(),
    };
    rules::claim(&mut statements, request).await
}

#[async_trait]
impl Store for PgStore {
    type Tx = PgTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        let hash = request.scope.hash();
        let persistent = self.pooler.persistent();
        let mut work = Work::acquire(&self.claim_pool, self.pooler).await?;
        let outcome = claim_on(work.conn(), persistent, self.synchronous_claims, request).await?;
        work.finish().await?;
        if let ClaimOutcome::Existing(record) = &outcome
            && record.state != RecordState::Claimed
        {
            self.seen.insert(hash);
        }
        Ok(outcome)
    }

    /// A key this store saw with a record (ARCHITECTURE.md, "Replays by one read") is looked up
    /// by `LOOK`: a replay, a mismatch or a tombstone is answered from one
    /// plain read, with no claim statement, no gate, no transaction and no error. Any other key
    /// is not looked up (`None`): its claim or gate is its first round trip, as for a fresh key.
    /// Behind a transaction pooler the read would need a transaction of its own (two more round
    /// trips), so there nothing is looked up.
    async fn look(
        &self,
        scope: &Scope,
        _stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let hash = scope.hash();
        if self.pooler.wraps() || !self.seen.contains(&hash) {
            return Ok(None);
        }
        // The business pool while it has an idle connection (a replay is a read as light as a
        // GET, and the claim pool is small), else the claim pool: under exhaustion a replay is
        // answered as promptly as a duplicate's 409.
        let warm = if self.pool.has_idle() {
            &self.pool
        } else {
            &self.claim_pool
        };
        let mut work = Work::acquire(warm, self.pooler).await?;
        let found = look_on(work.conn(), self.pooler.persistent(), &hash).await?;
        work.finish().await?;
        match found {
            Some(record) if record.state != RecordState::Claimed => Ok(Some(record)),
            Some(_) => Ok(None),
            None => {
                self.seen.remove(&hash);
                Ok(None)
            }
        }
    }

    async fn begin(&self) -> Result<PgTx, StoreError> {
        let conn = self.pool.take().await.map_err(classify)?;
        let statement = (self.pooler == Pooler::Transaction)
            .then(|| AssertSqlSafe(BEGIN_DEALLOCATING).into_sql_str());
        PgTx::begin(conn, self.home(), statement)
            .await
            .map_err(classify)
    }

    async fn begin_gated(&self, request: &ClaimRequest<'_>) -> Result<Gate<PgTx>, StoreError> {
        let hash = request.scope.hash();
        let conn = self.pool.take().await.map_err(classify)?;
        let statement = AssertSqlSafe(gated_begin(&hash, self.pooler)).into_sql_str();
        // In doubt until the gate's transaction is known open or ended: cancelled or failed in
        // between, `tx` closes the connection (it may hold the key's advisory lock).
        let mut tx = PgTx::beginning(conn, self.home());
        let failure = match PgTransactionManager::begin(tx.conn(), Some(statement)).await {
            Ok(()) => {
                tx.state = TxState::Open;
                return Ok(Gate::Open(tx));
            }
            Err(e) => e,
        };
        // The gate failed the transaction (or BEGIN itself failed): end it on this connection
        // before anything else runs on it (a ROLLBACK without a transaction only warns).
        let code = match &failure {
            sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
            _ => None,
        };
        let gate = match code.as_deref() {
            Some(GATE_BUSY) => {
                tx.conn().execute("ROLLBACK").await.map_err(classify)?;
                Ok(Gate::Busy)
            }
            Some(GATE_RECORD) => {
                // The rollback and the read in one round trip (literals computed by the runtime).
                let statement = AssertSqlSafe(rollback_and_read(&hash, request.stale_after));
                let row = sqlx::raw_sql(statement)
                    .fetch_optional(tx.conn())
                    .await
                    .map_err(classify)?;
                // Its next attempts look first (`Store::look`): one round trip instead of two.
                self.seen.insert(hash);
                Ok(Gate::Existing(
                    row.as_ref().map(record_from_row).transpose()?,
                ))
            }
            Some(READ_ONLY) => {
                tx.conn().execute("ROLLBACK").await.map_err(classify)?;
                Err(classify(failure))
            }
            // Unknown state: `tx` stays in doubt and closes the connection.
            _ => return Err(classify(failure)),
        };
        // Rolled back and answered: the connection is idle again.
        tx.state = TxState::Ended;
        gate
    }

    async fn insert_completed(
        &self,
        tx: &mut PgTx,
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
            .bind(request.token.0)
            .bind(stored_status(response)?)
            .bind(sqlx::types::Json(&response.headers))
            .bind(&response.body)
            .bind(resource_ref)
            .bind(request.retention.map(secs))
            .persistent(self.pooler.persistent())
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        // A retry of this key looks before the gate (a hint: the transaction may still roll back).
        self.seen.insert(hash);
        Ok(done.rows_affected() == 1)
    }

    async fn complete(
        &self,
        tx: &mut PgTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let hash = scope.hash();
        // A retry of this key looks first (a hint: the transaction may still roll back).
        self.seen.insert(hash);
        let done = sqlx::query(COMPLETE)
            .bind(&hash[..])
            .bind(token.0)
            .bind(stored_status(response)?)
            .bind(sqlx::types::Json(&response.headers))
            .bind(&response.body)
            .bind(resource_ref)
            .persistent(self.pooler.persistent())
            .execute(tx.conn())
            .await
            .map_err(classify)?;
        Ok(done.rows_affected() == 1)
    }

    fn tx_intact(&self, tx: &mut PgTx) -> bool {
        tx.intact()
    }

    async fn commit(&self, mut tx: PgTx) -> Result<(), CommitError> {
        if !tx.intact() {
            // A `COMMIT` would end only a savepoint, or nothing at all.
            let _ = tx.rollback().await;
            return Err(CommitError::Rejected(TX_NOT_INTACT.into()));
        }
        tx.commit().await.map_err(|e| match e {
            sqlx::Error::Database(_) => CommitError::Rejected(e.to_string()),
            other => CommitError::Unknown(other.to_string()),
        })
    }

    async fn rollback(&self, tx: PgTx) -> Result<(), StoreError> {
        tx.rollback().await.map_err(classify)
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        let hash = scope.hash();
        let mut work = Work::acquire(&self.claim_pool, self.pooler).await?;
        sqlx::query(RELEASE)
            .bind(&hash[..])
            .bind(token.0)
            .persistent(self.pooler.persistent())
            .execute(work.conn())
            .await
            .map_err(classify)?;
        work.finish().await
    }

    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let mut work = Work::acquire(&self.pool, self.pooler).await?;
        let conn = work.conn();
        // Reads decide outcomes (a lost commit acknowledgement, a lost takeover): never from a
        // server in recovery, whose records may lag the writer's.
        let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .persistent(self.pooler.persistent())
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        if in_recovery {
            return Err(StoreError::Unavailable(
                "the store's server is in recovery (a standby), not the writer".into(),
            ));
        }
        let record = read_on(conn, self.pooler.persistent(), &scope.hash(), stale_after).await?;
        work.finish().await?;
        Ok(record)
    }

    async fn tombstone_resource(
        &self,
        tx: &mut PgTx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        Self::tombstone_resource_on(
            tx.conn(),
            self.pooler.persistent(),
            owner,
            operation,
            resource_ref,
        )
        .await
    }

    async fn renew_lease(
        &self,
        holder: HolderId,
        expires_after: Duration,
    ) -> Result<bool, StoreError> {
        let mut work = Work::acquire(&self.claim_pool, self.pooler).await?;
        sqlx::query(RENEW_LEASE)
            .bind(holder.0)
            .bind(secs(expires_after))
            .persistent(self.pooler.persistent())
            .execute(work.conn())
            .await
            .map_err(classify)?;
        work.finish().await?;
        Ok(true)
    }

    async fn end_lease(&self, holder: HolderId) -> Result<(), StoreError> {
        let mut work = Work::acquire(&self.claim_pool, self.pooler).await?;
        sqlx::query(END_LEASE)
            .bind(holder.0)
            .persistent(self.pooler.persistent())
            .execute(work.conn())
            .await
            .map_err(classify)?;
        work.finish().await
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let mut work = Work::acquire(&self.pool, self.pooler).await?;
        let done = sqlx::query(PURGE_EXPIRED)
            .bind(batch_size)
            .persistent(self.pooler.persistent())
            .execute(work.conn())
            .await
            .map_err(classify)?;
        work.finish().await?;
        Ok(done.rows_affected())
    }
}

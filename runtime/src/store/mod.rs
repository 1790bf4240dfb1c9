//! The store interface the executor runs on, and its implementations.
//!
//! [`PgStore`] is the server one; `SqliteStore` (feature `sqlite`) the embedded one, a file and no
//! server; [`MemoryStore`] exists for users' unit tests. All pass the same contract suite
//! (`runtime/tests/integration/contract.rs`), under both strategies.

use std::time::Duration;

use async_trait::async_trait;

use idemgen_protocol::Fingerprint;

use crate::response::StoredResponse;

mod memory;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
mod record;
// Without a SQL backend only the takeover predicate is used (by the memory store).
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) mod rules;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
#[cfg(feature = "tokio-postgres")]
mod tokio_pg;

pub use memory::{MemoryStore, MemoryTx};
#[cfg(feature = "postgres")]
pub use postgres::{PgStore, PgTx, Pooler, PoolerError, WriterHosts, WriterUrlError};
pub use record::{ClaimToken, HolderId, Record, RecordState, SCOPE_HASH_TAG, Scope, gate_key};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SqliteTx};
#[cfg(feature = "tokio-postgres")]
pub use tokio_pg::{TokioPgStore, TokioPgTx};

/// Why a store refused to commit a transaction that is not intact ([`Store::tx_intact`]).
pub(crate) const TX_NOT_INTACT: &str = "the transaction was left inside a nested transaction \
     (savepoint) or ended under the handler (a nested begin that failed); it was rolled back";

/// What an attempt asks for when it claims a key.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    /// The key's scope.
    pub scope: &'a Scope,
    /// The attempt's request fingerprint.
    pub fingerprint: &'a Fingerprint,
    /// The operation's fingerprint version.
    pub fingerprint_version: i16,
    /// The attempt's token.
    pub token: ClaimToken,
    /// The holder (the executor's lease) the claim is taken for; `None`: no lease, the claim
    /// goes stale after `stale_after` only.
    pub holder: Option<HolderId>,
    /// A claim older than this may be taken over (and so may one whose holder's lease expired).
    pub stale_after: Duration,
    /// How long the record is kept (its expiry is set when the key is claimed, so completing a
    /// record changes no indexed column); `None` keeps it forever.
    pub retention: Option<Duration>,
}

/// The result of a claim.
#[derive(Debug, Clone)]
pub enum ClaimOutcome {
    /// This attempt holds the key.
    Claimed {
        /// Whether it took over a stale claim of another attempt.
        taken_over: bool,
    },
    /// Another record holds the key; the executor decides what it means.
    Existing(Record),
}

/// What opening the attempt's transaction behind the key's gate found (in-transaction strategy).
#[derive(Debug)]
pub enum Gate<Tx> {
    /// The transaction is open, this attempt holds the key's gate until it ends, and the key has
    /// no record: run the handler, then [`Store::insert_completed`].
    Open(Tx),
    /// Another attempt's unfinished transaction holds the gate: ask again or answer 409.
    Busy,
    /// The key has a record, read once the gated transaction was rolled back (`None`: it was
    /// released in between; ask again): two round trips, which [`Store::look`] spares a key the
    /// store has seen.
    Existing(Option<Record>),
}

/// A store failure. No variant carries text meant for clients.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached (connection refused, reset, pool timeout, shutdown).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A statement waited for a lock longer than `lock_timeout` allows.
    #[error("timed out waiting for a lock")]
    LockTimeout,
    /// A value the database refused as invalid (PostgreSQL's data exceptions, SQLSTATE class
    /// 22, e.g. a NUL character in text): from a handler's statement, the request's value.
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// Any other failure (constraint violation, unexpected data).
    #[error("store error: {0}")]
    Other(String),
}

/// A driver error classified by the backend it came from (each backend's codes have one home:
/// `postgres/error.rs`, `sqlite/error.rs`): how the pipeline answers a handler's failed
/// statement, as it answers the store's own.
pub(crate) fn classify_driver(e: &sqlx::Error) -> StoreError {
    #[cfg(feature = "sqlite")]
    if sqlite::is_sqlite(e) {
        return sqlite::classify_ref(e);
    }
    #[cfg(feature = "postgres")]
    return postgres::classify_ref(e);
    #[cfg(not(feature = "postgres"))]
    StoreError::Other(e.to_string())
}

/// A handler's error, when it is a driver's ([`classify_driver`]; tokio-postgres's and its
/// deadpool pool's too, with that feature), classified as the store's own.
pub(crate) fn classify_handler_driver(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> Option<StoreError> {
    if let Some(e) = error.downcast_ref::<sqlx::Error>() {
        return Some(classify_driver(e));
    }
    #[cfg(feature = "tokio-postgres")]
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        return Some(tokio_pg::classify_ref(e));
    }
    #[cfg(feature = "tokio-postgres")]
    if let Some(e) = error.downcast_ref::<deadpool_postgres::PoolError>() {
        return Some(tokio_pg::pool_error_ref(e));
    }
    None
}

/// A handler's error as the logs get it: with the server's message, which a tokio-postgres error
/// displays only in its source.
pub(crate) fn describe_handler_error(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> String {
    #[cfg(feature = "tokio-postgres")]
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        return tokio_pg::describe(e);
    }
    #[cfg(feature = "tokio-postgres")]
    if let Some(deadpool_postgres::PoolError::Backend(e)) =
        error.downcast_ref::<deadpool_postgres::PoolError>()
    {
        return tokio_pg::describe(e);
    }
    error.to_string()
}

/// Why a commit did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The server answered that the transaction was rolled back: nothing was committed.
    #[error("commit rejected: {0}")]
    Rejected(String),
    /// The acknowledgement was lost: the transaction may or may not have committed.
    #[error("commit outcome unknown: {0}")]
    Unknown(String),
}

/// The persistence the executor needs. Implementations must make `complete` and the business
/// writes made through `Tx` commit or roll back together.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The transaction-bound handle handlers write through. It offers no commit or rollback.
    type Tx: Send + 'static;

    /// Separate-claim strategy, step 1: claims the key in one short statement of its own, or
    /// takes over a claim older than `stale_after` with the request's token, or reports what
    /// holds the key.
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError>;

    /// [`Store::claim`], and for a store that can begin the attempt's transaction in the claim's
    /// round trip (`TokioPgStore::with_begin_at_claim`), that transaction when this attempt holds
    /// the key (`None`: it begins when the handler first touches the database, as always). The
    /// claim commits on its own before the transaction begins, on the same connection. The
    /// default: [`Store::claim`], no transaction.
    async fn claim_and_begin(
        &self,
        request: &ClaimRequest<'_>,
    ) -> Result<(ClaimOutcome, Option<Self::Tx>), StoreError> {
        Ok((self.claim(request).await?, None))
    }

    /// Before an attempt claims or takes the gate: the key's completed record or tombstone when
    /// the store can tell by one cheap read (`PgStore`: a key it has seen with a record), else
    /// `None` (no record, a claim, or not looked), and the attempt goes on as always. It writes
    /// nothing and takes no lock, so the executor runs it in the request's own task (no attempt
    /// task is spawned for a replay): cancelled, it leaves nothing behind. The default looks
    /// at nothing.
    async fn look(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let _ = (scope, stale_after);
        Ok(None)
    }

    /// Opens a business transaction.
    async fn begin(&self) -> Result<Self::Tx, StoreError>;

    /// In-transaction strategy, step 1: opens the attempt's transaction and takes the key's
    /// gate in it, writing nothing. It never waits for another attempt holding the gate: it
    /// answers [`Gate::Busy`], so duplicates hold no connection while the first attempt runs.
    async fn begin_gated(&self, request: &ClaimRequest<'_>) -> Result<Gate<Self::Tx>, StoreError>;

    /// In-transaction strategy, step 2: inserts the completed record inside `tx` (opened by
    /// [`Store::begin_gated`]), with the request's token. `Ok(false)`: the key has a record after
    /// all (one that did not go through the gate); the caller must roll back and answer from it.
    async fn insert_completed(
        &self,
        tx: &mut Self::Tx,
        request: &ClaimRequest<'_>,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Separate-claim strategy, step 2: completes the claimed record inside `tx`, guarded by
    /// `token`. `Ok(false)`: the claim is no longer this attempt's (it was taken over), and the
    /// caller must roll back.
    async fn complete(
        &self,
        tx: &mut Self::Tx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Whether `tx` is still exactly the transaction the store opened, as far as the driver
    /// counts transactions. Not when its handler left it inside a nested transaction (a
    /// savepoint whose handle was leaked, `mem::forget`: committing would end only the
    /// savepoint), nor, on PostgreSQL, when the transaction ended under the handler (sqlx rolls
    /// the whole transaction back when a nested `begin` fails or is cancelled at the first
    /// level, and what follows runs outside it). The executor abandons such an attempt instead
    /// of completing it (500). Not seen: a transaction SQLite rolled back by itself (a full disk,
    /// an I/O error) while the driver still counts it, whose handler ignored the error. The
    /// default: always (a store without nested transactions).
    fn tx_intact(&self, tx: &mut Self::Tx) -> bool {
        let _ = tx;
        true
    }

    /// Commits `tx`. A `tx` that is not intact ([`Store::tx_intact`]) is rolled back instead,
    /// and the commit [`CommitError::Rejected`].
    async fn commit(&self, tx: Self::Tx) -> Result<(), CommitError>;

    /// Rolls `tx` back, nested transactions left open included.
    async fn rollback(&self, tx: Self::Tx) -> Result<(), StoreError>;

    /// Deletes this attempt's claim (after a non-2xx result or a failure), so a retry executes.
    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError>;

    /// Reads the record of a key on the writer (`stale` is computed against `stale_after`).
    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError>;

    /// Turns the completed record that created `resource_ref` into a tombstone, inside `tx`
    /// (the caller's delete transaction). Returns how many records changed.
    async fn tombstone_resource(
        &self,
        tx: &mut Self::Tx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError>;

    /// Registers or renews the lease of `holder` until `expires_after` from now, by the store's
    /// clock. Returns whether the store keeps leases: while it does, a claim naming `holder`
    /// whose lease has not been renewed within `expires_after` (or was ended) is stale at once.
    /// The default keeps none (claims go stale after `stale_after` only).
    async fn renew_lease(
        &self,
        holder: HolderId,
        expires_after: Duration,
    ) -> Result<bool, StoreError> {
        let _ = (holder, expires_after);
        Ok(false)
    }

    /// The shortest lease expiry this store keeps leases reliably with, if it has one:
    /// [`crate::Executor::new`] widens a shorter `lease_expiry` to it (with a warning). A store
    /// whose renewal may wait for a lock (SQLite's one writer) needs an expiry well above that
    /// wait, or a live holder's lease lapses while its renewal queues. The default: none.
    fn min_lease_expiry(&self) -> Option<Duration> {
        None
    }

    /// Ends the lease of `holder` (a clean shutdown): its remaining claims are stale at once.
    async fn end_lease(&self, holder: HolderId) -> Result<(), StoreError> {
        let _ = holder;
        Ok(())
    }

    /// Deletes up to `batch_size` expired records without waiting on locked rows; returns how
    /// many were deleted.
    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError>;
}

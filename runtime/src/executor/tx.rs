//! The handle a handler writes through: the attempt's transaction, begun lazily under the
//! separate-claim strategy, with the resource reference and the attempt's derived keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use idemgen_protocol::DerivedKey;

use crate::auth::Principal;
use crate::operation::Idempotent;
use crate::store::{CommitError, Scope, Store, StoreError};

/// The handle a handler writes through: the store's transaction, plus the reference of the
/// resource the attempt creates (so that deleting it later can tombstone the record) and, inside
/// an idempotent attempt, the attempt's scope (for [`TxHandle::derive_key`]).
///
/// Handlers name it by their API's store only (`&mut TxHandle<Self::Store>`); with
/// [`PgStore`](crate::PgStore), [`TxHandle::conn`] is the PostgreSQL connection inside the
/// attempt's transaction. It offers queries, never commit or rollback.
///
/// **When the transaction begins** (and so when the attempt holds a pool connection), as
/// [`TxHandle::is_open`] tells:
/// - separate-claim strategy (the default): when the handler first touches the database
///   ([`TxHandle::conn`], [`TxHandle::tx`], [`TxHandle::tombstone`]), else at the completion. A
///   downstream call made before the first write holds no connection, so slow downstreams
///   cannot exhaust the pool (docs/downstream.md). A store that begins it with the claim
///   (`TokioPgStore::with_begin_at_claim`, for handlers that write first) has it open before the
///   handler runs;
/// - in-transaction strategy: before the handler runs (the transaction holds the key's gate),
///   so a downstream call holds a connection for its whole duration;
/// - [`TxHandle::begin`] (outside an attempt): at once.
pub struct TxHandle<S: Store> {
    pub(super) tx: Option<S::Tx>,
    pub(super) store: Arc<S>,
    pub(super) resource_ref: Option<String>,
    /// The attempt's scope; `None` outside an idempotent attempt.
    pub(super) scope: Option<Scope>,
    /// Why beginning the transaction lazily failed, if it did: the attempt then fails with the
    /// store (503, or 504 after a derived key) whatever the handler returned.
    pub(super) begin_failed: Option<String>,
    /// Whether the handler asked for a derived key: it may have made a downstream call, so a
    /// store failure after it is an unknown outcome (504), not "nothing executed" (503).
    pub(super) derived: AtomicBool,
}

impl<S: Store> std::fmt::Debug for TxHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxHandle")
            .field("open", &self.tx.is_some())
            .field("resource_ref", &self.resource_ref)
            .finish_non_exhaustive()
    }
}

impl<S: Store> TxHandle<S> {
    /// Opens a transaction on `store` outside any attempt: for the request pipeline's
    /// transactional operations and for tests of handlers (commit it with [`TxHandle::commit`];
    /// dropping it rolls back). It has no attempt scope: [`TxHandle::derive_key`] answers `None`.
    pub async fn begin(store: Arc<S>) -> Result<TxHandle<S>, StoreError> {
        let tx = store.begin().await?;
        Ok(TxHandle {
            tx: Some(tx),
            store,
            resource_ref: None,
            scope: None,
            begin_failed: None,
            derived: AtomicBool::new(false),
        })
    }

    /// A handle for an attempt: `tx` already open (in-transaction strategy) or `None`, begun on
    /// first use (separate-claim strategy).
    pub(super) fn for_attempt(store: Arc<S>, tx: Option<S::Tx>, scope: Scope) -> TxHandle<S> {
        TxHandle {
            tx,
            store,
            resource_ref: None,
            scope: Some(scope),
            begin_failed: None,
            derived: AtomicBool::new(false),
        }
    }

    /// Commits a transaction opened with [`TxHandle::begin`].
    pub async fn commit(self) -> Result<(), CommitError> {
        match self.tx {
            Some(tx) => self.store.commit(tx).await,
            None => Ok(()),
        }
    }

    /// Whether the store's transaction, if begun, is still the one it opened
    /// ([`Store::tx_intact`]).
    pub(crate) fn intact(&mut self) -> bool {
        match self.tx.as_mut() {
            Some(tx) => self.store.tx_intact(tx),
            None => true,
        }
    }

    /// Rolls back a transaction opened with [`TxHandle::begin`].
    pub async fn rollback(self) -> Result<(), StoreError> {
        match self.tx {
            Some(tx) => self.store.rollback(tx).await,
            None => Ok(()),
        }
    }

    /// The store's transaction, begun now if it was not yet (see the type's docs). A failure to
    /// begin it fails the attempt, whatever the handler returns: 503 (nothing of this service was
    /// written), or 504 when the handler asked for a derived key (a downstream call it made may
    /// have executed: the client's retry with the same key learns its outcome).
    pub async fn tx(&mut self) -> Result<&mut S::Tx, StoreError> {
        let tx = match self.tx.take() {
            Some(tx) => tx,
            None => match self.store.begin().await {
                Ok(tx) => tx,
                Err(e) => {
                    self.begin_failed = Some(e.to_string());
                    return Err(e);
                }
            },
        };
        Ok(self.tx.insert(tx))
    }

    /// Whether the transaction is open, holding a pool connection: always under the
    /// in-transaction strategy and after [`TxHandle::begin`]; under the separate-claim strategy
    /// only once the handler touched the database (from the start when the store began it with
    /// the claim). Make downstream calls while this is `false`
    /// (docs/downstream.md, "Ordering").
    pub fn is_open(&self) -> bool {
        self.tx.is_some()
    }

    /// The key for the downstream step `step` of this attempt's logical request (protocol.md,
    /// "Derived keys"): the same on every attempt with the same owner, operation, resource scope
    /// and client key, whatever the process or strategy; different for every other step or
    /// request. Pass it to an idempotent downstream call (`CallOptions::from(&key)` for an
    /// idemgen client; [`DerivedKey::uuid`] for an API that takes UUIDs only). `None` outside an
    /// idempotent attempt ([`TxHandle::begin`], operations without `x-idempotent`), which has no
    /// client key to derive from.
    ///
    /// From then on a failure of this service's store fails the attempt with 504 (outcome
    /// unknown) rather than 503: the downstream call may have executed, and only a retry with the
    /// same key re-sends the same derived key.
    pub fn derive_key(&self, step: &str) -> Option<DerivedKey> {
        let scope = self.scope.as_ref()?;
        self.derived.store(true, Ordering::SeqCst);
        Some(DerivedKey::new(
            &scope.owner,
            &scope.operation,
            &scope.resource_scope,
            &scope.key,
            step,
        ))
    }

    /// The scope of the attempt this handle serves; `None` outside an idempotent attempt.
    pub fn scope(&self) -> Option<&Scope> {
        self.scope.as_ref()
    }

    /// Records the reference of the resource this attempt creates (e.g. its id), so that deleting
    /// the resource later can turn this key's record into a tombstone (410 to late retries).
    pub fn set_resource_ref(&mut self, resource_ref: impl Into<String>) {
        self.resource_ref = Some(resource_ref.into());
    }

    /// The resource reference set by [`TxHandle::set_resource_ref`].
    pub fn resource_ref(&self) -> Option<&str> {
        self.resource_ref.as_deref()
    }

    /// Inside this transaction, turns the completed records of operation `Op` about
    /// `resource_ref` for `principal` into tombstones: a late retry is answered 410 instead of
    /// replaying a result about a resource that no longer exists. Typed by the operation, so a
    /// renamed or non-idempotent operation does not compile. Returns how many records changed.
    ///
    /// An operation with `x-idempotency-tombstones` has this done by the pipeline for every
    /// operation it lists and the resource its path names; call it for a resource referenced
    /// otherwise.
    pub async fn tombstone<Op: Idempotent>(
        &mut self,
        principal: &Principal,
        resource_ref: impl std::fmt::Display,
    ) -> Result<u64, StoreError> {
        self.tombstone_records(&principal.owner, Op::ID, &resource_ref.to_string())
            .await
    }

    /// [`TxHandle::tombstone`] by operation id, for the pipeline.
    pub(crate) async fn tombstone_records(
        &mut self,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        let store = Arc::clone(&self.store);
        let tx = self.tx().await?;
        // Outside the transaction it ended under the handler, the tombstone would commit on its
        // own while the handler's writes were rolled back.
        if !store.tx_intact(tx) {
            return Err(StoreError::Other(crate::store::TX_NOT_INTACT.into()));
        }
        store
            .tombstone_resource(tx, owner, operation, resource_ref)
            .await
    }
}

#[cfg(feature = "postgres")]
impl TxHandle<crate::store::PgStore> {
    /// The PostgreSQL connection inside the attempt's transaction, which begins now if it was
    /// not yet (see the type's docs: under the separate-claim strategy this is when the attempt
    /// starts holding a pool connection).
    pub async fn conn(&mut self) -> Result<&mut sqlx::PgConnection, StoreError> {
        Ok(self.tx().await?.conn())
    }
}

#[cfg(feature = "sqlite")]
impl TxHandle<crate::store::SqliteStore> {
    /// The SQLite connection inside the attempt's write transaction (`BEGIN IMMEDIATE`), which
    /// begins now if it was not yet: from here to the commit the attempt holds the file's write
    /// lock, so other writers wait (see `SqliteStore`).
    pub async fn conn(&mut self) -> Result<&mut sqlx_sqlite::SqliteConnection, StoreError> {
        Ok(self.tx().await?.conn())
    }
}

#[cfg(feature = "tokio-postgres")]
impl TxHandle<crate::store::TokioPgStore> {
    /// The pooled tokio-postgres client inside the attempt's transaction, which begins now if it
    /// was not yet (see the type's docs). Statements polled together share a round trip
    /// (`tokio::join!`), and `prepare_cached` prepares a statement once per connection.
    pub async fn conn(&mut self) -> Result<&deadpool_postgres::ClientWrapper, StoreError> {
        Ok(self.tx().await?.client())
    }
}

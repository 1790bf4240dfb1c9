//! Running the PostgreSQL store through a connection pooler (PgBouncer): the one option,
//! [`Pooler`], and the start-up check that the pools and the pooler agree with it
//! ([`crate::PgStore::check`]).
//!
//! Through a pooler in *transaction* mode, a client holds a server connection only for one
//! transaction; between transactions (and after every `Sync` of a statement outside one) its next
//! message may reach another server connection. So, with [`Pooler::Transaction`]:
//!
//! * every store statement runs inside a transaction (the store's own statements outside the
//!   business transaction — claim, release, read, leases, cleanup — are wrapped in one), because
//!   sqlx sends `Parse`/`Describe`/`Sync`, then `Bind`/`Execute`/`Sync`: two round trips a
//!   pooler may route to two servers;
//! * the store's statements are unnamed (`persistent(false)`), and the pools must have sqlx's
//!   statement cache off ([`Pooler::connect_options`]: `statement_cache_capacity(0)`), since a
//!   cached statement exists on one server connection only;
//! * the business transaction begins with `DEALLOCATE ALL`: with the cache off, sqlx still names
//!   each statement of a handler (`sqlx_s_N`, numbered per client connection) and never closes
//!   it, so a name another client left on that server connection would collide;
//! * locks are transaction-scoped only (the in-transaction gate's `pg_try_advisory_xact_lock`,
//!   holder leases are rows, not locks) and nothing sets session state: that holds in every mode.
//!
//! Session mode needs nothing of this ([`Pooler::Session`] behaves as [`Pooler::Direct`]).
//! sqlx's migrator takes a session advisory lock: run migrations on a direct URL (or through a
//! session-mode pooler), never through a transaction-mode one.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{Executor as _, Row};

use super::error::classify;
use crate::store::StoreError;

/// What sits between the store's pools and PostgreSQL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooler {
    /// The pools connect to PostgreSQL itself (the default).
    #[default]
    Direct,
    /// A pooler in session mode (PgBouncer `pool_mode = session`): a client keeps its server
    /// connection, so the store behaves as [`Pooler::Direct`].
    Session,
    /// A pooler in transaction mode (PgBouncer `pool_mode = transaction`): see the module
    /// documentation. The pools must be built with [`Pooler::connect_options`].
    Transaction,
}

impl Pooler {
    /// The connect options the store's pools need behind this pooler: with
    /// [`Pooler::Transaction`], sqlx's prepared-statement cache off.
    pub fn connect_options(self, options: PgConnectOptions) -> PgConnectOptions {
        match self {
            Pooler::Transaction => options.statement_cache_capacity(0),
            Pooler::Direct | Pooler::Session => options,
        }
    }

    /// Whether statements are prepared as named, cached statements.
    pub(crate) fn persistent(self) -> bool {
        self != Pooler::Transaction
    }

    /// Whether store statements outside the business transaction get a transaction of their own.
    pub(crate) fn wraps(self) -> bool {
        self == Pooler::Transaction
    }
}

/// Why [`crate::PgStore::check`] refused a store's configuration.
#[derive(Debug, thiserror::Error)]
pub enum PoolerError {
    /// Two connections of the pool were served by the same server connection: a pooler in
    /// transaction (or statement) mode, which the store was not told about.
    #[error(
        "the {pool} pool reaches PostgreSQL through a pooler in transaction mode (two of its \
         connections were served by one server connection, backend pid {pid}), but the store is \
         configured with {configured:?}: build the pools with \
         `Pooler::Transaction.connect_options(..)` and the store with \
         `.with_pooler(Pooler::Transaction)`, or use session pooling"
    )]
    UndeclaredTransactionPooler {
        /// `business` or `claim`.
        pool: &'static str,
        /// The server process both connections reached.
        pid: i32,
        /// The store's [`Pooler`].
        configured: Pooler,
    },
    /// The store is configured for a transaction pooler, but the pool caches prepared
    /// statements (a cached statement exists on one server connection only).
    #[error(
        "the store is configured with Pooler::Transaction, but the {pool} pool caches prepared \
         statements: build its connect options with `Pooler::Transaction.connect_options(..)` \
         (statement_cache_capacity 0)"
    )]
    StatementCacheOn {
        /// `business` or `claim`.
        pool: &'static str,
    },
    /// A `TokioPgStore` pool not declared behind a transaction pooler was served by one (two of
    /// its connections by one server connection): its statements are prepared on their
    /// connection, which such a pooler does not keep.
    #[error(
        "the {pool} pool reaches PostgreSQL through a pooler in transaction mode (two of its \
         connections were served by one server connection, backend pid {pid}), undeclared: \
         TokioPgStore prepares its statements on its connections unless built with \
         `with_pooler(Pooler::Transaction)`, which sends them unnamed"
    )]
    TransactionPoolerUnsupported {
        /// `business` or `claim`.
        pool: &'static str,
        /// The server process both connections reached.
        pid: i32,
    },
    /// The check itself could not run.
    #[error("checking the {pool} pool: {source}")]
    Store {
        /// `business` or `claim`.
        pool: &'static str,
        /// What failed.
        source: StoreError,
    },
}

/// How many times the probe alternates between its two connections.
pub(in crate::store) const PROBE_ROUNDS: usize = 4;

/// Checks one pool against `pooler`.
///
/// A transaction-mode pooler is detected by behaviour: two connections held at once by this
/// check each ask for their server's backend pid, alternately; directly or through a session
/// pooler they are two sessions and never share a pid, through a transaction pooler the second
/// is served by the server connection the first just released (PgBouncer reuses the most
/// recently released server connection first). Not detectable: a transaction pooler that never
/// hands the two probe connections the same server connection (e.g. `server_round_robin = 1`
/// with many idle servers), and a session pooler (which needs nothing).
pub(crate) async fn check_pool(
    pool: &PgPool,
    name: &'static str,
    pooler: Pooler,
) -> Result<(), PoolerError> {
    let store = |source: StoreError| PoolerError::Store { pool: name, source };
    let acquire = || async {
        tokio::time::timeout(Duration::from_secs(30), pool.acquire())
            .await
            .map_err(|_| StoreError::Unavailable("acquiring a connection timed out".into()))?
            .map_err(classify)
    };
    let mut a = acquire().await.map_err(store)?;
    // A pool of one connection cannot be probed with two: the probe is skipped for it.
    if pool.options().get_max_connections() >= 2 {
        let mut b = acquire().await.map_err(store)?;
        for _ in 0..PROBE_ROUNDS {
            let pa = backend_pid(&mut a).await.map_err(store)?;
            let pb = backend_pid(&mut b).await.map_err(store)?;
            if pa == pb && pooler != Pooler::Transaction {
                return Err(PoolerError::UndeclaredTransactionPooler {
                    pool: name,
                    pid: pa,
                    configured: pooler,
                });
            }
        }
    }
    if pooler == Pooler::Transaction && caches_statements(&mut a).await.map_err(store)? {
        return Err(PoolerError::StatementCacheOn { pool: name });
    }
    Ok(())
}

/// The backend pid of the server connection serving this statement (simple protocol: one
/// message, one server connection, whatever the pooler).
async fn backend_pid(conn: &mut sqlx::PgConnection) -> Result<i32, StoreError> {
    let row = conn
        .fetch_one("SELECT pg_backend_pid()")
        .await
        .map_err(classify)?;
    row.try_get(0)
        .map_err(|e| StoreError::Other(format!("decoding pg_backend_pid: {e}")))
}

/// Whether the connection caches prepared statements: inside one transaction (one server
/// connection), the same statement run twice is prepared once with a cache, twice without.
async fn caches_statements(conn: &mut sqlx::PgConnection) -> Result<bool, StoreError> {
    const PROBE: &str = "SELECT $1::int4 AS idemgen_statement_cache_probe";
    conn.execute("BEGIN; DEALLOCATE ALL")
        .await
        .map_err(classify)?;
    let counted = async {
        for _ in 0..2 {
            sqlx::query(PROBE)
                .bind(1i32)
                .fetch_one(&mut *conn)
                .await
                .map_err(classify)?;
        }
        let row = conn
            .fetch_one(
                "SELECT count(*) FROM pg_prepared_statements \
                  WHERE statement LIKE '%idemgen_statement_cache_probe%' \
                    AND statement NOT LIKE '%pg_prepared_statements%'",
            )
            .await
            .map_err(classify)?;
        row.try_get::<i64, _>(0)
            .map_err(|e| StoreError::Other(format!("decoding the statement count: {e}")))
    }
    .await;
    // Ended first (an aborted transaction would refuse anything else), then deallocated, so the
    // probe's statements do not outlive the check on this server connection.
    let ended = conn
        .execute("ROLLBACK; DEALLOCATE ALL")
        .await
        .map_err(classify);
    let count = counted?;
    ended?;
    Ok(count < 2)
}

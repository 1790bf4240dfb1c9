//! Real PostgreSQL for tests, the way `#[sqlx::test]` provides it (feature `testing`): a fresh
//! database per test on a throwaway cluster, so that handler implementations are tested against
//! the database they run on, never a mock.
//!
//! * When `DATABASE_URL` is set, databases are created on that server.
//! * Otherwise one throwaway cluster per test process is started from the local PostgreSQL server
//!   binaries (`initdb`/`postgres` on `PATH` or under `/usr/lib/postgresql/*/bin`), as the
//!   `postgres` user when running as root (`initdb` refuses root), and removed when the process
//!   exits.
//! * With neither, [`TestDb::new`] returns an error naming both remedies: a test that cannot
//!   reach its database fails loudly, it never skips.
//!
//! Testing a handler of a generated API trait on its own, inside a transaction that is rolled
//! back unless committed:
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use idemgen_runtime::testing::TestDb;
//! use idemgen_runtime::{PgStore, TxHandle};
//!
//! let db = TestDb::migrated().await?; // fresh database, the runtime's migrations applied
//! let pool = db.pool(4).await?;
//! // … apply the application's own migrations on `pool` …
//! let store = std::sync::Arc::new(PgStore::new(pool.clone()));
//! let mut tx = TxHandle::begin(store).await?;
//! // let response = service.create_widget(&principal, &mut tx, request).await;
//! tx.commit().await?;
//! # Ok(())
//! # }
//! ```
//!
//! To drive the whole request pipeline (authentication, keys, replays), serve the generated
//! `router` in process with `tower::ServiceExt::oneshot`, as the widgets example's tests do.

mod cluster;

pub use cluster::{Cluster, ClusterOptions, DerivedDir, HarnessError, TestDb, shared_cluster};

/// The process helpers the clusters are built with, for idemgen's own test harnesses
/// (`idemgen-testdb`: PgBouncer, pg_auto_failover); not for services, and not stable.
#[doc(hidden)]
pub mod harness {
    pub use super::cluster::{free_port, is_root, pg_version, postgres_ids, run_owned};
}

impl TestDb {
    /// A fresh database with the runtime's migrations applied (the `idempotency_records`
    /// table), ready for a [`crate::PgStore`].
    pub async fn migrated() -> Result<TestDb, HarnessError> {
        let db = TestDb::new().await?;
        let mut conn = db.connect().await?;
        crate::migrate(&mut conn)
            .await
            .map_err(|e| HarnessError::new(format!("runtime migrations: {e}")))?;
        Ok(db)
    }
}

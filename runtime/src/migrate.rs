//! The runtime's schema: the SQL files in this package's `migrations/`, embedded by `sqlx::migrate!` and applied in order by sqlx's
//! migrator (checksummed, under its own lock) and recorded in `_idemgen_migrations`, apart from
//! any migration table of the application, so the files also work with any other tool.
//!
//! Databases migrated by earlier versions recorded their versions in `idemgen_schema_migrations`
//! (no checksums); [`migrate`] adopts them: the versions found there are marked applied, not run
//! again.

#[cfg(feature = "postgres")]
use sqlx::PgConnection;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use sqlx::migrate::MigrateError;
use sqlx::migrate::Migrator;

/// The table sqlx's migrator records the runtime's migrations in.
pub const TABLE: &str = "_idemgen_migrations";

/// The table earlier versions recorded applied migrations in.
#[cfg(feature = "postgres")]
const LEGACY_TABLE: &str = "idemgen_schema_migrations";

/// sqlx's migrator over the embedded migrations (`migrations/` of this package, read at compile
/// time by `sqlx::migrate!`: versions and descriptions come from the file names), recording them
/// in [`TABLE`].
pub fn migrator() -> Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.dangerous_set_table_name(TABLE);
    migrator
}

#[cfg(feature = "postgres")]
/// Applies the embedded migrations that are not applied yet. A migration that refuses (0002
/// while claims are in flight) fails with its message and leaves the schema as it was.
pub async fn migrate(conn: &mut PgConnection) -> Result<(), MigrateError> {
    let migrator = migrator();
    // `run_direct` is what `run` and `skip` call; taking the connection directly keeps callers'
    // futures usable where a `Send` future over any lifetime is needed (sqlx's own workaround
    // for "implementation of `Acquire` is not general enough").
    if let Some(legacy) = legacy_version(conn).await? {
        // Mark what the hand-written migrator applied as applied, without running it again.
        migrator.run_direct(Some(legacy), conn, true).await?;
    }
    migrator.run_direct(None, conn, false).await
}

#[cfg(feature = "postgres")]
/// The highest version recorded by earlier versions' migrator, when its table exists.
async fn legacy_version(conn: &mut PgConnection) -> Result<Option<i64>, MigrateError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(LEGACY_TABLE)
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(None);
    }
    let version: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM idemgen_schema_migrations")
            .fetch_one(&mut *conn)
            .await?;
    Ok(version)
}

/// sqlx's migrator over the embedded SQLite migrations (`migrations/sqlite/` of this package, a
/// dialect of their own with their own versions), recording them in [`TABLE`] of the SQLite file.
#[cfg(feature = "sqlite")]
pub fn sqlite_migrator() -> Migrator {
    let mut migrator = sqlx::migrate!("./migrations/sqlite");
    migrator.dangerous_set_table_name(TABLE);
    migrator
}

/// Applies the embedded SQLite migrations that are not applied yet, all inside one
/// `BEGIN IMMEDIATE` transaction: SQLite's migrator takes no lock of its own, so processes opening
/// the same file at once would otherwise race to create the tables; under the write lock the
/// second waits (`busy_timeout`), then finds every version applied. Each migration is a savepoint
/// in it, so a failure leaves the schema as it was.
#[cfg(feature = "sqlite")]
pub async fn migrate_sqlite(conn: &mut sqlx_sqlite::SqliteConnection) -> Result<(), MigrateError> {
    use sqlx::{AssertSqlSafe, SqlSafeStr};
    use sqlx_core::transaction::TransactionManager;
    use sqlx_sqlite::SqliteTransactionManager as Manager;
    Manager::begin(conn, Some(AssertSqlSafe("BEGIN IMMEDIATE").into_sql_str())).await?;
    match sqlite_migrator().run_direct(None, conn, false).await {
        Ok(()) => {
            Manager::commit(conn).await?;
            Ok(())
        }
        Err(e) => {
            let _ = Manager::rollback(conn).await;
            Err(e)
        }
    }
}

//! The runtime's schema: the SQL files in `migrations/`, embedded and applied in order.
//!
//! Applied versions are recorded in `idemgen_schema_migrations`, apart from any migration table
//! of the application, so the files also work with any other tool. A transaction-scoped advisory
//! lock makes concurrent starts of several servers safe.

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The embedded migrations: (version, name, SQL).
pub const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "0001_idempotency_records",
    include_str!("../../migrations/0001_idempotency_records.sql"),
)];

/// Applies the embedded migrations that are not applied yet.
pub async fn migrate(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    apply(conn, "idemgen_schema_migrations", MIGRATIONS).await
}

/// Applies `migrations` in order, recording them in `table`. Used for the runtime's own schema
/// and available to applications for theirs.
pub async fn apply(
    conn: &mut PgConnection,
    table: &str,
    migrations: &[(i64, &'static str, &'static str)],
) -> Result<(), sqlx::Error> {
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if table.is_empty() || !table.chars().all(plain) {
        return Err(sqlx::Error::Configuration(
            format!("migration table name {table:?} must match [a-z0-9_]+").into(),
        ));
    }
    let mut tx = conn.begin().await?;
    // One key per table name, so applications and the runtime do not wait on each other.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(table)
        .execute(&mut *tx)
        .await?;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version bigint PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())"
    )))
    .execute(&mut *tx)
    .await?;
    for (version, name, sql) in migrations {
        let done: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM {table} WHERE version = $1"
        )))
        .bind(version)
        .fetch_optional(&mut *tx)
        .await?;
        if done.is_some() {
            continue;
        }
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {table} (version, name) VALUES ($1, $2)"
        )))
        .bind(version)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

//! The records table on either store: one row shape, read by each backend's SQL (PostgreSQL's
//! `timestamptz` and `uuid`, SQLite's milliseconds and blobs, both read as milliseconds since the
//! epoch and text), with the holder's lease joined in.

use std::time::Duration;

use idemgen_runtime::{SqliteConnectOptions, SqlitePool};
use serde_json::{Value, json};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Executor as _, Row as _};

/// A connected store.
pub enum Db {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// One record, its holder's lease beside it.
#[derive(Debug)]
pub struct Row {
    pub hash: String,
    pub owner: String,
    pub operation: String,
    pub resource_scope: String,
    pub key: String,
    pub state: String,
    pub fingerprint: Option<String>,
    pub fingerprint_version: Option<i64>,
    pub claim_token: Option<String>,
    pub holder: Option<String>,
    pub created_at: Option<i64>,
    pub claimed_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub lease_expires_at: Option<i64>,
    pub response_status: Option<i64>,
    pub response_headers: Option<String>,
    pub body_bytes: Option<i64>,
    pub body: Option<Vec<u8>>,
    pub resource_ref: Option<String>,
    /// The store's clock when the row was read.
    pub now: i64,
}

/// Whether a claim's holder is gone, and why.
pub struct Verdict {
    pub gone: bool,
    pub why: String,
}

impl Row {
    /// A claim's holder is gone when its lease expired (or ended), or, for a claim taken
    /// without a lease, when the claim is older than `stale`: the executor's own takeover rule.
    pub fn holder_verdict(&self, stale: Duration) -> Verdict {
        let age = self.claimed_at.map(|at| self.now - at);
        match (&self.holder, self.lease_expires_at) {
            (Some(holder), Some(until)) if until > self.now => Verdict {
                gone: false,
                why: format!(
                    "its holder {holder} renewed its lease until {} (alive)",
                    time(Some(until))
                ),
            },
            (Some(holder), _) => Verdict {
                gone: true,
                why: format!("its holder {holder}'s lease has expired or ended"),
            },
            (None, _) => {
                let stale_ms = i64::try_from(stale.as_millis()).unwrap_or(i64::MAX);
                let old = age.is_some_and(|age| age > stale_ms);
                Verdict {
                    gone: old,
                    why: format!(
                        "no lease; claimed {} ago, stale after {} s",
                        age.map_or("?".into(), |a| format!("{} s", a / 1000)),
                        stale.as_secs()
                    ),
                }
            }
        }
    }

    /// The row as JSON: the stored body only when asked for (it may hold customer data).
    pub fn to_json(&self, body: bool) -> Value {
        let headers: Value = self
            .response_headers
            .as_deref()
            .and_then(|h| serde_json::from_str(h).ok())
            .unwrap_or(Value::Null);
        let lease_alive = match (&self.holder, self.lease_expires_at) {
            (None, _) => Value::Null,
            (Some(_), until) => Value::Bool(until.is_some_and(|u| u > self.now)),
        };
        let mut value = json!({
            "record_key": self.hash,
            "owner": self.owner,
            "operation": self.operation,
            "resource_scope": self.resource_scope,
            "key": self.key,
            "state": self.state,
            "fingerprint_version": self.fingerprint_version,
            "fingerprint": self.fingerprint,
            "created_at": time_json(self.created_at),
            "claimed_at": time_json(self.claimed_at),
            "completed_at": time_json(self.completed_at),
            "expires_at": time_json(self.expires_at),
            "claim_token": self.claim_token,
            "holder": self.holder,
            "lease_expires_at": time_json(self.lease_expires_at),
            "lease_alive": lease_alive,
            "response_status": self.response_status,
            "response_headers": headers,
            "response_body_bytes": self.body_bytes,
            "resource_ref": self.resource_ref,
        });
        if body {
            value["response_body"] = match &self.body {
                Some(bytes) => match std::str::from_utf8(bytes) {
                    Ok(text) => Value::String(text.to_owned()),
                    Err(_) => json!({ "hex": hex::encode(bytes) }),
                },
                None => Value::Null,
            };
        }
        value
    }
}

/// What `list` asks for.
pub struct Filter {
    pub state: Option<String>,
    pub operation: Option<String>,
    pub owner: Option<String>,
    pub older_than: Option<Duration>,
    pub expired: bool,
    pub limit: u32,
}

/// What `stats` reports.
pub struct Stats {
    pub by_operation: Vec<(String, String, i64)>,
    pub stranded: i64,
    pub oldest_claim: Option<i64>,
    pub expired: i64,
}

impl Stats {
    pub fn to_json(&self) -> Value {
        let by: Vec<Value> = self
            .by_operation
            .iter()
            .map(|(o, s, n)| json!({ "operation": o, "state": s, "records": n }))
            .collect();
        json!({
            "by_operation": by,
            "stranded_claims": self.stranded,
            "oldest_claim": time_json(self.oldest_claim),
            "expired_records": self.expired,
        })
    }
}

/// Milliseconds since the epoch as RFC 3339, `-` for none.
pub fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())
}

fn time_json(ms: Option<i64>) -> Value {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// PostgreSQL: times as milliseconds, uuids as text.
const PG_SELECT: &str = "SELECT encode(r.scope_hash, 'hex') AS hash, r.owner, r.operation,
        r.resource_scope, r.idempotency_key, r.state, r.fingerprint,
        r.fingerprint_version::int8 AS fingerprint_version, r.claim_token::text AS claim_token,
        r.holder_id::text AS holder,
        (extract(epoch FROM r.created_at) * 1000)::int8 AS created_at,
        (extract(epoch FROM r.claimed_at) * 1000)::int8 AS claimed_at,
        (extract(epoch FROM r.completed_at) * 1000)::int8 AS completed_at,
        (extract(epoch FROM r.expires_at) * 1000)::int8 AS expires_at,
        (extract(epoch FROM h.expires_at) * 1000)::int8 AS lease_expires_at,
        r.response_status::int8 AS response_status, r.response_headers::text AS response_headers,
        octet_length(r.response_body)::int8 AS body_bytes,
        CASE WHEN $1 THEN r.response_body END AS body, r.resource_ref,
        (extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now
   FROM idempotency_records r
   LEFT JOIN idempotency_holders h ON h.holder_id = r.holder_id";

/// SQLite: times are milliseconds already; tokens and holders 16-byte blobs, read as hex.
const SQLITE_SELECT: &str = "SELECT lower(hex(r.scope_hash)) AS hash, r.owner, r.operation,
        r.resource_scope, r.idempotency_key, r.state, r.fingerprint, r.fingerprint_version,
        r.claim_token, r.holder_id AS holder, r.created_at, r.claimed_at, r.completed_at,
        r.expires_at, h.expires_at AS lease_expires_at, r.response_status, r.response_headers,
        length(r.response_body) AS body_bytes, CASE WHEN ?1 THEN r.response_body END AS body,
        r.resource_ref, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now
   FROM idempotency_records r
   LEFT JOIN idempotency_holders h ON h.holder_id = r.holder_id";

fn uuid_text(blob: Option<Vec<u8>>) -> Option<String> {
    blob.map(|b| {
        uuid::Uuid::from_slice(&b).map_or_else(|_| hex::encode(&b), |u| u.hyphenated().to_string())
    })
}

fn db_error(e: sqlx::Error) -> String {
    format!("the store: {e}")
}

impl Db {
    /// Connects to `url`: a PostgreSQL URL, else a SQLite file (`sqlite:` prefix optional).
    /// Without `writes`, every transaction is read-only (PostgreSQL's
    /// `default_transaction_read_only`, SQLite's read-only open).
    pub async fn connect(url: &str, writes: bool) -> Result<Db, String> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if !writes {
                            conn.execute("SET default_transaction_read_only = on")
                                .await?;
                        }
                        Ok(())
                    })
                })
                .connect(url)
                .await
                .map_err(db_error)?;
            return Ok(Db::Postgres(pool));
        }
        let path = url.strip_prefix("sqlite:").unwrap_or(url);
        let path = path.strip_prefix("//").unwrap_or(path);
        if !std::path::Path::new(path).exists() {
            return Err(format!("{path}: no such SQLite file"));
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(!writes)
            .busy_timeout(Duration::from_secs(5));
        let pool = sqlx::pool::PoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(db_error)?;
        Ok(Db::Sqlite(pool))
    }

    /// The record with record key `hash`.
    pub async fn record(&self, hash: &[u8; 32], body: bool) -> Result<Option<Row>, String> {
        match self {
            Db::Postgres(pool) => {
                let sql = format!("{PG_SELECT} WHERE r.scope_hash = $2");
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(body)
                    .bind(&hash[..])
                    .fetch_optional(pool)
                    .await
                    .map_err(db_error)?;
                row.map(|r| pg_row(&r)).transpose()
            }
            Db::Sqlite(pool) => {
                let sql = format!("{SQLITE_SELECT} WHERE r.scope_hash = ?2");
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(body)
                    .bind(&hash[..])
                    .fetch_optional(pool)
                    .await
                    .map_err(db_error)?;
                row.map(|r| sqlite_row(&r)).transpose()
            }
        }
    }

    /// Records matching `filter`, newest first, at most `filter.limit`.
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Row>, String> {
        let older = filter.older_than.map(millis);
        match self {
            Db::Postgres(pool) => {
                // The newest keys first, from the narrow columns alone; then their rows, read
                // by primary key (the projection is computed for `limit` rows, not the table).
                let sql = format!(
                    "{PG_SELECT}
                      WHERE r.scope_hash IN (
                        SELECT scope_hash FROM idempotency_records
                         WHERE ($2::text IS NULL OR state = $2)
                           AND ($3::text IS NULL OR operation = $3)
                           AND ($4::text IS NULL OR owner = $4)
                           AND ($5::int8 IS NULL
                                OR created_at < now() - make_interval(secs => $5 / 1000.0))
                           AND (NOT $6 OR (expires_at IS NOT NULL AND expires_at < now()))
                         ORDER BY created_at DESC
                         LIMIT $7)
                      ORDER BY r.created_at DESC"
                );
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(false)
                    .bind(&filter.state)
                    .bind(&filter.operation)
                    .bind(&filter.owner)
                    .bind(older)
                    .bind(filter.expired)
                    .bind(i64::from(filter.limit))
                    .fetch_all(pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(pg_row).collect()
            }
            Db::Sqlite(pool) => {
                let sql = format!(
                    "{SQLITE_SELECT}
                      WHERE r.rowid IN (
                        SELECT rowid FROM idempotency_records
                         WHERE (?2 IS NULL OR state = ?2)
                           AND (?3 IS NULL OR operation = ?3)
                           AND (?4 IS NULL OR owner = ?4)
                           AND (?5 IS NULL
                                OR created_at < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?5)
                           AND (NOT ?6 OR (expires_at IS NOT NULL
                                AND expires_at < CAST(unixepoch('subsec') * 1000 AS INTEGER)))
                         ORDER BY created_at DESC, rowid DESC
                         LIMIT ?7)
                      ORDER BY r.created_at DESC, r.rowid DESC"
                );
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(false)
                    .bind(&filter.state)
                    .bind(&filter.operation)
                    .bind(&filter.owner)
                    .bind(older)
                    .bind(filter.expired)
                    .bind(i64::from(filter.limit))
                    .fetch_all(pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(sqlite_row).collect()
            }
        }
    }

    /// Counts by operation and state; claims whose holder is gone (lease expired or ended, or
    /// no lease and older than `stale`); the oldest claim; records past their expiry.
    pub async fn stats(&self, stale: Duration) -> Result<Stats, String> {
        let stale = millis(stale);
        let (by, totals) = match self {
            Db::Postgres(pool) => {
                let by = sqlx::query(
                    "SELECT operation, state, count(*)::int8 AS n FROM idempotency_records
                      GROUP BY operation, state ORDER BY operation, state",
                )
                .fetch_all(pool)
                .await
                .map_err(db_error)?;
                let by = by
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .collect::<Result<Vec<(String, String, i64)>, sqlx::Error>>()
                    .map_err(db_error)?;
                let totals = sqlx::query(
                    "SELECT
                        count(*) FILTER (WHERE r.state = 'claimed' AND (
                            (r.holder_id IS NOT NULL AND (h.expires_at IS NULL
                                                          OR h.expires_at <= clock_timestamp()))
                            OR (r.holder_id IS NULL AND r.claimed_at
                                < clock_timestamp() - make_interval(secs => $1 / 1000.0))))::int8,
                        (extract(epoch FROM min(r.claimed_at) FILTER (WHERE r.state = 'claimed'))
                            * 1000)::int8,
                        count(*) FILTER (WHERE r.expires_at < clock_timestamp())::int8
                       FROM idempotency_records r
                       LEFT JOIN idempotency_holders h ON h.holder_id = r.holder_id",
                )
                .bind(stale)
                .fetch_one(pool)
                .await
                .map_err(db_error)?;
                let totals: (i64, Option<i64>, i64) = (
                    totals.try_get(0).map_err(db_error)?,
                    totals.try_get(1).map_err(db_error)?,
                    totals.try_get(2).map_err(db_error)?,
                );
                (by, totals)
            }
            Db::Sqlite(pool) => {
                let by = sqlx::query(
                    "SELECT operation, state, count(*) AS n FROM idempotency_records
                      GROUP BY operation, state ORDER BY operation, state",
                )
                .fetch_all(pool)
                .await
                .map_err(db_error)?;
                let by = by
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .collect::<Result<Vec<(String, String, i64)>, sqlx::Error>>()
                    .map_err(db_error)?;
                let totals = sqlx::query(
                    "WITH now(ms) AS (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER))
                     SELECT
                        coalesce(sum(r.state = 'claimed' AND (
                            (r.holder_id IS NOT NULL AND (h.expires_at IS NULL
                                                          OR h.expires_at <= now.ms))
                            OR (r.holder_id IS NULL AND r.claimed_at < now.ms - ?1))), 0),
                        min(CASE WHEN r.state = 'claimed' THEN r.claimed_at END),
                        coalesce(sum(r.expires_at < now.ms), 0)
                       FROM idempotency_records r
                       LEFT JOIN idempotency_holders h ON h.holder_id = r.holder_id, now",
                )
                .bind(stale)
                .fetch_one(pool)
                .await
                .map_err(db_error)?;
                let totals: (i64, Option<i64>, i64) = (
                    totals.try_get(0).map_err(db_error)?,
                    totals.try_get(1).map_err(db_error)?,
                    totals.try_get(2).map_err(db_error)?,
                );
                (by, totals)
            }
        };
        Ok(Stats {
            by_operation: by,
            stranded: totals.0,
            oldest_claim: totals.1,
            expired: totals.2,
        })
    }

    /// Deletes the claim with record key `hash` while it still holds `token` (a completion,
    /// release or takeover since it was read changes nothing). Returns how many rows went.
    pub async fn release(&self, hash: &[u8; 32], token: &Option<String>) -> Result<u64, String> {
        let Some(token) = token else {
            return Ok(0);
        };
        let token = uuid::Uuid::parse_str(token).map_err(|e| format!("the claim token: {e}"))?;
        let done = match self {
            Db::Postgres(pool) => sqlx::query(
                "DELETE FROM idempotency_records
                  WHERE scope_hash = $1 AND state = 'claimed' AND claim_token = $2",
            )
            .bind(&hash[..])
            .bind(token)
            .execute(pool)
            .await
            .map_err(db_error)?
            .rows_affected(),
            Db::Sqlite(pool) => sqlx::query(
                "DELETE FROM idempotency_records
                  WHERE scope_hash = ?1 AND state = 'claimed' AND claim_token = ?2",
            )
            .bind(&hash[..])
            .bind(token.as_bytes().to_vec())
            .execute(pool)
            .await
            .map_err(db_error)?
            .rows_affected(),
        };
        Ok(done)
    }
}

/// The rows `expire` takes: completed records and tombstones whose `expires_at` passed (by the
/// store's clock), of one operation or all. Claims are never among them. Written so that the
/// expiry index (`expires_at`, where set) finds them: `now()`, not the volatile
/// `clock_timestamp()`, which no index condition can use.
const PG_EXPIRED: &str = "expires_at IS NOT NULL AND expires_at < now()
                           AND state IN ('completed', 'tombstone')
                           AND ($1::text IS NULL OR operation = $1)";
const SQLITE_EXPIRED: &str = "expires_at IS NOT NULL
                               AND expires_at < CAST(unixepoch('subsec') * 1000 AS INTEGER)
                               AND state IN ('completed', 'tombstone')
                               AND (?1 IS NULL OR operation = ?1)";

/// Rows of `expire` deleted per statement, oldest expiry first: each batch is its own short
/// transaction found through the expiry index, so the table is never locked for long, a
/// service's claims go on meanwhile, and the whole run is linear in the rows it deletes.
const EXPIRE_BATCH: i64 = 1000;

/// `(operation, state)` counts, sorted, from one `(operation, state)` per row.
fn tally(rows: Vec<(String, String)>, into: &mut Vec<(String, String, i64)>) {
    for (operation, state) in rows {
        match into
            .iter_mut()
            .find(|(o, s, _)| *o == operation && *s == state)
        {
            Some((_, _, n)) => *n += 1,
            None => into.push((operation, state, 1)),
        }
    }
    into.sort();
}

impl Db {
    /// What `expire` would delete, counted by operation and state.
    pub async fn expired(
        &self,
        operation: Option<&str>,
    ) -> Result<Vec<(String, String, i64)>, String> {
        let rows: Vec<(String, String, i64)> = match self {
            Db::Postgres(pool) => {
                let sql = format!(
                    "SELECT operation, state, count(*)::int8 FROM idempotency_records
                      WHERE {PG_EXPIRED} GROUP BY operation, state ORDER BY operation, state"
                );
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(operation)
                    .fetch_all(pool)
                    .await
            }
            Db::Sqlite(pool) => {
                let sql = format!(
                    "SELECT operation, state, count(*) FROM idempotency_records
                      WHERE {SQLITE_EXPIRED} GROUP BY operation, state ORDER BY operation, state"
                );
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(operation)
                    .fetch_all(pool)
                    .await
            }
        }
        .map_err(db_error)?;
        Ok(rows)
    }

    /// Deletes what [`Db::expired`] counts, in batches of [`EXPIRE_BATCH`]; returns what went,
    /// by operation and state.
    pub async fn expire(
        &self,
        operation: Option<&str>,
    ) -> Result<Vec<(String, String, i64)>, String> {
        let mut gone = Vec::new();
        loop {
            let rows: Vec<(String, String)> = match self {
                Db::Postgres(pool) => {
                    let sql = format!(
                        "DELETE FROM idempotency_records WHERE scope_hash IN (
                            SELECT scope_hash FROM idempotency_records WHERE {PG_EXPIRED}
                             ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                         RETURNING operation, state"
                    );
                    sqlx::query_as(sqlx::AssertSqlSafe(sql))
                        .bind(operation)
                        .bind(EXPIRE_BATCH)
                        .fetch_all(pool)
                        .await
                }
                Db::Sqlite(pool) => {
                    let sql = format!(
                        "DELETE FROM idempotency_records WHERE scope_hash IN (
                            SELECT scope_hash FROM idempotency_records WHERE {SQLITE_EXPIRED}
                             ORDER BY expires_at LIMIT ?2)
                         RETURNING operation, state"
                    );
                    sqlx::query_as(sqlx::AssertSqlSafe(sql))
                        .bind(operation)
                        .bind(EXPIRE_BATCH)
                        .fetch_all(pool)
                        .await
                }
            }
            .map_err(db_error)?;
            let last = (rows.len() as i64) < EXPIRE_BATCH;
            tally(rows, &mut gone);
            if last {
                return Ok(gone);
            }
        }
    }
}

fn pg_row(r: &sqlx::postgres::PgRow) -> Result<Row, String> {
    (|| {
        Ok::<_, sqlx::Error>(Row {
            hash: r.try_get("hash")?,
            owner: r.try_get("owner")?,
            operation: r.try_get("operation")?,
            resource_scope: r.try_get("resource_scope")?,
            key: r.try_get("idempotency_key")?,
            state: r.try_get("state")?,
            fingerprint: r.try_get("fingerprint")?,
            fingerprint_version: r.try_get("fingerprint_version")?,
            claim_token: r.try_get("claim_token")?,
            holder: r.try_get("holder")?,
            created_at: r.try_get("created_at")?,
            claimed_at: r.try_get("claimed_at")?,
            completed_at: r.try_get("completed_at")?,
            expires_at: r.try_get("expires_at")?,
            lease_expires_at: r.try_get("lease_expires_at")?,
            response_status: r.try_get("response_status")?,
            response_headers: r.try_get("response_headers")?,
            body_bytes: r.try_get("body_bytes")?,
            body: r.try_get("body")?,
            resource_ref: r.try_get("resource_ref")?,
            now: r.try_get("now")?,
        })
    })()
    .map_err(db_error)
}

fn sqlite_row(r: &sqlx_sqlite::SqliteRow) -> Result<Row, String> {
    (|| {
        Ok::<_, sqlx::Error>(Row {
            hash: r.try_get("hash")?,
            owner: r.try_get("owner")?,
            operation: r.try_get("operation")?,
            resource_scope: r.try_get("resource_scope")?,
            key: r.try_get("idempotency_key")?,
            state: r.try_get("state")?,
            fingerprint: r.try_get("fingerprint")?,
            fingerprint_version: r.try_get("fingerprint_version")?,
            claim_token: uuid_text(r.try_get("claim_token")?),
            holder: uuid_text(r.try_get("holder")?),
            created_at: r.try_get("created_at")?,
            claimed_at: r.try_get("claimed_at")?,
            completed_at: r.try_get("completed_at")?,
            expires_at: r.try_get("expires_at")?,
            lease_expires_at: r.try_get("lease_expires_at")?,
            response_status: r.try_get("response_status")?,
            response_headers: r.try_get("response_headers")?,
            body_bytes: r.try_get("body_bytes")?,
            body: r.try_get("body")?,
            resource_ref: r.try_get("resource_ref")?,
            now: r.try_get("now")?,
        })
    })()
    .map_err(db_error)
}

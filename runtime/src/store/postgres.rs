//! The PostgreSQL store (sqlx). Every read and reconciliation goes to the pool it is given, which
//! must point at the writer: a replica's absence of a record never authorises an execution.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{PgConnection, Postgres, Row, Transaction};

use super::{ClaimOutcome, ClaimRequest, CommitError, Store, StoreError};
use crate::fingerprint::Fingerprint;
use crate::record::{ClaimToken, Record, RecordState, Scope, StoredResponse};

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    claim_pool: PgPool,
}

/// The business transaction handlers write through: queries only, no commit or rollback.
#[derive(Debug)]
pub struct PgTx {
    tx: Transaction<'static, Postgres>,
}

impl PgTx {
    /// The connection to run queries on, inside the attempt's transaction. Issuing transaction
    /// control statements (`COMMIT`, `ROLLBACK`) through it is not supported.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

impl PgStore {
    /// A store on a pool connected to the writer. Claims share that pool: when every connection
    /// is busy with slow business transactions, a duplicate's claim queues behind them instead of
    /// answering 409 at once. Give claims their own small pool with
    /// [`PgStore::with_claim_pool`] to keep duplicates prompt under pool exhaustion.
    pub fn new(pool: PgPool) -> PgStore {
        PgStore {
            claim_pool: pool.clone(),
            pool,
        }
    }

    /// Uses a separate pool for claim and release statements (for example one whose connections
    /// run with `synchronous_commit = off`; see protocol.md, "Durability of claims").
    pub fn with_claim_pool(mut self, claim_pool: PgPool) -> PgStore {
        self.claim_pool = claim_pool;
        self
    }

    /// The business pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Tombstones the record that created `resource_ref`, on a connection inside the caller's own
    /// delete transaction. Returns how many records changed.
    pub async fn tombstone_resource_on(
        conn: &mut PgConnection,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_records
                SET state = 'tombstone', fingerprint = NULL, fingerprint_version = NULL,
                    response_status = NULL, response_headers = NULL, response_body = NULL
              WHERE owner = $1 AND operation = $2 AND resource_ref = $3 AND state = 'completed'",
        )
        .bind(owner)
        .bind(operation)
        .bind(resource_ref)
        .execute(conn)
        .await
        .map_err(classify)?;
        Ok(done.rows_affected())
    }
}

/// Maps a driver error to a [`StoreError`]; the driver text stays in the error for logs only.
pub(crate) fn classify(e: sqlx::Error) -> StoreError {
    classify_ref(&e)
}

/// [`classify`] without taking ownership.
pub(crate) fn classify_ref(e: &sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            if code == "55P03" {
                StoreError::LockTimeout
            } else if code.starts_with("08") || code.starts_with("57P") || code == "53300" {
                StoreError::Unavailable(e.to_string())
            } else {
                StoreError::Other(e.to_string())
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Other(e.to_string()),
    }
}

const SELECT_RECORD: &str = "SELECT state, fingerprint, fingerprint_version, claim_token,
        (state = 'claimed' AND claimed_at < clock_timestamp() - make_interval(secs => $5)) AS stale,
        response_status, response_headers, response_body
   FROM idempotency_records
  WHERE owner = $1 AND operation = $2 AND resource_scope = $3 AND idempotency_key = $4";

/// One round trip for both outcomes: insert the claim, or report the record that holds the key.
/// The record columns are NULL when this statement inserted (its own insert is invisible to it),
/// and also when the holder committed after this statement's snapshot: then the caller asks again.
const CLAIM: &str = "WITH ins AS (
        INSERT INTO idempotency_records
            (owner, operation, resource_scope, idempotency_key, state, fingerprint,
             fingerprint_version, claim_token, claimed_at)
        VALUES ($1, $2, $3, $4, 'claimed', $5, $6, $7, clock_timestamp())
        ON CONFLICT DO NOTHING
        RETURNING 1)
     SELECT EXISTS (SELECT 1 FROM ins) AS inserted, r.state, r.fingerprint,
            r.fingerprint_version, r.claim_token,
            (r.state = 'claimed' AND r.claimed_at < clock_timestamp() - make_interval(secs => $8))
                AS stale,
            r.response_status, r.response_headers, r.response_body
       FROM (SELECT 1) AS one
       LEFT JOIN idempotency_records r
         ON r.owner = $1 AND r.operation = $2 AND r.resource_scope = $3 AND r.idempotency_key = $4
      WHERE $9::text IS NOT NULL";

/// The in-transaction reservation: [`CLAIM`] behind a transaction-scoped advisory lock on the
/// hash of the key's scope (`$9`). The attempt that reserved the key holds the lock until its
/// transaction ends, so a duplicate fails to take it (`got` false) and answers at once instead of
/// waiting on the unique index with its connection held. The unique index still decides: the
/// lock only keeps duplicates from queueing on it (a hash collision costs a 409, never a write).
const RESERVE: &str =
    "WITH gate AS (SELECT pg_try_advisory_xact_lock(hashtextextended($9, 0)) AS got),
     ins AS (
        INSERT INTO idempotency_records
            (owner, operation, resource_scope, idempotency_key, state, fingerprint,
             fingerprint_version, claim_token, claimed_at)
        SELECT $1, $2, $3, $4, 'claimed', $5, $6, $7, clock_timestamp() FROM gate WHERE gate.got
        ON CONFLICT DO NOTHING
        RETURNING 1)
     SELECT (SELECT got FROM gate) AS got, EXISTS (SELECT 1 FROM ins) AS inserted, r.state,
            r.fingerprint, r.fingerprint_version, r.claim_token,
            (r.state = 'claimed' AND r.claimed_at < clock_timestamp() - make_interval(secs => $8))
                AS stale,
            r.response_status, r.response_headers, r.response_body
       FROM (SELECT 1) AS one
       LEFT JOIN idempotency_records r
         ON r.owner = $1 AND r.operation = $2 AND r.resource_scope = $3 AND r.idempotency_key = $4";

const TAKE_OVER: &str = "UPDATE idempotency_records
        SET claim_token = $7, claimed_at = clock_timestamp()
      WHERE owner = $1 AND operation = $2 AND resource_scope = $3 AND idempotency_key = $4
        AND state = 'claimed' AND fingerprint = $5 AND fingerprint_version = $6
        AND claim_token = $8
        AND claimed_at < clock_timestamp() - make_interval(secs => $9)";

fn record_from_row(row: &PgRow) -> Result<Record, StoreError> {
    let get_err = |e: sqlx::Error| StoreError::Other(format!("decoding a record: {e}"));
    let state: String = row.try_get("state").map_err(get_err)?;
    let state = RecordState::parse(&state)
        .ok_or_else(|| StoreError::Other(format!("unknown record state {state:?}")))?;
    let fingerprint: Option<String> = row.try_get("fingerprint").map_err(get_err)?;
    let token: Option<uuid::Uuid> = row.try_get("claim_token").map_err(get_err)?;
    let status: Option<i16> = row.try_get("response_status").map_err(get_err)?;
    let response = match status {
        Some(status) => {
            let headers: Option<sqlx::types::Json<Vec<(String, String)>>> =
                row.try_get("response_headers").map_err(get_err)?;
            let body: Option<Vec<u8>> = row.try_get("response_body").map_err(get_err)?;
            Some(StoredResponse {
                status: u16::try_from(status).unwrap_or(200),
                headers: headers.map(|h| h.0).unwrap_or_default(),
                body: body.unwrap_or_default(),
            })
        }
        None => None,
    };
    Ok(Record {
        state,
        fingerprint: fingerprint.map(Fingerprint::from_stored),
        fingerprint_version: row.try_get("fingerprint_version").map_err(get_err)?,
        claim_token: token.map(ClaimToken),
        stale: row
            .try_get::<Option<bool>, _>("stale")
            .map_err(get_err)?
            .unwrap_or(false),
        response,
    })
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

async fn read_on(
    conn: &mut PgConnection,
    scope: &Scope,
    stale_after: Duration,
) -> Result<Option<Record>, StoreError> {
    let row = sqlx::query(SELECT_RECORD)
        .bind(&scope.owner)
        .bind(&scope.operation)
        .bind(&scope.resource_scope)
        .bind(scope.key.as_str())
        .bind(secs(stale_after))
        .fetch_optional(conn)
        .await
        .map_err(classify)?;
    row.as_ref().map(record_from_row).transpose()
}

/// Inserts a claim, or takes over a stale one with the same fingerprint, on `conn`. With
/// `gated` (in-transaction strategy) the statement is [`RESERVE`] and a key held by an unfinished
/// transaction answers [`ClaimOutcome::Busy`].
async fn claim_on(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
    gated: bool,
) -> Result<ClaimOutcome, StoreError> {
    let scope = request.scope;
    let gate_key = format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}",
        scope.owner,
        scope.operation,
        scope.resource_scope,
        scope.key.as_str()
    );
    loop {
        let row = sqlx::query(if gated { RESERVE } else { CLAIM })
            .bind(&scope.owner)
            .bind(&scope.operation)
            .bind(&scope.resource_scope)
            .bind(scope.key.as_str())
            .bind(request.fingerprint.as_str())
            .bind(request.fingerprint_version)
            .bind(request.token.0)
            .bind(secs(request.stale_after))
            .bind(&gate_key)
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        if gated {
            let got: bool = row
                .try_get("got")
                .map_err(|e| StoreError::Other(format!("decoding a reservation: {e}")))?;
            if !got {
                return Ok(ClaimOutcome::Busy);
            }
        }
        let inserted: bool = row
            .try_get("inserted")
            .map_err(|e| StoreError::Other(format!("decoding a claim: {e}")))?;
        if inserted {
            return Ok(ClaimOutcome::Claimed { taken_over: false });
        }
        let state: Option<String> = row
            .try_get("state")
            .map_err(|e| StoreError::Other(format!("decoding a claim: {e}")))?;
        if state.is_none() {
            // The holder released its claim, or committed after our snapshot: ask again.
            continue;
        }
        let existing = record_from_row(&row)?;
        let same_request = existing.fingerprint.as_ref() == Some(request.fingerprint)
            && existing.fingerprint_version == Some(request.fingerprint_version);
        if existing.state == RecordState::Claimed && existing.stale && same_request {
            let old = existing.claim_token.map(|t| t.0);
            let taken = sqlx::query(TAKE_OVER)
                .bind(&scope.owner)
                .bind(&scope.operation)
                .bind(&scope.resource_scope)
                .bind(scope.key.as_str())
                .bind(request.fingerprint.as_str())
                .bind(request.fingerprint_version)
                .bind(request.token.0)
                .bind(old)
                .bind(secs(request.stale_after))
                .execute(&mut *conn)
                .await
                .map_err(classify)?;
            if taken.rows_affected() == 1 {
                return Ok(ClaimOutcome::Claimed { taken_over: true });
            }
            // Someone else took it over or completed it first: look again.
            continue;
        }
        return Ok(ClaimOutcome::Existing(existing));
    }
}

#[async_trait]
impl Store for PgStore {
    type Tx = PgTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        let mut conn = self.claim_pool.acquire().await.map_err(classify)?;
        claim_on(&mut conn, request, false).await
    }

    async fn begin(&self) -> Result<PgTx, StoreError> {
        let tx = self.pool.begin().await.map_err(classify)?;
        Ok(PgTx { tx })
    }

    async fn reserve_in_tx(
        &self,
        tx: &mut PgTx,
        request: &ClaimRequest<'_>,
    ) -> Result<ClaimOutcome, StoreError> {
        claim_on(tx.conn(), request, true).await
    }

    async fn complete(
        &self,
        tx: &mut PgTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
        retention: Option<Duration>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_records
                SET state = 'completed', response_status = $6, response_headers = $7,
                    response_body = $8, resource_ref = $9, completed_at = clock_timestamp(),
                    expires_at = clock_timestamp() + make_interval(secs => $10)
              WHERE owner = $1 AND operation = $2 AND resource_scope = $3
                AND idempotency_key = $4 AND state = 'claimed' AND claim_token = $5",
        )
        .bind(&scope.owner)
        .bind(&scope.operation)
        .bind(&scope.resource_scope)
        .bind(scope.key.as_str())
        .bind(token.0)
        .bind(i16::try_from(response.status).unwrap_or(200))
        .bind(sqlx::types::Json(&response.headers))
        .bind(&response.body)
        .bind(resource_ref)
        .bind(retention.map(secs))
        .execute(tx.conn())
        .await
        .map_err(classify)?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit(&self, tx: PgTx) -> Result<(), CommitError> {
        tx.tx.commit().await.map_err(|e| match e {
            sqlx::Error::Database(_) => CommitError::Rejected(e.to_string()),
            other => CommitError::Unknown(other.to_string()),
        })
    }

    async fn rollback(&self, tx: PgTx) -> Result<(), StoreError> {
        tx.tx.rollback().await.map_err(classify)
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM idempotency_records
              WHERE owner = $1 AND operation = $2 AND resource_scope = $3
                AND idempotency_key = $4 AND state = 'claimed' AND claim_token = $5",
        )
        .bind(&scope.owner)
        .bind(&scope.operation)
        .bind(&scope.resource_scope)
        .bind(scope.key.as_str())
        .bind(token.0)
        .execute(&self.claim_pool)
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
        read_on(&mut conn, scope, stale_after).await
    }

    async fn tombstone_resource(
        &self,
        tx: &mut PgTx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        Self::tombstone_resource_on(tx.conn(), owner, operation, resource_ref).await
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM idempotency_records
              WHERE ctid IN (SELECT ctid FROM idempotency_records
                              WHERE expires_at IS NOT NULL AND expires_at < clock_timestamp()
                              ORDER BY expires_at
                              LIMIT $1
                              FOR UPDATE SKIP LOCKED)",
        )
        .bind(batch_size)
        .execute(&self.pool)
        .await
        .map_err(classify)?;
        Ok(done.rows_affected())
    }
}

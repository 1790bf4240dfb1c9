//! The PostgreSQL store on tokio-postgres (feature `tokio-postgres`): the statements and record
//! table of [`PgStore`](super::PgStore), sent so that the protocol's statements share round trips
//! with the transaction's own (ARCHITECTURE.md, "The pipelining store").
//!
//! tokio-postgres writes a statement to the connection when its future is first polled and
//! matches answers to statements in order, so statements polled together travel together. The
//! store uses that in three places:
//! - the completion and `COMMIT` go in one round trip. The completion is written to fail its
//!   statement, and so the transaction, when it completes nothing (the claim was taken over, or a
//!   record that did not go through the gate holds the key): the `COMMIT` behind it then ends an
//!   aborted transaction, which PostgreSQL answers as a rollback, and nothing of the attempt
//!   commits;
//! - after the gate found a record: `ROLLBACK` and the read;
//! - a read that decides an outcome: the recovery check and the read.
//!
//! Statements are prepared once per connection (deadpool-postgres's statement cache), so a
//! statement after the first costs no parse round trip. Behind a transaction-mode pooler
//! ([`TokioPgStore::with_pooler`] with [`Pooler::Transaction`]) a prepared statement would stay on
//! a server connection other clients get next; there every statement is sent unnamed with its
//! parameter types (`query_typed`: parse, bind and execute in one message, so one round trip and
//! one server connection), the types learned once per store by preparing the statements in one
//! transaction. Only statements of one transaction are pipelined there (the completion and
//! `COMMIT`): a pooler may give the server connection to another client at the end of a
//! transaction, while a pipelined statement behind it is still unanswered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{ClientWrapper, Object, Pool, PoolError};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Json, ToSql, Type};

use super::postgres::{self as pg, Pooler, PoolerError, SeenKeys, classify_sqlstate};
use super::rules::{self, ClaimStatements, ClaimStep, RecordRow, ResponseRow};
use super::{ClaimOutcome, ClaimRequest, CommitError, Gate, Store, StoreError};
use super::{ClaimToken, HolderId, Record, RecordState, Scope};
use crate::response::StoredResponse;

/// The separate-claim completion that fails when it completes nothing: division by the number of
/// rows it completed (`division_by_zero`, SQLSTATE 22012, is then this statement's only error
/// besides the connection's). A subquery, so no plan folds it into a constant error.
const COMPLETE_OR_FAIL: &str = concat!(
    "WITH done AS (",
    pg::complete!(),
    " RETURNING 1)
     SELECT 1 / (SELECT count(*)::int FROM done) AS completed"
);

/// The in-transaction strategy's completed record, without `ON CONFLICT`: a record that did not
/// go through the gate fails it with a unique violation on the primary key.
const INSERT_COMPLETED_OR_FAIL: &str = pg::insert_completed!();

/// The primary key of the record table, which [`INSERT_COMPLETED_OR_FAIL`] violates when the key
/// has a record after all.
const RECORDS_PKEY: &str = "idempotency_records_pkey";

const IN_RECOVERY: &str = "SELECT pg_is_in_recovery()";

/// Every statement the store sends with parameters: behind a transaction pooler their types
/// are learned together, once ([`Statements`]).
const STATEMENTS: [&str; 12] = [
    pg::LOOK,
    pg::CLAIM,
    pg::TAKE_OVER,
    INSERT_COMPLETED_OR_FAIL,
    COMPLETE_OR_FAIL,
    pg::RELEASE,
    IN_RECOVERY,
    pg::SELECT_RECORD,
    pg::TOMBSTONE,
    pg::RENEW_LEASE,
    pg::END_LEASE,
    pg::PURGE_EXPIRED,
];

/// How the store sends its statements: prepared once per connection, or, behind a transaction
/// pooler, unnamed with their parameter types.
#[derive(Debug, Clone, Default)]
struct Statements {
    /// `Some` behind a transaction pooler: each statement's parameter types, learned on the first
    /// connection the store takes.
    unnamed: Option<Arc<tokio::sync::OnceCell<ParamTypes>>>,
}

/// Each statement's parameter types, by its text.
type ParamTypes = HashMap<&'static str, Vec<Type>>;

/// A statement ready to send: nothing more goes to the server before its own messages.
enum Ready<'s> {
    /// Prepared on the connection (from its cache).
    Named(tokio_postgres::Statement),
    /// Unnamed, with its parameters' types.
    Unnamed(&'static str, &'s [Type]),
}

impl Statements {
    /// Readies `sql` on `client`: prepares it (a round trip on the connection's first use of
    /// it) unless it is sent unnamed. What runs it then sends it on its first poll, so a
    /// statement polled beside another (`COMMIT`) is written first.
    async fn ready(
        &self,
        client: &ClientWrapper,
        sql: &'static str,
    ) -> Result<Ready<'_>, tokio_postgres::Error> {
        match self.unnamed.as_ref().and_then(|types| types.get()) {
            // Learned for every statement before the connection was handed out.
            Some(types) => Ok(Ready::Unnamed(
                sql,
                types.get(sql).map_or(&[][..], Vec::as_slice),
            )),
            // Cached after a connection's first use: no round trip.
            None => Ok(Ready::Named(client.prepare_cached(sql).await?)),
        }
    }

    /// Runs a readied statement; its messages are written on the first poll. Returns its rows
    /// and how many rows it changed.
    async fn run_ready(
        &self,
        client: &ClientWrapper,
        ready: &Ready<'_>,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, u64), tokio_postgres::Error> {
        use futures_util::TryStreamExt as _;
        let stream = match ready {
            Ready::Unnamed(sql, types) => {
                let typed = params
                    .iter()
                    .zip(types.iter())
                    .map(|(p, t)| (*p, t.clone()));
                client.query_typed_raw(sql, typed).await?
            }
            Ready::Named(statement) => client.query_raw(statement, params.iter().copied()).await?,
        };
        let mut stream = std::pin::pin!(stream);
        let mut rows = Vec::new();
        while let Some(row) = stream.try_next().await? {
            rows.push(row);
        }
        let changed = stream.rows_affected().unwrap_or(0);
        Ok((rows, changed))
    }

    /// [`Statements::ready`], then [`Statements::run_ready`].
    async fn run(
        &self,
        client: &ClientWrapper,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, u64), tokio_postgres::Error> {
        let ready = self.ready(client, sql).await?;
        self.run_ready(client, &ready, params).await
    }

    /// Behind a transaction pooler, learns the statements' parameter types on `client` (idle,
    /// just taken from a pool) if no connection did yet: prepared, described and closed in one
    /// transaction, so nothing stays on the server connection. Once per store.
    async fn learn(&self, client: &ClientWrapper) -> Result<(), StoreError> {
        let Some(types) = &self.unnamed else {
            return Ok(());
        };
        types
            .get_or_try_init(|| async {
                client.batch_execute("BEGIN").await.map_err(classify)?;
                let prepared = futures_util::future::join_all(
                    STATEMENTS.iter().map(|sql| client.prepare(sql)),
                )
                .await;
                let mut learned = HashMap::new();
                let mut failed = None;
                for (sql, statement) in STATEMENTS.iter().zip(prepared) {
                    match statement {
                        Ok(statement) => {
                            learned.insert(*sql, statement.params().to_vec());
                        }
                        Err(e) => failed = failed.or(Some(e)),
                    }
                }
                // The statements were dropped above, each closing itself before this `COMMIT`
                // (or `ROLLBACK`, when one failed) is sent.
                match failed {
                    None => {
                        client.batch_execute("COMMIT").await.map_err(classify)?;
                        Ok(learned)
                    }
                    Some(e) => {
                        let _ = client.batch_execute("ROLLBACK").await;
                        Err(classify(e))
                    }
                }
            })
            .await?;
        Ok(())
    }

    /// Whether statements are sent unnamed (behind a transaction pooler).
    fn unnamed(&self) -> bool {
        self.unnamed.is_some()
    }
}

/// The PostgreSQL store on tokio-postgres, with deadpool-postgres pools. Handlers write through
/// [`TxHandle::conn`](crate::TxHandle), the pooled client inside the attempt's transaction.
///
/// The records, their migrations and every protocol rule are those of
/// [`PgStore`](super::PgStore); the two stores may serve one database at once.
#[derive(Debug, Clone)]
pub struct TokioPgStore {
    pool: Pool,
    claim_pool: Pool,
    synchronous_claims: bool,
    begin_at_claim: bool,
    seen: Arc<SeenKeys>,
    pooler: Pooler,
    statements: Statements,
}

/// The business transaction handlers write through: the pooled client, inside the transaction the
/// store began.
///
/// The client offers no transaction API through a shared reference (tokio-postgres's
/// `transaction` takes `&mut`); issuing `COMMIT`, `ROLLBACK` or `SAVEPOINT` as SQL through it is
/// not supported.
///
/// Dropped before its transaction ended (an attempt cancelled, a handler test that neither
/// committed nor rolled back), its connection is closed rather than returned to the pool, so the
/// server rolls the transaction back and no other request runs inside it.
#[derive(Debug)]
pub struct TokioPgTx {
    /// Present until dropped.
    client: Option<Object>,
    state: TxState,
    /// The answer to the `COMMIT` sent with the completion, once it came.
    committed: Option<Result<(), CommitError>>,
}

/// What a [`TokioPgTx`] knows of its connection's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    /// Inside the transaction.
    Open,
    /// A transaction-control statement is unanswered or failed with the connection.
    InDoubt,
    /// Committed or rolled back, answered: the connection is idle.
    Ended,
}

impl TokioPgTx {
    /// The client inside the transaction.
    pub fn client(&self) -> &ClientWrapper {
        self.client
            .as_ref()
            .expect("a TokioPgTx has its client until dropped")
    }

    /// Ends the transaction by `statement` (`COMMIT` or `ROLLBACK`).
    async fn end(&mut self, statement: &str) -> Result<(), tokio_postgres::Error> {
        self.state = TxState::InDoubt;
        self.client().batch_execute(statement).await?;
        self.state = TxState::Ended;
        Ok(())
    }

    /// Runs `statement` (a completion) and `COMMIT` in one round trip. `Ok(false)`: the completion
    /// completed nothing (`lost` says so of its error), its failure aborted the transaction and the
    /// `COMMIT` ended it as a rollback. `Ok(true)`: the completion applied (or its answer was lost
    /// with the connection, after the `COMMIT` was sent), and [`Store::commit`] tells the
    /// transaction's outcome.
    async fn complete_and_commit(
        &mut self,
        statements: &Statements,
        statement: &'static str,
        params: &[&(dyn ToSql + Sync)],
        lost: fn(&tokio_postgres::error::DbError) -> bool,
    ) -> Result<bool, StoreError> {
        // Prepared before the join: a prepare's round trip inside it would let the `COMMIT` go
        // first, committing the transaction without its completion.
        let ready = statements
            .ready(self.client(), statement)
            .await
            .map_err(classify)?;
        self.state = TxState::InDoubt;
        let client = self.client();
        // Both in the one transaction, so pipelined behind a transaction pooler too.
        let (done, commit) = tokio::join!(
            statements.run_ready(client, &ready, params),
            client.batch_execute("COMMIT")
        );
        let commit_answered = match &commit {
            Ok(()) => true,
            Err(e) => e.as_db_error().is_some(),
        };
        if commit_answered {
            self.state = TxState::Ended;
        }
        match done {
            Ok(_) => {
                self.committed = Some(commit.map_err(|e| match e.as_db_error() {
                    Some(_) => CommitError::Rejected(describe(&e)),
                    None => CommitError::Unknown(describe(&e)),
                }));
                Ok(true)
            }
            Err(e) => match e.as_db_error() {
                // The server failed the completion: the transaction was aborted, and the COMMIT
                // (answered or not) cannot commit it.
                Some(db) if lost(db) => Ok(false),
                Some(_) => Err(classify(e)),
                // The connection failed with the COMMIT already sent: it may have committed.
                None => {
                    self.committed = Some(Err(CommitError::Unknown(describe(&e))));
                    Ok(true)
                }
            },
        }
    }
}

impl Drop for TokioPgTx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && self.state != TxState::Ended
        {
            // Out of the pool and closed (deadpool aborts the connection's task with it, so what
            // the task had not written yet is never sent): the server rolls back whatever is open.
            drop(Object::take(client));
        }
    }
}

/// [`TokioPgStore::check`] of one pool: two of its connections ask for their server's backend
/// pid alternately, and share one only through a transaction pooler.
async fn check_pool(pool: &Pool, name: &'static str) -> Result<(), PoolerError> {
    let store = |source: StoreError| PoolerError::Store { pool: name, source };
    if pool.status().max_size < 2 {
        return Ok(());
    }
    let a = TokioPgStore::get(pool).await.map_err(store)?;
    let b = TokioPgStore::get(pool).await.map_err(store)?;
    for _ in 0..pg::PROBE_ROUNDS {
        let (pa, pb) = (
            backend_pid(&a).await.map_err(store)?,
            backend_pid(&b).await.map_err(store)?,
        );
        if pa == pb {
            return Err(PoolerError::TransactionPoolerUnsupported {
                pool: name,
                pid: pa,
            });
        }
    }
    Ok(())
}

/// The backend pid serving `client`, by a simple query (one message, whatever the pooler).
async fn backend_pid(client: &Object) -> Result<i32, StoreError> {
    let messages = client
        .simple_query("SELECT pg_backend_pid()")
        .await
        .map_err(classify)?;
    messages
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .ok_or_else(|| StoreError::Other("pg_backend_pid() returned no number".into()))
}

/// `e` with its causes, for the logs: tokio-postgres displays a server's error as "db error"
/// alone, its message (and SQLSTATE's meaning) in the source.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// `url` without the query parameters only sqlx reads (`statement-cache-capacity`).
fn without_sqlx_parameters(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| pair.split('=').next() != Some("statement-cache-capacity"))
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// Maps a tokio-postgres error to a [`StoreError`].
fn classify(e: tokio_postgres::Error) -> StoreError {
    classify_ref(&e)
}

/// [`classify`] by reference: also how a handler's tokio-postgres error is answered.
pub(crate) fn classify_ref(e: &tokio_postgres::Error) -> StoreError {
    match e.code() {
        Some(code) => classify_sqlstate(code.code(), &describe(e)),
        // No SQLSTATE: the connection (closed, I/O, TLS) or the driver's own decoding.
        None if e.is_closed() || e.as_db_error().is_none() => StoreError::Unavailable(describe(e)),
        None => StoreError::Other(describe(e)),
    }
}

fn pool_error(e: PoolError) -> StoreError {
    pool_error_ref(&e)
}

/// [`pool_error`] by reference: also how a handler's failure to get a connection is answered
/// (none free within the wait, none could be made: unavailable).
pub(crate) fn pool_error_ref(e: &PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => classify_ref(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

fn decode_error(e: tokio_postgres::Error) -> StoreError {
    StoreError::Other(format!("decoding a record: {}", describe(&e)))
}

fn record_from_row(row: &Row) -> Result<Record, StoreError> {
    let status: Option<i16> = row.try_get("response_status").map_err(decode_error)?;
    let response = match status {
        Some(status) => {
            let headers: Option<Json<Vec<(String, String)>>> =
                row.try_get("response_headers").map_err(decode_error)?;
            let body: Option<Vec<u8>> = row.try_get("response_body").map_err(decode_error)?;
            Some(ResponseRow {
                status: status.into(),
                headers: headers.map(|h| h.0).unwrap_or_default(),
                body: body.unwrap_or_default(),
            })
        }
        None => None,
    };
    RecordRow {
        state: row.try_get("state").map_err(decode_error)?,
        fingerprint: row.try_get("fingerprint").map_err(decode_error)?,
        fingerprint_version: row
            .try_get::<_, Option<i16>>("fingerprint_version")
            .map_err(decode_error)?
            .map(i64::from),
        claim_token: row.try_get("claim_token").map_err(decode_error)?,
        stale: row
            .try_get::<_, Option<bool>>("stale")
            .map_err(decode_error)?
            .unwrap_or(false),
        response,
    }
    .into_record()
}

impl Statements {
    /// [`Statements::run`]: its rows.
    async fn query(
        &self,
        client: &ClientWrapper,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        Ok(self.run(client, sql, params).await.map_err(classify)?.0)
    }

    /// [`Statements::run`]: how many rows it changed.
    async fn execute(
        &self,
        client: &ClientWrapper,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        Ok(self.run(client, sql, params).await.map_err(classify)?.1)
    }
}

/// The claim's statements on one client.
struct TokioClaim<'c> {
    client: &'c ClientWrapper,
    statements: &'c Statements,
    synchronous: bool,
    hash: [u8; 32],
    /// Whether the first claim statement takes `BEGIN` behind it (and whether it has yet).
    begin: Begin,
}

/// The `BEGIN` a claim may send behind its first statement ([`TokioPgStore::with_begin_at_claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Begin {
    /// Not asked for, or already sent and ended.
    No,
    /// To be sent behind the first claim statement.
    Asked,
    /// Sent and answered: the connection is inside the attempt's transaction.
    Open,
}

#[async_trait]
impl ClaimStatements for TokioClaim<'_> {
    async fn insert_or_read(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<ClaimStep, StoreError> {
        let scope = request.scope;
        let params: [&(dyn ToSql + Sync); 12] = [
            &&self.hash[..],
            &scope.owner,
            &scope.operation,
            &scope.resource_scope,
            &scope.key.as_str(),
            &request.fingerprint.as_str(),
            &request.fingerprint_version,
            &pg::secs(request.stale_after),
            &request.token.0,
            &request.retention.map(pg::secs),
            &request.holder.map(|h| h.0),
            &self.synchronous,
        ];
        let rows = if self.begin == Begin::Asked {
            self.begin = Begin::No;
            // Prepared before the join: a prepare's round trip inside it would let `BEGIN` go
            // first, and the claim would commit only with the attempt's transaction. Behind it,
            // the claim's own `Sync` has committed it when `BEGIN` runs.
            let ready = self
                .statements
                .ready(self.client, pg::CLAIM)
                .await
                .map_err(classify)?;
            let (claimed, begun) = tokio::join!(
                self.statements.run_ready(self.client, &ready, &params),
                self.client.batch_execute("BEGIN")
            );
            let rows = claimed.map_err(classify)?.0;
            begun.map_err(classify)?;
            // A key someone else holds: the transaction is not this attempt's to run, and a
            // takeover must commit on its own.
            let inserted = rows
                .first()
                .is_some_and(|row| row.try_get::<_, bool>("inserted").unwrap_or(false));
            if !inserted {
                self.client
                    .batch_execute("ROLLBACK")
                    .await
                    .map_err(classify)?;
            } else {
                self.begin = Begin::Open;
            }
            rows
        } else {
            self.statements
                .query(self.client, pg::CLAIM, &params)
                .await?
        };
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Other("the claim returned no row".into()))?;
        let decode = |e: tokio_postgres::Error| {
            StoreError::Other(format!("decoding a claim: {}", describe(&e)))
        };
        if row.try_get::<_, bool>("inserted").map_err(decode)? {
            return Ok(ClaimStep::Inserted);
        }
        if row
            .try_get::<_, Option<String>>("state")
            .map_err(decode)?
            .is_none()
        {
            return Ok(ClaimStep::Vanished);
        }
        record_from_row(row).map(ClaimStep::Held)
    }

    async fn take_over(
        &mut self,
        request: &ClaimRequest<'_>,
        held_by: Option<ClaimToken>,
    ) -> Result<bool, StoreError> {
        let taken = self
            .statements
            .execute(
                self.client,
                pg::TAKE_OVER,
                &[
                    &&self.hash[..],
                    &request.fingerprint.as_str(),
                    &request.fingerprint_version,
                    &request.token.0,
                    &held_by.map(|t| t.0),
                    &pg::secs(request.stale_after),
                    &request.holder.map(|h| h.0),
                ],
            )
            .await?;
        Ok(taken == 1)
    }
}

impl TokioPgStore {
    /// A store on a pool connected to the writer. Claims share that pool unless
    /// [`TokioPgStore::with_claim_pool`] gives them their own (see
    /// [`PgStore::with_claim_pool`](super::PgStore::with_claim_pool) for why).
    pub fn new(pool: Pool) -> TokioPgStore {
        TokioPgStore {
            claim_pool: pool.clone(),
            pool,
            synchronous_claims: false,
            begin_at_claim: false,
            seen: Arc::default(),
            pooler: Pooler::Direct,
            statements: Statements::default(),
        }
    }

    /// A pool of at most `max_size` connections to `url` (a `postgres://` URL or a libpq
    /// key-value string), without TLS. Connections are made when first needed; a checked-out
    /// connection is not pinged (deadpool's fast recycling: a closed client is dropped). The
    /// URL of a `PgStore` service works unchanged: sqlx's own `statement-cache-capacity`, which
    /// tokio-postgres does not know, is left out (this store's cache is per connection, unbounded:
    /// it holds the store's dozen statements and those the handlers prepare).
    pub fn pool(url: &str, max_size: usize) -> Result<Pool, StoreError> {
        let config: tokio_postgres::Config = without_sqlx_parameters(url)
            .parse()
            .map_err(|e| StoreError::Other(format!("invalid PostgreSQL URL: {e}")))?;
        Self::pool_with(config, max_size)
    }

    /// [`TokioPgStore::pool`] from a tokio-postgres configuration.
    ///
    /// A configuration listing several hosts (`postgres://u@h1:5432,h2:5432/db`) connects to
    /// the writable one: `target_session_attrs` is `read-write` unless set, so each new
    /// connection tries the hosts in order and skips a standby. After a failover the old
    /// writer's connections close with its server and are dropped when next taken (deadpool's
    /// fast recycling), and their replacements find the new writer. `read-only` is refused: the
    /// store writes.
    pub fn pool_with(
        mut config: tokio_postgres::Config,
        max_size: usize,
    ) -> Result<Pool, StoreError> {
        use tokio_postgres::config::TargetSessionAttrs;
        match config.get_target_session_attrs() {
            TargetSessionAttrs::ReadOnly => {
                return Err(StoreError::Other(
                    "target_session_attrs=read-only: the store needs the writer".to_owned(),
                ));
            }
            TargetSessionAttrs::Any if config.get_hosts().len() > 1 => {
                config.target_session_attrs(TargetSessionAttrs::ReadWrite);
            }
            _ => {}
        }
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(max_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| StoreError::Other(format!("building the pool: {e}")))
    }

    /// Uses a separate pool for claim and release statements (as
    /// [`PgStore::with_claim_pool`](super::PgStore::with_claim_pool)).
    pub fn with_claim_pool(mut self, claim_pool: Pool) -> TokioPgStore {
        self.claim_pool = claim_pool;
        self
    }

    /// Whether claims wait for their own WAL flush (as
    /// [`PgStore::with_synchronous_claims`](super::PgStore::with_synchronous_claims)).
    pub fn with_synchronous_claims(mut self, synchronous: bool) -> TokioPgStore {
        self.synchronous_claims = synchronous;
        self
    }

    /// Whether a separate-claim attempt's transaction begins in its claim's round trip: the
    /// claim statement and `BEGIN` are sent together on a business connection, the claim
    /// committing on its own before `BEGIN` runs, and the attempt's transaction is open when its
    /// handler runs. A create then makes the round trips of an in-transaction one (three), at
    /// the price the default spares: the attempt holds its business connection from the claim
    /// on, so a downstream call before the handler's first write holds it too (docs/downstream.md).
    /// For services whose idempotent handlers write first. A claim that finds the key held
    /// rolls its `BEGIN` back (one round trip more, on duplicates only); the claims then wait
    /// for a business connection, not the claim pool's, whose other statements (releases,
    /// leases) keep it. Behind a transaction pooler ([`Pooler::Transaction`]) it changes
    /// nothing: the claim and the transaction are two transactions, not pipelined there.
    pub fn with_begin_at_claim(mut self, begin: bool) -> TokioPgStore {
        self.begin_at_claim = begin;
        self
    }

    /// Serves behind `pooler`. [`Pooler::Transaction`] (PgBouncer's `pool_mode = transaction`):
    /// every statement of the store is sent unnamed with its parameter types, each business
    /// `BEGIN` deallocates what other clients left on its server connection, and only the
    /// statements of one transaction are pipelined (a fresh create keeps its round trips; the
    /// gate's `ROLLBACK` and a read's recovery check then go one round trip before theirs).
    /// Handlers there send their statements with `query_typed` (or, without parameters,
    /// `batch_execute`): a statement `prepare`d or `prepare_cached` on one server connection is
    /// not on the next. [`Pooler::Direct`] (the default) and [`Pooler::Session`] change nothing.
    pub fn with_pooler(mut self, pooler: Pooler) -> TokioPgStore {
        self.pooler = pooler;
        self.statements = match pooler {
            Pooler::Transaction => Statements {
                unnamed: Some(Arc::default()),
            },
            Pooler::Direct | Pooler::Session => Statements::default(),
        };
        self
    }

    /// The business pool.
    pub fn pool_ref(&self) -> &Pool {
        &self.pool
    }

    /// Checks, before serving, that both pools reach PostgreSQL directly or through a session
    /// pooler unless [`TokioPgStore::with_pooler`] declared a transaction pooler: an undeclared
    /// pooler in transaction mode is refused (see [`PgStore::check`](super::PgStore::check) for
    /// how it is detected, and its limits). A pool of one connection cannot be probed.
    pub async fn check(&self) -> Result<(), PoolerError> {
        if self.pooler == Pooler::Transaction {
            // Declared: the statements are sent for one.
            return Ok(());
        }
        check_pool(&self.pool, "business").await?;
        check_pool(&self.claim_pool, "claim").await
    }

    async fn get(pool: &Pool) -> Result<Object, StoreError> {
        pool.get().await.map_err(pool_error)
    }

    /// A connection of `pool` for the store's statements: behind a transaction pooler, the
    /// statements' types are learned on it first if they are not yet.
    async fn connection(&self, pool: &Pool) -> Result<Object, StoreError> {
        let client = Self::get(pool).await?;
        if self.statements.unnamed() {
            self.statements.learn(&client).await?;
        }
        Ok(client)
    }

    /// Remembers a key a claim found with a record, for [`Store::look`].
    fn saw(&self, hash: [u8; 32], outcome: &ClaimOutcome) {
        if let ClaimOutcome::Existing(record) = outcome
            && record.state != RecordState::Claimed
        {
            self.seen.insert(hash);
        }
    }

    /// A connection taken for a transaction: in doubt until its `BEGIN` is answered.
    fn beginning(client: Object) -> TokioPgTx {
        TokioPgTx {
            client: Some(client),
            state: TxState::InDoubt,
            committed: None,
        }
    }
}

#[async_trait]
impl Store for TokioPgStore {
    type Tx = TokioPgTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        let hash = request.scope.hash();
        let client = self.connection(&self.claim_pool).await?;
        let mut statements = TokioClaim {
            client: &client,
            statements: &self.statements,
            synchronous: self.synchronous_claims,
            hash,
            begin: Begin::No,
        };
        let outcome = rules::claim(&mut statements, request).await?;
        self.saw(hash, &outcome);
        Ok(outcome)
    }

    async fn claim_and_begin(
        &self,
        request: &ClaimRequest<'_>,
    ) -> Result<(ClaimOutcome, Option<TokioPgTx>), StoreError> {
        if !self.begin_at_claim || self.pooler == Pooler::Transaction {
            return Ok((self.claim(request).await?, None));
        }
        let hash = request.scope.hash();
        // In doubt until the claim's statements are answered: dropped on a failure, the
        // connection is closed, whatever its `BEGIN` did.
        let mut tx = Self::beginning(self.connection(&self.pool).await?);
        let mut statements = TokioClaim {
            client: tx.client(),
            statements: &self.statements,
            synchronous: self.synchronous_claims,
            hash,
            begin: Begin::Asked,
        };
        let outcome = rules::claim(&mut statements, request).await?;
        let open = statements.begin == Begin::Open;
        self.saw(hash, &outcome);
        if open {
            tx.state = TxState::Open;
            Ok((outcome, Some(tx)))
        } else {
            // Never begun, or rolled back: the connection is idle, back to the pool.
            tx.state = TxState::Ended;
            Ok((outcome, None))
        }
    }

    /// As `PgStore`'s look: a key this store saw with a record is read first, in one round trip.
    async fn look(
        &self,
        scope: &Scope,
        _stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let hash = scope.hash();
        if !self.seen.contains(&hash) {
            return Ok(None);
        }
        let pool = if self.pool.status().available > 0 {
            &self.pool
        } else {
            &self.claim_pool
        };
        let client = self.connection(pool).await?;
        let rows = self
            .statements
            .query(&client, pg::LOOK, &[&&hash[..]])
            .await?;
        match rows.first().map(record_from_row).transpose()? {
            Some(record) if record.state != RecordState::Claimed => Ok(Some(record)),
            Some(_) => Ok(None),
            None => {
                self.seen.remove(&hash);
                Ok(None)
            }
        }
    }

    async fn begin(&self) -> Result<TokioPgTx, StoreError> {
        let mut tx = Self::beginning(self.connection(&self.pool).await?);
        let begin = if self.pooler == Pooler::Transaction {
            pg::BEGIN_DEALLOCATING
        } else {
            "BEGIN"
        };
        tx.client().batch_execute(begin).await.map_err(classify)?;
        tx.state = TxState::Open;
        Ok(tx)
    }

    async fn begin_gated(&self, request: &ClaimRequest<'_>) -> Result<Gate<TokioPgTx>, StoreError> {
        let hash = request.scope.hash();
        let mut tx = Self::beginning(self.connection(&self.pool).await?);
        // `BEGIN` and the gate in one round trip (literals the runtime computed).
        let failure = match tx
            .client()
            .batch_execute(&pg::gated_begin(&hash, self.pooler))
            .await
        {
            Ok(()) => {
                tx.state = TxState::Open;
                return Ok(Gate::Open(tx));
            }
            Err(e) => e,
        };
        let code = failure.code().map(|c| c.code().to_owned());
        match code.as_deref() {
            Some(pg::GATE_BUSY) => {
                tx.end("ROLLBACK").await.map_err(classify)?;
                Ok(Gate::Busy)
            }
            Some(pg::GATE_RECORD) => {
                let secs = pg::secs(request.stale_after);
                let params: [&(dyn ToSql + Sync); 2] = [&&hash[..], &secs];
                let rows = if self.statements.unnamed() {
                    // Behind a transaction pooler the read follows the rollback's answer: the
                    // transaction's end may hand the server connection to another client.
                    tx.end("ROLLBACK").await.map_err(classify)?;
                    self.statements
                        .query(tx.client(), pg::SELECT_RECORD, &params)
                        .await?
                } else {
                    // The rollback and the read in one round trip (the read is sent after the
                    // `ROLLBACK`, so even its first prepare runs outside the aborted
                    // transaction).
                    tx.state = TxState::InDoubt;
                    let client = tx.client();
                    let (rolled_back, rows) = tokio::join!(
                        client.batch_execute("ROLLBACK"),
                        self.statements.query(client, pg::SELECT_RECORD, &params)
                    );
                    rolled_back.map_err(classify)?;
                    tx.state = TxState::Ended;
                    rows?
                };
                self.seen.insert(hash);
                Ok(Gate::Existing(
                    rows.first().map(record_from_row).transpose()?,
                ))
            }
            Some(pg::READ_ONLY) => {
                tx.end("ROLLBACK").await.map_err(classify)?;
                Err(classify(failure))
            }
            // Unknown state: `tx` stays in doubt and closes its connection.
            _ => Err(classify(failure)),
        }
    }

    async fn insert_completed(
        &self,
        tx: &mut TokioPgTx,
        request: &ClaimRequest<'_>,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let scope = request.scope;
        let hash = scope.hash();
        let status = pg::stored_status(response)?;
        let headers = Json(&response.headers);
        let retention = request.retention.map(pg::secs);
        let done = tx
            .complete_and_commit(
                &self.statements,
                INSERT_COMPLETED_OR_FAIL,
                &[
                    &&hash[..],
                    &scope.owner,
                    &scope.operation,
                    &scope.resource_scope,
                    &scope.key.as_str(),
                    &request.fingerprint.as_str(),
                    &request.fingerprint_version,
                    &request.token.0,
                    &status,
                    &headers,
                    &response.body,
                    &resource_ref,
                    &retention,
                ],
                |db| {
                    *db.code() == SqlState::UNIQUE_VIOLATION
                        && db.constraint() == Some(RECORDS_PKEY)
                },
            )
            .await?;
        // A retry of this key looks before the gate (a hint either way).
        self.seen.insert(hash);
        Ok(done)
    }

    async fn complete(
        &self,
        tx: &mut TokioPgTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let hash = scope.hash();
        self.seen.insert(hash);
        let status = pg::stored_status(response)?;
        let headers = Json(&response.headers);
        tx.complete_and_commit(
            &self.statements,
            COMPLETE_OR_FAIL,
            &[
                &&hash[..],
                &token.0,
                &status,
                &headers,
                &response.body,
                &resource_ref,
            ],
            |db| *db.code() == SqlState::DIVISION_BY_ZERO,
        )
        .await
    }

    /// Commits `tx`, or, after [`Store::complete`] or [`Store::insert_completed`] sent the
    /// `COMMIT` with the completion, reports that `COMMIT`'s answer.
    async fn commit(&self, mut tx: TokioPgTx) -> Result<(), CommitError> {
        if let Some(committed) = tx.committed.take() {
            return committed;
        }
        tx.end("COMMIT").await.map_err(|e| match e.as_db_error() {
            Some(_) => CommitError::Rejected(describe(&e)),
            None => CommitError::Unknown(describe(&e)),
        })
    }

    async fn rollback(&self, mut tx: TokioPgTx) -> Result<(), StoreError> {
        match tx.state {
            TxState::Open => tx.end("ROLLBACK").await.map_err(classify),
            // Ended with the completion (a failed completion's COMMIT is a rollback), or in doubt:
            // dropped, a connection in doubt is closed, which ends whatever is open.
            TxState::Ended | TxState::InDoubt => Ok(()),
        }
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        let hash = scope.hash();
        let client = self.connection(&self.claim_pool).await?;
        self.statements
            .execute(&client, pg::RELEASE, &[&&hash[..], &token.0])
            .await?;
        Ok(())
    }

    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let client = self.connection(&self.pool).await?;
        let hash = scope.hash();
        let secs = pg::secs(stale_after);
        let params: [&(dyn ToSql + Sync); 2] = [&&hash[..], &secs];
        // Reads decide outcomes: never from a server in recovery, whose records may lag the
        // writer's. The recovery check and the read in one round trip; behind a transaction
        // pooler one after the other (each its own transaction, maybe on another server
        // connection: the check's is the one that matters, and a pooler's servers share a
        // writer).
        let statements = &self.statements;
        let (in_recovery, rows) = if statements.unnamed() {
            let in_recovery = statements.query(&client, IN_RECOVERY, &[]).await;
            (
                in_recovery,
                statements.query(&client, pg::SELECT_RECORD, &params).await,
            )
        } else {
            tokio::join!(
                statements.query(&client, IN_RECOVERY, &[]),
                statements.query(&client, pg::SELECT_RECORD, &params)
            )
        };
        let in_recovery: bool = match in_recovery?.first() {
            Some(row) => row.try_get(0).map_err(decode_error)?,
            None => {
                return Err(StoreError::Other(
                    "pg_is_in_recovery() returned no row".into(),
                ));
            }
        };
        if in_recovery {
            return Err(StoreError::Unavailable(
                "the store's server is in recovery (a standby), not the writer".into(),
            ));
        }
        rows?.first().map(record_from_row).transpose()
    }

    async fn tombstone_resource(
        &self,
        tx: &mut TokioPgTx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        self.statements
            .execute(
                tx.client(),
                pg::TOMBSTONE,
                &[&owner, &operation, &resource_ref],
            )
            .await
    }

    async fn renew_lease(
        &self,
        holder: HolderId,
        expires_after: Duration,
    ) -> Result<bool, StoreError> {
        let client = self.connection(&self.claim_pool).await?;
        self.statements
            .execute(
                &client,
                pg::RENEW_LEASE,
                &[&holder.0, &pg::secs(expires_after)],
            )
            .await?;
        Ok(true)
    }

    async fn end_lease(&self, holder: HolderId) -> Result<(), StoreError> {
        let client = self.connection(&self.claim_pool).await?;
        self.statements
            .execute(&client, pg::END_LEASE, &[&holder.0])
            .await?;
        Ok(())
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let client = self.connection(&self.pool).await?;
        self.statements
            .execute(&client, pg::PURGE_EXPIRED, &[&batch_size])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::without_sqlx_parameters;

    #[test]
    fn sqlx_s_own_parameters_are_left_out_of_a_url() {
        assert_eq!(
            without_sqlx_parameters(
                "postgres://u@h:5/db?sslmode=prefer&statement-cache-capacity=100"
            ),
            "postgres://u@h:5/db?sslmode=prefer"
        );
        assert_eq!(
            without_sqlx_parameters("postgres://u@h/db?statement-cache-capacity=100"),
            "postgres://u@h/db"
        );
        assert_eq!(
            without_sqlx_parameters("postgres://u@h/db"),
            "postgres://u@h/db"
        );
        assert_eq!(
            without_sqlx_parameters("host=h dbname=db"),
            "host=h dbname=db"
        );
    }
}

//! The repository on tokio-postgres: writes on the client of a [`TokioPgStore`] transaction,
//! reads on the service's own pool. Statements are prepared once per connection
//! (`prepare_cached`), so each costs one round trip after the first; behind a transaction
//! pooler they are sent unnamed with their parameter types (`query_typed`, one round trip too),
//! since a prepared statement stays on a server connection the next client gets.

use idemgen_runtime::deadpool_postgres::{ClientWrapper, Pool, PoolError};
use idemgen_runtime::tokio_postgres::types::{ToSql, Type};
use idemgen_runtime::tokio_postgres::{Error, Row};
use idemgen_runtime::{Pooler, TokioPgStore, TxHandle};
use uuid::Uuid;

use super::{Database, DbError, Published, WidgetRow};

/// The widgets on tokio-postgres, the store [`TokioPgStore`].
#[derive(Debug, Clone)]
pub struct TokioPostgres {
    pool: Pool,
    /// Behind a transaction pooler: statements unnamed, with their types.
    unnamed: bool,
}

/// A statement and its parameters' types (for `query_typed`).
struct Sql(&'static str, &'static [Type]);

const INSERT: Sql = Sql(
    super::INSERT,
    &[Type::UUID, Type::TEXT, Type::TEXT, Type::TEXT],
);
const GET: Sql = Sql(super::GET, &[Type::UUID, Type::TEXT]);
const LIST: Sql = Sql(super::LIST, &[Type::TEXT, Type::INT8]);
const DELETE: Sql = Sql(super::DELETE, &[Type::UUID, Type::TEXT]);
const MARK_PUBLISHED: Sql = Sql(super::MARK_PUBLISHED, &[Type::UUID, Type::TEXT]);
const PUBLISHED_ELSEWHERE: Sql = Sql(super::PUBLISHED_ELSEWHERE, &[Type::UUID, Type::TEXT]);
const APPEND_OUTBOX: Sql = Sql(super::APPEND_OUTBOX, &[Type::UUID, Type::TEXT, Type::JSONB]);

impl TokioPostgres {
    /// Reads on `pool`, connected to PostgreSQL directly or through a session pooler.
    pub fn new(pool: Pool) -> TokioPostgres {
        TokioPostgres {
            pool,
            unnamed: false,
        }
    }

    /// Statements for `pooler` (the store's, `TokioPgStore::with_pooler`): unnamed behind a
    /// transaction pooler.
    pub fn with_pooler(mut self, pooler: Pooler) -> TokioPostgres {
        self.unnamed = pooler == Pooler::Transaction;
        self
    }

    /// Runs `sql` on `client` and returns its rows.
    async fn rows(
        &self,
        client: &ClientWrapper,
        sql: &Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let Sql(text, types) = sql;
        if self.unnamed {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                params.iter().copied().zip(types.iter().cloned()).collect();
            client.query_typed(text, &typed).await
        } else {
            let prepared = client.prepare_cached(text).await?;
            client.query(&prepared, params).await
        }
    }

    /// A read on a pooled connection of its own.
    async fn read(&self, sql: &Sql, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let client = self.pool.get().await.map_err(boxed)?;
        Ok(self.rows(&client, sql, params).await?)
    }
}

fn boxed(e: PoolError) -> DbError {
    Box::new(e)
}

fn from_row(row: &Row) -> Result<WidgetRow, DbError> {
    Ok(WidgetRow {
        id: row.try_get("id")?,
        owner: row.try_get("owner")?,
        name: row.try_get("name")?,
        color: row.try_get("color")?,
        published: row.try_get("published")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Database for TokioPostgres {
    type Store = TokioPgStore;

    async fn insert(
        &self,
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        name: &str,
        color: Option<&str>,
    ) -> Result<WidgetRow, DbError> {
        let client = tx.conn().await?;
        let params: [&(dyn ToSql + Sync); 4] = [&Uuid::new_v4(), &owner, &name, &color];
        let rows = self.rows(client, &INSERT, &params).await?;
        from_row(rows.first().ok_or("the insert returned no row")?)
    }

    async fn delete(
        &self,
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        id: Uuid,
    ) -> Result<bool, DbError> {
        let client = tx.conn().await?;
        Ok(!self.rows(client, &DELETE, &[&id, &owner]).await?.is_empty())
    }

    async fn publish(
        &self,
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        id: Uuid,
        channel: &str,
    ) -> Result<Published, DbError> {
        let client = tx.conn().await?;
        let marked = self.rows(client, &MARK_PUBLISHED, &[&id, &owner]).await?;
        let Some(row) = marked.first() else {
            return Ok(Published::NotFound);
        };
        let widget = from_row(row)?;
        let elsewhere = self
            .rows(client, &PUBLISHED_ELSEWHERE, &[&id, &channel])
            .await?;
        if let Some(row) = elsewhere.first() {
            return Ok(Published::Elsewhere(row.try_get(0)?));
        }
        let event = super::published_event(id, channel);
        self.rows(client, &APPEND_OUTBOX, &[&id, &channel, &event])
            .await?;
        Ok(Published::Now(widget))
    }

    async fn get(&self, owner: &str, id: Uuid) -> Result<Option<WidgetRow>, DbError> {
        let rows = self.read(&GET, &[&id, &owner]).await?;
        rows.first().map(from_row).transpose()
    }

    async fn list(&self, owner: &str, limit: i64) -> Result<Vec<WidgetRow>, DbError> {
        let rows = self.read(&LIST, &[&owner, &limit]).await?;
        rows.iter().map(from_row).collect()
    }
}

//! The repository on tokio-postgres: writes on the client of a [`TokioPgStore`] transaction,
//! reads on the service's own pool. Statements are prepared once per connection
//! (`prepare_cached`), so each costs one round trip after the first.

use idemgen_runtime::deadpool_postgres::{Pool, PoolError};
use idemgen_runtime::tokio_postgres::Row;
use idemgen_runtime::tokio_postgres::types::ToSql;
use idemgen_runtime::{TokioPgStore, TxHandle};
use uuid::Uuid;

use super::{Database, DbError, Published, WidgetRow};

/// The widgets on tokio-postgres, the store [`TokioPgStore`].
#[derive(Debug, Clone)]
pub struct TokioPostgres {
    pool: Pool,
}

impl TokioPostgres {
    /// Reads on `pool` (PostgreSQL directly or through a session pooler: the store refuses a
    /// transaction pooler).
    pub fn new(pool: Pool) -> TokioPostgres {
        TokioPostgres { pool }
    }

    async fn query(
        &self,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, DbError> {
        let client = self.pool.get().await.map_err(boxed)?;
        let prepared = client.prepare_cached(statement).await?;
        Ok(client.query(&prepared, params).await?)
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
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        name: &str,
        color: Option<&str>,
    ) -> Result<WidgetRow, DbError> {
        let client = tx.conn().await?;
        let insert = client.prepare_cached(super::INSERT).await?;
        let row = client
            .query_one(&insert, &[&Uuid::new_v4(), &owner, &name, &color])
            .await?;
        from_row(&row)
    }

    async fn delete(
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        id: Uuid,
    ) -> Result<bool, DbError> {
        let client = tx.conn().await?;
        let delete = client.prepare_cached(super::DELETE).await?;
        Ok(client.execute(&delete, &[&id, &owner]).await? == 1)
    }

    async fn publish(
        tx: &mut TxHandle<TokioPgStore>,
        owner: &str,
        id: Uuid,
        channel: &str,
    ) -> Result<Published, DbError> {
        let client = tx.conn().await?;
        let mark = client.prepare_cached(super::MARK_PUBLISHED).await?;
        let Some(row) = client.query_opt(&mark, &[&id, &owner]).await? else {
            return Ok(Published::NotFound);
        };
        let widget = from_row(&row)?;
        let elsewhere = client.prepare_cached(super::PUBLISHED_ELSEWHERE).await?;
        if let Some(row) = client.query_opt(&elsewhere, &[&id, &channel]).await? {
            return Ok(Published::Elsewhere(row.try_get(0)?));
        }
        let append = client.prepare_cached(super::APPEND_OUTBOX).await?;
        let event = super::published_event(id, channel);
        client.execute(&append, &[&id, &channel, &event]).await?;
        Ok(Published::Now(widget))
    }

    async fn get(&self, owner: &str, id: Uuid) -> Result<Option<WidgetRow>, DbError> {
        let rows = self.query(super::GET, &[&id, &owner]).await?;
        rows.first().map(from_row).transpose()
    }

    async fn list(&self, owner: &str, limit: i64) -> Result<Vec<WidgetRow>, DbError> {
        let rows = self.query(super::LIST, &[&owner, &limit]).await?;
        rows.iter().map(from_row).collect()
    }
}

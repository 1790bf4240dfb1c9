//! The repository on sqlx: writes on the connection of a [`PgStore`] transaction, reads on the
//! service's `PgPool`.

use idemgen_runtime::{PgStore, Pooler, TxHandle};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::{Database, DbError, Published, WidgetRow};

/// The widgets on sqlx, the store [`PgStore`].
#[derive(Debug, Clone)]
pub struct Sqlx {
    pool: PgPool,
    pooler: Pooler,
}

/// A read's transaction behind a transaction pooler: one server connection for all of its
/// messages, and no statement name left there by another client (as the runtime's own `BEGIN`).
const READ_BEGIN: &str = "BEGIN; DEALLOCATE ALL";

impl Sqlx {
    /// Reads on `pool`, connected to PostgreSQL directly.
    pub fn new(pool: PgPool) -> Sqlx {
        Sqlx {
            pool,
            pooler: Pooler::Direct,
        }
    }

    /// Reads behind `pooler` (the store's [`Pooler`]): behind a transaction pooler each read
    /// runs in a transaction of its own, because sqlx sends a statement with parameters as two
    /// round trips that such a pooler may hand to two server connections.
    pub fn with_pooler(mut self, pooler: Pooler) -> Sqlx {
        self.pooler = pooler;
        self
    }
}

fn from_row(row: &sqlx::postgres::PgRow) -> Result<WidgetRow, sqlx::Error> {
    Ok(WidgetRow {
        id: row.try_get("id")?,
        owner: row.try_get("owner")?,
        name: row.try_get("name")?,
        color: row.try_get("color")?,
        published: row.try_get("published")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Database for Sqlx {
    type Store = PgStore;

    async fn insert(
        &self,
        tx: &mut TxHandle<PgStore>,
        owner: &str,
        name: &str,
        color: Option<&str>,
    ) -> Result<WidgetRow, DbError> {
        let row = sqlx::query(super::INSERT)
            .bind(Uuid::new_v4())
            .bind(owner)
            .bind(name)
            .bind(color)
            .fetch_one(tx.conn().await?)
            .await?;
        Ok(from_row(&row)?)
    }

    async fn delete(
        &self,
        tx: &mut TxHandle<PgStore>,
        owner: &str,
        id: Uuid,
    ) -> Result<bool, DbError> {
        let deleted = sqlx::query(super::DELETE)
            .bind(id)
            .bind(owner)
            .fetch_optional(tx.conn().await?)
            .await?;
        Ok(deleted.is_some())
    }

    async fn publish(
        &self,
        tx: &mut TxHandle<PgStore>,
        owner: &str,
        id: Uuid,
        channel: &str,
    ) -> Result<Published, DbError> {
        let conn: &mut PgConnection = tx.conn().await?;
        let row = sqlx::query(super::MARK_PUBLISHED)
            .bind(id)
            .bind(owner)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(row) = row else {
            return Ok(Published::NotFound);
        };
        let widget = from_row(&row)?;
        let elsewhere: Option<String> = sqlx::query_scalar(super::PUBLISHED_ELSEWHERE)
            .bind(id)
            .bind(channel)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(channel) = elsewhere {
            return Ok(Published::Elsewhere(channel));
        }
        sqlx::query(super::APPEND_OUTBOX)
            .bind(id)
            .bind(channel)
            .bind(super::published_event(id, channel))
            .execute(conn)
            .await?;
        Ok(Published::Now(widget))
    }

    async fn get(&self, owner: &str, id: Uuid) -> Result<Option<WidgetRow>, DbError> {
        let query = sqlx::query(super::GET).bind(id).bind(owner);
        let row = if self.pooler == Pooler::Transaction {
            let mut tx = self.pool.begin_with(READ_BEGIN).await?;
            let row = query.fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            row
        } else {
            query.fetch_optional(&self.pool).await?
        };
        Ok(row.as_ref().map(from_row).transpose()?)
    }

    async fn list(&self, owner: &str, limit: i64) -> Result<Vec<WidgetRow>, DbError> {
        let query = sqlx::query(super::LIST).bind(owner).bind(limit);
        let rows = if self.pooler == Pooler::Transaction {
            let mut tx = self.pool.begin_with(READ_BEGIN).await?;
            let rows = query.fetch_all(&mut *tx).await?;
            tx.commit().await?;
            rows
        } else {
            query.fetch_all(&self.pool).await?
        };
        Ok(rows.iter().map(from_row).collect::<Result<_, _>>()?)
    }
}

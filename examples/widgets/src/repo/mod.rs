//! The widgets repository: plain SQL, written once here and run by either driver the service
//! offers (`WIDGETS_STORE`): [`sqlx_pg`] on [`PgStore`] and [`tokio_pg`] on [`TokioPgStore`].
//! Writes take the attempt's transaction, so they commit or roll back together with the
//! idempotency record; reads take a pooled connection.

pub mod sqlx_pg;
pub mod tokio_pg;

use std::future::Future;

use chrono::{DateTime, Utc};
use idemgen_runtime::TxHandle;
use uuid::Uuid;

pub use sqlx_pg::Sqlx;
pub use tokio_pg::TokioPostgres;

/// A widget as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WidgetRow {
    /// Its id.
    pub id: Uuid,
    /// The owner it belongs to.
    pub owner: String,
    /// Its name.
    pub name: String,
    /// Its color, if any (`red`, `green`, `blue`).
    pub color: Option<String>,
    /// Whether it was published.
    pub published: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// What publishing a widget did.
#[derive(Debug)]
pub enum Published {
    /// Published on the channel (again, if it was already): one more outbox event.
    Now(WidgetRow),
    /// Already published on another channel (named): nothing was written.
    Elsewhere(String),
    /// No widget of this owner has the id.
    NotFound,
}

/// A driver's failure, opaque to the service: a handler returns it as
/// `HandlerError::internal`, and the runtime answers it as it answers the store's own errors
/// (a lost connection 503, a value PostgreSQL cannot store 400, anything else 500).
pub type DbError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The widgets' statements on one driver, and the store whose transactions they write in.
pub trait Database: Send + Sync + 'static {
    /// The store of the idempotency records and of the transactions writes run in.
    type Store: idemgen_runtime::Store;

    /// Inserts a widget.
    fn insert(
        &self,
        tx: &mut TxHandle<Self::Store>,
        owner: &str,
        name: &str,
        color: Option<&str>,
    ) -> impl Future<Output = Result<WidgetRow, DbError>> + Send;

    /// Deletes one of `owner`'s widgets; returns whether it existed.
    fn delete(
        &self,
        tx: &mut TxHandle<Self::Store>,
        owner: &str,
        id: Uuid,
    ) -> impl Future<Output = Result<bool, DbError>> + Send;

    /// Marks a widget published and appends one outbox event, in the attempt's transaction.
    /// The UPDATE holds the widget's row lock until the transaction ends, so concurrent
    /// publications of one widget (with different keys) see each other's events.
    fn publish(
        &self,
        tx: &mut TxHandle<Self::Store>,
        owner: &str,
        id: Uuid,
        channel: &str,
    ) -> impl Future<Output = Result<Published, DbError>> + Send;

    /// Reads one of `owner`'s widgets.
    fn get(
        &self,
        owner: &str,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<WidgetRow>, DbError>> + Send;

    /// Lists `owner`'s widgets, newest first.
    fn list(
        &self,
        owner: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<WidgetRow>, DbError>> + Send;
}

/// The columns every statement returns, in [`WidgetRow`]'s order.
macro_rules! columns {
    () => {
        "id, owner, name, color, published, created_at"
    };
}

/// `$1` id, `$2` owner, `$3` name, `$4` color.
pub(crate) const INSERT: &str = concat!(
    "INSERT INTO widgets (id, owner, name, color) VALUES ($1, $2, $3, $4) RETURNING ",
    columns!()
);
/// `$1` id, `$2` owner.
pub(crate) const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM widgets WHERE id = $1 AND owner = $2"
);
/// `$1` owner, `$2` limit.
pub(crate) const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM widgets WHERE owner = $1 ORDER BY created_at DESC, id LIMIT $2"
);
/// `$1` id, `$2` owner: the deleted widget's id, if there was one.
pub(crate) const DELETE: &str = "DELETE FROM widgets WHERE id = $1 AND owner = $2 RETURNING id";
/// `$1` id, `$2` owner.
pub(crate) const MARK_PUBLISHED: &str = concat!(
    "UPDATE widgets SET published = true WHERE id = $1 AND owner = $2 RETURNING ",
    columns!()
);
/// `$1` widget id, `$2` channel: another channel it was published on.
pub(crate) const PUBLISHED_ELSEWHERE: &str =
    "SELECT channel FROM outbox WHERE widget_id = $1 AND channel <> $2 LIMIT 1";
/// `$1` widget id, `$2` channel, `$3` payload.
pub(crate) const APPEND_OUTBOX: &str =
    "INSERT INTO outbox (widget_id, channel, payload) VALUES ($1, $2, $3)";

/// The outbox event of a publication.
pub(crate) fn published_event(id: Uuid, channel: &str) -> serde_json::Value {
    serde_json::json!({"event": "widget.published", "widget_id": id, "channel": channel})
}

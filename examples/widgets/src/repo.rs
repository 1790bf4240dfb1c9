//! The widgets repository: plain SQL on a connection. Writes take the connection of the attempt's
//! transaction, so they commit or roll back together with the idempotency record.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

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

const COLUMNS: &str = "id, owner, name, color, published, created_at";

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

/// Inserts a widget.
pub async fn insert(
    conn: &mut PgConnection,
    owner: &str,
    name: &str,
    color: Option<&str>,
) -> Result<WidgetRow, sqlx::Error> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO widgets (id, owner, name, color) VALUES ($1, $2, $3, $4) RETURNING {COLUMNS}"
    )))
    .bind(Uuid::new_v4())
    .bind(owner)
    .bind(name)
    .bind(color)
    .fetch_one(conn)
    .await?;
    from_row(&row)
}

/// Reads one of `owner`'s widgets.
pub async fn get(
    conn: &mut PgConnection,
    owner: &str,
    id: Uuid,
) -> Result<Option<WidgetRow>, sqlx::Error> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM widgets WHERE id = $1 AND owner = $2"
    )))
    .bind(id)
    .bind(owner)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Lists `owner`'s widgets, newest first.
pub async fn list(
    conn: &mut PgConnection,
    owner: &str,
    limit: i64,
) -> Result<Vec<WidgetRow>, sqlx::Error> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM widgets WHERE owner = $1 ORDER BY created_at DESC, id LIMIT $2"
    )))
    .bind(owner)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    rows.iter().map(from_row).collect()
}

/// Deletes one of `owner`'s widgets; returns whether it existed.
pub async fn delete(conn: &mut PgConnection, owner: &str, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM widgets WHERE id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks a widget published and appends one outbox event, on the same connection (one
/// transaction). `None` when the widget does not exist for this owner.
pub async fn publish(
    conn: &mut PgConnection,
    owner: &str,
    id: Uuid,
    channel: &str,
) -> Result<Published, sqlx::Error> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE widgets SET published = true WHERE id = $1 AND owner = $2 RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(Published::NotFound);
    };
    let widget = from_row(&row)?;
    // The UPDATE above holds the widget's row lock until the transaction ends, so concurrent
    // publications of one widget (with different keys) see each other's events here.
    let elsewhere: Option<String> = sqlx::query_scalar(
        "SELECT channel FROM outbox WHERE widget_id = $1 AND channel <> $2 LIMIT 1",
    )
    .bind(id)
    .bind(channel)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(channel) = elsewhere {
        return Ok(Published::Elsewhere(channel));
    }
    sqlx::query("INSERT INTO outbox (widget_id, channel, payload) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(channel)
        .bind(serde_json::json!({"event": "widget.published", "widget_id": id, "channel": channel}))
        .execute(conn)
        .await?;
    Ok(Published::Now(widget))
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

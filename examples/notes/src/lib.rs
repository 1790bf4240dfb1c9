//! The notes example on SQLite: an idemgen-generated API ([`api`], checked in, kept fresh with
//! `idemgen build --check`) implemented by [`service`] on [`SqliteStore`]. One file holds the
//! notes and the idempotency records, so a note and the stored response of its create commit in
//! one transaction; `cargo run` needs no database installed.

#[rustfmt::skip]
pub mod api;
pub mod auth;
pub mod service;

use std::path::Path;
use std::sync::Arc;

use idemgen_runtime::{Executor, ExecutorConfig, Server, SqliteStore};

/// The service's schema, applied at start after the runtime's own migrations.
pub const SCHEMA: &str = include_str!("../migrations/0001_notes.sql");

/// The notes server: the state of its router.
pub type NotesServer = Server<service::NotesService, SqliteStore, auth::BearerIsOwner>;

/// Opens (or creates) the database file at `path`: the runtime's migrations, then the notes table.
pub async fn open(
    path: impl AsRef<Path>,
) -> Result<SqliteStore, Box<dyn std::error::Error + Send + Sync>> {
    let store = SqliteStore::open(path).await?;
    sqlx::raw_sql(SCHEMA).execute(store.pool()).await?;
    Ok(store)
}

/// The router on `store` with `config`, and its server (whose executor `main` shuts down).
pub fn app(store: SqliteStore, config: ExecutorConfig) -> (axum::Router, NotesServer) {
    let service = service::NotesService::new(store.pool().clone());
    let server = Server::new(
        Arc::new(service),
        auth::BearerIsOwner,
        Executor::new(store, config),
    );
    (api::router(server.clone()), server)
}

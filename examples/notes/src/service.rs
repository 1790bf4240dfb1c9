//! The handlers of the Notes API, on SQLite. The create writes through `tx`, the attempt's
//! transaction on the store's file: the note and the stored response commit together, so a retry
//! replays the note instead of inserting another. Reads use the pool.

use idemgen_runtime::{
    HandlerResult, Principal, Problem, ProblemKind, SqlitePool, SqliteStore, TxHandle,
};

use crate::api::types::Note;
use crate::api::*;

/// The Notes service.
#[derive(Debug, Clone)]
pub struct NotesService {
    pool: SqlitePool,
}

impl NotesService {
    /// A service reading from `pool` (the store's).
    pub fn new(pool: SqlitePool) -> NotesService {
        NotesService { pool }
    }
}

impl NotesApi for NotesService {
    type Store = SqliteStore;

    async fn authorize_create_note(
        &self,
        _principal: &Principal,
        _request: &CreateNoteRequest,
    ) -> Result<(), Problem> {
        // Every authenticated caller may write notes; keys are scoped to the caller anyway.
        Ok(())
    }

    async fn create_note(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<SqliteStore>,
        request: CreateNoteRequest,
    ) -> HandlerResult<CreateNote> {
        // The first `conn()` begins the write transaction (`BEGIN IMMEDIATE`): from here to the
        // commit this attempt holds the file's write lock, so keep it short.
        let (id, text): (i64, String) =
            sqlx::query_as("INSERT INTO notes (owner, text) VALUES (?1, ?2) RETURNING id, text")
                .bind(&principal.owner)
                .bind(&request.body.text)
                .fetch_one(tx.conn().await?)
                .await?;
        tx.set_resource_ref(id.to_string());
        Ok(CreateNoteResponse::Status201 {
            location: format!("/notes/{id}"),
            body: Note { id, text },
        })
    }

    async fn get_note(
        &self,
        principal: &Principal,
        request: GetNoteRequest,
    ) -> HandlerResult<GetNote> {
        // Only the caller's own notes: another owner's id is a 404, as if it did not exist.
        let note: Option<(i64, String)> =
            sqlx::query_as("SELECT id, text FROM notes WHERE id = ?1 AND owner = ?2")
                .bind(request.id)
                .bind(&principal.owner)
                .fetch_optional(&self.pool)
                .await?;
        match note {
            Some((id, text)) => Ok(GetNoteResponse::Status200(Note { id, text })),
            None => Err(Problem::new(ProblemKind::NotFound).into()),
        }
    }
}

//! The handlers of the Notes API: written once by `idemgen scaffold`, yours to edit.
//!
//! Every handler answers 500 and every write's authorization answers 403 until you replace them;
//! reads are allowed to every authenticated caller unless you override their `authorize_*`.
//! The generated module (`idemgen build`) is regenerated on every spec change; this file is not.

use crate::api::*;
use idemgen_runtime::{HandlerError, HandlerResult, Principal, Problem, ProblemKind, TxHandle};

/// The Notes service.
#[derive(Debug, Default)]
pub struct NotesService;

impl NotesApi for NotesService {
    /// Where the runtime's transactions and idempotency records live.
    type Store = idemgen_runtime::TokioPgStore;

    /// May `principal` attempt `createNote`? Runs on every attempt, replays included.
    async fn authorize_create_note(
        &self,
        _principal: &Principal,
        _request: &CreateNoteRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `createNote`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `createNote` (POST /notes): write through `tx` only; a success is stored and replayed.
    async fn create_note(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<Self::Store>,
        _request: CreateNoteRequest,
    ) -> HandlerResult<CreateNote> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("createNote is not implemented"))
    }

    /// `getNote` (GET /notes/{id}).
    async fn get_note(
        &self,
        _principal: &Principal,
        _request: GetNoteRequest,
    ) -> HandlerResult<GetNote> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("getNote is not implemented"))
    }
}

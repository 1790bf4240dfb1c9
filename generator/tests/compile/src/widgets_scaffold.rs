//! The handlers of the Widgets API: written once by `idemgen scaffold`, yours to edit.
//!
//! Every handler answers 500 and every write's authorization answers 403 until you replace them;
//! reads are allowed to every authenticated caller unless you override their `authorize_*`.
//! The generated module (`idemgen build`) is regenerated on every spec change; this file is not.

use crate::widgets::*;
use idemgen_runtime::{HandlerError, HandlerResult, Principal, Problem, ProblemKind, TxHandle};

/// The Widgets service.
#[derive(Debug, Default)]
pub struct WidgetsService;

impl WidgetsApi for WidgetsService {
    /// Where the runtime's transactions and idempotency records live.
    type Store = idemgen_runtime::PgStore;

    /// May `principal` attempt `createWidget`? Runs on every attempt, replays included.
    async fn authorize_create_widget(
        &self,
        _principal: &Principal,
        _request: &CreateWidgetRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `createWidget`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `createWidget` (POST /widgets): write through `tx` only; a success is stored and replayed.
    async fn create_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<Self::Store>,
        _request: CreateWidgetRequest,
    ) -> HandlerResult<CreateWidget> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("createWidget is not implemented"))
    }

    /// `listWidgets` (GET /widgets).
    async fn list_widgets(
        &self,
        _principal: &Principal,
        _request: ListWidgetsRequest,
    ) -> HandlerResult<ListWidgets> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("listWidgets is not implemented"))
    }

    /// `getWidget` (GET /widgets/{id}).
    async fn get_widget(
        &self,
        _principal: &Principal,
        _request: GetWidgetRequest,
    ) -> HandlerResult<GetWidget> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("getWidget is not implemented"))
    }

    /// May `principal` attempt `deleteWidget`? Runs on every attempt, replays included.
    async fn authorize_delete_widget(
        &self,
        _principal: &Principal,
        _request: &DeleteWidgetRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `deleteWidget`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `deleteWidget` (DELETE /widgets/{id}): write through `tx` only.
    async fn delete_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<Self::Store>,
        _request: DeleteWidgetRequest,
    ) -> HandlerResult<DeleteWidget> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("deleteWidget is not implemented"))
    }

    /// May `principal` attempt `publishWidget`? Runs on every attempt, replays included.
    async fn authorize_publish_widget(
        &self,
        _principal: &Principal,
        _request: &PublishWidgetRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `publishWidget`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `publishWidget` (POST /widgets/{id}/publish): write through `tx` only; a success is stored and replayed.
    async fn publish_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<Self::Store>,
        _request: PublishWidgetRequest,
    ) -> HandlerResult<PublishWidget> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("publishWidget is not implemented"))
    }
}

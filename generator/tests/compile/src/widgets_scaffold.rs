//! The handlers of the Widgets API: written once by `idemgen scaffold`, yours to edit.
//!
//! Every handler answers 500 and every authorization check answers 403 until you replace them.
//! The generated module (`idemgen build`) is regenerated on every spec change; this file is not.

use crate::widgets::*;
use idemgen_runtime::{HandlerError, Principal, Problem, ProblemKind, Store, TxHandle};

/// The Widgets service.
#[derive(Debug, Default)]
pub struct WidgetsService;

impl WidgetsApi for WidgetsService {
    /// Where idempotency records live: `idemgen_runtime::PgStore` in production.
    type Store = idemgen_runtime::MemoryStore;

    /// May `principal` attempt `createWidget`? Runs on every attempt, replays included.
    async fn authorize_create_widget(
        &self,
        _principal: &Principal,
        _request: &CreateWidgetRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `createWidget`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `createWidget` (POST /widgets): write through `tx` only; a 2xx answer is stored and replayed.
    async fn create_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<<Self::Store as Store>::Tx>,
        _request: CreateWidgetRequest,
    ) -> Result<CreateWidgetResponse, HandlerError> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("createWidget is not implemented"))
    }

    /// May `principal` attempt `listWidgets`? Runs on every attempt, replays included.
    async fn authorize_list_widgets(
        &self,
        _principal: &Principal,
        _request: &ListWidgetsRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `listWidgets`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `listWidgets` (GET /widgets).
    async fn list_widgets(
        &self,
        _principal: &Principal,
        _request: ListWidgetsRequest,
    ) -> Result<ListWidgetsResponse, HandlerError> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("listWidgets is not implemented"))
    }

    /// May `principal` attempt `getWidget`? Runs on every attempt, replays included.
    async fn authorize_get_widget(
        &self,
        _principal: &Principal,
        _request: &GetWidgetRequest,
    ) -> Result<(), Problem> {
        // Deny until you decide who may attempt `getWidget`.
        Err(Problem::new(ProblemKind::Forbidden).with_detail("not authorized yet"))
    }

    /// `getWidget` (GET /widgets/{id}).
    async fn get_widget(
        &self,
        _principal: &Principal,
        _request: GetWidgetRequest,
    ) -> Result<GetWidgetResponse, HandlerError> {
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

    /// `deleteWidget` (DELETE /widgets/{id}).
    async fn delete_widget(
        &self,
        _principal: &Principal,
        _request: DeleteWidgetRequest,
    ) -> Result<DeleteWidgetResponse, HandlerError> {
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

    /// `publishWidget` (POST /widgets/{id}/publish): write through `tx` only; a 2xx answer is stored and replayed.
    async fn publish_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<<Self::Store as Store>::Tx>,
        _request: PublishWidgetRequest,
    ) -> Result<PublishWidgetResponse, HandlerError> {
        // Answered as an opaque 500 problem; the message is logged.
        Err(HandlerError::msg("publishWidget is not implemented"))
    }
}

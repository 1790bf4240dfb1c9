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
        Err(Problem::new(ProblemKind::Forbidden).with_detail("`createWidget` is not authorized yet"))
    }

    /// `createWidget` (POST /widgets): write through `tx` only; a 2xx answer is stored and replayed.
    async fn create_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<<Self::Store as Store>::Tx>,
        _request: CreateWidgetRequest,
    ) -> Result<CreateWidgetResponse, HandlerError> {
        Err(HandlerError::msg("`createWidget` is not implemented"))
    }

    /// May `principal` attempt `listWidgets`? Runs on every attempt, replays included.
    async fn authorize_list_widgets(
        &self,
        _principal: &Principal,
        _request: &ListWidgetsRequest,
    ) -> Result<(), Problem> {
        Err(Problem::new(ProblemKind::Forbidden).with_detail("`listWidgets` is not authorized yet"))
    }

    /// `listWidgets` (GET /widgets).
    async fn list_widgets(
        &self,
        _principal: &Principal,
        _request: ListWidgetsRequest,
    ) -> Result<ListWidgetsResponse, HandlerError> {
        Err(HandlerError::msg("`listWidgets` is not implemented"))
    }

    /// May `principal` attempt `getWidget`? Runs on every attempt, replays included.
    async fn authorize_get_widget(
        &self,
        _principal: &Principal,
        _request: &GetWidgetRequest,
    ) -> Result<(), Problem> {
        Err(Problem::new(ProblemKind::Forbidden).with_detail("`getWidget` is not authorized yet"))
    }

    /// `getWidget` (GET /widgets/{id}).
    async fn get_widget(
        &self,
        _principal: &Principal,
        _request: GetWidgetRequest,
    ) -> Result<GetWidgetResponse, HandlerError> {
        Err(HandlerError::msg("`getWidget` is not implemented"))
    }

    /// May `principal` attempt `deleteWidget`? Runs on every attempt, replays included.
    async fn authorize_delete_widget(
        &self,
        _principal: &Principal,
        _request: &DeleteWidgetRequest,
    ) -> Result<(), Problem> {
        Err(Problem::new(ProblemKind::Forbidden).with_detail("`deleteWidget` is not authorized yet"))
    }

    /// `deleteWidget` (DELETE /widgets/{id}).
    async fn delete_widget(
        &self,
        _principal: &Principal,
        _request: DeleteWidgetRequest,
    ) -> Result<DeleteWidgetResponse, HandlerError> {
        Err(HandlerError::msg("`deleteWidget` is not implemented"))
    }

    /// May `principal` attempt `publishWidget`? Runs on every attempt, replays included.
    async fn authorize_publish_widget(
        &self,
        _principal: &Principal,
        _request: &PublishWidgetRequest,
    ) -> Result<(), Problem> {
        Err(Problem::new(ProblemKind::Forbidden).with_detail("`publishWidget` is not authorized yet"))
    }

    /// `publishWidget` (POST /widgets/{id}/publish): write through `tx` only; a 2xx answer is stored and replayed.
    async fn publish_widget(
        &self,
        _principal: &Principal,
        _tx: &mut TxHandle<<Self::Store as Store>::Tx>,
        _request: PublishWidgetRequest,
    ) -> Result<PublishWidgetResponse, HandlerError> {
        Err(HandlerError::msg("`publishWidget` is not implemented"))
    }
}
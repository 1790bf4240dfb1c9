//! An idempotent handler cannot skip the transaction handle (and write elsewhere).

use idemgen_compile_tests::widgets::*;
use idemgen_runtime::{HandlerError, HandlerResult, MemoryStore, Principal, Problem, TxHandle};

struct Service;

impl WidgetsApi for Service {
    type Store = MemoryStore;

    async fn authorize_create_widget(&self, _: &Principal, _: &CreateWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn create_widget(&self, _: &Principal, _: CreateWidgetRequest) -> HandlerResult<CreateWidget> {
        Err(HandlerError::msg("unused"))
    }

    async fn list_widgets(&self, _: &Principal, _: ListWidgetsRequest) -> HandlerResult<ListWidgets> {
        Err(HandlerError::msg("unused"))
    }

    async fn get_widget(&self, _: &Principal, _: GetWidgetRequest) -> HandlerResult<GetWidget> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_delete_widget(&self, _: &Principal, _: &DeleteWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn delete_widget(
        &self,
        _: &Principal,
        _: &mut TxHandle<MemoryStore>,
        _: DeleteWidgetRequest,
    ) -> HandlerResult<DeleteWidget> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_publish_widget(&self, _: &Principal, _: &PublishWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn publish_widget(
        &self,
        _: &Principal,
        _: &mut TxHandle<MemoryStore>,
        _: PublishWidgetRequest,
    ) -> HandlerResult<PublishWidget> {
        Err(HandlerError::msg("unused"))
    }
}

fn main() {}

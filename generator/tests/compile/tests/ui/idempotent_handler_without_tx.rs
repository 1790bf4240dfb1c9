//! An idempotent handler cannot skip the transaction handle (and write elsewhere).

use idemgen_compile_tests::widgets::*;
use idemgen_runtime::{HandlerError, MemoryStore, Principal, Problem, Store, TxHandle};

struct Service;

impl WidgetsApi for Service {
    type Store = MemoryStore;

    async fn authorize_create_widget(&self, _: &Principal, _: &CreateWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn create_widget(
        &self,
        _: &Principal,
        _: CreateWidgetRequest,
    ) -> Result<CreateWidgetResponse, HandlerError> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_list_widgets(&self, _: &Principal, _: &ListWidgetsRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn list_widgets(&self, _: &Principal, _: ListWidgetsRequest) -> Result<ListWidgetsResponse, HandlerError> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_get_widget(&self, _: &Principal, _: &GetWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn get_widget(&self, _: &Principal, _: GetWidgetRequest) -> Result<GetWidgetResponse, HandlerError> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_delete_widget(&self, _: &Principal, _: &DeleteWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn delete_widget(&self, _: &Principal, _: DeleteWidgetRequest) -> Result<DeleteWidgetResponse, HandlerError> {
        Err(HandlerError::msg("unused"))
    }

    async fn authorize_publish_widget(&self, _: &Principal, _: &PublishWidgetRequest) -> Result<(), Problem> {
        Ok(())
    }

    async fn publish_widget(
        &self,
        _: &Principal,
        _: &mut TxHandle<<Self::Store as Store>::Tx>,
        _: PublishWidgetRequest,
    ) -> Result<PublishWidgetResponse, HandlerError> {
        Err(HandlerError::msg("unused"))
    }
}

fn main() {}

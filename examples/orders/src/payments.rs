//! The payments service (the downstream): one charge per `Idempotency-Key`.

use idemgen_runtime::{Authorization, HandlerResult, PgStore, Principal, Problem, TxHandle};

use crate::payments_api::types::Charge;
use crate::payments_api::*;

/// The payments service.
#[derive(Debug, Clone, Default)]
pub struct Payments;

impl PaymentsApi for Payments {
    type Store = PgStore;

    async fn authorize_create_charge(
        &self,
        _principal: &Principal,
        _request: &CreateChargeRequest,
    ) -> Authorization {
        Ok::<(), Problem>(())
    }

    async fn create_charge(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: CreateChargeRequest,
    ) -> HandlerResult<CreateCharge> {
        let body = request.body;
        let id = uuid::Uuid::new_v4();
        sqlx::query(
            "INSERT INTO charges (id, owner, reference, amount, currency) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(&principal.owner)
        .bind(&body.reference)
        .bind(body.amount)
        .bind(&body.currency)
        .execute(tx.conn().await?)
        .await?;
        tx.set_resource_ref(id.to_string());
        Ok(CreateChargeResponse::Status201(Charge {
            id,
            reference: body.reference,
            amount: body.amount,
            currency: body.currency,
        }))
    }
}

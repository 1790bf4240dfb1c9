//! The orders service (the upstream): an order's create charges it through the payments service
//! with a key derived from the order's own key, then writes the order (docs/downstream.md).

use idemgen_runtime::{
    Authorization, HandlerError, HandlerResult, PgStore, Principal, Problem, TxHandle,
};

use crate::orders_api::types::Order;
use crate::orders_api::*;
use crate::payments_client::{CallOptions, CreateChargeResponse, PaymentsClient, types};

/// The price of one item, in cents.
pub const UNIT_PRICE: i64 = 250;

/// The orders service, with its client of the payments service.
#[derive(Debug, Clone)]
pub struct Orders {
    payments: PaymentsClient,
}

impl Orders {
    /// A service charging through `payments`.
    pub fn new(payments: PaymentsClient) -> Orders {
        Orders { payments }
    }
}

impl OrdersApi for Orders {
    type Store = PgStore;

    async fn authorize_create_order(
        &self,
        _principal: &Principal,
        _request: &CreateOrderRequest,
    ) -> Authorization {
        Ok::<(), Problem>(())
    }

    async fn create_order(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: CreateOrderRequest,
    ) -> HandlerResult<CreateOrder> {
        let order = request.body;
        // 1. The downstream call first, before any write: no connection is held while it runs
        //    (separate-claim strategy). Its key is the same on every attempt of this order, and
        //    its body depends on the order's request only, so a retry gets the payment's replay.
        let key = tx
            .derive_key("charge")
            .ok_or_else(|| HandlerError::msg("createOrder runs as an idempotent attempt"))?;
        let amount = i64::from(order.quantity) * UNIT_PRICE;
        let charge = types::NewCharge {
            reference: format!("{} x{}", order.sku, order.quantity),
            amount,
            currency: "EUR".to_owned(),
        };
        // Unknown outcome → 504, unreachable → 503: the client retries with the same key.
        let charged = self
            .payments
            .create_charge(&charge, &CallOptions::from(&key))
            .await
            .map_err(Problem::from)?;
        let CreateChargeResponse::Status201(charge) = charged.value;
        // 2. The local write: if it fails, the retry replays the charge and writes once.
        let id = uuid::Uuid::new_v4();
        sqlx::query(
            "INSERT INTO orders (id, owner, sku, quantity, amount, charge_id)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(&principal.owner)
        .bind(&order.sku)
        .bind(order.quantity)
        .bind(amount)
        .bind(charge.id)
        .execute(tx.conn().await?)
        .await?;
        tx.set_resource_ref(id.to_string());
        Ok(CreateOrderResponse::Status201(Order {
            id,
            sku: order.sku,
            quantity: order.quantity,
            amount,
            charge_id: charge.id,
        }))
    }
}

//! Retention: completed records are kept forever unless an operation sets a TTL; expired rows
//! are drained in indexed batches that skip locked rows, so cleanup never blocks live claims.

use std::time::Duration;

use crate::store::{Store, StoreError};

/// How many rows one cleanup statement deletes at most.
pub const CLEANUP_BATCH: i64 = 1000;

/// Deletes every expired record, batch by batch; returns how many were deleted.
pub async fn purge_expired<S: Store + ?Sized>(store: &S) -> Result<u64, StoreError> {
    let mut total = 0;
    loop {
        let n = store.purge_expired_batch(CLEANUP_BATCH).await?;
        total += n;
        if n < CLEANUP_BATCH as u64 {
            return Ok(total);
        }
    }
}

/// Runs [`purge_expired`] every `every` until the task is dropped; failures are logged.
pub async fn run_cleanup<S: Store>(store: std::sync::Arc<S>, every: Duration) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        match purge_expired(store.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "expired idempotency records deleted"),
            Err(e) => tracing::warn!(error = %e, "idempotency cleanup failed"),
        }
    }
}

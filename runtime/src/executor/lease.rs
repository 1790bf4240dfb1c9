//! An executor's lease (protocol.md, "Durability of claims"): registered and renewed from a
//! background task, and the task that retries releases that failed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use crate::store::{ClaimToken, HolderId, Scope, Store};

/// The first and the longest pause between retries of releases that failed.
pub(super) const RELEASE_RETRY_MIN: Duration = Duration::from_millis(50);
pub(super) const RELEASE_RETRY_MAX: Duration = Duration::from_secs(1);
/// At most this many failed releases are remembered; beyond, a claim waits for takeover.
pub(super) const MAX_DEFERRED_RELEASES: usize = 10_000;

/// What the clones of one executor share: its lease, and the ways to its background tasks. When
/// the last clone is dropped the tasks stop without ending the lease, which then lapses.
#[derive(Debug)]
pub(super) struct Holder {
    pub(super) lease: Arc<Lease>,
    /// To the task retrying failed releases.
    pub(super) task: Option<mpsc::UnboundedSender<Chore>>,
    /// Dropped with the last clone: the renewing task then stops.
    pub(super) _alive: Option<watch::Sender<()>>,
}

/// The executor's lease as this process knows it.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) id: HolderId,
    /// When the store last confirmed a renewal (this process's monotonic clock, used only to
    /// decide when to renew before a claim; the store judges expiry by its own clock).
    pub(super) renewed: Mutex<Option<Instant>>,
    /// The store keeps no leases (its `renew_lease` answered false).
    pub(super) unsupported: AtomicBool,
    /// Ended by [`Executor::shutdown`]: claims name no holder any more.
    pub(super) ended: AtomicBool,
    /// Failed releases waiting for the store.
    pub(super) deferred: AtomicUsize,
    /// Held by each renewal and by the end of the lease, so that no renewal lands after it.
    pub(super) renewing: tokio::sync::Mutex<()>,
}

impl Lease {
    pub(super) fn renewed_at(&self) -> Option<Instant> {
        *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn renewed_within(&self, within: Duration) -> bool {
        self.renewed_at().is_some_and(|at| at.elapsed() < within)
    }

    /// Renews the lease unless it was ended, one renewal at a time; `within`: skip it when
    /// another renewed that recently.
    pub(super) async fn renew<S: Store>(
        &self,
        store: &S,
        expiry: Duration,
        within: Duration,
    ) -> bool {
        let _one = self.renewing.lock().await;
        if self.ended.load(Ordering::SeqCst) {
            return false;
        }
        if self.renewed_within(within) {
            return true;
        }
        let asked = Instant::now();
        match store.renew_lease(self.id, expiry).await {
            Ok(true) => {
                *self
                    .renewed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(asked);
                true
            }
            Ok(false) => {
                self.unsupported.store(true, Ordering::SeqCst);
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "renewing the executor's lease failed");
                false
            }
        }
    }

    /// Ends the lease: no renewal runs after this one starts.
    pub(super) async fn end<S: Store>(&self, store: &S) {
        self.ended.store(true, Ordering::SeqCst);
        let _one = self.renewing.lock().await;
        if let Err(e) = store.end_lease(self.id).await {
            tracing::warn!(error = %e, "ending the executor's lease failed; it lapses");
        }
    }
}

/// Renews the lease every `every` until it ends or the executor is dropped (`alive` closes).
pub(super) async fn renew_lease<S: Store>(
    store: Arc<S>,
    lease: Arc<Lease>,
    every: Duration,
    expiry: Duration,
    mut alive: watch::Receiver<()>,
) {
    loop {
        if lease.ended.load(Ordering::SeqCst) || lease.unsupported.load(Ordering::SeqCst) {
            return;
        }
        lease.renew(&*store, expiry, Duration::ZERO).await;
        tokio::select! {
            _ = alive.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Work for the background task.
pub(super) enum Chore {
    /// A release that failed: retry it until the store answers.
    Release(Scope, ClaimToken),
    /// Retry the failed releases once, then stop.
    Shutdown(oneshot::Sender<()>),
}

/// The task of one executor that retries failed releases with backoff; stops when the executor
/// shuts down or is dropped. Apart from the renewals, so that a release waiting on the store
/// never delays a renewal.
pub(super) async fn retry_failed_releases<S: Store>(
    store: Arc<S>,
    lease: Arc<Lease>,
    mut chores: mpsc::UnboundedReceiver<Chore>,
    stale_claim: Duration,
) {
    use tokio::time::Instant as At;
    let mut deferred: Vec<(Scope, ClaimToken, Instant)> = Vec::new();
    let mut backoff = RELEASE_RETRY_MIN;
    let mut next_release: Option<At> = None;
    loop {
        let wake = next_release.unwrap_or_else(|| At::now() + Duration::from_secs(3600));
        tokio::select! {
            chore = chores.recv() => match chore {
                // Every clone was dropped without a shutdown: stop; the lease lapses.
                None => return,
                Some(Chore::Release(scope, token)) => {
                    if deferred.len() < MAX_DEFERRED_RELEASES {
                        deferred.push((scope, token, Instant::now()));
                    } else {
                        tracing::warn!("too many failed releases remembered; this claim waits for takeover");
                    }
                    lease.deferred.store(deferred.len(), Ordering::SeqCst);
                    next_release.get_or_insert_with(|| At::now() + backoff);
                }
                Some(Chore::Shutdown(done)) => {
                    retry_releases(&*store, &lease, &mut deferred, stale_claim).await;
                    let _ = done.send(());
                    return;
                }
            },
            _ = tokio::time::sleep_until(wake) => {}
        }
        if next_release.is_some_and(|at| At::now() >= at) {
            let all = retry_releases(&*store, &lease, &mut deferred, stale_claim).await;
            backoff = if all {
                RELEASE_RETRY_MIN
            } else {
                (backoff * 2).min(RELEASE_RETRY_MAX)
            };
            next_release = (!deferred.is_empty()).then(|| At::now() + backoff);
        }
    }
}

/// Retries the failed releases, oldest first, until one fails; forgets those older than
/// `stale_claim` (stale anyway). Returns whether every one went through. A release is guarded by
/// its token, so one whose claim was taken over meanwhile deletes nothing.
pub(super) async fn retry_releases<S: Store>(
    store: &S,
    lease: &Lease,
    deferred: &mut Vec<(Scope, ClaimToken, Instant)>,
    stale_claim: Duration,
) -> bool {
    deferred.retain(|(_, _, since)| since.elapsed() < stale_claim);
    lease.deferred.store(deferred.len(), Ordering::SeqCst);
    while let Some((scope, token, _)) = deferred.first() {
        if let Err(e) = store.release(scope, *token).await {
            tracing::debug!(error = %e, "retrying a release failed; trying again later");
            return false;
        }
        tracing::info!("a claim whose release had failed was released");
        deferred.remove(0);
        // Counted as each one goes, not after the batch: a freed key is never still counted.
        lease.deferred.store(deferred.len(), Ordering::SeqCst);
    }
    true
}

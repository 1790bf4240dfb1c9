//! An in-memory store for users' unit tests. It keeps the contract of [`PgStore`](super::PgStore)
//! (the same suite runs against both): business effects registered on a [`MemoryTx`] are applied
//! only when the transaction commits, atomically with the record's completion, and only while the
//! completing attempt still holds the claim.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;

use super::{ClaimOutcome, ClaimRequest, CommitError, Store, StoreError};
use crate::fingerprint::Fingerprint;
use crate::record::{ClaimToken, Record, RecordState, Scope, StoredResponse};

#[derive(Debug, Clone)]
struct Entry {
    state: RecordState,
    fingerprint: Option<Fingerprint>,
    fingerprint_version: Option<i16>,
    token: Option<ClaimToken>,
    claimed_at: Instant,
    response: Option<StoredResponse>,
    resource_ref: Option<String>,
    expires_at: Option<SystemTime>,
    /// Reserved inside a transaction that has not committed (in-transaction strategy).
    uncommitted: bool,
}

type Effect = Box<dyn FnOnce() + Send>;

/// A pending completion staged in a transaction.
struct Completion {
    scope: Scope,
    token: ClaimToken,
    response: StoredResponse,
    resource_ref: Option<String>,
    expires_at: Option<SystemTime>,
}

/// The in-memory store.
#[derive(Clone, Default)]
pub struct MemoryStore {
    records: Arc<Mutex<HashMap<Scope, Entry>>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

/// A transaction of the in-memory store: effects run only if it commits.
#[derive(Default)]
pub struct MemoryTx {
    effects: Vec<Effect>,
    completions: Vec<Completion>,
    reservations: Vec<Scope>,
    /// Stale claims this transaction took over: (scope, previous token, previous claim time,
    /// our token), restored if it rolls back, as PostgreSQL undoes an uncommitted UPDATE.
    takeovers: Vec<(Scope, Option<ClaimToken>, Instant, ClaimToken)>,
    tombstones: Vec<(String, String, String)>,
}

impl std::fmt::Debug for MemoryTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTx")
            .field("effects", &self.effects.len())
            .finish_non_exhaustive()
    }
}

impl MemoryTx {
    /// Registers a business effect to apply if, and only if, this transaction commits.
    pub fn on_commit(&mut self, effect: impl FnOnce() + Send + 'static) {
        self.effects.push(Box::new(effect));
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Scope, Entry>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many records the store holds (for tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn claim_locked(
        records: &mut HashMap<Scope, Entry>,
        request: &ClaimRequest<'_>,
        uncommitted: bool,
    ) -> ClaimOutcome {
        let fresh = || Entry {
            state: RecordState::Claimed,
            fingerprint: Some(request.fingerprint.clone()),
            fingerprint_version: Some(request.fingerprint_version),
            token: Some(request.token),
            claimed_at: Instant::now(),
            response: None,
            resource_ref: None,
            expires_at: None,
            uncommitted,
        };
        match records.get_mut(request.scope) {
            None => {
                records.insert(request.scope.clone(), fresh());
                ClaimOutcome::Claimed { taken_over: false }
            }
            Some(entry) => {
                let record = to_record(entry, request.stale_after);
                let same = entry.fingerprint.as_ref() == Some(request.fingerprint)
                    && entry.fingerprint_version == Some(request.fingerprint_version);
                if record.state == RecordState::Claimed
                    && record.stale
                    && same
                    && !entry.uncommitted
                {
                    entry.token = Some(request.token);
                    entry.claimed_at = Instant::now();
                    ClaimOutcome::Claimed { taken_over: true }
                } else {
                    ClaimOutcome::Existing(record)
                }
            }
        }
    }
}

fn to_record(entry: &Entry, stale_after: Duration) -> Record {
    Record {
        state: entry.state,
        fingerprint: entry.fingerprint.clone(),
        fingerprint_version: entry.fingerprint_version,
        claim_token: entry.token,
        stale: entry.state == RecordState::Claimed && entry.claimed_at.elapsed() > stale_after,
        response: entry.response.clone(),
    }
}

#[async_trait]
impl Store for MemoryStore {
    type Tx = MemoryTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        Ok(Self::claim_locked(&mut self.lock(), request, false))
    }

    async fn begin(&self) -> Result<MemoryTx, StoreError> {
        Ok(MemoryTx::default())
    }

    async fn reserve_in_tx(
        &self,
        tx: &mut MemoryTx,
        request: &ClaimRequest<'_>,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut records = self.lock();
        // An uncommitted reservation of another transaction: busy (PostgreSQL's advisory gate).
        let pending = records
            .get(request.scope)
            .is_some_and(|e| e.uncommitted && e.token != Some(request.token));
        if pending {
            return Ok(ClaimOutcome::Busy);
        }
        let before = records.get(request.scope).map(|e| (e.token, e.claimed_at));
        let outcome = Self::claim_locked(&mut records, request, true);
        match (&outcome, before) {
            (ClaimOutcome::Claimed { taken_over: false }, _) => {
                tx.reservations.push(request.scope.clone());
            }
            (ClaimOutcome::Claimed { taken_over: true }, Some((token, at))) => {
                tx.takeovers
                    .push((request.scope.clone(), token, at, request.token));
            }
            _ => {}
        }
        Ok(outcome)
    }

    async fn complete(
        &self,
        tx: &mut MemoryTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
        retention: Option<Duration>,
    ) -> Result<bool, StoreError> {
        let holds = self
            .lock()
            .get(scope)
            .is_some_and(|e| e.state == RecordState::Claimed && e.token == Some(token));
        if holds {
            tx.completions.push(Completion {
                scope: scope.clone(),
                token,
                response: response.clone(),
                resource_ref: resource_ref.map(str::to_owned),
                expires_at: retention.map(|r| SystemTime::now() + r),
            });
        }
        Ok(holds)
    }

    async fn commit(&self, tx: MemoryTx) -> Result<(), CommitError> {
        let mut records = self.lock();
        // The token guard, re-checked atomically with applying the effects (PostgreSQL gets the
        // same from the row lock its completion UPDATE holds until commit).
        for c in &tx.completions {
            let holds = records
                .get(&c.scope)
                .is_some_and(|e| e.state == RecordState::Claimed && e.token == Some(c.token));
            if !holds {
                drop(records);
                self.rollback_locked(&tx);
                return Err(CommitError::Rejected(
                    "claim taken over before commit".into(),
                ));
            }
        }
        for c in tx.completions {
            if let Some(e) = records.get_mut(&c.scope) {
                e.state = RecordState::Completed;
                e.response = Some(c.response);
                e.resource_ref = c.resource_ref;
                e.expires_at = c.expires_at;
                e.uncommitted = false;
            }
        }
        for (owner, operation, resource_ref) in tx.tombstones {
            for (scope, e) in records.iter_mut() {
                if scope.owner == owner
                    && scope.operation == operation
                    && e.state == RecordState::Completed
                    && e.resource_ref.as_deref() == Some(resource_ref.as_str())
                {
                    e.state = RecordState::Tombstone;
                    e.fingerprint = None;
                    e.fingerprint_version = None;
                    e.response = None;
                }
            }
        }
        // Reservations without completion never outlive their transaction.
        for scope in &tx.reservations {
            if records.get(scope).is_some_and(|e| e.uncommitted) {
                records.remove(scope);
            }
        }
        drop(records);
        for effect in tx.effects {
            effect();
        }
        Ok(())
    }

    async fn rollback(&self, tx: MemoryTx) -> Result<(), StoreError> {
        self.rollback_locked(&tx);
        Ok(())
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        let mut records = self.lock();
        if records
            .get(scope)
            .is_some_and(|e| e.state == RecordState::Claimed && e.token == Some(token))
        {
            records.remove(scope);
        }
        Ok(())
    }

    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        Ok(self
            .lock()
            .get(scope)
            .filter(|e| !e.uncommitted)
            .map(|e| to_record(e, stale_after)))
    }

    async fn tombstone_resource(
        &self,
        tx: &mut MemoryTx,
        owner: &str,
        operation: &str,
        resource_ref: &str,
    ) -> Result<u64, StoreError> {
        let count = self
            .lock()
            .iter()
            .filter(|(s, e)| {
                s.owner == owner
                    && s.operation == operation
                    && e.state == RecordState::Completed
                    && e.resource_ref.as_deref() == Some(resource_ref)
            })
            .count();
        tx.tombstones.push((
            owner.to_owned(),
            operation.to_owned(),
            resource_ref.to_owned(),
        ));
        Ok(count as u64)
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let now = SystemTime::now();
        let mut records = self.lock();
        let expired: Vec<Scope> = records
            .iter()
            .filter(|(_, e)| e.expires_at.is_some_and(|t| t < now))
            .map(|(s, _)| s.clone())
            .take(usize::try_from(batch_size).unwrap_or(0))
            .collect();
        for s in &expired {
            records.remove(s);
        }
        Ok(expired.len() as u64)
    }
}

impl MemoryStore {
    fn rollback_locked(&self, tx: &MemoryTx) {
        let mut records = self.lock();
        for scope in &tx.reservations {
            if records.get(scope).is_some_and(|e| e.uncommitted) {
                records.remove(scope);
            }
        }
        for (scope, token, claimed_at, ours) in &tx.takeovers {
            if let Some(e) = records.get_mut(scope)
                && e.state == RecordState::Claimed
                && e.token == Some(*ours)
            {
                e.token = *token;
                e.claimed_at = *claimed_at;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::IdempotencyKey;

    #[tokio::test]
    async fn a_rolled_back_in_transaction_takeover_restores_the_old_claim() {
        let store = MemoryStore::new();
        let scope = Scope::new("alice", "op", IdempotencyKey::new("k").unwrap());
        let fp = Fingerprint::hs1("op", 1, &serde_json::json!({})).unwrap();
        let claim = |token| ClaimRequest {
            scope: &scope,
            fingerprint: &fp,
            fingerprint_version: 1,
            token,
            stale_after: Duration::ZERO,
        };
        let first = ClaimToken::generate();
        store.claim(&claim(first)).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let second = ClaimToken::generate();
        let outcome = store.reserve_in_tx(&mut tx, &claim(second)).await.unwrap();
        assert!(matches!(
            outcome,
            ClaimOutcome::Claimed { taken_over: true }
        ));
        store.rollback(tx).await.unwrap();
        let record = store
            .read(&scope, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.claim_token, Some(first), "the takeover was undone");
    }
}

//! An in-memory store for users' unit tests. It keeps the contract of [`PgStore`](super::PgStore)
//! (the same suite runs against both): business effects registered on a [`MemoryTx`] are applied
//! only when the transaction commits, atomically with the record's completion, and only while the
//! completing attempt still holds the claim.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;

use super::rules::may_take_over;
use super::{ClaimOutcome, ClaimRequest, CommitError, Gate, Store, StoreError};
use super::{ClaimToken, HolderId, Record, RecordState, Scope};
use crate::response::StoredResponse;
use idemgen_protocol::Fingerprint;

#[derive(Debug, Clone)]
struct Entry {
    state: RecordState,
    fingerprint: Option<Fingerprint>,
    fingerprint_version: Option<i16>,
    token: Option<ClaimToken>,
    claimed_at: Instant,
    /// The holder (executor lease) the claim was taken for.
    holder: Option<HolderId>,
    response: Option<StoredResponse>,
    resource_ref: Option<String>,
    expires_at: Option<SystemTime>,
    /// Inserted inside a transaction that has not committed (in-transaction strategy): others
    /// see the key as held, reads do not see it.
    uncommitted: bool,
}

type Effect = Box<dyn FnOnce() + Send>;

/// A pending completion staged in a transaction.
struct Completion {
    scope: Scope,
    token: ClaimToken,
    response: StoredResponse,
    resource_ref: Option<String>,
}

/// Keys locked by open transactions: a gate, or a record's row.
type Locks = Arc<Mutex<HashSet<Scope>>>;

/// Holder leases: when each lapses (this process's monotonic clock: the store and every executor
/// on it share it). An ended lease is removed, which counts as expired.
type Leases = HashMap<HolderId, Instant>;

/// The in-memory store.
#[derive(Clone, Default)]
pub struct MemoryStore {
    records: Arc<Mutex<HashMap<Scope, Entry>>>,
    /// Keys whose gate an open transaction holds (PostgreSQL's advisory transaction locks).
    gates: Locks,
    /// Records whose completion an open transaction has staged (PostgreSQL's row lock, which the
    /// completion's `UPDATE` holds until the commit): no claim takes them over meanwhile, and
    /// cleanup skips them.
    rows: Locks,
    /// Holder leases, as PostgreSQL's `idempotency_holders`: executors sharing one store (tests
    /// of several processes) see each other's claims go stale when a lease lapses.
    leases: Arc<Mutex<Leases>>,
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
    /// The gate and the rows this transaction holds, released when it ends (or is dropped).
    held: Vec<(Locks, Scope)>,
    completions: Vec<Completion>,
    reservations: Vec<Scope>,
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

impl Drop for MemoryTx {
    fn drop(&mut self) {
        for (locks, scope) in self.held.drain(..) {
            locked(&locks).remove(&scope);
        }
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

    fn leases(&self) -> MutexGuard<'_, Leases> {
        self.leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn claim_locked(
        records: &mut HashMap<Scope, Entry>,
        leases: &Leases,
        request: &ClaimRequest<'_>,
        uncommitted: bool,
        row_locked: bool,
    ) -> ClaimOutcome {
        let fresh = || Entry {
            state: RecordState::Claimed,
            fingerprint: Some(request.fingerprint.clone()),
            fingerprint_version: Some(request.fingerprint_version),
            token: Some(request.token),
            claimed_at: Instant::now(),
            holder: request.holder,
            response: None,
            resource_ref: None,
            expires_at: request.retention.map(|r| SystemTime::now() + r),
            uncommitted,
        };
        match records.get_mut(request.scope) {
            None => {
                records.insert(request.scope.clone(), fresh());
                ClaimOutcome::Claimed { taken_over: false }
            }
            Some(entry) => {
                let record = to_record(entry, request.stale_after, leases);
                // A claim of an uncommitted in-transaction attempt is not there for others yet,
                // and one whose completion an open transaction has staged is held until it ends
                // (PostgreSQL's claim waits for the row lock, then sees what the commit left).
                if may_take_over(&record, request.fingerprint, request.fingerprint_version)
                    && !entry.uncommitted
                    && !row_locked
                {
                    entry.token = Some(request.token);
                    entry.claimed_at = Instant::now();
                    entry.holder = request.holder;
                    ClaimOutcome::Claimed { taken_over: true }
                } else {
                    ClaimOutcome::Existing(record)
                }
            }
        }
    }
}

fn to_record(entry: &Entry, stale_after: Duration, leases: &Leases) -> Record {
    let lapsed = entry
        .holder
        .is_some_and(|h| leases.get(&h).is_none_or(|until| *until <= Instant::now()));
    Record {
        state: entry.state,
        fingerprint: entry.fingerprint.clone(),
        fingerprint_version: entry.fingerprint_version,
        claim_token: entry.token,
        stale: entry.state == RecordState::Claimed
            && (entry.claimed_at.elapsed() > stale_after || lapsed),
        response: entry.response.clone(),
    }
}

#[async_trait]
impl Store for MemoryStore {
    type Tx = MemoryTx;

    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<ClaimOutcome, StoreError> {
        let mut records = self.lock();
        let row_locked = locked(&self.rows).contains(request.scope);
        Ok(Self::claim_locked(
            &mut records,
            &self.leases(),
            request,
            false,
            row_locked,
        ))
    }

    async fn begin(&self) -> Result<MemoryTx, StoreError> {
        Ok(MemoryTx::default())
    }

    async fn begin_gated(&self, request: &ClaimRequest<'_>) -> Result<Gate<MemoryTx>, StoreError> {
        let records = self.lock();
        let mut gates = locked(&self.gates);
        if gates.contains(request.scope) {
            return Ok(Gate::Busy);
        }
        if let Some(entry) = records.get(request.scope) {
            if entry.uncommitted {
                return Ok(Gate::Busy);
            }
            return Ok(Gate::Existing(Some(to_record(
                entry,
                request.stale_after,
                &self.leases(),
            ))));
        }
        gates.insert(request.scope.clone());
        let mut tx = MemoryTx::default();
        tx.held
            .push((Arc::clone(&self.gates), request.scope.clone()));
        Ok(Gate::Open(tx))
    }

    async fn insert_completed(
        &self,
        tx: &mut MemoryTx,
        request: &ClaimRequest<'_>,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut records = self.lock();
        if records.contains_key(request.scope) {
            return Ok(false);
        }
        // Held, invisible to reads, until the transaction commits (PostgreSQL's uncommitted row).
        Self::claim_locked(&mut records, &self.leases(), request, true, false);
        tx.reservations.push(request.scope.clone());
        tx.completions.push(Completion {
            scope: request.scope.clone(),
            token: request.token,
            response: response.clone(),
            resource_ref: resource_ref.map(str::to_owned),
        });
        Ok(true)
    }

    async fn complete(
        &self,
        tx: &mut MemoryTx,
        scope: &Scope,
        token: ClaimToken,
        response: &StoredResponse,
        resource_ref: Option<&str>,
    ) -> Result<bool, StoreError> {
        let records = self.lock();
        let holds = records
            .get(scope)
            .is_some_and(|e| e.state == RecordState::Claimed && e.token == Some(token));
        if holds {
            // The row lock, taken under the records' lock so that no claim slips in between.
            locked(&self.rows).insert(scope.clone());
            tx.held.push((Arc::clone(&self.rows), scope.clone()));
            tx.completions.push(Completion {
                scope: scope.clone(),
                token,
                response: response.clone(),
                resource_ref: resource_ref.map(str::to_owned),
            });
        }
        Ok(holds)
    }

    async fn commit(&self, mut tx: MemoryTx) -> Result<(), CommitError> {
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
        for c in std::mem::take(&mut tx.completions) {
            if let Some(e) = records.get_mut(&c.scope) {
                e.state = RecordState::Completed;
                e.response = Some(c.response);
                e.resource_ref = c.resource_ref;
                e.uncommitted = false;
            }
        }
        for (owner, operation, resource_ref) in std::mem::take(&mut tx.tombstones) {
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
        // The gate is released when `tx` drops, after the record is visible (as PostgreSQL
        // releases advisory locks after the commit).
        for effect in std::mem::take(&mut tx.effects) {
            effect();
        }
        Ok(())
    }

    async fn rollback(&self, tx: MemoryTx) -> Result<(), StoreError> {
        self.rollback_locked(&tx);
        Ok(())
    }

    async fn release(&self, scope: &Scope, token: ClaimToken) -> Result<(), StoreError> {
        // Under the lock `commit` applies completions with, so a release is ordered before or
        // after a commit, never inside it (PostgreSQL: the completion's row lock).
        let mut records = self.lock();
        if records
            .get(scope)
            .is_some_and(|e| e.state == RecordState::Claimed && e.token == Some(token))
        {
            records.remove(scope);
        }
        Ok(())
    }

    async fn look(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        // Every key is "seen": the executor's look-first path runs on this store too.
        let record = self.read(scope, stale_after).await?;
        Ok(record.filter(|r| r.state != RecordState::Claimed))
    }

    async fn read(
        &self,
        scope: &Scope,
        stale_after: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let records = self.lock();
        let leases = self.leases();
        Ok(records
            .get(scope)
            .filter(|e| !e.uncommitted)
            .map(|e| to_record(e, stale_after, &leases)))
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

    async fn renew_lease(
        &self,
        holder: HolderId,
        expires_after: Duration,
    ) -> Result<bool, StoreError> {
        self.leases().insert(holder, Instant::now() + expires_after);
        Ok(true)
    }

    async fn end_lease(&self, holder: HolderId) -> Result<(), StoreError> {
        self.leases().remove(&holder);
        Ok(())
    }

    async fn purge_expired_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let now = SystemTime::now();
        let mut records = self.lock();
        // As PostgreSQL's cleanup, which skips rows locked by a live transaction and never sees
        // uncommitted ones.
        let rows = locked(&self.rows);
        let expired: Vec<Scope> = records
            .iter()
            .filter(|(s, e)| {
                e.expires_at.is_some_and(|t| t < now) && !e.uncommitted && !rows.contains(*s)
            })
            .map(|(s, _)| s.clone())
            .take(usize::try_from(batch_size).unwrap_or(0))
            .collect();
        for s in &expired {
            records.remove(s);
        }
        Ok(expired.len() as u64)
    }
}

fn locked(locks: &Locks) -> MutexGuard<'_, HashSet<Scope>> {
    locks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MemoryStore {
    fn rollback_locked(&self, tx: &MemoryTx) {
        let mut records = self.lock();
        for scope in &tx.reservations {
            if records.get(scope).is_some_and(|e| e.uncommitted) {
                records.remove(scope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgen_protocol::IdempotencyKey;

    fn key() -> (Scope, Fingerprint) {
        (
            Scope::new("alice", "op", IdempotencyKey::new("k").unwrap()),
            Fingerprint::hs1("op", 1, &serde_json::json!({})).unwrap(),
        )
    }

    fn claim<'a>(
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        token: ClaimToken,
        retention: Option<Duration>,
    ) -> ClaimRequest<'a> {
        ClaimRequest {
            scope,
            fingerprint,
            fingerprint_version: 1,
            token,
            holder: None,
            stale_after: Duration::from_secs(60),
            retention,
        }
    }

    fn created() -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![],
            body: b"{}".to_vec(),
        }
    }

    #[tokio::test]
    async fn the_gate_holds_the_key_until_its_transaction_ends() {
        let store = MemoryStore::new();
        let (scope, fp) = key();
        let request = |token| claim(&scope, &fp, token, None);
        let first = ClaimToken::generate();
        let Gate::Open(tx) = store.begin_gated(&request(first)).await.unwrap() else {
            panic!("a fresh key opens");
        };
        assert!(matches!(
            store
                .begin_gated(&request(ClaimToken::generate()))
                .await
                .unwrap(),
            Gate::Busy
        ));
        store.rollback(tx).await.unwrap();
        let Gate::Open(mut tx) = store.begin_gated(&request(first)).await.unwrap() else {
            panic!("a rollback frees the gate");
        };
        let response = created();
        assert!(
            store
                .insert_completed(&mut tx, &request(first), &response, None)
                .await
                .unwrap()
        );
        // Uncommitted: invisible to reads, and the key stays held.
        assert!(
            store
                .read(&scope, Duration::from_secs(60))
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            store
                .begin_gated(&request(ClaimToken::generate()))
                .await
                .unwrap(),
            Gate::Busy
        ));
        store.commit(tx).await.unwrap();
        let Gate::Existing(Some(record)) = store
            .begin_gated(&request(ClaimToken::generate()))
            .await
            .unwrap()
        else {
            panic!("a committed record is found");
        };
        assert_eq!(record.state, RecordState::Completed);
        assert_eq!(record.claim_token, Some(first));
    }

    #[tokio::test]
    async fn cleanup_skips_a_record_whose_completion_is_staged() {
        let store = MemoryStore::new();
        let (scope, fp) = key();
        let token = ClaimToken::generate();
        let request = claim(&scope, &fp, token, Some(Duration::ZERO));
        store.claim(&request).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let response = created();
        assert!(
            store
                .complete(&mut tx, &scope, token, &response, None)
                .await
                .unwrap()
        );
        // Expired, but locked by the open transaction (PostgreSQL's cleanup skips it).
        assert_eq!(store.purge_expired_batch(10).await.unwrap(), 0);
        store.commit(tx).await.unwrap();
        assert_eq!(store.purge_expired_batch(10).await.unwrap(), 1);
        assert!(store.is_empty());
    }
}

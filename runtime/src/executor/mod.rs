//! The executor: turns every arrival of a key into at most one committed business write.
//!
//! Before either strategy, a key the store has seen with a record is looked up by one read
//! ([`Store::look`]), in the caller's task: a completed record is replayed (or answered 410 or
//! 422) with no claim, no gate and no attempt task; anything else goes on as below.
//!
//! One attempt, separate-claim strategy (the default):
//! 1. claim the key with a short statement of its own (or replay / 422 / 410 / wait then 409);
//! 2. run the handler with only a transaction-bound handle whose transaction begins when the
//!    handler first touches the database (so a downstream call before the first write holds no
//!    connection), complete the record in that transaction guarded by the claim token, and commit;
//! 3. store only 2xx results; anything else rolls back and releases the claim;
//! 4. a lost commit acknowledgement is reconciled by reading the record back on the writer; when
//!    the record is not visibly completed (504), the claim is released, ordered after the
//!    in-doubt commit by the completion's row lock (protocol.md, "Lost commit acknowledgement").
//!
//! The in-transaction strategy writes the record once instead: its transaction opens behind the
//! key's gate (an advisory lock and a look for a record, in the round trip of `BEGIN`), the handler
//! runs, and the completed record is inserted before the commit; the primary key stays the final
//! arbiter. Attempts run in their own task, so a client that disconnects does not cancel a write
//! halfway.
//!
//! Each executor is a *holder*: it registers a lease in the store and renews it from a background
//! task (spawned by [`Executor::new`] inside a Tokio runtime, beside a second one that retries
//! failed releases), and its claims name it. A claim
//! whose holder's lease lapsed (the process died) or ended ([`Executor::shutdown`]) is stale at
//! once and taken over with a new token; a release that failed (the store was down) is retried
//! by the same task until the store answers. Correctness never rests on the lease: a taken-over
//! holder's completion fails on its token and its write rolls back (protocol.md, "Durability of
//! claims").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use tracing::Instrument;

use crate::problem::{Problem, ProblemKind};
use crate::response::StoredResponse;
use crate::store::rules::may_take_over;
use crate::store::{
    ClaimOutcome, ClaimRequest, ClaimToken, CommitError, Gate, HolderId, Record, RecordState,
    Scope, Store, StoreError,
};

mod lease;
mod phases;
mod request;
mod tx;

use lease::{Chore, Holder, Lease, renew_lease, retry_failed_releases};
pub(crate) use phases::Phases;
use phases::{PHASES, PhaseTimer};
pub use request::{
    Disposition, EarlierFormats, ExecuteError, HandlerFuture, IdempotentRequest, Outcome,
    ResponseCodec,
};
pub use tx::TxHandle;

/// Where the reservation of a key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// A claim committed by its own short statement before the business transaction; duplicates
    /// see it at once and never hold a connection while the first attempt runs.
    #[default]
    SeparateClaim,
    /// The record is written once, completed, inside the business transaction: one commit per
    /// request; a duplicate of a key held by an unfinished transaction is turned away by the
    /// key's gate, an advisory lock (it polls without a connection, then 409); a rollback leaves
    /// nothing behind.
    InTransaction,
}

/// Executor settings.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// The reservation strategy.
    pub strategy: Strategy,
    /// How long a duplicate waits for an in-flight attempt before answering 409.
    pub in_flight_wait: Duration,
    /// A claim older than this is taken over. Must exceed the slowest handler. Claims of a
    /// holder whose lease lapsed are taken over sooner (`lease_expiry`).
    pub stale_claim: Duration,
    /// How long completed records are kept; `None` keeps them forever (the default).
    pub retention: Option<Duration>,
    /// How often the background task renews the executor's lease (default 1 s); releases that
    /// failed are retried with their own backoff (50 ms doubling to 1 s).
    pub lease_renewal: Duration,
    /// A claim whose holder has not renewed its lease for this long (by the store's clock) is
    /// stale at once: a process that died frees its keys between `lease_expiry - lease_renewal`
    /// and `lease_expiry` after its last renewal instead of after `stale_claim` (default 5 s:
    /// inside the generated client's retries of one call, see protocol.md, "Durability of
    /// claims"; keep it several `lease_renewal`s). A store may need a longer one
    /// ([`Store::min_lease_expiry`]; the SQLite store: 15 s), which [`Executor::new`] then
    /// uses. `None`: no lease, claims go stale after `stale_claim` only.
    pub lease_expiry: Option<Duration>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::SeparateClaim,
            in_flight_wait: Duration::from_secs(1),
            stale_claim: Duration::from_secs(300),
            retention: None,
            lease_renewal: Duration::from_secs(1),
            lease_expiry: Some(Duration::from_secs(5)),
        }
    }
}

/// How an attempt holds its key while the handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// A claim committed apart (separate-claim strategy, or a takeover): completed by an update
    /// guarded by the token, released when the attempt does not complete.
    Claim,
    /// The gate of its transaction (in-transaction strategy): the record is inserted completed.
    Gate,
}

/// Runs idempotent attempts against a store.
#[derive(Debug)]
pub struct Executor<S: Store> {
    store: Arc<S>,
    config: ExecutorConfig,
    holder: Arc<Holder>,
}

impl<S: Store> Clone for Executor<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            config: self.config.clone(),
            holder: self.holder.clone(),
        }
    }
}

impl<S: Store> Executor<S> {
    /// An executor with the given store and settings.
    ///
    /// Called inside a Tokio runtime, it spawns the executor's two background tasks there: one
    /// registers and renews the executor's lease (`lease_expiry`, `lease_renewal`), the other
    /// retries releases that failed. Outside a runtime there are none: claims name no holder and
    /// a failed release waits for stale takeover. Call [`Executor::shutdown`] when the service
    /// stops.
    pub fn new(store: S, mut config: ExecutorConfig) -> Executor<S> {
        // A lease shorter than the store can renew reliably would lapse under a live holder.
        // The default is widened without a word (a clean start logs no warning); a value the
        // service chose is widened with a warning.
        if let (Some(expiry), Some(min)) = (config.lease_expiry, store.min_lease_expiry())
            && expiry < min
        {
            if config.lease_expiry == ExecutorConfig::default().lease_expiry {
                tracing::debug!(default = ?expiry, used = ?min, "lease_expiry: the store's minimum");
            } else {
                tracing::warn!(
                    configured = ?expiry,
                    used = ?min,
                    "lease_expiry is below the store's minimum: widened"
                );
            }
            config.lease_expiry = Some(min);
        }
        let store = Arc::new(store);
        let lease = Arc::new(Lease {
            id: HolderId::generate(),
            renewed: Mutex::new(None),
            unsupported: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            deferred: AtomicUsize::new(0),
            renewing: tokio::sync::Mutex::new(()),
        });
        let runtime = tokio::runtime::Handle::try_current().ok();
        let task = runtime.as_ref().map(|runtime| {
            let (sender, chores) = mpsc::unbounded_channel();
            runtime.spawn(retry_failed_releases(
                Arc::clone(&store),
                Arc::clone(&lease),
                chores,
                config.stale_claim,
            ));
            sender
        });
        let alive = runtime.zip(config.lease_expiry).map(|(runtime, expiry)| {
            let (alive, closed) = watch::channel(());
            runtime.spawn(renew_lease(
                Arc::clone(&store),
                Arc::clone(&lease),
                config.lease_renewal,
                expiry,
                closed,
            ));
            alive
        });
        Executor {
            store,
            config,
            holder: Arc::new(Holder {
                lease,
                task,
                _alive: alive,
            }),
        }
    }

    /// Shuts the executor down cleanly: retries once the releases that failed, then ends its
    /// lease, so the claims it still holds are stale at once and the next attempt of each key
    /// takes it over (instead of waiting for the lease to lapse). Call it after serving has
    /// drained (an attempt still running loses its claim and its write rolls back). It waits for
    /// the store; bound it with `tokio::time::timeout` if the store may be down (the lease then
    /// lapses after `lease_expiry`). Attempts executed afterwards take claims without a holder.
    pub async fn shutdown(&self) {
        let lease = &self.holder.lease;
        // From here on claims name no holder, and renewals stop.
        lease.ended.store(true, Ordering::SeqCst);
        let (done, finished) = oneshot::channel();
        let sent = self
            .holder
            .task
            .as_ref()
            .is_some_and(|task| task.send(Chore::Shutdown(done)).is_ok());
        if sent {
            let _ = finished.await;
        }
        if self.config.lease_expiry.is_some() && !lease.unsupported.load(Ordering::SeqCst) {
            lease.end(&*self.store).await;
        }
    }

    /// The id of this executor's lease, which its claims name (`holder_id` in the records and
    /// in `idempotency_holders`).
    pub fn holder_id(&self) -> HolderId {
        self.holder.lease.id
    }

    /// How many failed releases wait for the store (for tests and diagnostics).
    #[doc(hidden)]
    pub fn deferred_releases(&self) -> usize {
        self.holder.lease.deferred.load(Ordering::SeqCst)
    }

    /// The holder a claim names: this executor's lease, registered first if no renewal has
    /// succeeded yet. `None` without a lease, and while the last renewal is older than three
    /// quarters of the expiry (renewals failing: the lease may have lapsed, and a claim naming it
    /// would be stale at once; such a claim keeps the stale-claim rule). Only the first claims
    /// wait for a renewal, so an outage never costs a claim two timeouts.
    async fn claim_holder(&self) -> Option<HolderId> {
        let expiry = self.config.lease_expiry?;
        let lease = &self.holder.lease;
        if lease.ended.load(Ordering::SeqCst) || lease.unsupported.load(Ordering::SeqCst) {
            return None;
        }
        match lease.renewed_at() {
            None if !lease.renew(&*self.store, expiry, expiry / 2).await => return None,
            None => {}
            Some(at) if at.elapsed() < expiry * 3 / 4 => {}
            Some(_) => return None,
        }
        Some(lease.id)
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, shared.
    pub fn shared_store(&self) -> Arc<S> {
        Arc::clone(&self.store)
    }

    /// The settings.
    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    /// Runs one attempt. The attempt runs in its own task: dropping the returned future (a client
    /// that went away) does not cancel it halfway through a write.
    pub async fn execute<R, E, F>(
        &self,
        request: IdempotentRequest,
        handler: F,
    ) -> Result<Outcome<R>, ExecuteError<E>>
    where
        R: ResponseCodec,
        E: Send + 'static,
        F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, R, E> + Send + 'static,
    {
        self.execute_finished(request, handler, |result, _| result)
            .await
    }

    /// [`Executor::execute`], and how long its phases took. The attempt's task runs in the
    /// caller's current span (the pipeline's `idemgen.request`), its phases in child spans:
    /// `idemgen.claim`, `idemgen.handler`, `idemgen.complete`, and `idemgen.replay` or
    /// `idemgen.read` where a stored record is turned into the answer. No span field names the
    /// key, the token or the owner.
    ///
    /// `finish` turns the result and the phases into the caller's answer, and runs where the
    /// attempt ran: in the attempt's own task when it had one, so that an attempt whose caller
    /// went away (a client that disconnected) is still finished there, logged and counted as
    /// any other; in the caller's task for an answer read without one (a replay).
    pub(crate) async fn execute_finished<R, E, F, G, T>(
        &self,
        request: IdempotentRequest,
        handler: F,
        finish: G,
    ) -> T
    where
        R: ResponseCodec,
        E: Send + 'static,
        F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, R, E> + Send + 'static,
        G: FnOnce(Result<Outcome<R>, ExecuteError<E>>, Phases) -> T + Send + 'static,
        T: Send + 'static,
    {
        // A replay the store can tell by one read is answered here, in the caller's task: the
        // look writes nothing, so there is nothing a cancellation could leave halfway, and no
        // attempt task is spawned (nor another worker woken to run it).
        let looked = Instant::now();
        if let Some(answer) = self.look_first(&request).await {
            tracing::debug!(outcome = outcome_label(&answer), "attempt finished");
            let phases = Phases {
                claim: Some(looked.elapsed()),
                ..Phases::default()
            };
            return finish(answer, phases);
        }
        let this = self.clone();
        let scope = request.scope.clone();
        let token = ClaimToken::generate();
        // The task takes `finish` once the attempt is over; a panicking handler leaves it here.
        let finish = Arc::new(std::sync::Mutex::new(Some(finish)));
        let finish_in_task = Arc::clone(&finish);
        let task = tokio::spawn(
            PHASES
                .scope(std::cell::Cell::new(Phases::default()), async move {
                    let result = match this.config.strategy {
                        Strategy::SeparateClaim => this.run_separate(request, token, handler).await,
                        Strategy::InTransaction => this.run_in_tx(request, token, handler).await,
                    };
                    tracing::debug!(outcome = outcome_label(&result), "attempt finished");
                    let phases = PHASES.with(std::cell::Cell::get);
                    // No await from here on: `finish` runs whole once taken.
                    let finish = finish_in_task
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    finish.map(|finish| finish(result, phases))
                })
                .in_current_span(),
        );
        let join = match task.await {
            Ok(Some(finished)) => return finished,
            Ok(None) => None,
            Err(join) => Some(join),
        };
        // The handler panicked: its transaction was dropped (rolled back); free the key.
        self.release_quiet(&scope, token).await;
        let finish = finish.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (finish, join) {
            (Some(finish), join) => {
                let why = join.map(|j| j.to_string()).unwrap_or_default();
                let problem = Problem::new(ProblemKind::Internal)
                    .with_internal(format!("idempotent attempt panicked: {why}"));
                finish(Err(problem.into()), Phases::default())
            }
            // `finish` itself panicked, in the task: the caller's task panics as it would have.
            (None, Some(join)) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            (None, _) => unreachable!("the attempt's task ends only through `finish` or a panic"),
        }
    }

    /// The answer from [`Store::look`], when the store knows the key's completed record or
    /// tombstone: a replay, 410 or 422, judged as a claim's or a gate's record is. `None`: claim
    /// or take the gate as always.
    async fn look_first<R: ResponseCodec, E>(
        &self,
        request: &IdempotentRequest,
    ) -> Option<Result<Outcome<R>, ExecuteError<E>>> {
        let claim_span = tracing::info_span!("idemgen.claim");
        let record = match self
            .store
            .look(&request.scope, self.config.stale_claim)
            .instrument(claim_span.clone())
            .await
        {
            // A claim is not an answer (the stores report none): claim as always.
            Ok(Some(record)) if record.state != RecordState::Claimed => record,
            Ok(_) => return None,
            Err(e) => return Some(Err(unavailable(e).into())),
        };
        match self.judge(request, record, Instant::now()) {
            Ok(Some(outcome)) => Some(Ok(outcome)),
            Ok(None) => None,
            Err(problem) => Some(Err(problem.into())),
        }
    }

    fn claim_request<'r>(
        &self,
        request: &'r IdempotentRequest,
        token: ClaimToken,
        holder: Option<HolderId>,
    ) -> ClaimRequest<'r> {
        ClaimRequest {
            scope: &request.scope,
            fingerprint: &request.fingerprint,
            fingerprint_version: request.fingerprint_version,
            token,
            holder,
            stale_after: self.config.stale_claim,
            retention: request.retention.or(self.config.retention),
        }
    }

    async fn run_separate<R, E, F>(
        &self,
        request: IdempotentRequest,
        token: ClaimToken,
        handler: F,
    ) -> Result<Outcome<R>, ExecuteError<E>>
    where
        R: ResponseCodec,
        F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, R, E> + Send + 'static,
    {
        let mut request = request;
        let deadline = Instant::now() + self.config.in_flight_wait;
        let mut pause = Duration::from_millis(5);
        // One span and one timer for taking the key: the claim statements and the waits for an
        // in-flight attempt between them (the attempt's transaction begins later, in the
        // handler's phase at its first database touch, or in the completion's).
        let claim_span = tracing::info_span!("idemgen.claim");
        let claim_timer = PhaseTimer::start(|p| &mut p.claim);
        let holder = self.claim_holder().instrument(claim_span.clone()).await;
        // The first claim may begin the attempt's transaction with it, when the store does
        // (`Store::claim_and_begin`); one asked again after an in-flight wait does not.
        let mut first = true;
        let (taken_over, tx) = loop {
            let claim = self.claim_request(&request, token, holder);
            let begin = std::mem::take(&mut first);
            let claimed = async {
                if begin {
                    self.store.claim_and_begin(&claim).await
                } else {
                    self.store
                        .claim(&claim)
                        .await
                        .map(|outcome| (outcome, None))
                }
            }
            .instrument(claim_span.clone())
            .await;
            let outcome = match claimed {
                Ok(outcome) => outcome,
                Err(e) => {
                    // The claim may have committed with its acknowledgement lost (a connection
                    // cut, a pooler restarted): release it behind, by its token, so the key is
                    // not held for `stale_claim` by this live holder (a token never written
                    // deletes nothing; a failed release is retried in the background).
                    if matches!(e, StoreError::Unavailable(_)) {
                        self.release_quiet(&request.scope, token).await;
                    }
                    return Err(unavailable(e).into());
                }
            };
            match outcome {
                (ClaimOutcome::Claimed { taken_over }, tx) => break (taken_over, tx),
                (ClaimOutcome::Existing(record), _) => {
                    request.adopt_format_of(&record);
                    if let Some(replay) = self.judge(&request, record, deadline)? {
                        return Ok(replay);
                    }
                }
            }
            tokio::time::sleep(pause)
                .instrument(claim_span.clone())
                .await;
            pause = (pause * 2).min(Duration::from_millis(100));
        };
        drop((claim_timer, claim_span));
        // Unless it began with the claim, the business transaction begins when the handler
        // first touches the database (or at the completion): a downstream call before the first
        // write holds no connection.
        self.run_reserved(&request, token, tx, taken_over, Hold::Claim, handler)
            .await
    }

    async fn run_in_tx<R, E, F>(
        &self,
        mut request: IdempotentRequest,
        token: ClaimToken,
        handler: F,
    ) -> Result<Outcome<R>, ExecuteError<E>>
    where
        R: ResponseCodec,
        F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, R, E> + Send + 'static,
    {
        let deadline = Instant::now() + self.config.in_flight_wait;
        let mut pause = Duration::from_millis(5);
        // Taking the key is opening the transaction behind its gate, waits included.
        let claim_span = tracing::info_span!("idemgen.claim");
        let claim_timer = PhaseTimer::start(|p| &mut p.claim);
        let tx = loop {
            let gate = {
                let claim = self.claim_request(&request, token, None);
                self.store
                    .begin_gated(&claim)
                    .instrument(claim_span.clone())
                    .await
                    .map_err(unavailable)?
            };
            match gate {
                Gate::Open(tx) => break tx,
                // Another attempt's transaction holds the key: wait without a connection, and
                // answer 409 when the wait is over.
                Gate::Busy if Instant::now() >= deadline => {
                    return Err(Problem::new(ProblemKind::InFlight).into());
                }
                Gate::Busy | Gate::Existing(None) => {}
                Gate::Existing(Some(record)) => {
                    request.adopt_format_of(&record);
                    if may_take_over(&record, &request.fingerprint, request.fingerprint_version) {
                        // A stale claim committed apart (a separate-claim attempt that died):
                        // take it over the way it was taken.
                        drop((claim_timer, claim_span));
                        return self.run_separate(request, token, handler).await;
                    }
                    if let Some(replay) = self.judge(&request, record, deadline)? {
                        return Ok(replay);
                    }
                }
            }
            tokio::time::sleep(pause)
                .instrument(claim_span.clone())
                .await;
            pause = (pause * 2).min(Duration::from_millis(100));
        };
        drop((claim_timer, claim_span));
        self.run_reserved(&request, token, Some(tx), false, Hold::Gate, handler)
            .await
    }

    /// Steps 2 to 4 of an attempt that holds the key: run the handler in `tx` (`None`: begun
    /// when the handler first touches the database, or here before completing), complete the
    /// record (guarded by the token, or inserted behind the gate), commit.
    async fn run_reserved<R, E, F>(
        &self,
        request: &IdempotentRequest,
        token: ClaimToken,
        tx: Option<S::Tx>,
        taken_over: bool,
        hold: Hold,
        handler: F,
    ) -> Result<Outcome<R>, ExecuteError<E>>
    where
        R: ResponseCodec,
        F: for<'a> FnOnce(&'a mut TxHandle<S>) -> HandlerFuture<'a, R, E> + Send + 'static,
    {
        let claim_committed = hold == Hold::Claim;
        let mut handle = TxHandle::for_attempt(Arc::clone(&self.store), tx, request.scope.clone());
        let result = {
            let _timer = PhaseTimer::start(|p| &mut p.handler);
            handler(&mut handle)
                .instrument(tracing::info_span!("idemgen.handler"))
                .await
        };
        // Completing (or abandoning) the attempt, until its transaction and claim are settled.
        let complete_span = tracing::info_span!("idemgen.complete");
        let _completion_timer = PhaseTimer::start(|p| &mut p.completion);
        let TxHandle {
            tx,
            resource_ref,
            begin_failed,
            derived,
            ..
        } = handle;
        let store_failed = StoreFailure {
            derived: derived.into_inner(),
        };
        // The resource a record is about, for `x-idempotency-tombstones`: the one the handler
        // named, else the one its path names (a capture of `/payments/{id}` is about the payment).
        let resource_ref = resource_ref.or_else(|| {
            let scope = &request.scope.resource_scope;
            (!scope.is_empty()).then(|| scope.clone())
        });
        // The handler could not begin its transaction: the store is down, not the handler wrong,
        // whatever it returned (a handler that went on without its write must not be stored).
        if let Some(why) = begin_failed {
            self.abandon(tx, request, token, claim_committed)
                .instrument(complete_span)
                .await;
            return Err(store_failed.problem(why).into());
        }
        let response = match result {
            Ok(response) => response,
            Err(e) => {
                self.abandon(tx, request, token, claim_committed)
                    .instrument(complete_span)
                    .await;
                return Err(ExecuteError::Handler(e));
            }
        };
        // A transaction its handler left inside a savepoint, or that ended under it: completing
        // and committing would end only the savepoint, or write the record outside any
        // transaction, and the client would be told of a write that is not there. A bug of the
        // handler's, answered 500, with nothing of the attempt's transaction committed.
        let mut tx = tx;
        if tx.as_mut().is_some_and(|tx| !self.store.tx_intact(tx)) {
            self.abandon(tx, request, token, claim_committed)
                .instrument(complete_span)
                .await;
            return Err(Problem::new(ProblemKind::Internal)
                .with_internal(crate::store::TX_NOT_INTACT)
                .into());
        }
        let stored = match self.encode(request, &response) {
            Ok(Some(stored)) => stored,
            Ok(None) => {
                self.abandon(tx, request, token, claim_committed)
                    .instrument(complete_span)
                    .await;
                return Ok(Outcome {
                    response,
                    disposition: Disposition::NotStored,
                });
            }
            Err(problem) => {
                self.abandon(tx, request, token, claim_committed)
                    .instrument(complete_span)
                    .await;
                return Err(problem.into());
            }
        };
        // A handler that never touched the database: its transaction begins now, for the
        // completion alone.
        let mut tx = match tx {
            Some(tx) => tx,
            None => match self.store.begin().instrument(complete_span.clone()).await {
                Ok(tx) => tx,
                Err(e) => {
                    self.abandon(None, request, token, claim_committed)
                        .instrument(complete_span)
                        .await;
                    return Err(store_failed.problem(e.to_string()).into());
                }
            },
        };
        let completed = match hold {
            Hold::Claim => {
                self.store
                    .complete(
                        &mut tx,
                        &request.scope,
                        token,
                        &stored,
                        resource_ref.as_deref(),
                    )
                    .instrument(complete_span.clone())
                    .await
            }
            Hold::Gate => {
                let claim = self.claim_request(request, token, None);
                self.store
                    .insert_completed(&mut tx, &claim, &stored, resource_ref.as_deref())
                    .instrument(complete_span.clone())
                    .await
            }
        };
        match completed {
            Ok(true) => {}
            Ok(false) => {
                // Taken over while the handler ran, or a record that did not go through the
                // gate: our write must never commit. Answer from the record that won.
                let _ = self.store.rollback(tx).instrument(complete_span).await;
                return self.after_takeover(request).await;
            }
            Err(e) => {
                self.abandon(Some(tx), request, token, claim_committed)
                    .instrument(complete_span)
                    .await;
                return Err(store_failed.problem(e.to_string()).into());
            }
        }
        let disposition = if taken_over {
            Disposition::TakenOver
        } else {
            Disposition::Executed
        };
        self.commit(
            request,
            token,
            tx,
            Outcome {
                response,
                disposition,
            },
            claim_committed,
            store_failed,
        )
        .instrument(complete_span)
        .await
    }

    /// Rolls `tx` back (when it was begun) and, when the claim was committed on its own,
    /// releases it.
    async fn abandon(
        &self,
        tx: Option<S::Tx>,
        request: &IdempotentRequest,
        token: ClaimToken,
        claim_committed: bool,
    ) {
        if let Some(tx) = tx {
            let _ = self.store.rollback(tx).await;
        }
        if claim_committed {
            self.release_quiet(&request.scope, token).await;
        }
    }

    /// Commits, reconciling a lost acknowledgement by reading the record back on the writer.
    async fn commit<R, E>(
        &self,
        request: &IdempotentRequest,
        token: ClaimToken,
        tx: S::Tx,
        outcome: Outcome<R>,
        claim_committed: bool,
        store_failed: StoreFailure,
    ) -> Result<Outcome<R>, ExecuteError<E>> {
        match self.store.commit(tx).await {
            Ok(()) => Ok(outcome),
            Err(CommitError::Rejected(why)) => {
                if claim_committed {
                    self.release_quiet(&request.scope, token).await;
                }
                Err(store_failed.problem(why).into())
            }
            Err(CommitError::Unknown(why)) => {
                match self
                    .store
                    .read(&request.scope, self.config.stale_claim)
                    .instrument(tracing::info_span!("idemgen.read"))
                    .await
                {
                    Ok(Some(record))
                        if record.state == RecordState::Completed
                            && record.claim_token == Some(token) =>
                    {
                        Ok(outcome)
                    }
                    // Not visibly committed, but the commit may still land: tell the client to
                    // retry with the same key, and release the claim. The release is safe: its
                    // token-guarded DELETE waits for the in-doubt transaction's row lock (its
                    // completion UPDATE) and then re-checks `state = 'claimed'` on the row as
                    // that transaction left it, so it deletes nothing that committed. It runs
                    // apart, so the 504 never waits for the server to decide.
                    _ => {
                        if claim_committed {
                            let this = self.clone();
                            let scope = request.scope.clone();
                            tokio::spawn(async move { this.release_quiet(&scope, token).await });
                        }
                        Err(Problem::new(ProblemKind::OutcomeUnknown)
                            .with_detail(format!(
                                "Retry the request with the same {}.",
                                request.key_header
                            ))
                            .with_internal(why)
                            .into())
                    }
                }
            }
        }
    }

    /// What a record held by someone else means for this request. `Ok(None)`: wait and retry.
    fn judge<R: ResponseCodec>(
        &self,
        request: &IdempotentRequest,
        record: Record,
        deadline: Instant,
    ) -> Result<Option<Outcome<R>>, Problem> {
        if record.state == RecordState::Tombstone {
            return Err(Problem::new(ProblemKind::ResourceGone));
        }
        if record.fingerprint_version != Some(request.fingerprint_version) {
            return Err(Problem::new(ProblemKind::FingerprintVersionChanged));
        }
        if !request.same_input(&record) {
            return Err(Problem::new(ProblemKind::KeyReused));
        }
        match record.state {
            RecordState::Completed => {
                // The stored result becomes the answer; nothing runs.
                let _replay = tracing::info_span!("idemgen.replay").entered();
                let stored = record.response.ok_or_else(|| {
                    Problem::new(ProblemKind::Internal)
                        .with_internal("completed record without result")
                })?;
                let response = R::decode(&stored).map_err(|e| {
                    Problem::new(ProblemKind::Internal).with_internal(e.to_string())
                })?;
                Ok(Some(Outcome {
                    response,
                    disposition: Disposition::Replayed,
                }))
            }
            _ if Instant::now() < deadline => Ok(None),
            _ => Err(Problem::new(ProblemKind::InFlight)),
        }
    }

    /// After our completion lost to a takeover: answer with the winner's result when it has one.
    async fn after_takeover<R: ResponseCodec, E>(
        &self,
        request: &IdempotentRequest,
    ) -> Result<Outcome<R>, ExecuteError<E>> {
        let record = self
            .store
            .read(&request.scope, self.config.stale_claim)
            .instrument(tracing::info_span!("idemgen.read"))
            .await
            .map_err(unavailable)?;
        match record {
            Some(record) if record.state == RecordState::Completed => {
                match self.judge(request, record, Instant::now())? {
                    Some(outcome) => Ok(outcome),
                    None => Err(Problem::new(ProblemKind::InFlight).into()),
                }
            }
            _ => Err(Problem::new(ProblemKind::InFlight).into()),
        }
    }

    /// Frees this attempt's claim; a failure is retried by the background task until the
    /// store answers (without a task, the claim waits for stale takeover).
    async fn release_quiet(&self, scope: &Scope, token: ClaimToken) {
        if let Err(e) = self.store.release(scope, token).await {
            let deferred = self
                .holder
                .task
                .as_ref()
                .is_some_and(|task| task.send(Chore::Release(scope.clone(), token)).is_ok());
            if deferred {
                tracing::warn!(error = %e, "releasing a claim failed; retrying in the background");
            } else {
                tracing::warn!(error = %e, "releasing a claim failed; it will be taken over when stale");
            }
        }
    }

    fn encode<R: ResponseCodec>(
        &self,
        request: &IdempotentRequest,
        response: &R,
    ) -> Result<Option<StoredResponse>, Problem> {
        let encoded = response
            .encode_success()
            .map_err(|e| Problem::new(ProblemKind::Internal).with_internal(e.to_string()))?;
        let Some(encoded) = encoded else {
            return Ok(None);
        };
        match StoredResponse::new(
            encoded.status,
            &encoded.headers,
            encoded.body,
            request.declared_headers,
        ) {
            Ok(stored) => Ok(Some(stored)),
            Err(_) => Ok(None),
        }
    }
}

/// How a failure of the store after the handler ran is answered: 503 (nothing of this service was
/// written; retry), or 504 when the handler asked for a derived key, since a downstream call it
/// made may have executed and only a retry with the same key learns its outcome.
#[derive(Debug, Clone, Copy)]
struct StoreFailure {
    derived: bool,
}

impl StoreFailure {
    fn problem(self, internal: String) -> Problem {
        let kind = if self.derived {
            ProblemKind::OutcomeUnknown
        } else {
            ProblemKind::StoreUnavailable
        };
        Problem::new(kind).with_internal(internal)
    }
}

fn unavailable(e: StoreError) -> Problem {
    Problem::new(ProblemKind::StoreUnavailable).with_internal(e.to_string())
}

fn outcome_label<R, E>(result: &Result<Outcome<R>, ExecuteError<E>>) -> &'static str {
    match result {
        Ok(o) => match o.disposition {
            Disposition::Executed => "executed",
            Disposition::TakenOver => "taken_over",
            Disposition::NotStored => "executed_not_stored",
            Disposition::Replayed => "replayed",
        },
        Err(ExecuteError::Handler(_)) => "handler_error",
        Err(ExecuteError::Problem(p)) => match p.kind() {
            ProblemKind::InFlight => "conflict",
            ProblemKind::KeyReused | ProblemKind::FingerprintVersionChanged => "mismatch",
            ProblemKind::ResourceGone => "gone",
            ProblemKind::StoreUnavailable => "unavailable",
            ProblemKind::OutcomeUnknown => "unknown",
            _ => "error",
        },
    }
}

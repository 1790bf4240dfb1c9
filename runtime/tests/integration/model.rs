//! The protocol as a model, checked exhaustively with stateright: both strategies, stale
//! takeovers, holder leases that lapse (the holder died, or paused and goes on afterwards) and the
//! takeover they allow, crashes, failed handlers and releases, releases retried later by the
//! holder's background task, lost commit acknowledgements (of commits that landed and of commits
//! that never reached the server, both read back), a `COMMIT` left in doubt (sent, the connection
//! broken, the server deciding later) whose claim the attempt releases after answering 504, and a
//! delete that tombstones the created resource, for one key and three attempts of the same
//! request, each in a process of its own.
//!
//! The in-doubt transaction holds the row lock of its completion's `UPDATE` until the server
//! decides, so any statement that writes the record (a release, a takeover, another completion)
//! waits for it and then re-checks its guard on the row as it is (READ COMMITTED): the model
//! blocks those steps while a transaction is in doubt. On SQLite the file's write lock, held by
//! every write transaction from its `BEGIN IMMEDIATE`, plays that part for the whole file; the
//! assumptions the model makes of the store are checked against SQLite's locking in `sqlite.rs`
//! (a release waits for an open completion and re-checks, gates and claims ordered by the lock,
//! the token guard after a takeover).
//!
//! Properties (protocol.md, "States and transitions"):
//! - never two committed business writes for one key;
//! - a completed record's stored result is the committed write's result;
//! - every success (executed, reconciled after a lost acknowledgement, or replayed) answers with
//!   the committed write's result;
//! - after the resource is deleted, a retry is answered 410, never with the deleted resource;
//! - when everything has finished, a write exists exactly when a completed (or tombstoned)
//!   record does.
//!
//! Deliberately broken variants must be caught, so the checker is shown to bite: a completion
//! guarded by nothing; a business write committed apart from its completion; an in-transaction
//! attempt with neither the advisory gate nor the primary key; a delete that leaves the
//! record completed; a delete that removes the record; a takeover on lease expiry that keeps the
//! dead holder's token instead of installing a new one; a release after 504 that does not wait
//! for the in-doubt transaction's row lock.
//!
//! What the model shows about the guards: the completion's `state = 'claimed'` alone already
//! keeps writes to one; the token is what makes a read-back after a lost acknowledgement sound
//! (a taker sharing the holder's token makes the holder report the taker's write as its own), and
//! a release's token guard protects the taker's work, not safety (an unguarded release lets a
//! third attempt claim while the taker runs, and the taker's completion then fails).

use stateright::{Checker, Model, Property};

/// How many attempts of the same request race for the key.
const ATTEMPTS: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    SeparateClaim,
    InTransaction,
}

/// A deliberate bug, to show that the properties catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    /// `UPDATE … SET state = 'completed'` guarded by nothing (not the token).
    UnguardedCompletion,
    /// The business write commits in its own transaction; the record is completed afterwards.
    SplitCommit,
    /// In-transaction attempts without the advisory gate and without the primary key deciding.
    UngatedReservation,
    /// Deleting the resource leaves its record completed.
    NoTombstone,
    /// Deleting the resource deletes its record.
    DeleteRecord,
    /// A takeover of a claim whose holder's lease lapsed keeps the holder's token (only the
    /// holder changes), so the dead holder and the taker share it.
    TakeoverKeepsToken,
    /// The release after an unknown commit outcome goes ahead without waiting for the in-doubt
    /// transaction (as a release judged from a lock-free read would): it deletes the claim the
    /// pending completion updated, whose write may still commit.
    ReleaseIgnoresRowLock,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Record {
    None,
    /// Claimed by the attempt holding `token`, in the process whose lease is `holder`.
    Claimed {
        token: u8,
        holder: u8,
    },
    Completed {
        token: u8,
        result: u8,
    },
    Tombstone,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    Start,
    /// The handler runs in the attempt's transaction (its write pending).
    Handling,
    /// SplitCommit only: the write committed, the completion not yet.
    WriteCommitted,
    /// Committed; the acknowledgement is on its way.
    Acknowledging,
    /// The `COMMIT` was sent and the connection broke: the server decides (`Action::Resolve`);
    /// the attempt reads the record back.
    InDoubt,
    /// Answered 504 (outcome unknown): release the claim, guarded by the token and ordered by
    /// the completion's row lock.
    ReleasingUnknown,
    /// The handler failed or answered non-2xx: roll back, release the claim.
    Releasing,
    /// Answered; the release failed and the holder's background task retries it later.
    Deferred,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Answer {
    Pending,
    /// A 2xx naming the write `result` (executed, reconciled or replayed).
    Success {
        result: u8,
    },
    /// A replay of a resource that had been deleted: what a tombstone prevents.
    ReplayOfDeleted,
    Gone,
    Conflict,
    NotStored,
    Unknown,
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// The committed idempotency record of the key.
    record: Record,
    /// In-transaction strategy: attempts inside their gated transaction (the completed record is
    /// inserted, once, when they complete and commit).
    pending: [bool; ATTEMPTS as usize],
    /// In-transaction strategy: the holder of the key's advisory transaction lock.
    gate: Option<u8>,
    /// Committed business writes for the key, and the id of the (last) one.
    writes: u8,
    committed: u8,
    /// Whether the created resource was deleted.
    deleted: bool,
    pcs: [Pc; ATTEMPTS as usize],
    answers: [Answer; ATTEMPTS as usize],
    /// The token each attempt completes and releases with (its own, unless it took one over).
    tokens: [u8; ATTEMPTS as usize],
    /// Whether each attempt's process still renews its lease.
    leases: [bool; ATTEMPTS as usize],
    /// Not vacuous: a claim was taken over because its holder's lease lapsed; a deferred release
    /// freed a key.
    lease_takeover: bool,
    deferred_release: bool,
    /// The attempt whose transaction (its write and its completion, holding the record's row
    /// lock) is in doubt: sent to the server, not yet committed or rolled back.
    in_doubt: Option<u8>,
    /// Not vacuous: a release after 504 freed the key; one found the in-doubt commit landed.
    unknown_released: bool,
    unknown_landed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// Attempt `i` takes a step; `choice` picks among what the world may do to it.
    Step { i: u8, choice: u8 },
    /// The resource is deleted (in one transaction with its tombstone).
    Delete,
    /// Attempt `i`'s process stops renewing its lease (it died, or it pauses and goes on later).
    LeaseLapses { i: u8 },
    /// The server decides the transaction in doubt: commits it, or rolls it back (the `COMMIT`
    /// never arrived and the broken connection ends the session).
    Resolve { commit: bool },
}

#[derive(Clone)]
struct Protocol {
    strategy: Strategy,
    bug: Option<Bug>,
}

impl Protocol {
    fn bug(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// How many choices step `pc` of an attempt has.
    fn choices(&self, state: &State, i: usize) -> u8 {
        match state.pcs[i] {
            // Claim / reserve: stale by age, fresh, or its holder's lease lapsed when someone
            // holds the key; in-transaction: wait (poll again) or give up with 409 while the gate
            // is held.
            Pc::Start => 3,
            // Crash, handler failure (or non-2xx), success, a COMMIT lost before it reached the
            // server (nothing committed; read back); separate claims: a COMMIT sent and left in
            // doubt.
            Pc::Handling if self.strategy == Strategy::SeparateClaim => 5,
            Pc::Handling => 4,
            Pc::InDoubt => 1,
            // The release succeeds or fails (retried later by the background task).
            Pc::ReleasingUnknown => 2,
            // Crash between the write's commit and the completion, or go on.
            Pc::WriteCommitted => 2,
            // The acknowledgement arrives; is lost and read back; is lost and so is the read.
            Pc::Acknowledging => 3,
            // The release succeeds or fails (retried later by the background task).
            Pc::Releasing => 2,
            // The retried release goes through, or the process dies first (the claim then waits
            // for its lease to lapse or for stale takeover).
            Pc::Deferred => 2,
            Pc::Done => 0,
        }
    }

    fn step(&self, s: &mut State, i: usize, choice: u8) {
        let me = i as u8 + 1;
        match (s.pcs[i], self.strategy) {
            (Pc::Start, Strategy::SeparateClaim) => match s.record {
                Record::None => {
                    s.record = Record::Claimed {
                        token: me,
                        holder: me,
                    };
                    s.pcs[i] = Pc::Handling;
                }
                // A takeover is an UPDATE of the record: it waits for the in-doubt transaction's
                // row lock, then judges the row again.
                Record::Claimed { .. } if choice != 1 && self.row_locked(s) => {}
                Record::Claimed { .. } if choice == 0 => {
                    // Stale by age: take it over with my token.
                    s.record = Record::Claimed {
                        token: me,
                        holder: me,
                    };
                    s.pcs[i] = Pc::Handling;
                }
                Record::Claimed { token, holder }
                    if choice == 2 && !s.leases[usize::from(holder - 1)] =>
                {
                    // The holder's lease lapsed: stale at once; take it over with a new token
                    // (the broken variant keeps the holder's).
                    let token = if self.bug(Bug::TakeoverKeepsToken) {
                        token
                    } else {
                        me
                    };
                    s.record = Record::Claimed { token, holder: me };
                    s.tokens[i] = token;
                    s.lease_takeover = true;
                    s.pcs[i] = Pc::Handling;
                }
                Record::Claimed { .. } => self.finish(s, i, Answer::Conflict),
                Record::Completed { result, .. } => self.replay(s, i, result),
                Record::Tombstone => self.finish(s, i, Answer::Gone),
            },
            (Pc::Start, Strategy::InTransaction) => {
                let gated = !self.bug(Bug::UngatedReservation);
                if gated && s.gate.is_some_and(|g| g != me) {
                    // Busy: poll again later, or 409 when the wait is over.
                    if choice >= 1 {
                        self.finish(s, i, Answer::Conflict);
                    }
                    return;
                }
                match s.record {
                    Record::None => {
                        if gated {
                            s.gate = Some(me);
                        }
                        s.pending[i] = true;
                        s.pcs[i] = Pc::Handling;
                    }
                    Record::Completed { result, .. } => self.replay(s, i, result),
                    Record::Tombstone => self.finish(s, i, Answer::Gone),
                    // Claims are never committed apart in this strategy.
                    Record::Claimed { .. } => self.finish(s, i, Answer::Conflict),
                }
            }
            (Pc::Handling, _) => match choice {
                0 => {
                    // The process dies: its transaction rolls back; a separate claim stays.
                    self.roll_back(s, i);
                    self.finish(s, i, Answer::Crashed);
                }
                1 => {
                    self.roll_back(s, i);
                    if self.strategy == Strategy::SeparateClaim {
                        s.pcs[i] = Pc::Releasing;
                    } else {
                        self.finish(s, i, Answer::NotStored);
                    }
                }
                3 => {
                    // The COMMIT never reached the server: the write rolls back, and the
                    // read-back answers success (with this attempt's own response, as the
                    // executor does) only when the record is completed with this attempt's
                    // token; otherwise 504, the claim left in place.
                    self.roll_back(s, i);
                    match s.record {
                        Record::Completed { token, .. } if token == s.tokens[i] => {
                            self.finish(s, i, Answer::Success { result: me });
                        }
                        _ => self.unknown(s, i),
                    }
                }
                4 => {
                    // The COMMIT was sent and the connection broke. The completion's UPDATE
                    // matched (or the attempt lost its claim and rolls back, as on completion).
                    if self.row_locked(s) {
                        return;
                    }
                    let mine =
                        matches!(s.record, Record::Claimed { token, .. } if token == s.tokens[i]);
                    if mine || self.bug(Bug::UnguardedCompletion) {
                        s.in_doubt = Some(me);
                        s.pcs[i] = Pc::InDoubt;
                    } else {
                        self.complete_and_commit(s, i);
                    }
                }
                _ if self.bug(Bug::SplitCommit) => {
                    s.writes += 1;
                    s.committed = me;
                    s.pcs[i] = Pc::WriteCommitted;
                }
                _ => self.complete_and_commit(s, i),
            },
            (Pc::WriteCommitted, _) => {
                if choice == 0 {
                    self.finish(s, i, Answer::Crashed);
                } else {
                    self.complete_and_commit(s, i);
                }
            }
            (Pc::Acknowledging, _) => match choice {
                0 => self.finish(s, i, Answer::Success { result: me }),
                // Lost: read the record back on the writer.
                1 => match s.record {
                    Record::Completed { token, .. } if token == s.tokens[i] => {
                        self.finish(s, i, Answer::Success { result: me });
                    }
                    _ => self.unknown(s, i),
                },
                _ => self.unknown(s, i),
            },
            (Pc::InDoubt, _) => {
                // The read-back (lock-free: it sees the last committed record).
                match s.record {
                    Record::Completed { token, .. } if token == s.tokens[i] => {
                        self.finish(s, i, Answer::Success { result: me });
                    }
                    _ => self.unknown(s, i),
                }
            }
            (Pc::ReleasingUnknown, _) => {
                if self.row_locked(s) && !self.bug(Bug::ReleaseIgnoresRowLock) {
                    // The DELETE waits for the in-doubt transaction, then re-checks its guard.
                    return;
                }
                if choice == 0 {
                    if matches!(s.record, Record::Completed { token, .. } if token == s.tokens[i]) {
                        s.unknown_landed = true;
                    }
                    s.unknown_released |= self.release(s, i);
                    s.pcs[i] = Pc::Done;
                } else {
                    s.pcs[i] = Pc::Deferred;
                }
            }
            (Pc::Releasing, _) => {
                if self.row_locked(s) {
                    return;
                }
                if choice == 0 {
                    self.release(s, i);
                    self.finish(s, i, Answer::NotStored);
                } else {
                    s.answers[i] = Answer::NotStored;
                    s.pcs[i] = Pc::Deferred;
                }
            }
            (Pc::Deferred, _) => {
                // Retried by the background task, perhaps long after someone took the claim
                // over: guarded by the token, it then deletes nothing.
                if self.row_locked(s) {
                    return;
                }
                if choice == 0 {
                    s.deferred_release |= self.release(s, i);
                }
                s.pcs[i] = Pc::Done;
            }
            (Pc::Done, _) => {}
        }
    }

    /// Whether a statement writing the record must wait: a transaction in doubt holds its row
    /// lock.
    fn row_locked(&self, s: &State) -> bool {
        s.in_doubt.is_some()
    }

    /// 504: the outcome is unknown; the claim is released next (separate claims).
    fn unknown(&self, s: &mut State, i: usize) {
        s.answers[i] = Answer::Unknown;
        s.pcs[i] = if self.strategy == Strategy::SeparateClaim {
            Pc::ReleasingUnknown
        } else {
            Pc::Done
        };
    }

    /// The release: deletes the claim only while it holds this attempt's token. Returns whether
    /// it deleted it.
    fn release(&self, s: &mut State, i: usize) -> bool {
        let mine = matches!(s.record, Record::Claimed { token, .. } if token == s.tokens[i]);
        if mine {
            s.record = Record::None;
        }
        mine
    }

    /// The completion, in the business transaction, and the commit: one atomic step against
    /// claims (the completion's row lock is held until the commit).
    fn complete_and_commit(&self, s: &mut State, i: usize) {
        let me = i as u8 + 1;
        if self.strategy == Strategy::SeparateClaim && self.row_locked(s) {
            // The completion's UPDATE waits for the in-doubt transaction's row lock.
            return;
        }
        let split = self.bug(Bug::SplitCommit);
        match self.strategy {
            Strategy::SeparateClaim => {
                let guard = self.bug(Bug::UnguardedCompletion)
                    || matches!(s.record, Record::Claimed { token, .. } if token == s.tokens[i]);
                if guard {
                    s.record = Record::Completed {
                        token: s.tokens[i],
                        result: me,
                    };
                    if !split {
                        s.writes += 1;
                        s.committed = me;
                    }
                    s.pcs[i] = Pc::Acknowledging;
                } else {
                    // Taken over: my write rolls back; answer with the winner's result if any.
                    let answer = match s.record {
                        Record::Completed { result, .. } => Answer::Success { result },
                        _ => Answer::Conflict,
                    };
                    self.finish(s, i, answer);
                }
            }
            Strategy::InTransaction => {
                let unique = !self.bug(Bug::UngatedReservation);
                s.pending[i] = false;
                if s.gate == Some(me) {
                    s.gate = None;
                }
                if unique && s.record != Record::None {
                    // Another record committed first: my insert loses on the primary key and
                    // rolls back; answer from the winner's record.
                    let answer = match s.record {
                        Record::Completed { result, .. } => Answer::Success { result },
                        Record::Tombstone => Answer::Gone,
                        _ => Answer::Conflict,
                    };
                    self.finish(s, i, answer);
                    return;
                }
                s.record = Record::Completed {
                    token: me,
                    result: me,
                };
                s.writes += 1;
                s.committed = me;
                s.pcs[i] = Pc::Acknowledging;
            }
        }
    }

    /// The server commits or rolls back the transaction in doubt. Committed, its write counts and
    /// its completion applies to the row it locked (in the broken variant that row may have been
    /// deleted, or re-claimed, meanwhile: the completion is lost, the write is not).
    fn resolve(&self, s: &mut State, commit: bool) {
        let Some(j) = s.in_doubt.take() else { return };
        if !commit {
            return;
        }
        let token = s.tokens[usize::from(j - 1)];
        s.writes += 1;
        s.committed = j;
        if matches!(s.record, Record::Claimed { token: t, .. } if t == token)
            || self.bug(Bug::UnguardedCompletion)
        {
            s.record = Record::Completed { token, result: j };
        }
    }

    fn roll_back(&self, s: &mut State, i: usize) {
        let me = i as u8 + 1;
        s.pending[i] = false;
        if s.gate == Some(me) {
            s.gate = None;
        }
    }

    fn replay(&self, s: &mut State, i: usize, result: u8) {
        let answer = if s.deleted {
            Answer::ReplayOfDeleted
        } else {
            Answer::Success { result }
        };
        self.finish(s, i, answer);
    }

    fn finish(&self, s: &mut State, i: usize, answer: Answer) {
        s.answers[i] = answer;
        s.pcs[i] = Pc::Done;
    }

    fn delete(&self, s: &mut State) {
        s.deleted = true;
        if self.bug(Bug::DeleteRecord) {
            s.record = Record::None;
        } else if !self.bug(Bug::NoTombstone) {
            s.record = Record::Tombstone;
        }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            record: Record::None,
            pending: [false; ATTEMPTS as usize],
            gate: None,
            writes: 0,
            committed: 0,
            deleted: false,
            pcs: [Pc::Start; ATTEMPTS as usize],
            answers: [Answer::Pending; ATTEMPTS as usize],
            tokens: [1, 2, 3],
            leases: [true; ATTEMPTS as usize],
            lease_takeover: false,
            deferred_release: false,
            in_doubt: None,
            unknown_released: false,
            unknown_landed: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for i in 0..ATTEMPTS {
            for choice in 0..self.choices(state, i as usize) {
                actions.push(Action::Step { i, choice });
            }
        }
        // The created resource may be deleted once it exists (by its owner, whose delete runs in
        // one transaction with the tombstone).
        if !state.deleted && matches!(state.record, Record::Completed { .. }) {
            actions.push(Action::Delete);
        }
        if state.in_doubt.is_some() {
            actions.push(Action::Resolve { commit: true });
            actions.push(Action::Resolve { commit: false });
        }
        // A process's lease may lapse at any time once it has started.
        for i in 0..ATTEMPTS {
            if state.leases[i as usize] && state.pcs[i as usize] != Pc::Start {
                actions.push(Action::LeaseLapses { i });
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        match action {
            Action::Step { i, choice } => self.step(&mut next, i as usize, choice),
            Action::Delete => self.delete(&mut next),
            Action::LeaseLapses { i } => next.leases[i as usize] = false,
            Action::Resolve { commit } => self.resolve(&mut next, commit),
        }
        (next != *last).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one write", |_, s: &State| s.writes <= 1),
            Property::always(
                "a completed record holds the write",
                |_, s: &State| match s.record {
                    Record::Completed { result, .. } => s.writes == 1 && result == s.committed,
                    Record::Tombstone => s.writes == 1,
                    _ => true,
                },
            ),
            Property::always("every success names the write", |_, s: &State| {
                s.answers.iter().all(|a| match a {
                    Answer::Success { result } => *result == s.committed && s.writes == 1,
                    _ => true,
                })
            }),
            Property::always("no replay of a deleted resource", |_, s: &State| {
                !s.answers.contains(&Answer::ReplayOfDeleted)
            }),
            Property::always("finished: a write exactly when a record", |_, s: &State| {
                let finished = s.pcs.iter().all(|pc| *pc == Pc::Done);
                !finished
                    || (s.writes == 1)
                        == matches!(s.record, Record::Completed { .. } | Record::Tombstone)
            }),
            // Not vacuous: each of these happens somewhere in the state space.
            Property::sometimes("a write commits", |_, s: &State| s.writes == 1),
            Property::sometimes("a replay", |_, s: &State| {
                s.answers
                    .iter()
                    .filter(|a| matches!(a, Answer::Success { .. }))
                    .count()
                    >= 2
            }),
            Property::sometimes("410 after a delete", |_, s: &State| {
                s.answers.contains(&Answer::Gone)
            }),
            Property::sometimes("a lost acknowledgement left unknown", |_, s: &State| {
                s.answers.contains(&Answer::Unknown)
            }),
            Property::sometimes(
                "a takeover after a lease lapsed, then a write",
                |_, s: &State| s.lease_takeover && s.writes == 1,
            ),
            Property::sometimes("a deferred release freed the key", |_, s: &State| {
                s.deferred_release
            }),
            Property::sometimes(
                "a release after 504 freed the key, then a write",
                |_, s: &State| s.unknown_released && s.writes == 1,
            ),
            Property::sometimes(
                "a release after 504 found the in-doubt commit landed",
                |_, s: &State| s.unknown_landed && s.writes == 1,
            ),
        ]
    }
}

/// The safety properties (the `always` ones).
const SAFETY: [&str; 5] = [
    "at most one write",
    "a completed record holds the write",
    "every success names the write",
    "no replay of a deleted resource",
    "finished: a write exactly when a record",
];

/// Checks the model exhaustively; returns the names of violated safety properties and the
/// number of distinct states.
fn check(strategy: Strategy, bug: Option<Bug>) -> (Vec<&'static str>, usize) {
    let checker = Protocol { strategy, bug }.checker().spawn_bfs().join();
    let violated = SAFETY
        .into_iter()
        .filter(|name| checker.discovery(name).is_some())
        .collect();
    if bug.is_none() {
        for example in [
            "a write commits",
            "a replay",
            "410 after a delete",
            "a lost acknowledgement left unknown",
        ]
        .into_iter()
        .chain(
            (strategy == Strategy::SeparateClaim)
                .then_some([
                    "a takeover after a lease lapsed, then a write",
                    "a deferred release freed the key",
                    "a release after 504 freed the key, then a write",
                    "a release after 504 found the in-doubt commit landed",
                ])
                .into_iter()
                .flatten(),
        ) {
            assert!(
                checker.discovery(example).is_some(),
                "{strategy:?}: the model never reaches `{example}`: it is vacuous"
            );
        }
    }
    (violated, checker.unique_state_count())
}

#[test]
fn the_protocol_never_commits_two_writes_for_one_key() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let (violated, states) = check(strategy, None);
        assert_eq!(violated, Vec::<&str>::new(), "{strategy:?}");
        assert!(
            states > 500,
            "{strategy:?}: suspiciously small state space: {states}"
        );
        eprintln!("{strategy:?}: {states} states, every safety property holds");
    }
}

#[test]
fn an_unguarded_completion_is_caught() {
    let (violated, _) = check(Strategy::SeparateClaim, Some(Bug::UnguardedCompletion));
    assert!(violated.contains(&"at most one write"), "{violated:?}");
}

#[test]
fn a_write_committed_apart_from_its_completion_is_caught() {
    let (violated, _) = check(Strategy::SeparateClaim, Some(Bug::SplitCommit));
    assert!(violated.contains(&"at most one write"), "{violated:?}");
}

#[test]
fn an_ungated_in_transaction_reservation_is_caught() {
    let (violated, _) = check(Strategy::InTransaction, Some(Bug::UngatedReservation));
    assert!(violated.contains(&"at most one write"), "{violated:?}");
}

#[test]
fn a_delete_without_a_tombstone_is_caught() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let (violated, _) = check(strategy, Some(Bug::NoTombstone));
        assert!(
            violated.contains(&"no replay of a deleted resource"),
            "{strategy:?}: {violated:?}"
        );
        let (violated, _) = check(strategy, Some(Bug::DeleteRecord));
        assert!(
            violated.contains(&"at most one write"),
            "{strategy:?}: {violated:?}"
        );
    }
}

#[test]
fn a_lease_takeover_that_keeps_the_holders_token_is_caught() {
    let (violated, _) = check(Strategy::SeparateClaim, Some(Bug::TakeoverKeepsToken));
    // The dead holder's read-back after a lost COMMIT finds the taker's completion under the
    // shared token and reports the taker's write as its own.
    assert!(
        violated.contains(&"every success names the write"),
        "{violated:?}"
    );
}

#[test]
fn a_release_after_504_that_does_not_wait_for_the_in_doubt_commit_is_caught() {
    let (violated, _) = check(Strategy::SeparateClaim, Some(Bug::ReleaseIgnoresRowLock));
    // The release deletes the claim the in-doubt completion updated; the COMMIT lands (its write
    // with it), a retry claims the free key and writes again.
    assert!(violated.contains(&"at most one write"), "{violated:?}");
}

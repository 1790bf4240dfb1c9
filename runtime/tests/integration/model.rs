//! The protocol as a model, checked exhaustively with stateright: both strategies, stale
//! takeovers, crashes, failed handlers and releases, lost commit acknowledgements, and a delete
//! that tombstones the created resource, for one key and three attempts of the same request.
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
//! record completed; a delete that removes the record.

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Record {
    None,
    Claimed { token: u8 },
    Completed { token: u8, result: u8 },
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
    /// The handler failed or answered non-2xx: roll back, release the claim.
    Releasing,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// Attempt `i` takes a step; `choice` picks among what the world may do to it.
    Step { i: u8, choice: u8 },
    /// The resource is deleted (in one transaction with its tombstone).
    Delete,
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
            // Claim / reserve: fresh or stale when someone holds the key; in-transaction: wait
            // (poll again) or give up with 409 while the gate is held.
            Pc::Start => 2,
            // Crash, handler failure (or non-2xx), success.
            Pc::Handling => 3,
            // Crash between the write's commit and the completion, or go on.
            Pc::WriteCommitted => 2,
            // The acknowledgement arrives; is lost and read back; is lost and so is the read.
            Pc::Acknowledging => 3,
            // The release succeeds or fails (the claim then waits for stale takeover).
            Pc::Releasing => 2,
            Pc::Done => 0,
        }
    }

    fn step(&self, s: &mut State, i: usize, choice: u8) {
        let me = i as u8 + 1;
        match (s.pcs[i], self.strategy) {
            (Pc::Start, Strategy::SeparateClaim) => match s.record {
                Record::None => {
                    s.record = Record::Claimed { token: me };
                    s.pcs[i] = Pc::Handling;
                }
                Record::Claimed { .. } if choice == 0 => {
                    // Stale: take it over with my token.
                    s.record = Record::Claimed { token: me };
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
                    if choice == 1 {
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
            (Pc::Acknowledging, _) => {
                let answer = match choice {
                    0 => Answer::Success { result: me },
                    // Lost: read the record back on the writer.
                    1 => match s.record {
                        Record::Completed { token, result } if token == me => {
                            Answer::Success { result }
                        }
                        _ => Answer::Unknown,
                    },
                    _ => Answer::Unknown,
                };
                self.finish(s, i, answer);
            }
            (Pc::Releasing, _) => {
                if choice == 0 && s.record == (Record::Claimed { token: me }) {
                    s.record = Record::None;
                }
                self.finish(s, i, Answer::NotStored);
            }
            (Pc::Done, _) => {}
        }
    }

    /// The completion, in the business transaction, and the commit: one atomic step against
    /// claims (the completion's row lock is held until the commit).
    fn complete_and_commit(&self, s: &mut State, i: usize) {
        let me = i as u8 + 1;
        let split = self.bug(Bug::SplitCommit);
        match self.strategy {
            Strategy::SeparateClaim => {
                let guard = self.bug(Bug::UnguardedCompletion)
                    || s.record == (Record::Claimed { token: me });
                if guard {
                    s.record = Record::Completed {
                        token: me,
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
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        match action {
            Action::Step { i, choice } => self.step(&mut next, i as usize, choice),
            Action::Delete => self.delete(&mut next),
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
        ] {
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

//! Two services as a model, checked exhaustively with stateright (docs/downstream.md): an
//! upstream attempt claims its key, calls an idempotent downstream with a key, then writes
//! locally and completes its record in one commit guarded by its claim token. Three attempts of
//! one logical request, each in a process of its own, with crashes at every step, downstream
//! answers lost (executed, outcome unknown: 504) or refused before executing (503), local
//! writes that fail after the downstream succeeded, and takeovers of claims whose holder died or
//! whose lease lapsed while it ran.
//!
//! The downstream is modelled as what the single-service model (`model.rs`) shows an idemgen
//! service to be: per key, at most one execution, every later call with the key answered with
//! its result.
//!
//! Properties: never two downstream executions (charges) for one logical request; never two
//! local writes; an order names the one charge; every success answered to the client names it.
//! A deliberately broken variant must be caught: a fresh downstream key per attempt (a UUID
//! instead of `derive_key`).

use stateright::{Checker, Model, Property};

const ATTEMPTS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Record {
    None,
    /// Held by the attempt with this token.
    Claimed(u8),
    /// Completed, its stored result naming this charge.
    Completed(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    Start,
    /// Holds the claim, before the downstream call.
    Claimed,
    /// The downstream answered with this charge.
    Charged(u8),
    /// The downstream's outcome is unknown to the attempt (executed or not): it answers 504 and
    /// releases its claim.
    Unknown,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Answer {
    Pending,
    Success(u8),
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    record: Record,
    pcs: [Pc; ATTEMPTS],
    answers: [Answer; ATTEMPTS],
    /// The downstream's records: the charge each key got (index 0 is the derived key; with the
    /// bug, attempt `i` uses key `i`).
    downstream: [Option<u8>; ATTEMPTS],
    charges: u8,
    orders: u8,
    order_charge: Option<u8>,
    /// A claim may be taken over: its holder died, or its lease lapsed while it ran.
    stale: bool,
    /// Some attempt's downstream answer was lost after it executed, and a later order replayed
    /// that charge.
    replayed_after_unknown: bool,
    unknown_seen: bool,
    /// Some attempt's local write failed after its downstream call succeeded.
    write_failed_after_charge: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chain {
    /// The bug: each attempt sends a fresh downstream key.
    fresh_key_per_attempt: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Step {
        i: usize,
        choice: u8,
    },
    /// The current claim's holder dies or its lease lapses.
    GoesStale,
}

impl Chain {
    fn key(&self, i: usize) -> usize {
        if self.fresh_key_per_attempt { i } else { 0 }
    }

    fn token(i: usize) -> u8 {
        i as u8 + 1
    }

    /// How many ways attempt `i` can take its next step.
    fn choices(s: &State, i: usize) -> u8 {
        match s.pcs[i] {
            Pc::Done => 0,
            // Claim (or replay, or take over a stale claim, or give up with 409).
            Pc::Start => 1,
            // Downstream: answered; executed but the answer lost; refused before executing;
            // or the process crashes.
            Pc::Claimed => 4,
            // The local write and completion commit; the write fails; or the process crashes.
            Pc::Charged(_) => 3,
            Pc::Unknown => 1,
        }
    }

    /// The downstream call with the key of attempt `i`: its one execution, or the replay.
    fn call_downstream(&self, s: &mut State, i: usize) -> u8 {
        let key = self.key(i);
        match s.downstream[key] {
            Some(charge) => charge,
            None => {
                s.charges += 1;
                s.downstream[key] = Some(s.charges);
                s.charges
            }
        }
    }

    /// Releases attempt `i`'s claim, guarded by its token.
    fn release(s: &mut State, i: usize) {
        if s.record == Record::Claimed(Self::token(i)) {
            s.record = Record::None;
            s.stale = false;
        }
    }

    fn step(&self, s: &mut State, i: usize, choice: u8) {
        let token = Self::token(i);
        match (s.pcs[i], choice) {
            (Pc::Start, _) => match s.record {
                Record::None => {
                    s.record = Record::Claimed(token);
                    s.pcs[i] = Pc::Claimed;
                }
                Record::Completed(charge) => {
                    s.answers[i] = Answer::Success(charge);
                    s.pcs[i] = Pc::Done;
                }
                Record::Claimed(_) if s.stale => {
                    s.record = Record::Claimed(token);
                    s.stale = false;
                    s.pcs[i] = Pc::Claimed;
                }
                // In flight: 409 (the client retries as another attempt).
                Record::Claimed(_) => {
                    s.answers[i] = Answer::Failed;
                    s.pcs[i] = Pc::Done;
                }
            },
            (Pc::Claimed, 0) => {
                let charge = self.call_downstream(s, i);
                s.pcs[i] = Pc::Charged(charge);
            }
            (Pc::Claimed, 1) => {
                self.call_downstream(s, i);
                s.unknown_seen = true;
                s.pcs[i] = Pc::Unknown;
            }
            // Refused before executing (connection refused: 503), or an unknown outcome that in
            // fact never reached the downstream: the same for the attempt.
            (Pc::Claimed, 2) => s.pcs[i] = Pc::Unknown,
            (Pc::Claimed, _) | (Pc::Charged(_), 2) => {
                // The process dies: its claim stays until it goes stale.
                s.answers[i] = Answer::Failed;
                s.pcs[i] = Pc::Done;
            }
            (Pc::Charged(charge), 0) => {
                // The business write and the completion commit together, guarded by the token.
                if s.record == Record::Claimed(token) {
                    s.orders += 1;
                    s.order_charge = Some(charge);
                    s.record = Record::Completed(charge);
                    s.answers[i] = Answer::Success(charge);
                    if s.unknown_seen {
                        s.replayed_after_unknown = true;
                    }
                } else {
                    // Taken over meanwhile: rolled back, answered from the winner (or 409).
                    s.answers[i] = match s.record {
                        Record::Completed(c) => Answer::Success(c),
                        _ => Answer::Failed,
                    };
                }
                s.pcs[i] = Pc::Done;
            }
            (Pc::Charged(_), _) => {
                // The local write fails after the downstream succeeded: rolled back, released.
                s.write_failed_after_charge = true;
                Self::release(s, i);
                s.answers[i] = Answer::Failed;
                s.pcs[i] = Pc::Done;
            }
            (Pc::Unknown, _) => {
                // 504 (or 503): nothing stored, the claim released; the client retries.
                Self::release(s, i);
                s.answers[i] = Answer::Failed;
                s.pcs[i] = Pc::Done;
            }
            (Pc::Done, _) => {}
        }
    }
}

impl Model for Chain {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            record: Record::None,
            pcs: [Pc::Start; ATTEMPTS],
            answers: [Answer::Pending; ATTEMPTS],
            downstream: [None; ATTEMPTS],
            charges: 0,
            orders: 0,
            order_charge: None,
            stale: false,
            replayed_after_unknown: false,
            unknown_seen: false,
            write_failed_after_charge: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for i in 0..ATTEMPTS {
            for choice in 0..Chain::choices(state, i) {
                actions.push(Action::Step { i, choice });
            }
        }
        if matches!(state.record, Record::Claimed(_)) && !state.stale {
            actions.push(Action::GoesStale);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        match action {
            Action::Step { i, choice } => self.step(&mut next, i, choice),
            Action::GoesStale => next.stale = true,
        }
        (next != *last).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one charge", |_, s: &State| s.charges <= 1),
            Property::always("at most one order", |_, s: &State| s.orders <= 1),
            Property::always("an order names the charge", |_, s: &State| {
                s.order_charge.is_none() || (s.order_charge == Some(1) && s.charges == 1)
            }),
            Property::always("every success names the charge", |_, s: &State| {
                s.answers.iter().all(|a| match a {
                    Answer::Success(c) => *c == 1 && s.charges == 1 && s.orders == 1,
                    _ => true,
                })
            }),
            // Not vacuous.
            Property::sometimes("an order", |_, s: &State| s.orders == 1),
            Property::sometimes(
                "an order after an unknown downstream outcome",
                |_, s: &State| s.replayed_after_unknown,
            ),
            Property::sometimes(
                "charged, then the local write failed, then ordered",
                |_, s: &State| s.write_failed_after_charge && s.orders == 1,
            ),
        ]
    }
}

const SAFETY: [&str; 4] = [
    "at most one charge",
    "at most one order",
    "an order names the charge",
    "every success names the charge",
];

fn check(chain: Chain) -> (Vec<&'static str>, usize) {
    let checker = chain.checker().spawn_bfs().join();
    let violated = SAFETY
        .into_iter()
        .filter(|name| checker.discovery(name).is_some())
        .collect();
    (violated, checker.unique_state_count())
}

#[test]
fn a_derived_key_never_charges_twice_whatever_crashes() {
    let chain = Chain {
        fresh_key_per_attempt: false,
    };
    let checker = chain.checker().spawn_bfs().join();
    for example in [
        "an order",
        "an order after an unknown downstream outcome",
        "charged, then the local write failed, then ordered",
    ] {
        assert!(
            checker.discovery(example).is_some(),
            "the model never reaches `{example}`: it is vacuous"
        );
    }
    let (violated, states) = check(chain);
    assert_eq!(violated, Vec::<&str>::new());
    assert!(states > 200, "suspiciously small state space: {states}");
    eprintln!("two-service chain: {states} states, every safety property holds");
}

#[test]
fn a_fresh_downstream_key_per_attempt_is_caught() {
    let (violated, _) = check(Chain {
        fresh_key_per_attempt: true,
    });
    assert!(violated.contains(&"at most one charge"), "{violated:?}");
}

//! How long the phases of one attempt took (claim, handler, completion), through a task-local
//! the pipeline reads when the attempt ends.

use std::time::{Duration, Instant};

/// How long the phases of one attempt took; a phase that did not run is `None` (a replay has
/// no handler or completion time). Recorded as histograms by the pipeline, with the request's
/// outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Phases {
    /// Taking the key: the claim statements or the gated `BEGIN`s, waits for an in-flight
    /// attempt included, until the key was held or answered (replay, 409, 422, 410).
    pub claim: Option<Duration>,
    /// The handler, in the attempt's transaction.
    pub handler: Option<Duration>,
    /// Completing the record and committing (or rolling back and releasing).
    pub completion: Option<Duration>,
}

tokio::task_local! {
    /// The phases of the attempt running in this task (see [`Executor::execute_finished`]).
    pub(super) static PHASES: std::cell::Cell<Phases>;
}

/// Times one phase of the current attempt, until dropped (every return included); the time is
/// added to the phase's, so a phase that runs twice (a takeover after the gate) counts both.
pub(super) struct PhaseTimer {
    pub(super) started: Instant,
    pub(super) phase: fn(&mut Phases) -> &mut Option<Duration>,
}

impl PhaseTimer {
    pub(super) fn start(phase: fn(&mut Phases) -> &mut Option<Duration>) -> PhaseTimer {
        PhaseTimer {
            started: Instant::now(),
            phase,
        }
    }
}

impl Drop for PhaseTimer {
    fn drop(&mut self) {
        let elapsed = self.started.elapsed();
        // Outside an observed attempt (no task-local) there is nothing to record.
        let _ = PHASES.try_with(|cell| {
            let mut phases = cell.get();
            let slot = (self.phase)(&mut phases);
            *slot = Some(slot.unwrap_or_default() + elapsed);
            cell.set(phases);
        });
    }
}

//! Which statuses a spec must declare for an idempotent operation, and which ones only the
//! request pipeline answers (protocol.md, "Status codes and problem types").

/// Statuses every idempotent operation must declare: a client must be able to tell each of these
/// answers apart (400 key problems, 401, 403 on replays too, 422 key reused, 500, 503 store
/// unavailable, 504 outcome unknown).
pub const REQUIRED_STATUSES: [u16; 7] = [400, 401, 403, 422, 500, 503, 504];

/// Statuses every idempotent operation should declare: 409 while another attempt runs, 410 after
/// the created resource was deleted.
pub const RECOMMENDED_STATUSES: [u16; 2] = [409, 410];

/// Statuses every operation that takes a request body should declare: 413 (over the limit) and
/// 415 (not the declared media type), both answered before anything else happens.
pub const BODY_STATUSES: [u16; 2] = [413, 415];

/// Statuses only the request pipeline answers, for every operation (never a handler): 401
/// (authentication), 405 (method), 413 (body limit), 415 (media type) and 500 (any failure).
pub const PIPELINE_STATUSES: [u16; 5] = [401, 405, 413, 415, 500];

/// Statuses only the request pipeline answers for an idempotent operation, beside
/// [`PIPELINE_STATUSES`]: the protocol's own 410 (resource gone), 503 (store unavailable) and 504
/// (outcome unknown).
pub const PIPELINE_IDEMPOTENT_STATUSES: [u16; 3] = [410, 503, 504];

/// Whether only the request pipeline answers `status` for an operation ([`PIPELINE_STATUSES`],
/// and [`PIPELINE_IDEMPOTENT_STATUSES`] for idempotent ones). A generated handler's typed error
/// responses leave these statuses out. 408, 409 and 422 are [`shared_with_handler`].
pub fn answered_by_runtime(status: u16, idempotent: bool) -> bool {
    PIPELINE_STATUSES.contains(&status)
        || (idempotent && PIPELINE_IDEMPOTENT_STATUSES.contains(&status))
}

/// The statuses [`answered_by_runtime`] names for an operation, ascending, as English prose
/// (`401, 405, 413, 415 and 500`): what generated docs say, from this one table.
pub fn pipeline_statuses_prose(idempotent: bool) -> String {
    let mut statuses: Vec<u16> = PIPELINE_STATUSES.to_vec();
    if idempotent {
        statuses.extend(PIPELINE_IDEMPOTENT_STATUSES);
    }
    statuses.sort_unstable();
    prose(&statuses)
}

/// Whether both the pipeline and a handler answer `status` for an operation: 408 of every
/// operation (the pipeline's `request_timeout` when a body was not received in time; a 408 the
/// spec declares is the handler's, a downstream that timed out), and 409 and 422 of an idempotent
/// one (the protocol's in flight, key reused, fingerprint version changed; a handler's business
/// conflicts, "already captured"). The pipeline answers with its own problem types, a handler
/// with any other, and clients tell the two apart by
/// [`protocol_problem`](crate::problem::protocol_problem), never by the status alone.
pub fn shared_with_handler(status: u16, idempotent: bool) -> bool {
    status == 408 || (idempotent && matches!(status, 409 | 422))
}

/// The statuses [`shared_with_handler`] names for an operation, as English prose.
pub fn shared_statuses_prose(idempotent: bool) -> String {
    prose(if idempotent { &[408, 409, 422] } else { &[408] })
}

fn prose(statuses: &[u16]) -> String {
    let words: Vec<String> = statuses.iter().map(u16::to_string).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

/// How a client may repeat a call (protocol.md, "Clients").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeatable {
    /// An `x-idempotent` operation called with the same key: the server makes every arrival one
    /// write, so any attempt may be repeated.
    Keyed,
    /// A safe method (GET, HEAD, OPTIONS, TRACE): repeating it changes nothing.
    Safe,
    /// Anything else: once the request may have reached the server, it is never repeated.
    Unsafe,
}

/// Whether a client retries an answer of `status` to a call that is `repeatable`, given whether
/// the operation declares 429 and the answer's problem `type` (`None` without a problem body).
/// Keyed calls retry the protocol's 409 (another attempt of the same key is in flight: its type
/// is `idempotency_request_in_flight`; a handler's business 409 is final), 408 (the body was not
/// received in time: nothing executed), 503 and 504 (nothing, or maybe something, committed: the
/// key makes retrying safe); safe calls retry 408, 503 and 504; a declared 429 is retried by
/// both. Never 400, 401, 403, 410, 422 or any other answer:
/// repeating them cannot change it.
pub fn client_retries(
    status: u16,
    problem_type: Option<&str>,
    repeatable: Repeatable,
    declares_429: bool,
) -> bool {
    let in_flight = || {
        problem_type.and_then(|t| crate::problem::protocol_problem(status, t))
            == Some(crate::problem::ProblemKind::InFlight)
    };
    match repeatable {
        Repeatable::Keyed => {
            matches!(status, 408 | 503 | 504)
                || (status == 409 && in_flight())
                || (status == 429 && declares_429)
        }
        Repeatable::Safe => matches!(status, 408 | 503 | 504) || (status == 429 && declares_429),
        Repeatable::Unsafe => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipelines_statuses_read_from_the_table() {
        assert_eq!(pipeline_statuses_prose(false), "401, 405, 413, 415 and 500");
        assert_eq!(
            pipeline_statuses_prose(true),
            "401, 405, 410, 413, 415, 500, 503 and 504"
        );
        assert_eq!(shared_statuses_prose(false), "408");
        assert_eq!(shared_statuses_prose(true), "408, 409 and 422");
        for status in 100..600 {
            let said = |idempotent| {
                pipeline_statuses_prose(idempotent)
                    .split([',', ' '])
                    .any(|w| w == status.to_string())
            };
            assert_eq!(said(false), answered_by_runtime(status, false), "{status}");
            assert_eq!(said(true), answered_by_runtime(status, true), "{status}");
            let shared = |idempotent| {
                shared_statuses_prose(idempotent)
                    .split([',', ' '])
                    .any(|w| w == status.to_string())
            };
            assert_eq!(
                shared(false),
                shared_with_handler(status, false),
                "{status}"
            );
            assert_eq!(shared(true), shared_with_handler(status, true), "{status}");
            // No status is both the pipeline's alone and shared.
            assert!(!(answered_by_runtime(status, true) && shared_with_handler(status, true)));
        }
    }
    use crate::problem::ProblemKind;

    #[test]
    fn clients_retry_only_what_a_repeat_can_change() {
        let in_flight = ProblemKind::InFlight.type_uri();
        let in_flight = Some(in_flight.as_str());
        assert!(client_retries(409, in_flight, Repeatable::Keyed, false));
        for status in [408, 503, 504] {
            assert!(
                client_retries(status, None, Repeatable::Keyed, false),
                "{status}"
            );
            assert!(
                client_retries(status, None, Repeatable::Safe, false),
                "{status}"
            );
            assert!(
                !client_retries(status, None, Repeatable::Unsafe, true),
                "{status}"
            );
        }
        for status in [400, 401, 403, 404, 410, 422, 500, 200, 201] {
            assert!(
                !client_retries(status, None, Repeatable::Keyed, true),
                "{status}"
            );
            assert!(
                !client_retries(status, None, Repeatable::Safe, true),
                "{status}"
            );
        }
        assert!(!client_retries(409, in_flight, Repeatable::Safe, false));
        assert!(!client_retries(429, None, Repeatable::Keyed, false));
        assert!(client_retries(429, None, Repeatable::Keyed, true));
        assert!(client_retries(503, None, Repeatable::Safe, false));
        for status in [409, 429, 503, 504] {
            assert!(
                !client_retries(status, in_flight, Repeatable::Unsafe, true),
                "{status}"
            );
        }
    }

    #[test]
    fn a_business_conflict_is_final() {
        // A handler's 409 ("already captured") carries its own type, or none: repeating the
        // call cannot change it, so it is not retried.
        for kind in [
            Some("https://payments.example/problems/already-captured"),
            Some("about:blank"),
            None,
        ] {
            assert!(
                !client_retries(409, kind, Repeatable::Keyed, true),
                "{kind:?}"
            );
        }
        // The protocol's type under another status is no in-flight answer either.
        let in_flight = ProblemKind::InFlight.type_uri();
        assert!(!client_retries(
            422,
            Some(&in_flight),
            Repeatable::Keyed,
            false
        ));
        assert!(shared_with_handler(409, true) && shared_with_handler(422, true));
        assert!(!shared_with_handler(409, false) && !shared_with_handler(410, true));
        assert!(shared_with_handler(408, false) && shared_with_handler(408, true));
    }

    #[test]
    fn the_protocol_owns_its_answers() {
        for status in [410, 503, 504] {
            assert!(answered_by_runtime(status, true), "{status}");
            assert!(!answered_by_runtime(status, false), "{status}");
        }
        for status in [401, 405, 413, 415, 500] {
            assert!(answered_by_runtime(status, false));
        }
        for status in [400, 403, 404, 409, 422, 200, 201] {
            assert!(!answered_by_runtime(status, true));
        }
    }
}

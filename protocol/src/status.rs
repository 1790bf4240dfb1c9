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

/// Whether only the request pipeline answers `status` for an operation (never a handler): 401
/// (authentication), 405 (method), 413 (body limit), 415 (media type) and 500 (any failure) for
/// every operation, and for idempotent ones also 409, 410, 422, 503 and 504, the protocol's own
/// answers. A generated handler's typed error responses leave these statuses out.
pub fn answered_by_runtime(status: u16, idempotent: bool) -> bool {
    matches!(status, 401 | 405 | 413 | 415 | 500)
        || (idempotent && matches!(status, 409 | 410 | 422 | 503 | 504))
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
/// the operation declares 429. Keyed calls retry 409 (another attempt of the same key is in
/// flight), 503 and 504 (nothing, or maybe something, committed: the key makes retrying safe);
/// safe calls retry 503 and 504; a declared 429 is retried by both. Never 400, 401, 403, 410,
/// 422 or any other answer: repeating them cannot change it.
pub fn client_retries(status: u16, repeatable: Repeatable, declares_429: bool) -> bool {
    match repeatable {
        Repeatable::Keyed => matches!(status, 409 | 503 | 504) || (status == 429 && declares_429),
        Repeatable::Safe => matches!(status, 503 | 504) || (status == 429 && declares_429),
        Repeatable::Unsafe => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_retry_only_what_a_repeat_can_change() {
        for status in [409, 503, 504] {
            assert!(client_retries(status, Repeatable::Keyed, false), "{status}");
        }
        for status in [400, 401, 403, 404, 410, 422, 500, 200, 201] {
            assert!(!client_retries(status, Repeatable::Keyed, true), "{status}");
            assert!(!client_retries(status, Repeatable::Safe, true), "{status}");
        }
        assert!(!client_retries(409, Repeatable::Safe, false));
        assert!(!client_retries(429, Repeatable::Keyed, false));
        assert!(client_retries(429, Repeatable::Keyed, true));
        assert!(client_retries(503, Repeatable::Safe, false));
        for status in [409, 429, 503, 504] {
            assert!(
                !client_retries(status, Repeatable::Unsafe, true),
                "{status}"
            );
        }
    }

    #[test]
    fn the_protocol_owns_its_answers() {
        for status in [409, 410, 422, 503, 504] {
            assert!(answered_by_runtime(status, true), "{status}");
            assert!(!answered_by_runtime(status, false), "{status}");
        }
        for status in [401, 405, 413, 415, 500] {
            assert!(answered_by_runtime(status, false));
        }
        for status in [400, 403, 404, 200, 201] {
            assert!(!answered_by_runtime(status, true));
        }
    }
}

//! The completion and the business `COMMIT` in one round trip, for `PgStore::finish`.
//!
//! The extended protocol carries one statement per `Sync`, and sqlx sends `COMMIT` as a query of
//! its own, so a completion bound as parameters costs a round trip before the commit's. As one
//! simple query, `SELECT idemgen_complete(…); COMMIT; BEGIN` costs one. Its values become
//! literals, each hex-encoded and decoded by the server (`decode('…', 'hex')`): no byte of a key,
//! a header or a body is ever read as SQL, whatever `standard_conforming_strings` says, and the
//! only other literals are numbers and a UUID the runtime formats.
//!
//! The functions (migration 0004) raise [`NOT_OURS`] where the statements they wrap would report
//! no row, because only an error stops the batch before its `COMMIT`. The trailing `BEGIN` keeps
//! sqlx's count of the connection's transaction true: sqlx forgets a transaction only when it
//! sends the `COMMIT` or `ROLLBACK` itself, so the batch leaves an empty transaction open, and the
//! store ends it with sqlx's queued `ROLLBACK` (sent ahead of the pool's release ping: no round
//! trip of its own). A `BEGIN` in an idle session does not fail.

use std::fmt::Write as _;

use super::Completion;
use crate::response::StoredResponse;

/// The SQLSTATE `idemgen_complete` and `idemgen_insert_completed` raise when the key's record
/// is not the attempt's.
pub(crate) const NOT_OURS: &str = "IG003";

/// Above this many bytes of response (body and headers), the completion is bound as parameters
/// and commits in its own round trip: hex doubles the bytes the server parses.
pub(crate) const MAX_INLINE_RESPONSE: usize = 64 * 1024;

/// The batch that completes the attempt's record and commits, or `None` for a response too
/// large to inline.
pub(crate) fn batch(
    completion: &Completion<'_>,
    response: &StoredResponse,
    resource_ref: Option<&str>,
) -> Option<String> {
    let headers = serde_json::to_string(&response.headers).ok()?;
    if response.body.len() + headers.len() > MAX_INLINE_RESPONSE {
        return None;
    }
    let mut sql = String::with_capacity(256 + 2 * (response.body.len() + headers.len()));
    let hash = completion.scope().hash();
    match completion {
        Completion::Claimed { token, .. } => {
            sql.push_str("SELECT idemgen_complete(");
            bytea(&mut sql, &hash);
            let _ = write!(sql, ", '{}'::uuid, ", token.0.hyphenated());
        }
        Completion::Gated(request) => {
            let scope = request.scope;
            sql.push_str("SELECT idemgen_insert_completed(");
            bytea(&mut sql, &hash);
            for part in [
                scope.owner.as_str(),
                scope.operation.as_str(),
                scope.resource_scope.as_str(),
                scope.key.as_str(),
                request.fingerprint.as_str(),
            ] {
                sql.push_str(", ");
                text(&mut sql, part);
            }
            let _ = write!(
                sql,
                ", {}::smallint, '{}'::uuid, ",
                request.fingerprint_version,
                request.token.0.hyphenated()
            );
        }
    }
    let _ = write!(sql, "{}::smallint, ", status(response));
    text(&mut sql, &headers);
    sql.push_str("::jsonb, ");
    bytea(&mut sql, &response.body);
    sql.push_str(", ");
    match resource_ref {
        Some(r) => text(&mut sql, r),
        None => sql.push_str("NULL::text"),
    }
    if let Completion::Gated(request) = completion {
        match request.retention {
            // `Display` of an `f64` never uses an exponent.
            Some(d) => {
                let _ = write!(sql, ", {}::float8", d.as_secs_f64());
            }
            None => sql.push_str(", NULL::float8"),
        }
    }
    sql.push_str("); COMMIT; BEGIN");
    Some(sql)
}

fn status(response: &StoredResponse) -> i16 {
    i16::try_from(response.status).unwrap_or(200)
}

fn bytea(sql: &mut String, bytes: &[u8]) {
    sql.push_str("decode('");
    for b in bytes {
        let _ = write!(sql, "{b:02x}");
    }
    sql.push_str("', 'hex')");
}

fn text(sql: &mut String, s: &str) {
    sql.push_str("convert_from(");
    bytea(sql, s.as_bytes());
    sql.push_str(", 'UTF8')");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use idemgen_protocol::Fingerprint;

    use super::*;
    use idemgen_protocol::IdempotencyKey;

    use crate::store::{ClaimRequest, ClaimToken, Scope};

    fn response(body: &[u8]) -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![("location".into(), "/w/1'; DROP TABLE x; --".into())],
            body: body.to_vec(),
        }
    }

    /// Everything a client or a handler chose is hex between quotes: the batch's text outside
    /// `decode('…')` is the runtime's own.
    #[test]
    fn client_and_handler_bytes_appear_only_as_hex() {
        let key = IdempotencyKey::new("k\\';COMMIT;--").unwrap();
        let scope = Scope::new("o'wner", "op", key).with_resource_scope("r'1");
        let fingerprint = Fingerprint::from_stored("hs1:ab".into());
        let request = ClaimRequest {
            scope: &scope,
            fingerprint: &fingerprint,
            fingerprint_version: 1,
            token: ClaimToken::generate(),
            holder: None,
            stale_after: Duration::from_secs(30),
            retention: Some(Duration::from_millis(1500)),
        };
        let body = b"{\"name\":\"'); COMMIT; --\"}";
        for completion in [
            Completion::Gated(&request),
            Completion::Claimed {
                scope: &scope,
                token: request.token,
            },
        ] {
            let sql = batch(&completion, &response(body), Some("/w/'1")).unwrap();
            let outside: String = sql
                .split("decode('")
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part.to_string()
                    } else {
                        let (hex, rest) = part.split_once('\'').unwrap();
                        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{hex}");
                        rest.to_string()
                    }
                })
                .collect();
            assert!(
                !outside.contains("DROP") && !outside.contains("--"),
                "{outside}"
            );
            assert_eq!(outside.matches("COMMIT").count(), 1, "{outside}");
            assert!(sql.ends_with("); COMMIT; BEGIN"), "{sql}");
            assert!(sql.contains(&format!("'{}'::uuid", request.token.0.hyphenated())));
        }
    }

    #[test]
    fn retention_is_a_plain_decimal_and_a_large_response_is_not_inlined() {
        let scope = Scope::new("o", "op", IdempotencyKey::new("k").unwrap());
        let fingerprint = Fingerprint::from_stored("hs1:ab".into());
        let mut request = ClaimRequest {
            scope: &scope,
            fingerprint: &fingerprint,
            fingerprint_version: 3,
            token: ClaimToken::generate(),
            holder: None,
            stale_after: Duration::from_secs(30),
            retention: Some(Duration::from_secs(90 * 86_400)),
        };
        let sql = batch(&Completion::Gated(&request), &response(b"{}"), None).unwrap();
        assert!(sql.contains(", 7776000::float8); COMMIT; BEGIN"), "{sql}");
        assert!(
            sql.contains(", 3::smallint, ") && sql.contains("201::smallint"),
            "{sql}"
        );
        assert!(sql.contains("NULL::text"), "{sql}");
        request.retention = None;
        let sql = batch(&Completion::Gated(&request), &response(b"{}"), None).unwrap();
        assert!(sql.contains(", NULL::float8); COMMIT; BEGIN"), "{sql}");
        let big = vec![b'x'; MAX_INLINE_RESPONSE];
        assert!(batch(&Completion::Gated(&request), &response(&big), None).is_none());
    }
}

//! What a generated router needs besides the executor: who the caller is ([`Authenticator`],
//! [`Principal`]), how a handler fails ([`HandlerError`]), and request bodies read under a limit
//! with problem answers for bad input.

use std::future::Future;

use axum::body::{Body, Bytes};
use http::HeaderMap;

use crate::problem::{Problem, ProblemKind};

/// The authenticated caller. `owner` scopes idempotency keys: two owners never share a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The stable identity of the caller (a user or client id), never a client-supplied value.
    pub owner: String,
    /// What the credentials used for this request allow, as the authenticator names it (for
    /// the generated `authorize_*` methods). Not part of the key's scope.
    pub roles: Vec<String>,
}

impl Principal {
    /// A principal with the given owner identity.
    pub fn new(owner: impl Into<String>) -> Principal {
        Principal {
            owner: owner.into(),
            roles: Vec::new(),
        }
    }

    /// The same principal with one more role.
    pub fn with_role(mut self, role: impl Into<String>) -> Principal {
        self.roles.push(role.into());
        self
    }

    /// Whether the principal has `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// Authenticates every request before anything else happens; `Err` is answered as is (401).
pub trait Authenticator: Send + Sync + 'static {
    /// Resolves the caller from the request headers.
    fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> impl Future<Output = Result<Principal, Problem>> + Send;
}

/// A handler failure: answered as a 500 problem whose body says nothing about the cause; the
/// cause is logged.
#[derive(Debug)]
pub struct HandlerError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl HandlerError {
    /// A failure described by a message (for the logs only).
    pub fn msg(message: impl Into<String>) -> HandlerError {
        HandlerError(message.into().into())
    }

    /// The problem a client receives for this failure: 503 when the database could not be
    /// reached (nothing was committed; retry with the same key), else 500. The cause goes to the
    /// log text only.
    pub fn to_problem(&self) -> Problem {
        let unreachable = self.0.downcast_ref::<sqlx::Error>().is_some_and(|e| {
            matches!(
                crate::store::postgres::classify_ref(e),
                crate::store::StoreError::Unavailable(_)
            )
        });
        let kind = if unreachable {
            ProblemKind::StoreUnavailable
        } else {
            ProblemKind::Internal
        };
        Problem::new(kind).with_internal(self.0.to_string())
    }
}

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(e: E) -> HandlerError {
        HandlerError(Box::new(e))
    }
}

/// A 400 `invalid_request` problem with client-facing detail.
pub fn bad_request(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemKind::InvalidRequest).with_detail(detail)
}

/// The default request body limit (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// Reads a request body of at most `limit` bytes: 413 `payload_too_large` beyond it, 400 when
/// the body cannot be read. Nothing else happens before the body is complete, so an oversized
/// request never takes a claim.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, Problem> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            if too_large {
                Err(Problem::new(ProblemKind::PayloadTooLarge)
                    .with_detail(format!("the request body exceeds {limit} bytes")))
            } else {
                Err(bad_request("the request body could not be read").with_internal(e.to_string()))
            }
        }
    }
}

/// Parses a JSON body into `T`: 400 with a client-facing description of what is wrong (serde's
/// message names the field and position, never server internals).
pub fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    serde_json::from_slice(bytes).map_err(|e| bad_request(format!("invalid JSON body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn body_over_the_limit_is_413() {
        let err = read_body(Body::from(vec![b'x'; 2048]), 1024)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ProblemKind::PayloadTooLarge);
        let ok = read_body(Body::from(vec![b'x'; 1024]), 1024).await.unwrap();
        assert_eq!(ok.len(), 1024);
    }

    #[test]
    fn handler_errors_are_opaque_500s() {
        let e =
            HandlerError::msg("duplicate key value violates unique constraint \"widgets_pkey\"");
        let p = e.to_problem();
        assert_eq!(p.kind().status(), 500);
        assert!(
            !String::from_utf8(p.body_json())
                .unwrap()
                .contains("widgets_pkey")
        );
        assert!(p.internal().unwrap().contains("widgets_pkey"));
    }

    #[test]
    fn lost_database_connections_are_503() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let e = HandlerError::from(sqlx::Error::Io(io));
        assert_eq!(e.to_problem().kind(), ProblemKind::StoreUnavailable);
        let e = HandlerError::from(sqlx::Error::RowNotFound);
        assert_eq!(e.to_problem().kind(), ProblemKind::Internal);
    }

    #[test]
    fn bad_json_is_400() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct W {
            name: String,
        }
        let e = json_body::<W>(b"{\"nam\": 1}").unwrap_err();
        assert_eq!(e.kind().status(), 400);
        assert!(e.detail().unwrap().contains("name"));
    }
}

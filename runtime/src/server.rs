//! Who the caller is ([`Authenticator`], [`Principal`]), and request bodies read under a limit
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

//! Who the caller is: the [`Authenticator`] a service supplies, and the [`Principal`] it returns,
//! whose owner scopes every idempotency key.

use std::future::Future;

use http::HeaderMap;

use crate::problem::Problem;

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

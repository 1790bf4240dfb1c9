//! Development authentication (the scaffold's): `Authorization: Bearer <owner>` names the
//! caller. Replace it with your own (tokens, JWT, mTLS): the owner scopes every idempotency key,
//! so it must be an identity the caller proved, never a value the caller chose.

use idemgen_runtime::{Authenticator, Credentials, Principal, Problem, ProblemKind};

/// `Authorization: Bearer <owner>` is the owner.
#[derive(Debug, Clone, Copy)]
pub struct BearerIsOwner;

impl Authenticator for BearerIsOwner {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .filter(|owner| !owner.is_empty())
            .map(Principal::new)
            .ok_or_else(|| {
                Problem::new(ProblemKind::Unauthenticated)
                    .with_detail("send Authorization: Bearer <owner>")
            })
    }
}

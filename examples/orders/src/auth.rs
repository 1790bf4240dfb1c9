//! Bearer tokens mapped to owners, for both services (development tokens by default).

use std::collections::HashMap;
use std::sync::Arc;

use idemgen_runtime::{Authenticator, Credentials, Principal, Problem, ProblemKind};

/// `Authorization: Bearer <token>` → the token's owner; anything else 401.
#[derive(Debug, Clone)]
pub struct Tokens {
    owners: Arc<HashMap<String, String>>,
}

impl Tokens {
    /// Tokens from `token=owner` pairs.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Tokens {
        let owners = pairs
            .into_iter()
            .map(|(token, owner)| (token.to_owned(), owner.to_owned()))
            .collect();
        Tokens {
            owners: Arc::new(owners),
        }
    }
}

impl Authenticator for Tokens {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        let token = request
            .presented()
            .find_map(|scheme| request.credential(scheme))
            .ok_or_else(|| {
                Problem::new(ProblemKind::Unauthenticated)
                    .with_detail("send Authorization: Bearer <token>")
            })?;
        let owner = self.owners.get(token.as_ref()).ok_or_else(|| {
            Problem::new(ProblemKind::Unauthenticated).with_detail("unknown token")
        })?;
        Ok(Principal::new(owner.clone()))
    }
}

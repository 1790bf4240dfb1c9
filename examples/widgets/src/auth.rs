//! Bearer-token authentication: `Authorization: Bearer <token>`, tokens mapped to owners by
//! `WIDGETS_TOKENS`. No or unknown token → 401 problem.

use std::collections::HashMap;

use http::HeaderMap;
use idemgen_runtime::{Authenticator, Principal, Problem, ProblemKind};

use crate::config::Account;

/// The role of principals authenticated with a read-only token.
pub const READ_ONLY: &str = "readonly";

/// Resolves bearer tokens to principals.
#[derive(Debug, Clone)]
pub struct TokenAuth {
    tokens: HashMap<String, Account>,
}

impl TokenAuth {
    /// An authenticator over a token table.
    pub fn new(tokens: HashMap<String, Account>) -> TokenAuth {
        TokenAuth { tokens }
    }
}

fn unauthenticated(detail: &str) -> Problem {
    Problem::new(ProblemKind::Unauthenticated).with_detail(detail)
}

impl Authenticator for TokenAuth {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Problem> {
        let value = headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| unauthenticated("send Authorization: Bearer <token>"))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(|| unauthenticated("the Authorization header must be Bearer <token>"))?;
        let account = self
            .tokens
            .get(token)
            .ok_or_else(|| unauthenticated("unknown token"))?;
        let principal = Principal::new(account.owner.clone());
        Ok(if account.read_only {
            principal.with_role(READ_ONLY)
        } else {
            principal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_tokens;

    #[tokio::test]
    async fn bearer_tokens() {
        let auth = TokenAuth::new(parse_tokens("t1=alice").unwrap());
        let mut h = HeaderMap::new();
        assert_eq!(
            auth.authenticate(&h).await.unwrap_err().kind(),
            ProblemKind::Unauthenticated
        );
        h.insert("authorization", "Bearer nope".parse().unwrap());
        assert_eq!(
            auth.authenticate(&h).await.unwrap_err().kind().status(),
            401
        );
        h.insert("authorization", "Bearer t1".parse().unwrap());
        let alice = auth.authenticate(&h).await.unwrap();
        assert_eq!(alice.owner, "alice");
        assert!(!alice.has_role(READ_ONLY));
    }
}

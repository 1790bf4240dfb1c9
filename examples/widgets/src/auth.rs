//! Bearer-token authentication: `Authorization: Bearer <token>`, tokens mapped to owners by
//! `WIDGETS_TOKENS`. No or unknown token → 401 problem.

use std::collections::HashMap;

use idemgen_runtime::{Authenticator, Credentials, Principal, Problem, ProblemKind};

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
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        // The spec's `bearer` scheme (`type: http, scheme: bearer`): the runtime reads what
        // follows `Bearer ` in `Authorization` for it.
        let token = request
            .presented()
            .find_map(|scheme| request.credential(scheme))
            .ok_or_else(|| unauthenticated("send Authorization: Bearer <token>"))?;
        let account = self
            .tokens
            .get(token.as_ref())
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
        use idemgen_runtime::codegen::Operation;
        let auth = TokenAuth::new(parse_tokens("t1=alice").unwrap());
        // The security the spec gives `createWidget`: bearer.
        let security = crate::api::CreateWidget::SECURITY;
        let mut h = http::HeaderMap::new();
        let answer = |h: &http::HeaderMap| {
            let h = h.clone();
            let auth = auth.clone();
            async move {
                auth.authenticate(&Credentials::new(&h, None, &security))
                    .await
            }
        };
        assert_eq!(
            answer(&h).await.unwrap_err().kind(),
            ProblemKind::Unauthenticated
        );
        h.insert("authorization", "Basic dDE6".parse().unwrap());
        assert_eq!(
            answer(&h).await.unwrap_err().kind(),
            ProblemKind::Unauthenticated,
            "not the spec's scheme"
        );
        h.insert("authorization", "Bearer nope".parse().unwrap());
        assert_eq!(answer(&h).await.unwrap_err().kind().status(), 401);
        h.insert("authorization", "Bearer t1".parse().unwrap());
        let alice = answer(&h).await.unwrap();
        assert_eq!(alice.owner, "alice");
        assert!(!alice.has_role(READ_ONLY));
    }
}

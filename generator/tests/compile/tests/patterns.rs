//! `pattern` in the generated patterns router, served in process over the in-memory store: every
//! place a request carries a string (path, query, header, body properties, nested objects, array
//! items, map values, an alias, a union alternative, an optional nullable value) answers a
//! mismatch with a 400 problem naming the value's path, before authorization and before the key
//! is claimed. ECMA-262 semantics: unanchored, lookaheads, `\p{…}` with the `u` flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use http::{Request, StatusCode};
use idemgen_compile_tests::patterns::{self, types, *};
use idemgen_runtime::codegen::{FieldPath, Operation, Validate};
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerResult, MemoryStore, Principal,
    Problem, ProblemKind, Server, TxHandle,
};
use serde_json::{Value, json};
use tower::ServiceExt;

#[derive(Default)]
struct Cards {
    added: AtomicUsize,
}

impl PatternsApi for Cards {
    type Store = MemoryStore;

    async fn authorize_add_card(
        &self,
        principal: &Principal,
        _: &AddCardRequest,
    ) -> Result<(), Problem> {
        if principal.owner == "mallory" {
            Err(Problem::new(ProblemKind::Forbidden))
        } else {
            Ok(())
        }
    }

    async fn add_card(
        &self,
        _: &Principal,
        _: &mut TxHandle<MemoryStore>,
        request: AddCardRequest,
    ) -> HandlerResult<AddCard> {
        let n = self.added.fetch_add(1, Ordering::SeqCst);
        Ok(AddCardResponse::Status201(types::Card {
            id: format!("card_{n}"),
            last4: request.body.last4,
        }))
    }
}

/// `Authorization: <owner>`; anything else is 401.
struct HeaderAuth;

impl Authenticator for HeaderAuth {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(Principal::new)
            .ok_or_else(|| Problem::new(ProblemKind::Unauthenticated))
    }
}

fn app() -> (Arc<Cards>, MemoryStore, axum::Router) {
    let cards = Arc::new(Cards::default());
    let store = MemoryStore::new();
    let server = Server::new(
        Arc::clone(&cards),
        HeaderAuth,
        Executor::new(store.clone(), ExecutorConfig::default()),
    );
    (cards, store, patterns::router(server))
}

/// A request to change: the valid one, then whatever the case sets.
#[derive(Clone)]
struct Attempt {
    owner: &'static str,
    key: &'static str,
    uri: String,
    client: String,
    body: Value,
}

impl Attempt {
    fn valid() -> Attempt {
        Attempt {
            owner: "alice",
            key: "k1",
            uri: "/accounts/acct_42/cards?region=DE".into(),
            client: "shop/1.2".into(),
            body: json!({
                "last4": "1234",
                "holder": { "name": "ADA lovelace" },
                "items": ["ABC-1", "XYZ-22"],
                "tags": { "k": "#00ff7f" },
                "password": "hunter2!x",
                "nickname": "Élodie",
                "contact": "ada@example.com",
                "note": "plain text",
            }),
        }
    }

    fn body(mut self, pointer: &str, value: Value) -> Attempt {
        *self
            .body
            .pointer_mut(pointer)
            .expect("the case names a field") = value;
        self
    }

    async fn send(&self, app: &axum::Router) -> (StatusCode, Value) {
        let request = Request::builder()
            .method("POST")
            .uri(&self.uri)
            .header("authorization", self.owner)
            .header("idempotency-key", self.key)
            .header("x-client", &self.client)
            .header("content-type", "application/json")
            .body(Body::from(self.body.to_string()))
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

#[tokio::test]
async fn a_request_that_matches_every_pattern_is_served() {
    let (cards, _, app) = app();
    let (status, json) = Attempt::valid().send(&app).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    assert_eq!(json["last4"], "1234");
    // Optional values may be absent, and the nullable one null.
    let sparse = Attempt {
        key: "k2",
        uri: "/accounts/acct_42/cards".into(),
        body: json!({ "last4": "0000", "holder": { "name": "x" }, "note": null }),
        ..Attempt::valid()
    };
    let (status, json) = sparse.send(&app).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    // An untyped alternative of the union is not a string: the pattern does not apply.
    let number = Attempt {
        key: "k3",
        ..Attempt::valid()
    }
    .body("/contact", json!(5551234));
    assert_eq!(number.send(&app).await.0, StatusCode::CREATED);
    assert_eq!(cards.added.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn each_mismatch_is_a_400_naming_its_path_before_authorization_and_any_claim() {
    let (cards, store, app) = app();
    let valid = Attempt::valid;
    let cases = [
        (
            valid().body("/last4", json!("abcd")),
            "body.last4: must match the pattern ^[0-9]{4}$",
        ),
        // Anchored: a fifth digit, or a trailing newline (ECMA `$` is the end of input), fails.
        (
            valid().body("/last4", json!("12345")),
            "body.last4: must match the pattern ^[0-9]{4}$",
        ),
        (
            valid().body("/last4", json!("1234\n")),
            "body.last4: must match the pattern ^[0-9]{4}$",
        ),
        (
            valid().body("/holder/name", json!("ADA 1815")),
            "body.holder.name: must match the pattern [a-z]",
        ),
        (
            valid().body("/items", json!(["ABC-1", "abc-1"])),
            "body.items[1]: must match the pattern ^[A-Z]{3}-[0-9]+$",
        ),
        (
            valid().body("/tags", json!({ "a": "#000000", "k": "red" })),
            "body.tags.k: must match the pattern ^#[0-9a-f]{6}$",
        ),
        (
            valid().body("/password", json!("no-digits")),
            "body.password: must match the pattern ^(?=.*[0-9]).{8,}$",
        ),
        (
            valid().body("/password", json!("abc1")),
            "body.password: must match the pattern ^(?=.*[0-9]).{8,}$",
        ),
        // Through the `Nickname` alias: `\p{Lu}`, an uppercase letter in any script.
        (
            valid().body("/nickname", json!("élodie")),
            "body.nickname: must match the pattern ^\\p{Lu}",
        ),
        (
            valid().body("/contact", json!("ada at example.com")),
            "body.contact: must match the pattern @",
        ),
        (
            valid().body("/note", json!("<script>")),
            "body.note: must match the pattern ^[^<>]*$",
        ),
        (
            Attempt {
                uri: "/accounts/ACCT_42/cards".into(),
                ..valid()
            },
            "path.account: must match the pattern ^acct_[a-z0-9]+$",
        ),
        (
            Attempt {
                uri: "/accounts/acct_42/cards?region=de".into(),
                ..valid()
            },
            "query.region: must match the pattern ^[A-Z]{2}$",
        ),
        (
            Attempt {
                client: "Shop 1.2".into(),
                ..valid()
            },
            "header.X-Client: must match the pattern ^[a-z]+/[0-9.]+$",
        ),
    ];
    for (attempt, detail) in cases {
        // `mallory` is never authorized: a 400 for her shows validation runs before
        // authorization.
        for owner in ["alice", "mallory"] {
            let attempt = Attempt {
                owner,
                ..attempt.clone()
            };
            let (status, json) = attempt.send(&app).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{detail}: {json}");
            assert_eq!(json["code"], "invalid_request", "{detail}");
            assert_eq!(json["detail"], detail);
        }
    }
    assert_eq!(cards.added.load(Ordering::SeqCst), 0, "handler not called");
    assert!(store.is_empty(), "no claim taken");
}

#[tokio::test]
async fn a_retry_after_a_400_with_the_same_key_executes() {
    let (cards, store, app) = app();
    let bad = Attempt::valid().body("/last4", json!("abcd"));
    assert_eq!(bad.send(&app).await.0, StatusCode::BAD_REQUEST);
    // Had the 400 claimed `k1` with the bad body's fingerprint, this would be 422 (key reused).
    let (status, json) = Attempt::valid().send(&app).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    assert_eq!(store.len(), 1);
    assert_eq!(cards.added.load(Ordering::SeqCst), 1);
}

/// The generated `validate`, called directly: unanchored patterns match anywhere, and a
/// pattern's `static` serves every call.
#[test]
fn unanchored_patterns_match_anywhere() {
    let holder = |name: &str| types::NewCardHolder { name: name.into() };
    let root = FieldPath::Root("body");
    for name in ["a", "ABCa", "aBC", "ÉCOLE normale", "x y z"] {
        assert_eq!(holder(name).validate(&root), Ok(()), "{name}");
    }
    for name in ["", "ABC", "123", "ÉCOLE"] {
        assert_eq!(
            holder(name).validate(&root),
            Err("body.name: must match the pattern [a-z]".into()),
            "{name:?}"
        );
    }
    // The operation's own `validate` sees parameters: an unmatched header alone fails it.
    let request = AddCardRequest {
        account: "acct_1".into(),
        region: None,
        x_client: "cli/".into(),
        body: serde_json::from_value(Attempt::valid().body).unwrap(),
    };
    assert_eq!(
        AddCard::validate(&request),
        Err("header.X-Client: must match the pattern ^[a-z]+/[0-9.]+$".into())
    );
}

//! `security` as the spec writes it, enforced by the generated vault router served in process
//! over the in-memory store: every scheme kind (http bearer, apiKey in a header, query and
//! cookie, OAuth 2 scopes), alternatives, the document's default, `security: []` served without
//! the authenticator, and optional credentials (`- {}`). A missing scope is 403 before any claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use http::{Request, StatusCode};
use idemgen_compile_tests::security::{self, types, *};
use idemgen_runtime::codegen::Operation;
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerResult, MemoryStore, Principal,
    Problem, ProblemKind, SchemeKind, Server, TxHandle,
};
use serde_json::Value;
use tower::ServiceExt;

#[derive(Default)]
struct Vault {
    created: AtomicUsize,
}

impl VaultApi for Vault {
    type Store = MemoryStore;

    async fn authorize_create_payment(
        &self,
        _: &Principal,
        _: &CreatePaymentRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn create_payment(
        &self,
        principal: &Principal,
        _: &mut TxHandle<MemoryStore>,
        request: CreatePaymentRequest,
    ) -> HandlerResult<CreatePayment> {
        let n = self.created.fetch_add(1, Ordering::SeqCst);
        Ok(CreatePaymentResponse::Status201(types::Payment {
            id: format!("pay_{n}"),
            amount: request.body.amount,
            owner: Some(principal.owner.clone()),
        }))
    }

    async fn get_payment(
        &self,
        principal: &Principal,
        request: GetPaymentRequest,
    ) -> HandlerResult<GetPayment> {
        // Anonymous callers see the payment without its owner.
        Ok(GetPaymentResponse::Status200(types::Payment {
            id: request.id,
            amount: 100,
            owner: (!principal.is_anonymous()).then(|| principal.owner.clone()),
        }))
    }

    async fn authorize_delete_payment(
        &self,
        _: &Principal,
        _: &DeletePaymentRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn delete_payment(
        &self,
        _: &Principal,
        _: DeletePaymentRequest,
    ) -> HandlerResult<DeletePayment> {
        Ok(DeletePaymentResponse::Status204)
    }

    async fn health(&self, principal: &Principal, _: HealthRequest) -> HandlerResult<Health> {
        assert!(principal.is_anonymous());
        Ok(HealthResponse::Status200)
    }

    async fn authorize_settlement_webhook(
        &self,
        principal: &Principal,
        _: &SettlementWebhookRequest,
    ) -> Result<(), Problem> {
        assert_eq!(principal.owner, "acquirer");
        Ok(())
    }

    async fn settlement_webhook(
        &self,
        _: &Principal,
        _: SettlementWebhookRequest,
    ) -> HandlerResult<SettlementWebhook> {
        Ok(SettlementWebhookResponse::Status204)
    }

    async fn who_am_i(&self, principal: &Principal, _: WhoAmIRequest) -> HandlerResult<WhoAmI> {
        Ok(WhoAmIResponse::Status200(types::WhoAmI200Response {
            owner: principal.owner.clone(),
        }))
    }
}

/// Resolves each scheme's credential from a fixed table, counting its calls.
#[derive(Default, Clone)]
struct Table {
    calls: Arc<AtomicUsize>,
}

impl Authenticator for Table {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        for scheme in request.presented() {
            let Some(credential) = request.credential(scheme) else {
                continue;
            };
            let principal = match (scheme.kind, credential.as_ref()) {
                // An OAuth token with its scopes; a bearer token without any.
                (SchemeKind::OAuth2, "tok-writer") => {
                    Principal::new("alice").with_scopes(["payments:write"])
                }
                (SchemeKind::OAuth2 | SchemeKind::Http { .. }, "tok-reader") => {
                    Principal::new("bob")
                }
                (SchemeKind::ApiKey { .. }, "key-1") if scheme.name == "apiKey" => {
                    Principal::new("service")
                }
                (SchemeKind::ApiKey { .. }, "hook-1") => Principal::new("acquirer"),
                (SchemeKind::ApiKey { .. }, "sess-1") => Principal::new("carol"),
                _ => continue,
            };
            return Ok(principal);
        }
        Err(Problem::new(ProblemKind::Unauthenticated).with_detail("unknown credentials"))
    }
}

fn app() -> (Arc<Vault>, Table, MemoryStore, axum::Router) {
    let vault = Arc::new(Vault::default());
    let auth = Table::default();
    let store = MemoryStore::new();
    let server = Server::new(
        Arc::clone(&vault),
        auth.clone(),
        Executor::new(store.clone(), ExecutorConfig::default()),
    );
    (vault, auth, store, security::router(server))
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if !body.is_empty() {
        request = request.header("content-type", "application/json");
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn scopes_and_alternatives_are_enforced_before_any_claim() {
    let (vault, _, store, app) = app();
    let create = |auth: &'static [(&'static str, &'static str)], key: &'static str| {
        let app = app.clone();
        async move {
            let mut headers = auth.to_vec();
            headers.push(("idempotency-key", key));
            send(&app, "POST", "/payments", &headers, r#"{"amount":5}"#).await
        }
    };
    // OAuth with the scope: created.
    let (status, body) = create(&[("authorization", "Bearer tok-writer")], "k1").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["owner"], "alice");
    // OAuth without it: 403 naming the scope; nothing claimed, nothing executed.
    let (status, body) = create(&[("authorization", "Bearer tok-reader")], "k2").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("`payments:write`"),
        "{body}"
    );
    // The other alternative, the API key, needs no scope.
    let (status, body) = create(&[("x-api-key", "key-1")], "k3").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["owner"], "service");
    // No credentials at all: 401 from the authenticator, before any claim.
    let (status, _) = create(&[], "k4").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(vault.created.load(Ordering::SeqCst), 2);
    assert_eq!(
        store.len(),
        2,
        "only the two admitted attempts hold records"
    );
    // The generated description carries the spec's requirements, and its retention.
    assert_eq!(
        <CreatePayment as idemgen_runtime::codegen::Idempotent>::RETENTION,
        Some(std::time::Duration::from_secs(30 * 86_400))
    );
    let security = <CreatePayment as Operation>::SECURITY;
    assert!(security.is_declared() && !security.admits_anonymous());
    let names: Vec<&str> = security.schemes().map(|s| s.name).collect();
    assert_eq!(names, ["oauth", "apiKey"]);
}

#[tokio::test]
async fn public_operations_are_served_without_the_authenticator() {
    let (_, auth, _, app) = app();
    let (status, _) = send(&app, "GET", "/health", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(auth.calls.load(Ordering::SeqCst), 0, "security: []");
    // Optional credentials: without any, anonymous; with a bearer token, its owner.
    let (status, body) = send(&app, "GET", "/payments/p1", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.get("owner").is_none(), "{body}");
    assert_eq!(auth.calls.load(Ordering::SeqCst), 0);
    let (status, body) = send(
        &app,
        "GET",
        "/payments/p1",
        &[("authorization", "Bearer tok-reader")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["owner"], "bob");
    // Credentials that are presented must be valid: no silent fall-back to anonymous.
    let (status, _) = send(
        &app,
        "GET",
        "/payments/p1",
        &[("authorization", "Bearer forged")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn each_scheme_kind_reads_its_own_place() {
    let (_, _, _, app) = app();
    // The document's default (bearer) applies to an operation that says nothing.
    let (status, _) = send(
        &app,
        "DELETE",
        "/payments/p1",
        &[("authorization", "Bearer tok-reader")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = send(
        &app,
        "DELETE",
        "/payments/p1",
        &[("x-api-key", "key-1")],
        "",
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the API key is not bearer"
    );
    assert_eq!(body["detail"], "unknown credentials");
    // An apiKey in the query string.
    let (status, _) = send(
        &app,
        "POST",
        "/webhooks/settlements?token=hook-1",
        &[],
        "{}",
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = send(&app, "POST", "/webhooks/settlements", &[], "{}").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // An apiKey in a cookie.
    let (status, body) = send(
        &app,
        "GET",
        "/me",
        &[("cookie", "theme=dark; sid=sess-1")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["owner"], "carol");
    // A bearer token where the operation wants the session cookie: it is not among the
    // operation's credentials, so the authenticator (which knows the token) never sees it.
    let (status, body) = send(
        &app,
        "GET",
        "/me",
        &[("authorization", "Bearer tok-reader")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

/// The generated client has one `with_<scheme>` per scheme the operations require, and sends
/// each credential where the spec puts it: the server built from the same spec accepts them.
#[tokio::test]
async fn the_generated_client_sends_each_credential_where_its_scheme_says() {
    use idemgen_compile_tests::security_client::{self as client, VaultClient};
    let (_, _, _, app) = app();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");
    let body = client::types::CreatePaymentRequestBody { amount: 5 };
    let options = idemgen_client::CallOptions::default();
    // OAuth, as a bearer token.
    let oauth = VaultClient::new(&base).with_oauth("tok-writer").unwrap();
    let created = oauth.create_payment(&body, &options).await.unwrap();
    let client::CreatePaymentResponse::Status201(payment) = created.value;
    assert_eq!(payment.owner.as_deref(), Some("alice"));
    // The API key, in its header.
    let keyed = VaultClient::new(&base).with_api_key("key-1").unwrap();
    let created = keyed.create_payment(&body, &options).await.unwrap();
    let client::CreatePaymentResponse::Status201(payment) = created.value;
    assert_eq!(payment.owner.as_deref(), Some("service"));
    // An API key in the query string, and one in a cookie.
    let hooked = VaultClient::new(&base).with_hook_token("hook-1").unwrap();
    hooked
        .settlement_webhook(&Default::default(), &options)
        .await
        .expect("the query key is accepted");
    let session = VaultClient::new(&base).with_session("sess-1").unwrap();
    let me = session.who_am_i(&options).await.unwrap();
    let client::WhoAmIResponse::Status200(me) = me.value;
    assert_eq!(me.owner, "carol");
    // Without credentials, the server's 401 arrives as a problem.
    let anonymous = VaultClient::new(&base);
    assert!(anonymous.who_am_i(&options).await.is_err());
    // A credential that cannot be a header value is refused before anything is sent.
    assert!(VaultClient::new(&base).with_api_key("bad\nkey").is_err());
    server.abort();
}

//! Form bodies (`application/x-www-form-urlencoded`) typed end to end: the generated server
//! decodes and validates the fields, fingerprints them as decoded (the same fields in another
//! order replay), refuses other media types (415) and bad fields (400) before any claim, and the
//! generated client sends a form the server reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use axum::body::Body;
use http::{Request, StatusCode};
use idemgen_compile_tests::forms::{self, types, *};
use idemgen_compile_tests::forms_client;
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerResult, MemoryStore, Principal,
    Problem, ProblemKind, Server, TxHandle,
};
use tower::ServiceExt;

#[derive(Default)]
struct Service {
    next_id: AtomicI64,
}

impl PaymentsApi for Service {
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
        _: &Principal,
        _tx: &mut TxHandle<MemoryStore>,
        request: CreatePaymentRequest,
    ) -> HandlerResult<CreatePayment> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(CreatePaymentResponse::Status201(types::Payment {
            id,
            amount: request.body.amount,
            currency: request.body.currency,
        }))
    }
}

struct Anyone;

impl Authenticator for Anyone {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(Principal::new)
            .ok_or_else(|| Problem::new(ProblemKind::Unauthenticated))
    }
}

fn app() -> (Arc<Service>, axum::Router) {
    let service = Arc::new(Service::default());
    let server = Server::new(
        Arc::clone(&service),
        Anyone,
        Executor::new(MemoryStore::new(), ExecutorConfig::default()),
    );
    (service, forms::router(server))
}

async fn post(
    app: &axum::Router,
    key: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, String) {
    let request = Request::post("/payments")
        .header("authorization", "alice")
        .header("idempotency-key", key)
        .header("content-type", content_type)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

const FORM: &str = "application/x-www-form-urlencoded";

#[tokio::test]
async fn the_same_fields_in_another_order_are_the_same_request() {
    let (service, app) = app();
    let (status, first) = post(&app, "k1", FORM, "amount=100&currency=EUR&capture=true").await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = post(&app, "k1", FORM, "capture=true&currency=EUR&amount=100").await;
    assert_eq!(status, StatusCode::CREATED, "a replay, not 422: {again}");
    assert_eq!(again, first, "the stored bytes");
    assert_eq!(service.next_id.load(Ordering::SeqCst), 1, "one execution");
    // Another value is another request.
    let (status, changed) = post(&app, "k1", FORM, "amount=101&currency=EUR&capture=true").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{changed}");
}

#[tokio::test]
async fn bad_fields_and_other_media_types_are_refused_before_any_claim() {
    let (service, app) = app();
    for (content_type, body, status, needle) in [
        (
            FORM,
            "amount=0&currency=EUR",
            400,
            "body.amount: must be at least 1",
        ),
        (
            FORM,
            "amount=ten&currency=EUR",
            400,
            "body.amount: invalid digit found in string",
        ),
        (
            FORM,
            "amount=5&currency=EURO",
            400,
            "body.currency: must have at most 3",
        ),
        (
            FORM,
            "amount=5&currency=EUR&extra=1",
            400,
            "body.extra: unknown field `extra`",
        ),
        (FORM, "amount=5&currency=E%00R", 400, "NUL"),
        // A number a form can spell but no fingerprint can hold: 400, not a 500.
        (FORM, "amount=5&currency=EUR&tip=NaN", 400, "not finite"),
        (FORM, "amount=5&currency=EUR&tip=inf", 400, "not finite"),
        (FORM, "amount=5", 400, "currency"),
        (
            "application/json",
            r#"{"amount":5,"currency":"EUR"}"#,
            415,
            "form",
        ),
    ] {
        let (got, text) = post(&app, "k2", content_type, body).await;
        assert_eq!(got.as_u16(), status, "{body}: {text}");
        assert!(text.contains(needle), "{body}: {text}");
    }
    assert_eq!(
        service.next_id.load(Ordering::SeqCst),
        0,
        "nothing executed"
    );
    // The key was never claimed: a valid form with it executes.
    let (status, text) = post(&app, "k2", FORM, "amount=5&currency=EUR").await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
}

#[tokio::test]
async fn the_generated_client_sends_a_form_the_generated_server_reads() {
    let (service, app) = app();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = forms_client::PaymentsClient::from_client(
        idemgen_client::Client::new(format!("http://{addr}")).with_header(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("alice"),
        ),
    );
    let body = forms_client::types::CreatePaymentRequestBody {
        amount: 250,
        currency: "USD".into(),
        capture: Some(false),
        description: None,
        tip: Some(1.5),
    };
    let options = forms_client::CallOptions::with_key("client-key-1");
    let first = client.create_payment(&body, &options).await.unwrap();
    let forms_client::CreatePaymentResponse::Status201(payment) = &first.value;
    assert_eq!((payment.amount, payment.currency.as_str()), (250, "USD"));
    assert!(!first.replayed);
    let again = client.create_payment(&body, &options).await.unwrap();
    assert!(again.replayed, "the same key and form replay");
    assert_eq!(service.next_id.load(Ordering::SeqCst), 1);
    server.abort();
}

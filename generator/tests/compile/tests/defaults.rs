//! What the spec says about values, in the generated defaults router and client: `default`
//! applied to absent query and header parameters and body properties (the handler sees the
//! value; a request omitting a defaulted value and one sending the default are one request, with
//! one fingerprint, so a retry of either is a replay), `const` validated as a 400 naming the
//! value's path, and a discriminated `oneOf` as an internally tagged enum: the tag written by the
//! variant, an unknown one refused naming it, `additionalProperties: false` of an alternative
//! still enforced with the tag beside it.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{HeaderMap, Request, StatusCode};
use idemgen_compile_tests::defaults::{self, types, *};
use idemgen_compile_tests::defaults_client;
use idemgen_protocol::Fingerprint;
use idemgen_runtime::codegen::{FieldPath, Idempotent, Operation, Validate};
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerResult, MemoryStore, Principal,
    Problem, ProblemKind, Server, TxHandle,
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Remembers what the handlers were given.
#[derive(Default)]
struct Payments {
    listed: Mutex<Vec<ListPaymentsRequest>>,
    created: Mutex<Vec<CreatePaymentRequest>>,
}

impl PaymentsApi for Payments {
    type Store = MemoryStore;

    async fn list_payments(
        &self,
        _: &Principal,
        request: ListPaymentsRequest,
    ) -> HandlerResult<ListPayments> {
        self.listed.lock().unwrap().push(request);
        Ok(ListPaymentsResponse::Status200(types::PaymentList {
            items: Vec::new(),
        }))
    }

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
        _: &mut TxHandle<MemoryStore>,
        request: CreatePaymentRequest,
    ) -> HandlerResult<CreatePayment> {
        let mut created = self.created.lock().unwrap();
        let payment = types::Payment {
            id: format!("pay_{}", created.len()),
            amount: request.body.amount,
            currency: request.body.currency.clone(),
            status: types::Payment::default_status(),
            method: request.body.method.clone(),
        };
        created.push(request);
        Ok(CreatePaymentResponse::Status201(payment))
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

fn app() -> (Arc<Payments>, axum::Router) {
    let payments = Arc::new(Payments::default());
    let server = Server::new(
        Arc::clone(&payments),
        HeaderAuth,
        Executor::new(MemoryStore::new(), ExecutorConfig::default()),
    );
    (payments, defaults::router(server))
}

async fn send(app: &axum::Router, request: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri)
        .header("authorization", "alice")
        .body(Body::empty())
        .unwrap()
}

fn post(uri: &str, key: &str, body: &Value) -> Request<Body> {
    Request::post(uri)
        .header("authorization", "alice")
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A payment with only what is required.
fn sparse() -> Value {
    json!({
        "amount": 500,
        "kind": "payment",
        "method": { "type": "card", "last4": "4242" },
    })
}

/// The same payment with every default written out.
fn explicit() -> Value {
    json!({
        "amount": 500,
        "kind": "payment",
        "currency": "EUR",
        "capture": true,
        "tags": [],
        "note": null,
        "method": { "type": "card", "last4": "4242", "network": "visa" },
    })
}

#[tokio::test]
async fn absent_parameters_take_their_default_and_the_handler_sees_the_value() {
    let (payments, app) = app();
    let (status, _, json) = send(&app, get("/payments")).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let (status, _, _) = send(
        &app,
        Request::get("/payments?limit=5&order=asc&page=2")
            .header("authorization", "alice")
            .header("x-trace", "on")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let listed = payments.listed.lock().unwrap();
    // Absent: the defaults (an integer, a `$ref`'d enum's, a header's); `page`'s default is not
    // an integer, so it is not applied and the parameter stays optional.
    assert_eq!(
        listed[0],
        ListPaymentsRequest {
            limit: 20,
            order: types::Order::Desc,
            x_trace: "off".into(),
            page: None,
        }
    );
    assert_eq!(
        listed[1],
        ListPaymentsRequest {
            limit: 5,
            order: types::Order::Asc,
            x_trace: "on".into(),
            page: Some(2),
        }
    );
}

#[tokio::test]
async fn a_defaulted_parameter_is_still_validated_when_sent() {
    let (payments, app) = app();
    let (status, _, json) = send(&app, get("/payments?limit=0")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json["detail"], "query.limit: must be at least 1");
    let (status, _, json) = send(&app, get("/payments?order=sideways")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json["detail"],
        "query parameter `order` has an invalid value"
    );
    assert!(payments.listed.lock().unwrap().is_empty());
}

#[test]
fn absent_body_properties_decode_as_their_default() {
    let sparse: types::NewPayment = serde_json::from_value(sparse()).unwrap();
    let explicit: types::NewPayment = serde_json::from_value(explicit()).unwrap();
    assert_eq!(sparse, explicit);
    assert_eq!(sparse.currency, "EUR");
    assert!(sparse.capture);
    assert_eq!(sparse.tags, Vec::<String>::new());
    // Nullable with `default: null`: absent and null are both `None`; a value is kept.
    assert_eq!(sparse.note, None);
    let mut noted = self::sparse();
    noted["note"] = json!("hi");
    let noted: types::NewPayment = serde_json::from_value(noted).unwrap();
    assert_eq!(noted.note.as_deref(), Some("hi"));
    // A sent value that differs from the default is kept.
    let mut dollars = self::sparse();
    dollars["currency"] = json!("USD");
    dollars["capture"] = json!(false);
    let dollars: types::NewPayment = serde_json::from_value(dollars).unwrap();
    assert_eq!((dollars.currency.as_str(), dollars.capture), ("USD", false));
    // An alternative's default applies inside the union too.
    let types::PaymentMethod::Card(card) = &sparse.method else {
        panic!("a card: {:?}", sparse.method)
    };
    assert_eq!(card.network, "visa");
    assert_eq!(types::Card::default_network(), "visa");
}

#[test]
fn omitting_a_default_and_sending_it_fingerprint_alike() {
    let request = |body: Value, query: Option<bool>| CreatePaymentRequest {
        dry_run: query.unwrap_or(false),
        body: serde_json::from_value(body).unwrap(),
    };
    let fingerprint = |request: &CreatePaymentRequest| {
        Fingerprint::hs1(
            CreatePayment::ID,
            CreatePayment::FINGERPRINT_VERSION,
            &CreatePayment::semantic_input(request),
        )
        .unwrap()
    };
    let omitted = request(sparse(), None);
    let sent = request(explicit(), Some(false));
    assert_eq!(fingerprint(&omitted), fingerprint(&sent));
    // The semantic input carries the defaults, tag included, whatever the request omitted.
    assert_eq!(
        serde_json::to_value(CreatePayment::semantic_input(&omitted)).unwrap(),
        json!({
            "query": { "dry_run": false },
            "body": {
                "amount": 500, "kind": "payment", "currency": "EUR", "capture": true,
                "tags": [], "note": null,
                "method": { "type": "card", "last4": "4242", "network": "visa" },
            },
        })
    );
    // A value other than the default is another request.
    let mut other = sparse();
    other["currency"] = json!("USD");
    assert_ne!(fingerprint(&request(other, None)), fingerprint(&omitted));
    assert_ne!(
        fingerprint(&request(sparse(), Some(true))),
        fingerprint(&omitted)
    );
}

#[tokio::test]
async fn a_retry_sending_the_defaults_replays_the_attempt_that_omitted_them() {
    let (payments, app) = app();
    let (status, headers, first) = send(&app, post("/payments", "k1", &sparse())).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(headers.get("idempotent-replayed").is_none());
    // Same key, the defaults written out (and `dry_run=false` sent): the same request.
    let (status, headers, replay) =
        send(&app, post("/payments?dry_run=false", "k1", &explicit())).await;
    assert_eq!(status, StatusCode::CREATED, "{replay}");
    assert_eq!(
        headers
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    assert_eq!(first, replay);
    // A different value under the same key is a reused key.
    let mut other = sparse();
    other["capture"] = json!(false);
    let (status, _, _) = send(&app, post("/payments", "k1", &other)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let created = payments.created.lock().unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].body.currency, "EUR");
    assert!(!created[0].dry_run);
    // The response carries the tag, written by the variant.
    assert_eq!(first["method"]["type"], "card");
    assert_eq!(first["status"], "pending");
}

#[test]
fn const_is_enforced_naming_the_path() {
    let body = FieldPath::Root("body");
    let with = |pointer: &str, value: Value| {
        let mut v = sparse();
        *v.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = value;
        serde_json::from_value::<types::NewPayment>(v).unwrap()
    };
    assert_eq!(
        with("/kind", json!("refund")).validate(&body).unwrap_err(),
        "body.kind: must be \"payment\""
    );
    let mut versioned = sparse();
    versioned["version"] = json!(3);
    let versioned: types::NewPayment = serde_json::from_value(versioned).unwrap();
    assert_eq!(
        versioned.validate(&body).unwrap_err(),
        "body.version: must be 2"
    );
    // An enum of one value is a const; absent optional values are not checked.
    let mut dead = sparse();
    dead["live"] = json!(false);
    let dead: types::NewPayment = serde_json::from_value(dead).unwrap();
    assert_eq!(dead.validate(&body).unwrap_err(), "body.live: must be true");
    let mut fine = sparse();
    fine["version"] = json!(2);
    fine["live"] = json!(true);
    let fine: types::NewPayment = serde_json::from_value(fine).unwrap();
    assert_eq!(fine.validate(&body), Ok(()));
    assert_eq!(with("/kind", json!("payment")).validate(&body), Ok(()));
}

#[tokio::test]
async fn a_const_violation_is_a_400_before_the_handler() {
    let (payments, app) = app();
    let mut body = sparse();
    body["kind"] = json!("refund");
    let (status, _, json) = send(&app, post("/payments", "k1", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json["detail"], "body.kind: must be \"payment\"");
    assert!(payments.created.lock().unwrap().is_empty());
}

#[test]
fn the_tag_is_the_variant_written_on_serialisation_and_checked_on_deserialisation() {
    // The alternatives carry no tag field: the variant is the tag.
    let card = types::PaymentMethod::Card(types::Card {
        last4: "4242".into(),
        network: "visa".into(),
    });
    assert_eq!(
        serde_json::to_value(&card).unwrap(),
        json!({ "type": "card", "last4": "4242", "network": "visa" })
    );
    let bank = types::PaymentMethod::BankTransfer(types::BankTransfer {
        iban: "DE89370400440532013000".into(),
        instant: false,
        additional_properties: Default::default(),
    });
    let bank_json = serde_json::to_value(&bank).unwrap();
    assert_eq!(bank_json["type"], "bank_transfer");
    assert_eq!(
        serde_json::from_value::<types::PaymentMethod>(bank_json).unwrap(),
        bank
    );
    // An unknown tag is refused naming it; a missing one naming the property.
    let unknown = serde_json::from_value::<types::PaymentMethod>(json!({ "type": "cash" }))
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("cash"), "{unknown}");
    assert!(
        unknown.contains("card") && unknown.contains("bank_transfer"),
        "{unknown}"
    );
    let missing = serde_json::from_value::<types::PaymentMethod>(json!({ "last4": "4242" }))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("type"), "{missing}");
    // A tag that selects the other alternative decodes as that one (and fails its fields).
    assert!(
        serde_json::from_value::<types::PaymentMethod>(
            json!({ "type": "bank_transfer", "last4": "4242" })
        )
        .is_err()
    );
}

#[test]
fn additional_properties_false_of_an_alternative_holds_beside_the_tag() {
    // `Card` denies unknown fields: the tag is not one of them, anything else is.
    let ok = json!({ "type": "card", "last4": "4242" });
    assert!(serde_json::from_value::<types::PaymentMethod>(ok).is_ok());
    let extra = json!({ "type": "card", "last4": "4242", "cvc": "123" });
    let error = serde_json::from_value::<types::PaymentMethod>(extra)
        .unwrap_err()
        .to_string();
    assert!(error.contains("cvc"), "{error}");
    // `BankTransfer` keeps other properties in its map, which the tag is not one of, and writes
    // them back beside it.
    let bank = json!({ "type": "bank_transfer", "iban": "DE89370400440532013000", "bic": "X" });
    let decoded = serde_json::from_value::<types::PaymentMethod>(bank.clone()).unwrap();
    let types::PaymentMethod::BankTransfer(transfer) = &decoded else {
        panic!("a transfer: {decoded:?}")
    };
    assert_eq!(
        transfer.additional_properties,
        [("bic".to_string(), "X".to_string())].into()
    );
    let mut written = bank;
    written["instant"] = json!(false);
    assert_eq!(serde_json::to_value(&decoded).unwrap(), written);
    // And `NewPayment`'s own `additionalProperties: false` still holds around the union.
    let mut outer = sparse();
    outer["surprise"] = json!(1);
    assert!(serde_json::from_value::<types::NewPayment>(outer).is_err());
}

#[tokio::test]
async fn an_unknown_tag_is_a_400_naming_the_value() {
    let (payments, app) = app();
    let mut body = sparse();
    body["method"] = json!({ "type": "cash", "last4": "4242" });
    let (status, _, json) = send(&app, post("/payments", "k1", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let detail = json["detail"].as_str().unwrap();
    assert!(detail.contains("cash"), "{detail}");
    // An alternative's own checks run through the union.
    body["method"] = json!({ "type": "card", "last4": "42" });
    let (status, _, json) = send(&app, post("/payments", "k2", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json["detail"],
        "body.method.last4: must match the pattern ^[0-9]{4}$"
    );
    assert!(payments.created.lock().unwrap().is_empty());
}

#[test]
fn the_client_sends_defaults_and_decodes_absent_response_values_as_theirs() {
    // Parameters start at their spec defaults (sent: the server would apply them anyway).
    let params = defaults_client::ListPaymentsParams::default();
    assert_eq!(params.limit, 20);
    assert_eq!(params.order, defaults_client::types::Order::Desc);
    assert_eq!(params.x_trace, "off");
    assert_eq!(params.page, None);
    // A response omitting a defaulted property decodes as its default.
    let payment: defaults_client::types::Payment = serde_json::from_value(json!({
        "id": "pay_0", "amount": 5, "currency": "EUR",
        "method": { "type": "card", "last4": "4242" },
    }))
    .unwrap();
    assert_eq!(
        payment.status,
        defaults_client::types::PaymentStatus::Pending
    );
    let defaults_client::types::PaymentMethod::Card(card) = &payment.method else {
        panic!("a card: {:?}", payment.method)
    };
    assert_eq!(card.network, "visa");
    // The client's request body is the same type: every default is sent.
    let body = defaults_client::types::NewPayment {
        amount: 500,
        currency: defaults_client::types::NewPayment::default_currency(),
        capture: defaults_client::types::NewPayment::default_capture(),
        tags: Vec::new(),
        note: None,
        kind: "payment".into(),
        version: None,
        live: None,
        method: defaults_client::types::PaymentMethod::Card(defaults_client::types::Card {
            last4: "4242".into(),
            network: "visa".into(),
        }),
    };
    assert_eq!(serde_json::to_value(&body).unwrap(), explicit());
}

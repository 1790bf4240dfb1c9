//! The generated widgets router served in process (`tower::ServiceExt::oneshot`) over the runtime's
//! in-memory store: authentication, validation, keys, authorization on replays, replays, scopes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{HeaderMap, Request, StatusCode};
use idemgen_compile_tests::widgets::{self, types, *};
use idemgen_runtime::codegen::Idempotent;
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerError, HandlerResult, MemoryStore,
    Principal, Problem, ProblemKind, Server, ServerConfig, TxHandle,
};
use tower::ServiceExt;

#[derive(Default)]
struct Service {
    widgets: Arc<Mutex<HashMap<uuid::Uuid, types::Widget>>>,
    creates: AtomicUsize,
    publishes: AtomicUsize,
}

impl WidgetsApi for Service {
    type Store = MemoryStore;

    async fn authorize_create_widget(
        &self,
        principal: &Principal,
        _: &CreateWidgetRequest,
    ) -> Result<(), Problem> {
        allow(principal)
    }

    async fn create_widget(
        &self,
        _principal: &Principal,
        tx: &mut TxHandle<MemoryStore>,
        request: CreateWidgetRequest,
    ) -> HandlerResult<CreateWidget> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        match request.body.name.as_str() {
            "boom" => {
                return Err(HandlerError::msg(
                    "database said: relation widgets_secret does not exist",
                ));
            }
            // A declared error response, with the handler's own body: answered, never stored.
            "taken" => {
                return Err(CreateWidgetError::Status400(types::Problem {
                    r#type: "https://example.com/name-taken".into(),
                    title: "Name taken".into(),
                    status: 400,
                    code: Some("name_taken".into()),
                    detail: None,
                })
                .into());
            }
            // A business conflict: the declared 409, with the service's own problem type.
            "duplicate" => {
                return Err(CreateWidgetError::Status409(types::Problem {
                    r#type: "https://example.com/duplicate-name".into(),
                    title: "Duplicate name".into(),
                    status: 409,
                    code: Some("duplicate_name".into()),
                    detail: None,
                })
                .into());
            }
            // The declared 409 dressed as the protocol's in-flight answer: refused.
            "borrowed" => {
                return Err(CreateWidgetError::Status409(types::Problem {
                    r#type: ProblemKind::InFlight.type_uri(),
                    title: ProblemKind::InFlight.title().into(),
                    status: 409,
                    code: Some(ProblemKind::InFlight.code().into()),
                    detail: None,
                })
                .into());
            }
            // A problem keeps its status through `?`.
            "nope" => Err(Problem::new(ProblemKind::Forbidden).with_detail("not this name"))?,
            // The protocol's own answers cannot be borrowed by a handler.
            "conflict" => Err(Problem::new(ProblemKind::InFlight))?,
            _ => {}
        }
        let widget = types::Widget {
            id: uuid::Uuid::new_v4(),
            name: request.body.name,
            color: request.body.color,
            published: false,
            created_at: chrono::Utc::now(),
        };
        let store = Arc::clone(&self.widgets);
        let stored = widget.clone();
        tx.tx().await?.on_commit(move || {
            store.lock().unwrap().insert(stored.id, stored);
        });
        tx.set_resource_ref(widget.id.to_string());
        Ok(CreateWidgetResponse::Status201 {
            location: format!("/widgets/{}", widget.id),
            body: widget,
        })
    }

    async fn list_widgets(
        &self,
        _: &Principal,
        request: ListWidgetsRequest,
    ) -> HandlerResult<ListWidgets> {
        let mut items: Vec<_> = self.widgets.lock().unwrap().values().cloned().collect();
        items.retain(|w| request.color.is_none_or(|c| w.color == Some(c)));
        items.truncate(request.limit.unwrap_or(100) as usize);
        Ok(ListWidgetsResponse::Status200(
            types::ListWidgets200Response { items, next: None },
        ))
    }

    async fn get_widget(
        &self,
        _: &Principal,
        request: GetWidgetRequest,
    ) -> HandlerResult<GetWidget> {
        match self.widgets.lock().unwrap().get(&request.id) {
            Some(w) => Ok(GetWidgetResponse::Status200(w.clone())),
            None => Err(GetWidgetError::Status404(types::Problem {
                r#type: "https://example.com/not-found".into(),
                title: "Not found".into(),
                status: 404,
                code: None,
                detail: None,
            })
            .into()),
        }
    }

    async fn authorize_delete_widget(
        &self,
        principal: &Principal,
        _: &DeleteWidgetRequest,
    ) -> Result<(), Problem> {
        allow(principal)
    }

    async fn delete_widget(
        &self,
        _: &Principal,
        tx: &mut TxHandle<MemoryStore>,
        request: DeleteWidgetRequest,
    ) -> HandlerResult<DeleteWidget> {
        let widgets = Arc::clone(&self.widgets);
        let id = request.id;
        tx.tx().await?.on_commit(move || {
            widgets.lock().unwrap().remove(&id);
        });
        // `x-idempotency-tombstones: [createWidget, publishWidget]`: the pipeline tombstones
        // both operations' records about this widget when this handler succeeds.
        Ok(DeleteWidgetResponse::Status204)
    }

    async fn authorize_publish_widget(
        &self,
        principal: &Principal,
        _: &PublishWidgetRequest,
    ) -> Result<(), Problem> {
        allow(principal)
    }

    async fn publish_widget(
        &self,
        _: &Principal,
        _tx: &mut TxHandle<MemoryStore>,
        request: PublishWidgetRequest,
    ) -> HandlerResult<PublishWidget> {
        self.publishes.fetch_add(1, Ordering::SeqCst);
        Ok(PublishWidgetResponse::Status200 {
            body: types::Widget {
                id: request.id,
                name: request.body.channel,
                color: None,
                published: true,
                created_at: chrono::DateTime::from_timestamp(0, 0).unwrap(),
            },
            x_rate_limit_remaining: Some(9),
        })
    }
}

/// `mallory` is authenticated but never authorized.
fn allow(principal: &Principal) -> Result<(), Problem> {
    if principal.owner == "mallory" {
        Err(Problem::new(ProblemKind::Forbidden))
    } else {
        Ok(())
    }
}

/// `Authorization: <owner>`; anything else is 401.
struct HeaderAuth;

impl Authenticator for HeaderAuth {
    async fn authenticate(&self, request: &Credentials<'_>) -> Result<Principal, Problem> {
        // The fixture declares no security: the authenticator alone reads the token.
        request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(Principal::new)
            .ok_or_else(|| Problem::new(ProblemKind::Unauthenticated))
    }
}

fn app() -> (Arc<Service>, axum::Router) {
    let (service, _store, router) = app_with_store();
    (service, router)
}

/// The app and a handle on its store (`MemoryStore` clones share their records).
fn app_with_store() -> (Arc<Service>, MemoryStore, axum::Router) {
    let service = Arc::new(Service::default());
    let store = MemoryStore::new();
    let server = Server::new(
        Arc::clone(&service),
        HeaderAuth,
        Executor::new(store.clone(), ExecutorConfig::default()),
    )
    .with_config(ServerConfig { body_limit: 256 });
    (service, store, widgets::router(server))
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    json: serde_json::Value,
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    owner: Option<&str>,
    key: Option<&str>,
    body: &str,
) -> Reply {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(owner) = owner {
        request = request.header("authorization", format!("Bearer {owner}"));
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
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
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Reply {
        status,
        headers,
        json,
    }
}

#[tokio::test]
async fn create_then_replay_runs_the_handler_once() {
    let (service, app) = app();
    let first = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k1"),
        r#"{"name":"w","color":"red"}"#,
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.json["name"], "w");
    let location = first.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(
        location,
        format!("/widgets/{}", first.json["id"].as_str().unwrap())
    );
    assert!(first.headers.get("idempotent-replayed").is_none());

    let again = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k1"),
        r#"{"color":"red","name":"w"}"#,
    )
    .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json, first.json, "a replay answers the stored body");
    assert_eq!(again.headers["location"], location.as_str());
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(service.creates.load(Ordering::SeqCst), 1);

    let other = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k1"),
        r#"{"name":"x"}"#,
    )
    .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other.json["code"], "idempotency_key_reused");

    // Another owner with the same key gets a record of its own.
    let bob = send(
        &app,
        "POST",
        "/widgets",
        Some("bob"),
        Some("k1"),
        r#"{"name":"x"}"#,
    )
    .await;
    assert_eq!(bob.status, StatusCode::CREATED);
    assert_eq!(service.creates.load(Ordering::SeqCst), 2);

    let got = send(&app, "GET", &location, Some("alice"), None, "").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json, first.json);
}

#[tokio::test]
async fn refusals_happen_before_any_claim() {
    let (service, app) = app();
    let cases = [
        (None, Some("k"), r#"{"name":"w"}"#, 401, "unauthenticated"),
        (
            Some("alice"),
            None,
            r#"{"name":"w"}"#,
            400,
            "idempotency_key_missing",
        ),
        (
            Some("alice"),
            Some("has space"),
            r#"{"name":"w"}"#,
            400,
            "idempotency_key_invalid",
        ),
        (
            Some("alice"),
            Some("k"),
            r#"{"name":1}"#,
            400,
            "invalid_request",
        ),
        (
            Some("alice"),
            Some("k"),
            r#"{"name":"w","extra":1}"#,
            400,
            "invalid_request",
        ),
        (Some("alice"), Some("k"), "", 400, "invalid_request"),
        (
            Some("alice"),
            Some("k"),
            r#"{"name":"w","color":"purple"}"#,
            400,
            "invalid_request",
        ),
        (
            Some("mallory"),
            Some("k"),
            r#"{"name":"w"}"#,
            403,
            "forbidden",
        ),
    ];
    for (owner, key, body, status, code) in cases {
        let reply = send(&app, "POST", "/widgets", owner, key, body).await;
        assert_eq!(reply.status.as_u16(), status, "{owner:?} {key:?} {body}");
        assert_eq!(reply.json["code"], code, "{owner:?} {key:?} {body}");
        assert_eq!(reply.headers["content-type"], "application/problem+json");
    }
    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(300));
    let reply = send(&app, "POST", "/widgets", Some("alice"), Some("k"), &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.json["code"], "payload_too_large");
    assert_eq!(service.creates.load(Ordering::SeqCst), 0);
    // None of the refusals took the key: it still executes.
    let ok = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"w"}"#,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED);
}

#[tokio::test]
async fn authorization_runs_on_replays_too() {
    let (_service, app) = app();
    // `mallory` can never see a result, even for a key that exists under her name: the record is
    // owner-scoped, and she is refused before the executor runs.
    let first = send(
        &app,
        "POST",
        "/widgets",
        Some("mallory"),
        Some("k"),
        r#"{"name":"w"}"#,
    )
    .await;
    assert_eq!(first.status, StatusCode::FORBIDDEN);
    let second = send(
        &app,
        "POST",
        "/widgets",
        Some("mallory"),
        Some("k"),
        r#"{"name":"w"}"#,
    )
    .await;
    assert_eq!(second.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn handler_errors_are_opaque_and_release_the_key() {
    let (service, app) = app();
    let reply = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"boom"}"#,
    )
    .await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.json["code"], "internal_error");
    assert!(!reply.json.to_string().contains("widgets_secret"));
    let again = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"boom"}"#,
    )
    .await;
    assert_eq!(again.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        service.creates.load(Ordering::SeqCst),
        2,
        "a failed attempt is not stored"
    );
}

#[tokio::test]
async fn publish_is_scoped_to_the_widget() {
    let (service, app) = app();
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    let body = r#"{"channel":"web"}"#;
    let first = send(
        &app,
        "POST",
        &format!("/widgets/{a}/publish?notify=true"),
        Some("alice"),
        Some("p"),
        body,
    )
    .await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.headers["x-rate-limit-remaining"], "9");
    let replay = send(
        &app,
        "POST",
        &format!("/widgets/{a}/publish?notify=true"),
        Some("alice"),
        Some("p"),
        body,
    )
    .await;
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    assert_eq!(
        replay.headers["x-rate-limit-remaining"], "9",
        "declared headers are stored"
    );
    assert_eq!(replay.json, first.json);
    // The same key on another widget is another record.
    let other = send(
        &app,
        "POST",
        &format!("/widgets/{b}/publish?notify=true"),
        Some("alice"),
        Some("p"),
        body,
    )
    .await;
    assert!(other.headers.get("idempotent-replayed").is_none());
    assert_eq!(service.publishes.load(Ordering::SeqCst), 2);
    // The query is part of the request's meaning.
    let changed = send(
        &app,
        "POST",
        &format!("/widgets/{a}/publish?notify=false"),
        Some("alice"),
        Some("p"),
        body,
    )
    .await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad_id = send(
        &app,
        "POST",
        "/widgets/not-a-uuid/publish",
        Some("alice"),
        Some("p"),
        body,
    )
    .await;
    assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
    assert!(bad_id.json["detail"].as_str().unwrap().contains("`id`"));
}

#[tokio::test]
async fn parameters_are_parsed_and_validated() {
    let (_service, app) = app();
    for (name, color) in [("a", "red"), ("b", "blue"), ("c", "red")] {
        let body = format!(r#"{{"name":"{name}","color":"{color}"}}"#);
        let reply = send(&app, "POST", "/widgets", Some("alice"), Some(name), &body).await;
        assert_eq!(reply.status, StatusCode::CREATED);
    }
    let reds = send(
        &app,
        "GET",
        "/widgets?color=red&limit=5",
        Some("alice"),
        None,
        "",
    )
    .await;
    assert_eq!(reds.status, StatusCode::OK);
    assert_eq!(reds.json["items"].as_array().unwrap().len(), 2);
    let one = send(&app, "GET", "/widgets?limit=1", Some("alice"), None, "").await;
    assert_eq!(one.json["items"].as_array().unwrap().len(), 1);
    for query in [
        "limit=ten",
        "color=purple",
        "limit=1&limit=2",
        "limit=99999999999",
    ] {
        let reply = send(
            &app,
            "GET",
            &format!("/widgets?{query}"),
            Some("alice"),
            None,
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(reply.json["code"], "invalid_request", "{query}");
    }
    let missing = send(
        &app,
        "GET",
        &format!("/widgets/{}", uuid::Uuid::new_v4()),
        Some("alice"),
        None,
        "",
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.headers["content-type"], "application/problem+json");
    let deleted = send(
        &app,
        "DELETE",
        &format!("/widgets/{}", uuid::Uuid::new_v4()),
        Some("alice"),
        None,
        "",
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn validation_keywords_are_400_before_any_claim() {
    let (service, store, app) = app_with_store();
    // `name: {minLength: 1, maxLength: 100}`, counted in characters: 100 × "é" is 200 bytes.
    let cases = [
        (
            "x".repeat(101),
            "body.name: must have at most 100 characters",
        ),
        (String::new(), "body.name: must have at least 1 character"),
    ];
    let mut bodies: Vec<(String, &str)> = cases
        .iter()
        .map(|(name, detail)| (serde_json::json!({ "name": name }).to_string(), *detail))
        .collect();
    // Decoding errors name their field too, whatever the type.
    bodies.push((
        r#"{"name":"w","color":"purple"}"#.to_owned(),
        "body.color: unknown variant `purple`, expected one of `red`, `green`, `blue`",
    ));
    bodies.push((
        r#"{"name":5}"#.to_owned(),
        "body.name: invalid type: integer `5`, expected a string",
    ));
    for (body, detail) in bodies {
        let name = &body;
        // `mallory` is never authorized: a 400 shows validation ran before authorization.
        for owner in ["alice", "mallory"] {
            let reply = send(&app, "POST", "/widgets", Some(owner), Some("k"), &body).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{owner} {name:?}");
            assert_eq!(reply.json["code"], "invalid_request");
            assert_eq!(reply.json["detail"], detail);
            assert_eq!(reply.headers["content-type"], "application/problem+json");
        }
    }
    assert_eq!(
        service.creates.load(Ordering::SeqCst),
        0,
        "handler not called"
    );
    assert!(store.is_empty(), "no claim taken");
    let accented = serde_json::json!({ "name": "é".repeat(100) }).to_string();
    let ok = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        &accented,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{:?}", ok.json);
    assert_eq!(store.len(), 1);

    // `limit: {minimum: 0, exclusiveMinimum: true, maximum: 100}` (the 3.0 boolean form).
    for (query, detail) in [
        ("limit=0", "query.limit: must be greater than 0"),
        ("limit=101", "query.limit: must be at most 100"),
    ] {
        let reply = send(
            &app,
            "GET",
            &format!("/widgets?{query}"),
            Some("alice"),
            None,
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(reply.json["detail"], detail, "{query}");
    }
    for query in ["limit=1", "limit=100"] {
        let reply = send(
            &app,
            "GET",
            &format!("/widgets?{query}"),
            Some("alice"),
            None,
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{query}");
    }

    // Header parameters too: `X-Request-Id: {maxLength: 64}`.
    let request = Request::builder()
        .method("GET")
        .uri("/widgets")
        .header("authorization", "Bearer alice")
        .header("x-request-id", "r".repeat(65))
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        json["detail"],
        "header.X-Request-Id: must have at most 64 characters"
    );
}

#[test]
fn semantic_input_is_path_query_and_body_only() {
    let id = uuid::Uuid::parse_str("6a2f41a3-c54c-4ce8-82d2-0324e1c32e22").unwrap();
    let request = PublishWidgetRequest {
        notify: None,
        id,
        body: types::PublishWidgetRequestBody {
            channel: "web".into(),
        },
    };
    let input = serde_json::to_value(PublishWidgetSemanticInput::new(&request)).unwrap();
    assert_eq!(
        input,
        serde_json::json!({"path": {"id": id}, "query": {}, "body": {"channel": "web"}})
    );
    assert_eq!(<PublishWidget as Idempotent>::FINGERPRINT_VERSION, 2);
    assert_eq!(<CreateWidget as Idempotent>::FINGERPRINT_VERSION, 1);
    assert_eq!(
        <PublishWidget as Idempotent>::STORED_HEADERS,
        ["x-rate-limit-remaining"]
    );
    assert_eq!(
        <PublishWidget as Idempotent>::resource_scope(&request),
        id.to_string(),
        "publishing is scoped to the widget"
    );
    let create = CreateWidgetRequest {
        body: types::NewWidget {
            name: "Sprocket".into(),
            color: None,
        },
    };
    // The protocol's own test vector shape: `{"body": {...}}` only.
    assert_eq!(
        serde_json::to_value(CreateWidgetSemanticInput::new(&create)).unwrap(),
        serde_json::json!({"body": {"name": "Sprocket"}})
    );
}

#[tokio::test]
async fn handler_errors_keep_their_meaning_and_are_never_stored() {
    let (service, store, app) = app_with_store();
    // A declared error response: its own body and status, nothing stored, the key still free.
    let taken = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"taken"}"#,
    )
    .await;
    assert_eq!(taken.status, StatusCode::BAD_REQUEST);
    assert_eq!(taken.json["code"], "name_taken");
    assert_eq!(taken.headers["content-type"], "application/problem+json");
    assert!(store.is_empty(), "a declared error is not stored");
    // A problem keeps its status through `?`.
    let nope = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"nope"}"#,
    )
    .await;
    assert_eq!(nope.status, StatusCode::FORBIDDEN);
    assert_eq!(nope.json["detail"], "not this name");
    // A handler cannot answer with the protocol's own 409: clients would take it for the key
    // being in flight. It is an opaque 500 instead.
    let conflict = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"conflict"}"#,
    )
    .await;
    assert_eq!(conflict.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(conflict.json["code"], "internal_error");
    assert!(conflict.headers.get("retry-after").is_none());
    assert!(store.is_empty());
    // A business conflict is the declared 409 with the handler's own type: answered as is, never
    // stored (a retry runs the handler again), and told apart from the protocol's by its type.
    for _ in 0..2 {
        let duplicate = send(
            &app,
            "POST",
            "/widgets",
            Some("alice"),
            Some("k"),
            r#"{"name":"duplicate"}"#,
        )
        .await;
        assert_eq!(duplicate.status, StatusCode::CONFLICT);
        assert_eq!(duplicate.json["type"], "https://example.com/duplicate-name");
        assert!(duplicate.headers.get("idempotent-replayed").is_none());
        assert!(store.is_empty());
    }
    // Dressed as the protocol's in-flight 409, it is an opaque 500 instead.
    let borrowed = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"borrowed"}"#,
    )
    .await;
    assert_eq!(borrowed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(borrowed.json["code"], "internal_error");
    assert!(store.is_empty());
    // The same key then executes.
    let ok = send(
        &app,
        "POST",
        "/widgets",
        Some("alice"),
        Some("k"),
        r#"{"name":"w"}"#,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    assert_eq!(service.creates.load(Ordering::SeqCst), 7);
    // A read's declared error carries the handler's body.
    let missing = send(
        &app,
        "GET",
        &format!("/widgets/{}", uuid::Uuid::new_v4()),
        Some("alice"),
        None,
        "",
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json["type"], "https://example.com/not-found");
}

#[tokio::test]
async fn deleting_a_widget_tombstones_the_create_that_made_it() {
    let (_service, app) = app();
    let body = r#"{"name":"w"}"#;
    let created = send(&app, "POST", "/widgets", Some("alice"), Some("k"), body).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let location = created.headers["location"].to_str().unwrap().to_owned();
    let publish = format!("{location}/publish?notify=true");
    let channel = r#"{"channel":"web"}"#;
    let published = send(&app, "POST", &publish, Some("alice"), Some("p"), channel).await;
    assert_eq!(published.status, StatusCode::OK);
    // Another owner's delete of the same id tombstones nothing of alice's.
    let bobs = send(&app, "DELETE", &location, Some("bob"), None, "").await;
    assert_eq!(bobs.status, StatusCode::NO_CONTENT);
    let replay = send(&app, "POST", "/widgets", Some("alice"), Some("k"), body).await;
    assert_eq!(replay.status, StatusCode::CREATED);
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    let deleted = send(&app, "DELETE", &location, Some("alice"), None, "").await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let late = send(&app, "POST", "/widgets", Some("alice"), Some("k"), body).await;
    assert_eq!(late.status, StatusCode::GONE);
    assert_eq!(late.json["code"], "idempotency_resource_gone");
    // The second listed operation too: a late retry of the publish is 410, not a replay of
    // the deleted widget.
    let late = send(&app, "POST", &publish, Some("alice"), Some("p"), channel).await;
    assert_eq!(late.status, StatusCode::GONE);
    assert_eq!(late.json["code"], "idempotency_resource_gone");
    // Writes need authorization; reads are allowed by the trait's default.
    let refused = send(&app, "DELETE", &location, Some("mallory"), None, "").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let listed = send(&app, "GET", "/widgets", Some("mallory"), None, "").await;
    assert_eq!(listed.status, StatusCode::OK);
}

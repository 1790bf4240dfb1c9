//! The notes service through its router, on a SQLite file in a fresh temporary directory: no
//! database server. A create and its retry are one note; a changed body under the key is 422; a
//! storm of one key is one note; reads are scoped to the owner.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use idemgen_runtime::ExecutorConfig;
use serde_json::{Value, json};
use tower::ServiceExt;

struct App {
    router: axum::Router,
    pool: idemgen_runtime::SqlitePool,
    /// The database file (`idemgen-records` reads it).
    file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn app() -> App {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.db");
    let store = idemgen_example_notes::open(&file).await.unwrap();
    let pool = store.pool().clone();
    let (router, _server) = idemgen_example_notes::app(store, ExecutorConfig::default());
    App {
        router,
        pool,
        file,
        _dir: dir,
    }
}

struct Reply {
    status: StatusCode,
    replayed: bool,
    location: Option<String>,
    body: Value,
}

async fn send(
    app: &App,
    owner: &str,
    key: Option<&str>,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {owner}"));
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let (replayed, location) = {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        (
            header("idempotent-replayed").as_deref() == Some("true"),
            header("location"),
        )
    };
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Reply {
        status,
        replayed,
        location,
        body,
    }
}

async fn notes(app: &App) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM notes")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_create_and_its_retry_are_one_note() {
    let app = app().await;
    let body = json!({"text": "hello"});
    let first = send(
        &app,
        "alice",
        Some("k1"),
        "POST",
        "/notes",
        Some(body.clone()),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(!first.replayed);
    let retry = send(&app, "alice", Some("k1"), "POST", "/notes", Some(body)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed, "the retry is a replay");
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.location, first.location);
    assert_eq!(notes(&app).await, 1);
    let id = first.body["id"].as_i64().unwrap();
    let read = send(&app, "alice", None, "GET", &format!("/notes/{id}"), None).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body, json!({"id": id, "text": "hello"}));
    // Another owner neither sees the note nor shares the key.
    let theirs = send(&app, "bob", None, "GET", &format!("/notes/{id}"), None).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    let bobs = send(
        &app,
        "bob",
        Some("k1"),
        "POST",
        "/notes",
        Some(json!({"text": "hello"})),
    )
    .await;
    assert_eq!(bobs.status, StatusCode::CREATED);
    assert!(!bobs.replayed);
    assert_eq!(notes(&app).await, 2);
}

/// `idemgen-records show` finds the note's record from what support knows (owner, operation, key)
/// and it holds what the service replays: status, `Location`, body.
#[tokio::test]
async fn the_record_of_a_create_is_found_by_its_scope_and_holds_what_is_replayed() {
    let app = app().await;
    let body = json!({"text": "found"});
    let first = send(
        &app,
        "alice",
        Some("k9"),
        "POST",
        "/notes",
        Some(body.clone()),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let retry = send(&app, "alice", Some("k9"), "POST", "/notes", Some(body)).await;
    assert!(retry.replayed);
    let url = format!("sqlite:{}", app.file.display());
    let show = idemgen_records::run([
        "idemgen-records",
        "--database-url",
        &url,
        "--json",
        "show",
        "--owner",
        "alice",
        "--operation",
        "createNote",
        "--key",
        "k9",
        "--body",
    ])
    .await;
    assert_eq!(show.code, 0, "{show:?}");
    let record: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(record["state"], "completed");
    assert_eq!(record["response_status"], 201);
    let stored: Value = serde_json::from_str(record["response_body"].as_str().unwrap()).unwrap();
    assert_eq!(stored, retry.body, "the stored body is the replayed one");
    let location = record["response_headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "location")
        .map(|h| h[1].as_str().unwrap().to_owned());
    assert_eq!(location, retry.location);
    // Another owner's same key names another record, which does not exist.
    let bobs = idemgen_records::run([
        "idemgen-records",
        "--database-url",
        &url,
        "show",
        "--owner",
        "bob",
        "--operation",
        "createNote",
        "--key",
        "k9",
    ])
    .await;
    assert_eq!(bobs.code, 1, "{bobs:?}");
}

#[tokio::test]
async fn a_changed_request_under_a_key_is_422_and_writes_nothing() {
    let app = app().await;
    let first = send(
        &app,
        "alice",
        Some("k2"),
        "POST",
        "/notes",
        Some(json!({"text": "a"})),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let changed = send(
        &app,
        "alice",
        Some("k2"),
        "POST",
        "/notes",
        Some(json!({"text": "b"})),
    )
    .await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        changed.body["code"], "idempotency_key_reused",
        "{}",
        changed.body
    );
    let missing = send(
        &app,
        "alice",
        None,
        "POST",
        "/notes",
        Some(json!({"text": "c"})),
    )
    .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(notes(&app).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_simultaneous_creates_with_one_key_are_one_note() {
    let app = Arc::new(app().await);
    let barrier = Arc::new(tokio::sync::Barrier::new(32));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (app, barrier) = (app.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                send(
                    &app,
                    "alice",
                    Some("storm"),
                    "POST",
                    "/notes",
                    Some(json!({"text": "once"})),
                )
                .await
            })
        })
        .collect();
    let mut bodies = Vec::new();
    for t in tasks {
        let reply = t.await.unwrap();
        match reply.status {
            StatusCode::CREATED => bodies.push(reply.body),
            StatusCode::CONFLICT => {
                // The wire values, spelled out: protocol.md's table.
                assert_eq!(
                    reply.body["code"], "idempotency_request_in_flight",
                    "{}",
                    reply.body
                );
                assert_eq!(
                    reply.body["type"],
                    "https://idemgen.dev/problems/idempotency_request_in_flight",
                    "{}",
                    reply.body
                );
            }
            other => panic!("unexpected {other}: {}", reply.body),
        }
    }
    assert_eq!(notes(&app).await, 1, "one note for 32 requests");
    assert!(!bodies.is_empty());
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "every 201 is the same note"
    );
}

//! Every step of the README walkthrough.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn readme_walkthrough() {
    walkthrough("sqlx").await;
}

/// The same steps on the pipelining store, answer for answer.
#[tokio::test]
async fn readme_walkthrough_on_tokio_postgres() {
    walkthrough("tokio-postgres").await;
}

async fn walkthrough(store: &str) {
    let db = fresh_db().await;
    let server = Server::start(&db, &[("WIDGETS_STORE", store)]).await;
    let base = server.base.as_str();
    let client = reqwest::Client::new();

    // Create.
    let first = create(
        base,
        "tok1",
        "key-1",
        json!({"name": "Sprocket", "color": "red"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    let id = first.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        first.header("location"),
        Some(format!("/widgets/{id}").as_str())
    );
    assert!(!first.replayed());

    // Retry: the same body, marked as a replay.
    let retry = create(
        base,
        "tok1",
        "key-1",
        json!({"color": "red", "name": "Sprocket"}),
    )
    .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.header("location"), first.header("location"));
    assert!(retry.replayed());

    // Same key, different body: 422.
    let changed = create(base, "tok1", "key-1", json!({"name": "Gear"})).await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(changed.code(), "idempotency_key_reused");
    assert_eq!(
        changed.header("content-type"),
        Some("application/problem+json")
    );

    // Read it back.
    let got = call(
        &client,
        base,
        Method::GET,
        &format!("/widgets/{id}"),
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body, first.body);

    // Publish it.
    let publish = format!("/widgets/{id}/publish");
    let published = call(
        &client,
        base,
        Method::POST,
        &publish,
        Some("tok1"),
        Some("pub-1"),
        Some(json!({"channel": "news"})),
    )
    .await;
    assert_eq!(published.status, StatusCode::OK);
    // The spec's pattern for a channel is enforced before anything is claimed.
    let shouted = call(
        &client,
        base,
        Method::POST,
        &publish,
        Some("tok1"),
        Some("pub-2"),
        Some(json!({"channel": "News!"})),
    )
    .await;
    assert_eq!(shouted.status, StatusCode::BAD_REQUEST);
    assert!(
        shouted.body["detail"]
            .as_str()
            .unwrap()
            .starts_with("body.channel: must match the pattern"),
        "{shouted:?}"
    );

    // Delete, then retry the create and the publication: 410 for both (the delete tombstones
    // both operations' records about the widget).
    let deleted = call(
        &client,
        base,
        Method::DELETE,
        &format!("/widgets/{id}"),
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let late = create(
        base,
        "tok1",
        "key-1",
        json!({"name": "Sprocket", "color": "red"}),
    )
    .await;
    assert_eq!(late.status, StatusCode::GONE);
    assert_eq!(late.code(), "idempotency_resource_gone");
    assert_eq!(
        count(&db, "SELECT count(*) FROM widgets").await,
        0,
        "the late retry created nothing"
    );
    let late_publish = call(
        &client,
        base,
        Method::POST,
        &publish,
        Some("tok1"),
        Some("pub-1"),
        Some(json!({"channel": "news"})),
    )
    .await;
    assert_eq!(late_publish.status, StatusCode::GONE, "{late_publish:?}");
    assert_eq!(late_publish.code(), "idempotency_resource_gone");

    // Missing key: 400.
    let missing = call(
        &client,
        base,
        Method::POST,
        "/widgets",
        Some("tok1"),
        None,
        Some(json!({"name": "x"})),
    )
    .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.code(), "idempotency_key_missing");

    // Invalid key and invalid body: 400, nothing claimed.
    let long = "k".repeat(256);
    let invalid = create(base, "tok1", &long, json!({"name": "x"})).await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert_eq!(invalid.code(), "idempotency_key_invalid");
    let bad_body = create(base, "tok1", "key-2", json!({"color": "red"})).await;
    assert_eq!(bad_body.status, StatusCode::BAD_REQUEST, "{bad_body:?}");
    // The spec's `maxLength: 100`, enforced by the generated router before any claim.
    let too_long = create(base, "tok1", "key-2", json!({"name": "n".repeat(101)})).await;
    assert_eq!(too_long.status, StatusCode::BAD_REQUEST, "{too_long:?}");
    assert_eq!(too_long.code(), "invalid_request");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'key-2'"
        )
        .await,
        0
    );

    // No token: 401.
    let anonymous = call(
        &client,
        base,
        Method::POST,
        "/widgets",
        None,
        Some("key-3"),
        Some(json!({"name": "x"})),
    )
    .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        anonymous.header("content-type"),
        Some("application/problem+json")
    );
}

//! Owners never share keys; read-only callers are refused on every attempt; body limits.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn bob_reusing_alices_key_gets_his_own_result() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let alice = create(
        &server.base,
        "tok1",
        "shared-key",
        json!({"name": "Alice's"}),
    )
    .await;
    let bob = create(
        &server.base,
        "tok2",
        "shared-key",
        json!({"name": "Alice's"}),
    )
    .await;
    assert_eq!(bob.status, StatusCode::CREATED);
    assert!(!bob.replayed(), "bob's request executed for bob");
    assert_ne!(
        bob.body["id"], alice.body["id"],
        "bob never sees alice's widget"
    );
    let bob_again = create(
        &server.base,
        "tok2",
        "shared-key",
        json!({"name": "Alice's"}),
    )
    .await;
    assert_eq!(bob_again.body["id"], bob.body["id"]);
    let client = reqwest::Client::new();
    let id = alice.body["id"].as_str().unwrap();
    let peek = call(
        &client,
        &server.base,
        Method::GET,
        &format!("/widgets/{id}"),
        Some("tok2"),
        None,
        None,
    )
    .await;
    assert_eq!(peek.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn read_only_callers_are_refused_on_every_attempt_including_replays() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[("WIDGETS_TOKENS", "tok1=alice,tok9=alice:readonly")]).await;
    let made = create(&server.base, "tok1", "ro-1", json!({"name": "Mine"})).await;
    assert_eq!(made.status, StatusCode::CREATED);
    // Same owner, same key, same request: it would replay, but authorization comes first.
    let replay_attempt = create(&server.base, "tok9", "ro-1", json!({"name": "Mine"})).await;
    assert_eq!(replay_attempt.status, StatusCode::FORBIDDEN);
    assert_eq!(replay_attempt.code(), "forbidden");
    let fresh = create(&server.base, "tok9", "ro-2", json!({"name": "New"})).await;
    assert_eq!(fresh.status, StatusCode::FORBIDDEN);
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 1);
}

#[tokio::test]
async fn body_over_the_limit_is_413_and_leaves_no_claim() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[("WIDGETS_BODY_LIMIT", "1024")]).await;
    let huge = "x".repeat(4096);
    let answer = create(&server.base, "tok1", "big-1", json!({"name": huge})).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{answer:?}");
    assert_eq!(answer.code(), "payload_too_large");
    assert_eq!(
        count(&db, "SELECT count(*) FROM idempotency_records").await,
        0
    );
    let ok = create(&server.base, "tok1", "big-1", json!({"name": "small"})).await;
    assert_eq!(ok.status, StatusCode::CREATED, "the key is still free");
}

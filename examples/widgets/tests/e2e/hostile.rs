//! The defects outside testing found (schemathesis and hand-written protocol checks), each held
//! by a test through the real server on real PostgreSQL: nothing below may be a 500, an empty
//! body, a claim taken before the request is known to be valid, or the wrong problem code.

use idemgen_runtime::testing::{Cluster, ClusterOptions, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::*;

async fn records(db: &TestDb) -> i64 {
    count(db, "SELECT count(*) FROM idempotency_records").await
}

/// Sends a raw body with the given `Content-Type` (or none).
async fn post_raw(base: &str, key: &str, content_type: Option<&str>, body: &str) -> Answer {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/widgets"))
        .bearer_auth("tok1")
        .header("Idempotency-Key", key)
        .body(body.to_owned());
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.json().await.unwrap_or(serde_json::Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn a_nul_character_is_a_400_naming_the_field_before_any_claim() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let nul = create(&server.base, "tok1", "nul", json!({"name": "a\u{0}b"})).await;
    assert_eq!(nul.status, StatusCode::BAD_REQUEST, "{:?}", nul.body);
    assert_eq!(nul.code(), "invalid_request");
    assert!(
        nul.body["detail"].as_str().unwrap().contains("body.name"),
        "{:?}",
        nul.body
    );
    assert_eq!(records(&db).await, 0, "no claim taken");
    // A NUL in a path parameter, too.
    let path = call(
        &reqwest::Client::new(),
        &server.base,
        Method::GET,
        "/widgets/a%00b",
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(path.status, StatusCode::BAD_REQUEST);
    assert_eq!(path.code(), "invalid_request");
}

#[tokio::test]
async fn explicit_null_on_a_property_that_is_not_nullable_is_refused() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let null = create(
        &server.base,
        "tok1",
        "null",
        json!({"name": "w", "color": null}),
    )
    .await;
    assert_eq!(null.status, StatusCode::BAD_REQUEST, "{:?}", null.body);
    assert_eq!(null.code(), "invalid_request");
    assert_eq!(records(&db).await, 0);
    // The same key then executes with the absent color, which is a different request.
    let absent = create(&server.base, "tok1", "null", json!({"name": "w"})).await;
    assert_eq!(absent.status, StatusCode::CREATED);
}

#[tokio::test]
async fn a_json_body_needs_a_json_content_type() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let body = r#"{"name":"w"}"#;
    for content_type in [Some("text/plain"), None] {
        let refused = post_raw(&server.base, "ct", content_type, body).await;
        assert_eq!(
            refused.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        assert_eq!(refused.code(), "unsupported_media_type");
        assert_eq!(
            refused.header("content-type"),
            Some("application/problem+json")
        );
    }
    assert_eq!(records(&db).await, 0, "no claim taken");
    let ok = post_raw(
        &server.base,
        "ct",
        Some("application/json; charset=utf-8"),
        body,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let client = reqwest::Client::new();
    let missing = call(
        &client,
        &server.base,
        Method::GET,
        "/nope",
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.code(), "not_found");
    assert_eq!(
        missing.header("content-type"),
        Some("application/problem+json")
    );
    let wrong = call(
        &client,
        &server.base,
        Method::PUT,
        "/widgets",
        Some("tok1"),
        None,
        None,
    )
    .await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong.code(), "method_not_allowed");
    let allow = wrong.header("allow").expect("Allow");
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
}

#[tokio::test]
async fn two_authorization_headers_are_refused() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let resp = reqwest::Client::new()
        .get(format!("{}/widgets", server.base))
        .header("authorization", "Bearer tok1")
        .header("authorization", "Bearer tok2")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "invalid_request");
}

/// With PostgreSQL down, operations without a key answer a neutral 503 (`service_unavailable`),
/// not the idempotency store's; the create still answers the store's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_down_reads_and_deletes_answer_a_neutral_503() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&ClusterOptions::default()))
        .await
        .unwrap()
        .expect("a cluster of this test's own");
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    let server = Server::start(&db, &[]).await;
    let created = create(&server.base, "tok1", "before", json!({"name": "w"})).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    cluster.stop("immediate").unwrap();
    let client = reqwest::Client::new();
    for (method, path) in [
        (Method::GET, "/widgets".to_owned()),
        (Method::GET, format!("/widgets/{id}")),
        (Method::DELETE, format!("/widgets/{id}")),
    ] {
        let answer = call(
            &client,
            &server.base,
            method.clone(),
            &path,
            Some("tok1"),
            None,
            None,
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}"
        );
        assert_eq!(answer.code(), "service_unavailable", "{method} {path}");
        assert_eq!(answer.header("retry-after"), Some("1"));
    }
    let create = create(&server.base, "tok1", "after", json!({"name": "w"})).await;
    assert_eq!(create.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(create.code(), "idempotency_store_unavailable");
}

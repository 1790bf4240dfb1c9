//! Storms of identical requests: one row, identical answers.

use std::collections::HashSet;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::*;

async fn storm(bases: &[String], n: usize, key: &str) -> Vec<Answer> {
    let client = reqwest::Client::new();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, barrier) = (client.clone(), barrier.clone());
        let base = bases[i % bases.len()].clone();
        let key = key.to_owned();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            call(
                &client,
                &base,
                Method::POST,
                "/widgets",
                Some("tok1"),
                Some(&key),
                Some(json!({"name": "Storm"})),
            )
            .await
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn assert_one_result(answers: &[Answer]) {
    let bodies: HashSet<String> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .map(|a| a.body.to_string())
        .collect();
    assert_eq!(bodies.len(), 1, "every 201 carries the same widget");
    for a in answers {
        assert!(
            a.status == StatusCode::CREATED || a.status == StatusCode::CONFLICT,
            "unexpected answer {a:?}"
        );
    }
    let executed = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED && !a.replayed())
        .count();
    assert_eq!(executed, 1, "exactly one answer is not a replay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_concurrent_identical_creates_make_one_row() {
    let db = fresh_db().await;
    let server = Server::start(&db, &[]).await;
    let answers = storm(std::slice::from_ref(&server.base), 100, "storm-1").await;
    assert_one_result(&answers);
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_storm_across_two_server_processes_makes_one_row() {
    let db = fresh_db().await;
    let a = Server::start(&db, &[]).await;
    let b = Server::start(&db, &[]).await;
    let answers = storm(&[a.base.clone(), b.base.clone()], 100, "storm-2").await;
    assert_one_result(&answers);
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 1);
}

/// Four processes, one per strategy and store (`PgStore` and `TokioPgStore` serve one table of
/// records at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_storm_across_four_server_processes_both_strategies_and_both_stores_makes_one_row()
{
    let db = fresh_db().await;
    let mut servers = Vec::new();
    for store in ["sqlx", "tokio-postgres"] {
        for strategy in ["separate-claim", "in-transaction"] {
            let env = [("WIDGETS_STRATEGY", strategy), ("WIDGETS_STORE", store)];
            servers.push(Server::start(&db, &env).await);
        }
    }
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    for round in 0..3 {
        let key = format!("storm-4-{round}");
        let answers = storm(&bases, 100, &key).await;
        assert_one_result(&answers);
    }
    assert_eq!(count(&db, "SELECT count(*) FROM widgets").await, 3);
}

#[tokio::test]
async fn publish_retried_twenty_times_appends_one_outbox_event() {
    publish_retried("sqlx").await;
}

#[tokio::test]
async fn on_tokio_postgres_publish_retried_twenty_times_appends_one_outbox_event() {
    publish_retried("tokio-postgres").await;
}

async fn publish_retried(store: &str) {
    let db = fresh_db().await;
    let server = Server::start(&db, &[("WIDGETS_STORE", store)]).await;
    let client = reqwest::Client::new();
    let made = create(&server.base, "tok1", "mk", json!({"name": "Pub"})).await;
    let id = made.body["id"].as_str().unwrap().to_owned();
    let path = format!("/widgets/{id}/publish");
    let mut bodies = HashSet::new();
    for i in 0..20 {
        let a = call(
            &client,
            &server.base,
            Method::POST,
            &path,
            Some("tok1"),
            Some("pub-1"),
            Some(json!({"channel": "news"})),
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "attempt {i}: {a:?}");
        assert_eq!(a.replayed(), i > 0);
        assert_eq!(a.body["published"], true);
        bodies.insert(a.body.to_string());
    }
    assert_eq!(bodies.len(), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 1);
    // The same key on another widget is another scope: it publishes that one.
    let other = create(&server.base, "tok1", "mk2", json!({"name": "Other"})).await;
    let other_id = other.body["id"].as_str().unwrap();
    let a = call(
        &client,
        &server.base,
        Method::POST,
        &format!("/widgets/{other_id}/publish"),
        Some("tok1"),
        Some("pub-1"),
        Some(json!({"channel": "news"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(!a.replayed());
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 2);
}

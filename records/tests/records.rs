//! `idemgen-records` against real stores: records written by the runtime's own store code
//! (PostgreSQL on a throwaway cluster, SQLite in a temporary file) are found by the scope a
//! person knows and match what a retry replays; a stranded claim (its holder's lease lapsed) is
//! listed, counted and released, after which the key claims afresh; a live holder's claim and a
//! completed record are refused; a role with `SELECT` only runs every read and no write.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use idemgen_protocol::IdempotencyKey;
use idemgen_protocol::fingerprint::CanonicalInput;
use idemgen_runtime::engine::{
    ClaimOutcome, ClaimRequest, ClaimToken, HolderId, Scope, StoredResponse,
};
use idemgen_runtime::{PgStore, SqliteStore, Store};
use idemgen_testdb::TestDb;
use serde_json::{Value, json};

/// Runs the binary; returns its exit code and standard output.
fn records(url: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_idemgen-records"))
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .expect("idemgen-records runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

fn json_of(url: &str, args: &[&str]) -> Value {
    let (code, out) = records(url, args);
    assert_eq!(code, 0, "{args:?}: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn scope(key: &str) -> Scope {
    Scope::new("alice", "createWidget", IdempotencyKey::new(key).unwrap())
}

/// Claims `scope` for `holder` with a fresh token.
async fn claim<S: Store>(
    store: &Arc<S>,
    fingerprint: &idemgen_protocol::Fingerprint,
    scope: &Scope,
    holder: Option<HolderId>,
) -> (ClaimOutcome, ClaimToken) {
    let request = ClaimRequest {
        scope,
        fingerprint,
        fingerprint_version: 1,
        token: ClaimToken::generate(),
        holder,
        stale_after: Duration::from_secs(300),
        retention: None,
    };
    (store.claim(&request).await.unwrap(), request.token)
}

/// The records every test writes through `store`: `done` completed (201, a `Location`, a body),
/// `aged` completed with a retention that runs out, `stranded` claimed for a holder whose lease
/// lapses, `live` claimed for a holder whose lease lasts a minute. Returns the live holder.
async fn write_records<S: Store>(store: &Arc<S>) -> HolderId {
    let fingerprint = CanonicalInput::new(&json!({"name": "Sprocket"}))
        .unwrap()
        .hs2("createWidget", 1);
    let done = scope("done");
    let (outcome, token) = claim(store, &fingerprint, &done, None).await;
    assert!(matches!(outcome, ClaimOutcome::Claimed { .. }));
    let mut tx = store.begin().await.unwrap();
    let response = StoredResponse {
        status: 201,
        headers: vec![("location".into(), "/widgets/7".into())],
        body: br#"{"id":7,"name":"Sprocket"}"#.to_vec(),
    };
    assert!(
        store
            .complete(&mut tx, &done, token, &response, Some("7"))
            .await
            .unwrap()
    );
    store.commit(tx).await.unwrap();

    // `aged` completed with a retention that runs out before the tests read it.
    let aged = scope("aged");
    let request = ClaimRequest {
        scope: &aged,
        fingerprint: &fingerprint,
        fingerprint_version: 1,
        token: ClaimToken::generate(),
        holder: None,
        stale_after: Duration::from_secs(300),
        retention: Some(Duration::from_millis(200)),
    };
    let outcome = store.claim(&request).await.unwrap();
    assert!(matches!(outcome, ClaimOutcome::Claimed { .. }));
    let mut tx = store.begin().await.unwrap();
    assert!(
        store
            .complete(&mut tx, &aged, request.token, &response, Some("8"))
            .await
            .unwrap()
    );
    store.commit(tx).await.unwrap();

    let dying = HolderId::generate();
    assert!(
        store
            .renew_lease(dying, Duration::from_millis(300))
            .await
            .unwrap()
    );
    let (outcome, _) = claim(store, &fingerprint, &scope("stranded"), Some(dying)).await;
    assert!(matches!(outcome, ClaimOutcome::Claimed { .. }));
    let alive = HolderId::generate();
    store
        .renew_lease(alive, Duration::from_secs(60))
        .await
        .unwrap();
    let (outcome, _) = claim(store, &fingerprint, &scope("live"), Some(alive)).await;
    assert!(matches!(outcome, ClaimOutcome::Claimed { .. }));
    // The dying holder's lease lapses (the store judges it by its own clock).
    tokio::time::sleep(Duration::from_millis(600)).await;
    alive
}

/// Every read and the release rules, on the store at `url`, whose records `write_records` made.
fn reads_and_releases(url: &str, reader: Option<&str>) {
    let by_scope = [
        "--owner",
        "alice",
        "--operation",
        "createWidget",
        "--key",
        "done",
    ];
    // `show` by scope: what a retry replays.
    let shown = json_of(
        url,
        &[&["--json", "show", "--body"][..], &by_scope].concat(),
    );
    assert_eq!(shown["state"], "completed");
    assert_eq!(shown["response_status"], 201);
    assert_eq!(
        shown["response_headers"],
        json!([["location", "/widgets/7"]])
    );
    assert_eq!(shown["response_body"], r#"{"id":7,"name":"Sprocket"}"#);
    assert_eq!(shown["resource_ref"], "7");
    assert_eq!(shown["fingerprint_version"], 1);
    let key = shown["record_key"].as_str().unwrap().to_owned();
    assert_eq!(key, hex_of(&scope("done").hash()));
    // Without --body the body stays out; by record key the same record.
    let by_hash = json_of(url, &["--json", "show", "--hash", &key]);
    assert_eq!(by_hash["response_body"], Value::Null);
    assert_eq!(by_hash["response_body_bytes"], 26);
    assert_eq!(by_hash["completed_at"], shown["completed_at"]);
    let (code, out) = records(
        url,
        &[
            "show",
            "--owner",
            "alice",
            "--operation",
            "createWidget",
            "--key",
            "nope",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no record"), "{out}");

    // `list` and `stats`.
    let claims = json_of(url, &["--json", "list", "--state", "claimed"]);
    let mut keys: Vec<&str> = claims
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["live", "stranded"]);
    let stranded = claims
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "stranded")
        .unwrap();
    assert_eq!(stranded["lease_alive"], false);
    let live = claims
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "live")
        .unwrap();
    assert_eq!(live["lease_alive"], true);
    assert_eq!(
        json_of(url, &["--json", "list", "--limit", "1"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(
        json_of(url, &["--json", "list", "--older-than", "1h"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let stats = json_of(url, &["--json", "stats"]);
    assert_eq!(stats["stranded_claims"], 1, "{stats}");
    assert_eq!(stats["expired_records"], 1, "{stats}");
    assert_eq!(
        stats["by_operation"],
        json!([
            {"operation": "createWidget", "state": "claimed", "records": 2},
            {"operation": "createWidget", "state": "completed", "records": 2},
        ])
    );
    let expired = json_of(url, &["--json", "list", "--expired"]);
    assert_eq!(expired.as_array().unwrap().len(), 1, "{expired}");
    assert_eq!(expired[0]["key"], "aged");
    let (code, text) = records(url, &["list"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("stranded") && text.contains("completed"),
        "{text}"
    );

    // A role with SELECT only reads everything and writes nothing.
    if let Some(reader) = reader {
        assert_eq!(
            json_of(reader, &["--json", "show", "--hash", &key])["state"],
            "completed"
        );
        assert_eq!(json_of(reader, &["--json", "stats"])["stranded_claims"], 1);
        let (code, out) = records(
            reader,
            &[
                "release",
                "--owner",
                "alice",
                "--operation",
                "createWidget",
                "--key",
                "stranded",
                "--yes",
            ],
        );
        assert_eq!(code, 2, "a read-only role released a claim: {out}");
        assert!(out.contains("permission denied"), "{out}");
        // `expire` counts as a read; with --yes it is a write, refused.
        let (code, out) = records(reader, &["--json", "expire"]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(r#""due":1"#), "{out}");
        let (code, out) = records(reader, &["expire", "--yes"]);
        assert_eq!(code, 2, "a read-only role expired records: {out}");
        assert!(out.contains("permission denied"), "{out}");
    }

    // `release`: never a completed record, a live holder only with --force, only with --yes.
    let release = |key: &str, extra: &[&str]| {
        let args = [
            &[
                "release",
                "--owner",
                "alice",
                "--operation",
                "createWidget",
                "--key",
                key,
            ][..],
            extra,
        ]
        .concat();
        records(url, &args)
    };
    let (code, out) = release("done", &["--yes", "--force"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("never released"), "{out}");
    let (code, out) = release("live", &["--yes"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("alive"), "{out}");
    let (code, out) = release("stranded", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--yes"), "{out}");
    assert_eq!(
        json_of(url, &["--json", "stats"])["stranded_claims"],
        1,
        "a dry run wrote"
    );
    let (code, out) = release("stranded", &["--yes"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("released"), "{out}");
    assert_eq!(json_of(url, &["--json", "stats"])["stranded_claims"], 0);
    let (code, out) = release("live", &["--yes", "--force"]);
    assert_eq!(code, 0, "{out}");

    // `expire`: only completed records whose retention ran out, only with --yes, printing what
    // went.
    let (code, out) = records(url, &["--json", "expire", "--operation", "publishWidget"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(r#""due":0"#),
        "another operation's records: {out}"
    );
    let (code, out) = records(url, &["expire"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would delete 1 expired records"), "{out}");
    assert_eq!(
        json_of(url, &["--json", "stats"])["expired_records"],
        1,
        "a dry run wrote"
    );
    let gone = json_of(url, &["--json", "expire", "--yes"]);
    assert_eq!(
        gone,
        json!({"deleted": 1, "by_operation": [
            {"operation": "createWidget", "state": "completed", "records": 1}
        ]})
    );
    let (code, out) = records(
        url,
        &[
            "show",
            "--owner",
            "alice",
            "--operation",
            "createWidget",
            "--key",
            "aged",
        ],
    );
    assert_eq!(code, 1, "the expired record is gone: {out}");
    assert_eq!(
        json_of(url, &["--json", "show", "--hash", &key])["state"],
        "completed",
        "a record kept forever stays"
    );
    let (code, out) = records(url, &["expire", "--yes"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no record's retention has run out"), "{out}");
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// After the release, the stranded key claims afresh, once.
async fn claims_once<S: Store>(store: &Arc<S>) {
    let fingerprint = CanonicalInput::new(&json!({"name": "Sprocket"}))
        .unwrap()
        .hs2("createWidget", 1);
    let scope = scope("stranded");
    let request = |token| ClaimRequest {
        scope: &scope,
        fingerprint: &fingerprint,
        fingerprint_version: 1,
        token,
        holder: None,
        stale_after: Duration::from_secs(300),
        retention: None,
    };
    let first = store.claim(&request(ClaimToken::generate())).await.unwrap();
    assert!(
        matches!(first, ClaimOutcome::Claimed { taken_over: false }),
        "{first:?}"
    );
    let second = store.claim(&request(ClaimToken::generate())).await.unwrap();
    assert!(matches!(second, ClaimOutcome::Existing(_)), "{second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_records_are_read_and_stranded_claims_released() {
    let db = TestDb::migrated().await.expect("a test database");
    let pool = db.pool(4).await.unwrap();
    let store = Arc::new(PgStore::new(pool.clone()));
    write_records(&store).await;
    let role = format!(
        "reader_{}",
        db.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    );
    for statement in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT SELECT ON idempotency_records, idempotency_holders TO {role}"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .unwrap();
    }
    let reader = db
        .url
        .replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || reads_and_releases(&url, Some(&reader)))
        .await
        .unwrap();
    claims_once(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_records_are_read_and_stranded_claims_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("service.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    write_records(&store).await;
    let url = format!("sqlite:{}", path.display());
    tokio::task::spawn_blocking(move || reads_and_releases(&url, None))
        .await
        .unwrap();
    claims_once(&store).await;
}

//! Multipart bodies (`multipart/form-data`) typed end to end, served on a real PostgreSQL: the
//! generated server decodes the parts by name into the body struct (files as `FilePart`, text
//! parts as their types, JSON parts as JSON), validates them and fingerprints them as decoded
//! (file bytes by digest, with filename and content type), so the same parts in another order or
//! under another boundary replay and a changed byte is a 422; malformed bodies and bad parts are
//! a 400 naming the part before any claim; and the generated client sends a body the server
//! reads.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, StatusCode};
use idemgen_compile_tests::uploads::{self, types, *};
use idemgen_compile_tests::uploads_client;
use idemgen_runtime::testing::TestDb;
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, FilePart, HandlerResult, PgStore,
    Principal, Problem, ProblemKind, Server, ServerConfig, TxHandle,
};
use tower::ServiceExt;

struct Service;

impl DocumentsApi for Service {
    type Store = PgStore;

    async fn authorize_upload_document(
        &self,
        _: &Principal,
        _: &UploadDocumentRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn upload_document(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: UploadDocumentRequest,
    ) -> HandlerResult<UploadDocument> {
        let body = request.body;
        let attachments = body.attachments.as_ref().map_or(0, Vec::len) as i32;
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO documents (owner, title, filename, content_type, bytes, label, source, attachments)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(&principal.owner)
        .bind(&body.title)
        .bind(&body.file.filename)
        .bind(&body.file.content_type)
        .bind(body.file.bytes.to_vec())
        .bind(&body.label)
        .bind(body.meta.as_ref().map(|m| m.source.clone()))
        .bind(attachments)
        .fetch_one(tx.conn().await?)
        .await?;
        Ok(UploadDocumentResponse::Status201(types::Document {
            id,
            title: body.title,
            size: body.file.len() as i64,
            sha256: body.file.sha256(),
            filename: body.file.filename,
            attachments: Some(attachments),
            reviewers: Some(body.reviewers.len() as i32),
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

async fn app() -> (axum::Router, sqlx::PgPool, TestDb) {
    app_with(ServerConfig::default()).await
}

async fn app_with(config: ServerConfig) -> (axum::Router, sqlx::PgPool, TestDb) {
    let db = TestDb::migrated().await.expect("a test database");
    let pool = db.pool(4).await.expect("a pool");
    sqlx::query(
        "CREATE TABLE documents (id bigserial PRIMARY KEY, owner text NOT NULL, title text NOT NULL,
         filename text, content_type text, bytes bytea NOT NULL, label text, source text,
         attachments int NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let server = Server::new(
        Arc::new(Service),
        Anyone,
        Executor::new(PgStore::new(pool.clone()), ExecutorConfig::default()),
    )
    .with_config(config);
    (uploads::router(server), pool, db)
}

async fn rows(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A part: name, optional (filename, content type), bytes.
type Part<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a [u8]);

fn multipart(boundary: &str, parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, file, bytes) in parts {
        out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file {
            Some((filename, content_type)) => out.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {content_type}\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    out
}

async fn post(
    app: &axum::Router,
    key: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, bool, String) {
    let request = Request::post("/documents")
        .header("authorization", "alice")
        .header("idempotency-key", key)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let replayed = response.headers().contains_key("idempotent-replayed");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, replayed, String::from_utf8(bytes.to_vec()).unwrap())
}

fn form(boundary: &str) -> String {
    format!("multipart/form-data; boundary={boundary}")
}

const PDF: &[u8] = b"%PDF-1.7\x00\xff binary";

fn upload<'a>() -> Vec<Part<'a>> {
    vec![
        ("file", Some(("q3.pdf", "application/pdf")), PDF),
        ("title", None, b"Q3 report"),
        ("kind", None, b"invoice"),
        ("pages", None, b"12"),
        ("tags", None, b"finance"),
        ("tags", None, b"quarterly"),
        (
            "attachments",
            Some(("a.bin", "application/octet-stream")),
            b"A",
        ),
        (
            "attachments",
            Some(("b.bin", "application/octet-stream")),
            b"B",
        ),
        ("meta", None, br#"{"source": "scanner"}"#),
        ("label", None, br#""urgent""#),
    ]
}

#[tokio::test]
async fn the_same_parts_in_another_order_or_boundary_replay_and_a_changed_byte_is_422() {
    let (app, pool, _db) = app().await;
    let (status, replayed, first) = post(&app, "k1", &form("b1"), multipart("b1", &upload())).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(!replayed);
    let created: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(created["size"], PDF.len());
    assert_eq!(created["filename"], "q3.pdf");
    assert_eq!(created["attachments"], 2);
    let (label, source): (Option<String>, Option<String>) =
        sqlx::query_as("SELECT label, source FROM documents")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (label.as_deref(), source.as_deref()),
        (Some("urgent"), Some("scanner")),
        "the JSON parts, decoded"
    );

    // Another order of the parts (repeated parts keep theirs), another boundary, quoted.
    let mut reordered = upload();
    reordered.reverse();
    reordered.swap(2, 3); // attachments back in order (b, a → a, b)
    reordered.swap(4, 5); // tags back in order
    let (status, replayed, again) = post(
        &app,
        "k1",
        "multipart/form-data; boundary=\"another-one\"",
        multipart("another-one", &reordered),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert!(replayed, "a replay, not a second upload");
    assert_eq!(again, first, "the stored bytes");
    assert_eq!(rows(&pool).await, 1, "one execution");

    // One changed byte of the file is another request under the same key.
    let mut changed = upload();
    let mut pdf = PDF.to_vec();
    pdf[3] ^= 1;
    changed[0].2 = &pdf;
    let (status, _, text) = post(&app, "k1", &form("b1"), multipart("b1", &changed)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    assert!(text.contains("idempotency_key_reused"), "{text}");
    // So is the same file under another name: the filename belongs to the request.
    let mut renamed = upload();
    renamed[0].1 = Some(("q4.pdf", "application/pdf"));
    let (status, _, text) = post(&app, "k1", &form("b1"), multipart("b1", &renamed)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    // The order of a repeated part's values is part of its meaning.
    let mut swapped = upload();
    swapped.swap(4, 5);
    let (status, _, text) = post(&app, "k1", &form("b1"), multipart("b1", &swapped)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    assert_eq!(rows(&pool).await, 1);
}

#[tokio::test]
async fn malformed_bodies_and_bad_parts_are_400s_naming_the_part_before_any_claim() {
    let (app, pool, _db) = app().await;
    let with = |drop: &str, add: Option<Part<'static>>| {
        let mut parts: Vec<Part<'static>> = upload()
            .into_iter()
            .filter(|(n, _, _)| *n != drop)
            .collect();
        parts.extend(add);
        multipart("b", &parts)
    };
    let cases: Vec<(String, Vec<u8>, u16, &str)> = vec![
        (
            "multipart/form-data".into(),
            with("", None),
            400,
            "no `boundary`",
        ),
        (
            form("b"),
            b"--b\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nQ3".to_vec(),
            400,
            "no closing multipart delimiter",
        ),
        (
            form("b"),
            b"just text".to_vec(),
            400,
            "no multipart delimiter",
        ),
        (
            form("b"),
            b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n".to_vec(),
            400,
            "no `Content-Disposition",
        ),
        (
            form("b"),
            with("title", None),
            400,
            "body.title: the part is required",
        ),
        (
            form("b"),
            with("file", None),
            400,
            "body.file: the part is required",
        ),
        (
            form("b"),
            with("", Some(("title", None, b"again"))),
            400,
            "body.title: is given more than once",
        ),
        (
            form("b"),
            with("", Some(("file", Some(("x", "image/png")), b"x"))),
            400,
            "body.file: is given more than once",
        ),
        (
            form("b"),
            with("", Some(("other", None, b"1"))),
            400,
            "body.other: is not a part of this request",
        ),
        (
            form("b"),
            with(
                "title",
                Some(("title", None, b"a title longer than twenty")),
            ),
            400,
            "body.title: must have at most 20 characters",
        ),
        (
            form("b"),
            with("title", Some(("title", None, b""))),
            400,
            "body.title: must have at least 1 character",
        ),
        (
            form("b"),
            with(
                "file",
                Some(("file", Some(("big.pdf", "application/pdf")), &[b'x'; 65])),
            ),
            400,
            "body.file: must have at most 64 bytes",
        ),
        (
            form("b"),
            with("tags", Some(("tags", None, b"UPPER"))),
            400,
            "body.tags[0]: must match",
        ),
        (
            form("b"),
            with("kind", Some(("kind", None, b"memo"))),
            400,
            "body.kind: unknown variant `memo`",
        ),
        (
            form("b"),
            with("pages", Some(("pages", None, b"twelve"))),
            400,
            "body.pages: `twelve` is not a 32-bit integer",
        ),
        (
            form("b"),
            with("pages", Some(("pages", None, b"0"))),
            400,
            "body.pages: must be at least 1",
        ),
        (
            form("b"),
            with("meta", Some(("meta", None, b"{\"source\": 1"))),
            400,
            "body.meta: invalid JSON",
        ),
        (
            form("b"),
            with(
                "meta",
                Some(("meta", None, br#"{"source": "far too long a source"}"#)),
            ),
            400,
            "body.meta.source: must have at most 10",
        ),
        (
            form("b"),
            with("title", Some(("title", None, b"a\0b"))),
            400,
            "body.title: must not contain the NUL",
        ),
        (
            "application/json".into(),
            br#"{"title": "x"}"#.to_vec(),
            415,
            "multipart",
        ),
    ];
    for (content_type, body, status, needle) in cases {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let (got, _, text) = post(&app, "k2", &content_type, body).await;
        assert_eq!(got.as_u16(), status, "{needle}: {text}");
        let problem: serde_json::Value = serde_json::from_str(&text).unwrap();
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(needle),
            "{needle} in {detail:?} for {shown:?}"
        );
    }
    assert_eq!(rows(&pool).await, 0, "nothing executed");
    // The key was never claimed: a valid upload with it executes.
    let (status, replayed, text) = post(&app, "k2", &form("b"), multipart("b", &upload())).await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert!(!replayed);
}

#[tokio::test]
async fn the_generated_client_sends_parts_the_generated_server_reads() {
    let (app, pool, _db) = app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = uploads_client::DocumentsClient::from_client(
        idemgen_client::Client::new(format!("http://{addr}")).with_header(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("alice"),
        ),
    );
    let body = uploads_client::types::UploadDocumentRequestBody {
        file: idemgen_client::FilePart::new(PDF)
            .with_filename("q\"3\".pdf")
            .with_content_type("application/pdf"),
        title: "Q3 report".into(),
        kind: Some(uploads_client::types::UploadDocumentRequestBodyKind::Receipt),
        pages: Some(3),
        tags: Some(vec!["a".into(), "b".into()]),
        attachments: Some(vec![FilePart::new(&b"one"[..]), FilePart::new(&b"two"[..])]),
        meta: Some(uploads_client::types::Meta {
            source: "api".into(),
        }),
        label: Some("with \"quotes\"".into()),
        reviewers: vec!["ann".into()],
    };
    let options = uploads_client::CallOptions::with_key("client-key-1");
    let first = client.upload_document(&body, &options).await.unwrap();
    let uploads_client::UploadDocumentResponse::Status201(document) = &first.value;
    assert_eq!(document.size, PDF.len() as i64);
    assert_eq!(document.filename.as_deref(), Some("q\"3\".pdf"));
    assert_eq!(document.sha256, FilePart::new(PDF).sha256());
    assert_eq!(document.attachments, Some(2));
    assert_eq!(document.reviewers, Some(1));
    assert!(!first.replayed);
    // A second call encodes again, under a fresh boundary: the same request, replayed.
    let again = client.upload_document(&body, &options).await.unwrap();
    assert!(again.replayed, "the same key and parts replay");
    assert_eq!(again.value, first.value);
    let (bytes, label, source, content_type): (Vec<u8>, String, String, String) =
        sqlx::query_as("SELECT bytes, label, source, content_type FROM documents")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(bytes, PDF);
    assert_eq!(
        (label.as_str(), source.as_str(), content_type.as_str()),
        ("with \"quotes\"", "api", "application/pdf")
    );
    assert_eq!(rows(&pool).await, 1);
    // Another file under the same key is refused as another request.
    let mut other = body.clone();
    other.file = FilePart::new(&b"other"[..]);
    let refused = client.upload_document(&other, &options).await;
    assert!(
        matches!(&refused, Err(idemgen_client::Error::Problem(p)) if p.status == StatusCode::UNPROCESSABLE_ENTITY),
        "{refused:?}"
    );
    server.abort();
}

/// RFC 7578 cannot spell an empty array: a required array part given no items is sent as no
/// part, and the server reads an absent array part as the empty array (fingerprinted as `[]`).
#[tokio::test]
async fn a_required_array_part_with_no_items_is_no_part_and_reads_as_empty() {
    let (app, pool, _db) = app().await;
    // By hand: `upload()` sends no `reviewers` part.
    let (status, _, text) = post(&app, "e1", &form("b"), multipart("b", &upload())).await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let created: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["reviewers"], 0);
    // Items under the same key are another request: absent was fingerprinted as `[]`.
    let mut more = upload();
    more.push(("reviewers", None, b"ann"));
    let (status, _, text) = post(&app, "e1", &form("b"), multipart("b", &more)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    let (status, _, text) = post(&app, "e2", &form("b"), multipart("b", &more)).await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["reviewers"],
        1
    );
    // Its checks still run: three items exceed `maxItems: 2`.
    let mut three = upload();
    three.extend([
        ("reviewers", None, &b"a"[..]),
        ("reviewers", None, b"b"),
        ("reviewers", None, b"c"),
    ]);
    let (status, _, text) = post(&app, "e3", &form("b"), multipart("b", &three)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("body.reviewers"), "{text}");

    // The generated client, given `vec![]`, sends no part; the server reads it as empty.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = uploads_client::DocumentsClient::from_client(
        idemgen_client::Client::new(format!("http://{addr}")).with_header(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("alice"),
        ),
    );
    let body = uploads_client::types::UploadDocumentRequestBody {
        file: FilePart::new(PDF),
        title: "empty".into(),
        kind: None,
        pages: None,
        tags: None,
        attachments: None,
        meta: None,
        label: None,
        reviewers: vec![],
    };
    let options = uploads_client::CallOptions::with_key("e4");
    let first = client.upload_document(&body, &options).await.unwrap();
    let uploads_client::UploadDocumentResponse::Status201(document) = &first.value;
    assert_eq!(document.reviewers, Some(0));
    let again = client.upload_document(&body, &options).await.unwrap();
    assert!(again.replayed, "the same empty array, the same request");
    assert_eq!(rows(&pool).await, 3, "e1, e2 and e4 executed once each");
    server.abort();
}

/// `idemgen probe` sends multipart bodies to the operation (files as file parts, text and JSON
/// parts as theirs) and the correct server passes every check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idemgen_probe_passes_every_check_against_the_multipart_server() {
    let (app, pool, _db) = app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let report = tokio::task::spawn_blocking(move || {
        let spec_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/build/uploads/openapi.yaml");
        let spec = idemgen::loader::load(&spec_path).expect("the fixture loads");
        let options = idemgen::probe::Options {
            base_url: base,
            headers: vec![("Authorization".into(), "alice".into())],
            other_headers: vec![("Authorization".into(), "bob".into())],
            ..Default::default()
        };
        idemgen::probe::run(&spec, "Idempotency-Key", &options).expect("the probe runs")
    })
    .await
    .unwrap();
    let text = idemgen::probe::report::human(&report);
    assert!(!report.failed(), "{text}");
    assert_eq!(report.results.len(), idemgen::probe::CHECKS.len(), "{text}");
    let skipped: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.outcome != idemgen::probe::Outcome::Passed)
        .collect();
    assert!(skipped.is_empty(), "{text}");
    assert!(rows(&pool).await > 0, "the probe's uploads executed");
    server.abort();
}

/// The body limit holds for multipart bodies as for any other: a larger upload is a 413 before
/// any part is read or any key claimed; one under it is served.
#[tokio::test]
async fn an_upload_over_the_body_limit_is_413_before_any_claim() {
    let small = multipart("b", &upload()).len();
    let (app, pool, _db) = app_with(ServerConfig {
        body_limit: small + 16,
    })
    .await;
    let mut big = upload();
    let padding = vec![b'p'; 64];
    big.push(("tags", None, &padding));
    let (status, _, text) = post(&app, "k3", &form("b"), multipart("b", &big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert_eq!(rows(&pool).await, 0);
    let (status, _, text) = post(&app, "k3", &form("b"), multipart("b", &upload())).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the key was not claimed: {text}"
    );
}

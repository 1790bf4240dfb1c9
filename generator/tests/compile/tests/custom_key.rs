//! A custom key header (`header = "X-Pet-Key"` in the shapes fixture's idemgen.toml) with the
//! spec's own `maxLength: 40`: the generated router reads the key from that header only, enforces
//! its length, and names it in every key problem; `uploadPhoto` declares it optional (with the
//! rule switched off) and the server requires it anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use http::{Request, StatusCode};
use idemgen_compile_tests::shapes::*;
use idemgen_runtime::codegen::{Idempotent, KeyHeader};
use idemgen_runtime::{
    Authenticator, Credentials, Executor, ExecutorConfig, HandlerError, HandlerResult, MemoryStore,
    Principal, Problem, Server, TxHandle,
};
use tower::ServiceExt;

#[derive(Default)]
struct Pets {
    uploads: AtomicUsize,
}

impl ShapesApi for Pets {
    type Store = MemoryStore;

    async fn authorize_create_pet(
        &self,
        _: &Principal,
        _: &CreatePetRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn create_pet(
        &self,
        _: &Principal,
        _: &mut TxHandle<MemoryStore>,
        _: CreatePetRequest,
    ) -> HandlerResult<CreatePet> {
        Err(HandlerError::msg("not used here"))
    }

    async fn authorize_upload_photo(
        &self,
        _: &Principal,
        _: &UploadPhotoRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn upload_photo(
        &self,
        _: &Principal,
        _: &mut TxHandle<MemoryStore>,
        request: UploadPhotoRequest,
    ) -> HandlerResult<UploadPhoto> {
        self.uploads.fetch_add(1, Ordering::SeqCst);
        Ok(UploadPhotoResponse::Status200(format!(
            "{} bytes for pet {}",
            request.body.len(),
            request.pet_id
        )))
    }

    async fn authorize_record_readings(
        &self,
        _: &Principal,
        _: &RecordReadingsRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn record_readings(
        &self,
        _: &Principal,
        _: RecordReadingsRequest,
    ) -> HandlerResult<RecordReadings> {
        Ok(RecordReadingsResponse::Status204)
    }

    async fn authorize_open_shelter(
        &self,
        _: &Principal,
        _: &OpenShelterRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn open_shelter(
        &self,
        _: &Principal,
        request: OpenShelterRequest,
    ) -> HandlerResult<OpenShelter> {
        Ok(OpenShelterResponse::Status200(request.body.address))
    }

    async fn get_tree(&self, _: &Principal, _: GetTreeRequest) -> HandlerResult<GetTree> {
        Err(HandlerError::msg("not used here"))
    }
}

struct Anyone;

impl Authenticator for Anyone {
    async fn authenticate(&self, _: &Credentials<'_>) -> Result<Principal, Problem> {
        Ok(Principal::new("alice"))
    }
}

async fn upload(app: &axum::Router, headers: &[(&str, &str)]) -> (StatusCode, serde_json::Value) {
    let mut request = Request::builder().method("PUT").uri("/pets/7/photo");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from("\u{1}\u{2}\u{3}")).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn the_generated_operations_carry_the_spec_key() {
    assert_eq!(
        <UploadPhoto as Idempotent>::KEY,
        KeyHeader::new("X-Pet-Key", 40)
    );
    assert_eq!(<CreatePet as Idempotent>::KEY.max_len, 40);
}

#[tokio::test]
async fn the_custom_header_is_read_bounded_and_named() {
    let pets = Arc::new(Pets::default());
    let app = router(Server::new(
        Arc::clone(&pets),
        Anyone,
        Executor::new(MemoryStore::new(), ExecutorConfig::default()),
    ));
    // Optional in the spec, required by the server; the default header is not this one.
    for headers in [&[][..], &[("idempotency-key", "k1")][..]] {
        let (status, json) = upload(&app, headers).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(json["code"], "idempotency_key_missing");
        assert_eq!(
            json["detail"],
            "the X-Pet-Key header is required for this operation"
        );
        assert!(!json.to_string().contains("Idempotency-Key"), "{json}");
    }
    let long = "k".repeat(41);
    let (status, json) = upload(&app, &[("x-pet-key", &long)]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json["code"], "idempotency_key_invalid");
    assert_eq!(
        json["detail"],
        "the X-Pet-Key header is longer than 40 characters"
    );
    assert_eq!(pets.uploads.load(Ordering::SeqCst), 0);
    let key = "k".repeat(40);
    let (first, _) = upload(&app, &[("x-pet-key", &key)]).await;
    let (again, _) = upload(&app, &[("x-pet-key", &key)]).await;
    assert_eq!((first, again), (StatusCode::OK, StatusCode::OK));
    assert_eq!(pets.uploads.load(Ordering::SeqCst), 1, "the retry replayed");
}

/// Not about the key: the shapes fixture's router, serving `recordReadings`, checks its query's
/// integer `enum` (`level`: 1, 2 or 3) before anything runs.
#[tokio::test]
async fn an_integer_enum_in_the_query_is_checked() {
    let app = router(Server::new(
        Arc::new(Pets::default()),
        Anyone,
        Executor::new(MemoryStore::new(), ExecutorConfig::default()),
    ));
    let body = r#"{"readings": [{"at": "2024-01-01T00:00:00Z", "value": 1}]}"#;
    let post = |query: &str| {
        Request::builder()
            .method("POST")
            .uri(format!("/readings?sensor=1{query}"))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    for (query, expected) in [
        ("", StatusCode::NO_CONTENT),
        ("&level=2", StatusCode::NO_CONTENT),
    ] {
        let response = app.clone().oneshot(post(query)).await.unwrap();
        assert_eq!(response.status(), expected, "{query}");
    }
    let response = app.clone().oneshot(post("&level=4")).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["detail"], "query.level: must be one of 1, 2, 3");
}

/// `X-Account-Id` is marked `x-idempotency-fingerprint: true`: it enters the semantic input as
/// the `"header"` group, keyed in lower case; `X-Client-Note` is not marked and stays out.
#[test]
fn a_marked_header_enters_the_semantic_input_and_an_unmarked_one_does_not() {
    let request = |account: Option<&str>, note: Option<&str>| UploadPhotoRequest {
        pet_id: 7,
        x_account_id: account.map(str::to_owned),
        x_client_note: note.map(str::to_owned),
        body: axum::body::Bytes::from_static(b"\x01\x02"),
    };
    let input = |r: &UploadPhotoRequest| {
        serde_json::to_value(<UploadPhoto as Idempotent>::semantic_input(r)).unwrap()
    };
    assert_eq!(
        input(&request(Some("acc_1"), Some("hello"))),
        serde_json::json!({
            "path": {"petId": 7},
            "header": {"x-account-id": "acc_1"},
            "body": "0102",
        })
    );
    assert_eq!(
        input(&request(None, Some("hello")))["header"],
        serde_json::json!({})
    );
    assert_eq!(
        input(&request(Some("acc_1"), None)),
        input(&request(Some("acc_1"), Some("other note")))
    );
    assert_ne!(
        input(&request(Some("acc_1"), None)),
        input(&request(Some("acc_2"), None))
    );
}

/// Through the generated router: the same key with another `X-Account-Id` is a different request
/// (422, nothing executed), with another `X-Client-Note` the same one (a replay).
#[tokio::test]
async fn requests_differing_only_in_a_marked_header_have_different_fingerprints() {
    let pets = Arc::new(Pets::default());
    let app = router(Server::new(
        Arc::clone(&pets),
        Anyone,
        Executor::new(MemoryStore::new(), ExecutorConfig::default()),
    ));
    let key = ("x-pet-key", "photo-1");
    let (first, _) = upload(
        &app,
        &[key, ("x-account-id", "acc_1"), ("x-client-note", "a")],
    )
    .await;
    assert_eq!(first, StatusCode::OK);
    let (other_account, json) = upload(
        &app,
        &[key, ("x-account-id", "acc_2"), ("x-client-note", "a")],
    )
    .await;
    assert_eq!(other_account, StatusCode::UNPROCESSABLE_ENTITY, "{json}");
    assert_eq!(json["code"], "idempotency_key_reused");
    let (no_account, _) = upload(&app, &[key, ("x-client-note", "a")]).await;
    assert_eq!(no_account, StatusCode::UNPROCESSABLE_ENTITY);
    let (other_note, _) = upload(
        &app,
        &[key, ("X-Account-Id", "acc_1"), ("x-client-note", "b")],
    )
    .await;
    assert_eq!(other_note, StatusCode::OK);
    assert_eq!(
        pets.uploads.load(Ordering::SeqCst),
        1,
        "only the first executed"
    );
}

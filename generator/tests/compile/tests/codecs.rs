//! Every stored response shape survives encode → store → decode unchanged, and non-2xx variants
//! are never stored.

use http::{HeaderMap, StatusCode};
use idemgen_compile_tests::{shapes, widgets};
use idemgen_runtime::{ResponseCodec, StoredResponse};

/// Encodes, stores as the executor would (allowlisted and declared headers only), decodes.
fn round_trip<R: ResponseCodec + PartialEq + std::fmt::Debug>(
    response: R,
    declared: &[&str],
) -> StoredResponse {
    let encoded = response
        .encode_success()
        .unwrap()
        .expect("a 2xx variant is stored");
    let stored =
        StoredResponse::new(encoded.status, &encoded.headers, encoded.body, declared).unwrap();
    let decoded = R::decode(&stored).unwrap();
    assert_eq!(decoded, response);
    stored
}

fn not_stored<R: ResponseCodec>(response: R) {
    assert!(response.encode_success().unwrap().is_none());
}

fn widget() -> widgets::types::Widget {
    widgets::types::Widget {
        id: uuid::Uuid::nil(),
        name: "w".into(),
        color: Some(widgets::types::Color::Blue),
        published: false,
        created_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
    }
}

fn problem() -> shapes::types::Problem {
    shapes::types::Problem {
        r#type: None,
        title: Some("t".into()),
        status: Some(404),
    }
}

#[test]
fn body_and_required_header() {
    let stored = round_trip(
        widgets::CreateWidgetResponse::Status201 {
            body: widget(),
            location: "/widgets/0".into(),
        },
        &["location"],
    );
    assert_eq!(stored.status, 201);
    assert_eq!(stored.header("location"), Some("/widgets/0"));
    assert_eq!(stored.header("content-type"), Some("application/json"));
}

#[test]
fn optional_typed_header_present_and_absent() {
    for remaining in [Some(7), None] {
        let stored = round_trip(
            widgets::PublishWidgetResponse::Status200 {
                body: widget(),
                x_rate_limit_remaining: remaining,
            },
            &["x-rate-limit-remaining"],
        );
        assert_eq!(
            stored.header("x-rate-limit-remaining").map(str::to_owned),
            remaining.map(|r| r.to_string())
        );
    }
}

#[test]
fn tagged_union_body_and_headers() {
    let pet = shapes::types::Pet::Dog(shapes::types::Dog {
        kind: "dog".into(),
        name: "Rex".into(),
        born: chrono::NaiveDate::from_ymd_opt(2020, 2, 29),
        good: true,
        owner_id: None,
        toy: Some(shapes::types::DogToy::I64(3)),
        weight: Some(12.5),
        tags: Some([("a".to_owned(), "b".to_owned())].into()),
        meta: Some(serde_json::json!({"x": [1, null]})),
        seen_at: None,
        seen_at2: Some("yesterday".into()),
    });
    round_trip(
        shapes::CreatePetResponse::Status201 {
            body: pet,
            e_tag: Some("\"v1\"".into()),
            x_count: 3,
        },
        &["etag", "x-count"],
    );
}

#[test]
fn unit_range_and_default_variants() {
    round_trip(shapes::CreatePetResponse::Status202, &[]);
    round_trip(
        shapes::CreatePetResponse::Status2xx {
            status: StatusCode::from_u16(207).unwrap(),
            body: [("n".to_owned(), 1)].into(),
        },
        &[],
    );
    round_trip(shapes::UploadPhotoResponse::Status200("stored".into()), &[]);
    round_trip(
        shapes::UploadPhotoResponse::Default {
            status: StatusCode::ACCEPTED,
            body: axum::body::Bytes::from_static(b"\x00\xffraw"),
        },
        &[],
    );
}

#[test]
fn errors_are_never_stored() {
    not_stored(shapes::CreatePetResponse::Status4xx {
        status: StatusCode::NOT_FOUND,
        body: problem(),
    });
    not_stored(shapes::CreatePetResponse::Default {
        status: StatusCode::BAD_GATEWAY,
        body: serde_json::Value::Null,
    });
    not_stored(shapes::UploadPhotoResponse::Default {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        body: Default::default(),
    });
    not_stored(widgets::CreateWidgetResponse::Status409(
        widgets::types::Problem {
            r#type: "t".into(),
            title: "t".into(),
            status: 409,
            code: None,
            detail: None,
        },
    ));
}

#[test]
fn undeclared_stored_statuses_are_errors_not_panics() {
    let stored = StoredResponse {
        status: 299,
        headers: vec![],
        body: b"{}".to_vec(),
    };
    assert!(widgets::CreateWidgetResponse::decode(&stored).is_err());
    let missing_header = StoredResponse {
        status: 201,
        headers: vec![],
        body: serde_json::to_vec(&widget()).unwrap(),
    };
    assert!(widgets::CreateWidgetResponse::decode(&missing_header).is_err());
    let _ = HeaderMap::new();
}

#[test]
fn discriminator_selects_the_variant_and_names_bad_tags() {
    let cat: shapes::types::Pet =
        serde_json::from_str(r#"{"kind":"cat","name":"Tom","lives":9}"#).unwrap();
    assert!(matches!(cat, shapes::types::Pet::Cat(ref c) if c.lives == Some(9)));
    assert_eq!(
        serde_json::to_value(&cat).unwrap()["kind"],
        "cat",
        "the tag is kept on output"
    );
    let err =
        serde_json::from_str::<shapes::types::Pet>(r#"{"kind":"cow","name":"x"}"#).unwrap_err();
    assert!(err.to_string().contains("unknown `kind` cow"), "{err}");
    assert!(serde_json::from_str::<shapes::types::Pet>(r#"{"name":"x"}"#).is_err());
}

#[test]
fn range_variants_refuse_a_status_outside_their_class() {
    use axum::response::IntoResponse;
    let wrong = shapes::CreatePetResponse::Status4xx {
        status: StatusCode::OK,
        body: problem(),
    }
    .into_response();
    assert_eq!(wrong.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let right = shapes::CreatePetResponse::Status4xx {
        status: StatusCode::NOT_FOUND,
        body: problem(),
    }
    .into_response();
    assert_eq!(right.status(), StatusCode::NOT_FOUND);
    assert_eq!(right.headers()["content-type"], "application/problem+json");
}

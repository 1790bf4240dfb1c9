//! Every success shape is encoded once into the bytes that are both sent and stored, and a
//! replay sends exactly those bytes back (status, stored headers, body); the body is what the
//! typed value serialises to. Error variants are never stored: they live in their own enum, and
//! their statuses are checked.

use http::StatusCode;
use idemgen_compile_tests::{shapes, widgets};
use idemgen_runtime::codegen::Encode;
use idemgen_runtime::engine::StoredResponse;

/// Encodes, stores as the executor would (allowlisted and declared headers only), replays, and
/// checks that the replay is the first response.
fn round_trip<R: Encode + Clone>(response: R, declared: &[&str]) -> StoredResponse {
    let encoded = response.clone().encode().expect("encodes");
    assert!(encoded.status.is_success(), "{}", encoded.status);
    let stored = StoredResponse::new(
        encoded.status,
        &encoded.headers,
        encoded.body.clone(),
        declared,
    )
    .unwrap();
    let replay = idemgen_runtime::engine::replay_response(&stored);
    assert_eq!(replay.status(), encoded.status);
    for (name, value) in &encoded.headers {
        assert_eq!(replay.headers().get(name), Some(value), "{name} replayed");
    }
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(
        stored.body, encoded.body,
        "the replay sends the encoded bytes"
    );
    stored
}

/// The stored body and `value`'s JSON, to compare (response types derive `Serialize` only).
fn bodies<T: serde::Serialize>(
    stored: &StoredResponse,
    value: &T,
) -> (serde_json::Value, serde_json::Value) {
    let stored = serde_json::from_slice(&stored.body).expect("the body is JSON");
    (stored, serde_json::to_value(value).unwrap())
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
    let (stored_body, expected) = bodies(&stored, &widget());
    assert_eq!(stored_body, expected);
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
    let stored = round_trip(
        shapes::CreatePetResponse::Status201 {
            body: pet.clone(),
            e_tag: Some("\"v1\"".into()),
            x_count: 3,
        },
        &["etag", "x-count"],
    );
    let (stored_body, expected) = bodies(&stored, &pet);
    assert_eq!(stored_body, expected);
    assert_eq!(stored.header("etag"), Some("\"v1\""));
    assert_eq!(stored.header("x-count"), Some("3"));
}

#[test]
fn unit_range_and_default_variants() {
    let unit = round_trip(shapes::CreatePetResponse::Status202, &[]);
    assert_eq!((unit.status, unit.body.len()), (202, 0));
    let ranged = round_trip(
        shapes::CreatePetResponse::Status2xx {
            status: StatusCode::from_u16(207).unwrap(),
            body: [("n".to_owned(), 1)].into(),
        },
        &[],
    );
    assert_eq!(ranged.status, 207);
    let text = round_trip(shapes::UploadPhotoResponse::Status200("stored".into()), &[]);
    assert_eq!(text.body, b"stored");
    assert_eq!(text.header("content-type"), Some("text/plain"));
}

#[test]
fn error_variants_encode_with_their_status_and_are_never_successes() {
    let not_found = shapes::CreatePetError::Status4xx {
        status: StatusCode::NOT_FOUND,
        body: problem(),
    }
    .encode()
    .unwrap();
    assert_eq!(not_found.status, StatusCode::NOT_FOUND);
    assert_eq!(
        not_found.headers["content-type"],
        "application/problem+json"
    );
    let raw = shapes::UploadPhotoError::Default {
        status: StatusCode::IM_A_TEAPOT,
        body: axum::body::Bytes::from_static(b"\x00\xffraw"),
    }
    .encode()
    .unwrap();
    assert_eq!(raw.body, b"\x00\xffraw");
    // The success side owns 2xx: an error `default` answering 202 is a handler bug.
    assert!(
        shapes::UploadPhotoError::Default {
            status: StatusCode::ACCEPTED,
            body: Default::default(),
        }
        .encode()
        .is_err()
    );
    let problem = widgets::CreateWidgetError::Status400(widgets::types::Problem {
        r#type: "t".into(),
        title: "t".into(),
        status: 400,
        code: None,
        detail: None,
    })
    .encode()
    .unwrap();
    assert_eq!(problem.status, StatusCode::BAD_REQUEST);
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
    let wrong = shapes::CreatePetError::Status4xx {
        status: StatusCode::OK,
        body: problem(),
    };
    assert!(wrong.encode().is_err());
    // `createPet` is idempotent: a handler's `4XX` may not say 410, the protocol's alone. 409
    // and 422 are shared: a business conflict encodes (the pipeline then refuses one that carries
    // an idemgen problem type).
    let gone = shapes::CreatePetError::Status4xx {
        status: StatusCode::GONE,
        body: problem(),
    };
    assert!(gone.encode().is_err());
    for status in [StatusCode::CONFLICT, StatusCode::UNPROCESSABLE_ENTITY] {
        let business = shapes::CreatePetError::Status4xx {
            status,
            body: problem(),
        };
        assert_eq!(business.encode().unwrap().status, status);
    }
    let ranged = shapes::CreatePetResponse::Status2xx {
        status: StatusCode::NOT_FOUND,
        body: Default::default(),
    };
    assert!(ranged.encode().is_err());
}

/// `Dog.owner_id` is optional and nullable: absent, `null` and a value are three requests, and
/// each serialises back as it came. `Dog.born` is optional, not nullable: `null` is refused.
#[test]
fn null_and_absent_stay_apart_where_the_schema_allows_both() {
    let dog = |extra: &str| {
        serde_json::from_str::<shapes::types::Dog>(&format!(
            r#"{{"kind":"dog","name":"Rex","good":true{extra}}}"#
        ))
    };
    let absent = dog("").unwrap();
    let null = dog(r#","owner_id":null"#).unwrap();
    let set = dog(r#","owner_id":"6a2f41a3-c54c-4ce8-82d2-0324e1c32e22""#).unwrap();
    assert_eq!(absent.owner_id, None);
    assert_eq!(null.owner_id, Some(None));
    assert!(matches!(set.owner_id, Some(Some(_))));
    assert!(
        serde_json::to_value(&absent)
            .unwrap()
            .get("owner_id")
            .is_none()
    );
    assert_eq!(
        serde_json::to_value(&null).unwrap()["owner_id"],
        serde_json::Value::Null
    );
    let refused = dog(r#","born":null"#).unwrap_err();
    assert!(refused.to_string().contains("null"), "{refused}");
}

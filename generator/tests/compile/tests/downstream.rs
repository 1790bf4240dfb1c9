//! A handler's failed downstream call through a generated client becomes the problem it answers
//! (`Problem: From<idemgen_client::Error<E>>`, runtime feature `client`): 504 when the call may
//! have executed, 503 when it surely did not or the downstream asked to come back, 500 for a
//! downstream's refusal of the request as sent. Transport failures against real loopback sockets.

use std::time::Duration;

use idemgen_client::{
    Answer, Call, CallOptions, Client, Error, HeaderMap, Method, ProblemDetails, Repeat,
    RetryPolicy, StatusCode,
};
use idemgen_runtime::{Problem, ProblemKind};

/// An answer of `status` as the generated code turns it into an error.
fn answered(status: u16) -> Error<()> {
    let body = format!(r#"{{"type":"https://payments.example/p","title":"t","status":{status}}}"#);
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/problem+json".parse().unwrap());
    let answer = Answer {
        status: StatusCode::from_u16(status).unwrap(),
        headers,
        body: body.into(),
        replayed: false,
        attempts: 1,
        key: Some("idg1-x".into()),
    };
    let error = answer.error::<()>();
    assert!(
        matches!(error, Error::Problem(ref r) if r.value == ProblemDetails {
            kind: "https://payments.example/p".into(),
            title: "t".into(),
            status,
            detail: None,
            code: None,
        })
    );
    error
}

/// One keyed call without retries to `base`.
async fn call(base: &str) -> Error<()> {
    let client = Client::new(base).with_policy(RetryPolicy {
        attempt_timeout: Duration::from_millis(300),
        ..RetryPolicy::off()
    });
    let call = Call::new(
        Method::POST,
        "/charges".into(),
        Repeat::Keyed {
            header: "Idempotency-Key",
            declares_429: false,
        },
    );
    match client.send(call, &CallOptions::with_key("idg1-x")).await {
        Err(failure) => Error::Transport(failure),
        Ok(answer) => panic!("no answer expected, got {}", answer.status),
    }
}

#[test]
fn answers_map_to_the_problem_the_handler_answers() {
    for (status, kind) in [
        (500, ProblemKind::OutcomeUnknown),
        (502, ProblemKind::OutcomeUnknown),
        (503, ProblemKind::OutcomeUnknown),
        (504, ProblemKind::OutcomeUnknown),
        (409, ProblemKind::ServiceUnavailable),
        (429, ProblemKind::ServiceUnavailable),
        (400, ProblemKind::Internal),
        (402, ProblemKind::Internal),
        (422, ProblemKind::Internal),
    ] {
        let problem = Problem::from(answered(status));
        assert_eq!(problem.kind(), kind, "{status}");
        // The pipeline answers it as it is: the 504 too, made from a downstream call.
        assert!(problem.handler_may_answer(), "{status}");
        // The downstream's text stays in the logs.
        let body = String::from_utf8(problem.body_json()).unwrap();
        assert!(!body.contains("payments.example"), "{status}: {body}");
        assert!(problem.internal().unwrap().contains(&status.to_string()));
    }
}

/// The 504 is the downstream's only: a handler's own `Problem` of that kind is still the
/// protocol's, answered 500 by the pipeline.
#[test]
fn only_a_downstream_failure_may_answer_504() {
    assert!(!Problem::new(ProblemKind::OutcomeUnknown).handler_may_answer());
    assert!(!Problem::new(ProblemKind::StoreUnavailable).handler_may_answer());
    assert!(Problem::new(ProblemKind::ServiceUnavailable).handler_may_answer());
}

#[tokio::test]
async fn transport_failures_map_by_whether_the_request_may_have_arrived() {
    // Nothing listens: the request never left, 503.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let refused = call(&base).await;
    assert!(!refused.may_have_executed());
    assert_eq!(
        Problem::from(refused).kind(),
        ProblemKind::ServiceUnavailable
    );

    // A server that reads the request and never answers: it may have executed, 504.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let timed_out = call(&base).await;
    assert!(timed_out.may_have_executed());
    let problem = Problem::from(timed_out);
    assert_eq!(problem.kind(), ProblemKind::OutcomeUnknown);
    assert_eq!(problem.kind().status(), StatusCode::GATEWAY_TIMEOUT);
    server.abort();
}

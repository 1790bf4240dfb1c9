//! Keys with a query or a fragment (`path-unroutable`, turned off for the fixture; the generated
//! router leaves them out, tested in the generator's `routes.rs`): the generated client calls
//! them as written, the key's query as leading pairs before the parameters' (not a second `?`),
//! and its fragment never sent (a `#` in the URL would turn every parameter after it into the
//! fragment, which no request carries).

use idemgen_client::CallOptions;
use idemgen_compile_tests::unroutable_client::{
    GetSharedFileParams, GetSharedFileResponse, KeysClient, ListResponsesParams,
    ListResponsesResponse,
};

/// A server answering every request with its path and query, as received.
async fn echo() -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let app = axum::Router::new().fallback(|uri: axum::http::Uri| async move { uri.to_string() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    (
        base,
        tokio::spawn(async move { axum::serve(listener, app).await }),
    )
}

#[tokio::test]
async fn a_query_in_the_key_leads_the_parameters_and_a_fragment_is_never_sent() {
    let (base, server) = echo().await;
    let client = KeysClient::new(&base);
    let options = CallOptions::default();

    let listed = client
        .list_responses(&ListResponsesParams { limit: Some(5) }, &options)
        .await
        .unwrap();
    let ListResponsesResponse::Status200(seen) = listed.value;
    assert_eq!(seen, "/responses?beta=true&mode=a%20b&limit=5");
    let bare = client
        .list_responses(&ListResponsesParams { limit: None }, &options)
        .await
        .unwrap();
    let ListResponsesResponse::Status200(seen) = bare.value;
    assert_eq!(seen, "/responses?beta=true&mode=a%20b");

    let file = client
        .get_shared_file(
            &"a b".to_string(),
            &GetSharedFileParams { limit: Some(5) },
            &options,
        )
        .await
        .unwrap();
    let GetSharedFileResponse::Status200(seen) = file.value;
    assert_eq!(seen, "/files/a%20b?limit=5");
    server.abort();
}

//! Constructs published specs write that OpenAPI forbids or that were once misread: each is read
//! as the spec means it, or reported.

use std::path::Path;

use idemgen::ir::types::TypeRef;
use idemgen::ir::{Api, BodyKind};
use idemgen::loader::{MemoryFs, load_with};
use idemgen::{Config, check_loaded};

/// A `$ref` written in place of a `content` map (Lob writes 52): the map is the referenced one,
/// as Spectral reads it: typed bodies, no media type named `$ref`, and the file it is in loaded.
#[test]
fn a_ref_in_place_of_content_is_the_referenced_map() {
    let mut fs = MemoryFs::new();
    fs.insert(
        "api/openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: Letters, version: '1'}\npaths:\n  /letters:\n    post:\n      operationId: createLetter\n      requestBody:\n        content:\n          $ref: 'bodies/letter.yaml'\n      responses:\n        '200':\n          description: The letter.\n          content:\n            $ref: 'bodies/letter.yaml'\n",
    );
    fs.insert(
        "api/bodies/letter.yaml",
        "application/json:\n  schema:\n    $ref: '../schemas/letter.yaml'\n",
    );
    fs.insert(
        "api/schemas/letter.yaml",
        "title: Letter\ntype: object\nproperties:\n  to: {type: string, maxLength: 40, not: {const: nobody}}\n",
    );
    let spec = load_with(&fs, Path::new("api/openapi.yaml")).expect("loads");
    let report = check_loaded(spec, &Config::default());
    let messages: Vec<&str> = report.findings.iter().map(|f| f.message.as_str()).collect();
    assert!(
        messages.iter().all(|m| !m.contains("$ref")),
        "a finding took `$ref` for a media type: {messages:?}"
    );
    // The request schema behind the reference is walked: its `not` is reported, in its file.
    let not = report
        .findings
        .iter()
        .find(|f| f.rule.as_str() == "keyword-not-enforced")
        .expect("the `not` behind the referenced content is reported");
    assert!(
        not.message.starts_with("`not` is not enforced"),
        "{}",
        not.message
    );
    let api = Api::from_spec(&report.spec, "Idempotency-Key");
    let op = &api.operations[0];
    let body = op.body.as_ref().expect("a request body");
    assert_eq!(body.media_type, "application/json");
    assert!(
        matches!(&body.kind, BodyKind::Json(TypeRef::Named(n)) if n == "Letter"),
        "{:?}",
        body.kind
    );
    let response = op.responses[0].body.as_ref().expect("a response body");
    assert_eq!(response.media_type, "application/json");
    assert!(
        matches!(&response.kind, BodyKind::Json(TypeRef::Named(n)) if n == "Letter"),
        "{:?}",
        response.kind
    );
}

fn load(files: &[(&str, &str)]) -> idemgen::CheckReport {
    let mut fs = MemoryFs::new();
    for (path, text) in files {
        fs.insert(path, *text);
    }
    let spec = load_with(&fs, Path::new(files[0].0)).expect("loads");
    check_loaded(spec, &Config::default())
}

/// An operation whose only declared answer is a redirect (GitHub's downloads: `302` with a
/// `Location`) succeeds with it: the success enum holds the redirect, so a handler can answer
/// it and the generated client returns it as `Ok`. An idempotent operation's redirect stays an
/// error (only 2xx answers are stored and replayed).
#[test]
fn an_operation_answering_only_a_redirect_succeeds_with_it() {
    let report = load(&[(
        "openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: Archives, version: '1'}\npaths:\n  /archives/{id}:\n    get:\n      operationId: downloadArchive\n      parameters:\n        - {name: id, in: path, required: true, schema: {type: string}}\n      responses:\n        '302':\n          description: The archive's location.\n          headers:\n            Location: {schema: {type: string}}\n        '404': {description: No such archive.}\n",
    )]);
    assert_eq!(report.errors(), 0, "{:?}", report.findings);
    let api = Api::from_spec(&report.spec, "Idempotency-Key");
    let op = &api.operations[0];
    let successes: Vec<&str> = op.success_responses().map(|r| r.variant.as_str()).collect();
    assert_eq!(successes, ["Status302"]);
    let errors: Vec<&str> = op.error_responses().map(|r| r.variant.as_str()).collect();
    assert_eq!(errors, ["Status404"]);
    let client = idemgen::emit::client::emit_client(&api, "openapi.yaml").expect("emits");
    assert!(
        client.contains("one variant per declared redirect (it declares no 2xx response)"),
        "the client's success enum is the redirect"
    );
    let server = idemgen::emit::emit(&api, "openapi.yaml").expect("emits");
    assert!(server.contains("Status302"));

    // The same redirect on an idempotent operation is not a success: it is not stored.
    let marked = load(&[(
        "openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: Archives, version: '1'}\npaths:\n  /archives:\n    post:\n      operationId: createArchive\n      x-idempotent: true\n      parameters:\n        - {name: Idempotency-Key, in: header, required: true, schema: {type: string, maxLength: 255}}\n      responses:\n        '303': {description: See the archive.}\n",
    )]);
    let api = Api::from_spec(&marked.spec, "Idempotency-Key");
    assert_eq!(api.operations[0].success_responses().count(), 0);
}

/// Integer and string enums written as a `oneOf` of titled constants (Discord's 91) are enums:
/// an integer checked against its values, a string enum a Rust enum; a `const` without `type`
/// is typed by its value.
#[test]
fn a_one_of_of_constants_is_an_enum() {
    let report = load(&[(
        "openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: Activities, version: '1'}\npaths:\n  /activities:\n    post:\n      operationId: createActivity\n      requestBody:\n        required: true\n        content:\n          application/json:\n            schema: {$ref: '#/components/schemas/Activity'}\n      responses:\n        '201': {description: Created.}\ncomponents:\n  schemas:\n    Activity:\n      type: object\n      required: [action, kind, version]\n      properties:\n        action: {$ref: '#/components/schemas/ActionType'}\n        kind: {$ref: '#/components/schemas/ActivityKind'}\n        version: {const: 2}\n    ActionType:\n      type: integer\n      format: int32\n      oneOf:\n        - {title: JOIN, const: 1}\n        - {title: SPECTATE, const: 2, description: Watches.}\n        - {title: LISTEN, const: 3}\n    ActivityKind:\n      oneOf:\n        - {title: Game, const: game}\n        - {title: Music, const: music}\n",
    )]);
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.rule.as_str() != "keyword-not-enforced"),
        "{:?}",
        report.findings
    );
    let api = Api::from_spec(&report.spec, "Idempotency-Key");
    let server = idemgen::emit::emit(&api, "openapi.yaml").expect("emits");
    assert!(!server.contains("Json2"), "alternatives became JSON values");
    assert!(
        server.contains("cg::check_one_of(path, [1, 2, 3].contains(value), \"1, 2, 3\")"),
        "the integer enum is checked"
    );
    let kind = api
        .types
        .iter()
        .find(|t| t.name == "ActivityKind")
        .expect("ActivityKind");
    assert!(
        format!("{:?}", kind.kind).contains("\"game\"")
            && format!("{:?}", kind.kind).contains("\"music\""),
        "a string enum of its values: {:?}",
        kind.kind
    );
    assert!(
        server.contains("pub version: i64"),
        "a `const` without `type` is typed by its value"
    );
}

/// The generated docs name "the GitHub v3 REST API", not "the GitHub v3 REST API API".
#[test]
fn a_title_ending_in_api_is_not_doubled() {
    let report = load(&[(
        "openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: GitHub v3 REST API, version: '1'}\npaths:\n  /meta:\n    get:\n      operationId: meta\n      responses:\n        '200': {description: ok}\n",
    )]);
    let api = Api::from_spec(&report.spec, "Idempotency-Key");
    assert_eq!(api.described(), "GitHub v3 REST API");
    let server = idemgen::emit::emit(&api, "openapi.yaml").expect("emits");
    let client = idemgen::emit::client::emit_client(&api, "openapi.yaml").expect("emits");
    for text in [&server, &client] {
        assert!(!text.contains("API API"));
        assert!(text.contains("GitHub v3 REST API"));
    }
}

/// Help snippets name what the spec has: its own security schemes, its spelling of the key.
#[test]
fn help_snippets_use_the_specs_own_names() {
    let report = load(&[(
        "openapi.yaml",
        "openapi: 3.1.0\ninfo: {title: Bots, version: '1'}\npaths:\n  /messages:\n    post:\n      operationId: createMessage\n      x-idempotent: true\n      security: []\n      parameters:\n        - {name: idempotency-key, in: header, schema: {type: string, maxLength: 255}}\n      responses:\n        '201': {description: Created.}\n  /bans:\n    post:\n      operationId: createBan\n      security:\n        - basicAuth: []\n      responses:\n        '201': {description: Created.}\ncomponents:\n  securitySchemes:\n    BotToken: {type: apiKey, in: header, name: Authorization}\n    OAuth2:\n      type: oauth2\n      flows:\n        clientCredentials: {tokenUrl: 'https://example.com/token', scopes: {}}\n",
    )]);
    let help = |rule: &str| {
        report
            .findings
            .iter()
            .find(|f| f.rule.as_str() == rule)
            .unwrap_or_else(|| panic!("no {rule}: {:?}", report.findings))
            .help
            .clone()
    };
    let anonymous = help("idempotent-anonymous");
    assert!(anonymous.contains("- BotToken: []"), "{anonymous}");
    assert!(anonymous.contains("`BotToken` or `OAuth2`"), "{anonymous}");
    assert!(!anonymous.contains("bearer"), "{anonymous}");
    let unknown = help("security-scheme-unknown");
    assert!(unknown.contains("`BotToken` or `OAuth2`"), "{unknown}");
    assert!(unknown.contains("scheme: basic"), "{unknown}");
    let required = help("idempotency-key-not-required");
    assert!(required.contains("- name: idempotency-key\n"), "{required}");
}

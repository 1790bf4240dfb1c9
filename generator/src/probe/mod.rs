//! `idemgen probe`: checks a running server against the idempotency protocol, from its spec.
//!
//! For every `x-idempotent` operation the probe builds a valid request (examples first, else
//! values synthesized from the schemas), finds its path parameters (`--path-param`, or the
//! resource a same-prefix create returns), and runs the checks of [`CHECKS`] over real HTTP. A
//! check the spec or the server gives no way to run is skipped with its reason, never passed.
//! It creates real resources on the server.

pub mod http;
pub mod report;
pub mod synth;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::ir::{Api, ParamLocation};
use crate::loader::{LoadedSpec, Node, NodeRef};
use http::{Exchange, Request};

/// Every check: its stable id and what it verifies, in the order it runs.
pub const CHECKS: [(&str, &str); 10] = [
    (
        "key-missing",
        "a request without the key header is refused with 400",
    ),
    (
        "key-malformed",
        "a key with a space, a tab, or one character over the header's maxLength is refused with 400",
    ),
    (
        "key-at-limit",
        "a key of exactly the header's maxLength (at most 255) is accepted (2xx)",
    ),
    (
        "first-succeeds",
        "the first request with a fresh key succeeds (2xx)",
    ),
    (
        "retry-replays",
        "a retry gets the same status, body bytes and Location, marked Idempotent-Replayed: true",
    ),
    (
        "changed-request",
        "the same key with another request is refused with 422",
    ),
    (
        "failure-not-stored",
        "a failed request (an invalid body) is not stored: the valid request with its key then executes",
    ),
    (
        "concurrent",
        "20 concurrent requests with one key get one distinct 2xx body; the others 409 with Retry-After",
    ),
    (
        "owners-independent",
        "another credential (--other-header) with the same key gets its own result, not a replay",
    ),
    (
        "problem-json",
        "the protocol's error answers (400, 409, 422) are application/problem+json",
    ),
];

/// What the probe was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The server, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    /// Headers sent with every request (credentials): `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// A second credential's headers, for `owners-independent`.
    pub other_headers: Vec<(String, String)>,
    /// Only these operationIds (all idempotent ones when empty).
    pub only: Vec<String>,
    /// Path parameter values by name.
    pub path_params: BTreeMap<String, String>,
    /// Print the requests instead of sending them.
    pub dry_run: bool,
}

/// How one check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It held.
    Passed,
    /// It did not: what was sent and what came back.
    Failed {
        /// Why, in one line.
        why: String,
        /// The exchange that shows it.
        evidence: Option<Exchange>,
    },
    /// It could not be run.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One check of one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    /// The operationId.
    pub operation: String,
    /// The check's id (see [`CHECKS`]).
    pub check: &'static str,
    /// How it ended.
    pub outcome: Outcome,
}

/// What the probe found.
#[derive(Debug, Clone, Default)]
pub struct ProbeReport {
    /// Every check of every operation probed, in order.
    pub results: Vec<CheckResult>,
    /// Requests printed by `--dry-run`: (operation and check, request).
    pub dry_run: Vec<(String, Request)>,
}

impl ProbeReport {
    /// Whether a check failed.
    pub fn failed(&self) -> bool {
        self.results
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed { .. }))
    }
}

/// Why the probe could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// `--only` named an operation that is not an `x-idempotent` operation of the spec.
    #[error("{0} is not an x-idempotent operation of the spec")]
    UnknownOperation(String),
    /// The spec marks no operation `x-idempotent: true`.
    #[error("the spec marks no operation x-idempotent: true; nothing to probe")]
    NothingToProbe,
    /// The server could not be reached.
    #[error("cannot reach {url}: {why}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The transport error.
        why: String,
    },
}

/// One operation's requests, as the probe builds them.
struct Target {
    id: String,
    method: String,
    path: Result<String, String>,
    key_header: String,
    /// The longest key the operation accepts: its header's `maxLength`, at most 255.
    max_key_length: usize,
    /// The shortest key its spec allows: the header's `minLength` (at least 1).
    min_key_length: usize,
    content_type: Option<String>,
    /// A valid body, and a second valid one that differs (for `changed-request`).
    body: Option<(Value, Option<Value>)>,
    /// The declared 4xx statuses (codes, and `4XX`/`default` as 4xx at large): a business answer
    /// is one of these.
    declared_4xx: Declared4xx,
}

/// Which 4xx answers the operation declares.
#[derive(Debug, Clone, Default)]
struct Declared4xx {
    codes: Vec<u16>,
    any: bool,
}

impl Declared4xx {
    fn of(op: &crate::ir::OperationIr) -> Declared4xx {
        let mut out = Declared4xx::default();
        for r in &op.responses {
            match r.status {
                crate::ir::StatusKey::Code(c @ 400..=499) => out.codes.push(c),
                crate::ir::StatusKey::Range(4) | crate::ir::StatusKey::Default => out.any = true,
                _ => {}
            }
        }
        out
    }

    fn contains(&self, status: u16) -> bool {
        (400..500).contains(&status) && (self.any || self.codes.contains(&status))
    }
}

/// The problem `type` of an answer, when it is problem+json with one.
fn problem_type(got: &http::Got) -> Option<String> {
    got.header("content-type")
        .is_some_and(|ct| ct.starts_with(idemgen_protocol::problem::PROBLEM_JSON))
        .then(|| serde_json::from_slice::<Value>(&got.body).ok())
        .flatten()?
        .get("type")?
        .as_str()
        .map(str::to_owned)
}

/// Whether an answer is the protocol's 409 or 422 (told apart from a business conflict by its
/// problem type, protocol.md "Status codes and problem types").
fn protocol_conflict(got: &http::Got) -> bool {
    matches!(got.status, 409 | 422)
        && problem_type(got)
            .is_some_and(|t| idemgen_protocol::problem::protocol_problem(got.status, &t).is_some())
}

/// Why an answer is the handler's business answer rather than the protocol's or a failure: a
/// declared 4xx that is not a request the probe got wrong (400, 401, 405, 413, 415) and not one of
/// the protocol's problems. A check that meets one on a setup or first request is skipped with
/// it as the reason, never failed: the server's state, not its protocol, answered.
fn business_answer(exchange: &Exchange, declared: &Declared4xx) -> Option<String> {
    let got = &exchange.got;
    if !declared.contains(got.status) || matches!(got.status, 400 | 401 | 405 | 413 | 415) {
        return None;
    }
    let kind = problem_type(got);
    if kind
        .as_deref()
        .is_some_and(|t| idemgen_protocol::problem::protocol_problem(got.status, t).is_some())
    {
        return None;
    }
    Some(format!(
        "the server answered a business {}{} (declared, not the protocol's)",
        got.status,
        kind.map(|t| format!(" `{t}`")).unwrap_or_default()
    ))
}

/// `key` itself when the operation's spec allows its length, else padded to `min` or replaced by
/// a digest of it cut to at most 32 characters (at least `min`, at most `max`): the probe's keys
/// fit the header's `minLength`..`maxLength` (a UUID-sized 36..36 is common) and stay distinct
/// per run and per check.
fn fitted(key: String, min: usize, max: usize) -> String {
    if key.len() < min {
        return key_of_length(&key, min);
    }
    if key.len() <= max {
        return key;
    }
    use sha2::Digest;
    // Shorter than the limit where it can be: only `key-at-limit` sends a key at it.
    let digest = hex_lower(&sha2::Sha256::digest(key.as_bytes()));
    key_of_length(&digest, max.clamp(1, 32).max(min))
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A key of exactly `len` characters starting with `base` (cut or padded with `k`).
fn key_of_length(base: &str, len: usize) -> String {
    let mut key: String = base.chars().take(len).collect();
    while key.len() < len {
        key.push('k');
    }
    key
}

impl Target {
    /// One character more than the operation accepts.
    fn too_long_key(&self) -> String {
        "k".repeat(self.max_key_length + 1)
    }

    fn request(&self, options: &Options, key: Option<&str>, body: Option<&Value>) -> Request {
        let mut headers = options.headers.clone();
        if let Some(key) = key {
            headers.push((self.key_header.clone(), key.to_string()));
        }
        if let (Some(ct), Some(_)) = (&self.content_type, body) {
            headers.push(("content-type".into(), ct.clone()));
        }
        Request {
            method: self.method.to_ascii_uppercase(),
            url: format!(
                "{}{}",
                options.base_url.trim_end_matches('/'),
                self.path.as_deref().unwrap_or("")
            ),
            headers,
            body: body.map(|b| serde_json::to_vec(b).unwrap_or_default()),
        }
    }
}

/// Runs the probe of `spec` (which passed `check`) against the server `options` names;
/// `key_header` is the configured key header name (idemgen.toml).
pub fn run(
    spec: &LoadedSpec,
    key_header: &str,
    options: &Options,
) -> Result<ProbeReport, ProbeError> {
    let api = Api::from_spec(spec, key_header);
    let idempotent: Vec<_> = api
        .operations
        .iter()
        .filter(|op| op.is_idempotent())
        .collect();
    if idempotent.is_empty() {
        return Err(ProbeError::NothingToProbe);
    }
    for name in &options.only {
        if !idempotent.iter().any(|op| &op.id == name) {
            return Err(ProbeError::UnknownOperation(name.clone()));
        }
    }
    let run_tag = run_tag();
    let mut report = ProbeReport::default();
    for op in idempotent {
        if !options.only.is_empty() && !options.only.contains(&op.id) {
            continue;
        }
        let target = target(spec, &api, op, options, &run_tag);
        if options.dry_run {
            dry_run(&target, options, &run_tag, &mut report);
            continue;
        }
        probe_operation(&target, options, &run_tag, &mut report)?;
    }
    Ok(report)
}

/// A tag unique to this run, in keys and free-form strings.
fn run_tag() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", now, std::process::id())
}

/// The operation node of `op` in the spec.
fn operation_node<'s>(spec: &'s LoadedSpec, method: &str, path: &str) -> Option<NodeRef<'s>> {
    crate::spec::operations(spec)
        .into_iter()
        .find(|o| o.method.eq_ignore_ascii_case(method) && o.path == path)
        .map(|o| o.node)
}

/// The JSON request body of an operation node: (media type, an example or synthesized value, a
/// second value that differs).
fn body_of(
    spec: &LoadedSpec,
    node: NodeRef<'_>,
    tag: &str,
) -> Option<(String, Value, Option<Value>)> {
    let body = node.node.get("requestBody")?;
    let body = spec.deref(NodeRef {
        file: node.file,
        node: body,
    });
    let content = body.node.get("content").and_then(Node::as_map)?;
    let (media_type, media) = content
        .entries()
        .iter()
        .find(|(k, _)| k.text.contains("json"))?;
    let media = NodeRef {
        file: body.file,
        node: media,
    };
    let schema = media.node.get("schema").map(|s| NodeRef {
        file: media.file,
        node: s,
    });
    let first = synth::media_example(spec, media)
        .or_else(|| schema.map(|s| synth::value(spec, s, &format!("{tag}a"))))?;
    let second = schema
        .map(|s| synth::value(spec, s, &format!("{tag}b")))
        .filter(|v| *v != first)
        .or_else(|| synth::changed(&first));
    Some((media_type.text.clone(), first, second))
}

fn target(
    spec: &LoadedSpec,
    api: &Api,
    op: &crate::ir::OperationIr,
    options: &Options,
    tag: &str,
) -> Target {
    let mut target = unresolved(spec, op, tag);
    for p in op.params_in(ParamLocation::Path) {
        let value = match options.path_params.get(&p.wire) {
            Some(v) => Ok(v.clone()),
            None if options.dry_run => Ok(format!("{{{}}}", p.wire)),
            None => resource_from_create(spec, api, op, &p.wire, options, tag),
        };
        target.path = match (target.path, value) {
            (Ok(path), Ok(value)) => Ok(path.replace(&format!("{{{}}}", p.wire), &value)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
    }
    target
}

/// An operation's requests with its path template as it is (parameters not filled in).
fn unresolved(spec: &LoadedSpec, op: &crate::ir::OperationIr, tag: &str) -> Target {
    let node = operation_node(spec, &op.http_method, &op.path);
    let body = node.and_then(|n| body_of(spec, n, tag));
    Target {
        id: op.id.clone(),
        method: op.http_method.clone(),
        path: Ok(op.path.clone()),
        key_header: op
            .idempotency
            .as_ref()
            .map(|i| i.key.header.clone())
            .unwrap_or_default(),
        max_key_length: op
            .idempotency
            .as_ref()
            .map_or(idemgen_protocol::MAX_KEY_LEN, |i| {
                usize::try_from(i.key.max_length).unwrap_or(idemgen_protocol::MAX_KEY_LEN)
            }),
        min_key_length: op
            .idempotency
            .as_ref()
            .map_or(1, |i| usize::try_from(i.key.min_length).unwrap_or(1)),
        content_type: body.as_ref().map(|(ct, _, _)| ct.clone()),
        body: body.map(|(_, first, second)| (first, second)),
        declared_4xx: Declared4xx::of(op),
    }
}

/// A path parameter's value from a create: the `POST` on the path before the parameter's
/// segment (`/widgets` for `/widgets/{id}/publish`), its body's property of the parameter's
/// name, else the last segment of its `Location`.
fn resource_from_create(
    spec: &LoadedSpec,
    api: &Api,
    op: &crate::ir::OperationIr,
    param: &str,
    options: &Options,
    tag: &str,
) -> Result<String, String> {
    let marker = format!("/{{{param}}}");
    let prefix = op
        .path
        .split(&marker)
        .next()
        .unwrap_or_default()
        .to_string();
    let Some(create) = api
        .operations
        .iter()
        .find(|o| o.http_method == "post" && o.path == prefix)
    else {
        return Err(format!(
            "no value for path parameter `{param}`: pass --path-param {param}=VALUE (no POST {prefix} to create one)"
        ));
    };
    let create_target = unresolved(spec, create, &format!("{tag}r"));
    let key = fitted(
        format!("probe-{tag}-{}-resource", op.id),
        create_target.min_key_length,
        create_target.max_key_length,
    );
    let request = create_target.request(
        options,
        create.is_idempotent().then_some(key.as_str()),
        create_target.body.as_ref().map(|(b, _)| b),
    );
    let exchange =
        http::send(&request).map_err(|e| format!("creating a resource for `{param}`: {e}"))?;
    let got = &exchange.got;
    if !(200..300).contains(&got.status) {
        return Err(format!(
            "creating a resource for `{param}` with POST {prefix} answered {}",
            got.status
        ));
    }
    if let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&got.body)
        && let Some(value) = body.get(param)
    {
        return Ok(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    if let Some(location) = got.header("location")
        && let Some(last) = location.trim_end_matches('/').rsplit('/').next()
    {
        return Ok(last.to_string());
    }
    Err(format!(
        "no value for path parameter `{param}`: POST {prefix} returned neither a `{param}` property nor a Location"
    ))
}

fn dry_run(target: &Target, options: &Options, tag: &str, report: &mut ProbeReport) {
    let key = |suffix: &str| {
        fitted(
            format!("probe-{tag}-{}-{suffix}", target.id),
            target.min_key_length,
            target.max_key_length,
        )
    };
    let body = target.body.as_ref().map(|(b, _)| b);
    let second = target.body.as_ref().and_then(|(_, s)| s.as_ref());
    let invalid = Value::Array(vec![]);
    let long = target.too_long_key();
    let at_limit = key_of_length(&key("limit"), target.max_key_length);
    let mut plan: Vec<(&str, Request)> = vec![
        ("key-missing", target.request(options, None, body)),
        (
            "key-malformed",
            target.request(options, Some("has space"), body),
        ),
        (
            "key-malformed",
            target.request(options, Some("has\ttab"), body),
        ),
        ("key-malformed", target.request(options, Some(&long), body)),
        (
            "key-at-limit",
            target.request(options, Some(&at_limit), body),
        ),
        (
            "first-succeeds",
            target.request(options, Some(&key("first")), body),
        ),
        (
            "retry-replays",
            target.request(options, Some(&key("first")), body),
        ),
    ];
    if let Some(second) = second {
        plan.push((
            "changed-request",
            target.request(options, Some(&key("first")), Some(second)),
        ));
    }
    if body.is_some() {
        plan.push((
            "failure-not-stored",
            target.request(options, Some(&key("failure")), Some(&invalid)),
        ));
        plan.push((
            "failure-not-stored",
            target.request(options, Some(&key("failure")), body),
        ));
    }
    plan.push((
        "concurrent (20 copies at once)",
        target.request(options, Some(&key("storm")), body),
    ));
    if !options.other_headers.is_empty() {
        let other = Options {
            headers: options.other_headers.clone(),
            ..options.clone()
        };
        plan.push((
            "owners-independent",
            target.request(&other, Some(&key("first")), body),
        ));
    }
    for (check, request) in plan {
        report
            .dry_run
            .push((format!("{} {check}", target.id), request));
    }
}

/// Runs every check of one operation.
fn probe_operation(
    target: &Target,
    options: &Options,
    tag: &str,
    report: &mut ProbeReport,
) -> Result<(), ProbeError> {
    let mut record = |check: &'static str, outcome: Outcome| {
        report.results.push(CheckResult {
            operation: target.id.clone(),
            check,
            outcome,
        })
    };
    if let Err(reason) = &target.path {
        for (check, _) in CHECKS {
            record(
                check,
                Outcome::Skipped {
                    reason: reason.clone(),
                },
            );
        }
        return Ok(());
    }
    let key = |suffix: &str| {
        fitted(
            format!("probe-{tag}-{}-{suffix}", target.id),
            target.min_key_length,
            target.max_key_length,
        )
    };
    let body = target.body.as_ref().map(|(b, _)| b);
    let send = |request: &Request| -> Result<Exchange, ProbeError> {
        http::send(request).map_err(|why| ProbeError::Unreachable {
            url: request.url.clone(),
            why,
        })
    };
    let mut problems: Vec<Exchange> = Vec::new();

    // key-missing
    let missing = send(&target.request(options, None, body))?;
    record("key-missing", expect_status(&missing, 400));
    problems.push(missing);

    // key-malformed
    let long = target.too_long_key();
    let mut malformed = Outcome::Passed;
    for bad in ["has space", "has\ttab", long.as_str()] {
        let exchange = send(&target.request(options, Some(bad), body))?;
        if let outcome @ Outcome::Failed { .. } = expect_status(&exchange, 400) {
            malformed = outcome;
            break;
        }
        problems.push(exchange);
    }
    record("key-malformed", malformed);

    // key-at-limit
    let at_limit = send(&target.request(
        options,
        Some(&key_of_length(&key("limit"), target.max_key_length)),
        body,
    ))?;
    let business = |e: &Exchange| business_answer(e, &target.declared_4xx);
    record(
        "key-at-limit",
        if (200..300).contains(&at_limit.got.status) {
            Outcome::Passed
        } else if let Some(reason) = business(&at_limit) {
            Outcome::Skipped { reason }
        } else {
            failed(
                &at_limit,
                format!(
                    "a key of {} characters (the header's maxLength) answered {}, not 2xx",
                    target.max_key_length, at_limit.got.status
                ),
            )
        },
    );

    // first-succeeds, retry-replays
    let first_key = key("first");
    let first = send(&target.request(options, Some(&first_key), body))?;
    let first_ok = (200..300).contains(&first.got.status);
    let first_business = business(&first);
    record(
        "first-succeeds",
        match &first_business {
            _ if first_ok => Outcome::Passed,
            Some(reason) => Outcome::Skipped {
                reason: reason.clone(),
            },
            None => failed(&first, format!("answered {}, not 2xx", first.got.status)),
        },
    );
    let skipped_first = || Outcome::Skipped {
        reason: match &first_business {
            Some(reason) => format!("the first request did not succeed: {reason}"),
            None => "the first request did not succeed".into(),
        },
    };
    if first_ok {
        let retry = send(&target.request(options, Some(&first_key), body))?;
        record("retry-replays", replay_of(&first, &retry));
    } else {
        record("retry-replays", skipped_first());
    }

    // changed-request
    match (
        first_ok,
        target.body.as_ref().and_then(|(_, second)| second.as_ref()),
    ) {
        (false, _) => record("changed-request", skipped_first()),
        (true, None) => record(
            "changed-request",
            Outcome::Skipped {
                reason: "the operation has no JSON body the probe can vary".into(),
            },
        ),
        (true, Some(second)) => {
            let changed = send(&target.request(options, Some(&first_key), Some(second)))?;
            record("changed-request", expect_status(&changed, 422));
            problems.push(changed);
        }
    }

    // failure-not-stored
    if target.body.is_none() {
        record(
            "failure-not-stored",
            Outcome::Skipped {
                reason: "the operation has no JSON body the probe can make invalid".into(),
            },
        );
    } else {
        let failure_key = key("failure");
        let invalid =
            send(&target.request(options, Some(&failure_key), Some(&Value::Array(vec![]))))?;
        if (200..300).contains(&invalid.got.status) {
            record(
                "failure-not-stored",
                Outcome::Skipped {
                    reason: "the server accepted an invalid body (`[]`), so no failure could be provoked".into(),
                },
            );
        } else {
            let valid = send(&target.request(options, Some(&failure_key), body))?;
            let executed = (200..300).contains(&valid.got.status) && !valid.got.replayed();
            record(
                "failure-not-stored",
                if executed {
                    Outcome::Passed
                } else if let Some(reason) = business(&valid) {
                    Outcome::Skipped { reason }
                } else {
                    failed(
                        &valid,
                        format!(
                            "after a {} for an invalid body, the valid request with the same key answered {}{}",
                            invalid.got.status,
                            valid.got.status,
                            if valid.got.replayed() {
                                " (a replay)"
                            } else {
                                ""
                            }
                        ),
                    )
                },
            );
        }
    }

    // concurrent
    let storm_key = key("storm");
    let request = target.request(options, Some(&storm_key), body);
    let answers = http::send_concurrently(&request, 20);
    record(
        "concurrent",
        concurrent(&answers, &target.declared_4xx, &mut problems),
    );

    // owners-independent
    if options.other_headers.is_empty() {
        record(
            "owners-independent",
            Outcome::Skipped {
                reason: "no second credential: pass --other-header".into(),
            },
        );
    } else if !first_ok {
        record("owners-independent", skipped_first());
    } else {
        let other = Options {
            headers: options.other_headers.clone(),
            ..options.clone()
        };
        let theirs = send(&target.request(&other, Some(&first_key), body))?;
        record("owners-independent", independent(&first, &theirs));
    }

    // problem-json
    let protocol_errors: Vec<&Exchange> = problems
        .iter()
        .filter(|e| matches!(e.got.status, 400 | 409 | 422))
        .collect();
    let not_problem = protocol_errors.iter().find(|e| {
        !e.got
            .header("content-type")
            .is_some_and(|ct| ct.starts_with("application/problem+json"))
    });
    record(
        "problem-json",
        match (protocol_errors.is_empty(), not_problem) {
            (true, _) => Outcome::Skipped {
                reason: "no 400, 409 or 422 answer was seen".into(),
            },
            (false, Some(e)) => failed(
                e,
                format!(
                    "a {} answer is `{}`",
                    e.got.status,
                    e.got
                        .header("content-type")
                        .unwrap_or("without Content-Type")
                ),
            ),
            (false, None) => Outcome::Passed,
        },
    );
    Ok(())
}

fn failed(exchange: &Exchange, why: String) -> Outcome {
    Outcome::Failed {
        why,
        evidence: Some(exchange.clone()),
    }
}

fn expect_status(exchange: &Exchange, status: u16) -> Outcome {
    if exchange.got.status == status {
        Outcome::Passed
    } else {
        failed(
            exchange,
            format!("expected {status}, got {}", exchange.got.status),
        )
    }
}

/// `retry-replays`: same status, body bytes and Location, and the replay marker.
fn replay_of(first: &Exchange, retry: &Exchange) -> Outcome {
    let (a, b) = (&first.got, &retry.got);
    if b.status != a.status {
        return failed(
            retry,
            format!("the retry answered {}, the first {}", b.status, a.status),
        );
    }
    if b.body != a.body {
        return failed(
            retry,
            "the retry's body differs from the first answer's".into(),
        );
    }
    if b.header("location") != a.header("location") {
        return failed(
            retry,
            "the retry's Location differs from the first answer's".into(),
        );
    }
    if !b.replayed() {
        return failed(
            retry,
            "the retry is not marked Idempotent-Replayed: true".into(),
        );
    }
    Outcome::Passed
}

/// `owners-independent`: the other owner, reusing the first owner's key with the same request,
/// must not get the first owner's result (a replay, or its very bytes) nor a 422 (which would mean
/// the key is shared). Its own 2xx passes, and so does a refusal of its own (a 403 or 404 for a
/// resource that is not its).
fn independent(first: &Exchange, theirs: &Exchange) -> Outcome {
    let got = &theirs.got;
    let same_bytes = (200..300).contains(&got.status) && got.body == first.got.body;
    if got.replayed() || same_bytes {
        return failed(
            theirs,
            format!(
                "the other credential, reusing the first key, got the first owner's result ({}{})",
                got.status,
                if got.replayed() {
                    ", a replay"
                } else {
                    ", the same bytes"
                }
            ),
        );
    }
    if protocol_conflict(got) || (matches!(got.status, 409 | 422) && problem_type(got).is_none()) {
        return failed(
            theirs,
            format!(
                "the other credential, reusing the first key with the same request, got {}: the key is not scoped to its owner",
                got.status
            ),
        );
    }
    Outcome::Passed
}

/// `concurrent`: one distinct 2xx body, everything else the protocol's 409 with `Retry-After`;
/// skipped when no request succeeded because the handler answered a business conflict.
fn concurrent(
    answers: &[Result<Exchange, String>],
    declared: &Declared4xx,
    problems: &mut Vec<Exchange>,
) -> Outcome {
    let mut bodies: Vec<&[u8]> = Vec::new();
    let mut business = None;
    for answer in answers {
        let exchange = match answer {
            Ok(e) => e,
            Err(why) => {
                return Outcome::Failed {
                    why: format!("a concurrent request got no answer: {why}"),
                    evidence: None,
                };
            }
        };
        let got = &exchange.got;
        if (200..300).contains(&got.status) {
            if !bodies.contains(&got.body.as_slice()) {
                bodies.push(&got.body);
            }
        } else if let Some(reason) = business_answer(exchange, declared) {
            business.get_or_insert(reason);
        } else if got.status == 409 {
            problems.push(exchange.clone());
            if got.header("retry-after").is_none() {
                return failed(exchange, "a 409 without Retry-After".into());
            }
        } else {
            return failed(
                exchange,
                format!("a concurrent request answered {}", got.status),
            );
        }
    }
    match bodies.len() {
        1 => Outcome::Passed,
        0 if business.is_some() => Outcome::Skipped {
            reason: business.unwrap_or_default(),
        },
        0 => Outcome::Failed {
            why: "no concurrent request succeeded".into(),
            evidence: None,
        },
        n => Outcome::Failed {
            why: format!(
                "{n} distinct 2xx bodies for one key: the operation executed more than once"
            ),
            evidence: answers
                .iter()
                .flatten()
                .find(|e| (200..300).contains(&e.got.status))
                .cloned(),
        },
    }
}

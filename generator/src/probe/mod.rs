//! `idemgen probe`: checks a running server against the idempotency protocol, from its spec.
//!
//! For every `x-idempotent` operation the probe builds a valid request (examples first, else
//! values synthesized from the schemas), finds its path parameters (`--path-param`, or the
//! resource a same-prefix create returns), and runs the checks of [`CHECKS`] over real HTTP. A
//! check the spec or the server gives no way to run is skipped with its reason, never passed.
//! It creates real resources on the server.

mod chain;
pub mod http;
pub mod report;
pub mod synth;
mod target;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::ir::Api;
use crate::loader::LoadedSpec;
use chain::{Done, Plan, Planner, Source};
use http::{Exchange, Request};
use target::Target;

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
    /// Path parameter values: by `name` for every operation, or by `operationId.name` for one.
    pub path_params: BTreeMap<String, String>,
    /// The probe config (`--probe-config`), by operationId.
    pub operations: BTreeMap<String, OperationConfig>,
    /// Print the requests instead of sending them.
    pub dry_run: bool,
}

/// What the probe config says about one operation: what the spec cannot.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationConfig {
    /// Fixed path parameter values (no setup is run for them).
    #[serde(default)]
    pub path: BTreeMap<String, String>,
    /// The operations to call, in order, to bring a fresh resource into the state this one
    /// needs (`["createPayment", "capturePayment"]`), each fed by the one before.
    #[serde(default)]
    pub setup: Option<Vec<String>>,
    /// The request body to send instead of a synthesized one.
    #[serde(default)]
    pub body: Option<Value>,
}

/// The probe config file: `[operations.<operationId>]` tables of [`OperationConfig`].
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// By operationId.
    #[serde(default)]
    pub operations: BTreeMap<String, OperationConfig>,
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

/// Which 4xx answers the operation declares.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declared4xx {
    codes: Vec<u16>,
    any: bool,
}

impl Declared4xx {
    pub(crate) fn of(op: &crate::ir::OperationIr) -> Declared4xx {
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

/// Runs the probe of `spec` (which passed `check`) against the server `options` names;
/// `key_header` is the configured key header name (idemgen.toml).
pub fn run(
    spec: &LoadedSpec,
    key_header: &str,
    options: &Options,
) -> Result<ProbeReport, ProbeError> {
    let api = Api::from_spec(spec, key_header);
    let idempotent: Vec<usize> = (0..api.operations.len())
        .filter(|&i| api.operations[i].is_idempotent())
        .collect();
    if idempotent.is_empty() {
        return Err(ProbeError::NothingToProbe);
    }
    for name in &options.only {
        if !idempotent.iter().any(|&i| &api.operations[i].id == name) {
            return Err(ProbeError::UnknownOperation(name.clone()));
        }
    }
    let tag = run_tag();
    let mut targets: Vec<Target> = api
        .operations
        .iter()
        .map(|op| Target::of(spec, op, &tag))
        .collect();
    for (target, op) in targets.iter_mut().zip(&api.operations) {
        if let Some(body) = options.operations.get(&op.id).and_then(|c| c.body.clone()) {
            let second = synth::changed(&body);
            target.body = Some((body, second));
        }
    }
    let fixed = |op: usize, name: &str| -> Option<String> {
        let id = &api.operations[op].id;
        options
            .path_params
            .get(&format!("{id}.{name}"))
            .or_else(|| options.operations.get(id).and_then(|c| c.path.get(name)))
            .or_else(|| options.path_params.get(name))
            .cloned()
    };
    let setups = |op: usize| -> Option<Vec<String>> {
        options
            .operations
            .get(&api.operations[op].id)
            .and_then(|c| c.setup.clone())
    };
    let planner = Planner::new(spec, &api, &fixed, &setups);
    let prober = Prober {
        targets: &targets,
        options,
        tag: &tag,
    };
    let mut report = ProbeReport::default();
    for op in idempotent {
        if !options.only.is_empty() && !options.only.contains(&api.operations[op].id) {
            continue;
        }
        let plan = planner.plan(op);
        if options.dry_run {
            prober.dry_run(op, &plan, &mut report);
            continue;
        }
        prober.probe_operation(op, &plan, &mut report)?;
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

/// The requests of every operation, and what the probe was asked to do.
struct Prober<'a> {
    targets: &'a [Target],
    options: &'a Options,
    tag: &'a str,
}

/// Why a check could not get the resource it needs.
enum Unprepared {
    /// No plan, or a setup call that did not succeed: the check is skipped with this reason.
    Skip(String),
    /// The server could not be reached.
    Unreachable(ProbeError),
}

impl Prober<'_> {
    /// A key for `check` of operation `op`, fitted to its header's lengths.
    fn key(&self, op: usize, check: &str) -> String {
        let target = &self.targets[op];
        fitted(
            format!("probe-{}-{}-{check}", self.tag, target.id),
            target.min_key_length,
            target.max_key_length,
        )
    }

    fn send(&self, request: &Request) -> Result<Exchange, ProbeError> {
        http::send(request).map_err(|why| ProbeError::Unreachable {
            url: request.url.clone(),
            why,
        })
    }

    /// A path to a fresh resource for `check` of `op`: the plan's setup calls run anew (each
    /// with its own key), and the path parameters filled in from the last one.
    fn fresh_path(
        &self,
        op: usize,
        plan: &Result<Plan, String>,
        check: &str,
    ) -> Result<String, Unprepared> {
        let plan = plan.as_ref().map_err(|why| Unprepared::Skip(why.clone()))?;
        let mut previous: Option<(Exchange, BTreeMap<String, String>, Option<Value>)> = None;
        for (i, step) in plan.steps.iter().enumerate() {
            let done = previous.as_ref().map(|(exchange, path, body)| Done {
                exchange,
                path,
                body: body.as_ref(),
            });
            let values = fill(&step.params, done.as_ref()).map_err(Unprepared::Skip)?;
            let target = &self.targets[step.op];
            let path = substitute(&target.template, &values);
            // Distinct per probed operation too: two operations' checks of one name must not
            // share (and replay) one setup resource.
            let key = target.idempotent.then(|| {
                self.key(
                    step.op,
                    &format!("{}-{check}-setup{i}", self.targets[op].id),
                )
            });
            let body = target.body.as_ref().map(|(b, _)| b.clone());
            let request = target.request(self.options, &path, key.as_deref(), body.as_ref());
            let exchange = self.send(&request).map_err(Unprepared::Unreachable)?;
            let label = format!(
                "setup {} {} ({})",
                target.method.to_ascii_uppercase(),
                target.template,
                target.id
            );
            if !(200..300).contains(&exchange.got.status) {
                let why = business_answer(&exchange, &target.declared_4xx)
                    .unwrap_or_else(|| format!("answered {}", exchange.got.status));
                return Err(Unprepared::Skip(format!("{label}: {why}")));
            }
            previous = Some((exchange, values, body));
        }
        let done = previous.as_ref().map(|(exchange, path, body)| Done {
            exchange,
            path,
            body: body.as_ref(),
        });
        let values = fill(&plan.params, done.as_ref()).map_err(Unprepared::Skip)?;
        Ok(substitute(&self.targets[op].template, &values))
    }

    /// `--dry-run`: the requests every check would send, setup calls included (with their
    /// parameters as placeholders).
    fn dry_run(&self, op: usize, plan: &Result<Plan, String>, report: &mut ProbeReport) {
        let target = &self.targets[op];
        let options = self.options;
        let mut plan_lines: Vec<(String, Request)> = Vec::new();
        if let Ok(plan) = plan {
            for step in &plan.steps {
                let setup = &self.targets[step.op];
                let key = setup.idempotent.then(|| self.key(step.op, "setup"));
                plan_lines.push((
                    format!(
                        "setup ({}, before every check that needs a resource)",
                        setup.id
                    ),
                    setup.request(
                        options,
                        &setup.template,
                        key.as_deref(),
                        setup.body.as_ref().map(|(b, _)| b),
                    ),
                ));
            }
        }
        let path = target.template.as_str();
        let body = target.body.as_ref().map(|(b, _)| b);
        let key = |check: &str| self.key(op, check);
        let long = target.too_long_key();
        let at_limit = key_of_length(&key("limit"), target.max_key_length);
        let mut push = |check: &str, request: Request| plan_lines.push((check.to_owned(), request));
        push("key-missing", target.request(options, path, None, body));
        for bad in ["has space", "has\ttab", long.as_str()] {
            push(
                "key-malformed",
                target.request(options, path, Some(bad), body),
            );
        }
        push(
            "key-at-limit",
            target.request(options, path, Some(&at_limit), body),
        );
        push(
            "first-succeeds",
            target.request(options, path, Some(&key("first")), body),
        );
        push(
            "retry-replays",
            target.request(options, path, Some(&key("first")), body),
        );
        if let Some(changed) = target.changed_request(options, path, &key("first")) {
            push("changed-request", changed);
        }
        if let Some((invalid, _)) = target.invalid_request(options, path, &key("failure")) {
            push("failure-not-stored", invalid);
            push(
                "failure-not-stored",
                target.request(options, path, Some(&key("failure")), body),
            );
        }
        push(
            "concurrent (20 copies at once)",
            target.request(options, path, Some(&key("storm")), body),
        );
        if !options.other_headers.is_empty() {
            let other = Options {
                headers: options.other_headers.clone(),
                ..options.clone()
            };
            push(
                "owners-independent",
                target.request(&other, path, Some(&key("first")), body),
            );
        }
        for (check, request) in plan_lines {
            report
                .dry_run
                .push((format!("{} {check}", target.id), request));
        }
    }

    /// Runs every check of one operation, each on a resource of its own.
    fn probe_operation(
        &self,
        op: usize,
        plan: &Result<Plan, String>,
        report: &mut ProbeReport,
    ) -> Result<(), ProbeError> {
        let target = &self.targets[op];
        let options = self.options;
        let mut record = |check: &'static str, outcome: Outcome| {
            report.results.push(CheckResult {
                operation: target.id.clone(),
                check,
                outcome,
            })
        };
        // A fresh resource, or the outcome that skips the check.
        let fresh = |check: &str| -> Result<Result<String, Outcome>, ProbeError> {
            match self.fresh_path(op, plan, check) {
                Ok(path) => Ok(Ok(path)),
                Err(Unprepared::Skip(reason)) => Ok(Err(Outcome::Skipped { reason })),
                Err(Unprepared::Unreachable(e)) => Err(e),
            }
        };
        let key = |check: &str| self.key(op, check);
        let body = target.body.as_ref().map(|(b, _)| b);
        let business = |e: &Exchange| business_answer(e, &target.declared_4xx);
        let mut problems: Vec<Exchange> = Vec::new();

        // key-missing, key-malformed: refused before anything touches the resource; one for both.
        match fresh("refusals")? {
            Err(skip) => {
                record("key-missing", skip.clone());
                record("key-malformed", skip);
            }
            Ok(path) => {
                let missing = self.send(&target.request(options, &path, None, body))?;
                record("key-missing", expect_status(&missing, 400));
                problems.push(missing);
                let long = target.too_long_key();
                let mut malformed = Outcome::Passed;
                for bad in ["has space", "has\ttab", long.as_str()] {
                    let exchange = self.send(&target.request(options, &path, Some(bad), body))?;
                    if let outcome @ Outcome::Failed { .. } = expect_status(&exchange, 400) {
                        malformed = outcome;
                        break;
                    }
                    problems.push(exchange);
                }
                record("key-malformed", malformed);
            }
        }

        // key-at-limit
        match fresh("limit")? {
            Err(skip) => record("key-at-limit", skip),
            Ok(path) => {
                let limit = key_of_length(&key("limit"), target.max_key_length);
                let at_limit = self.send(&target.request(options, &path, Some(&limit), body))?;
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
            }
        }

        // first-succeeds, retry-replays, changed-request: one resource, one key.
        let first_key = key("first");
        let mut first_done: Option<(String, Exchange)> = None;
        let mut first_skipped = Outcome::Skipped {
            reason: "the first request did not succeed".into(),
        };
        match fresh("first")? {
            Err(skip) => {
                for check in ["first-succeeds", "retry-replays", "changed-request"] {
                    record(check, skip.clone());
                }
                first_skipped = skip;
            }
            Ok(path) => {
                let first = self.send(&target.request(options, &path, Some(&first_key), body))?;
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
                    let retry =
                        self.send(&target.request(options, &path, Some(&first_key), body))?;
                    record("retry-replays", replay_of(&first, &retry));
                    match target.changed_request(options, &path, &first_key) {
                        None => record(
                            "changed-request",
                            Outcome::Skipped {
                                reason: "the operation has no body, query parameter or fingerprinted header the probe can vary".into(),
                            },
                        ),
                        Some(changed) => {
                            let changed = self.send(&changed)?;
                            // The protocol's 422, not a business one: that would mean the
                            // handler ran with the changed request under a used key.
                            let outcome = match business(&changed) {
                                Some(reason) if changed.got.status == 422 => failed(
                                    &changed,
                                    format!("{reason}: the handler ran with another request under a used key, instead of the protocol's 422"),
                                ),
                                _ => expect_status(&changed, 422),
                            };
                            record("changed-request", outcome);
                            problems.push(changed);
                        }
                    }
                    first_done = Some((path, first));
                } else {
                    record("retry-replays", skipped_first());
                    record("changed-request", skipped_first());
                    first_skipped = skipped_first();
                }
            }
        }

        // failure-not-stored
        match target.invalid_request(options, "", "") {
            None => record(
                "failure-not-stored",
                Outcome::Skipped {
                    reason: "the operation has no body and no query parameter the probe can make invalid".into(),
                },
            ),
            Some(_) => match fresh("failure")? {
                Err(skip) => record("failure-not-stored", skip),
                Ok(path) => {
                    let failure_key = key("failure");
                    let Some((request, what)) =
                        target.invalid_request(options, &path, &failure_key)
                    else {
                        unreachable!("checked above");
                    };
                    let invalid = self.send(&request)?;
                    if (200..300).contains(&invalid.got.status) {
                        record(
                            "failure-not-stored",
                            Outcome::Skipped {
                                reason: format!("the server accepted {what}, so no failure could be provoked"),
                            },
                        );
                    } else {
                        let valid =
                            self.send(&target.request(options, &path, Some(&failure_key), body))?;
                        let executed =
                            (200..300).contains(&valid.got.status) && !valid.got.replayed();
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
                                        "after a {} for {what}, the valid request with the same key answered {}{}",
                                        invalid.got.status,
                                        valid.got.status,
                                        if valid.got.replayed() { " (a replay)" } else { "" }
                                    ),
                                )
                            },
                        );
                    }
                }
            },
        }

        // concurrent
        match fresh("storm")? {
            Err(skip) => record("concurrent", skip),
            Ok(path) => {
                let request = target.request(options, &path, Some(&key("storm")), body);
                let answers = http::send_concurrently(&request, 20);
                record(
                    "concurrent",
                    concurrent(&answers, &target.declared_4xx, &mut problems),
                );
            }
        }

        // owners-independent: the first request's resource and key, another credential.
        if options.other_headers.is_empty() {
            record(
                "owners-independent",
                Outcome::Skipped {
                    reason: "no second credential: pass --other-header".into(),
                },
            );
        } else if let Some((path, first)) = &first_done {
            let other = Options {
                headers: options.other_headers.clone(),
                ..options.clone()
            };
            let theirs = self.send(&target.request(&other, path, Some(&first_key), body))?;
            record("owners-independent", independent(first, &theirs));
        } else {
            record("owners-independent", first_skipped);
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
}

/// The values of `params`, from the step before.
fn fill(
    params: &[(String, Source)],
    done: Option<&Done<'_>>,
) -> Result<BTreeMap<String, String>, String> {
    params
        .iter()
        .map(|(name, source)| Ok((name.clone(), chain::value_of(source, name, done)?)))
        .collect()
}

/// `template` with its `{name}` parameters replaced, percent-encoded (everything but RFC 3986's
/// unreserved characters, which is valid in a path segment too).
fn substitute(template: &str, values: &BTreeMap<String, String>) -> String {
    let mut path = template.to_owned();
    for (name, value) in values {
        path = path.replace(&format!("{{{name}}}"), &target::percent(value));
    }
    path
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
        // With a fresh resource, a business answer beside a success means the handler ran again
        // for a key whose first attempt was still running or done.
        1 if business.is_some() => Outcome::Failed {
            why: format!(
                "one request succeeded and another got {}: the operation ran more than once for one key",
                business.unwrap_or_default()
            ),
            evidence: answers
                .iter()
                .flatten()
                .find(|e| (200..300).contains(&e.got.status))
                .cloned(),
        },
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

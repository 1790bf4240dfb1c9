//! `idemgen probe`: checks a running server against the idempotency protocol, from its spec.
//!
//! For every `x-idempotent` operation the probe builds valid requests (the probe config's body,
//! else examples, else values synthesized from the schemas; fresh for every check and validated
//! against the schema before they are sent), finds its path parameters (`--path-param`, or the
//! resource a same-prefix create returns), and runs the checks of [`CHECKS`] over real HTTP. A
//! check the spec or the server gives no way to run is skipped with its reason, never passed;
//! each check asserts its own cause (a 400 passes `key-missing` only for a request that is
//! valid but for its key). The semantics are the IETF draft's, whatever problem types the
//! server uses; protocol.md's types are their own check, `problem-types`. It creates real
//! resources on the server.

mod chain;
pub mod http;
pub mod report;
pub mod synth;
mod target;
pub mod valid;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::ir::Api;
use crate::loader::LoadedSpec;
use chain::{Done, Plan, Planner, Source};
use http::{Exchange, Request};
use target::Target;

/// Every check: its stable id and what it verifies, in the order it runs.
pub const CHECKS: [(&str, &str); 11] = [
    (
        "key-missing",
        "a request valid but for its missing key header is refused with 400 (and a request with a key is accepted)",
    ),
    (
        "key-malformed",
        "a valid request whose key has a space, a tab, or one character over the header's maxLength is refused with 400",
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
        "the same key with another request is refused with 422 (any problem type)",
    ),
    (
        "failure-not-stored",
        "a failed request (an invalid body) is not stored: the valid request with its key then executes",
    ),
    (
        "concurrent",
        "20 concurrent requests with one key get one distinct 2xx body; the others that body too, or 409 with Retry-After (any problem type)",
    ),
    (
        "owners-independent",
        "another credential (--other-header) with the same key gets its own result, not a replay",
    ),
    (
        "problem-json",
        "the protocol's error answers (400, 409, 422) are application/problem+json",
    ),
    (
        "problem-types",
        "the protocol's error answers carry protocol.md's problem types (when the server uses them; skippable by config)",
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
    /// Checks reported as skipped for every operation (the probe config's `skip`).
    pub skip: Vec<String>,
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
    /// The request body to send instead of a synthesized one: strings holding `{unique}` get a
    /// fresh tag there for every check, and a value `"{synthesize}"` is synthesized from its
    /// property's schema (docs/probe.md).
    #[serde(default)]
    pub body: Option<Value>,
    /// Checks reported as skipped for this operation.
    #[serde(default)]
    pub skip: Vec<String>,
}

/// The probe config file: `[operations.<operationId>]` tables of [`OperationConfig`].
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Checks reported as skipped for every operation (`skip = ["problem-types"]`).
    #[serde(default)]
    pub skip: Vec<String>,
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
    /// The probe config names a check that does not exist.
    #[error("the probe config skips `{0}`, which is not a check (see `idemgen probe --help`)")]
    UnknownCheck(String),
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
    let skips = options
        .skip
        .iter()
        .chain(options.operations.values().flat_map(|c| &c.skip));
    for check in skips {
        if !CHECKS.iter().any(|(id, _)| id == check) {
            return Err(ProbeError::UnknownCheck(check.clone()));
        }
    }
    let tag = run_tag();
    let targets: Vec<Target> = api
        .operations
        .iter()
        .map(|op| {
            let configured = options.operations.get(&op.id).and_then(|c| c.body.clone());
            Target::of(spec, op, &tag, configured)
        })
        .collect();
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
        let from = report.results.len();
        prober.probe_operation(op, &plan, &mut report)?;
        let id = &api.operations[op].id;
        let skipped = |check: &str| {
            options.skip.iter().any(|s| s == check)
                || options
                    .operations
                    .get(id)
                    .is_some_and(|c| c.skip.iter().any(|s| s == check))
        };
        for result in &mut report.results[from..] {
            if skipped(result.check) {
                result.outcome = Outcome::Skipped {
                    reason: "skipped by the probe config".into(),
                };
            }
        }
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
    targets: &'a [Target<'a>],
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

    /// The bodies of operation `op` for one check (`None`: it has no body), fresh for it; `Err`
    /// when no valid body could be made, with why.
    fn bodies(&self, op: usize, check: &str) -> Result<Option<(Value, Option<Value>)>, String> {
        match &self.targets[op].body {
            None => Ok(None),
            Some(plan) => plan
                .bodies(&format!("{}-{check}", self.tag))
                .map(Some)
                .map_err(|why| format!("{}: {why}", self.targets[op].id)),
        }
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
            let body = self
                .bodies(
                    step.op,
                    &format!("{}-{check}-setup{i}", self.targets[op].id),
                )
                .map_err(Unprepared::Skip)?
                .map(|(b, _)| b);
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
                let body = self.bodies(step.op, "setup").ok().flatten();
                plan_lines.push((
                    format!(
                        "setup ({}, before every check that needs a resource)",
                        setup.id
                    ),
                    setup.request(
                        options,
                        &setup.template,
                        key.as_deref(),
                        body.as_ref().map(|(b, _)| b),
                    ),
                ));
            }
        }
        let path = target.template.as_str();
        let bodies = self.bodies(op, "dry-run").ok().flatten();
        let body = bodies.as_ref().map(|(b, _)| b);
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
        if let Some(changed) = target.changed_request(options, path, &key("first"), bodies.as_ref())
        {
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

    /// Runs every check of one operation, each on a resource of its own and with a body of its
    /// own.
    fn probe_operation(
        &self,
        op: usize,
        plan: &Result<Plan, String>,
        report: &mut ProbeReport,
    ) -> Result<(), ProbeError> {
        use idemgen_protocol::problem::ProblemKind;
        let target = &self.targets[op];
        let options = self.options;
        let mut results: Vec<(&'static str, Outcome)> = Vec::new();
        let mut record = |check: &'static str, outcome: Outcome| results.push((check, outcome));
        // A fresh resource and fresh bodies, or the outcome that skips the check.
        type Prepared = (String, Option<(Value, Option<Value>)>);
        let fresh = |check: &str| -> Result<Result<Prepared, Outcome>, ProbeError> {
            let bodies = match self.bodies(op, check) {
                Ok(bodies) => bodies,
                Err(reason) => return Ok(Err(Outcome::Skipped { reason })),
            };
            match self.fresh_path(op, plan, check) {
                Ok(path) => Ok(Ok((path, bodies))),
                Err(Unprepared::Skip(reason)) => Ok(Err(Outcome::Skipped { reason })),
                Err(Unprepared::Unreachable(e)) => Err(e),
            }
        };
        let key = |check: &str| self.key(op, check);
        let business = |e: &Exchange| business_answer(e, &target.declared_4xx);
        // Answers that are the protocol's by the check that provoked them, and the problem kinds
        // protocol.md gives them (for `problem-json` and `problem-types`).
        let mut problems: Vec<(Exchange, &'static [ProblemKind])> = Vec::new();
        // Whether a request of this operation with a valid key succeeded: a 400 without one then
        // is the key's.
        let mut accepted = false;

        // key-missing, key-malformed: refused before anything touches the resource; one for both.
        match fresh("refusals")? {
            Err(skip) => {
                record("key-missing", skip.clone());
                record("key-malformed", skip);
            }
            Ok((path, bodies)) => {
                let body = bodies.as_ref().map(|(b, _)| b);
                let missing = self.send(&target.request(options, &path, None, body))?;
                record(
                    "key-missing",
                    refused(&missing, ProblemKind::KeyMissing, "without a key"),
                );
                problems.push((missing, &[ProblemKind::KeyMissing]));
                let long = target.too_long_key();
                let mut malformed = Outcome::Passed;
                for (bad, what) in [
                    ("has space", "with a space in its key"),
                    ("has\ttab", "with a tab in its key"),
                    (long.as_str(), "with a key over the header's maxLength"),
                ] {
                    let exchange = self.send(&target.request(options, &path, Some(bad), body))?;
                    let outcome = refused(&exchange, ProblemKind::KeyInvalid, what);
                    problems.push((exchange, &[ProblemKind::KeyInvalid]));
                    if matches!(outcome, Outcome::Failed { .. }) {
                        malformed = outcome;
                        break;
                    }
                }
                record("key-malformed", malformed);
            }
        }

        // key-at-limit
        match fresh("limit")? {
            Err(skip) => record("key-at-limit", skip),
            Ok((path, bodies)) => {
                let body = bodies.as_ref().map(|(b, _)| b);
                let limit = key_of_length(&key("limit"), target.max_key_length);
                let at_limit = self.send(&target.request(options, &path, Some(&limit), body))?;
                accepted |= (200..300).contains(&at_limit.got.status);
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
        let mut first_done: Option<(String, Exchange, Option<Value>)> = None;
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
            Ok((path, bodies)) => {
                let body = bodies.as_ref().map(|(b, _)| b);
                let first = self.send(&target.request(options, &path, Some(&first_key), body))?;
                let first_ok = (200..300).contains(&first.got.status);
                accepted |= first_ok;
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
                    match target.changed_request(options, &path, &first_key, bodies.as_ref()) {
                        None => record(
                            "changed-request",
                            Outcome::Skipped {
                                reason: "the operation has no body, query parameter or fingerprinted header the probe can vary".into(),
                            },
                        ),
                        Some(changed) => {
                            let changed = self.send(&changed)?;
                            // The draft's 422, whatever its problem type (`problem-types`
                            // checks protocol.md's). A second body that is invalid (the only
                            // other one the schema allows the probe to make) may meet the
                            // server's validation first: its 400 is no failure.
                            let invalid_second = changed.got.status == 400
                                && bodies
                                    .as_ref()
                                    .and_then(|(_, second)| second.as_ref())
                                    .zip(target.body.as_ref())
                                    .is_some_and(|(second, plan)| plan.valid(second).is_err());
                            record(
                                "changed-request",
                                if invalid_second {
                                    Outcome::Skipped {
                                        reason: "the schema leaves no other valid body, and the server refused the invalid one the probe made with 400 before reading its key".into(),
                                    }
                                } else {
                                    expect_status(&changed, 422)
                                },
                            );
                            problems.push((
                                changed,
                                &[ProblemKind::KeyReused, ProblemKind::FingerprintVersionChanged],
                            ));
                        }
                    }
                    first_done = Some((path, first, body.cloned()));
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
                Ok((path, bodies)) => {
                    let body = bodies.as_ref().map(|(b, _)| b);
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
                        accepted |= executed;
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
            Ok((path, bodies)) => {
                let body = bodies.as_ref().map(|(b, _)| b);
                let request = target.request(options, &path, Some(&key("storm")), body);
                let answers = http::send_concurrently(&request, 20);
                let outcome = concurrent(&answers, &target.declared_4xx);
                accepted |= outcome == Outcome::Passed;
                record("concurrent", outcome);
                for exchange in answers.into_iter().flatten() {
                    // The key in flight, not a business conflict (skipped or failed above).
                    let in_flight = exchange.got.header("retry-after").is_some()
                        || business(&exchange).is_none();
                    if exchange.got.status == 409 && in_flight {
                        problems.push((exchange, &[ProblemKind::InFlight]));
                    }
                }
            }
        }

        // owners-independent: the first request's resource, body and key, another credential.
        if options.other_headers.is_empty() {
            record(
                "owners-independent",
                Outcome::Skipped {
                    reason: "no second credential: pass --other-header".into(),
                },
            );
        } else if let Some((path, first, body)) = &first_done {
            let other = Options {
                headers: options.other_headers.clone(),
                ..options.clone()
            };
            let theirs =
                self.send(&target.request(&other, path, Some(&first_key), body.as_ref()))?;
            record("owners-independent", independent(first, &theirs));
        } else {
            record("owners-independent", first_skipped);
        }

        record("problem-json", problem_json(&problems));
        record("problem-types", problem_types(&problems));
        // A 400 proves the key was checked only if a request with a valid key got through.
        if !accepted {
            for (check, outcome) in results.iter_mut() {
                if matches!(*check, "key-missing" | "key-malformed") && *outcome == Outcome::Passed
                {
                    *outcome = Outcome::Skipped {
                        reason: "no request of this operation with a valid key succeeded, so its 400 need not be the key's".into(),
                    };
                }
            }
        }

        report
            .results
            .extend(results.into_iter().map(|(check, outcome)| CheckResult {
                operation: target.id.clone(),
                check,
                outcome,
            }));
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

/// `key-missing`, `key-malformed`: a 400, and, when its problem type is one of protocol.md's, the
/// key's (`kind`): a protocol-typed 400 for the body would prove nothing about keys.
fn refused(
    exchange: &Exchange,
    kind: idemgen_protocol::problem::ProblemKind,
    what: &str,
) -> Outcome {
    let got = &exchange.got;
    if got.status != 400 {
        return failed(
            exchange,
            format!(
                "a request {what} answered {}, not 400{}",
                got.status,
                if (200..300).contains(&got.status) {
                    ": it was executed"
                } else {
                    ""
                }
            ),
        );
    }
    match problem_type(got) {
        Some(t) if idemgen_protocol::problem::is_idemgen_type(&t) && t != kind.type_uri() => {
            failed(
                exchange,
                format!(
                    "a request {what} answered 400 `{t}`, which is not the key's (`{}`)",
                    kind.type_uri()
                ),
            )
        }
        _ => Outcome::Passed,
    }
}

/// `problem-json`: every protocol answer seen (400, 409, 422) is `application/problem+json`.
fn problem_json(
    problems: &[(Exchange, &'static [idemgen_protocol::problem::ProblemKind])],
) -> Outcome {
    let protocol_errors: Vec<&Exchange> = problems
        .iter()
        .map(|(e, _)| e)
        .filter(|e| matches!(e.got.status, 400 | 409 | 422))
        .collect();
    let not_problem = protocol_errors.iter().find(|e| {
        !e.got
            .header("content-type")
            .is_some_and(|ct| ct.starts_with(idemgen_protocol::problem::PROBLEM_JSON))
    });
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
    }
}

/// `problem-types`: when the server uses protocol.md's problem types (one answer seen carries one),
/// each protocol answer carries the one its cause has (a 409 of the storm the in-flight type, a
/// changed request's 422 the key-reused one). A server with types of its own skips it.
fn problem_types(
    problems: &[(Exchange, &'static [idemgen_protocol::problem::ProblemKind])],
) -> Outcome {
    let seen: Vec<(&Exchange, &[idemgen_protocol::problem::ProblemKind])> = problems
        .iter()
        .filter(|(e, kinds)| kinds.iter().any(|k| k.status().as_u16() == e.got.status))
        .map(|(e, kinds)| (e, *kinds))
        .collect();
    if seen.is_empty() {
        return Outcome::Skipped {
            reason: "no 400, 409 or 422 answer of the protocol's was seen".into(),
        };
    }
    let typed = |e: &Exchange| problem_type(&e.got);
    if !seen
        .iter()
        .any(|(e, _)| typed(e).is_some_and(|t| idemgen_protocol::problem::is_idemgen_type(&t)))
    {
        return Outcome::Skipped {
            reason: format!(
                "the server uses problem types of its own (none of its {} protocol answers has a type under {})",
                seen.len(),
                idemgen_protocol::problem::TYPE_PREFIX
            ),
        };
    }
    for (exchange, kinds) in seen {
        let got = typed(exchange);
        if !kinds
            .iter()
            .any(|k| got.as_deref() == Some(k.type_uri().as_str()))
        {
            return failed(
                exchange,
                format!(
                    "a {} answer has type {}, not protocol.md's `{}`",
                    exchange.got.status,
                    got.map_or("none".to_owned(), |t| format!("`{t}`")),
                    kinds[0].type_uri()
                ),
            );
        }
    }
    Outcome::Passed
}

/// `concurrent`: one distinct 2xx body; every other answer that body too (a server that makes
/// the others wait) or a 409 with `Retry-After`, whatever its problem type. Skipped when no
/// request succeeded because the handler answered a business answer; the operation is said to
/// have run more than once only when two distinct 2xx bodies were seen.
fn concurrent(answers: &[Result<Exchange, String>], declared: &Declared4xx) -> Outcome {
    let mut bodies: Vec<&[u8]> = Vec::new();
    let mut business: Option<(String, &Exchange)> = None;
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
        } else if got.status == 409 && got.header("retry-after").is_some() {
            // The key in flight: the draft's answer.
        } else if let Some(reason) = business_answer(exchange, declared) {
            business.get_or_insert((reason, exchange));
        } else if got.status == 409 {
            return failed(exchange, "a 409 without Retry-After".into());
        } else {
            return failed(
                exchange,
                format!("a concurrent request answered {}", got.status),
            );
        }
    }
    let success = || {
        answers
            .iter()
            .flatten()
            .find(|e| (200..300).contains(&e.got.status))
            .cloned()
    };
    match (bodies.len(), business) {
        (1, None) => Outcome::Passed,
        // With a fresh resource, another answer beside the success is neither the key in flight
        // (a 409 with Retry-After) nor its result: the key did not hold the others back.
        (1, Some((reason, exchange))) => failed(
            exchange,
            format!(
                "one request succeeded and another got {reason}{}: neither the first's result nor a 409 with Retry-After for the key in flight",
                if exchange.got.header("retry-after").is_none() {
                    ", without Retry-After"
                } else {
                    ""
                }
            ),
        ),
        (0, Some((reason, _))) => Outcome::Skipped { reason },
        (0, None) => Outcome::Failed {
            why: "no concurrent request succeeded".into(),
            evidence: None,
        },
        (n, _) => Outcome::Failed {
            why: format!(
                "{n} distinct 2xx bodies for one key: the operation executed more than once"
            ),
            evidence: success(),
        },
    }
}

//! Preconditions: how the probe brings a resource into the state an operation needs (a payment
//! created, then captured, before a refund), built anew for every check so that no check sees
//! another's side effects.
//!
//! A [`Plan`] is a chain of setup steps, each an operation of the spec, and where every path
//! parameter's value comes from. It is learned, in this order, from:
//! 1. fixed values: `--path-param op.name=VALUE`, `--path-param name=VALUE`, the probe config's
//!    `path` table;
//! 2. the probe config's `setup` list for the operation (`setup = ["createPayment",
//!    "capturePayment"]`);
//! 3. OpenAPI `links` (`operationId` or a local `operationRef`, with `$response.body#/…`,
//!    `$response.header.…`, `$request.path.…`, `$request.query.…`, `$request.body#/…` and
//!    constants): the longest chain of linked operations that provides every parameter wins, so
//!    create → capture → refund is preferred over create → refund;
//! 4. the same-prefix `POST` (`/payments` for `/payments/{id}/capture`): its body's property of
//!    the parameter's name, else the last segment of its `Location`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ir::{Api, ParamLocation};
use crate::loader::{LoadedSpec, Node, NodeRef};

use super::http::Exchange;

/// Where a path parameter's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    /// Given: `--path-param`, the probe config.
    Fixed(String),
    /// A Link Object's parameter, evaluated on the previous step's exchange.
    Expression(String),
    /// From the previous step, a create: its body's property of the parameter's name, else the
    /// last segment of its `Location`.
    Created,
}

/// One setup call: an operation and where its path parameters come from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Step {
    /// The index of the operation in `Api::operations`.
    pub op: usize,
    /// Its path parameters (wire names) and their sources.
    pub params: Vec<(String, Source)>,
}

/// How to reach an operation's resource: setup steps in order, then the operation's own path
/// parameters (sourced from the last step, or fixed).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plan {
    /// The setup calls, first to last.
    pub steps: Vec<Step>,
    /// The probed operation's path parameters.
    pub params: Vec<(String, Source)>,
}

/// A link from one operation's response to another operation.
#[derive(Debug, Clone)]
struct Link {
    from: usize,
    to: usize,
    /// Parameter name (without a `path.` qualifier) → runtime expression or constant.
    params: BTreeMap<String, String>,
}

/// What the probe knows about every operation's preconditions.
pub(super) struct Planner<'a> {
    /// How many more resolutions the search may make for one plan (links can form dense
    /// graphs, and every simple path through one is exponentially many).
    budget: std::cell::Cell<usize>,
    api: &'a Api,
    links: Vec<Link>,
    fixed: &'a dyn Fn(usize, &str) -> Option<String>,
    setups: &'a dyn Fn(usize) -> Option<Vec<String>>,
}

/// The deepest chain the planner follows.
const MAX_DEPTH: usize = 6;

/// The most resolutions one plan may take.
const MAX_RESOLUTIONS: usize = 500;

impl<'a> Planner<'a> {
    /// A planner over `spec`'s links. `fixed(op, name)`: a given value of path parameter `name`
    /// of operation `op`; `setups(op)`: the probe config's `setup` list for it.
    pub fn new(
        spec: &LoadedSpec,
        api: &'a Api,
        fixed: &'a dyn Fn(usize, &str) -> Option<String>,
        setups: &'a dyn Fn(usize) -> Option<Vec<String>>,
    ) -> Planner<'a> {
        Planner {
            budget: std::cell::Cell::new(MAX_RESOLUTIONS),
            api,
            links: links(spec, api),
            fixed,
            setups,
        }
    }

    /// The plan for operation `op`, or why none exists.
    pub fn plan(&self, op: usize) -> Result<Plan, String> {
        self.budget.set(MAX_RESOLUTIONS);
        if let Some(setup) = (self.setups)(op) {
            return self.configured(op, &setup);
        }
        self.resolve(op, &mut vec![op])
    }

    fn path_params(&self, op: usize) -> Vec<String> {
        self.api.operations[op]
            .params_in(ParamLocation::Path)
            .map(|p| p.wire.clone())
            .collect()
    }

    /// The steps before `op` and the sources of its parameters.
    fn resolve(&self, op: usize, visiting: &mut Vec<usize>) -> Result<Plan, String> {
        let names = self.path_params(op);
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| (self.fixed)(op, n).is_none())
            .collect();
        let fixed_or = |name: &str, other: Source| match (self.fixed)(op, name) {
            Some(v) => Source::Fixed(v),
            None => other,
        };
        if missing.is_empty() {
            let params = names
                .iter()
                .map(|n| (n.clone(), fixed_or(n, Source::Created)))
                .collect();
            return Ok(Plan {
                steps: Vec::new(),
                params,
            });
        }
        if visiting.len() > MAX_DEPTH || self.budget.get() == 0 {
            return Err(
                "the chain of operations that provide its path parameters is too deep".into(),
            );
        }
        self.budget.set(self.budget.get() - 1);
        // Links that provide every missing parameter; the longest chain wins.
        let mut best: Option<Plan> = None;
        let mut why = None;
        for link in self.links.iter().filter(|l| l.to == op) {
            if visiting.contains(&link.from)
                || !missing.iter().all(|m| link.params.contains_key(*m))
            {
                continue;
            }
            visiting.push(link.from);
            let resolved = self.resolve(link.from, visiting);
            visiting.pop();
            match resolved {
                Ok(Plan {
                    mut steps,
                    params: from_params,
                }) => {
                    steps.push(Step {
                        op: link.from,
                        params: from_params,
                    });
                    let params = names
                        .iter()
                        .map(|n| {
                            let linked = link
                                .params
                                .get(n)
                                .map_or(Source::Created, |e| Source::Expression(e.clone()));
                            (n.clone(), fixed_or(n, linked))
                        })
                        .collect();
                    if best.as_ref().is_none_or(|b| steps.len() > b.steps.len()) {
                        best = Some(Plan { steps, params });
                    }
                }
                Err(e) => why = Some(e),
            }
        }
        if let Some(best) = best {
            return Ok(best);
        }
        // The same-prefix create, before the last missing parameter's segment
        // (`/accounts/{a}/payments` for `/accounts/{a}/payments/{p}/capture`).
        let template = &self.api.operations[op].path;
        let first = missing
            .iter()
            .max_by_key(|m| template.find(&format!("{{{m}}}")).unwrap_or(0))
            .copied()
            .unwrap_or(missing[0]);
        let prefix = template
            .split(&format!("/{{{first}}}"))
            .next()
            .unwrap_or_default();
        let create = self
            .api
            .operations
            .iter()
            .position(|o| o.http_method == "post" && o.path == prefix)
            .filter(|c| !visiting.contains(c));
        let Some(create) = create else {
            return Err(why.unwrap_or_else(|| {
                format!(
                    "no value for path parameter `{first}`: pass --path-param {}.{first}=VALUE, link an operation that returns it (OpenAPI `links`), or list `setup` in the probe config (no POST {prefix} to create one)",
                    self.api.operations[op].id
                )
            }));
        };
        visiting.push(create);
        let resolved = self.resolve(create, visiting);
        visiting.pop();
        let Plan {
            mut steps,
            params: create_params,
        } = resolved?;
        steps.push(Step {
            op: create,
            params: create_params,
        });
        let params = names
            .iter()
            .map(|n| (n.clone(), fixed_or(n, Source::Created)))
            .collect();
        Ok(Plan { steps, params })
    }

    /// The probe config's `setup` for `op`: those operations, in order, each fed by the one
    /// before (by a link between them if the spec has one, else as from a create).
    fn configured(&self, op: usize, setup: &[String]) -> Result<Plan, String> {
        let mut indices = Vec::new();
        for id in setup {
            let index = self
                .api
                .operations
                .iter()
                .position(|o| &o.id == id)
                .ok_or_else(|| format!("the probe config's setup names `{id}`, which is not an operation of the spec"))?;
            indices.push(index);
        }
        let Some(&first) = indices.first() else {
            return Err("the probe config's setup is empty".into());
        };
        let Plan {
            mut steps,
            params: first_params,
        } = self.resolve(first, &mut vec![op, first])?;
        steps.push(Step {
            op: first,
            params: first_params,
        });
        let fed = |from: usize, to: usize| -> Vec<(String, Source)> {
            let link = self.links.iter().find(|l| l.from == from && l.to == to);
            self.path_params(to)
                .into_iter()
                .map(|n| {
                    let source = match ((self.fixed)(to, &n), link.and_then(|l| l.params.get(&n))) {
                        (Some(v), _) => Source::Fixed(v),
                        (None, Some(e)) => Source::Expression(e.clone()),
                        (None, None) => Source::Created,
                    };
                    (n, source)
                })
                .collect()
        };
        for pair in indices.windows(2) {
            steps.push(Step {
                op: pair[1],
                params: fed(pair[0], pair[1]),
            });
        }
        let last = *indices.last().unwrap_or(&first);
        Ok(Plan {
            steps,
            params: fed(last, op),
        })
    }
}

/// Every link of every operation's responses (2xx and `default`), by operation index.
fn links(spec: &LoadedSpec, api: &Api) -> Vec<Link> {
    let mut out = Vec::new();
    for (from, op) in crate::spec::operations(spec).iter().enumerate() {
        for response in op.responses(spec) {
            let status = response.status.text.as_str();
            if !(status.starts_with('2') || status == "default") {
                continue;
            }
            let Some(map) = response.node.node.get("links").and_then(Node::as_map) else {
                continue;
            };
            for (_, link) in map.entries() {
                let link = spec.deref(NodeRef {
                    file: response.node.file,
                    node: link,
                });
                let Some(to) = link_target(api, link.node) else {
                    continue;
                };
                let params = link
                    .node
                    .get("parameters")
                    .and_then(Node::as_map)
                    .map(|m| {
                        m.entries()
                            .iter()
                            .filter_map(|(k, v)| {
                                let name = k.text.strip_prefix("path.").unwrap_or(&k.text);
                                if k.text.contains('.') && !k.text.starts_with("path.") {
                                    return None;
                                }
                                let value = match v.as_str() {
                                    Some(s) => s.to_owned(),
                                    None => super::synth::to_json(v).to_string(),
                                };
                                Some((name.to_owned(), value))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Link { from, to, params });
            }
        }
    }
    out
}

/// The operation a Link Object names: `operationId`, or a local `operationRef`
/// (`#/paths/~1payments~1{id}~1refunds/post`).
fn link_target(api: &Api, link: &Node) -> Option<usize> {
    if let Some(id) = link.get("operationId").and_then(Node::as_str) {
        return api.operations.iter().position(|o| o.id == id);
    }
    let reference = link.get("operationRef").and_then(Node::as_str)?;
    let pointer = reference.strip_prefix('#')?;
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    match parts.as_slice() {
        [paths, path, method] if paths == "paths" => api
            .operations
            .iter()
            .position(|o| &o.path == path && o.http_method.eq_ignore_ascii_case(method)),
        _ => None,
    }
}

/// What a step sent and got, for the expressions of the next.
pub(super) struct Done<'e> {
    /// The exchange.
    pub exchange: &'e Exchange,
    /// The step's path parameter values.
    pub path: &'e BTreeMap<String, String>,
    /// The step's JSON body, if any.
    pub body: Option<&'e Value>,
}

/// The value `source` gives parameter `name` after step `done`.
pub(super) fn value_of(
    source: &Source,
    name: &str,
    done: Option<&Done<'_>>,
) -> Result<String, String> {
    match (source, done) {
        (Source::Fixed(v), _) => Ok(v.clone()),
        (Source::Expression(expr), Some(done)) => evaluate(expr, done)
            .ok_or_else(|| format!("the link expression `{expr}` for `{name}` gave no value")),
        (Source::Created, Some(done)) => created(name, done.exchange).ok_or_else(|| {
            format!("the setup call returned neither a `{name}` property nor a Location")
        }),
        (_, None) => Err(format!("no value for path parameter `{name}`")),
    }
}

/// A create's answer: its body's property `name`, else its `Location`'s last segment.
fn created(name: &str, exchange: &Exchange) -> Option<String> {
    let got = &exchange.got;
    if let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&got.body)
        && let Some(value) = body.get(name)
    {
        return Some(scalar(value));
    }
    let location = got.header("location")?;
    location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .map(percent_decoded)
}

/// A URL component as the value it encodes (`%3A` is `:`), so that filling it into a path
/// does not encode it twice.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON value as the text a path, query or form carries (a string without its quotes).
pub(super) fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A Link Object parameter: a runtime expression, a string embedding them in braces
/// (`pay_{$response.body#/id}`), or a constant.
pub(super) fn evaluate(expr: &str, done: &Done<'_>) -> Option<String> {
    if expr.starts_with('$') {
        return expression(expr, done);
    }
    if !expr.contains("{$") {
        return Some(expr.to_owned());
    }
    let mut out = String::new();
    let mut rest = expr;
    while let Some(start) = rest.find("{$") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}')? + start;
        out.push_str(&expression(&rest[start + 1..end], done)?);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// One runtime expression (OpenAPI "Runtime Expressions").
fn expression(expr: &str, done: &Done<'_>) -> Option<String> {
    let got = &done.exchange.got;
    if let Some(pointer) = expr.strip_prefix("$response.body") {
        let body: Value = serde_json::from_slice(&got.body).ok()?;
        let pointer = pointer.strip_prefix('#').unwrap_or(pointer);
        return body.pointer(pointer).map(scalar);
    }
    if let Some(name) = expr.strip_prefix("$response.header.") {
        let value = got.header(&name.to_ascii_lowercase())?;
        // A Location names a URL; a path parameter takes its last segment.
        return Some(if name.eq_ignore_ascii_case("location") {
            percent_decoded(value.trim_end_matches('/').rsplit('/').next()?)
        } else {
            value.to_owned()
        });
    }
    if let Some(name) = expr.strip_prefix("$request.path.") {
        return done.path.get(name).cloned();
    }
    if let Some(pointer) = expr.strip_prefix("$request.body") {
        let pointer = pointer.strip_prefix('#').unwrap_or(pointer);
        return done.body?.pointer(pointer).map(scalar);
    }
    if let Some(name) = expr.strip_prefix("$request.query.") {
        let url = &done.exchange.sent.url;
        let query = url.split_once('?')?.1;
        return query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| percent_decoded(&v.replace('+', " ")))
        });
    }
    if let Some(name) = expr.strip_prefix("$request.header.") {
        return done
            .exchange
            .sent
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone());
    }
    if expr == "$statusCode" {
        return Some(got.status.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::http::{Got, Request};

    fn exchange(body: &str, headers: &[(&str, &str)]) -> Exchange {
        Exchange {
            sent: Request {
                method: "POST".into(),
                url: "http://x/payments?currency=EUR".into(),
                headers: vec![("X-Tenant".into(), "t1".into())],
                body: None,
            },
            got: Got {
                status: 201,
                headers: headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
                body: body.as_bytes().to_vec(),
            },
        }
    }

    #[test]
    fn runtime_expressions_read_the_exchange() {
        let ex = exchange(
            r#"{"id":"pay_1","nested":{"n":7}}"#,
            &[("location", "/payments/pay_1/")],
        );
        let path = BTreeMap::from([("account".to_string(), "acct_9".to_string())]);
        let body = serde_json::json!({"amount": 5});
        let done = Done {
            exchange: &ex,
            path: &path,
            body: Some(&body),
        };
        let eval = |e: &str| evaluate(e, &done);
        assert_eq!(eval("$response.body#/id").as_deref(), Some("pay_1"));
        assert_eq!(eval("$response.body#/nested/n").as_deref(), Some("7"));
        assert_eq!(eval("$response.header.Location").as_deref(), Some("pay_1"));
        let encoded = exchange("{}", &[("location", "/payments/pay%3A1")]);
        let done_encoded = Done {
            exchange: &encoded,
            path: &path,
            body: None,
        };
        assert_eq!(
            evaluate("$response.header.Location", &done_encoded).as_deref(),
            Some("pay:1"),
            "decoded once, so the path encodes it once"
        );
        assert_eq!(eval("$request.path.account").as_deref(), Some("acct_9"));
        assert_eq!(eval("$request.body#/amount").as_deref(), Some("5"));
        assert_eq!(eval("$request.query.currency").as_deref(), Some("EUR"));
        assert_eq!(eval("$request.header.x-tenant").as_deref(), Some("t1"));
        assert_eq!(eval("$statusCode").as_deref(), Some("201"));
        assert_eq!(
            eval("ref_{$response.body#/id}").as_deref(),
            Some("ref_pay_1")
        );
        assert_eq!(eval("constant").as_deref(), Some("constant"));
        assert_eq!(eval("$response.body#/missing"), None);
        assert_eq!(eval("$url"), None, "not a value the probe has");
        assert_eq!(
            value_of(&Source::Created, "id", Some(&done)).as_deref(),
            Ok("pay_1")
        );
        assert!(value_of(&Source::Created, "id", None).is_err());
    }
}

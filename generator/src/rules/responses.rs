//! Responses of idempotent operations: the statuses the runtime can return are declared, and
//! error bodies are problem documents.

use super::{RuleId, Sink};
use crate::loader::{LoadedSpec, Node};
use crate::spec::{Operation, Response};

/// The media type of RFC 9457 problem documents.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Reports the status codes of `op`'s responses written as bare YAML numbers (`200:`):
/// OpenAPI's Responses Object is keyed by strings, and tools that read YAML's types see a
/// number (Spectral reports each). idemgen reads the code the digits spell.
pub(super) fn check_unquoted(op: &Operation<'_>, sink: &mut Sink<'_>) {
    let Some(responses) = op.responses_entry().and_then(|(_, r)| r.as_map()) else {
        return;
    };
    for (key, _) in responses.entries() {
        if key.plain && !key.text.is_empty() && key.text.bytes().all(|b| b.is_ascii_digit()) {
            sink.report(
                RuleId::ResponseCodeUnquoted,
                (op.node.file, key.span),
                Some(op),
                format!(
                    "response code `{}` of {} is a YAML number, not a string: OpenAPI requires `'{}'`",
                    key.text,
                    op.display_name(),
                    key.text
                ),
            );
        }
    }
}

/// Checks the responses of an operation marked `x-idempotent: true`.
pub(super) fn check(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    let responses = op.responses(spec);
    let at = match op.responses_entry() {
        Some((key, _)) => (op.node.file, key.span),
        None => op.key_at(),
    };
    let required = sink.config().required_statuses.clone();
    let mut recommended = sink.config().recommended_statuses.clone();
    // An operation with a body is also refused 413 (over the limit) and 415 (not its media type)
    // before anything happens.
    if op.node.node.get("requestBody").is_some() {
        for status in idemgen_protocol::status::BODY_STATUSES {
            if !recommended.contains(&status) && !required.contains(&status) {
                recommended.push(status);
            }
        }
    }
    for (rule, statuses, verb) in [
        (RuleId::RequiredResponseMissing, required, "must"),
        (RuleId::RecommendedResponseMissing, recommended, "should"),
    ] {
        let missing: Vec<u16> = statuses
            .into_iter()
            .filter(|s| !responses.iter().any(|r| covers(&r.status.text, *s)))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let list = missing
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        sink.report_with_help(
            rule,
            at,
            Some(op),
            format!(
                "idempotent operation {} {verb} declare response{} {list}",
                op.display_name(),
                if missing.len() > 1 { "s" } else { "" }
            ),
            missing_help(&missing),
        );
    }
    for response in responses.iter().filter(|r| is_error_status(&r.status.text)) {
        check_problem_json(spec, op, response, sink);
    }
}

/// Warns about an operation without an idempotency key that declares no 503: served by the
/// runtime on a database, it answers 503 `service_unavailable` when the database is unreachable,
/// and the spec should say so.
pub(super) fn check_unavailable(spec: &LoadedSpec, ops: &[&Operation<'_>], sink: &mut Sink<'_>) {
    // `default` answers every status the operation does not list, 503 included.
    let missing: Vec<&&Operation<'_>> = ops
        .iter()
        .filter(|op| {
            !op.responses(spec)
                .iter()
                .any(|r| covers(&r.status.text, 503) || r.status.text == "default")
        })
        .collect();
    let Some(first) = missing.first() else {
        return;
    };
    // One finding for the spec, at the first operation, listing them all: the same fix applies
    // to each, and a finding per operation buries every other rule on a large spec.
    let at = match first.responses_entry() {
        Some((key, _)) => (first.node.file, key.span),
        None => first.key_at(),
    };
    let shown: Vec<String> = missing.iter().take(3).map(|op| op.display_name()).collect();
    let more = match missing.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    let message = if missing.len() == 1 {
        format!(
            "{} does not declare 503 (or `5XX`, `default`), which it answers when its database is unreachable",
            shown[0]
        )
    } else {
        format!(
            "{} operations without an idempotency key do not declare 503 (or `5XX`, `default`), which they answer when their database is unreachable: {}{more}",
            missing.len(),
            shown.join(", ")
        )
    };
    for op in &missing {
        sink.report(
            RuleId::UnavailableResponseMissing,
            at,
            Some(op),
            message.clone(),
        );
    }
}

/// Whether the response key `status` (`422`, `4XX`) covers the status code `code`.
pub fn covers(status: &str, code: u16) -> bool {
    if status == code.to_string() {
        return true;
    }
    let bytes = status.as_bytes();
    bytes.len() == 3
        && bytes[1].eq_ignore_ascii_case(&b'x')
        && bytes[2].eq_ignore_ascii_case(&b'x')
        && u16::from(bytes[0].wrapping_sub(b'0')) == code / 100
}

/// Whether a response key denotes a 4xx or 5xx status.
fn is_error_status(status: &str) -> bool {
    matches!(status.as_bytes().first(), Some(b'4' | b'5')) && status.len() == 3
}

fn check_problem_json(
    spec: &LoadedSpec,
    op: &Operation<'_>,
    response: &Response<'_>,
    sink: &mut Sink<'_>,
) {
    let node = response.node;
    let content = node.node.entry("content");
    let has_problem = crate::spec::content(spec, node)
        .and_then(|c| c.node.as_map())
        .is_some_and(|m| m.entries().iter().any(|(k, _)| is_problem_json(&k.text)));
    if has_problem {
        return;
    }
    let at = match content {
        Some((key, _)) => (node.file, key.span),
        None if std::ptr::eq(node.node, response_value(op, response)) => {
            (op.node.file, response.status.span)
        }
        None => (node.file, node.node.span),
    };
    sink.report(
        RuleId::ErrorResponseNotProblemJson,
        at,
        Some(op),
        format!(
            "error response {} does not offer `{PROBLEM_JSON}`",
            response.status.text
        ),
    );
}

/// The value written under the status key, before following `$ref`s.
fn response_value<'a>(op: &Operation<'a>, response: &Response<'a>) -> &'a Node {
    op.responses_entry()
        .and_then(|(_, r)| r.get(&response.status.text))
        .unwrap_or(response.node.node)
}

/// `application/problem+json`, ignoring case and parameters.
fn is_problem_json(media_type: &str) -> bool {
    media_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(PROBLEM_JSON))
}

fn missing_help(missing: &[u16]) -> String {
    let mut out = String::from("declare them with problem documents:\n\nresponses:");
    for code in missing {
        out.push_str(&format!(
            "\n  \"{code}\":\n    description: {}\n    content:\n      {PROBLEM_JSON}: {{}}",
            reason(*code)
        ));
    }
    out
}

/// The standard reason phrase of the statuses the runtime uses.
fn reason(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        410 => "Gone",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_keys_cover_codes() {
        for (key, code, expected) in [
            ("422", 422, true),
            ("4XX", 422, true),
            ("4xx", 401, true),
            ("5XX", 422, false),
            ("default", 500, false),
            ("42", 422, false),
        ] {
            assert_eq!(covers(key, code), expected, "{key} {code}");
        }
    }

    #[test]
    fn problem_json_ignores_case_and_parameters() {
        assert!(is_problem_json("Application/Problem+JSON; charset=utf-8"));
        assert!(!is_problem_json("application/json"));
    }
}

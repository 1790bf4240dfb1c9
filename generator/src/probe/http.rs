//! The probe's HTTP: one blocking request at a time (ureq), or `n` at once on threads released
//! together, each an exchange of what was sent and what came back.

use std::fmt;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// A request as the probe sends it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Request {
    /// `POST`, …
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    #[serde(serialize_with = "lossy")]
    pub body: Option<Vec<u8>>,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Got {
    /// Its status.
    pub status: u16,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its body.
    #[serde(serialize_with = "lossy_bytes")]
    pub body: Vec<u8>,
}

impl Got {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether it is marked `Idempotent-Replayed: true`.
    pub fn replayed(&self) -> bool {
        self.header(idemgen_protocol::headers::IDEMPOTENT_REPLAYED)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// What was sent and what came back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exchange {
    /// The request.
    pub sent: Request,
    /// The answer.
    pub got: Got,
}

fn lossy<S: serde::Serializer>(body: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match body {
        Some(b) => s.serialize_some(&String::from_utf8_lossy(b)),
        None => s.serialize_none(),
    }
}

fn lossy_bytes<S: serde::Serializer>(body: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(body))
}

/// The first `n` bytes of a body, as text.
pub fn excerpt(body: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(n)]).into_owned();
    if body.len() > n {
        format!("{text}…")
    } else {
        text
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}", self.method, self.url)?;
        for (name, value) in &self.headers {
            writeln!(f, "{name}: {}", value.escape_debug())?;
        }
        if let Some(body) = &self.body {
            writeln!(f)?;
            writeln!(f, "{}", excerpt(body, 400))?;
        }
        Ok(())
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into()
}

/// Sends `request`; `Err` when no answer came (connection refused, timeout, …).
pub fn send(request: &Request) -> Result<Exchange, String> {
    send_with(&agent(), request)
}

fn send_with(agent: &ureq::Agent, request: &Request) -> Result<Exchange, String> {
    let mut builder = ureq::http::Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let body = request.body.clone().unwrap_or_default();
    let built = builder
        .body(body)
        .map_err(|e| format!("invalid request: {e}"))?;
    let mut response = agent.run(built).map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .body_mut()
        .read_to_vec()
        .map_err(|e| format!("reading the body: {e}"))?;
    Ok(Exchange {
        sent: request.clone(),
        got: Got {
            status,
            headers,
            body,
        },
    })
}

/// Sends `n` copies of `request` at once (threads released by one barrier).
pub fn send_concurrently(request: &Request, n: usize) -> Vec<Result<Exchange, String>> {
    let barrier = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (barrier, request) = (barrier.clone(), request.clone());
            std::thread::spawn(move || {
                let agent = agent();
                barrier.wait();
                send_with(&agent, &request)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap_or_else(|_| Err("the request thread panicked".into()))
        })
        .collect()
}

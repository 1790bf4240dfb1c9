//! Configuration from the environment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};

/// The development tokens used when `WIDGETS_TOKENS` is unset. Never use them in production.
pub const DEV_TOKENS: &str = "tok1=alice,tok2=bob,tok3=carol:readonly";

/// The service's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DATABASE_URL`: the PostgreSQL writer. Unset, a throwaway local PostgreSQL is started
    /// from the server binaries (development only: its data goes when the process exits).
    pub database_url: Option<String>,
    /// `WIDGETS_LISTEN` (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// `WIDGETS_TOKENS`: `token=owner[:readonly],…` (default [`DEV_TOKENS`]).
    pub tokens: HashMap<String, Account>,
    /// `APP__HTTP_IDEMPOTENCY__RETENTION` (e.g. `30d`); unset keeps records forever.
    pub retention: Option<Duration>,
    /// `WIDGETS_STALE_CLAIM` (default `5m`): when an unfinished claim may be taken over.
    pub stale_claim: Duration,
    /// `WIDGETS_BODY_LIMIT` in bytes (default 64 KiB).
    pub body_limit: usize,
    /// `WIDGETS_POOL_SIZE` (default 20).
    pub pool_size: u32,
    /// `WIDGETS_STRATEGY`: `separate-claim` (default) or `in-transaction`.
    pub strategy: idemgen_runtime::Strategy,
}

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The owner identity keys are scoped to.
    pub owner: String,
    /// Read-only accounts are refused (403) on every write attempt, replays included.
    pub read_only: bool,
}

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> anyhow::Result<Config> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration through `get` (testable without touching the environment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Config> {
        let database_url = get("DATABASE_URL").filter(|u| !u.trim().is_empty());
        let listen = get("WIDGETS_LISTEN")
            .unwrap_or_else(|| "127.0.0.1:8080".into())
            .parse()
            .context("WIDGETS_LISTEN must be host:port")?;
        let tokens = parse_tokens(&get("WIDGETS_TOKENS").unwrap_or_else(|| DEV_TOKENS.into()))?;
        let retention = match get("APP__HTTP_IDEMPOTENCY__RETENTION") {
            Some(v) if !v.trim().is_empty() => Some(
                parse_duration(&v).context("APP__HTTP_IDEMPOTENCY__RETENTION: e.g. 30d, 12h")?,
            ),
            _ => None,
        };
        let stale_claim = match get("WIDGETS_STALE_CLAIM") {
            Some(v) => parse_duration(&v).context("WIDGETS_STALE_CLAIM: e.g. 5m, 30s")?,
            None => Duration::from_secs(300),
        };
        let body_limit = match get("WIDGETS_BODY_LIMIT") {
            Some(v) => v
                .parse()
                .context("WIDGETS_BODY_LIMIT must be a byte count")?,
            None => 64 * 1024,
        };
        let pool_size = match get("WIDGETS_POOL_SIZE") {
            Some(v) => v.parse().context("WIDGETS_POOL_SIZE must be a number")?,
            None => 20,
        };
        let strategy = match get("WIDGETS_STRATEGY").as_deref().map(str::trim) {
            None | Some("") | Some("separate-claim") => idemgen_runtime::Strategy::SeparateClaim,
            Some("in-transaction") => idemgen_runtime::Strategy::InTransaction,
            Some(other) => anyhow::bail!(
                "WIDGETS_STRATEGY must be separate-claim or in-transaction, not {other:?}"
            ),
        };
        Ok(Config {
            database_url,
            strategy,
            listen,
            tokens,
            retention,
            stale_claim,
            body_limit,
            pool_size,
        })
    }
}

/// Parses `tok1=alice,tok2=bob:readonly`.
pub fn parse_tokens(spec: &str) -> anyhow::Result<HashMap<String, Account>> {
    let mut out = HashMap::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((token, owner)) = entry.split_once('=') else {
            bail!("WIDGETS_TOKENS entry {entry:?} is not token=owner");
        };
        let (owner, read_only) = match owner.split_once(':') {
            Some((o, "readonly")) => (o, true),
            Some((_, flag)) => bail!("unknown token flag {flag:?} (only :readonly)"),
            None => (owner, false),
        };
        if token.is_empty() || owner.is_empty() {
            bail!("WIDGETS_TOKENS entry {entry:?} has an empty token or owner");
        }
        out.insert(
            token.to_owned(),
            Account {
                owner: owner.to_owned(),
                read_only,
            },
        );
    }
    Ok(out)
}

/// Parses `30d`, `12h`, `15m`, `45s`, `250ms`.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .context("missing unit (ms, s, m, h, d)")?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().context("missing number")?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("unknown unit {unit:?} (ms, s, m, h, d)"),
    };
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn tokens() {
        let t = parse_tokens(DEV_TOKENS).unwrap();
        assert_eq!(t["tok1"].owner, "alice");
        assert!(t["tok3"].read_only);
        assert!(parse_tokens("nonsense").is_err());
        assert!(parse_tokens("a=b:admin").is_err());
    }

    #[test]
    fn database_url_is_optional() {
        let throwaway = Config::from_lookup(|_| None).unwrap();
        assert_eq!(throwaway.database_url, None);
        let blank = Config::from_lookup(|k| (k == "DATABASE_URL").then(|| " ".into())).unwrap();
        assert_eq!(blank.database_url, None);
        let c =
            Config::from_lookup(|k| (k == "DATABASE_URL").then(|| "postgres://x".into())).unwrap();
        assert_eq!(c.database_url.as_deref(), Some("postgres://x"));
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.retention, None);
        assert_eq!(c.stale_claim, Duration::from_secs(300));
    }

    #[test]
    fn strategy_is_chosen_by_name() {
        let with = |v: &'static str| {
            Config::from_lookup(move |k| (k == "WIDGETS_STRATEGY").then(|| v.into()))
        };
        assert_eq!(
            Config::from_lookup(|_| None).unwrap().strategy,
            idemgen_runtime::Strategy::SeparateClaim
        );
        assert_eq!(
            with("in-transaction").unwrap().strategy,
            idemgen_runtime::Strategy::InTransaction
        );
        assert_eq!(
            with("separate-claim").unwrap().strategy,
            idemgen_runtime::Strategy::SeparateClaim
        );
        let err = with("both").unwrap_err().to_string();
        assert!(err.contains("WIDGETS_STRATEGY"), "{err}");
    }
}

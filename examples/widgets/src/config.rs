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
    /// from the server binaries (development only: its data goes when the process exits). It may
    /// list several hosts, libpq-style
    /// (`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`): the pools connect to
    /// the writable one and follow it after a failover (`idemgen_runtime::WriterHosts`).
    pub database_url: Option<String>,
    /// `WIDGETS_STORE`: the driver and store the service runs on: `sqlx` (default, `PgStore`)
    /// or `tokio-postgres` (`TokioPgStore`: the completion travels with `COMMIT`, one round trip
    /// fewer per create). Either serves behind each `WIDGETS_POOLER`.
    pub store: StoreKind,
    /// `WIDGETS_POOLER`: what `DATABASE_URL` reaches: `direct` (default, PostgreSQL itself),
    /// `session` or `transaction` (PgBouncer's `pool_mode`); the store and the pools are set up
    /// for it (`idemgen_runtime::Pooler`) and checked at start-up (`PgStore::check`).
    pub pooler: idemgen_runtime::Pooler,
    /// `WIDGETS_MIGRATION_URL`: where migrations run, when not on `DATABASE_URL`. Required with
    /// `WIDGETS_POOLER=transaction`: sqlx's migrator holds a session advisory lock, which a
    /// transaction pooler would leave held on a pooled server connection; give a direct (or
    /// session-pooled) URL. It may list several hosts, as `DATABASE_URL`.
    pub migration_url: Option<String>,
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
    /// How connections are served (the runtime's defaults unless set):
    /// `WIDGETS_HEADER_TIMEOUT`, `WIDGETS_BODY_TIMEOUT`, `WIDGETS_IDLE_TIMEOUT` (durations),
    /// `WIDGETS_MAX_CONNECTIONS` (a count), `WIDGETS_SHUTDOWN_GRACE` (a duration).
    pub serving: idemgen_runtime::ServeConfig,
    /// `WIDGETS_CORS_ORIGINS`: browser origins allowed to call the API, comma-separated
    /// (`https://app.example,https://admin.example`); unset, none.
    pub cors_origins: Vec<http::HeaderValue>,
    /// `WIDGETS_METRICS`: `on` (default) installs the Prometheus recorder and serves
    /// `GET /metrics`; `off` installs no recorder (the runtime's metrics cost one atomic load).
    pub metrics: bool,
    /// `WIDGETS_METRICS_LISTEN`: where `GET /metrics` is served, a listener of its own, never
    /// the API's (default `127.0.0.1:9464`: this host only; `0.0.0.0:9464` for a scraper on
    /// another one, kept off the public ingress).
    pub metrics_listen: SocketAddr,
}

/// The store the service runs on (`WIDGETS_STORE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `sqlx`: `PgStore`, on sqlx.
    Sqlx,
    /// `tokio-postgres`: `TokioPgStore`, the pipelining store.
    TokioPostgres,
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
        let pooler = match get("WIDGETS_POOLER").as_deref().map(str::trim) {
            None | Some("") | Some("direct") => idemgen_runtime::Pooler::Direct,
            Some("session") => idemgen_runtime::Pooler::Session,
            Some("transaction") => idemgen_runtime::Pooler::Transaction,
            Some(other) => anyhow::bail!(
                "WIDGETS_POOLER must be direct, session or transaction, not {other:?}"
            ),
        };
        let store = match get("WIDGETS_STORE").as_deref().map(str::trim) {
            None | Some("") | Some("sqlx") => StoreKind::Sqlx,
            Some("tokio-postgres") => StoreKind::TokioPostgres,
            Some(other) => {
                anyhow::bail!("WIDGETS_STORE must be sqlx or tokio-postgres, not {other:?}")
            }
        };
        let migration_url = get("WIDGETS_MIGRATION_URL").filter(|u| !u.trim().is_empty());
        if pooler == idemgen_runtime::Pooler::Transaction && migration_url.is_none() {
            anyhow::bail!(
                "WIDGETS_POOLER=transaction needs WIDGETS_MIGRATION_URL, a direct (or \
                 session-pooled) URL for the migrations: sqlx's migrator holds a session \
                 advisory lock, which a transaction pooler leaves held on a pooled connection"
            );
        }
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
        let defaults = idemgen_runtime::ServeConfig::default();
        let duration = |name: &str, default: Duration| -> anyhow::Result<Duration> {
            match get(name) {
                Some(v) if !v.trim().is_empty() => {
                    parse_duration(&v).with_context(|| format!("{name}: e.g. 10s, 500ms"))
                }
                _ => Ok(default),
            }
        };
        let serving = idemgen_runtime::ServeConfig {
            header_read_timeout: duration("WIDGETS_HEADER_TIMEOUT", defaults.header_read_timeout)?,
            body_read_timeout: duration("WIDGETS_BODY_TIMEOUT", defaults.body_read_timeout)?,
            idle_timeout: duration("WIDGETS_IDLE_TIMEOUT", defaults.idle_timeout)?,
            max_connections: match get("WIDGETS_MAX_CONNECTIONS") {
                Some(v) => v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .context("WIDGETS_MAX_CONNECTIONS must be a positive number")?,
                None => defaults.max_connections,
            },
            shutdown_grace: duration("WIDGETS_SHUTDOWN_GRACE", defaults.shutdown_grace)?,
        };
        let cors_origins = get("WIDGETS_CORS_ORIGINS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|origin| !origin.is_empty())
            .map(|origin| {
                http::HeaderValue::from_str(origin)
                    .with_context(|| format!("WIDGETS_CORS_ORIGINS: {origin:?} is no origin"))
            })
            .collect::<anyhow::Result<_>>()?;
        let metrics = match get("WIDGETS_METRICS").as_deref().map(str::trim) {
            None | Some("") | Some("on") => true,
            Some("off") => false,
            Some(other) => anyhow::bail!("WIDGETS_METRICS must be on or off, not {other:?}"),
        };
        let metrics_listen = match get("WIDGETS_METRICS_LISTEN") {
            Some(v) => v
                .trim()
                .parse()
                .with_context(|| format!("WIDGETS_METRICS_LISTEN: {v:?} is no address"))?,
            None => SocketAddr::from(([127, 0, 0, 1], 9464)),
        };
        Ok(Config {
            store,
            pooler,
            migration_url,
            metrics,
            metrics_listen,
            cors_origins,
            database_url,
            serving,
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

/// Parses `tok1=alice,tok2=bob:readonly`. Each entry splits at its **last** `=`, so a token may
/// hold `=` (base64 padding: `pad64==carol` is token `pad64=` of owner `carol`) and an owner may
/// not. An empty token or owner, an unknown flag and a token given twice are refused; errors
/// name the entry by its position, never the token (start-up errors end up in logs).
pub fn parse_tokens(spec: &str) -> anyhow::Result<HashMap<String, Account>> {
    let mut out: HashMap<String, Account> = HashMap::new();
    let mut first_at: HashMap<String, usize> = HashMap::new();
    let entries = spec.split(',').map(str::trim).filter(|e| !e.is_empty());
    for (n, entry) in entries.enumerate() {
        let n = n + 1;
        let Some((token, owner)) = entry.rsplit_once('=') else {
            bail!("WIDGETS_TOKENS entry {n} is not token=owner");
        };
        let (owner, read_only) = match owner.split_once(':') {
            Some((o, "readonly")) => (o, true),
            Some((_, flag)) => {
                bail!("WIDGETS_TOKENS entry {n}: unknown flag {flag:?} (only :readonly)")
            }
            None => (owner, false),
        };
        if token.is_empty() || owner.is_empty() {
            bail!("WIDGETS_TOKENS entry {n} has an empty token or owner");
        }
        if let Some(earlier) = first_at.get(token) {
            bail!("WIDGETS_TOKENS entry {n} repeats the token of entry {earlier}");
        }
        first_at.insert(token.to_owned(), n);
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
    fn tokens_split_at_the_last_equals_sign() {
        let t = parse_tokens("pad64==carol, a=b=c=dave:readonly").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t["pad64="].owner, "carol");
        assert!(!t["pad64="].read_only);
        assert_eq!(t["a=b=c"].owner, "dave");
        assert!(t["a=b=c"].read_only);
        assert!(!t.contains_key("pad64"));
        // Nothing after the last `=` is an empty owner, not a token ending in `=`.
        assert!(parse_tokens("pad64==").is_err());
        assert!(parse_tokens("=alice").is_err());
    }

    #[test]
    fn a_repeated_token_is_refused_without_naming_it() {
        let err = parse_tokens("s3cret=alice,tok2=bob,s3cret=mallory")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("entry 3 repeats the token of entry 1"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
        // Errors about an entry never echo it.
        for bad in ["s3cret", "s3cret=", "s3cret=alice:root"] {
            let err = parse_tokens(bad).unwrap_err().to_string();
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn serving_settings_default_to_the_runtime_and_are_read() {
        let defaults = Config::from_lookup(|_| None).unwrap().serving;
        assert_eq!(defaults, idemgen_runtime::ServeConfig::default());
        let c = Config::from_lookup(|k| match k {
            "WIDGETS_HEADER_TIMEOUT" => Some("2s".into()),
            "WIDGETS_BODY_TIMEOUT" => Some("3s".into()),
            "WIDGETS_IDLE_TIMEOUT" => Some("4s".into()),
            "WIDGETS_MAX_CONNECTIONS" => Some("7".into()),
            "WIDGETS_SHUTDOWN_GRACE" => Some("500ms".into()),
            _ => None,
        })
        .unwrap()
        .serving;
        assert_eq!(c.header_read_timeout, Duration::from_secs(2));
        assert_eq!(c.body_read_timeout, Duration::from_secs(3));
        assert_eq!(c.idle_timeout, Duration::from_secs(4));
        assert_eq!(c.max_connections, 7);
        assert_eq!(c.shutdown_grace, Duration::from_millis(500));
        let zero = Config::from_lookup(|k| (k == "WIDGETS_MAX_CONNECTIONS").then(|| "0".into()));
        assert!(
            zero.unwrap_err()
                .to_string()
                .contains("WIDGETS_MAX_CONNECTIONS")
        );
        let bad = Config::from_lookup(|k| (k == "WIDGETS_SHUTDOWN_GRACE").then(|| "soon".into()));
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("WIDGETS_SHUTDOWN_GRACE")
        );
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
    fn pooler_is_chosen_by_name_and_a_transaction_pooler_needs_a_migration_url() {
        use idemgen_runtime::Pooler;
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            Config::from_lookup(move |k| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        let defaults = Config::from_lookup(|_| None).unwrap();
        assert_eq!(defaults.pooler, Pooler::Direct);
        assert_eq!(defaults.migration_url, None);
        assert_eq!(
            with(&[("WIDGETS_POOLER", "session")]).unwrap().pooler,
            Pooler::Session
        );
        assert_eq!(
            with(&[("WIDGETS_POOLER", "direct")]).unwrap().pooler,
            Pooler::Direct
        );
        let err = with(&[("WIDGETS_POOLER", "transaction")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("WIDGETS_MIGRATION_URL"), "{err}");
        let c = with(&[
            ("WIDGETS_POOLER", "transaction"),
            ("WIDGETS_MIGRATION_URL", "postgres://db:5432/app"),
        ])
        .unwrap();
        assert_eq!(c.pooler, Pooler::Transaction);
        assert_eq!(c.migration_url.as_deref(), Some("postgres://db:5432/app"));
        let err = with(&[("WIDGETS_POOLER", "statement")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("WIDGETS_POOLER"), "{err}");
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

    #[test]
    fn store_is_chosen_by_name_with_any_pooler() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            Config::from_lookup(move |k| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(with(&[]).unwrap().store, StoreKind::Sqlx);
        assert_eq!(
            with(&[("WIDGETS_STORE", "sqlx")]).unwrap().store,
            StoreKind::Sqlx
        );
        let tokio = with(&[
            ("WIDGETS_STORE", "tokio-postgres"),
            ("WIDGETS_POOLER", "session"),
        ])
        .unwrap();
        assert_eq!(tokio.store, StoreKind::TokioPostgres);
        assert_eq!(tokio.pooler, idemgen_runtime::Pooler::Session);
        let behind = with(&[
            ("WIDGETS_STORE", "tokio-postgres"),
            ("WIDGETS_POOLER", "transaction"),
            ("WIDGETS_MIGRATION_URL", "postgres://db:5432/app"),
        ])
        .unwrap();
        assert_eq!(behind.store, StoreKind::TokioPostgres);
        assert_eq!(behind.pooler, idemgen_runtime::Pooler::Transaction);
        let err = with(&[("WIDGETS_STORE", "diesel")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("WIDGETS_STORE"), "{err}");
    }

    #[test]
    fn cors_origins_and_metrics_switch() {
        let with = |k: &'static str, v: &'static str| {
            Config::from_lookup(move |name| (name == k).then(|| v.into()))
        };
        let defaults = Config::from_lookup(|_| None).unwrap();
        assert!(defaults.cors_origins.is_empty());
        assert!(defaults.metrics);
        // Metrics on a loopback listener of their own by default, never the API's.
        assert_eq!(defaults.metrics_listen, "127.0.0.1:9464".parse().unwrap());
        assert_ne!(defaults.metrics_listen, defaults.listen);
        assert_eq!(
            with("WIDGETS_METRICS_LISTEN", "0.0.0.0:9100")
                .unwrap()
                .metrics_listen,
            "0.0.0.0:9100".parse().unwrap()
        );
        assert!(with("WIDGETS_METRICS_LISTEN", "nine").is_err());
        let origins = with(
            "WIDGETS_CORS_ORIGINS",
            " https://a.example, ,https://b.example",
        )
        .unwrap()
        .cors_origins;
        assert_eq!(origins, ["https://a.example", "https://b.example"]);
        let err = with("WIDGETS_CORS_ORIGINS", "https://a\u{1}.example")
            .unwrap_err()
            .to_string();
        assert!(err.contains("WIDGETS_CORS_ORIGINS"), "{err}");
        assert!(!with("WIDGETS_METRICS", "off").unwrap().metrics);
        assert!(with("WIDGETS_METRICS", "on").unwrap().metrics);
        let err = with("WIDGETS_METRICS", "yes").unwrap_err().to_string();
        assert!(err.contains("WIDGETS_METRICS"), "{err}");
    }
}

//! Multi-host writer discovery: a libpq-style `DATABASE_URL` listing several hosts
//! (`postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`), which sqlx does not
//! parse, and pools that follow the writer across a failover.
//!
//! [`WriterHosts::parse`] splits the URL into one [`PgConnectOptions`] per host (each parsed by
//! sqlx, so every other URL parameter means what it means to sqlx). [`WriterHosts::connect`]
//! tries the hosts in order and connects the pool to the first writable one (not in recovery,
//! `transaction_read_only` off), then watches it: a task probes the writer every
//! [`WriterHosts::watch_every`] on a connection of its own; when the probe fails or finds the
//! server in recovery, it looks for the writer again among the hosts and points the pool's
//! future connections at it (`Pool::set_connect_options`), and the pool drops its connections
//! opened before the switch when they are next acquired (`before_acquire`, by their age).
//!
//! Until the new writer is found, attempts fail as with one host: a server in recovery refuses
//! the store's writes (SQLSTATE 25006), its gate and reconciling read check
//! `pg_is_in_recovery()`, and its look finds nothing there, so the answer is a 503, never a read
//! from a replica.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection as _, Executor as _, PgConnection, Row};

use super::error::classify;
use crate::store::StoreError;

/// Why a database URL could not be split into hosts.
#[derive(Debug, thiserror::Error)]
#[error("invalid database URL: {0}")]
pub struct WriterUrlError(String);

/// The hosts of a database URL, in order, each with the URL's other settings; the store only
/// ever uses the writable one.
#[derive(Debug, Clone)]
pub struct WriterHosts {
    hosts: Vec<PgConnectOptions>,
    watch_every: Duration,
    connect_timeout: Duration,
    ping_if_idle_for: Option<Duration>,
}

impl WriterHosts {
    /// Splits `url` (`postgres://` or `postgresql://`, hosts separated by commas in the
    /// authority, each `host`, `host:port` or `[v6]:port`, port 5432 by default).
    /// `target_session_attrs` may be absent, `any`, `read-write` or `primary`: whatever it says,
    /// the store connects to the writer (it never works on a replica); `read-only`, `standby`
    /// and `prefer-standby` are refused. A URL with one host is accepted too.
    pub fn parse(url: &str) -> Result<WriterHosts, WriterUrlError> {
        let bad = |m: &str| WriterUrlError(m.to_string());
        let (scheme, rest) = url
            .split_once("://")
            .filter(|(s, _)| *s == "postgres" || *s == "postgresql")
            .ok_or_else(|| bad("it must start with postgres:// or postgresql://"))?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        // The tail without target_session_attrs, which sqlx does not know.
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (tail, None),
        };
        let mut kept = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => match value {
                    "any" | "read-write" | "primary" => {}
                    other => {
                        return Err(WriterUrlError(format!(
                            "target_session_attrs={other}: the store works on the writer only \
                             (use read-write)"
                        )));
                    }
                },
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let mut hosts = Vec::new();
        for host in hostlist.split(',') {
            if host.is_empty() {
                return Err(bad("an empty host in the host list"));
            }
            let has_port = if let Some(v6) = host.strip_prefix('[') {
                let close = v6
                    .find(']')
                    .ok_or_else(|| bad("an IPv6 host without its closing ]"))?;
                v6[close + 1..].starts_with(':')
            } else {
                host.contains(':')
            };
            let host = if has_port {
                host.to_string()
            } else {
                format!("{host}:5432")
            };
            let single = match userinfo {
                Some(u) => format!("{scheme}://{u}@{host}{path}{query}"),
                None => format!("{scheme}://{host}{path}{query}"),
            };
            let mut options: PgConnectOptions = single
                .parse()
                .map_err(|e| WriterUrlError(format!("host {host}: {e}")))?;
            // sqlx keeps an IPv6 literal's brackets, which name no host to connect to.
            if let Some(v6) = options
                .get_host()
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
            {
                let v6 = v6.to_string();
                options = options.host(&v6);
            }
            hosts.push(options);
        }
        Ok(WriterHosts {
            hosts,
            watch_every: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(3),
            ping_if_idle_for: None,
        })
    }

    /// The hosts, in the URL's order.
    pub fn hosts(&self) -> &[PgConnectOptions] {
        &self.hosts
    }

    /// Changes every host's connect options (for example
    /// [`crate::Pooler::connect_options`]).
    pub fn map_options(mut self, f: impl Fn(PgConnectOptions) -> PgConnectOptions) -> Self {
        self.hosts = self.hosts.into_iter().map(f).collect();
        self
    }

    /// How often the writer is probed once a pool is connected (default 500 ms): after a
    /// failover, about the time before the pool follows the new writer.
    pub fn watch_every(mut self, every: Duration) -> Self {
        self.watch_every = every;
        self
    }

    /// Pings a pooled connection idle for longer than `idle` before the pool hands it out, in
    /// the hook [`WriterHosts::connect`] sets (default: no ping). It takes the place of sqlx's
    /// documented `before_acquire` idle-ping pattern, which `connect` would replace: with
    /// `test_before_acquire(false)`, a pool that sat idle across a restart of the writer then
    /// replaces its dead connections before using them. A failed ping drops the connection and
    /// the pool opens another.
    pub fn ping_if_idle_for(mut self, idle: Duration) -> Self {
        self.ping_if_idle_for = Some(idle);
        self
    }

    /// The first writable host, in order: connected to, not in recovery, and not read-only.
    pub async fn find_writer(&self) -> Result<PgConnectOptions, StoreError> {
        let mut tried = Vec::new();
        for host in &self.hosts {
            match self.probe(host, None).await {
                Ok(()) => return Ok(host.clone()),
                Err(e) => tried.push(format!("{}:{}: {e}", host.get_host(), host.get_port())),
            }
        }
        Err(StoreError::Unavailable(format!(
            "no writable server among the hosts ({})",
            tried.join("; ")
        )))
    }

    /// Connects to `host` (or uses `conn`) and checks that it is a writer.
    async fn probe(
        &self,
        host: &PgConnectOptions,
        conn: Option<&mut PgConnection>,
    ) -> Result<(), StoreError> {
        let mut own;
        let conn = match conn {
            Some(c) => c,
            None => {
                own = self.connect_one(host).await?;
                &mut own
            }
        };
        let row = tokio::time::timeout(
            self.connect_timeout,
            conn.fetch_one("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"),
        )
        .await
        .map_err(|_| StoreError::Unavailable("the writer probe timed out".into()))?
        .map_err(classify)?;
        let in_recovery: bool = row
            .try_get(0)
            .map_err(|e| StoreError::Other(e.to_string()))?;
        let read_only: String = row
            .try_get(1)
            .map_err(|e| StoreError::Other(e.to_string()))?;
        if in_recovery || read_only != "off" {
            return Err(StoreError::Unavailable(
                "in recovery or read-only: not the writer".into(),
            ));
        }
        Ok(())
    }

    async fn connect_one(&self, host: &PgConnectOptions) -> Result<PgConnection, StoreError> {
        tokio::time::timeout(self.connect_timeout, PgConnection::connect_with(host))
            .await
            .map_err(|_| StoreError::Unavailable("connecting timed out".into()))?
            .map_err(classify)
    }

    /// A pool on the writer, built from `options`, that follows the writer after a failover (see
    /// the module documentation). The watching task ends when the pool is closed.
    ///
    /// It sets the pool's `before_acquire` hook, **replacing** any hook `options` has (sqlx keeps
    /// one): there connections opened before a switch are dropped, and, with
    /// [`WriterHosts::ping_if_idle_for`], connections idle for longer are pinged. Every other
    /// setting of `options` (`test_before_acquire` included) is kept.
    pub async fn connect(&self, options: PgPoolOptions) -> Result<PgPool, StoreError> {
        let writer = self.find_writer().await?;
        let switched: Arc<Mutex<Option<Instant>>> = Arc::default();
        let seen = switched.clone();
        let ping_if_idle_for = self.ping_if_idle_for;
        let pool = options
            .before_acquire(move |conn, meta| {
                let stale = seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some_and(|at| meta.age > at.elapsed());
                let ping = ping_if_idle_for.is_some_and(|idle| meta.idle_for > idle);
                Box::pin(async move {
                    if stale {
                        return Ok(false);
                    }
                    if ping {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(writer)
            .await
            .map_err(classify)?;
        tokio::spawn(self.clone().watch(pool.clone(), switched));
        Ok(pool)
    }

    /// Probes the pool's writer every `watch_every`; when it is gone or no longer the writer,
    /// finds the writer among the hosts and points the pool at it.
    async fn watch(self, pool: PgPool, switched: Arc<Mutex<Option<Instant>>>) {
        let mut conn: Option<PgConnection> = None;
        while !pool.is_closed() {
            tokio::time::sleep(self.watch_every).await;
            let current = pool.connect_options();
            if conn.is_none() {
                conn = self.connect_one(&current).await.ok();
            }
            let healthy = match conn.as_mut() {
                Some(c) => self.probe(&current, Some(c)).await.is_ok(),
                None => false,
            };
            if healthy {
                continue;
            }
            if let Some(c) = conn.take() {
                let _ = c.close().await;
            }
            let Ok(writer) = self.find_writer().await else {
                continue;
            };
            if writer.get_host() != current.get_host() || writer.get_port() != current.get_port() {
                pool.set_connect_options(writer);
                *switched.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                tracing::warn!("the database writer changed; the pool follows it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Vec<(String, u16)> {
        WriterHosts::parse(url)
            .unwrap()
            .hosts()
            .iter()
            .map(|h| (h.get_host().to_string(), h.get_port()))
            .collect()
    }

    #[test]
    fn every_host_gets_the_urls_other_settings() {
        let parsed = WriterHosts::parse(
            "postgres://app:s%40cret@h1:5433,h2,[::1]:5434/orders?sslmode=disable&target_session_attrs=read-write&application_name=x",
        )
        .unwrap();
        let got: Vec<_> = parsed
            .hosts()
            .iter()
            .map(|h| {
                (
                    h.get_host().to_string(),
                    h.get_port(),
                    h.get_username().to_string(),
                    h.get_database().map(str::to_string),
                    h.get_application_name().map(str::to_string),
                )
            })
            .collect();
        let want = |host: &str, port| {
            (
                host.to_string(),
                port,
                "app".to_string(),
                Some("orders".to_string()),
                Some("x".to_string()),
            )
        };
        assert_eq!(
            got,
            vec![want("h1", 5433), want("h2", 5432), want("::1", 5434)]
        );
    }

    #[test]
    fn one_host_and_no_parameters_parse_too() {
        assert_eq!(
            hosts("postgresql://db.internal/app"),
            vec![("db.internal".into(), 5432)]
        );
        assert_eq!(
            hosts("postgres://u@a:1,b:2?target_session_attrs=any"),
            vec![("a".into(), 1), ("b".into(), 2)]
        );
    }

    #[test]
    fn replica_targets_and_malformed_lists_are_refused() {
        for (url, says) in [
            (
                "postgres://a,b/db?target_session_attrs=read-only",
                "writer only",
            ),
            (
                "postgres://a,b/db?target_session_attrs=standby",
                "writer only",
            ),
            ("postgres://a,,b/db", "empty host"),
            ("postgres://[::1:5432/db", "closing ]"),
            ("mysql://a/db", "postgres://"),
        ] {
            let err = WriterHosts::parse(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}

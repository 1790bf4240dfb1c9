//! Throwaway PostgreSQL clusters and fresh per-test databases.
//!
//! [`TestDb::new`] hands each test a fresh, empty database on a real server:
//!
//! * when `DATABASE_URL` is set, databases are created on that server;
//! * otherwise one throwaway cluster per test process is started from the local PostgreSQL
//!   binaries (`initdb`/`postgres` on `PATH` or under `/usr/lib/postgresql/*/bin`) in a temporary
//!   directory, listening on a free loopback port. When the process runs as root the cluster runs
//!   as the `postgres` user, because `initdb` refuses root. A watchdog process stops the cluster
//!   and removes its directory when the test process exits, however it exits.
//!
//! With neither a URL nor binaries, [`TestDb::new`] returns an error naming both remedies: a test
//! that cannot reach its database fails loudly.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

/// Why a test database could not be provided.
#[derive(Debug)]
pub struct HarnessError(String);

impl std::fmt::Display for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HarnessError {}

impl HarnessError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> HarnessError {
        HarnessError(msg.into())
    }
}

fn err(msg: impl Into<String>) -> HarnessError {
    HarnessError(msg.into())
}

/// The directory of a cluster being derived from another ([`Cluster::derive`]). Not part of the
/// API.
#[doc(hidden)]
#[derive(Debug)]
pub struct DerivedDir {
    /// The cluster's directory (the server log goes here).
    pub dir: PathBuf,
    /// Where its data directory must be written.
    pub data: PathBuf,
    /// The loopback port it will listen on.
    pub port: u16,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
}

impl DerivedDir {
    /// Runs one of the server's tools as the user the cluster runs as.
    pub fn run_tool(
        &self,
        tool: &str,
        args: &[&std::ffi::OsStr],
    ) -> Result<std::process::Output, HarnessError> {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.args(args);
        run_owned(&mut cmd, self.owner)
    }
}

/// How a throwaway cluster is configured.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Whether commits wait for WAL flushes. Off for tests (speed), on for benchmarks (honest cost).
    pub fsync: bool,
    /// `max_connections` of the server.
    pub max_connections: u32,
    /// Further `postgresql.conf` settings, as (name, value) pairs written verbatim.
    pub settings: Vec<(String, String)>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            fsync: false,
            max_connections: 300,
            settings: Vec::new(),
        }
    }
}

/// A PostgreSQL cluster started from local binaries, owned by this process.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    run_as_postgres: bool,
}

impl Cluster {
    /// Starts a new cluster in a fresh temporary directory.
    pub fn start(options: &ClusterOptions) -> Result<Cluster, HarnessError> {
        let bin = find_bin_dir().ok_or_else(|| {
            err(
                "no PostgreSQL available for tests: set DATABASE_URL to a server where databases \
                 may be created, or install the PostgreSQL server binaries (initdb, postgres; e.g. \
                 `apt-get install -y postgresql`)",
            )
        })?;
        let run_as_postgres = is_root();
        let dir =
            std::env::temp_dir().join(format!("idemgen-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        let owner = if run_as_postgres {
            Some(postgres_ids()?)
        } else {
            None
        };
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| err(format!("chown {}: {e}", dir.display())))?;
        }
        let data = dir.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C");
        let out = run_owned(&mut initdb, owner)?;
        if !out.status.success() {
            return Err(err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let port = free_port()?;
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
             fsync = {}\nsynchronous_commit = on\nfull_page_writes = {}\nmax_connections = {}\n\
             shared_buffers = '128MB'\nlog_min_messages = fatal\n{}",
            dir.display(),
            if options.fsync { "on" } else { "off" },
            if options.fsync { "on" } else { "off" },
            options.max_connections,
            // Benchmarks count statements with pg_stat_statements when the server ships it.
            if bin.join("../lib/pg_stat_statements.so").exists() {
                "shared_preload_libraries = 'pg_stat_statements'\n"
            } else {
                ""
            }
        );
        let mut conf = conf;
        for (name, value) in &options.settings {
            conf.push_str(&format!("{name} = {value}\n"));
        }
        let auto = data.join("postgresql.auto.conf");
        let mut existing = std::fs::read_to_string(&auto).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(&auto, existing).map_err(|e| err(format!("writing config: {e}")))?;
        let cluster = Cluster {
            dir,
            bin,
            port,
            run_as_postgres,
        };
        cluster.pg_ctl_start()?;
        cluster.spawn_watchdog()?;
        Ok(cluster)
    }

    fn pg_ctl_start(&self) -> Result<(), HarnessError> {
        let owner = self.owner()?;
        let mut start = Command::new(self.bin.join("pg_ctl"));
        start
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "start"]);
        let out = run_owned(&mut start, owner)?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            return Err(err(format!(
                "pg_ctl start failed: {}\n{log}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// A second cluster beside this one, for harnesses built on this one (idemgen's failover
    /// tests derive a streaming standby): a fresh directory and port owned like this cluster's,
    /// filled by `init` (which writes `data/`), then started and watched like any cluster. Not
    /// part of the API.
    #[doc(hidden)]
    pub fn derive(
        &self,
        init: impl FnOnce(&DerivedDir) -> Result<(), HarnessError>,
    ) -> Result<Cluster, HarnessError> {
        let owner = self.owner()?;
        let dir =
            std::env::temp_dir().join(format!("idemgen-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| err(format!("chown {}: {e}", dir.display())))?;
        }
        let derived = DerivedDir {
            data: dir.join("data"),
            dir,
            port: free_port()?,
            bin: self.bin.clone(),
            owner,
        };
        if let Err(e) = init(&derived) {
            // Nothing owns the directory yet: remove it here, not leave it behind.
            let _ = std::fs::remove_dir_all(&derived.dir);
            return Err(e);
        }
        let cluster = Cluster {
            dir: derived.dir,
            bin: self.bin.clone(),
            port: derived.port,
            run_as_postgres: self.run_as_postgres,
        };
        cluster.pg_ctl_start()?;
        cluster.spawn_watchdog()?;
        Ok(cluster)
    }

    /// Runs one of the server's tools (`pg_ctl`, `psql`, …) on this cluster's data directory's
    /// behalf, as the user the cluster runs as. Not part of the API.
    #[doc(hidden)]
    pub fn run_tool(
        &self,
        tool: &str,
        args: &[&std::ffi::OsStr],
    ) -> Result<std::process::Output, HarnessError> {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.args(args);
        run_owned(&mut cmd, self.owner()?)
    }

    /// Stops the server immediately (as a crash would) and starts it again on the same port.
    pub fn restart_immediate(&self) -> Result<(), HarnessError> {
        self.stop("immediate")?;
        self.pg_ctl_start()
    }

    /// Stops the server with the given `pg_ctl` shutdown mode (`fast`, `immediate`).
    pub fn stop(&self, mode: &str) -> Result<(), HarnessError> {
        let owner = self.owner()?;
        let mut stop = Command::new(self.bin.join("pg_ctl"));
        stop.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", mode, "-w", "stop"]);
        let out = run_owned(&mut stop, owner)?;
        if !out.status.success() {
            return Err(err(format!(
                "pg_ctl stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Starts the server again after [`Cluster::stop`].
    pub fn start_again(&self) -> Result<(), HarnessError> {
        self.pg_ctl_start()
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for `database` as the superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The data directory's parent (server log: `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn owner(&self) -> Result<Option<(u32, u32)>, HarnessError> {
        if self.run_as_postgres {
            Ok(Some(postgres_ids()?))
        } else {
            Ok(None)
        }
    }

    /// A shell process that waits for this process to end, then stops the server and removes
    /// its directory, so no cluster outlives its test run.
    fn spawn_watchdog(&self) -> Result<(), HarnessError> {
        let script = format!(
            "while [ -d /proc/{pid} ]; do sleep 0.5; done; \
             '{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.dir.join("data").display(),
            dir = self.dir.display(),
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some((uid, gid)) = self.owner()? {
            // rm -rf of a directory owned by postgres works as postgres; pg_ctl must not run as root.
            cmd.uid(uid).gid(gid);
        }
        cmd.spawn()
            .map_err(|e| err(format!("starting the cluster watchdog: {e}")))?;
        Ok(())
    }
}

impl Drop for Cluster {
    /// A cluster started for one test stops with it (the process's shared cluster lives in a
    /// static and is stopped by its watchdog instead).
    fn drop(&mut self) {
        let _ = self.stop("immediate");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `cmd` to completion from `/` with no stdin, as `owner` (uid, gid) when given.
pub fn run_owned(
    cmd: &mut Command,
    owner: Option<(u32, u32)>,
) -> Result<std::process::Output, HarnessError> {
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    cmd.stdin(Stdio::null())
        .current_dir("/")
        .output()
        .map_err(|e| err(format!("running {:?}: {e}", cmd.get_program())))
}

/// Whether this process runs as root (`initdb` and `postgres` refuse to).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The uid and gid of the `postgres` user, which the servers run as under root.
pub fn postgres_ids() -> Result<(u32, u32), HarnessError> {
    let id = |flag: &str| -> Result<u32, HarnessError> {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .map_err(|e| err(format!("id {flag} postgres: {e}")))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| {
                err(
                    "running as root, but there is no `postgres` user to run the throwaway \
                     cluster as (initdb refuses root); create one or set DATABASE_URL",
                )
            })
    };
    Ok((id("-u")?, id("-g")?))
}

fn find_bin_dir() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                // Follow symlinks (Debian links /usr/local/bin/initdb into the versioned dir).
                let real = std::fs::canonicalize(dir.join("initdb")).ok()?;
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    versions.sort_by_key(|bin| pg_version(bin));
    versions.pop()
}

/// The numeric version of a `/usr/lib/postgresql/<version>/bin` directory, for ordering by
/// version rather than by name (`9.6` < `10` < `15`; a lexical sort puts `9.6` last).
/// Components that are not numbers order as 0.
pub fn pg_version(bin: &Path) -> Vec<u64> {
    let version = bin
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    version
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16, HarnessError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| err(format!("finding a free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| err(format!("finding a free port: {e}")))
}

enum Server {
    Url(String),
    Cluster(Cluster),
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

fn server() -> Result<&'static Server, HarnessError> {
    let server = SERVER.get_or_init(|| match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Ok(Server::Url(url)),
        _ => Cluster::start(&ClusterOptions::default())
            .map(Server::Cluster)
            .map_err(|e| e.0),
    });
    server.as_ref().map_err(|e| err(e.clone()))
}

/// The shared throwaway cluster of this process, when tests are not using `DATABASE_URL`.
///
/// Fault-injection tests (restarts) need the cluster itself; they fail when `DATABASE_URL` is set.
pub fn shared_cluster() -> Result<&'static Cluster, HarnessError> {
    match server()? {
        Server::Cluster(c) => Ok(c),
        Server::Url(_) => Err(err(
            "this test restarts its server and needs a throwaway cluster: unset DATABASE_URL",
        )),
    }
}

/// A fresh database on the test server, for one test.
#[derive(Debug, Clone)]
pub struct TestDb {
    /// The database's name.
    pub name: String,
    /// Connection options for the database.
    pub options: PgConnectOptions,
    /// Its URL.
    pub url: String,
}

impl TestDb {
    /// Creates a fresh, empty database on the test server.
    pub async fn new() -> Result<TestDb, HarnessError> {
        let admin_url = match server()? {
            Server::Url(u) => u.clone(),
            Server::Cluster(c) => c.url("postgres"),
        };
        Self::create(&admin_url).await
    }

    /// Creates a fresh, empty database on a cluster of the caller's own (for tests that stop or
    /// restart their server and must not disturb tests sharing the process's cluster).
    pub async fn on_cluster(cluster: &Cluster) -> Result<TestDb, HarnessError> {
        Self::create(&cluster.url("postgres")).await
    }

    async fn create(admin_url: &str) -> Result<TestDb, HarnessError> {
        let admin: PgConnectOptions = admin_url
            .parse()
            .map_err(|e| err(format!("invalid DATABASE_URL: {e}")))?;
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut conn = connect_retrying(&admin).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .map_err(|e| err(format!("CREATE DATABASE: {e}")))?;
        let _ = conn.close().await;
        let options = admin.clone().database(&name);
        let url = options.to_url_lossy().to_string();
        Ok(TestDb { name, options, url })
    }

    /// A connection pool on this database.
    pub async fn pool(&self, max_connections: u32) -> Result<PgPool, HarnessError> {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(self.options.clone())
            .await
            .map_err(|e| err(format!("connecting to {}: {e}", self.name)))
    }

    /// One connection to this database.
    pub async fn connect(&self) -> Result<PgConnection, HarnessError> {
        connect_retrying(&self.options).await
    }
}

async fn connect_retrying(options: &PgConnectOptions) -> Result<PgConnection, HarnessError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match PgConnection::connect_with(options).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => {
                return Err(err(format!("cannot reach the test PostgreSQL server: {e}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pg_version;
    use std::path::{Path, PathBuf};

    #[test]
    fn server_directories_order_by_numeric_version() {
        let mut bins: Vec<PathBuf> = ["16", "9.6", "10", "15", "17"]
            .iter()
            .map(|v| Path::new("/usr/lib/postgresql").join(v).join("bin"))
            .collect();
        bins.sort_by_key(|bin| pg_version(bin));
        let order: Vec<&str> = bins
            .iter()
            .map(|b| b.parent().unwrap().file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(order, ["9.6", "10", "15", "16", "17"]);
    }
}

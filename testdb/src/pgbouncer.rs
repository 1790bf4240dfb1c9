//! A throwaway PgBouncer in front of a test server, in session or transaction pooling mode.
//!
//! [`PgBouncer::start`] writes a configuration into a fresh temporary directory and starts the
//! local `pgbouncer` binary (Debian package `pgbouncer`, on `PATH` or in `/usr/sbin`) on a free
//! loopback port, as the `postgres` user when the process runs as root (PgBouncer refuses root,
//! as `initdb` does). Every database of the server is reachable through it under its own name
//! (`* =` fallback), each with a server pool of its own; idle server connections close after 2 s
//! (`server_idle_timeout`), so the per-test databases of a long test run do not add up to the
//! server's `max_connections`. Trust authentication, as the throwaway cluster's. A watchdog stops it and
//! removes its directory when the test process exits; dropping it does the same at once.
//!
//! Without the binary, or when it does not come up, [`PgBouncer::start`] fails with the reason
//! (and PgBouncer's log): a test through PgBouncer never silently runs direct.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idemgen_runtime::testing::HarnessError;
use idemgen_runtime::testing::harness::{free_port, is_root, postgres_ids, run_owned};

/// PgBouncer's `pool_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A client keeps its server connection until it disconnects.
    Session,
    /// A client holds a server connection only for one transaction (a statement outside a
    /// transaction is a transaction of its own).
    Transaction,
}

impl PoolMode {
    fn as_str(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }
}

/// A PgBouncer owned by this process.
#[derive(Debug)]
pub struct PgBouncer {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    mode: PoolMode,
    owner: Option<(u32, u32)>,
}

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of the server at `host:port`, with server pools of
    /// `pool_size` connections per database.
    pub fn start(
        host: &str,
        port: u16,
        mode: PoolMode,
        pool_size: u32,
    ) -> Result<PgBouncer, HarnessError> {
        let bin = find_pgbouncer().ok_or_else(|| {
            HarnessError::new(
                "no pgbouncer binary for the PgBouncer tests: install it \
                 (`apt-get install -y pgbouncer`; .ci/run does)",
            )
        })?;
        let owner = if is_root() {
            Some(postgres_ids()?)
        } else {
            None
        };
        let dir =
            std::env::temp_dir().join(format!("idemgen-pgb-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| HarnessError::new(format!("creating {}: {e}", dir.display())))?;
        let listen = free_port()?;
        // Trust authentication still needs the user in the auth file.
        let users = "\"postgres\" \"\"\n";
        let ini = format!(
            "[databases]\n* = host={host} port={port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {dir}/userlist.txt\n\
             pool_mode = {mode}\nmax_client_conn = 2000\ndefault_pool_size = {pool_size}\n\
             server_reset_query = DISCARD ALL\n\
             ignore_startup_parameters = extra_float_digits\n\
             admin_users = postgres\n\
             logfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n\
             server_login_retry = 1\nserver_idle_timeout = 2\n\
             log_connections = 0\nlog_disconnections = 0\n",
            dir = dir.display(),
            mode = mode.as_str(),
        );
        for (name, text) in [("userlist.txt", users), ("pgbouncer.ini", ini.as_str())] {
            std::fs::write(dir.join(name), text)
                .map_err(|e| HarnessError::new(format!("writing {name}: {e}")))?;
        }
        if let Some((uid, gid)) = owner {
            for p in [
                dir.clone(),
                dir.join("userlist.txt"),
                dir.join("pgbouncer.ini"),
            ] {
                std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                    .map_err(|e| HarnessError::new(format!("chown {}: {e}", p.display())))?;
            }
        }
        let bouncer = PgBouncer {
            dir,
            bin,
            port: listen,
            mode,
            owner,
        };
        if let Err(e) = bouncer.launch() {
            let _ = std::fs::remove_dir_all(&bouncer.dir);
            return Err(e);
        }
        bouncer.spawn_watchdog()?;
        Ok(bouncer)
    }

    /// Starts the daemon and waits until it accepts connections.
    fn launch(&self) -> Result<(), HarnessError> {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-d").arg(self.dir.join("pgbouncer.ini"));
        let out = run_owned(&mut cmd, self.owner)?;
        if !out.status.success() {
            return Err(HarnessError::new(format!(
                "pgbouncer failed to start: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(HarnessError::new(format!(
                    "pgbouncer did not listen on 127.0.0.1:{} within 20 s\n{}",
                    self.port,
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("pgbouncer.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Stops PgBouncer at once (SIGTERM: every client and server connection is closed, as when
    /// the process is restarted by its supervisor) and waits until it is gone.
    pub fn stop(&self) -> Result<(), HarnessError> {
        let Some(pid) = self.pid() else {
            return Err(HarnessError::new("pgbouncer is not running (no pid file)"));
        };
        let out = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .output()
            .map_err(|e| HarnessError::new(format!("kill: {e}")))?;
        if !out.status.success() {
            return Err(HarnessError::new(format!(
                "kill -TERM {pid}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Path::new(&format!("/proc/{pid}")).exists() {
            if Instant::now() > deadline {
                return Err(HarnessError::new(format!("pgbouncer {pid} did not stop")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(self.dir.join("pgbouncer.pid"));
        Ok(())
    }

    /// Starts PgBouncer again after [`PgBouncer::stop`], on the same port.
    pub fn start_again(&self) -> Result<(), HarnessError> {
        self.launch()
    }

    /// The loopback port PgBouncer listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its pooling mode.
    pub fn mode(&self) -> PoolMode {
        self.mode
    }

    /// Connection options for `database` through PgBouncer, as `postgres`.
    pub fn options(&self, database: &str) -> sqlx::postgres::PgConnectOptions {
        sqlx::postgres::PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username("postgres")
            .database(database)
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    fn spawn_watchdog(&self) -> Result<(), HarnessError> {
        let script = format!(
            "while [ -d /proc/{pid} ]; do sleep 0.5; done; \
             [ -f '{dir}/pgbouncer.pid' ] && kill -TERM $(cat '{dir}/pgbouncer.pid'); \
             sleep 0.5; rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display(),
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd.spawn()
            .map_err(|e| HarnessError::new(format!("starting the pgbouncer watchdog: {e}")))?;
        Ok(())
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if self.pid().is_some() {
            let _ = self.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find_pgbouncer() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("pgbouncer"))
        .find(|p| p.is_file())
}

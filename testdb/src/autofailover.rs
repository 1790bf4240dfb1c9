//! A throwaway pg_auto_failover formation: a monitor and two PostgreSQL nodes on loopback, with
//! synchronous replication, for tests where an orchestrator (not the test) promotes the standby.
//!
//! [`AutoFailover::start`] runs the local `pg_autoctl` (Debian packages
//! `postgresql-<major>-auto-failover` and its `pg-auto-failover-cli`, on `PATH` or in `/usr/bin`) with
//! the server binaries of the PostgreSQL version that has the `pgautofailover` extension, as the
//! `postgres` user when the process runs as root (`initdb` refuses root). It creates the monitor,
//! tunes its health checks so that a dead primary is replaced within seconds (see
//! [`MONITOR_SETTINGS`]), creates node `a` (the first primary) and node `b` (its standby, taken
//! by `pg_basebackup`), and returns once the monitor reports `a` primary and `b` secondary.
//! pg_auto_failover's defaults for two nodes make the replication synchronous
//! (`synchronous_standby_names = 'ANY 1 (pgautofailover_standby_N)'`) while both nodes are up;
//! with one node left it is `wait_primary` and commits without a standby.
//!
//! Each node runs under its own `pg_autoctl run` (its keeper), whose process group holds the
//! keeper's services and the node's postmaster. [`AutoFailover::kill`] kills a node the way an
//! orchestrator must see it to promote: the keeper first (a live keeper restarts a stopped local
//! PostgreSQL), then the server ([`Kill::Immediate`]: `pg_ctl -m immediate`; [`Kill::Sigkill`]:
//! SIGKILL of the whole group, postmaster included). [`AutoFailover::rejoin`] starts the node's
//! keeper again; the monitor has it rewind and follow the new primary.
//!
//! Anything that does not come up fails with the component's log. A watchdog stops every
//! process and removes the directory when the test process exits; dropping the formation does
//! the same at once. Both kill the keepers' `pg_autoctl` processes, then stop each server with
//! `pg_ctl -m immediate -w` (so that its postmaster removes its System V shared memory segment),
//! and only then SIGKILL what is left of the groups; dropping also removes the unattached segment
//! a node killed by [`Kill::Sigkill`] left.

use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idemgen_runtime::testing::HarnessError;
use idemgen_runtime::testing::harness::{free_port, is_root, pg_version, postgres_ids};

/// The monitor's settings written by the harness (`postgresql.conf` of the monitor), so that a
/// failover completes in seconds. pg_auto_failover's defaults, in brackets, take about 30 s more
/// (the demote timeout alone is 30 s).
pub const MONITOR_SETTINGS: &[(&str, &str)] = &[
    // Health checks every second [5 s], each with a 2 s connect timeout [5 s], one retry [2]
    // after 500 ms [2 s]. Not 1 s: on a loaded machine a connect can take that long.
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_timeout", "2000"),
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    // A node whose health check failed and whose keeper has not reported for 4 s [20 s] is
    // unhealthy. Not 2 s: a keeper (reporting each second) stalled by load for 2 s beside one
    // slow health check would have its healthy primary failed over.
    ("pgautofailover.node_considered_unhealthy_timeout", "4000"),
    // How long the monitor waits for an unreachable primary to demote itself before it promotes
    // the standby [30 s]. Below the keeper's own `network_partition_timeout` (20 s): safe here
    // because the nodes are killed, and because the standby stops replicating first, so a
    // primary cut off from the monitor cannot acknowledge a synchronous commit meanwhile.
    ("pgautofailover.primary_demote_timeout", "2000"),
    // Failover decisions from 1 s [10 s] after the monitor starts.
    ("pgautofailover.startup_grace_period", "1000"),
];

/// How [`AutoFailover::kill`] kills a node (its keeper always first, with SIGKILL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// The keeper killed, then the server stopped with `pg_ctl -m immediate` (a crash: no
    /// shutdown checkpoint, clients cut).
    Immediate,
    /// SIGKILL of the node's whole process group: keeper and postmaster at once (the machine's
    /// processes gone).
    Sigkill,
}

/// What the monitor says about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// `a` or `b`.
    pub name: String,
    /// Its loopback port.
    pub port: u16,
    /// The state its keeper last reported.
    pub reported: String,
    /// The state the monitor assigned.
    pub goal: String,
}

impl NodeState {
    /// Whether the node is the formation's writer: assigned and reporting `primary`,
    /// `wait_primary` or `single`.
    pub fn is_writer(&self) -> bool {
        let writer = |s: &str| matches!(s, "primary" | "wait_primary" | "single");
        writer(&self.reported) && writer(&self.goal)
    }
}

#[derive(Debug)]
struct Node {
    name: &'static str,
    port: u16,
    keeper: Option<Child>,
}

/// A monitor and two nodes, owned by this process.
#[derive(Debug)]
pub struct AutoFailover {
    dir: PathBuf,
    bin: PathBuf,
    autoctl: PathBuf,
    owner: Option<(u32, u32)>,
    database: String,
    monitor_port: u16,
    monitor: Option<Child>,
    nodes: [Node; 2],
}

fn err(msg: impl Into<String>) -> HarnessError {
    HarnessError::new(msg)
}

impl AutoFailover {
    /// Starts the formation with `database` created on its nodes; returns once `a` is primary
    /// and `b` its synchronous secondary (within 120 s, else an error with the logs). Blocking.
    pub fn start(database: &str) -> Result<AutoFailover, HarnessError> {
        let autoctl = find_autoctl().ok_or_else(|| {
            err("no pg_autoctl for the pg_auto_failover tests: install it \
                 (`postgresql-<major>-auto-failover` for the installed server's major; \
                 .ci/run does)")
        })?;
        let bin = find_bin_with_extension().ok_or_else(|| {
            err(
                "no PostgreSQL server binaries with the pgautofailover extension \
                 (lib/pgautofailover.so) under /usr/lib/postgresql/*: install \
                 `postgresql-<major>-auto-failover` for the installed server's major",
            )
        })?;
        let owner = if is_root() {
            Some(postgres_ids()?)
        } else {
            None
        };
        let dir =
            std::env::temp_dir().join(format!("idemgen-paf-{}", uuid::Uuid::new_v4().simple()));
        for sub in ["", "xdg", "xdg/config", "xdg/data", "xdg/run"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d)
                .map_err(|e| err(format!("creating {}: {e}", d.display())))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&d, Some(uid), Some(gid))
                    .map_err(|e| err(format!("chown {}: {e}", d.display())))?;
            }
        }
        let mut formation = AutoFailover {
            dir,
            bin,
            autoctl,
            owner,
            database: database.to_string(),
            monitor_port: free_port()?,
            monitor: None,
            nodes: [
                Node {
                    name: "a",
                    port: free_port()?,
                    keeper: None,
                },
                Node {
                    name: "b",
                    port: free_port()?,
                    keeper: None,
                },
            ],
        };
        formation.spawn_watchdog()?;
        formation.bring_up()?;
        Ok(formation)
    }

    fn bring_up(&mut self) -> Result<(), HarnessError> {
        // The monitor: created (initdb, extension), tuned, then run by its own pg_autoctl.
        let monitor_data = self.dir.join("monitor");
        let mut create = self.autoctl_cmd();
        create
            .args(["create", "monitor", "--pgdata"])
            .arg(&monitor_data)
            .args(["--pgport", &self.monitor_port.to_string()])
            .args([
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--pgctl",
            ])
            .arg(self.bin.join("pg_ctl"));
        let out = self.output(&mut create)?;
        if !out.status.success() {
            return Err(err(format!(
                "pg_autoctl create monitor failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(monitor_data.join("postgresql.conf"))
            .map_err(|e| err(format!("opening the monitor's postgresql.conf: {e}")))?;
        let mut settings =
            String::from("\n# idemgen's failover test: seconds, not half a minute\n");
        for (name, value) in MONITOR_SETTINGS {
            settings.push_str(&format!("{name} = {value}\n"));
        }
        conf.write_all(settings.as_bytes())
            .map_err(|e| err(format!("writing the monitor's settings: {e}")))?;
        let mut run = self.autoctl_cmd();
        run.args(["run", "--pgdata"]).arg(&monitor_data);
        self.monitor = Some(self.spawn_logged(run, "monitor")?);
        self.wait_for(
            "the monitor to accept connections",
            Duration::from_secs(60),
            |f| f.monitor_query("SELECT 1").map(|_| true),
        )?;
        // The failover timings rest on these: a setting the monitor ignored (a renamed GUC, a
        // conf file not read) would leave its default of seconds more.
        for (name, value) in MONITOR_SETTINGS {
            // `pg_settings.setting` is in the GUC's base unit (milliseconds here), as written.
            let shown = self.monitor_query(&format!(
                "SELECT setting FROM pg_settings WHERE name = '{name}'"
            ))?;
            let shown = shown.first().and_then(|r| r.first()).map(String::as_str);
            if shown != Some(*value) {
                return Err(err(format!(
                    "the monitor did not take {name} = {value}: it shows {shown:?}"
                )));
            }
        }

        // Node a, alone: `single`.
        self.start_node(0, true)?;
        self.wait_for("node a to be single", Duration::from_secs(60), |f| {
            Ok(f.states()?
                .iter()
                .any(|n| n.name == "a" && n.reported == "single" && n.goal == "single"))
        })?;
        // The nodes' commits need no local flush for these tests (a killed process loses
        // nothing the kernel holds); replication stays synchronous. pg_basebackup copies it to b.
        self.node_sql(0, "ALTER SYSTEM SET fsync = off")?;
        self.node_sql(0, "SELECT pg_reload_conf()")?;

        // Node b: pg_basebackup waits for a spread checkpoint on a; CHECKPOINT there makes it
        // immediate.
        self.start_node(1, true)?;
        self.wait_for(
            "node a primary and node b secondary",
            Duration::from_secs(120),
            |f| {
                let _ = f.node_sql(0, "CHECKPOINT");
                let states = f.states()?;
                Ok(states.len() == 2
                    && states.iter().all(|n| {
                        let want = if n.name == "a" {
                            "primary"
                        } else {
                            "secondary"
                        };
                        n.reported == want && n.goal == want
                    }))
            },
        )
    }

    /// The `pg_autoctl` command with this formation's environment: its own XDG directories
    /// (pg_autoctl keeps its configuration and state there), the server binaries first on
    /// `PATH`, sockets in the formation's directory.
    fn autoctl_cmd(&self) -> Command {
        let mut cmd = Command::new(&self.autoctl);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.bin.clone()];
        paths.extend(std::env::split_paths(&path));
        cmd.env("PATH", std::env::join_paths(paths).unwrap_or(path))
            .env("XDG_CONFIG_HOME", self.dir.join("xdg/config"))
            .env("XDG_DATA_HOME", self.dir.join("xdg/data"))
            .env("XDG_RUNTIME_DIR", self.dir.join("xdg/run"))
            .env("HOME", &self.dir)
            .env("PG_REGRESS_SOCK_DIR", &self.dir)
            .env("PGHOST", &self.dir)
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .env_remove("PGUSER")
            .env_remove("PGDATABASE")
            .env_remove("PG_AUTOCTL_MONITOR")
            .stdin(Stdio::null())
            .current_dir("/");
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn output(&self, cmd: &mut Command) -> Result<std::process::Output, HarnessError> {
        cmd.output()
            .map_err(|e| err(format!("running {:?}: {e}", cmd.get_program())))
    }

    /// Spawns a long-running pg_autoctl in a process group of its own, its output appended to
    /// `<name>.log`, the group recorded in `<name>.pgid` for the watchdog.
    fn spawn_logged(&self, mut cmd: Command, name: &str) -> Result<Child, HarnessError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .map_err(|e| err(format!("opening {name}.log: {e}")))?;
        let log2 = log
            .try_clone()
            .map_err(|e| err(format!("opening {name}.log: {e}")))?;
        cmd.stdout(log).stderr(log2).process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| err(format!("starting pg_autoctl for {name}: {e}")))?;
        std::fs::write(
            self.dir.join(format!("{name}.pgid")),
            child.id().to_string(),
        )
        .map_err(|e| err(format!("writing {name}.pgid: {e}")))?;
        Ok(child)
    }

    fn monitor_url(&self) -> String {
        format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor_port
        )
    }

    fn start_node(&mut self, i: usize, create: bool) -> Result<(), HarnessError> {
        let node = &self.nodes[i];
        let data = self.dir.join(node.name);
        let mut cmd = self.autoctl_cmd();
        if create {
            cmd.args(["create", "postgres", "--pgdata"])
                .arg(&data)
                .args(["--pgport", &node.port.to_string()])
                .args(["--hostname", "127.0.0.1", "--name", node.name])
                .args(["--auth", "trust", "--no-ssl", "--dbname", &self.database])
                .args(["--monitor", &self.monitor_url(), "--pgctl"])
                .arg(self.bin.join("pg_ctl"))
                .arg("--run");
        } else {
            cmd.args(["run", "--pgdata"]).arg(&data);
        }
        let name = node.name;
        let child = self.spawn_logged(cmd, name)?;
        self.nodes[i].keeper = Some(child);
        Ok(())
    }

    /// Runs `sql` on the monitor's database; rows as `|`-separated fields.
    fn monitor_query(&self, sql: &str) -> Result<Vec<Vec<String>>, HarnessError> {
        self.psql(self.monitor_port, "pg_auto_failover", sql)
    }

    fn node_sql(&self, i: usize, sql: &str) -> Result<Vec<Vec<String>>, HarnessError> {
        self.psql(self.nodes[i].port, &self.database, sql)
    }

    fn psql(&self, port: u16, db: &str, sql: &str) -> Result<Vec<Vec<String>>, HarnessError> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-q", "-F", "|", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
            .args(["-d", db, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "2")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| err(format!("running psql: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "psql on port {port}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect())
    }

    /// What the monitor says about the nodes, in node order.
    pub fn states(&self) -> Result<Vec<NodeState>, HarnessError> {
        let rows = self.monitor_query(
            "SELECT nodename, nodeport, reportedstate, goalstate FROM pgautofailover.node \
              ORDER BY nodeid",
        )?;
        rows.into_iter()
            .map(|r| match r.as_slice() {
                [name, port, reported, goal] => Ok(NodeState {
                    name: name.clone(),
                    port: port
                        .parse()
                        .map_err(|_| err(format!("the monitor's node port {port:?}")))?,
                    reported: reported.clone(),
                    goal: goal.clone(),
                }),
                other => Err(err(format!("the monitor's node row {other:?}"))),
            })
            .collect()
    }

    /// The index (0 for `a`, 1 for `b`) of the node the monitor has as the writer, if any.
    pub fn writer(&self) -> Result<Option<usize>, HarnessError> {
        let states = self.states()?;
        Ok(states
            .iter()
            .find(|s| s.is_writer())
            .and_then(|s| self.nodes.iter().position(|n| n.name == s.name)))
    }

    /// Waits (polling every 100 ms) until `done` holds, or fails after `timeout` with the
    /// monitor's view and the logs' tails.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&AutoFailover) -> Result<bool, HarnessError>,
    ) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            match done(self) {
                Ok(true) => return Ok(()),
                Ok(false) => last.clear(),
                Err(e) => last = e.to_string(),
            }
            if Instant::now() > deadline {
                return Err(err(format!(
                    "pg_auto_failover: waited {timeout:?} for {what} (last error: {last}); \
                     nodes: {:?}\n{}",
                    self.states(),
                    self.logs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the monitor's and the nodes' pg_autoctl logs.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for name in ["monitor", "a", "b"] {
            let log =
                std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(25)..].join("\n");
            out.push_str(&format!("--- {name}.log (tail)\n{tail}\n"));
        }
        out
    }

    /// A setting of node `i`'s server (`synchronous_standby_names`, …), as `SHOW` gives it.
    pub fn setting(&self, i: usize, name: &str) -> Result<String, HarnessError> {
        let rows = self.node_sql(
            i,
            &format!("SELECT current_setting('{}')", name.replace('\'', "")),
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.first())
            .cloned()
            .unwrap_or_default())
    }

    /// The libpq-style URL listing both nodes, `target_session_attrs=read-write`, as `postgres`.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
            self.nodes[0].port, self.nodes[1].port, self.database
        )
    }

    /// A URL for node `i` alone.
    pub fn node_url(&self, i: usize) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{}",
            self.nodes[i].port, self.database
        )
    }

    /// Node `i`'s name (`a`, `b`).
    pub fn name(&self, i: usize) -> &'static str {
        self.nodes[i].name
    }

    /// Kills node `i`: its keeper with SIGKILL (so that nothing restarts its server), then its
    /// server as `how` says. Returns when the server is gone.
    pub fn kill(&mut self, i: usize, how: Kill) -> Result<(), HarnessError> {
        let Some(mut keeper) = self.nodes[i].keeper.take() else {
            return Err(err(format!("node {} is not running", self.nodes[i].name)));
        };
        let group = keeper.id() as i32;
        let data = self.dir.join(self.nodes[i].name);
        let postmaster = postmaster_pid(&data);
        match how {
            Kill::Immediate => {
                // The keeper's processes (comm `pg_autoctl`) of the group; the server stays.
                kill_keeper(&mut keeper)?;
                let mut stop = Command::new(self.bin.join("pg_ctl"));
                stop.arg("-D")
                    .arg(&data)
                    .args(["-m", "immediate", "-w", "stop"])
                    .stdin(Stdio::null())
                    .current_dir("/");
                if let Some((uid, gid)) = self.owner {
                    stop.uid(uid).gid(gid);
                }
                let out = self.output(&mut stop)?;
                if !out.status.success() {
                    return Err(err(format!(
                        "pg_ctl -m immediate stop of node {}: {}",
                        self.nodes[i].name,
                        String::from_utf8_lossy(&out.stderr)
                    )));
                }
            }
            Kill::Sigkill => {
                signal(-group, "-KILL")?;
                let _ = keeper.wait();
            }
        }
        // Gone: the postmaster (and so every backend) is no more.
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(pid) = postmaster {
            if !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
                break;
            }
            if Instant::now() > deadline {
                return Err(err(format!(
                    "node {}'s postmaster {pid} survived",
                    self.nodes[i].name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Starts node `i`'s keeper again after [`AutoFailover::kill`], and waits (at most 90 s)
    /// until the monitor reports it `secondary` and the other node `primary`: it has rewound
    /// and follows the new primary, synchronously.
    pub fn rejoin(&mut self, i: usize) -> Result<(), HarnessError> {
        if self.nodes[i].keeper.is_some() {
            return Err(err(format!("node {} is running", self.nodes[i].name)));
        }
        self.start_node(i, false)?;
        let name = self.nodes[i].name;
        self.wait_for(
            &format!("node {name} to rejoin as the secondary"),
            Duration::from_secs(90),
            |f| {
                let states = f.states()?;
                Ok(states.len() == 2
                    && states.iter().all(|n| {
                        let want = if n.name == name {
                            "secondary"
                        } else {
                            "primary"
                        };
                        n.reported == want && n.goal == want
                    }))
            },
        )
    }

    fn spawn_watchdog(&self) -> Result<(), HarnessError> {
        let pg_ctl = self.bin.join("pg_ctl");
        let script = format!(
            "while [ -d /proc/{pid} ]; do sleep 0.5; done; \
             for f in '{dir}'/*.pgid; do [ -f \"$f\" ] && pkill -KILL -g $(cat \"$f\") -x pg_autoctl; done; \
             for d in monitor a b; do '{pg_ctl}' -D '{dir}'/$d -m immediate -w stop >/dev/null 2>&1; done; \
             for f in '{dir}'/*.pgid; do [ -f \"$f\" ] && kill -KILL -$(cat \"$f\"); done; \
             rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display(),
            pg_ctl = pg_ctl.display(),
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
            .map_err(|e| err(format!("starting the pg_auto_failover watchdog: {e}")))?;
        Ok(())
    }
}

impl Drop for AutoFailover {
    /// Kills every keeper (its `pg_autoctl` processes only, so that nothing restarts a server),
    /// stops each server with `pg_ctl -m immediate -w` (the postmaster removes its shared memory
    /// segment as it exits; a SIGKILLed postmaster would leave it behind), then kills what is
    /// left of the keepers' groups and removes the directory.
    fn drop(&mut self) {
        let mut children: Vec<Child> = self
            .nodes
            .iter_mut()
            .filter_map(|n| n.keeper.take())
            .chain(self.monitor.take())
            .collect();
        for child in &mut children {
            let _ = kill_keeper(child);
        }
        for d in ["monitor", "a", "b"] {
            let mut stop = Command::new(self.bin.join("pg_ctl"));
            stop.arg("-D")
                .arg(self.dir.join(d))
                .args(["-m", "immediate", "-w", "stop"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .current_dir("/");
            if let Some((uid, gid)) = self.owner {
                stop.uid(uid).gid(gid);
            }
            let _ = stop.status();
        }
        for child in &children {
            let _ = signal(-(child.id() as i32), "-KILL");
        }
        // A server killed with SIGKILL (`Kill::Sigkill`, not rejoined) left its segment; its
        // next start would have removed it, but the directory goes now.
        for d in ["monitor", "a", "b"] {
            remove_orphaned_segment(&self.dir.join(d));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kills a keeper's `pg_autoctl` processes with SIGKILL, its supervisor (`keeper`, the child
/// this process spawned) first so that it restarts none, then the group's others until a scan
/// finds none alive (at most 10 s); the group's PostgreSQL processes stay. Reaps `keeper`.
fn kill_keeper(keeper: &mut Child) -> Result<(), HarnessError> {
    let group = keeper.id() as i32;
    signal(group, "-KILL")?;
    let _ = keeper.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<i32> = group_members(group)
            .into_iter()
            .filter(|(pid, comm)| comm == "pg_autoctl" && !is_zombie(*pid))
            .map(|(pid, _)| pid)
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(err(format!(
                "pg_autoctl processes {left:?} of group {group} survived SIGKILL"
            )));
        }
        for pid in left {
            // One may have exited since the scan: not an error.
            let _ = signal(pid, "-KILL");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the System V shared memory segment a dead postmaster of `data` left (its id on line
/// 7 of `postmaster.pid`, which a clean stop deletes), if no process is attached to it.
fn remove_orphaned_segment(data: &Path) {
    let Ok(pidfile) = std::fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    let Some(shmid) = pidfile
        .lines()
        .nth(6)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|id| id.parse::<u64>().ok())
    else {
        return;
    };
    // /proc/sysvipc/shm: key shmid perms size cpid lpid nattch …
    let unattached = std::fs::read_to_string("/proc/sysvipc/shm")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .any(|f| f.get(1) == Some(&shmid.to_string().as_str()) && f.get(6) == Some(&"0"));
    if unattached {
        let _ = Command::new("ipcrm")
            .args(["-m", &shmid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Sends `sig` (`-KILL`) to `pid` (a negative pid: the process group).
fn signal(pid: i32, sig: &str) -> Result<(), HarnessError> {
    let out = Command::new("kill")
        .args([sig, "--", &pid.to_string()])
        .output()
        .map_err(|e| err(format!("kill: {e}")))?;
    if !out.status.success() {
        return Err(err(format!(
            "kill {sig} {pid}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// The processes of process group `group`: (pid, comm), from `/proc/*/stat`.
fn group_members(group: i32) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid pgrp …; comm may hold spaces, so split at the last ')'.
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let comm = stat[open + 1..close].to_string();
            let mut rest = stat[close + 1..].split_whitespace();
            let (_state, _ppid, pgrp) = (rest.next()?, rest.next()?, rest.next()?);
            (pgrp.parse::<i32>().ok()? == group).then_some((pid, comm))
        })
        .collect()
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let close = s.rfind(')')?;
            s[close + 1..].split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(true)
}

/// The postmaster's pid, from `postmaster.pid` (absent when the server is down).
fn postmaster_pid(data: &Path) -> Option<i32> {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

fn find_autoctl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("pg_autoctl"))
        .find(|p| p.is_file())
}

/// The newest `/usr/lib/postgresql/<version>/bin` whose version has the extension.
fn find_bin_with_extension() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|v| v.join("lib/pgautofailover.so").is_file() && v.join("bin/pg_ctl").is_file())
        .map(|v| v.join("bin"))
        .collect();
    versions.sort_by_key(|bin| pg_version(bin));
    versions.pop()
}

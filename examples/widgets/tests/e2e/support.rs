use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idemgen_runtime::testing::TestDb;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A widgets server process.
pub struct Server {
    pub base: String,
    /// The metrics listener (`WIDGETS_METRICS_LISTEN`): `GET {metrics}/metrics`.
    pub metrics: String,
    child: Child,
    env: Vec<(String, String)>,
    port: u16,
    launch: Launch,
}

/// How the process is started beyond its environment.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Runs the binary under `prlimit --nofile=N` (its descriptor limit).
    pub nofile: Option<u64>,
    /// Appends the process's stdout (its log) and stderr to this file instead of discarding
    /// and inheriting them.
    pub log: Option<std::path::PathBuf>,
}

impl Server {
    /// Starts the binary on a free loopback port against `db`, with extra environment.
    pub async fn start(db: &TestDb, extra: &[(&str, &str)]) -> Server {
        Self::start_with(db, extra, Launch::default()).await
    }

    /// [`Server::start`], launched as `launch` says.
    pub async fn start_with(db: &TestDb, extra: &[(&str, &str)], launch: Launch) -> Server {
        Self::start_on_url(&db.url, extra, launch).await
    }

    /// Starts the binary with `DATABASE_URL=url` (e.g. a URL listing several hosts).
    pub async fn start_on_url(url: &str, extra: &[(&str, &str)], launch: Launch) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let metrics_port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut env: Vec<(String, String)> = vec![
            ("DATABASE_URL".into(), url.to_string()),
            (
                "WIDGETS_METRICS_LISTEN".into(),
                format!("127.0.0.1:{metrics_port}"),
            ),
            (
                "WIDGETS_TOKENS".into(),
                "tok1=alice,tok2=bob,tok3=carol:readonly".into(),
            ),
            ("RUST_LOG".into(), "warn".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Self::spawn(env, port, launch).await
    }

    /// The process id (the binary's: `prlimit` execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn spawn(env: Vec<(String, String)>, port: u16, launch: Launch) -> Server {
        let binary = env!("CARGO_BIN_EXE_widgets");
        let mut cmd = match launch.nofile {
            Some(n) => {
                let mut cmd = Command::new("prlimit");
                cmd.arg(format!("--nofile={n}")).arg("--").arg(binary);
                cmd
            }
            None => Command::new(binary),
        };
        let open = |path: &std::path::Path| {
            Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("opening the log file"),
            )
        };
        let (stdout, stderr) = match &launch.log {
            Some(path) => (open(path), open(path)),
            None => (Stdio::null(), Stdio::inherit()),
        };
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("WIDGETS_LISTEN", format!("127.0.0.1:{port}"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let child = cmd.spawn().expect("starting the widgets binary");
        let metrics = env
            .iter()
            .find(|(k, _)| k == "WIDGETS_METRICS_LISTEN")
            .map(|(_, v)| format!("http://{v}"))
            .unwrap_or_default();
        let server = Server {
            base: format!("http://127.0.0.1:{port}"),
            metrics,
            child,
            env,
            port,
            launch,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = reqwest::Client::new();
        loop {
            let ok = client
                .get(format!("{}/widgets", self.base))
                .bearer_auth("tok1")
                .send()
                .await
                .is_ok_and(|r| r.status() == StatusCode::OK);
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the widgets server did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the process with SIGKILL (no draining, no cleanup).
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaping");
    }

    /// Sends SIGTERM and waits (at most 20 s) for the process to exit; returns whether it exited
    /// successfully.
    pub fn terminate_and_wait(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        assert!(sent.success(), "SIGTERM could not be sent");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting") {
                return status.success();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the same server again (same port and environment), with overrides.
    pub async fn restart(mut self, overrides: &[(&str, &str)]) -> Server {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut env = std::mem::take(&mut self.env);
        for (k, v) in overrides {
            env.retain(|(ek, _)| ek != k);
            env.push((k.to_string(), v.to_string()));
        }
        let launch = self.launch.clone();
        Self::spawn(env, self.port, launch).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The problem `code` of an error answer.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

/// Sends a request; `key` and `token` become headers when given.
pub async fn call(
    client: &reqwest::Client,
    base: &str,
    method: Method,
    path: &str,
    token: Option<&str>,
    key: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut req = client.request(method, format!("{base}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("HTTP request");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    Answer {
        status,
        headers,
        body,
    }
}

pub async fn create(base: &str, token: &str, key: &str, body: Value) -> Answer {
    call(
        &reqwest::Client::new(),
        base,
        Method::POST,
        "/widgets",
        Some(token),
        Some(key),
        Some(body),
    )
    .await
}

/// A fresh database (the server applies the migrations at start).
/// `idemgen-records` with `args` on `db`, as an operator runs it: its exit code and output.
pub async fn records(db: &TestDb, args: &[&str]) -> (u8, String) {
    let argv = [&["idemgen-records", "--database-url", &db.url][..], args].concat();
    let outcome = idemgen_records::run(argv).await;
    (
        outcome.code,
        format!("{}{}", outcome.stdout, outcome.stderr),
    )
}

/// [`records`] with `--json`, which must succeed.
pub async fn records_json(db: &TestDb, args: &[&str]) -> Value {
    let argv = [&["--json"][..], args].concat();
    let (code, out) = records(db, &argv).await;
    assert_eq!(code, 0, "{args:?}: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

pub async fn fresh_db() -> TestDb {
    TestDb::new().await.expect("test database")
}

pub async fn count(db: &TestDb, sql: &str) -> i64 {
    let mut conn = db.connect().await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

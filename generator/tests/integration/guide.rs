//! docs/guide.md, run as written: every shell block and every file block, in order, in a fresh
//! directory. The CLI is installed with the guide's own `cargo install` (in debug, into a
//! temporary root), the crate is created with `cargo new`, built with `clippy -D warnings`, its
//! handler test runs, the binary serves without `DATABASE_URL` on the throwaway PostgreSQL it
//! starts for development (and, afterwards, on a database named by `DATABASE_URL`), and the
//! guide's two curl requests (sent by a small HTTP client here, so that curl is not a
//! prerequisite) must show a replay.
//!
//! Info strings tag the blocks: `sh` runs each line (`cd` moves the working directory), `sh
//! install` is the CLI install, `sh server` starts the service, `sh http` holds the requests, `sh
//! probe` runs `idemgen probe` against the service (every check must pass),
//! `<lang> file=PATH` writes a file, `diff file=PATH` changes one (hunks split by `@@`, each
//! found once, in order). Blocks without a tag are prose.
//!
//! From the first `diff` block on, the guide moves the service to SQLite: those blocks run after
//! the PostgreSQL service's production checks, and the moved service must compile no PostgreSQL
//! driver, serve on its file and replay.
//!
//! Builds use the workspace's own target directory (a running test holds no cargo lock) and the
//! workspace's `Cargo.lock`, so that the guide's crate reuses the dependencies the workspace built.

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idemgen_testdb::TestDb;
use sqlx::Connection;

/// One fenced block of the guide.
#[derive(Debug)]
struct Block {
    info: Vec<String>,
    body: String,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for line in markdown.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => {
                current = Some(Block {
                    info: info.split_whitespace().map(str::to_owned).collect(),
                    body: String::new(),
                });
            }
            (Some(_), Some("")) => out.extend(current.take()),
            (Some(block), _) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Runs `command` with bash in `dir`; panics with its output when it fails.
fn run(command: &str, dir: &Path, env: &[(&str, String)]) -> String {
    let output = Command::new("bash")
        .args(["-eo", "pipefail", "-c", command])
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "`{command}` failed in {}:\n{text}",
        dir.display()
    );
    text
}

/// A running service, killed when dropped.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Splits a shell line into words, honouring single quotes (all the guide's requests use).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut in_word = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// A response: status, headers (lower-case names), body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends the request a `curl -si -X … -H … -d …` line describes, to `port`.
fn curl(line: &str, port: u16) -> Reply {
    let words = words(line);
    assert_eq!(words.first().map(String::as_str), Some("curl"), "{line}");
    let (mut method, mut url, mut headers, mut body) =
        ("GET".to_owned(), String::new(), Vec::new(), String::new());
    let mut i = 1;
    while i < words.len() {
        match words[i].as_str() {
            "-s" | "-i" | "-si" => {}
            "-X" => {
                i += 1;
                method = words[i].clone();
            }
            "-H" => {
                i += 1;
                headers.push(words[i].clone());
            }
            "-d" => {
                i += 1;
                body = words[i].clone();
            }
            other => url = other.to_owned(),
        }
        i += 1;
    }
    let path = url
        .strip_prefix("localhost:8080")
        .unwrap_or_else(|| panic!("the guide's requests go to localhost:8080: {line}"));
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        request.push_str(&h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the service listens");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guide_works_from_an_empty_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let guide = std::fs::read_to_string(root.join("docs/guide.md")).expect("docs/guide.md");
    let work = tempfile::tempdir().unwrap();
    let cli = work.path().join("cli");
    // The target directory this test was built in (…/target/debug/idemgen): whatever
    // `--target-dir` or `CARGO_TARGET_DIR` the outer cargo used.
    let target = Path::new(env!("CARGO_BIN_EXE_idemgen"))
        .ancestors()
        .nth(2)
        .expect("the target directory")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        cli.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The crate's own tests reach PostgreSQL as this test does: the same server.
    let admin = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => idemgen_testdb::shared_cluster()
            .expect("the test cluster")
            .url("postgres"),
    };
    let env = vec![
        ("PATH", path),
        ("CARGO_TARGET_DIR", target.display().to_string()),
        ("DATABASE_URL", admin),
    ];
    let mut cwd: PathBuf = work.path().to_path_buf();
    let mut scaffolded_main = None;
    let mut service: Option<(Service, u16)> = None;
    let mut service_db: Option<String> = None;
    let mut replies = Vec::new();
    let (mut probed, mut rows_before_probe) = (false, -1i64);
    let mut blocks = blocks(&guide);
    let moving = blocks
        .iter()
        .position(|b| b.info.first().is_some_and(|i| i == "diff"))
        .expect("the guide moves the service to SQLite");
    let moved = blocks.split_off(moving);
    for block in blocks {
        let info: Vec<&str> = block.info.iter().map(String::as_str).collect();
        match info.as_slice() {
            ["sh", "install"] => {
                // As written, but in debug and into a temporary root.
                let line = block.body.trim();
                assert_eq!(line, "cargo install --locked --path generator");
                run(
                    &format!("{line} --debug --root {}", cli.display()),
                    &root,
                    &env,
                );
            }
            ["sh"] => {
                for line in block.body.lines().filter(|l| !l.trim().is_empty()) {
                    if let Some(dir) = line.strip_prefix("cd ") {
                        cwd = cwd.join(dir.trim());
                        continue;
                    }
                    run(line, &cwd, &env);
                    if line.starts_with("idemgen scaffold") {
                        scaffolded_main =
                            Some(std::fs::read_to_string(cwd.join("src/main.rs")).unwrap());
                    }
                }
            }
            ["sh", "server"] => {
                let line = block.body.trim();
                assert!(line.ends_with("cargo run"), "{line}");
                run("cargo build", &cwd, &env);
                // As written: no DATABASE_URL, so the debug build starts its own throwaway
                // PostgreSQL and says where (`DATABASE_URL=…` on stdout).
                let running = start_notes(&target, None, &[]).await;
                service_db = Some(running.url.expect("a throwaway database is announced"));
                service = Some((running.service, running.port));
            }
            ["sh", "probe"] => {
                let port = service.as_ref().expect("the server block comes first").1;
                // Before the probe creates notes of its own: the two requests made one.
                let url = service_db.as_deref().expect("the server block comes first");
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                rows_before_probe = sqlx::query_scalar("SELECT count(*) FROM notes")
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                let line = block
                    .body
                    .trim()
                    .replace("http://localhost:8080", &format!("http://127.0.0.1:{port}"));
                let output = run(&line, &cwd, &env);
                assert!(output.contains("0 failed"), "{output}");
                probed = true;
            }
            ["sh", "http"] => {
                let port = service.as_ref().expect("the server block comes first").1;
                for line in block.body.lines().filter(|l| !l.trim().is_empty()) {
                    replies.push(curl(line, port));
                }
            }
            [_, file] if file.starts_with("file=") => {
                let path = cwd.join(&file["file=".len()..]);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let mut text = block.body.clone();
                if path.ends_with("Cargo.toml") {
                    text = text.replace("/path/to/idemgen", &root.display().to_string());
                    // Not in the guide: the workspace's lock, so that the dependencies it built
                    // are reused.
                    std::fs::copy(root.join("Cargo.lock"), cwd.join("Cargo.lock")).unwrap();
                }
                if path.ends_with("src/main.rs") {
                    // The guide's main.rs is the scaffold's, edited where it says so.
                    let scaffolded = scaffolded_main.as_deref().expect("scaffolded first");
                    let guide: Vec<&str> =
                        text.lines().filter(|l| !l.contains("// edited")).collect();
                    let scaffold: Vec<&str> = scaffolded
                        .lines()
                        .filter(|l| !l.contains("let service = "))
                        .collect();
                    assert_eq!(
                        guide, scaffold,
                        "the guide's main.rs drifted from the scaffold"
                    );
                }
                std::fs::write(&path, text).unwrap();
            }
            _ => {}
        }
    }
    assert!(probed, "the guide probes the service");
    assert_eq!(rows_before_probe, 1, "one note for two requests");
    // The two requests: executed once, replayed once, one row.
    assert_eq!(replies.len(), 2);
    let (first, second) = (&replies[0], &replies[1]);
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(second.status, 201, "{}", second.body);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    assert_eq!(first.body, second.body);
    assert_eq!(first.header("location"), second.header("location"));
    drop(service);

    // Production: with DATABASE_URL the same binary serves that database and starts none.
    let db = TestDb::new().await.expect("a test database");
    let running = start_notes(&target, Some(&db.url), &[]).await;
    let port = running.port;
    assert_eq!(running.url, None, "no throwaway database with DATABASE_URL");
    // The scaffold's production defaults: a health check beside the API, metrics only on their
    // own listener.
    let health = curl("curl -si localhost:8080/healthz", port);
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    assert_ne!(curl("curl -si localhost:8080/metrics", port).status, 200);
    let created = curl(
        "curl -si -X POST localhost:8080/notes -H 'Authorization: Bearer alice' -H 'Idempotency-Key: prod' -H 'Content-Type: application/json' -d '{\"text\":\"kept\"}'",
        port,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let mut conn = db.connect().await.unwrap();
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM notes WHERE text = 'kept'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, 1, "written to the DATABASE_URL database");
    let metrics = curl("curl -si localhost:8080/metrics", running.metrics_port);
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(
        metrics.body.contains("idemgen_requests"),
        "{}",
        metrics.body
    );
    // A clean start, and a served request, log nothing at WARN.
    let warnings = running.warnings.lock().unwrap().clone();
    assert!(warnings.is_empty(), "{warnings:#?}");
    drop(running);

    // "Moving a service between the stores", as written.
    for block in moved {
        let info: Vec<&str> = block.info.iter().map(String::as_str).collect();
        match info.as_slice() {
            ["sh"] => {
                for line in block.body.lines().filter(|l| !l.trim().is_empty()) {
                    run(line, &cwd, &env);
                }
            }
            ["diff", file] if file.starts_with("file=") => {
                let path = cwd.join(&file["file=".len()..]);
                let diff = block
                    .body
                    .replace("/path/to/idemgen", &root.display().to_string());
                let text = std::fs::read_to_string(&path).unwrap();
                std::fs::write(&path, apply_diff(&text, &diff, &path)).unwrap();
            }
            _ => {}
        }
    }
    let tree = run("cargo tree -e normal --prefix none", &cwd, &env);
    assert!(tree.contains("sqlx-sqlite"), "{tree}");
    assert!(
        !tree.contains("sqlx-postgres"),
        "moved, yet PostgreSQL's driver: {tree}"
    );
    run("cargo build", &cwd, &env);
    let file = work.path().join("moved.db");
    let running = start_notes(&target, None, &[("DATABASE_PATH", file.as_path())]).await;
    let create = "curl -si -X POST localhost:8080/notes -H 'Authorization: Bearer alice' -H 'Idempotency-Key: moved' -H 'Content-Type: application/json' -d '{\"text\":\"moved\"}'";
    let (first, second) = (curl(create, running.port), curl(create, running.port));
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(second.status, 201, "{}", second.body);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    assert_eq!(first.body, second.body);
    let location = first.header("location").expect("a Location").to_owned();
    let read = curl(
        &format!("curl -si localhost:8080{location} -H 'Authorization: Bearer alice'"),
        running.port,
    );
    assert_eq!(
        (read.status, read.body.as_str()),
        (200, first.body.as_str())
    );
    assert!(file.exists(), "served on DATABASE_PATH");
    let warnings = running.warnings.lock().unwrap().clone();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// `text` changed by `diff`: hunks split at lines starting with `@@`; in each, lines starting
/// with ` ` (or empty) are context, `-` removed, `+` added. A hunk's old lines must occur in
/// `text` after the previous hunk's, and exactly once.
fn apply_diff(text: &str, diff: &str, path: &Path) -> String {
    let mut out = text.to_owned();
    let mut from = 0;
    let lines: Vec<&str> = diff.lines().collect();
    for hunk in lines.split(|l| l.starts_with("@@")) {
        let old: String = hunk
            .iter()
            .filter(|l| !l.starts_with('+'))
            .map(|l| format!("{}\n", l.get(1..).unwrap_or("")))
            .collect();
        let new: String = hunk
            .iter()
            .filter(|l| !l.starts_with('-'))
            .map(|l| format!("{}\n", l.get(1..).unwrap_or("")))
            .collect();
        let at = out[from..]
            .find(&old)
            .unwrap_or_else(|| panic!("{}: the guide's hunk is not there:\n{old}", path.display()));
        assert_eq!(
            out[from + at + old.len()..].find(&old),
            None,
            "{}: the guide's hunk is ambiguous:\n{old}",
            path.display()
        );
        out.replace_range(from + at..from + at + old.len(), &new);
        from += at + new.len();
    }
    out
}

/// Starts the guide's binary on a free port (its metrics on another), with `database_url` as
/// `DATABASE_URL` or without one; waits until it listens. Returns the database URL it announced
/// on stdout (`DATABASE_URL=…`, printed when it started a throwaway PostgreSQL), if any; the
/// rest of its stdout (the log, at WARN and above) is kept in `Running::warnings`.
async fn start_notes(target: &Path, database_url: Option<&str>, env: &[(&str, &Path)]) -> Running {
    let port = free_port();
    let metrics_port = free_port();
    let mut command = Command::new(target.join("debug/notes"));
    command.env_remove("DATABASE_URL");
    if let Some(url) = database_url {
        command.env("DATABASE_URL", url);
    }
    command.envs(env.iter().copied());
    let mut child = command
        .env("LISTEN", format!("127.0.0.1:{port}"))
        .env("METRICS_LISTEN", format!("127.0.0.1:{metrics_port}"))
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the service starts");
    let stdout = child.stdout.take().unwrap();
    let (announce, announced) = std::sync::mpsc::channel();
    let warnings = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let logged = std::sync::Arc::clone(&warnings);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some(url) = line.strip_prefix("DATABASE_URL=") {
                let _ = announce.send(url.to_owned());
            } else {
                logged.lock().unwrap().push(line);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the service never listened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Printed before the service listens; read by the thread soon after.
    let url = announced.recv_timeout(Duration::from_secs(2)).ok();
    Running {
        service: Service(child),
        port,
        metrics_port,
        url,
        warnings,
    }
}

/// The guide's binary, running.
struct Running {
    service: Service,
    port: u16,
    metrics_port: u16,
    /// The throwaway database it announced.
    url: Option<String>,
    /// Its log lines (at WARN and above).
    warnings: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

//! The command line's grammar: the clap definitions of `idemgen` and its subcommands.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use idemgen::report::Format;

/// Checks OpenAPI specs for idempotent operations and generates axum servers for them.
#[derive(Debug, Parser)]
#[command(name = "idemgen", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Printed after `check --help`.
const CHECK_AFTER_HELP: &str = "\
Rules, their ids and default levels, and the config keys: `idemgen rules`.

Config: idemgen.toml beside the spec (or --config): header, max-key-length, required-statuses,
recommended-statuses, and [rules] <rule-id> = \"error\" | \"warning\" | \"off\".

Exit codes: 0 no errors (warnings allowed unless --deny-warnings); 1 a rule failed; 2 usage, I/O,
config or parse errors.";

// The subcommands (their doc comments are their help).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Checks every operation marked `x-idempotent: true` against the idempotency contract.
    #[command(after_help = CHECK_AFTER_HELP)]
    Check(CheckArgs),
    /// Lists every rule of `check` (id, default level, what it requires), the config keys and
    /// the exit codes.
    Rules,
    /// Generates the server module (types, handler trait, router) and `idemgen.lock`.
    Build(BuildArgs),
    /// Generates a client module (types, one async method per operation; keyed calls retried
    /// with one key, on the `idemgen-client` crate).
    // The client has no lock: `--check` compares the module only.
    #[command(mut_arg("check", |check| check.help(CLIENT_CHECK_HELP)))]
    Client(BuildArgs),
    /// Writes a skeleton implementation of the handler trait for you to fill in (and, with
    /// `--main`, the service's `main.rs`). Never overwrites a file without `--force`.
    Scaffold(ScaffoldArgs),
    /// Prints the fingerprint of a semantic input exactly as the runtime computes it: `hs2` for
    /// new records, `--format hs1` for records of earlier releases.
    Fingerprint(FingerprintArgs),
    /// Checks a running server against the idempotency protocol, from its spec: keys required
    /// and well-formed, replays byte for byte, 422 on a changed request, failures not stored,
    /// one execution under 20 concurrent requests, keys scoped to their owner, problem+json.
    ///
    /// IT CREATES REAL RESOURCES on the server (every successful request executes or replays a
    /// write): point it at a test or staging deployment. `--dry-run` prints the requests instead.
    #[command(after_help = PROBE_AFTER_HELP)]
    Probe(ProbeArgs),
}

/// The help of `client --check` (`build --check` also compares the lock).
const CLIENT_CHECK_HELP: &str = "Write nothing; exit 1 when the files on disk differ from what \
would be generated (for CI)";

/// Printed after `probe --help`.
const PROBE_AFTER_HELP: &str = "\
Examples:
  idemgen probe openapi.yaml --base-url http://127.0.0.1:8080 --header 'Authorization: Bearer tok1'
  idemgen probe openapi.yaml --base-url $URL --header \"Authorization: Bearer $A\" \\
      --other-header \"Authorization: Bearer $B\" --format junit > probe.xml
  idemgen probe openapi.yaml --base-url $URL --probe-config probe.toml \\
      --path-param createRefund.id=pay_123

Exit codes: 0 every check passed (skipped checks name their reason), 1 a check failed,
2 usage, spec or connection errors.";

// `idemgen probe`. (Plain comments on the argument structs and enums: clap turns doc comments
// into help.)
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    pub spec: PathBuf,
    /// The server, e.g. `http://127.0.0.1:8080`.
    #[arg(long, value_name = "URL")]
    pub base_url: String,
    /// A header sent with every request, e.g. a credential (`'Authorization: Bearer …'`).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// A second credential's header, for the check that keys are scoped to their owner.
    #[arg(long = "other-header", value_name = "NAME: VALUE")]
    pub other_headers: Vec<String>,
    /// Probe only this operationId (repeatable).
    #[arg(long, value_name = "OPERATION_ID")]
    pub only: Vec<String>,
    /// A path parameter's value (repeatable), for every operation (`id=…`) or one
    /// (`createRefund.id=…`); without one the probe builds a fresh resource for each check (OpenAPI
    /// links, the probe config's setup, or the same-prefix POST).
    #[arg(long = "path-param", value_name = "[OPERATION_ID.]NAME=VALUE")]
    pub path_params: Vec<String>,
    /// The probe config (TOML), every key in docs/probe.md: `skip = ["problem-types"]`; per
    /// operation, fixed path parameters, the setup calls that bring a fresh resource into the state
    /// it needs, a body: `[operations.createRefund]`, `path = { id = "…" }`, `setup =
    /// ["createPayment", "capturePayment"]`, `body = { amount = 100, ref = "r-{unique}" }`.
    #[arg(long, value_name = "PATH")]
    pub probe_config: Option<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = ProbeFormat::Human)]
    pub format: ProbeFormat,
    /// Print the requests it would send; send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

// The output formats of `probe`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ProbeFormat {
    Human,
    Json,
    Junit,
}

// `idemgen build` and `idemgen client`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    pub spec: PathBuf,
    /// The directory to write `mod.rs` into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Write nothing; exit 1 when the files on disk or the lock differ from what would be
    /// generated (for CI).
    #[arg(long)]
    pub check: bool,
}

// `idemgen scaffold`.
#[derive(Debug, clap::Args)]
pub struct ScaffoldArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    pub spec: PathBuf,
    /// The file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How the generated module is reached from the skeleton.
    #[arg(long, value_name = "PATH", default_value = "crate::api")]
    pub module: String,
    /// Also write a `main.rs` serving the router on the store (pool or file, migrations,
    /// executor, a development authenticator to replace, graceful shutdown), declaring the
    /// generated module (the last segment of `--module`) and the skeleton's module (the stem of
    /// `--out`).
    #[arg(long, value_name = "FILE")]
    pub main: Option<PathBuf>,
    /// Write only the `main.rs` of `--main`, leaving the skeleton at `--out` (your handlers) as it
    /// is: with `--store`, how a service moves to the other store.
    #[arg(long, requires = "main")]
    pub main_only: bool,
    /// Where the service keeps its transactions and idempotency records: `postgres` (PgStore, a
    /// server at DATABASE_URL, on sqlx), `tokio-postgres` (TokioPgStore, the same server and
    /// records on tokio-postgres, a round trip fewer per create; the runtime's `tokio-postgres`
    /// feature) or `sqlite` (SqliteStore, one file, no server; the runtime's `sqlite` feature).
    #[arg(long, value_enum, default_value_t = ScaffoldStore::Postgres)]
    pub store: ScaffoldStore,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
}

// The stores of `scaffold --store`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScaffoldStore {
    Postgres,
    TokioPostgres,
    Sqlite,
}

// `idemgen fingerprint`.
#[derive(Debug, clap::Args)]
pub struct FingerprintArgs {
    /// The operationId.
    #[arg(long, value_name = "ID")]
    pub operation: String,
    /// The fingerprint version (`x-idempotency-fingerprint-version`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i16).range(1..))]
    pub version: i16,
    /// The semantic input as JSON: a file, or `-` for standard input.
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub input: PathBuf,
    /// `hs2` (new records; exact integers) or `hs1` (records of earlier releases).
    #[arg(long, value_enum, default_value_t = FingerprintFormat::Hs2)]
    pub format: FingerprintFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FingerprintFormat {
    // What the runtime stores with new records: JCS with exact integers.
    Hs2,
    // What records of earlier releases carry: JCS, integers as doubles.
    Hs1,
}

// `idemgen check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    pub spec: PathBuf,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Human)]
    pub format: FormatArg,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
}

// The output formats of `check`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// rustc-style diagnostics.
    Human,
    /// A JSON document (see docs/check-json.md).
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// GitHub Actions annotations.
    Github,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Human => Format::Human,
            FormatArg::Json => Format::Json,
            FormatArg::Sarif => Format::Sarif,
            FormatArg::Github => Format::Github,
        }
    }
}

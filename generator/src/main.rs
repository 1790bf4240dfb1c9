//! The `idemgen` command line: parses flags, calls the library, prints, sets the exit code.
//!
//! Exit codes: 0 on success; 1 when a rule fails (`check`, `build`) or generated files are out of
//! date (`build --check`); 2 for usage, I/O, config or parse errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use idemgen::report::{self, Format};
use idemgen::{Config, build, check};

/// Checks OpenAPI specs for idempotent operations and generates axum servers for them.
#[derive(Debug, Parser)]
#[command(name = "idemgen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Printed after `check --help`.
const CHECK_AFTER_HELP: &str = "\
Rules, their ids and default levels, and the config keys: `idemgen rules`.

Config: idemgen.toml beside the spec (or --config): header, max-key-length, required-statuses,
recommended-statuses, and [rules] <rule-id> = \"error\" | \"warning\" | \"off\".

Exit codes: 0 no errors (warnings allowed unless --deny-warnings); 1 a rule failed; 2 usage, I/O,
config or parse errors.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Checks every operation marked `x-idempotent: true` against the idempotency contract.
    #[command(after_help = CHECK_AFTER_HELP)]
    Check(CheckArgs),
    /// Lists every rule of `check` (id, default level, what it requires), the config keys and
    /// the exit codes.
    Rules,
    /// Generates the server module (types, handler trait, router) and `idemgen.lock`.
    Build(BuildArgs),
    /// Generates a client module (types, one async method per operation; keyed calls retried
    /// with one key, on `idemgen_runtime::client` with feature `client`).
    Client(BuildArgs),
    /// Writes a skeleton implementation of the handler trait for you to fill in (and, with
    /// `--main`, the service's `main.rs`). Never overwrites a file without `--force`.
    Scaffold(ScaffoldArgs),
    /// Prints the `hs1` fingerprint of a semantic input, exactly as the runtime computes it.
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

const PROBE_AFTER_HELP: &str = "\
Examples:
  idemgen probe openapi.yaml --base-url http://127.0.0.1:8080 --header 'Authorization: Bearer tok1'
  idemgen probe openapi.yaml --base-url $URL --header \"Authorization: Bearer $A\" \\
      --other-header \"Authorization: Bearer $B\" --format junit > probe.xml

Exit codes: 0 every check passed (skipped checks name their reason), 1 a check failed,
2 usage, spec or connection errors.";

#[derive(Debug, clap::Args)]
struct ProbeArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    spec: PathBuf,
    /// The server, e.g. `http://127.0.0.1:8080`.
    #[arg(long, value_name = "URL")]
    base_url: String,
    /// A header sent with every request, e.g. a credential (`'Authorization: Bearer …'`).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// A second credential's header, for the check that keys are scoped to their owner.
    #[arg(long = "other-header", value_name = "NAME: VALUE")]
    other_headers: Vec<String>,
    /// Probe only this operationId (repeatable).
    #[arg(long, value_name = "OPERATION_ID")]
    only: Vec<String>,
    /// A path parameter's value (repeatable); without one the probe creates a resource with the
    /// same-prefix POST.
    #[arg(long = "path-param", value_name = "NAME=VALUE")]
    path_params: Vec<String>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = ProbeFormat::Human)]
    format: ProbeFormat,
    /// Print the requests it would send; send nothing.
    #[arg(long)]
    dry_run: bool,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProbeFormat {
    Human,
    Json,
    Junit,
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    spec: PathBuf,
    /// The directory to write `mod.rs` into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Write nothing; exit 1 when the files on disk or the lock differ from what would be
    /// generated (for CI).
    #[arg(long)]
    check: bool,
}

#[derive(Debug, clap::Args)]
struct ScaffoldArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    spec: PathBuf,
    /// The file to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// How the generated module is reached from the skeleton.
    #[arg(long, value_name = "PATH", default_value = "crate::api")]
    module: String,
    /// Also write a `main.rs` serving the router on PostgreSQL (pool, migrations, executor, a
    /// development authenticator to replace, graceful shutdown), declaring the generated module
    /// (the last segment of `--module`) and the skeleton's module (the stem of `--out`).
    #[arg(long, value_name = "FILE")]
    main: Option<PathBuf>,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, clap::Args)]
struct FingerprintArgs {
    /// The operationId.
    #[arg(long, value_name = "ID")]
    operation: String,
    /// The fingerprint version (`x-idempotency-fingerprint-version`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i16).range(1..))]
    version: i16,
    /// The semantic input as JSON: a file, or `-` for standard input.
    #[arg(long, value_name = "FILE", default_value = "-")]
    input: PathBuf,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    spec: PathBuf,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Human)]
    format: FormatArg,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    deny_warnings: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
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

const EXIT_FAILED: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(&args),
        Command::Rules => run_rules(),
        Command::Build(args) => run_build(&args, Target::Server),
        Command::Client(args) => run_build(&args, Target::Client),
        Command::Scaffold(args) => run_scaffold(&args),
        Command::Fingerprint(args) => run_fingerprint(&args),
        Command::Probe(args) => run_probe(&args),
    }
}

fn run_rules() -> ExitCode {
    let mut stdout = anstream::stdout();
    let width = idemgen::RuleId::ALL
        .iter()
        .map(|r| r.as_str().len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(stdout, "{:width$}  {:7}  requires", "rule", "default");
    for rule in idemgen::RuleId::ALL {
        let _ = writeln!(
            stdout,
            "{:width$}  {:7}  {}",
            rule.as_str(),
            rule.default_level().as_str(),
            rule.summary()
        );
    }
    let defaults = Config::default();
    let list = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        stdout,
        "\nidemgen.toml (beside the spec, or --config), every key optional:\n\
         header = \"{}\"\n\
         max-key-length = {}\n\
         required-statuses = [{}]\n\
         recommended-statuses = [{}]\n\
         [rules]\n\
         <rule> = \"error\" | \"warning\" | \"off\"\n\n\
         Exit codes of check and build: 0 no errors (warnings allowed unless --deny-warnings); \
         1 a rule failed, or build --check found drift; 2 usage, I/O, config or parse errors.\n\
         More: generator/docs/rules.md",
        defaults.header,
        defaults.max_key_length,
        list(&defaults.required_statuses),
        list(&defaults.recommended_statuses),
    );
    ExitCode::SUCCESS
}

/// What `run_build` generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Server,
    Client,
}

fn run_build(args: &BuildArgs, target: Target) -> ExitCode {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    let config = match Config::discover(&args.spec, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let planned = match target {
        Target::Server => build::plan(&args.spec, &args.out, &config),
        Target::Client => build::plan_client(&args.spec, &args.out, &config),
    };
    let plan = match planned {
        Ok(plan) => plan,
        Err(build::BuildError::Load(e)) => {
            let _ = write!(stderr, "{}", report::human::render_load_error(&e, true));
            return ExitCode::from(EXIT_UNUSABLE);
        }
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    if !plan.report.findings.is_empty() {
        let _ = write!(
            stderr,
            "{}",
            report::render(&plan.report, Format::Human, true)
        );
    }
    if plan.report.errors() > 0 {
        let _ = writeln!(
            stderr,
            "error: not generating code: the spec has {} error(s)",
            plan.report.errors()
        );
        return ExitCode::from(EXIT_FAILED);
    }
    if args.check {
        let drift = build::drift(&plan.files);
        for d in &drift {
            let _ = match d {
                build::Drift::Missing(p) => writeln!(stderr, "missing: {}", p.display()),
                build::Drift::Differs(p) => writeln!(stderr, "out of date: {}", p.display()),
            };
        }
        if drift.is_empty() {
            let _ = writeln!(stdout, "up to date");
            return ExitCode::SUCCESS;
        }
        let _ = writeln!(
            stderr,
            "error: generated files differ from the spec; run `idemgen {} {} --out {}`",
            match target {
                Target::Server => "build",
                Target::Client => "client",
            },
            args.spec.display(),
            args.out.display()
        );
        return ExitCode::from(EXIT_FAILED);
    }
    let written = match build::write(&plan.files) {
        Ok(written) => written,
        Err(e) => {
            let _ = writeln!(stderr, "error: writing the generated files: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    for (file, written) in plan.files.iter().zip(written) {
        let what = match written {
            build::Written::Wrote => "wrote",
            build::Written::Unchanged => "unchanged",
        };
        let _ = writeln!(stdout, "{what} {}", file.path.display());
    }
    ExitCode::SUCCESS
}

fn run_scaffold(args: &ScaffoldArgs) -> ExitCode {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    for path in std::iter::once(&args.out).chain(&args.main) {
        if path.exists() && !args.force {
            let _ = writeln!(
                stderr,
                "error: {} exists; pass --force to overwrite it",
                path.display()
            );
            return ExitCode::from(EXIT_UNUSABLE);
        }
    }
    let config = match Config::discover(&args.spec, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let spec = match idemgen::loader::load(&args.spec) {
        Ok(spec) => spec,
        Err(e) => {
            let _ = write!(stderr, "{}", report::human::render_load_error(&e, true));
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let api = idemgen::ir::Api::from_spec(&spec, &config.header);
    let mut files = Vec::new();
    match idemgen::scaffold::render(&api, &args.module) {
        Ok(text) => files.push((&args.out, text)),
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    }
    if let Some(main) = &args.main {
        let api_module = args.module.rsplit("::").next().unwrap_or("api");
        let service_module = args
            .out
            .file_stem()
            .map_or_else(|| "service".into(), |s| s.to_string_lossy());
        match idemgen::scaffold::render_main(&api, api_module, &service_module) {
            Ok(text) => files.push((main, text)),
            Err(e) => {
                let _ = writeln!(stderr, "error: {e}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        }
    }
    for (path, text) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            let _ = writeln!(stderr, "error: creating {}: {e}", dir.display());
            return ExitCode::from(EXIT_UNUSABLE);
        }
        if let Err(e) = std::fs::write(path, text) {
            let _ = writeln!(stderr, "error: writing {}: {e}", path.display());
            return ExitCode::from(EXIT_UNUSABLE);
        }
        let _ = writeln!(stdout, "wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn run_fingerprint(args: &FingerprintArgs) -> ExitCode {
    let mut stderr = anstream::stderr();
    let text = if args.input.as_os_str() == "-" {
        let mut text = String::new();
        match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            Ok(_) => text,
            Err(e) => {
                let _ = writeln!(stderr, "error: reading standard input: {e}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        }
    } else {
        match std::fs::read_to_string(&args.input) {
            Ok(text) => text,
            Err(e) => {
                let _ = writeln!(stderr, "error: reading {}: {e}", args.input.display());
                return ExitCode::from(EXIT_UNUSABLE);
            }
        }
    };
    match idemgen::fingerprint(&args.operation, args.version, &text) {
        Ok(fingerprint) => {
            println!("{fingerprint}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            ExitCode::from(EXIT_UNUSABLE)
        }
    }
}

fn run_check(args: &CheckArgs) -> ExitCode {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    let color = true; // anstream strips styles when the stream is not a terminal or NO_COLOR is set.
    let config = match Config::discover(&args.spec, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let format = Format::from(args.format);
    let report = match check(&args.spec, &config) {
        Ok(r) => r,
        Err(e) => {
            if format == Format::Github {
                let _ = write!(stdout, "{}", report::github::render_load_error(&e));
            }
            let _ = write!(stderr, "{}", report::human::render_load_error(&e, color));
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let _ = write!(stdout, "{}", report::render(&report, format, color));
    if report.fails(args.deny_warnings) {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn header_pairs(raw: &[String]) -> Result<Vec<(String, String)>, String> {
    raw.iter()
        .map(|h| match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(format!("--header {h:?}: expected 'Name: value'")),
        })
        .collect()
}

fn run_probe(args: &ProbeArgs) -> ExitCode {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    let usage = |stderr: &mut anstream::Stderr, message: String| {
        let _ = writeln!(stderr, "error: {message}");
        ExitCode::from(EXIT_UNUSABLE)
    };
    let (headers, other_headers) = match (
        header_pairs(&args.headers),
        header_pairs(&args.other_headers),
    ) {
        (Ok(h), Ok(o)) => (h, o),
        (Err(e), _) | (_, Err(e)) => return usage(&mut stderr, e),
    };
    let mut path_params = std::collections::BTreeMap::new();
    for p in &args.path_params {
        match p.split_once('=') {
            Some((name, value)) if !name.is_empty() => {
                path_params.insert(name.to_string(), value.to_string());
            }
            _ => {
                return usage(
                    &mut stderr,
                    format!("--path-param {p:?}: expected NAME=VALUE"),
                );
            }
        }
    }
    let config = match Config::discover(&args.spec, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return usage(&mut stderr, e.to_string()),
    };
    let report = match check(&args.spec, &config) {
        Ok(r) => r,
        Err(e) => {
            let _ = write!(stderr, "{}", report::human::render_load_error(&e, true));
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    if report.errors() > 0 {
        let _ = write!(stderr, "{}", report::render(&report, Format::Human, true));
        return usage(
            &mut stderr,
            format!(
                "not probing: the spec has {} error(s); fix them first (idemgen check)",
                report.errors()
            ),
        );
    }
    let options = idemgen::probe::Options {
        base_url: args.base_url.clone(),
        headers,
        other_headers,
        only: args.only.clone(),
        path_params,
        dry_run: args.dry_run,
    };
    let probed = match idemgen::probe::run(&report.spec, &config.header, &options) {
        Ok(p) => p,
        Err(e) => return usage(&mut stderr, e.to_string()),
    };
    let text = match args.format {
        ProbeFormat::Human => idemgen::probe::report::human(&probed),
        ProbeFormat::Json => idemgen::probe::report::json(&probed),
        ProbeFormat::Junit => idemgen::probe::report::junit(&probed),
    };
    let _ = write!(stdout, "{text}");
    if probed.failed() {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

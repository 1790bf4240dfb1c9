//! `idemgen-records`: the idempotency records of a service built with idemgen, readable by the
//! people who run it. `show` finds one record from the scope a person knows (owner, operation,
//! key, resource scope) or from its record key; `list` and `stats` read the table; `release`
//! frees a stranded claim when that is provably safe; `expire` deletes completed records whose
//! retention ran out. Reads run in read-only transactions (a role with `SELECT` on the two tables
//! suffices); only `release` and `expire` write, and only with `--yes`.
//!
//! [`run`] is the whole command, for the binary and for tests that drive it in-process.
//! Exit codes: 0 done, 1 refused, not found or not confirmed, 2 usage, connection or database
//! errors.

mod db;
mod out;

use std::ffi::OsString;
use std::time::Duration;

use clap::{Parser, Subcommand};

use db::{Db, Filter};
use idemgen_protocol::IdempotencyKey;
use idemgen_runtime::engine::Scope;
use out::Out;

/// Reads (and, for stranded claims, frees) a service's idempotency records.
#[derive(Debug, Parser)]
#[command(name = "idemgen-records", version)]
struct Cli {
    /// The store: a PostgreSQL URL (`postgres://…`) or a SQLite file (`sqlite:path` or a path).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One record: its state, fingerprint, times, holder and stored answer.
    Show {
        #[command(flatten)]
        which: Which,
        /// Also print the stored body (it may hold customer data).
        #[arg(long)]
        body: bool,
    },
    /// Records, newest first.
    List {
        /// Only records in this state: claimed, completed or tombstone.
        #[arg(long)]
        state: Option<String>,
        /// Only this operation.
        #[arg(long)]
        operation: Option<String>,
        /// Only this owner.
        #[arg(long)]
        owner: Option<String>,
        /// Only records created longer ago than this (`30s`, `5m`, `12h`, `7d`).
        #[arg(long, value_parser = duration)]
        older_than: Option<Duration>,
        /// Only records whose retention has run out (`expires_at` passed).
        #[arg(long)]
        expired: bool,
        /// At most this many (at most 1,000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
    },
    /// Counts by operation and state, stranded claims, the oldest claim, expired records.
    Stats {
        /// A claim without a live lease counts as stranded after this (the executor's
        /// `stale_claim`).
        #[arg(long, default_value = "5m", value_parser = duration)]
        stale: Duration,
    },
    /// Frees a claim whose holder is gone, so that the key executes on its next retry.
    Release {
        #[command(flatten)]
        which: Which,
        /// A claim without a lease is free to release after this (the executor's `stale_claim`).
        #[arg(long, default_value = "5m", value_parser = duration)]
        stale: Duration,
        /// Release a claim whose holder may still be running. Its handler goes on, and its
        /// completion then finds the claim gone and rolls back (the completion is guarded by the
        /// claim token): the retry runs the handler again, so nothing is written twice.
        #[arg(long)]
        force: bool,
        /// Do it (without it, only what would change is printed).
        #[arg(long)]
        yes: bool,
    },
    /// Deletes completed records and tombstones whose retention ran out (`expires_at` passed),
    /// as the service's cleanup does: a retry of such a key executes again. Claims are left to
    /// `release`; records kept forever (no `expires_at`) are never expired.
    Expire {
        /// Only this operation.
        #[arg(long)]
        operation: Option<String>,
        /// Do it (without it, only what would be deleted is counted).
        #[arg(long)]
        yes: bool,
    },
}

/// Which record: its scope, or its record key.
#[derive(Debug, clap::Args)]
struct Which {
    /// The authenticated owner the service scoped the key to.
    #[arg(long, requires_all = ["operation", "key"], conflicts_with = "hash")]
    owner: Option<String>,
    /// The operationId.
    #[arg(long)]
    operation: Option<String>,
    /// The idempotency key as the client sent it.
    #[arg(long)]
    key: Option<String>,
    /// The resource scope, for operations scoped to a resource (`POST /widgets/{id}/publish`).
    #[arg(long, default_value = "")]
    resource: String,
    /// The record key (`scope_hash`, 64 hex digits; protocol.md, "Record key").
    #[arg(long, required_unless_present = "owner")]
    hash: Option<String>,
}

impl Which {
    /// The record key this names.
    fn hash(&self) -> Result<[u8; 32], String> {
        if let Some(hash) = &self.hash {
            let bytes = hex::decode(hash.trim()).map_err(|e| format!("--hash: {e}"))?;
            return bytes
                .try_into()
                .map_err(|_| "--hash: a record key is 32 bytes (64 hex digits)".to_owned());
        }
        let (Some(owner), Some(operation), Some(key)) = (&self.owner, &self.operation, &self.key)
        else {
            return Err("name a record with --owner, --operation and --key, or --hash".into());
        };
        let key = IdempotencyKey::new(key).map_err(|e| format!("--key: {e}"))?;
        Ok(Scope::new(owner, operation, key)
            .with_resource_scope(&self.resource)
            .hash())
    }
}

/// `30s`, `5m`, `12h`, `7d`, or milliseconds as `250ms`.
fn duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: a number and a unit (ms, s, m, h, d)"))?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{text:?}: not a number"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("{text:?}: the unit is one of ms, s, m, h, d")),
    };
    Ok(Duration::from_secs(secs))
}

/// What a run printed and its exit code.
#[derive(Debug)]
pub struct Outcome {
    /// The process's exit code (0 done, 1 refused, not found or not confirmed, 2 errors).
    pub code: u8,
    /// What goes to standard output: the answer, as text or JSON.
    pub stdout: String,
    /// What goes to standard error: usage and connection or database errors.
    pub stderr: String,
}

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives it).
pub async fn run<I, T>(args: I) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            let code = u8::try_from(e.exit_code()).unwrap_or(2);
            let (stdout, stderr) = if e.use_stderr() {
                (String::new(), text)
            } else {
                (text, String::new())
            };
            return Outcome {
                code,
                stdout,
                stderr,
            };
        }
    };
    let mut out = Out::new(cli.json);
    match execute(cli, &mut out).await {
        Ok(code) => Outcome {
            code,
            stdout: out.into_text(),
            stderr: String::new(),
        },
        Err(message) => Outcome {
            code: 2,
            stdout: out.into_text(),
            stderr: format!("error: {message}\n"),
        },
    }
}

async fn execute(cli: Cli, out: &mut Out) -> Result<u8, String> {
    let url = cli
        .database_url
        .clone()
        .ok_or("no store: pass --database-url or set DATABASE_URL")?;
    let writes = matches!(
        cli.command,
        Command::Release { yes: true, .. } | Command::Expire { yes: true, .. }
    );
    let db = Db::connect(&url, writes).await?;
    match cli.command {
        Command::Show { which, body } => {
            let hash = which.hash()?;
            match db.record(&hash, body).await? {
                Some(row) => {
                    out.record(&row, body);
                    Ok(0)
                }
                None => {
                    out.message(&format!("no record with key {}", hex::encode(hash)));
                    Ok(1)
                }
            }
        }
        Command::List {
            state,
            operation,
            owner,
            older_than,
            expired,
            limit,
        } => {
            let filter = Filter {
                state,
                operation,
                owner,
                older_than,
                expired,
                limit,
            };
            let rows = db.list(&filter).await?;
            out.list(&rows);
            Ok(0)
        }
        Command::Stats { stale } => {
            let stats = db.stats(stale).await?;
            out.stats(&stats);
            Ok(0)
        }
        Command::Release {
            which,
            stale,
            force,
            yes,
        } => release(&db, out, &which, stale, force, yes).await,
        Command::Expire { operation, yes } => expire(&db, out, operation.as_deref(), yes).await,
    }
}

/// `release`: only a claim, only when its holder is gone (or `--force`), only with `--yes`.
async fn release(
    db: &Db,
    out: &mut Out,
    which: &Which,
    stale: Duration,
    force: bool,
    yes: bool,
) -> Result<u8, String> {
    let hash = which.hash()?;
    let Some(row) = db.record(&hash, false).await? else {
        out.message(&format!("no record with key {}", hex::encode(hash)));
        return Ok(1);
    };
    if row.state != "claimed" {
        out.message(&format!(
            "refused: the record is {}, not a claim. A completed record is never released (its \
             answer is what retries replay); a tombstone answers 410 by design",
            row.state
        ));
        return Ok(1);
    }
    let holder = row.holder_verdict(stale);
    if !holder.gone && !force {
        out.message(&format!(
            "refused: {}. Wait for it, or pass --force: the running handler's completion then \
             finds the claim gone and rolls back, and the next retry executes",
            holder.why
        ));
        return Ok(1);
    }
    if !yes {
        out.message(&format!(
            "would release the claim of {}/{} key {:?} ({}); pass --yes to do it",
            row.owner, row.operation, row.key, holder.why
        ));
        return Ok(1);
    }
    let released = db.release(&hash, &row.claim_token).await?;
    if released == 0 {
        out.message("nothing released: the claim changed meanwhile (completed, released or taken over); look again");
        return Ok(1);
    }
    out.message(&format!(
        "released the claim of {}/{} key {:?} ({}): its next retry executes",
        row.owner, row.operation, row.key, holder.why
    ));
    Ok(0)
}

/// `expire`: completed records and tombstones whose retention ran out, only with `--yes`.
async fn expire(db: &Db, out: &mut Out, operation: Option<&str>, yes: bool) -> Result<u8, String> {
    if !yes {
        let due = db.expired(operation).await?;
        out.expired(&due, false);
        return Ok(if due.is_empty() { 0 } else { 1 });
    }
    let gone = db.expire(operation).await?;
    out.expired(&gone, true);
    Ok(0)
}

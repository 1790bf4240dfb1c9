//! `idemgen scaffold`: a skeleton `impl` of the handler trait, rendered from the askama template
//! `templates/scaffold.rs.askama`. The skeleton is the user's file: it is written once and never
//! regenerated (the CLI refuses to overwrite it without `--force`).

use std::path::{Path, PathBuf};

use askama::Template;

use crate::build::{BuildError, GeneratedFile, Plan, check_and_lower};
use crate::config::Config;
use crate::emit::EmitError;
use crate::ir::Api;
use crate::ir::names::is_keyword;

/// Where a scaffolded service keeps its transactions and idempotency records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// `idemgen_runtime::PgStore`; the `main.rs` connects a pool to `DATABASE_URL`.
    #[default]
    Postgres,
    /// `idemgen_runtime::SqliteStore` (the runtime's `sqlite` feature); the `main.rs` opens a
    /// database file (`DATABASE_PATH`), no server.
    Sqlite,
    /// `idemgen_runtime::TokioPgStore` (the runtime's `tokio-postgres` feature), the pipelining
    /// PostgreSQL store; the `main.rs` migrates with sqlx and connects a deadpool-postgres pool
    /// to `DATABASE_URL`.
    TokioPostgres,
}

impl StoreKind {
    /// The store's type at the runtime's root.
    pub fn type_name(self) -> &'static str {
        match self {
            StoreKind::Postgres => "PgStore",
            StoreKind::Sqlite => "SqliteStore",
            StoreKind::TokioPostgres => "TokioPgStore",
        }
    }
}

/// What `idemgen scaffold` writes besides the skeleton: a `main.rs` serving the service.
#[derive(Debug, Clone)]
pub struct MainFile {
    /// Where it goes.
    pub path: PathBuf,
    /// The generated module's name as `main.rs` declares it (`api`).
    pub api_module: String,
    /// The skeleton's module name (`service`).
    pub service_module: String,
}

/// Checks the spec like `build` does and, when it has no errors, plans the skeleton at `out`
/// (reaching the generated module at `module`, e.g. `crate::api`) and, with `main`, the
/// `main.rs`, both on `store`. Nothing is planned from a spec with errors: the skeleton would
/// implement a trait `build` refuses to generate.
pub fn plan(
    spec_path: &Path,
    out: &Path,
    module: &str,
    main: Option<&MainFile>,
    store: StoreKind,
    config: &Config,
) -> Result<Plan, BuildError> {
    let checked = check_and_lower(spec_path, config)?;
    let mut files = Vec::new();
    if let Some(api) = &checked.api {
        let template = |e: askama::Error| BuildError::Emit(EmitError::new(e.to_string()));
        files.push(GeneratedFile {
            path: out.to_path_buf(),
            contents: render_for(api, module, store).map_err(template)?,
        });
        if let Some(main) = main {
            files.push(GeneratedFile {
                path: main.path.clone(),
                contents: render_main_for(api, &main.api_module, &main.service_module, store)
                    .map_err(template)?,
            });
        }
    }
    Ok(Plan {
        report: checked.report,
        files,
    })
}

/// One trait method pair in the skeleton.
#[derive(Debug, Clone)]
pub struct ScaffoldOperation {
    /// The operationId.
    pub id: String,
    /// `POST /widgets`.
    pub label: String,
    /// The authorization method's name.
    pub authorize: String,
    /// The handler method's name.
    pub method: String,
    /// The request type.
    pub request: String,
    /// The handler's result type.
    pub result: String,
    /// Whether the handler gets a transaction handle.
    pub tx: bool,
    /// Whether the operation is idempotent (its success is stored and replayed).
    pub idempotent: bool,
    /// Whether the method is safe (its authorization may be left to the trait's default).
    pub safe: bool,
}

#[derive(Template)]
#[template(path = "scaffold.rs.askama", escape = "none")]
struct Skeleton<'a> {
    title: &'a str,
    /// The API as the docs name it ([`Api::described`]).
    described: String,
    module: &'a str,
    store: &'a str,
    service: String,
    trait_name: &'a str,
    has_tx: bool,
    has_write: bool,
    operations: Vec<ScaffoldOperation>,
}

fn raw(name: &str) -> String {
    if is_keyword(name) {
        format!("r#{name}")
    } else {
        name.to_string()
    }
}

#[derive(Template)]
#[template(path = "main.rs.askama", escape = "none")]
struct Main<'a> {
    title: &'a str,
    api_module: &'a str,
    service_module: &'a str,
    service: String,
    /// On `TokioPgStore` instead of `PgStore`.
    tokio: bool,
}

#[derive(Template)]
#[template(path = "main_sqlite.rs.askama", escape = "none")]
struct SqliteMain<'a> {
    title: &'a str,
    api_module: &'a str,
    service_module: &'a str,
    service: String,
}

/// A `main.rs` serving the generated router (module `api_module`) with the skeleton's service
/// (module `service_module`) on PostgreSQL: pool, runtime migrations, executor, a development
/// authenticator to replace, graceful shutdown.
pub fn render_main(
    api: &Api,
    api_module: &str,
    service_module: &str,
) -> Result<String, askama::Error> {
    render_main_for(api, api_module, service_module, StoreKind::Postgres)
}

/// [`render_main`] on `store`: with [`StoreKind::Sqlite`], the store opens a database file
/// instead of connecting a pool; with [`StoreKind::TokioPostgres`], the pool is
/// tokio-postgres's (same authenticator, serving and shutdown).
pub fn render_main_for(
    api: &Api,
    api_module: &str,
    service_module: &str,
    store: StoreKind,
) -> Result<String, askama::Error> {
    let service = api.service_name.clone();
    let title = &api.title;
    match store {
        StoreKind::Postgres | StoreKind::TokioPostgres => Main {
            title,
            api_module,
            service_module,
            service,
            tokio: store == StoreKind::TokioPostgres,
        }
        .render(),
        StoreKind::Sqlite => SqliteMain {
            title,
            api_module,
            service_module,
            service,
        }
        .render(),
    }
    .map(with_final_newline)
}

/// askama drops the template's final newline; rustfmt wants it.
fn with_final_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The skeleton for `api`, reaching the generated module at `module` (e.g. `crate::api`), on
/// PostgreSQL.
pub fn render(api: &Api, module: &str) -> Result<String, askama::Error> {
    render_for(api, module, StoreKind::Postgres)
}

/// [`render`] on `store` (the skeleton's `type Store`).
pub fn render_for(api: &Api, module: &str, store: StoreKind) -> Result<String, askama::Error> {
    let service = api.service_name.clone();
    let operations = api
        .operations
        .iter()
        .map(|op| ScaffoldOperation {
            id: op.id.clone(),
            label: format!("{} {}", op.http_method.to_ascii_uppercase(), op.path),
            authorize: raw(&op.authorize_method),
            method: raw(&op.method),
            request: op.items.request.clone(),
            result: format!("HandlerResult<{}>", op.name),
            tx: op.in_transaction(),
            idempotent: op.is_idempotent(),
            safe: op.safe,
        })
        .collect();
    Skeleton {
        title: &api.title,
        described: api.described(),
        module,
        store: store.type_name(),
        service,
        trait_name: &api.trait_name,
        has_tx: api.operations.iter().any(|op| op.in_transaction()),
        has_write: api.operations.iter().any(|op| !op.safe),
        operations,
    }
    .render()
    .map(with_final_newline)
}

//! `idemgen scaffold`: a skeleton `impl` of the handler trait, rendered from the askama template
//! `templates/scaffold.rs.askama`. The skeleton is the user's file: it is written once and never
//! regenerated (the CLI refuses to overwrite it without `--force`).

use askama::Template;

use crate::ir::Api;
use crate::ir::names::is_keyword;

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
    module: &'a str,
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
}

/// The name of the service struct the skeleton implements the trait for (`WidgetsService`).
pub fn service_name(api: &Api) -> String {
    match api.trait_name.strip_suffix("Api") {
        Some(base) if !base.is_empty() => format!("{base}Service"),
        _ => format!("{}Service", api.trait_name),
    }
}

/// A `main.rs` serving the generated router (module `api_module`) with the skeleton's service
/// (module `service_module`) on PostgreSQL: pool, runtime migrations, executor, a development
/// authenticator to replace, graceful shutdown.
pub fn render_main(
    api: &Api,
    api_module: &str,
    service_module: &str,
) -> Result<String, askama::Error> {
    Main {
        title: &api.title,
        api_module,
        service_module,
        service: service_name(api),
    }
    .render()
    .map(with_final_newline)
}

/// askama drops the template's final newline; rustfmt wants it.
fn with_final_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The skeleton for `api`, reaching the generated module at `module` (e.g. `crate::api`).
pub fn render(api: &Api, module: &str) -> Result<String, askama::Error> {
    let service = service_name(api);
    let operations = api
        .operations
        .iter()
        .map(|op| ScaffoldOperation {
            id: op.id.clone(),
            label: format!("{} {}", op.http_method.to_ascii_uppercase(), op.path),
            authorize: raw(&op.authorize_method),
            method: raw(&op.method),
            request: format!("{}Request", op.name),
            result: format!("HandlerResult<{}>", op.name),
            tx: op.in_transaction(),
            idempotent: op.is_idempotent(),
            safe: op.safe,
        })
        .collect();
    Skeleton {
        title: &api.title,
        module,
        service,
        trait_name: &api.trait_name,
        has_tx: api.operations.iter().any(|op| op.in_transaction()),
        has_write: api.operations.iter().any(|op| !op.safe),
        operations,
    }
    .render()
    .map(with_final_newline)
}

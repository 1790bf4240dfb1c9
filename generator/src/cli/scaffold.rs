//! `idemgen scaffold`: a skeleton of the handler trait (and, with `--main`, a `main.rs`), from a
//! spec checked as `build` checks it.

use std::io::Write;

use idemgen::Config;
use idemgen::scaffold::{self, MainFile};

use super::args::{ScaffoldArgs, ScaffoldStore};
use super::{CliError, report_findings};

/// Checks the spec, renders the skeleton (and the `main.rs`) and writes them, refusing to
/// overwrite a file without `--force`.
pub fn run(args: &ScaffoldArgs) -> Result<(), CliError> {
    let mut stdout = anstream::stdout();
    let skeleton = (!args.main_only).then_some(&args.out);
    for path in skeleton.into_iter().chain(&args.main) {
        if path.exists() && !args.force {
            return Err(CliError::Unusable(format!(
                "{} exists; pass --force to overwrite it",
                path.display()
            )));
        }
    }
    let config = Config::discover(&args.spec, args.config.as_deref())?;
    let main = args.main.as_ref().map(|path| MainFile {
        path: path.clone(),
        api_module: args.module.rsplit("::").next().unwrap_or("api").to_owned(),
        service_module: args
            .out
            .file_stem()
            .map_or_else(|| "service".into(), |s| s.to_string_lossy().into_owned()),
    });
    let store = match args.store {
        ScaffoldStore::Postgres => scaffold::StoreKind::Postgres,
        ScaffoldStore::TokioPostgres => scaffold::StoreKind::TokioPostgres,
        ScaffoldStore::Sqlite => scaffold::StoreKind::Sqlite,
    };
    let plan = scaffold::plan(
        &args.spec,
        &args.out,
        &args.module,
        main.as_ref(),
        store,
        &config,
    )?;
    report_findings(&plan.report)?;
    for file in plan
        .files
        .iter()
        .filter(|f| !args.main_only || f.path != args.out)
    {
        if let Some(dir) = file.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::Unusable(format!("creating {}: {e}", dir.display())))?;
        }
        std::fs::write(&file.path, &file.contents)
            .map_err(|e| CliError::Unusable(format!("writing {}: {e}", file.path.display())))?;
        let _ = writeln!(stdout, "wrote {}", file.path.display());
    }
    Ok(())
}

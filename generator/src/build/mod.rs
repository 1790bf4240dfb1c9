//! `idemgen build`: check the spec, build the IR, emit the module, and compare with or write
//! what is on disk (the generated module and `idemgen.lock`).
//!
//! The library never writes by itself: [`plan`] returns the files that *would* be written, and
//! [`write`] / [`drift`] apply or compare them, so `build --check` runs exactly the same code as
//! `build`.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::emit::{self, EmitError};
use crate::ir::Api;
use crate::loader::LoadError;
use crate::lock::{self, Lock};
use crate::{CheckReport, check};

/// The module file written into the output directory.
pub const MODULE_FILE: &str = "mod.rs";

/// One file `build` produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Where it goes.
    pub path: PathBuf,
    /// Its contents.
    pub contents: String,
}

/// What `build` would do.
#[derive(Debug)]
pub struct Plan {
    /// The check of the spec (lock comparison included).
    pub report: CheckReport,
    /// The files to write; empty when the check found errors (nothing is emitted then).
    pub files: Vec<GeneratedFile>,
}

/// Why `build` could not plan.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The spec did not load.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// Emission failed (a generator bug).
    #[error(transparent)]
    Emit(#[from] EmitError),
}

/// Checks `spec_path` and, when it has no errors, computes the generated module for `out_dir`
/// and the lock beside the spec.
pub fn plan(spec_path: &Path, out_dir: &Path, config: &Config) -> Result<Plan, BuildError> {
    plan_with(spec_path, config, |api, spec_name| {
        Ok(vec![
            GeneratedFile {
                path: out_dir.join(MODULE_FILE),
                contents: emit::emit(api, spec_name)?,
            },
            GeneratedFile {
                path: lock::lock_path(spec_path),
                contents: Lock::from_api(api).render(),
            },
        ])
    })
}

/// Checks the spec and, when it has no errors, plans the client module (`idemgen client`): one
/// file, `mod.rs` in `out_dir`. No lock: the client sends what the server fingerprints.
pub fn plan_client(spec_path: &Path, out_dir: &Path, config: &Config) -> Result<Plan, BuildError> {
    plan_with(spec_path, config, |api, spec_name| {
        Ok(vec![GeneratedFile {
            path: out_dir.join(MODULE_FILE),
            contents: emit::client::emit_client(api, spec_name)?,
        }])
    })
}

/// A checked spec and, when the check found no errors, its IR: what every generating command
/// starts from (`build`, `client`, [`crate::Builder`], `scaffold`), so that none of them emits
/// from a spec `check` would refuse.
#[derive(Debug)]
pub struct Checked {
    /// The check of the spec (lock comparison included).
    pub report: CheckReport,
    /// The IR; `None` when the check found errors (nothing is generated then).
    pub api: Option<Api>,
    /// The spec's file name, for the generated files' preambles.
    pub spec_name: String,
}

/// The one check-then-lower step: checks `spec_path` with `config` and builds the IR when the
/// check found no errors.
pub fn check_and_lower(spec_path: &Path, config: &Config) -> Result<Checked, LoadError> {
    let report = check(spec_path, config)?;
    let spec_name = spec_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "openapi".to_string());
    let api = (report.errors() == 0).then(|| Api::from_spec(&report.spec, &config.header));
    Ok(Checked {
        report,
        api,
        spec_name,
    })
}

/// Checks the spec; with no errors, the IR goes to `files` (with the spec's file name for the
/// preamble), else nothing is planned.
fn plan_with(
    spec_path: &Path,
    config: &Config,
    files: impl FnOnce(&Api, &str) -> Result<Vec<GeneratedFile>, EmitError>,
) -> Result<Plan, BuildError> {
    let checked = check_and_lower(spec_path, config)?;
    let files = match &checked.api {
        Some(api) => files(api, &checked.spec_name)?,
        None => Vec::new(),
    };
    Ok(Plan {
        report: checked.report,
        files,
    })
}

/// What [`write`] did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file was created or its contents replaced.
    Wrote,
    /// The file already had these contents; it was left alone (its modification time too).
    Unchanged,
}

/// Writes the files, creating directories; files whose contents are already right are left
/// alone. Returns what happened to each file, in order.
pub fn write(files: &[GeneratedFile]) -> std::io::Result<Vec<Written>> {
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        if std::fs::read_to_string(&file.path).ok().as_deref() == Some(file.contents.as_str()) {
            out.push(Written::Unchanged);
            continue;
        }
        if let Some(dir) = file.path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file.path, &file.contents)?;
        out.push(Written::Wrote);
    }
    Ok(out)
}

/// How a file on disk differs from what `build` would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The file does not exist.
    Missing(PathBuf),
    /// The file exists with other contents.
    Differs(PathBuf),
}

/// The files on disk that differ from `files`.
pub fn drift(files: &[GeneratedFile]) -> Vec<Drift> {
    files
        .iter()
        .filter_map(|file| match std::fs::read_to_string(&file.path) {
            Err(_) => Some(Drift::Missing(file.path.clone())),
            Ok(text) if text != file.contents => Some(Drift::Differs(file.path.clone())),
            Ok(_) => None,
        })
        .collect()
}

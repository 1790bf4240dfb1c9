//! Code generation from a build script, like progenitor's: a `build.rs` calls [`Builder`], which
//! checks the spec exactly as `idemgen check` does (the lock beside it included), fails the build
//! with the same diagnostics when there are errors, writes the module into `OUT_DIR`, and tells
//! cargo to rerun when the spec, any file it references, the config or the lock changes.
//!
//! ```no_run
//! // In build.rs's `fn main`:
//! if let Err(e) = idemgen::Builder::new("openapi.yaml").generate() {
//!     eprintln!("{e}");
//!     std::process::exit(1);
//! }
//! ```
//!
//! ```text
//! // src/main.rs: brings `pub mod api { … }` into the crate.
//! include!(concat!(env!("OUT_DIR"), "/api.rs"));
//! ```
//!
//! The build script never writes `idemgen.lock` (a build must not change the source tree):
//! record it with `idemgen build` and commit it; the builder then refuses a semantic input change
//! without a fingerprint version bump, as `check` does.

use std::path::PathBuf;

use crate::build;
use crate::config::Config;
use crate::emit;
use crate::report::{self, Format};

/// Generates a spec's server module from a build script.
#[derive(Debug, Clone)]
pub struct Builder {
    spec: PathBuf,
    config: Option<PathBuf>,
    module: String,
    out_dir: Option<PathBuf>,
    cargo_directives: bool,
}

/// What [`Builder::generate`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The module file (`OUT_DIR/<module>.rs`).
    pub path: PathBuf,
    /// The files the output depends on: the spec, every file it references, the config and the
    /// lock when they exist.
    pub inputs: Vec<PathBuf>,
    /// Warnings of the check, rendered as `idemgen check` does (empty when there are none).
    pub warnings: String,
}

/// Why generation failed; its `Display` is what a developer needs to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildFailure(String);

impl Builder {
    /// A builder for the spec at `spec` (relative paths are relative to the package root, where
    /// cargo runs build scripts).
    pub fn new(spec: impl Into<PathBuf>) -> Builder {
        Builder {
            spec: spec.into(),
            config: None,
            module: "api".to_owned(),
            out_dir: None,
            cargo_directives: true,
        }
    }

    /// Reads this config file instead of `idemgen.toml` beside the spec.
    pub fn config(mut self, path: impl Into<PathBuf>) -> Builder {
        self.config = Some(path.into());
        self
    }

    /// The generated module's name (default `api`): the file is `<name>.rs` and declares
    /// `pub mod <name>`.
    pub fn module_name(mut self, name: impl Into<String>) -> Builder {
        self.module = name.into();
        self
    }

    /// Where to write (default: `$OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` and `cargo:warning` lines (default: yes).
    pub fn cargo_directives(mut self, on: bool) -> Builder {
        self.cargo_directives = on;
        self
    }

    /// Checks the spec and writes the module; `Err` carries the rendered diagnostics.
    pub fn generate(self) -> Result<Generated, BuildFailure> {
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    BuildFailure("OUT_DIR is not set: call the builder from a build script".into())
                })?,
        };
        // Rerun directives first: a spec that fails must still be watched for its fix.
        let mut inputs = vec![self.spec.clone()];
        inputs.extend(Config::locate(&self.spec, self.config.as_deref()));
        let lock = crate::lock::lock_path(&self.spec);
        if lock.is_file() {
            inputs.push(lock);
        }
        let config = Config::discover(&self.spec, self.config.as_deref())
            .map_err(|e| self.fail(&inputs, format!("error: {e}")))?;
        let checked = match build::check_and_lower(&self.spec, &config) {
            Ok(checked) => checked,
            Err(e) => {
                let text = report::human::render_load_error(&e, false);
                return Err(self.fail(&inputs, text));
            }
        };
        let report = &checked.report;
        for (_, file) in report.spec.sources().files() {
            if !inputs.contains(&file.path) {
                inputs.push(file.path.clone());
            }
        }
        let rendered = if report.findings.is_empty() {
            String::new()
        } else {
            report::render(report, Format::Human, false)
        };
        let Some(api) = &checked.api else {
            return Err(self.fail(
                &inputs,
                format!(
                    "{rendered}error: idemgen: not generating code: {} has {} error(s)",
                    self.spec.display(),
                    report.errors()
                ),
            ));
        };
        let module = emit::emit_wrapped(api, &checked.spec_name, &self.module)
            .map_err(|e| self.fail(&inputs, e.to_string()))?;
        let path = out_dir.join(format!("{}.rs", self.module));
        build::write(&[build::GeneratedFile {
            path: path.clone(),
            contents: module,
        }])
        .map_err(|e| self.fail(&inputs, format!("error: writing {}: {e}", path.display())))?;
        self.directives(&inputs);
        if self.cargo_directives && report.warnings() > 0 {
            println!(
                "cargo:warning=idemgen: {} warning(s) in {}; run `idemgen check` to see them",
                report.warnings(),
                self.spec.display()
            );
        }
        Ok(Generated {
            path,
            inputs,
            warnings: rendered,
        })
    }

    fn directives(&self, inputs: &[PathBuf]) {
        if self.cargo_directives {
            for input in inputs {
                println!("cargo:rerun-if-changed={}", input.display());
            }
        }
    }

    fn fail(&self, inputs: &[PathBuf], message: String) -> BuildFailure {
        self.directives(inputs);
        BuildFailure(message)
    }
}

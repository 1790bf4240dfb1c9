//! The rules: one function per rule family, each rule with a stable id, a default level, a
//! one-line summary, and a help snippet in YAML that fixes a violation.
//!
//! Rule ids are descriptive kebab-case names (`idempotency-key-missing`), the scheme linters such
//! as Spectral and clippy use: they read well in `error[...]`, in `idemgen.toml` and in SARIF,
//! and they never change once released. A new rule gets a new id; a removed rule's id is never
//! reused.

pub(crate) mod extensions;
mod header;
mod media;
mod operation_id;
mod outgoing;
mod parameters;
mod paths;
pub(crate) mod patterns;
mod refs;
mod responses;
mod security;
pub mod snippet;
mod values;

use std::collections::HashMap;

use crate::config::Config;
pub use crate::finding::{Finding, Level, RuleId};
use crate::loader::{FileId, LoadedSpec, NodeRef, Span};
use crate::spec::{self, Operation};

/// Collects findings, applying configured levels and merging findings about one shared node.
pub(crate) struct Sink<'c> {
    config: &'c Config,
    findings: Vec<Finding>,
    seen: HashMap<(RuleId, FileId, Span), usize>,
}

impl<'c> Sink<'c> {
    fn new(config: &'c Config) -> Self {
        Sink {
            config,
            findings: Vec::new(),
            seen: HashMap::new(),
        }
    }

    /// Reports a finding of `rule` at `at`, for operation `op` if any.
    pub(crate) fn report(
        &mut self,
        rule: RuleId,
        at: (FileId, Span),
        op: Option<&Operation<'_>>,
        message: String,
    ) {
        let level = self.config.level(rule);
        if level == Level::Off {
            return;
        }
        let key = (rule, at.0, at.1);
        if let Some(&i) = self.seen.get(&key) {
            if let (Some(op), Some(f)) = (op, self.findings.get_mut(i)) {
                let label = op.label();
                if !f.operations.contains(&label) {
                    f.operations.push(label);
                }
            }
            return;
        }
        self.seen.insert(key, self.findings.len());
        self.findings.push(Finding {
            rule,
            level,
            message,
            file: at.0,
            span: at.1,
            operations: op.map(|o| vec![o.label()]).unwrap_or_default(),
            help: rule.help(&self.config.header, self.config.max_key_length),
        });
    }

    /// Reports a finding whose help is specific to it rather than the rule's default.
    pub(crate) fn report_with_help(
        &mut self,
        rule: RuleId,
        at: (FileId, Span),
        op: Option<&Operation<'_>>,
        message: String,
        help: String,
    ) {
        let before = self.findings.len();
        self.report(rule, at, op, message);
        if self.findings.len() > before
            && let Some(f) = self.findings.last_mut()
        {
            f.help = help;
        }
    }

    /// The config the rules run with.
    pub(crate) fn config(&self) -> &Config {
        self.config
    }
}

/// Where `node` is.
pub(crate) fn at(node: NodeRef<'_>) -> (FileId, Span) {
    (node.file, node.node.span)
}

/// The result of running the rules.
#[derive(Debug, Clone)]
pub struct RuleOutcome {
    /// The findings, in the order rules produced them (reports sort them).
    pub findings: Vec<Finding>,
    /// How many operations the spec has.
    pub operations: usize,
    /// How many of them are marked `x-idempotent: true`.
    pub idempotent_operations: usize,
}

/// The walk of `keyword-not-enforced`, which only the IR can judge (it knows what the generated
/// code checks, and sits above the rules): for one operation, every keyword of its request
/// schemas that is not enforced, where it is written and why.
pub type KeywordWalk<'w, 's> =
    &'w mut dyn FnMut(&Operation<'s>, &mut dyn FnMut((FileId, Span), String));

/// Runs every rule that the config does not turn off; `keywords` is the walk of
/// `keyword-not-enforced` (`crate::ir::unenforced::KeywordWalk::check_operation`).
pub fn run<'s>(
    spec: &'s LoadedSpec,
    config: &Config,
    keywords: KeywordWalk<'_, 's>,
) -> RuleOutcome {
    let mut sink = Sink::new(config);
    for problem in spec.ref_problems() {
        if let Some(location) = problem.location {
            let message = problem.message.clone();
            match &problem.help {
                Some(help) => sink.report_with_help(
                    RuleId::UnresolvedRef,
                    location,
                    None,
                    message,
                    help.clone(),
                ),
                None => sink.report(RuleId::UnresolvedRef, location, None, message),
            }
        }
    }
    let ops = spec::operations(spec);
    extensions::check_misplaced(spec, &mut sink);
    operation_id::check_unique(&ops, &mut sink);
    patterns::check(spec, &mut sink);
    paths::check(spec, &ops, &mut sink);
    outgoing::check_webhooks(spec, &mut sink);
    for op in &ops {
        refs::check_operation(op, &mut sink);
        media::check_operation(spec, op, &mut sink);
        parameters::check_operation(spec, op, &mut sink);
        outgoing::check_operation(op, &mut sink);
        extensions::check_operation(op, &mut sink);
        extensions::check_parameter_markers(spec, op, &mut sink);
        extensions::check_tombstones(spec, op, &ops, &mut sink);
        security::check_operation(spec, op, &mut sink);
        responses::check_unquoted(op, &mut sink);
        if config.level(RuleId::KeywordNotEnforced) != Level::Off {
            keywords(op, &mut |at, why| {
                sink.report(RuleId::KeywordNotEnforced, at, Some(op), why);
            });
        }
        if op.is_idempotent() {
            operation_id::check_present(op, &mut sink);
            header::check_key(spec, op, &mut sink);
            responses::check(spec, op, &mut sink);
        } else {
            header::check_unmarked(spec, op, &mut sink);
        }
    }
    let unkeyed: Vec<&Operation<'_>> = ops.iter().filter(|op| !op.is_idempotent()).collect();
    responses::check_unavailable(spec, &unkeyed, &mut sink);
    if ops.is_empty() {
        let root = spec.root();
        let at = root
            .node
            .entry("paths")
            .or_else(|| root.node.entry("openapi"))
            .map(|(k, _)| k.span)
            .unwrap_or(root.node.span);
        sink.report(
            RuleId::NoOperations,
            (root.file, at),
            None,
            "the spec has no operations: nothing is checked or generated".to_string(),
        );
    }
    RuleOutcome {
        findings: sink.findings,
        operations: ops.len(),
        idempotent_operations: ops.iter().filter(|o| o.marked_idempotent()).count(),
    }
}

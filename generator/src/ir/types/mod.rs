//! The type half of the IR: what Rust type every schema becomes.
//!
//! [`TypeSpace`] converts schemas (component schemas and inline ones) into [`TypeDef`]s named from
//! their context (`Widget`, `CreateWidgetRequestBody`, `WidgetColor`), and hands back a
//! [`TypeRef`] for each use. Component schemas are named first, in document order, so they keep
//! their own names; a `$ref` is registered before its target is converted, which makes recursive
//! schemas terminate, and targets are converted from a work queue rather than by recursion, so a
//! long chain of references cannot exhaust the stack. What cannot be expressed becomes
//! `serde_json::Value`; nothing here panics on a strange schema.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::loader::{FileId, Key, LoadedSpec, Node, NodeRef, RefTarget, Value};

use super::names::{Namespace, snake_name, type_name};

mod constraints;
mod defaults;
mod keywords;
mod model;
mod passes;
mod shapes;
mod space;

pub use constraints::*;
pub use defaults::*;
pub(crate) use keywords::*;
pub use model::*;
pub use passes::*;
pub use shapes::*;
pub use space::*;

#[cfg(test)]
mod tests;

//! The IR between the spec and the tokens: plain structs that say what `idemgen build` emits.
//!
//! [`Api::from_spec`] walks a checked [`LoadedSpec`] once; emission (`crate::emit`) reads only
//! these structs. Every name is final here (unique, escaped later only for keywords), so the
//! emitter never has to invent one.

pub mod names;
pub mod types;
pub mod unenforced;

mod lower;
mod model;

pub(crate) use lower::*;
pub use model::*;

use crate::loader::{LoadedSpec, Node, NodeRef};
use crate::spec::{self, IGNORED_HEADERS, Operation, is_json};

use names::{Namespace, snake_name, type_name};
use types::{Checks, TypeDef, TypeRef, TypeSpace};

#[cfg(test)]
mod tests;

//! idemgen-protocol: the facts of the idempotency protocol, in one place both sides read.
//!
//! `protocol.md` is the contract; this crate is its executable half: key syntax and limits
//! ([`key`]), the frozen `hs2` and `hs1` fingerprints ([`fingerprint`]), a multipart file part and how it
//! enters them ([`file`]), keys for downstream calls ([`derive`]), every problem with its
//! status and stable code ([`problem`]), the statuses a spec must declare and those only the
//! request pipeline answers ([`status`]), and the headers stored with a result ([`headers`]). It does no I/O: the
//! generator (`idemgen`) and the runtime (`idemgen-runtime`) both depend on it, so neither retypes
//! a protocol fact.

#[doc(hidden)]
pub mod codegen;
pub mod derive;
pub mod file;
pub mod fingerprint;
pub mod headers;
pub mod key;
pub mod pattern;
pub mod problem;
pub mod record_key;
pub mod status;

pub use derive::DerivedKey;
pub use file::FilePart;
pub use fingerprint::{Fingerprint, FingerprintError};
pub use key::{IdempotencyKey, KeyError, KeyHeader, MAX_KEY_LEN};
pub use problem::ProblemKind;
pub use record_key::{SCOPE_HASH_TAG, record_key};

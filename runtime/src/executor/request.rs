//! What an attempt is given and what it gives back: the request as generated code describes it,
//! the response codec, and the outcome or error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use idemgen_protocol::Fingerprint;
use idemgen_protocol::fingerprint::{CanonicalInput, HS1_TAG};

use crate::problem::Problem;
use crate::response::{CodecError, EncodedResponse, StoredResponse};
use crate::store::{Record, RecordState, Scope};

/// One idempotent request, as the generated code describes it.
#[derive(Debug, Clone)]
pub struct IdempotentRequest {
    /// The key's scope.
    pub scope: Scope,
    /// The fingerprint of the semantic input in the current format (`hs2`), stored with a new
    /// record.
    pub fingerprint: Fingerprint,
    /// The operation's fingerprint version.
    pub fingerprint_version: i16,
    /// The semantic input, for records written under `hs1` by earlier releases: their fingerprint
    /// is compared with this request's `hs1`, computed only when such a record is met. `None`
    /// compares `fingerprint` alone.
    pub earlier: Option<EarlierFormats>,
    /// Response headers the operation declares; stored besides the default allowlist.
    pub declared_headers: &'static [&'static str],
    /// The header the key came in, for problem details (`Idempotency-Key`).
    pub key_header: &'static str,
    /// How long the record is kept (the operation's `x-idempotency-retention`); `None`: the
    /// executor's [`ExecutorConfig::retention`].
    pub retention: Option<Duration>,
}

/// A request's semantic input kept for the fingerprint formats before the current one: `hs1`,
/// computed at most once and only when a record carrying it is met.
#[derive(Debug, Clone)]
pub struct EarlierFormats {
    input: Arc<CanonicalInput>,
    hs1: std::sync::OnceLock<Option<Fingerprint>>,
}

impl EarlierFormats {
    /// Keeps `input` (already converted for the current fingerprint).
    pub fn new(input: CanonicalInput) -> EarlierFormats {
        EarlierFormats {
            input: Arc::new(input),
            hs1: std::sync::OnceLock::new(),
        }
    }
}

impl IdempotentRequest {
    /// Whether `record` was claimed by this request: the same fingerprint in the record's format.
    pub(super) fn same_input(&self, record: &Record) -> bool {
        let Some(stored) = &record.fingerprint else {
            return false;
        };
        if *stored == self.fingerprint {
            return true;
        }
        self.in_format_of(stored).is_some_and(|mine| mine == stored)
    }

    /// This request's fingerprint in the earlier format of `stored`, when it has one.
    pub(super) fn in_format_of(&self, stored: &Fingerprint) -> Option<&Fingerprint> {
        let earlier = self.earlier.as_ref()?;
        if stored.format() != HS1_TAG || self.fingerprint.format() == HS1_TAG {
            return None;
        }
        earlier
            .hs1
            .get_or_init(|| {
                earlier
                    .input
                    .hs1(&self.scope.operation, self.fingerprint_version)
                    .ok()
            })
            .as_ref()
    }

    /// Before taking over a stale claim of this request written in an earlier format: claim under
    /// that fingerprint, which the store compares and the record keeps.
    pub(super) fn adopt_format_of(&mut self, record: &Record) {
        if record.state != RecordState::Claimed || !record.stale {
            return;
        }
        if let Some(stored) = &record.fingerprint
            && self.in_format_of(stored) == Some(stored)
        {
            self.fingerprint = stored.clone();
        }
    }
}

/// Converts an operation's typed response to and from its stored form.
pub trait ResponseCodec: Sized + Send + 'static {
    /// The stored form of a 2xx response; `None` for any other status, which is never stored.
    fn encode_success(&self) -> Result<Option<EncodedResponse>, CodecError>;
    /// Rebuilds the typed response from a stored result.
    fn decode(stored: &StoredResponse) -> Result<Self, CodecError>;
}

/// How an attempt ended, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The handler ran and its 2xx result was committed with the record.
    Executed,
    /// The handler ran, taking over a stale claim.
    TakenOver,
    /// The handler ran and returned a non-2xx result; nothing was stored.
    NotStored,
    /// A stored result was replayed.
    Replayed,
}

/// The response of an attempt and how it came about.
#[derive(Debug)]
pub struct Outcome<R> {
    /// The typed response.
    pub response: R,
    /// How the attempt ended.
    pub disposition: Disposition,
}

impl<R> Outcome<R> {
    /// Whether the response is a replay (send `Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.disposition == Disposition::Replayed
    }
}

/// Why an attempt produced no typed response.
#[derive(Debug)]
pub enum ExecuteError<E> {
    /// The protocol's answer (409, 410, 422, 503, 504, …).
    Problem(Problem),
    /// The handler failed; its transaction was rolled back and the key released.
    Handler(E),
}

impl<E> From<Problem> for ExecuteError<E> {
    fn from(p: Problem) -> Self {
        ExecuteError::Problem(p)
    }
}

/// The boxed future of a handler borrowing the transaction handle.
pub type HandlerFuture<'a, R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send + 'a>>;

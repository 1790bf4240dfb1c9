//! The executor's parts below the API, for benchmarks and the runtime's own tests: the store
//! interface's requests and outcomes, records and their keys, the executor's attempt types, the
//! response forms, the key header and the migrator. Hidden from the documentation and free to
//! change in any release; a service never needs them.

pub use crate::executor::{
    Disposition, EarlierFormats, ExecuteError, HandlerFuture, IdempotentRequest, Outcome,
    ResponseCodec,
};
pub use crate::migrate::{TABLE as MIGRATIONS_TABLE, migrator};
pub use crate::operation::BoxError;
pub use crate::request::{IDEMPOTENCY_KEY, json_body, key_from_headers};
pub use crate::response::{
    DEFAULT_HEADER_ALLOWLIST, IDEMPOTENT_REPLAYED, StoreResultError, StoredResponse,
    header_is_storable, replay_response,
};
pub use crate::serve::handler_problem;
#[cfg(feature = "postgres")]
pub use crate::store::PgTx;
pub use crate::store::{
    ClaimOutcome, ClaimRequest, ClaimToken, CommitError, Gate, HolderId, MemoryTx, Record,
    RecordState, SCOPE_HASH_TAG, Scope, StoreError, gate_key,
};

//! PostgreSQL's errors as the store's: SQLSTATE classes and driver failures mapped to
//! [`StoreError`]. A leaf: the store, its pooler check and its writer watcher all classify here.

use crate::store::StoreError;

/// Maps a driver error to a [`StoreError`]; the driver text stays in the error for logs only.
pub(crate) fn classify(e: sqlx::Error) -> StoreError {
    classify_ref(&e)
}

/// [`classify`] without taking ownership.
pub(crate) fn classify_ref(e: &sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Database(db) => classify_sqlstate(&db.code().unwrap_or_default(), e),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Other(e.to_string()),
    }
}

/// A database error by its SQLSTATE, whichever PostgreSQL driver reported it (`e` is kept for
/// logs).
pub(crate) fn classify_sqlstate(code: &str, e: &dyn std::fmt::Display) -> StoreError {
    if code == "55P03" {
        StoreError::LockTimeout
    } else if code.starts_with("22") {
        // A data exception: a value PostgreSQL cannot store (a NUL in text, a number out of
        // range), which only a statement carrying request values can meet.
        StoreError::InvalidValue(e.to_string())
    } else if code.starts_with("08")
        || code.starts_with("57P")
        || code == "53300"
        // A read-only transaction: a standby (or a writer demoted to one). The store never works
        // on anything but the writer.
        || code == "25006"
    {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Other(e.to_string())
    }
}

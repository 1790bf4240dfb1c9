//! SQLite's errors as the store's: result codes (not SQLSTATEs) and driver failures mapped to
//! [`StoreError`]. A leaf.

use crate::store::StoreError;

/// Maps a driver error to a [`StoreError`]; the driver text stays in the error for logs only.
pub(crate) fn classify(e: sqlx::Error) -> StoreError {
    classify_ref(&e)
}

/// Whether `e` comes from SQLite (and so is classified by [`classify_ref`]).
pub(crate) fn is_sqlite(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.try_downcast_ref::<sqlx_sqlite::SqliteError>().is_some())
}

/// [`classify`] without taking ownership.
pub(crate) fn classify_ref(e: &sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Database(db) => {
            let code: i64 = db.code().and_then(|c| c.parse().ok()).unwrap_or(1);
            match code & 0xff {
                // SQLITE_BUSY, SQLITE_LOCKED: waited `busy_timeout` for another writer.
                5 | 6 => StoreError::LockTimeout,
                // SQLITE_PERM, SQLITE_NOMEM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT,
                // SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_PROTOCOL, SQLITE_NOLFS, SQLITE_NOTADB:
                // the file cannot be read or written.
                3 | 7 | 8 | 10 | 11 | 13 | 14 | 15 | 22 | 26 => {
                    StoreError::Unavailable(e.to_string())
                }
                _ => StoreError::Other(e.to_string()),
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Other(e.to_string()),
    }
}

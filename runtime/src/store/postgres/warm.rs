//! Connections the PostgreSQL store hands from one of its own statements to the next without
//! sqlx's release test.
//!
//! sqlx tests every connection given back to its pool with a round trip of its own (a `Sync`
//! the server answers), whatever was done with it: that is how it learns that a cancelled
//! statement left no answer unread and that a queued `ROLLBACK` reached the server. A store
//! statement that completed, and a business transaction whose `COMMIT` or `ROLLBACK` was
//! answered, already know both: the answer was read up to `ReadyForQuery`, nothing is queued
//! and the connection is idle outside any transaction. Such a connection is kept here for the
//! store's next statement or business transaction instead (bench/http: the release test was about a
//! fifth of the CPU a replay or a `GET` costs the service and PostgreSQL together).
//!
//! The pool's own rules still hold, a little later:
//! - a connection goes back to its pool, through sqlx's test, at most [`WINDOW`] after it left
//!   it, so `max_lifetime` and the pool's `before_acquire` hook (which follows the writer after
//!   a failover, writer.rs) see every connection that often;
//! - none is kept while one of the store's statements waits for the pool (they take a kept
//!   connection first, and count themselves waiting under the same lock);
//! - while a pool others use too (the business pool) is at its maximum size with no idle
//!   connection, someone else may be waiting in `acquire`, unseen: a connection kept then goes
//!   back [`SATURATED_WINDOW`] (20 ms) after it left the pool, and one kept before the pool
//!   filled up goes back at the next look of the task below, which looks at such a pool every
//!   20 ms (so within about 20 ms of the pool filling up, and at most 40 ms after it left the
//!   pool); such a waiter gets one that much later than from sqlx alone at most, and the store still
//!   saves most release tests under load (idemgen-bench, a pool as large as its clients, against
//!   keeping nothing from a saturated pool: separate-claim creates 0.37–0.41 → 0.41–0.43× plain,
//!   in-transaction ones 0.49–0.55 → 0.57–0.62×);
//! - at most [`CAPACITY`] are kept;
//! - a task hands back each connection as it becomes due, and everything once the pool is
//!   closed, so `Pool::close` does not wait for the store;
//! - a statement that failed or was cancelled drops its connection as sqlx drops any: tested,
//!   or closed.
//!
//! Between a connection's uses here the pool's other hooks do not run either: `after_release`
//! (a pool that needs it, e.g. to `DISCARD ALL` after each transaction, gets it once per window)
//! and `test_before_acquire` (a connection that died in the last 200 ms fails one statement, a
//! 503, instead of being replaced quietly).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};

/// How long a connection may go from one store statement to the next before it goes back to
/// its pool. Under the writer's watch interval (500 ms, writer.rs), so a failover reaches the
/// kept connections about as soon as the pool's.
pub(crate) const WINDOW: Duration = Duration::from_millis(200);

/// [`WINDOW`] for a connection kept while its pool is at its maximum size with no idle
/// connection (a pool others use too): someone may be waiting in `acquire` for it, unseen, and
/// gets it at most this much later than sqlx alone would give it.
pub(crate) const SATURATED_WINDOW: Duration = Duration::from_millis(20);

/// At most this many connections are kept per pool.
const CAPACITY: usize = 16;

/// A pool and the connections kept from it.
pub(crate) struct Warm {
    pool: PgPool,
    /// Only the store's statements use the pool (the claim pool).
    exclusive: bool,
    kept: Mutex<Kept>,
    /// Wakes the sweeping task for a connection due before it meant to look again.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct Kept {
    /// The connections kept, most recently kept last.
    conns: Vec<KeptConn>,
    /// A task is handing back connections kept too long ([`Warm::sweep`]).
    sweeping: bool,
    /// When that task looks again.
    wake_at: Option<Instant>,
    /// The store's statements waiting for a connection from the pool.
    waiting: usize,
}

/// A kept connection.
struct KeptConn {
    conn: PoolConnection<Postgres>,
    left_pool: Instant,
    /// When it goes back to the pool: [`WINDOW`] after it left it, or [`SATURATED_WINDOW`] if
    /// the pool was saturated when it was kept.
    due: Instant,
}

/// Counts a statement waiting for the pool, while it lives.
struct Waiting<'a>(&'a Warm);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.kept().waiting -= 1;
    }
}

/// A connection out of its pool, kept or just acquired. Dropped, it goes back to the pool as
/// sqlx returns any connection; given to [`Warm::keep`], it may serve the next store statement.
#[derive(Debug)]
pub(crate) struct Taken {
    conn: PoolConnection<Postgres>,
    left_pool: Instant,
}

impl Taken {
    pub(crate) fn conn(&mut self) -> &mut PoolConnection<Postgres> {
        &mut self.conn
    }
}

impl fmt::Debug for Warm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Warm")
            .field("pool", &self.pool)
            .field("kept", &self.kept().conns.len())
            .finish()
    }
}

impl Warm {
    /// Connections kept from `pool`; `exclusive` when only the store's statements use it.
    pub(crate) fn new(pool: PgPool, exclusive: bool) -> Arc<Warm> {
        Arc::new(Warm {
            pool,
            exclusive,
            kept: Mutex::default(),
            wake: tokio::sync::Notify::new(),
        })
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a connection is kept, or idle in the pool: one can be had without waiting.
    pub(crate) fn has_idle(&self) -> bool {
        !self.kept().conns.is_empty() || self.pool.num_idle() > 0
    }

    /// The most recently kept connection not yet due back, else one from the pool.
    pub(crate) async fn take(&self) -> Result<Taken, sqlx::Error> {
        let mut expired = Vec::new();
        let found = {
            let mut kept = self.kept();
            loop {
                match kept.conns.pop() {
                    Some(k) if Instant::now() < k.due => {
                        break Some(Taken {
                            conn: k.conn,
                            left_pool: k.left_pool,
                        });
                    }
                    Some(old) => expired.push(old),
                    None => {
                        kept.waiting += 1;
                        break None;
                    }
                }
            }
        };
        // Back to the pool, outside the lock.
        drop(expired);
        if let Some(taken) = found {
            return Ok(taken);
        }
        let _waiting = Waiting(self);
        let conn = self.pool.acquire().await?;
        Ok(Taken {
            conn,
            left_pool: Instant::now(),
        })
    }

    /// Keeps `taken` for the next store statement. Only for a connection whose last statement
    /// completed (its answer read, nothing queued, no transaction open): anything else is
    /// dropped instead. Gives it back to the pool when the module's bounds say so.
    pub(crate) fn keep(self: &Arc<Self>, taken: Taken) {
        let window = if !self.exclusive && self.saturated() {
            SATURATED_WINDOW
        } else {
            WINDOW
        };
        let due = taken.left_pool + window;
        if Instant::now() >= due || self.pool.is_closed() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut kept = self.kept();
        if kept.waiting > 0 || kept.conns.len() >= CAPACITY {
            return;
        }
        kept.conns.push(KeptConn {
            conn: taken.conn,
            left_pool: taken.left_pool,
            due,
        });
        if !kept.sweeping {
            kept.sweeping = true;
            runtime.spawn(Arc::clone(self).sweep());
        } else if kept.wake_at.is_none_or(|at| due < at) {
            self.wake.notify_one();
        }
    }

    /// The pool is at its maximum size and has no idle connection (the kept ones are not idle to
    /// it).
    fn saturated(&self) -> bool {
        self.pool.num_idle() == 0 && self.pool.size() >= self.pool.options().get_max_connections()
    }

    /// Hands back each kept connection as it becomes due (and, while a pool others use is
    /// saturated, as it reaches [`SATURATED_WINDOW`] since it left it), and all of them as soon
    /// as the pool closes; ends when none is left. Dropped unfinished (its
    /// runtime shutting down), it lets the next [`Warm::keep`] start another.
    async fn sweep(self: Arc<Self>) {
        /// Clears `sweeping` if the task is dropped while it waits.
        struct Sweeping<'a>(&'a Warm, bool);
        impl Drop for Sweeping<'_> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.kept().sweeping = false;
                }
            }
        }
        let mut sweeping = Sweeping(&self, true);
        loop {
            let wake_at = {
                let mut kept = self.kept();
                let Some(due) = kept.conns.iter().map(|k| k.due).min() else {
                    // Under the lock a `keep` checks it with: no connection is left unswept.
                    kept.sweeping = false;
                    kept.wake_at = None;
                    sweeping.1 = false;
                    return;
                };
                // A pool others use is looked at again within the saturated window: once it is
                // saturated, what was kept while it had room goes back too.
                let at = if self.exclusive {
                    due
                } else {
                    due.min(Instant::now() + SATURATED_WINDOW)
                };
                kept.wake_at = Some(at);
                at
            };
            tokio::select! {
                () = tokio::time::sleep_until(wake_at.into()) => {}
                () = self.wake.notified() => {}
                () = self.pool.close_event() => {}
            }
            let closed = self.pool.is_closed();
            let saturated = !self.exclusive && self.saturated();
            let expired: Vec<KeptConn> = {
                let mut kept = self.kept();
                let now = Instant::now();
                let (expired, young) = std::mem::take(&mut kept.conns).into_iter().partition(|k| {
                    closed || now >= k.due || (saturated && now >= k.left_pool + SATURATED_WINDOW)
                });
                kept.conns = young;
                expired
            };
            // Back to the pool, outside the lock.
            drop(expired);
        }
    }
}

impl Drop for Warm {
    /// Outside a Tokio runtime sqlx cannot hand a connection back (its drop spawns a task):
    /// kept connections are then detached from their pool and closed with their sockets.
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            for k in std::mem::take(&mut self.kept().conns) {
                drop(k.conn.leak());
            }
        }
    }
}

//! Real PostgreSQL for idemgen's own tests and benchmarks: the runtime's `testing` harness
//! (throwaway clusters, a fresh database per test), plus what only idemgen's own fault tests need
//! and no user does: a fault-injecting TCP proxy, a switchable endpoint, streaming standbys,
//! PgBouncer in front of a cluster, and a pg_auto_failover formation.

pub use idemgen_runtime::testing::*;

mod autofailover;
pub mod delay;
pub mod imports;
mod pgbouncer;
pub mod proxy;
mod standby;
mod switch;

pub use autofailover::{AutoFailover, Kill, MONITOR_SETTINGS, NodeState};
pub use delay::{DelayCounters, DelayProxy};
pub use pgbouncer::{PgBouncer, PoolMode};
pub use standby::{promote, standby_of};
pub use switch::Switch;

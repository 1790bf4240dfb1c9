//! Real PostgreSQL for idemgen's own tests and benchmarks: the runtime's `testing` harness
//! (throwaway clusters, a fresh database per test), plus what only idemgen's own fault tests need
//! and no user does: a fault-injecting TCP proxy, a switchable endpoint, and streaming standbys.

pub use idemgen_runtime::testing::*;

pub mod proxy;
mod standby;
mod switch;

pub use standby::{promote, standby_of};
pub use switch::Switch;

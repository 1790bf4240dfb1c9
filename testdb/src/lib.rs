//! Real PostgreSQL for idemgen's own tests and benchmarks: the runtime's `testing` harness
//! (throwaway clusters, a fresh database per test), plus a fault-injecting TCP proxy.

pub use idemgen_runtime::testing::*;

pub mod proxy;

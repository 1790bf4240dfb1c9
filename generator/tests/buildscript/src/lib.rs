//! The widgets fixture, generated at build time by `build.rs` through `idemgen::Builder` and
//! included from `OUT_DIR` (`pub mod widgets_built`).

include!(concat!(env!("OUT_DIR"), "/widgets_built.rs"));

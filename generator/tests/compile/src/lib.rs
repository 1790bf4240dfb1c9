//! The generated modules of the fixture specs, and the scaffold of one, compiled as a user's
//! crate compiles them. Generated modules are declared `#[rustfmt::skip]`: they are formatted by
//! idemgen (prettyplease), and `cargo fmt` must neither rewrite them nor fail on them.

#[rustfmt::skip]
pub mod defaults;
#[rustfmt::skip]
pub mod defaults_client;
#[rustfmt::skip]
pub mod forms;
#[rustfmt::skip]
pub mod forms_client;
#[rustfmt::skip]
pub mod patterns;
#[rustfmt::skip]
pub mod patterns_client;
#[rustfmt::skip]
pub mod security;
#[rustfmt::skip]
pub mod security_client;
#[rustfmt::skip]
pub mod shapes;
#[rustfmt::skip]
pub mod shapes_client;
#[rustfmt::skip]
pub mod unroutable;
#[rustfmt::skip]
pub mod unroutable_client;
#[rustfmt::skip]
pub mod uploads;
#[rustfmt::skip]
pub mod uploads_client;
#[rustfmt::skip]
pub mod widgets;
#[rustfmt::skip]
pub mod widgets_client;
pub mod widgets_scaffold;

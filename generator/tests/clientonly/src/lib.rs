//! The widgets example's generated client, compiled in a crate that depends on nothing of the
//! server side.

#[rustfmt::skip]
#[path = "../../../../examples/widgets/src/client/mod.rs"]
pub mod widgets_client;

/// A client of the widgets service at `base_url` (so the module is used, not only compiled).
pub fn client(base_url: &str) -> widgets_client::WidgetsClient {
    widgets_client::WidgetsClient::new(base_url)
}

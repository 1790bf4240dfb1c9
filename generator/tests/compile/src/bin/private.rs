//! The generated modules included privately, as a binary crate would: unused items must not warn.

#[rustfmt::skip]
#[path = "../shapes/mod.rs"]
mod shapes;
#[rustfmt::skip]
#[path = "../widgets/mod.rs"]
mod widgets;

fn main() {
    let _ = widgets::RouterConfig::default();
    let _ = shapes::RouterConfig::default();
}

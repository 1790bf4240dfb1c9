//! The generated modules included privately, as a binary crate would: unused items must not warn.



#[path = "../widgets/mod.rs"]
mod widgets;

fn main() {
    let _ = widgets::RouterConfig::default();

}

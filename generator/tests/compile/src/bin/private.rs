//! The generated modules included privately, as a binary crate would: unused items must not warn.

#[rustfmt::skip]
#[path = "../shapes/mod.rs"]
mod shapes;
#[rustfmt::skip]
#[path = "../widgets/mod.rs"]
mod widgets;

fn main() {
    println!("{:?} {:?}", widgets::CreateWidget, shapes::CreatePet);
}

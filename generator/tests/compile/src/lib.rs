//! The generated modules of the fixture specs, and the scaffold of one, compiled as a user's
//! crate compiles them.


pub mod shapes;
pub mod widgets;
pub mod widgets_scaffold;

//! Public operations: validate shapes, pick a kernel variant, launch.

pub mod act;
pub mod elementwise;

pub use act::{activation, activation_inplace, ActArgs};

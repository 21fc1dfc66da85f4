//! The emulated device: a [`super::Backend`] that executes PTX text on the CPU.

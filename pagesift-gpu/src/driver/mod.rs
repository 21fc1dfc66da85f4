//! The device layer: the only home of FFI and `unsafe` in the crate.
//!
//! `backend` is the narrow interface a device implementation provides; `cuda` implements it over
//! `libcuda` (through libloading); the safe types (`Gpu`, buffers, streams, events, the module
//! cache and launches) are built on the interface alone.

pub mod backend;

pub use backend::{Backend, BackendKind, DeviceProps, DevicePtr, KernelArg, RawHandle};

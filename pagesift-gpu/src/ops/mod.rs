//! Public operations: validate shapes, pick a kernel variant, launch.

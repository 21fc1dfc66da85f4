//! CPU reference kernels: the semantics every GPU kernel is tested against.

pub mod act;
pub mod gemm;
pub mod round;

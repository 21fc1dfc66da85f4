//! Public operations: validate shapes, pick a kernel variant, launch.
//!
//! `PAGESIFT_GPU_LOG=dispatch` (or a comma-separated list holding `dispatch`) makes every
//! operation print the kernel variant it launches and why, on stderr.

pub mod act;
pub mod elementwise;
pub mod gemm;
pub mod quant;

pub use act::{activation, activation_inplace, ActArgs};
pub use gemm::gemm;
pub use quant::qgemm;

/// Whether `PAGESIFT_GPU_LOG` asks for dispatch decisions (read once).
fn dispatch_logged() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("PAGESIFT_GPU_LOG")
            .is_ok_and(|v| v.split(',').any(|w| w.trim() == "dispatch"))
    })
}

/// Prints a dispatch decision when `PAGESIFT_GPU_LOG=dispatch`.
fn log_dispatch(line: impl FnOnce() -> String) {
    if dispatch_logged() {
        eprintln!("pagesift-gpu dispatch: {}", line());
    }
}

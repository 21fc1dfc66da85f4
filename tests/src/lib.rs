//! Shared helpers of the integration tests.
//!
//! GPU tests start with [`gpu_or_skip`]: it opens the first device (the NVIDIA driver, or the
//! emulated device when `PAGESIFT_GPU_DEVICE=emulated`) and, where there is none, prints why the
//! test is skipped and returns `None`, or panics when `PAGESIFT_REQUIRE_GPU=1`. Where
//! `PAGESIFT_TEST_LOG` names a file, every GPU test appends one line to it (`ran <name> <device>`
//! or `skipped <name> <reason>`), so a script can count what ran where; [`report`] lines go
//! there too.

pub mod act_check;
pub mod block_kernels;
pub mod example_kernels;
pub mod gemm_check;
pub mod gemm_prop;
pub mod hand_ptx;
pub mod intrinsic_kernels;
pub mod language_kernels;
pub mod util;
pub mod wgmma_kernels;

use pagesift_gpu::Gpu;
use std::io::Write;

/// Whether `PAGESIFT_REQUIRE_GPU=1` demands that GPU tests fail instead of skipping.
pub fn gpu_required() -> bool {
    std::env::var("PAGESIFT_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

fn log_line(line: &str) {
    if let Some(path) = std::env::var_os("PAGESIFT_TEST_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write per line: tests run in parallel threads and processes, and an append
            // of a whole line cannot interleave with another.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Prints a test's report line (what `ptxas` assembled, the emulator's speed) and appends it
/// to `PAGESIFT_TEST_LOG` as `report <line>`, where `scripts/test` prints it after the tests.
pub fn report(line: &str) {
    println!("{line}");
    log_line(&format!("report {line}"));
}

/// Opens device 0 for the GPU test `test`, or skips it visibly.
pub fn gpu_or_skip(test: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => {
            let device = gpu.name().replace(' ', "_");
            log_line(&format!("ran {test} {device}"));
            Some(gpu)
        }
        Err(e) => {
            if gpu_required() {
                panic!("{test}: a GPU is required (PAGESIFT_REQUIRE_GPU=1) but none could be opened: {e}");
            }
            eprintln!("SKIPPED {test}: no GPU: {e}");
            log_line(&format!(
                "skipped {test} {}",
                e.to_string().replace('\n', " ")
            ));
            None
        }
    }
}

/// Whether the device is the emulated one (tests then use smaller shapes).
pub fn is_emulated(gpu: &Gpu) -> bool {
    gpu.backend_kind() == pagesift_gpu::BackendKind::Emulated
}

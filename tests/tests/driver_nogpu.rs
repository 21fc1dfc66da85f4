//! Behaviour without a usable driver; runs on every machine.
//!
//! The driver is loaded once per process, so each case runs in a child process: the test
//! re-runs this test binary, filtered to itself, with its own `PAGESIFT_GPU_LIB`.

use std::path::{Path, PathBuf};
use std::process::Command;

use pagesift_gpu::{available, driver, DeviceBuffer, Error, Gpu};

/// Set in the child process that runs a case's body.
const CHILD: &str = "PAGESIFT_DRIVER_NOGPU_CHILD";

/// Runs `body` in a child process of this test binary with `lib` as `PAGESIFT_GPU_LIB`.
fn in_child(test: &str, lib: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("PAGESIFT_GPU_LIB", lib)
        .env_remove("PAGESIFT_GPU_DEVICE")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child `{test}` with PAGESIFT_GPU_LIB={lib} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

const MISSING: &str = "/nonexistent/pagesift-test/libcuda-missing.so.1";

/// A shared library that exists on this machine and is certainly not a CUDA driver.
fn non_driver_library() -> Option<PathBuf> {
    let dirs = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    ];
    let names = ["libz.so.1", "libm.so.6"];
    dirs.iter()
        .flat_map(|d| names.iter().map(move |n| Path::new(d).join(n)))
        .find(|p| p.exists())
}

fn assert_not_found(e: &Error, entry: &str) {
    match e {
        Error::DriverNotFound { tried, reason } => {
            assert!(tried.contains(MISSING), "{entry}: tried {tried:?}");
            assert!(!reason.is_empty(), "{entry}: the loader's reason is kept");
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{entry}: one line: {msg:?}");
            assert!(
                msg.contains("PAGESIFT_GPU_LIB") && msg.contains("libcuda.so.1"),
                "{entry}: says what to do: {msg}"
            );
        }
        other => panic!("{entry}: expected DriverNotFound, got {other:?}"),
    }
}

#[test]
fn missing_library_is_driver_not_found_from_every_entry_point() {
    in_child(
        "missing_library_is_driver_not_found_from_every_entry_point",
        MISSING,
        || {
            assert!(!available());
            assert!(!available(), "the answer is remembered");
            assert_not_found(&Gpu::new(0).unwrap_err(), "Gpu::new");
            assert_not_found(&Gpu::new(3).unwrap_err(), "Gpu::new(3)");
            assert_not_found(&Gpu::device_count().unwrap_err(), "Gpu::device_count");
            assert_not_found(
                &driver::default_backend().err().expect("no backend"),
                "default_backend",
            );
            assert_not_found(
                &driver::cuda::CudaBackend::global()
                    .err()
                    .expect("no driver"),
                "CudaBackend::global",
            );
            // Again: the remembered failure is reported the same way, never a panic.
            assert_not_found(&Gpu::new(0).unwrap_err(), "Gpu::new, second call");
        },
    );
}

#[test]
fn a_library_that_is_not_a_driver_is_missing_symbol() {
    let Some(lib) = non_driver_library() else {
        eprintln!("SKIPPED a_library_that_is_not_a_driver_is_missing_symbol: no libz.so.1 or libm.so.6 found");
        return;
    };
    let lib = lib.to_string_lossy().into_owned();
    let expect_lib = lib.clone();
    in_child(
        "a_library_that_is_not_a_driver_is_missing_symbol",
        &lib,
        move || {
            assert!(!available());
            for (entry, e) in [
                ("Gpu::new", Gpu::new(0).unwrap_err()),
                ("Gpu::device_count", Gpu::device_count().unwrap_err()),
                (
                    "default_backend",
                    driver::default_backend().err().expect("no backend"),
                ),
            ] {
                match &e {
                    Error::MissingSymbol { library, symbol } => {
                        assert_eq!(library, &expect_lib, "{entry}");
                        assert_eq!(
                            *symbol, "cuInit",
                            "{entry}: the first required symbol is named"
                        );
                        assert!(e.to_string().contains("cuInit"), "{entry}: {e}");
                    }
                    other => panic!("{entry}: expected MissingSymbol, got {other:?}"),
                }
            }
        },
    );
}

#[test]
fn an_unknown_device_selection_is_a_clear_error() {
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().expect("test binary path");
        let out = Command::new(exe)
            .args([
                "an_unknown_device_selection_is_a_clear_error",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("PAGESIFT_GPU_DEVICE", "quantum")
            .output()
            .expect("spawn the test binary");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        return;
    }
    match Gpu::new(0) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("quantum"), "{reason}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(!available());
}

#[test]
fn types_and_errors_work_without_touching_a_driver() {
    // Compile-time: the safe types are Send + Sync (so a Gpu can be shared across threads).
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Gpu>();
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<pagesift_gpu::Stream>();
    send_sync::<pagesift_gpu::PinnedBuffer<u8>>();
    send_sync::<pagesift_gpu::Event>();
    let e = Error::OutOfMemory { bytes: 1 << 40 };
    assert!(e.to_string().contains(&(1u64 << 40).to_string()));
}

/// The CLI binary next to this test binary (`target/<profile>/pagesift-gpu`), if it was built.
fn cli_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let name = format!("pagesift-gpu{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

#[test]
fn the_cli_without_a_driver_prints_one_line_and_exits_2() {
    let Some(cli) = cli_binary() else {
        eprintln!(
            "SKIPPED the_cli_without_a_driver_prints_one_line_and_exits_2: the pagesift-gpu binary is not built \
             (`cargo build -p pagesift-gpu`; pagesift-gpu/tests/cli.rs covers the same)"
        );
        return;
    };
    let out = Command::new(&cli)
        .arg("info")
        .env("PAGESIFT_GPU_LIB", MISSING)
        .env_remove("PAGESIFT_GPU_DEVICE")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run the CLI");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "exactly one line: {stderr:?}");
    assert!(stderr.contains(MISSING), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

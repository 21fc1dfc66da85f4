//! Behaviour without a usable driver; runs on every machine.
//!
//! The driver is loaded once per process, so each case runs in a child process: the test
//! re-runs this test binary, filtered to itself, with its own `PAGESIFT_GPU_LIB`.

use std::path::{Path, PathBuf};
use std::process::Command;

use pagesift_gpu::{
    available, driver, error, DeviceBuffer, DriverError, Error, Gpu, KernelVariant,
};
use pagesift_tests::hand_ptx::{
    axpb_reference, axpb_variant, expect_module_load_error, launch_axpb_variant, RawAxpb,
    BROKEN_PTX,
};
use pagesift_tests::util::{bits, poisoned_device, random_f32, POISON_BITS};

/// Set in the child process that runs a case's body.
const CHILD: &str = "PAGESIFT_DRIVER_NOGPU_CHILD";

/// Runs `body` in a child process of this test binary, filtered to `test`, with `env` applied
/// (`None` removes the variable); the child must run and pass exactly that test.
fn in_child(test: &str, env: &[(&str, Option<&str>)], body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (name, value) in env {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let out = cmd.output().expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child `{test}` with {env:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// Runs `body` in a child process with `lib` as `PAGESIFT_GPU_LIB` and no device selection.
fn with_driver(test: &str, lib: &str, body: impl FnOnce()) {
    in_child(
        test,
        &[
            ("PAGESIFT_GPU_LIB", Some(lib)),
            ("PAGESIFT_GPU_DEVICE", None),
        ],
        body,
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
        Error::DriverNotFound(d) => {
            assert!(d.tried.contains(MISSING), "{entry}: tried {:?}", d.tried);
            assert!(!d.reason.is_empty(), "{entry}: the loader's reason is kept");
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
    with_driver(
        "missing_library_is_driver_not_found_from_every_entry_point",
        MISSING,
        || {
            assert!(!available());
            assert!(!available(), "the answer is remembered");
            assert_not_found(&Gpu::new(0).unwrap_err(), "Gpu::new");
            assert_not_found(&Gpu::new(3).unwrap_err(), "Gpu::new(3)");
            assert_not_found(&Gpu::device_count().unwrap_err(), "Gpu::device_count");
            assert_not_found(
                &driver::driver_info().expect_err("no backend"),
                "driver_info",
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
    with_driver(
        "a_library_that_is_not_a_driver_is_missing_symbol",
        &lib,
        move || {
            assert!(!available());
            for (entry, e) in [
                ("Gpu::new", Gpu::new(0).unwrap_err()),
                ("Gpu::device_count", Gpu::device_count().unwrap_err()),
                (
                    "driver_info",
                    driver::driver_info().expect_err("no backend"),
                ),
            ] {
                match &e {
                    Error::MissingSymbol(m) => {
                        assert_eq!(m.library, expect_lib, "{entry}");
                        assert_eq!(
                            m.symbol, "cuInit",
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
    in_child(
        "an_unknown_device_selection_is_a_clear_error",
        &[("PAGESIFT_GPU_DEVICE", Some("quantum"))],
        || {
            match Gpu::new(0) {
                Err(ref e @ Error::Config(ref c)) => {
                    assert_eq!(
                        (c.variable, c.value.as_str()),
                        ("PAGESIFT_GPU_DEVICE", "quantum")
                    );
                    let msg = e.to_string();
                    assert!(
                        msg.contains("configuration") && !msg.contains("kernel"),
                        "{msg}"
                    );
                }
                other => panic!("expected a configuration error, got {other:?}"),
            }
            assert!(!available());
        },
    );
}

/// A FIFO as `PAGESIFT_GPU_LIB` (directly and through a symlink) is a configuration error
/// naming it; nothing blocks on opening it.
#[cfg(unix)]
#[test]
fn a_fifo_as_the_driver_library_is_a_configuration_error() {
    let dir = std::env::temp_dir().join(format!("pagesift-fifo-test-{}", std::process::id()));
    let fifo = dir.join("libcuda.so.1");
    let link = dir.join("link.so");
    if std::env::var_os(CHILD).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let made = Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED a_fifo_as_the_driver_library_is_a_configuration_error: no mkfifo");
            return;
        }
        std::os::unix::fs::symlink(&fifo, &link).expect("symlink");
    }
    for (path, case) in [(&fifo, "fifo"), (&link, "symlink")] {
        let path = path.to_string_lossy().into_owned();
        let started = std::time::Instant::now();
        with_driver(
            "a_fifo_as_the_driver_library_is_a_configuration_error",
            &path,
            || {
                let expect = std::env::var("PAGESIFT_GPU_LIB").expect("set by the parent");
                for (entry, e) in [
                    ("Gpu::new", Gpu::new(0).unwrap_err()),
                    ("driver_info", driver::driver_info().expect_err("no driver")),
                ] {
                    match &e {
                        Error::Config(c) => {
                            assert_eq!(c.variable, "PAGESIFT_GPU_LIB", "{entry}");
                            assert_eq!(c.value, expect, "{entry}");
                            assert!(e.to_string().contains("FIFO"), "{entry}: {e}");
                        }
                        other => panic!("{entry}: expected a configuration error, got {other:?}"),
                    }
                }
                assert!(!available());
            },
        );
        println!(
            "PAGESIFT_GPU_LIB = {case}: refused in {} ms",
            started.elapsed().as_millis()
        );
        if std::env::var_os(CHILD).is_some() {
            return;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
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

/// A function of a crate built on pagesift-gpu: it returns `pagesift_gpu::Result`, which
/// clippy's `result_large_err` accepts at its default threshold (the workspace runs clippy with
/// it on) because `Error` is three words.
fn parse_count(s: &str) -> pagesift_gpu::Result<u32> {
    s.trim().parse().map_err(|e| {
        error::InvalidArgument {
            op: "parse_count",
            message: format!("{s:?}: {e}"),
        }
        .into()
    })
}

/// A driver call's error converts with `?`.
fn after_a_driver_call(r: std::result::Result<u32, DriverError>) -> pagesift_gpu::Result<u32> {
    Ok(r? + 1)
}

#[test]
fn errors_are_three_words() {
    use std::mem::size_of;
    // A tag word and two words of payload (`NoSuchDevice`'s two `usize`s, `Deferred`'s boxed
    // slice); every larger context is boxed. `Result<()>` uses a spare tag value for `Ok`.
    assert!(size_of::<Error>() <= 24, "{} bytes", size_of::<Error>());
    assert!(
        size_of::<pagesift_gpu::Result<()>>() <= 24,
        "{} bytes",
        size_of::<pagesift_gpu::Result<()>>()
    );
    assert_eq!(parse_count(" 7 ").unwrap(), 7);
    match parse_count("seven") {
        Err(Error::InvalidArgument(a)) => {
            assert_eq!(a.op, "parse_count");
            assert!(a.message.contains("\"seven\""), "{}", a.message);
        }
        other => panic!("expected an invalid argument, got {other:?}"),
    }
    assert_eq!(after_a_driver_call(Ok(1)).unwrap(), 2);
    let driver = DriverError {
        call: "cuInit",
        code: 100,
        name: "CUDA_ERROR_NO_DEVICE".into(),
        message: "no CUDA-capable device is detected".into(),
    };
    match after_a_driver_call(Err(driver.clone())) {
        Err(Error::Driver(d)) => assert_eq!(*d, driver),
        other => panic!("expected a driver error, got {other:?}"),
    }
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

/// Compiles `tests/fake-driver/fake_libcuda.c`, a host-side stand-in for `libcuda.so.1`, with
/// the system C compiler; `None` (the test then skips visibly) where there is none.
fn fake_driver() -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fake-driver/fake_libcuda.c");
    let dir = std::env::temp_dir().join(format!("pagesift-fake-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let lib = dir.join("libcuda.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-lm")
        .status()
        .ok()?;
    status.success().then_some(lib)
}

/// `axpb` of the shared hand-written PTX as a variant with dynamic shared memory.
static AXPB: KernelVariant = axpb_variant(128, true);

/// The whole libcuda layer (symbol table, signatures, parameter passing, error names, JIT log
/// capture, out-of-memory mapping, optional symbols) against the host-side driver stand-in.
#[test]
fn the_cuda_backend_drives_a_host_side_driver_stand_in() {
    use pagesift_gpu::{BackendKind, LaunchConfig, PinnedBuffer};

    const NAME: &str = "the_cuda_backend_drives_a_host_side_driver_stand_in";
    let lib = if std::env::var_os(CHILD).is_some() {
        std::env::var("PAGESIFT_GPU_LIB").unwrap_or_default()
    } else {
        match fake_driver() {
            Some(lib) => lib.to_string_lossy().into_owned(),
            None => {
                eprintln!("SKIPPED {NAME}: no C compiler to build the driver stand-in");
                return;
            }
        }
    };
    with_driver(NAME, &lib, || {
        assert!(available());
        assert_eq!(Gpu::device_count().unwrap(), 1);
        assert!(matches!(
            Gpu::new(1),
            Err(Error::NoSuchDevice {
                ordinal: 1,
                count: 1
            })
        ));
        let gpu = Gpu::new(0).unwrap();
        assert_eq!(gpu.backend_kind(), BackendKind::Cuda);
        assert_eq!(gpu.name(), "Fake CUDA Device");
        assert_eq!(gpu.driver_version(), 12080);
        let p = gpu.props();
        assert_eq!(p.compute_capability, (9, 0));
        assert_eq!(
            (p.sm_count, p.l2_cache_bytes, p.warp_size),
            (132, 50_331_648, 32)
        );
        assert_eq!(
            (p.max_shared_per_block, p.max_shared_per_block_optin),
            (49_152, 232_448)
        );
        assert_eq!(p.max_threads_per_block, 1024);
        assert_eq!(p.max_block_dim, [1024, 1024, 64]);
        assert_eq!(p.max_grid_dim, [2_147_483_647, 65_535, 65_535]);
        assert_eq!(p.total_memory, 2 << 30);
        assert!(
            matches!(gpu.uuid(), Err(Error::Unsupported(_))),
            "optional symbol absent"
        );

        let (free_before, total) = gpu.mem_info().unwrap();
        assert_eq!(total, 2 << 30);
        {
            let n = 4097;
            let host = random_f32(n, 7, -50.0..50.0);
            let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
            assert_eq!(bits(&x.to_host().unwrap()), bits(&host));
            let mut y = poisoned_device(&gpu, n).unwrap();
            let (free_during, _) = gpu.mem_info().unwrap();
            assert_eq!(
                free_before - free_during,
                2 * 4 * n,
                "the allocations are visible"
            );

            // Raw PTX: the parameters reach the driver as one pointer per value.
            let axpb = RawAxpb::load(&gpu).unwrap();
            let stream = gpu.new_stream().unwrap();
            axpb.launch(&stream, &x, &mut y, 2.5, -1.0, 128).unwrap();
            stream.synchronize().unwrap();
            let want = bits(&axpb_reference(&host, 2.5, -1.0));
            assert_eq!(bits(&y.to_host().unwrap()), want);

            // A variant with 64 KiB of dynamic shared memory: the stand-in refuses the launch
            // unless the function was opted in first.
            y.fill_u32(POISON_BITS).unwrap();
            let cfg = LaunchConfig::grid_1d((n as u32).div_ceil(128)).with_shared_mem(64 * 1024);
            launch_axpb_variant(&stream, &AXPB, &cfg, &x, &mut y, 2.5, -1.0).unwrap();
            stream.synchronize().unwrap();
            assert_eq!(bits(&y.to_host().unwrap()), want);

            // Pinned asynchronous copies.
            let mut pinned = PinnedBuffer::<f32>::new(&gpu, n).unwrap();
            stream.copy_dtoh_async(&mut pinned, &y).unwrap();
            assert_eq!(bits(pinned.as_slice().unwrap()), want);

            // Driver errors carry the call, the code's name and the driver's message.
            match axpb.module().function("missing") {
                Err(Error::Driver(d)) => {
                    assert_eq!(
                        (d.call, d.code, d.name.as_str()),
                        ("cuModuleGetFunction", 500, "CUDA_ERROR_NOT_FOUND")
                    );
                    assert_eq!(d.message, "named symbol not found");
                }
                other => panic!("expected a driver error, got {other:?}"),
            }
            // JIT failures carry the log from the option buffers.
            let (source, jit_log) = expect_module_load_error(&gpu, "broken", BROKEN_PTX);
            assert_eq!(source.name, "CUDA_ERROR_INVALID_PTX");
            assert!(
                jit_log.contains("line 8") && jit_log.contains("frobnicate"),
                "{jit_log}"
            );
            // Out of memory is typed; the device stays usable.
            assert!(
                matches!(DeviceBuffer::<u8>::alloc(&gpu, 3 << 30), Err(Error::OutOfMemory { bytes }) if bytes == 3 << 30)
            );
            assert_eq!(
                DeviceBuffer::from_host(&gpu, &[1u8, 2])
                    .unwrap()
                    .to_host()
                    .unwrap(),
                vec![1, 2]
            );
            // Events fall back to cuEventElapsedTime where the `_v2` form is missing.
            let (a, b) = (
                pagesift_gpu::Event::new(&gpu).unwrap(),
                pagesift_gpu::Event::new(&gpu).unwrap(),
            );
            a.record(&stream).unwrap();
            b.record(&stream).unwrap();
            b.synchronize().unwrap();
            assert!(b.elapsed_ms(&a).unwrap() >= 0.0);
        }
        let (free_after, _) = gpu.mem_info().unwrap();
        assert_eq!(free_after, free_before, "every allocation was freed");
    });
    if std::env::var_os(CHILD).is_none() {
        // The CLI's `info` through the same stand-in.
        if let Some(cli) = cli_binary() {
            let out = Command::new(cli)
                .arg("info")
                .env("PAGESIFT_GPU_LIB", &lib)
                .env_remove("PAGESIFT_GPU_DEVICE")
                .output()
                .expect("run the CLI");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            for want in [
                "device 0: Fake CUDA Device",
                "compute capability   9.0",
                "multiprocessors      132",
                "2048 MiB total",
                "48 KiB default, 227 KiB opt-in",
                "warp size            32",
                "CUDA 12.8",
            ] {
                assert!(stdout.contains(want), "`info` shows {want:?}:\n{stdout}");
            }
        }
        if let Some(dir) = Path::new(&lib).parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

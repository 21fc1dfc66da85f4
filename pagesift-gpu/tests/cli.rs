//! The command-line tool without a driver: one clear line on stderr, exit code 2, no panic;
//! the commands that need no device still work.

use std::process::Command;

const MISSING: &str = "/nonexistent/pagesift-test/libcuda-missing.so.1";

fn cli() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagesift-gpu"));
    c.env("PAGESIFT_GPU_LIB", MISSING)
        .env_remove("PAGESIFT_GPU_DEVICE")
        .env("RUST_BACKTRACE", "1");
    c
}

#[test]
fn info_without_a_driver_is_one_line_and_exit_code_2() {
    let out = cli().arg("info").output().expect("run the CLI");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "exactly one line: {stderr:?}");
    assert!(
        stderr.contains(MISSING) && stderr.contains("install the NVIDIA driver"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout");
}

#[test]
fn kernels_and_help_need_no_driver() {
    let out = cli().arg("kernels").output().expect("run the CLI");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let n = pagesift_gpu::kernels::registry().len();
    assert!(
        stdout
            .lines()
            .last()
            .is_some_and(|l| l == format!("{n} variants")),
        "{stdout}"
    );
    for v in pagesift_gpu::kernels::registry() {
        assert!(
            stdout.contains(&v.display_name()),
            "{} listed",
            v.display_name()
        );
    }
    let out = cli().arg("help").output().expect("run the CLI");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("selftest"));
}

#[test]
fn ptx_prints_a_variant_or_refuses_an_unknown_name() {
    if let Some(v) = pagesift_gpu::kernels::registry().first() {
        let out = cli()
            .args(["ptx", &v.display_name()])
            .output()
            .expect("run the CLI");
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), v.ptx);
        let out = cli().args(["ptx", v.entry]).output().expect("run the CLI");
        assert_eq!(String::from_utf8_lossy(&out.stdout), v.ptx, "by entry name");
    }
    let out = cli()
        .args(["ptx", "no_such_kernel"])
        .output()
        .expect("run the CLI");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("no_such_kernel"));
    let out = cli().arg("frobnicate").output().expect("run the CLI");
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

/// Runs `args` with stdout a pipe whose reader has exited before the program writes (as
/// `pagesift-gpu help | head -c 0`), and returns the exit code and the rest of stderr.
#[cfg(unix)]
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ sleep 0.2; "$0" "$@"; echo "exit=$?" >&2; } | true"#)
        .arg(env!("CARGO_BIN_EXE_pagesift-gpu"))
        .args(args)
        .env("PAGESIFT_GPU_LIB", MISSING)
        .env_remove("PAGESIFT_GPU_DEVICE")
        .output()
        .expect("run the CLI through sh");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = stderr
        .lines()
        .find_map(|l| l.strip_prefix("exit="))
        .and_then(|c| c.trim().parse().ok());
    let rest = stderr
        .lines()
        .filter(|l| !l.starts_with("exit="))
        .collect::<Vec<_>>()
        .join("\n");
    (code, rest)
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_cli_quietly() {
    let first = pagesift_gpu::kernels::registry()[0].display_name();
    for args in [&["help"][..], &["kernels"], &["ptx", &first]] {
        let (status, stderr) = with_closed_stdout(args);
        assert!(
            !stderr.contains("panicked"),
            "{args:?}: no panic on a closed stdout: {stderr}"
        );
        assert_eq!(status, Some(0), "{args:?}: quiet exit: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: nothing on stderr: {stderr}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_a_clean_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("SKIPPED a_full_stdout_is_a_clean_error: no /dev/full");
        return;
    };
    for args in [&["help"][..], &["kernels"]] {
        let out = cli()
            .args(args)
            .stdout(full.try_clone().expect("dup /dev/full"))
            .output()
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(74), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.contains("cannot write to stdout"), "{stderr}");
    }
}

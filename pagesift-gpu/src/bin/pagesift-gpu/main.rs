//! The `pagesift-gpu` command-line tool: device information, the compiled kernel variants,
//! their PTX, the self test, and the benches.

/// Writes one line on stdout ([`write_out`]): never panics on a closed or full stdout.
macro_rules! outln {
    () => {
        $crate::write_out(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::write_out(format_args!("{}\n", format_args!($($t)*)))
    };
}

mod bench;
mod selftest;

use std::io::Write;
use std::process::ExitCode;

use pagesift_gpu::{Error, Gpu, KernelVariant};

const USAGE: &str = "\
pagesift-gpu: NVIDIA GPU kernels for inference engines

usage: pagesift-gpu <command>

commands:
  info        every device (name, compute capability, SMs, memory, L2, shared memory limits,
              warp size) and the driver version
  kernels     every compiled kernel variant: name, target, block, static shared memory, PTX bytes
              (`--device`: also registers and local memory as JIT-compiled for device 0)
  ptx NAME    the PTX text of one variant (NAME as listed by `kernels`, or its entry name)
  selftest    every kernel family against the CPU reference
  bench gemm  our GEMM against cuBLAS on the same buffers and stream, timed with events: TFLOP/s,
              errors, epilogue cost, decode bandwidth against a copy, for f32 inputs at each
              precision and for bf16 and f16 inputs and outputs (against cublasGemmEx)
              [--shapes MxNxK[:KN][,..]] [--modes F32,Tf32x3,Tf32,Bf16,F16]
              (--precisions: the older name of --modes)
  bench quant the kernels over GGUF weights (Q4_0, Q8_0, Q4_K, BF16, F16) against a copy of the
              same weights and cuBLAS bf16 / f32 on the dequantized weights: µs per call, GB/s
              of the bytes read, share of the copy's GB/s, TFLOP/s, cuBLAS time over ours
              [--formats Q4_0,..] [--shapes N_OUTxN_IN[,..]] [--tokens 1,2,4,8,16,512]
  help        this text

environment:
  PAGESIFT_GPU_LIB      the driver library to load instead of libcuda.so.1
  PAGESIFT_GPU_DEVICE   `emulated` for the emulated device (when built with feature `emulator`)
  PAGESIFT_CUBLAS       the cuBLAS library `bench gemm` loads before libcublas.so.13 / .12";

/// Exit code for a missing or unusable driver.
const EXIT_NO_DRIVER: u8 = 2;
/// Exit code for a usage error or an unknown name.
const EXIT_USAGE: u8 = 64;
/// Exit code when stdout cannot be written (full disk, device error), as sysexits' EX_IOERR.
const EXIT_IO: u8 = 74;

/// Writes `args` on stdout and flushes. A reader that went away (`head`) ends the program
/// quietly with status 0; any other failure (`/dev/full`) with one line on stderr and status
/// [`EXIT_IO`].
fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        std::process::exit(i32::from(stdout_failed(&e)));
    }
}

/// The exit status after a failed write to stdout: 0 when the reader went away, else
/// [`EXIT_IO`] after one line on stderr.
fn stdout_failed(e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return 0;
    }
    let _ = writeln!(
        std::io::stderr(),
        "pagesift-gpu: cannot write to stdout: {e}"
    );
    EXIT_IO
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str).unwrap_or("help");
    let rest = args.get(1..).unwrap_or(&[]);
    match command {
        "info" => report(info()),
        "kernels" => report(kernels(rest)),
        "ptx" => match rest.first() {
            Some(name) => ptx(name),
            None => fail(
                EXIT_USAGE,
                "usage: pagesift-gpu ptx NAME (see `pagesift-gpu kernels` for names)",
            ),
        },
        "selftest" => ExitCode::from(u8::try_from(selftest::run(rest).clamp(0, 255)).unwrap_or(1)),
        "bench" => bench::run(rest),
        "help" | "-h" | "--help" => {
            outln!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => fail(
            EXIT_USAGE,
            &format!("unknown command `{other}`; run `pagesift-gpu help`"),
        ),
    }
}

/// Prints one line on stderr and returns `code`.
fn fail(code: u8, message: &str) -> ExitCode {
    let _ = writeln!(
        std::io::stderr(),
        "pagesift-gpu: {}",
        message.replace('\n', " ")
    );
    ExitCode::from(code)
}

/// Maps a command's outcome to an exit code; errors are one line on stderr.
fn report(r: Result<(), Error>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (Error::DriverNotFound(_) | Error::MissingSymbol(_))) => {
            fail(EXIT_NO_DRIVER, &e.to_string())
        }
        Err(e) => fail(1, &e.to_string()),
    }
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it.
fn format_uuid(b: &[u8; 16]) -> String {
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

fn mib(bytes: usize) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn kib(bytes: u32) -> String {
    format!("{} KiB", bytes / 1024)
}

fn info() -> Result<(), Error> {
    let driver = pagesift_gpu::driver::driver_info()?;
    for ordinal in 0..driver.device_count {
        let gpu = Gpu::new(ordinal)?;
        let p = gpu.props();
        let (free, total) = gpu.mem_info()?;
        outln!("device {ordinal}: {}", p.name);
        if let Ok(Some(uuid)) = gpu.uuid() {
            outln!("  uuid                 {}", format_uuid(&uuid));
        }
        outln!(
            "  compute capability   {}.{}",
            p.compute_capability.0,
            p.compute_capability.1
        );
        outln!("  multiprocessors      {}", p.sm_count);
        outln!(
            "  memory               {} total, {} free",
            mib(total),
            mib(free)
        );
        outln!("  L2 cache             {}", kib(p.l2_cache_bytes));
        outln!(
            "  shared per block     {} default, {} opt-in",
            kib(p.max_shared_per_block),
            kib(p.max_shared_per_block_optin)
        );
        outln!("  warp size            {}", p.warp_size);
        outln!("  max threads / block  {}", p.max_threads_per_block);
    }
    let version = driver.version;
    outln!(
        "driver: CUDA {}.{} ({}){}",
        version / 1000,
        (version % 1000) / 10,
        driver
            .version_string
            .map(|s| format!("driver {s}"))
            .unwrap_or_else(|| "NVML not available".into()),
        if driver.device_count == 0 {
            ", no devices"
        } else {
            ""
        }
    );
    outln!("library: {}", driver.library);
    Ok(())
}

/// Lists the registry; with `--device`, also loads every variant on device 0 and shows its
/// registers and local memory (spills) as the driver's JIT compiled it.
fn kernels(args: &[String]) -> Result<(), Error> {
    let on_device = args.iter().any(|a| a == "--device");
    let gpu = if on_device { Some(Gpu::new(0)?) } else { None };
    let registry = pagesift_gpu::kernels::registry();
    let width = registry
        .iter()
        .map(|v| v.display_name().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut header = format!(
        "{:<width$}  {:<7}  {:<13}  {:>11}  {:>9}",
        "name", "target", "block", "static smem", "PTX bytes"
    );
    if on_device {
        header.push_str("   regs  local bytes");
    }
    outln!("{header}");
    for v in &registry {
        let block = format!("{}x{}x{}", v.block[0], v.block[1], v.block[2]);
        let mut line = format!(
            "{:<width$}  {:<7}  {:<13}  {:>11}  {:>9}",
            v.display_name(),
            v.target,
            block,
            v.static_shared_bytes,
            v.ptx.len()
        );
        if let Some(gpu) = &gpu {
            match gpu.preload(v) {
                Ok(a) => line.push_str(&format!("  {:>5}  {:>11}", a.num_regs, a.local_bytes)),
                Err(Error::Unsupported(_)) => line.push_str("  (not for this device)"),
                Err(e) => return Err(e),
            }
        }
        outln!("{line}");
    }
    outln!("{} variants", registry.len());
    Ok(())
}

fn find_variant(name: &str) -> Option<&'static KernelVariant> {
    let registry = pagesift_gpu::kernels::registry();
    registry
        .iter()
        .copied()
        .find(|v| v.display_name() == name)
        .or_else(|| registry.into_iter().find(|v| v.entry == name))
}

fn ptx(name: &str) -> ExitCode {
    match find_variant(name) {
        Some(v) => {
            write_out(format_args!("{}", v.ptx));
            ExitCode::SUCCESS
        }
        None => fail(
            EXIT_USAGE,
            &format!("no kernel variant named `{name}`; run `pagesift-gpu kernels` for the list"),
        ),
    }
}

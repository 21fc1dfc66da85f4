//! `pagesift-gpu bench KIND [FLAGS]`: a side-by-side comparison of [`pagesift_gpu::bench`] on
//! device 0, its table on stdout. Without a device it says so in one line and exits 0.
//!
//! Each kind is one entry of [`KINDS`]: its name, its usage line, and a function that parses
//! its flags and runs it. A new kind is one more function here and one more entry.

use std::process::ExitCode;

use pagesift_gpu::bench::gemm::{parse_modes, parse_shapes};
use pagesift_gpu::bench::quant::{parse_formats, parse_quant_shapes, parse_tokens};
use pagesift_gpu::bench::{
    run_engine, run_gemm, run_quant, BenchError, EngineBenchOptions, GemmBenchOptions,
    QuantBenchOptions,
};
use pagesift_gpu::Gpu;

use crate::{fail, report, stdout_failed, EXIT_USAGE};

/// One comparison `bench` runs.
struct Kind {
    name: &'static str,
    /// The flags, as the usage text shows them.
    usage: &'static str,
    /// Parses the flags (after the kind's name) and runs the comparison.
    run: fn(&[String]) -> ExitCode,
}

/// Every kind, in the order of the usage text.
const KINDS: &[Kind] = &[
    Kind {
        name: "gemm",
        usage: "gemm [--shapes MxNxK[:KN][,..]] [--modes F32,Tf32x3,Tf32,Bf16,F16]",
        run: gemm,
    },
    Kind {
        name: "quant",
        usage: "quant [--formats Q4_0,Q8_0,Q4_K,BF16,F16] [--shapes N_OUTxN_IN[,..]] [--tokens 1,2,4,8,16,512]",
        run: quant,
    },
    Kind {
        name: "engine",
        usage: "engine [--format Q4_0] [--shapes N_OUTxN_IN[,..]] [--tokens 1,4]",
        run: engine,
    },
];

/// Runs `bench` with the arguments after it; returns the exit code.
pub fn run(args: &[String]) -> ExitCode {
    let Some(name) = args.first() else {
        return fail(EXIT_USAGE, &usage());
    };
    if matches!(name.as_str(), "help" | "-h" | "--help") {
        outln!("{}", usage());
        return ExitCode::SUCCESS;
    }
    match KINDS.iter().find(|k| k.name == name) {
        Some(kind) => (kind.run)(&args[1..]),
        None => fail(
            EXIT_USAGE,
            &format!("bench: unknown kind `{name}`; {}", usage()),
        ),
    }
}

fn usage() -> String {
    let kinds: Vec<String> = KINDS
        .iter()
        .map(|k| format!("pagesift-gpu bench {}", k.usage))
        .collect();
    format!("usage: {}", kinds.join(" | "))
}

/// The `--name VALUE` / `--name=VALUE` pairs of `args`, each name one of `known`.
fn flags<'a>(args: &'a [String], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (arg.as_str(), None),
        };
        if !known.contains(&name) {
            return Err(format!("unknown argument `{arg}`"));
        }
        let value = match value {
            Some(v) => v,
            None => it
                .next()
                .map(String::as_str)
                .ok_or_else(|| format!("{name} needs a value"))?,
        };
        out.push((name, value));
    }
    Ok(out)
}

/// The options of `bench gemm` from its flags (a flag given twice: the last one;
/// `--precisions` is the older name of `--modes`).
fn gemm_options(args: &[String]) -> Result<GemmBenchOptions, String> {
    let mut opts = GemmBenchOptions::default();
    for (name, value) in flags(args, &["--shapes", "--modes", "--precisions"])? {
        match name {
            "--shapes" => {
                opts.shapes = Some(parse_shapes(value).map_err(|e| format!("{name}: {e}"))?)
            }
            _ => opts.modes = parse_modes(value).map_err(|e| format!("{name}: {e}"))?,
        }
    }
    Ok(opts)
}

/// `bench gemm`: our GEMM against cuBLAS ([`pagesift_gpu::bench::gemm`]).
fn gemm(args: &[String]) -> ExitCode {
    let opts = match gemm_options(args) {
        Ok(opts) => opts,
        Err(e) => return fail(EXIT_USAGE, &format!("bench gemm: {e}; {}", usage())),
    };
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            outln!("bench gemm: no device: {e}");
            return ExitCode::SUCCESS;
        }
    };
    match run_gemm(&gpu, &opts, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Write(e)) => ExitCode::from(stdout_failed(&e)),
        Err(BenchError::Gpu(e)) => report(Err(e)),
    }
}

/// The options of `bench quant` from its flags (a flag given twice: the last one).
fn quant_options(args: &[String]) -> Result<QuantBenchOptions, String> {
    let mut opts = QuantBenchOptions::default();
    for (name, value) in flags(args, &["--formats", "--shapes", "--tokens"])? {
        let bad = |e: String| format!("{name}: {e}");
        match name {
            "--formats" => opts.formats = parse_formats(value).map_err(bad)?,
            "--shapes" => opts.shapes = parse_quant_shapes(value).map_err(bad)?,
            _ => opts.tokens = parse_tokens(value).map_err(bad)?,
        }
    }
    Ok(opts)
}

/// `bench quant`: the kernels over quantized weights against the copy bandwidth and cuBLAS
/// ([`pagesift_gpu::bench::quant`]).
fn quant(args: &[String]) -> ExitCode {
    let opts = match quant_options(args) {
        Ok(opts) => opts,
        Err(e) => return fail(EXIT_USAGE, &format!("bench quant: {e}; {}", usage())),
    };
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            outln!("bench quant: no device: {e}");
            return ExitCode::SUCCESS;
        }
    };
    match run_quant(&gpu, &opts, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Write(e)) => ExitCode::from(stdout_failed(&e)),
        Err(BenchError::Gpu(e)) => report(Err(e)),
    }
}

/// The options of `bench engine` from its flags (a flag given twice: the last one).
fn engine_options(args: &[String]) -> Result<EngineBenchOptions, String> {
    let mut opts = EngineBenchOptions::default();
    for (name, value) in flags(args, &["--format", "--shapes", "--tokens"])? {
        let bad = |e: String| format!("{name}: {e}");
        match name {
            "--format" => match parse_formats(value).map_err(bad)?.as_slice() {
                [format] => opts.format = *format,
                _ => return Err(format!("{name}: one format, not `{value}`")),
            },
            "--shapes" => opts.shapes = parse_quant_shapes(value).map_err(bad)?,
            _ => opts.tokens = parse_tokens(value).map_err(bad)?,
        }
    }
    Ok(opts)
}

/// `bench engine`: the engine adapter's call against the same work without it
/// ([`pagesift_gpu::bench::engine`]).
fn engine(args: &[String]) -> ExitCode {
    let opts = match engine_options(args) {
        Ok(opts) => opts,
        Err(e) => return fail(EXIT_USAGE, &format!("bench engine: {e}; {}", usage())),
    };
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            outln!("bench engine: no device: {e}");
            return ExitCode::SUCCESS;
        }
    };
    match run_engine(&gpu, &opts, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Write(e)) => ExitCode::from(stdout_failed(&e)),
        Err(BenchError::Gpu(e)) => report(Err(e)),
    }
}

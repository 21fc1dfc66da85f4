//! The configuration of the emulated device, from code or from the environment.

use super::ptx;
use crate::error::{self, Error, Result};

/// What the emulated device looks like and how it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorConfig {
    /// The compute capability it reports (default (8, 0)); modules targeting a higher `sm_XY`
    /// fail to load, as on a real device.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors it reports (default 4).
    pub sm_count: u32,
    /// Threads resident on one multiprocessor (default 2048): with the shared memory, what
    /// its occupancy answers come from.
    pub max_threads_per_sm: u32,
    /// Shared memory of one multiprocessor, in bytes (default 228 KiB).
    pub shared_per_sm: u32,
    /// Shared memory per block without opting in, in bytes (default 48 KiB).
    pub max_shared_per_block: u32,
    /// Shared memory per block after opting in, in bytes (default 163 KiB).
    pub max_shared_per_block_optin: u32,
    /// Device memory capacity in bytes (default 1 GiB; `PAGESIFT_EMU_MEMORY`).
    pub memory_capacity: usize,
    /// Host threads that blocks are spread over (default: the available parallelism;
    /// `PAGESIFT_EMU_THREADS`).
    pub threads: usize,
    /// The device name it reports.
    pub name: String,
    /// The most instructions one thread may execute between two synchronization points before
    /// the launch fails as an endless loop (default 2^32).
    pub max_thread_instructions: u64,
    /// The most threads (grid blocks x block threads) one launch may have; a larger launch is
    /// refused with [`Error::Launch`] (default 2^32; `PAGESIFT_EMU_MAX_LAUNCH_THREADS`).
    pub max_launch_threads: u64,
    /// Seeds the order in which streams with ready work are interleaved at a synchronization
    /// point (default a fixed value, so runs are reproducible; `PAGESIFT_EMU_SEED`).
    pub seed: u64,
}

/// The default [`EmulatorConfig::seed`].
pub const DEFAULT_SEED: u64 = 0x5eed_5eed;

impl Default for EmulatorConfig {
    fn default() -> EmulatorConfig {
        EmulatorConfig {
            compute_capability: (8, 0),
            sm_count: 4,
            max_threads_per_sm: 2048,
            shared_per_sm: 228 * 1024,
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 163 * 1024,
            memory_capacity: 1 << 30,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            name: "pagesift emulated device".to_string(),
            max_thread_instructions: 1 << 32,
            max_launch_threads: 1 << 32,
            seed: DEFAULT_SEED,
        }
    }
}

/// Parses a byte count such as `1073741824`, `512M`, `2GiB`, `64k`.
pub(super) fn parse_bytes(s: &str) -> Option<usize> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().ok()?;
    let mul: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mul)
}

impl EmulatorConfig {
    /// The default configuration with `PAGESIFT_EMU_MEMORY` (bytes, with an optional `K`/`M`/`G`
    /// suffix), `PAGESIFT_EMU_THREADS`, `PAGESIFT_EMU_CC` (a compute capability such as `9.0`),
    /// `PAGESIFT_EMU_SEED` and `PAGESIFT_EMU_MAX_LAUNCH_THREADS` (integers) applied.
    pub fn from_env() -> Result<EmulatorConfig> {
        EmulatorConfig::from_vars(|name| std::env::var(name).ok())
    }

    /// [`EmulatorConfig::from_env`] with the variables looked up by `var` (testable without
    /// touching the process environment).
    pub(super) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<EmulatorConfig> {
        let mut c = EmulatorConfig::default();
        if let Some(v) = var("PAGESIFT_EMU_MEMORY") {
            c.memory_capacity = parse_bytes(&v).ok_or_else(|| {
                Error::from(error::InvalidArgument {
                    op: "PAGESIFT_EMU_MEMORY",
                    message: format!("`{v}` is not a byte count (e.g. 1073741824, 512M, 2G)"),
                })
            })?;
        }
        if let Some(v) = var("PAGESIFT_EMU_THREADS") {
            c.threads = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::from(error::InvalidArgument {
                    op: "PAGESIFT_EMU_THREADS",
                    message: format!("`{v}` is not a positive thread count"),
                })
            })?;
        }
        let number = |var: &'static str, v: &str| {
            ptx::parse_int(v.trim())
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| {
                    Error::from(error::InvalidArgument {
                        op: var,
                        message: format!("`{v}` is not a non-negative integer"),
                    })
                })
        };
        if let Some(v) = var("PAGESIFT_EMU_SEED") {
            c.seed = number("PAGESIFT_EMU_SEED", &v)?;
        }
        if let Some(v) = var("PAGESIFT_EMU_MAX_LAUNCH_THREADS") {
            c.max_launch_threads = number("PAGESIFT_EMU_MAX_LAUNCH_THREADS", &v)?;
        }
        if let Some(v) = var("PAGESIFT_EMU_CC") {
            c.compute_capability = parse_cc(&v).ok_or_else(|| {
                Error::from(error::InvalidArgument {
                    op: "PAGESIFT_EMU_CC",
                    message: format!("`{v}` is not a compute capability (e.g. 8.0, 9.0, 86)"),
                })
            })?;
        }
        Ok(c)
    }
}

/// Parses a compute capability written `9.0` or `90`.
pub(super) fn parse_cc(s: &str) -> Option<(u32, u32)> {
    let s = s.trim();
    let (major, minor) = match s.split_once('.') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None if s.len() >= 2 && s.bytes().all(|b| b.is_ascii_digit()) => (
            s[..s.len() - 1].parse().ok()?,
            s[s.len() - 1..].parse().ok()?,
        ),
        None => return None,
    };
    (major >= 1 && minor < 10).then_some((major, minor))
}

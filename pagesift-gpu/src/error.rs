//! Errors of the runtime: one [`DriverError`] for a failed driver call, and [`Error`] with the
//! context a caller needs (which kernel, which shape, how many bytes).

use std::fmt;

/// A driver call that returned something other than success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverError {
    /// The driver entry point, e.g. `cuMemAlloc_v2`.
    pub call: &'static str,
    /// The numeric `CUresult`.
    pub code: i32,
    /// The enum name of the code, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
    pub name: String,
    /// The driver's own description of the code.
    pub message: String,
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed: {} ({}): {}",
            self.call, self.name, self.code, self.message
        )
    }
}

impl std::error::Error for DriverError {}

/// Everything that can go wrong in pagesift-gpu.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver library could not be opened.
    #[error("no NVIDIA driver: could not load {tried} ({reason}); install the NVIDIA driver (it provides libcuda.so.1) or point PAGESIFT_GPU_LIB at it")]
    DriverNotFound {
        /// The library names or paths that were tried, in order.
        tried: String,
        /// What the dynamic loader said about the last one.
        reason: String,
    },
    /// The library loaded but lacks a function every supported driver has.
    #[error("{library} is not a usable NVIDIA driver: it lacks the required function {symbol}")]
    MissingSymbol {
        /// The library that was loaded.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// A driver call failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// A device allocation failed for lack of memory.
    #[error("out of device memory: could not allocate {bytes} bytes")]
    OutOfMemory {
        /// The size of the allocation that failed.
        bytes: usize,
    },
    /// No device with this ordinal.
    #[error("no GPU with ordinal {ordinal}: {count} device(s) present")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The JIT compiler of the driver rejected a kernel's PTX.
    #[error("loading kernel `{kernel}` failed: {source}\nJIT log:\n{jit_log}{}", ptx_note(.ptx_path))]
    ModuleLoad {
        /// The kernel variant (entry name).
        kernel: String,
        /// The driver's error.
        source: DriverError,
        /// The JIT compiler's error and info log.
        jit_log: String,
        /// Where the PTX was written for inspection, if it could be.
        ptx_path: Option<std::path::PathBuf>,
    },
    /// A kernel variant cannot run on this device or driver.
    #[error("kernel `{kernel}` cannot run here: {reason}")]
    Unsupported {
        /// The kernel variant (entry name), or the feature.
        kernel: String,
        /// Why not, and what would be needed.
        reason: String,
    },
    /// Two lengths that must agree do not.
    #[error("length mismatch in {what}: expected {expected}, got {actual}")]
    LengthMismatch {
        /// What was being compared (e.g. `copy_from_host`).
        what: String,
        /// The length required.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// An operation was called with an invalid shape or argument.
    #[error("invalid argument to {op}: {message}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What was wrong.
        message: String,
    },
    /// A launch configuration outside the device's limits.
    #[error("invalid launch of `{kernel}`: {message}")]
    Launch {
        /// The kernel variant.
        kernel: String,
        /// What was wrong.
        message: String,
    },
    /// An object (buffer, event, stream, function, pinned buffer) of one device was passed to
    /// another device's operation.
    #[error("device mismatch in {what}: the {object} belongs to another device or context")]
    DeviceMismatch {
        /// Where it was found.
        what: String,
        /// What kind of object was at fault: `buffer`, `event`, `stream`, `function` or
        /// `pinned buffer`.
        object: &'static str,
    },
    /// An environment variable (or other setting) holds a value the runtime cannot use.
    #[error("invalid configuration: {variable}={value:?}: {message}")]
    Config {
        /// The variable, e.g. `PAGESIFT_GPU_DEVICE` or `PAGESIFT_GPU_LIB`.
        variable: &'static str,
        /// The value found.
        value: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A kernel failed while running on the emulated device.
    #[error("emulated kernel `{kernel}` failed: {message}")]
    Emulator {
        /// The kernel variant.
        kernel: String,
        /// What went wrong, where (block, thread, PTX line).
        message: String,
    },
    /// A bounds-checked kernel accessed a slice or shared array out of bounds, or made a vector
    /// access at an address that is not a multiple of its size (`misaligned`). The access was
    /// skipped (a load gave 0) and the kernel ran on; reported, for the first such access on a
    /// stream since the last report, where the host next waits for that stream (its
    /// `synchronize`, the device's, a host read of a buffer the kernel wrote; see
    /// `driver/fault.rs`).
    #[error("kernel `{kernel}` accessed `{param}` at element {index} {}; the access was skipped", fault_text(*.elements, *.len, *.misaligned, *.bytes))]
    KernelFault {
        /// The kernel variant's display name, e.g. `act_f32[ACT=Relu]`.
        kernel: String,
        /// The kernel parameter, or the shared array, that was accessed.
        param: String,
        /// The first element index of the access (a negative signed index as its two's
        /// complement).
        index: u64,
        /// The length of the slice or shared array, in elements.
        len: u64,
        /// The elements the access moves: 1, or N of a vector access.
        elements: u32,
        /// The access was in bounds but its address was not a multiple of its size (a vector
        /// access into a view that starts at an odd element, say); on a GPU it would have
        /// raised an exception ending the CUDA context.
        misaligned: bool,
        /// The bytes of a misaligned access (16 for an `f32` `load4`); 0 for one out of
        /// bounds.
        bytes: u32,
    },
    /// Operations failed where they could not report (a free or destroy in `Drop`); returned by
    /// [`crate::Gpu::synchronize`] after it synchronized, and listed one by one by
    /// [`crate::Gpu::take_deferred_errors`].
    #[error("{} deferred error(s) from drops on this device: {}", .0.len(), list(.0))]
    Deferred(Vec<Error>),
}

/// The middle of a [`Error::KernelFault`] message.
fn fault_text(elements: u32, len: u64, misaligned: bool, bytes: u32) -> String {
    let plural = if elements == 1 { "" } else { "s" };
    if misaligned {
        format!("in a misaligned {bytes}-byte access ({elements} elements; its address not a multiple of {bytes})")
    } else {
        format!("({elements} element{plural}) but its length is {len}")
    }
}

fn list(errors: &[Error]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn ptx_note(path: &Option<std::path::PathBuf>) -> String {
    match path {
        Some(p) => format!("\nPTX written to {}", p.display()),
        None => String::new(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

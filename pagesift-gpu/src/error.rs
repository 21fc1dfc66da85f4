//! Errors of the runtime: one [`DriverError`] for a failed driver call, and [`Error`] with the
//! context a caller needs (which kernel, which shape, how many bytes).
//!
//! [`Error`] is three words (24 bytes on 64-bit targets), so a [`Result`] stays cheap to return
//! on the success path: a variant whose context is larger than two words holds it in a [`Box`]
//! of a public struct of this module, named as the variant, with the same fields. Match such a
//! variant by binding the box and reading its fields:
//!
//! ```
//! use pagesift_gpu::Error;
//!
//! fn describe(e: &Error) -> String {
//!     match e {
//!         Error::KernelFault(f) => format!("{} out of bounds at {}", f.param, f.index),
//!         Error::LengthMismatch(m) if m.expected > m.actual => format!("{} too short", m.what),
//!         Error::OutOfMemory { bytes } => format!("{bytes} bytes"),
//!         other => other.to_string(),
//!     }
//! }
//! # let _ = describe;
//! ```
//!
//! Each struct converts into its variant with [`From`], so `?` on a `Result` of one of them, or
//! `.into()`, builds the [`Error`]:
//!
//! ```
//! use pagesift_gpu::error::InvalidArgument;
//!
//! fn checked_half(n: u32) -> pagesift_gpu::Result<u32> {
//!     if n % 2 == 1 {
//!         return Err(InvalidArgument { op: "checked_half", message: format!("{n} is odd") }.into());
//!     }
//!     Ok(n / 2)
//! }
//! assert_eq!(checked_half(4).unwrap(), 2);
//! assert_eq!(
//!     checked_half(3).unwrap_err().to_string(),
//!     "invalid argument to checked_half: 3 is odd"
//! );
//! ```

use std::fmt;
use std::path::PathBuf;

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
///
/// Three words: the variants with more context hold it boxed (see the [module](self) docs).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver library could not be opened.
    #[error(transparent)]
    DriverNotFound(Box<DriverNotFound>),
    /// The library loaded but lacks a function every supported driver has.
    #[error(transparent)]
    MissingSymbol(Box<MissingSymbol>),
    /// A driver call failed.
    #[error(transparent)]
    Driver(Box<DriverError>),
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
    #[error(transparent)]
    ModuleLoad(Box<ModuleLoad>),
    /// A kernel variant cannot run on this device or driver.
    #[error(transparent)]
    Unsupported(Box<Unsupported>),
    /// Two lengths that must agree do not.
    #[error(transparent)]
    LengthMismatch(Box<LengthMismatch>),
    /// An operation was called with an invalid shape or argument.
    #[error(transparent)]
    InvalidArgument(Box<InvalidArgument>),
    /// A launch configuration outside the device's limits.
    #[error(transparent)]
    Launch(Box<Launch>),
    /// An object (buffer, event, stream, function, pinned buffer) of one device was passed to
    /// another device's operation.
    #[error(transparent)]
    DeviceMismatch(Box<DeviceMismatch>),
    /// An environment variable (or other setting) holds a value the runtime cannot use.
    #[error(transparent)]
    Config(Box<Config>),
    /// A kernel failed while running on the emulated device.
    #[error(transparent)]
    Emulator(Box<Emulator>),
    /// A bounds-checked kernel accessed a slice or shared array out of bounds, or made a vector
    /// access at an address that is not a multiple of its size (see [`KernelFault`]).
    #[error(transparent)]
    KernelFault(Box<KernelFault>),
    /// A file could not be read, written or renamed (a cache file of [`crate::tune`]).
    #[error(transparent)]
    Io(Box<Io>),
    /// Operations failed where they could not report (a free or destroy in `Drop`); returned by
    /// [`crate::Gpu::synchronize`] after it synchronized, and listed one by one by
    /// [`crate::Gpu::take_deferred_errors`].
    #[error("{} deferred error(s) from drops on this device: {}", .0.len(), list(.0))]
    Deferred(Box<[Error]>),
}

/// The context of [`Error::DriverNotFound`]: the driver library could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no NVIDIA driver: could not load {tried} ({reason}); install the NVIDIA driver (it provides libcuda.so.1) or point PAGESIFT_GPU_LIB at it")]
pub struct DriverNotFound {
    /// The library names or paths that were tried, in order.
    pub tried: String,
    /// What the dynamic loader said about the last one.
    pub reason: String,
}

/// The context of [`Error::MissingSymbol`]: the library loaded but lacks a function every
/// supported driver has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{library} is not a usable NVIDIA driver: it lacks the required function {symbol}")]
pub struct MissingSymbol {
    /// The library that was loaded.
    pub library: String,
    /// The missing symbol.
    pub symbol: &'static str,
}

/// The context of [`Error::ModuleLoad`]: the JIT compiler of the driver rejected a kernel's
/// PTX.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("loading kernel `{kernel}` failed: {source}\nJIT log:\n{jit_log}{}", ptx_note(.ptx_path))]
pub struct ModuleLoad {
    /// The kernel variant (entry name).
    pub kernel: String,
    /// The driver's error.
    pub source: DriverError,
    /// The JIT compiler's error and info log.
    pub jit_log: String,
    /// Where the PTX was written for inspection, if it could be.
    pub ptx_path: Option<PathBuf>,
}

/// The context of [`Error::Unsupported`]: a kernel variant cannot run on this device or driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` cannot run here: {reason}")]
pub struct Unsupported {
    /// The kernel variant (entry name), or the feature.
    pub kernel: String,
    /// Why not, and what would be needed.
    pub reason: String,
}

/// The context of [`Error::LengthMismatch`]: two lengths that must agree do not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("length mismatch in {what}: expected {expected}, got {actual}")]
pub struct LengthMismatch {
    /// What was being compared (e.g. `copy_from_host`).
    pub what: String,
    /// The length required.
    pub expected: usize,
    /// The length given.
    pub actual: usize,
}

/// The context of [`Error::InvalidArgument`]: an operation was called with an invalid shape or
/// argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid argument to {op}: {message}")]
pub struct InvalidArgument {
    /// The operation.
    pub op: &'static str,
    /// What was wrong.
    pub message: String,
}

/// The context of [`Error::Launch`]: a launch configuration outside the device's limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid launch of `{kernel}`: {message}")]
pub struct Launch {
    /// The kernel variant.
    pub kernel: String,
    /// What was wrong.
    pub message: String,
}

/// The context of [`Error::DeviceMismatch`]: an object (buffer, event, stream, function, pinned
/// buffer) of one device was passed to another device's operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device mismatch in {what}: the {object} belongs to another device or context")]
pub struct DeviceMismatch {
    /// Where it was found.
    pub what: String,
    /// What kind of object was at fault: `buffer`, `event`, `stream`, `function` or
    /// `pinned buffer`.
    pub object: &'static str,
}

/// The context of [`Error::Config`]: an environment variable (or other setting) holds a value
/// the runtime cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {variable}={value:?}: {message}")]
pub struct Config {
    /// The variable, e.g. `PAGESIFT_GPU_DEVICE` or `PAGESIFT_GPU_LIB`.
    pub variable: &'static str,
    /// The value found.
    pub value: String,
    /// What is wrong and what would be accepted.
    pub message: String,
}

/// The context of [`Error::Emulator`]: a kernel failed while running on the emulated device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("emulated kernel `{kernel}` failed: {message}")]
pub struct Emulator {
    /// The kernel variant.
    pub kernel: String,
    /// What went wrong, where (block, thread, PTX line).
    pub message: String,
}

/// The context of [`Error::KernelFault`]: a bounds-checked kernel accessed a slice or shared
/// array out of bounds, or made a vector access at an address that is not a multiple of its
/// size (`misaligned`). The access was skipped (a load gave 0) and the kernel ran on; reported,
/// for the first such access on a stream since the last report, where the host next waits for
/// that stream (its `synchronize`, the device's, a host read of a buffer the kernel wrote; see
/// `driver/fault.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` accessed `{param}` at element {index} {}; the access was skipped", fault_text(*.elements, *.len, *.misaligned, *.bytes))]
pub struct KernelFault {
    /// The kernel variant's display name, e.g. `act_f32[ACT=Relu]`.
    pub kernel: String,
    /// The kernel parameter, or the shared array, that was accessed.
    pub param: String,
    /// The first element index of the access (a negative signed index as its two's
    /// complement).
    pub index: u64,
    /// The length of the slice or shared array, in elements.
    pub len: u64,
    /// The elements the access moves: 1, or N of a vector access.
    pub elements: u32,
    /// The access was in bounds but its address was not a multiple of its size (a vector
    /// access into a view that starts at an odd element, say); on a GPU it would have raised
    /// an exception ending the CUDA context.
    pub misaligned: bool,
    /// The bytes of a misaligned access (16 for an `f32` `load4`); 0 for one out of bounds.
    pub bytes: u32,
}

/// The context of [`Error::Io`]: a file could not be read, written or renamed.
#[derive(Debug, thiserror::Error)]
#[error("{op} could not {action} {}: {source}", .path.display())]
pub struct Io {
    /// The operation, e.g. `tune::TuneStore::insert`.
    pub op: &'static str,
    /// What it was doing to `path`: `create the directory`, `write`, `rename into place`.
    pub action: &'static str,
    /// The file or directory the failing call acted on.
    pub path: PathBuf,
    /// The operating system's error.
    pub source: std::io::Error,
}

/// `From<Context> for Error` for each boxed context, so `?` and `.into()` box it.
macro_rules! boxed_from {
    ($($variant:ident($context:ty)),* $(,)?) => {
        $(
            impl From<$context> for Error {
                fn from(context: $context) -> Self {
                    Error::$variant(Box::new(context))
                }
            }
        )*
    };
}

boxed_from! {
    DriverNotFound(DriverNotFound),
    MissingSymbol(MissingSymbol),
    Driver(DriverError),
    ModuleLoad(ModuleLoad),
    Unsupported(Unsupported),
    LengthMismatch(LengthMismatch),
    InvalidArgument(InvalidArgument),
    Launch(Launch),
    DeviceMismatch(DeviceMismatch),
    Config(Config),
    Emulator(Emulator),
    KernelFault(KernelFault),
    Io(Io),
}

/// The middle of a [`KernelFault`] message.
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

fn ptx_note(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("\nPTX written to {}", p.display()),
        None => String::new(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;
    use std::mem::size_of;

    /// A tag word and two words of payload: the largest inline variant (`NoSuchDevice`, two
    /// `usize`s) and `Deferred`'s boxed slice are two words; every other context is one `Box`.
    /// `Result<()>` keeps `Ok` in a spare tag value. (24 bytes on 64-bit targets.)
    #[test]
    fn error_and_result_are_three_words() {
        let words = 3 * size_of::<usize>();
        assert!(size_of::<Error>() <= words, "{}", size_of::<Error>());
        assert!(
            size_of::<Result<()>>() <= words,
            "{}",
            size_of::<Result<()>>()
        );
    }

    #[test]
    fn boxed_variants_read_as_before() {
        let driver = DriverError {
            call: "cuModuleLoadDataEx",
            code: 218,
            name: "CUDA_ERROR_INVALID_PTX".into(),
            message: "a PTX JIT compilation failed".into(),
        };
        let e: Error = driver.clone().into();
        assert!(matches!(&e, Error::Driver(d) if **d == driver));
        assert_eq!(
            e.to_string(),
            "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed"
        );

        let e = Error::from(ModuleLoad {
            kernel: "k".into(),
            source: driver.clone(),
            jit_log: "line 3: error".into(),
            ptx_path: Some("/tmp/k.ptx".into()),
        });
        assert_eq!(
            e.to_string(),
            "loading kernel `k` failed: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed\nJIT log:\nline 3: error\nPTX written to /tmp/k.ptx"
        );
        let source = e.source().and_then(|s| s.downcast_ref::<DriverError>());
        assert_eq!(source, Some(&driver), "the driver's error stays the source");

        let e = Error::from(Config {
            variable: "PAGESIFT_GPU_DEVICE",
            value: "tpu".into(),
            message: "expected `cuda` or `emulated`".into(),
        });
        assert_eq!(
            e.to_string(),
            "invalid configuration: PAGESIFT_GPU_DEVICE=\"tpu\": expected `cuda` or `emulated`"
        );

        let e = Error::Deferred(Box::new([
            Error::OutOfMemory { bytes: 8 },
            Error::from(LengthMismatch {
                what: "copy".into(),
                expected: 2,
                actual: 1,
            }),
        ]));
        assert!(matches!(&e, Error::Deferred(errors) if errors.len() == 2));
        assert_eq!(
            e.to_string(),
            "2 deferred error(s) from drops on this device: out of device memory: could not allocate 8 bytes; length mismatch in copy: expected 2, got 1"
        );
    }
}

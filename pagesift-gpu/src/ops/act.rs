//! Activations: `y = act(x + bias) + residual`, element-wise, on the GPU.

use crate::error;
use std::mem::size_of;

use half::{bf16, f16};

use crate::{
    DevicePtr, DeviceRead, DeviceRepr, DeviceSlice, DeviceWrite, Error, KernelVariant,
    LaunchConfig, Result, Stream,
};

/// An element-wise activation function.
///
/// The formulas below define the semantics; [`crate::cpu::act`] evaluates them in f64 and every
/// GPU kernel is tested against it. `x` is the (f32) input after the optional bias add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    /// `x`.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`.
    Relu6,
    /// `x` for `x >= 0`, `slope * x` otherwise; `slope` is a runtime parameter (see
    /// [`ActArgs::slope`], 0.01 by default).
    LeakyRelu,
    /// Gelu with the exact normal distribution function:
    /// `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`.
    Gelu,
    /// Gelu with the tanh approximation:
    /// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
    GeluTanh,
    /// Silu (swish): `x * sigmoid(x) = x / (1 + exp(-x))`.
    Silu,
    /// The logistic function: `1 / (1 + exp(-x))`.
    Sigmoid,
    /// The hyperbolic tangent: `tanh(x)`.
    Tanh,
    /// `x * min(max(x + 3, 0), 6) / 6`.
    HardSwish,
    /// `min(max(x + 3, 0), 6) / 6`.
    HardSigmoid,
}

impl Act {
    /// Every activation, in declaration order.
    pub const ALL: [Act; 11] = [
        Act::Identity,
        Act::Relu,
        Act::Relu6,
        Act::LeakyRelu,
        Act::Gelu,
        Act::GeluTanh,
        Act::Silu,
        Act::Sigmoid,
        Act::Tanh,
        Act::HardSwish,
        Act::HardSigmoid,
    ];

    /// The lower-case name used in listings and on the command line, e.g. `gelu_tanh`.
    pub fn name(self) -> &'static str {
        match self {
            Act::Identity => "identity",
            Act::Relu => "relu",
            Act::Relu6 => "relu6",
            Act::LeakyRelu => "leaky_relu",
            Act::Gelu => "gelu",
            Act::GeluTanh => "gelu_tanh",
            Act::Silu => "silu",
            Act::Sigmoid => "sigmoid",
            Act::Tanh => "tanh",
            Act::HardSwish => "hardswish",
            Act::HardSigmoid => "hardsigmoid",
        }
    }
}

impl Act {
    /// The enum variant's name as the kernel variants record it, e.g. `GeluTanh`.
    fn variant_name(self) -> &'static str {
        match self {
            Act::Identity => "Identity",
            Act::Relu => "Relu",
            Act::Relu6 => "Relu6",
            Act::LeakyRelu => "LeakyRelu",
            Act::Gelu => "Gelu",
            Act::GeluTanh => "GeluTanh",
            Act::Silu => "Silu",
            Act::Sigmoid => "Sigmoid",
            Act::Tanh => "Tanh",
            Act::HardSwish => "HardSwish",
            Act::HardSigmoid => "HardSigmoid",
        }
    }
}

impl std::fmt::Display for Act {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Act {
    type Err = crate::Error;

    /// Parses a name as [`Act::name`] prints it.
    fn from_str(s: &str) -> crate::Result<Act> {
        Act::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            crate::Error::from(crate::error::InvalidArgument {
                op: "Act::from_str",
                message: format!(
                    "unknown activation `{s}`; expected one of {}",
                    Act::ALL.map(Act::name).join(", ")
                ),
            })
        })
    }
}

/// The storage types activations run on: f32, f16 and bf16 (computed in f32, rounded once on
/// store). Sealed.
pub trait ActElement: DeviceRepr + private::Sealed {
    /// The type's name, e.g. `f16`.
    const NAME: &'static str;
    /// Widens to f32 (exact).
    fn to_f32(self) -> f32;
    /// Rounds an f32 to this type (round to nearest even).
    fn from_f32(v: f32) -> Self;
    /// The compiled activation kernel variants of this type.
    fn variants() -> &'static [KernelVariant] {
        <Self as private::Sealed>::kernel_variants()
    }
}

mod private {
    use super::{ActArgs, Geometry};
    use crate::{DeviceRead, DeviceWrite, KernelVariant, Result, Stream};

    /// Seals [`super::ActElement`] and carries the per-type kernel plumbing.
    pub trait Sealed: crate::DeviceRepr {
        /// The variants of this type's kernel.
        fn kernel_variants() -> &'static [KernelVariant];
        /// The variants of this type's in-place kernel.
        fn inplace_variants() -> &'static [KernelVariant];
        /// Launches this type's in-place kernel through its typed wrapper.
        fn launch_inplace_kernel(
            stream: &Stream,
            args: &ActArgs<'_, Self>,
            geo: &Geometry,
            data: &mut impl DeviceWrite<Self>,
        ) -> Result<()>;
        /// Launches this type's kernel through its typed wrapper (out of place).
        fn launch_kernel(
            stream: &Stream,
            args: &ActArgs<'_, Self>,
            geo: &Geometry,
            input: &impl DeviceRead<Self>,
            output: &mut impl DeviceWrite<Self>,
        ) -> Result<()>;
    }
}

/// The kernel variant of `act` among `variants` (the bias and residual are runtime flags).
fn find_variant(variants: &'static [KernelVariant], act: Act) -> Result<&'static KernelVariant> {
    variants
        .iter()
        .find(|v| v.consts.contains(&("ACT", act.variant_name())))
        .ok_or_else(|| {
            let kernel = variants.first().map_or("act", |v| v.kernel);
            crate::__private::variant_not_compiled(kernel, format!("ACT={}", act.variant_name()))
        })
}

macro_rules! act_element {
    ($t:ty, $name:literal, $kernel:ident, $inplace:ident, |$v:ident| $to:expr, |$f:ident| $from:expr) => {
        impl ActElement for $t {
            const NAME: &'static str = $name;
            fn to_f32(self) -> f32 {
                let $v = self;
                $to
            }
            fn from_f32($f: f32) -> $t {
                $from
            }
        }

        impl private::Sealed for $t {
            fn kernel_variants() -> &'static [KernelVariant] {
                crate::kernels::act::$kernel::VARIANTS
            }

            fn inplace_variants() -> &'static [KernelVariant] {
                crate::kernels::act::$inplace::VARIANTS
            }

            fn launch_inplace_kernel(
                stream: &Stream,
                args: &ActArgs<'_, $t>,
                geo: &Geometry,
                data: &mut impl DeviceWrite<$t>,
            ) -> Result<()> {
                let n = data.len() as u64;
                let k = KernelScalars::new(args, geo);
                // An absent operand is an empty buffer (no allocation): the flags tell the
                // kernel not to read it.
                let none = crate::DeviceBuffer::<$t>::alloc(stream.gpu(), 0)?;
                let bias = args.bias.as_ref().map_or(none.slice(..)?, |b| *b);
                let res = args.residual.as_ref().map_or(none.slice(..)?, |r| *r);
                crate::kernels::act::$inplace::launch(
                    stream, geo.cfg, args.act, &bias, &res, data, n, geo.head, geo.nvec, k.cols,
                    k.vlast, k.clast, k.magic, k.shift, k.flags, args.slope,
                )
            }

            fn launch_kernel(
                stream: &Stream,
                args: &ActArgs<'_, $t>,
                geo: &Geometry,
                input: &impl DeviceRead<$t>,
                output: &mut impl DeviceWrite<$t>,
            ) -> Result<()> {
                let n = input.len() as u64;
                let k = KernelScalars::new(args, geo);
                // Absent operands are passed as the input: the flags tell the kernel not to
                // read them.
                use crate::kernels::act::$kernel::launch;
                match (&args.bias, &args.residual) {
                    (Some(b), Some(r)) => launch(
                        stream, geo.cfg, args.act, input, b, r, output, n, geo.head, geo.nvec,
                        k.cols, k.vlast, k.clast, k.magic, k.shift, k.flags, args.slope,
                    ),
                    (Some(b), None) => launch(
                        stream, geo.cfg, args.act, input, b, input, output, n, geo.head, geo.nvec,
                        k.cols, k.vlast, k.clast, k.magic, k.shift, k.flags, args.slope,
                    ),
                    (None, Some(r)) => launch(
                        stream, geo.cfg, args.act, input, input, r, output, n, geo.head, geo.nvec,
                        k.cols, k.vlast, k.clast, k.magic, k.shift, k.flags, args.slope,
                    ),
                    (None, None) => launch(
                        stream, geo.cfg, args.act, input, input, input, output, n, geo.head,
                        geo.nvec, k.cols, k.vlast, k.clast, k.magic, k.shift, k.flags, args.slope,
                    ),
                }
            }
        }
    };
}

/// The kernels' scalar parameters that describe the bias and residual.
struct KernelScalars {
    /// `cols` (1 without a bias).
    cols: u32,
    /// The first element of the last whole vector, `head + lanes * nvec - lanes` (wrapping).
    vlast: u32,
    /// `cols` less the lanes of a vector (wrapping): the last first column of a vector bias
    /// read.
    clast: u32,
    /// The column divider (see [`column_divider`]).
    magic: u32,
    shift: u32,
    /// [`crate::kernels::act::FLAG_BIAS`] | `FLAG_RES` | `FLAG_BIAS_VEC`.
    flags: u32,
}

impl KernelScalars {
    fn new<T: DeviceRepr>(args: &ActArgs<'_, T>, geo: &Geometry) -> KernelScalars {
        use crate::kernels::act::{FLAG_BIAS, FLAG_BIAS_VEC, FLAG_RES};
        let cols = cols_u32(args);
        let lanes = (16 / size_of::<T>()) as u64;
        let (magic, shift) = column_divider(cols);
        let mut flags = 0;
        if args.bias.is_some() {
            flags |= FLAG_BIAS;
        }
        if args.residual.is_some() {
            flags |= FLAG_RES;
        }
        if bias_vectors(args, geo) {
            flags |= FLAG_BIAS_VEC;
        }
        KernelScalars {
            cols,
            vlast: (u64::from(geo.head) + lanes * geo.nvec).wrapping_sub(lanes) as u32,
            clast: cols.wrapping_sub(lanes as u32),
            magic,
            shift,
            flags,
        }
    }
}

act_element!(f32, "f32", act_f32, act_inplace_f32, |v| v, |v| v);
act_element!(
    f16,
    "f16",
    act_f16,
    act_inplace_f16,
    |v| f16::to_f32(v),
    |v| f16::from_f32(v)
);
act_element!(
    bf16,
    "bf16",
    act_bf16,
    act_inplace_bf16,
    |v| bf16::to_f32(v),
    |v| bf16::from_f32(v)
);

/// The accuracy of the activation kernels in f32: the largest difference from the reference
/// ([`crate::cpu::act::act_f32`], the f64 definition rounded once), in units in the last place
/// of the reference activation value. 0 means bit-exact. With a residual the f32 sum adds up to
/// 1 ulp of the result; f16 / bf16 outputs add the rounding to the storage type (1 ulp of it).
/// Results below 2^-124 in magnitude (a few times the smallest normal f32) are only accurate to
/// an absolute 2^-124.
pub fn max_error_ulps(act: Act) -> f32 {
    match act {
        Act::Identity | Act::Relu | Act::Relu6 | Act::LeakyRelu => 0.0,
        Act::Tanh => 2.0,
        Act::HardSigmoid => 2.0,
        Act::HardSwish | Act::Sigmoid => 3.0,
        Act::Silu | Act::GeluTanh => 4.0,
        Act::Gelu => 6.0,
    }
}

/// The negative slope of [`Act::LeakyRelu`] when none is given.
pub const DEFAULT_LEAKY_SLOPE: f32 = 0.01;

/// What an activation computes besides its input and output: the function, its slope, and the
/// optional fused bias (one per column) and residual (one per element).
///
/// `y[i] = act(x[i] + bias[i % cols]) + residual[i]`: the bias is added before the activation,
/// the residual after it (see [`crate::cpu::act`] for the exact roundings).
#[derive(Clone, Copy)]
pub struct ActArgs<'a, T: DeviceRepr> {
    /// The activation function.
    pub act: Act,
    /// The negative slope of [`Act::LeakyRelu`]; ignored by the other functions.
    pub slope: f32,
    /// One value per column, added before the activation; `None` for no bias.
    pub bias: Option<DeviceSlice<'a, T>>,
    /// One value per element, added after the activation; `None` for no residual.
    pub residual: Option<DeviceSlice<'a, T>>,
    /// The row length the bias is indexed by (`bias[i % cols]`); ignored without a bias.
    pub cols: usize,
}

impl<'a, T: DeviceRepr> ActArgs<'a, T> {
    /// `act` alone: no bias, no residual, the default leaky slope.
    pub fn new(act: Act) -> Self {
        ActArgs {
            act,
            slope: DEFAULT_LEAKY_SLOPE,
            bias: None,
            residual: None,
            cols: 0,
        }
    }

    /// Adds a bias of `cols` values (`bias.len()` must equal `cols`), one per column of rows of
    /// `cols` elements (a last partial row is allowed).
    pub fn with_bias(self, bias: DeviceSlice<'a, T>, cols: usize) -> Self {
        ActArgs {
            bias: Some(bias),
            cols,
            ..self
        }
    }

    /// Adds a residual (one value per element), added after the activation.
    pub fn with_residual(self, residual: DeviceSlice<'a, T>) -> Self {
        ActArgs {
            residual: Some(residual),
            ..self
        }
    }

    /// Sets the negative slope of [`Act::LeakyRelu`].
    pub fn with_slope(self, slope: f32) -> Self {
        ActArgs { slope, ..self }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for ActArgs<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActArgs")
            .field("act", &self.act)
            .field("slope", &self.slope)
            .field("bias_len", &self.bias.map(|b| b.len()))
            .field("residual_len", &self.residual.map(|r| r.len()))
            .field("cols", &self.cols)
            .finish()
    }
}

/// `output[i] = act(input[i] + bias[i % cols]) + residual[i]` on `stream` (asynchronous).
///
/// Any length works, and any offset views (16-byte vector loads are used where the pointers
/// allow, with a scalar head and tail); zero length launches nothing. The grid is sized from the
/// device's SM count and the kernel loops over the data (grid-stride).
///
/// ```no_run
/// use pagesift_gpu::ops::act::activation;
/// use pagesift_gpu::{Act, ActArgs, DeviceBuffer, Gpu};
/// # fn main() -> pagesift_gpu::Result<()> {
/// let gpu = Gpu::new(0)?;
/// // Two rows of three columns, one bias per column.
/// let x = DeviceBuffer::from_host(&gpu, &[1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0])?;
/// let bias = DeviceBuffer::from_host(&gpu, &[0.5f32, 0.25, -0.5])?;
/// let mut y = DeviceBuffer::<f32>::alloc(&gpu, 6)?;
/// let args = ActArgs::new(Act::Gelu).with_bias(bias.slice(..)?, 3);
/// let stream = gpu.default_stream();
/// activation(&stream, &args, &x, &mut y)?;
/// stream.synchronize()?;
/// let out = y.to_host()?;
/// # let _ = out;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error::LengthMismatch`] naming `output`, `residual` or `bias` when a length is wrong;
/// [`Error::InvalidArgument`] for a bias with `cols == 0` or `cols >= 2^31`, or a non-finite
/// leaky relu slope;
/// [`Error::DeviceMismatch`] when a buffer belongs to another device than the stream; the
/// launch's errors otherwise.
pub fn activation<T: ActElement>(
    stream: &Stream,
    args: &ActArgs<'_, T>,
    input: &impl DeviceRead<T>,
    output: &mut impl DeviceWrite<T>,
) -> Result<()> {
    activation_with_grid_limit(stream, args, input, output, None)
}

/// [`activation`] with the grid limited to `max_blocks` blocks (for tests: a small grid makes
/// every thread go round the grid-stride loops many times). Not a stable API.
#[doc(hidden)]
pub fn activation_with_grid_limit<T: ActElement>(
    stream: &Stream,
    args: &ActArgs<'_, T>,
    input: &impl DeviceRead<T>,
    output: &mut impl DeviceWrite<T>,
    max_blocks: Option<u32>,
) -> Result<()> {
    let n = input.len();
    validate("ops::act::activation", args, n, output.len())?;
    if n == 0 {
        return stream.gpu().take_deferred();
    }
    let variant = find_variant(T::variants(), args.act)?;
    let residual_ptr = args.residual.map_or(input.device_ptr(), |r| r.device_ptr());
    let ptrs = [input.device_ptr(), output.device_ptr(), residual_ptr];
    let geo = Geometry::new(stream, variant, &ptrs, n, size_of::<T>(), max_blocks)?;
    <T as private::Sealed>::launch_kernel(stream, args, &geo, input, output)
}

/// The in-place form of [`activation`]: `data[i] = act(data[i] + bias[i % cols]) + residual[i]`.
///
/// # Errors
/// As [`activation`] (the residual must have `data.len()` elements).
pub fn activation_inplace<T: ActElement>(
    stream: &Stream,
    args: &ActArgs<'_, T>,
    data: &mut impl DeviceWrite<T>,
) -> Result<()> {
    activation_inplace_with_grid_limit(stream, args, data, None)
}

/// [`activation_inplace`] with the grid limited to `max_blocks` blocks (for tests). Not a
/// stable API.
#[doc(hidden)]
pub fn activation_inplace_with_grid_limit<T: ActElement>(
    stream: &Stream,
    args: &ActArgs<'_, T>,
    data: &mut impl DeviceWrite<T>,
    max_blocks: Option<u32>,
) -> Result<()> {
    const OP: &str = "ops::act::activation_inplace";
    let n = data.len();
    validate(OP, args, n, n)?;
    if n == 0 {
        return stream.gpu().take_deferred();
    }
    let gpu = stream.gpu();
    if !gpu.same_device(data.gpu())
        || args
            .bias
            .iter()
            .chain(args.residual.iter())
            .any(|b| !gpu.same_device(b.gpu()))
    {
        return Err(Error::from(error::DeviceMismatch {
            what: OP.to_string(),
            object: "buffer",
        }));
    }
    let y = data.device_ptr();
    let r = args.residual.map_or(y, |r| r.device_ptr());
    let variant = find_variant(<T as private::Sealed>::inplace_variants(), args.act)?;
    let geo = Geometry::new(stream, variant, &[y, r], n, size_of::<T>(), max_blocks)?;
    <T as private::Sealed>::launch_inplace_kernel(stream, args, &geo, data)
}

/// Shared argument checks of the two operations.
fn validate<T: DeviceRepr>(
    op: &'static str,
    args: &ActArgs<'_, T>,
    n: usize,
    output: usize,
) -> Result<()> {
    crate::cpu::act::check_lengths(
        op,
        n,
        args.bias.map(|b| b.len()),
        args.residual.map(|r| r.len()),
        output,
        args.cols,
    )?;
    // The kernels track the column in 32 bits (c + step < 2 cols must not wrap).
    if args.bias.is_some() && args.cols >= 1 << 31 {
        return Err(Error::from(error::InvalidArgument {
            op,
            message: format!("cols = {} must be below 2^31", args.cols),
        }));
    }
    if !args.slope.is_finite() && args.act == Act::LeakyRelu {
        return Err(Error::from(error::InvalidArgument {
            op,
            message: format!("the leaky relu slope {} is not finite", args.slope),
        }));
    }
    Ok(())
}

/// Whether the kernel may read the bias as 16-byte vectors: there is no scalar head and `cols`
/// is a multiple of the lanes of a vector (so every vector's first column is a multiple of the
/// lanes, and its lanes do not wrap round the row), and the bias is 16-byte aligned (else the
/// bias is read per element).
fn bias_vectors<T: DeviceRepr>(args: &ActArgs<'_, T>, geo: &Geometry) -> bool {
    let lanes = 16 / size_of::<T>();
    match args.bias {
        Some(b) => {
            geo.head == 0 && geo.nvec > 0 && args.cols % lanes == 0 && b.device_ptr() % 16 == 0
        }
        None => false,
    }
}

/// The magic number and shift with which the kernels divide an element index `e < 2^31` by
/// `cols` (`1 <= cols < 2^31`): `e / cols == (umulhi(e, magic) + e) >> shift`, where
/// `shift = ceil(log2(cols))` and `magic = floor(2^32 (2^shift - cols) / cols) + 1` (division
/// by an invariant integer, the round-up method; the sum stays below 2^32 since `e < 2^31`).
pub(crate) fn column_divider(cols: u32) -> (u32, u32) {
    let d = u64::from(cols.max(1));
    let shift = 64 - (d - 1).leading_zeros();
    let magic = ((1u64 << 32) * ((1u64 << shift) - d)) / d + 1;
    (magic as u32, shift)
}

/// `cols` as the kernel takes it (1 without a bias, so the kernel's column arithmetic is defined).
fn cols_u32<T: DeviceRepr>(args: &ActArgs<'_, T>) -> u32 {
    match args.bias {
        Some(_) => args.cols as u32,
        None => 1,
    }
}

/// Threads per block of the activation kernels.
pub(crate) const BLOCK: u64 = 256;
/// The most blocks of one launch: 2^28 threads, one 16-byte vector each (4 GiB); longer data
/// goes round the kernels' grid-stride loops.
const MAX_GRID: u64 = 1 << 20;
/// Blocks per SM for the arithmetic-bound activations (see [`Geometry::new`]; on an H200, with
/// the kernels at 32 registers, 256 reaches 97.0-97.9% of the copy for gelu, gelu-tanh, silu,
/// sigmoid and tanh in f32 and f16, 128 96.0-96.6%, 64 about 94.5%, and one vector per
/// thread 86-97%).
const ARITH_BLOCKS_PER_SM: u64 = 256;
/// Blocks per SM for the other activations on two-byte types, or with fewer resident threads
/// than the SM has slots (on an H200: 97% of the copy bandwidth, against 92-93% with one vector
/// per thread).
const HALF_BLOCKS_PER_SM: u64 = 256;

/// Whether an SM holds as many threads of `variant` as it has thread slots (by its registers;
/// measured on an H200: at 34 registers, 75% of the slots, a one-vector-per-thread grid
/// reaches 93% of the copy bandwidth, a grid of 256 blocks per SM 97%). Loads the variant's
/// module on first use; remembered per device and variant. True where the device reports no
/// function (the emulated device).
fn full_occupancy(gpu: &crate::Gpu, variant: &'static KernelVariant) -> Result<bool> {
    type Key = (crate::BackendKind, usize, usize);
    static CACHE: std::sync::Mutex<Vec<(Key, bool)>> = std::sync::Mutex::new(Vec::new());
    let key = (
        gpu.backend_kind(),
        gpu.ordinal(),
        variant as *const KernelVariant as usize,
    );
    if let Some(&(_, full)) = CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(full);
    }
    gpu.enter()?;
    let slot = gpu.variant_function(variant)?;
    let Some(loaded) = slot.loaded() else {
        return Ok(true);
    };
    let regs = u64::from(
        gpu.backend()
            .function_attributes(loaded.function)?
            .num_regs
            .max(1),
    );
    let threads: u64 = variant
        .block
        .iter()
        .map(|&b| u64::from(b))
        .product::<u64>()
        .max(1);
    // 64K registers per SM on sm_70..sm_90, allocated per warp in units of 256.
    let warp_regs = (regs * 32).div_ceil(256) * 256;
    let blocks_by_regs = 65536 / (warp_regs * threads.div_ceil(32));
    let sm_threads: u64 = match gpu.compute_capability() {
        (7, 5) => 1024,
        (8, 6) | (8, 7) | (8, 9) => 1536,
        _ => 2048,
    };
    let full = blocks_by_regs * threads >= sm_threads;
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((key, full));
    Ok(full)
}

/// Whether `variant` computes an activation whose arithmetic, not its memory traffic, bounds
/// its speed (exp, erfc or a reciprocal per element).
/// Whether `variant` is one of the activations whose vector loops take two vectors a turn in
/// f32 (the kernels' `pairs`).
fn light(variant: &KernelVariant) -> bool {
    variant.consts.iter().any(|&(k, v)| {
        k == "ACT"
            && matches!(
                v,
                "Identity" | "Relu" | "Relu6" | "LeakyRelu" | "HardSwish" | "HardSigmoid"
            )
    })
}

fn arithmetic_bound(variant: &KernelVariant) -> bool {
    variant
        .consts
        .iter()
        .any(|&(k, v)| k == "ACT" && matches!(v, "Gelu" | "GeluTanh" | "Silu" | "Sigmoid" | "Tanh"))
}

/// How one launch splits its elements: a scalar head up to the first 16-byte boundary, `nvec`
/// vectors of 16 bytes, and a scalar tail; and the grid.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Elements before the first vector.
    pub head: u32,
    /// Whole 16-byte vectors.
    pub nvec: u64,
    /// The launch configuration.
    pub cfg: LaunchConfig,
}

impl Geometry {
    /// The split for `len` elements of `elem` bytes whose pointers are `ptrs` (every stream the
    /// kernel reads or writes per element; vectors need them all at the same offset modulo 16).
    /// The grid gives each thread one vector (or scalar element), so that the whole grid
    /// covers the data in one pass: many short blocks keep more loads in flight than a
    /// persistent grid of one wave (measured on an H200: a copy in this pattern reaches the
    /// driver's copy bandwidth, a one-wave grid-stride copy 91-95% of it); at most
    /// [`MAX_GRID`] blocks (or `limit`), beyond which the kernels' grid-stride loops take
    /// over. Activations whose arithmetic outweighs their memory traffic get a grid of
    /// [`ARITH_BLOCKS_PER_SM`] blocks per SM instead, each thread taking several vectors (its
    /// set-up amortized), and the others on f16 / bf16, or with too many registers for every
    /// thread slot of an SM, [`HALF_BLOCKS_PER_SM`]. Loads the variant's module on first use
    /// (its register count decides). `variant` is the kernel to be launched (its block is [`BLOCK`]
    /// threads).
    pub fn new(
        stream: &Stream,
        variant: &'static KernelVariant,
        ptrs: &[DevicePtr],
        len: usize,
        elem: usize,
        limit: Option<u32>,
    ) -> Result<Geometry> {
        let sms = u64::from(stream.gpu().props().sm_count.max(1));
        let max_blocks = match limit {
            Some(b) => u64::from(b),
            None if arithmetic_bound(variant) => sms * ARITH_BLOCKS_PER_SM,
            // Two-byte types convert every element: their threads do enough work that a
            // bounded grid does better than one vector per thread.
            None if elem < 4 => sms * HALF_BLOCKS_PER_SM,
            // One vector per thread needs every thread slot of the SM to keep enough loads in
            // flight; with fewer (more registers), a bounded grid does better.
            None if !full_occupancy(stream.gpu(), variant)? => sms * HALF_BLOCKS_PER_SM,
            None => MAX_GRID,
        };
        // The light f32 activations take two vectors a turn on the one-vector grid (see the
        // kernels' `pairs`): half the threads, each set up once for eight elements.
        let per_thread = if elem == 4 && max_blocks == MAX_GRID && light(variant) {
            2
        } else {
            1
        };
        Ok(Geometry::with_vectors_per_thread(
            max_blocks,
            ptrs,
            len as u64,
            elem as u64,
            per_thread,
        ))
    }

    /// As [`Geometry::new`] with a grid of at most `max_blocks` blocks.
    pub fn with_max_blocks(max_blocks: u64, ptrs: &[DevicePtr], len: u64, elem: u64) -> Geometry {
        Geometry::with_vectors_per_thread(max_blocks, ptrs, len, elem, 1)
    }

    /// As [`Geometry::with_max_blocks`] with a thread for every `per_thread` vectors.
    fn with_vectors_per_thread(
        max_blocks: u64,
        ptrs: &[DevicePtr],
        len: u64,
        elem: u64,
        per_thread: u64,
    ) -> Geometry {
        let lanes = 16 / elem;
        let misalign = ptrs.first().map_or(0, |p| p % 16);
        let (head, nvec) = if ptrs.iter().all(|p| p % 16 == misalign) && misalign % elem == 0 {
            let head = ((16 - misalign) % 16 / elem).min(len);
            (head, (len - head) / lanes)
        } else {
            (len.min(u64::from(u32::MAX)), 0)
        };
        let scalar = len - nvec * lanes;
        let work = nvec.div_ceil(per_thread).max(scalar);
        let blocks = work
            .div_ceil(BLOCK)
            .clamp(1, max_blocks.clamp(1, u64::from(u32::MAX)));
        Geometry {
            head: head as u32,
            nvec,
            cfg: LaunchConfig::grid_1d(blocks as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: DevicePtr = 0x7000_0000_0000;

    #[test]
    fn every_combination_has_a_compiled_variant() {
        fn check<T: ActElement>() {
            for act in Act::ALL {
                for variants in [T::variants(), <T as private::Sealed>::inplace_variants()] {
                    let v = find_variant(variants, act).unwrap();
                    assert_eq!(
                        v.consts,
                        &[("ACT", act.variant_name())],
                        "{}",
                        v.display_name()
                    );
                }
            }
        }
        check::<f32>();
        check::<f16>();
        check::<bf16>();
    }

    #[test]
    fn aligned_pointers_use_vectors_and_a_tail() {
        let g = Geometry::with_max_blocks(528, &[BASE, BASE + 4096, BASE + 8192], 1003, 4);
        assert_eq!((g.head, g.nvec), (0, 250));
        // 250 vectors, 3 tail elements: one block.
        assert_eq!(g.cfg.grid, [1, 1, 1]);
    }

    #[test]
    fn a_common_offset_gives_a_scalar_head() {
        // Views at element 3 of f32 buffers: 1 element up to the 16-byte boundary.
        let g = Geometry::with_max_blocks(16, &[BASE + 12, BASE + 4096 + 12], 10, 4);
        assert_eq!((g.head, g.nvec), (1, 2));
        // f16 at element 5: 3 elements to the boundary, then vectors of 8.
        let g = Geometry::with_max_blocks(16, &[BASE + 10, BASE + 256 + 10], 30, 2);
        assert_eq!((g.head, g.nvec), (3, 3));
        // Shorter than the head.
        let g = Geometry::with_max_blocks(16, &[BASE + 4, BASE + 4], 2, 4);
        assert_eq!((g.head, g.nvec), (2, 0));
    }

    #[test]
    fn the_column_divider_divides() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut divisors: Vec<u32> = vec![1, 2, 3, 4, 5, 7, 64, 1000, 4096, 65537, (1 << 31) - 1];
        divisors.extend((0..300).map(|_| (next() % (1 << 31)) as u32 + 1));
        divisors.extend((0..300).map(|_| (next() % 5000) as u32 + 1));
        for d in divisors {
            let (magic, shift) = column_divider(d);
            let mut es: Vec<u32> = vec![0, 1, d - 1, d, d.wrapping_add(1), (1 << 31) - 1];
            es.extend((0..200).map(|_| (next() % (1 << 31)) as u32));
            for e in es.into_iter().filter(|&e| e < 1 << 31) {
                let hi = ((u64::from(e) * u64::from(magic)) >> 32) as u32;
                let q = (hi + e) >> shift;
                assert_eq!(q, e / d, "{e} / {d} (magic {magic}, shift {shift})");
            }
        }
    }

    #[test]
    fn disagreeing_offsets_fall_back_to_scalar() {
        let g = Geometry::with_max_blocks(16, &[BASE + 4, BASE + 8], 100, 4);
        assert_eq!((g.head, g.nvec), (100, 0));
    }

    #[test]
    fn the_grid_fills_the_device_and_no_more() {
        let g = Geometry::with_max_blocks(528, &[BASE, BASE], 1 << 28, 4);
        assert_eq!(g.nvec, 1 << 26);
        assert_eq!(g.cfg.grid, [528, 1, 1]);
        // 1250 vectors, one per thread.
        let g = Geometry::with_max_blocks(528, &[BASE, BASE], 5000, 4);
        assert_eq!(g.cfg.grid, [5, 1, 1]);
    }
}

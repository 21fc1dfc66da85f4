//! Activations: `y = act(x + bias) + residual`, element-wise, on the GPU: the public API,
//! its validation and the launch geometry (the kernels are [`crate::kernels::act`]).

use std::mem::size_of;

use crate::error;
use crate::kernels::act::{act as act_kernel, act_inplace as inplace_kernel, ActParams};
use crate::ops::elementwise::{column_divider, Geometry, MAX_GRID};
use crate::{
    DevicePtr, DeviceRead, DeviceRepr, DeviceSlice, DeviceWrite, Error, KernelVariant, Result,
    Stream,
};

pub use crate::act::{max_error_ulps, Act, ActElement, DEFAULT_LEAKY_SLOPE};

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
    let variant = compiled(act_kernel::variant::<T>(args.act), "act", args.act)?;
    let residual = args.residual.map_or(input.device_ptr(), |r| r.device_ptr());
    let ptrs = [input.device_ptr(), output.device_ptr(), residual];
    let (geo, p) = plan(stream, variant, args, &ptrs, n, max_blocks)?;
    act_kernel::launch::<T>(
        stream,
        geo.cfg,
        args.act,
        p,
        input,
        args.bias.as_ref().map(|b| b as &dyn DeviceRead<T>),
        args.residual.as_ref().map(|r| r as &dyn DeviceRead<T>),
        output,
    )
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
    let variant = compiled(
        inplace_kernel::variant::<T>(args.act),
        "act_inplace",
        args.act,
    )?;
    let (geo, p) = plan(stream, variant, args, &[y, r], n, max_blocks)?;
    inplace_kernel::launch::<T>(
        stream,
        geo.cfg,
        args.act,
        p,
        args.bias.as_ref().map(|b| b as &dyn DeviceRead<T>),
        args.residual.as_ref().map(|r| r as &dyn DeviceRead<T>),
        data,
    )
}

/// The variant a kernel's typed selection found, or the error naming what has none.
fn compiled(
    v: Option<&'static KernelVariant>,
    kernel: &str,
    act: Act,
) -> Result<&'static KernelVariant> {
    v.ok_or_else(|| crate::__private::variant_not_compiled(kernel, format!("ACT={act:?}")))
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

/// The launch geometry and the kernel's scalars for `n` elements whose pointers are `ptrs`.
fn plan<T: DeviceRepr>(
    stream: &Stream,
    variant: &'static KernelVariant,
    args: &ActArgs<'_, T>,
    ptrs: &[DevicePtr],
    n: usize,
    limit: Option<u32>,
) -> Result<(Geometry, ActParams)> {
    let elem = size_of::<T>();
    let geo = launch_geometry(stream, variant, args.act, elem, ptrs, n, limit)?;
    let lanes = (16 / elem) as u64;
    let cols = match args.bias {
        Some(_) => args.cols as u32,
        None => 1,
    };
    let (cmagic, cshift) = column_divider(cols);
    let bias_vec = args.bias.is_some_and(|b| {
        geo.head == 0 && geo.nvec > 0 && args.cols as u64 % lanes == 0 && b.device_ptr() % 16 == 0
    });
    let p = ActParams {
        n: n as u64,
        nvec: geo.nvec,
        head: geo.head,
        cols,
        vlast: (u64::from(geo.head) + lanes * geo.nvec).wrapping_sub(lanes) as u32,
        clast: cols.wrapping_sub(lanes as u32),
        cmagic,
        cshift,
        slope: args.slope,
        bias_vec,
    };
    Ok((geo, p))
}

/// The grid of an activation launch of `variant` over `n` elements of `elem` bytes whose
/// pointers are `ptrs` (for tests that launch kernels the way the operations do; not a
/// stable API).
///
/// The grid gives each thread one vector (or scalar element), so that the whole grid covers
/// the data in one pass (many short blocks keep more loads in flight than a persistent grid),
/// up to [`MAX_GRID`] blocks (or `limit`). Activations whose arithmetic outweighs their memory
/// traffic, the 16-bit types (which convert every element), and variants that cannot fill
/// every thread slot of an SM (by the driver's occupancy answer) get a grid of
/// [`BOUNDED_BLOCKS_PER_SM`] blocks per SM instead, each thread taking several vectors. The
/// light f32 activations take two vectors a turn on the one-vector grid (the kernels'
/// `pairs`): half the threads, each set up once for eight elements. Measurements are in the
/// README.
#[doc(hidden)]
pub fn launch_geometry(
    stream: &Stream,
    variant: &'static KernelVariant,
    act: Act,
    elem: usize,
    ptrs: &[DevicePtr],
    n: usize,
    limit: Option<u32>,
) -> Result<Geometry> {
    let gpu = stream.gpu();
    let props = gpu.props();
    let sms = u64::from(props.sm_count.max(1));
    let bounded = sms * BOUNDED_BLOCKS_PER_SM;
    let max_blocks = match limit {
        Some(b) => u64::from(b),
        None if arithmetic_bound(act) || elem < 4 => bounded,
        None => {
            let threads = variant.block.iter().product::<u32>().max(1);
            let resident = gpu.blocks_per_sm(variant, 0)?.saturating_mul(threads);
            if resident < props.max_threads_per_sm {
                bounded
            } else {
                MAX_GRID
            }
        }
    };
    let per_thread = if elem == 4 && max_blocks == MAX_GRID && light(act) {
        2
    } else {
        1
    };
    let elem = elem as u64;
    Ok(Geometry::with_vectors_per_thread(
        max_blocks, ptrs, n as u64, elem, per_thread,
    ))
}

/// Blocks per SM of the bounded grids (see [`plan`]).
const BOUNDED_BLOCKS_PER_SM: u64 = 256;

/// Whether `act`'s arithmetic, not its memory traffic, bounds its speed (exp, erfc or a
/// reciprocal per element).
fn arithmetic_bound(act: Act) -> bool {
    matches!(
        act,
        Act::Gelu | Act::GeluTanh | Act::Silu | Act::Sigmoid | Act::Tanh
    )
}

/// Whether `act`'s f32 vector loops take two vectors a turn (the kernels' `pairs`).
fn light(act: Act) -> bool {
    !arithmetic_bound(act)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn every_activation_and_type_has_a_compiled_variant() {
        fn check<T: ActElement>() {
            for act in Act::ALL {
                let want = format!("{act:?}");
                for v in [
                    act_kernel::variant::<T>(act),
                    inplace_kernel::variant::<T>(act),
                ] {
                    let v = v.expect("compiled");
                    assert_eq!(
                        v.consts,
                        &[("T", T::DTYPE.name()), ("ACT", want.as_str())],
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
}

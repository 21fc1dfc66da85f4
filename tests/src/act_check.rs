//! The checking logic of the activation property tests, independent of which kernel runs.
//!
//! A [`Case`] (length, bias width, view offsets, grid limit, data seed) is drawn by
//! [`case_strategy`]; [`run_case`] builds the operands from it (random data, every view inside a
//! larger buffer poisoned with a NaN pattern), hands them to a launcher, and compares the result
//! with the CPU reference [`pagesift_gpu::cpu::act`]: every element of the output view within
//! the tolerance of [`tolerance_ulps`], nothing outside the view touched. [`check`] drives
//! `run_case` through a proptest [`TestRunner`] and returns the shrunk failing case.
//!
//! The launcher of the real operations is [`launch_op`]; tests of other kernels (hand-written
//! variants, deliberately broken ones) pass their own.
//!
//! Tolerances (the reference is the activation in f64, rounded once to f32):
//!
//! | activation                         | f32 tolerance (ulp of the activation value) | measured max |
//! |------------------------------------|---------------------------------------------|--------------|
//! | identity, relu, relu6, leaky relu  | 0 (bit-exact result)                        | 0            |
//! | tanh                               | 2                                           | 1            |
//! | hardsigmoid                        | 2 (two roundings)                           | 1            |
//! | hardswish                          | 3 (three roundings)                         | 2            |
//! | sigmoid                            | 3                                           | 2            |
//! | silu, gelu (tanh)                  | 4                                           | 3, 2         |
//! | gelu (erf)                         | 6                                           | 5            |
//!
//! ("measured": `pagesift-gpu selftest`'s dense scan on the emulated device, which rounds like
//! the GPU: 4.8M points over [-9.5, 9.5], [-16, -9.5], [9.5, 16] and magnitudes 2^-30..1; the
//! same scan of 19M points on an H200 measured gelu (tanh) at 3, the rest alike.)
//!
//! plus, with a residual, 1 ulp of the sum (the f32 add rounds a slightly different activation
//! value), and an absolute floor of 2^-124 (results within a few multiples of the smallest
//! normal f32 may lose their accuracy or flush to zero). f16 / bf16 results are within 1 ulp of
//! the storage type of the f32 reference result (plus the f32 allowance above); the exact
//! functions are bit-exact there too.

use std::cell::Cell;

use half::{bf16, f16};
use pagesift_gpu::cpu::act::{act_f32, ulp_f32};
use pagesift_gpu::ops::act::{
    activation_inplace_with_grid_limit, activation_with_grid_limit, ActElement,
};
use pagesift_gpu::{Act, ActArgs, DeviceBuffer, DeviceSlice, DeviceSliceMut, Error, Gpu, Stream};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use rand::{Rng, SeedableRng};

use crate::util::{random_f32_from, POISON_BITS};

/// Allowed error in ulp of the f32 activation value (see the table in the module docs).
pub fn tolerance_ulps(act: Act) -> f32 {
    match act {
        Act::Identity | Act::Relu | Act::Relu6 | Act::LeakyRelu => 0.0,
        Act::Tanh | Act::HardSigmoid => 2.0,
        Act::HardSwish | Act::Sigmoid => 3.0,
        Act::Silu | Act::GeluTanh => 4.0,
        Act::Gelu => 6.0,
    }
}

/// Absolute errors up to 2^-124 are accepted (see the module docs).
pub const ABS_FLOOR: f32 = 4.0 * f32::MIN_POSITIVE;
/// The leaky relu slope the tests use (not the default, to prove it is passed through).
pub const SLOPE: f32 = 0.125;
/// Elements of poison around every view.
pub const GUARD: usize = 19;

/// The storage types under test, with their poison pattern and ulp.
pub trait TestElem: ActElement + std::fmt::Debug {
    /// A NaN bit pattern no kernel produces from finite data.
    fn poison() -> Self;
    /// The raw bits (to compare poison exactly).
    fn bits(self) -> u32;
    /// The storage type's ulp at `|v|` (after rounding `v` to the type).
    fn storage_ulp(v: f32) -> f32;
}

impl TestElem for f32 {
    fn poison() -> f32 {
        f32::from_bits(POISON_BITS)
    }
    fn bits(self) -> u32 {
        self.to_bits()
    }
    fn storage_ulp(v: f32) -> f32 {
        ulp_f32(v)
    }
}

/// `TestElem` for a 16-bit float type with the NaN pattern `$poison`.
macro_rules! half_test_elem {
    ($t:ty, $poison:expr) => {
        impl TestElem for $t {
            fn poison() -> $t {
                <$t>::from_bits($poison)
            }
            fn bits(self) -> u32 {
                u32::from(self.to_bits())
            }
            fn storage_ulp(v: f32) -> f32 {
                let a = <$t>::from_f32(v.abs());
                <$t>::from_bits(a.to_bits() + 1).to_f32() - a.to_f32()
            }
        }
    };
}

half_test_elem!(f16, 0x7e5a);
half_test_elem!(bf16, 0x7fda);

/// What a property test runs: the activation and which fused operands / form it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// The activation (selects the reference and the tolerance).
    pub act: Act,
    /// With a bias `bias[i % cols]`.
    pub bias: bool,
    /// With a residual `res[i]`.
    pub residual: bool,
    /// In place (the output view holds the input).
    pub inplace: bool,
}

impl Setup {
    /// The eight forms of `act`: every combination of bias, residual and in place.
    pub fn all_forms(act: Act) -> impl Iterator<Item = Setup> {
        (0..8u8).map(move |m| Setup {
            act,
            bias: m & 1 != 0,
            residual: m & 2 != 0,
            inplace: m & 4 != 0,
        })
    }

    /// `act` out of place with a bias and no residual.
    pub fn with_bias(act: Act) -> Setup {
        Setup {
            act,
            bias: true,
            residual: false,
            inplace: false,
        }
    }
}

/// One randomly chosen run of a variant.
#[derive(Clone, Debug)]
pub struct Case {
    /// Elements.
    pub len: usize,
    /// Bias width (`bias[i % cols]`).
    pub cols: usize,
    /// View offsets (elements) of input, output, residual, bias.
    pub offsets: [usize; 4],
    /// A grid limit (a small grid sends every thread round the loops many times), or the
    /// operation's own grid.
    pub max_blocks: Option<u32>,
    /// Seed of the data.
    pub seed: u64,
}

/// Which lengths [`case_strategy`] draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lengths {
    /// A real GPU: small lengths, up to 200 000, and one above 2^20.
    Device,
    /// The emulated device: small lengths and two above 8192 (with a one-block grid, the
    /// shortest that reach the four-vector loop of the 8-lane f16 / bf16 kernels).
    Emulated,
    /// Small lengths only (0, 1, 2, 3, primes, up to 4099).
    Small,
}

impl Lengths {
    /// The lengths for `gpu`: [`Lengths::Emulated`] on the emulated device, else
    /// [`Lengths::Device`].
    pub fn for_gpu(gpu: &Gpu) -> Lengths {
        if crate::is_emulated(gpu) {
            Lengths::Emulated
        } else {
            Lengths::Device
        }
    }
}

/// The cases of the activation property tests.
pub fn case_strategy(lengths: Lengths) -> BoxedStrategy<Case> {
    let small = prop::sample::select(vec![0usize, 1, 2, 3, 5, 7, 13, 31, 97, 257, 1021, 4099]);
    let len = match lengths {
        Lengths::Device => {
            prop_oneof![1 => Just((1usize << 20) + 7), 2 => small, 1 => 1usize..200_000].boxed()
        }
        Lengths::Emulated => {
            prop_oneof![2 => small, 1 => prop::sample::select(vec![8209usize, 16411])].boxed()
        }
        Lengths::Small => small.boxed(),
    };
    let cols = prop_oneof![
        Just(1usize),
        Just(3),
        Just(4),
        Just(64),
        Just(1000),
        1usize..600
    ];
    // Half of the cases use one offset for every operand (vector path with a scalar head), the
    // other half independent offsets (scalar fallback where they disagree modulo 16 bytes).
    let offsets = prop_oneof![
        (0usize..10).prop_map(|o| [o, o, o, o]),
        [0usize..10, 0usize..10, 0usize..10, 0usize..10],
    ];
    let max_blocks = prop_oneof![2 => Just(None), 1 => (1u32..4).prop_map(Some)];
    (len, cols, offsets, max_blocks, any::<u64>())
        .prop_map(|(len, cols, offsets, max_blocks, seed)| Case {
            len,
            cols,
            offsets,
            max_blocks,
            seed,
        })
        .boxed()
}

/// The device views one run hands to the kernel under test.
pub struct Operands<'a, T: ActElement> {
    /// The input view, or `None` in place (the output view then holds the input).
    pub input: Option<DeviceSlice<'a, T>>,
    /// The output view.
    pub output: DeviceSliceMut<'a, T>,
    /// The bias view (`cols` elements) when the setup has one.
    pub bias: Option<DeviceSlice<'a, T>>,
    /// The bias width (the case's, also without a bias).
    pub cols: usize,
    /// The residual view when the setup has one.
    pub residual: Option<DeviceSlice<'a, T>>,
    /// The leaky relu slope.
    pub slope: f32,
    /// The grid limit of the case.
    pub max_blocks: Option<u32>,
}

/// Runs the real operation ([`activation_with_grid_limit`] or its in-place form) on `ops`.
///
/// # Errors
/// The operation's.
pub fn launch_op<T: ActElement>(
    stream: &Stream,
    act: Act,
    mut ops: Operands<'_, T>,
) -> pagesift_gpu::Result<()> {
    let mut args = ActArgs::new(act).with_slope(ops.slope);
    if let Some(b) = ops.bias {
        args = args.with_bias(b, ops.cols);
    }
    if let Some(r) = ops.residual {
        args = args.with_residual(r);
    }
    match &ops.input {
        Some(x) => activation_with_grid_limit(stream, &args, x, &mut ops.output, ops.max_blocks),
        None => activation_inplace_with_grid_limit(stream, &args, &mut ops.output, ops.max_blocks),
    }
}

fn random_vec<T: ActElement>(rng: &mut impl Rng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    random_f32_from(rng, n, lo..hi)
        .into_iter()
        .map(T::from_f32)
        .collect()
}

/// `data` at `offset` inside a buffer of `GUARD` poison on both sides.
fn padded<T: TestElem>(data: &[T], offset: usize) -> Vec<T> {
    let mut v = vec![T::poison(); offset + data.len() + GUARD];
    v[offset..offset + data.len()].copy_from_slice(data);
    v
}

/// Runs case `c` of `setup` through `launch` and checks the output against the CPU reference:
/// data in [-8, 8] (bias in [-1, 1], residual in [-4, 4]), every element of the output view
/// within tolerance, nothing outside it changed.
///
/// # Errors
/// A failure naming the first wrong elements, an overwritten element outside the view, or a
/// device error (a failed launch, an emulator check).
pub fn run_case<T: TestElem>(
    gpu: &Gpu,
    setup: Setup,
    c: &Case,
    launch: impl FnOnce(&Stream, Operands<'_, T>) -> pagesift_gpu::Result<()>,
) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("device error: {e}"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(c.seed);
    let n = c.len;
    let cols = c.cols;
    let x: Vec<T> = random_vec(&mut rng, n, -8.0, 8.0);
    let bias: Vec<T> = random_vec(&mut rng, cols, -1.0, 1.0);
    let res: Vec<T> = random_vec(&mut rng, n, -4.0, 4.0);
    let [ox, oy, or, ob] = c.offsets;
    let oy = if setup.inplace { ox } else { oy };

    let x_buf = DeviceBuffer::from_host(gpu, &padded(&x, ox)).map_err(fail)?;
    let b_buf = DeviceBuffer::from_host(gpu, &padded(&bias, ob)).map_err(fail)?;
    let r_buf = DeviceBuffer::from_host(gpu, &padded(&res, or)).map_err(fail)?;
    let mut y_buf = if setup.inplace {
        DeviceBuffer::from_host(gpu, &padded(&x, ox)).map_err(fail)?
    } else {
        DeviceBuffer::from_host(gpu, &vec![T::poison(); oy + n + GUARD]).map_err(fail)?
    };
    let stream = gpu.default_stream();
    let ops = Operands {
        input: if setup.inplace {
            None
        } else {
            Some(x_buf.slice(ox..ox + n).map_err(fail)?)
        },
        output: y_buf.slice_mut(oy..oy + n).map_err(fail)?,
        bias: if setup.bias {
            Some(b_buf.slice(ob..ob + cols).map_err(fail)?)
        } else {
            None
        },
        cols,
        residual: if setup.residual {
            Some(r_buf.slice(or..or + n).map_err(fail)?)
        } else {
            None
        },
        slope: SLOPE,
        max_blocks: c.max_blocks,
    };
    launch(&stream, ops).map_err(fail)?;
    stream.synchronize().map_err(fail)?;
    let out = y_buf.to_host().map_err(fail)?;
    check_output(setup, &x, &bias, &res, &out, oy)
}

/// Compares `out` (the whole output buffer, the view at `oy`) with the reference.
fn check_output<T: TestElem>(
    setup: Setup,
    x: &[T],
    bias: &[T],
    res: &[T],
    out: &[T],
    oy: usize,
) -> Result<(), TestCaseError> {
    let n = x.len();
    let cols = bias.len();
    // Nothing outside the view was touched.
    for (i, v) in out.iter().enumerate() {
        if (i < oy || i >= oy + n) && v.bits() != T::poison().bits() {
            return Err(TestCaseError::fail(format!(
                "element {i} outside the view [{oy}, {}) was overwritten: {v:?}",
                oy + n
            )));
        }
    }
    let act = setup.act;
    let tol = tolerance_ulps(act);
    let mut bad = Vec::new();
    for i in 0..n {
        let xv = x[i].to_f32();
        let v = if setup.bias {
            xv + bias[i % cols].to_f32()
        } else {
            xv
        };
        let a = act_f32(act, SLOPE, v);
        let want = if setup.residual {
            a + res[i].to_f32()
        } else {
            a
        };
        let got_t = out[oy + i];
        let got = got_t.to_f32();
        let ok = if tol == 0.0 {
            got_t.bits() == T::from_f32(want).bits() || (got == 0.0 && want == 0.0)
        } else {
            let sum_allow = if setup.residual { ulp_f32(want) } else { 0.0 };
            let f32_allow = tol * ulp_f32(a) + sum_allow + ABS_FLOOR;
            let storage_allow = if std::mem::size_of::<T>() == 4 {
                0.0
            } else {
                T::storage_ulp(want)
            };
            (got - want).abs() <= f32_allow + storage_allow
        };
        if !ok {
            bad.push(format!(
                "  [{i}] x={xv} input={v} want={want:e} got={got:e} ({got_t:?})"
            ));
        }
    }
    if !bad.is_empty() {
        let count = bad.len();
        bad.truncate(8);
        return Err(TestCaseError::fail(format!(
            "{count} of {n} elements wrong (tolerance {tol} ulp):\n{}",
            bad.join("\n")
        )));
    }
    Ok(())
}

/// A failure [`check`] found; its `Display` form names the minimal failing case and what was
/// wrong in it.
#[derive(Debug)]
pub struct Failure {
    /// The minimal failing case after shrinking (`None` when the runner aborted).
    pub case: Option<Case>,
    /// What was wrong in that case.
    pub reason: String,
    /// Cases run until the first failure (1 = the first case failed).
    pub found_at: usize,
    /// Cases run in all, shrinking included.
    pub runs: usize,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.case {
            Some(case) => write!(
                f,
                "minimal failing case {case:?} (first failure at case {}, {} runs with \
                 shrinking):\n{}",
                self.found_at, self.runs, self.reason
            ),
            None => write!(f, "{} (after {} runs)", self.reason, self.runs),
        }
    }
}

/// Runs `cases` random cases of `setup` (lengths from `lengths`) through `launch` with a proptest
/// runner (no failure persistence, up to 1024 shrinking steps; `PROPTEST_RNG_SEED` and the
/// other `PROPTEST_*` variables apply), and returns the shrunk failing case if any.
///
/// # Errors
/// The [`Failure`] (also when the runner aborts).
pub fn check<T: TestElem>(
    gpu: &Gpu,
    setup: Setup,
    lengths: Lengths,
    cases: u32,
    launch: impl Fn(&Stream, Operands<'_, T>) -> pagesift_gpu::Result<()>,
) -> Result<(), Failure> {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..Config::default()
    });
    let runs = Cell::new(0usize);
    let found_at = Cell::new(0usize);
    let result = runner.run(&case_strategy(lengths), |c| {
        runs.set(runs.get() + 1);
        let r = run_case::<T>(gpu, setup, &c, &launch);
        if r.is_err() && found_at.get() == 0 {
            found_at.set(runs.get());
        }
        r
    });
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, case)) => Err(Failure {
            case: Some(case),
            reason: reason.to_string(),
            found_at: found_at.get(),
            runs: runs.get(),
        }),
        Err(TestError::Abort(reason)) => Err(Failure {
            case: None,
            reason: format!("runner aborted: {reason}"),
            found_at: found_at.get(),
            runs: runs.get(),
        }),
    }
}

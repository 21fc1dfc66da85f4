//! Every activation variant on the device against the CPU reference.
//!
//! One test per activation and storage type (`cargo test gelu_tanh::bf16` picks one); each runs
//! every combination of bias / residual / in-place with proptest-chosen lengths, bias widths,
//! view offsets and data. Outputs live inside larger buffers poisoned with a NaN pattern: every
//! element of the view must be written and nothing outside it touched.
//!
//! Tolerances (the reference is [`pagesift_gpu::cpu::act`]: the activation in f64, rounded once
//! to f32):
//!
//! | activation                         | f32 tolerance (ulp of the activation value) | measured max |
//! |------------------------------------|---------------------------------------------|--------------|
//! | identity, relu, relu6, leaky relu  | 0 (bit-exact result)                        | 0            |
//! | tanh                               | 2                                           | 1            |
//! | hardsigmoid                        | 2 (two roundings)                           | 0            |
//! | hardswish                          | 3 (three roundings)                         | 1            |
//! | sigmoid                            | 3                                           | 2            |
//! | silu, gelu (tanh)                  | 4                                           | 3            |
//! | gelu (erf)                         | 6                                           | 4            |
//!
//! ("measured": the emulated device, which rounds like the GPU, on 4M points of [-9.5, 9.5].)
//!
//! plus, with a residual, 1 ulp of the sum (the f32 add rounds a slightly different activation
//! value), and an absolute floor of 2^-124 (results within a few multiples of the smallest
//! normal f32 may lose their accuracy or flush to zero). f16 / bf16 results are within 1 ulp of the storage type of the f32 reference
//! result (plus the f32 allowance above); the exact functions are bit-exact there too.

use half::{bf16, f16};
use pagesift_gpu::cpu::act::{act_f32, ulp_f32};
use pagesift_gpu::ops::act::{
    activation, activation_inplace, activation_inplace_with_grid_limit, activation_with_grid_limit,
    ActElement,
};
use pagesift_gpu::{Act, ActArgs, DeviceBuffer, Error, Gpu};
use pagesift_tests::{gpu_or_skip, is_emulated};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rand::{Rng, SeedableRng};

/// Allowed error in ulp of the f32 activation value (see the table in the module docs).
fn tolerance_ulps(act: Act) -> f32 {
    match act {
        Act::Identity | Act::Relu | Act::Relu6 | Act::LeakyRelu => 0.0,
        Act::Tanh => 2.0,
        Act::HardSigmoid => 2.0,
        Act::HardSwish | Act::Sigmoid => 3.0,
        Act::Silu | Act::GeluTanh => 4.0,
        Act::Gelu => 6.0,
    }
}

/// Absolute errors up to 2^-124 are accepted (see the module docs).
const ABS_FLOOR: f32 = 4.0 * f32::MIN_POSITIVE;
/// The leaky relu slope the tests use (not the default, to prove it is passed through).
const SLOPE: f32 = 0.125;
/// Elements of poison around every view.
const GUARD: usize = 19;

/// The storage types under test, with their poison pattern and ulp.
trait TestElem: ActElement + std::fmt::Debug {
    /// A NaN bit pattern no kernel produces from finite data.
    fn poison() -> Self;
    /// The raw bits (to compare poison exactly).
    fn bits(self) -> u32;
    /// The storage type's ulp at `|v|` (after rounding `v` to the type).
    fn storage_ulp(v: f32) -> f32;
}

impl TestElem for f32 {
    fn poison() -> f32 {
        f32::from_bits(0x7fc0_dead)
    }
    fn bits(self) -> u32 {
        self.to_bits()
    }
    fn storage_ulp(v: f32) -> f32 {
        ulp_f32(v)
    }
}

impl TestElem for f16 {
    fn poison() -> f16 {
        f16::from_bits(0x7e5a)
    }
    fn bits(self) -> u32 {
        u32::from(self.to_bits())
    }
    fn storage_ulp(v: f32) -> f32 {
        let a = f16::from_f32(v.abs());
        f16::from_bits(a.to_bits() + 1).to_f32() - a.to_f32()
    }
}

impl TestElem for bf16 {
    fn poison() -> bf16 {
        bf16::from_bits(0x7fda)
    }
    fn bits(self) -> u32 {
        u32::from(self.to_bits())
    }
    fn storage_ulp(v: f32) -> f32 {
        let a = bf16::from_f32(v.abs());
        bf16::from_bits(a.to_bits() + 1).to_f32() - a.to_f32()
    }
}

/// One randomly chosen run of a variant.
#[derive(Clone, Debug)]
struct Case {
    len: usize,
    cols: usize,
    /// View offsets (elements) of input, output, residual, bias.
    offsets: [usize; 4],
    /// A grid limit (a small grid sends every thread round the loops many times), or the
    /// operation's own grid.
    max_blocks: Option<u32>,
    seed: u64,
}

fn case_strategy(emulated: bool) -> impl Strategy<Value = Case> {
    let small = prop::sample::select(vec![0usize, 1, 2, 3, 5, 7, 13, 31, 97, 257, 1021, 4099]);
    // On the emulated device, a few lengths past 8K: with a one-block grid they are the shortest
    // that reach the four-vector loop of the 8-lane (f16 / bf16) kernels.
    let len = if emulated {
        prop_oneof![2 => small, 1 => prop::sample::select(vec![8209usize, 16411])].boxed()
    } else {
        prop_oneof![1 => Just((1usize << 20) + 7), 2 => small, 1 => 1usize..200_000].boxed()
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
    (len, cols, offsets, max_blocks, any::<u64>()).prop_map(
        |(len, cols, offsets, max_blocks, seed)| Case {
            len,
            cols,
            offsets,
            max_blocks,
            seed,
        },
    )
}

fn random_vec<T: ActElement>(rng: &mut impl Rng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    (0..n).map(|_| T::from_f32(rng.gen_range(lo..hi))).collect()
}

/// `len` elements at `offset` inside a buffer of `GUARD` poison on both sides.
fn padded<T: TestElem>(data: &[T], offset: usize) -> Vec<T> {
    let mut v = vec![T::poison(); offset + data.len() + GUARD];
    v[offset..offset + data.len()].copy_from_slice(data);
    v
}

fn run_case<T: TestElem>(
    gpu: &Gpu,
    act: Act,
    bias_on: bool,
    res_on: bool,
    inplace: bool,
    c: &Case,
) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("device error: {e}"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(c.seed);
    let n = c.len;
    let cols = c.cols;
    let x: Vec<T> = random_vec(&mut rng, n, -8.0, 8.0);
    let bias: Vec<T> = random_vec(&mut rng, cols, -1.0, 1.0);
    let res: Vec<T> = random_vec(&mut rng, n, -4.0, 4.0);
    let [ox, oy, or, ob] = c.offsets;
    let oy = if inplace { ox } else { oy };

    let x_buf = DeviceBuffer::from_host(gpu, &padded(&x, ox)).map_err(fail)?;
    let b_buf = DeviceBuffer::from_host(gpu, &padded(&bias, ob)).map_err(fail)?;
    let r_buf = DeviceBuffer::from_host(gpu, &padded(&res, or)).map_err(fail)?;
    let mut y_buf =
        DeviceBuffer::from_host(gpu, &vec![T::poison(); oy + n + GUARD]).map_err(fail)?;
    let b_view = b_buf.slice(ob..ob + cols).map_err(fail)?;
    let r_view = r_buf.slice(or..or + n).map_err(fail)?;
    let mut args = ActArgs::new(act).with_slope(SLOPE);
    if bias_on {
        args = args.with_bias(b_view, cols);
    }
    if res_on {
        args = args.with_residual(r_view);
    }
    let stream = gpu.default_stream();
    let out = if inplace {
        let mut data = DeviceBuffer::from_host(gpu, &padded(&x, ox)).map_err(fail)?;
        let mut view = data.slice_mut(ox..ox + n).map_err(fail)?;
        activation_inplace_with_grid_limit(&stream, &args, &mut view, c.max_blocks)
            .map_err(fail)?;
        stream.synchronize().map_err(fail)?;
        data.to_host().map_err(fail)?
    } else {
        let x_view = x_buf.slice(ox..ox + n).map_err(fail)?;
        let mut y_view = y_buf.slice_mut(oy..oy + n).map_err(fail)?;
        activation_with_grid_limit(&stream, &args, &x_view, &mut y_view, c.max_blocks)
            .map_err(fail)?;
        stream.synchronize().map_err(fail)?;
        y_buf.to_host().map_err(fail)?
    };

    // Nothing outside the view was touched.
    for (i, v) in out.iter().enumerate() {
        if (i < oy || i >= oy + n) && v.bits() != T::poison().bits() {
            return Err(TestCaseError::fail(format!(
                "element {i} outside the view [{oy}, {}) was overwritten: {v:?}",
                oy + n
            )));
        }
    }
    let tol = tolerance_ulps(act);
    let mut bad = Vec::new();
    for i in 0..n {
        let xv = x[i].to_f32();
        let v = if bias_on {
            xv + bias[i % cols].to_f32()
        } else {
            xv
        };
        let a = act_f32(act, SLOPE, v);
        let want = if res_on { a + res[i].to_f32() } else { a };
        let got_t = out[oy + i];
        let got = got_t.to_f32();
        let ok = if tol == 0.0 {
            got_t.bits() == T::from_f32(want).bits() || (got == 0.0 && want == 0.0)
        } else {
            let f32_allow = tol * ulp_f32(a) + if res_on { ulp_f32(want) } else { 0.0 } + ABS_FLOOR;
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

/// Every bias / residual / in-place combination of one activation and storage type.
fn check_variant<T: TestElem>(act: Act) {
    let name = format!("act_gpu::{}_{}", act.name(), T::NAME);
    let Some(gpu) = gpu_or_skip(&name) else {
        return;
    };
    let emulated = is_emulated(&gpu);
    for bias_on in [false, true] {
        for res_on in [false, true] {
            for inplace in [false, true] {
                let cases = if emulated { 2 } else { 6 };
                let mut runner = TestRunner::new(Config {
                    cases,
                    failure_persistence: None,
                    ..Config::default()
                });
                let result = runner.run(&case_strategy(emulated), |c| {
                    run_case::<T>(&gpu, act, bias_on, res_on, inplace, &c)
                });
                if let Err(e) = result {
                    panic!("{name} bias={bias_on} residual={res_on} inplace={inplace}: {e}");
                }
            }
        }
    }
}

macro_rules! variant_tests {
    ($($name:ident => $act:expr),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[test]
            fn f32() {
                check_variant::<f32>($act);
            }
            #[test]
            fn f16() {
                check_variant::<half::f16>($act);
            }
            #[test]
            fn bf16() {
                check_variant::<half::bf16>($act);
            }
        }
    )*};
}

variant_tests! {
    identity => Act::Identity,
    relu => Act::Relu,
    relu6 => Act::Relu6,
    leaky_relu => Act::LeakyRelu,
    gelu => Act::Gelu,
    gelu_tanh => Act::GeluTanh,
    silu => Act::Silu,
    sigmoid => Act::Sigmoid,
    tanh => Act::Tanh,
    hardswish => Act::HardSwish,
    hardsigmoid => Act::HardSigmoid,
}

/// The operations reject every wrong length with the right error, naming the argument, and
/// treat zero length as a no-op.
#[test]
fn ops_reject_bad_lengths() {
    let Some(gpu) = gpu_or_skip("act_gpu::ops_reject_bad_lengths") else {
        return;
    };
    let stream = gpu.default_stream();
    let x = DeviceBuffer::from_host(&gpu, &[1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0]).unwrap();
    let b = DeviceBuffer::from_host(&gpu, &[0.5f32, 0.25, -0.5]).unwrap();
    let r = DeviceBuffer::from_host(&gpu, &[1.0f32; 7]).unwrap();
    let mut y5 = DeviceBuffer::<f32>::alloc(&gpu, 5).unwrap();
    let mut y6 = DeviceBuffer::<f32>::alloc(&gpu, 6).unwrap();
    let bias = b.slice(..).unwrap();

    let e = activation(&stream, &ActArgs::new(Act::Relu), &x, &mut y5).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 6,
                actual: 5,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("output"), "{e}");

    let args = ActArgs::new(Act::Relu).with_bias(bias.slice(..2).unwrap(), 3);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 3,
                actual: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("bias"), "{e}");

    let args = ActArgs::new(Act::Relu).with_residual(r.slice(..).unwrap());
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 6,
                actual: 7,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("residual"), "{e}");
    let e = activation_inplace(&stream, &args, &mut y6).unwrap_err();
    assert!(e.to_string().contains("residual"), "{e}");

    let args = ActArgs::new(Act::Gelu).with_bias(bias.slice(..0).unwrap(), 0);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");

    let args = ActArgs::new(Act::LeakyRelu).with_slope(f32::NAN);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");

    // Zero length: nothing to do, whatever the activation.
    let empty = DeviceBuffer::<f32>::alloc(&gpu, 0).unwrap();
    let mut empty_out = DeviceBuffer::<f32>::alloc(&gpu, 0).unwrap();
    for act in Act::ALL {
        activation(&stream, &ActArgs::new(act), &empty, &mut empty_out).unwrap();
        activation_inplace(
            &stream,
            &ActArgs::new(act).with_bias(bias, 3),
            &mut empty_out,
        )
        .unwrap();
    }
    stream.synchronize().unwrap();
}

/// The operations run on any stream, not only the default one.
#[test]
fn ops_run_on_a_stream_of_their_own() {
    let Some(gpu) = gpu_or_skip("act_gpu::ops_run_on_a_stream_of_their_own") else {
        return;
    };
    let stream = gpu.new_stream().unwrap();
    let n = 1000;
    let host: Vec<f32> = (0..n).map(|i| (i as f32 - 500.0) / 37.0).collect();
    let x = DeviceBuffer::from_host(&gpu, &host).unwrap();
    let mut y = DeviceBuffer::from_host(&gpu, &vec![f32::NAN; n]).unwrap();
    activation(&stream, &ActArgs::new(Act::Relu6), &x, &mut y).unwrap();
    stream.synchronize().unwrap();
    let out = y.to_host().unwrap();
    for (i, (a, b)) in host.iter().zip(&out).enumerate() {
        assert_eq!(*b, a.clamp(0.0, 6.0), "element {i}");
    }
}

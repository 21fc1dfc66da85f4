//! Every activation variant on the device against the CPU reference.
//!
//! One test per activation and storage type (`cargo test gelu_tanh::bf16` picks one); each runs
//! every combination of bias / residual / in-place with proptest-chosen lengths, bias widths,
//! view offsets and data. Outputs live inside larger buffers poisoned with a NaN pattern: every
//! element of the view must be written and nothing outside it touched.
//!
//! The checking logic (case strategy, poisoned buffers, CPU reference, tolerances: see the
//! table in [`pagesift_tests::act_check`]) is shared with the mutant test (`act_mutants`), which
//! shows that it catches broken kernels. Lengths: 0, 1, 3, primes, up to 200 000 and 2^20 + 7 on
//! a real GPU; small ones and two past 8192 on the emulated device.

use pagesift_gpu::ops::act::{activation, activation_inplace};
use pagesift_gpu::{Act, ActArgs, DeviceBuffer, Error};
use pagesift_tests::act_check::{check, launch_op, Lengths, Setup, TestElem};
use pagesift_tests::util::assert_length_mismatch;
use pagesift_tests::{gpu_or_skip, is_emulated};

/// Every bias / residual / in-place combination of one activation and storage type.
fn check_variant<T: TestElem>(act: Act) {
    let name = format!("act_gpu::{}_{}", act.name(), T::DTYPE.name());
    let Some(gpu) = gpu_or_skip(&name) else {
        return;
    };
    let cases = if is_emulated(&gpu) { 2 } else { 6 };
    for setup in Setup::all_forms(act) {
        let r = check::<T>(&gpu, setup, Lengths::for_gpu(&gpu), cases, |s, ops| {
            launch_op(s, act, ops)
        });
        if let Err(f) = r {
            panic!(
                "{name} bias={} residual={} inplace={}: {f}",
                setup.bias, setup.residual, setup.inplace
            );
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
    assert_length_mismatch(&e, 6, 5, "output");

    let args = ActArgs::new(Act::Relu).with_bias(bias.slice(..2).unwrap(), 3);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert_length_mismatch(&e, 3, 2, "bias");

    let args = ActArgs::new(Act::Relu).with_residual(r.slice(..).unwrap());
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert_length_mismatch(&e, 6, 7, "residual");
    let e = activation_inplace(&stream, &args, &mut y6).unwrap_err();
    assert!(e.to_string().contains("residual"), "{e}");

    let args = ActArgs::new(Act::Gelu).with_bias(bias.slice(..0).unwrap(), 0);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    let args = ActArgs::new(Act::LeakyRelu).with_slope(f32::NAN);
    let e = activation(&stream, &args, &x, &mut y6).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

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

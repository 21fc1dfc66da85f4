//! Does the activation property test tell right from wrong? A small activation kernel in the
//! shape of the real one (f32, `y[i] = act(x[i] + bias[i % cols])`, 16-byte vectors with a
//! scalar head and tail, grid-stride loops, the operation's launch geometry), compiled once
//! correct and once per deliberate bug, each run through the same checking logic as the real
//! property test ([`pagesift_tests::act_check`]: random lengths including 0, 1, 3 and primes,
//! random offsets into larger poisoned buffers, data in [-8, 8], the CPU reference and its
//! tolerances, driven by a proptest runner).
//!
//! The correct kernel must pass; every mutant must be caught, and the test prints the minimal
//! failing case the runner shrank to:
//!
//! | mutant         | bug                                                                  |
//! |----------------|----------------------------------------------------------------------|
//! | `OffByOne`     | the scalar tail runs while `k <= n`: writes one element past the end |
//! | `BiasShift`    | the bias column is `(i + 1) % cols`                                  |
//! | `GeluConstant` | gelu-tanh with 0.79 for `sqrt(2 / pi)` (0.7978845...)                |
//! | `SigmoidSign`  | silu as `x * sigmoid(-x)`                                            |
//! | `SkipTail`     | the scalar tail stops at `n` rounded down to a multiple of 4         |
//!
//! Two more tests keep the experiment honest: the shared checks pass the real operations (every
//! activation, operand combination and storage type), and every mutant variant assembles with
//! `ptxas`.
//!
//! Run with `PAGESIFT_GPU_DEVICE=emulated cargo test -p pagesift-tests --test act_mutants --
//! --nocapture` (a real GPU runs it too).

use pagesift_gpu::error;
use pagesift_gpu::ops::act::launch_geometry;
use pagesift_gpu::{ptx_kernel, Act, Error, KernelVariant, Stream};
use pagesift_tests::act_check::{check, launch_op, Failure, Lengths, Operands, Setup, TestElem};
use pagesift_tests::gpu_or_skip;
use pagesift_tests::util::{poisoned_device, random_f32, POISON_BITS};

/// The deliberate bug a variant of [`mutant_act`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// No bug: the reference implementation.
    Original,
    /// The scalar tail loop runs while `k <= n`.
    OffByOne,
    /// The bias column of element `i` is `(i + 1) % cols`.
    BiasShift,
    /// Gelu-tanh with the constant 0.79 in place of `sqrt(2 / pi)`.
    GeluConstant,
    /// Silu computed as `x * sigmoid(-x)`.
    SigmoidSign,
    /// The scalar tail stops at `n` rounded down to a multiple of 4.
    SkipTail,
}

ptx_kernel! {
    #[path = "../pagesift-gpu/src/kernels/lib/act_math.rs"]
    mod math;

    /// `y[i] = act(x[i] + bias[i % cols])` for `i < n`, with the bug `BUG`: a scalar head of
    /// `head` elements, `nvec` 16-byte vectors, a scalar tail; grid-stride loops.
    #[variants((ACT, BUG) in [
        (Relu, Original), (GeluTanh, Original), (Silu, Original),
        (Relu, OffByOne), (Silu, BiasShift), (GeluTanh, GeluConstant), (Silu, SigmoidSign),
        (Silu, SkipTail)
    ])]
    #[launch(block = 256)]
    pub fn mutant_act<const ACT: Act, const BUG: Bug>(
        x: &[f32],
        bias: &[f32],
        y: &mut [f32],
        n: u64,
        head: u32,
        nvec: u64,
        cols: u32,
    ) {
        let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
        let nt = (grid_dim_x() * block_dim_x()) as u64;
        let h = head as u64;
        let cols64 = cols as u64;
        let mut j = t;
        while j < nvec {
            let e = h + 4 * j;
            let v = x.load4_nc(e);
            let mut o = [0.0f32; 4];
            #[unroll]
            for l in 0..4 {
                let b = bias.load_nc(column::<BUG>(e + l as u64, cols64));
                o[l] = act::<ACT, BUG>(v[l] + b);
            }
            y.store4(e, o);
            j += nt;
        }
        let mut k = t;
        while k < h {
            y[k] = act::<ACT, BUG>(x.load_nc(k) + bias.load_nc(column::<BUG>(k, cols64)));
            k += nt;
        }
        k = h + 4 * nvec + t;
        let mut end = n;
        if skips_tail::<BUG>() {
            end = n / 4 * 4;
        }
        while in_bounds::<BUG>(k, end) {
            y[k] = act::<ACT, BUG>(x.load_nc(k) + bias.load_nc(column::<BUG>(k, cols64)));
            k += nt;
        }
    }

    /// The bias column of element `i`.
    fn column<const B: Bug>(i: u64, cols: u64) -> u64 {
        match B {
            Bug::BiasShift => (i + 1) % cols,
            _ => i % cols,
        }
    }

    /// The loop condition of the scalar tail.
    fn in_bounds<const B: Bug>(k: u64, n: u64) -> bool {
        match B {
            Bug::OffByOne => k <= n,
            _ => k < n,
        }
    }

    /// Whether the tail stops short.
    fn skips_tail<const B: Bug>() -> bool {
        match B {
            Bug::SkipTail => true,
            _ => false,
        }
    }

    /// The activation (relu, gelu-tanh, silu): the real kernels' math (their helper library),
    /// or a deliberately wrong formula built from the same helpers.
    fn act<const A: Act, const B: Bug>(x: f32) -> f32 {
        match B {
            // gelu-tanh = x · sigmoid(2u), 2u = x (2c + 2c · 0.044715 x²), with c = 0.79.
            Bug::GeluConstant => math::x_sigmoid_exact(x, x * (1.58 + 0.0706497 * (x * x))),
            Bug::SigmoidSign => math::x_sigmoid_exact(x, -x),
            _ => math::act::<A>(x, 0.01),
        }
    }
}

/// The compiled variant of `mutant_act` for (`act`, `bug`).
fn variant(act: Act, bug: Bug) -> pagesift_gpu::Result<&'static KernelVariant> {
    let (a, b) = (format!("{act:?}"), format!("{bug:?}"));
    mutant_act::VARIANTS
        .iter()
        .find(|v| {
            v.consts.iter().any(|(k, val)| *k == "ACT" && *val == a)
                && v.consts.iter().any(|(k, val)| *k == "BUG" && *val == b)
        })
        .ok_or_else(|| {
            pagesift_gpu::__private::variant_not_compiled("mutant_act", format!("{a}, {b}"))
        })
}

/// Launches `mutant_act` as the real operation launches its kernel: the same split into head,
/// vectors and tail and the same grid ([`Geometry`]); nothing for zero length.
fn launch_mutant(
    stream: &Stream,
    act: Act,
    bug: Bug,
    mut ops: Operands<'_, f32>,
) -> pagesift_gpu::Result<()> {
    let (Some(x), Some(bias)) = (ops.input, ops.bias) else {
        return Err(Error::from(error::InvalidArgument {
            op: "mutant_act",
            message: "needs an input and a bias".into(),
        }));
    };
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let ptrs = [x.device_ptr(), ops.output.device_ptr(), x.device_ptr()];
    let geo = launch_geometry(stream, variant(act, bug)?, act, 4, &ptrs, n, ops.max_blocks)?;
    mutant_act::launch(
        stream,
        geo.cfg,
        act,
        bug,
        &x,
        &bias,
        &mut ops.output,
        n as u64,
        geo.head,
        geo.nvec,
        ops.cols as u32,
    )
}

/// Random cases per kernel. The least visible bug (`SkipTail`: only aligned views whose length
/// leaves a scalar tail show it) is caught by about one case in three, so 48 cases miss it with
/// a probability below 10^-9; the test prints at which case each mutant was first caught.
const CASES: u32 = 48;

/// Held by every test here that runs kernels on the device's default stream: a mutant's
/// fault is reported to the next call that waits on that stream, which must be the mutant's
/// own check, not a test running beside it on another thread.
fn default_stream_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the shared checks on `mutant_act` compiled with (`act`, `bug`): `None` when the test
/// `name` skips (no device), else the checks' verdict.
fn check_mutant(name: &str, act: Act, bug: Bug) -> Option<Result<(), Failure>> {
    let _one_at_a_time = default_stream_lock();
    let gpu = gpu_or_skip(name)?;
    Some(check::<f32>(
        &gpu,
        Setup::with_bias(act),
        Lengths::Small,
        CASES,
        |s, ops| launch_mutant(s, act, bug, ops),
    ))
}

/// The correct kernel passes for each of its activations.
fn original_passes(act: Act) {
    let name = format!("act_mutants::original_{act:?}");
    match check_mutant(&name, act, Bug::Original) {
        None => {}
        Some(Ok(())) => println!("{name}: {CASES} cases passed"),
        Some(Err(f)) => panic!("{name}: the correct kernel fails, {f}"),
    }
}

/// The mutant `bug` (compiled with `act`) is caught; prints the minimal failing case.
fn mutant_is_caught(act: Act, bug: Bug) {
    let name = format!("act_mutants::{bug:?}");
    match check_mutant(&name, act, bug) {
        None => {}
        Some(Ok(())) => panic!("{name} ({act:?}): the mutant passed {CASES} cases undetected"),
        Some(Err(f)) => {
            assert!(f.case.is_some(), "{name}: the runner aborted: {}", f.reason);
            assert!(
                !f.reason.contains("device error")
                    || f.reason.contains("out of bounds")
                    || f.reason.contains("the access was skipped"),
                "{name}: a device error other than an out-of-bounds access: {}",
                f.reason
            );
            println!("{name} ({act:?}) caught within {CASES} cases, {f}");
        }
    }
}

/// One test function per `name => call`.
macro_rules! kernel_tests {
    ($($name:ident => $call:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            $call;
        }
    )*};
}

mod original {
    use super::*;

    kernel_tests! {
        relu => original_passes(Act::Relu),
        gelu_tanh => original_passes(Act::GeluTanh),
        silu => original_passes(Act::Silu),
    }
}

mod caught {
    use super::*;

    kernel_tests! {
        off_by_one => mutant_is_caught(Act::Relu, Bug::OffByOne),
        bias_shift => mutant_is_caught(Act::Silu, Bug::BiasShift),
        gelu_constant => mutant_is_caught(Act::GeluTanh, Bug::GeluConstant),
        sigmoid_sign => mutant_is_caught(Act::Silu, Bug::SigmoidSign),
        skip_tail => mutant_is_caught(Act::Silu, Bug::SkipTail),
    }
}

/// The shared checking logic also passes the real operations (every activation and operand
/// combination, f32, f16 and bf16), so it is the real test's logic and not a weaker one.
/// The off-by-one mutant through its safe wrapper: the write one past `n` is a bounds-check
/// failure (`Error::KernelFault` naming `y`, element `n` of `n`), skipped, so the element after
/// the output view (a guard, poisoned) keeps its value, and every element of the view is right.
#[test]
fn off_by_one_through_the_safe_wrapper_faults_and_corrupts_nothing() {
    let Some(gpu) = gpu_or_skip("act_mutants::off_by_one_faults_and_corrupts_nothing") else {
        return;
    };
    // A stream of its own: its fault is reported to this test alone, whatever runs beside it.
    let stream = gpu.new_stream().expect("stream");
    let (n, cols) = (1003usize, 7usize);
    // The input is longer than `n`, so that the mutant's one read past `n` stays in bounds and
    // its write past the output view is the fault.
    let xs = random_f32(n + 16, 21, -8.0..8.0);
    let x = pagesift_gpu::DeviceBuffer::from_host(&gpu, &xs).expect("x");
    let bias_data = random_f32(cols, 22, -1.0..1.0);
    let bias = pagesift_gpu::DeviceBuffer::from_host(&gpu, &bias_data).expect("bias");
    let mut out = poisoned_device(&gpu, n + 16).expect("out");
    {
        let mut y = out.slice_mut(..n).expect("view");
        let ptrs = [x.device_ptr(), y.device_ptr(), x.device_ptr()];
        let v = variant(Act::Relu, Bug::OffByOne).expect("variant");
        let geo = launch_geometry(&stream, v, Act::Relu, 4, &ptrs, n, None).expect("geometry");
        mutant_act::launch(
            &stream,
            geo.cfg,
            Act::Relu,
            Bug::OffByOne,
            &x,
            &bias,
            &mut y,
            n as u64,
            geo.head,
            geo.nvec,
            cols as u32,
        )
        .expect("the launch succeeds");
    }
    match stream.synchronize() {
        Err(Error::KernelFault(f)) if !f.misaligned => {
            let error::KernelFault {
                kernel,
                param,
                index,
                len,
                elements,
                ..
            } = *f;
            assert_eq!(kernel, "mutant_act[ACT=Relu,BUG=OffByOne]");
            assert_eq!(
                (param.as_str(), index, len, elements),
                ("y", n as u64, n as u64, 1)
            );
        }
        other => panic!("expected a KernelFault, got {other:?}"),
    }
    let got = out.to_host().expect("out");
    for i in 0..n {
        let want = (xs[i] + bias_data[i % cols]).max(0.0);
        assert_eq!(got[i].to_bits(), want.to_bits(), "element {i}");
    }
    assert!(
        got[n..].iter().all(|v| v.to_bits() == POISON_BITS),
        "the guard after the view changed"
    );
}

#[test]
fn real_operations_pass_the_shared_checks() {
    let _one_at_a_time = default_stream_lock();
    let Some(gpu) = gpu_or_skip("act_mutants::real_operations_pass_the_shared_checks") else {
        return;
    };
    fn all<T: TestElem>(gpu: &pagesift_gpu::Gpu, cases: u32) {
        for act in Act::ALL {
            for setup in Setup::all_forms(act) {
                let r = check::<T>(gpu, setup, Lengths::Small, cases, |s, ops| {
                    launch_op(s, act, ops)
                });
                if let Err(f) = r {
                    panic!("{} {setup:?}: {f}", T::DTYPE.name());
                }
            }
        }
    }
    all::<f32>(&gpu, 2);
    all::<half::f16>(&gpu, 1);
    all::<half::bf16>(&gpu, 1);
    println!("act_mutants::real_operations: 11 activations x 8 combinations x 3 types passed");
}

/// Every variant of `mutant_act` assembles with NVIDIA's `ptxas` for its target (so the
/// mutants also run on a real GPU; see [`pagesift_tests::util::assemble_every_variant`]).
#[test]
fn mutant_ptx_assembles() {
    pagesift_tests::util::assemble_every_variant(
        "act_mutants::mutant_ptx_assembles",
        mutant_act::VARIANTS,
    );
}

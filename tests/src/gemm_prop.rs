//! GEMM cases as a proptest strategy, and a runner that checks a kernel on them and returns the
//! shrunk failing case: random M, N, K (a third of each below 9, the rest up to the limits of
//! [`Sizes`]), gaps between rows, batches with gaps between matrices, misaligned views, every
//! activation, alpha and beta, bias and residual present or not; checked by
//! [`crate::gemm_check::check_typed`] (poisoned C, the f64 reference, the tolerance formula).
//!
//! The runner keeps no failure file and takes at most 256 shrinking steps; `PROPTEST_RNG_SEED`
//! and the other `PROPTEST_*` variables apply.

use std::cell::Cell;

use pagesift_gpu::ops::gemm::Kernel;
use pagesift_gpu::{Act, ActElement, BLayout, Gemm, Gpu, Precision};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use crate::gemm_check::{check_typed, Case, Sizes};

/// A size of 1 ..= `max`: a third of them below 9.
fn dim(max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1 => 1..=max.min(8), 2 => 1..=max]
}

/// 0 (half the time) or 1..5 elements of gap.
fn gap() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..1, 1usize..5]
}

/// Random cases of `layout` at `precision` (M at most `max_m`).
pub fn cases(
    layout: BLayout,
    precision: Precision,
    sizes: Sizes,
    max_m: usize,
) -> impl Strategy<Value = Case> {
    let shape = (
        dim(sizes.max_mn.min(max_m)),
        dim(sizes.max_mn),
        dim(sizes.max_k),
    );
    let gaps = prop::array::uniform4(gap());
    let batch = (1..=sizes.max_batch, prop::array::uniform4(gap()));
    let epilogue = (
        0..Act::ALL.len(),
        prop_oneof![Just(1.0f32), -2.0f32..2.0],
        prop_oneof![Just(0.0f32), -1.5f32..1.5],
        any::<bool>(),
        any::<bool>(),
    );
    let offsets = prop::array::uniform4(prop_oneof![0usize..1, 1usize..4]);
    (shape, gaps, batch, epilogue, offsets, any::<u64>()).prop_map(
        move |((m, n, k), g4, (batch, bgap), (act, alpha, beta, bias, residual), offsets, seed)| {
            let mut g = Gemm::new(m, n, k, layout);
            g = g
                .with_lds(k + g4[0], g.ldb + g4[1], n + g4[2])
                .with_ldr(n + g4[3]);
            if batch > 1 {
                let sb = match layout {
                    BLayout::KN => k * g.ldb,
                    BLayout::NK => n * g.ldb,
                };
                g = g.with_batch(
                    batch,
                    m * g.lda + bgap[0],
                    sb + bgap[1],
                    m * g.ldc + bgap[2],
                );
                g.stride_r = m * g.ldr + bgap[3];
            }
            g = g
                .with_act(Act::ALL[act])
                .with_scale(alpha, beta)
                .with_precision(precision);
            Case {
                g,
                bias,
                residual,
                offsets,
                seed,
            }
        },
    )
}

/// Checks `kernel` with inputs `T` and output `O` on `runs` random cases of
/// [`cases`]; the failing case shrunk as far as the runner got, with its message.
///
/// # Errors
/// The shrunk case and what was wrong with it (or why the runner stopped).
pub fn check_cases<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    kernel: Kernel,
    strategy: impl Strategy<Value = Case>,
    runs: u32,
) -> Result<(), String> {
    let mut runner = TestRunner::new(Config {
        cases: runs,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    });
    let ran = Cell::new(0u32);
    let result = runner.run(&strategy, |case| {
        ran.set(ran.get() + 1);
        check_typed::<T, O>(gpu, &case, kernel).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, case)) => Err(format!(
            "after {} runs, shrunk to {case:?}: {reason}",
            ran.get()
        )),
        Err(TestError::Abort(reason)) => Err(format!("the runner stopped: {reason}")),
    }
}

//! Does the GEMM test tell right from wrong? A tensor-core kernel in the shape of `gemm_mma`
//! (f32 inputs in TF32, f32 out, one 64 × 64 tile of 2 × 2 warps, K steps of 32 in a
//! `STAGES`-deep `cp.async` pipeline, both B layouts), built from the real kernel's pieces
//! (the helper library `pagesift-gpu/src/kernels/lib/gemm_core.rs`: the loader `tc_load`, the
//! step `tc_step`, the epilogue `acc_to_shared` / `write_rows`), compiled once correct and
//! once per deliberate bug, each run through the same checks as the real kernels' tests
//! ([`pagesift_tests::gemm_check`]: random shapes that are multiples of no tile, gaps between
//! rows, batches, misaligned views, every epilogue, C poisoned, the f64 reference and the
//! TF32 tolerance).
//!
//! The correct kernel must pass; every mutant must be caught (on a GPU, `SkippedWait` is a
//! race that the hardware need not show: there the test reports what it saw), and the test
//! prints the case and what caught it:
//!
//! | mutant        | bug                                                                | caught by |
//! |---------------|--------------------------------------------------------------------|-----------|
//! | `EdgeMask`    | the loads' K edge one short (`K - 1`: the last index of K where the loaders take its end): the edge chunks' source size drops the last element of K, which the copies zero-fill in A and B | wrong values: every output misses `a[i][K-1] · b[K-1][j]` |
//! | `SkippedWait` | the main loop's `cp_async_wait(STAGES - 2)` before the barrier left out: a step's buffer is read before its copies are known to have landed | the emulated device: "cp.async not complete" (it completes copies only at wait points); on a GPU, wrong values where the copies land after the reads (on the H200 none in 40 cases with B `[K, N]`) |
//! | `RowPitch`    | the padded-layout mutant (our padded rows' analogue of a wrong swizzle): the fragment reads address the stage rows at the unpadded pitch `BK` while the loader pads them to `BK + BK / 8` | the emulated device: "uninitialized shared memory read" (the padding no copy writes); on a GPU, wrong values |
//!
//! Where a mutant differs from the real kernel: `EdgeMask` and `SkippedWait` are changes to
//! this kernel's own body (the K edge it hands to `tc_load`, the wait in its loop), which is
//! written here in the shape of `gemm_mma`'s; `RowPitch` passes another pitch to
//! `tc_step`, whose `LDK` parameter (the pitch `tc_load` wrote, which `gemm_mma` passes as
//! `BK + BK / 8`) is the one hook the library has for it. The loader, the math and the
//! epilogue are the library's, not copies.
//!
//! Why not the loader's row test off by one (`r0 + r <= rows`) or a source size past the
//! edge: such a copy reads past a matrix. Past the last matrix of the batch that is past the
//! buffer, where the checked copy faults and is skipped (the emulated device then reports the
//! bytes it left unwritten); inside the buffer it only adds terms that the other operand's
//! zero-filled edge multiplies by 0, or outputs that are not written (an extra row of A, an
//! extra column of B). Only the bounds check would catch it, never the values; a mask that
//! keeps too little is what the outputs show.
//!
//! The correct kernel also passes a few fixed shapes, and every variant assembles with
//! `ptxas`. Run with `PAGESIFT_GPU_DEVICE=emulated cargo
//! test -p pagesift-tests --test gemm_mutants -- --nocapture` (a real GPU runs it too).

use pagesift_gpu::ops::gemm::{launch_params, mma_shared_bytes, Tile};
use pagesift_gpu::{
    ptx_kernel, Act, BLayout, DeviceRead, DeviceSlice, DeviceSliceMut, Error, Gemm, Gpu,
    LaunchConfig, Precision, Stream,
};
use pagesift_tests::gemm_check::{check_with, Case, Sizes};
use pagesift_tests::{gpu_or_skip, is_emulated};

/// The deliberate bug a variant of [`mutant_gemm`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// No bug: the kernel as `gemm_mma` is.
    Original,
    /// The loads' K edge is `K - 1`.
    EdgeMask,
    /// No `cp_async_wait` before the main loop's barrier.
    SkippedWait,
    /// The fragment reads at the unpadded row pitch `BK` (the padded-layout mutant).
    RowPitch,
}

ptx_kernel! {
    #[path = "../pagesift-gpu/src/kernels/lib/act_math.rs"]
    mod math;
    #[path = "../pagesift-gpu/src/kernels/lib/gemm_core.rs"]
    mod core;
    use pagesift_gpu::kernels::gemm::GemmParams;

    /// The tile: `BM × BN` outputs of `WM × WN` warps, K steps of `BK` (128 bytes of f32).
    const BM: u32 = 64;
    const BN: u32 = 64;
    const WM: u32 = 2;
    const WN: u32 = 2;
    const BK: u32 = 32;

    /// `C = act(alpha · A·B + beta · C + bias[col]) + residual` as `gemm_mma` computes it for
    /// f32 inputs in TF32 (one slice of K, grid `(⌈N / BN⌉, ⌈M / BM⌉, batch)`), with the bug
    /// `BUG`.
    ///
    /// # Safety
    ///
    /// As `gemm_mma`'s: `p` describes operands that lie inside `a` and `b` (a validated
    /// `Gemm`, [`launch_params`]), the grid's z extent is the batch.
    #[target(sm_80)]
    #[variants(BUG in [Original, EdgeMask, SkippedWait, RowPitch], BT in [false, true])]
    #[launch(block = WM * WN * 32, max_regs = 128)]
    pub fn mutant_gemm<const BUG: Bug, const BT: bool>(
        p: GemmParams,
        a: &[f32],
        b: &[f32],
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
    ) {
        let a_s: Shared<[f32; core::STAGES * BM * (BK + BK / 8)]> = dyn_shared(0);
        let b_s: Shared<[f32; core::STAGES * BN * (BK + BK / 8)]> = dyn_shared(core::STAGES * BM * core::TC_ROW);
        let t_s: Shared<[f32; BM * (BN + 4)]> = dyn_shared(0);
        let z = block_idx_z() as u64;
        let m0 = block_idx_y() * BM;
        let n0 = block_idx_x() * BN;
        let a_off = z * p.batch_a;
        let b_off = z * p.batch_b;
        let tid = thread_idx_x();
        let mut kend = p.k;
        if BUG == Bug::EdgeMask {
            kend = p.k - 1;
        }
        let mut acc = [[0.0f32; 4]; (BM / WM / 16) * (BN / WN / 8)];
        if BUG == Bug::RowPitch {
            acc = core::tc_mainloop::<f32, BM, BN, WM, WN, BT, BK, false, BK, true>(a_s, b_s, a_s, b_s, a, b, p, a_off, b_off, m0, n0, 0, kend, tid);
        } else if BUG == Bug::SkippedWait {
            acc = core::tc_mainloop::<f32, BM, BN, WM, WN, BT, BK, false, { BK + BK / 8 }, false>(a_s, b_s, a_s, b_s, a, b, p, a_off, b_off, m0, n0, 0, kend, tid);
        } else {
            acc = core::tc_mainloop::<f32, BM, BN, WM, WN, BT, BK, false, { BK + BK / 8 }, true>(a_s, b_s, a_s, b_s, a, b, p, a_off, b_off, m0, n0, 0, kend, tid);
        }
        cp_async_wait_all();
        sync_threads();
        core::acc_to_shared::<BM, BN, WM, WN>(acc, t_s);
        sync_threads();
        core::write_rows::<f32, BM, BN, { BN + 4 }, { WM * WN * 32 }, 4, { BM * (BN + 4) }>(t_s, 0, p, bias, res, c, None, z, z, m0, n0, tid);
    }
}

/// Launches `mutant_gemm` with `bug` as the operation launches `gemm_mma`: the shape
/// validated, the parameters of [`launch_params`], one block per `BM × BN` tile and matrix,
/// the tile's dynamic shared memory.
#[allow(clippy::too_many_arguments)]
fn launch_mutant(
    bug: Bug,
    stream: &Stream,
    g: &Gemm,
    a: &DeviceSlice<'_, f32>,
    b: &DeviceSlice<'_, f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    res: Option<&dyn DeviceRead<f32>>,
    c: &mut DeviceSliceMut<'_, f32>,
) -> pagesift_gpu::Result<()> {
    g.validate(
        "gemm_mutants",
        a.len(),
        b.len(),
        c.len(),
        bias.map(|x| x.len()),
        res.map(|x| x.len()),
    )?;
    if g.is_empty() {
        return Ok(());
    }
    let p: GemmParams = launch_params(g, a, b, res, &*c);
    let grid = [
        (g.n as u32).div_ceil(BN),
        (g.m as u32).div_ceil(BM),
        g.batch as u32,
    ];
    let shared = mma_shared_bytes(Tile { bm: BM, bn: BN }, false);
    let cfg = LaunchConfig::grid(grid).with_shared_mem(shared);
    let bt = g.b_layout == BLayout::NK;
    // SAFETY: `p` comes from `g`, validated against the views just above; the grid's z extent
    // is the batch.
    unsafe { mutant_gemm::launch(stream, cfg, bug, bt, p, a, b, bias, res, c) }
}

/// What a case showed.
enum Outcome {
    Passed,
    /// An output (or an element outside the outputs) was wrong.
    WrongValue(String),
    /// The device reported an error.
    Device(Error),
}

/// Runs `case` (its GEMM in TF32) through the mutant `bug`.
fn run(gpu: &Gpu, bug: Bug, case: &Case) -> Outcome {
    let r = check_with::<f32, f32>(gpu, case, |s, g, a, b, bias, res, c| {
        launch_mutant(bug, s, g, a, b, bias, res, c)
    });
    match r {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(wrong)) => Outcome::WrongValue(wrong),
        Err(e) => Outcome::Device(e),
    }
}

/// Random cases per kernel and layout (a mutant stops at the first that catches it): small
/// on the emulated device (M and N up to 70, two tiles with edges each way; K up to 130, so
/// that the pipeline reuses its buffers), as the real kernels' tests on a GPU.
fn cases(gpu: &Gpu) -> (u32, Sizes) {
    if is_emulated(gpu) {
        let sizes = Sizes {
            max_mn: 70,
            max_k: 130,
            max_batch: 2,
        };
        (12, sizes)
    } else {
        (40, Sizes::for_gpu(gpu))
    }
}

/// The random case `i` of `layout` in TF32, the same for every mutant.
fn case(i: u32, layout: BLayout, sizes: Sizes) -> Case {
    let seed = 0x6d75_7400 ^ u64::from(i) << 8 ^ (layout == BLayout::NK) as u64;
    let mut c = Case::random(seed, layout, sizes, usize::MAX);
    c.g = c.g.with_precision(Precision::Tf32);
    c
}

const LAYOUTS: [BLayout; 2] = [BLayout::KN, BLayout::NK];

#[test]
fn the_original_passes() {
    let Some(gpu) = gpu_or_skip("gemm_mutants::the_original_passes") else {
        return;
    };
    let (n, sizes) = cases(&gpu);
    for layout in LAYOUTS {
        for i in 0..n {
            let c = case(i, layout, sizes);
            match run(&gpu, Bug::Original, &c) {
                Outcome::Passed => {}
                Outcome::WrongValue(w) => panic!("the correct kernel fails: {c:?}: {w}"),
                Outcome::Device(e) => panic!("the correct kernel fails: {c:?}: {e}"),
            }
        }
        // Fixed shapes: one element, primes past two tiles with K past the pipeline's
        // buffers, whole tiles with aligned rows (the copies without edge tests).
        for (m, n, k, offsets) in [
            (1, 1, 1, [1, 0, 3, 2]),
            (67, 61, 131, [1, 0, 3, 2]),
            (64, 128, 96, [0; 4]),
        ] {
            let c = Case {
                g: Gemm::new(m, n, k, layout)
                    .with_act(Act::Gelu)
                    .with_precision(Precision::Tf32),
                bias: true,
                residual: true,
                offsets,
                seed: (m * 1000 + n) as u64,
            };
            match run(&gpu, Bug::Original, &c) {
                Outcome::Passed => {}
                Outcome::WrongValue(w) => panic!("the correct kernel fails: {c:?}: {w}"),
                Outcome::Device(e) => panic!("the correct kernel fails: {c:?}: {e}"),
            }
        }
    }
    println!(
        "gemm_mutants::the_original_passes: {} random and 3 fixed cases per B layout",
        n
    );
}

/// Runs the cases through mutant `bug` until one catches it, in each B layout, and returns
/// what caught it (the case's description and the outcome); panics where every case passes.
fn caught(gpu: &Gpu, name: &str, bug: Bug) -> Vec<(BLayout, String, Outcome)> {
    let (n, _) = cases(gpu);
    let mut found = Vec::new();
    for layout in LAYOUTS {
        match first_failure(gpu, bug, layout) {
            Some((case, o)) => {
                report(name, layout, &case, &o);
                found.push((layout, case, o));
            }
            None => panic!("{name}: the mutant passed {n} cases of {layout:?} undetected"),
        }
    }
    found
}

/// The first of the cases of `layout` that mutant `bug` fails (its description and the
/// outcome), if any.
fn first_failure(gpu: &Gpu, bug: Bug, layout: BLayout) -> Option<(String, Outcome)> {
    let (n, sizes) = cases(gpu);
    (0..n).find_map(|i| {
        let c = case(i, layout, sizes);
        match run(gpu, bug, &c) {
            Outcome::Passed => None,
            o => Some((format!("case {i}: {:?}", c.g), o)),
        }
    })
}

/// Prints what caught a mutant.
fn report(name: &str, layout: BLayout, case: &str, o: &Outcome) {
    match o {
        Outcome::WrongValue(w) => println!("{name} ({layout:?}): {case}: a wrong value: {w}"),
        Outcome::Device(e) => println!("{name} ({layout:?}): {case}: the device: {e}"),
        Outcome::Passed => unreachable!("only failures are kept"),
    }
}

/// Whether `e` is the emulated device's report of the check `check`.
fn emulator_reports(e: &Error, check: &str) -> bool {
    matches!(e, Error::Emulator(em) if em.message.contains(check))
}

#[test]
fn edge_mask_is_caught_by_wrong_values() {
    let name = "gemm_mutants::edge_mask_is_caught_by_wrong_values";
    let Some(gpu) = gpu_or_skip(name) else {
        return;
    };
    for (layout, case, o) in caught(&gpu, name, Bug::EdgeMask) {
        assert!(
            matches!(o, Outcome::WrongValue(_)),
            "{layout:?} {case}: caught, but not by a wrong value"
        );
    }
}

#[test]
fn skipped_wait_is_caught() {
    let name = "gemm_mutants::skipped_wait_is_caught";
    let Some(gpu) = gpu_or_skip(name) else {
        return;
    };
    if is_emulated(&gpu) {
        for (layout, case, o) in caught(&gpu, name, Bug::SkippedWait) {
            assert!(
                matches!(&o, Outcome::Device(e) if emulator_reports(e, "cp.async not complete")),
                "{layout:?} {case}: caught, but not by the emulated device's cp.async check"
            );
        }
        // Whole aligned tiles with whole K steps: the fast main loop skips its waits too.
        for layout in LAYOUTS {
            let c = Case {
                g: Gemm::new(64, 128, 96, layout).with_precision(Precision::Tf32),
                bias: false,
                residual: false,
                offsets: [0; 4],
                seed: 7,
            };
            let o = run(&gpu, Bug::SkippedWait, &c);
            assert!(
                matches!(&o, Outcome::Device(e) if emulator_reports(e, "cp.async not complete")),
                "{layout:?} whole tiles: the fast loop's skipped wait is not caught by the emulated device's cp.async check"
            );
        }
        return;
    }
    // On a GPU the skipped wait is a race: the copies may land before the reads, in every
    // case. What the hardware showed is reported; it shows nothing that a device error
    // could name (the kernel reads only its own shared memory).
    let (n, _) = cases(&gpu);
    for layout in LAYOUTS {
        match first_failure(&gpu, Bug::SkippedWait, layout) {
            Some((case, Outcome::Device(e))) => panic!("{layout:?} {case}: a device error: {e}"),
            Some((case, o)) => report(name, layout, &case, &o),
            None => println!(
                "{name} ({layout:?}): not observed on this GPU in {n} cases (the race the emulated device detects at every wait)"
            ),
        }
    }
}

#[test]
fn row_pitch_is_caught() {
    let name = "gemm_mutants::row_pitch_is_caught";
    let Some(gpu) = gpu_or_skip(name) else {
        return;
    };
    for (layout, case, o) in caught(&gpu, name, Bug::RowPitch) {
        match &o {
            Outcome::Device(e) if is_emulated(&gpu) => assert!(
                emulator_reports(e, "uninitialized shared memory read"),
                "{layout:?} {case}: caught by another device error: {e}"
            ),
            Outcome::Device(e) => panic!("{layout:?} {case}: caught by a device error: {e}"),
            Outcome::WrongValue(_) => {}
            Outcome::Passed => unreachable!("only failures are kept"),
        }
    }
}

/// Every variant of `mutant_gemm` assembles with NVIDIA's `ptxas` for its target (so the
/// mutants also run on a real GPU; see [`pagesift_tests::util::assemble_every_variant`]).
#[test]
fn mutant_ptx_assembles() {
    pagesift_tests::util::assemble_every_variant(
        "gemm_mutants::mutant_ptx_assembles",
        mutant_gemm::VARIANTS,
    );
}

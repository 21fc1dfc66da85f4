//! Does the Hopper GEMM's test tell right from wrong? A kernel with `gemm_tma`'s body (the
//! helper library `pagesift-gpu/src/kernels/lib/gemm_core.rs`: `tma_gemm`; bf16 in, f32
//! out, persistent blocks over 128 × 128 tiles: a TMA producer thread, two `wgmma` consumer
//! warpgroups, full / empty `mbarrier`s per stage), run once correct and once per deliberate
//! bug through the checks of the real kernels' tests ([`pagesift_tests::gemm_check`]):
//!
//! | mutant          | bug                                                                  | caught by |
//! |-----------------|----------------------------------------------------------------------|-----------|
//! | `WrongSwizzle`  | the tensor maps lay the boxes out unswizzled (`Swizzle::None`) while `wgmma` reads them 128-byte swizzled | wrong values |
//! | `WrongParity`   | the consumers wait on the other parity of the `full` barrier: the first round passes at once, before its copies land | the emulated device: a read of shared memory that a `cp.async.bulk.tensor` in flight writes; not run on a GPU, where a consumer that comes to a stage after its copy landed waits for the next round's copy, which waits for that consumer: the kernel can hang (it did on an H100) |
//! | `SkippedWgmmaWait` | the consumers release the last stage and return their accumulators without `wgmma_wait(0)`: the last step's products are still in flight | the emulated device: a read of an accumulator before its `wgmma.wait_group`; on a GPU, wrong values where the products land late |
//!
//! The TMA store (`tma_store`, shared memory into a tensor through a `TensorMapMut`) is checked
//! here too, by a kernel that loads a box, transforms it in shared memory and stores it back:
//! the correct kernel writes exactly the tensor's elements (poisoned padding stays), and its
//! mutants without the `fence.proxy.async` before the store or without the
//! `cp.async.bulk.wait_group.read` before the block exits are caught by the emulated device.
//!
//! The mutants differ from `gemm_tma` only in what they pass: the swizzle of the maps the
//! host builds, and `tma_consume`'s `PARITY` and `DRAIN` (0 and true in `gemm_tma`). Run
//! with `PAGESIFT_GPU_DEVICE=emulated cargo test -p pagesift-tests --test tma_mutants --
//! --nocapture` (compute capability 9.0 emulated; an H200 runs it too).

use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::ops::gemm::{launch_params, tma_launch_config, Tile, WGMMA_CC};
use pagesift_gpu::{
    bf16, ptx_kernel, BLayout, DeviceBuffer, DeviceRead, DeviceSlice, DeviceSliceMut, Error, Gemm,
    Gpu, LaunchConfig, Stream, Swizzle, TensorMap,
};
use pagesift_tests::gemm_check::{check_with, Case};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::{Rng, SeedableRng};

/// The deliberate bug a run carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// No bug: the kernel as `gemm_tma` is.
    Original,
    /// Unswizzled boxes.
    WrongSwizzle,
    /// The consumers wait on the other parity.
    WrongParity,
    /// No `wgmma_wait(0)` after the last step.
    SkippedWgmmaWait,
}

ptx_kernel! {
    #[path = "../pagesift-gpu/src/kernels/lib/act_math.rs"]
    mod math;
    #[path = "../pagesift-gpu/src/kernels/lib/gemm_core.rs"]
    mod core;
    use pagesift_gpu::kernels::gemm::GemmParams;

    const BM: u32 = 128;
    const BN: u32 = 128;

    /// `gemm_tma`'s body for bf16 in, f32 out, with `tma_consume`'s `PARITY` and `DRAIN`.
    #[target(sm_90a)]
    #[variants((PARITY, DRAIN) in [(0, true), (1, true), (0, false)])]
    #[launch(block = BM / 64 * 128 + 128, max_regs = 168)]
    pub fn mutant_tma<const PARITY: u32, const DRAIN: bool>(
        p: GemmParams,
        ta: TensorMap<bf16, 64, BM, 1>,
        tb: TensorMap<bf16, 64, BN, 1>,
        bias: Option<&[f32]>,
        res: Option<&[f32]>,
        c: &mut [f32],
    ) {
        core::tma_gemm::<bf16, f32, BM, BN, { core::TMA_STAGES }, false, 0, PARITY, DRAIN>(p, ta, tb, bias, res, c, None);
    }
}

/// Launches `mutant_tma` with `bug` as the operation launches `gemm_tma`: the parameters of
/// [`launch_params`], the maps `[K, rows, batch]` in boxes of 64 × 128 (unswizzled for
/// `WrongSwizzle`), the persistent grid of [`tma_launch_config`].
#[allow(clippy::too_many_arguments)]
fn launch_mutant(
    bug: Bug,
    stream: &Stream,
    g: &Gemm,
    a: &DeviceSlice<'_, bf16>,
    b: &DeviceSlice<'_, bf16>,
    bias: Option<&dyn DeviceRead<f32>>,
    res: Option<&dyn DeviceRead<f32>>,
    c: &mut DeviceSliceMut<'_, f32>,
) -> pagesift_gpu::Result<()> {
    let p: GemmParams = launch_params(g, a, b, res, &*c);
    let swizzle = if bug == Bug::WrongSwizzle {
        Swizzle::None
    } else {
        Swizzle::B128
    };
    let ta = map(a, g, g.m, g.stride_a.max(g.m * g.k), swizzle)?;
    let tb = map(b, g, g.n, g.stride_b.max(g.n * g.k), swizzle)?;
    let cfg = tma_launch_config(stream.gpu(), g, Tile { bm: 128, bn: 128 }, 1, false);
    let (parity, drain) = match bug {
        Bug::WrongParity => (1, true),
        Bug::SkippedWgmmaWait => (0, false),
        Bug::Original | Bug::WrongSwizzle => (0, true),
    };
    mutant_tma::launch(stream, cfg, parity, drain, p, &ta, &tb, bias, res, c)
}

/// The map of `x` as `[K, rows, batch]` in boxes of 64 × 128.
fn map<'a>(
    x: &'a DeviceSlice<'_, bf16>,
    g: &Gemm,
    rows: usize,
    stride: usize,
    swizzle: Swizzle,
) -> pagesift_gpu::Result<TensorMap<'a, bf16>> {
    TensorMap::tiled(
        x,
        &[g.k as u64, rows as u64, g.batch as u64],
        &[g.k as u64, stride as u64],
        &[64, 128, 1],
        swizzle,
    )
}

/// What a case showed.
enum Outcome {
    Passed,
    WrongValue(String),
    Device(Error),
}

fn run(gpu: &Gpu, bug: Bug, case: &Case) -> Outcome {
    let r = check_with::<bf16, f32>(gpu, case, |s, g, a, b, bias, res, c| {
        launch_mutant(bug, s, g, a, b, bias, res, c)
    });
    match r {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(wrong)) => Outcome::WrongValue(wrong),
        Err(e) => Outcome::Device(e),
    }
}

/// The device: an H200 as it is, else the emulated Hopper.
fn hopper(name: &str) -> Option<Gpu> {
    let gpu = gpu_or_skip(name)?;
    if gpu.compute_capability() == WGMMA_CC {
        return Some(gpu);
    }
    if is_emulated(&gpu) {
        let config = EmulatorConfig {
            compute_capability: WGMMA_CC,
            max_shared_per_block_optin: 227 * 1024,
            ..EmulatorConfig::default()
        };
        return Some(Gpu::emulated(config).expect("the emulated device opens"));
    }
    eprintln!(
        "SKIPPED {name}: the Hopper kernels need compute capability 9.0, the device has {:?}",
        gpu.compute_capability()
    );
    None
}

/// Aligned cases (rows of whole 16-byte chunks): edges in M, N and K (K past the last box),
/// more K steps than stages, a batch, bias and residual.
fn cases(gpu: &Gpu) -> Vec<Case> {
    let shapes: &[(usize, usize, usize, usize)] = if is_emulated(gpu) {
        &[(67, 61, 320, 1), (20, 130, 72, 2)]
    } else {
        &[(67, 61, 320, 1), (259, 136, 1000, 1), (130, 300, 72, 2)]
    };
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(m, n, k, batch))| Case {
            g: Gemm::new(m, n, k, BLayout::NK).with_batch(batch, m * k, n * k, m * n),
            bias: true,
            residual: i % 2 == 0,
            offsets: [0; 4],
            seed: 0x746d_6100 + i as u64,
        })
        .collect()
}

#[test]
fn the_original_passes_and_every_mutant_is_caught() {
    let name = "tma_mutants::the_original_passes_and_every_mutant_is_caught";
    let Some(gpu) = hopper(name) else {
        return;
    };
    let cases = cases(&gpu);
    for c in &cases {
        match run(&gpu, Bug::Original, c) {
            Outcome::Passed => {}
            Outcome::WrongValue(w) => panic!("the correct kernel fails: {c:?}: {w}"),
            Outcome::Device(e) => panic!("the correct kernel fails: {c:?}: {e}"),
        }
    }
    let emulated = is_emulated(&gpu);
    for bug in [Bug::WrongSwizzle, Bug::WrongParity, Bug::SkippedWgmmaWait] {
        if bug == Bug::WrongParity && !emulated {
            // A consumer that reaches a stage after its copy landed waits on the wrong parity
            // for the next round's copy, which the producer issues only once that consumer
            // released the stage: on a GPU the kernel may never end.
            println!("{name}: {bug:?} not run on the GPU (it can deadlock there); the emulated device runs it");
            continue;
        }
        let first = cases.iter().find_map(|c| match run(&gpu, bug, c) {
            Outcome::Passed => None,
            o => Some((c, o)),
        });
        let Some((c, o)) = first else {
            if emulated || bug == Bug::WrongSwizzle {
                panic!("{name}: {bug:?} passed every case undetected");
            }
            println!("{name}: {bug:?}: the GPU showed no wrong value in {} cases (a race the hardware need not show)", cases.len());
            continue;
        };
        match &o {
            Outcome::WrongValue(w) => println!("{name}: {bug:?}: {:?}: a wrong value: {w}", c.g),
            Outcome::Device(e) => println!("{name}: {bug:?}: {:?}: the device: {e}", c.g),
            Outcome::Passed => unreachable!(),
        }
        let want = match bug {
            Bug::WrongParity => Some("cp.async.bulk.tensor in flight"),
            Bug::SkippedWgmmaWait => Some("wgmma"),
            _ => None,
        };
        match (&o, want) {
            (Outcome::WrongValue(_), None) => {}
            (Outcome::Device(Error::Emulator(e)), Some(w)) if emulated => {
                assert!(
                    e.message.contains(w),
                    "{bug:?}: caught, but not by the check for {w:?}: {e}"
                )
            }
            (_, Some(_)) if !emulated => {}
            (o, _) => panic!(
                "{bug:?}: caught by {}",
                match o {
                    Outcome::WrongValue(w) => w.clone(),
                    Outcome::Device(e) => e.to_string(),
                    Outcome::Passed => String::new(),
                }
            ),
        }
    }
}

ptx_kernel! {
    /// The box of a TMA round trip: 32 f32 (one 128-byte swizzled row) × 16 rows.
    const BX: u32 = 32;
    const BY: u32 = 16;

    /// Block `(bx, by)` loads the box at `(32 bx, 16 by)` of `src` into shared memory, maps
    /// each element `v` to `2 v + 1` there, and stores the box into `dst` at the same place;
    /// `FENCE` and `WAIT` (true in the correct kernel) keep the `fence.proxy.async` before the
    /// store and the wait for its read before the block exits.
    #[target(sm_90)]
    #[variants((FENCE, WAIT) in [(true, true), (false, true), (true, false)])]
    #[launch(block = 128)]
    pub fn tma_round<const FENCE: bool, const WAIT: bool>(
        src: TensorMap<f32, BX, BY, 1>,
        dst: TensorMapMut<f32, BX, BY, 1>,
    ) {
        let t: Shared<[f32; BX * BY]>;
        let full: Shared<[u64; 1]>;
        let tid = thread_idx_x();
        if tid == 0 {
            full.mbar_init(0, 1);
        }
        fence_proxy_async();
        sync_threads();
        let x = (block_idx_x() * BX) as i32;
        let y = (block_idx_y() * BY) as i32;
        if BX * BY <= t.len() {
            if tid == 0 {
                full.mbar_arrive_expect_tx(0, BX * BY * 4);
                t.tma_load(0, src, x, y, 0, full, 0);
            }
            full.mbar_wait(0, 0);
            let mut i = tid;
            while i < BX * BY {
                t[i] = t[i].mul_add(2.0, 1.0);
                i += 128;
            }
            if FENCE {
                fence_proxy_async();
            }
            sync_threads();
            if tid == 0 {
                t.tma_store(0, dst, x, y, 0);
                bulk_commit();
                if WAIT {
                    bulk_wait_read(0);
                }
            }
        }
    }
}

/// A TMA round trip over a `45 × 37` f32 tensor in rows of 48 (whose last 3 elements, and the
/// rows past the tensor, are padding): the tensor `dst` holds after `tma_round` (variant
/// `fence`, `wait`), and what it should hold: `2 v + 1` of `src` inside the tensor, the poison
/// elsewhere.
fn round_trip(gpu: &Gpu, fence: bool, wait: bool) -> pagesift_gpu::Result<(Vec<f32>, Vec<f32>)> {
    let (w, h, ld) = (45usize, 37usize, 48usize);
    let poison = f32::from_bits(0x7fc0_dead);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x746d_6173);
    let src: Vec<f32> = (0..ld * (h + 2))
        .map(|_| rng.gen_range(-4.0..4.0))
        .collect();
    let mut want = vec![poison; src.len()];
    for r in 0..h {
        for c in 0..w {
            want[r * ld + c] = src[r * ld + c].mul_add(2.0, 1.0);
        }
    }
    let stream = gpu.default_stream();
    let dsrc = DeviceBuffer::from_host(gpu, &src)?;
    let mut ddst = DeviceBuffer::from_host(gpu, &vec![poison; src.len()])?;
    let dims = [w as u64, h as u64, 1];
    let strides = [ld as u64, (ld * h) as u64];
    let ms = TensorMap::tiled(&dsrc, &dims, &strides, &[32, 16, 1], Swizzle::B128)?;
    let md = TensorMap::tiled_mut(&mut ddst, &dims, &strides, &[32, 16, 1], Swizzle::B128)?;
    let grid = [w.div_ceil(32) as u32, h.div_ceil(16) as u32, 1];
    tma_round::launch(&stream, LaunchConfig::grid(grid), fence, wait, &ms, &md)?;
    Ok((ddst.to_host()?, want))
}

#[test]
fn tma_stores_write_the_tensor_and_their_mutants_are_caught() {
    let name = "tma_mutants::tma_stores_write_the_tensor_and_their_mutants_are_caught";
    let Some(gpu) = hopper(name) else {
        return;
    };
    let (got, want) = round_trip(&gpu, true, true).expect("the correct kernel runs");
    let bad = got
        .iter()
        .zip(&want)
        .position(|(g, w)| g.to_bits() != w.to_bits());
    assert!(
        bad.is_none(),
        "element {bad:?}: {:?}, expected {:?}",
        bad.map(|i| got[i]),
        bad.map(|i| want[i])
    );
    for (fence, wait, check) in [
        (false, true, "without fence.proxy.async"),
        (true, false, "cp.async.bulk.tensor store in flight at exit"),
    ] {
        let r = round_trip(&gpu, fence, wait);
        match (r, is_emulated(&gpu)) {
            (Err(Error::Emulator(e)), true) => assert!(
                e.message.contains(check),
                "fence {fence}, wait {wait}: caught, but not by the check for {check:?}: {e}"
            ),
            (other, true) => panic!(
                "fence {fence}, wait {wait}: not caught: {:?}",
                other.map(|_| ())
            ),
            (other, false) => println!(
                "{name}: fence {fence}, wait {wait} on the GPU: {}",
                match other {
                    Ok((g, w)) if g.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()) =>
                        "right values (a race the hardware need not show)".to_string(),
                    Ok(_) => "wrong values".to_string(),
                    Err(e) => e.to_string(),
                }
            ),
        }
    }
}

//! Checking GEMM kernels against the f64 reference ([`pagesift_gpu::cpu::gemm`]): random
//! cases (shapes, layouts, leading dimensions with gaps, batch strides, view offsets that break
//! 16-byte alignment, every epilogue operand), C poisoned before each run, every output held to
//! [`pagesift_gpu::gemm::tolerance`] and every element outside the outputs left as it was.

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::{gemm_with, Kernel};
use pagesift_gpu::{
    Act, ActElement, BLayout, DeviceBuffer, DeviceRead, DeviceSlice, DeviceSliceMut, Gemm, Gpu,
    Result, Stream,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::util::{poison_f32, random_f32_from, POISON_BITS};

/// One random case.
#[derive(Clone, Debug)]
pub struct Case {
    pub g: Gemm,
    pub bias: bool,
    pub residual: bool,
    /// Elements before each operand's view (0..4: misaligned views).
    pub offsets: [usize; 4],
    pub seed: u64,
}

/// The largest M, N and K of random cases.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub max_mn: usize,
    pub max_k: usize,
    pub max_batch: usize,
}

impl Sizes {
    /// Small shapes on the emulated device, up to 1024 on a GPU.
    pub fn for_gpu(gpu: &Gpu) -> Sizes {
        if crate::is_emulated(gpu) {
            Sizes {
                max_mn: 70,
                max_k: 40,
                max_batch: 2,
            }
        } else {
            Sizes {
                max_mn: 1024,
                max_k: 1024,
                max_batch: 3,
            }
        }
    }
}

impl Case {
    /// A random case of `layout` from `seed`: sizes 1 ..= the limits (a third of them below
    /// 9, the rest anywhere; M at most `max_m`), gaps of 0..5 elements between rows, a batch of
    /// 1 or more.
    pub fn random(seed: u64, layout: BLayout, sizes: Sizes, max_m: usize) -> Case {
        let mut rng = StdRng::seed_from_u64(seed);
        fn dim(rng: &mut StdRng, max: usize) -> usize {
            if rng.gen_range(0..3) == 0 {
                rng.gen_range(1..=max.min(8))
            } else {
                rng.gen_range(1..=max)
            }
        }
        let m = dim(&mut rng, sizes.max_mn.min(max_m));
        let n = dim(&mut rng, sizes.max_mn);
        let k = dim(&mut rng, sizes.max_k);
        let mut g = Gemm::new(m, n, k, layout);
        let gap = |rng: &mut StdRng| {
            if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(1..5)
            }
        };
        let lda = k + gap(&mut rng);
        let ldb = g.ldb + gap(&mut rng);
        let ldc = n + gap(&mut rng);
        let ldr = n + gap(&mut rng);
        g = g.with_lds(lda, ldb, ldc).with_ldr(ldr);
        let batch = rng.gen_range(1..=sizes.max_batch);
        if batch > 1 {
            let sb = match layout {
                BLayout::KN => k * ldb,
                BLayout::NK => n * ldb,
            };
            g = g.with_batch(
                batch,
                m * lda + gap(&mut rng),
                sb + gap(&mut rng),
                m * ldc + gap(&mut rng),
            );
            g.stride_r = m * ldr + gap(&mut rng);
        }
        let acts = Act::ALL;
        g = g.with_act(acts[rng.gen_range(0..acts.len())]);
        let alpha = if rng.gen_bool(0.5) {
            1.0
        } else {
            rng.gen_range(-2.0..2.0)
        };
        let beta = if rng.gen_bool(0.5) {
            0.0
        } else {
            rng.gen_range(-1.5..1.5)
        };
        g = g.with_scale(alpha, beta);
        Case {
            g,
            bias: rng.gen_bool(0.5),
            residual: rng.gen_bool(0.5),
            offsets: [0, 1, 2, 3].map(|_| {
                if rng.gen_bool(0.5) {
                    0
                } else {
                    rng.gen_range(1..4)
                }
            }),
            seed,
        }
    }

    /// Elements an operand needs: through the last element of the last matrix.
    fn extent(&self) -> [usize; 4] {
        let g = &self.g;
        let z = g.batch - 1;
        let (m, n, k) = (g.m, g.n, g.k);
        [
            g.a_index(z, m - 1, k - 1) + 1,
            g.b_index(z, k - 1, n - 1) + 1,
            g.c_index(z, m - 1, n - 1) + 1,
            g.r_index(z, m - 1, n - 1) + 1,
        ]
    }
}

/// Runs `case` through `tile`'s kernel with f32 inputs and output and checks it; `Err`
/// describes the first wrong element.
///
/// # Errors
/// A message naming the case, the element, the value, the reference and the tolerance; or an
/// error of the device.
pub fn check(gpu: &Gpu, case: &Case, kernel: Kernel) -> std::result::Result<(), String> {
    check_typed::<f32, f32>(gpu, case, kernel)
}

/// [`check`] with inputs `T` and output (C and the residual) `O`: the random values are
/// rounded to their types, and the reference takes them as stored.
///
/// # Errors
/// As [`check`].
pub fn check_typed<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    case: &Case,
    kernel: Kernel,
) -> std::result::Result<(), String> {
    check_with::<T, O>(gpu, case, |s, g, a, b, bias, res, c| {
        gemm_with(s, g, kernel, a, b, bias, res, c)
    })
    .map_err(|e| {
        format!(
            "{case:?} {kernel:?} {} -> {}: {e}",
            T::DTYPE.name(),
            O::DTYPE.name()
        )
    })?
}

/// The check of [`check_typed`] with the GEMM run by `launch` (a kernel of the caller's in
/// the GEMM's shape, say) instead of [`gemm_with`]: the same operands, poisoned C and
/// reference. `Ok(Err(..))` names the first wrong output or changed element outside the
/// outputs; `Err` is an error of the device (a launch refused, a kernel fault, an error the
/// emulated device reports), from `launch` or from reading C back.
///
/// # Errors
/// Those of the device, as above.
pub fn check_with<T: ActElement, O: ActElement>(
    gpu: &Gpu,
    case: &Case,
    launch: impl FnOnce(
        &Stream,
        &Gemm,
        &DeviceSlice<'_, T>,
        &DeviceSlice<'_, T>,
        Option<&dyn DeviceRead<f32>>,
        Option<&dyn DeviceRead<O>>,
        &mut DeviceSliceMut<'_, O>,
    ) -> Result<()>,
) -> Result<std::result::Result<(), String>> {
    let g = case.g;
    let mut rng = StdRng::seed_from_u64(case.seed ^ 0x9e37_79b9);
    let [ea, eb, ec, er] = case.extent();
    let [oa, ob, oc, or] = case.offsets;
    let (ta, a) = stored::<T>(random_f32_from(&mut rng, oa + ea, -1.0..1.0));
    let (tb, b) = stored::<T>(random_f32_from(&mut rng, ob + eb, -1.0..1.0));
    let bias = random_f32_from(&mut rng, g.n, -1.0..1.0);
    let (tres, res) = stored::<O>(random_f32_from(&mut rng, or + er, -1.0..1.0));
    // C: random where it is read (beta != 0), poison elsewhere.
    let mut c = vec![poison_f32(); oc + ec + 3];
    if g.beta != 0.0 {
        for z in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    c[oc + g.c_index(z, i, j)] = rng.gen_range(-1.0..1.0);
                }
            }
        }
    }
    let (tc, c) = stored::<O>(c);
    let da = DeviceBuffer::from_host(gpu, &ta)?;
    let db = DeviceBuffer::from_host(gpu, &tb)?;
    let dbias = DeviceBuffer::from_host(gpu, &bias)?;
    let dres = DeviceBuffer::from_host(gpu, &tres)?;
    let mut dc = DeviceBuffer::from_host(gpu, &tc)?;
    let stream = gpu.default_stream();
    {
        let av = da.slice(oa..)?;
        let bv = db.slice(ob..)?;
        let bias_v = dbias.slice(..)?;
        let res_v = dres.slice(or..)?;
        let mut cv = dc.slice_mut(oc..oc + ec)?;
        launch(
            &stream,
            &g,
            &av,
            &bv,
            case.bias.then_some(&bias_v as &dyn DeviceRead<f32>),
            case.residual.then_some(&res_v as &dyn DeviceRead<O>),
            &mut cv,
        )?;
    }
    let got: Vec<f32> = dc.to_host()?.into_iter().map(|v| v.to_f32()).collect();
    let (a, b, res) = (&a[oa..], &b[ob..], &res[or..]);
    let c_in = &c[oc..];
    let mut written = vec![false; got.len()];
    for z in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let idx = g.c_index(z, i, j);
                written[oc + idx] = true;
                let want = output(
                    &g,
                    a,
                    b,
                    case.bias.then_some(&bias[..]),
                    case.residual.then_some(res),
                    c_in,
                    (z, i, j),
                );
                let v = got[oc + idx];
                let tol = want.tolerance_for(&g, T::DTYPE, O::DTYPE);
                let err = (f64::from(v) - want.value).abs();
                // A NaN error fails too.
                if err.is_nan() || err > tol {
                    return Ok(Err(format!(
                        "C[{z}][{i}][{j}] = {v:e}, reference {:e}, error {err:e} > tolerance {tol:e}",
                        want.value
                    )));
                }
            }
        }
    }
    for (idx, (&v, &w)) in got.iter().zip(&written).enumerate() {
        if !w && v.to_bits() != c[idx].to_bits() {
            return Ok(Err(format!(
                "element {idx} of C's buffer, outside the outputs, changed from {:#x} to {v:e} (poison {POISON_BITS:#x})",
                c[idx].to_bits()
            )));
        }
    }
    Ok(Ok(()))
}

/// `v` rounded to `T`, and the rounded values widened back.
fn stored<T: ActElement>(v: Vec<f32>) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = v.into_iter().map(T::from_f32).collect();
    let back = t.iter().map(|&x| x.to_f32()).collect();
    (t, back)
}

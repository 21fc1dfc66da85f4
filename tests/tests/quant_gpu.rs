//! The kernels over quantized weights (`ops::quant::qgemm`) on the device against the f64
//! reference on the dequantized weights: the decode kernel at every format and token count
//! up to its chunk, the prefill kernel at every format and FFMA tile directly (and split
//! along K), on random shapes (`n_in` a multiple of the block, `n_out` and the tokens
//! anything from 1), weights quantized by the host code, every epilogue, misaligned views
//! (the decode kernel's byte-wise path) and aligned ones (its 16-byte path, and the prefill
//! kernel), outputs poisoned first; and the operation's validation.
//!
//! Shapes up to 300 × 1024 on a GPU, up to 40 × 512 on the emulated device (the prefill
//! kernel's up to 40 × 256).

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::kernels::quant::QTC_MAX_ROW_BYTES;
use pagesift_gpu::ops::gemm::{Tile, F32_TILES, WGMMA_CC};
use pagesift_gpu::ops::quant::{
    format_code, group_elements, pick, pick_int8, qgemm, qgemm_with, tc_plan, tc_plan_int8,
    tc_prefill_tiles, tc_shape, tc_warp_options, wgmma_prefill_tiles, QKernel, FORMATS,
    INT8_FORMATS, PREFILL_MIN_TOKENS, TC_PREFILL_TYPES,
};
use pagesift_gpu::quant::{dequantize, int8_activations, quantize, WeightFormat};
use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, DeviceSlice, Dtype, Error, Gemm, Gpu};
use pagesift_tests::util::{poison_f32, random_f32_from};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One random case: `tokens × n_in` activations against `n_out × n_in` weights.
#[derive(Clone, Debug)]
struct Case {
    format: WeightFormat,
    g: Gemm,
    bias: bool,
    residual: bool,
    /// Bytes before the weights' view (odd: the byte-wise path) and elements before `x`'s.
    w_offset: usize,
    x_offset: usize,
    seed: u64,
}

impl Case {
    /// A random case of `format` with `tokens` tokens from `seed`; `n_in` up to `max_blocks`
    /// blocks (a whole number of 16-byte groups half of the time), `n_out` up to `max_out`.
    fn random(
        format: WeightFormat,
        tokens: usize,
        seed: u64,
        max_out: usize,
        max_in: usize,
    ) -> Case {
        let mut rng = StdRng::seed_from_u64(seed);
        let block = format.block_elements();
        let group = group_elements(format);
        let n_in = if rng.gen_bool(0.5) {
            group * rng.gen_range(1..=(max_in / group).max(1))
        } else {
            block * rng.gen_range(1..=max_in / block)
        };
        let n_out = if rng.gen_bool(0.3) {
            rng.gen_range(1..=8)
        } else {
            rng.gen_range(1..=max_out)
        };
        let gap = |rng: &mut StdRng| {
            if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(1..5)
            }
        };
        let (lda, ldc, ldr) = (
            n_in + gap(&mut rng),
            n_out + gap(&mut rng),
            n_out + gap(&mut rng),
        );
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
        let g = Gemm::new(tokens, n_out, n_in, BLayout::NK)
            .with_lds(lda, n_in, ldc)
            .with_ldr(ldr)
            .with_scale(alpha, beta)
            .with_act(Act::ALL[rng.gen_range(0..Act::ALL.len())]);
        Case {
            format,
            g,
            bias: rng.gen_bool(0.5),
            residual: rng.gen_bool(0.5),
            w_offset: if rng.gen_bool(0.3) {
                rng.gen_range(1..16)
            } else {
                0
            },
            x_offset: if rng.gen_bool(0.3) {
                rng.gen_range(1..4)
            } else {
                0
            },
            seed,
        }
    }
}

impl Case {
    /// The case with `n_in` elements per row (the gap after each row of `x` kept).
    fn with_n_in(mut self, n_in: usize) -> Case {
        let gap = self.g.lda - self.g.k;
        self.g = Gemm {
            k: n_in,
            lda: n_in + gap,
            ldb: n_in,
            ..self.g
        };
        self
    }
}

/// Runs `case` on `kernel` (`None`: the one `qgemm` picks) and checks every output against
/// the reference on the dequantized weights (and, for [`QKernel::DecodeInt8`], the
/// activations as `int8_activations` rounds them) and every element around the outputs left
/// as it was; `Err` names the first output that fails.
fn check(gpu: &Gpu, case: &Case, kernel: Option<QKernel>) -> Result<(), String> {
    let g = case.g;
    let (m, n, k) = (g.m, g.n, g.k);
    let mut rng = StdRng::seed_from_u64(case.seed ^ 0x5eed);
    // Weights of several magnitudes per row, so that the scales differ.
    let mut values = random_f32_from(&mut rng, n * k, -1.0..1.0);
    for (i, v) in values.iter_mut().enumerate() {
        *v *= 1.0 + (i / 32 % 5) as f32;
    }
    let bytes = quantize(case.format, &values, n, k).map_err(|e| e.to_string())?;
    let mut w_deq = dequantize(case.format, &bytes, n, k).map_err(|e| e.to_string())?;
    let mut x = random_f32_from(&mut rng, case.x_offset + (m - 1) * g.lda + k, -1.0..1.0);
    // Activations of several magnitudes per block, and a block of zeros, for the int8 scales.
    for (i, v) in x.iter_mut().enumerate() {
        *v *= [1.0, 0.01, 3.0][i / 32 % 3];
    }
    if k >= 64 {
        x[case.x_offset + 32..case.x_offset + 64].fill(0.0);
    }
    let mut x_ref = x.clone();
    // The tensor-core prefill multiplies both operands rounded to its 16-bit type.
    let mut input = Dtype::F32;
    if let Some(QKernel::PrefillTc { half, .. } | QKernel::PrefillWgmma { half, .. }) = kernel {
        input = half;
        for v in x_ref.iter_mut().chain(w_deq.iter_mut()) {
            *v = round_to(half, *v);
        }
    }
    if matches!(kernel, Some(QKernel::DecodeInt8 { .. })) {
        for t in 0..m {
            let row = case.x_offset + t * g.lda..case.x_offset + t * g.lda + k;
            let q = int8_activations(&x[row.clone()], k).map_err(|e| e.to_string())?;
            x_ref[row].copy_from_slice(&q);
        }
    }
    let bias = random_f32_from(&mut rng, n, -1.0..1.0);
    let res = random_f32_from(&mut rng, (m - 1) * g.ldr + n, -1.0..1.0);
    let y_len = (m - 1) * g.ldc + n;
    let mut y = vec![poison_f32(); y_len + 3];
    if g.beta != 0.0 {
        for t in 0..m {
            for j in 0..n {
                y[t * g.ldc + j] = rng.gen_range(-1.0..1.0);
            }
        }
    }
    let mut w_host = vec![0xA5u8; case.w_offset];
    w_host.extend_from_slice(&bytes);
    let run = || -> pagesift_gpu::Result<Vec<f32>> {
        let dw = DeviceBuffer::from_host(gpu, &w_host)?;
        let dx = DeviceBuffer::from_host(gpu, &x)?;
        let db = DeviceBuffer::from_host(gpu, &bias)?;
        let dr = DeviceBuffer::from_host(gpu, &res)?;
        let mut dy = DeviceBuffer::from_host(gpu, &y)?;
        let stream = gpu.default_stream();
        {
            let wv = dw.slice(case.w_offset..)?;
            let xv = dx.slice(case.x_offset..)?;
            let bv = db.slice(..)?;
            let rv = dr.slice(..)?;
            let mut yv = dy.slice_mut(..y_len)?;
            let bias = case.bias.then_some(&bv as &dyn DeviceRead<f32>);
            let res = case.residual.then_some(&rv as &dyn DeviceRead<f32>);
            match kernel {
                Some(kernel) => qgemm_with(
                    &stream,
                    &g,
                    case.format,
                    kernel,
                    &wv,
                    &xv,
                    bias,
                    res,
                    &mut yv,
                )?,
                None => qgemm(&stream, &g, case.format, &wv, &xv, bias, res, &mut yv)?,
            }
        }
        dy.to_host()
    };
    let got = run().map_err(|e| format!("{case:?} on {kernel:?}: {e}"))?;
    let mut written = vec![false; got.len()];
    for t in 0..m {
        for j in 0..n {
            let idx = t * g.ldc + j;
            written[idx] = true;
            let want = output(
                &g,
                &x_ref[case.x_offset..],
                &w_deq,
                case.bias.then_some(&bias[..]),
                case.residual.then_some(&res[..]),
                &y,
                (0, t, j),
            );
            let v = got[idx];
            let tol = want.tolerance_for(&g, input, Dtype::F32);
            let err = (f64::from(v) - want.value).abs();
            if err.is_nan() || err > tol {
                return Err(format!(
                    "{case:?} on {kernel:?}: y[{t}][{j}] = {v:e}, reference {:e}, error {err:e} > tolerance {tol:e}",
                    want.value
                ));
            }
        }
    }
    for (i, (got, was)) in got.iter().zip(&y).enumerate() {
        if !written[i] && got.to_bits() != was.to_bits() {
            return Err(format!(
                "{case:?}: y[{i}] outside the outputs changed to {got:e}"
            ));
        }
    }
    Ok(())
}

/// `v` rounded to nearest even in `half` (F16 or BF16), as f32.
fn round_to(half: Dtype, v: f32) -> f32 {
    match half {
        Dtype::F16 => half::f16::from_f32(v).to_f32(),
        Dtype::Bf16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Random cases of `format` at token counts from 1 to one block's chunk (16).
fn check_format(format: WeightFormat) {
    let name = format!("quant_gpu::{}", format.name());
    let Some(gpu) = gpu_or_skip(&name) else {
        return;
    };
    let (cases, max_out, max_in) = if is_emulated(&gpu) {
        (2, 40, 512)
    } else {
        (12, 300, 1024)
    };
    for tokens in [1, 2, 3, 4, 8, 13, 16] {
        for i in 0..cases {
            let seed = 1000 * tokens as u64 + i;
            let case = Case::random(format, tokens, seed, max_out, max_in);
            if let Err(e) = check(&gpu, &case, Some(QKernel::Decode)) {
                panic!("{name}: {e}");
            }
        }
    }
}

#[test]
fn q8_0() {
    check_format(WeightFormat::Q8_0);
}

#[test]
fn q4_0() {
    check_format(WeightFormat::Q4_0);
}

#[test]
fn q4_k() {
    check_format(WeightFormat::Q4K);
}

#[test]
fn bf16() {
    check_format(WeightFormat::Bf16);
}

#[test]
fn f16() {
    check_format(WeightFormat::F16);
}

/// More tokens than one launch's chunk: on the decode kernel the chunks of 16 tokens each
/// read the weights; through `qgemm`, aligned weights take the prefill kernel and misaligned
/// ones the decode kernel's chunks.
#[test]
fn tokens_in_chunks() {
    let Some(gpu) = gpu_or_skip("quant_gpu::tokens_in_chunks") else {
        return;
    };
    for (i, format) in FORMATS.into_iter().enumerate() {
        let mut case = Case::random(format, 37, 77 + i as u64, 24, 256);
        for (kernel, w_offset) in [(Some(QKernel::Decode), 0), (None, 0), (None, 3)] {
            case.w_offset = w_offset;
            if let Err(e) = check(&gpu, &case, kernel) {
                panic!("quant_gpu::tokens_in_chunks: {e}");
            }
        }
    }
}

/// The prefill kernel at every format and FFMA tile, directly, unsplit and over 2 or 3
/// slices of K, from [`PREFILL_MIN_TOKENS`] tokens on, on weights whose view starts 4-byte
/// aligned (16-byte aligned or not).
#[test]
fn prefill_every_variant() {
    let Some(gpu) = gpu_or_skip("quant_gpu::prefill_every_variant") else {
        return;
    };
    let (max_tokens, max_out, max_in) = if is_emulated(&gpu) {
        (48, 40, 256)
    } else {
        (300, 300, 1024)
    };
    for (f, format) in FORMATS.into_iter().enumerate() {
        for (t, tile) in F32_TILES.into_iter().enumerate() {
            for splits in [1, 2 + (t as u32 + f as u32) % 2] {
                let seed = 5000 + 100 * f as u64 + 10 * t as u64 + u64::from(splits);
                let mut rng = StdRng::seed_from_u64(seed);
                let tokens = rng.gen_range(PREFILL_MIN_TOKENS..=max_tokens);
                let mut case = Case::random(format, tokens, seed, max_out, max_in);
                case.w_offset = 4 * rng.gen_range(0..4);
                if let Err(e) = check(&gpu, &case, Some(QKernel::Prefill { tile, splits })) {
                    panic!("quant_gpu::prefill_every_variant: {e}");
                }
            }
        }
    }
}

/// The tensor-core prefill kernel at every format, input type and tile, directly, from
/// [`PREFILL_MIN_TOKENS`] tokens on, on weights whose view starts 4-byte aligned (16-byte
/// aligned or not), against the reference on the inputs rounded as the kernel rounds them;
/// and `qgemm_tc` picking it.
#[test]
fn prefill_tc_every_variant() {
    let Some(gpu) = gpu_or_skip("quant_gpu::prefill_tc_every_variant") else {
        return;
    };
    if gpu.compute_capability() < (8, 0) {
        println!("SKIP quant_gpu::prefill_tc_every_variant: the device is below sm_80");
        return;
    }
    let (max_tokens, max_out, max_in) = if is_emulated(&gpu) {
        (80, 140, 512)
    } else {
        (300, 300, 1024)
    };
    for (f, format) in FORMATS.into_iter().enumerate() {
        for (h, half) in TC_PREFILL_TYPES.into_iter().enumerate() {
            for (t, tile) in tc_prefill_tiles().into_iter().enumerate() {
                let seed = 9000 + 100 * f as u64 + 10 * h as u64 + t as u64;
                let mut rng = StdRng::seed_from_u64(seed);
                let tokens = rng.gen_range(PREFILL_MIN_TOKENS..=max_tokens);
                let mut case = Case::random(format, tokens, seed, max_out, max_in);
                case.w_offset = 4 * rng.gen_range(0..4);
                let kernel = QKernel::PrefillTc { tile, half };
                if let Err(e) = check(&gpu, &case, Some(kernel)) {
                    panic!("quant_gpu::prefill_tc_every_variant: {e}");
                }
            }
        }
    }
    for tile in tc_prefill_tiles() {
        ring_edges(
            &gpu,
            "quant_gpu::prefill_tc_every_variant",
            tile,
            |tile, half| QKernel::PrefillTc { tile, half },
        );
    }
}

/// The Hopper prefill kernel (`gemm_wgmma_q`) at every format, input type and tile,
/// directly, as `prefill_tc_every_variant` runs the `mma.sync` one; on the emulated device
/// first refused on compute capability 8.0 with an error naming what it needs, then run on an
/// emulated Hopper.
#[test]
fn prefill_wgmma_every_variant() {
    let name = "quant_gpu::prefill_wgmma_every_variant";
    let Some(gpu) = gpu_or_skip(name) else {
        return;
    };
    let tile = wgmma_prefill_tiles()[0];
    let gpu = if gpu.compute_capability() == WGMMA_CC {
        gpu
    } else if is_emulated(&gpu) {
        let case = Case::random(WeightFormat::Q4_0, PREFILL_MIN_TOKENS, 1, 16, 64);
        let kernel = QKernel::PrefillWgmma {
            tile,
            half: Dtype::F16,
        };
        match check(&gpu, &case, Some(kernel)) {
            Err(e) if e.contains("needs compute capability 9.0") => {}
            other => panic!(
                "{name}: the wgmma prefill on {:?} must be refused, got {other:?}",
                gpu.compute_capability()
            ),
        }
        let hopper = EmulatorConfig {
            compute_capability: WGMMA_CC,
            max_shared_per_block_optin: 227 * 1024,
            ..EmulatorConfig::default()
        };
        Gpu::emulated(hopper).expect("the emulated device opens")
    } else {
        println!(
            "SKIP {name}: the Hopper kernels need compute capability 9.0, the device has {:?}",
            gpu.compute_capability()
        );
        return;
    };
    let (max_tokens, max_out, max_in) = if is_emulated(&gpu) {
        (80, 140, 512)
    } else {
        (300, 300, 1024)
    };
    for (f, format) in FORMATS.into_iter().enumerate() {
        for (h, half) in TC_PREFILL_TYPES.into_iter().enumerate() {
            for (t, tile) in wgmma_prefill_tiles().into_iter().enumerate() {
                let seed = 9500 + 100 * f as u64 + 10 * h as u64 + t as u64;
                let mut rng = StdRng::seed_from_u64(seed);
                let tokens = rng.gen_range(PREFILL_MIN_TOKENS..=max_tokens);
                let mut case = Case::random(format, tokens, seed, max_out, max_in);
                case.w_offset = 4 * rng.gen_range(0..4);
                let kernel = QKernel::PrefillWgmma { tile, half };
                if let Err(e) = check(&gpu, &case, Some(kernel)) {
                    panic!("{name}: {e}");
                }
            }
        }
    }
    ring_edges(&gpu, name, wgmma_prefill_tiles()[0], |tile, half| {
        QKernel::PrefillWgmma { tile, half }
    });
}

/// The edges of the prefill kernels' ring of raw weights on `tile`, for each format and input
/// type (`kernel` of the tile and type), each with more chunks of K than the ring holds at
/// once: rows that are not 4-byte aligned (an odd number of blocks or of 16-bit elements,
/// read 2 bytes at a time), rows 4-byte but not 16-byte aligned (4-byte copies), 16-byte
/// aligned ones; a last chunk or K step of a few blocks or elements; a last tile of 3 rows.
fn ring_edges(gpu: &Gpu, name: &str, tile: Tile, kernel: impl Fn(Tile, Dtype) -> QKernel) {
    for (f, format) in FORMATS.into_iter().enumerate() {
        // (n_in, the weights' byte offset in their buffer)
        let shapes: &[(usize, usize)] = match format {
            WeightFormat::Q4K => &[(3 * 256, 4), (5 * 256, 0)],
            WeightFormat::Bf16 | WeightFormat::F16 => &[(389, 4), (390, 4), (392, 0)],
            _ => &[(27 * 32, 4), (26 * 32, 4), (32 * 32, 0)],
        };
        for (i, &(n_in, w_offset)) in shapes.iter().enumerate() {
            let n_out = tile.bn as usize + 3;
            let g = Gemm::new(PREFILL_MIN_TOKENS + 5, n_out, n_in, BLayout::NK)
                .with_lds(n_in + 1, n_in, n_out)
                .with_act(Act::Silu);
            let case = Case {
                format,
                g,
                bias: true,
                residual: (f + i) % 2 == 0,
                w_offset,
                x_offset: 1,
                seed: 9900 + 10 * f as u64 + i as u64,
            };
            for half in TC_PREFILL_TYPES {
                if let Err(e) = check(gpu, &case, Some(kernel(tile, half))) {
                    panic!("{name}: edge case {n_out} x {n_in}: {e}");
                }
            }
        }
    }
}

/// The tensor-core decode kernel directly at each format it has and every column tiling (1
/// to 16 tokens: the fullest and an emptier one of each, more in chunks), `n_in` whole chunks
/// of its copies, weights 16-byte aligned.
#[test]
fn decode_tc_every_variant() {
    let Some(gpu) = gpu_or_skip("quant_gpu::decode_tc_every_variant") else {
        return;
    };
    let (cases, max_out, max_in) = if is_emulated(&gpu) {
        (1, 40, 512)
    } else {
        (6, 300, 2048)
    };
    let mut ran = 0;
    for (f, format) in FORMATS.into_iter().enumerate() {
        let Some(shape) = tc_shape(format) else {
            continue;
        };
        for tokens in [1, 2, 3, 5, 6, 8, 9, 16, 21] {
            for i in 0..cases {
                let seed = 9000 + 1000 * f as u64 + 10 * tokens as u64 + i;
                let mut rng = StdRng::seed_from_u64(seed);
                let chunks = rng.gen_range(1..=(max_in / shape.chunk).max(1));
                let mut case = Case::random(format, tokens, seed, max_out, max_in)
                    .with_n_in(chunks * shape.chunk);
                case.w_offset = 16 * rng.gen_range(0..3);
                for warps in tc_warp_options(tc_plan(format, tokens)) {
                    let kernel = QKernel::DecodeTc { warps: *warps };
                    if let Err(e) = check(&gpu, &case, Some(kernel)) {
                        panic!("quant_gpu::decode_tc_every_variant: {kernel}: {e}");
                    }
                    ran += 1;
                }
                // A block of warps the kernel has no variant of is an error naming them.
                let kernel = QKernel::DecodeTc { warps: 6 };
                let err = check(&gpu, &case, Some(kernel)).expect_err("6 warps a block ran");
                assert!(err.contains("not 6"), "{err}");
            }
        }
        // Each warp through three chunks or more: both stages of its pipeline, and the
        // fragments of `x` it reads a chunk ahead.
        let chunks = 2 * tc_warp_options(tc_plan(format, 1)).iter().max().unwrap() + 1;
        for tokens in [1, 2] {
            let seed = 9500 + 10 * f as u64 + tokens as u64;
            let n_in = chunks as usize * shape.chunk;
            let mut case = Case::random(format, tokens, seed, 24, n_in).with_n_in(n_in);
            case.w_offset = 0;
            for warps in tc_warp_options(tc_plan(format, tokens)) {
                let kernel = QKernel::DecodeTc { warps: *warps };
                if let Err(e) = check(&gpu, &case, Some(kernel)) {
                    panic!("quant_gpu::decode_tc_every_variant: {kernel}, {chunks} chunks: {e}");
                }
                ran += 1;
            }
        }
    }
    assert!(ran > 0, "no format has a tensor-core decode kernel");
}

/// The tensor-core decode kernel on int8 activations directly at each format it takes and
/// every column tiling (1 to 16 tokens, more in chunks), against the reference on the
/// activations as `int8_activations` rounds them.
#[test]
fn decode_int8_every_variant() {
    let Some(gpu) = gpu_or_skip("quant_gpu::decode_int8_every_variant") else {
        return;
    };
    let (cases, max_out, max_in) = if is_emulated(&gpu) {
        (1, 40, 512)
    } else {
        (6, 300, 2048)
    };
    for (f, format) in INT8_FORMATS.into_iter().enumerate() {
        let shape = tc_shape(format).expect("an int8 format has a tensor-core decode kernel");
        for tokens in [1, 2, 5, 8, 9, 16, 21] {
            for i in 0..cases {
                let seed = 19000 + 1000 * f as u64 + 10 * tokens as u64 + i;
                let mut rng = StdRng::seed_from_u64(seed);
                let chunks = rng.gen_range(1..=(max_in / shape.chunk).max(1));
                let mut case = Case::random(format, tokens, seed, max_out, max_in)
                    .with_n_in(chunks * shape.chunk);
                case.w_offset = 16 * rng.gen_range(0..3);
                for warps in tc_warp_options(tc_plan_int8(tokens)) {
                    let kernel = QKernel::DecodeInt8 { warps: *warps };
                    if let Err(e) = check(&gpu, &case, Some(kernel)) {
                        panic!("quant_gpu::decode_int8_every_variant: {kernel}: {e}");
                    }
                }
            }
        }
    }
    // BF16 weights have no int8 kernel: an error naming the formats it takes.
    let case = Case::random(WeightFormat::Bf16, 1, 3, 8, 256).with_n_in(256);
    let err = check(&gpu, &case, Some(QKernel::DecodeInt8 { warps: 8 }))
        .expect_err("int8 activations ran on BF16 weights");
    assert!(err.contains("int8 activations take"), "{err}");
}

/// `pick_int8`: the int8 kernel for its formats up to 16 tokens where the tensor-core decode
/// kernel fits, `pick`'s kernel everywhere else.
#[test]
fn pick_int8_falls_back_to_pick() {
    let Some(gpu) = gpu_or_skip("quant_gpu::pick_int8_falls_back_to_pick") else {
        return;
    };
    let stream = gpu.default_stream();
    let sm80 = gpu.props().compute_capability >= (8, 0);
    for format in FORMATS {
        for tokens in [1, 16, PREFILL_MIN_TOKENS] {
            for ptr in [0x10000u64, 0x10002] {
                let g = Gemm::new(tokens, 64, 512, BLayout::NK);
                let got = pick_int8(&stream, &g, format, ptr).unwrap();
                let int8 = INT8_FORMATS.contains(&format) && tokens <= 16 && ptr % 16 == 0 && sm80;
                if int8 {
                    assert!(
                        matches!(got, QKernel::DecodeInt8 { .. }),
                        "{format} {tokens}: {got}"
                    );
                } else {
                    assert_eq!(
                        got,
                        pick(&stream, &g, format, ptr).unwrap(),
                        "{format} {tokens}"
                    );
                }
            }
        }
    }
}

/// The kernel `qgemm` runs (`pick`): the prefill kernel from `PREFILL_MIN_TOKENS` tokens on
/// weights whose view starts 4-byte aligned; below that (or misaligned), the tensor-core
/// decode kernel where the format has a variant, the device is sm_80 or later, `n_in` is whole
/// chunks and the view 16-byte aligned; the FFMA decode kernel everywhere else.
#[test]
fn pick_follows_tokens_alignment_and_format() {
    let Some(gpu) = gpu_or_skip("quant_gpu::pick_follows_tokens_alignment_and_format") else {
        return;
    };
    let stream = gpu.default_stream();
    let sm80 = gpu.props().compute_capability >= (8, 0);
    let mut seen = [0usize; 3];
    for format in FORMATS {
        let shape = tc_shape(format);
        let chunk = shape.map_or(256, |s| s.chunk);
        // Whole chunks, and (where a chunk is several blocks) one block more than whole.
        let mut widths = vec![(2 * chunk, true)];
        if chunk > format.block_elements() {
            widths.push((2 * chunk + format.block_elements(), false));
        }
        for (k, whole) in widths {
            for tokens in [1, 8, 16, PREFILL_MIN_TOKENS - 1, PREFILL_MIN_TOKENS, 300] {
                let g = Gemm::new(tokens, 64, k, BLayout::NK);
                for (ptr, align) in [(0x10000u64, 16), (0x10004, 4), (0x10002, 2)] {
                    let got = pick(&stream, &g, format, ptr).unwrap();
                    let what = format!("{format} tokens={tokens} n_in={k} view at {ptr:#x}: {got}");
                    if tokens >= PREFILL_MIN_TOKENS && align >= 4 {
                        let QKernel::Prefill { tile, splits } = got else {
                            panic!("{what}: not the prefill kernel");
                        };
                        assert!(F32_TILES.contains(&tile) && splits >= 1, "{what}");
                        seen[0] += 1;
                    } else if shape.is_some() && sm80 && whole && align == 16 {
                        assert!(matches!(got, QKernel::DecodeTc { .. }), "{what}");
                        seen[1] += 1;
                    } else {
                        assert_eq!(got, QKernel::Decode, "{what}");
                        seen[2] += 1;
                    }
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n > 0) || !sm80,
        "every kernel picked somewhere: {seen:?}"
    );
    // Rows of `QTC_MAX_ROW_BYTES` or more (whole chunks, aligned) go to the decode kernel:
    // the tensor-core kernel's copies hold offsets within a block's rows in 32 bits.
    let format = WeightFormat::Q4_0;
    let chunk = tc_shape(format)
        .expect("Q4_0 has a tensor-core decode kernel")
        .chunk;
    let per_byte = format.row_bytes(chunk).unwrap();
    let k = (QTC_MAX_ROW_BYTES as usize).div_ceil(per_byte) * chunk;
    assert!(format.row_bytes(k).unwrap() >= QTC_MAX_ROW_BYTES as usize);
    let short = k - chunk;
    for (k, long) in [(k, true), (short, false)] {
        let got = pick(&stream, &Gemm::new(1, 64, k, BLayout::NK), format, 0x10000).unwrap();
        if long || !sm80 {
            assert_eq!(got, QKernel::Decode, "Q4_0 rows of {k} elements: {got}");
        } else {
            assert!(
                matches!(got, QKernel::DecodeTc { .. }),
                "Q4_0 rows of {k} elements: {got}"
            );
        }
    }
}

/// Bad arguments are errors naming what is wrong, before any launch.
#[test]
fn validation() {
    let Some(gpu) = gpu_or_skip("quant_gpu::validation") else {
        return;
    };
    let stream = gpu.default_stream();
    let (n, k) = (8, 64);
    let bytes = quantize(WeightFormat::Q4_0, &vec![0.5; n * k], n, k).unwrap();
    let w = DeviceBuffer::from_host(&gpu, &bytes).unwrap();
    let x = DeviceBuffer::from_host(&gpu, &vec![1.0f32; 2 * k]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, 2 * n).unwrap();
    let g = Gemm::new(2, n, k, BLayout::NK);
    let err = |g: &Gemm, f: WeightFormat, w: &DeviceBuffer<u8>, y: &mut DeviceBuffer<f32>| {
        qgemm(&stream, g, f, w, &x, None, None, y).unwrap_err()
    };
    let e = err(&g, WeightFormat::Q8_0, &w, &mut y);
    assert!(matches!(e, Error::LengthMismatch(_)), "{e}");
    assert!(e.to_string().contains("Q8_0"), "{e}");
    let e = err(
        &Gemm::new(2, n, 48, BLayout::NK),
        WeightFormat::Q4_0,
        &w,
        &mut y,
    );
    assert!(e.to_string().contains("multiple of 32"), "{e}");
    let e = err(
        &Gemm::new(2, n, k, BLayout::KN),
        WeightFormat::Q4_0,
        &w,
        &mut y,
    );
    assert!(e.to_string().contains("BLayout::NK"), "{e}");
    let e = err(&g, WeightFormat::F32, &w, &mut y);
    assert!(e.to_string().contains("ops::gemm"), "{e}");
    let mut short = DeviceBuffer::<f32>::alloc(&gpu, 2 * n - 1).unwrap();
    let e = err(&g, WeightFormat::Q4_0, &w, &mut short);
    assert!(e.to_string().contains("C holds"), "{e}");
    // The prefill kernel: weights 4-byte aligned, a tile it has, at least one slice of K.
    let prefill = |tile, splits| QKernel::Prefill { tile, splits };
    let shifted: Vec<u8> = std::iter::once(0).chain(bytes.iter().copied()).collect();
    let w_shifted = DeviceBuffer::from_host(&gpu, &shifted).unwrap();
    let odd = w_shifted.slice(1..).unwrap();
    let e = qgemm_with(
        &stream,
        &g,
        WeightFormat::Q4_0,
        prefill(F32_TILES[0], 1),
        &odd,
        &x,
        None,
        None,
        &mut y,
    )
    .unwrap_err();
    assert!(e.to_string().contains("4-byte aligned"), "{e}");
    for (kernel, what) in [
        (
            prefill(pagesift_gpu::ops::gemm::Tile { bm: 96, bn: 64 }, 1),
            "no 96x64 tile",
        ),
        (prefill(F32_TILES[1], 0), "0 slices of K"),
    ] {
        let e = qgemm_with(
            &stream,
            &g,
            WeightFormat::Q4_0,
            kernel,
            &w,
            &x,
            None,
            None,
            &mut y,
        )
        .unwrap_err();
        assert!(e.to_string().contains(what), "{kernel}: {e}");
    }
    // The tensor-core decode kernel: a format it has, weights 16-byte aligned.
    let mut tc = |format: WeightFormat, w: &DeviceSlice<'_, u8>, k: usize| {
        let x = DeviceBuffer::from_host(&gpu, &vec![1.0f32; 2 * k]).unwrap();
        let g = Gemm::new(2, n, k, BLayout::NK);
        qgemm_with(
            &stream,
            &g,
            format,
            QKernel::DecodeTc { warps: 8 },
            w,
            &x,
            None,
            None,
            &mut y,
        )
        .unwrap_err()
    };
    let e = tc(WeightFormat::Q4_0, &odd, k);
    assert!(e.to_string().contains("16-byte aligned"), "{e}");
    // F16 rows of 64 elements: not whole chunks of 128.
    let f16 = quantize(WeightFormat::F16, &vec![0.5; n * 64], n, 64).unwrap();
    let f16 = DeviceBuffer::from_host(&gpu, &f16).unwrap();
    let e = tc(WeightFormat::F16, &f16.slice(..).unwrap(), 64);
    assert!(e.to_string().contains("must be a multiple of 128"), "{e}");
    // Zero tokens: nothing to do, no error.
    qgemm(
        &stream,
        &Gemm::new(0, n, k, BLayout::NK),
        WeightFormat::Q4_0,
        &w,
        &x,
        None,
        None,
        &mut y,
    )
    .unwrap();
}

#[test]
fn the_formats_are_those_the_kernels_have_a_code_for() {
    for format in WeightFormat::ALL {
        let listed = FORMATS.iter().filter(|&&f| f == format).count();
        let coded = usize::from(format_code(format).is_some());
        assert_eq!(listed, coded, "{format}: listed {listed} times");
    }
}

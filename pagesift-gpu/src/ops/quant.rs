//! Matrix products with quantized weights on the GPU: `y = act(alpha · x · Wᵀ + beta · y +
//! bias) + residual` with `W` `[n_out, n_in]` in a [`WeightFormat`] of [`crate::quant`]
//! (the bytes of a GGUF tensor, uploaded as they are) and `x` `[tokens, n_in]` f32.
//!
//! [`qgemm`] runs, up to [`QGEMV_MAX_TOKENS`] tokens, a decode kernel
//! ([`crate::kernels::quant`]) that reads each weight byte once: for Q4_0, Q8_0, Q4_K, BF16 and
//! F16 rows of whole chunks ([`TcShape::chunk`]) in a 16-byte aligned view on sm_80 or later the
//! tensor-core one (`qgemv_tc`: `mma.sync` on bf16 codes and three-part bf16 activations,
//! every product exact, sums in f32), elsewhere the FFMA one (`qgemv`: codes made f32
//! exactly, f32 sums); both are held to SGEMM's accuracy on the dequantized weights. From
//! [`PREFILL_MIN_TOKENS`] on it runs the prefill kernel (`gemm_f32_q` of
//! [`crate::kernels::gemm`]): the FFMA GEMM's tiles, whose B loader dequantizes the weights
//! to f32 on their way into shared memory, so that each tile of weights is read once per
//! block of tokens; its products are exact on ggml's dequantized weights and its sums f32,
//! as SGEMM's on them. Weights whose view does not start 4-byte aligned (the prefill
//! loader's reads are 2 and 4 bytes wide) take the decode kernel in chunks of
//! [`QGEMV_MAX_TOKENS`] tokens, each chunk reading the weights again.

use crate::act::ActElement;
use crate::driver::{Swizzle, TensorMap};
use crate::gemm::{BLayout, Gemm, Precision, MAX_BATCH};
use crate::kernels::gemm::{
    gemm_f32_q, gemm_mma_q, gemm_wgmma_q, x_to_half, GemmParams, Q_BK, Q_RING_ROW, Q_RING_WORDS,
    STAGES, TC_ROW, WG_STAGES,
};
use crate::kernels::quant::{
    qgemv, qgemv_tc, qgemv_tc_x, qgemv_tc_x8, QuantParams, FMT_BF16, FMT_F16, FMT_Q4K, FMT_Q4_0,
    FMT_Q8_0, QGEMV_MAX_TOKENS, QGEMV_THREADS, QGROUP_BLOCKS, QGROUP_FLOATS, QTC_COLUMNS,
    QTC_MAX_ROW_BYTES, QTC_PARTS, QTC_STAGES, QTC_X_THREADS,
};
use crate::ops::gemm::{
    f32_micro_cols, ffma_plan, mma_shared_bytes, params_at, shared_bytes, slice_len, with_splits,
    Tile, F32_TILES, WGMMA_CC,
};
use crate::quant::WeightFormat;
use crate::{
    error, DeviceBuffer, DeviceRead, DeviceRepr, DeviceWrite, Dtype, Error, LaunchConfig, Result,
    Stream,
};
use half::{bf16, f16};

/// From this many tokens on, [`qgemm`] runs the prefill kernel (one launch over all tokens,
/// each tile of weights read once per block of tokens) instead of the decode kernel's chunks
/// of [`QGEMV_MAX_TOKENS`] (each chunk a pass over the weights). Not yet tuned on hardware:
/// the first count that takes the decode kernel two passes.
pub const PREFILL_MIN_TOKENS: usize = QGEMV_MAX_TOKENS as usize + 1;

/// The weight formats [`qgemm`] takes: every [`WeightFormat`] but F32, whose weights go
/// through [`crate::ops::gemm`] (those [`format_code`] gives a code).
pub const FORMATS: [WeightFormat; 5] = [
    WeightFormat::Q8_0,
    WeightFormat::Q4_0,
    WeightFormat::Q4K,
    WeightFormat::Bf16,
    WeightFormat::F16,
];

/// The kernel's code of a weight format (`FMT` of [`qgemv`]); `None` for F32 (f32 weights go
/// through [`crate::ops::gemm`]).
pub fn format_code(format: WeightFormat) -> Option<u32> {
    match format {
        WeightFormat::Q8_0 => Some(FMT_Q8_0),
        WeightFormat::Q4_0 => Some(FMT_Q4_0),
        WeightFormat::Q4K => Some(FMT_Q4K),
        WeightFormat::Bf16 => Some(FMT_BF16),
        WeightFormat::F16 => Some(FMT_F16),
        WeightFormat::F32 => None,
    }
}

/// The elements of the decode kernel's 16-byte group of `format` (its fast path reads rows
/// of a multiple of this many elements whole groups at a time).
pub fn group_elements(format: WeightFormat) -> usize {
    match format {
        WeightFormat::Bf16 | WeightFormat::F16 => QGROUP_FLOATS as usize,
        _ => QGROUP_BLOCKS as usize,
    }
}

/// Lanes per row of `W` for `n_out` rows of `units` work items each (groups on the fast
/// path, 32-element units elsewhere) on `sms` multiprocessors: the fewest (rows of a warp
/// share their reads of `x`) that still give every multiprocessor 8 warps, and never more
/// lanes than items.
pub fn lanes_for(n_out: usize, units: usize, sms: u32) -> u32 {
    let warps_wanted = 8 * sms as usize;
    let mut lanes = 4u32;
    while lanes < 32 {
        let rows_per_warp = 32 / lanes as usize;
        let enough_warps = n_out.div_ceil(rows_per_warp) >= warps_wanted;
        if enough_warps || lanes as usize >= units {
            break;
        }
        lanes *= 2;
    }
    lanes
}

/// The shape of the tensor-core decode kernel (`qgemv_tc`) of a format, read from its
/// compiled variants: chunks of K of `chunk_bytes` per row (its blocks' rows:
/// [`tc_row_tiles`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcShape {
    /// The bytes of a row's chunk of K.
    pub chunk_bytes: u32,
    /// The elements of a chunk of K (`n_in` must be a multiple).
    pub chunk: usize,
}

/// The [`TcShape`] of `format`, `None` where `qgemv_tc` has no variant for it (F32).
pub fn tc_shape(format: WeightFormat) -> Option<TcShape> {
    let fmt = format_code(format)?.to_string();
    let v = qgemv_tc::VARIANTS
        .iter()
        .find(|v| v.const_str("FMT") == Some(fmt.as_str()))?;
    let chunk_bytes = v.const_u32("SB")?;
    let blocks = chunk_bytes as usize / format.block_bytes();
    let chunk = blocks * format.block_elements();
    Some(TcShape { chunk_bytes, chunk })
}

/// The row tiles of 16 of a block of the tensor-core decode kernel for `format` in `plan`
/// (`MT` of its compiled variants: 2 for Q4_0 and Q4_K with f32 tokens in columns, whose
/// blocks split `x` themselves, so that each split serves 32 rows, and for int8 activations
/// in two column tiles (on an H100 at 16 tokens, Q4_0 14336 x 4096 took 46.5 µs on 32 rows a
/// block, 56.8 µs on 16; at 1 token 35.2 µs on 16 rows, 38.1 µs on 32); 1 elsewhere), `None`
/// where it has no variant.
pub fn tc_row_tiles(format: WeightFormat, plan: TcPlan) -> Option<u32> {
    let want = [
        ("FMT", format_code(format)?.to_string()),
        ("NT", plan.nt.to_string()),
        ("SPLIT", plan.split.to_string()),
        ("XQ", u32::from(plan.int8).to_string()),
    ];
    qgemv_tc::VARIANTS.iter().find_map(|v| {
        if want
            .iter()
            .all(|(k, val)| v.const_str(k) == Some(val.as_str()))
        {
            v.const_u32("MT")
        } else {
            None
        }
    })
}

/// Why the tensor-core decode kernel cannot take this product (`None`: it can): the format,
/// the device (it needs sm_80), `n_in` not whole chunks, rows or the view not 16-byte
/// aligned, or rows of [`QTC_MAX_ROW_BYTES`] or more.
fn tc_unfit(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    row_bytes: usize,
    w_ptr: u64,
) -> Option<String> {
    let Some(shape) = tc_shape(format) else {
        return Some(format!("the tensor-core decode kernel has no {format} variant (it takes Q4_0, Q8_0, Q4_K, BF16 and F16)"));
    };
    let cc = stream.gpu().props().compute_capability;
    if cc < (8, 0) {
        return Some(format!(
            "the tensor-core decode kernel needs compute capability 8.0 or later, not {}.{}",
            cc.0, cc.1
        ));
    }
    if g.k % shape.chunk != 0 || row_bytes % 16 != 0 || w_ptr % 16 != 0 {
        return Some(format!(
            "the tensor-core decode kernel copies {format} rows in chunks of {} elements, 16 bytes at a time: n_in ({}) must be a multiple of {} and the view ({w_ptr:#x}, rows of {row_bytes} bytes) 16-byte aligned",
            shape.chunk, g.k, shape.chunk
        ));
    }
    if row_bytes >= QTC_MAX_ROW_BYTES as usize {
        return Some(format!(
            "the tensor-core decode kernel takes rows below {QTC_MAX_ROW_BYTES} bytes, not {row_bytes}"
        ));
    }
    None
}

/// The kernel of a [`qgemm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QKernel {
    /// The decode kernel (`qgemv`), in chunks of [`QGEMV_MAX_TOKENS`] tokens.
    Decode,
    /// The tensor-core decode kernel (`qgemv_tc`) on blocks of `warps` warps (one of
    /// [`tc_warp_options`]): every product exact, sums in f32, in chunks of tokens
    /// ([`tc_plan`]).
    DecodeTc { warps: u32 },
    /// The tensor-core decode kernel on int8 activations (`qgemv_tc` with `XQ` 1, after
    /// `qgemv_tc_x8`), blocks of `warps` warps (one of [`tc_warp_options`] of
    /// [`tc_plan_int8`]): `x` quantized per block of 32 ([`crate::quant::int8_activations`]),
    /// exact i32 sums of the codes' products per block, scaled and summed in f32. Q4_0, Q8_0
    /// and Q4_K ([`qgemm_int8`]).
    DecodeInt8 { warps: u32 },
    /// The prefill kernel (`gemm_f32_q`) on an FFMA tile (one of
    /// [`crate::ops::gemm::F32_TILES`]) over `splits` slices of K (1: no split).
    Prefill { tile: Tile, splits: u32 },
    /// The tensor-core prefill kernel (`gemm_mma_q`) on a tile of [`tc_prefill_tiles`], the
    /// activations rounded to `half` (F16 or BF16) and the weights dequantized to it
    /// ([`qgemm_tc`]).
    PrefillTc { tile: Tile, half: Dtype },
    /// The tensor-core prefill on Hopper's `wgmma` (`gemm_wgmma_q`, compute capability 9.0)
    /// on a tile of [`wgmma_prefill_tiles`], inputs as for [`QKernel::PrefillTc`].
    PrefillWgmma { tile: Tile, half: Dtype },
}

impl std::fmt::Display for QKernel {
    /// `decode`, `prefill128x128`, `prefill64x64/k3`, `prefill-bf16/128x128`,
    /// `prefill-wgmma-f16/128x128`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QKernel::Decode => write!(f, "decode"),
            QKernel::DecodeTc { warps } => write!(f, "decode-tc/w{warps}"),
            QKernel::DecodeInt8 { warps } => write!(f, "decode-i8/w{warps}"),
            QKernel::Prefill { tile, splits: 1 } => write!(f, "prefill{}x{}", tile.bm, tile.bn),
            QKernel::Prefill { tile, splits } => {
                write!(f, "prefill{}x{}/k{splits}", tile.bm, tile.bn)
            }
            QKernel::PrefillTc { tile, half } => {
                write!(f, "prefill-{}/{}x{}", half.name(), tile.bm, tile.bn)
            }
            QKernel::PrefillWgmma { tile, half } => {
                write!(f, "prefill-wgmma-{}/{}x{}", half.name(), tile.bm, tile.bn)
            }
        }
    }
}

/// `g` as the f32 GEMM whose B is the dequantized weights (`[n_out, n_in]`, exact f32).
fn dense(g: &Gemm) -> Gemm {
    Gemm {
        ldb: g.k,
        precision: Precision::F32,
        ..*g
    }
}

/// `y = act(alpha · x · Wᵀ + beta · y + bias) + residual` for the `g.m` tokens of `x`, `W`
/// `g.n` rows (`n_out`) of `g.k` (`n_in`) elements in `format`, row after row as ggml lays
/// them out (`bytes` exactly `g.n · format.row_bytes(g.k)` long). `g` gives the tokens'
/// leading dimensions (`lda` of `x`, `ldc` of `y`, `ldr` of the residual), alpha, beta, the
/// activation and its slope; its B layout must be [`BLayout::NK`], its batch 1, and its
/// precision is not read (the products are exact, the sums f32). The kernel: up to
/// [`QGEMV_MAX_TOKENS`] tokens the tensor-core decode kernel where `tc_unfit` allows it
/// ([`QKernel::DecodeTc`], on [`tc_warps`] warps), the FFMA decode kernel elsewhere; the prefill kernel from
/// [`PREFILL_MIN_TOKENS`] on where `w` starts 4-byte aligned, on the FFMA tile and slices of
/// K that [`crate::ops::gemm`] picks for the f32 GEMM of the same shape.
///
/// # Errors
/// - [`Error::InvalidArgument`]: a B layout other than [`BLayout::NK`], a batch, F32 weights
///   (use [`crate::ops::gemm`]), `n_in` not a multiple of the format's block, or the shape
///   checks of [`Gemm::validate`] (buffer lengths, leading dimensions);
/// - [`Error::LengthMismatch`]: `w` not exactly the matrix's bytes, or a bias not `n_out`
///   long;
/// - the driver's errors of the launch.
#[allow(clippy::too_many_arguments)]
pub fn qgemm(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let kernel = pick(stream, g, format, w.device_ptr())?;
    qgemm_with(stream, g, format, kernel, w, x, bias, residual, y)
}

/// The kernel [`qgemm`] runs for `g` with weights of `format` whose view starts at device
/// address `w_ptr`: the prefill kernel (on the FFMA GEMM's plan) from [`PREFILL_MIN_TOKENS`]
/// tokens where the view is 4-byte aligned, else the tensor-core decode kernel where it
/// fits (`tc_unfit`), else the FFMA decode kernel.
///
/// # Errors
/// Those of the FFMA GEMM's dispatch for the prefill plan.
pub fn pick(stream: &Stream, g: &Gemm, format: WeightFormat, w_ptr: u64) -> Result<QKernel> {
    if g.m >= PREFILL_MIN_TOKENS && g.n > 0 && g.k > 0 && w_ptr % 4 == 0 {
        let (tile, splits) = ffma_plan(stream, &dense(g))?;
        return Ok(QKernel::Prefill { tile, splits });
    }
    let tc_fits = format
        .row_bytes(g.k)
        .is_ok_and(|row_bytes| tc_unfit(stream, g, format, row_bytes, w_ptr).is_none());
    let plan = tc_plan(format, g.m);
    Ok(match tc_row_tiles(format, plan) {
        Some(mt) if tc_fits => QKernel::DecodeTc {
            warps: tc_warps(format, g.n, mt, plan, stream.gpu().props().sm_count),
        },
        _ => QKernel::Decode,
    })
}

/// [`qgemm`] with the prefill on tensor cores: from [`PREFILL_MIN_TOKENS`] tokens on, on sm_80
/// or later and weights whose view starts 4-byte aligned, `x` is rounded to `half` (F16 or
/// BF16, to nearest even) and each weight dequantized to it (the f32 value of ggml's
/// dequantization rounded once), and `mma.sync` multiplies them with f32 sums
/// ([`QKernel::PrefillTc`], `gemm_mma_q`). That is cuBLAS's bf16 / f16 GEMM on the dequantized
/// weights: the price of the speed is the inputs' rounding, a relative error of up to 2^-9
/// (BF16) or 2^-12 (F16) per operand, and F16 activations beyond ±65504 overflow. Fewer tokens,
/// and products the tensor-core prefill cannot take, run [`qgemm`]'s exact kernels.
///
/// # Errors
/// Those of [`qgemm`], and [`Error::InvalidArgument`] for a `half` other than F16 or BF16.
#[allow(clippy::too_many_arguments)]
pub fn qgemm_tc(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    half: Dtype,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let kernel = pick_tc(stream, g, format, half, w.device_ptr())?;
    qgemm_with(stream, g, format, kernel, w, x, bias, residual, y)
}

/// The 16-bit types the tensor-core prefill takes its inputs in.
pub const TC_PREFILL_TYPES: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

/// The tiles of the tensor-core prefill kernel (`gemm_mma_q`), read from its compiled
/// variants, largest first.
pub fn tc_prefill_tiles() -> Vec<Tile> {
    tiles_of(gemm_mma_q::VARIANTS)
}

/// The tiles of the Hopper prefill kernel (`gemm_wgmma_q`), largest first.
pub fn wgmma_prefill_tiles() -> Vec<Tile> {
    tiles_of(gemm_wgmma_q::VARIANTS)
}

/// The `BM × BN` tiles of `variants`, largest first.
fn tiles_of(variants: &[crate::KernelVariant]) -> Vec<Tile> {
    let mut tiles: Vec<Tile> = Vec::new();
    for v in variants {
        if let (Some(bm), Some(bn)) = (v.const_u32("BM"), v.const_u32("BN")) {
            let tile = Tile { bm, bn };
            if !tiles.contains(&tile) {
                tiles.push(tile);
            }
        }
    }
    tiles.sort_by_key(|t| std::cmp::Reverse(t.bm * t.bn));
    tiles
}

/// The warps (`WM`, `WN`) of the tensor-core prefill kernel's `tile`, `None` where it has no
/// such tile.
fn tc_prefill_warps(tile: Tile) -> Option<(u32, u32)> {
    gemm_mma_q::VARIANTS.iter().find_map(|v| {
        (v.const_u32("BM")? == tile.bm && v.const_u32("BN")? == tile.bn)
            .then_some((v.const_u32("WM")?, v.const_u32("WN")?))
    })
}

/// The kernel [`qgemm_tc`] runs: from [`PREFILL_MIN_TOKENS`] tokens on sm_80 or later where
/// the weights' view starts 4-byte aligned, on compute capability 9.0
/// [`QKernel::PrefillWgmma`] on its tile where that gives at least half the multiprocessors
/// a block, elsewhere [`QKernel::PrefillTc`] on the largest tile of [`tc_prefill_tiles`] that
/// gives every multiprocessor a block (else the smallest); of the tiles whose shared memory
/// the device allows a block; else [`pick`]'s.
///
/// # Errors
/// [`Error::InvalidArgument`] for a `half` other than F16 or BF16; those of [`pick`].
pub fn pick_tc(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    half: Dtype,
    w_ptr: u64,
) -> Result<QKernel> {
    check_half(half)?;
    let props = stream.gpu().props();
    if g.m >= PREFILL_MIN_TOKENS
        && g.n > 0
        && g.k > 0
        && w_ptr % 4 == 0
        && props.compute_capability >= (8, 0)
    {
        let sms = props.sm_count as usize;
        let optin = props.max_shared_per_block_optin;
        let blocks = |t: &Tile| g.m.div_ceil(t.bm as usize) * g.n.div_ceil(t.bn as usize);
        if props.compute_capability == WGMMA_CC {
            if let Some(&tile) = wgmma_prefill_tiles()
                .iter()
                .find(|t| 2 * blocks(t) >= sms && wgmma_q_shared_bytes(**t) <= optin)
            {
                return Ok(QKernel::PrefillWgmma { tile, half });
            }
        }
        let mut tiles = tc_prefill_tiles();
        tiles.retain(|t| mma_q_shared_bytes(*t) <= optin);
        if let Some(&tile) = tiles.iter().find(|t| blocks(t) >= sms).or(tiles.last()) {
            return Ok(QKernel::PrefillTc { tile, half });
        }
    }
    pick(stream, g, format, w_ptr)
}

/// `half` if the tensor-core prefill takes it ([`TC_PREFILL_TYPES`]).
fn check_half(half: Dtype) -> Result<()> {
    if TC_PREFILL_TYPES.contains(&half) {
        Ok(())
    } else {
        Err(Error::from(error::InvalidArgument {
            op: "ops::quant::qgemm_tc",
            message: format!(
                "the tensor-core prefill rounds its inputs to f16 or bf16, not {}",
                half.name()
            ),
        }))
    }
}

/// [`qgemm`] with the activations quantized to int8: `x` in blocks of 32 along `n_in`, each
/// with its scale `max |x| / 127` and codes rounded to nearest even
/// ([`crate::quant::int8_activations`] gives the values it multiplies), times the weights'
/// codes on int8 tensor cores, each block's sum exact in i32, scaled and summed in f32. Fewer
/// instructions per weight than the exact kernels; the price is the activations' rounding,
/// an error of up to half a code step, `max |x| / 254` of the element's block, per element
/// (the quant bench prints the largest error it sees). It takes
/// Q4_0, Q8_0 and Q4_K weights ([`INT8_FORMATS`]) up to [`QGEMV_MAX_TOKENS`] tokens on
/// the tensor-core decode kernel ([`pick_int8`]); every other product runs [`qgemm`]'s
/// exact kernels.
///
/// # Errors
/// Those of [`qgemm`].
#[allow(clippy::too_many_arguments)]
pub fn qgemm_int8(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let kernel = pick_int8(stream, g, format, w.device_ptr())?;
    qgemm_with(stream, g, format, kernel, w, x, bias, residual, y)
}

/// The kernel [`qgemm_int8`] runs: [`QKernel::DecodeInt8`] on [`tc_warps`] warps for
/// [`INT8_FORMATS`] up to [`QGEMV_MAX_TOKENS`] tokens where the tensor-core decode kernel
/// fits, else [`pick`]'s.
///
/// # Errors
/// Those of [`pick`].
pub fn pick_int8(stream: &Stream, g: &Gemm, format: WeightFormat, w_ptr: u64) -> Result<QKernel> {
    let fits = INT8_FORMATS.contains(&format)
        && g.m <= QGEMV_MAX_TOKENS as usize
        && format
            .row_bytes(g.k)
            .is_ok_and(|row_bytes| tc_unfit(stream, g, format, row_bytes, w_ptr).is_none());
    let plan = tc_plan_int8(g.m);
    match tc_row_tiles(format, plan) {
        Some(mt) if fits => Ok(QKernel::DecodeInt8 {
            warps: tc_warps(format, g.n, mt, plan, stream.gpu().props().sm_count),
        }),
        _ => pick(stream, g, format, w_ptr),
    }
}

/// [`qgemm`] on the kernel chosen by the caller: for tests and tuning, which run every
/// variant directly.
///
/// # Errors
/// Those of [`qgemm`], and [`Error::InvalidArgument`] for the tensor-core decode kernel on a
/// format it lacks, on a device below sm_80, or on rows that are not whole chunks in a
/// 16-byte aligned view; for a prefill kernel on weights whose
/// view does not start 4-byte aligned, on a tile that is not one of
/// [`crate::ops::gemm::F32_TILES`], or over 0 or more than [`crate::gemm::MAX_BATCH`] slices
/// of K.
#[allow(clippy::too_many_arguments)]
pub fn qgemm_with(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    kernel: QKernel,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    const OP: &str = "ops::quant::qgemm";
    let invalid = |message: String| Error::from(error::InvalidArgument { op: OP, message });
    let Some(fmt) = format_code(format) else {
        return Err(invalid(
            "F32 weights go through ops::gemm::gemm (B as f32 [N, K])".into(),
        ));
    };
    if g.b_layout != BLayout::NK {
        return Err(invalid(format!(
            "quantized weights are [n_out, n_in] rows (BLayout::NK), not {:?}",
            g.b_layout
        )));
    }
    if g.batch != 1 {
        return Err(invalid(format!(
            "a batch of {} quantized products: launch one per matrix",
            g.batch
        )));
    }
    let row_bytes = format.row_bytes(g.k).map_err(|e| match e {
        Error::InvalidArgument(a) => invalid(a.message),
        other => other,
    })?;
    let expected =
        g.n.checked_mul(row_bytes)
            .ok_or_else(|| invalid(format!("{} rows of {row_bytes} bytes overflow usize", g.n)))?;
    if w.len() != expected {
        return Err(Error::from(error::LengthMismatch {
            what: format!(
                "{OP}: bytes of the {} x {} {format} weights ({row_bytes} per row)",
                g.n, g.k
            ),
            expected,
            actual: w.len(),
        }));
    }
    if row_bytes >= 1 << 31 {
        return Err(invalid(format!(
            "rows of {row_bytes} bytes: the kernel takes rows below 2^31 bytes"
        )));
    }
    // The weights' elements count as a dense B `[n_out, n_in]` for the shape checks.
    let dense = Gemm { ldb: g.k, ..*g };
    dense.validate(
        OP,
        x.len(),
        g.n * g.k,
        y.len(),
        bias.map(|b| b.len()),
        residual.map(|r| r.len()),
    )?;
    let chunks = g.m.div_ceil(QGEMV_MAX_TOKENS as usize);
    if chunks > u16::MAX as usize {
        return Err(invalid(format!(
            "{} tokens: at most {} per call",
            g.m,
            u16::MAX as usize * QGEMV_MAX_TOKENS as usize
        )));
    }
    if g.m == 0 || g.n == 0 {
        return stream.gpu().take_deferred();
    }
    if let QKernel::Prefill { tile, splits } = kernel {
        if w.device_ptr() % 4 != 0 {
            return Err(invalid(format!(
                "the prefill kernel {kernel} reads the weights 2 and 4 bytes at a time: their view must start 4-byte aligned, not at address {:#x}",
                w.device_ptr()
            )));
        }
        if !F32_TILES.contains(&tile) {
            return Err(invalid(format!(
                "the prefill kernel has no {}x{} tile (it has the FFMA tiles {F32_TILES:?})",
                tile.bm, tile.bn
            )));
        }
        if splits == 0 || splits as usize > MAX_BATCH {
            return Err(invalid(format!("{splits} slices of K (1 ..= {MAX_BATCH})")));
        }
        // SAFETY: `g` and the operands passed the checks above (`validate`, the weights'
        // length, a batch of 1), the tile is one of `F32_TILES` and `splits` in range.
        return unsafe {
            prefill(
                stream, g, fmt, row_bytes, tile, splits, w, x, bias, residual, y,
            )
        };
    }
    let tc = match kernel {
        QKernel::PrefillTc { tile, half } => Some((tile, half, false)),
        QKernel::PrefillWgmma { tile, half } => Some((tile, half, true)),
        _ => None,
    };
    if let Some((tile, half, wgmma)) = tc {
        check_half(half)?;
        if w.device_ptr() % 4 != 0 {
            return Err(invalid(format!(
                "the prefill kernel {kernel} reads the weights 2 and 4 bytes at a time: their view must start 4-byte aligned, not at address {:#x}",
                w.device_ptr()
            )));
        }
        let (warps, tiles, needs) = if wgmma {
            let ok = wgmma_prefill_tiles().contains(&tile);
            (ok.then_some((0, 0)), wgmma_prefill_tiles(), WGMMA_CC)
        } else {
            (tc_prefill_warps(tile), tc_prefill_tiles(), (8, 0))
        };
        let Some(warps) = warps else {
            return Err(invalid(format!(
                "the prefill kernel {kernel} has no {}x{} tile (it has {tiles:?})",
                tile.bm, tile.bn
            )));
        };
        let cc = stream.gpu().props().compute_capability;
        if cc < (8, 0) || (wgmma && cc != needs) {
            return Err(invalid(format!(
                "the prefill kernel {kernel} needs compute capability {}.{}{}, not {}.{}",
                needs.0,
                needs.1,
                if wgmma { "" } else { " or later" },
                cc.0,
                cc.1
            )));
        }
        let shared = if wgmma {
            wgmma_q_shared_bytes(tile)
        } else {
            mma_q_shared_bytes(tile)
        };
        let optin = stream.gpu().props().max_shared_per_block_optin;
        if shared > optin {
            return Err(Error::from(error::Unsupported {
                kernel: kernel.to_string(),
                reason: format!(
                    "it needs {shared} bytes of shared memory per block, the device allows {optin}"
                ),
            }));
        }
        let kind = if wgmma { None } else { Some(warps) };
        // SAFETY: `g` and the operands passed the checks above (`validate`, the weights'
        // length, a batch of 1), the tile (and its warps) are a compiled variant's.
        return unsafe {
            if half == Dtype::F16 {
                prefill_tc::<f16>(
                    stream, g, fmt, row_bytes, tile, kind, w, x, bias, residual, y,
                )
            } else {
                prefill_tc::<bf16>(
                    stream, g, fmt, row_bytes, tile, kind, w, x, bias, residual, y,
                )
            }
        };
    }
    let tc = match kernel {
        QKernel::DecodeTc { warps } => Some((warps, tc_plan(format, g.m))),
        QKernel::DecodeInt8 { warps } => {
            if !INT8_FORMATS.contains(&format) {
                return Err(invalid(format!(
                    "int8 activations take the weight formats {INT8_FORMATS:?}, not {format}"
                )));
            }
            Some((warps, tc_plan_int8(g.m)))
        }
        _ => None,
    };
    if let Some((warps, plan)) = tc {
        if let Some(why) = tc_unfit(stream, g, format, row_bytes, w.device_ptr()) {
            return Err(invalid(why));
        }
        let per_chunk = plan.tokens() as usize;
        if g.m.div_ceil(per_chunk) > u16::MAX as usize {
            return Err(invalid(format!(
                "{} tokens: the tensor-core decode kernel takes at most {} per call",
                g.m,
                u16::MAX as usize * per_chunk
            )));
        }
        if !tc_warp_options(plan).contains(&warps) {
            return Err(invalid(format!(
                "the tensor-core decode kernel at {} tokens ({plan:?}) runs blocks of {:?} warps, not {warps}",
                g.m,
                tc_warp_options(plan)
            )));
        }
        // SAFETY: `g` and the operands passed the checks above (`w` exactly `g.n ≥ 1` rows of
        // `row_bytes`), and `tc_unfit` found nothing against the product.
        return unsafe {
            decode_tc(
                stream, g, format, fmt, plan, warps, row_bytes, w, x, bias, residual, y,
            )
        };
    }
    let variant = qgemv::variant(fmt)
        .ok_or_else(|| crate::__private::variant_not_compiled("qgemv", format!("FMT={fmt}")))?;
    let group = group_elements(format);
    let group_bytes = format.row_bytes(group).unwrap_or(usize::MAX);
    let fast = g.k % group == 0
        && row_bytes % 16 == 0
        && w.device_ptr() % 16 == 0
        && group_bytes % 16 == 0;
    let units = if fast { g.k / group } else { g.k.div_ceil(32) };
    let lanes = lanes_for(g.n, units, stream.gpu().props().sm_count);
    let rows_per_block = QGEMV_THREADS / 32 * (32 / lanes);
    let chunk = u64::from(QGEMV_MAX_TOKENS);
    // Grid y takes the chunks of tokens: the "batch" strides are a chunk's rows.
    let p = GemmParams {
        ldb: row_bytes as u32,
        batch_a: chunk * g.lda as u64,
        batch_b: 0,
        batch_c: chunk * g.ldc as u64,
        batch_r: chunk * g.ldr as u64,
        vec_b: fast,
        ..operand_params(g, w, x, residual, y)
    };
    let q = QuantParams {
        lanes,
        row_bytes: row_bytes as u32,
        fast,
    };
    super::log_dispatch(|| {
        format!(
            "qgemm tokens={} n_out={} n_in={} {format} -> {}: {} lanes per row, {} path{}",
            g.m,
            g.n,
            g.k,
            variant.entry,
            lanes,
            if fast { "16-byte group" } else { "byte-wise" },
            if chunks > 1 {
                format!(", {chunks} chunks of {QGEMV_MAX_TOKENS} tokens")
            } else {
                String::new()
            }
        )
    });
    let grid = [(g.n as u32).div_ceil(rows_per_block), chunks as u32, 1];
    qgemv::launch(
        stream,
        LaunchConfig::grid(grid),
        fmt,
        p,
        q,
        w,
        x,
        bias,
        residual,
        y,
    )
}

/// How the tensor-core decode kernel takes a chunk of tokens: `nt` column tiles (`NT` of
/// `qgemv_tc`) of [`QTC_COLUMNS`] columns, and `split` (`SPLIT`): 1 where a column is one
/// bf16 part of one token's activations, split once per call by `qgemv_tc_x` (one `mma` for
/// every part of two tokens), 3 where a column is a token and each block splits `x`, each part
/// an `mma` of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcPlan {
    pub nt: u32,
    pub split: u32,
    /// Int8 activations (`XQ` 1: a column is a token, `split` 3).
    pub int8: bool,
}

impl TcPlan {
    /// The tokens of a block (a chunk of tokens, grid y).
    pub fn tokens(self) -> u32 {
        QTC_COLUMNS * self.nt * self.split / QTC_PARTS
    }
}

/// The [`TcPlan`] for `tokens` of `format`: parts in columns up to 5 tokens (at most 2
/// tiles, whose fragments `qgemv_tc_x` writes once; beyond, their bytes outweigh the
/// weights'), tokens in columns from 6 on and for BF16 (8 or 16 tokens a block, more in
/// chunks of 16). On an H100 at 14336 x 4096, Q4_0 took 34.1 µs at 1 token with parts in
/// columns, 44.1 µs with tokens in columns, but 87.5 µs at 8 tokens, 44.3 µs with tokens in
/// columns; BF16 took 64.4 µs at 1 token with parts in columns, 59.0 µs with tokens (and
/// F16, whose weights take two `mma` each, has the same plan).
pub fn tc_plan(format: WeightFormat, tokens: usize) -> TcPlan {
    if !tc_float(format) && tokens <= 5 {
        TcPlan {
            nt: if tokens <= 2 { 1 } else { 2 },
            split: 1,
            int8: false,
        }
    } else {
        TcPlan {
            nt: if tokens <= 8 { 1 } else { 2 },
            split: 3,
            int8: false,
        }
    }
}

/// Whether the tensor-core decode kernel reads `format` as 16-bit floats (BF16, F16), whose
/// rows are longer than the block formats' and take tokens in columns.
fn tc_float(format: WeightFormat) -> bool {
    matches!(format, WeightFormat::Bf16 | WeightFormat::F16)
}

/// The [`TcPlan`] of the int8 activations for `tokens`: a column a token, one column tile up
/// to 8 tokens, two beyond (16 tokens a block, more in chunks of 16).
pub fn tc_plan_int8(tokens: usize) -> TcPlan {
    TcPlan {
        nt: if tokens <= 8 { 1 } else { 2 },
        split: 3,
        int8: true,
    }
}

/// The weight formats of the int8 activations ([`qgemm_int8`]): those whose codes are
/// integers.
pub const INT8_FORMATS: [WeightFormat; 3] =
    [WeightFormat::Q4_0, WeightFormat::Q8_0, WeightFormat::Q4K];

/// The warps of a block of the tensor-core decode kernel (`W` of `qgemv_tc`) for `n_out`
/// rows of `format` at `nt` column tiles on a device of `sms` multiprocessors: 4 (a block of
/// 16 rows the smallest unit, so that the blocks fill the multiprocessors evenly) for the
/// block formats at up to 5 tokens where there are at least 4 blocks per multiprocessor, 8
/// elsewhere (fewer rows, whose blocks need more warps each to keep enough memory in
/// flight, and BF16 and F16, whose rows are longer). On an H100, Q4_0 at 14336 x 4096 and 1
/// token took 34.7 µs on 4 warps a block, 44.4 µs on 8 warps of 32 rows; BF16 71.1 µs on 4,
/// 58.4 µs on 8.
pub fn tc_warps(format: WeightFormat, n_out: usize, mt: u32, plan: TcPlan, sms: u32) -> u32 {
    let tiles = n_out.div_ceil(16 * mt as usize);
    let options = tc_warp_options(plan);
    if !tc_float(format) && tiles >= 4 * sms as usize {
        options[0]
    } else {
        options[options.len() - 1]
    }
}

/// The warps a block of the tensor-core decode kernel may have in `plan` (its compiled
/// variants), fewest first: 4 or 8 with parts in columns or int8 activations in one column
/// tile, 8 elsewhere.
pub fn tc_warp_options(plan: TcPlan) -> &'static [u32] {
    if plan.split == 1 || (plan.int8 && plan.nt == 1) {
        &[4, 8]
    } else {
        &[8]
    }
}

/// The tensor-core decode kernel (`qgemv_tc`) for `g` with weights of `format` (code
/// `fmt`), rows of `row_bytes`: one pass over the weights for up to [`QGEMV_MAX_TOKENS`]
/// tokens ([`tc_plan`]), a pass per chunk of that many beyond. `qgemv_tc_x`
/// first splits `x` into the `mma` fragments, in a workspace of the stream's.
///
/// # Safety
///
/// The kernel copies the weights without bounds checks: `g` has passed [`qgemm_with`]'s
/// checks with these operands (`w` exactly `g.n ≥ 1` rows of `row_bytes` bytes, `x`, `y`,
/// `bias` and `residual` of `g`'s shape), and `tc_unfit` found nothing against this product
/// (rows of whole chunks, `row_bytes` and the view 16-byte aligned, `row_bytes` below
/// [`QTC_MAX_ROW_BYTES`]).
#[allow(clippy::too_many_arguments)]
unsafe fn decode_tc(
    stream: &Stream,
    g: &Gemm,
    format: WeightFormat,
    fmt: u32,
    plan: TcPlan,
    warps: u32,
    row_bytes: usize,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let nt = plan.nt;
    let (Some(shape), Some(mt)) = (tc_shape(format), tc_row_tiles(format, plan)) else {
        return Err(crate::__private::variant_not_compiled(
            "qgemv_tc",
            format!("FMT={fmt}, NT={nt}"),
        ));
    };
    let variant = qgemv_tc::variant(
        fmt,
        mt,
        shape.chunk_bytes,
        nt,
        warps,
        plan.split,
        u32::from(plan.int8),
    )
    .ok_or_else(|| {
        crate::__private::variant_not_compiled(
            "qgemv_tc",
            format!(
                "FMT={fmt}, MT={mt}, NT={nt}, WARPS={warps}, SPLIT={}, XQ={}",
                plan.split,
                u32::from(plan.int8)
            ),
        )
    })?;
    let chunk = u64::from(plan.tokens());
    let p = GemmParams {
        ldb: row_bytes as u32,
        batch_a: chunk * g.lda as u64,
        batch_b: 0,
        batch_c: chunk * g.ldc as u64,
        batch_r: chunk * g.ldr as u64,
        vec_b: true,
        ..operand_params(g, w, x, residual, &*y)
    };
    let q = QuantParams {
        lanes: 0,
        row_bytes: row_bytes as u32,
        fast: true,
    };
    let rows = 16 * mt;
    let chunks = (g.m as u64).div_ceil(chunk) as u32;
    // With parts in columns, `qgemv_tc_x`'s fragments: per chunk of tokens, `g.k / 32 + 1`
    // pairs of steps (the last zeros), `nt` column tiles of 32 lanes of 4 words. With int8
    // activations `qgemv_tc_x8`'s codes and scales: per chunk, pair and column (token) 8
    // words of codes and 2 of scales. With f32 tokens in columns the blocks split `x`
    // themselves.
    let split = if plan.int8 {
        Some(qgemv_tc_x8::variant(nt).ok_or_else(|| {
            crate::__private::variant_not_compiled("qgemv_tc_x8", format!("NT={nt}"))
        })?)
    } else if plan.split == 1 {
        Some(qgemv_tc_x::variant(nt).ok_or_else(|| {
            crate::__private::variant_not_compiled("qgemv_tc_x", format!("NT={nt}"))
        })?)
    } else {
        None
    };
    let pairs = g.k / 32 + 1;
    let words = if plan.int8 {
        chunks as usize * pairs * (QTC_COLUMNS * nt) as usize * 10
    } else if split.is_some() {
        chunks as usize * pairs * nt as usize * 128
    } else {
        0
    };
    super::log_dispatch(|| {
        format!(
            "qgemm tokens={} n_out={} n_in={} {format} -> {}{}: tensor cores, {rows} rows x {} tokens a block, {} warps over K{}",
            g.m,
            g.n,
            g.k,
            variant.entry,
            split.map_or(String::new(), |s| format!(" after {}", s.entry)),
            chunk,
            warps,
            if chunks > 1 {
                format!(", {chunks} chunks of tokens")
            } else {
                String::new()
            }
        )
    });
    let mut xs = crate::DeviceBuffer::<u32>::alloc(stream.gpu(), words)?;
    if plan.int8 {
        let quads = pairs * (QTC_COLUMNS * nt) as usize * 4;
        let blocks = quads.div_ceil(QTC_X_THREADS as usize) as u32;
        qgemv_tc_x8::launch(
            stream,
            LaunchConfig::grid([blocks, chunks, 1]),
            nt,
            p,
            x,
            &mut xs,
        )?;
    } else if split.is_some() {
        let split_blocks = (pairs * nt as usize * 32).div_ceil(QTC_X_THREADS as usize) as u32;
        qgemv_tc_x::launch(
            stream,
            LaunchConfig::grid([split_blocks, chunks, 1]),
            nt,
            p,
            x,
            &mut xs,
        )?;
    }
    let grid = [(g.n as u32).div_ceil(rows), chunks, 1];
    // The stages, and after the loop the warps' sums in the same memory.
    let stages = warps * QTC_STAGES * rows * shape.chunk_bytes;
    let sums = warps * QTC_COLUMNS * nt * (rows + 4) * 4;
    let smem = stages.max(sums);
    // SAFETY: this function's contract is the launch's: `w` the validated view of `g.n` (≥ 1)
    // rows of `row_bytes` bytes, rows of whole chunks, `row_bytes` (below
    // `QTC_MAX_ROW_BYTES`) and the view 16-byte aligned.
    unsafe {
        qgemv_tc::launch(
            stream,
            LaunchConfig::grid(grid).with_shared_mem(smem),
            fmt,
            mt,
            shape.chunk_bytes,
            nt,
            warps,
            plan.split,
            u32::from(plan.int8),
            p,
            q,
            w,
            x,
            &xs,
            bias,
            residual,
            y,
        )
    }
}

/// The [`GemmParams`] of `g` on these operands (`params_at`; B's fields are the caller's).
fn operand_params(
    g: &Gemm,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &impl DeviceWrite<f32>,
) -> GemmParams {
    params_at(
        g,
        Dtype::F32,
        Dtype::F32,
        [x.device_ptr(), w.device_ptr(), y.device_ptr()],
        residual.map(|r| r.device_ptr()),
    )
}

/// The bytes of a prefill kernel's ring of raw weights: `stages` stages of `tile.bn` rows
/// of [`Q_RING_ROW`] words.
fn ring_bytes(tile: Tile, stages: u32) -> u32 {
    stages * tile.bn * Q_RING_ROW * std::mem::size_of::<u32>() as u32
}

/// The dynamic shared memory of `gemm_mma_q` on `tile`: [`mma_shared_bytes`]'s stages of A
/// and B, then the ring of raw weights ([`STAGES`] stages).
pub fn mma_q_shared_bytes(tile: Tile) -> u32 {
    mma_shared_bytes(tile, false)
        .max(STAGES * (tile.bm + tile.bn) * TC_ROW + ring_bytes(tile, STAGES))
}

/// The dynamic shared memory of `gemm_wgmma_q` on `tile`: [`WG_STAGES`] buffers of the
/// activations (`tile.bm` rows of 128 bytes), then the ring of raw weights ([`Q_RING_WORDS`]
/// words for each of the `tile.bn` rows); the transposed output tile of the epilogue over
/// them.
pub fn wgmma_q_shared_bytes(tile: Tile) -> u32 {
    let ring = tile.bn * Q_RING_WORDS * std::mem::size_of::<u32>() as u32;
    (WG_STAGES * tile.bm * 128 + ring).max(tile.bm * (tile.bn + 4) * 4)
}

/// The tensor-core prefill for `g` with weights of format code `fmt`, rows of `row_bytes`, on
/// `tile`: `gemm_mma_q` on `warps` (`Some((WM, WN))`), or `gemm_wgmma_q` (`None`). `x` is
/// first rounded into `T` in a buffer of its own (`x_to_half`, rows of a multiple of 8
/// elements).
///
/// # Safety
///
/// As for [`prefill`]; `tile` and `warps` are those of a compiled variant. (The kernel's copies
/// of the rounded `x` lie inside the buffer this function allocates.)
#[allow(clippy::too_many_arguments)]
unsafe fn prefill_tc<T: ActElement + DeviceRepr>(
    stream: &Stream,
    g: &Gemm,
    fmt: u32,
    row_bytes: usize,
    tile: Tile,
    warps: Option<(u32, u32)>,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let variant = match warps {
        Some((wm, wn)) => gemm_mma_q::variant::<T>(fmt, tile.bm, tile.bn, wm, wn),
        None => gemm_wgmma_q::variant::<T>(fmt, tile.bm, tile.bn),
    }
    .ok_or_else(|| {
        crate::__private::variant_not_compiled(
            if warps.is_some() {
                "gemm_mma_q"
            } else {
                "gemm_wgmma_q"
            },
            format!(
                "T={}, FMT={fmt}, BM={}, BN={}",
                T::DTYPE.name(),
                tile.bm,
                tile.bn
            ),
        )
    })?;
    let ldh = g.k.next_multiple_of(8);
    let mut xh = DeviceBuffer::<T>::alloc(stream.gpu(), g.m * ldh)?;
    let units = (g.m * g.k.div_ceil(8)) as u64;
    let blocks = units
        .div_ceil(256)
        .min(u64::from(stream.gpu().props().sm_count) * 8)
        .max(1);
    x_to_half::launch::<T>(
        stream,
        LaunchConfig::grid_1d(blocks as u32),
        g.m as u32,
        g.k as u32,
        g.lda as u32,
        ldh as u32,
        x,
        &mut xh,
    )?;
    let p = GemmParams {
        lda: ldh as u32,
        batch_a: 0,
        // The buffer starts aligned and its rows are whole 16-byte vectors.
        vec_a: true,
        ldb: row_bytes as u32,
        batch_b: 0,
        // The weights are read with checks, whatever the tile.
        vec_b: true,
        splits: 1,
        kc: slice_len(g.k, 1, Q_BK),
        ..operand_params(g, w, x, residual, &*y)
    };
    super::log_dispatch(|| {
        format!(
            "qgemm tokens={} n_out={} n_in={} fmt={fmt} -> {}: tensor-core prefill on {}x{} tiles, inputs in {}",
            g.m,
            g.n,
            g.k,
            variant.entry,
            tile.bm,
            tile.bn,
            T::DTYPE.name()
        )
    });
    let grid = [
        (g.n as u32).div_ceil(tile.bn),
        (g.m as u32).div_ceil(tile.bm),
        1,
    ];
    // SAFETY: `p` comes from the validated `g` with `x` replaced by `xh`, which holds its `m`
    // rows of `k` elements at `ldh` (a multiple of 8) from an aligned start; `kc` is a
    // multiple of `Q_BK` and the grid's z extent 1; the weights are read with checks.
    unsafe {
        match warps {
            Some((wm, wn)) => {
                let cfg = LaunchConfig::grid(grid).with_shared_mem(mma_q_shared_bytes(tile));
                gemm_mma_q::launch::<T>(
                    stream, cfg, fmt, tile.bm, tile.bn, wm, wn, p, &xh, w, bias, residual, y, None,
                )
            }
            None => {
                // x as `[K, tokens]` in boxes of 128 bytes of K by the tile's tokens.
                let tx = TensorMap::tiled(
                    &xh,
                    &[g.k as u64, g.m as u64, 1],
                    &[ldh as u64, (ldh * g.m) as u64],
                    &[128 / T::DTYPE.size() as u32, tile.bm, 1],
                    Swizzle::B128,
                )?;
                let cfg = LaunchConfig::grid(grid).with_shared_mem(wgmma_q_shared_bytes(tile));
                gemm_wgmma_q::launch::<T>(
                    stream, cfg, fmt, tile.bm, tile.bn, p, &tx, w, bias, residual, y, None,
                )
            }
        }
    }
}

/// The prefill kernel (`gemm_f32_q`) for `g` with weights of format code `fmt`, rows of
/// `row_bytes`, on `tile` over `splits` slices of K.
///
/// # Safety
///
/// The kernel reads the tiles of `x` that lie inside it without bounds checks: `g` has passed
/// [`qgemm_with`]'s checks with these operands (every element of its `m × k` rows at `lda`
/// inside `x`, `y`, `bias` and `residual` of its shape, a batch of 1), `tile` is one of
/// [`F32_TILES`] and `splits` in `1 ..= MAX_BATCH`. (The weights are read with checks; `w`
/// starts 4-byte aligned.)
#[allow(clippy::too_many_arguments)]
unsafe fn prefill(
    stream: &Stream,
    g: &Gemm,
    fmt: u32,
    row_bytes: usize,
    tile: Tile,
    splits: u32,
    w: &impl DeviceRead<u8>,
    x: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    y: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let micro = f32_micro_cols(tile);
    let variant = gemm_f32_q::variant(fmt, tile.bm, tile.bn, micro).ok_or_else(|| {
        crate::__private::variant_not_compiled(
            "gemm_f32_q",
            format!("FMT={fmt}, BM={}, BN={}", tile.bm, tile.bn),
        )
    })?;
    let p = GemmParams {
        ldb: row_bytes as u32,
        batch_b: 0,
        // The weights are read with checks, whatever the tile.
        vec_b: true,
        splits,
        kc: slice_len(g.k, splits, crate::kernels::gemm::BK),
        ..operand_params(g, w, x, residual, &*y)
    };
    super::log_dispatch(|| {
        format!(
            "qgemm tokens={} n_out={} n_in={} fmt={fmt} -> {}: prefill on {}x{} FFMA tiles, {splits} slices of K",
            g.m, g.n, g.k, variant.entry, tile.bm, tile.bn
        )
    });
    let grid = [
        (g.n as u32).div_ceil(tile.bn),
        (g.m as u32).div_ceil(tile.bm),
        splits,
    ];
    let cfg = LaunchConfig::grid(grid).with_shared_mem(shared_bytes(tile));
    let launch = |bias: Option<&dyn DeviceRead<f32>>,
                  residual: Option<&dyn DeviceRead<f32>>,
                  y: &mut _,
                  ws: Option<&mut dyn DeviceWrite<f32>>| {
        // SAFETY: by this function's contract `p` comes from the validated `g` (every element
        // of `x` inside its view, `vec_a` from its alignment and leading dimension); `kc` is a
        // multiple of `BK` and the grid's z extent is `splits` (batch 1); the weights are read
        // with checks.
        unsafe {
            gemm_f32_q::launch(
                stream, cfg, fmt, tile.bm, tile.bn, micro, p, x, w, bias, residual, y, ws,
            )
        }
    };
    with_splits(stream, &dense(g), p, bias, residual, y, launch)
}

//! Matrix products with quantized weights on the GPU: `y = act(alpha · x · Wᵀ + beta · y +
//! bias) + residual` with `W` `[n_out, n_in]` in a [`WeightFormat`] of [`crate::quant`]
//! (the bytes of a GGUF tensor, uploaded as they are) and `x` `[tokens, n_in]` f32.
//!
//! [`qgemm`] runs the decode kernel ([`crate::kernels::quant`]): every product exact in f32
//! (the weights' codes are small integers and their scales f16), sums in f32, each weight
//! byte read once per [`QGEMV_MAX_TOKENS`] tokens. Beyond that many tokens the launch takes
//! the tokens in chunks of that many, each chunk reading the weights again.

use crate::gemm::{BLayout, Gemm};
use crate::kernels::gemm::GemmParams;
use crate::kernels::quant::{
    qgemv, QuantParams, FMT_BF16, FMT_F16, FMT_Q4K, FMT_Q4_0, FMT_Q8_0, QGEMV_MAX_TOKENS,
    QGEMV_THREADS, QGROUP_BLOCKS, QGROUP_FLOATS,
};
use crate::quant::WeightFormat;
use crate::{error, DeviceRead, DeviceWrite, Error, LaunchConfig, Result, Stream};

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

/// `y = act(alpha · x · Wᵀ + beta · y + bias) + residual` for the `g.m` tokens of `x`, `W`
/// `g.n` rows (`n_out`) of `g.k` (`n_in`) elements in `format`, row after row as ggml lays
/// them out (`bytes` exactly `g.n · format.row_bytes(g.k)` long). `g` gives the tokens'
/// leading dimensions (`lda` of `x`, `ldc` of `y`, `ldr` of the residual), alpha, beta, the
/// activation and its slope; its B layout must be [`BLayout::NK`], its batch 1, and its
/// precision is not read (the products are exact, the sums f32).
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
    let vec = |ptr: u64, ld: usize| ptr % 16 == 0 && ld % 4 == 0;
    let chunk = u64::from(QGEMV_MAX_TOKENS);
    let p = GemmParams {
        m: g.m as u32,
        n: g.n as u32,
        k: g.k as u32,
        lda: g.lda as u32,
        ldb: row_bytes as u32,
        ldc: g.ldc as u32,
        ldr: g.ldr as u32,
        batch_a: chunk * g.lda as u64,
        batch_b: 0,
        batch_c: chunk * g.ldc as u64,
        batch_r: chunk * g.ldr as u64,
        alpha: g.alpha,
        beta: g.beta,
        slope: g.slope,
        act: crate::kernels::gemm::act_code(g.act),
        splits: 1,
        kc: g.k as u32,
        ldw: 0,
        batch: 1,
        vec_a: vec(x.device_ptr(), g.lda),
        vec_b: fast,
        vec_c: vec(y.device_ptr(), g.ldc),
        vec_r: residual.is_some_and(|r| vec(r.device_ptr(), g.ldr)),
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

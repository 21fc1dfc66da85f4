//! GEMM on the GPU: `C = act(alpha · A·B + beta · C + bias) + residual` (see [`Gemm`]): the
//! public API, its validation and the choice of the kernel variant (the kernels are
//! [`crate::kernels::gemm`]).
//!
//! With `PAGESIFT_GPU_LOG=dispatch` every call prints the variant it runs and why, on stderr.

use crate::kernels::gemm::{act_code, gemm_f32, GemmParams, BK};
use crate::{DeviceRead, DeviceWrite, KernelVariant, LaunchConfig, Result, Stream};

pub use crate::gemm::{tolerance, BLayout, Gemm, Precision, MAX_BATCH};

/// A block tile of the f32 kernels: `BM × BN` outputs per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
}

/// The block tiles of the f32 kernels, largest first.
pub const F32_TILES: [Tile; 2] = [Tile { bm: 128, bn: 128 }, Tile { bm: 64, bn: 64 }];

/// `C = act(alpha · A·B + beta · C + bias) + residual` as described by `g`, on `stream`.
///
/// `a`, `b`, `c` (and the residual) hold the matrices at the indices of [`Gemm::a_index`] and
/// friends; `bias` has `N` values. Any sizes and any view alignment: rows are read and
/// written as 16-byte vectors where the leading dimension, the batch stride and the view's
/// start allow it, per element elsewhere. `M`, `N` or the batch 0 does nothing; `K = 0`
/// gives `act(beta · C + bias) + residual`.
///
/// # Errors
///
/// [`crate::Error::InvalidArgument`] for a shape the buffers cannot hold (naming the operand
/// and the elements needed), a leading dimension below its row length or a size past the
/// kernels' 32-bit dimensions; [`crate::Error::LengthMismatch`] for a bias whose length is
/// not `N`; [`crate::Error::DeviceMismatch`] for a buffer of another device; errors of the
/// launch.
pub fn gemm(
    stream: &Stream,
    g: &Gemm,
    a: &impl DeviceRead<f32>,
    b: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    c: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    let tile = pick_tile(stream, g);
    gemm_with_tile(stream, g, tile, a, b, bias, residual, c)
}

/// [`gemm`] with the block tile chosen by the caller (one of [`F32_TILES`]): for tests and
/// tuning, which run every variant directly.
#[allow(clippy::too_many_arguments)]
pub fn gemm_with_tile(
    stream: &Stream,
    g: &Gemm,
    tile: Tile,
    a: &impl DeviceRead<f32>,
    b: &impl DeviceRead<f32>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<f32>>,
    c: &mut impl DeviceWrite<f32>,
) -> Result<()> {
    const OP: &str = "ops::gemm::gemm";
    g.validate(
        OP,
        a.len(),
        b.len(),
        c.len(),
        bias.map(|x| x.len()),
        residual.map(|x| x.len()),
    )?;
    let bt = g.b_layout == BLayout::NK;
    let variant = variant(tile, bt)?;
    if g.is_empty() {
        return stream.gpu().take_deferred();
    }
    let vec = |ptr: u64, ld: usize, stride: usize| {
        ptr % 16 == 0 && ld % 4 == 0 && (g.batch == 1 || stride % 4 == 0)
    };
    let p = GemmParams {
        m: g.m as u32,
        n: g.n as u32,
        k: g.k as u32,
        lda: g.lda as u32,
        ldb: g.ldb as u32,
        ldc: g.ldc as u32,
        ldr: g.ldr as u32,
        batch_a: g.stride_a as u64,
        batch_b: g.stride_b as u64,
        batch_c: g.stride_c as u64,
        batch_r: g.stride_r as u64,
        alpha: g.alpha,
        beta: g.beta,
        slope: g.slope,
        act: act_code(g.act),
        vec_a: vec(a.device_ptr(), g.lda, g.stride_a),
        vec_b: vec(b.device_ptr(), g.ldb, g.stride_b),
        vec_c: vec(c.device_ptr(), g.ldc, g.stride_c),
        vec_r: residual.is_some_and(|r| vec(r.device_ptr(), g.ldr, g.stride_r)),
    };
    let grid = [
        (g.n as u32).div_ceil(tile.bn),
        (g.m as u32).div_ceil(tile.bm),
        g.batch as u32,
    ];
    super::log_dispatch(|| {
        format!(
            "gemm M={} N={} K={} batch={} {:?}: {} (grid {grid:?})",
            g.m, g.n, g.k, g.batch, g.b_layout, variant.entry
        )
    });
    gemm_f32::launch(
        stream,
        LaunchConfig::grid(grid).with_shared_mem(shared_bytes(tile)),
        tile.bm,
        tile.bn,
        bt,
        p,
        a,
        b,
        bias,
        residual,
        c,
    )
}

/// The dynamic shared memory of a tile's kernel: two K steps of A and B, which the
/// epilogue's half tile (`BM / 2 × BN`) reuses.
pub fn shared_bytes(tile: Tile) -> u32 {
    let f = std::mem::size_of::<f32>() as u32;
    (2 * BK * (tile.bm + tile.bn) * f).max(tile.bm / 2 * tile.bn * f)
}

/// The kernel variant of a tile and layout.
pub fn variant(tile: Tile, bt: bool) -> Result<&'static KernelVariant> {
    gemm_f32::variant(tile.bm, tile.bn, bt).ok_or_else(|| {
        crate::__private::variant_not_compiled(
            "gemm_f32",
            format!("BM={}, BN={}, BT={bt}", tile.bm, tile.bn),
        )
    })
}

/// The largest tile whose grid still gives every multiprocessor a block; the smallest
/// otherwise (small problems want more, smaller blocks).
fn pick_tile(stream: &Stream, g: &Gemm) -> Tile {
    let sms = u64::from(stream.gpu().props().sm_count.max(1));
    let blocks = |t: Tile| {
        (g.m as u64).div_ceil(u64::from(t.bm))
            * (g.n as u64).div_ceil(u64::from(t.bn))
            * g.batch as u64
    };
    F32_TILES
        .iter()
        .copied()
        .find(|t| blocks(*t) >= sms)
        .unwrap_or(F32_TILES[F32_TILES.len() - 1])
}

//! GEMM on the GPU: `C = act(alpha · A·B + beta · C + bias) + residual` (see [`Gemm`]): the
//! public API, its validation and the choice of the kernel variant (the kernels are
//! [`crate::kernels::gemm`]).
//!
//! With `PAGESIFT_GPU_LOG=dispatch` every call prints the variant it runs and why, on stderr.

use crate::act::ActElement;
use crate::driver::{Swizzle, TensorMap};
use crate::kernels::gemm::{
    act_code, gemm_f32, gemm_mma, gemm_splitk_reduce, gemm_tma, gemm_tma_x3, gemm_wgmma, gemv,
    GemmParams, BK, GEMV_COLUMNS, GEMV_UNROLL_16, GEMV_UNROLL_F32, SKEW, SMALL_WARP_TILE, STAGES,
    TC_ROW, TMA_EPI_LD, TMA_STAGES, TMA_X3_STAGES, WG_STAGES, X3_MAX_WARPS,
};
use crate::DeviceBuffer;
use crate::{error, Error};
use crate::{DeviceRead, DeviceWrite, Dtype, Gpu, KernelVariant, LaunchConfig, Result, Stream};

pub use crate::gemm::{tolerance, tolerance_for, BLayout, Gemm, Precision, MAX_BATCH};

pub mod autotune;

/// A block tile of the f32 kernels: `BM × BN` outputs per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
}

/// The block tiles of the f32 kernels, largest first.
pub const F32_TILES: [Tile; 4] = [
    Tile { bm: 128, bn: 128 },
    Tile { bm: 128, bn: 64 },
    Tile { bm: 64, bn: 64 },
    Tile { bm: 32, bn: 128 },
];

/// The micro-tile widths of [`F32_TILES`]: each thread of the FFMA kernel computes 8 rows ×
/// this many columns (threads `bm / 8 × bn / width`).
const F32_MICRO_COLS: [u32; 4] = [16, 8, 8, 8];

/// The block tiles of the tensor-core kernels, largest first, with their warps along M and N.
pub const MMA_TILES: [Tile; 4] = [
    Tile { bm: 256, bn: 128 },
    Tile { bm: 128, bn: 128 },
    Tile { bm: 128, bn: 64 },
    Tile { bm: 64, bn: 64 },
];
const MMA_WARPS: [(u32, u32); 4] = [(4, 2), (2, 4), (4, 2), (2, 2)];

/// The block tiles of the Hopper kernel (`wgmma`, compute capability 9.0), largest first:
/// two warpgroups of 64 rows each.
pub const WGMMA_TILES: [Tile; 2] = [Tile { bm: 128, bn: 256 }, Tile { bm: 128, bn: 128 }];

/// The compute capability of the devices that run the `wgmma` kernel (its PTX targets
/// sm_90a, which no later architecture runs).
pub const WGMMA_CC: (u32, u32) = (9, 0);

/// Whether the Hopper tile serves 3xTF32 (`x3`; every tile serves the other precisions): the
/// 3xTF32 kernel (`gemm_tma_x3`) keeps each stage twice, TF32 heads and tails, which only
/// the 128 × 128 tile's stages leave room for.
pub fn wgmma_tile_serves(tile: Tile, x3: bool) -> bool {
    !x3 || tile == Tile { bm: 128, bn: 128 }
}

/// A kernel of the GEMM: a block tile of the FFMA kernel (f32 inputs, any precision: exact
/// f32), of the tensor-core kernel (f32 inputs at [`Precision::Tf32`] and
/// [`Precision::Tf32x3`], f16 and bf16 inputs), or the decode kernel for at most `rows` (1, 2,
/// 4 or 8) rows of A against B in the [`BLayout::NK`] layout (any input type), over `splits`
/// slices of K (1: no split).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    Tiled(Tile),
    /// The tiled kernel over `splits` slices of K at once, into a workspace, then a pass that
    /// sums the slices through the epilogue (small M·N with a long K).
    SplitK(Tile, u32),
    /// The tensor-core kernel (one of [`MMA_TILES`]) at the GEMM's precision, over `splits`
    /// slices of K (1: no split).
    Mma {
        tile: Tile,
        splits: u32,
    },
    /// The Hopper tensor-core kernel (one of [`WGMMA_TILES`]): f16 and bf16 inputs, and f32
    /// at [`Precision::Tf32`] and [`Precision::Tf32x3`] (on the tiles of
    /// [`wgmma_tile_serves`]), B in the [`BLayout::NK`] layout, on a device of compute
    /// capability [`WGMMA_CC`], over `splits` slices of K. f32 inputs go through the tensor
    /// memory accelerator only: operands it cannot read (rows or batch strides that are not
    /// multiples of 16 bytes) take the `mma.sync` 128 × 128 tile instead.
    Wgmma {
        tile: Tile,
        splits: u32,
    },
    Gemv {
        rows: u32,
        splits: u32,
    },
}

impl std::fmt::Display for Kernel {
    /// `128x128`, `128x128/k3` (split in 3 along K), `mma128x64`, `wgmma128x256`, `gemv8`,
    /// `gemv8/k3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kernel::Tiled(t) => write!(f, "{}x{}", t.bm, t.bn),
            Kernel::SplitK(t, s) => write!(f, "{}x{}/k{s}", t.bm, t.bn),
            Kernel::Mma { tile: t, splits: 1 } => write!(f, "mma{}x{}", t.bm, t.bn),
            Kernel::Mma { tile: t, splits } => write!(f, "mma{}x{}/k{splits}", t.bm, t.bn),
            Kernel::Wgmma { tile: t, splits: 1 } => write!(f, "wgmma{}x{}", t.bm, t.bn),
            Kernel::Wgmma { tile: t, splits } => write!(f, "wgmma{}x{}/k{splits}", t.bm, t.bn),
            Kernel::Gemv { rows, splits: 1 } => write!(f, "gemv{rows}"),
            Kernel::Gemv { rows, splits } => write!(f, "gemv{rows}/k{splits}"),
        }
    }
}

impl std::str::FromStr for Kernel {
    type Err = String;

    /// The names of [`Kernel`]'s `Display`: `128x128`, `128x128/k3`, `mma128x64`,
    /// `mma128x64/k3`, `gemv8`, `gemv8/k3` (any tile and count; [`autotune::valid`] checks
    /// them).
    fn from_str(s: &str) -> std::result::Result<Kernel, String> {
        let bad = || {
            format!("{s:?} is not a GEMM kernel name (e.g. 128x128, 128x64/k3, mma128x64, gemv8)")
        };
        if let Some(rest) = s.strip_prefix("gemv") {
            let (rows, splits) = match rest.split_once("/k") {
                Some((r, k)) => (r, k.parse::<u32>().map_err(|_| bad())?),
                None => (rest, 1),
            };
            let rows = rows.parse().map_err(|_| bad())?;
            return Ok(Kernel::Gemv { rows, splits });
        }
        let (wgmma, s) = match s.strip_prefix("wg") {
            Some(r) if r.starts_with("mma") => (true, r),
            _ => (false, s),
        };
        let (mma, rest) = match s.strip_prefix("mma") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let (tile, splits) = match rest.split_once("/k") {
            Some((t, k)) => (t, k.parse::<u32>().map_err(|_| bad())?),
            None => (rest, 1),
        };
        let (bm, bn) = tile.split_once('x').ok_or_else(bad)?;
        let tile = Tile {
            bm: bm.parse().map_err(|_| bad())?,
            bn: bn.parse().map_err(|_| bad())?,
        };
        Ok(match (mma, splits) {
            (true, splits) if wgmma => Kernel::Wgmma { tile, splits },
            (true, splits) => Kernel::Mma { tile, splits },
            (false, 1) => Kernel::Tiled(tile),
            (false, s) => Kernel::SplitK(tile, s),
        })
    }
}

/// The row counts of the decode kernel's variants.
pub const GEMV_ROWS: [u32; 4] = [1, 2, 4, 8];

/// Every kernel, for tests and tuning: the FFMA tiles, each also split in 3 along K, the
/// decode variants, the first and last also split in 3, then the tensor-core tiles and the
/// Hopper ones, each also split in 3 ([`Kernel::serves`] says which inputs and precisions
/// each takes).
pub fn kernels() -> Vec<Kernel> {
    let tiles = F32_TILES.iter().map(|t| Kernel::Tiled(*t));
    let split = F32_TILES.iter().map(|t| Kernel::SplitK(*t, 3));
    let gemv = GEMV_ROWS
        .iter()
        .map(|&rows| Kernel::Gemv { rows, splits: 1 })
        .chain([1, 8].map(|rows| Kernel::Gemv { rows, splits: 3 }));
    let mma = MMA_TILES
        .iter()
        .flat_map(|&tile| [1, 3].map(|splits| Kernel::Mma { tile, splits }));
    let wgmma = WGMMA_TILES
        .iter()
        .flat_map(|&tile| [1, 3].map(|splits| Kernel::Wgmma { tile, splits }));
    tiles
        .chain(split)
        .chain(gemv)
        .chain(mma)
        .chain(wgmma)
        .collect()
}

impl Kernel {
    /// Whether the kernel takes inputs of type `input` and computes at least as accurately as
    /// `precision` asks: the FFMA kernels take f32 at every precision, the tensor-core ones
    /// f32 at TF32 and 3xTF32 (3xTF32 on tiles of [`mma_tile_serves`]) and f16 and bf16
    /// (whose products are exact in f32) at every precision, the decode kernel f32, f16 and bf16 at every precision (exact products, f32
    /// sums).
    pub fn serves(self, input: Dtype, precision: Precision) -> bool {
        let half = matches!(input, Dtype::F16 | Dtype::Bf16);
        match self {
            Kernel::Mma { tile, .. } => {
                let x3 = input == Dtype::F32 && precision == Precision::Tf32x3;
                (half || (input == Dtype::F32 && precision != Precision::F32))
                    && mma_tile_serves(tile, x3)
            }
            Kernel::Gemv { .. } => half || input == Dtype::F32,
            Kernel::Wgmma { tile, .. } => {
                let x3 = input == Dtype::F32 && precision == Precision::Tf32x3;
                (half || (input == Dtype::F32 && precision != Precision::F32))
                    && wgmma_tile_serves(tile, x3)
            }
            Kernel::Tiled(_) | Kernel::SplitK(..) => input == Dtype::F32,
        }
    }
}

/// The relative speed of a multiprocessor full of each tile's blocks (the larger tiles reuse
/// each loaded element more), for [`pick_tile`]: on an H200 128 × 128 reached 38 TFLOP/s at
/// 4096³ with 8 × 8 micro-tiles (44 with 8 × 16), 128 × 64 and 64 × 64 proportionally less
/// per multiprocessor.
const F32_TILE_SPEED: [f64; 4] = [1.0, 0.85, 0.6, 0.5];

/// `C = act(alpha · A·B + beta · C + bias) + residual` as described by `g`, on `stream`.
///
/// ```no_run
/// use pagesift_gpu::ops::gemm::gemm;
/// use pagesift_gpu::{Act, BLayout, DeviceBuffer, DeviceRead, Gemm, Gpu};
///
/// # fn main() -> pagesift_gpu::Result<()> {
/// let gpu = Gpu::new(0)?;
/// let stream = gpu.default_stream();
/// let (tokens, n_in, n_out) = (3, 4, 2);
/// let x = DeviceBuffer::from_host(&gpu, &[0.5f32; 12])?; // [tokens, n_in]
/// let w = DeviceBuffer::from_host(&gpu, &[0.25f32; 8])?; // [n_out, n_in]
/// let bias = DeviceBuffer::from_host(&gpu, &[1.0f32, -1.0])?;
/// let mut y = DeviceBuffer::<f32>::alloc(&gpu, tokens * n_out)?;
/// // y = silu(x · Wᵀ + bias)
/// let g = Gemm::new(tokens, n_out, n_in, BLayout::NK).with_act(Act::Silu);
/// gemm(&stream, &g, &x, &w, Some(&bias as &dyn DeviceRead<f32>), None, &mut y)?;
/// println!("{:?}", y.to_host()?);
/// # Ok(())
/// # }
/// ```
///
/// `a`, `b`, `c` (and the residual) hold the matrices at the indices of [`Gemm::a_index`] and
/// friends; `bias` has `N` values. Any sizes and any view alignment: rows are read and
/// written as 16-byte vectors where the leading dimension, the batch stride and the view's
/// start allow it, per element elsewhere. `M`, `N` or the batch 0 does nothing; `K = 0`
/// gives `act(beta · C + bias) + residual`.
///
/// The inputs `T` are f32 (computed as [`Gemm::precision`] asks), or f16 or bf16 (exact
/// products, f32 sums on tensor cores: compute capability 8.0 or later). C and the
/// residual `O` are f32, or the 16-bit type of the inputs (the epilogue computes in f32 and
/// rounds each output once); the bias is f32.
///
/// # Errors
///
/// [`crate::Error::InvalidArgument`] for a shape the buffers cannot hold (naming the operand
/// and the elements needed), a leading dimension below its row length, a size past the
/// kernels' 32-bit dimensions or an output type the inputs do not give;
/// [`crate::Error::LengthMismatch`] for a bias whose length is not `N`;
/// [`crate::Error::DeviceMismatch`] for a buffer of another device;
/// [`crate::Error::Unsupported`] for 16-bit inputs on a device without their tensor cores;
/// errors of the launch.
pub fn gemm<T: ActElement, O: ActElement>(
    stream: &Stream,
    g: &Gemm,
    a: &impl DeviceRead<T>,
    b: &impl DeviceRead<T>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<O>>,
    c: &mut impl DeviceWrite<O>,
) -> Result<()> {
    let kernel = match (g.is_empty(), T::DTYPE) {
        // An empty GEMM launches nothing, but its kernel must take the inputs.
        (true, Dtype::F32) => Kernel::Tiled(F32_TILES[0]),
        (true, _) => Kernel::Mma {
            tile: MMA_TILES[0],
            splits: 1,
        },
        (false, _) => {
            let k = pick::<T, O>(stream, g)?;
            // The decode kernel is the one pass over the weights; the rest may be tuned.
            if autotune::enabled() && !matches!(k, Kernel::Gemv { .. }) {
                autotune::pick::<T, O>(stream, g, a, b, k)?
            } else {
                k
            }
        }
    };
    gemm_with(stream, g, kernel, a, b, bias, residual, c)
}

/// [`gemm`] with the kernel chosen by the caller (one of [`kernels`]): for tests and tuning,
/// which run every variant directly.
///
/// # Errors
///
/// Those of [`gemm`], [`crate::Error::InvalidArgument`] for a kernel that does not
/// serve the inputs and precision ([`Kernel::serves`]) or a decode kernel given more rows
/// than it handles or B in the `KN` layout, and [`crate::Error::Unsupported`] for a kernel
/// whose block needs more shared memory than the device has ([`kernel_shared_bytes`]).
#[allow(clippy::too_many_arguments)]
pub fn gemm_with<T: ActElement, O: ActElement>(
    stream: &Stream,
    g: &Gemm,
    kernel: Kernel,
    a: &impl DeviceRead<T>,
    b: &impl DeviceRead<T>,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<O>>,
    c: &mut impl DeviceWrite<O>,
) -> Result<()> {
    const OP: &str = "ops::gemm::gemm";
    let (input, output) = (T::DTYPE, O::DTYPE);
    if output != Dtype::F32 && output != input {
        return Err(Error::from(error::InvalidArgument {
            op: OP,
            message: format!(
                "C and the residual of {} for inputs of {}: the output is f32 or the inputs' 16-bit type",
                output.name(),
                input.name()
            ),
        }));
    }
    g.validate(
        OP,
        a.len(),
        b.len(),
        c.len(),
        bias.map(|x| x.len()),
        residual.map(|x| x.len()),
    )?;
    let bt = g.b_layout == BLayout::NK;
    let invalid = |message: String| Err(Error::from(error::InvalidArgument { op: OP, message }));
    let splits = match kernel {
        Kernel::SplitK(_, s)
        | Kernel::Mma { splits: s, .. }
        | Kernel::Wgmma { splits: s, .. }
        | Kernel::Gemv { splits: s, .. } => s,
        Kernel::Tiled(_) => 1,
    };
    if splits == 0 || g.batch.saturating_mul(splits as usize) > MAX_BATCH {
        return invalid(format!(
            "{splits} slices of K for a batch of {} (batch × slices must be 1 ..= {MAX_BATCH})",
            g.batch
        ));
    }
    if !kernel.serves(input, g.precision) {
        return invalid(match (kernel, input) {
            (Kernel::Mma { tile, .. }, Dtype::F32)
                if g.precision == Precision::Tf32x3 && !mma_tile_serves(tile, true) =>
            {
                format!(
                    "the tensor-core kernel {kernel} has no 3xTF32 variant (3xTF32 blocks have at most {X3_MAX_WARPS} warps of at most {SMALL_WARP_TILE} outputs each)"
                )
            }
            (Kernel::Mma { .. }, _) => format!(
                "the tensor-core kernel {kernel} computes f32 inputs in TF32: it serves Precision::Tf32 and Precision::Tf32x3, not {:?}",
                g.precision
            ),
            (Kernel::Wgmma { .. }, Dtype::F32) if g.precision == Precision::Tf32x3 => format!(
                "the Hopper kernel {kernel} has no 3xTF32 variant (3xTF32 keeps each stage twice: the 128 × 128 tile only)"
            ),
            (Kernel::Wgmma { .. }, Dtype::F32) => format!(
                "the Hopper kernel {kernel} computes f32 inputs in TF32: it serves Precision::Tf32 and Precision::Tf32x3, not {:?}",
                g.precision
            ),
            (Kernel::Wgmma { .. }, _) => format!(
                "the Hopper kernel {kernel} takes f16, bf16 or f32 inputs, not {}",
                input.name()
            ),
            _ => format!(
                "the FFMA kernel {kernel} takes f32 inputs, not {} (the tensor-core and decode kernels take 16-bit inputs)",
                input.name()
            ),
        });
    }
    let x3 = input == Dtype::F32 && g.precision == Precision::Tf32x3;
    let variant = match kernel {
        Kernel::Tiled(t) | Kernel::SplitK(t, _) => variant(t, bt)?,
        Kernel::Mma { tile, .. } => mma_variant::<T, O>(tile, bt, x3)?,
        Kernel::Wgmma { tile, .. } => {
            if !bt {
                return invalid(format!(
                    "the Hopper kernel {kernel} takes B as [N, K] (BLayout::NK), not {:?}",
                    g.b_layout
                ));
            }
            let cc = stream.gpu().compute_capability();
            if cc != WGMMA_CC {
                return Err(Error::from(error::Unsupported {
                    kernel: format!("gemm {kernel}"),
                    reason: format!(
                        "its wgmma kernels target sm_90a, which runs on compute capability 9.0 only; the device has {}.{}",
                        cc.0, cc.1
                    ),
                }));
            }
            wgmma_variant::<T, O>(tile, x3)?
        }
        Kernel::Gemv { rows, .. } => {
            if !bt || g.m > rows as usize {
                return invalid(format!(
                    "the decode kernel for {rows} rows takes B as [N, K] and at most {rows} rows, not {:?} with M = {}",
                    g.b_layout, g.m
                ));
            }
            gemv::variant::<T, O>(rows).ok_or_else(|| {
                crate::__private::variant_not_compiled(
                    "gemv",
                    format!("T={}, O={}, MT={rows}", input.name(), output.name()),
                )
            })?
        }
    };
    if g.is_empty() {
        return stream.gpu().take_deferred();
    }
    let p = launch_params(g, a, b, residual, &*c);
    super::log_dispatch(|| {
        format!(
            "gemm M={} N={} K={} batch={} {:?} {} {:?} -> {}: {}",
            g.m,
            g.n,
            g.k,
            g.batch,
            g.b_layout,
            input.name(),
            g.precision,
            output.name(),
            variant.entry
        )
    });
    // Slices of K whole steps long (the last may be shorter, or empty): K steps of the tiled
    // kernels, whole 16-byte vectors of the decode kernel.
    let step = match kernel {
        Kernel::Mma { .. } | Kernel::Wgmma { .. } => mma_k_step(input),
        Kernel::Gemv { .. } => GEMV_K_STEP,
        Kernel::Tiled(_) | Kernel::SplitK(..) => BK,
    };
    let kc = slice_len(g.k, splits, step);
    let p = GemmParams { splits, kc, ..p };
    if let Kernel::Gemv { rows, .. } = kernel {
        // Grid (column groups, batch × slices of K).
        let grid = [
            (g.n as u32).div_ceil(GEMV_COLUMNS),
            g.batch as u32 * splits,
            1,
        ];
        let cfg = LaunchConfig::grid(grid);
        let launch = |bias: Option<&dyn DeviceRead<f32>>,
                      residual: Option<&dyn DeviceRead<O>>,
                      c: &mut _,
                      ws: Option<&mut dyn DeviceWrite<f32>>| {
            // SAFETY: `p` comes from the validated `g` (every element of A and B inside the
            // views, `vec_*` from the views' alignment and strides), `kc` is a multiple of
            // 8, the grid's y extent is `batch · splits` and `ws` is the workspace of
            // `with_splits` below.
            unsafe { gemv::launch(stream, cfg, rows, p, a, b, bias, residual, c, ws) }
        };
        return with_splits(stream, g, p, bias, residual, c, launch);
    }
    let (tile, mma) = match kernel {
        Kernel::Mma { tile, .. } | Kernel::Wgmma { tile, .. } => (tile, true),
        Kernel::Tiled(t) | Kernel::SplitK(t, _) => (t, false),
        Kernel::Gemv { .. } => unreachable!("launched above"),
    };
    let wgmma = matches!(kernel, Kernel::Wgmma { .. });
    // The tiled kernels: grid (N tiles, M tiles, batch × slices of K).
    let grid = [
        (g.n as u32).div_ceil(tile.bn),
        (g.m as u32).div_ceil(tile.bm),
        g.batch as u32 * splits,
    ];
    let shared = kernel_shared_bytes(kernel, input, g.precision);
    let optin = stream.gpu().props().max_shared_per_block_optin;
    if shared > optin {
        return Err(Error::from(error::Unsupported {
            kernel: variant.display_name(),
            reason: format!(
                "it needs {shared} bytes of shared memory per block, the device allows {optin}"
            ),
        }));
    }
    let cfg = LaunchConfig::grid(grid).with_shared_mem(shared);
    // Operands the tensor memory accelerator can read go through the TMA kernel.
    let maps = if wgmma {
        tma_maps(g, tile, a, b, &p)?
    } else {
        None
    };
    if wgmma && input == Dtype::F32 && maps.is_none() {
        // TF32 and 3xTF32 on Hopper have only the TMA kernels: the `mma.sync` tile.
        let mma = Kernel::Mma {
            tile: Tile { bm: 128, bn: 128 },
            splits,
        };
        super::log_dispatch(|| {
            format!("gemm: {kernel} cannot read these f32 operands through the tensor memory accelerator: {mma}")
        });
        return gemm_with(stream, g, mma, a, b, bias, residual, c);
    }
    let launch = |bias: Option<&dyn DeviceRead<f32>>,
                  residual: Option<&dyn DeviceRead<O>>,
                  c: &mut _,
                  ws: Option<&mut dyn DeviceWrite<f32>>| {
        if let Some((ta, tb)) = &maps {
            let cfg = tma_launch_config(stream.gpu(), g, tile, splits, x3);
            if x3 {
                gemm_tma_x3::launch::<T, O>(
                    stream, cfg, tile.bm, tile.bn, p, ta, tb, bias, residual, c, ws,
                )
            } else {
                gemm_tma::launch::<T, O>(
                    stream, cfg, tile.bm, tile.bn, p, ta, tb, bias, residual, c, ws,
                )
            }
        } else if wgmma {
            // SAFETY: as for `gemm_mma` below (B `[N, K]`, tested above).
            unsafe {
                gemm_wgmma::launch::<T, O>(
                    stream, cfg, tile.bm, tile.bn, p, a, b, bias, residual, c, ws,
                )
            }
        } else if mma {
            let (wm, wn) = mma_warps(tile);
            // SAFETY: `p` comes from the validated `g` (every element of A and B inside the
            // views, `vec_*` from the views' alignment and strides), `kc` is a multiple of
            // the variant's K step and the grid's z extent is `batch · splits`.
            unsafe {
                gemm_mma::launch::<T, O>(
                    stream, cfg, tile.bm, tile.bn, wm, wn, bt, step, x3, p, a, b, bias, residual,
                    c, ws,
                )
            }
        } else {
            // SAFETY: as for `gemm_mma` above, with `kc` a multiple of `BK`.
            unsafe {
                gemm_f32::launch(
                    stream,
                    cfg,
                    tile.bm,
                    tile.bn,
                    f32_micro_cols(tile),
                    bt,
                    p,
                    a,
                    b,
                    bias,
                    residual,
                    c,
                    ws,
                )
            }
        }
    };
    with_splits(stream, g, p, bias, residual, c, launch)
}

/// Runs `launch` through the epilogue (`p.splits` 1), or split along K: into a workspace of
/// `[splits, batch, M, ldw]` raw sums, then `gemm_splitk_reduce`'s pass through the
/// epilogue.
#[allow(clippy::too_many_arguments)]
pub(crate) fn with_splits<O: ActElement, C: DeviceWrite<O>>(
    stream: &Stream,
    g: &Gemm,
    p: GemmParams,
    bias: Option<&dyn DeviceRead<f32>>,
    residual: Option<&dyn DeviceRead<O>>,
    c: &mut C,
    launch: impl FnOnce(
        Option<&dyn DeviceRead<f32>>,
        Option<&dyn DeviceRead<O>>,
        &mut C,
        Option<&mut dyn DeviceWrite<f32>>,
    ) -> Result<()>,
) -> Result<()> {
    let splits = p.splits;
    if splits == 1 {
        return launch(bias, residual, c, None);
    }
    let planes = splits as usize * g.batch * g.m;
    let mut ws = DeviceBuffer::<f32>::alloc(stream.gpu(), planes * p.ldw as usize)?;
    launch(None, None, c, Some(&mut ws as &mut dyn DeviceWrite<f32>))?;
    let groups = (g.batch * g.m) as u64 * u64::from(p.ldw / 4);
    let blocks = groups
        .div_ceil(256)
        .min(u64::from(stream.gpu().props().sm_count) * 8);
    gemm_splitk_reduce::launch::<O>(
        stream,
        LaunchConfig::grid_1d(blocks.max(1) as u32),
        p,
        &ws,
        bias,
        residual,
        c,
    )
}

/// The [`GemmParams`] of a launch for `g` on these operands as [`gemm_with`] fills them in,
/// for one slice of K (`splits` 1, `kc` = K): the shape, strides and epilogue of `g`, and
/// which operands are accessed as 16-byte vectors (each where its view's address, leading
/// dimension and batch stride allow). For tests that launch kernels of their own in the
/// GEMM's shape; `g` is taken as it is (see [`Gemm::validate`]).
pub fn launch_params<T: ActElement, O: ActElement>(
    g: &Gemm,
    a: &impl DeviceRead<T>,
    b: &impl DeviceRead<T>,
    residual: Option<&dyn DeviceRead<O>>,
    c: &impl DeviceRead<O>,
) -> GemmParams {
    params_at(
        g,
        T::DTYPE,
        O::DTYPE,
        [a.device_ptr(), b.device_ptr(), c.device_ptr()],
        residual.map(|r| r.device_ptr()),
    )
}

/// [`launch_params`] from the operands' addresses (`[a, b, c]`), their element types
/// (`input` of A and B, `output` of C and the residual) and the residual's address where
/// there is one.
pub(crate) fn params_at(
    g: &Gemm,
    input: Dtype,
    output: Dtype,
    [a, b, c]: [u64; 3],
    residual: Option<u64>,
) -> GemmParams {
    // A and B are read 16 bytes at a time, C and the residual 4 elements at a time.
    let vec = |ptr: u64, ld: usize, stride: usize, elems: usize, size: usize| {
        ptr % (elems * size) as u64 == 0 && ld % elems == 0 && (g.batch == 1 || stride % elems == 0)
    };
    let (t_size, o_size) = (input.size(), output.size());
    let vec_in = |ptr, ld, stride| vec(ptr, ld, stride, 16 / t_size, t_size);
    let vec_out = |ptr, ld, stride| vec(ptr, ld, stride, 4, o_size);
    GemmParams {
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
        vec_a: vec_in(a, g.lda, g.stride_a),
        vec_b: vec_in(b, g.ldb, g.stride_b),
        vec_c: vec_out(c, g.ldc, g.stride_c),
        vec_r: residual.is_some_and(|r| vec_out(r, g.ldr, g.stride_r)),
        splits: 1,
        kc: g.k as u32,
        ldw: (g.n as u32).next_multiple_of(4),
        batch: g.batch as u32,
    }
}

/// The FFMA tile and slices of K that [`gemm`]'s heuristic gives the f32 GEMM `g` (at
/// [`Precision::F32`], without autotuning): for kernels built on the FFMA tiles with other
/// B loaders ([`crate::ops::quant`]'s prefill).
pub(crate) fn ffma_plan(stream: &Stream, g: &Gemm) -> Result<(Tile, u32)> {
    match pick_tile::<f32, f32>(stream, g, Family::Ffma)? {
        Kernel::SplitK(t, s) => Ok((t, s)),
        // The FFMA family has no other kernels.
        Kernel::Tiled(t) | Kernel::Mma { tile: t, .. } | Kernel::Wgmma { tile: t, .. } => {
            Ok((t, 1))
        }
        Kernel::Gemv { .. } => Ok((F32_TILES[0], 1)),
    }
}

/// The slices of K of `splits` slices for a kernel whose K step is `step`: whole steps
/// long (the last may be shorter, or empty).
pub(crate) fn slice_len(k: usize, splits: u32, step: u32) -> u32 {
    (k as u32).div_ceil(splits).next_multiple_of(step).max(step)
}

/// The decode kernel's slices of K are multiples of this many elements (whole 16-byte
/// vectors of any input type).
const GEMV_K_STEP: u32 = 8;

/// The shortest slice of K the dispatch gives a decode block of `input` elements: a turn of
/// its 8 warps over their unrolled 16-byte vectors ([`GEMV_UNROLL_16`] chunks of 32 elements
/// per warp for 16-bit inputs; two halves of [`GEMV_UNROLL_F32`] chunks of 128 for f32).
pub fn gemv_min_slice(input: Dtype) -> usize {
    if input == Dtype::F32 {
        2 * 128 * GEMV_UNROLL_F32 as usize
    } else {
        8 * 32 * GEMV_UNROLL_16 as usize
    }
}

/// Slices of K for the decode kernel: 1 where its `blocks` (column groups × batch) fill a
/// wave of `per_wave` (the device's resident blocks), else as many as make about one wave,
/// each at least `min_slice` ([`gemv_min_slice`]) of the `k` elements long and at most
/// [`MAX_SPLITS`], within `MAX_BATCH` blocks along y for a batch of `batch`.
pub fn gemv_splits(blocks: u64, per_wave: u64, k: usize, min_slice: usize, batch: usize) -> u32 {
    if blocks == 0 || blocks >= per_wave {
        return 1;
    }
    let fill = (per_wave / blocks) as usize;
    let long = k / min_slice.max(1);
    let cap = MAX_BATCH / batch.max(1);
    fill.min(long).min(MAX_SPLITS).min(cap).max(1) as u32
}

/// The dynamic shared memory of a tile's kernel: two K steps of A and B, which the
/// epilogue's half tile (`BM / 2 × BN`) reuses.
pub fn shared_bytes(tile: Tile) -> u32 {
    let f = std::mem::size_of::<f32>() as u32;
    // Two buffers of each operand's k-major tile, each group of 4 rows of K skewed.
    let tile_len = |rows: u32| BK * rows + BK / 4 * SKEW;
    (2 * (tile_len(tile.bm) + tile_len(tile.bn)) * f).max(tile.bm / 2 * tile.bn * f)
}

/// The micro-tile width of an FFMA tile (one of [`F32_TILES`]; 0 for another).
pub(crate) fn f32_micro_cols(tile: Tile) -> u32 {
    F32_TILES
        .iter()
        .zip(F32_MICRO_COLS)
        .find(|(t, _)| **t == tile)
        .map_or(0, |(_, w)| w)
}

/// The kernel variant of a tile and layout.
pub fn variant(tile: Tile, bt: bool) -> Result<&'static KernelVariant> {
    gemm_f32::variant::<f32, f32>(tile.bm, tile.bn, f32_micro_cols(tile), bt).ok_or_else(|| {
        crate::__private::variant_not_compiled(
            "gemm_f32",
            format!("BM={}, BN={}, BT={bt}", tile.bm, tile.bn),
        )
    })
}

/// Whether the tensor-core kernel has a variant of `tile` (one of [`MMA_TILES`]) for
/// 3xTF32 (`x3`) or for the other precisions: 3xTF32 blocks have at most
/// [`X3_MAX_WARPS`] warps and warp tiles of at most [`SMALL_WARP_TILE`] outputs.
pub fn mma_tile_serves(tile: Tile, x3: bool) -> bool {
    let (wm, wn) = mma_warps(tile);
    let small = wm * wn > 0 && tile.bm / wm * (tile.bn / wn) <= SMALL_WARP_TILE;
    wm * wn > 0 && (!x3 || (wm * wn <= X3_MAX_WARPS && small))
}

/// The warps along M and N of a tensor-core tile.
fn mma_warps(tile: Tile) -> (u32, u32) {
    MMA_TILES
        .iter()
        .zip(MMA_WARPS)
        .find(|(t, _)| **t == tile)
        .map_or((0, 0), |(_, w)| w)
}

/// The dynamic shared memory of a tensor-core tile's kernel (any input type): `STAGES` K
/// steps of A and B (rows of [`TC_ROW`] bytes), for 3xTF32 (`x3`) twice over (the TF32
/// roundings of the remainders beside them), which the epilogue's padded f32 tile
/// (`BM × (BN + 4)`) reuses.
pub fn mma_shared_bytes(tile: Tile, x3: bool) -> u32 {
    let f = std::mem::size_of::<f32>() as u32;
    let sets = if x3 { 2 } else { 1 };
    (sets * STAGES * (tile.bm + tile.bn) * TC_ROW).max(tile.bm * (tile.bn + 4) * f)
}

/// The dynamic shared memory `kernel` launches with for inputs of `input` at `precision`
/// (the decode kernel's is static). A device runs it only where this is at most its
/// `max_shared_per_block_optin`: the dispatch and the autotune pass over the others, and
/// [`gemm_with`] refuses them with [`Error::Unsupported`].
pub fn kernel_shared_bytes(kernel: Kernel, input: Dtype, precision: Precision) -> u32 {
    match kernel {
        Kernel::Tiled(t) | Kernel::SplitK(t, _) => shared_bytes(t),
        Kernel::Mma { tile, .. } => {
            mma_shared_bytes(tile, input == Dtype::F32 && precision == Precision::Tf32x3)
        }
        Kernel::Wgmma { tile, .. } => hopper_shared_bytes(tile, input, precision),
        Kernel::Gemv { .. } => 0,
    }
}

/// The dynamic shared memory of a Hopper tile's kernel: `WG_STAGES` K steps of A and B
/// (rows of 128 bytes), which the epilogue's padded f32 tile (`BM × (BN + 4)`) reuses.
pub fn wgmma_shared_bytes(tile: Tile) -> u32 {
    let f = std::mem::size_of::<f32>() as u32;
    (WG_STAGES * (tile.bm + tile.bn) * 128).max(tile.bm * (tile.bn + 4) * f)
}

/// The dynamic shared memory of a Hopper tile's kernel for inputs of `input` at `precision`:
/// f16 and bf16 the larger of the `cp.async` and TMA kernels' (either may run), f32 the TMA
/// kernel's (TF32, or 3xTF32).
fn hopper_shared_bytes(tile: Tile, input: Dtype, precision: Precision) -> u32 {
    if input == Dtype::F32 {
        tma_shared_bytes(tile, precision == Precision::Tf32x3)
    } else {
        wgmma_shared_bytes(tile).max(tma_shared_bytes(tile, false))
    }
}

/// The dynamic shared memory of a Hopper tile's TMA kernel: `TMA_STAGES` K steps of A and B
/// (rows of 128 bytes); for 3xTF32 (`x3`, `gemm_tma_x3`) `TMA_X3_STAGES` of them, and their
/// TF32 tails beside them; then the epilogue's chunks (`BM` rows of `TMA_EPI_LD` f32).
pub fn tma_shared_bytes(tile: Tile, x3: bool) -> u32 {
    let rows = (tile.bm + tile.bn) * 128;
    let stages = if x3 {
        2 * TMA_X3_STAGES * rows
    } else {
        TMA_STAGES * rows
    };
    stages + tile.bm * TMA_EPI_LD * std::mem::size_of::<f32>() as u32
}

/// The tiles of the TMA kernel (`gemm_tma`) of `tile` for `g` split `splits` ways along K:
/// every matrix's and slice's.
fn tma_tiles(g: &Gemm, tile: Tile, splits: u32) -> u64 {
    (g.m as u64).div_ceil(u64::from(tile.bm))
        * (g.n as u64).div_ceil(u64::from(tile.bn))
        * g.batch as u64
        * u64::from(splits)
}

/// The launch of the persistent TMA kernel (`gemm_tma`, with `x3` `gemm_tma_x3`) of `tile`
/// for `g` split `splits` ways along K: one block per multiprocessor, or per tile where there are fewer tiles (the
/// blocks walk the tiles; [`tma_maps`] leaves shapes of more than `u32::MAX` tiles to the
/// `cp.async` kernel).
pub fn tma_launch_config(gpu: &Gpu, g: &Gemm, tile: Tile, splits: u32, x3: bool) -> LaunchConfig {
    let blocks = tma_tiles(g, tile, splits).min(u64::from(gpu.props().sm_count.max(1))) as u32;
    LaunchConfig::grid([blocks, 1, 1]).with_shared_mem(tma_shared_bytes(tile, x3))
}

/// Whether the Hopper kernels ([`Kernel::Wgmma`]) take these operands through the tensor
/// memory accelerator (`gemm_tma`: rows and batch strides multiples of 16 bytes, views
/// 16-byte aligned, batches apart, a device that encodes tensor maps) rather than through
/// `cp.async` (`gemm_wgmma`).
pub fn hopper_uses_tma<T: ActElement>(
    g: &Gemm,
    a: &impl DeviceRead<T>,
    b: &impl DeviceRead<T>,
) -> Result<bool> {
    let p = launch_params::<T, T>(g, a, b, None, a);
    Ok(tma_maps(g, WGMMA_TILES[0], a, b, &p)?.is_some())
}

/// The tensor maps of A and B for the TMA kernel of `tile` (`gemm_tma`): `[K, M, batch]`
/// and `[K, N, batch]` in boxes of 128 bytes of K by the tile's rows, 128-byte swizzled.
/// `None` where the operands do not allow it (rows or batch strides not multiples of 16
/// bytes, batches that overlap, a driver without tensor maps): the `cp.async` kernel
/// (`gemm_wgmma`) takes them.
fn tma_maps<'a, T: ActElement>(
    g: &Gemm,
    tile: Tile,
    a: &'a impl DeviceRead<T>,
    b: &'a impl DeviceRead<T>,
    p: &GemmParams,
) -> Result<Option<(TensorMap<'a, T>, TensorMap<'a, T>)>> {
    if !(p.vec_a && p.vec_b) || tma_tiles(g, tile, p.splits) > u64::from(u32::MAX) {
        return Ok(None);
    }
    let row = 128 / T::DTYPE.size() as u32;
    let map = |x: &'a dyn DeviceRead<T>, rows: usize, ld: usize, stride: usize, box_rows: u32| {
        // One matrix: any batch stride past it.
        let stride = if g.batch == 1 { ld * rows } else { stride };
        TensorMap::tiled(
            x,
            &[g.k as u64, rows as u64, g.batch as u64],
            &[ld as u64, stride as u64],
            &[row, box_rows, 1],
            Swizzle::B128,
        )
    };
    let maps = map(a, g.m, g.lda, g.stride_a, tile.bm)
        .and_then(|ta| Ok((ta, map(b, g.n, g.ldb, g.stride_b, tile.bn)?)));
    match maps {
        Ok(m) => Ok(Some(m)),
        Err(Error::InvalidArgument(e)) => {
            super::log_dispatch(|| format!("gemm: the cp.async kernel, as {}", e.message));
            Ok(None)
        }
        Err(Error::Unsupported(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The Hopper kernel variant of a tile for inputs `T` and output `O`: `gemm_wgmma`'s for
/// f16 and bf16 (the `cp.async` kernel, whose launch takes `gemm_tma` where the operands
/// allow), `gemm_tma`'s for f32 in TF32 and `gemm_tma_x3`'s in 3xTF32 (`x3`; through the
/// tensor memory accelerator only).
pub fn wgmma_variant<T: ActElement, O: ActElement>(
    tile: Tile,
    x3: bool,
) -> Result<&'static KernelVariant> {
    let (name, v) = if x3 {
        (
            "gemm_tma_x3",
            gemm_tma_x3::variant::<T, O>(tile.bm, tile.bn),
        )
    } else if T::DTYPE == Dtype::F32 {
        ("gemm_tma", gemm_tma::variant::<T, O>(tile.bm, tile.bn))
    } else {
        ("gemm_wgmma", gemm_wgmma::variant::<T, O>(tile.bm, tile.bn))
    };
    v.ok_or_else(|| {
        crate::__private::variant_not_compiled(
            name,
            format!(
                "T={}, O={}, BM={}, BN={}",
                T::DTYPE.name(),
                O::DTYPE.name(),
                tile.bm,
                tile.bn
            ),
        )
    })
}

/// The K step of the tensor-core kernels for inputs of `input`: 128 bytes of each row (32
/// f32, 64 16-bit elements).
pub fn mma_k_step(input: Dtype) -> u32 {
    128 / input.size() as u32
}

/// The tensor-core kernel variant of a tile, layout and split (3xTF32 or not, f32 inputs
/// only) for inputs `T` and output `O`.
pub fn mma_variant<T: ActElement, O: ActElement>(
    tile: Tile,
    bt: bool,
    x3: bool,
) -> Result<&'static KernelVariant> {
    let (wm, wn) = mma_warps(tile);
    let bk = mma_k_step(T::DTYPE);
    gemm_mma::variant::<T, O>(tile.bm, tile.bn, wm, wn, bt, bk, x3).ok_or_else(|| {
        crate::__private::variant_not_compiled(
            "gemm_mma",
            format!(
                "T={}, O={}, BM={}, BN={}, BT={bt}, X3={x3}",
                T::DTYPE.name(),
                O::DTYPE.name(),
                tile.bm,
                tile.bn
            ),
        )
    })
}

/// The decode kernel for at most 8 rows against `[N, K]` weights (a pass over the weights at
/// memory speed, exact products and f32 sums whatever the precision), split along K where
/// its blocks do not fill the device ([`gemv_splits`]); else for f32 inputs the tile of
/// [`pick_tile`] beyond [`FFMA_ONLY_ROWS`] rows among the Hopper tiles for TF32 and 3xTF32
/// with B `[N, K]` on a device of compute capability [`WGMMA_CC`] (3xTF32: the 128 × 128
/// TMA tile), among the tensor-core tiles for TF32
/// and 3xTF32 on a device that has them (compute capability 8.0 or later), the FFMA tiles
/// otherwise; f16 and bf16 inputs take the Hopper tiles (B `[N, K]` on [`WGMMA_CC`]) or the
/// tensor-core tiles (an error on a device without them).
fn pick<T: ActElement, O: ActElement>(stream: &Stream, g: &Gemm) -> Result<Kernel> {
    let tensor_cores = stream.gpu().props().compute_capability >= (8, 0);
    if T::DTYPE != Dtype::F32 && !tensor_cores {
        let (major, minor) = stream.gpu().props().compute_capability;
        return Err(Error::from(error::Unsupported {
            kernel: format!("gemm with {} inputs", T::DTYPE.name()),
            reason: format!(
                "its tensor-core kernels need compute capability 8.0 or later, the device has {major}.{minor}"
            ),
        }));
    }
    if g.b_layout == BLayout::NK && g.m <= 8 {
        let rows = GEMV_ROWS
            .iter()
            .copied()
            .find(|&r| r as usize >= g.m)
            .unwrap_or(8);
        let gpu = stream.gpu();
        let v = gemv::variant::<T, O>(rows)
            .ok_or_else(|| crate::__private::variant_not_compiled("gemv", format!("MT={rows}")))?;
        let per_wave = u64::from(gpu.props().sm_count) * u64::from(gpu.blocks_per_sm(v, 0)?);
        let blocks = (g.n as u64).div_ceil(u64::from(GEMV_COLUMNS)) * g.batch as u64;
        let splits = gemv_splits(blocks, per_wave, g.k, gemv_min_slice(T::DTYPE), g.batch);
        super::log_dispatch(|| {
            format!(
                "gemm decode kernel for {rows} rows (M = {} <= 8, B [N, K]), {blocks} blocks for {per_wave} resident: {splits} slices of K",
                g.m
            )
        });
        return Ok(Kernel::Gemv { rows, splits });
    }
    if T::DTYPE != Dtype::F32 {
        let cc = stream.gpu().props().compute_capability;
        if cc == WGMMA_CC && g.b_layout == BLayout::NK {
            return pick_tile::<T, O>(stream, g, Family::Wgmma);
        }
        return pick_tile::<T, O>(stream, g, Family::Mma);
    }
    // TF32 and 3xTF32 on Hopper take `wgmma` (4096³ on an H200: TF32 0.53x cuBLAS's TF32
    // against the `mma.sync` tiles' 0.39x; on an H100 3xTF32's `gemm_tma_x3` 1.66 ms against
    // the best `mma.sync` tile's 2.33 ms, 1.64x cuBLAS SGEMM). Where the operands cannot go
    // through the tensor memory accelerator, `gemm_with` falls back to the `mma.sync` tile.
    if matches!(g.precision, Precision::Tf32 | Precision::Tf32x3)
        && stream.gpu().props().compute_capability == WGMMA_CC
        && g.b_layout == BLayout::NK
        && g.m > FFMA_ONLY_ROWS
    {
        return pick_tile::<T, O>(stream, g, Family::Wgmma);
    }
    if g.precision != Precision::F32 && tensor_cores && g.m <= FFMA_ONLY_ROWS {
        super::log_dispatch(|| {
            format!(
                "gemm {:?} on FFMA (exact f32): M = {} <= {FFMA_ONLY_ROWS} rows, where the tensor-core tiles are slower",
                g.precision, g.m
            )
        });
        return pick_tile::<T, O>(stream, g, Family::Ffma);
    }
    if g.precision != Precision::F32 && tensor_cores {
        // A precision is a floor: where no tensor-core block fits the device's shared
        // memory (3xTF32 on a device with less than 110 KiB a block), FFMA serves it.
        pick_tile::<T, O>(stream, g, Family::Mma).or_else(|e| {
            super::log_dispatch(|| format!("gemm {:?} on FFMA (exact f32): {e}", g.precision));
            pick_tile::<T, O>(stream, g, Family::Ffma)
        })
    } else {
        if g.precision != Precision::F32 {
            super::log_dispatch(|| {
                format!(
                    "gemm {:?} on FFMA (exact f32): the device has no TF32 tensor cores",
                    g.precision
                )
            });
        }
        pick_tile::<T, O>(stream, g, Family::Ffma)
    }
}

/// Up to this many rows (M), f32 inputs take the FFMA tiles at every precision (a precision
/// is a floor, and FFMA is exact). So few rows leave a tensor-core block's K loop bound by
/// memory latency rather than by its `mma` work: on an H200 at 32 × 4096 × 4096, FFMA ran
/// 19.7 TFLOP/s, the tensor-core tiles 6.4 (3xTF32) and 7.7 (TF32); at 128 rows they ran
/// 46.7 and 78.5 against FFMA's 35.2.
pub const FFMA_ONLY_ROWS: usize = 32;

/// The relative speed of a multiprocessor full of each tensor-core tile's blocks, for
/// [`pick_tile`] (on an H200 the 256 × 128 tile ran 4096³ bf16 in 0.384 ms and TF32 in
/// 0.915 ms, 128 × 128 in 0.403 and 0.979 ms).
const MMA_TILE_SPEED: [f64; 4] = [1.1, 1.0, 0.8, 0.55];

/// The kernel families [`pick_tile`] chooses a tile of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// FFMA ([`F32_TILES`]).
    Ffma,
    /// `mma.sync` ([`MMA_TILES`]).
    Mma,
    /// `wgmma` ([`WGMMA_TILES`]).
    Wgmma,
}

/// The relative speed of a multiprocessor full of each Hopper tile's blocks, for
/// [`pick_tile`].
const WGMMA_TILE_SPEED: [f64; 2] = [1.1, 1.0];

/// The tile (and K split) with the least estimated time ([`tile_cost`]) among the tiles of
/// `family`, from the driver's occupancy of each variant and the tile's relative speed.
/// Slices of K stay at least 256 long.
fn pick_tile<T: ActElement, O: ActElement>(
    stream: &Stream,
    g: &Gemm,
    family: Family,
) -> Result<Kernel> {
    let gpu = stream.gpu();
    let sms = f64::from(gpu.props().sm_count.max(1));
    let bt = g.b_layout == BLayout::NK;
    let x3 = T::DTYPE == Dtype::F32 && g.precision == Precision::Tf32x3;
    let mma = family != Family::Ffma;
    let (tiles, speeds): (&[Tile], &[f64]) = match family {
        Family::Ffma => (&F32_TILES, &F32_TILE_SPEED),
        Family::Mma => (&MMA_TILES, &MMA_TILE_SPEED),
        Family::Wgmma => (&WGMMA_TILES, &WGMMA_TILE_SPEED),
    };
    let rate = flop_per_byte(mma, T::DTYPE, x3);
    let mut best: Option<(f64, Kernel, String)> = None;
    for (t, &speed) in tiles.iter().zip(speeds) {
        if (family == Family::Mma && !mma_tile_serves(*t, x3))
            || (family == Family::Wgmma && !wgmma_tile_serves(*t, x3))
        {
            continue;
        }
        let blocks = ((g.m as u64).div_ceil(u64::from(t.bm))
            * (g.n as u64).div_ceil(u64::from(t.bn))
            * g.batch as u64) as f64;
        let (v, shared) = match family {
            Family::Wgmma => (
                wgmma_variant::<T, O>(*t, x3)?,
                hopper_shared_bytes(*t, T::DTYPE, g.precision),
            ),
            Family::Mma => (mma_variant::<T, O>(*t, bt, x3)?, mma_shared_bytes(*t, x3)),
            Family::Ffma => (variant(*t, bt)?, shared_bytes(*t)),
        };
        if shared > gpu.props().max_shared_per_block_optin {
            continue;
        }
        let resident = f64::from(gpu.blocks_per_sm(v, shared)?.max(1));
        let per_wave = sms * resident;
        let slots = if mma { 1.0 } else { resident };
        // A tile larger than 128 × 128 is never split along K: its fewer and longer slices
        // pay more for the workspace pass than the tile's reuse gains (on an H200, 256 × 128
        // in 10 slices ran 512 × 4096 × 4096 bf16 at a third of the speed of 128 × 128 in
        // 2). Unsplit it competes on its waves (on an H100, 2048³ bf16 in 128 blocks of
        // 128 × 256 ran at 0.67x cuBLAS, in 256 of 128 × 128 at 0.61x).
        let large = t.bm * t.bn > 128 * 128;
        // Splitting K pays only where the blocks do not fill one wave of the device (its
        // workspace pass costs M·N·splits reads more than the GEMM writes).
        let max_split = if blocks >= per_wave || large {
            1
        } else {
            (g.k / 256).clamp(1, MAX_SPLITS) as u32
        };
        for splits in 1..=max_split {
            if g.batch * splits as usize > MAX_BATCH {
                break;
            }
            let total = blocks * f64::from(splits);
            let area = f64::from(t.bm * t.bn) / (128.0 * 128.0);
            let second = split_pass_cost(g.m, g.n, g.k, g.batch, splits, sms, rate);
            let cost = tile_cost(total, splits, slots, sms, area / speed, second);
            let kernel = match (family, splits) {
                (Family::Wgmma, _) => Kernel::Wgmma { tile: *t, splits },
                (Family::Mma, _) => Kernel::Mma { tile: *t, splits },
                (Family::Ffma, 1) => Kernel::Tiled(*t),
                (Family::Ffma, _) => Kernel::SplitK(*t, splits),
            };
            if best.as_ref().is_none_or(|b| cost < b.0) {
                let why = format!(
                    "{total} blocks of {}x{}, {resident} per SM, cost {cost:.3}",
                    t.bm, t.bn
                );
                best = Some((cost, kernel, why));
            }
        }
    }
    let Some((_, kernel, why)) = best else {
        return Err(Error::from(error::Unsupported {
            kernel: format!("gemm {} {:?}", T::DTYPE.name(), g.precision),
            reason: format!(
                "no {} tile's block fits the device's {} bytes of shared memory",
                match family {
                    Family::Ffma => "FFMA",
                    Family::Mma => "tensor-core",
                    Family::Wgmma => "Hopper",
                },
                gpu.props().max_shared_per_block_optin
            ),
        }));
    };
    super::log_dispatch(|| format!("gemm {kernel} ({why})"));
    Ok(kernel)
}

/// The estimated time of `total` blocks (over `splits` slices of K) of a tile whose block
/// takes `work` (relative to a full-K 128 × 128 block at the 128 × 128 tile's speed), in
/// waves of `sms · slots` blocks, each as long as a full one: `slots` is how many blocks a
/// multiprocessor runs in the time of one. FFMA tiles need every resident block's warps
/// to hide their latencies, so their `slots` is the blocks resident (a multiprocessor
/// with fewer does not finish sooner); a tensor-core block alone already keeps the tensor
/// pipe as busy as two together (on an H200, 128 × 128 bf16 blocks: one per
/// multiprocessor over all of K ran 512 × 4096 × 4096 in 74 µs, two of half of K each in
/// about 80 µs before their second pass), so theirs is 1: a multiprocessor's time is the
/// sum of its blocks' work. A split divides each block's work and adds `second`, its
/// second pass ([`split_pass_cost`]).
fn tile_cost(total: f64, splits: u32, slots: f64, sms: f64, work: f64, second: f64) -> f64 {
    let waves = (total / (sms * slots)).ceil();
    let cost = waves * slots * work / f64::from(splits);
    if splits > 1 {
        cost + second
    } else {
        cost
    }
}

/// The cost, in [`tile_cost`]'s units, of splitting an `m × n × k` GEMM (`batch` matrices)
/// into `splits` slices of K: the workspace's f32 partial sums written and read back
/// (8 bytes per output and slice) and the second launch (as [`SPLIT_LAUNCH_BYTES`] more),
/// at `flop_per_byte` (the tile kernel's rate over the memory bandwidth), against a
/// multiprocessor's share of a full-K 128 × 128 block (`2 · 128 · 128 · k` flops).
fn split_pass_cost(
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    splits: u32,
    sms: f64,
    flop_per_byte: f64,
) -> f64 {
    let bytes = 8.0 * f64::from(splits) * (m * n * batch) as f64 + SPLIT_LAUNCH_BYTES;
    bytes * flop_per_byte / (sms * 2.0 * 128.0 * 128.0 * k.max(1) as f64)
}

/// A launch of the split-K pass, as the bytes the device moves in the same time (about
/// 4 µs at 4 TB/s).
const SPLIT_LAUNCH_BYTES: f64 = 16e6;

/// The tile kernels' rate over the memory bandwidth (flops per byte, the H200's figures
/// from the comparison bench: FFMA about 43 TFLOP/s, TF32 150, 16-bit inputs 350, against
/// about 4 TB/s), which prices a split's workspace pass against the GEMM.
fn flop_per_byte(mma: bool, input: Dtype, x3: bool) -> f64 {
    match (mma, input) {
        (false, _) => 11.0,
        (true, Dtype::F32) if x3 => 14.0,
        (true, Dtype::F32) => 37.0,
        (true, _) => 88.0,
    }
}

/// The most slices of K the dispatch splits a GEMM into.
const MAX_SPLITS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    /// An H200's multiprocessors.
    const SMS: f64 = 132.0;

    /// The split of 128 × 128 FFMA blocks (2 per multiprocessor) that [`tile_cost`] prefers
    /// for `blocks` of an `m × n × 4096` GEMM.
    fn best_split(blocks: f64, m: usize, n: usize, max_split: u32) -> u32 {
        let rate = flop_per_byte(false, Dtype::F32, false);
        best_of(max_split, |s| {
            let second = split_pass_cost(m, n, 4096, 1, s, SMS, rate);
            tile_cost(blocks * f64::from(s), s, 2.0, SMS, 1.0, second)
        })
    }

    /// The split of 128 × 128 bf16 tensor-core blocks that [`tile_cost`] prefers for an
    /// `m × n × k` GEMM.
    fn best_mma_split(m: usize, n: usize, k: usize) -> u32 {
        let blocks = (m.div_ceil(128) * n.div_ceil(128)) as f64;
        let rate = flop_per_byte(true, Dtype::Bf16, false);
        best_of(16, |s| {
            let second = split_pass_cost(m, n, k, 1, s, SMS, rate);
            tile_cost(blocks * f64::from(s), s, 1.0, SMS, 1.0, second)
        })
    }

    fn best_of(max_split: u32, cost: impl Fn(u32) -> f64) -> u32 {
        (1..=max_split)
            .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
            .unwrap()
    }

    #[test]
    fn a_tensor_core_grid_is_split_only_where_its_multiprocessors_would_idle() {
        // 512 × 4096: 128 blocks, one per multiprocessor already; a split would only add
        // its second pass.
        assert_eq!(best_mma_split(512, 4096, 4096), 1);
        // 128 × 4096 × 4096: 32 blocks leave 100 multiprocessors idle; 4 slices fill 128.
        assert_eq!(best_mma_split(128, 4096, 4096), 4);
        // A long K makes the second pass cheap against the GEMM.
        assert_eq!(best_mma_split(512, 4096, 14336), 1);
        assert_eq!(best_mma_split(128, 1024, 14336), 16);
        // 4096²: 1024 blocks.
        assert_eq!(best_mma_split(4096, 4096, 4096), 1);
    }

    #[test]
    fn a_grid_short_of_the_device_is_split_until_it_fills_it() {
        // 512 × 4096: 128 blocks for 264 places; 2 slices fill them.
        assert_eq!(best_split(128.0, 512, 4096, 16), 2);
        // 128 × 4096: 32 blocks, 8 slices.
        assert_eq!(best_split(32.0, 128, 4096, 16), 8);
        // 4096 × 4096: 1024 blocks, nearly 4 full waves, no split.
        assert_eq!(best_split(1024.0, 4096, 4096, 16), 1);
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn f32_inputs_of_few_rows_take_ffma_at_every_precision() {
        use crate::emulator::EmulatorConfig;
        let gpu = crate::Gpu::emulated(EmulatorConfig::default()).unwrap();
        let stream = gpu.default_stream();
        for precision in [Precision::Tf32, Precision::Tf32x3] {
            for layout in [BLayout::NK, BLayout::KN] {
                let at = |m| {
                    pick::<f32, f32>(
                        &stream,
                        &Gemm::new(m, 4096, 4096, layout).with_precision(precision),
                    )
                    .unwrap()
                };
                for m in [9, FFMA_ONLY_ROWS] {
                    let k = at(m);
                    assert!(
                        matches!(k, Kernel::Tiled(_) | Kernel::SplitK(..)),
                        "{precision:?} {layout:?} M = {m}: {k}"
                    );
                }
                let k = at(FFMA_ONLY_ROWS + 1);
                assert!(
                    matches!(k, Kernel::Mma { .. }),
                    "{precision:?} {layout:?} M = {}: {k}",
                    FFMA_ONLY_ROWS + 1
                );
            }
        }
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn on_hopper_tf32_and_3xtf32_take_wgmma() {
        use crate::emulator::EmulatorConfig;
        let gpu = crate::Gpu::emulated(EmulatorConfig {
            compute_capability: WGMMA_CC,
            max_shared_per_block_optin: 227 * 1024,
            ..EmulatorConfig::default()
        })
        .unwrap();
        let stream = gpu.default_stream();
        let at = |precision| {
            pick::<f32, f32>(
                &stream,
                &Gemm::new(512, 4096, 4096, BLayout::NK).with_precision(precision),
            )
            .unwrap()
        };
        let k = at(Precision::Tf32);
        assert!(matches!(k, Kernel::Wgmma { .. }), "Tf32: {k}");
        let k = at(Precision::Tf32x3);
        assert!(matches!(k, Kernel::Wgmma { .. }), "Tf32x3: {k}");
    }

    #[test]
    fn a_partial_wave_costs_a_whole_one() {
        assert_eq!(
            tile_cost(265.0, 1, 2.0, SMS, 1.0, 0.0),
            tile_cost(528.0, 1, 2.0, SMS, 1.0, 0.0)
        );
        assert!(tile_cost(264.0, 1, 2.0, SMS, 1.0, 0.0) < tile_cost(265.0, 1, 2.0, SMS, 1.0, 0.0));
        // One slot: a multiprocessor's time is its blocks' work.
        assert_eq!(tile_cost(133.0, 1, 1.0, SMS, 1.0, 0.0), 2.0);
        // A split divides the work and adds its second pass.
        let one = tile_cost(128.0, 1, 2.0, SMS, 1.0, 0.3);
        assert!((tile_cost(256.0, 2, 2.0, SMS, 1.0, 0.3) - (0.5 * one + 0.3)).abs() < 1e-12);
        // The second pass grows with the slices and shrinks with K.
        let rate = flop_per_byte(true, Dtype::Bf16, false);
        let pass = |s, k| split_pass_cost(512, 4096, k, 1, s, SMS, rate);
        assert!(pass(4, 4096) > pass(2, 4096));
        assert!(pass(2, 14336) < pass(2, 4096));
    }

    /// The resident blocks of the decode kernel on an H200: 132 multiprocessors, 2 blocks of
    /// 256 threads each at 128 registers.
    const H200_WAVE: u64 = 132 * 2;

    fn blocks(n: u64) -> u64 {
        n.div_ceil(u64::from(GEMV_COLUMNS))
    }

    #[test]
    fn the_decode_kernel_splits_k_only_where_its_blocks_leave_the_device_idle() {
        // A turn of the block's warps: 1024 elements of every input type.
        const F32_SLICE: usize = 1024;
        assert_eq!(gemv_min_slice(Dtype::F32), F32_SLICE);
        assert_eq!(gemv_min_slice(Dtype::Bf16), 1024);
        assert_eq!(gemv_min_slice(Dtype::F16), 1024);
        // A longer turn makes fewer, longer slices.
        assert_eq!(gemv_splits(blocks(256), H200_WAVE, 14336, 2048, 1), 7);
        // Grids that fill a wave: one pass.
        assert_eq!(gemv_splits(blocks(4096), H200_WAVE, 4096, F32_SLICE, 1), 1);
        assert_eq!(gemv_splits(blocks(14336), H200_WAVE, 4096, F32_SLICE, 1), 1);
        assert_eq!(
            gemv_splits(8 * blocks(1024), H200_WAVE, 4096, F32_SLICE, 8),
            1,
            "a batch of 8"
        );
        // Small N with a long K: about one wave of blocks.
        assert_eq!(gemv_splits(blocks(1024), H200_WAVE, 14336, F32_SLICE, 1), 4);
        assert_eq!(gemv_splits(blocks(512), H200_WAVE, 14336, F32_SLICE, 1), 8);
        assert_eq!(gemv_splits(blocks(256), H200_WAVE, 14336, F32_SLICE, 1), 14);
        // Each slice at least a turn of the block's warps long, at most MAX_SPLITS of them.
        assert_eq!(gemv_splits(blocks(512), H200_WAVE, 4096, F32_SLICE, 1), 4);
        assert_eq!(gemv_splits(blocks(256), H200_WAVE, 2000, F32_SLICE, 1), 1);
        assert_eq!(
            gemv_splits(1, H200_WAVE, 1 << 20, F32_SLICE, 1),
            MAX_SPLITS as u32
        );
        // Within the grid's batch × slices limit, and nothing to split.
        assert_eq!(gemv_splits(1, H200_WAVE, 1 << 20, F32_SLICE, MAX_BATCH), 1);
        assert_eq!(gemv_splits(0, H200_WAVE, 4096, F32_SLICE, 1), 1);
    }

    #[test]
    fn decode_kernel_names_carry_their_slices() {
        for k in [
            Kernel::Gemv { rows: 8, splits: 1 },
            Kernel::Gemv { rows: 1, splits: 5 },
        ] {
            assert_eq!(k.to_string().parse::<Kernel>(), Ok(k));
        }
        assert_eq!(Kernel::Gemv { rows: 2, splits: 3 }.to_string(), "gemv2/k3");
        assert!("gemv4/kx".parse::<Kernel>().is_err());
    }
}

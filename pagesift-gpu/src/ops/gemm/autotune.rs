//! The opt-in autotuner of the GEMM dispatch: with `PAGESIFT_GPU_AUTOTUNE=1` (or
//! [`set_enabled`]) the first GEMM of each shape class times every kernel valid for it and
//! remembers the fastest in a [`TuneStore`] file (see [`crate::tune`] for where it lives and
//! how stale or corrupt files are ignored), so that later calls, and later processes, run the
//! winner without timing again.
//!
//! A shape class is the input and output types, the B layout, the precision, whether the GEMM
//! is batched (`b1` or `bn`), and M, N and K each rounded up to a power of two:
//! `bf16-f32-NK-F32-m512-n4096-k4096-b1`. The candidates are timed on the caller's A and B with a scratch C, `beta = 0`
//! and no residual (C is never written twice), one warm-up and the median of three runs each.
//! A winner read from the file is only used where it names a kernel valid for the shape at
//! hand ([`valid`]); otherwise the class is tuned again.
//!
//! With `PAGESIFT_GPU_LOG=dispatch` every decision is printed: the winner taken from the file,
//! or each candidate's time and the winner.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use super::{
    gemm_with, kernels, Kernel, Tile, F32_TILES, GEMV_ROWS, MAX_SPLITS, MMA_TILES, WGMMA_CC,
    WGMMA_TILES,
};
use crate::act::ActElement;
use crate::gemm::{BLayout, Gemm, MAX_BATCH};
use crate::tune::{TuneKey, TuneStore};
use crate::{timing, DeviceBuffer, DeviceRead, Dtype, Result, Stream};

/// 0: not decided (read `PAGESIFT_GPU_AUTOTUNE` on first use), 1: off, 2: on.
static ENABLED: AtomicU8 = AtomicU8::new(0);

/// The open stores, one per device name.
static STORES: Mutex<Vec<(String, TuneStore)>> = Mutex::new(Vec::new());

/// Turns the autotuner on or off for this process (overriding `PAGESIFT_GPU_AUTOTUNE`).
pub fn set_enabled(on: bool) {
    ENABLED.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Whether the autotuner is on: [`set_enabled`], else `PAGESIFT_GPU_AUTOTUNE` set to `1`,
/// `true` or `on`.
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var("PAGESIFT_GPU_AUTOTUNE")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "on"));
            set_enabled(on);
            on
        }
        v => v == 2,
    }
}

/// Forgets the stores read so far: the next tuned GEMM reads its device's file again (as a
/// new process would).
pub fn reload() {
    STORES.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The shape class of `g` with inputs `T` and output `O` (see the module docs).
pub fn class<T: ActElement, O: ActElement>(g: &Gemm) -> String {
    let p2 = |x: usize| x.max(1).next_power_of_two();
    format!(
        "{}-{}-{:?}-{:?}-m{}-n{}-k{}-b{}",
        T::DTYPE.name(),
        O::DTYPE.name(),
        g.b_layout,
        g.precision,
        p2(g.m),
        p2(g.n),
        p2(g.k),
        if g.batch > 1 { "n" } else { "1" }
    )
}

/// The winner stored for `g`'s class on `stream`'s device, where it is valid for `g`.
pub fn cached<T: ActElement, O: ActElement>(stream: &Stream, g: &Gemm) -> Option<Kernel> {
    let name = class::<T, O>(g);
    with_store(stream, |s| {
        s.get(&name).and_then(|w| w.parse::<Kernel>().ok())
    })
    .filter(|&k| {
        valid(k, g, T::DTYPE, stream.gpu().compute_capability()) && fits::<T>(stream, k, g)
    })
}

/// Whether `kernel`'s shared memory fits a block of `stream`'s device
/// ([`super::kernel_shared_bytes`]).
fn fits<T: ActElement>(stream: &Stream, kernel: Kernel, g: &Gemm) -> bool {
    super::kernel_shared_bytes(kernel, T::DTYPE, g.precision)
        <= stream.gpu().props().max_shared_per_block_optin
}

/// Whether `kernel` can compute `g` with inputs of `input` on a device of compute capability
/// `cc`: it serves the input and precision, its tile exists, a decode kernel has enough rows
/// and B `[N, K]`, a split has 1 to 16 slices within the batch limit, and tensor cores need
/// compute capability 8.0.
pub fn valid(kernel: Kernel, g: &Gemm, input: Dtype, cc: (u32, u32)) -> bool {
    if !kernel.serves(input, g.precision) {
        return false;
    }
    let splits_ok =
        |s: u32| (1..=MAX_SPLITS as u32).contains(&s) && g.batch * s as usize <= MAX_BATCH;
    let f32_tile = |t: Tile| F32_TILES.contains(&t);
    match kernel {
        Kernel::Tiled(t) => f32_tile(t),
        Kernel::SplitK(t, s) => f32_tile(t) && s > 1 && splits_ok(s),
        Kernel::Gemv { rows, splits } => {
            GEMV_ROWS.contains(&rows)
                && g.m <= rows as usize
                && g.b_layout == BLayout::NK
                && splits_ok(splits)
        }
        Kernel::Mma { tile, splits } => {
            MMA_TILES.contains(&tile) && splits_ok(splits) && cc >= (8, 0)
        }
        Kernel::Wgmma { tile, splits } => {
            WGMMA_TILES.contains(&tile)
                && splits_ok(splits)
                && cc == WGMMA_CC
                && g.b_layout == BLayout::NK
        }
    }
}

/// The kernel for `g`: the stored winner of its class where valid, else the fastest of the
/// valid candidates (`heuristic`, the dispatch's own choice, among them), stored.
pub(super) fn pick<T: ActElement, O: ActElement>(
    stream: &Stream,
    g: &Gemm,
    a: &impl DeviceRead<T>,
    b: &impl DeviceRead<T>,
    heuristic: Kernel,
) -> Result<Kernel> {
    let name = class::<T, O>(g);
    if let Some(k) = cached::<T, O>(stream, g) {
        super::super::log_dispatch(|| format!("gemm autotune {name}: {k} (stored winner)"));
        return Ok(k);
    }
    let cc = stream.gpu().compute_capability();
    let mut candidates = vec![heuristic];
    for k in kernels() {
        if k != heuristic && valid(k, g, T::DTYPE, cc) && fits::<T>(stream, k, g) {
            candidates.push(k);
        }
    }
    let timed = Gemm {
        beta: 0.0,
        stride_r: 0,
        ..*g
    };
    let extent = timed.c_index(g.batch - 1, g.m - 1, g.n - 1) + 1;
    let mut scratch = DeviceBuffer::<O>::alloc(stream.gpu(), extent)?;
    let mut best: Option<(f64, Kernel)> = None;
    for &k in &candidates {
        // A candidate the device refuses (shared memory, registers) is skipped, not fatal.
        let ms = timing::median_ms(stream, 1, 3, || {
            gemm_with(stream, &timed, k, a, b, None, None, &mut scratch)
        });
        match ms {
            Ok(ms) => {
                super::super::log_dispatch(|| format!("gemm autotune {name}: {k} {ms:.4} ms"));
                if best.is_none_or(|(t, _)| ms < t) {
                    best = Some((ms, k));
                }
            }
            Err(e) => {
                super::super::log_dispatch(|| format!("gemm autotune {name}: {k} failed: {e}"))
            }
        }
    }
    stream.synchronize()?;
    let Some((_, winner)) = best else {
        return Ok(heuristic);
    };
    super::super::log_dispatch(|| format!("gemm autotune {name}: {winner} wins"));
    // A store that cannot be written keeps the winner in memory; the GEMM goes on.
    if let Some(Err(e)) = with_store(stream, |s| Some(s.insert(&name, &winner.to_string()))) {
        super::super::log_dispatch(|| format!("gemm autotune: the winner stays in memory: {e}"));
    }
    Ok(winner)
}

/// Runs `f` on the store of `stream`'s device, opened on first use: the table
/// `gemm-<device>` in the cache directory, keyed by device name, driver and crate version.
fn with_store<R>(stream: &Stream, f: impl FnOnce(&mut TuneStore) -> Option<R>) -> Option<R> {
    let gpu = stream.gpu();
    let device = gpu.name().to_string();
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    let i = match stores.iter().position(|(d, _)| *d == device) {
        Some(i) => i,
        None => {
            let table = format!("gemm-{}", slug(&device));
            let key = TuneKey::new(device.clone(), gpu.driver_version());
            stores.push((device, TuneStore::open(key, &table)));
            stores.len() - 1
        }
    };
    f(&mut stores[i].1)
}

/// `NVIDIA H200` → `nvidia-h200`: lowercase letters and digits, other runs as one `-`.
fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::Precision;

    #[test]
    fn classes_round_up_to_powers_of_two() {
        let g = Gemm::new(300, 4096, 4000, BLayout::NK);
        assert_eq!(class::<f32, f32>(&g), "f32-f32-NK-F32-m512-n4096-k4096-b1");
        let g = Gemm::new(1, 3, 0, BLayout::KN).with_precision(Precision::Tf32);
        assert_eq!(
            class::<half::bf16, half::bf16>(&g),
            "bf16-bf16-KN-Tf32-m1-n4-k1-b1"
        );
    }

    #[test]
    fn only_kernels_valid_for_the_shape_pass() {
        let g = Gemm::new(6, 100, 100, BLayout::NK);
        let mma = Kernel::Mma {
            tile: MMA_TILES[0],
            splits: 1,
        };
        assert!(valid(
            Kernel::Gemv { rows: 8, splits: 1 },
            &g,
            Dtype::F32,
            (9, 0)
        ));
        assert!(
            !valid(Kernel::Gemv { rows: 4, splits: 1 }, &g, Dtype::F32, (9, 0)),
            "too few rows"
        );
        assert!(valid(
            Kernel::Gemv { rows: 8, splits: 1 },
            &g,
            Dtype::F16,
            (9, 0)
        ));
        let kn = Gemm::new(6, 100, 100, BLayout::KN);
        assert!(
            !valid(Kernel::Gemv { rows: 8, splits: 1 }, &kn, Dtype::F32, (9, 0)),
            "B [K, N]"
        );
        assert!(!valid(mma, &g, Dtype::F32, (9, 0)), "exact f32 on TF32");
        assert!(valid(
            mma,
            &g.with_precision(Precision::Tf32),
            Dtype::F32,
            (9, 0)
        ));
        assert!(
            !valid(
                mma,
                &g.with_precision(Precision::Tf32x3),
                Dtype::F32,
                (9, 0)
            ),
            "the largest tile has no 3xTF32 variant"
        );
        assert!(valid(
            Kernel::Mma {
                tile: MMA_TILES[1],
                splits: 1
            },
            &g.with_precision(Precision::Tf32x3),
            Dtype::F32,
            (9, 0)
        ));
        assert!(valid(mma, &g, Dtype::Bf16, (8, 0)));
        assert!(!valid(mma, &g, Dtype::Bf16, (7, 5)), "no bf16 tensor cores");
        assert!(!valid(Kernel::Tiled(F32_TILES[0]), &g, Dtype::Bf16, (9, 0)));
        let odd = Tile { bm: 96, bn: 96 };
        assert!(
            !valid(Kernel::Tiled(odd), &g, Dtype::F32, (9, 0)),
            "no such tile"
        );
        assert!(!valid(
            Kernel::SplitK(F32_TILES[0], 17),
            &g,
            Dtype::F32,
            (9, 0)
        ));
        assert!(!valid(
            Kernel::SplitK(F32_TILES[0], 1),
            &g,
            Dtype::F32,
            (9, 0)
        ));
        assert!(valid(
            Kernel::SplitK(F32_TILES[0], 16),
            &g,
            Dtype::F32,
            (9, 0)
        ));
        let batched = g.with_batch(MAX_BATCH, 600, 10_000, 600);
        assert!(!valid(
            Kernel::SplitK(F32_TILES[0], 2),
            &batched,
            Dtype::F32,
            (9, 0)
        ));
    }

    #[test]
    fn kernel_names_parse_back() {
        for k in kernels()
            .into_iter()
            .chain([Kernel::SplitK(F32_TILES[1], 7)])
        {
            assert_eq!(k.to_string().parse::<Kernel>(), Ok(k));
        }
        for bad in [
            "",
            "gemv",
            "mma",
            "128x",
            "x64",
            "128x64/k",
            "128x64/kx",
            "mma128",
            "fast",
        ] {
            let e = bad.parse::<Kernel>().unwrap_err();
            assert!(e.contains("is not a GEMM kernel name"), "{bad}: {e}");
        }
    }

    #[test]
    fn device_names_become_table_names() {
        assert_eq!(slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(slug(" Emulated (sm_80) "), "emulated-sm-80");
    }
}

//! The kernels of `pagesift_tests::intrinsic_kernels` on the device (the GPU, or the emulated
//! one with `PAGESIFT_GPU_DEVICE=emulated`) against CPU references: the look-back scan in both
//! synchronization styles, the quantized dot product, `dp4a` / `prmt`, warp barriers, 16- and
//! 64-bit shuffles, half-precision atomic adds and packed conversions. Random data, outputs
//! poisoned, sizes that are not multiples of the block. An acquire load, a release store or a
//! half-precision atomic out of bounds is skipped and reported as `Error::KernelFault`.
//!
//! The sm_90 kernel (bf16 atomics) runs on a GPU of compute capability 9.0 or later, and in
//! place of an older emulated device on an emulated one of 9.0.

use half::{bf16, f16};
use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{DeviceBuffer, DeviceRepr, Error, Gpu, LaunchConfig};
use pagesift_tests::intrinsic_kernels::{
    self as ik, dp4a_reference, lop3_reference, prmt_reference, shuffle_sources, ScanSync,
    LOP3_TABLES, SCAN_BLOCK,
};
use pagesift_tests::{gpu_or_skip, is_emulated};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn upload<T: DeviceRepr>(gpu: &Gpu, data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_host(gpu, data).expect("upload")
}

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A device of compute capability 9.0 or later for the sm_90 kernels: the one given, or for an
/// older emulated one a fresh emulated device of 9.0; `None` (printed) for an older GPU.
fn sm90(gpu: &Gpu, test: &str) -> Option<Gpu> {
    if gpu.compute_capability() >= (9, 0) {
        return Some(gpu.clone());
    }
    if is_emulated(gpu) {
        let config = EmulatorConfig {
            compute_capability: (9, 0),
            ..EmulatorConfig::from_env().expect("emulator configuration")
        };
        return Some(Gpu::emulated(config).expect("emulated device"));
    }
    eprintln!("SKIPPED {test}: needs sm_90");
    None
}

#[test]
fn lookback_scan_publishes_with_release_stores_and_with_fences() {
    let Some(gpu) = gpu_or_skip("lookback_scan_publishes_with_release_stores_and_with_fences")
    else {
        return;
    };
    let stream = gpu.default_stream();
    let mut cases = vec![(1u64, 37 * SCAN_BLOCK + 77), (2, 300), (3, 5 * SCAN_BLOCK)];
    if !is_emulated(&gpu) {
        // Thousands of blocks in flight at once, several times: the look-back under real
        // concurrency.
        cases.extend((4..8).map(|seed| (seed, (1 << 22) + 12345 * seed as u32)));
    }
    for (seed, n) in cases {
        let mut r = rng(seed);
        let x: Vec<u32> = (0..n).map(|_| r.gen()).collect();
        let mut want = Vec::with_capacity(n as usize);
        let mut acc = 0u64;
        for v in &x {
            acc += *v as u64;
            want.push(acc);
        }
        let blocks = n.div_ceil(SCAN_BLOCK);
        for sync in [ScanSync::AcquireRelease, ScanSync::Fences] {
            let dx = upload(&gpu, &x);
            let mut y = upload(&gpu, &vec![u64::MAX; n as usize + 3]);
            let mut state = upload(&gpu, &vec![0u64; 2 * blocks as usize]);
            let mut flags = upload(&gpu, &vec![0u32; blocks as usize]);
            let mut ticket = upload(&gpu, &[0u32]);
            let mut err = upload(&gpu, &[0u32]);
            ik::scan_lookback::launch(
                &stream,
                LaunchConfig::grid_1d(blocks),
                sync,
                &dx,
                &mut y,
                &mut state,
                &mut flags,
                &mut ticket,
                &mut err,
                n,
                1 << 24,
            )
            .expect("launch");
            let got = y.to_host().expect("download");
            assert_eq!(
                err.to_host().expect("err"),
                [0],
                "{sync:?} n={n}: a wait gave up"
            );
            assert_eq!(
                ticket.to_host().expect("ticket"),
                [blocks],
                "{sync:?} n={n}"
            );
            for i in 0..n as usize {
                assert_eq!(got[i], want[i], "{sync:?} n={n} i={i}");
            }
            assert!(
                got[n as usize..].iter().all(|v| *v == u64::MAX),
                "{sync:?}: wrote past n"
            );
            // Every block ended with its inclusive prefix published.
            let state = state.to_host().expect("state");
            let flags = flags.to_host().expect("flags");
            for b in 0..blocks as usize {
                let last = ((b + 1) * SCAN_BLOCK as usize).min(n as usize) - 1;
                match sync {
                    ScanSync::AcquireRelease => {
                        assert_eq!(state[b], (2 << 62) | want[last], "{sync:?} block {b}")
                    }
                    ScanSync::Fences => {
                        assert_eq!(flags[b], 2, "{sync:?} block {b}");
                        assert_eq!(state[2 * b + 1], want[last], "{sync:?} block {b}");
                    }
                }
            }
        }
    }
}

#[test]
fn q4_dot_unpacks_nibbles_with_prmt_and_multiplies_with_dp4a() {
    let Some(gpu) = gpu_or_skip("q4_dot_unpacks_nibbles_with_prmt_and_multiplies_with_dp4a") else {
        return;
    };
    let (rows, words) = (13u32, 77u32);
    let mut r = rng(4);
    let w: Vec<u32> = (0..rows * words).map(|_| r.gen()).collect();
    let a: Vec<u32> = (0..2 * words).map(|_| r.gen()).collect();
    let want: Vec<i32> = (0..rows as usize)
        .map(|row| {
            (0..8 * words as usize)
                .map(|k| {
                    let nib = (w[row * words as usize + k / 8] >> (4 * (k % 8))) & 0xf;
                    let act = (a[k / 4] >> (8 * (k % 4))) as u8 as i8;
                    (nib as i32 - 8) * act as i32
                })
                .sum()
        })
        .collect();
    let (dw, da) = (upload(&gpu, &w), upload(&gpu, &a));
    let mut y = upload(&gpu, &vec![i32::MIN; rows as usize + 2]);
    ik::q4_dot::launch(
        &gpu.default_stream(),
        LaunchConfig::grid_1d(rows.div_ceil(4)),
        &dw,
        &da,
        &mut y,
        rows,
        words,
    )
    .expect("launch");
    let got = y.to_host().expect("download");
    assert_eq!(got[..rows as usize], want[..]);
    assert_eq!(got[rows as usize..], [i32::MIN; 2]);
}

#[test]
fn lop3_computes_each_truth_table() {
    let Some(gpu) = gpu_or_skip("lop3_computes_each_truth_table") else {
        return;
    };
    let n = 777u32;
    let mut r = rng(9);
    let a: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    let b: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    let c: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    let (da, db, dc) = (upload(&gpu, &a), upload(&gpu, &b), upload(&gpu, &c));
    let mut out = upload(&gpu, &vec![0xdead_beefu32; 4 * n as usize + 1]);
    ik::lop3_ops::launch(
        &gpu.default_stream(),
        LaunchConfig::grid_1d(n.div_ceil(128)),
        &da,
        &db,
        &dc,
        &mut out,
        n,
    )
    .expect("launch");
    let out = out.to_host().expect("out");
    for i in 0..n as usize {
        for (j, &lut) in LOP3_TABLES.iter().enumerate() {
            assert_eq!(
                out[4 * i + j],
                lop3_reference(a[i], b[i], c[i], lut),
                "i={i} lut={lut:#x}"
            );
        }
    }
    assert_eq!(out[4 * n as usize], 0xdead_beef);
}

#[test]
fn dp4a_and_prmt_every_signedness_and_selector() {
    let Some(gpu) = gpu_or_skip("dp4a_and_prmt_every_signedness_and_selector") else {
        return;
    };
    let n = 1000u32;
    let mut r = rng(5);
    let mut word = |_| -> u32 {
        // Whole random words, and words of extreme bytes.
        if r.gen_bool(0.2) {
            [0x8080_8080u32, 0x7f7f_7f7f, 0xffff_ffff, 0x0180_ff7f][r.gen_range(0..4)]
        } else {
            r.gen()
        }
    };
    let a: Vec<u32> = (0..n).map(&mut word).collect();
    let b: Vec<u32> = (0..n).map(&mut word).collect();
    let c: Vec<u32> = (0..n).map(&mut word).collect();
    let (da, db, dc) = (upload(&gpu, &a), upload(&gpu, &b), upload(&gpu, &c));
    let m = n as usize + 1;
    let mut uu = upload(&gpu, &vec![0xdead_beefu32; m]);
    let mut ss = upload(&gpu, &vec![0x5eed_5eedi32; m]);
    let mut us = upload(&gpu, &vec![0x5eed_5eedi32; m]);
    let mut su = upload(&gpu, &vec![0x5eed_5eedi32; m]);
    let mut perm = upload(&gpu, &vec![0xdead_beefu32; m]);
    let mut perm_k = upload(&gpu, &vec![0x5eed_5eedi32; m]);
    ik::byte_ops::launch(
        &gpu.default_stream(),
        LaunchConfig::grid_1d(n.div_ceil(128)),
        &da,
        &db,
        &dc,
        &mut uu,
        &mut ss,
        &mut us,
        &mut su,
        &mut perm,
        &mut perm_k,
        n,
    )
    .expect("launch");
    let (uu, ss, us, su) = (
        uu.to_host().expect("uu"),
        ss.to_host().expect("ss"),
        us.to_host().expect("us"),
        su.to_host().expect("su"),
    );
    let (perm, perm_k) = (
        perm.to_host().expect("perm"),
        perm_k.to_host().expect("perm_k"),
    );
    for i in 0..n as usize {
        let (x, y, z) = (a[i], b[i], c[i]);
        assert_eq!(uu[i], dp4a_reference(x, false, y, false, z), "uu i={i}");
        assert_eq!(
            ss[i] as u32,
            dp4a_reference(x, true, y, true, z),
            "ss i={i}"
        );
        assert_eq!(
            us[i] as u32,
            dp4a_reference(x, false, y, true, z),
            "us i={i}"
        );
        assert_eq!(
            su[i] as u32,
            dp4a_reference(x, true, y, false, z),
            "su i={i}"
        );
        assert_eq!(perm[i], prmt_reference(x, y, z), "prmt i={i}");
        assert_eq!(
            perm_k[i] as u32,
            prmt_reference(x, y, 0x1e63),
            "prmt_k i={i}"
        );
    }
    assert_eq!(uu[n as usize], 0xdead_beef);
    assert_eq!(perm_k[n as usize], 0x5eed_5eed);
}

#[test]
fn warp_barriers_order_warp_synchronous_shared_exchanges() {
    let Some(gpu) = gpu_or_skip("warp_barriers_order_warp_synchronous_shared_exchanges") else {
        return;
    };
    let n = 200u32;
    let mut r = rng(6);
    let x: Vec<f32> = (0..n).map(|_| r.gen_range(-4.0f32..4.0)).collect();
    let dx = upload(&gpu, &x);
    let mut y = upload(&gpu, &vec![f32::NAN; n as usize + 1]);
    let mut z = upload(&gpu, &vec![f32::NAN; n as usize + 1]);
    ik::warp_reverse::launch(
        &gpu.default_stream(),
        LaunchConfig::grid_1d(n.div_ceil(64)),
        &dx,
        &mut y,
        &mut z,
        n,
    )
    .expect("launch");
    let (y, z) = (y.to_host().expect("y"), z.to_host().expect("z"));
    let at = |i: usize| if i < n as usize { x[i] } else { 0.0 };
    for i in 0..n as usize {
        let (base, lane) = (i / 32 * 32, i % 32);
        assert_eq!(y[i], at(base + 31 - lane), "y i={i}");
        let want_z = if lane < 16 {
            2.0 * at(base + 15 - lane)
        } else {
            x[i]
        };
        assert_eq!(z[i], want_z, "z i={i}");
    }
    assert!(y[n as usize].is_nan() && z[n as usize].is_nan());
}

/// Runs `launch` on `x` (whole blocks of 64) and checks the four shuffles of every lane
/// bit for bit.
fn check_shuffles<T: DeviceRepr + PartialEq + std::fmt::Debug>(
    gpu: &Gpu,
    what: &str,
    x: Vec<T>,
    poison: T,
    launch: impl FnOnce(&DeviceBuffer<T>, &mut DeviceBuffer<T>) -> pagesift_gpu::Result<()>,
    bits: impl Fn(T) -> u64,
) {
    let dx = upload(gpu, &x);
    let mut y = upload(gpu, &vec![poison; 4 * x.len() + 4]);
    launch(&dx, &mut y).expect("launch");
    let y = y.to_host().expect("download");
    for (i, got) in y.chunks(4).take(x.len()).enumerate() {
        let (base, lane) = (i / 32 * 32, i % 32);
        for (k, src) in shuffle_sources(lane).into_iter().enumerate() {
            assert_eq!(
                bits(got[k]),
                bits(x[base + src]),
                "{what}: element {i}, shuffle {k}"
            );
        }
    }
    assert!(y[4 * x.len()..].iter().all(|v| bits(*v) == bits(poison)));
}

#[test]
fn shuffles_move_16_and_64_bit_values_bit_for_bit() {
    let Some(gpu) = gpu_or_skip("shuffles_move_16_and_64_bit_values_bit_for_bit") else {
        return;
    };
    let stream = gpu.default_stream();
    let n = 192usize;
    let cfg = LaunchConfig::grid_1d(n as u32 / 64);
    let mut r = rng(7);
    let w16: Vec<u16> = (0..n).map(|_| r.gen()).collect();
    let w64: Vec<u64> = (0..n).map(|_| r.gen()).collect();
    check_shuffles(
        &gpu,
        "u16",
        w16.clone(),
        0xdead,
        |x, y| ik::shuffle_u16::launch(&stream, cfg, x, y),
        |v| v as u64,
    );
    check_shuffles(
        &gpu,
        "i16",
        w16.iter().map(|v| *v as i16).collect(),
        0x5eed,
        |x, y| ik::shuffle_i16::launch(&stream, cfg, x, y),
        |v| v as u16 as u64,
    );
    check_shuffles(
        &gpu,
        "f16",
        w16.iter().map(|v| f16::from_bits(*v)).collect(),
        f16::from_bits(0x7e01),
        |x, y| ik::shuffle_f16::launch(&stream, cfg, x, y),
        |v| v.to_bits() as u64,
    );
    check_shuffles(
        &gpu,
        "bf16",
        w16.iter().map(|v| bf16::from_bits(*v)).collect(),
        bf16::from_bits(0x7fa1),
        |x, y| ik::shuffle_bf16::launch(&stream, cfg, x, y),
        |v| v.to_bits() as u64,
    );
    check_shuffles(
        &gpu,
        "u64",
        w64.clone(),
        0xdead_beef_dead_beef,
        |x, y| ik::shuffle_u64::launch(&stream, cfg, x, y),
        |v| v,
    );
    check_shuffles(
        &gpu,
        "i64",
        w64.iter().map(|v| *v as i64).collect(),
        0x5eed,
        |x, y| ik::shuffle_i64::launch(&stream, cfg, x, y),
        |v| v as u64,
    );
    check_shuffles(
        &gpu,
        "f64",
        w64.iter().map(|v| f64::from_bits(*v)).collect(),
        f64::from_bits(0x7ff8_dead_0000_0001),
        |x, y| ik::shuffle_f64::launch(&stream, cfg, x, y),
        |v| v.to_bits(),
    );
}

/// The half-precision element types of the atomics tests.
trait Half: DeviceRepr + std::fmt::Display {
    const NAN: Self;
    const ZERO: Self;
    fn from_f32(v: f32) -> Self;
    /// Rounds once to nearest even.
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn to_bits(self) -> u16;
    fn from_bits(b: u16) -> Self;
}

macro_rules! half_impl {
    ($t:ty) => {
        impl Half for $t {
            const NAN: Self = <$t>::NAN;
            const ZERO: Self = <$t>::ZERO;
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn to_bits(self) -> u16 {
                <$t>::to_bits(self)
            }
            fn from_bits(b: u16) -> Self {
                <$t>::from_bits(b)
            }
        }
    };
}
half_impl!(f16);
half_impl!(bf16);

/// The buffers of one run of `half_atomics` / `half_atomics_bf16`.
struct AtomicRun<'a, T: DeviceRepr> {
    x: &'a DeviceBuffer<T>,
    y: &'a mut DeviceBuffer<T>,
    old: &'a mut DeviceBuffer<T>,
    bins: &'a DeviceBuffer<u32>,
    hist: &'a mut DeviceBuffer<T>,
    pairs: &'a mut DeviceBuffer<u32>,
}

/// Runs a half-atomics kernel on random data and checks it: each element's single add rounded
/// once from the exact sum (subnormals kept), the old values, and the contended counts (exact
/// integers in both formats at these sizes), also those of the shared pair histograms.
fn check_half_atomics<T: Half>(
    gpu: &Gpu,
    seed: u64,
    launch: impl FnOnce(AtomicRun<'_, T>, u32, u32) -> pagesift_gpu::Result<()>,
) {
    let n = 1500usize;
    let mut r = rng(seed);
    let x: Vec<T> = (0..n)
        .map(|_| T::from_f32(r.gen_range(-4.0f32..4.0)))
        .collect();
    let y0: Vec<T> = (0..n)
        .map(|i| {
            T::from_f32(match i % 7 {
                // Small values and subnormals: the adds must not flush them.
                0 => r.gen_range(-1e-6f32..1e-6),
                _ => r.gen_range(-300.0f32..300.0),
            })
        })
        .collect();
    let bins: Vec<u32> = (0..n).map(|_| r.gen_range(0..37)).collect();
    let (dx, dbins) = (upload(gpu, &x), upload(gpu, &bins));
    let mut y = upload(gpu, &y0);
    let mut old = upload(gpu, &vec![T::NAN; n + 1]);
    let mut hist = upload(gpu, &[T::ZERO; 37]);
    let blocks = n.div_ceil(128);
    let mut pairs = upload(gpu, &vec![0xdead_beefu32; 16 * blocks]);
    let run = AtomicRun {
        x: &dx,
        y: &mut y,
        old: &mut old,
        bins: &dbins,
        hist: &mut hist,
        pairs: &mut pairs,
    };
    launch(run, blocks as u32, n as u32).expect("launch");
    let (got, old) = (y.to_host().expect("y"), old.to_host().expect("old"));
    for i in 0..n {
        // The sum of two halves is exact in f64: one rounding.
        let want = T::from_f64(y0[i].to_f64() + x[i].to_f64());
        assert_eq!(
            got[i].to_bits(),
            want.to_bits(),
            "i={i}: {} + {}",
            y0[i],
            x[i]
        );
        assert_eq!(old[i].to_bits(), y0[i].to_bits(), "old i={i}");
    }
    assert!(old[n].to_f64().is_nan());
    let hist = hist.to_host().expect("hist");
    for (k, h) in hist.iter().enumerate() {
        let count = bins.iter().filter(|b| **b as usize == k).count();
        assert_eq!(h.to_f64(), count as f64, "bin {k}");
    }
    let pairs = pairs.to_host().expect("pairs");
    for b in 0..blocks {
        for k in 0..16 {
            let count = (128 * b..(128 * b + 128).min(n))
                .filter(|&i| bins[i] % 16 == k as u32)
                .count() as f64;
            let w = pairs[16 * b + k];
            let (lo, hi) = (T::from_bits(w as u16), T::from_bits((w >> 16) as u16));
            assert_eq!(
                (lo.to_f64(), hi.to_f64()),
                (count, 2.0 * count),
                "block {b} bin {k}"
            );
        }
    }
}

#[test]
fn f16_atomic_adds_round_once_and_count_under_contention() {
    let Some(gpu) = gpu_or_skip("f16_atomic_adds_round_once_and_count_under_contention") else {
        return;
    };
    let stream = gpu.default_stream();
    check_half_atomics::<f16>(&gpu, 8, |r, blocks, n| {
        ik::half_atomics::launch(
            &stream,
            LaunchConfig::grid_1d(blocks),
            r.x,
            r.y,
            r.old,
            r.bins,
            r.hist,
            r.pairs,
            n,
        )
    });
}

#[test]
fn bf16_atomic_adds_round_once_and_count_under_contention() {
    let test = "bf16_atomic_adds_round_once_and_count_under_contention";
    let Some(gpu) = gpu_or_skip(test) else {
        return;
    };
    let Some(gpu) = sm90(&gpu, test) else {
        return;
    };
    let stream = gpu.default_stream();
    check_half_atomics::<bf16>(&gpu, 9, |r, blocks, n| {
        ik::half_atomics_bf16::launch(
            &stream,
            LaunchConfig::grid_1d(blocks),
            r.x,
            r.y,
            r.old,
            r.bins,
            r.hist,
            r.pairs,
            n,
        )
    });
}

/// `elect_one()` elects exactly one lane per warp, the lowest, in every warp of a grid.
#[test]
fn elect_one_elects_the_lowest_lane_of_each_warp() {
    let test = "elect_one_elects_the_lowest_lane_of_each_warp";
    let Some(gpu) = gpu_or_skip(test) else {
        return;
    };
    let Some(gpu) = sm90(&gpu, test) else {
        return;
    };
    let stream = gpu.default_stream();
    let blocks = 3;
    let warps = blocks as usize * 4;
    let mut count = upload(&gpu, &vec![0u32; warps]);
    let mut leader = upload(&gpu, &vec![u32::MAX; warps]);
    ik::elect_leaders::launch(
        &stream,
        LaunchConfig::grid_1d(blocks),
        &mut count,
        &mut leader,
    )
    .expect("launch");
    assert_eq!(count.to_host().expect("count"), vec![1; warps]);
    assert_eq!(leader.to_host().expect("leader"), vec![0; warps]);
}

/// `stmatrix` lays each lane's registers out as `ldmatrix` loads them: lane `4 g + t` holds
/// row `g`, columns `2 t` and `2 t + 1` of each matrix (transposed: rows `2 t` and `2 t + 1`
/// of column `g`), and `ldmatrix` gives every lane its registers back.
#[test]
fn stmatrix_stores_the_fragments_that_ldmatrix_loads() {
    let test = "stmatrix_stores_the_fragments_that_ldmatrix_loads";
    let Some(gpu) = gpu_or_skip(test) else {
        return;
    };
    let Some(gpu) = sm90(&gpu, test) else {
        return;
    };
    let stream = gpu.default_stream();
    let mut r = rng(0x5717);
    let x: Vec<u32> = (0..128).map(|_| r.gen()).collect();
    let dx = upload(&gpu, &x);
    for trans in [0u32, 1] {
        let mut t = upload(&gpu, &vec![0xdeadu16; 256]);
        let mut back = upload(&gpu, &vec![0xdead_beefu32; 128]);
        ik::matrix_round_trip::launch(
            &stream,
            LaunchConfig::grid_1d(1),
            trans,
            &dx,
            &mut t,
            &mut back,
        )
        .expect("launch");
        let t = t.to_host().expect("t");
        // Element (row, col) of matrix i, from the lane that holds it.
        for i in 0..4 {
            for row in 0..8 {
                for col in 0..8 {
                    let (lane, half) = if trans == 0 {
                        (4 * row + col / 2, col % 2)
                    } else {
                        (4 * col + row / 2, row % 2)
                    };
                    let want = (x[32 * i + lane] >> (16 * half)) as u16;
                    assert_eq!(
                        t[64 * i + 8 * row + col],
                        want,
                        "trans {trans}: matrix {i} ({row}, {col}) from lane {lane}"
                    );
                }
            }
        }
        assert_eq!(
            back.to_host().expect("back"),
            x,
            "trans {trans}: ldmatrix of what stmatrix stored"
        );
    }
}

/// f32 inputs for the packed conversions: ordinary values, values near the halves' limits,
/// subnormals, infinities and NaN.
fn pack_inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    (0..n)
        .map(|i| match i % 9 {
            0 => f32::from_bits(r.gen()),
            1 => r.gen_range(-70000.0f32..70000.0),
            2 => r.gen_range(-1e-5f32..1e-5),
            3 => [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -0.0, 65520.0][r.gen_range(0..5)],
            _ => r.gen_range(-8.0f32..8.0),
        })
        .collect()
}

/// Asserts that the pair `got` holds `lo` (low half) and `hi` rounded by `round`; for a NaN
/// input, a NaN of the format (exponent bits `exp`; its payload is the hardware's choice).
fn check_pair(got: u32, lo: f32, hi: f32, round: impl Fn(f32) -> u16, exp: u16, what: &str) {
    for (k, v) in [lo, hi].into_iter().enumerate() {
        let half = (got >> (16 * k)) as u16;
        if v.is_nan() {
            let man = 0x7fff & !exp;
            assert!(
                half & exp == exp && half & man != 0,
                "{what}: half {k} of {got:#010x} for NaN"
            );
        } else {
            assert_eq!(half, round(v), "{what}: half {k} for {v:e} ({got:#010x})");
        }
    }
}

#[test]
fn packed_conversions_round_each_half_once() {
    let Some(gpu) = gpu_or_skip("packed_conversions_round_each_half_once") else {
        return;
    };
    let n = 999usize;
    let (mut lo, mut hi) = (pack_inputs(n, 10), pack_inputs(n, 11));
    (lo[0], hi[0]) = (1.0, 2.0);
    let (dlo, dhi) = (upload(&gpu, &lo), upload(&gpu, &hi));
    let stream = gpu.default_stream();
    let cfg = LaunchConfig::grid_1d((n as u32).div_ceil(128));
    let f16_of = |v: f32| f16::from_f32(v).to_bits();
    let bf16_of = |v: f32| bf16::from_f32(v).to_bits();
    let mut h = upload(&gpu, &vec![0xdead_beefu32; n + 1]);
    ik::pack_f32s_sm70::launch(&stream, cfg, &dlo, &dhi, &mut h, n as u32).expect("launch");
    let got = h.to_host().expect("h");
    for i in 0..n {
        check_pair(
            got[i],
            lo[i],
            hi[i],
            f16_of,
            0x7c00,
            &format!("sm_70 f16x2 i={i}"),
        );
    }
    // The first source is the low half.
    assert_eq!(got[0], 0x4000_3c00);
    assert_eq!(got[n], 0xdead_beef);
    if gpu.compute_capability() < (8, 0) {
        eprintln!("SKIPPED packed_conversions_round_each_half_once (sm_80 part): needs sm_80");
        return;
    }
    let mut h = upload(&gpu, &vec![0xdead_beefu32; n + 1]);
    let mut b = upload(&gpu, &vec![0xdead_beefu32; n + 1]);
    ik::pack_f32s::launch(&stream, cfg, &dlo, &dhi, &mut h, &mut b, n as u32).expect("launch");
    let (gh, gb) = (h.to_host().expect("h"), b.to_host().expect("b"));
    for i in 0..n {
        check_pair(gh[i], lo[i], hi[i], f16_of, 0x7c00, &format!("f16x2 i={i}"));
        check_pair(
            gb[i],
            lo[i],
            hi[i],
            bf16_of,
            0x7f80,
            &format!("bf16x2 i={i}"),
        );
    }
    assert_eq!((gh[0], gb[0]), (0x4000_3c00, 0x4000_3f80));
    assert_eq!((gh[n], gb[n]), (0xdead_beef, 0xdead_beef));
}

#[test]
fn ordered_accesses_and_half_atomics_out_of_bounds_are_skipped_and_reported() {
    let Some(gpu) = gpu_or_skip("ordered_accesses_and_half_atomics_out_of_bounds") else {
        return;
    };
    // A stream of its own: the fault record is per stream.
    let stream = gpu.new_stream().expect("stream");
    let mut x = upload(&gpu, &[11u64, 12, 13, 14]);
    let mut h = upload(&gpu, &[f16::from_f32(0.5); 3]);
    let mut y = upload(&gpu, &[u64::MAX; 2]);
    let cfg = LaunchConfig::grid_1d(1);
    let fault = |r: pagesift_gpu::Result<()>| match r {
        Err(Error::KernelFault(f)) if !f.misaligned => {
            let f = *f;
            (f.kernel, f.param, f.index, f.len, f.elements)
        }
        other => panic!("expected a KernelFault, got {other:?}"),
    };
    let probe = |x: &mut DeviceBuffer<u64>,
                 h: &mut DeviceBuffer<f16>,
                 y: &mut DeviceBuffer<u64>,
                 i: u64,
                 which: u32| {
        ik::ordered_probe::launch(&stream, cfg, x, h, y, i, which).expect("launch");
        stream.synchronize()
    };
    let name = |s: &str| s.to_string();
    assert_eq!(
        fault(probe(&mut x, &mut h, &mut y, 4, 0)),
        (name("ordered_probe"), name("x"), 4, 4, 1)
    );
    // The skipped load gave 0.
    assert_eq!(y.to_host().expect("y"), [1, u64::MAX]);
    assert_eq!(
        fault(probe(&mut x, &mut h, &mut y, u64::MAX, 1)),
        (name("ordered_probe"), name("x"), u64::MAX, 4, 1)
    );
    assert_eq!(x.to_host().expect("x"), [11, 12, 13, 14]);
    assert_eq!(
        fault(probe(&mut x, &mut h, &mut y, 3, 2)),
        (name("ordered_probe"), name("h"), 3, 3, 1)
    );
    assert_eq!(y.to_host().expect("y"), [1, 0]);
    assert!(h.to_host().expect("h").iter().all(|v| v.to_f32() == 0.5));
    // In bounds they run.
    probe(&mut x, &mut h, &mut y, 3, 1).expect("release store");
    probe(&mut x, &mut h, &mut y, 3, 0).expect("acquire load");
    probe(&mut x, &mut h, &mut y, 2, 2).expect("atomic");
    assert_eq!(x.to_host().expect("x"), [11, 12, 13, 7]);
    assert_eq!(
        y.to_host().expect("y"),
        [8, f16::from_f32(0.5).to_bits() as u64]
    );
    assert_eq!(h.to_host().expect("h")[2].to_f32(), 1.5);
}

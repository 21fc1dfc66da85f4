//! The kernels of `block_kernels` end to end on the device (the GPU, or the emulated one):
//! random data, outputs poisoned before each run, CPU references.

use half::f16;
use pagesift_gpu::{DeviceBuffer, DeviceRepr, Error, Gpu, LaunchConfig};
use pagesift_tests::block_kernels::{
    affine, byte_mix, q4_0_gemv, sgemm, staged_dot, wrap_index, STAGED_DOT_SHARED,
};
use pagesift_tests::gpu_or_skip;
use rand::{Rng, SeedableRng};

fn upload<T: DeviceRepr>(gpu: &Gpu, data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_host(gpu, data).expect("upload")
}

#[test]
fn const_arguments_by_name_select_the_variant_they_name() {
    let Some(gpu) = gpu_or_skip("const_arguments_by_name_select_the_variant_they_name") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    let n = 333usize;
    let x: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1 << 20)).collect();
    let dx = upload(&gpu, &x);
    let cfg = LaunchConfig::grid_1d((n as u32).div_ceil(64));
    for (scale, shift) in [(2u32, 3u32), (3, 2)] {
        let mut dy = upload(&gpu, &vec![0xDEAD_BEEFu32; n + 5]);
        {
            let mut y = dy.slice_mut(..n).expect("view");
            affine::launch_with(&stream, cfg, affine::Consts { scale, shift }, &dx, &mut y)
                .expect("launch");
        }
        let got = dy.to_host().expect("download");
        for i in 0..n {
            assert_eq!(
                got[i],
                x[i] * scale + shift,
                "SCALE={scale} SHIFT={shift} i={i}"
            );
        }
        assert!(got[n..].iter().all(|&v| v == 0xDEAD_BEEF), "tail written");
        // The positional form selects the same variant.
        assert_eq!(
            affine::variant(scale, shift).map(|v| v.entry),
            Some(format!("affine__SCALE_{scale}__SHIFT_{shift}").as_str())
        );
    }
    // A combination with no compiled variant fails by name.
    let mut dy = upload(&gpu, &vec![0u32; n]);
    let e = affine::launch_with(
        &stream,
        cfg,
        affine::Consts { scale: 2, shift: 2 },
        &dx,
        &mut dy,
    )
    .unwrap_err();
    assert!(e.to_string().contains("SCALE=2, SHIFT=2"), "{e}");
}

#[test]
fn byte_arithmetic_wraps_at_eight_bits() {
    let Some(gpu) = gpu_or_skip("byte_arithmetic_wraps_at_eight_bits") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    // Every value of `a` and of `b`, in a random pairing, and some more.
    let n = 700usize;
    let mut a: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut b: Vec<i8> = (0..n).map(|i| (i as u8).wrapping_mul(7) as i8).collect();
    for i in (1..n).rev() {
        a.swap(i, rng.gen_range(0..=i));
        b.swap(i, rng.gen_range(0..=i));
    }
    let (da, db) = (upload(&gpu, &a), upload(&gpu, &b));
    let mut dy = upload(&gpu, &vec![0xA5u8; n + 3]);
    let mut dz = upload(&gpu, &vec![0x5Ai8; n + 3]);
    {
        let mut y = dy.slice_mut(..n).expect("view");
        let mut z = dz.slice_mut(..n).expect("view");
        byte_mix::launch(
            &stream,
            LaunchConfig::grid_1d((n as u32).div_ceil(64)),
            &da,
            &db,
            &mut y,
            &mut z,
        )
        .expect("launch");
    }
    let (y, z) = (dy.to_host().expect("y"), dz.to_host().expect("z"));
    for i in 0..n {
        let (p, q) = (a[i], b[i]);
        let mut v = p.wrapping_mul(3).wrapping_add(q as u8) ^ (p >> 1);
        if p > 200 {
            v = v.wrapping_add(v);
        }
        assert_eq!(y[i], v, "y: a={p} b={q}");
        let w = ((q / 3).wrapping_neg() % 5)
            .wrapping_mul(p as i8)
            .wrapping_add(q.wrapping_shl(2))
            .wrapping_sub(7);
        assert_eq!(z[i], w, "z: a={p} b={q}");
    }
    assert!(y[n..].iter().all(|&v| v == 0xA5) && z[n..].iter().all(|&v| v == 0x5A));
}

/// q4_0 blocks of `rows` x `cols` weights: per block an f16 scale then 16 nibble bytes.
fn q4_0_blocks(rng: &mut rand::rngs::StdRng, rows: usize, cols: usize) -> Vec<u8> {
    let mut w = Vec::new();
    for _ in 0..rows * cols / 32 {
        // Powers of two: every product and sum below is exact in f32.
        let d =
            f16::from_f32((if rng.gen() { 1.0 } else { -1.0 }) * 2f32.powi(rng.gen_range(-4..3)));
        w.extend_from_slice(&d.to_bits().to_le_bytes());
        w.extend((0..16).map(|_| rng.gen::<u8>()));
    }
    w
}

fn q4_0_ref(w: &[u8], x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows)
        .map(|r| {
            let mut acc = 0.0f32;
            for b in 0..cols / 32 {
                let blk = &w[(r * cols / 32 + b) * 18..][..18];
                let d = f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32();
                for j in 0..16 {
                    let q = blk[2 + j];
                    let lo = (q & 0xF) as i32 - 8;
                    let hi = (q >> 4) as i32 - 8;
                    acc += d * (lo as f32 * x[b * 32 + j] + hi as f32 * x[b * 32 + j + 16]);
                }
            }
            acc
        })
        .collect()
}

#[test]
fn q4_0_gemv_reads_the_scale_and_nibbles_of_packed_blocks() {
    let Some(gpu) = gpu_or_skip("q4_0_gemv_reads_the_scale_and_nibbles_of_packed_blocks") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(43);
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    let (rows, cols) = (7usize, 32 * 37);
    let w = q4_0_blocks(&mut rng, rows, cols);
    let x: Vec<f32> = (0..cols).map(|_| rng.gen_range(-3..=3) as f32).collect();
    let (dw, dx) = (upload(&gpu, &w), upload(&gpu, &x));
    let mut dy = upload(&gpu, &vec![f32::NAN; rows + 2]);
    {
        let mut y = dy.slice_mut(..rows).expect("view");
        q4_0_gemv::launch(
            &stream,
            LaunchConfig::grid_1d(rows as u32),
            &dw,
            &dx,
            &mut y,
            rows as u32,
            cols as u32,
        )
        .expect("launch");
    }
    let got = dy.to_host().expect("download");
    let want = q4_0_ref(&w, &x, rows, cols);
    for r in 0..rows {
        assert_eq!(
            got[r].to_bits(),
            want[r].to_bits(),
            "row {r}: {} vs {}",
            got[r],
            want[r]
        );
    }
    assert!(got[rows..].iter().all(|v| v.is_nan()), "tail written");

    // The blocks one byte off: the f16 scale is misaligned, and reported so.
    let view = dw.slice(1..).expect("view");
    let mut y1 = upload(&gpu, &[0.0f32]);
    q4_0_gemv::launch(
        &stream,
        LaunchConfig::grid_1d(1),
        &view,
        &dx,
        &mut y1,
        1,
        cols as u32,
    )
    .expect("launch");
    match stream.synchronize() {
        Err(Error::KernelFault(f)) => {
            assert!(f.misaligned, "{f:?}");
            assert_eq!(
                (f.param.as_str(), f.bytes, f.elements),
                ("w", 2, 2),
                "{f:?}"
            );
        }
        other => panic!("expected a misaligned read, got {other:?}"),
    }
}

#[test]
fn sgemm_with_two_dimensional_tiles_and_accumulators() {
    let Some(gpu) = gpu_or_skip("sgemm_with_two_dimensional_tiles_and_accumulators") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(44);
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    // Small integers: every sum is exact in f32, whatever its order.
    let mut gen =
        |len: usize| -> Vec<f32> { (0..len).map(|_| rng.gen_range(-4..=4) as f32).collect() };
    for (m, n, k) in [(70usize, 45usize, 37usize), (33, 64, 16), (5, 3, 50)] {
        let (a, b, bias) = (gen(m * k), gen(k * n), gen(n));
        let (da, db, dbias) = (upload(&gpu, &a), upload(&gpu, &b), upload(&gpu, &bias));
        for bm in [32u32, 64] {
            let mut dc = upload(&gpu, &vec![f32::NAN; m * n + 4]);
            {
                let mut c = dc.slice_mut(..m * n).expect("view");
                let cfg = LaunchConfig::grid([(n as u32).div_ceil(32), (m as u32).div_ceil(bm), 1]);
                sgemm::launch_with(
                    &stream,
                    cfg,
                    sgemm::Consts { bm, bn: 32 },
                    &da,
                    &db,
                    &dbias,
                    &mut c,
                    m as u32,
                    n as u32,
                    k as u32,
                )
                .expect("launch");
            }
            let got = dc.to_host().expect("download");
            for r in 0..m {
                for col in 0..n {
                    let want =
                        bias[col] + (0..k).map(|i| a[r * k + i] * b[i * n + col]).sum::<f32>();
                    assert_eq!(
                        got[r * n + col],
                        want,
                        "BM={bm} {m}x{n}x{k} at ({r}, {col})"
                    );
                }
            }
            assert!(got[m * n..].iter().all(|v| v.is_nan()), "tail written");
        }
    }
}

// The views pass the 48 KiB a launch gets without opting in.
const _: () = assert!(STAGED_DOT_SHARED > 48 * 1024);

#[test]
fn views_of_dynamic_shared_memory_over_48_kib() {
    let Some(gpu) = gpu_or_skip("views_of_dynamic_shared_memory_over_48_kib") else {
        return;
    };
    assert!(staged_dot::VARIANTS[0].dynamic_shared);
    assert_eq!(staged_dot::VARIANTS[0].static_shared_bytes, 0);
    assert_eq!(staged_dot::VARIANTS[0].shared, ["xs", "ws", "part"]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(45);
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    let (rows, n) = (3usize, 9000usize);
    // Small integers: the sums are exact in any order.
    let x: Vec<f32> = (0..rows * n)
        .map(|_| rng.gen_range(-4..=4) as f32)
        .collect();
    let w: Vec<f16> = (0..n)
        .map(|_| f16::from_f32(rng.gen_range(-3..=3) as f32))
        .collect();
    let (dx, dw) = (upload(&gpu, &x), upload(&gpu, &w));
    let mut dy = upload(&gpu, &vec![f32::NAN; rows + 1]);
    {
        let mut y = dy.slice_mut(..rows).expect("view");
        let cfg = LaunchConfig::grid_1d(rows as u32).with_shared_mem(STAGED_DOT_SHARED);
        staged_dot::launch(&stream, cfg, &dx, &dw, &mut y, n as u32).expect("launch");
    }
    let got = dy.to_host().expect("download");
    for r in 0..rows {
        let want: f32 = (0..n).map(|i| x[r * n + i] * w[i].to_f32()).sum();
        assert_eq!(got[r], want, "row {r}");
    }
    assert!(got[rows].is_nan(), "tail written");

    // 960 bytes short: 64 bytes of the partial sums fit (16 of their 256 elements); the view
    // that ends last is reported and no thread runs on.
    let mut dy = upload(&gpu, &vec![f32::NAN; rows]);
    let cfg = LaunchConfig::grid_1d(rows as u32).with_shared_mem(STAGED_DOT_SHARED - 960);
    staged_dot::launch(&stream, cfg, &dx, &dw, &mut dy, n as u32).expect("launch");
    match stream.synchronize() {
        Err(Error::KernelFault(f)) => {
            assert!(!f.misaligned, "{f:?}");
            assert_eq!(
                (f.param.as_str(), f.index, f.len, f.elements),
                ("part", 0, 16, 256),
                "{f:?}"
            );
        }
        other => panic!("expected the view to be reported, got {other:?}"),
    }
    assert!(dy.to_host().expect("download").iter().all(|v| v.is_nan()));
}

#[test]
fn index_sums_wrap_in_their_type_before_they_index() {
    let Some(gpu) = gpu_or_skip("index_sums_wrap_in_their_type_before_they_index") else {
        return;
    };
    // A stream of its own: a fault is reported to whoever waits for the stream that ran it.
    let stream = gpu.new_stream().expect("stream");
    let x: Vec<f32> = (0..8).map(|v| 10.0 + v as f32).collect();
    let dx = upload(&gpu, &x);
    let run = |i: u32| {
        let mut dy = upload(&gpu, &[f32::NAN; 2]);
        wrap_index::launch(&stream, LaunchConfig::grid_1d(1), &dx, &mut dy, i).expect("launch");
        let r = stream.synchronize();
        (r, dy.to_host().expect("download"))
    };
    // 2 + 0xFFFF_FFFF wraps to 1: x[1], as in Rust.
    let (r, y) = run(2);
    r.expect("no fault");
    assert_eq!(y, [x[4], x[1]]);
    // 2^32 - 1 + 2 wraps to 1 (x[1]); 2^32 - 1 + 0xFFFF_FFFF to 2^32 - 2, out of the 8
    // elements: reported at that index, the load skipped (0).
    let (r, y) = run(u32::MAX);
    let f = match r {
        Err(Error::KernelFault(f)) => f,
        other => panic!("expected a fault, got {other:?}"),
    };
    assert_eq!(
        (f.param.as_str(), f.index, f.len, f.elements, f.misaligned),
        ("x", u32::MAX as u64 - 1, 8, 1, false),
        "{f:?}"
    );
    assert_eq!(y, [x[1], 0.0]);
    // 2^32 - 3 + 2 is 2^32 - 1: out of bounds, reported as such (not an access past the wrap
    // at 2^32 + 1, nor one wrapped to 1).
    let (r, y) = run(u32::MAX - 2);
    let f = match r {
        Err(Error::KernelFault(f)) => f,
        other => panic!("expected a fault, got {other:?}"),
    };
    assert_eq!((f.index, f.len), (u32::MAX as u64, 8), "{f:?}");
    assert_eq!(y, [0.0, 0.0]);
}

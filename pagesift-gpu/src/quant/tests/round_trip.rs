//! Round trips of random and structured data, with error bounds derived from each format.

use half::f16;

use super::*;

#[test]
fn float_formats_round_trip_within_half_an_ulp() {
    let mut rng = SplitMix(1);
    // Magnitudes from 2^-10 to 2^10, both signs.
    let values: Vec<f32> = (0..4096)
        .map(|i| rng.uniform() * (2.0f32).powi(i % 21 - 10))
        .collect();
    assert!(values.iter().all(|v| *v != 0.0));
    assert_eq!(round_trip(WeightFormat::F32, &values, 16, 256), values);
    // Relative half-ulp bounds: 2^-11 for f16 (11 significant bits), 2^-8 for bf16 (8); below
    // the smallest normal f16 (2^-14) the absolute bound is half its subnormal spacing, 2^-25.
    for (format, relative) in [
        (WeightFormat::F16, 2f32.powi(-11)),
        (WeightFormat::Bf16, 2f32.powi(-8)),
    ] {
        let back = round_trip(format, &values, 16, 256);
        for (x, y) in values.iter().zip(&back) {
            let bound = (x.abs() * relative).max(2f32.powi(-25));
            assert!((x - y).abs() <= bound, "{format}: {x} -> {y}");
        }
        assert_ne!(back, values, "{format} must round some values");
    }
    // Beyond the f16 range: infinite, as the conversion defines; NaN stays NaN.
    let back = round_trip(WeightFormat::F16, &[7e4, f32::NAN], 1, 2);
    assert_eq!(back[0], f32::INFINITY);
    assert!(back[1].is_nan());
}

/// Per element: `|x - q * d16| <= d / 2 + 127 * |d16 - d|`, where `d = amax / 127` is the
/// exact scale and `d16` its f16 rounding (the code is the nearest for `d`, then the stored
/// scale moves each value by at most `|q| * |d16 - d|`), plus a relative `1e-6` for the f32
/// arithmetic.
#[test]
fn q8_0_round_trip_error_is_half_a_step() {
    let values = weights(2, 8, 512);
    let bytes = quantize(WeightFormat::Q8_0, &values, 8, 512).unwrap();
    let back = dequantize(WeightFormat::Q8_0, &bytes, 8, 512).unwrap();
    for ((x, y), block) in values.chunks(32).zip(back.chunks(32)).zip(bytes.chunks(34)) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let d16 = f16::from_le_bytes([block[0], block[1]]).to_f32();
        let bound = d / 2.0 + 127.0 * (d16 - d).abs() + 1e-6 * amax;
        for (x, y) in x.iter().zip(y) {
            assert!((x - y).abs() <= bound, "{x} -> {y}, bound {bound}");
        }
        // The largest magnitude maps to code +-127.
        assert!(block[2..].iter().any(|&q| q == 127 || q == 0x81));
    }
}

/// Per element, with `t = x / d` for the exact scale `d = max / -8`: `|x - value| <= |d| / 2`
/// when `t <= 7.5`, and `(t - 7) * |d|` above, where code 15 is the largest (it is reached
/// only by values of the sign opposite to `max`); plus `8 * |d16 - d|` for the f16 rounding of
/// the scale.
#[test]
fn q4_0_round_trip_error_is_half_a_step() {
    let values = weights(3, 8, 512);
    let bytes = quantize(WeightFormat::Q4_0, &values, 8, 512).unwrap();
    let back = dequantize(WeightFormat::Q4_0, &bytes, 8, 512).unwrap();
    let mut clamped = 0;
    for ((x, y), block) in values.chunks(32).zip(back.chunks(32)).zip(bytes.chunks(18)) {
        let max = x
            .iter()
            .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        let d = max / -8.0;
        let d16 = f16::from_le_bytes([block[0], block[1]]).to_f32();
        for (x, y) in x.iter().zip(y) {
            let t = x / d;
            let step = if t <= 7.5 { 0.5 } else { t - 7.0 };
            clamped += usize::from(t > 7.5);
            let bound = step * d.abs() + 8.0 * (d16 - d).abs() + 1e-6 * max.abs();
            assert!((x - y).abs() <= bound, "{x} -> {y}, bound {bound}");
        }
    }
    assert!(clamped > 0, "the data should exercise the clamp at code 15");
}

/// Every Q4_K code is the nearest one under its sub-block's map `scale * q - min`: the error of
/// an element is at most half the sub-block's step `d * scale`, or its distance to the nearer
/// end of the sub-block's range when it lies outside.
#[test]
fn q4_k_round_trip_codes_are_the_nearest() {
    let values = weights(4, 4, 1024);
    let bytes = quantize(WeightFormat::Q4K, &values, 4, 1024).unwrap();
    let back = dequantize(WeightFormat::Q4K, &bytes, 4, 1024).unwrap();
    for ((x, y), block) in values
        .chunks(256)
        .zip(back.chunks(256))
        .zip(bytes.chunks(144))
    {
        let block = Q4KBlock::from_bytes(block.try_into().unwrap());
        let (scales, mins) = block.scales_mins();
        assert!(block.d.to_f32() > 0.0 && block.dmin.to_f32() >= 0.0);
        for (s, (x, y)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let step = block.d.to_f32() * f32::from(scales[s]);
            let low = -block.dmin.to_f32() * f32::from(mins[s]);
            let high = low + 15.0 * step;
            assert!(step > 0.0, "sub-block {s} of random data has a scale");
            for (x, y) in x.iter().zip(y) {
                let outside = (low - x).max(x - high).max(0.0);
                let bound = step / 2.0 + outside + 1e-6;
                assert!(
                    (x - y).abs() <= bound,
                    "sub-block {s}: {x} -> {y}, bound {bound}"
                );
            }
        }
    }
}

/// Root-mean-square error relative to the RMS of the data, on 16 x 1024 weights of seed 7:
/// Q4_K 0.0685 here, where ggml's `quantize_row_q4_K_ref` gives 0.0695 on the same values
/// (and decodes these blocks to the same f32 values bit for bit); Q4_0 gives 0.0826 and Q8_0
/// 0.0052.
#[test]
fn q4_k_error_is_at_most_that_of_ggml_reference() {
    let values = weights(7, 16, 1024);
    let rms =
        |v: &[f32]| (v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
    let relative_error = |format| {
        let back = round_trip(format, &values, 16, 1024);
        let diff: Vec<f32> = values.iter().zip(&back).map(|(x, y)| x - y).collect();
        rms(&diff) / rms(&values)
    };
    let q4k = relative_error(WeightFormat::Q4K);
    assert!(q4k < 0.0695, "Q4_K relative RMS error {q4k}");
    assert!(
        q4k < relative_error(WeightFormat::Q4_0),
        "Q4_K should beat Q4_0"
    );
    assert!(relative_error(WeightFormat::Q8_0) < 0.006);
}

#[test]
fn zero_blocks_encode_as_zero_scales() {
    let mut values = vec![0.0f32; 512];
    // The second half is not zero, so each format has a zero block next to a non-zero one.
    for (i, v) in values.iter_mut().enumerate().skip(256) {
        *v = (i % 7) as f32 - 3.0;
    }
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4K] {
        let bytes = quantize(format, &values, 1, 512).unwrap();
        let d = f16::from_le_bytes([bytes[0], bytes[1]]);
        assert_eq!(d, f16::ZERO, "{format}: d of a zero block is 0");
        let back = dequantize(format, &bytes, 1, 512).unwrap();
        assert!(back[..256].iter().all(|v| *v == 0.0), "{format}");
        assert!(back[256..].iter().any(|v| *v != 0.0), "{format}");
    }
    // Exact bytes: Q8_0 all zero; Q4_0 d = 0 / -8 = -0.0 (f16 0x8000, as ggml stores it) and
    // code 8 (value 0) everywhere; Q4_K all zero.
    let zeros = [0.0f32; 256];
    assert_eq!(
        quantize(WeightFormat::Q8_0, &zeros[..32], 1, 32).unwrap(),
        [0u8; 34]
    );
    let mut q4_0 = [0x88u8; 18];
    (q4_0[0], q4_0[1]) = (0x00, 0x80);
    assert_eq!(
        quantize(WeightFormat::Q4_0, &zeros[..32], 1, 32).unwrap(),
        q4_0
    );
    assert_eq!(
        quantize(WeightFormat::Q4K, &zeros, 1, 256).unwrap(),
        [0u8; 144]
    );
}

/// A block of values in `[-1, 1)` with one value of 100 (element 37: block 1 of Q8_0 and
/// Q4_0, sub-block 1 of Q4_K).
#[test]
fn one_large_value_sets_its_block_scale() {
    let mut rng = SplitMix(9);
    let mut values: Vec<f32> = (0..256).map(|_| rng.uniform()).collect();
    values[37] = 100.0;

    // Q8_0: d = 100 / 127; 100 gets code 127, its neighbours (|x| < 1 < d) codes -1..=1.
    let bytes = quantize(WeightFormat::Q8_0, &values, 1, 256).unwrap();
    let block = Q8_0Block::from_bytes(bytes[34..68].try_into().unwrap());
    assert_eq!(block.qs[5], 127);
    assert!(block
        .qs
        .iter()
        .enumerate()
        .all(|(i, q)| i == 5 || q.abs() <= 1));
    let d = 100.0f32 / 127.0;
    assert!((block.dequantize()[5] - 100.0).abs() <= 127.0 * (block.d.to_f32() - d).abs() + 1e-4);
    let back = dequantize(WeightFormat::Q8_0, &bytes, 1, 256).unwrap();
    for (i, (x, y)) in values
        .iter()
        .zip(&back)
        .enumerate()
        .filter(|(i, _)| i / 32 != 1)
    {
        assert!(
            (x - y).abs() <= 0.5 / 127.0 + 1e-3,
            "element {i}: {x} -> {y}"
        );
    }

    // Q4_0: d = 100 / -8 = -12.5, exact in f16; 100 gets code 0, exactly -8 * d = 100, and
    // its block's other values code 8, that is 0. The other blocks keep their own scale.
    for sign in [1.0f32, -1.0] {
        let mut signed = values.clone();
        signed[37] *= sign;
        let back = round_trip(WeightFormat::Q4_0, &signed, 1, 256);
        assert_eq!(back[37], 100.0 * sign);
        for (i, (x, y)) in signed
            .iter()
            .zip(&back)
            .enumerate()
            .filter(|(i, _)| *i != 37)
        {
            // Elsewhere, a step of at most 1 / 8 (half of one, or up to a whole one at the clamp
            // to code 15), with a margin for the f16 scale.
            let in_block = if i / 32 == 1 {
                *y == 0.0
            } else {
                (x - y).abs() <= 0.1251
            };
            assert!(in_block, "element {i}: {x} -> {y}");
        }
    }

    // Q4_K: 100 is within half a step (100 / 15 / 2) of itself. The other sub-blocks, of
    // range about 2, have 6-bit scales in units of d ~ (100 / 15) / 63: scale 2 would span
    // their range with errors of at most d (plus dmin / 2 for the min), and the chosen scale
    // and min have at most that squared error, so their RMS error is at most d + dmin / 2.
    let bytes = quantize(WeightFormat::Q4K, &values, 1, 256).unwrap();
    let block = Q4KBlock::from_bytes(bytes[..].try_into().unwrap());
    let back = block.dequantize();
    assert!((back[37] - 100.0).abs() <= 100.0 / 30.0, "{}", back[37]);
    let bound = block.d.to_f32() + block.dmin.to_f32() / 2.0;
    assert!(bound < 0.13, "d {} dmin {}", block.d, block.dmin);
    for (s, (x, y)) in values
        .chunks(32)
        .zip(back.chunks(32))
        .enumerate()
        .filter(|(s, _)| *s != 1)
    {
        let squared: f32 = x.iter().zip(y).map(|(x, y)| (x - y).powi(2)).sum();
        let rms = (squared / 32.0).sqrt();
        assert!(
            rms <= bound,
            "sub-block {s}: RMS error {rms}, bound {bound}"
        );
    }
}

//! Blocks written byte by byte, with their values worked out by hand, and the bytes ggml's
//! reference quantizers give for inputs whose codes can be worked out by hand.

use half::f16;

use super::*;

#[test]
fn float_formats_decode_hand_written_bytes() {
    // f16: 0x3C00 = 1.0, 0xC000 = -2.0, 0x0001 = 2^-24 (the smallest subnormal).
    let mut out = [0.0f32; 3];
    dequantize_row(
        WeightFormat::F16,
        &[0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00],
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [1.0, -2.0, 2f32.powi(-24)]);
    // bf16: 0x3F80 = 1.0, 0x4049 = 3.140625 (1.5703125 * 2), 0xC2F7 = -123.5.
    dequantize_row(
        WeightFormat::Bf16,
        &[0x80, 0x3F, 0x49, 0x40, 0xF7, 0xC2],
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [1.0, 3.140625, -123.5]);
    // f32 0x3FC00000 = 1.5, little-endian.
    let mut one = [0.0f32];
    dequantize_row(WeightFormat::F32, &[0x00, 0x00, 0xC0, 0x3F], &mut one).unwrap();
    assert_eq!(one, [1.5]);
    // Rounding to nearest even: 1 + 2^-11 lies halfway between two f16s and goes to 1.0.
    let mut bytes = [0u8; 2];
    quantize_row(WeightFormat::F16, &[1.0 + 2f32.powi(-11)], &mut bytes).unwrap();
    assert_eq!(bytes, [0x00, 0x3C]);
}

#[test]
fn q8_0_decodes_hand_written_bytes() {
    // d = 0x3800 = 0.5; codes 1, -1 (0xFF), 127, -128 (0x80), 6, then zeros.
    let mut bytes = [0u8; 34];
    bytes[..7].copy_from_slice(&[0x00, 0x38, 0x01, 0xFF, 0x7F, 0x80, 0x06]);
    let mut out = [f32::NAN; 32];
    dequantize_row(WeightFormat::Q8_0, &bytes, &mut out).unwrap();
    // 1 * 0.5, -1 * 0.5, 127 * 0.5, -128 * 0.5, 6 * 0.5, 0 * 0.5 ...
    assert_eq!(out[..5], [0.5, -0.5, 63.5, -64.0, 3.0]);
    assert!(out[5..].iter().all(|v| *v == 0.0));
    let block = Q8_0Block::from_bytes(&bytes);
    assert_eq!(block.qs[..5], [1, -1, 127, -128, 6]);
    assert_eq!(block.to_bytes(), bytes);
}

#[test]
fn q8_0_quantizes_as_ggml_reference() {
    // amax = 127, so d = 1 exactly (f16 0x3C00) and each code is round(x): ties go away from
    // zero (2.5 -> 3, -2.5 -> -3), 0.49 -> 0, -126.6 -> -127, and i - 16 stays i - 16.
    let mut values = [0.0f32; 32];
    values[..5].copy_from_slice(&[127.0, 2.5, -2.5, 0.49, -126.6]);
    for (i, v) in values.iter_mut().enumerate().skip(5) {
        *v = i as f32 - 16.0;
    }
    let mut expected = vec![0x00, 0x3C, 127, 3, (-3i8) as u8, 0, (-127i8) as u8];
    expected.extend((5..32).map(|i| (i - 16) as u8));
    assert_eq!(
        quantize(WeightFormat::Q8_0, &values, 1, 32).unwrap(),
        expected
    );
}

#[test]
fn q4_0_decodes_hand_written_bytes() {
    // d = 0x4000 = 2.0. Byte j holds element j (low nibble) and element j + 16 (high nibble).
    let mut bytes = [0x88u8; 18]; // code 8 everywhere: value (8 - 8) * 2 = 0
    bytes[..4].copy_from_slice(&[0x00, 0x40, 0xF0, 0x98]);
    bytes[17] = 0x7A;
    let mut out = [f32::NAN; 32];
    dequantize_row(WeightFormat::Q4_0, &bytes, &mut out).unwrap();
    // qs[0] = 0xF0: element 0 code 0 -> (0 - 8) * 2 = -16; element 16 code 15 -> 14.
    // qs[1] = 0x98: element 1 code 8 -> 0; element 17 code 9 -> 2.
    // qs[15] = 0x7A: element 15 code 10 -> 4; element 31 code 7 -> -2.
    let mut expected = [0.0f32; 32];
    (expected[0], expected[16]) = (-16.0, 14.0);
    (expected[1], expected[17]) = (0.0, 2.0);
    (expected[15], expected[31]) = (4.0, -2.0);
    assert_eq!(out, expected);
    let block = Q4_0Block::from_bytes(&bytes);
    assert_eq!(block.codes()[..2], [0, 8]);
    assert_eq!(block.codes()[16..18], [15, 9]);
    assert_eq!(Q4_0Block::from_codes(block.d, &block.codes()), block);
}

#[test]
fn q4_0_quantizes_as_ggml_reference() {
    // Values -16..=15: the largest magnitude is -16, so d = -16 / -8 = 2 (0x4000) and the
    // code of x is min(15, trunc(x / 2 + 8.5)) = min(15, floor((i + 1) / 2)) for x = i - 16:
    // ties round up, and 15 (code 16) is clamped to code 15.
    let values: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    let expected = [
        0x00, 0x40, // d
        0x80, 0x91, 0x91, 0xA2, 0xA2, 0xB3, 0xB3, 0xC4, // codes 0 1 1 2 2 3 3 4 | 8 9 9 10 ..
        0xC4, 0xD5, 0xD5, 0xE6, 0xE6, 0xF7, 0xF7, 0xF8, // codes 4 5 5 6 6 7 7 8 | .. 15 15 15
    ];
    let bytes = quantize(WeightFormat::Q4_0, &values, 1, 32).unwrap();
    assert_eq!(bytes, expected);
    let back = dequantize(WeightFormat::Q4_0, &bytes, 1, 32).unwrap();
    // -16 is exact; -15 (a tie) goes up to -14; 15 is clamped to 7 * 2 = 14.
    assert_eq!((back[0], back[1], back[31]), (-16.0, -14.0, 14.0));
}

/// A Q4_K block built by hand. d = 1.0 (0x3C00), dmin = 0.5 (0x3800).
///
/// Sub-block scales `[1, 2, 3, 4, 17, 33, 50, 63]` and mins `[0, 1, 2, 3, 20, 40, 63, 5]`,
/// packed: bytes 0..4 hold scales 0..4 in their low 6 bits and the top 2 bits of scales 4..8
/// (17 >> 4 = 1, 33 >> 4 = 2, 50 >> 4 = 3, 63 >> 4 = 3) in bits 6..8; bytes 4..8 the same for
/// the mins (20 >> 4 = 1, 40 >> 4 = 2, 63 >> 4 = 3, 5 >> 4 = 0); bytes 8..12 the low nibbles
/// of scale 4 + j and min 4 + j (scale low, min high):
/// - `1 | 1 << 6 = 0x41`, `2 | 2 << 6 = 0x82`, `3 | 3 << 6 = 0xC3`, `4 | 3 << 6 = 0xC4`;
/// - `0 | 1 << 6 = 0x40`, `1 | 2 << 6 = 0x81`, `2 | 3 << 6 = 0xC2`, `3 | 0 << 6 = 0x03`;
/// - `1 | 4 << 4 = 0x41`, `1 | 8 << 4 = 0x81`, `2 | 15 << 4 = 0xF2`, `15 | 5 << 4 = 0x5F`.
const Q4K_SCALES: [u8; 12] = [
    0x41, 0x82, 0xC3, 0xC4, 0x40, 0x81, 0xC2, 0x03, 0x41, 0x81, 0xF2, 0x5F,
];

fn hand_written_q4k() -> [u8; 144] {
    let mut bytes = [0u8; 144];
    bytes[..4].copy_from_slice(&[0x00, 0x3C, 0x00, 0x38]);
    bytes[4..16].copy_from_slice(&Q4K_SCALES);
    // qs starts at byte 16. Group g (elements 64g..64g + 64) uses qs[32g..32g + 32]: byte
    // qs[32g + l] holds element 64g + l (low nibble) and element 64g + 32 + l (high nibble).
    // qs[0]: element 0 (sub-block 0) code 10, element 32 (sub-block 1) code 5.
    bytes[16] = 0x5A;
    // qs[33]: element 65 (sub-block 2) code 1, element 97 (sub-block 3) code 3.
    bytes[16 + 33] = 0x31;
    // qs[64]: element 128 (sub-block 4) code 2, element 160 (sub-block 5) code 15.
    bytes[16 + 64] = 0xF2;
    // qs[127]: element 223 (sub-block 6) code 15, element 255 (sub-block 7) code 7.
    bytes[16 + 127] = 0x7F;
    bytes
}

#[test]
fn q4_k_decodes_hand_written_bytes() {
    let bytes = hand_written_q4k();
    let block = Q4KBlock::from_bytes(&bytes);
    let (scales, mins) = block.scales_mins();
    assert_eq!(scales, [1, 2, 3, 4, 17, 33, 50, 63]);
    assert_eq!(mins, [0, 1, 2, 3, 20, 40, 63, 5]);
    assert_eq!(Q4KBlock::pack_scales_mins(&scales, &mins), Q4K_SCALES);
    assert_eq!(block.to_bytes(), bytes);

    let mut out = [f32::NAN; 256];
    dequantize_row(WeightFormat::Q4K, &bytes, &mut out).unwrap();
    // value = 1.0 * scale * q - 0.5 * min. Code 0 everywhere else: -0.5 * min of the
    // sub-block, that is 0, -0.5, -1, -1.5, -10, -20, -31.5, -2.5.
    let background = [0.0, -0.5, -1.0, -1.5, -10.0, -20.0, -31.5, -2.5];
    let mut expected: Vec<f32> = (0..256).map(|i| background[i / 32]).collect();
    expected[0] = 10.0; // 1 * 10 - 0
    expected[32] = 9.5; // 2 * 5 - 0.5
    expected[65] = 2.0; // 3 * 1 - 1
    expected[97] = 10.5; // 4 * 3 - 1.5
    expected[128] = 24.0; // 17 * 2 - 10: scale 17 needs its high bits from byte 0
    expected[160] = 475.0; // 33 * 15 - 20
    expected[223] = 718.5; // 50 * 15 - 31.5
    expected[255] = 438.5; // 63 * 7 - 2.5
    assert_eq!(out[..], expected[..]);
}

/// Q4_K decoded straight from byte offsets, as the format is specified: an independent check
/// of [`Q4KBlock::dequantize`] on arbitrary bytes.
fn q4k_by_offsets(b: &[u8]) -> Vec<f32> {
    let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
    let dmin = f16::from_le_bytes([b[2], b[3]]).to_f32();
    let s = &b[4..16];
    let qs = &b[16..144];
    (0..256)
        .map(|i| {
            let (group, within, sub) = (i / 64, i % 64, i / 32);
            let byte = qs[32 * group + within % 32];
            let q = if within < 32 { byte & 0xF } else { byte >> 4 };
            let (sc, m) = if sub < 4 {
                (s[sub] & 63, s[sub + 4] & 63)
            } else {
                (
                    (s[sub + 4] & 0xF) | (s[sub - 4] >> 6) << 4,
                    (s[sub + 4] >> 4) | (s[sub] >> 6) << 4,
                )
            };
            d * f32::from(sc) * f32::from(q) - dmin * f32::from(m)
        })
        .collect()
}

#[test]
fn q4_k_decoding_agrees_with_byte_offsets() {
    let mut rng = SplitMix(5);
    for _ in 0..64 {
        let mut bytes: Vec<u8> = (0..144).map(|_| rng.next_u64() as u8).collect();
        // Finite d and dmin of moderate size (random bits may spell NaN).
        bytes[1] &= 0x3B;
        bytes[3] &= 0x3B;
        let decoded = dequantize(WeightFormat::Q4K, &bytes, 1, 256).unwrap();
        let by_offsets = q4k_by_offsets(&bytes);
        let same_bits = decoded
            .iter()
            .zip(&by_offsets)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same_bits, "{decoded:?} vs {by_offsets:?}");
    }
}

//! Tests of the weight formats: the format table, argument checks and the matrix view here;
//! round trips of random data in `round_trip`, hand-written and ggml-reference bytes in
//! `bytes`.

mod bytes;
mod round_trip;

use super::*;
use crate::Error;

/// splitmix64: a small deterministic generator for test data.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`, on a grid of `2^-23`.
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// Roughly normal with standard deviation `0.023` (a sum of four uniforms), like the
    /// weights of a trained layer.
    fn weight(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() * 0.02
    }
}

/// `rows * cols` weights from `seed`.
fn weights(seed: u64, rows: usize, cols: usize) -> Vec<f32> {
    let mut rng = SplitMix(seed);
    (0..rows * cols).map(|_| rng.weight()).collect()
}

/// The message of an [`Error::InvalidArgument`], and its operation.
fn invalid_argument<T: std::fmt::Debug>(result: Result<T>) -> (&'static str, String) {
    match result {
        Err(Error::InvalidArgument(a)) => (a.op, a.message),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// `(expected, actual)` of an [`Error::LengthMismatch`].
fn length_mismatch<T: std::fmt::Debug>(result: Result<T>) -> (usize, usize) {
    match result {
        Err(Error::LengthMismatch(m)) => (m.expected, m.actual),
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
}

fn round_trip(format: WeightFormat, values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let bytes = quantize(format, values, rows, cols).unwrap();
    assert_eq!(bytes.len(), rows * format.row_bytes(cols).unwrap());
    dequantize(format, &bytes, rows, cols).unwrap()
}

#[test]
fn format_table_matches_ggml() {
    let table = [
        (WeightFormat::F32, 1, 4, 0, "F32"),
        (WeightFormat::F16, 1, 2, 1, "F16"),
        (WeightFormat::Bf16, 1, 2, 30, "BF16"),
        (WeightFormat::Q8_0, 32, 34, 8, "Q8_0"),
        (WeightFormat::Q4_0, 32, 18, 2, "Q4_0"),
        (WeightFormat::Q4K, 256, 144, 12, "Q4_K"),
    ];
    for (format, elements, bytes, id, name) in table {
        assert_eq!(format.block_elements(), elements, "{name}");
        assert_eq!(format.block_bytes(), bytes, "{name}");
        assert_eq!(format.ggml_type(), id, "{name}");
        assert_eq!(format.name(), name);
        assert_eq!(format.to_string(), name);
        assert_eq!(WeightFormat::from_ggml_type(id).unwrap(), format);
        assert_eq!(format.is_quantized(), elements > 1);
        assert_eq!(format.row_bytes(4096).unwrap(), 4096 / elements * bytes);
        assert_eq!(
            format.matrix_bytes(3, 4096).unwrap(),
            3 * 4096 / elements * bytes
        );
    }
    assert_eq!(WeightFormat::ALL.len(), table.len());
}

#[test]
fn unknown_ggml_type_is_an_error_naming_it() {
    // 3 is Q4_1 and 14 is Q6_K in ggml: real types this module does not decode.
    for id in [3, 14, 31, 1000] {
        let (op, message) = invalid_argument(WeightFormat::from_ggml_type(id));
        assert_eq!(op, "quant::WeightFormat::from_ggml_type");
        assert!(
            message.starts_with(&format!("unsupported ggml type id {id};")),
            "{message}"
        );
        assert!(message.contains("Q4_K (12)"), "{message}");
    }
    let (op, message) = invalid_argument(QuantMatrix::from_ggml_type(7, &[0; 22], 1, 32));
    assert_eq!(op, "quant::QuantMatrix::from_ggml_type");
    assert!(message.contains("unsupported ggml type id 7"), "{message}");
}

#[test]
fn columns_must_be_a_multiple_of_the_block() {
    let (op, message) = invalid_argument(quantize(WeightFormat::Q4_0, &[0.5; 100], 1, 100));
    assert_eq!(op, "quant::quantize");
    assert_eq!(message, "Q4_0 rows need a multiple of 32 columns, got 100");

    let (op, message) = invalid_argument(QuantMatrix::new(WeightFormat::Q4K, &[0; 144], 1, 288));
    assert_eq!(op, "quant::QuantMatrix::new");
    assert_eq!(message, "Q4_K rows need a multiple of 256 columns, got 288");

    let (_, message) = invalid_argument(WeightFormat::Q8_0.row_bytes(33));
    assert_eq!(message, "Q8_0 rows need a multiple of 32 columns, got 33");
    let (_, message) =
        invalid_argument(dequantize_row(WeightFormat::Q8_0, &[0; 34], &mut [0.0; 48]));
    assert_eq!(message, "Q8_0 rows need a multiple of 32 columns, got 48");
    // Any length is a whole number of plain float elements.
    assert_eq!(WeightFormat::Bf16.row_bytes(7).unwrap(), 14);
}

#[test]
fn byte_and_value_lengths_are_checked() {
    let bytes = vec![0u8; 2 * 18 - 1];
    assert_eq!(
        length_mismatch(QuantMatrix::new(WeightFormat::Q4_0, &bytes, 1, 64)),
        (36, 35)
    );
    assert_eq!(
        length_mismatch(dequantize(WeightFormat::Q4_0, &[0; 37], 1, 64)),
        (36, 37)
    );
    assert_eq!(
        length_mismatch(quantize(WeightFormat::Q8_0, &[1.0; 63], 2, 32)),
        (64, 63)
    );
    assert_eq!(
        length_mismatch(quantize_row(WeightFormat::F16, &[1.0; 4], &mut [0; 6])),
        (8, 6)
    );
    assert_eq!(
        length_mismatch(dequantize_row(WeightFormat::F32, &[0; 12], &mut [0.0; 4])),
        (16, 12)
    );

    let m = QuantMatrix::new(WeightFormat::Q8_0, &[0; 68], 2, 32).unwrap();
    assert_eq!(
        length_mismatch(m.dequantize_row(1, &mut [0.0; 31])),
        (32, 31)
    );
    let (_, message) = invalid_argument(m.dequantize_row(2, &mut [0.0; 32]));
    assert_eq!(message, "row 2 is out of range for a matrix of 2 rows");

    // Sizes that overflow usize are errors, not panics.
    let (_, message) = invalid_argument(WeightFormat::F32.row_bytes(usize::MAX));
    assert!(message.contains("overflows"), "{message}");
    let (_, message) = invalid_argument(QuantMatrix::new(WeightFormat::Q8_0, &[], usize::MAX, 32));
    assert!(message.contains("overflows"), "{message}");
}

/// Zero rows or zero columns make an empty matrix: no bytes, no values, and (for zero columns)
/// rows that are empty slices.
#[test]
fn empty_matrices_are_allowed() {
    for format in WeightFormat::ALL {
        let cols = format.block_elements();
        assert!(quantize(format, &[], 0, cols).unwrap().is_empty());
        assert!(quantize(format, &[], 5, 0).unwrap().is_empty());
        assert!(dequantize(format, &[], 0, cols).unwrap().is_empty());
        let m = QuantMatrix::new(format, &[], 3, 0).unwrap();
        assert_eq!(m.row(2), Some(&[][..]));
        assert_eq!(m.row(3), None);
        assert!(m.dequantize().is_empty());
    }
}

#[test]
fn non_finite_values_are_errors_in_quantized_formats() {
    let mut values = weights(6, 2, 256);
    values[256 + 5] = f32::NAN;
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4K] {
        let (op, message) = invalid_argument(quantize(format, &values, 2, 256));
        assert_eq!(op, "quant::quantize");
        assert_eq!(
            message,
            format!("{format} cannot encode the non-finite value NaN at column 5 of row 1")
        );
    }
    values[256 + 5] = f32::NEG_INFINITY;
    let mut out = [0u8; 34];
    let (op, message) = invalid_argument(quantize_row(
        WeightFormat::Q8_0,
        &values[256..288],
        &mut out,
    ));
    assert_eq!(op, "quant::quantize_row");
    assert_eq!(
        message,
        "Q8_0 cannot encode the non-finite value -inf at column 5"
    );
    // Plain float formats store them.
    let back = round_trip(WeightFormat::Bf16, &values, 2, 256);
    assert_eq!(back[256 + 5], f32::NEG_INFINITY);
}

#[test]
fn scales_beyond_f16_are_errors() {
    // Q8_0: d = 1e7 / 127 > 65504; Q4_0: d = 6e5 / 8 > 65504; Q4_K: dmin = 5e6 / 63 > 65504.
    for (format, value) in [
        (WeightFormat::Q8_0, 1e7f32),
        (WeightFormat::Q4_0, 6e5),
        (WeightFormat::Q4K, -5e6),
    ] {
        let mut values = [0.5f32; 512];
        values[300] = value;
        let (_, message) = invalid_argument(quantize(format, &values, 2, 256));
        let block = 44 / format.block_elements();
        let prefix = format!("{format} block {block} of row 1 needs a scale of ");
        assert!(message.starts_with(&prefix), "{message}");
        assert!(
            message.ends_with("beyond the largest f16 (65504)"),
            "{message}"
        );
        // A tenth of it fits.
        values[300] = value / 10.0;
        assert!(quantize(format, &values, 2, 256).is_ok(), "{format}");
    }
}

#[test]
fn matrix_view_gives_rows_and_values() {
    let (rows, cols) = (3, 512);
    let values = weights(8, rows, cols);
    for format in WeightFormat::ALL {
        let bytes = quantize(format, &values, rows, cols).unwrap();
        let m = QuantMatrix::from_ggml_type(format.ggml_type(), &bytes, rows, cols).unwrap();
        assert_eq!((m.format(), m.rows(), m.cols()), (format, rows, cols));
        assert_eq!(m.row_bytes(), format.row_bytes(cols).unwrap());
        assert_eq!(m.bytes().len(), bytes.len());
        assert_eq!(m, QuantMatrix::new(format, &bytes, rows, cols).unwrap());
        let all = m.dequantize();
        assert_eq!(all, dequantize(format, &bytes, rows, cols).unwrap());
        for r in 0..rows {
            let row = m.row(r).unwrap();
            assert_eq!(row, &bytes[r * m.row_bytes()..(r + 1) * m.row_bytes()]);
            // Row by row, quantizing and dequantizing agree with the whole-matrix forms.
            let mut encoded = vec![0u8; m.row_bytes()];
            quantize_row(format, &values[r * cols..(r + 1) * cols], &mut encoded).unwrap();
            assert_eq!(encoded, row, "{format} row {r}");
            let mut out = vec![f32::NAN; cols];
            m.dequantize_row(r, &mut out).unwrap();
            assert_eq!(out, all[r * cols..(r + 1) * cols], "{format} row {r}");
            dequantize_row(format, row, &mut out).unwrap();
            assert_eq!(out, all[r * cols..(r + 1) * cols], "{format} row {r}");
        }
        assert_eq!(m.row(rows), None);
    }
}

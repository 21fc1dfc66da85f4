//! Weight formats of GGUF / ggml on the host: their block layouts, quantization from f32 and
//! dequantization back to f32, byte-compatible with ggml.
//!
//! A weight matrix is `rows` rows of `cols` elements, row-major (in a GGUF tensor `ne[0]` is
//! `cols` and `ne[1]` is `rows`). Each row is stored on its own as `cols / block_elements`
//! blocks, so a row takes [`WeightFormat::row_bytes`] bytes and the rows follow each other with
//! no padding. Every multi-byte field is little-endian.
//!
//! | format | elements / block | bytes / block | ggml id | element `i` of a block |
//! | --- | --- | --- | --- | --- |
//! | [`F32`](WeightFormat::F32) | 1 | 4 | 0 | an IEEE binary32 number |
//! | [`F16`](WeightFormat::F16) | 1 | 2 | 1 | an IEEE binary16 number |
//! | [`Bf16`](WeightFormat::Bf16) | 1 | 2 | 30 | a bfloat16 number |
//! | [`Q8_0`](WeightFormat::Q8_0) | 32 | 34 | 8 | `qs[i] * d` ([`Q8_0Block`]) |
//! | [`Q4_0`](WeightFormat::Q4_0) | 32 | 18 | 2 | `(q[i] - 8) * d` ([`Q4_0Block`]) |
//! | [`Q4K`](WeightFormat::Q4K) | 256 | 144 | 12 | `d*sc[s]*q[i] - dmin*m[s]` ([`Q4KBlock`]) |
//!
//! [`quantize`] and [`dequantize`] convert whole matrices, [`quantize_row`] and
//! [`dequantize_row`] single rows, and [`QuantMatrix`] is a checked, borrowed view of the bytes
//! of a matrix (a GGUF tensor's data, say).
//!
//! ```
//! use pagesift_gpu::quant::{dequantize, quantize, WeightFormat};
//! # fn main() -> pagesift_gpu::Result<()> {
//! let values: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 8.0).collect();
//! let bytes = quantize(WeightFormat::Q8_0, &values, 2, 32)?;
//! assert_eq!(bytes.len(), 2 * 34);
//! let back = dequantize(WeightFormat::Q8_0, &bytes, 2, 32)?;
//! assert!(values.iter().zip(&back).all(|(x, y)| (x - y).abs() < 0.02));
//! # Ok(())
//! # }
//! ```

mod matrix;
mod q4_0;
mod q4_k;
mod q8_0;
#[cfg(test)]
mod tests;

pub use matrix::QuantMatrix;
pub use q4_0::Q4_0Block;
pub use q4_k::Q4KBlock;
pub use q8_0::Q8_0Block;

use std::fmt;

use half::{bf16, f16};

use crate::error::{InvalidArgument, LengthMismatch};
use crate::{Error, Result};

/// The largest finite f16, the bound on every block scale of the quantized formats.
const F16_MAX: f32 = 65504.0;

/// A storage format of weights: a plain float type or one of ggml's block quantizations.
///
/// The discriminants are not ggml's type ids; [`WeightFormat::ggml_type`] and
/// [`WeightFormat::from_ggml_type`] convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// IEEE binary32, 4 bytes per element (`GGML_TYPE_F32`).
    F32,
    /// IEEE binary16, 2 bytes per element (`GGML_TYPE_F16`).
    F16,
    /// bfloat16 (the upper half of a binary32), 2 bytes per element (`GGML_TYPE_BF16`).
    Bf16,
    /// Blocks of 32 elements: one f16 scale and 32 signed 8-bit codes (`GGML_TYPE_Q8_0`, see
    /// [`Q8_0Block`]).
    Q8_0,
    /// Blocks of 32 elements: one f16 scale and 32 unsigned 4-bit codes offset by 8
    /// (`GGML_TYPE_Q4_0`, see [`Q4_0Block`]).
    Q4_0,
    /// Super-blocks of 256 elements in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit
    /// min relative to the f16 `d` and `dmin` of the super-block, and 4-bit codes
    /// (`GGML_TYPE_Q4_K`, see [`Q4KBlock`]).
    Q4K,
}

impl WeightFormat {
    /// Every format, in declaration order.
    pub const ALL: [WeightFormat; 6] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::Bf16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4K,
    ];

    /// The elements one block holds: 1 for the float formats, 32 for Q8_0 and Q4_0, 256 for
    /// Q4_K. A row's length must be a multiple of it.
    pub const fn block_elements(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => 1,
            WeightFormat::Q8_0 => Q8_0Block::ELEMENTS,
            WeightFormat::Q4_0 => Q4_0Block::ELEMENTS,
            WeightFormat::Q4K => Q4KBlock::ELEMENTS,
        }
    }

    /// The bytes one block takes: 4 (F32), 2 (F16, BF16), 34 (Q8_0), 18 (Q4_0), 144 (Q4_K).
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::F16 | WeightFormat::Bf16 => 2,
            WeightFormat::Q8_0 => Q8_0Block::BYTES,
            WeightFormat::Q4_0 => Q4_0Block::BYTES,
            WeightFormat::Q4K => Q4KBlock::BYTES,
        }
    }

    /// ggml's `enum ggml_type` value of the format, as a GGUF tensor header stores it: F32 0,
    /// F16 1, Q4_0 2, Q8_0 8, Q4_K 12, BF16 30.
    pub const fn ggml_type(self) -> u32 {
        match self {
            WeightFormat::F32 => 0,
            WeightFormat::F16 => 1,
            WeightFormat::Q4_0 => 2,
            WeightFormat::Q8_0 => 8,
            WeightFormat::Q4K => 12,
            WeightFormat::Bf16 => 30,
        }
    }

    /// The format with ggml type id `id` (see [`WeightFormat::ggml_type`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the id when it is not one of this module's formats
    /// (ggml's other types, Q4_1 or Q6_K say, are not supported).
    pub fn from_ggml_type(id: u32) -> Result<Self> {
        WeightFormat::ALL
            .into_iter()
            .find(|f| f.ggml_type() == id)
            .ok_or_else(|| {
                invalid(
                    "quant::WeightFormat::from_ggml_type",
                    matrix::unknown_type_message(id),
                )
            })
    }

    /// ggml's name of the format: `F32`, `F16`, `BF16`, `Q8_0`, `Q4_0` or `Q4_K`.
    pub const fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "F32",
            WeightFormat::F16 => "F16",
            WeightFormat::Bf16 => "BF16",
            WeightFormat::Q8_0 => "Q8_0",
            WeightFormat::Q4_0 => "Q4_0",
            WeightFormat::Q4K => "Q4_K",
        }
    }

    /// Whether the format stores blocks of codes with scales (Q8_0, Q4_0, Q4_K) rather than
    /// plain floats.
    pub const fn is_quantized(self) -> bool {
        self.block_elements() > 1
    }

    /// The bytes of one row of `cols` elements.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `cols` is not a multiple of
    /// [`WeightFormat::block_elements`] (e.g. "Q4_0 rows need a multiple of 32 columns, got
    /// 100"), or the size overflows `usize`.
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        self.row_bytes_for("quant::WeightFormat::row_bytes", cols)
    }

    /// The bytes of a `rows` x `cols` matrix: `rows * row_bytes(cols)`.
    ///
    /// # Errors
    /// Those of [`WeightFormat::row_bytes`], and [`Error::InvalidArgument`] when the size
    /// overflows `usize`.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Result<usize> {
        self.matrix_bytes_for("quant::WeightFormat::matrix_bytes", rows, cols)
    }

    /// [`WeightFormat::row_bytes`], with errors naming the operation `op`.
    fn row_bytes_for(self, op: &'static str, cols: usize) -> Result<usize> {
        let per_block = self.block_elements();
        if cols % per_block != 0 {
            return Err(invalid(
                op,
                format!(
                    "{} rows need a multiple of {per_block} columns, got {cols}",
                    self.name()
                ),
            ));
        }
        (cols / per_block)
            .checked_mul(self.block_bytes())
            .ok_or_else(|| {
                invalid(
                    op,
                    format!(
                        "a {} row of {cols} columns overflows usize bytes",
                        self.name()
                    ),
                )
            })
    }

    /// [`WeightFormat::matrix_bytes`], with errors naming the operation `op`. Also checks that
    /// `rows * cols` (the f32 elements) fits in `usize`.
    fn matrix_bytes_for(self, op: &'static str, rows: usize, cols: usize) -> Result<usize> {
        let row = self.row_bytes_for(op, cols)?;
        let overflow = || {
            invalid(
                op,
                format!("a {rows} x {cols} {} matrix overflows usize", self.name()),
            )
        };
        rows.checked_mul(cols).ok_or_else(overflow)?;
        rows.checked_mul(row).ok_or_else(overflow)
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Quantizes the `rows` x `cols` row-major matrix `values` into `format`, row after row.
///
/// Q8_0 and Q4_0 blocks are bit-identical to those of ggml's reference quantizers
/// (`quantize_row_q8_0_ref`, `quantize_row_q4_0_ref`); Q4_K blocks come from the search of
/// [`Q4KBlock::quantize`]. F16 and BF16 round each value to nearest, ties to even (values
/// beyond the f16 range become infinite; NaN stays NaN); F32 copies the bits.
///
/// # Errors
/// - [`Error::LengthMismatch`] when `values.len() != rows * cols`;
/// - [`Error::InvalidArgument`] when `cols` is not a multiple of the format's block, the sizes
///   overflow `usize`, a value is NaN or infinite (quantized formats only), or a block's
///   values are so large that its f16 scale would be infinite (magnitudes beyond about
///   `8.3e6` for Q8_0, `5.2e5` for Q4_0, `4.1e6` for negative Q4_K values). The message names
///   the row and column, or the row and block.
pub fn quantize(format: WeightFormat, values: &[f32], rows: usize, cols: usize) -> Result<Vec<u8>> {
    const OP: &str = "quant::quantize";
    let total = format.matrix_bytes_for(OP, rows, cols)?;
    check_len(OP, "values", rows * cols, values.len(), rows, cols)?;
    let mut out = vec![0u8; total];
    if cols > 0 {
        let row_bytes = format.row_bytes_for(OP, cols)?;
        let rows_in = values.chunks_exact(cols);
        let rows_out = out.chunks_exact_mut(row_bytes);
        for (r, (src, dst)) in rows_in.zip(rows_out).enumerate() {
            encode_row(format, src, dst).map_err(|e| e.into_error(OP, format, Some(r)))?;
        }
    }
    Ok(out)
}

/// Quantizes one row, `values.len()` elements, into `out` (exactly
/// `format.row_bytes(values.len())` bytes), as [`quantize`] does.
///
/// # Errors
/// As [`quantize`]: [`Error::LengthMismatch`] for `out` of the wrong length,
/// [`Error::InvalidArgument`] for a length that is not a multiple of the block, a non-finite
/// value, or a block scale beyond the f16 range.
pub fn quantize_row(format: WeightFormat, values: &[f32], out: &mut [u8]) -> Result<()> {
    const OP: &str = "quant::quantize_row";
    let cols = values.len();
    let expected = format.row_bytes_for(OP, cols)?;
    if out.len() != expected {
        return Err(LengthMismatch {
            what: format!("{OP}: out, the bytes of a {format} row of {cols} columns"),
            expected,
            actual: out.len(),
        }
        .into());
    }
    encode_row(format, values, out).map_err(|e| e.into_error(OP, format, None))
}

/// Dequantizes the bytes of a `rows` x `cols` matrix in `format` to row-major f32.
///
/// Every value is computed as ggml's `dequantize_row_*` computes it, so the results are equal
/// bit for bit.
///
/// # Errors
/// Those of [`QuantMatrix::new`]: [`Error::InvalidArgument`] when `cols` is not a multiple of
/// the block or the sizes overflow, [`Error::LengthMismatch`] when `bytes.len()` is not
/// `rows * format.row_bytes(cols)`.
pub fn dequantize(
    format: WeightFormat,
    bytes: &[u8],
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>> {
    QuantMatrix::checked("quant::dequantize", format, bytes, rows, cols).map(|m| m.dequantize())
}

/// Dequantizes one row: `bytes` (exactly `format.row_bytes(out.len())` of them) into `out`,
/// whose length is the row's number of columns.
///
/// # Errors
/// [`Error::InvalidArgument`] when `out.len()` is not a multiple of the format's block,
/// [`Error::LengthMismatch`] when `bytes` has the wrong length.
pub fn dequantize_row(format: WeightFormat, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    const OP: &str = "quant::dequantize_row";
    let cols = out.len();
    let expected = format.row_bytes_for(OP, cols)?;
    if bytes.len() != expected {
        return Err(LengthMismatch {
            what: format!("{OP}: bytes of a {format} row of {cols} columns"),
            expected,
            actual: bytes.len(),
        }
        .into());
    }
    decode_row(format, bytes, out);
    Ok(())
}

/// The activations that the int8 path of [`crate::ops::quant::qgemm_int8`] multiplies, for
/// `x` of rows of `cols` elements: each block of 32 elements of a row (the last one shorter
/// where `cols` is not a multiple) gets the scale `d = max |x| / 127` (f32) and the codes `q
/// = round_ties_even(x / d)` (0 in a block of zeros), and becomes `d · q`, computed as the
/// kernel computes it.
///
/// # Errors
/// [`Error::InvalidArgument`] when `cols` is 0 or does not divide `x.len()`.
pub fn int8_activations(x: &[f32], cols: usize) -> Result<Vec<f32>> {
    if cols == 0 || x.len() % cols != 0 {
        return Err(crate::error::InvalidArgument {
            op: "quant::int8_activations",
            message: format!("{} values are not rows of {cols} columns", x.len()),
        }
        .into());
    }
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        for block in row.chunks(32) {
            let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / crate::kernels::quant::QTC_X8_MAX;
            out.extend(block.iter().map(|&v| {
                if amax > 0.0 {
                    d * (v / d).round_ties_even()
                } else {
                    0.0
                }
            }));
        }
    }
    Ok(out)
}

/// Why a row could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum EncodeError {
    /// A NaN or infinite value, at this column of the row.
    NonFinite { col: usize, value: f32 },
    /// The scale a block needs, which f16 cannot hold.
    ScaleOverflow { block: usize, scale: f32 },
}

impl EncodeError {
    fn into_error(self, op: &'static str, format: WeightFormat, row: Option<usize>) -> Error {
        let row = row.map(|r| format!(" of row {r}")).unwrap_or_default();
        let message = match self {
            EncodeError::NonFinite { col, value } => {
                format!("{format} cannot encode the non-finite value {value} at column {col}{row}")
            }
            EncodeError::ScaleOverflow { block, scale } => format!(
                "{format} block {block}{row} needs a scale of {scale:e}, beyond the largest \
                 f16 ({F16_MAX})"
            ),
        };
        invalid(op, message)
    }
}

/// Encodes one row; `out` has exactly the row's bytes and `values.len()` is a multiple of the
/// block (the callers check both).
fn encode_row(format: WeightFormat, values: &[f32], out: &mut [u8]) -> Result<(), EncodeError> {
    if format.is_quantized() {
        if let Some((col, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(EncodeError::NonFinite { col, value });
        }
    }
    match format {
        WeightFormat::F32 => {
            for (v, dst) in values.iter().zip(arrays_mut::<u8, 4>(out)) {
                *dst = v.to_le_bytes();
            }
        }
        WeightFormat::F16 => {
            for (v, dst) in values.iter().zip(arrays_mut::<u8, 2>(out)) {
                *dst = f16::from_f32(*v).to_le_bytes();
            }
        }
        WeightFormat::Bf16 => {
            for (v, dst) in values.iter().zip(arrays_mut::<u8, 2>(out)) {
                *dst = bf16::from_f32(*v).to_le_bytes();
            }
        }
        WeightFormat::Q8_0 => encode_blocks(values, out, q8_0::encode)?,
        WeightFormat::Q4_0 => encode_blocks(values, out, q4_0::encode)?,
        WeightFormat::Q4K => encode_blocks(values, out, q4_k::encode)?,
    }
    Ok(())
}

/// Encodes each block of `N` values of `values` into its `B` bytes in `out` with `encode`,
/// which returns the block's bytes or the scale it needs when f16 cannot hold that scale.
fn encode_blocks<const N: usize, const B: usize>(
    values: &[f32],
    out: &mut [u8],
    encode: fn(&[f32; N]) -> Result<[u8; B], f32>,
) -> Result<(), EncodeError> {
    for (block, (src, dst)) in arrays(values).zip(arrays_mut(out)).enumerate() {
        *dst = encode(src).map_err(|scale| EncodeError::ScaleOverflow { block, scale })?;
    }
    Ok(())
}

/// Decodes one row; `out` has exactly the row's elements and `bytes` the row's bytes (the
/// callers check both).
fn decode_row(format: WeightFormat, bytes: &[u8], out: &mut [f32]) {
    match format {
        WeightFormat::F32 => {
            for (src, v) in arrays(bytes).zip(out) {
                *v = f32::from_le_bytes(*src);
            }
        }
        WeightFormat::F16 => {
            for (src, v) in arrays(bytes).zip(out) {
                *v = f16::from_le_bytes(*src).to_f32();
            }
        }
        WeightFormat::Bf16 => {
            for (src, v) in arrays(bytes).zip(out) {
                *v = bf16::from_le_bytes(*src).to_f32();
            }
        }
        WeightFormat::Q8_0 => {
            for (src, dst) in arrays(bytes).zip(arrays_mut(out)) {
                *dst = Q8_0Block::from_bytes(src).dequantize();
            }
        }
        WeightFormat::Q4_0 => {
            for (src, dst) in arrays(bytes).zip(arrays_mut(out)) {
                *dst = Q4_0Block::from_bytes(src).dequantize();
            }
        }
        WeightFormat::Q4K => {
            for (src, dst) in arrays(bytes).zip(arrays_mut(out)) {
                *dst = Q4KBlock::from_bytes(src).dequantize();
            }
        }
    }
}

/// `items` as consecutive arrays of `N`; a remainder shorter than `N` is left out.
fn arrays<T, const N: usize>(items: &[T]) -> impl Iterator<Item = &[T; N]> {
    items.chunks_exact(N).filter_map(|c| c.try_into().ok())
}

/// `items` as consecutive mutable arrays of `N`; a remainder shorter than `N` is left out.
fn arrays_mut<T, const N: usize>(items: &mut [T]) -> impl Iterator<Item = &mut [T; N]> {
    items.chunks_exact_mut(N).filter_map(|c| c.try_into().ok())
}

/// An [`Error::InvalidArgument`] of operation `op`.
fn invalid(op: &'static str, message: String) -> Error {
    InvalidArgument { op, message }.into()
}

/// [`Error::LengthMismatch`] unless `actual == expected`, the length of `what` for a `rows` x
/// `cols` matrix.
fn check_len(
    op: &'static str,
    what: &str,
    expected: usize,
    actual: usize,
    rows: usize,
    cols: usize,
) -> Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(LengthMismatch {
        what: format!("{op}: {what} of a {rows} x {cols} matrix"),
        expected,
        actual,
    }
    .into())
}

//! [`QuantMatrix`], a checked view of the bytes of a weight matrix.

use super::{decode_row, invalid, WeightFormat};
use crate::error::LengthMismatch;
use crate::Result;

/// The bytes of a `rows` x `cols` weight matrix in a [`WeightFormat`], borrowed and checked:
/// `cols` is a multiple of the format's block and the bytes are exactly
/// `rows * format.row_bytes(cols)`, row after row.
///
/// A matrix with zero rows or zero columns is allowed; it has no bytes (its rows, if any, are
/// empty slices) and dequantizes to no values.
///
/// ```
/// use pagesift_gpu::quant::{QuantMatrix, WeightFormat};
/// # fn main() -> pagesift_gpu::Result<()> {
/// // Two Q8_0 rows of 32 columns: scale 0.5 (f16 0x3800), codes 0, 1, 2, ...
/// let mut bytes = Vec::new();
/// for _ in 0..2 {
///     bytes.extend_from_slice(&[0x00, 0x38]);
///     bytes.extend(0..32u8);
/// }
/// let m = QuantMatrix::from_ggml_type(8, &bytes, 2, 32)?;
/// assert_eq!(m.format(), WeightFormat::Q8_0);
/// assert_eq!(m.row(1).map(<[u8]>::len), Some(34));
/// assert_eq!(m.dequantize()[33], 0.5);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantMatrix<'a> {
    format: WeightFormat,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    bytes: &'a [u8],
}

impl<'a> QuantMatrix<'a> {
    /// The view of `bytes` as a `rows` x `cols` matrix in `format`.
    ///
    /// # Errors
    /// - [`crate::Error::InvalidArgument`] when `cols` is not a multiple of the format's block
    ///   (e.g. "Q4_0 rows need a multiple of 32 columns, got 100") or the sizes overflow
    ///   `usize`;
    /// - [`crate::Error::LengthMismatch`] when `bytes.len()` is not
    ///   `rows * format.row_bytes(cols)`.
    pub fn new(format: WeightFormat, bytes: &'a [u8], rows: usize, cols: usize) -> Result<Self> {
        Self::checked("quant::QuantMatrix::new", format, bytes, rows, cols)
    }

    /// The view of `bytes` as a `rows` x `cols` matrix in the format of ggml type id `ggml_type`,
    /// as a GGUF tensor header gives them (`cols` is the header's `ne[0]`, `rows` the product
    /// of the other dimensions).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming the id when it is not a supported format (see
    /// [`WeightFormat::from_ggml_type`]), and those of [`QuantMatrix::new`].
    pub fn from_ggml_type(
        ggml_type: u32,
        bytes: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        const OP: &str = "quant::QuantMatrix::from_ggml_type";
        let format = WeightFormat::from_ggml_type(ggml_type)
            .map_err(|_| invalid(OP, unknown_type_message(ggml_type)))?;
        Self::checked(OP, format, bytes, rows, cols)
    }

    /// [`QuantMatrix::new`], with errors naming the operation `op`.
    pub(super) fn checked(
        op: &'static str,
        format: WeightFormat,
        bytes: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let expected = format.matrix_bytes_for(op, rows, cols)?;
        let row_bytes = format.row_bytes_for(op, cols)?;
        if bytes.len() != expected {
            return Err(LengthMismatch {
                what: format!(
                    "{op}: bytes of a {rows} x {cols} {format} matrix ({row_bytes} per row)"
                ),
                expected,
                actual: bytes.len(),
            }
            .into());
        }
        Ok(QuantMatrix {
            format,
            rows,
            cols,
            row_bytes,
            bytes,
        })
    }

    /// The storage format.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of columns (elements per row).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// All the bytes, row after row.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes of row `i`, or `None` when `i >= rows`.
    pub fn row(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.rows {
            return None;
        }
        let start = i * self.row_bytes;
        self.bytes.get(start..start + self.row_bytes)
    }

    /// The matrix in f32, row-major (`rows * cols` values), equal bit for bit to ggml's
    /// dequantization.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        if self.cols > 0 {
            let rows = self.bytes.chunks_exact(self.row_bytes);
            for (src, dst) in rows.zip(out.chunks_exact_mut(self.cols)) {
                decode_row(self.format, src, dst);
            }
        }
        out
    }

    /// Dequantizes row `i` into `out`, which holds `cols` values.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `i >= rows`, [`crate::Error::LengthMismatch`]
    /// when `out.len() != cols`.
    pub fn dequantize_row(&self, i: usize, out: &mut [f32]) -> Result<()> {
        const OP: &str = "quant::QuantMatrix::dequantize_row";
        let row = self.row(i).ok_or_else(|| {
            invalid(
                OP,
                format!("row {i} is out of range for a matrix of {} rows", self.rows),
            )
        })?;
        if out.len() != self.cols {
            return Err(LengthMismatch {
                what: format!("{OP}: out, one row of {} columns", self.cols),
                expected: self.cols,
                actual: out.len(),
            }
            .into());
        }
        decode_row(self.format, row, out);
        Ok(())
    }
}

/// The message for an unsupported ggml type id.
pub(super) fn unknown_type_message(id: u32) -> String {
    let supported: Vec<String> = WeightFormat::ALL
        .iter()
        .map(|f| format!("{} ({})", f.name(), f.ggml_type()))
        .collect();
    format!(
        "unsupported ggml type id {id}; supported: {}",
        supported.join(", ")
    )
}

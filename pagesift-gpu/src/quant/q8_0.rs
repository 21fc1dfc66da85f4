//! The Q8_0 block: 32 elements sharing one f16 scale, each an 8-bit signed code.

use half::f16;

/// One Q8_0 block of 32 elements (ggml's `block_q8_0`); element `i` is `qs[i] * d`.
///
/// Its 34 bytes: `d` as a little-endian f16 in bytes `0..2`, then `qs[0..32]` as
/// two's-complement bytes in bytes `2..34`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q8_0Block {
    /// The scale of the block.
    pub d: f16,
    /// The codes, one per element, in element order.
    pub qs: [i8; 32],
}

impl Q8_0Block {
    /// The elements of a block.
    pub const ELEMENTS: usize = 32;
    /// The bytes of a block.
    pub const BYTES: usize = 34;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; 34]) -> Self {
        let [d0, d1, qs @ ..] = *bytes;
        Q8_0Block {
            d: f16::from_le_bytes([d0, d1]),
            qs: qs.map(|q| q as i8),
        }
    }

    /// The 34 bytes of the block.
    pub fn to_bytes(&self) -> [u8; 34] {
        let mut bytes = [0u8; 34];
        let (d, qs) = bytes.split_at_mut(2);
        d.copy_from_slice(&self.d.to_le_bytes());
        for (b, q) in qs.iter_mut().zip(self.qs) {
            *b = q as u8;
        }
        bytes
    }

    /// The 32 values of the block, `qs[i] * d` in f32.
    pub fn dequantize(&self) -> [f32; 32] {
        let d = self.d.to_f32();
        self.qs.map(|q| f32::from(q) * d)
    }

    /// Quantizes 32 values with ggml's reference rule, bit for bit: `d = amax / 127` for the
    /// largest magnitude `amax`, and `qs[i] = round(values[i] * (1 / d))` (ties away from
    /// zero), with `d` in f32 until it is stored as f16.
    ///
    /// The values should be finite and `amax` at most about `8.3e6`; beyond that `d` is
    /// infinite. [`super::quantize`] checks both.
    pub fn quantize(values: &[f32; 32]) -> Self {
        Self::quantize_with_scale(values).0
    }

    /// [`Q8_0Block::quantize`], and the scale before its rounding to f16.
    fn quantize_with_scale(values: &[f32; 32]) -> (Self, f32) {
        let amax = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inverse = if d != 0.0 { 1.0 / d } else { 0.0 };
        let qs = values.map(|v| (v * inverse).round() as i8);
        let block = Q8_0Block {
            d: f16::from_f32(d),
            qs,
        };
        (block, d)
    }
}

/// The bytes of the block of `values`, or its scale when f16 cannot hold it.
pub(super) fn encode(values: &[f32; 32]) -> Result<[u8; 34], f32> {
    let (block, d) = Q8_0Block::quantize_with_scale(values);
    if block.d.is_finite() {
        Ok(block.to_bytes())
    } else {
        Err(d)
    }
}

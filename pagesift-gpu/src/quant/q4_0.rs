//! The Q4_0 block: 32 elements sharing one f16 scale, each a 4-bit code offset by 8.

use half::f16;

/// One Q4_0 block of 32 elements (ggml's `block_q4_0`); element `i` is `(q[i] - 8) * d` for
/// its 4-bit code `q[i]`.
///
/// Its 18 bytes: `d` as a little-endian f16 in bytes `0..2`, then the 16 bytes of `qs`. Byte
/// `qs[j]` holds two codes: element `j` in its low nibble and element `j + 16` in its high
/// nibble (the first half of the block in the low nibbles, the second half in the high ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q4_0Block {
    /// The scale of the block.
    pub d: f16,
    /// The packed codes: `qs[j]` is `q[j] | q[j + 16] << 4`.
    pub qs: [u8; 16],
}

impl Q4_0Block {
    /// The elements of a block.
    pub const ELEMENTS: usize = 32;
    /// The bytes of a block.
    pub const BYTES: usize = 18;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; 18]) -> Self {
        let [d0, d1, qs @ ..] = *bytes;
        Q4_0Block {
            d: f16::from_le_bytes([d0, d1]),
            qs,
        }
    }

    /// The 18 bytes of the block.
    pub fn to_bytes(&self) -> [u8; 18] {
        let mut bytes = [0u8; 18];
        let (d, qs) = bytes.split_at_mut(2);
        d.copy_from_slice(&self.d.to_le_bytes());
        qs.copy_from_slice(&self.qs);
        bytes
    }

    /// The block of scale `d` and 4-bit codes `codes` in element order (only the low 4 bits of
    /// each code are kept).
    pub fn from_codes(d: f16, codes: &[u8; 32]) -> Self {
        let (low, high) = codes.split_at(16);
        let mut qs = [0u8; 16];
        for ((b, lo), hi) in qs.iter_mut().zip(low).zip(high) {
            *b = (lo & 0xF) | (hi & 0xF) << 4;
        }
        Q4_0Block { d, qs }
    }

    /// The 4-bit codes of the 32 elements, in element order.
    pub fn codes(&self) -> [u8; 32] {
        let mut codes = [0u8; 32];
        let (low, high) = codes.split_at_mut(16);
        for ((b, lo), hi) in self.qs.iter().zip(low).zip(high) {
            *lo = b & 0xF;
            *hi = b >> 4;
        }
        codes
    }

    /// The 32 values of the block, `(q[i] - 8) * d` in f32.
    pub fn dequantize(&self) -> [f32; 32] {
        let d = self.d.to_f32();
        self.codes().map(|q| (i32::from(q) - 8) as f32 * d)
    }

    /// Quantizes 32 values with ggml's reference rule, bit for bit: `max` is the value of
    /// largest magnitude (the first one on a tie), `d = max / -8`, and
    /// `q[i] = min(15, trunc(values[i] * (1 / d) + 8.5))`, with `d` in f32 until it is stored as
    /// f16. So `max` itself gets code 0 (exactly `-8 * d`), and the other end of the range
    /// reaches only `+7 * d`.
    ///
    /// The values should be finite and their largest magnitude at most about `5.2e5`; beyond
    /// that `d` is infinite. [`super::quantize`] checks both.
    pub fn quantize(values: &[f32; 32]) -> Self {
        Self::quantize_with_scale(values).0
    }

    /// [`Q4_0Block::quantize`], and the scale before its rounding to f16.
    fn quantize_with_scale(values: &[f32; 32]) -> (Self, f32) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in values {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let inverse = if d != 0.0 { 1.0 / d } else { 0.0 };
        // `as i8` truncates toward zero as ggml's `(int8_t)` cast does; the sum is >= 0.5 up to
        // rounding, and the clamp keeps a stray negative from wrapping.
        let codes = values.map(|v| ((v * inverse + 8.5) as i8).clamp(0, 15) as u8);
        (Q4_0Block::from_codes(f16::from_f32(d), &codes), d)
    }
}

/// The bytes of the block of `values`, or its scale when f16 cannot hold it.
pub(super) fn encode(values: &[f32; 32]) -> Result<[u8; 18], f32> {
    let (block, d) = Q4_0Block::quantize_with_scale(values);
    if block.d.is_finite() {
        Ok(block.to_bytes())
    } else {
        Err(d)
    }
}

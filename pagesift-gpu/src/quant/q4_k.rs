//! The Q4_K super-block: 256 elements in 8 sub-blocks of 32, each sub-block with a 6-bit scale
//! and a 6-bit min, each element a 4-bit code.

use half::f16;

use super::{arrays, arrays_mut};

/// Sub-blocks per super-block.
const SUB_BLOCKS: usize = 8;
/// Elements per sub-block.
const SUB: usize = 32;
/// The largest 4-bit code.
const Q_MAX: u8 = 15;
/// The largest 6-bit sub-block scale or min.
const SCALE_MAX: u8 = 63;

/// One Q4_K super-block of 256 elements (ggml's `block_q4_K`).
///
/// Element `i` belongs to sub-block `s = i / 32` and is
/// `d * scale[s] * q[i] - dmin * min[s]`, computed in f32 as `(d * scale[s]) * q[i] -
/// (dmin * min[s])`, with `scale[s]` and `min[s]` 6-bit integers and `q[i]` a 4-bit code.
///
/// Its 144 bytes:
/// - bytes `0..2`: `d`, little-endian f16, the unit of the sub-block scales;
/// - bytes `2..4`: `dmin`, little-endian f16, the unit of the sub-block mins;
/// - bytes `4..16`: `scales`, the 8 scales and 8 mins packed in 12 bytes. For `s < 4`,
///   `scale[s] = scales[s] & 63` and `min[s] = scales[s + 4] & 63`; for `s >= 4`, the low 4
///   bits come from `scales[s + 4]` (scale in its low nibble, min in its high nibble) and the
///   high 2 bits from the top 2 bits of `scales[s - 4]` (scale) and `scales[s]` (min);
/// - bytes `16..144`: `qs`, the codes. The elements form 4 groups of 64; group `g` uses
///   `qs[32g..32g + 32]`, its first 32 elements (sub-block `2g`) in the low nibbles and its
///   last 32 (sub-block `2g + 1`) in the high nibbles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q4KBlock {
    /// The unit of the sub-block scales.
    pub d: f16,
    /// The unit of the sub-block mins.
    pub dmin: f16,
    /// The packed 6-bit scales and mins (see [`Q4KBlock::pack_scales_mins`]).
    pub scales: [u8; 12],
    /// The packed 4-bit codes.
    pub qs: [u8; 128],
}

impl Q4KBlock {
    /// The elements of a super-block.
    pub const ELEMENTS: usize = 256;
    /// The bytes of a super-block.
    pub const BYTES: usize = 144;

    /// The super-block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; 144]) -> Self {
        let [d0, d1, m0, m1, rest @ ..] = *bytes;
        let (scales, qs) = rest.split_at(12);
        let mut block = Q4KBlock {
            d: f16::from_le_bytes([d0, d1]),
            dmin: f16::from_le_bytes([m0, m1]),
            scales: [0; 12],
            qs: [0; 128],
        };
        block.scales.copy_from_slice(scales);
        block.qs.copy_from_slice(qs);
        block
    }

    /// The 144 bytes of the super-block.
    pub fn to_bytes(&self) -> [u8; 144] {
        let mut bytes = [0u8; 144];
        let (d, rest) = bytes.split_at_mut(2);
        let (dmin, rest) = rest.split_at_mut(2);
        let (scales, qs) = rest.split_at_mut(12);
        d.copy_from_slice(&self.d.to_le_bytes());
        dmin.copy_from_slice(&self.dmin.to_le_bytes());
        scales.copy_from_slice(&self.scales);
        qs.copy_from_slice(&self.qs);
        bytes
    }

    /// The super-block of the given units, sub-block scales and mins (only their low 6 bits
    /// are kept) and 4-bit codes in element order (only their low 4 bits are kept).
    pub fn from_parts(
        d: f16,
        dmin: f16,
        scales: &[u8; 8],
        mins: &[u8; 8],
        codes: &[u8; 256],
    ) -> Self {
        let mut qs = [0u8; 128];
        for (group, bytes) in arrays::<u8, 64>(codes).zip(arrays_mut::<u8, 32>(&mut qs)) {
            let (low, high) = group.split_at(SUB);
            for ((b, lo), hi) in bytes.iter_mut().zip(low).zip(high) {
                *b = (lo & 0xF) | (hi & 0xF) << 4;
            }
        }
        Q4KBlock {
            d,
            dmin,
            scales: Self::pack_scales_mins(scales, mins),
            qs,
        }
    }

    /// Packs 8 sub-block scales and 8 mins, 6 bits each (higher bits are dropped), into the 12
    /// bytes of [`Q4KBlock::scales`].
    pub fn pack_scales_mins(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; 12] {
        let mut packed = [0u8; 12];
        let (sc_low, sc_high) = scales.split_at(4);
        let (m_low, m_high) = mins.split_at(4);
        let (p_sc, rest) = packed.split_at_mut(4);
        let (p_m, p_nibbles) = rest.split_at_mut(4);
        for j in 0..4 {
            let (sc_hi, m_hi) = (sc_high[j] & 63, m_high[j] & 63);
            // Sub-blocks 0..4 keep 6 bits in the low bits; sub-blocks 4..8 spill their top 2
            // bits into the free top bits of those bytes.
            p_sc[j] = (sc_low[j] & 63) | (sc_hi >> 4) << 6;
            p_m[j] = (m_low[j] & 63) | (m_hi >> 4) << 6;
            p_nibbles[j] = (sc_hi & 0xF) | (m_hi & 0xF) << 4;
        }
        packed
    }

    /// The 8 sub-block scales and the 8 sub-block mins, unpacked from
    /// [`Q4KBlock::scales`], each in `0..=63`.
    pub fn scales_mins(&self) -> ([u8; 8], [u8; 8]) {
        let s = &self.scales;
        let mut scales = [0u8; 8];
        let mut mins = [0u8; 8];
        for j in 0..4 {
            scales[j] = s[j] & 63;
            mins[j] = s[j + 4] & 63;
            scales[j + 4] = (s[j + 8] & 0xF) | (s[j] >> 6) << 4;
            mins[j + 4] = (s[j + 8] >> 4) | (s[j + 4] >> 6) << 4;
        }
        (scales, mins)
    }

    /// The 4-bit codes of the 256 elements, in element order.
    pub fn codes(&self) -> [u8; 256] {
        let mut codes = [0u8; 256];
        for (bytes, group) in arrays::<u8, 32>(&self.qs).zip(arrays_mut::<u8, 64>(&mut codes)) {
            let (low, high) = group.split_at_mut(SUB);
            for ((b, lo), hi) in bytes.iter().zip(low).zip(high) {
                *lo = b & 0xF;
                *hi = b >> 4;
            }
        }
        codes
    }

    /// The 256 values of the super-block, computed in f32 exactly as ggml's
    /// `dequantize_row_q4_K` computes them (a build of ggml whose compiler fuses the multiply
    /// and the subtraction into one fused multiply-add can differ in the last bit).
    pub fn dequantize(&self) -> [f32; 256] {
        let d = self.d.to_f32();
        let dmin = self.dmin.to_f32();
        let (scales, mins) = self.scales_mins();
        let codes = self.codes();
        let mut out = [0f32; 256];
        let subs = arrays_mut::<f32, SUB>(&mut out).zip(arrays::<u8, SUB>(&codes));
        for ((dst, q), (sc, m)) in subs.zip(scales.iter().zip(&mins)) {
            let (scale, min) = (d * f32::from(*sc), dmin * f32::from(*m));
            for (y, q) in dst.iter_mut().zip(q) {
                *y = scale * f32::from(*q) - min;
            }
        }
        out
    }

    /// Quantizes 256 values.
    ///
    /// 1. Each sub-block gets the map `scale * q - min` (`scale, min >= 0`, `q` in `0..=15`) of
    ///    least squared error among those of a search: grid spacings from `range / 14` to
    ///    `range / 16` over the sub-block's range `[min(0, lo), hi]`, each followed by a
    ///    least-squares fit of scale and min to the codes it gives, then up to three rounds of
    ///    re-encoding and refitting the best.
    /// 2. `d` and `dmin` are the largest scale and the largest min over 63, in f16.
    /// 3. Each sub-block's 6-bit scale and min are the pair, within one code of
    ///    `scale / d` and `min / dmin`, whose re-encoded values have the least squared error.
    ///
    /// The values should be finite, and no sub-block's minimum below about `-4.1e6` nor its
    /// range above about `6e7`; otherwise `d` or `dmin` is infinite. [`super::quantize`]
    /// checks both.
    pub fn quantize(values: &[f32; 256]) -> Self {
        Self::quantize_with_units(values).0
    }

    /// [`Q4KBlock::quantize`], and `d` and `dmin` before their rounding to f16.
    fn quantize_with_units(values: &[f32; 256]) -> (Self, f32, f32) {
        let mut fits = [(0.0f32, 0.0f32); SUB_BLOCKS];
        for (fit, x) in fits.iter_mut().zip(arrays::<f32, SUB>(values)) {
            *fit = fit_sub_block(x);
        }
        let max_scale = fits.iter().fold(0.0f32, |a, f| a.max(f.0));
        let max_min = fits.iter().fold(0.0f32, |a, f| a.max(f.1));
        let (d_raw, dmin_raw) = (max_scale / 63.0, max_min / 63.0);
        let (d, dmin) = (f16::from_f32(d_raw), f16::from_f32(dmin_raw));
        let (d32, dmin32) = (d.to_f32(), dmin.to_f32());

        let mut scales = [0u8; SUB_BLOCKS];
        let mut mins = [0u8; SUB_BLOCKS];
        let mut codes = [0u8; 256];
        let subs = arrays::<f32, SUB>(values).zip(arrays_mut::<u8, SUB>(&mut codes));
        for ((x, q), ((sc, m), fit)) in subs.zip(scales.iter_mut().zip(&mut mins).zip(&fits)) {
            let mut best = f64::INFINITY;
            for sc_try in neighbours(code6(fit.0, d32)) {
                for m_try in neighbours(code6(fit.1, dmin32)) {
                    let scale = d32 * f32::from(sc_try);
                    let min = dmin32 * f32::from(m_try);
                    let (q_try, error) = encode_sub_block(x, scale, min);
                    if error < best {
                        (best, *sc, *m, *q) = (error, sc_try, m_try, q_try);
                    }
                }
            }
        }
        let block = Q4KBlock::from_parts(d, dmin, &scales, &mins, &codes);
        (block, d_raw, dmin_raw)
    }
}

/// The bytes of the super-block of `values`, or the unit (`d` or `dmin`) that f16 cannot
/// hold.
pub(super) fn encode(values: &[f32; 256]) -> Result<[u8; 144], f32> {
    let (block, d, dmin) = Q4KBlock::quantize_with_units(values);
    if !block.d.is_finite() {
        Err(d)
    } else if !block.dmin.is_finite() {
        Err(dmin)
    } else {
        Ok(block.to_bytes())
    }
}

/// The 6-bit code nearest to `value / unit` (0 for a zero unit).
fn code6(value: f32, unit: f32) -> u8 {
    if unit > 0.0 {
        (value / unit)
            .round_ties_even()
            .clamp(0.0, f32::from(SCALE_MAX)) as u8
    } else {
        0
    }
}

/// The 6-bit codes within one of `code`.
fn neighbours(code: u8) -> std::ops::RangeInclusive<u8> {
    code.saturating_sub(1)..=code.saturating_add(1).min(SCALE_MAX)
}

/// The nearest 4-bit codes of `x` under `scale * q - min`, and their squared error as
/// [`Q4KBlock::dequantize`] computes the values.
fn encode_sub_block(x: &[f32; SUB], scale: f32, min: f32) -> ([u8; SUB], f64) {
    let q = if scale > 0.0 {
        x.map(|v| {
            ((v + min) / scale)
                .round_ties_even()
                .clamp(0.0, f32::from(Q_MAX)) as u8
        })
    } else {
        [0; SUB]
    };
    (q, squared_error(x, &q, scale, min))
}

/// `sum((scale * q[i] - min - x[i])^2)`, each value computed in f32 as dequantization does.
fn squared_error(x: &[f32; SUB], q: &[u8; SUB], scale: f32, min: f32) -> f64 {
    x.iter()
        .zip(q)
        .map(|(&v, &q)| f64::from(scale * f32::from(q) - min - v).powi(2))
        .sum()
}

/// The map `scale * q - min` (`scale, min >= 0`) of a sub-block fitted by the search described
/// at [`Q4KBlock::quantize`], as `(scale, min)`.
fn fit_sub_block(x: &[f32; SUB]) -> (f32, f32) {
    // The range always includes 0, so that `min >= 0` (ggml's sub-block mins are unsigned).
    let lo = x.iter().fold(0.0f32, |a, &v| a.min(v));
    let hi = x.iter().fold(lo, |a, &v| a.max(v));
    if hi <= lo {
        return (0.0, -lo);
    }
    let range = hi - lo;
    let grid = |steps: f32| x.map(|v| ((v - lo) * (steps / range)).round_ties_even());
    let mut best = (range / 15.0, -lo);
    let mut best_error = squared_error(x, &to_codes(&grid(15.0)), best.0, best.1);
    for step in 0..=20u8 {
        let codes = to_codes(&grid(14.0 + 0.1 * f32::from(step)));
        if let Some((fit, error)) = least_squares(x, &codes) {
            if error < best_error {
                (best, best_error) = (fit, error);
            }
        }
    }
    for _ in 0..3 {
        let (codes, _) = encode_sub_block(x, best.0, best.1);
        match least_squares(x, &codes) {
            Some((fit, error)) if error < best_error => (best, best_error) = (fit, error),
            _ => break,
        }
    }
    best
}

/// Real-valued codes clamped to `0..=15`.
fn to_codes(grid: &[f32; SUB]) -> [u8; SUB] {
    grid.map(|g| g.clamp(0.0, f32::from(Q_MAX)) as u8)
}

/// The `(scale, min)` with `scale, min >= 0` minimizing `sum((scale * q[i] - min - x[i])^2)`
/// for fixed codes, and that error; `None` when all codes are equal.
fn least_squares(x: &[f32; SUB], q: &[u8; SUB]) -> Option<((f32, f32), f64)> {
    let n = SUB as f64;
    let (mut sq, mut sqq, mut sx, mut sqx) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (&v, &q) in x.iter().zip(q) {
        let (v, q) = (f64::from(v), f64::from(q));
        sq += q;
        sqq += q * q;
        sx += v;
        sqx += q * v;
    }
    let det = n * sqq - sq * sq;
    if det <= 0.0 {
        return None;
    }
    let mut scale = (n * sqx - sq * sx) / det;
    let mut offset = (sqq * sx - sq * sqx) / det;
    if offset > 0.0 {
        // The fit wants a positive offset, which a min cannot give: the best with offset 0.
        offset = 0.0;
        scale = sqx / sqq;
    }
    if scale.is_nan() || scale < 0.0 {
        return None;
    }
    let fit = (scale as f32, -offset as f32);
    Some((fit, squared_error(x, q, fit.0, fit.1)))
}

//! The weight formats of [`crate::quant`] decoded in the kernel language: a helper library of
//! `ptx_kernel!`, read by the decode kernel (`kernels/quant.rs`: `#[path =
//! "src/kernels/lib/dequant.rs"] mod dq;`) and by the prefill GEMM's dequantizing loader
//! (`kernels/gemm.rs`), so that both take a GGUF block apart the same way and compute each
//! weight as ggml's dequantization does: Q8_0 `d · q`, Q4_0 `d · (q - 8)` (both exact in
//! f32), Q4_K `(d · sc) · q - dmin · m` (the scaled code rounded once, then the min
//! subtracted), BF16 and F16 widened exactly.

/// The weight formats (`FMT` of the kernels), as [`crate::ops::quant::format_code`] maps
/// them.
pub const FMT_Q8_0: u32 = 0;
pub const FMT_Q4_0: u32 = 1;
pub const FMT_Q4K: u32 = 2;
pub const FMT_BF16: u32 = 3;
pub const FMT_F16: u32 = 4;

/// The bytes of a block: Q8_0 (f16 scale, 32 codes), Q4_0 (f16 scale, 16 bytes of
/// nibbles), Q4_K (super-block of 256: f16 `d` and `dmin`, 12 bytes of 6-bit scales and
/// mins, 128 bytes of nibbles).
pub const Q8_0_BYTES: u32 = 34;
pub const Q4_0_BYTES: u32 = 18;
pub const Q4K_BYTES: u32 = 144;

/// `2^23` as f32: `f32::from_bits(0x4B00_0000 | q)` is `2^23 + q` for `q < 2^23`.
const TWO23: f32 = 8388608.0;
const TWO23_BITS: u32 = 0x4B00_0000;

/// `q` (below `2^23`) as f32, exactly, without a conversion instruction.
fn code_f32(q: u32) -> f32 {
    f32::from_bits(TWO23_BITS | q) - TWO23
}

/// Q4_K's 6-bit scale and min of sub-block `s` from the scale bytes `j = s % 4`, `j + 4`
/// and `j + 8` (`lo`, `mid`, `hi`).
fn q4k_scale_min(lo: u32, mid: u32, hi: u32, s: u32) -> [u32; 2] {
    let mut sm = [lo & 63, mid & 63];
    if s >= 4 {
        sm = [(hi & 0xF) | ((lo >> 6) << 4), (hi >> 4) | ((mid >> 6) << 4)];
    }
    sm
}

/// Q4_K sub-block `s`'s scale `d · sc` and min `dmin · m` (each exact in f32) from its
/// super-block's `d`, `dmin` and scale bytes (`q4k_scale_min`).
fn q4k_scale_and_min(d: f32, dmin: f32, lo: u32, mid: u32, hi: u32, s: u32) -> [f32; 2] {
    let sm = q4k_scale_min(lo, mid, hi, s);
    [d * code_f32(sm[0]), dmin * code_f32(sm[1])]
}

/// A Q4_K weight from its nibble and its sub-block's `q4k_scale_and_min`, as ggml rounds
/// it: the product, then the min subtracted.
fn q4k_value(sm: [f32; 2], nib: u32) -> f32 {
    sm[0] * code_f32(nib) - sm[1]
}

/// The little-endian u16 at bytes `i, i + 1` of `w` (any alignment).
fn u16_at(w: &[u8], i: u64) -> u32 {
    (w[i] as u32) | ((w[i + 1] as u32) << 8)
}

/// The f16 stored at bytes `i, i + 1` of `w` (`i` and `w`'s start even), as f32.
fn f16_read(w: &[u8], i: u64) -> f32 {
    f16::from_bits(w.read::<u16>(i)) as f32
}

/// The weights `k .. k + 4` (`k` a multiple of 4) of the row at byte `row` of `w` in format
/// `FMT`, 0 at and past `kend`. The block formats' rows hold whole blocks, so that such a
/// run lies inside one block and is all in or all past `kend` (a multiple of 4); the
/// float formats test each element. Reads 2 bytes at a time (4 for Q4_K's codes): `w`'s
/// start and `row` even (Q4_K: multiples of 4), which the rows of a format have where the
/// view starts 4-byte aligned.
fn dequant4<const FMT: u32>(w: &[u8], row: u64, k: u32, kend: u32) -> [f32; 4] {
    let mut v = [0.0f32; 4];
    if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
        if k < kend {
            let bytes = if FMT == FMT_Q8_0 { Q8_0_BYTES } else { Q4_0_BYTES };
            let off = row + (k / 32 * bytes) as u64;
            let d = f16_read(w, off);
            // The 4 code bytes: Q8_0 `k % 32 ..`, Q4_0 `k % 16 ..` (nibbles of the second half
            // in the high halves).
            let at = if FMT == FMT_Q8_0 { k % 32 } else { k % 16 };
            let c = (w.read::<u16>(off + 2 + at as u64) as u32) | ((w.read::<u16>(off + 4 + at as u64) as u32) << 16);
            #[unroll]
            for l in 0..4 {
                let byte = (c >> (8 * l)) & 0xFF;
                if FMT == FMT_Q8_0 {
                    // The code as a signed byte: `(q ^ 0x80) - 128`.
                    v[l] = d * (code_f32(byte ^ 0x80) - 128.0);
                } else {
                    v[l] = d * (code_f32((byte >> (4 * (k % 32 / 16))) & 0xF) - 8.0);
                }
            }
        }
    } else if FMT == FMT_Q4K {
        if k < kend {
            let off = row + (k / 256 * Q4K_BYTES) as u64;
            let i = k % 256;
            let s = i / 32;
            let j = (s % 4) as u64;
            let sm = q4k_scale_and_min(f16_read(w, off), f16_read(w, off + 2), w[off + 4 + j] as u32, w[off + 8 + j] as u32, w[off + 12 + j] as u32, s);
            let c = w.read::<u32>(off + 16 + (32 * (s / 2) + i % 32) as u64);
            #[unroll]
            for l in 0..4 {
                v[l] = q4k_value(sm, (c >> (8 * l + 4 * (s % 2))) & 0xF);
            }
        }
    } else {
        #[unroll]
        for l in 0..4 {
            if k + l < kend {
                let bits = w.read::<u16>(row + 2 * (k + l) as u64);
                if FMT == FMT_BF16 {
                    v[l] = f32::from_bits((bits as u32) << 16);
                } else {
                    v[l] = f16::from_bits(bits) as f32;
                }
            }
        }
    }
    v
}

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
            let bytes = if FMT == FMT_Q8_0 {
                Q8_0_BYTES
            } else {
                Q4_0_BYTES
            };
            let off = row + (k / 32 * bytes) as u64;
            let d = f16_read(w, off);
            // The 4 code bytes: Q8_0 `k % 32 ..`, Q4_0 `k % 16 ..` (nibbles of the second half
            // in the high halves).
            let at = if FMT == FMT_Q8_0 { k % 32 } else { k % 16 };
            let c = (w.read::<u16>(off + 2 + at as u64) as u32)
                | ((w.read::<u16>(off + 4 + at as u64) as u32) << 16);
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
            let sm = q4k_scale_and_min(
                f16_read(w, off),
                f16_read(w, off + 2),
                w[off + 4 + j] as u32,
                w[off + 8 + j] as u32,
                w[off + 12 + j] as u32,
                s,
            );
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

/// A Q8_0 or Q4_0 block from the words `v` of its window (Q4_0 the first 5; 4-byte aligned):
/// the block itself there (`ODD` false: scale at byte 0, codes at 2), or 2 bytes on (`ODD`:
/// scale at byte 2, codes at 4, whole words); as `q_ring` lays it out for `q_pairs`.
fn q_window_words<const FMT: u32, const ODD: bool>(v: [u32; 9]) -> [u32; 16] {
    let mut r = [0u32; 16];
    let words = if FMT == FMT_Q8_0 { 9 } else { 5 };
    if ODD {
        r[0] = v[0] >> 16;
        #[unroll]
        for i in 0..8 {
            if i + 1 < words {
                r[1 + i] = v[1 + i];
            }
        }
    } else {
        r[0] = v[0] & 0xFFFF;
        #[unroll]
        for i in 0..8 {
            if i + 1 < words {
                r[1 + i] = (v[i] >> 16) | (v[i + 1] << 16);
            }
        }
    }
    r
}

/// The prefill's ring of raw weights holds each row's bytes of a K step of 64 (`k0` a
/// multiple of 64) in two parts of this many words, each a run of whole words as they lie in
/// the row (copied by one thread: `q_step_src`):
/// - Q8_0, Q4_0: from the start of the step's two blocks (68 or 36 bytes; 4-byte aligned
///   where the row is, a pair of blocks starting at a multiple of 4 bytes), 72 or 40 bytes
///   (the last word past the pair unused);
/// - Q4_K: the super-block's first 32 bytes (`d`, `dmin`, the 12 scale bytes, 16 unused
///   code bytes), then the 32 code bytes of the step's two sub-blocks;
/// - BF16 / F16: the 64 elements.
fn q_part_words<const FMT: u32>() -> u32 {
    if FMT == FMT_Q8_0 {
        9
    } else if FMT == FMT_Q4_0 {
        5
    } else if FMT == FMT_Q4K {
        8
    } else {
        16
    }
}

/// The words between rows of the ring: both parts and one more, an odd number, so that one
/// word of 32 consecutive rows lies on 32 banks.
fn q_step_stride<const FMT: u32>() -> u32 {
    2 * q_part_words::<FMT>() + 1
}

/// Where word `j` of part `part` (0 or 1) of a row's step at `k0` comes from: `[byte in the
/// row, its bytes]`, those 0 to 4 (0 past `kend` and past the step's bytes: the copy
/// zero-fills the rest of the word). Words `j` of a part lie 4 bytes apart in the row.
fn q_step_src<const FMT: u32>(k0: u32, kend: u32, part: u32, j: u32) -> [u32; 2] {
    let mut src = [0u32; 2];
    if k0 < kend {
        if FMT == FMT_Q4K {
            let head = k0 / 256 * Q4K_BYTES;
            src[0] = if part == 0 { head + 4 * j } else { head + 16 + k0 % 256 / 2 + 4 * j };
            src[1] = 4;
        } else {
            let mut start = 0u32;
            let mut len = 0u32;
            if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
                let bytes = if FMT == FMT_Q8_0 { Q8_0_BYTES } else { Q4_0_BYTES };
                start = k0 / 32 * bytes;
                len = ((kend - k0 + 31) / 32).min(2) * bytes;
            } else {
                start = 2 * k0;
                len = 2 * (kend - k0).min(64);
            }
            let at = 4 * (part * q_part_words::<FMT>() + j);
            src[0] = start + at;
            if at < len {
                src[1] = (len - at).min(4);
            }
        }
    }
    src
}

/// The bytes of the 32 weights `k .. k + 32` (`k` a multiple of 32) of a row's step in the
/// ring (from word `at` of `s`, as `q_part_words` lays it out) as `q_pairs` takes them (the
/// block formats' rows hold whole blocks, so that such a run lies inside one block; 0 where
/// the step would not fit in `s` from `at`):
/// - Q8_0 / Q4_0: word 0 the block's f16 scale, words 1.. its 32 code bytes (Q4_0: 16),
///   from the window of the block `k / 32 % 2` of the step's pair: the even block at the
///   pair's start, the odd one 2 bytes before its own start (`q_window_words`);
/// - Q4_K: word 0 the super-block's `d | dmin << 16`, word 1 the scale bytes `j`, `j + 4`
///   and `j + 8` of sub-block `s = k % 256 / 32` (`j = s % 4`) in bytes 0, 1, 2, words
///   2 .. 10 the 32 code bytes of the sub-block (its nibbles: `s % 2`);
/// - BF16 / F16: the 32 elements, two to a word (0 past the row's end: the copies zero-fill).
fn q_ring<const FMT: u32, const LEN: u32>(s: Shared<[u32; LEN]>, at: u32, k: u32) -> [u32; 16] {
    let mut r = [0u32; 16];
    let half = k / 32 % 2;
    if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
        let words = if FMT == FMT_Q8_0 { 9 } else { 5 };
        // The odd block's window starts 2 bytes before it, at word `(bytes - 2) / 4`.
        let from = at + half * ((if FMT == FMT_Q8_0 { Q8_0_BYTES } else { Q4_0_BYTES } - 2) / 4);
        if (from as u64) + 9 <= s.len() as u64 {
            let mut v = [0u32; 9];
            #[unroll]
            for i in 0..9 {
                if i < words {
                    v[i] = s[from + i];
                }
            }
            r = if half == 0 {
                q_window_words::<FMT, false>(v)
            } else {
                q_window_words::<FMT, true>(v)
            };
        }
    } else if FMT == FMT_Q4K {
        if (at as u64) + (2 * q_part_words::<FMT>()) as u64 <= s.len() as u64 {
            // The scale bytes `j`, `j + 4`, `j + 8` of sub-block `k % 256 / 32` (`j` its
            // index mod 4): byte `j` of the head's words 1, 2 and 3; the codes in the second
            // part.
            r[0] = s[at];
            let j = k % 256 / 32 % 4;
            r[1] = ((s[at + 1] >> (8 * j)) & 0xFF) | (((s[at + 2] >> (8 * j)) & 0xFF) << 8) | (((s[at + 3] >> (8 * j)) & 0xFF) << 16);
            #[unroll]
            for i in 0..8 {
                r[2 + i] = s[at + q_part_words::<FMT>() + i];
            }
        }
    } else {
        let from = at + 16 * half;
        if (from as u64) + 16 <= s.len() as u64 {
            #[unroll]
            for i in 0..16 {
                r[i] = s[from + i];
            }
        }
    }
    r
}

/// f16 pairs of 1024, 1032 (Q4_0's codes' offset 8 above it) and 1152 (Q8_0's 128).
const F16_1024_PAIR: u32 = 0x6400_6400;
const F16_1032_PAIR: u32 = 0x6408_6408;
const F16_1152_PAIR: u32 = 0x6480_6480;
/// `lop3` tables: `(a & b) | c` and `(a ^ b) | c`.
const LUT_AND_OR: u32 = 0xEA;
const LUT_XOR_OR: u32 = 0xBE;

/// Two f32 rounded to nearest even into a pair of `T` (f16 or bf16), `lo` in the low half.
fn pack_pair<T>(lo: f32, hi: f32) -> u32 {
    let mut v = 0u32;
    if T == f16 {
        v = f16x2::from_f32s(lo, hi).to_bits();
    } else {
        v = bf16x2::from_f32s(lo, hi).to_bits();
    }
    v
}

/// Two Q8_0 codes, bytes 0 and 2 of `x` (zeros between), times the block's f16 scale `d`
/// (in both halves) as a pair of `T`, each ggml's value rounded once to nearest even. In
/// f16 each code is made the f16 `1024 + (code + 128)` by flipping its sign bit, and taking
/// 1152 off gives the code exactly; the scale's product is the one rounding.
fn q8_pair<T>(x: u32, d: u32) -> u32 {
    let mut v = 0u32;
    if T == f16 {
        let y = x.lop3(0x0080_0080u32, F16_1024_PAIR, LUT_XOR_OR);
        v = ((f16x2::from_bits(y) - f16x2::from_bits(F16_1152_PAIR)) * f16x2::from_bits(d)).to_bits();
    } else {
        let s = f16::from_bits(d as u16) as f32;
        v = pack_pair::<T>(s * (code_f32((x & 0xFF) ^ 0x80) - 128.0), s * (code_f32(((x >> 16) & 0xFF) ^ 0x80) - 128.0));
    }
    v
}

/// Two Q4_0 codes, the low nibbles of bytes 0 and 2 of `x`, times the f16 scale `d` (in both
/// halves) as a pair of `T` (in f16: `1024 + code` less 1032, exact, then the one rounding
/// of the product).
fn q4_pair<T>(x: u32, d: u32) -> u32 {
    let mut v = 0u32;
    if T == f16 {
        let y = x.lop3(0x000F_000Fu32, F16_1024_PAIR, LUT_AND_OR);
        v = ((f16x2::from_bits(y) - f16x2::from_bits(F16_1032_PAIR)) * f16x2::from_bits(d)).to_bits();
    } else {
        let s = f16::from_bits(d as u16) as f32;
        v = pack_pair::<T>(s * (code_f32(x & 0xF) - 8.0), s * (code_f32((x >> 16) & 0xF) - 8.0));
    }
    v
}

/// Two Q4_K codes, the low nibbles of bytes 0 and 2 of `x`, of the sub-block of
/// `q4k_scale_and_min` `sm`, as a pair of `T`.
fn q4k_pair<T>(x: u32, sm: [f32; 2]) -> u32 {
    pack_pair::<T>(q4k_value(sm, x & 0xF), q4k_value(sm, (x >> 16) & 0xF))
}

/// Two BF16 or F16 weights (the low half first) as a pair of `T`: as they are where the
/// format is `T`, else widened exactly and rounded once.
fn float_pair<const FMT: u32, T>(x: u32) -> u32 {
    let mut v = x;
    if !(((FMT == FMT_BF16) & (T == bf16)) | ((FMT == FMT_F16) & (T == f16))) {
        let mut h = [0.0f32; 2];
        #[unroll]
        for i in 0..2 {
            let bits = (x >> (16 * i)) & 0xFFFF;
            if FMT == FMT_BF16 {
                h[i] = f32::from_bits(bits << 16);
            } else {
                h[i] = f16::from_bits(bits as u16) as f32;
            }
        }
        v = pack_pair::<T>(h[0], h[1]);
    }
    v
}

/// The `prmt` selector that moves bytes `at` and `at + 1` of a word to bytes 0 and 2, zeros
/// between (byte 4 of the pair is the zero word's).
fn pair_sel(at: u32) -> u32 {
    at | (4 << 4) | ((at + 1) << 8) | (4 << 12)
}

/// The weights of `q_ring(.., k)` as 16 pairs of `T` (f16 or bf16; weight `2i` in the low
/// half of word `i`): each the f32 value of `dequant4` (ggml's dequantization) rounded once
/// to nearest even, the float formats passed as they are where their type is `T`.
fn q_pairs<const FMT: u32, T>(r: [u32; 16], k: u32) -> [u32; 16] {
    let mut v = [0u32; 16];
    if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
        // Pair `i`: the code bytes `2 i`, `2 i + 1` (Q4_0: `2 i % 16`, their high nibbles
        // from element 16 on) to bytes 0 and 2.
        let d = r[0] | (r[0] << 16);
        #[unroll]
        for i in 0..16 {
            let e = 2 * i;
            if FMT == FMT_Q8_0 {
                v[i] = q8_pair::<T>(r[1 + e / 4].prmt(0u32, pair_sel(e % 4)), d);
            } else {
                let byte = e % 16;
                v[i] = q4_pair::<T>(r[1 + byte / 4].prmt(0u32, pair_sel(byte % 4)) >> (4 * (e / 16)), d);
            }
        }
    } else if FMT == FMT_Q4K {
        let s = k % 256 / 32;
        let sm = q4k_scale_and_min(
            f16::from_bits(r[0] as u16) as f32,
            f16::from_bits((r[0] >> 16) as u16) as f32,
            r[1] & 0xFF,
            (r[1] >> 8) & 0xFF,
            (r[1] >> 16) & 0xFF,
            s,
        );
        #[unroll]
        for i in 0..16 {
            let e = 2 * i;
            v[i] = q4k_pair::<T>(r[2 + e / 4].prmt(0u32, pair_sel(e % 4)) >> (4 * (s % 2)), sm);
        }
    } else {
        #[unroll]
        for i in 0..16 {
            v[i] = float_pair::<FMT, T>(r[i]);
        }
    }
    v
}

/// The ring of raw weights of `gemm_wgmma_q` holds each row's bytes of a chunk of K as they
/// lie in the row, in whole 16-byte pieces (16-byte aligned where the rows are): this many
/// K steps of 64, four for the block formats (eight Q8_0 or Q4_0 blocks, 272 or 144 bytes;
/// a Q4_K super-block, 144), one for BF16 / F16 (128 bytes).
fn q_chunk_steps<const FMT: u32>() -> u32 {
    if FMT == FMT_BF16 || FMT == FMT_F16 {
        1
    } else {
        4
    }
}

/// The bytes of a row's chunk (`q_chunk_steps`).
fn q_chunk_bytes<const FMT: u32>() -> u32 {
    if FMT == FMT_Q8_0 {
        8 * Q8_0_BYTES
    } else if FMT == FMT_Q4_0 {
        8 * Q4_0_BYTES
    } else if FMT == FMT_Q4K {
        Q4K_BYTES
    } else {
        128
    }
}

/// The words between rows of a chunk in the ring: the chunk's, and a 16-byte piece more
/// where those are a multiple of 32, so that the reads of `q_frag` by the 8 rows of a warp
/// fall on different banks (rows `4 r` banks apart).
fn q_chunk_row<const FMT: u32>() -> u32 {
    let words = q_chunk_bytes::<FMT>() / 4;
    if words % 32 == 0 {
        words + 4
    } else {
        words
    }
}

/// The chunks the ring holds at once: chunk `c` goes into slot `c % q_ring_slots` three K
/// steps before its first step is multiplied, when the dequantization of the chunk it
/// replaces is over.
fn q_ring_slots<const FMT: u32>() -> u32 {
    if q_chunk_steps::<FMT>() == 1 {
        3
    } else {
        2
    }
}

/// The byte of a row at which weight `k` (a multiple of the format's block) starts.
fn q_row_byte<const FMT: u32>(k: u32) -> u32 {
    if FMT == FMT_Q8_0 {
        k / 32 * Q8_0_BYTES
    } else if FMT == FMT_Q4_0 {
        k / 32 * Q4_0_BYTES
    } else if FMT == FMT_Q4K {
        k / 256 * Q4K_BYTES
    } else {
        2 * k
    }
}

/// The bytes of a row's chunk at `k0` that hold weights before `kend` (whole blocks: `kend`
/// ends a row of whole blocks, or a chunk).
fn q_chunk_span<const FMT: u32>(k0: u32, kend: u32) -> u32 {
    let mut n = 0u32;
    if k0 < kend {
        let block = if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
            32
        } else if FMT == FMT_Q4K {
            256
        } else {
            1
        };
        n = q_row_byte::<FMT>((kend - k0 + block - 1) / block * block).min(q_chunk_bytes::<FMT>());
    }
    n
}

/// A thread's place in `q_frag` from its column pair `c` (`lane % 4`): the word its two code
/// bytes `2 c`, `2 c + 1` start in (Q8_0 / Q4_0: of each of a step's two blocks, from the
/// step's start; Q4_K: of the super-block's codes, from the chunk's start; BF16 / F16: its
/// first pair, from the step's start), and the `prmt` selectors (`pair_sel`) that take
/// those two bytes out of the word.
fn q_frag_lane<const FMT: u32>(c: u32) -> [u32; 4] {
    let mut l = [0u32; 4];
    if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
        let bytes = if FMT == FMT_Q8_0 { Q8_0_BYTES } else { Q4_0_BYTES };
        #[unroll]
        for b in 0..2 {
            let at = b * bytes + 2 + 2 * c;
            l[b] = at / 4;
            l[2 + b] = pair_sel(at % 4);
        }
    } else if FMT == FMT_Q4K {
        l[0] = 4 + c / 2;
        l[2] = pair_sel(2 * c % 4);
    } else {
        l[0] = c;
    }
    l
}

/// One row's share of a thread in the tensor cores' A fragments of K step `s` of the chunk
/// at word `at` of the ring (rows of `q_chunk_row` words, `lane` from `q_frag_lane`): word
/// `2 j + h` the weights `16 j + 8 h + 2 c` and `+ 1` of the step (`c` the lane's column
/// pair) as a pair of `T`, each the f32 of ggml's dequantization (`dequant4`) rounded once
/// to nearest even. The fragments of `mma.m16n8k16` and of `wgmma`'s A from registers take a
/// row's weights in these pairs: `2 c`, `+ 1` and `2 c + 8`, `+ 9` of each 16 of K. The
/// chunk is read from the last place it fits in `ring` where it does not fit from `at`
/// (all 0 where `ring` is shorter than a chunk's row).
///
/// Q8_0 / Q4_0: step `s` is the chunk's blocks `2 s` and `2 s + 1`; the lane's two code bytes
/// of each 8 (Q8_0: at 0, 8, 16, 24 of the block's codes; Q4_0: at 0 and 8, their low
/// nibbles the weights of the block's first 16 and the high ones of its last 16). Q4_K: the
/// super-block's sub-blocks `2 s` (the low nibbles of their 32 code bytes) and `2 s + 1` (the
/// high ones). BF16 / F16: the step's 64 elements.
fn q_frag<const FMT: u32, T, const LEN: u32>(ring: Shared<[u32; LEN]>, at: u32, s: u32, lane: [u32; 4]) -> [u32; 8] {
    let mut v = [0u32; 8];
    if LEN >= q_chunk_row::<FMT>() {
        // The chunk at `at` where it fits in `ring` (every caller's case: no test, no branch
        // in the hot loop), else the last one that does.
        let at = at.min(LEN - q_chunk_row::<FMT>());
        // SAFETY (each read below): its word lies less than a chunk's words on from `at`
        // (`s < q_chunk_steps`, the lane's words from `q_frag_lane`), inside `ring` as `at +
        // q_chunk_row ≤ LEN`.
        unsafe {
            if FMT == FMT_Q8_0 || FMT == FMT_Q4_0 {
                let bytes = if FMT == FMT_Q8_0 { Q8_0_BYTES } else { Q4_0_BYTES };
                let from = at + s * (bytes / 2);
                #[unroll]
                for b in 0..2 {
                    // The block's f16 scale: 2 bytes into its word for the odd block.
                    let sw = ring.get_unchecked(from + b * (bytes / 4));
                    let d = sw.prmt(0u32, if b == 0 { 0x1010u32 } else { 0x3232u32 });
                    let cw = from + lane[b];
                    if FMT == FMT_Q4_0 {
                        #[unroll]
                        for h in 0..2 {
                            let x = ring.get_unchecked(cw + 2 * h).prmt(0u32, lane[2 + b]);
                            v[4 * b + h] = q4_pair::<T>(x, d);
                            v[4 * b + 2 + h] = q4_pair::<T>(x >> 4, d);
                        }
                    } else {
                        #[unroll]
                        for i in 0..4 {
                            let x = ring.get_unchecked(cw + 2 * i).prmt(0u32, lane[2 + b]);
                            v[4 * b + i] = q8_pair::<T>(x, d);
                        }
                    }
                }
            } else if FMT == FMT_Q4K {
                let head = ring.get_unchecked(at);
                let d = f16::from_bits(head as u16) as f32;
                let dmin = f16::from_bits((head >> 16) as u16) as f32;
                let lo = ring.get_unchecked(at + 1);
                let mid = ring.get_unchecked(at + 2);
                let hi = ring.get_unchecked(at + 3);
                let mut sm = [[0.0f32; 2]; 2];
                #[unroll]
                for b in 0..2 {
                    let j = 2 * s + b;
                    let sh = 8 * (j % 4);
                    sm[b] = q4k_scale_and_min(d, dmin, (lo >> sh) & 0xFF, (mid >> sh) & 0xFF, (hi >> sh) & 0xFF, j);
                }
                let cw = at + lane[0] + 8 * s;
                #[unroll]
                for j in 0..2 {
                    #[unroll]
                    for h in 0..2 {
                        let x = ring.get_unchecked(cw + 4 * j + 2 * h).prmt(0u32, lane[2]);
                        v[2 * j + h] = q4k_pair::<T>(x, sm[0]);
                        v[2 * (2 + j) + h] = q4k_pair::<T>(x >> 4, sm[1]);
                    }
                }
            } else {
                #[unroll]
                for i in 0..8 {
                    v[i] = float_pair::<FMT, T>(ring.get_unchecked(at + 4 * i + lane[0]));
                }
            }
        }
    }
    v
}

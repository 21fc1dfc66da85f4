//! Warp-level matrix instructions: `mma.sync` (m16n8k4/k8 tf32, m16n8k8/k16 f16 and bf16,
//! m16n8k16/k32 s8 and u8, f32 or s32 accumulators) and the fragment layouts of the PTX ISA
//! ("Matrix Fragments for mma.m16n8k*"). They run through the warp-collective mechanism: once
//! all 32 lanes have arrived, the whole 16x8 tile is computed at once.
//!
//! Also the arithmetic and operand layouts of `wgmma.mma_async` (sm_90a): its decoded form
//! ([`WgmmaInst`]), the shared-memory matrix descriptor ([`MatrixDesc`]) with the K-major
//! layouts it describes, and the accumulator fragment ([`wgmma_acc_pos`]). Both instructions
//! round through one rule, [`f32_accumulate`]. The execution (asynchrony, checks) is in
//! `exec/wgmma.rs`.

use super::decode::Slot;

/// The element type of the A and B operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MmaKind {
    Tf32,
    F16,
    BF16,
    /// 8-bit integers; signedness per operand in [`MmaInst`].
    Int8,
}

impl MmaKind {
    /// Elements packed in one 32-bit register.
    fn per_reg(self) -> usize {
        match self {
            MmaKind::Tf32 => 1,
            MmaKind::F16 | MmaKind::BF16 => 2,
            MmaKind::Int8 => 4,
        }
    }
}

/// One decoded `mma.sync.aligned.m16n8kK.row.col` instruction.
#[derive(Clone, Copy, Debug)]
pub(super) struct MmaInst {
    pub k: usize,
    pub kind: MmaKind,
    pub a_signed: bool,
    pub b_signed: bool,
    pub d: [Slot; 4],
    pub a: [Slot; 4],
    pub na: usize,
    pub b: [Slot; 2],
    pub nb: usize,
    pub c: [Slot; 4],
}

/// The register counts of A and B for a shape and kind, or `None` if the combination is not an
/// `mma` form.
pub(super) fn operand_regs(k: usize, kind: MmaKind) -> Option<(usize, usize)> {
    match (k, kind) {
        (4, MmaKind::Tf32) | (8, MmaKind::F16 | MmaKind::BF16) | (16, MmaKind::Int8) => {
            Some((2, 1))
        }
        (8, MmaKind::Tf32) | (16, MmaKind::F16 | MmaKind::BF16) | (32, MmaKind::Int8) => {
            Some((4, 2))
        }
        _ => None,
    }
}

/// (row, column) in A (16 x k) of element `e` of register `r` of lane `lane`.
fn a_pos(kind: MmaKind, lane: usize, r: usize, e: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane & 3);
    let row = g + 8 * (r & 1);
    let col = match kind {
        MmaKind::Tf32 => t + 4 * (r >> 1),
        MmaKind::F16 | MmaKind::BF16 => t * 2 + e + 8 * (r >> 1),
        MmaKind::Int8 => t * 4 + e + 16 * (r >> 1),
    };
    (row, col)
}

/// (row, column) in B (k x 8) of element `e` of register `r` of lane `lane`.
fn b_pos(kind: MmaKind, lane: usize, r: usize, e: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane & 3);
    let row = match kind {
        MmaKind::Tf32 => t + 4 * r,
        MmaKind::F16 | MmaKind::BF16 => t * 2 + e + 8 * r,
        MmaKind::Int8 => t * 4 + e + 16 * r,
    };
    (row, g)
}

/// (row, column) in C and D (16 x 8) of register `r` of lane `lane`.
fn c_pos(lane: usize, r: usize) -> (usize, usize) {
    ((lane >> 2) + 8 * (r >> 1), (lane & 3) * 2 + (r & 1))
}

/// The value of element `e` of register (or memory word) `v` as the tensor core reads it.
pub(super) fn element(kind: MmaKind, signed: bool, v: u64, e: usize) -> f64 {
    match kind {
        // The tensor core reads the top 19 bits of an f32 as tf32.
        MmaKind::Tf32 => f32::from_bits(v as u32 & 0xffff_e000) as f64,
        MmaKind::F16 => half::f16::from_bits((v >> (16 * e)) as u16).to_f64(),
        MmaKind::BF16 => half::bf16::from_bits((v >> (16 * e)) as u16).to_f64(),
        MmaKind::Int8 => {
            let b = (v >> (8 * e)) as u8;
            if signed {
                b as i8 as f64
            } else {
                b as f64
            }
        }
    }
}

/// The f32 accumulation of the tensor-core instructions (`mma.sync` and `wgmma.mma_async`):
/// the products (exact in f64 for 16-bit and tf32 inputs) summed in f64 in order, added to the
/// accumulator `c` (f32 bits), and the result rounded once to f32.
pub(super) fn f32_accumulate(c: u32, products: impl Iterator<Item = f64>) -> u32 {
    let dot: f64 = products.sum();
    ((f32::from_bits(c) as f64 + dot) as f32).to_bits()
}

/// Performs `D = A * B + C` for the warp whose lane `i` has its registers at
/// `regs[(lo + i) * nslots..]`.
pub(super) fn mma_warp(m: &MmaInst, regs: &mut [u64], nslots: usize, lo: usize) {
    let k = m.k;
    let per = m.kind.per_reg();
    let mut a = [0f64; 16 * 32];
    let mut b = [0f64; 32 * 8];
    let mut c = [0u64; 16 * 8];
    for lane in 0..32 {
        let r = &regs[(lo + lane) * nslots..(lo + lane + 1) * nslots];
        for (ri, &s) in m.a.iter().enumerate().take(m.na) {
            for e in 0..per {
                let (row, col) = a_pos(m.kind, lane, ri, e);
                a[row * k + col] = element(m.kind, m.a_signed, r[s as usize], e);
            }
        }
        for (ri, &s) in m.b.iter().enumerate().take(m.nb) {
            for e in 0..per {
                let (row, col) = b_pos(m.kind, lane, ri, e);
                b[row * 8 + col] = element(m.kind, m.b_signed, r[s as usize], e);
            }
        }
        for (ri, &s) in m.c.iter().enumerate() {
            let (row, col) = c_pos(lane, ri);
            c[row * 8 + col] = r[s as usize] & 0xffff_ffff;
        }
    }
    let mut d = [0u64; 16 * 8];
    for i in 0..16 {
        for j in 0..8 {
            if m.kind == MmaKind::Int8 {
                // Products of 8-bit integers summed exactly; the accumulator wraps.
                let dot: i64 = (0..k)
                    .map(|x| a[i * k + x] as i64 * b[x * 8 + j] as i64)
                    .sum();
                d[i * 8 + j] = (c[i * 8 + j] as u32 as i32 as i64).wrapping_add(dot) as u32 as u64;
            } else {
                let products = (0..k).map(|x| a[i * k + x] * b[x * 8 + j]);
                d[i * 8 + j] = f32_accumulate(c[i * 8 + j] as u32, products) as u64;
            }
        }
    }
    for lane in 0..32 {
        let r = &mut regs[(lo + lane) * nslots..(lo + lane + 1) * nslots];
        for (ri, &s) in m.d.iter().enumerate() {
            let (row, col) = c_pos(lane, ri);
            r[s as usize] = d[row * 8 + col];
        }
    }
}

/// `cvt.rna.tf32.f32`: round to 10 mantissa bits, ties away from zero, as f32 bits.
pub(super) fn to_tf32(bits: u64) -> u64 {
    let x = bits as u32;
    if f32::from_bits(x).is_nan() {
        return 0x7fff_ffff;
    }
    if f32::from_bits(x).is_infinite() {
        return x as u64;
    }
    (x.wrapping_add(0x1000) & 0xffff_e000) as u64
}

/// Where a `wgmma.mma_async` takes its A operand from.
#[derive(Clone, Copy, Debug)]
pub(super) enum WgmmaA {
    /// A shared-memory matrix descriptor (the register holding it).
    Desc(Slot),
    /// Four `.b32` registers per thread holding the thread's fragment of A (PTX ISA, "Register
    /// Fragments" of `wgmma.mma_async`, the same placement as CUTLASS's register-sourced A
    /// layouts): warp `q` of the warpgroup holds rows `16q .. 16q + 16` of the `64 × K` tile,
    /// laid out within the warp as the A fragment of `mma.sync` is. With `g = lane / 4` and
    /// `t = lane % 4`, for 16-bit inputs (K = 16) register `j` holds the pair of columns
    /// `2t + 8·(j / 2)` and the next one (the lower column in the low half) of row
    /// `g + 8·(j % 2)`; for TF32 (K = 8) register `j` holds column `t + 4·(j / 2)` of row
    /// `g + 8·(j % 2)`. See [`wgmma_a_reg_pos`].
    Regs([Slot; 4]),
}

/// The place (row within the warp's 16 rows, column) of element `e` of A register `j` of
/// `lane`, for a `wgmma.mma_async` with A in registers ([`WgmmaA::Regs`]); `e` is 0 or 1 for
/// 16-bit inputs (low and high half), 0 for TF32.
pub(super) fn wgmma_a_reg_pos(kind: MmaKind, lane: usize, j: usize, e: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    let row = g + 8 * (j % 2);
    if kind == MmaKind::Tf32 {
        (row, t + 4 * (j / 2))
    } else {
        (row, 2 * t + 8 * (j / 2) + e)
    }
}

/// One decoded `wgmma.mma_async.sync.aligned.m64n<n>k<k>.f32.<atype>.<btype>` with B in shared
/// memory and A in shared memory or in registers, both K-major.
#[derive(Clone, Debug)]
pub(super) struct WgmmaInst {
    /// The N of the shape (8..=256, a multiple of 8); M is 64.
    pub n: usize,
    /// The input type: [`MmaKind::F16`], [`MmaKind::BF16`] or [`MmaKind::Tf32`].
    pub kind: MmaKind,
    /// The `n / 2` accumulator registers of each thread (read and written).
    pub d: Vec<Slot>,
    pub a: WgmmaA,
    pub b_desc: Slot,
    /// The `scale-d` predicate (false: `D = A·B`, ignoring D's values) and its negation.
    pub scale_d: Slot,
    pub scale_d_neg: bool,
    /// `imm-scale-a` / `imm-scale-b` of -1: A / B negated.
    pub neg_a: bool,
    pub neg_b: bool,
}

impl WgmmaInst {
    /// Bytes of one input element (2 for f16 and bf16, 4 for tf32).
    pub fn elem_bytes(&self) -> usize {
        if self.kind == MmaKind::Tf32 {
            4
        } else {
            2
        }
    }

    /// The K of the shape: one row of A or B is 32 bytes of K.
    pub fn k(&self) -> usize {
        WGMMA_ROW_BYTES / self.elem_bytes()
    }
}

/// Bytes of K in one row of a `wgmma` operand (k16 of 16-bit or k8 of tf32 elements).
pub(super) const WGMMA_ROW_BYTES: usize = 32;

/// A `wgmma` shared-memory matrix descriptor: where a K-major operand's rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MatrixDesc {
    /// The start address (a shared-memory offset), bits 0-13 << 4.
    pub start: u64,
    /// The leading-dimension byte offset, bits 16-29 << 4: without swizzling, the distance
    /// between the two 16-byte halves of a row's K.
    pub lbo: u64,
    /// The stride byte offset, bits 32-45 << 4: the distance between groups of 8 rows.
    pub sbo: u64,
    /// The swizzle mode, bits 62-63: 0 none (interleave), 1 128-byte, 2 64-byte, 3 32-byte.
    pub swizzle: u8,
}

impl MatrixDesc {
    /// Decodes a descriptor; a non-zero base offset (bits 49-51) is an error.
    pub fn decode(v: u64) -> Result<MatrixDesc, String> {
        let base_offset = (v >> 49) & 7;
        if base_offset != 0 {
            return Err(format!(
                "matrix descriptor {v:#018x} has base offset {base_offset}; the emulated device supports base offset 0 only"
            ));
        }
        Ok(MatrixDesc {
            start: (v & 0x3fff) << 4,
            lbo: ((v >> 16) & 0x3fff) << 4,
            sbo: ((v >> 32) & 0x3fff) << 4,
            swizzle: (v >> 62) as u8,
        })
    }

    /// The shared address of 16-byte chunk `c` (bytes `16c..16c+16` of K, `c` 0 or 1) of row
    /// `r` of a K-major operand; a swizzled layout permutes the chunks ([`swizzle_chunk`]).
    pub fn chunk(&self, r: usize, c: usize) -> u64 {
        let (r, c) = (r as u64, c as u64);
        let span = match self.swizzle {
            0 => return self.start + (r / 8) * self.sbo + c * self.lbo + (r % 8) * 16,
            1 => 128,
            2 => 64,
            _ => 32,
        };
        swizzle_chunk(
            self.start + (r / 8) * self.sbo + (r % 8) * span + 16 * c,
            span,
        )
    }
}

/// Where the hardware's `span`-byte swizzle (32, 64 or 128; 0: none) puts the 16-byte chunk of
/// shared address `addr`: bits 4-6 of the absolute address XORed with bits 7-9 (128-byte;
/// 64-byte: bits 4-5 with 7-8; 32-byte: bit 4 with bit 7). A chunk stays whole and inside its
/// 128-byte row. Shared by `wgmma` descriptors and `cp.async.bulk.tensor` boxes.
pub(super) fn swizzle_chunk(addr: u64, span: u64) -> u64 {
    if span < 32 {
        return addr;
    }
    addr ^ (((addr >> 7) & (span / 16 - 1)) << 4)
}

/// (row, column) within a warp's 16 rows of the `64 × n` accumulator tile of register `i`
/// of lane `lane` (the warp `q` of the warpgroup holds rows `16q..16q+16`).
pub(super) fn wgmma_acc_pos(lane: usize, i: usize) -> (usize, usize) {
    let row = lane / 4 + 8 * ((i / 2) % 2);
    let col = 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
    (row, col)
}

//! Warp-level matrix instructions: `mma.sync` (m16n8k4/k8 tf32, m16n8k8/k16 f16 and bf16,
//! m16n8k16/k32 s8 and u8, f32 or s32 accumulators) and the fragment layouts of the PTX ISA
//! ("Matrix Fragments for mma.m16n8k*"). They run through the warp-collective mechanism: once
//! all 32 lanes have arrived, the whole 16x8 tile is computed at once.

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

fn element(kind: MmaKind, signed: bool, v: u64, e: usize) -> f64 {
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
                let dot: f64 = (0..k).map(|x| a[i * k + x] * b[x * 8 + j]).sum();
                let acc = f32::from_bits(c[i * 8 + j] as u32) as f64 + dot;
                d[i * 8 + j] = (acc as f32).to_bits() as u64;
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

//! The grid geometry of element-wise kernels: a scalar head up to the first 16-byte boundary,
//! 16-byte vectors, a scalar tail, and the grid that covers them; and the division by an
//! invariant column count that fused per-column operands (a bias) use.

use crate::{DevicePtr, LaunchConfig};

/// Threads per block of the element-wise kernels.
pub(crate) const BLOCK: u64 = 256;
/// The most blocks of one launch: 2^28 threads, one 16-byte vector each (4 GiB); longer data
/// goes round the kernels' grid-stride loops.
pub(crate) const MAX_GRID: u64 = 1 << 20;

/// The magic number and shift with which the kernels divide an element index `e < 2^31` by
/// `cols` (`1 <= cols < 2^31`): `e / cols == (umulhi(e, magic) + e) >> shift`, where
/// `shift = ceil(log2(cols))` and `magic = floor(2^32 (2^shift - cols) / cols) + 1` (division
/// by an invariant integer, the round-up method; the sum stays below 2^32 since `e < 2^31`).
pub fn column_divider(cols: u32) -> (u32, u32) {
    let d = u64::from(cols.max(1));
    let shift = 64 - (d - 1).leading_zeros();
    let magic = ((1u64 << 32) * ((1u64 << shift) - d)) / d + 1;
    (magic as u32, shift)
}

/// How one launch splits its elements: a scalar head up to the first 16-byte boundary, `nvec`
/// vectors of 16 bytes, and a scalar tail; and the grid.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Elements before the first vector.
    pub head: u32,
    /// Whole 16-byte vectors.
    pub nvec: u64,
    /// The launch configuration.
    pub cfg: LaunchConfig,
}

impl Geometry {
    /// The split for `len` elements of `elem` bytes whose pointers are `ptrs` (every stream
    /// the kernel reads or writes per element; vectors need them all at the same offset
    /// modulo 16), with a thread per vector (or scalar element) and at most `max_blocks`
    /// blocks, beyond which the kernels' grid-stride loops take over.
    pub fn with_max_blocks(max_blocks: u64, ptrs: &[DevicePtr], len: u64, elem: u64) -> Geometry {
        Geometry::with_vectors_per_thread(max_blocks, ptrs, len, elem, 1)
    }

    /// As [`Geometry::with_max_blocks`] with a thread for every `per_thread` vectors.
    pub fn with_vectors_per_thread(
        max_blocks: u64,
        ptrs: &[DevicePtr],
        len: u64,
        elem: u64,
        per_thread: u64,
    ) -> Geometry {
        let lanes = 16 / elem;
        let misalign = ptrs.first().map_or(0, |p| p % 16);
        let (head, nvec) = if ptrs.iter().all(|p| p % 16 == misalign) && misalign % elem == 0 {
            let head = ((16 - misalign) % 16 / elem).min(len);
            (head, (len - head) / lanes)
        } else {
            (len.min(u64::from(u32::MAX)), 0)
        };
        let scalar = len - nvec * lanes;
        let work = nvec.div_ceil(per_thread).max(scalar);
        let blocks = work
            .div_ceil(BLOCK)
            .clamp(1, max_blocks.clamp(1, u64::from(u32::MAX)));
        Geometry {
            head: head as u32,
            nvec,
            cfg: LaunchConfig::grid_1d(blocks as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: DevicePtr = 0x7000_0000_0000;

    #[test]
    fn aligned_pointers_use_vectors_and_a_tail() {
        let g = Geometry::with_max_blocks(528, &[BASE, BASE + 4096, BASE + 8192], 1003, 4);
        assert_eq!((g.head, g.nvec), (0, 250));
        // 250 vectors, 3 tail elements: one block.
        assert_eq!(g.cfg.grid, [1, 1, 1]);
    }

    #[test]
    fn a_common_offset_gives_a_scalar_head() {
        // Views at element 3 of f32 buffers: 1 element up to the 16-byte boundary.
        let g = Geometry::with_max_blocks(16, &[BASE + 12, BASE + 4096 + 12], 10, 4);
        assert_eq!((g.head, g.nvec), (1, 2));
        // f16 at element 5: 3 elements to the boundary, then vectors of 8.
        let g = Geometry::with_max_blocks(16, &[BASE + 10, BASE + 256 + 10], 30, 2);
        assert_eq!((g.head, g.nvec), (3, 3));
        // Shorter than the head.
        let g = Geometry::with_max_blocks(16, &[BASE + 4, BASE + 4], 2, 4);
        assert_eq!((g.head, g.nvec), (2, 0));
    }

    #[test]
    fn the_column_divider_divides() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut divisors: Vec<u32> = vec![1, 2, 3, 4, 5, 7, 64, 1000, 4096, 65537, (1 << 31) - 1];
        divisors.extend((0..300).map(|_| (next() % (1 << 31)) as u32 + 1));
        divisors.extend((0..300).map(|_| (next() % 5000) as u32 + 1));
        for d in divisors {
            let (magic, shift) = column_divider(d);
            let mut es: Vec<u32> = vec![0, 1, d - 1, d, d.wrapping_add(1), (1 << 31) - 1];
            es.extend((0..200).map(|_| (next() % (1 << 31)) as u32));
            for e in es.into_iter().filter(|&e| e < 1 << 31) {
                let hi = ((u64::from(e) * u64::from(magic)) >> 32) as u32;
                let q = (hi + e) >> shift;
                assert_eq!(q, e / d, "{e} / {d} (magic {magic}, shift {shift})");
            }
        }
    }

    #[test]
    fn disagreeing_offsets_fall_back_to_scalar() {
        let g = Geometry::with_max_blocks(16, &[BASE + 4, BASE + 8], 100, 4);
        assert_eq!((g.head, g.nvec), (100, 0));
    }

    #[test]
    fn the_grid_fills_the_device_and_no_more() {
        let g = Geometry::with_max_blocks(528, &[BASE, BASE], 1 << 28, 4);
        assert_eq!(g.nvec, 1 << 26);
        assert_eq!(g.cfg.grid, [528, 1, 1]);
        // 1250 vectors, one per thread.
        let g = Geometry::with_max_blocks(528, &[BASE, BASE], 5000, 4);
        assert_eq!(g.cfg.grid, [5, 1, 1]);
    }
}

//! Kernels built on the synchronization, byte and half-precision intrinsics, the pieces of a
//! single-pass scan, a histogram, a 4-bit quantized GEMV and half-precision GEMM epilogues:
//! a decoupled look-back scan over blocks (release stores and acquire loads, or fences around
//! relaxed atomics; 64-bit shuffles), a quantized dot product (`dp4a` on bytes gathered with
//! `prmt`), every `dp4a` signedness and `prmt` with arbitrary selectors, warp barriers ordering
//! shared memory, 16- and 64-bit shuffles of every type, half-precision atomic adds (with
//! contention), packed f32 -> f16x2 / bf16x2 conversions, and the bounds checks of the
//! acquire, release and half-precision atomic accesses.

use pagesift_gpu::ptx_kernel;

/// How the blocks of [`scan_lookback`] publish their sums and read their predecessors'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanSync {
    /// One 64-bit word per block (status in the top two bits, the sum below), written with a
    /// release store and read with acquire loads.
    AcquireRelease,
    /// The sums in plain memory, a `u32` status per block: `fence_device()` and a relaxed
    /// atomic exchange publish, a relaxed atomic read and `fence_acq_rel_device()` receive.
    Fences,
}

/// Elements per block of [`scan_lookback`].
pub const SCAN_BLOCK: u32 = 256;

/// The status of a block in [`scan_lookback`]: its own sum is published.
pub const SCAN_AGGREGATE: u64 = 1;
/// The status of a block in [`scan_lookback`]: its inclusive prefix is published.
pub const SCAN_PREFIX: u64 = 2;

ptx_kernel! {
    /// Inclusive prefix sums `y[i] = x[0] + ... + x[i]` (in `u64`) in one pass over the input.
    ///
    /// Each block takes a ticket from `ticket[0]` (zeroed before the launch) and scans the
    /// ticket's 256 elements (warp scans with 64-bit shuffles, the warps' totals through shared
    /// memory). The block with ticket 0 publishes its total as an inclusive prefix; every other
    /// block publishes its total as an aggregate, then looks back over lower tickets, adding
    /// aggregates until it meets an inclusive prefix, and publishes its own. A block waits only
    /// on lower tickets, which belong to blocks already running, so the wait ends; each wait
    /// gives up after `spin_limit` reads, counting the failure in `err[0]`.
    ///
    /// `state` holds two `u64` per block and `flags` one `u32` per block, all zero before the
    /// launch ([`ScanSync`] says which of them a variant uses).
    #[variants(SYNC in [AcquireRelease, Fences])]
    #[launch(block = 256)]
    pub fn scan_lookback<const SYNC: ScanSync>(
        x: &[u32],
        y: &mut [u64],
        state: &mut [u64],
        flags: &mut [u32],
        ticket: &mut [u32],
        err: &mut [u32],
        n: u32,
        spin_limit: u32,
    ) {
        let tile: Shared<[u32; 1]>;
        let warp_sums: Shared<[u64; 8]>;
        let carry: Shared<[u64; 1]>;
        let t = thread_idx_x();
        if t == 0 {
            tile[0] = ticket.atomic_add(0u32, 1u32);
        }
        sync_threads();
        let b = tile[0];
        let i = b * 256 + t;
        let mut s = 0u64;
        if i < n {
            s = x[i] as u64;
        }
        let lane = lane_id();
        let w = warp_id();
        #[unroll]
        for k in 0..5 {
            let up = shfl_up(s, 1u32 << k);
            if lane >= (1u32 << k) {
                s += up;
            }
        }
        if lane == 31 {
            warp_sums[w] = s;
        }
        sync_threads();
        if w == 0 {
            let mut ws = 0u64;
            if lane < 8 {
                ws = warp_sums[lane];
            }
            #[unroll]
            for k in 0..3 {
                let up = shfl_up(ws, 1u32 << k);
                if lane >= (1u32 << k) {
                    ws += up;
                }
            }
            if lane < 8 {
                warp_sums[lane] = ws;
            }
        }
        sync_threads();
        if w > 0 {
            s += warp_sums[w - 1];
        }
        if t == 0 {
            let total = warp_sums[7];
            let mut prefix = 0u64;
            if b == 0 {
                publish::<SYNC>(state, flags, 0u32, total, 2u32);
            } else {
                publish::<SYNC>(state, flags, b, total, 1u32);
                let mut j = b - 1;
                loop {
                    let word = wait_for::<SYNC>(state, flags, j, spin_limit);
                    let status = word >> 62;
                    prefix += word & 0x3fff_ffff_ffff_ffff;
                    if status == 0 {
                        err.atomic_add(0u32, 1u32);
                        break;
                    }
                    if status == 2 || j == 0 {
                        break;
                    }
                    j -= 1;
                }
                publish::<SYNC>(state, flags, b, prefix + total, 2u32);
            }
            carry[0] = prefix;
        }
        sync_threads();
        if i < n {
            y[i] = s + carry[0];
        }
    }

    /// Publishes `v` with status `f` (1: aggregate, 2: inclusive prefix) for block `b`.
    fn publish<const S: ScanSync>(state: &mut [u64], flags: &mut [u32], b: u32, v: u64, f: u32) {
        match S {
            ScanSync::AcquireRelease => {
                state.store_release(b, ((f as u64) << 62) | v);
            }
            ScanSync::Fences => {
                state[2 * b + f - 1] = v;
                fence_device();
                flags.atomic_exch(b, f);
            }
        }
    }

    /// Block `j`'s published word (status << 62 | value), or 0 after `spin_limit` reads
    /// without one.
    fn wait_for<const S: ScanSync>(state: &mut [u64], flags: &mut [u32], j: u32, spin_limit: u32) -> u64 {
        let mut word = 0u64;
        let mut spins = 0u32;
        while word == 0 && spins < spin_limit {
            match S {
                ScanSync::AcquireRelease => {
                    word = state.load_acquire(j);
                }
                ScanSync::Fences => {
                    let f = flags.atomic_or(j, 0u32);
                    if f != 0 {
                        fence_acq_rel_device();
                        word = ((f as u64) << 62) | state[2 * j + f - 1];
                    }
                }
            }
            spins += 1;
        }
        word
    }

    /// `y[r] = Σ_k (w_k - 8) · a_k` over the `8 * words` weights of row `r`: 4-bit weights
    /// packed eight to a `u32` (weight `8q + k` in bits `4k..4k + 4` of word `q` of the row),
    /// signed 8-bit activations four to a `u32`. One warp per row; `prmt` gathers the
    /// activations of the even and the odd weights, `dp4a` multiplies them with the low and the
    /// high nibbles and subtracts the offset 8 (bytes of -8 times the activations).
    #[launch(block = 128)]
    pub fn q4_dot(w: &[u32], a: &[u32], y: &mut [i32], rows: u32, words: u32) {
        let row = block_idx_x() * 4 + warp_id();
        let lane = lane_id();
        let mut acc = 0i32;
        if row < rows {
            let mut q = lane;
            while q < words {
                let wq = w[row * words + q];
                let lo = wq & 0x0f0f_0f0f;
                let hi = (wq >> 4) & 0x0f0f_0f0f;
                let a0 = a[2 * q];
                let a1 = a[2 * q + 1];
                let even = a0.prmt(a1, 0x6420u32) as i32;
                let odd = a0.prmt(a1, 0x7531u32) as i32;
                acc = lo.dp4a(even, acc);
                acc = hi.dp4a(odd, acc);
                acc = (0xf8f8_f8f8u32 as i32).dp4a(even, acc);
                acc = (0xf8f8_f8f8u32 as i32).dp4a(odd, acc);
                q += 32;
            }
        }
        #[unroll]
        for k in 0..5 {
            acc += shfl_xor(acc, 16u32 >> k);
        }
        if row < rows && lane == 0 {
            y[row] = acc;
        }
    }

    /// Every signedness of `dp4a` and `prmt` on the words `a[i]`, `b[i]`, `c[i]`: `uu` unsigned
    /// bytes, `ss` signed, `us` unsigned `a` with signed `b`, `su` the reverse (`c` the
    /// accumulator); `perm[i] = a[i].prmt(b[i], c[i])`, `perm_k[i]` with the constant selector
    /// `0x1e63` (bytes 3, 6, sign of 6, 1).
    #[launch(block = 128)]
    pub fn byte_ops(
        a: &[u32],
        b: &[u32],
        c: &[u32],
        uu: &mut [u32],
        ss: &mut [i32],
        us: &mut [i32],
        su: &mut [i32],
        perm: &mut [u32],
        perm_k: &mut [i32],
        n: u32,
    ) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            let x = a[i];
            let y = b[i];
            let z = c[i];
            uu[i] = x.dp4a(y, z);
            ss[i] = (x as i32).dp4a(y as i32, z as i32);
            us[i] = x.dp4a(y as i32, z as i32);
            su[i] = (x as i32).dp4a(y, z as i32);
            perm[i] = x.prmt(y, z);
            perm_k[i] = (x as i32).prmt(y as i32, 0x1e63u32);
        }
    }

    /// `lop3` of the words `a[i]`, `b[i]`, `c[i]` by each table of [`LOP3_TABLES`], into
    /// `out[4 i ..]`.
    #[launch(block = 128)]
    pub fn lop3_ops(a: &[u32], b: &[u32], c: &[u32], out: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            let x = a[i];
            let y = b[i];
            let z = c[i];
            out[4 * i] = x.lop3(y, z, 0x6Au32);
            out[4 * i + 1] = x.lop3(y, z, 0x96u32);
            out[4 * i + 2] = x.lop3(y, z, 0xE8u32);
            out[4 * i + 3] = (x as i32).lop3(y as i32, z as i32, 0xCAu32) as u32;
        }
    }

    /// Warp-synchronous exchanges through shared memory: `y[i]` gets the value of lane
    /// `31 - l` of the same warp (a full-warp barrier between the write and the read), `z[i]`
    /// for lanes below 16 twice the value of lane `15 - l` (a barrier of those 16 lanes
    /// only), for the others `x[i]`.
    #[launch(block = 64)]
    pub fn warp_reverse(x: &[f32], y: &mut [f32], z: &mut [f32], n: u32) {
        let s: Shared<[f32; 64]>;
        let h: Shared<[f32; 64]>;
        let t = thread_idx_x();
        let i = block_idx_x() * 64 + t;
        let lane = lane_id();
        let base = warp_id() * 32;
        let mut v = 0.0f32;
        if i < n {
            v = x[i];
        }
        s[t] = v;
        sync_warp();
        let r = s[base + 31 - lane];
        if i < n {
            y[i] = r;
        }
        if lane < 16 {
            h[t] = v * 2.0;
            sync_warp_mask(0xffff);
            let q = h[base + 15 - lane];
            if i < n {
                z[i] = q;
            }
        } else if i < n {
            z[i] = v;
        }
    }

    /// Half-precision atomic adds: `old[i]` gets `y[i]` as it was and `y[i] += x[i]` (one
    /// add per element: its rounding is exact to check), `hist[bins[i]] += 1` (contended),
    /// and per block a shared `f16x2` histogram of `(1, 2)` pairs over `bins[i] % 16`, written
    /// to `pairs[16 * block + k]` as bits.
    #[launch(block = 128)]
    pub fn half_atomics(
        x: &[f16],
        y: &mut [f16],
        old: &mut [f16],
        bins: &[u32],
        hist: &mut [f16],
        pairs: &mut [u32],
        n: u32,
    ) {
        let s: Shared<[f16x2; 16]>;
        let t = thread_idx_x();
        let i = block_idx_x() * 128 + t;
        if t < 16 {
            s[t] = f16x2::new(0.0, 0.0);
        }
        sync_threads();
        if i < n {
            old[i] = y.atomic_add(i, x[i]);
            hist.atomic_add(bins[i], 1.0);
            s.atomic_add(bins[i] % 16, f16x2::new(1.0, 2.0));
        }
        sync_threads();
        if t < 16 {
            pairs[16 * block_idx_x() + t] = s[t].to_bits();
        }
    }

    /// `elect_one()` in every warp: the elected lane adds 1 to `count[warp]` and writes its
    /// lane to `leader[warp]` (sm_90).
    #[target(sm_90)]
    #[launch(block = 128)]
    pub fn elect_leaders(count: &mut [u32], leader: &mut [u32]) {
        let w = block_idx_x() * 4 + thread_idx_x() / 32;
        if elect_one() {
            count.atomic_add(w, 1);
            leader[w] = lane_id();
        }
    }

    /// Four 8 × 8 matrices of 16-bit elements through `stmatrix` and back through `ldmatrix`
    /// (sm_90), plain when `TRANS` is 0, transposed when 1: lane `l` gives the registers
    /// `x[32 i + l]` of matrix `i` and the address of row `l % 8` of matrix `l / 8` (64
    /// elements a matrix, 8 a row); `t` is the four matrices as stored, `back` what each
    /// lane loads back (`back[32 i + l]`).
    #[target(sm_90)]
    #[launch(block = 32)]
    #[variants(TRANS in [0, 1])]
    pub fn matrix_round_trip<const TRANS: u32>(x: &[u32], t: &mut [u16], back: &mut [u32]) {
        let m: Shared<[u16; 4 * 64]>;
        let lane = lane_id();
        let v = [x[lane], x[32 + lane], x[64 + lane], x[96 + lane]];
        let row = lane / 8 * 64 + lane % 8 * 8;
        if TRANS == 0 {
            m.stmatrix_x4(row, v);
        } else {
            m.stmatrix_x4_trans(row, v);
        }
        sync_warp();
        #[unroll]
        for k in 0..8 {
            t[k * 32 + lane] = m[k * 32 + lane];
        }
        let mut w = [0u32; 4];
        if TRANS == 0 {
            w = m.ldmatrix_x4(row);
        } else {
            w = m.ldmatrix_x4_trans(row);
        }
        #[unroll]
        for i in 0..4 {
            back[32 * i + lane] = w[i];
        }
    }

    /// [`half_atomics`] in bf16 (sm_90).
    #[target(sm_90)]
    #[launch(block = 128)]
    pub fn half_atomics_bf16(
        x: &[bf16],
        y: &mut [bf16],
        old: &mut [bf16],
        bins: &[u32],
        hist: &mut [bf16],
        pairs: &mut [u32],
        n: u32,
    ) {
        let s: Shared<[bf16x2; 16]>;
        let t = thread_idx_x();
        let i = block_idx_x() * 128 + t;
        if t < 16 {
            s[t] = bf16x2::from_f32s(0.0, 0.0);
        }
        sync_threads();
        if i < n {
            old[i] = y.atomic_add(i, x[i]);
            hist.atomic_add(bins[i], 1.0);
            s.atomic_add(bins[i] % 16, bf16x2::from_f32s(1.0, 2.0));
        }
        sync_threads();
        if t < 16 {
            pairs[16 * block_idx_x() + t] = s[t].to_bits();
        }
    }

    /// `h[i]`, `b[i]`: the bits of `f16x2::from_f32s(lo[i], hi[i])` and of
    /// `bf16x2::from_f32s(lo[i], hi[i])` (one `cvt.rn.*x2.f32` each on sm_80).
    #[target(sm_80)]
    #[launch(block = 128)]
    pub fn pack_f32s(lo: &[f32], hi: &[f32], h: &mut [u32], b: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            h[i] = f16x2::from_f32s(lo[i], hi[i]).to_bits();
            b[i] = bf16x2::from_f32s(lo[i], hi[i]).to_bits();
        }
    }

    /// One checked access by thread 0, chosen by `which`: 0: `y[0] = x.load_acquire(i) + 1`,
    /// 1: `x.store_release(i, 7)`, 2: `y[1] = ` the old bits of `h.atomic_add(i, 1.0)`.
    #[launch(block = 32)]
    pub fn ordered_probe(x: &mut [u64], h: &mut [f16], y: &mut [u64], i: u64, which: u32) {
        if thread_idx_x() == 0 {
            if which == 0 {
                y[0] = x.load_acquire(i) + 1;
            } else if which == 1 {
                x.store_release(i, 7u64);
            } else {
                y[1] = h.atomic_add(i, 1.0).to_bits() as u64;
            }
        }
    }

    /// `h[i]`: the bits of `f16x2::from_f32s(lo[i], hi[i])` on sm_70 (two conversions).
    #[launch(block = 128)]
    pub fn pack_f32s_sm70(lo: &[f32], hi: &[f32], h: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            h[i] = f16x2::from_f32s(lo[i], hi[i]).to_bits();
        }
    }
}

/// Declares `$name`: `y[4i..4i + 4]` = the shuffles of `x[i]` (of type `$t`) within its warp:
/// `shfl_xor(v, 5)`, `shfl_down(v, 3)`, `shfl_up(v, 2)`, `shfl_idx(v, (7 * lane + 3) % 32)`.
/// Launched on whole blocks of 64 elements.
macro_rules! shuffles_of {
    ($name:ident, $t:ty) => {
        ptx_kernel! {
            /// The four shuffles of `x[i]` to `y[4i..4i + 4]` (whole blocks of 64 elements).
            #[launch(block = 64)]
            pub fn $name(x: &[$t], y: &mut [$t]) {
                let i = block_idx_x() * 64 + thread_idx_x();
                let lane = lane_id();
                let v = x[i];
                y[4 * i] = shfl_xor(v, 5u32);
                y[4 * i + 1] = shfl_down(v, 3u32);
                y[4 * i + 2] = shfl_up(v, 2u32);
                y[4 * i + 3] = shfl_idx(v, (7 * lane + 3) % 32);
            }
        }
    };
}

shuffles_of!(shuffle_u16, u16);
shuffles_of!(shuffle_i16, i16);
shuffles_of!(shuffle_f16, f16);
shuffles_of!(shuffle_bf16, bf16);
shuffles_of!(shuffle_u64, u64);
shuffles_of!(shuffle_i64, i64);
shuffles_of!(shuffle_f64, f64);

/// The source lane of each of the four shuffles of [`shuffle_u16`] and friends, for `lane`.
pub fn shuffle_sources(lane: usize) -> [usize; 4] {
    [
        lane ^ 5,
        if lane + 3 < 32 { lane + 3 } else { lane },
        if lane >= 2 { lane - 2 } else { lane },
        (7 * lane + 3) % 32,
    ]
}

/// The truth tables of `lop3_ops`, in the order of its outputs: `a & b ^ c`, `a ^ b ^ c`,
/// the majority of the three, `a ? b : c` bitwise.
pub const LOP3_TABLES: [u8; 4] = [0x6A, 0x96, 0xE8, 0xCA];

/// `lop3.b32 a, b, c, lut` on the host: bit `4 a + 2 b + c` of `lut` for each bit position.
pub fn lop3_reference(a: u32, b: u32, c: u32, lut: u8) -> u32 {
    (0..32).fold(0u32, |d, k| {
        let i = (a >> k & 1) << 2 | (b >> k & 1) << 1 | (c >> k & 1);
        d | (u32::from(lut) >> i & 1) << k
    })
}

/// `prmt.b32 a, b, sel` in its default mode, on the host.
pub fn prmt_reference(a: u32, b: u32, sel: u32) -> u32 {
    let src = (a as u64) | ((b as u64) << 32);
    (0..4).fold(0u32, |d, k| {
        let s = (sel >> (4 * k)) & 0xf;
        let byte = (src >> (8 * (s & 7))) as u8;
        let byte = if s & 8 != 0 {
            if byte & 0x80 != 0 {
                0xff
            } else {
                0
            }
        } else {
            byte
        };
        d | (byte as u32) << (8 * k)
    })
}

/// `dp4a` on the host: `c` plus the products of the bytes of `a` and `b`, each signed or not,
/// wrapping in 32 bits.
pub fn dp4a_reference(a: u32, a_signed: bool, b: u32, b_signed: bool, c: u32) -> u32 {
    let byte = |v: u32, k: u32, signed: bool| {
        let x = (v >> (8 * k)) as u8;
        if signed {
            x as i8 as i64
        } else {
            x as i64
        }
    };
    let dot: i64 = (0..4)
        .map(|k| byte(a, k, a_signed) * byte(b, k, b_signed))
        .sum();
    (c as i64).wrapping_add(dot) as u32
}

/// Every variant of the kernels of this module.
pub fn all_variants() -> Vec<&'static pagesift_gpu::KernelVariant> {
    let families: [&'static [pagesift_gpu::KernelVariant]; 18] = [
        scan_lookback::VARIANTS,
        q4_dot::VARIANTS,
        byte_ops::VARIANTS,
        warp_reverse::VARIANTS,
        half_atomics::VARIANTS,
        half_atomics_bf16::VARIANTS,
        elect_leaders::VARIANTS,
        matrix_round_trip::VARIANTS,
        pack_f32s::VARIANTS,
        pack_f32s_sm70::VARIANTS,
        ordered_probe::VARIANTS,
        shuffle_u16::VARIANTS,
        shuffle_i16::VARIANTS,
        shuffle_f16::VARIANTS,
        shuffle_bf16::VARIANTS,
        shuffle_u64::VARIANTS,
        shuffle_i64::VARIANTS,
        shuffle_f64::VARIANTS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}

//! Warpgroup products (`wgmma`, sm_90a) with A from shared memory and with A from registers:
//! one warpgroup computes the 64 × 64 tile `c = a · bᵀ` in four `wgmma` steps, its A either
//! through a shared-memory descriptor or as the threads' register fragments (loaded with
//! `ldmatrix_x4` for bf16, with plain shared loads for TF32), B always through a descriptor.
//! Both must give the same bits. A mutant loads the next step's A fragment into the registers
//! before the `wgmma_wait` of the step that still reads them, which the emulated device
//! reports.

use pagesift_gpu::ptx_kernel;

/// Rows (M) and columns (N) of the tile of [`wgmma_a_bf16`] and [`wgmma_a_tf32`].
pub const TILE: usize = 64;
/// K of [`wgmma_a_bf16`]: one 128-byte row of bf16.
pub const K_BF16: usize = 64;
/// K of [`wgmma_a_tf32`]: one 128-byte row of f32.
pub const K_TF32: usize = 32;

ptx_kernel! {
    /// The index of element `k` of row `r` of a tile of 128-byte rows of `per` elements in
    /// `wgmma`'s 128-byte swizzle: 16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)`.
    fn swizzled(r: u32, k: u32, per: u32) -> u32 {
        let chunk = per / 8;
        r * per + ((k / chunk) ^ (r % 8)) * chunk + k % chunk
    }

    /// Element `i` of a thread's `[f32; 32]` accumulators of a 64 × 64 `wgmma` tile to `c`
    /// (row-major, 64 columns): warp `w` holds rows `16 w + g` and `+ 8` (lane `4 g + t`), at
    /// columns `8 (i / 4) + 2 t` and `+ 1`.
    fn store_acc(c: &mut [f32], acc: [f32; 32], w: u32, lane: u32) {
        #[unroll]
        for i in 0..32 {
            let row = 16 * w + lane / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            c[row * 64 + col] = acc[i];
        }
    }

    /// `c = a · bᵀ` for bf16 `a` (64 × 64, row-major) and `b` (64 × 64 as `[N, K]`), f32
    /// accumulators, one warpgroup, four `wgmma` steps of K = 16. A comes from shared memory
    /// (`REGS` false) or from registers: each thread's four words of `wgmma`'s A fragment,
    /// loaded with `ldmatrix_x4` (matrix `q` of the four: rows `8 (q % 2)` on, columns
    /// `8 (q / 2)` on, of the warp's 16 rows of the step). With `EARLY` the next step's
    /// fragment is loaded before the `wgmma_wait` of the step that reads the registers.
    #[target(sm_90a)]
    #[launch(block = 128)]
    #[variants((REGS, EARLY) in [(false, false), (true, false), (true, true)])]
    pub fn wgmma_a_bf16<const REGS: bool, const EARLY: bool>(a: &[bf16], b: &[bf16], c: &mut [f32]) {
        let a_s: Shared<[bf16; 64 * 64]>;
        let b_s: Shared<[bf16; 64 * 64]>;
        let tid = thread_idx_x();
        for i in 0..32 {
            let e = tid + 128 * i;
            let at = swizzled(e / 64, e % 64, 64);
            a_s[at] = a[e];
            b_s[at] = b[e];
        }
        fence_proxy_async();
        sync_threads();
        let w = tid / 32;
        let lane = tid % 32;
        // The row this lane addresses for `ldmatrix_x4` and the chunk (of 8 columns) within a
        // step's 16 columns.
        let row = 16 * w + lane % 8 + 8 * ((lane / 8) % 2);
        let half = lane / 16;
        let mut frag = [0u32; 4];
        if REGS {
            frag = a_s.ldmatrix_x4(swizzled(row, 8 * half, 64));
        }
        let mut acc = [0.0f32; 32];
        #[unroll]
        for ks in 0..4 {
            wgmma_fence();
            if REGS {
                acc = wgmma_bf16(acc, frag, b_s.wgmma_desc(0, ks * 16, 64), ks > 0);
            } else {
                acc = wgmma_bf16(acc, a_s.wgmma_desc(0, ks * 16, 64), b_s.wgmma_desc(0, ks * 16, 64), ks > 0);
            }
            wgmma_commit();
            if REGS && EARLY && ks < 3 {
                frag = a_s.ldmatrix_x4(swizzled(row, 16 * (ks + 1) + 8 * half, 64));
            }
            wgmma_wait(0);
            if REGS && !EARLY && ks < 3 {
                frag = a_s.ldmatrix_x4(swizzled(row, 16 * (ks + 1) + 8 * half, 64));
            }
        }
        store_acc(c, acc, w, lane);
    }

    /// `c = a · bᵀ` for f32 `a` (64 × 32, row-major) and `b` (64 × 32 as `[N, K]`) read as
    /// TF32 (the top 19 bits), f32 accumulators, one warpgroup, four `wgmma` steps of K = 8.
    /// A comes from shared memory (`REGS` false) or from registers: each thread's four words
    /// of `wgmma`'s TF32 A fragment (rows `g`, `g + 8` of the warp's 16, columns `t`, `t + 4`
    /// of the step's 8, lane `4 g + t`), the raw f32 bits loaded from shared memory.
    #[target(sm_90a)]
    #[launch(block = 128)]
    #[variants(REGS in [false, true])]
    pub fn wgmma_a_tf32<const REGS: bool>(a: &[f32], b: &[f32], c: &mut [f32]) {
        let a_s: Shared<[f32; 64 * 32]>;
        let b_s: Shared<[f32; 64 * 32]>;
        let tid = thread_idx_x();
        for i in 0..16 {
            let e = tid + 128 * i;
            let at = swizzled(e / 32, e % 32, 32);
            a_s[at] = a[e];
            b_s[at] = b[e];
        }
        fence_proxy_async();
        sync_threads();
        let w = tid / 32;
        let lane = tid % 32;
        let r0 = 16 * w + lane / 4;
        let t = lane % 4;
        let mut acc = [0.0f32; 32];
        #[unroll]
        for ks in 0..4 {
            let k0 = 8 * ks + t;
            let frag = [
                a_s[swizzled(r0, k0, 32)].to_bits(),
                a_s[swizzled(r0 + 8, k0, 32)].to_bits(),
                a_s[swizzled(r0, k0 + 4, 32)].to_bits(),
                a_s[swizzled(r0 + 8, k0 + 4, 32)].to_bits(),
            ];
            wgmma_fence();
            if REGS {
                acc = wgmma_tf32(acc, frag, b_s.wgmma_desc(0, ks * 8, 64), ks > 0);
            } else {
                acc = wgmma_tf32(acc, a_s.wgmma_desc(0, ks * 8, 64), b_s.wgmma_desc(0, ks * 8, 64), ks > 0);
            }
            wgmma_commit();
            wgmma_wait(0);
        }
        store_acc(c, acc, w, lane);
    }
}

/// The product of one `wgmma` step on the host, as the tensor core's f32 accumulation rounds
/// it: the exact products summed (in f64, exact for the inputs of these tests: 16-bit or TF32
/// significands within a bounded range of exponents), added to the accumulator, rounded once to
/// f32; `c` is `TILE × TILE`, `a` and `b` `TILE × k` (K contiguous) already as the tensor core
/// reads them, `step` the K of one instruction.
pub fn wgmma_reference(a: &[f64], b: &[f64], k: usize, step: usize) -> Vec<f32> {
    let mut c = vec![0f32; TILE * TILE];
    for (i, row) in c.chunks_mut(TILE).enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            for k0 in (0..k).step_by(step) {
                let dot: f64 = (k0..k0 + step)
                    .map(|kk| a[i * k + kk] * b[j * k + kk])
                    .sum();
                *x = (*x as f64 + dot) as f32;
            }
        }
    }
    c
}

/// An f32 as the tensor core reads it as TF32: the top 19 bits.
pub fn tf32_of(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xffff_e000)
}

/// Every variant of the kernels of this module.
pub fn all_variants() -> Vec<&'static pagesift_gpu::KernelVariant> {
    [wgmma_a_bf16::VARIANTS, wgmma_a_tf32::VARIANTS]
        .iter()
        .flat_map(|f| f.iter())
        .collect()
}

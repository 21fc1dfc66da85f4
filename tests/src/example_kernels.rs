//! Small kernels written with `ptx_kernel!` outside the runtime crate: they show the language,
//! and the snapshot and `ptxas` tests compile them. Each exercises a different part of the
//! language: enum const parameters and helpers (`bias_act`), shared memory, shuffles and
//! atomics (`block_sum`), tuple variants, 2-D blocks, unrolled loops and vector accesses
//! (`tile_scale`), half precision on sm_80 (`half_axpy`, `half2_fma`), and the `asm!` escape
//! (`clock_mix`).

use pagesift_gpu::ptx_kernel;

/// The activations of the example kernel [`bias_act`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExampleAct {
    /// `y = x`.
    Identity,
    /// `y = max(x, 0)`.
    Relu,
    /// `y = x / 2 · (1 + erf(x / √2))`.
    Gelu,
}

ptx_kernel! {
    /// `y[i] = act(x[i] + bias[i % cols])` for `i < n`; one element per thread.
    #[variants(ACT in [Identity, Relu, Gelu])]
    #[launch(block = 256)]
    pub fn bias_act<const ACT: ExampleAct>(x: &[f32], bias: &[f32], y: &mut [f32], n: u32, cols: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            y[i] = act::<ACT>(x[i] + bias[i % cols]);
        }
    }

    fn act<const A: ExampleAct>(v: f32) -> f32 {
        match A {
            ExampleAct::Identity => v,
            ExampleAct::Relu => v.max(0.0),
            ExampleAct::Gelu => 0.5 * v * (1.0 + (v * 0.70710677).erf()),
        }
    }

    /// `total += sum(x[0..n])`: a grid-stride loop per thread, a warp reduction with shuffles,
    /// the warps' partial sums through shared memory, one atomic add per block.
    #[launch(block = 256)]
    pub fn block_sum(x: &[f32], total: &mut [f32], n: u32) {
        let partial: Shared<[f32; 8]>;
        let mut acc = 0.0f32;
        let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
        while i < n {
            acc += x.load_nc(i);
            i += grid_dim_x() * block_dim_x();
        }
        acc = warp_sum(acc);
        if lane_id() == 0 {
            partial[warp_id()] = acc;
        }
        sync_threads();
        if warp_id() == 0 {
            let mut v = 0.0f32;
            if lane_id() < num_warps() {
                v = partial[lane_id()];
            }
            v = warp_sum(v);
            if lane_id() == 0 {
                total.atomic_add(0u32, v);
            }
        }
    }

    fn warp_sum(v: f32) -> f32 {
        let mut s = v;
        #[unroll]
        for k in 0..5 {
            s += shfl_xor(s, 16u32 >> k);
        }
        s
    }

    /// `y[r][c] = alpha * x[r][c]` over a row-major `rows x cols` matrix; each thread handles
    /// `4 * VEC` consecutive columns, with 16-byte accesses when the row allows.
    #[variants((ROWS_PER_BLOCK, VEC) in [(8, 1), (4, 2)])]
    #[launch(block = (32, ROWS_PER_BLOCK))]
    pub fn tile_scale<const ROWS_PER_BLOCK: u32, const VEC: u32>(
        x: &[f32],
        y: &mut [f32],
        rows: u32,
        cols: u32,
        alpha: f32,
    ) {
        let r = block_idx_y() * ROWS_PER_BLOCK + thread_idx_y();
        let c0 = (block_idx_x() * 32 + thread_idx_x()) * 4 * VEC;
        if r >= rows {
            return;
        }
        let row = r * cols;
        #[unroll]
        for v in 0..VEC {
            let c = c0 + 4 * v;
            let i = row + c;
            // 16-byte accesses where the row allows and the addresses are aligned (the test
            // proves them so: no alignment check at the accesses).
            if c + 4 <= cols && x.is_aligned(i, 16) && y.is_aligned(i, 16) {
                let mut a = x.load4(i);
                #[unroll]
                for k in 0..4 {
                    a[k] *= alpha;
                }
                y.store4(i, a);
            } else {
                for k in c..cols.min(c + 4) {
                    y[row + k] = alpha * x[row + k];
                }
            }
        }
    }

    /// `y[i] = a * x[i] + y[i]` in f16 storage with packed `f16x2` math (pairs of elements),
    /// and `z[i] = x[i]` rounded to bf16.
    #[target(sm_80)]
    #[launch(block = 128)]
    pub fn half_axpy(x: &[f16], y: &mut [f16], z: &mut [bf16], n_pairs: u32, a: f32) {
        let p = block_idx_x() * block_dim_x() + thread_idx_x();
        if p < n_pairs {
            let xs = x.load2(2 * p);
            let ys = y.load2(2 * p);
            let av = a as f16;
            let r = f16x2::new(av, av).mul_add(f16x2::new(xs[0], xs[1]), f16x2::new(ys[0], ys[1]));
            y.store2(2 * p, [r.lo(), r.hi()]);
            z[2 * p] = (xs[0] as f32) as bf16;
            z[2 * p + 1] = (xs[1] as f32) as bf16;
        }
    }

    /// `y[i] = x[i] ^ (x[i] >> 7)` computed with an `asm!`-spliced `shf.r.clamp` funnel shift
    /// and a `bool` parameter selecting whether to also add `i`.
    #[launch(block = 64)]
    pub fn clock_mix(x: &[u32], y: &mut [u32], n: u32, add_index: bool) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            let v = x[i];
            let s: u32 = asm!("shf.r.clamp.b32 {0}, {1}, {2}, {3};", out(u32), v, 0u32, 7u32);
            let mut r = v ^ s;
            if add_index {
                r += i;
            }
            y[i] = r;
        }
    }
}

/// The special functions of the kernel language, one per variant of [`special_fn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialFn {
    /// `x.exp()`.
    Exp,
    /// `x.exp2()`.
    Exp2,
    /// `x.ln()`.
    Ln,
    /// `x.log2()`.
    Log2,
    /// `x.tanh()`.
    Tanh,
    /// `x.erf()`.
    Erf,
    /// `x.rsqrt()`.
    Rsqrt,
    /// `x.exp_fast()`.
    ExpFast,
    /// `x.tanh_fast()`.
    TanhFast,
    /// `x.erf_fast()`.
    ErfFast,
}

ptx_kernel! {
    /// `y[i] = f(x[i])` for one special function `F` (accuracy tests of the prelude).
    #[variants(F in [Exp, Exp2, Ln, Log2, Tanh, Erf, Rsqrt, ExpFast, TanhFast, ErfFast])]
    #[launch(block = 128)]
    pub fn special_fn<const F: SpecialFn>(x: &[f32], y: &mut [f32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            let v = x[i];
            y[i] = match F {
                SpecialFn::Exp => v.exp(),
                SpecialFn::Exp2 => v.exp2(),
                SpecialFn::Ln => v.ln(),
                SpecialFn::Log2 => v.log2(),
                SpecialFn::Tanh => v.tanh(),
                SpecialFn::Erf => v.erf(),
                SpecialFn::Rsqrt => v.rsqrt(),
                SpecialFn::ExpFast => v.exp_fast(),
                SpecialFn::TanhFast => v.tanh_fast(),
                SpecialFn::ErfFast => v.erf_fast(),
            };
        }
    }
}

ptx_kernel! {
    /// `y` = `x` with every chunk of 128 elements reversed (the last chunk may be shorter),
    /// through dynamic shared memory of 512 bytes; the element passes through a register-array
    /// swap on the way.
    #[launch(block = 128)]
    pub fn chunk_reverse(x: &[f32], y: &mut [f32], n: u32) {
        let buf: Shared<[f32]>;
        let t = thread_idx_x();
        let base = block_idx_x() * 128;
        if base + t < n {
            buf[t] = x[base + t];
        }
        sync_threads();
        let len = (n - base).min(128);
        if t < len {
            let mut pair = [buf[len - 1 - t], t as f32];
            pair = [pair[1], pair[0]];
            y[base + t] = pair[1];
        }
    }
}

ptx_kernel! {
    /// `c = a · bᵀ` for one 16x8 tile with bf16 inputs and f32 results on tensor cores: `a` is
    /// 16x16 row-major, `bt` is 8x16 row-major (B stored by columns), `c` 16x8 row-major. One
    /// warp: asynchronous copies into shared memory, `ldmatrix` fragments, one
    /// `mma.m16n8k16`.
    #[target(sm_80)]
    #[launch(block = 32)]
    pub fn mma_tile_bf16(a: &[bf16], bt: &[bf16], c: &mut [f32]) {
        let a_s: Shared<[bf16; 256]>;
        let b_s: Shared<[bf16; 128]>;
        let lane = lane_id();
        a_s.cp_async16(lane * 8, a, lane * 8);
        if lane < 16 {
            b_s.cp_async16(lane * 8, bt, lane * 8);
        }
        cp_async_commit();
        cp_async_wait_all();
        sync_threads();
        let af = a_s.ldmatrix_x4((lane % 16) * 16 + (lane / 16) * 8);
        let bf = b_s.ldmatrix_x2((lane % 8) * 16 + ((lane / 8) % 2) * 8);
        let d = mma_m16n8k16_bf16(af, bf, [0.0f32; 4]);
        let row = lane / 4;
        let col = (lane % 4) * 2;
        c[row * 8 + col] = d[0];
        c[row * 8 + col + 1] = d[1];
        c[(row + 8) * 8 + col] = d[2];
        c[(row + 8) * 8 + col + 1] = d[3];
    }
}

ptx_kernel! {
    /// Language semantics in one thread per input, for comparison with the same Rust code on
    /// the host ([`semantics_reference`]): wrapping integers, casts, shifts, copies of mutable
    /// variables, array assignment, short-circuit, loops with `break` / `continue`, inclusive
    /// ranges, helpers with early `return`, `match` on an unrolled counter.
    #[launch(block = 64)]
    pub fn semantics(x: &[f32], k: &[i32], y: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i >= n {
            return;
        }
        let v = x[i];
        let a = k[i];
        let mut out = [0u32; 12];
        // Casts: float -> int truncates and saturates, NaN -> 0.
        out[0] = (v * 1e9) as i32 as u32;
        out[1] = (v * 1e3) as u8 as u32;
        // Wrapping arithmetic and shifts.
        out[2] = (a * 65537) as u32;
        out[3] = ((a >> 3) ^ (a << 5)) as u32;
        out[4] = (a as u32) >> 7;
        // An immutable copy keeps the old value of a mutable variable.
        let mut m = a;
        let before = m + 0;
        m += 1000;
        out[5] = (before - m) as u32;
        // Array assignment reads before it writes.
        let mut pair = [a, m];
        pair = [pair[1], pair[0]];
        out[6] = pair[0] as u32;
        // Loops.
        let mut s = 0u32;
        for j in 0..=10u32 {
            if j % 3 == 0 {
                continue;
            }
            if j * j > (a as u32) % 97 {
                break;
            }
            s += j;
        }
        out[7] = s;
        let mut w = 0u32;
        while w < 100 {
            w = w * 2 + 1;
        }
        out[8] = w;
        out[9] = clamp_index(a);
        // `match` on an unrolled counter.
        let mut acc = 0u32;
        #[unroll]
        for q in 0..4u32 {
            acc += match q {
                0 => 1,
                1 => 10,
                _ => 100,
            };
        }
        out[10] = acc;
        // Short-circuit: the right side is not evaluated past the end.
        out[11] = (i + 1 < n && k[i + 1] > a) as u32;
        #[unroll]
        for q in 0..12 {
            y[12 * i + q] = out[q];
        }
    }

    fn clamp_index(a: i32) -> u32 {
        if a < 0 {
            return 0;
        }
        if a > 1000 {
            return 1000;
        }
        a as u32
    }
}

/// The host version of [`semantics`] for element `i` (the same code, in Rust).
pub fn semantics_reference(x: &[f32], k: &[i32], i: usize) -> [u32; 12] {
    let v = x[i];
    let a = k[i];
    let mut out = [0u32; 12];
    out[0] = (v * 1e9) as i32 as u32;
    out[1] = (v * 1e3) as u8 as u32;
    out[2] = a.wrapping_mul(65537) as u32;
    out[3] = ((a >> 3) ^ a.wrapping_shl(5)) as u32;
    out[4] = (a as u32) >> 7;
    let before = a;
    let m = a.wrapping_add(1000);
    out[5] = before.wrapping_sub(m) as u32;
    out[6] = m as u32;
    let mut s = 0u32;
    for j in 0..=10u32 {
        if j % 3 == 0 {
            continue;
        }
        if j * j > (a as u32) % 97 {
            break;
        }
        s += j;
    }
    out[7] = s;
    let mut w = 0u32;
    while w < 100 {
        w = w * 2 + 1;
    }
    out[8] = w;
    out[9] = a.clamp(0, 1000) as u32;
    out[10] = 1 + 10 + 100 + 100;
    out[11] = (i + 1 < x.len() && k[i + 1] > a) as u32;
    out
}

ptx_kernel! {
    /// `d[i] = a[i] * b[i] + c[i]` in f16 and `db[i] = ab[i] * bb[i] + cb[i]` in bf16, on
    /// pairs: one `fma.rn.f16x2` and one `fma.rn.bf16x2` per thread (each lane rounded once).
    #[target(sm_80)]
    #[launch(block = 256)]
    pub fn half2_fma(
        a: &[f16],
        b: &[f16],
        c: &[f16],
        d: &mut [f16],
        ab: &[bf16],
        bb: &[bf16],
        cb: &[bf16],
        db: &mut [bf16],
        n_pairs: u32,
    ) {
        let p = block_idx_x() * block_dim_x() + thread_idx_x();
        if p < n_pairs {
            let x = a.load2(2 * p);
            let y = b.load2(2 * p);
            let z = c.load2(2 * p);
            let r = f16x2::new(x[0], x[1]).mul_add(f16x2::new(y[0], y[1]), f16x2::new(z[0], z[1]));
            d.store2(2 * p, [r.lo(), r.hi()]);
            let x = ab.load2(2 * p);
            let y = bb.load2(2 * p);
            let z = cb.load2(2 * p);
            let r =
                bf16x2::new(x[0], x[1]).mul_add(bf16x2::new(y[0], y[1]), bf16x2::new(z[0], z[1]));
            db.store2(2 * p, [r.lo(), r.hi()]);
        }
    }
}

/// Declares `casts_from_<T>`: `out_U[i] = x[i] as U` for every numeric type `U` (sm_80 for the
/// bf16 results). Written through `macro_rules!`, which `ptx_kernel!` accepts like any tokens.
macro_rules! casts_from {
    ($name:ident, $from:ty) => {
        ptx_kernel! {
            /// `out_U[i] = x[i] as U` for every numeric type `U`, `i < n`.
            #[target(sm_80)]
            #[launch(block = 64)]
            pub fn $name(
                x: &[$from],
                to_i8: &mut [i8],
                to_i16: &mut [i16],
                to_i32: &mut [i32],
                to_i64: &mut [i64],
                to_u8: &mut [u8],
                to_u16: &mut [u16],
                to_u32: &mut [u32],
                to_u64: &mut [u64],
                to_f16: &mut [f16],
                to_bf16: &mut [bf16],
                to_f32: &mut [f32],
                to_f64: &mut [f64],
                n: u32,
            ) {
                let i = block_idx_x() * block_dim_x() + thread_idx_x();
                if i < n {
                    let v = x[i];
                    to_i8[i] = v as i8;
                    to_i16[i] = v as i16;
                    to_i32[i] = v as i32;
                    to_i64[i] = v as i64;
                    to_u8[i] = v as u8;
                    to_u16[i] = v as u16;
                    to_u32[i] = v as u32;
                    to_u64[i] = v as u64;
                    to_f16[i] = v as f16;
                    to_bf16[i] = v as bf16;
                    to_f32[i] = v as f32;
                    to_f64[i] = v as f64;
                }
            }
        }
    };
}

casts_from!(casts_from_i8, i8);
casts_from!(casts_from_i16, i16);
casts_from!(casts_from_i32, i32);
casts_from!(casts_from_i64, i64);
casts_from!(casts_from_u8, u8);
casts_from!(casts_from_u16, u16);
casts_from!(casts_from_u32, u32);
casts_from!(casts_from_u64, u64);
casts_from!(casts_from_f16, f16);
casts_from!(casts_from_bf16, bf16);
casts_from!(casts_from_f32, f32);
casts_from!(casts_from_f64, f64);

/// Every variant of the example kernels.
pub fn all_variants() -> Vec<&'static pagesift_gpu::KernelVariant> {
    use crate::block_kernels as blk;
    use crate::language_kernels as lang;
    let families: &[&'static [pagesift_gpu::KernelVariant]] = &[
        blk::affine::VARIANTS,
        blk::wrap_index::VARIANTS,
        blk::staged_dot::VARIANTS,
        blk::sgemm::VARIANTS,
        blk::byte_mix::VARIANTS,
        blk::q4_0_gemv::VARIANTS,
        lang::axpy::VARIANTS,
        lang::vec_copy::VARIANTS,
        lang::type_tag::VARIANTS,
        lang::poly_eval::VARIANTS,
        lang::twice::VARIANTS,
        lang::twice_again::VARIANTS,
        bias_act::VARIANTS,
        block_sum::VARIANTS,
        tile_scale::VARIANTS,
        half_axpy::VARIANTS,
        half2_fma::VARIANTS,
        clock_mix::VARIANTS,
        special_fn::VARIANTS,
        chunk_reverse::VARIANTS,
        mma_tile_bf16::VARIANTS,
        semantics::VARIANTS,
        casts_from_i8::VARIANTS,
        casts_from_i16::VARIANTS,
        casts_from_i32::VARIANTS,
        casts_from_i64::VARIANTS,
        casts_from_u8::VARIANTS,
        casts_from_u16::VARIANTS,
        casts_from_u32::VARIANTS,
        casts_from_u64::VARIANTS,
        casts_from_f16::VARIANTS,
        casts_from_bf16::VARIANTS,
        casts_from_f32::VARIANTS,
        casts_from_f64::VARIANTS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}

//! Kernels that exercise the language's items beyond plain fns: element types as a variant
//! axis (`axpy`, `vec_copy`, `type_tag`), a parameter struct with fields of mixed sizes
//! (`AxpyParams`), optional operands (`bias` of `axpy`), `const` items shared with the host
//! (`AXPY_BLOCK`) and a helper library read from a file (`poly`).

use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    /// The block of `axpy`, shared with the host.
    pub const AXPY_BLOCK: u32 = 128;

    /// The scalar arguments of [`axpy`]; the fields' sizes and alignments differ on purpose.
    pub struct AxpyParams {
        /// Added to every result.
        pub tag: u8,
        /// Elements.
        pub n: u32,
        /// Whether to clamp the result at 0.
        pub relu: bool,
        /// The factor of `x`.
        pub a: f32,
        /// A factor applied after the bias.
        pub scale: f64,
        /// Added after the scale.
        pub h: f16,
        /// The columns of the bias.
        pub cols: u32,
    }

    #[path = "src/kernel_lib/poly.rs"]
    mod poly;

    /// `y[i] = act(((a x[i] + y[i] + bias[i % cols]) · scale + h + tag))` in f32, one rounding
    /// to `T` on store; `act` is relu when `p.relu`.
    #[variants(T in [f32, f16, bf16])]
    #[launch(block = AXPY_BLOCK)]
    pub fn axpy<T>(p: AxpyParams, x: &[T], y: &mut [T], bias: Option<&[T]>) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < p.n {
            let mut v = p.a.mul_add(widen::<T>(x[i]), widen::<T>(y[i]));
            if let Some(b) = bias {
                v += widen::<T>(b[i % p.cols]);
            }
            v = v * (p.scale as f32) + (p.h as f32) + (p.tag as f32);
            if p.relu {
                v = v.max(0.0);
            }
            y[i] = v as T;
        }
    }

    /// A helper generic over the element type.
    fn widen<T>(v: T) -> f32 {
        v as f32
    }

    /// `y = x` in 16-byte vectors (`load_vec::<16>`), elements per vector from `size_of`, the
    /// last partial vector per element.
    #[variants(T in [f32, f16, u8])]
    #[launch(block = 64)]
    pub fn vec_copy<T>(x: &[T], y: &mut [T]) {
        let lanes = 16 / size_of::<T>();
        let e = (block_idx_x() * block_dim_x() + thread_idx_x()) * lanes;
        let end = (e as u64) + (lanes as u64);
        if end <= x.len() && end <= y.len() && x.is_aligned(e, 16) && y.is_aligned(e, 16) {
            let v = x.load_vec::<16>(e);
            y.store_vec::<16>(e, v);
        } else {
            let mut k = e as u64;
            while k < end && k < x.len() {
                y[k] = x[k];
                k += 1;
            }
        }
    }

    /// `tags[0]` = a number per element type, from `match T`, `T == ..` and `T::MAX`.
    #[variants(T in [f32, f16, bf16])]
    #[launch(block = 32)]
    pub fn type_tag<T>(tags: &mut [u32], maxes: &mut [f32]) {
        if thread_idx_x() == 0 {
            let base = match T {
                f32 => 10u32,
                f16 => 20u32,
                _ => 30u32,
            };
            let extra = if T == bf16 { 5u32 } else { 0u32 };
            tags[0] = base + extra + size_of::<T>();
            maxes[0] = T::MAX as f32;
        }
    }

    /// `y[i] = 2 x[i]` through another kernel of the invocation, called like a helper
    /// (inlined).
    #[launch(block = 128)]
    pub fn twice(x: &[f32], y: &mut [f32]) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if (i as u64) < x.len() {
            y[i] = 2.0 * x[i];
        }
    }

    /// `y = 2 x` by calling the kernel `twice` (kernels are callable like helpers).
    #[launch(block = 128)]
    pub fn twice_again(x: &[f32], y: &mut [f32]) {
        twice(x, y);
    }

    /// `y[i] = poly::clamped(x[i], lo, hi) + poly::C0`: helpers and a const of a library.
    #[launch(block = 128)]
    pub fn poly_eval(x: &[f32], y: &mut [f32], lo: f32, hi: f32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if (i as u64) < x.len() {
            y[i] = poly::clamped(x[i], lo, hi) + poly::C0;
        }
    }
}

/// The CPU reference of [`poly::cubic`]: the same fused multiply-adds.
pub fn cubic_ref(x: f32) -> f32 {
    let mut p = x.mul_add(0.0625, 0.375);
    p = p.mul_add(x, -1.25);
    p.mul_add(x, 0.5)
}

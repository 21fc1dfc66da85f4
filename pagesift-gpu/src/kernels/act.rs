//! Activation kernels: `y[i] = act(x[i] + bias[i % cols]) + res[i]`, element-wise, for f32, f16
//! and bf16 storage (f32 arithmetic, one rounding on store).
//!
//! Two kernels generic over the storage type `T`, with a variant per type and activation: out
//! of place (`act`, the input read through the non-coherent cache) and in place
//! (`act_inplace`, `y` read with coherent loads, as the kernel writes it), sharing one body.
//! The bias and the residual are optional operands. A launch covers `n` elements split by
//! the caller ([`crate::ops::act`]) into a scalar head of `head` elements (up to the first
//! 16-byte boundary), `nvec` 16-byte vectors and a scalar tail; each thread takes one vector
//! per turn of a grid-stride loop (two for the light f32 activations, `pairs`). The bias
//! column of a vector comes from a multiply-high division by `cols` below 2^31 elements, and
//! the bias is read as one 16-byte vector where `cols` and the alignment allow.
//!
//! The vector loops carry no bounds or alignment checks: a uniform test before them (the last
//! vector, `vlast`, ends inside `x`, `y` and the residual; element `head` of each is 16-byte
//! aligned) proves every vector access, and where it fails every element takes the checked
//! scalar path. The activation math is the helper library `kernels/lib/act_math.rs`.

use crate::act::{Act, ActElement};
use crate::ptx_kernel;

ptx_kernel! {
    #[path = "src/kernels/lib/act_math.rs"]
    mod math;

    /// The scalars of one activation launch (filled in by [`crate::ops::act`]).
    pub struct ActParams {
        /// Elements.
        pub n: u64,
        /// Whole 16-byte vectors after the head.
        pub nvec: u64,
        /// Scalar elements before the first vector.
        pub head: u32,
        /// The row length of the bias (1 without one).
        pub cols: u32,
        /// The first element of the last vector, `head + lanes * nvec - lanes` (wrapping).
        pub vlast: u32,
        /// `cols - lanes` (wrapping): the last first column of a vector bias read.
        pub clast: u32,
        /// The column divider: `e / cols == (umulhi(e, cmagic) + e) >> cshift` below 2^31.
        pub cmagic: u32,
        /// See `cmagic`.
        pub cshift: u32,
        /// The negative slope of the leaky relu.
        pub slope: f32,
        /// Whether the bias may be read as 16-byte vectors (no head, `cols` a multiple of the
        /// lanes, the bias 16-byte aligned; the kernel checks each and reads per element where
        /// one fails).
        pub bias_vec: bool,
    }

    /// `y[i] = act(x[i] + bias[i % cols]) + res[i]`, computed in f32 and rounded once to `T`;
    /// 16-byte vectors, loads through the non-coherent cache.
    #[variants(
        T in [f32, f16, bf16],
        ACT in [Identity, Relu, Relu6, LeakyRelu, Gelu, GeluTanh, Silu, Sigmoid, Tanh, HardSwish, HardSigmoid]
    )]
    #[launch(block = 256, max_regs = 32)]
    pub fn act<T: ActElement, const ACT: Act>(
        p: ActParams,
        x: &[T],
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
    ) {
        run::<T, ACT, true>(x, bias, res, y, p);
    }

    /// In place: `y[i] = act(y[i] + bias[i % cols]) + res[i]` (`y` read with coherent loads,
    /// since the kernel writes it).
    #[variants(
        T in [f32, f16, bf16],
        ACT in [Identity, Relu, Relu6, LeakyRelu, Gelu, GeluTanh, Silu, Sigmoid, Tanh, HardSwish, HardSigmoid]
    )]
    #[launch(block = 256, max_regs = 32)]
    pub fn act_inplace<T: ActElement, const ACT: Act>(
        p: ActParams,
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
    ) {
        run::<T, ACT, false>(y, bias, res, y, p);
    }

    /// The body of the kernels: `x` may be `y` itself when `NC` is false.
    fn run<T, const ACT: Act, const NC: bool>(
        x: &[T],
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
        p: ActParams,
    ) {
        let lanes = 16 / size_of::<T>();
        let lanes64 = lanes as u64;
        let n = p.n;
        let head = p.head;
        let h = head as u64;
        // Whether every element takes the scalar path (decided here, applied after the loops
        // so that nothing more stays live in them).
        let mut all = false;
        // The vector bias needs whole vectors of columns (`cols` and `head` multiples of the
        // lanes, so that every vector's first column is one): else it is read per element.
        let bvec = p.bias_vec & (((p.cols | head) & (lanes - 1)) == 0u32);
        if n <= 0x8000_0000u64 {
            // Below 2^31 elements the indices are 32-bit. With `vlast + lanes` inside `x` and
            // `y`, and element `head` of both 16-byte aligned (every vector starts a whole
            // number of vectors after it), the loops are in bounds and aligned whatever the
            // other arguments (`nvec == 0` wraps `vlast` and fails the test). `&`, not `&&`:
            // the tests are computed side by side, with no branch between them.
            let vlast = p.vlast;
            if ((vlast as u64) + lanes64 <= x.len())
                & ((vlast as u64) + lanes64 <= y.len())
                & x.is_aligned(head, 16)
                & y.is_aligned(head, 16)
            {
                // Each operand combination gets loops of its own, the absent operands known
                // (the other forms' code, predicated off, would still take issue slots).
                if res.is_none() {
                    if let Some(b) = bias {
                        if bvec & b.is_aligned(0, 16) & ((p.clast as u64) + lanes64 <= b.len()) {
                            vec_loop::<T, ACT, NC>(x, bias, res, y, p, true);
                        } else {
                            vec_loop::<T, ACT, NC>(x, bias, res, y, p, bvec);
                        }
                    } else {
                        vec_loop::<T, ACT, NC>(x, bias, res, y, p, false);
                    }
                } else if let Some(r) = res {
                    if ((vlast as u64) + lanes64 <= r.len()) & r.is_aligned(head, 16) {
                        vec_loop::<T, ACT, NC>(x, bias, res, y, p, bvec);
                    } else {
                        all = true;
                    }
                }
            } else {
                all = true;
            }
        } else {
            let vend = h + lanes64 * p.nvec;
            let vlast = vend - lanes64;
            if p.nvec >= 1
                && vend <= n
                && vlast < x.len()
                && vlast + lanes64 <= x.len()
                && vlast < y.len()
                && vlast + lanes64 <= y.len()
                && x.is_aligned(h, 16)
                && y.is_aligned(h, 16)
            {
                let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
                let nt = (grid_dim_x() * block_dim_x()) as u64;
                let mut e = h + lanes64 * t;
                if let Some(_r) = res {
                    all = true;
                } else {
                    while e <= vlast {
                        vec::<T, ACT, NC, false>(x, bias, res, y, e, p, bvec);
                        e += lanes64 * nt;
                    }
                }
            } else {
                all = true;
            }
        }
        // The scalar elements: [0, sh) and [tail, n).
        let mut sh = h;
        let mut tail = sh + lanes64 * p.nvec;
        if all {
            sh = n;
            tail = n;
        }
        let ns = sh + (n - tail);
        // The thread's index and the grid's size, read again here (not kept across the loops).
        let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
        let nt = (grid_dim_x() * block_dim_x()) as u64;
        let mut s = t;
        while s < ns {
            let mut k = s;
            if s >= sh {
                k = s - sh + tail;
            }
            one::<T, ACT, NC>(x, bias, res, y, k, p);
            s += nt;
        }
    }

    /// The vector loop below 2^31 elements: from `e` in steps of `step` up to `p.vlast`, two
    /// vectors a turn for the light f32 activations (the caller's grid covers the vectors in
    /// pairs: the set-up of a thread is paid once per eight elements).
    fn vec_loop<T, const ACT: Act, const NC: bool>(
        x: &[T],
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
        p: ActParams,
        bvec: bool,
    ) {
        let lanes = 16 / size_of::<T>();
        let step = lanes * grid_dim_x() * block_dim_x();
        let mut e = p.head + lanes * (block_idx_x() * block_dim_x() + thread_idx_x());
        if pairs::<ACT>() && T == f32 {
            let mut e2 = e + step;
            while (e <= p.vlast) & (e2 <= p.vlast) {
                vec::<T, ACT, NC, true>(x, bias, res, y, e as u64, p, bvec);
                vec::<T, ACT, NC, true>(x, bias, res, y, e2 as u64, p, bvec);
                e += 2 * step;
                e2 += 2 * step;
            }
        }
        while e <= p.vlast {
            vec::<T, ACT, NC, true>(x, bias, res, y, e as u64, p, bvec);
            e += step;
        }
    }

    /// One 16-byte vector at element `e` (`SMALL`: `n <= 2^31`).
    fn vec<T, const ACT: Act, const NC: bool, const SMALL: bool>(
        x: &[T],
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
        e: u64,
        p: ActParams,
        bvec: bool,
    ) {
        let a = load_vec::<T, NC>(x, e);
        let mut b = [-0.0f32; 16 / size_of::<T>()];
        if let Some(bs) = bias {
            let c = column::<SMALL>(e, p);
            b = bias_vec::<T>(bs, c, p, bvec);
        }
        let mut o = a;
        if let Some(r) = res {
            // A residual may cancel the activation's leading digits: the f32 functions.
            let rv = r.load_vec_nc::<16>(e);
            #[unroll]
            for i in 0..16 / size_of::<T>() {
                o[i] = (math::act::<ACT>(a[i] as f32 + b[i], p.slope) + rv[i] as f32) as T;
            }
        } else {
            #[unroll]
            for i in 0..16 / size_of::<T>() {
                o[i] = math::act_as::<T, ACT>(a[i] as f32 + b[i], p.slope) as T;
            }
        }
        y.store_vec::<16>(e, o);
    }

    /// Element `k` (the scalar head and tail).
    fn one<T, const ACT: Act, const NC: bool>(
        x: &[T],
        bias: Option<&[T]>,
        res: Option<&[T]>,
        y: &mut [T],
        k: u64,
        p: ActParams,
    ) {
        let mut b = -0.0f32;
        if let Some(bs) = bias {
            b = bs.load_nc(column::<false>(k, p) as u64) as f32;
        }
        let mut r = -0.0f32;
        if let Some(rs) = res {
            r = rs.load_nc(k) as f32;
        }
        let xk = load_one::<T, NC>(x, k) as f32;
        let mut yk = 0.0f32;
        if T == f32 {
            // An absent residual is -0.0, which leaves every value as it is: one path.
            yk = math::epi::<ACT>(xk, b, r, p.slope);
        } else {
            yk = math::act_as::<T, ACT>(xk + b, p.slope);
            if let Some(_rs) = res {
                yk = math::epi::<ACT>(xk, b, r, p.slope);
            }
        }
        y[k] = yk as T;
    }

    /// `x[e..e + lanes]`, through the non-coherent cache when `NC`.
    fn load_vec<T, const NC: bool>(x: &[T], e: u64) -> [T; 16 / size_of::<T>()] {
        if NC { x.load_vec_nc::<16>(e) } else { x.load_vec::<16>(e) }
    }

    /// `x[e]`, through the non-coherent cache when `NC`.
    fn load_one<T, const NC: bool>(x: &[T], e: u64) -> T {
        if NC { x.load_nc(e) } else { x[e] }
    }

    /// The bias of `lanes` consecutive elements whose first column is `c`, in f32: one
    /// 16-byte load when `vec` (whole vectors of columns, no head) and the bias is 16-byte
    /// aligned, else per element.
    fn bias_vec<T>(bias: &[T], c: u32, p: ActParams, vec: bool) -> [f32; 16 / size_of::<T>()] {
        let lanes = 16 / size_of::<T>();
        let mut b = [0.0f32; 16 / size_of::<T>()];
        if vec && bias.is_aligned(0, 16) {
            // `c` is a whole number of vectors, at most `clast` (the kernel clears `vec`
            // otherwise): the masks and the clamp change nothing, but prove the load aligned
            // and, under the vector-bias loop's `clast + lanes <= bias.len()`, in bounds
            // (elsewhere its bounds are checked).
            let cl = p.clast & (0u32 - lanes);
            let cv = c & (0u32 - lanes);
            let cm = cv.min(cl);
            let v = bias.load_vec_nc::<16>(cm as u64);
            #[unroll]
            for i in 0..16 / size_of::<T>() {
                b[i] = v[i] as f32;
            }
        } else {
            let mut cc = c;
            #[unroll]
            for i in 0..16 / size_of::<T>() {
                b[i] = bias.load_nc(cc as u64) as f32;
                cc = next_col(cc, p.cols);
            }
        }
        b
    }

    /// The bias column `e % cols` of element `e`. Below 2^31 elements without a division:
    /// `q = (umulhi(e, cmagic) + e) >> cshift` is `e / cols` for every `e < 2^31` (the
    /// round-up method of division by an invariant integer); longer data takes the 64-bit
    /// remainder (a uniform branch). `SMALL`: the caller knows that `n <= 2^31`.
    fn column<const SMALL: bool>(e: u64, p: ActParams) -> u32 {
        let mut c = 0u32;
        if SMALL {
            c = column_small(e as u32, p);
        } else if p.n <= 0x8000_0000u64 {
            c = column_small(e as u32, p);
        } else {
            c = (e % p.cols as u64) as u32;
        }
        c
    }

    /// `e % cols` for `e < 2^31` by the multiply-high division (see `column`).
    fn column_small(e: u32, p: ActParams) -> u32 {
        e - ((e.mul_hi(p.cmagic) + e) >> p.cshift) * p.cols
    }

    /// The column after `c`.
    fn next_col(c: u32, cols: u32) -> u32 {
        let s = c + 1;
        if s == cols { 0 } else { s }
    }

    /// Whether the vector loops take two vectors a turn: the activations whose few
    /// instructions leave a thread's set-up (the uniform safety tests) a visible share of its
    /// work. The operations give them half the threads ([`crate::ops::act`]).
    fn pairs<const A: Act>() -> bool {
        match A {
            Act::Identity | Act::Relu | Act::Relu6 | Act::LeakyRelu | Act::HardSwish
            | Act::HardSigmoid => true,
            _ => false,
        }
    }
}

//! The activation functions in the kernel language: a helper library of `ptx_kernel!`, read by
//! the activation kernels (`kernels/act.rs`: `#[path = "src/kernels/lib/act_math.rs"] mod
//! math;`) and by the tests' mutants of them, so that every kernel computes the same math.
//!
//! The special functions are accurate against the f64 reference with no division instruction
//! (an approximate reciprocal and one residual step) and no divergent branch: `exp` by
//! Cody–Waite reduction and a polynomial with exact scaling (subnormal results rounded once),
//! gelu as `max(x, 0) - |x| erfc(|x|/√2) / 2` with `erfc(a) = t e^{G(t) - a²}`,
//! `t = 1 / (1 + a/2)`, gelu-tanh as `x · sigmoid(2u)` with the exponent carried as a rounded
//! value and its exact residual, tanh as an odd polynomial below 0.6 and `(d - 2) / d`,
//! `d = e^{2|x|} + 1`, above (both formed, one selected), hardswish / hardsigmoid with the
//! division by 6 as a product and a residual step. Their error bounds are
//! `pagesift_gpu::act::max_error_ulps`. The 16-bit storage types take cheaper forms without a
//! residual (`act_half`), within one storage ulp of the reference.

/// `act(x + b) + r`, each sum rounded on its own (an absent operand is -0.0): the scalar
/// head and tail.
fn epi<const A: Act>(x: f32, b: f32, r: f32, slope: f32) -> f32 {
    // The activation is rounded to f32 before the residual is added (as the reference
    // does): `+` is `add.rn`, never fused with a multiply.
    act::<A>(x + b, slope) + r
}

/// The activation for f16 (`SUB` false) / bf16 (`SUB` true) storage: the exact functions
/// as in f32, the transcendental ones through the approximate `ex2` and `rcp` without
/// correction steps, within a relative 2^-15 of the f32 reference (a sixteenth of an f16
/// ulp, under a hundredth of a bf16 one; the approximate instructions add at most 2^-22):
/// rounded to the storage type, the result stays within one storage ulp of the reference,
/// which is what the 16-bit outputs promise, at half the f32 functions' arithmetic. The
/// activation kernels do not take them with a residual (the sum may cancel the activation's
/// leading digits, which then need the f32 accuracy); the GEMM epilogue does, and its
/// tolerance counts their relative 2^-15 (`act::HALF_FORM_REL_ERROR`) in place of the f32
/// functions' ulps.
fn act_half<const A: Act, const SUB: bool>(x: f32, slope: f32) -> f32 {
    match A {
        Act::Gelu => gelu_half(x),
        // 2u log2 e = x (A + B x²) in plain f32 (a relative 3 · 2^-24: 2^-16 of the result
        // where it reaches 127).
        Act::GeluTanh => x_sigmoid_half::<SUB>(x, (x * x).mul_add(0.10294324, 2.3022082)),
        Act::Silu => x_sigmoid_half::<SUB>(x, 1.442695),
        Act::Sigmoid => {
            let e = exp2_neg_half::<SUB>(x, 1.442695);
            let mut m = 1.0f32;
            if x < 0.0 {
                m = e;
            }
            m * rcp_approx(1.0 + e)
        }
        Act::Tanh => tanh_half(x),
        _ => act::<A>(x, slope),
    }
}

/// The activation for a result stored as `T`: the f32 functions ([`act`]) for f32, the
/// 16-bit forms ([`act_half`], within a relative 2^-15 of them) for f16 and bf16.
fn act_as<T, const A: Act>(x: f32, slope: f32) -> f32 {
    let mut r = 0.0f32;
    if T == f32 {
        r = act::<A>(x, slope);
    } else if T == bf16 {
        r = act_half::<A, true>(x, slope);
    } else {
        r = act_half::<A, false>(x, slope);
    }
    r
}

/// 2^x, approximate (2 ulp), results below 2^-126 flushed to 0.
fn ex2_ftz(x: f32) -> f32 {
    x.exp2_fast_ftz()
}

/// 2^{-|x| c} for c >= 0, approximate. With `SUB` (bf16, whose range has the subnormals)
/// down into the subnormal range: 2^{32 - |x| c} (the offset rounds the exponent to
/// 2^-20 near 0, a relative 2^-20.5) times 2^-32, rounded once there; else flushed to 0
/// below 2^-126 (f16 rounds all of those to 0).
fn exp2_neg_half<const SUB: bool>(x: f32, c: f32) -> f32 {
    let mut e = 0.0f32;
    if SUB {
        e = ex2_ftz(x.abs().mul_add(-c, 32.0)) * 2.3283064365386963e-10;
    } else {
        e = ex2_ftz(-(x.abs() * c));
    }
    e
}

/// x · sigmoid(v) for v log2 e = x c (c > 0): x / (1 + e) for x >= 0, x e / (1 + e)
/// below, e = 2^{-|x| c} (no overflow).
fn x_sigmoid_half<const SUB: bool>(x: f32, c: f32) -> f32 {
    let e = exp2_neg_half::<SUB>(x, c);
    let mut m = x;
    if x < 0.0 {
        m = x * e;
    }
    m * rcp_approx(1.0 + e)
}

/// gelu for 16-bit storage: max(x, 0) - |x| erfc(|x|/√2) / 2 as in [`gelu`], with
/// erfc(a)/2 = t 2^{G(t) - 1 - a² log2 e} and G a degree-5 fit in log2 units (2^-16.5
/// absolute), t and the power of 2 approximate. The power of 2 is taken 2^32 higher (never
/// below 2^-110, so no flush) and t' = 2^-32 t takes the 2^32 back: subnormal results are
/// rounded once, for f16 and bf16 alike.
fn gelu_half(x: f32) -> f32 {
    let xc = x.abs().min(14.0);
    let tp = rcp_approx(xc.mul_add(1518500224.0, 4294967296.0));
    let s = tp.mul_add(4294967296.0, -0.5840372);
    let mut g = s.mul_add(0.3300747, -0.059266783);
    g = g.mul_add(s, -0.57978988);
    g = g.mul_add(s, 0.13008006);
    g = g.mul_add(s, 1.974678);
    g = g.mul_add(s, 30.195504);
    let h = tp * ex2_ftz((xc * xc).mul_add(-0.72134752, g));
    (-xc).mul_add(h, x.max(0.0))
}

/// tanh for 16-bit storage, sign restored from |x|: (e - 1) / (e + 1) with
/// e = 2^{2|x| log2 e} (|x| clamped at 9.5, where tanh is 1 in every storage type; e - 1
/// exact below e = 2, so the approximate ex2's absolute 2^-22 near 1 is a relative 2^-16
/// from |x| = 2^-7 on), and |x| itself below 2^-7 (a relative x²/3 < 2^-15.5).
fn tanh_half(x: f32) -> f32 {
    let ax = x.abs();
    let e = ex2_ftz(ax.min(9.5) * 2.8853901);
    let mut t = (e - 1.0) * rcp_approx(e + 1.0);
    if ax < 0.0078125 {
        t = ax;
    }
    t.copysign(x)
}

/// The activation function (see [`Act`] for the definitions).
fn act<const A: Act>(x: f32, slope: f32) -> f32 {
    match A {
        Act::Identity => x,
        Act::Relu => x.max(0.0),
        Act::Relu6 => x.max(0.0).min(6.0),
        // A factor of 1 or `slope`: x * 1 is x exactly (also -0.0, inf and NaN), and the
        // select keeps the register count of relu (full occupancy).
        Act::LeakyRelu => x * if x >= 0.0 { 1.0 } else { slope },
        Act::Gelu => gelu(x),
        Act::GeluTanh => gelu_tanh(x),
        Act::Silu => x_sigmoid_exact(x, x),
        Act::Sigmoid => x_sigmoid_exact(1.0, x),
        Act::Tanh => tanh_acc(x),
        // x times the quotient (not the quotient of the product, which overflows first).
        Act::HardSwish => x * div6((x + 3.0).max(0.0).min(6.0)),
        Act::HardSigmoid => div6((x + 3.0).max(0.0).min(6.0)),
    }
}

/// `t / 6` within a hair of correct rounding, without a division: the product by the
/// rounded 1/6 and one residual step (the residual `t - 6q` is exact in an fma).
fn div6(t: f32) -> f32 {
    let q = t * 0.16666667;
    let r = (-6.0f32).mul_add(q, t);
    r.mul_add(0.16666667, q)
}

/// `1 / d`: the approximate reciprocal (flushing subnormals: `d` is never tiny here).
fn rcp_approx(d: f32) -> f32 {
    d.recip_fast_ftz()
}

/// `a / d` for `d` in [1, 2] within a hair of correct rounding: the approximate
/// reciprocal, the quotient, and one residual step (no division subroutine, no branch).
fn div_acc(a: f32, d: f32) -> f32 {
    let r = rcp_approx(d);
    let q = a * r;
    let e = (-d).mul_add(q, a);
    e.mul_add(r, q)
}

/// e^x for x <= 0 within 1 ulp down to the subnormal range (rounded once there; 0 below
/// -104): the scaling is 2^(k+64) · 2^-64.
fn exp_neg(x: f32) -> f32 {
    let xc = x.max(-104.0);
    let shifted = xc.mul_add(1.442695, 12582912.0);
    let scale = f32::from_bits((shifted.to_bits() - 0x4B400000u32 + 191) << 23);
    exp_reduced(xc, shifted) * scale * 5.421010862427522e-20
}

/// e^r for the reduced argument of `x`, given `shifted` = x log2 e + 1.5 · 2^23 (whose
/// rounding found k = round(x log2 e) without conversion instructions): Cody–Waite reduction
/// to |r| <= ln2/2, e^r = 1 + r + r^2 q(r) with q a degree-4 minimax polynomial.
fn exp_reduced(x: f32, shifted: f32) -> f32 {
    let k = shifted - 12582912.0;
    let r = k.mul_add(-0.6931471824645996, x);
    exp_poly(k.mul_add(1.904654299957768e-9, r))
}

/// e^r for |r| <= ln2/2 (a little beyond is fine): 1 + r + r^2 q(r) with q a degree-4
/// minimax polynomial.
fn exp_poly(r: f32) -> f32 {
    let mut q = r.mul_add(0.0013926175888627768, 0.008363173343241215);
    q = q.mul_add(r, 0.041666556149721146);
    q = q.mul_add(r, 0.16666577756404877);
    q = q.mul_add(r, 0.5);
    (q * r).mul_add(r, r) + 1.0
}

/// `x_sigmoid` for an exact argument `v` (no correction term).
fn x_sigmoid_exact(x: f32, v: f32) -> f32 {
    let e = exp_neg(-v.abs());
    let mut m = x;
    if v < 0.0 {
        m = x * e;
    }
    div_acc(m, 1.0 + e)
}

/// gelu(x) = x Φ(x), Φ(x) = erfc(-x/√2) / 2, through one erfc evaluation at
/// a = min(|x|, 14)/√2 for both signs (no divergent branch; beyond 14 the erfc term is below
/// 2^-140): erfc(a) = t e^{G(t) - a²} with t = 1 / (1 + a/2) in [1/6, 1] and G a degree-10
/// polynomial in t - 0.5833 (a Chebyshev fit made for this kernel, 6e-8 absolute with its
/// f32 coefficients). The exponent keeps its relative accuracy in the far tail: a² = x²/2
/// is exact as a rounded square and its fma residual, and the reduction
/// G - x²/2 - n ln2 takes -x²/2 - n ln2_hi exactly in one fma before adding G.
fn gelu(x: f32) -> f32 {
    let xc = x.abs().min(14.0);
    // t' = 2^63 t, from d' = 2^-63 (1 + a/2) in one fma: the scaling below adds n to its
    // exponent field, and the rest (2^-64, and 2^-1 for the halving of erfc) rides on t.
    let d = xc.mul_add(3.8332334761054374e-20, 1.0842021724855044e-19);
    let r0 = rcp_approx(d);
    let tp = r0.mul_add((-d).mul_add(r0, 1.0), r0);
    let s = tp.mul_add(1.0842021724855044e-19, -0.5833333);
    let mut g = s.mul_add(-0.1530061513185501, 0.1449953317642212);
    g = g.mul_add(s, 0.14647932350635529);
    g = g.mul_add(s, -0.24509058892726898);
    g = g.mul_add(s, -0.053275417536497116);
    g = g.mul_add(s, 0.295215904712677);
    g = g.mul_add(s, -0.034655313938856125);
    g = g.mul_add(s, -0.4073981046676636);
    g = g.mul_add(s, 0.09069091081619263);
    g = g.mul_add(s, 1.3687371015548706);
    g = g.mul_add(s, -0.5585953593254089);
    let x2 = xc * xc;
    let x2l = xc.mul_add(xc, -x2);
    let mh = -0.5 * x2;
    // n = round((G - a²) / ln2) in [-144, 0]; r = G - a² - n ln2 in about [-0.35, 0.35].
    let shifted = (g + mh).mul_add(1.442695, 12582912.0);
    let n = shifted - 12582912.0;
    let r = n.mul_add(-0.693145751953125, mh);
    let r = n.mul_add(-1.4286068203094172e-6, r + g);
    let r = (-0.5f32).mul_add(x2l, r);
    // t 2^(n+63) (normal: n >= -144) as an integer add to the exponent field of t', times
    // 2^-64 e^r: one rounding for subnormal results.
    let tn = f32::from_bits((shifted.to_bits() << 23) + tp.to_bits());
    let h = tn * exp_horner_m64(r);
    // x Φ(x) = max(x, 0) - |x| h for both signs (x h below 0, x - x h above, one rounding);
    // the clamped |x| keeps h = 0 · inf away (the term is below 2^-140 from |x| = 14 on).
    (-xc).mul_add(h, x.max(0.0))
}

/// 2^-64 · 2^f for |f| <= 0.52: 2^-64 (1 + f p(f)) with p a degree-5 minimax fit
/// (relative error 2.6e-9), the 2^-64 in the coefficients (exact, all normal).
fn exp2_poly_m64(f: f32) -> f32 {
    let mut p = f.mul_add(8.32077151077825e-24, 7.266394066583959e-23);
    p = p.mul_add(f, 5.2141938786681185e-22);
    p = p.mul_add(f, 3.0088341371930843e-21);
    p = p.mul_add(f, 1.3022703433444386e-20);
    p = p.mul_add(f, 3.757558405401626e-20);
    p.mul_add(f, 5.421010862427522e-20)
}

/// 2^(k + bias) for `shifted` = 1.5 · 2^23 + k (k a small integer, k + bias in [1, 254]):
/// k in the low bits of `shifted`, whose high bits vanish in the shift.
fn pow2_bits(shifted: f32, bias_bits: u32) -> f32 {
    f32::from_bits((shifted.to_bits() << 23) + bias_bits)
}

/// e^r for |r| <= 0.36: 1 + r p(r) with p a degree-5 minimax fit (relative error 2.6e-9),
/// one fma per degree.
fn exp_horner(r: f32) -> f32 {
    let mut p = r.mul_add(0.0013839947059750557, 0.008377335034310818);
    p = p.mul_add(r, 0.04166822135448456);
    p = p.mul_add(r, 0.16666392982006073);
    p = p.mul_add(r, 0.4999999403953552);
    p = p.mul_add(r, 1.0);
    p.mul_add(r, 1.0)
}

/// 2^-64 e^r: [`exp_horner`] with the 2^-64 in its coefficients (exact, all normal).
fn exp_horner_m64(r: f32) -> f32 {
    let mut p = r.mul_add(7.502650334632962e-23, 4.541362421919358e-22);
    p = p.mul_add(r, 2.2588388058069523e-21);
    p = p.mul_add(r, 9.034869739294074e-21);
    p = p.mul_add(r, 2.7105051080963343e-20);
    p = p.mul_add(r, 5.421010862427522e-20);
    p.mul_add(r, 5.421010862427522e-20)
}

/// e^{2u} for |u| <= 0.18: [`exp_horner`] at 2u, the powers of 2 in its coefficients.
fn exp_horner_2x(u: f32) -> f32 {
    let mut p = u.mul_add(0.08857566118240356, 0.26807472109794617);
    p = p.mul_add(u, 0.6666915416717529);
    p = p.mul_add(u, 1.3333114385604858);
    p = p.mul_add(u, 1.999999761581421);
    p = p.mul_add(u, 2.0);
    p.mul_add(u, 1.0)
}

/// gelu with the tanh approximation, as x · sigmoid(2u) = x · m / (1 + e) with
/// e = 2^{-|w|}, w = 2u log2 e = x (A + B x²), and m = 1 for x >= 0, e for x < 0 (no
/// cancellation, no overflow). For x < 0 the relative error of e is the relative error of
/// the result, so w is carried as h + r: h = |x| t rounded, t = A + B x² rounded, and r its
/// residual from exact fma parts (x² + x2l exactly, t's rounding error as B x² + (A - t),
/// with A a multiple of 2^-20 so that A - t is exact for t < 16, and the low parts of the
/// constants). e = 2^-k 2^f with k = round(h) and f = -(h - k) - r in [-0.52, 0.52].
fn gelu_tanh(x: f32) -> f32 {
    // Beyond 10.5, e^{-|w|} < 2^-143: the result is x or below 2^-139.
    let ax = x.abs().min(10.5);
    let x2 = ax * ax;
    let x2l = ax.mul_add(ax, -x2);
    let t = 0.10294324159622192f32.mul_add(x2, 2.3022079467773438);
    let h = ax * t;
    let dt = 0.10294324159622192f32.mul_add(x2, 2.3022079467773438 - t);
    let lo = (-2.016198319410023e-09f32).mul_add(x2, 2.513669699055754e-07);
    let s = 0.10294324159622192f32.mul_add(x2l, dt + lo);
    let r = ax.mul_add(s, ax.mul_add(t, -h));
    // -k in shifted's low bits: -h + 1.5 · 2^23 rounds h to an integer.
    let shifted = 12582912.0 - h;
    let mk = shifted - 12582912.0;
    let f = -((h + mk) + r);
    // 2^-64 2^f (normal), then 2^(64-k): one rounding where e is subnormal.
    let e = exp2_poly_m64(f) * pow2_bits(shifted, 191 << 23);
    let mut m = x;
    if x < 0.0 {
        m = (-ax) * e;
    }
    // m / (1 + e) with the residual m - (1 + e) q0 as (m - q0) - e q0 (m - q0 is exact:
    // q0 lies in [m/2, m]): the rounding of 1 + e only reaches the reciprocal.
    let rc = rcp_approx(1.0 + e);
    let q0 = m * rc;
    let res = (-e).mul_add(q0, m - q0);
    res.mul_add(rc, q0)
}

/// tanh, sign restored from |x|: below 0.6 an odd minimax polynomial x + x³ P(x²)
/// (degree 4 in x², relative error 3e-9); from 0.6 on (d - 2) / d with d = e^{2|x|} + 1
/// rounded once (d - 2 is then exact below |x| = 8.3, and tanh rounds to 1 from 9.01 on),
/// e^{2|x|} by Cody–Waite reduction and a degree-6 polynomial, the quotient by the
/// approximate reciprocal and one residual step. Both formed, one selected (a NaN takes
/// the polynomial and stays NaN).
fn tanh_acc(x: f32) -> f32 {
    let ax = x.abs();
    let x2 = ax * ax;
    let mut p = x2.mul_add(-0.005895158741623163, 0.020795973017811775);
    p = p.mul_add(x2, -0.053783830255270004);
    p = p.mul_add(x2, 0.13331924378871918);
    p = p.mul_add(x2, -0.33333298563957214);
    let small = (ax * x2).mul_add(p, ax);
    let ac = ax.min(9.5);
    let shifted = ac.mul_add(2.88539, 12582912.0);
    let k = shifted - 12582912.0;
    // u = |x| - k ln2 / 2 (the halves of the Cody–Waite constants), e^{2|x|} = 2^k e^{2u}.
    let u = k.mul_add(-0.3465735912322998, ac);
    let u = k.mul_add(9.523271060629668e-10, u);
    let d = exp_horner_2x(u).mul_add(pow2_bits(shifted, 127 << 23), 1.0);
    let n = d - 2.0;
    let rd = rcp_approx(d);
    let q0 = n * rd;
    let big = (-d).mul_add(q0, n).mul_add(rd, q0);
    let mut t = small;
    if ax >= 0.6 {
        t = big;
    }
    t.copysign(x)
}

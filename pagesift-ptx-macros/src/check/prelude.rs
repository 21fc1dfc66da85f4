//! The built-in prelude: accurate special functions written in the kernel language itself.
//! A method `x.name()` on `T` with no instruction of its own resolves to `__name_T` here and is
//! inlined like any helper. Accuracy (f32, against the correctly rounded result):
//!
//! - `exp`, `exp2`: ≤ 2 ulp (Cody–Waite reduction, degree-7 polynomial, exact scaling).
//! - `ln`: ≤ 1 ulp (musl's `logf` reduction and polynomial); `log2` = `ln` · log2(e), ≤ 2 ulp.
//! - `tanh`: ≤ 3 ulp (odd polynomial below 0.3, `1 - 2 / (e^{2|x|} + 1)` above).
//! - `erf`: absolute error ≤ 2e-7 (series below 1, Abramowitz–Stegun 7.1.26 above).
//! - `exp_fast`: `ex2.approx` of `x · log2(e)`, relative error ≤ 2e-6 · (1 + |x|) (the
//!   rounding of the product grows with |x|); `ln_fast`: `lg2.approx` times ln 2, absolute
//!   error ≤ 2^-22 · ln 2 + 1 ulp; `tanh_fast` below sm_75: absolute error ≤ 5e-7;
//!   `erf_fast`: absolute error ≤ 1e-6.

use crate::ctxt::Ctxt;
use crate::parse::Program;

/// The prelude source.
pub const PRELUDE: &str = r#"
fn __exp_scale_f32(p: f32, j: f32) -> f32 {
    // p * 2^j for integral j in [-151, 128], in two steps so each factor stays normal.
    let ji = j as i32;
    let j1 = ji / 2;
    let j2 = ji - j1;
    let s1 = f32::from_bits(((j1 + 127) << 23) as u32);
    let s2 = f32::from_bits(((j2 + 127) << 23) as u32);
    p * s1 * s2
}

fn __exp_poly_f32(r: f32) -> f32 {
    // e^r for |r| <= 0.35: Taylor series to degree 7 (truncation < 6e-9 relative).
    let mut p = r.mul_add(1.984127e-4, 1.3888889e-3);
    p = p.mul_add(r, 8.333333e-3);
    p = p.mul_add(r, 4.1666668e-2);
    p = p.mul_add(r, 0.16666667);
    p = p.mul_add(r, 0.5);
    p = p.mul_add(r, 1.0);
    p.mul_add(r, 1.0)
}

fn __exp_f32(x: f32) -> f32 {
    let xc = x.max(-104.0).min(89.0);
    let j = (xc * 1.442695).round_ties_even();
    let r = j.mul_add(-0.693145752, xc);
    let r = j.mul_add(-1.42860677e-6, r);
    let y = __exp_scale_f32(__exp_poly_f32(r), j);
    if x.is_nan() { x } else { y }
}

fn __exp2_f32(x: f32) -> f32 {
    let xc = x.max(-151.0).min(129.0);
    let j = xc.round_ties_even();
    let r = (xc - j) * 0.6931472;
    let y = __exp_scale_f32(__exp_poly_f32(r), j);
    if x.is_nan() { x } else { y }
}

fn __ln_f32(x: f32) -> f32 {
    let mut ix = x.to_bits();
    let mut k: i32 = 0;
    if x < 1.17549435e-38 {
        ix = (x * 8388608.0).to_bits();
        k = -23;
    }
    ix = ix + (0x3f800000u32 - 0x3f3504f3u32);
    k = k + ((ix >> 23) as i32) - 127;
    ix = (ix & 0x007fffff) + 0x3f3504f3;
    let f = f32::from_bits(ix) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * w.mul_add(0.24279079, 0.40000972);
    let t2 = z * w.mul_add(0.28498787, 0.6666666);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let dk = k as f32;
    let y = s * (hfsq + r) + dk * 9.0580006e-06 - hfsq + f + dk * 0.6931381;
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        y
    }
}

fn __log_f32(x: f32) -> f32 {
    __ln_f32(x)
}

fn __log_fast_f32(x: f32) -> f32 {
    x.log2_fast() * 0.6931472
}

fn __log2_f32(x: f32) -> f32 {
    __ln_f32(x) * 1.442695
}

fn __exp_fast_f32(x: f32) -> f32 {
    (x * 1.442695).exp2_fast()
}

fn __ln_fast_f32(x: f32) -> f32 {
    x.log2_fast() * 0.6931472
}

fn __tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    if a < 0.3 {
        let z = x * x;
        let mut p = z.mul_add(-8.8632355e-3, 2.1869489e-2);
        p = p.mul_add(z, -5.3968254e-2);
        p = p.mul_add(z, 0.13333334);
        p = p.mul_add(z, -0.33333334);
        (p * z).mul_add(x, x)
    } else if a < 9.0 {
        let e = __exp_f32(2.0 * a);
        (1.0 - 2.0 / (e + 1.0)).copysign(x)
    } else if x.is_nan() {
        x
    } else {
        (1.0f32).copysign(x)
    }
}

fn __tanh_fast_f32(x: f32) -> f32 {
    let e = (x.abs() * -2.8853900).exp2_fast();
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

fn __erf_f32(x: f32) -> f32 {
    let a = x.abs();
    if a < 1.0 {
        // 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), n <= 10.
        let z = x * x;
        let mut p = z.mul_add(1.3122532e-8, -1.4503852e-7);
        p = p.mul_add(z, 1.4589169e-6);
        p = p.mul_add(z, -1.3227513e-5);
        p = p.mul_add(z, 1.0683761e-4);
        p = p.mul_add(z, -7.5757576e-4);
        p = p.mul_add(z, 4.6296296e-3);
        p = p.mul_add(z, -2.3809524e-2);
        p = p.mul_add(z, 0.1);
        p = p.mul_add(z, -0.33333334);
        p = p.mul_add(z, 1.0);
        x * 1.1283792 * p
    } else if x.is_nan() {
        x
    } else {
        (1.0 - __erfc_as_f32(a, __exp_f32(-a * a))).copysign(x)
    }
}

fn __erfc_as_f32(a: f32, e: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26: erfc(a) ~ t (a1 + t (a2 + ...)) e^{-a^2}, t = 1 / (1 + p a).
    let t = 1.0 / 0.3275911f32.mul_add(a, 1.0);
    let mut q = t.mul_add(1.0614054, -1.4531521);
    q = q.mul_add(t, 1.4214138);
    q = q.mul_add(t, -0.28449672);
    q = q.mul_add(t, 0.2548296);
    q * t * e
}

fn __erf_fast_f32(x: f32) -> f32 {
    let a = x.abs();
    let r = 1.0 - __erfc_as_f32(a, __exp_fast_f32(-a * a));
    if x.is_nan() { x } else { r.min(1.0).copysign(x) }
}

fn __rsqrt_f32(x: f32) -> f32 {
    1.0 / x.sqrt()
}
"#;

/// Parses the prelude (its spans are those of the invocation).
pub fn parse_prelude() -> Program {
    let cx = Ctxt::new();
    let program = match syn::parse_str::<syn::File>(PRELUDE) {
        Ok(file) => crate::parse::parse_items(&cx, file.items),
        Err(_) => Program::default(),
    };
    // The prelude is tested to parse cleanly (`prelude_parses`).
    let _ = cx.finish();
    program
}

#[cfg(test)]
mod tests {
    #[test]
    fn prelude_parses() {
        let cx = crate::ctxt::Ctxt::new();
        let file = syn::parse_str::<syn::File>(super::PRELUDE).expect("the prelude is Rust syntax");
        let program = crate::parse::parse_items(&cx, file.items);
        assert!(cx.finish().is_empty());
        assert!(program.fns.len() >= 14);
    }
}

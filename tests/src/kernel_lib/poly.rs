//! A helper library in the kernel language, read by `ptx_kernel!` invocations that declare
//! `#[path = "src/kernel_lib/poly.rs"] mod poly;` (see `crate::language_kernels`).

/// The constant term of [`cubic`].
const C0: f32 = 0.5;

/// `c0 + x (c1 + x (c2 + x c3))` by Horner's rule with fused multiply-adds.
fn cubic(x: f32) -> f32 {
    let mut p = x.mul_add(C3, C2);
    p = p.mul_add(x, C1);
    p.mul_add(x, C0)
}

/// The coefficients of [`cubic`] above the constant term.
const C1: f32 = -1.25;
const C2: f32 = 0.375;
const C3: f32 = 0.0625;

/// `cubic(x)` clamped to `[lo, hi]`.
fn clamped(x: f32, lo: f32, hi: f32) -> f32 {
    cubic(x).max(lo).min(hi)
}

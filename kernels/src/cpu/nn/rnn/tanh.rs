//! `tanh` over `f32` slices, vectorized: the rational approximation ONNX Runtime's MLAS and
//! Eigen use (`x · P(x²) / Q(x²)` on `x` clamped to ±9, where `tanh` is ±1 in `f32`; within
//! 4e-7 of the exact value relative to it), written
//! branch-free so that the loop compiles to 8- or 16-wide SIMD. The cells call it on every gate
//! of every step, where `libm`'s scalar `tanhf` cost more than the recurrent product for
//! small hidden sizes.

/// `P`'s coefficients, `x¹` to `x¹³`.
const ALPHA: [f32; 7] = [
    4.893_524_6e-3,
    6.372_619_3e-4,
    1.485_722_4e-5,
    5.122_297e-8,
    -8.604_672e-11,
    2.000_188e-13,
    -2.760_768_5e-16,
];
/// `Q`'s coefficients, `x⁰` to `x⁶`.
const BETA: [f32; 4] = [4.893_525e-3, 2.268_434_7e-3, 1.185_347e-4, 1.198_258_4e-6];

#[inline(always)]
fn tanh_portable(xs: &mut [f32]) {
    for v in xs {
        let x = v.clamp(-9.0, 9.0);
        let x2 = x * x;
        let mut p = ALPHA[6];
        for &a in ALPHA[..6].iter().rev() {
            p = p * x2 + a;
        }
        let q = ((BETA[3] * x2 + BETA[2]) * x2 + BETA[1]) * x2 + BETA[0];
        // `clamp` keeps a NaN; the quotient overshoots 1 by an ulp near the clamp.
        *v = (x * p / q).clamp(-1.0, 1.0);
    }
}

/// `xs[i] ← tanh(xs[i])`, within a few ulp.
pub(super) fn tanh_in_place(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,fma")]
        fn avx512(xs: &mut [f32]) {
            tanh_portable(xs)
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2(xs: &mut [f32]) {
            tanh_portable(xs)
        }
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX-512F and FMA.
            return unsafe { avx512(xs) };
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { avx2(xs) };
        }
    }
    tanh_portable(xs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_exact_tanh() {
        let xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 6e-5).collect();
        let mut ys = xs.clone();
        super::tanh_in_place(&mut ys);
        let mut worst = 0f64;
        for (&x, &y) in xs.iter().zip(&ys) {
            let exact = (x as f64).tanh();
            let err = (y as f64 - exact).abs() / exact.abs().max(1e-30);
            worst = worst.max(if x == 0.0 { y.abs() as f64 } else { err });
        }
        assert!(worst < 2e-6, "relative error {worst:e}");
        let mut edge = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 50.0, -50.0, 0.0];
        super::tanh_in_place(&mut edge);
        assert!(edge[0].is_nan());
        assert_eq!(edge[1..], [1.0, -1.0, 1.0, -1.0, 0.0]);
    }
}

//! [`Real`]: the floating-point types the float unary kernels compute in (`f32`, `f64`;
//! half types are widened to `f32` first).

use super::vector_exp;

/// A floating-point compute type.
pub trait Real: num_traits::Float + Send + Sync + std::fmt::Debug + 'static {
    /// Converts a constant (an attribute value) to this type.
    fn of(v: f64) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// Rounds to the nearest integer, halves to even.
    fn round_even(self) -> Self;
    /// `xs[i] ← e^(xs[i] + shift)` for every element.
    fn exp_slice(xs: &mut [Self], shift: Self) {
        xs.iter_mut().for_each(|v| *v = (*v + shift).exp());
    }
    /// `xs[i] ← 1 / (1 + e^-xs[i])` for every element.
    fn sigmoid_slice(xs: &mut [Self]) {
        xs.iter_mut()
            .for_each(|v| *v = Self::one() / (Self::one() + (-*v).exp()));
    }
    /// `xs[i] ← erf(xs[i])` for every element.
    fn erf_slice(xs: &mut [Self]) {
        xs.iter_mut().for_each(|v| *v = v.erf());
    }
    /// `xs[i] ← x · (1 + erf(x / √2)) / 2` for every element `x` (GELU, exact form).
    fn gelu_slice(xs: &mut [Self]) {
        let (half, one) = (Self::of(0.5), Self::one());
        let inv_sqrt2 = Self::of(std::f64::consts::FRAC_1_SQRT_2);
        xs.iter_mut()
            .for_each(|v| *v = half * *v * (one + (*v * inv_sqrt2).erf()));
    }
    /// The sum of `xs` (in any order).
    fn sum_slice(xs: &[Self]) -> Self {
        xs.iter().fold(Self::zero(), |a, &b| a + b)
    }
    /// Softmax over each row of `len` elements of `x`, written to `out` (as long as `x`):
    /// `e^(x - max)` over the row's sum.
    fn softmax_rows(out: &mut [Self], x: &[Self], len: usize) {
        for (o, r) in out.chunks_exact_mut(len).zip(x.chunks_exact(len)) {
            let max = row_max(r);
            o.iter_mut().zip(r).for_each(|(o, &v)| *o = v - max);
            Self::exp_slice(o, Self::zero());
            let inv = Self::one() / Self::sum_slice(o);
            o.iter_mut().for_each(|v| *v = *v * inv);
        }
    }
}

/// The largest element of `x` (NaNs ignored, as `v > max` never holds for them), in eight
/// interleaved lanes so that it vectorizes.
#[inline(always)]
pub fn row_max<F: Real>(x: &[F]) -> F {
    let mut lanes = [F::neg_infinity(); 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            if v > *l {
                *l = v;
            }
        }
    }
    lanes
        .into_iter()
        .chain(chunks.remainder().iter().copied())
        .fold(F::neg_infinity(), |m, v| if v > m { v } else { m })
}

impl Real for f32 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn erf(self) -> Self {
        libm::erff(self)
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        self.round_ties_even()
    }
    fn exp_slice(xs: &mut [Self], shift: Self) {
        vector_exp::exp_in_place(xs, shift);
    }
    fn sigmoid_slice(xs: &mut [Self]) {
        vector_exp::sigmoid_in_place(xs);
    }
    fn sum_slice(xs: &[Self]) -> Self {
        vector_exp::sum(xs)
    }
    fn softmax_rows(out: &mut [Self], x: &[Self], len: usize) {
        vector_exp::softmax_rows(out, x, len);
    }
    fn erf_slice(xs: &mut [Self]) {
        vector_exp::erf_in_place(xs);
    }
    fn gelu_slice(xs: &mut [Self]) {
        vector_exp::gelu_in_place(xs);
    }
}

impl Real for f64 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        self.round_ties_even()
    }
}

//! [`Real`]: the floating-point types the float unary kernels compute in (`f32`, `f64`;
//! half types are widened to `f32` first).

/// A floating-point compute type.
pub trait Real: num_traits::Float + Send + Sync + std::fmt::Debug + 'static {
    /// Converts a constant (an attribute value) to this type.
    fn of(v: f64) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// Rounds to the nearest integer, halves to even.
    fn round_even(self) -> Self;
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

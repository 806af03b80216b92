//! [`Arith`]: the per-element-type arithmetic that the binary kernels need, with ONNX
//! Runtime / numpy semantics (wrapping integers, C-style truncating integer division,
//! NaN-propagating max/min, half types computed in `f32`).

use half::{bf16, f16};

/// Arithmetic on one numeric element type.
pub trait Arith: Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    /// Additive identity.
    const ZERO: Self;
    /// True for the floating-point types.
    const IS_FLOAT: bool;
    /// `a + b` (wrapping for integers).
    fn add(self, o: Self) -> Self;
    /// `a - b` (wrapping for integers).
    fn sub(self, o: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(self, o: Self) -> Self;
    /// `a / b`; integers truncate toward zero and give 0 when dividing by 0.
    fn div(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`); 0 for an integer divisor of 0.
    fn rem_trunc(self, o: Self) -> Self;
    /// Remainder with the sign of the divisor (numpy `mod`); 0 for an integer divisor of 0.
    fn rem_floor(self, o: Self) -> Self;
    /// Larger of the two; NaN if either is NaN.
    fn max_nan(self, o: Self) -> Self;
    /// Smaller of the two; NaN if either is NaN.
    fn min_nan(self, o: Self) -> Self;
    /// The value as `f64` (rounded for large 64-bit integers).
    fn to_f64(self) -> f64;
    /// The value from `f64` (Rust `as`: truncating and saturating for integers).
    fn from_f64(v: f64) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0;
            const IS_FLOAT: bool = false;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline(always)]
            fn rem_trunc(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_rem(o) } }
            #[inline(always)]
            #[allow(unused_comparisons, clippy::absurd_extreme_comparisons)]
            fn rem_floor(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                if r != 0 && ((r < 0) != (o < 0)) { r.wrapping_add(o) } else { r }
            }
            #[inline(always)]
            fn max_nan(self, o: Self) -> Self { if o > self { o } else { self } }
            #[inline(always)]
            fn min_nan(self, o: Self) -> Self { if o < self { o } else { self } }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}

int_arith!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const IS_FLOAT: bool = true;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn div(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn rem_trunc(self, o: Self) -> Self { self % o }
            #[inline(always)]
            fn rem_floor(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) { r + o } else { r }
            }
            #[inline(always)]
            fn max_nan(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN } else if o > self { o } else { self }
            }
            #[inline(always)]
            fn min_nan(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN } else if o < self { o } else { self }
            }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}

float_arith!(f32, f64);

macro_rules! half_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = <$t>::ZERO;
            const IS_FLOAT: bool = true;
            #[inline(always)]
            fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline(always)]
            fn rem_trunc(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() % o.to_f32()) }
            #[inline(always)]
            fn rem_floor(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().rem_floor(o.to_f32()))
            }
            #[inline(always)]
            fn max_nan(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().max_nan(o.to_f32()))
            }
            #[inline(always)]
            fn min_nan(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().min_nan(o.to_f32()))
            }
            #[inline(always)]
            fn to_f64(self) -> f64 { self.to_f64() }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
        }
    )*};
}

half_arith!(f16, bf16);

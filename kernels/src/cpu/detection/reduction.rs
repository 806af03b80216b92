//! The `reduction` attribute of ScatterND and ScatterElements, and how each element type applies it.

use half::{bf16, f16};

use crate::Attributes;
use crate::error::{KernelError, Result};

/// How a scatter combines an update with the value already at its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduction {
    /// The update replaces the value.
    None,
    /// `out += update`.
    Add,
    /// `out *= update`.
    Mul,
    /// `out = max(out, update)`.
    Max,
    /// `out = min(out, update)`.
    Min,
}

impl Reduction {
    /// Reads `reduction` (present from opset 16; `max`/`min` from opset 18).
    pub(crate) fn from_attrs(attrs: &Attributes, opset: i64) -> Result<Self> {
        let value = attrs.string("reduction", "none")?;
        let (reduction, since) = match value.as_str() {
            "none" => (Reduction::None, 16),
            "add" => (Reduction::Add, 16),
            "mul" => (Reduction::Mul, 16),
            "max" => (Reduction::Max, 18),
            "min" => (Reduction::Min, 18),
            other => {
                return Err(KernelError::UnsupportedAttribute {
                    name: "reduction".into(),
                    reason: format!("unknown value '{other}'"),
                });
            }
        };
        if attrs.has("reduction") && opset < since {
            return Err(KernelError::UnsupportedAttribute {
                name: "reduction".into(),
                reason: format!("'{value}' needs opset {since}, the model imports {opset}"),
            });
        }
        Ok(reduction)
    }
}

/// An element type that supports the arithmetic reductions.
pub(crate) trait Combine: Copy {
    /// `self ⊕ update` under `r` (`r` is never [`Reduction::None`] here, which just assigns).
    fn combine(self, update: Self, r: Reduction) -> Self;
}

macro_rules! impl_combine_int {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline]
            fn combine(self, u: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => u,
                    Reduction::Add => self.wrapping_add(u),
                    Reduction::Mul => self.wrapping_mul(u),
                    Reduction::Max => self.max(u),
                    Reduction::Min => self.min(u),
                }
            }
        }
    )*};
}
impl_combine_int!(u8, i8, u16, i16, i32, i64, u32, u64);

// Max/min follow `std::max(a, b)` / `std::min(a, b)` as ONNX Runtime does: a NaN update
// leaves the old value in place.
macro_rules! impl_combine_float {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline]
            fn combine(self, u: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => u,
                    Reduction::Add => self + u,
                    Reduction::Mul => self * u,
                    Reduction::Max => if self < u { u } else { self },
                    Reduction::Min => if u < self { u } else { self },
                }
            }
        }
    )*};
}
impl_combine_float!(f32, f64);

macro_rules! impl_combine_half {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline]
            fn combine(self, u: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => u,
                    Reduction::Add => <$t>::from_f32(self.to_f32() + u.to_f32()),
                    Reduction::Mul => <$t>::from_f32(self.to_f32() * u.to_f32()),
                    Reduction::Max => if self < u { u } else { self },
                    Reduction::Min => if u < self { u } else { self },
                }
            }
        }
    )*};
}
impl_combine_half!(f16, bf16);

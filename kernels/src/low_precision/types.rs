//! The element types: one `Copy` newtype per format, one byte per element in memory.

use super::e8m0::{self, E8M0Rounding};
use super::minifloat::{E2M1, E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, MiniFloat};
use super::small_int;
use crate::Element;

/// What every low-precision element type shares: a code of at most eight bits.
pub trait LowPrecision: Element + Copy + PartialEq {
    /// Bits per element in ONNX storage: 8, 4 or 2.
    const BITS: u32;
    /// The element whose code is the low [`BITS`](Self::BITS) bits of `code`.
    fn from_code(code: u8) -> Self;
    /// The code, in the low [`BITS`](Self::BITS) bits.
    fn code(self) -> u8;
    /// The exact value; NaN for a NaN code.
    fn value(self) -> f64;
}

macro_rules! minifloat_type {
    ($(#[$doc:meta])* $name:ident, $format:expr, $bits:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            const FORMAT: MiniFloat = $format;
            const MASK: u8 = ((1u16 << $bits) - 1) as u8;

            /// The element with these bits (bits above the format's width are ignored).
            pub const fn from_bits(bits: u8) -> Self {
                $name(bits & Self::MASK)
            }

            /// The raw bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// The exact value as `f64` (NaN keeps the encoding's sign).
            pub fn to_f64(self) -> f64 {
                Self::FORMAT.decode(self.0)
            }

            /// The value as `f32` (exact: every value of the format is an `f32`).
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }

            /// True for a NaN code.
            pub fn is_nan(self) -> bool {
                self.to_f64().is_nan()
            }
        }

        impl LowPrecision for $name {
            const BITS: u32 = $bits;
            fn from_code(code: u8) -> Self {
                Self::from_bits(code)
            }
            fn code(self) -> u8 {
                self.0
            }
            fn value(self) -> f64 {
                self.to_f64()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:#04x} = {})", stringify!($name), self.0, self.to_f64())
            }
        }
    };
}

macro_rules! float8_saturating {
    ($name:ident) => {
        impl $name {
            /// Rounds `x` to nearest, ties to even. `saturate` is the ONNX `Cast` attribute:
            /// out-of-range values and ±infinity become ±max with it, and ±infinity or NaN
            /// (as the format allows) without it.
            pub fn from_f64(x: f64, saturate: bool) -> Self {
                $name(Self::FORMAT.encode(x, saturate))
            }

            /// [`from_f64`](Self::from_f64) for an `f32` (converted exactly first).
            pub fn from_f32(x: f32, saturate: bool) -> Self {
                Self::from_f64(f64::from(x), saturate)
            }
        }
    };
}

minifloat_type!(
    /// float8 E4M3FN (ONNX `FLOAT8E4M3FN` = 17): bias 7, max 448, NaN `S.1111.111`, no
    /// infinity.
    F8E4M3Fn, E4M3FN, 8
);
float8_saturating!(F8E4M3Fn);
minifloat_type!(
    /// float8 E4M3FNUZ (ONNX `FLOAT8E4M3FNUZ` = 18): bias 8, max 240, NaN `0x80`, no
    /// infinity, no negative zero.
    F8E4M3FnUz, E4M3FNUZ, 8
);
float8_saturating!(F8E4M3FnUz);
minifloat_type!(
    /// float8 E5M2 (ONNX `FLOAT8E5M2` = 19): IEEE-like, bias 15, max 57344, ±infinity.
    F8E5M2, E5M2, 8
);
float8_saturating!(F8E5M2);
minifloat_type!(
    /// float8 E5M2FNUZ (ONNX `FLOAT8E5M2FNUZ` = 20): bias 16, max 57344, NaN `0x80`, no
    /// infinity, no negative zero.
    F8E5M2FnUz, E5M2FNUZ, 8
);
float8_saturating!(F8E5M2FnUz);
minifloat_type!(
    /// float4 E2M1 (ONNX `FLOAT4E2M1` = 23): ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no NaN, no
    /// infinity. The code sits in the low four bits.
    F4E2M1, E2M1, 4
);

impl F4E2M1 {
    /// Rounds `x` to nearest, ties to even, saturating at ±6 (±infinity too). NaN has no
    /// code: it becomes a zero of the opposite sign, as `ml_dtypes` (the ONNX reference
    /// outputs) does.
    pub fn from_f64(x: f64) -> Self {
        F4E2M1(Self::FORMAT.encode(x, true))
    }

    /// [`from_f64`](Self::from_f64) for an `f32`.
    pub fn from_f32(x: f32) -> Self {
        Self::from_f64(f64::from(x))
    }
}

/// float8 E8M0 (ONNX `FLOAT8E8M0` = 24): `2^(e - 127)` for bits `e` in `0..=254`, NaN
/// `0xFF`; no sign, no zero. Its default (bits 0) is therefore `2^-127`, not zero.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F8E8M0(u8);

impl F8E8M0 {
    /// The element with these bits.
    pub const fn from_bits(bits: u8) -> Self {
        F8E8M0(bits)
    }

    /// The raw bits.
    pub const fn to_bits(self) -> u8 {
        self.0
    }

    /// The exact value as `f64`.
    pub fn to_f64(self) -> f64 {
        e8m0::decode(self.0)
    }

    /// The value as `f32` (`2^-127` is an `f32` subnormal, still exact).
    pub fn to_f32(self) -> f32 {
        self.to_f64() as f32
    }

    /// True for `0xFF`.
    pub fn is_nan(self) -> bool {
        self.0 == e8m0::NAN_BITS
    }

    /// The power of two for `|x|` picked by `rounding`; see [`E8M0Rounding`] and the module
    /// notes for `saturate`.
    pub fn from_f64(x: f64, saturate: bool, rounding: E8M0Rounding) -> Self {
        F8E8M0(e8m0::encode_f64(x, saturate, rounding))
    }

    /// Like [`from_f64`](Self::from_f64) for an integer, exactly.
    pub fn from_int(v: i128, saturate: bool, rounding: E8M0Rounding) -> Self {
        F8E8M0(e8m0::encode_int(v, saturate, rounding))
    }
}

impl LowPrecision for F8E8M0 {
    const BITS: u32 = 8;
    fn from_code(code: u8) -> Self {
        F8E8M0(code)
    }
    fn code(self) -> u8 {
        self.0
    }
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl std::fmt::Debug for F8E8M0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "F8E8M0({:#04x} = {})", self.0, self.to_f64())
    }
}

macro_rules! small_int_type {
    ($(#[$doc:meta])* $name:ident, $repr:ty, $bits:expr, $signed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        pub struct $name($repr);

        impl $name {
            /// The smallest value.
            pub const MIN: $name = $name((if $signed { -(1i16 << ($bits - 1)) } else { 0 }) as $repr);
            /// The largest value.
            pub const MAX: $name =
                $name((if $signed { (1i16 << ($bits - 1)) - 1 } else { (1i16 << $bits) - 1 }) as $repr);

            /// Keeps the low bits of `v` (two's complement), as ONNX narrowing casts do.
            pub fn new_wrapping(v: i128) -> Self {
                $name(small_int::wrap(v, $bits, $signed) as $repr)
            }

            /// Rounds to the nearest integer, ties to even, then wraps (the ONNX rule for
            /// casts to this type); NaN and ±infinity give 0.
            pub fn from_f64(x: f64) -> Self {
                $name(small_int::from_f64(x, $bits, $signed) as $repr)
            }

            /// The value.
            pub const fn get(self) -> $repr {
                self.0
            }

            /// The element whose two's complement code is the low bits of `bits`.
            pub fn from_bits(bits: u8) -> Self {
                Self::new_wrapping(i128::from(bits))
            }

            /// The two's complement code, in the low bits.
            pub const fn to_bits(self) -> u8 {
                (self.0 as u8) & (((1u16 << $bits) - 1) as u8)
            }
        }

        impl LowPrecision for $name {
            const BITS: u32 = $bits;
            fn from_code(code: u8) -> Self {
                Self::from_bits(code)
            }
            fn code(self) -> u8 {
                self.to_bits()
            }
            fn value(self) -> f64 {
                f64::from(self.0)
            }
        }
    };
}

small_int_type!(
    /// 4-bit signed integer (ONNX `INT4` = 22), -8..=7.
    I4, i8, 4, true
);
small_int_type!(
    /// 4-bit unsigned integer (ONNX `UINT4` = 21), 0..=15.
    U4, u8, 4, false
);
small_int_type!(
    /// 2-bit signed integer (ONNX `INT2` = 26), -2..=1.
    I2, i8, 2, true
);
small_int_type!(
    /// 2-bit unsigned integer (ONNX `UINT2` = 25), 0..=3.
    U2, u8, 2, false
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spot_values() {
        assert_eq!(F8E4M3Fn::from_f32(448.0, true).to_bits(), 0x7E);
        assert_eq!(F8E5M2::from_f32(57344.0, true).to_bits(), 0x7B);
        assert_eq!(F8E4M3Fn::from_bits(0x7E).to_f32(), 448.0);
        assert!(F8E4M3Fn::from_bits(0x7F).is_nan());
        assert!(F8E4M3FnUz::from_bits(0x80).is_nan());
        assert!(!F8E4M3FnUz::from_bits(0x00).is_nan());
        assert_eq!(F4E2M1::from_f32(-6.5).to_bits(), 0xF);
        assert_eq!(F4E2M1::from_bits(0xFF).to_bits(), 0xF);
        assert_eq!(
            F8E8M0::from_f64(1.1, true, E8M0Rounding::Up).to_bits(),
            0x80
        );
        assert_eq!(F8E8M0::from_bits(0).to_f32(), 2f32.powi(-127));
    }

    #[test]
    fn small_int_codes() {
        assert_eq!((I4::MIN.get(), I4::MAX.get()), (-8, 7));
        assert_eq!((U4::MIN.get(), U4::MAX.get()), (0, 15));
        assert_eq!((I2::MIN.get(), I2::MAX.get()), (-2, 1));
        assert_eq!((U2::MIN.get(), U2::MAX.get()), (0, 3));
        assert_eq!(I4::from_bits(0x8).get(), -8);
        assert_eq!(I4::new_wrapping(-1).to_bits(), 0xF);
        assert_eq!(I2::from_bits(0b10).get(), -2);
        assert_eq!(I2::new_wrapping(-1).to_bits(), 0b11);
        assert_eq!(U2::from_bits(0xFF).get(), 3);
        assert_eq!(I4::from_f64(-9.0).get(), 7);
        assert_eq!(U4::from_f64(-9.0).get(), 7);
    }
}

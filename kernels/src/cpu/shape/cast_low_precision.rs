//! Cast conversions of the low-precision element types (float8, float4, 4- and 2-bit
//! integers), through the same [`Wide`] intermediate as every other type.
//!
//! Targets follow the ONNX rules rather than numpy's: float8 rounds to nearest even and
//! obeys `saturate`; float8 E8M0 obeys `round_mode` and `saturate`; float4 always saturates;
//! the 4- and 2-bit integers round floats to nearest even and wrap (see
//! [`crate::low_precision`]). Every value of these types is exact in `f64`, so reading them
//! is exact. Strings print like the other floats (shortest round-trip digits) and parse as
//! numbers (integers only for the integer types, like the wider integer types).

use super::cast::{CastElem, CastMode, Wide, float_text, parse_err, parse_float};
use crate::error::Result;
use crate::low_precision::{
    F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz, F8E8M0, I2, I4, U2, U4,
};
use crate::{DType, Element};

macro_rules! float8_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_wide(self) -> Wide {
                Wide::Float(self.to_f64())
            }
            fn from_wide(w: Wide, mode: CastMode) -> Self {
                match w {
                    // Integers beyond 2^53 round on the way to f64, but they are far past
                    // every float8 maximum, so the result is the same.
                    Wide::Int(i) => <$t>::from_f64(i as f64, mode.saturate),
                    Wide::Float(f) => <$t>::from_f64(f, mode.saturate),
                }
            }
            fn to_text(self) -> String {
                float_text(self.to_f64(), DType::F32)
            }
            fn parse_text(s: &str, mode: CastMode) -> Result<Self> {
                parse_float(s)
                    .map(|f| <$t>::from_f64(f, mode.saturate))
                    .ok_or_else(|| parse_err(s, <$t as Element>::DTYPE))
            }
        }
    )*};
}
float8_elem!(F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz);

impl CastElem for F4E2M1 {
    fn to_wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
    fn from_wide(w: Wide, _: CastMode) -> Self {
        match w {
            Wide::Int(i) => F4E2M1::from_f64(i as f64),
            Wide::Float(f) => F4E2M1::from_f64(f),
        }
    }
    fn to_text(self) -> String {
        float_text(self.to_f64(), DType::F32)
    }
    fn parse_text(s: &str, _: CastMode) -> Result<Self> {
        parse_float(s)
            .map(F4E2M1::from_f64)
            .ok_or_else(|| parse_err(s, DType::F4E2M1))
    }
}

impl CastElem for F8E8M0 {
    fn to_wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
    fn from_wide(w: Wide, mode: CastMode) -> Self {
        match w {
            Wide::Int(i) => F8E8M0::from_int(i, mode.saturate, mode.rounding),
            Wide::Float(f) => F8E8M0::from_f64(f, mode.saturate, mode.rounding),
        }
    }
    fn to_text(self) -> String {
        float_text(self.to_f64(), DType::F32)
    }
    fn parse_text(s: &str, mode: CastMode) -> Result<Self> {
        parse_float(s)
            .map(|f| F8E8M0::from_f64(f, mode.saturate, mode.rounding))
            .ok_or_else(|| parse_err(s, DType::F8E8M0))
    }
}

macro_rules! small_int_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_wide(self) -> Wide {
                Wide::Int(i128::from(self.get()))
            }
            fn from_wide(w: Wide, _: CastMode) -> Self {
                match w {
                    Wide::Int(i) => <$t>::new_wrapping(i),
                    Wide::Float(f) => <$t>::from_f64(f),
                }
            }
            fn to_text(self) -> String {
                self.get().to_string()
            }
            fn parse_text(s: &str, _: CastMode) -> Result<Self> {
                s.trim()
                    .parse::<i128>()
                    .map(<$t>::new_wrapping)
                    .map_err(|_| parse_err(s, <$t as Element>::DTYPE))
            }
        }
    )*};
}
small_int_elem!(I4, U4, I2, U2);

#[cfg(test)]
mod tests {
    //! Whole-tensor casts through the kernel; the expected bits are the ONNX backend node
    //! tests' (`test_cast_*`), checked by hand against the format tables.
    use super::super::cast::{CastMode, cast_tensor, cast_tensor_with};
    use crate::low_precision::{self, E8M0Rounding};
    use crate::{DType, Tensor};
    use half::f16;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap()
    }

    const INPUTS: [f32; 15] = [
        0.478_925_47,
        0.480_336_67,
        0.499_684_87,
        0.819_105_45,
        0.470_312_48,
        0.722_903_8,
        1e6,
        1e-7,
        f32::NAN,
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1e-7,
        1e-7,
        -1e6,
    ];

    fn bits(t: &Tensor) -> Vec<u8> {
        low_precision::codes(t).unwrap()
    }

    #[test]
    fn float_to_float8_saturating() {
        let x = f32s(&INPUTS);
        let cases: [(DType, [u8; 15]); 4] = [
            (
                DType::F8E4M3Fn,
                [
                    0x2F, 0x2F, 0x30, 0x35, 0x2F, 0x34, 0x7E, 0x00, 0x7F, 0x7E, 0x7E, 0xFE, 0x80,
                    0x00, 0xFE,
                ],
            ),
            (
                DType::F8E4M3FnUz,
                [
                    0x37, 0x37, 0x38, 0x3D, 0x37, 0x3C, 0x7F, 0x00, 0x80, 0x7F, 0x7F, 0xFF, 0x00,
                    0x00, 0xFF,
                ],
            ),
            (
                DType::F8E5M2,
                [
                    0x38, 0x38, 0x38, 0x3B, 0x38, 0x3A, 0x7B, 0x00, 0x7E, 0x7B, 0x7B, 0xFB, 0x80,
                    0x00, 0xFB,
                ],
            ),
            (
                DType::F8E5M2FnUz,
                [
                    0x3C, 0x3C, 0x3C, 0x3F, 0x3C, 0x3E, 0x7F, 0x00, 0x80, 0x7F, 0x7F, 0xFF, 0x00,
                    0x00, 0xFF,
                ],
            ),
        ];
        for (to, want) in cases {
            assert_eq!(bits(&cast_tensor(&x, to).unwrap()), want, "{to}");
        }
    }

    #[test]
    fn float_to_float8_without_saturation() {
        let x = f32s(&INPUTS);
        let mode = CastMode {
            saturate: false,
            ..CastMode::default()
        };
        let cases: [(DType, [u8; 15]); 4] = [
            (
                DType::F8E4M3Fn,
                [
                    0x2F, 0x2F, 0x30, 0x35, 0x2F, 0x34, 0x7F, 0x00, 0x7F, 0x7F, 0x7F, 0xFF, 0x80,
                    0x00, 0xFF,
                ],
            ),
            (
                DType::F8E4M3FnUz,
                [
                    0x37, 0x37, 0x38, 0x3D, 0x37, 0x3C, 0x80, 0x00, 0x80, 0x80, 0x80, 0x80, 0x00,
                    0x00, 0x80,
                ],
            ),
            (
                DType::F8E5M2,
                [
                    0x38, 0x38, 0x38, 0x3B, 0x38, 0x3A, 0x7C, 0x00, 0x7E, 0x7C, 0x7C, 0xFC, 0x80,
                    0x00, 0xFC,
                ],
            ),
            (
                DType::F8E5M2FnUz,
                [
                    0x3C, 0x3C, 0x3C, 0x3F, 0x3C, 0x3E, 0x80, 0x00, 0x80, 0x80, 0x80, 0x80, 0x00,
                    0x00, 0x80,
                ],
            ),
        ];
        for (to, want) in cases {
            assert_eq!(bits(&cast_tensor_with(&x, to, mode).unwrap()), want, "{to}");
        }
    }

    #[test]
    fn float_to_float4_and_back() {
        let x = f32s(&[0.48, 0.25, 1.05, -3.5, -8.0, 9.0, 1e6, 1e-7, f32::NAN, -0.0]);
        let f4 = cast_tensor(&x, DType::F4E2M1).unwrap();
        // 0.48 -> 0.5, 0.25 ties to 0 (even), 1.05 -> 1, -3.5 ties to -4 (even), ±big -> ±6,
        // NaN -> -0 (ml_dtypes' choice, the node test's expectation), -0 stays -0.
        assert_eq!(
            bits(&f4),
            [0x1, 0x0, 0x2, 0xE, 0xF, 0x7, 0x7, 0x0, 0x8, 0x8]
        );
        let back = cast_tensor(&f4, DType::F32).unwrap();
        let v: Vec<f32> = back.view::<f32>().unwrap().iter().copied().collect();
        assert_eq!(v, [0.5, 0.0, 1.0, -4.0, -6.0, 6.0, 6.0, 0.0, -0.0, -0.0]);
    }

    #[test]
    fn float8_to_float16_is_exact() {
        let codes = vec![0x2F, 0x7E, 0x7F, 0x80, 0x01];
        let t = low_precision::from_codes(DType::F8E4M3Fn, &[5], codes).unwrap();
        let h = cast_tensor(&t, DType::F16).unwrap();
        let v: Vec<f16> = h.view::<f16>().unwrap().iter().copied().collect();
        assert_eq!(v[0].to_f32(), 0.46875);
        assert_eq!(v[1].to_f32(), 448.0);
        assert!(v[2].is_nan());
        assert!(v[3].to_f32() == 0.0 && v[3].is_sign_negative());
        assert_eq!(v[4].to_f32(), 2f32.powi(-9));
    }

    #[test]
    fn small_int_casts_round_and_wrap() {
        let x = f32s(&[-9.0, -8.0, 7.0, 8.0, 15.0, 2.5, 3.5, -0.5]);
        let i4 = cast_tensor(&x, DType::I4).unwrap();
        assert_eq!(
            low_precision::values(&i4).unwrap(),
            [7.0, -8.0, 7.0, -8.0, -1.0, 2.0, 4.0, 0.0]
        );
        let u4 = cast_tensor(&x, DType::U4).unwrap();
        assert_eq!(
            low_precision::values(&u4).unwrap(),
            [7.0, 8.0, 7.0, 8.0, 15.0, 2.0, 4.0, 0.0]
        );
        let x = f32s(&[-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
        let i2 = cast_tensor(&x, DType::I2).unwrap();
        assert_eq!(
            low_precision::values(&i2).unwrap(),
            [1.0, -2.0, -1.0, 0.0, 1.0, -2.0, -1.0]
        );
        let u2 = cast_tensor(&x, DType::U2).unwrap();
        assert_eq!(
            low_precision::values(&u2).unwrap(),
            [1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]
        );
        // int -> int4 wraps; int4 -> int8 sign-extends.
        let i = Tensor::from_shape_vec(&[3], vec![300i64, -9, 17]).unwrap();
        let i4 = cast_tensor(&i, DType::I4).unwrap();
        assert_eq!(bits(&i4), [0xC, 0x7, 0x1]);
        let i8s = cast_tensor(&i4, DType::I8).unwrap();
        assert_eq!(i8s, Tensor::from_shape_vec(&[3], vec![-4i8, 7, 1]).unwrap());
    }

    #[test]
    fn e8m0_follows_round_mode() {
        let x = f32s(&[0.0, 0.124, 0.25, 0.5, 1.1, 2.0, 4.0, 8.0]);
        let up = cast_tensor(&x, DType::F8E8M0).unwrap();
        assert_eq!(bits(&up), [0x00, 0x7C, 0x7D, 0x7E, 0x80, 0x80, 0x81, 0x82]);
        let mode = CastMode {
            saturate: true,
            rounding: E8M0Rounding::Down,
        };
        let down = cast_tensor_with(&x, DType::F8E8M0, mode).unwrap();
        assert_eq!(
            bits(&down),
            [0x00, 0x7B, 0x7D, 0x7E, 0x7F, 0x80, 0x81, 0x82]
        );
        let back = cast_tensor(&up, DType::F32).unwrap();
        let v: Vec<f32> = back.view::<f32>().unwrap().iter().copied().collect();
        assert_eq!(v, [2f32.powi(-127), 0.125, 0.25, 0.5, 2.0, 2.0, 4.0, 8.0]);
    }

    #[test]
    fn strings_and_low_precision() {
        let s = Tensor::from_shape_vec(&[3], ["0.47", "-inf", "NaN"].map(String::from).to_vec())
            .unwrap();
        let f8 = cast_tensor(&s, DType::F8E4M3Fn).unwrap();
        assert_eq!(bits(&f8), [0x2F, 0xFE, 0x7F]);
        let text = cast_tensor(&f8, DType::String).unwrap();
        let v: Vec<String> = text.view::<String>().unwrap().iter().cloned().collect();
        assert_eq!(v, ["0.46875", "-448.0", "nan"]);
        let i4 = cast_tensor(
            &Tensor::from_shape_vec(&[2], vec!["-9".to_string(), "5".into()]).unwrap(),
            DType::I4,
        )
        .unwrap();
        assert_eq!(low_precision::values(&i4).unwrap(), [7.0, 5.0]);
    }

    #[test]
    fn float8_to_float8() {
        // E5M2 57344 does not fit E4M3FN: saturates to 448, or NaN without saturation.
        let t = low_precision::from_codes(DType::F8E5M2, &[2], vec![0x7B, 0x3C]).unwrap();
        assert_eq!(
            bits(&cast_tensor(&t, DType::F8E4M3Fn).unwrap()),
            [0x7E, 0x38]
        );
        let mode = CastMode {
            saturate: false,
            ..CastMode::default()
        };
        assert_eq!(
            bits(&cast_tensor_with(&t, DType::F8E4M3Fn, mode).unwrap()),
            [0x7F, 0x38]
        );
    }
}

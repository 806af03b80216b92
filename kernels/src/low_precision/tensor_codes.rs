//! Between tensors of the low-precision types and their raw codes (one code per element,
//! unpacked), for loaders, writers and bitwise comparisons.

use super::LowPrecision;
use crate::error::{KernelError, Result};
use crate::{DType, Tensor, dispatch_low_precision};

/// A tensor of `dtype` (a low-precision type) from one code per element, row-major. Bits
/// above the type's width are ignored.
pub fn from_codes(dtype: DType, shape: &[usize], codes: Vec<u8>) -> Result<Tensor> {
    fn build<T: LowPrecision>(shape: &[usize], codes: Vec<u8>) -> Result<Tensor> {
        Tensor::from_shape_vec(shape, codes.into_iter().map(T::from_code).collect())
    }
    use super::types::*;
    match dtype {
        DType::F8E4M3Fn => build::<F8E4M3Fn>(shape, codes),
        DType::F8E4M3FnUz => build::<F8E4M3FnUz>(shape, codes),
        DType::F8E5M2 => build::<F8E5M2>(shape, codes),
        DType::F8E5M2FnUz => build::<F8E5M2FnUz>(shape, codes),
        DType::F8E8M0 => build::<F8E8M0>(shape, codes),
        DType::F4E2M1 => build::<F4E2M1>(shape, codes),
        DType::I4 => build::<I4>(shape, codes),
        DType::U4 => build::<U4>(shape, codes),
        DType::I2 => build::<I2>(shape, codes),
        DType::U2 => build::<U2>(shape, codes),
        other => Err(KernelError::DTypeMismatch(format!(
            "{other} is not a low-precision type"
        ))),
    }
}

/// The codes of a low-precision tensor in row-major order; `None` for other types.
pub fn codes(t: &Tensor) -> Option<Vec<u8>> {
    dispatch_low_precision!(t, a => Some(a.iter().map(|v| v.code()).collect()), _other => None)
}

/// The exact values of a low-precision tensor in row-major order (NaN for NaN codes);
/// `None` for other types.
pub fn values(t: &Tensor) -> Option<Vec<f64>> {
    dispatch_low_precision!(t, a => Some(a.iter().map(|v| v.value()).collect()), _other => None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        let t = from_codes(DType::I4, &[2, 2], vec![0x7, 0x8, 0xF, 0x10]).unwrap();
        assert_eq!(t.dtype(), DType::I4);
        assert_eq!(codes(&t).unwrap(), [0x7, 0x8, 0xF, 0x0]);
        assert_eq!(values(&t).unwrap(), [7.0, -8.0, -1.0, 0.0]);
        let f = from_codes(DType::F8E4M3Fn, &[2], vec![0x7E, 0x7F]).unwrap();
        let v = values(&f).unwrap();
        assert!(v[0] == 448.0 && v[1].is_nan());
        assert!(codes(&Tensor::scalar(1.0f32)).is_none());
        assert!(from_codes(DType::F32, &[1], vec![0]).is_err());
    }
}

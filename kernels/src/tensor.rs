//! [`Tensor`]: an n-dimensional array of one of the ONNX element types.

use half::{bf16, f16};
use ndarray::{ArcArray, ArrayD, ArrayViewD, IxDyn};

use crate::error::{KernelError, Result};
use crate::low_precision::{
    F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz, F8E8M0, I2, I4, U2, U4,
};
use crate::{DType, Element};

/// An n-dimensional array whose element type is known at run time.
///
/// Arrays are reference counted ([`ArcArray`]), so cloning a tensor (an
/// initializer, an `Identity`) is cheap and never copies the elements.
#[derive(Debug, Clone, PartialEq)]
pub enum Tensor {
    /// 32-bit float.
    F32(ArcArray<f32, IxDyn>),
    /// 8-bit unsigned.
    U8(ArcArray<u8, IxDyn>),
    /// 8-bit signed.
    I8(ArcArray<i8, IxDyn>),
    /// 16-bit unsigned.
    U16(ArcArray<u16, IxDyn>),
    /// 16-bit signed.
    I16(ArcArray<i16, IxDyn>),
    /// 32-bit signed.
    I32(ArcArray<i32, IxDyn>),
    /// 64-bit signed.
    I64(ArcArray<i64, IxDyn>),
    /// UTF-8 strings.
    String(ArcArray<String, IxDyn>),
    /// Booleans.
    Bool(ArcArray<bool, IxDyn>),
    /// IEEE half.
    F16(ArcArray<f16, IxDyn>),
    /// 64-bit float.
    F64(ArcArray<f64, IxDyn>),
    /// 32-bit unsigned.
    U32(ArcArray<u32, IxDyn>),
    /// 64-bit unsigned.
    U64(ArcArray<u64, IxDyn>),
    /// bfloat16.
    BF16(ArcArray<bf16, IxDyn>),
    /// float8 E4M3FN.
    F8E4M3Fn(ArcArray<F8E4M3Fn, IxDyn>),
    /// float8 E4M3FNUZ.
    F8E4M3FnUz(ArcArray<F8E4M3FnUz, IxDyn>),
    /// float8 E5M2.
    F8E5M2(ArcArray<F8E5M2, IxDyn>),
    /// float8 E5M2FNUZ.
    F8E5M2FnUz(ArcArray<F8E5M2FnUz, IxDyn>),
    /// 4-bit unsigned (one byte per element in memory).
    U4(ArcArray<U4, IxDyn>),
    /// 4-bit signed (one byte per element in memory).
    I4(ArcArray<I4, IxDyn>),
    /// float4 E2M1 (one byte per element in memory).
    F4E2M1(ArcArray<F4E2M1, IxDyn>),
    /// float8 E8M0.
    F8E8M0(ArcArray<F8E8M0, IxDyn>),
    /// 2-bit unsigned (one byte per element in memory).
    U2(ArcArray<U2, IxDyn>),
    /// 2-bit signed (one byte per element in memory).
    I2(ArcArray<I2, IxDyn>),
}

/// Runs `$body` with `$a` bound to the inner `ArcArray` of any tensor variant.
///
/// `$body` is expanded once per element type, so it may use generic code.
#[macro_export]
macro_rules! dispatch_all {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::String($a) => $body,
            $crate::Tensor::Bool($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::F8E4M3Fn($a) => $body,
            $crate::Tensor::F8E4M3FnUz($a) => $body,
            $crate::Tensor::F8E5M2($a) => $body,
            $crate::Tensor::F8E5M2FnUz($a) => $body,
            $crate::Tensor::U4($a) => $body,
            $crate::Tensor::I4($a) => $body,
            $crate::Tensor::F4E2M1($a) => $body,
            $crate::Tensor::F8E8M0($a) => $body,
            $crate::Tensor::U2($a) => $body,
            $crate::Tensor::I2($a) => $body,
        }
    };
}

/// Like [`dispatch_all!`] but only for `Copy` element types (all but strings, the
/// low-precision types included); strings go to the `$other` arm.
#[macro_export]
macro_rules! dispatch_copy {
    ($t:expr, $a:ident => $body:expr, $o:ident => $other:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::Bool($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::F8E4M3Fn($a) => $body,
            $crate::Tensor::F8E4M3FnUz($a) => $body,
            $crate::Tensor::F8E5M2($a) => $body,
            $crate::Tensor::F8E5M2FnUz($a) => $body,
            $crate::Tensor::U4($a) => $body,
            $crate::Tensor::I4($a) => $body,
            $crate::Tensor::F4E2M1($a) => $body,
            $crate::Tensor::F8E8M0($a) => $body,
            $crate::Tensor::U2($a) => $body,
            $crate::Tensor::I2($a) => $body,
            $o => $other,
        }
    };
}

/// Runs `$body` for numeric element types (ints and floats, not bool, string or the
/// low-precision types, which have no arithmetic); any other tensor goes to the `$other` arm.
#[macro_export]
macro_rules! dispatch_numeric {
    ($t:expr, $a:ident => $body:expr, $o:ident => $other:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $o => $other,
        }
    };
}

/// Runs `$body` for the floating-point element types; others go to `$other`.
#[macro_export]
macro_rules! dispatch_float {
    ($t:expr, $a:ident => $body:expr, $o:ident => $other:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $o => $other,
        }
    };
}

/// Runs `$body` for the low-precision element types (float8, float4, 4- and 2-bit
/// integers), whose elements implement [`LowPrecision`](crate::low_precision::LowPrecision);
/// others go to `$other`.
#[macro_export]
macro_rules! dispatch_low_precision {
    ($t:expr, $a:ident => $body:expr, $o:ident => $other:expr) => {
        match $t {
            $crate::Tensor::F8E4M3Fn($a) => $body,
            $crate::Tensor::F8E4M3FnUz($a) => $body,
            $crate::Tensor::F8E5M2($a) => $body,
            $crate::Tensor::F8E5M2FnUz($a) => $body,
            $crate::Tensor::U4($a) => $body,
            $crate::Tensor::I4($a) => $body,
            $crate::Tensor::F4E2M1($a) => $body,
            $crate::Tensor::F8E8M0($a) => $body,
            $crate::Tensor::U2($a) => $body,
            $crate::Tensor::I2($a) => $body,
            $o => $other,
        }
    };
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::U8(_) => DType::U8,
            Tensor::I8(_) => DType::I8,
            Tensor::U16(_) => DType::U16,
            Tensor::I16(_) => DType::I16,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
            Tensor::String(_) => DType::String,
            Tensor::Bool(_) => DType::Bool,
            Tensor::F16(_) => DType::F16,
            Tensor::F64(_) => DType::F64,
            Tensor::U32(_) => DType::U32,
            Tensor::U64(_) => DType::U64,
            Tensor::BF16(_) => DType::BF16,
            Tensor::F8E4M3Fn(_) => DType::F8E4M3Fn,
            Tensor::F8E4M3FnUz(_) => DType::F8E4M3FnUz,
            Tensor::F8E5M2(_) => DType::F8E5M2,
            Tensor::F8E5M2FnUz(_) => DType::F8E5M2FnUz,
            Tensor::U4(_) => DType::U4,
            Tensor::I4(_) => DType::I4,
            Tensor::F4E2M1(_) => DType::F4E2M1,
            Tensor::F8E8M0(_) => DType::F8E8M0,
            Tensor::U2(_) => DType::U2,
            Tensor::I2(_) => DType::I2,
        }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        dispatch_all!(self, a => a.shape())
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the elements occupy.
    pub fn byte_len(&self) -> usize {
        self.len() * self.dtype().size_of()
    }

    /// A tensor from a shape and its elements in row-major order.
    pub fn from_shape_vec<T: Element>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
        let array = ArrayD::from_shape_vec(IxDyn(shape), data)
            .map_err(|e| KernelError::Shape(format!("{shape:?}: {e}")))?;
        Ok(T::into_tensor(array.into_shared()))
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        T::into_tensor(ArrayD::from_elem(IxDyn(&[]), value).into_shared())
    }

    /// A tensor of `shape` filled with the element type's default (zero, false, ""; code 0
    /// for the low-precision types, which for float8 E8M0 is `2^-127`: it has no zero).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        fn z<T: Element>(shape: &[usize]) -> Tensor {
            T::into_tensor(ArrayD::<T>::default(IxDyn(shape)).into_shared())
        }
        match dtype {
            DType::F32 => z::<f32>(shape),
            DType::U8 => z::<u8>(shape),
            DType::I8 => z::<i8>(shape),
            DType::U16 => z::<u16>(shape),
            DType::I16 => z::<i16>(shape),
            DType::I32 => z::<i32>(shape),
            DType::I64 => z::<i64>(shape),
            DType::String => z::<String>(shape),
            DType::Bool => z::<bool>(shape),
            DType::F16 => z::<f16>(shape),
            DType::F64 => z::<f64>(shape),
            DType::U32 => z::<u32>(shape),
            DType::U64 => z::<u64>(shape),
            DType::BF16 => z::<bf16>(shape),
            DType::F8E4M3Fn => z::<F8E4M3Fn>(shape),
            DType::F8E4M3FnUz => z::<F8E4M3FnUz>(shape),
            DType::F8E5M2 => z::<F8E5M2>(shape),
            DType::F8E5M2FnUz => z::<F8E5M2FnUz>(shape),
            DType::U4 => z::<U4>(shape),
            DType::I4 => z::<I4>(shape),
            DType::F4E2M1 => z::<F4E2M1>(shape),
            DType::F8E8M0 => z::<F8E8M0>(shape),
            DType::U2 => z::<U2>(shape),
            DType::I2 => z::<I2>(shape),
        }
    }

    /// Borrows the elements as an array of `T`, or fails naming the actual type.
    pub fn view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        T::view(self).ok_or_else(|| {
            KernelError::DTypeMismatch(format!("expected {}, got {}", T::DTYPE, self.dtype()))
        })
    }

    /// Shares the elements as an array of `T` (no copy), or fails naming the actual type.
    pub fn shared<T: Element>(&self) -> Result<ArcArray<T, IxDyn>> {
        T::shared(self).ok_or_else(|| {
            KernelError::DTypeMismatch(format!("expected {}, got {}", T::DTYPE, self.dtype()))
        })
    }

    /// The same elements with a new shape of equal size (no copy when contiguous).
    pub fn reshaped(&self, shape: &[usize]) -> Result<Tensor> {
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if elements != Some(self.len()) {
            return Err(KernelError::Shape(format!(
                "cannot reshape {:?} ({} elements) to {:?}",
                self.shape(),
                self.len(),
                shape
            )));
        }
        // An empty tensor passes the count with dimensions whose other product overflows,
        // which ndarray refuses.
        let out = dispatch_all!(self, a => {
            let a = if a.is_standard_layout() { a.clone() } else { a.as_standard_layout().into_owned().into_shared() };
            Element::into_tensor(a.into_shape_with_order(IxDyn(shape)).map_err(|e| {
                KernelError::Shape(format!("cannot reshape {:?} to {shape:?}: {e}", self.shape()))
            })?)
        });
        Ok(out)
    }

    /// Reads an integer tensor (int32 or int64, any shape) as a flat `Vec<i64>`;
    /// the usual way to read shapes, axes, pads and indices given as inputs.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        match self {
            Tensor::I64(a) => Ok(a.iter().copied().collect()),
            Tensor::I32(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::U8(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::I8(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::U32(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::U64(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::I16(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            Tensor::U16(a) => Ok(a.iter().map(|&v| v as i64).collect()),
            other => Err(KernelError::DTypeMismatch(format!(
                "expected an integer tensor, got {}",
                other.dtype()
            ))),
        }
    }

    /// Reads a numeric tensor as a flat `Vec<f64>` (for scalars given as inputs, e.g. Clip bounds).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        use num_traits::ToPrimitive;
        dispatch_numeric!(self, a => Ok(a.iter().map(|v| v.to_f64().unwrap_or(f64::NAN)).collect()),
            other => Err(KernelError::DTypeMismatch(format!("expected a numeric tensor, got {}", other.dtype()))))
    }

    /// The tensor's elements as `f32`, copied (used by tests and tolerant comparisons).
    pub fn to_f32_array(&self) -> Result<ArrayD<f32>> {
        use num_traits::ToPrimitive;
        dispatch_numeric!(self, a => Ok(a.map(|v| v.to_f32().unwrap_or(f32::NAN))),
        other => match other {
            Tensor::Bool(b) => Ok(b.map(|&v| if v { 1.0 } else { 0.0 })),
            _ => Err(KernelError::DTypeMismatch(format!("expected a numeric tensor, got {}", other.dtype()))),
        })
    }
}

#[cfg(test)]
mod reshape_tests {
    use super::*;

    /// Shapes whose element count overflows: found by the graph_gen fuzzer (a `Reshape` of an
    /// empty tensor panicked in ndarray after the count check passed).
    #[test]
    fn reshaping_to_an_overflowing_shape_is_an_error() {
        let empty = Tensor::zeros(DType::F32, &[0]);
        for shape in [[0, 1 << 62, 8], [1 << 33, 1 << 33, 1 << 33]] {
            assert!(
                matches!(empty.reshaped(&shape), Err(KernelError::Shape(_))),
                "{shape:?}"
            );
        }
        assert_eq!(
            empty.reshaped(&[2, 0, 3]).map(|t| t.shape().to_vec()),
            Ok(vec![2, 0, 3])
        );
    }
}

//! Small helpers shared by the nn kernels: float dtype handling and input checks.

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};

use crate::error::{KernelError, Result};
use crate::{DType, Element, Tensor};

/// A float type the nn kernels compute in natively (`f16`/`bf16` are widened to `f32`).
pub trait Real:
    num_traits::Float
    + crate::cpu::nn::matrix::MatElem
    + Element
    + std::ops::AddAssign
    + std::iter::Sum
    + Send
    + Sync
    + 'static
{
    /// Converts from `f64` (attribute values).
    fn of(v: f64) -> Self {
        <Self as num_traits::NumCast>::from(v).unwrap_or_else(Self::nan)
    }

    /// `values[i] ← activation(values[i] + add[i])` in one vectorized pass where this type,
    /// the CPU and the activation allow; false when the caller must do it generically.
    fn finish_vectorized(
        _values: &mut [Self],
        _add: Option<&[Self]>,
        _activation: super::epilogue::Activation,
    ) -> bool {
        false
    }
}
impl Real for f32 {
    fn finish_vectorized(
        values: &mut [f32],
        add: Option<&[f32]>,
        activation: super::epilogue::Activation,
    ) -> bool {
        super::epilogue_simd::finish_f32(values, add, activation)
    }
}
impl Real for f64 {}

/// Returns the tensor widened to a type the kernels compute in: `f16`/`bf16` become `f32`,
/// `f32`/`f64` are returned as they are (cheap clone). Other types fail with `UnsupportedDType`.
pub fn widen(t: &Tensor, index: usize) -> Result<Tensor> {
    match t {
        Tensor::F32(_) | Tensor::F64(_) => Ok(t.clone()),
        Tensor::F16(a) => Ok(Tensor::F32(a.map(|v| v.to_f32()).into_shared())),
        Tensor::BF16(a) => Ok(Tensor::F32(a.map(|v| v.to_f32()).into_shared())),
        other => Err(KernelError::UnsupportedDType {
            index,
            dtype: other.dtype(),
        }),
    }
}

/// Converts a result computed by [`widen`]ed inputs back to `dtype`.
pub fn narrow(t: Tensor, dtype: DType) -> Result<Tensor> {
    match (dtype, &t) {
        (DType::F16, Tensor::F32(a)) => Ok(Tensor::F16(a.map(|&v| f16::from_f32(v)).into_shared())),
        (DType::BF16, Tensor::F32(a)) => {
            Ok(Tensor::BF16(a.map(|&v| bf16::from_f32(v)).into_shared()))
        }
        (d, t) if d == t.dtype() => Ok(t.clone()),
        (d, t) => Err(KernelError::DTypeMismatch(format!(
            "cannot narrow {} to {d}",
            t.dtype()
        ))),
    }
}

/// Fails unless every present input has the dtype of input 0.
pub fn same_dtype(inputs: &[Option<&Tensor>]) -> Result<DType> {
    let first = crate::kernel::input(inputs, 0)?.dtype();
    for (i, t) in inputs.iter().enumerate() {
        if let Some(t) = t
            && t.dtype() != first
        {
            return Err(KernelError::DTypeMismatch(format!(
                "input {i} is {}, input 0 is {first}",
                t.dtype()
            )));
        }
    }
    Ok(first)
}

/// The elements of `t` as a contiguous row-major vector (no copy when already standard layout
/// and unshared is not required: the data is cloned only if the layout is not standard).
pub fn contiguous<T: Element + Clone>(t: &Tensor) -> Result<std::borrow::Cow<'_, [T]>> {
    let v = t.view::<T>()?;
    Ok(match v.to_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(v.iter().cloned().collect()),
    })
}

/// Builds an output tensor from a shape and row-major data.
pub fn output<T: Element>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| KernelError::Shape(format!("{shape:?}: {e}")))?;
    Ok(T::into_tensor(a.into_shared()))
}

/// Fails with `UnsupportedOpset` when `opset` is below `min`.
pub fn min_opset(opset: i64, min: i64, op: &str) -> Result<()> {
    if opset < min {
        return Err(KernelError::UnsupportedOpset {
            opset,
            reason: format!("{op} is implemented from opset {min}"),
        });
    }
    Ok(())
}

/// Converts a non-negative i64 to usize or fails naming `what`.
pub fn to_usize(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| KernelError::InvalidValue(format!("{what} is negative: {v}")))
}

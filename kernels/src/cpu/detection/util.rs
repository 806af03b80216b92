//! Small helpers shared by the detection family's kernels.

use std::borrow::Cow;

use ndarray::{ArcArray, ArrayD, IxDyn};

use crate::error::{KernelError, Result};
use crate::{Element, Tensor};

/// The elements of `a` in row-major order: borrowed when already contiguous, copied otherwise.
pub(crate) fn contiguous<T: Clone>(a: &ArcArray<T, IxDyn>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().cloned().collect()),
    }
}

/// Builds a tensor from a shape and row-major elements.
pub(crate) fn tensor_from_vec<T: Element>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
    let array = ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| KernelError::Shape(format!("{shape:?}: {e}")))?;
    Ok(T::into_tensor(array.into_shared()))
}

/// Resolves a possibly negative `axis` against `rank`.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(KernelError::BadAttribute {
            name: "axis".into(),
            reason: format!("{axis} is out of range for rank {rank}"),
        })
    }
}

/// Resolves an index along a dimension of size `dim`, accepting `[-dim, dim)`.
#[inline]
pub(crate) fn resolve_index(index: i64, dim: usize) -> Result<usize> {
    let d = dim as i64;
    let i = if index < 0 { index + d } else { index };
    if (0..d).contains(&i) {
        Ok(i as usize)
    } else {
        Err(KernelError::InvalidValue(format!(
            "index {index} is out of range for a dimension of size {dim}"
        )))
    }
}

/// Row-major strides (in elements) of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Reads an int32/int64 index tensor as a contiguous `i64` buffer.
pub(crate) fn index_values(t: &Tensor, index: usize) -> Result<Cow<'_, [i64]>> {
    match t {
        Tensor::I64(a) => Ok(contiguous(a)),
        Tensor::I32(a) => Ok(Cow::Owned(a.iter().map(|&v| i64::from(v)).collect())),
        other => Err(KernelError::UnsupportedDType {
            index,
            dtype: other.dtype(),
        }),
    }
}

/// Fails unless `opset` is at least `min` (the op's first version in `ai.onnx`).
pub(crate) fn require_opset(opset: i64, min: i64, op: &str) -> Result<()> {
    if opset < min {
        return Err(KernelError::UnsupportedOpset {
            opset,
            reason: format!("{op} exists from opset {min}"),
        });
    }
    Ok(())
}

/// A total order for `PartialOrd` values: NaN (any `v != v`) sorts above every number and equals
/// NaN; `-0.0` equals `0.0`.
#[inline]
pub(crate) fn nan_greatest_cmp<T: PartialOrd>(a: &T, b: &T) -> std::cmp::Ordering {
    #[allow(clippy::eq_op)]
    match a.partial_cmp(b) {
        Some(o) => o,
        None => (a != a).cmp(&(b != b)),
    }
}

//! Quantization parameters: which scale and zero point each element uses (per tensor, per
//! axis, or per block along an axis), and the integer ranges of the quantized types.

use crate::error::{KernelError, Result};
use crate::low_precision::{self, I2, I4, U2, U4};
use crate::{DType, Tensor};

/// Maps an element's row-major position to the position of its scale and zero point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamLayout {
    /// One scale for every element.
    PerTensor,
    /// One scale per index along an axis of length `axis_len`; `inner` elements follow it.
    PerAxis { axis_len: usize, inner: usize },
    /// One scale per `block` consecutive indices along an axis (opset 21 blocked
    /// quantization); the scale tensor has the input's shape with that axis divided.
    Blocked {
        axis_len: usize,
        inner: usize,
        block: usize,
        blocks: usize,
    },
}

impl ParamLayout {
    /// The layout of a scale of shape `param` for an input of shape `x`: per tensor for a
    /// scalar or a one-element vector, per axis for a vector, blocked for a tensor of the
    /// input's rank (`block_size` > 0).
    pub fn new(x: &[usize], param: &[usize], axis: i64, block_size: i64) -> Result<Self> {
        let count: usize = param.iter().product();
        if block_size <= 0 && param.len() <= 1 && count == 1 {
            return Ok(ParamLayout::PerTensor);
        }
        let rank = x.len() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&a) {
            return Err(KernelError::BadAttribute {
                name: "axis".into(),
                reason: format!("{axis} is out of range for rank {rank}"),
            });
        }
        let a = a as usize;
        let (axis_len, inner) = (x[a], x[a + 1..].iter().product());
        if block_size > 0 {
            let block = block_size as usize;
            let blocks = axis_len.div_ceil(block);
            let mut want = x.to_vec();
            want[a] = blocks;
            if param != want.as_slice() {
                return Err(KernelError::Shape(format!(
                    "blocked scale of shape {param:?} for input {x:?}, axis {a}, block {block}: \
                     expected {want:?}"
                )));
            }
            return Ok(ParamLayout::Blocked {
                axis_len,
                inner,
                block,
                blocks,
            });
        }
        if param.len() != 1 || param[0] != axis_len {
            return Err(KernelError::Shape(format!(
                "scale of shape {param:?} fits neither per-tensor nor per-axis quantization of \
                 {x:?} along axis {a}"
            )));
        }
        Ok(ParamLayout::PerAxis { axis_len, inner })
    }

    /// The parameter index of the element at row-major position `flat`.
    #[inline]
    pub fn index(&self, flat: usize) -> usize {
        match *self {
            ParamLayout::PerTensor => 0,
            ParamLayout::PerAxis { axis_len, inner } => (flat / inner) % axis_len,
            ParamLayout::Blocked {
                axis_len,
                inner,
                block,
                blocks,
            } => {
                let outer = flat / (axis_len * inner);
                let a = (flat / inner) % axis_len;
                (outer * blocks + a / block) * inner + flat % inner
            }
        }
    }
}

/// The value range of an integer quantized type; `None` for float types.
pub(crate) fn int_range(dtype: DType) -> Option<(i64, i64)> {
    Some(match dtype {
        DType::U8 => (0, 255),
        DType::I8 => (-128, 127),
        DType::U16 => (0, 65535),
        DType::I16 => (-32768, 32767),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U4 => (0, 15),
        DType::I4 => (-8, 7),
        DType::U2 => (0, 3),
        DType::I2 => (-2, 1),
        _ => return None,
    })
}

/// The elements of a numeric or low-precision tensor as `f64`, row-major (exact for every
/// quantized type).
pub(crate) fn values_f64(t: &Tensor) -> Result<Vec<f64>> {
    if let Some(v) = low_precision::values(t) {
        return Ok(v);
    }
    t.to_f64_vec()
}

/// The elements of a float tensor (`f32`, `f16`, `bf16`) as `f32`, row-major.
pub(crate) fn values_f32(t: &Tensor, index: usize) -> Result<Vec<f32>> {
    match t {
        Tensor::F32(a) => Ok(a.iter().copied().collect()),
        Tensor::F16(a) => Ok(a.iter().map(|v| v.to_f32()).collect()),
        Tensor::BF16(a) => Ok(a.iter().map(|v| v.to_f32()).collect()),
        other => Err(KernelError::UnsupportedDType {
            index,
            dtype: other.dtype(),
        }),
    }
}

/// A tensor of integer quantized type `dtype` from values already in its range.
pub(crate) fn int_tensor(dtype: DType, shape: &[usize], v: Vec<i32>) -> Result<Tensor> {
    fn make<T: crate::Element>(shape: &[usize], v: Vec<T>) -> Result<Tensor> {
        Tensor::from_shape_vec(shape, v)
    }
    match dtype {
        DType::U8 => make(shape, v.into_iter().map(|x| x as u8).collect()),
        DType::I8 => make(shape, v.into_iter().map(|x| x as i8).collect()),
        DType::U16 => make(shape, v.into_iter().map(|x| x as u16).collect()),
        DType::I16 => make(shape, v.into_iter().map(|x| x as i16).collect()),
        DType::I32 => make(shape, v),
        DType::U4 => make(
            shape,
            v.into_iter().map(|x| U4::new_wrapping(x.into())).collect(),
        ),
        DType::I4 => make(
            shape,
            v.into_iter().map(|x| I4::new_wrapping(x.into())).collect(),
        ),
        DType::U2 => make(
            shape,
            v.into_iter().map(|x| U2::new_wrapping(x.into())).collect(),
        ),
        DType::I2 => make(
            shape,
            v.into_iter().map(|x| I2::new_wrapping(x.into())).collect(),
        ),
        other => Err(KernelError::DTypeMismatch(format!(
            "{other} is not an integer quantized type"
        ))),
    }
}

/// Rounds half to even and saturates to `[lo, hi]` after adding `zp`, as ONNX Runtime's
/// `MlasQuantizeLinear` does (it clamps `q` to `[lo - zp, hi - zp]` before rounding, which is
/// the same for integer bounds); NaN gives `lo`, as both ONNX Runtime and the reference do.
#[inline]
pub(crate) fn saturate_round(q: f32, zp: i32, lo: i64, hi: i64) -> i32 {
    if q.is_nan() {
        return lo as i32;
    }
    let r = q.round_ties_even() as i64 + i64::from(zp);
    r.clamp(lo, hi) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_index_their_parameters() {
        assert_eq!(
            ParamLayout::new(&[2, 3], &[], 1, 0).unwrap(),
            ParamLayout::PerTensor
        );
        let per_axis = ParamLayout::new(&[2, 3, 2], &[3], 1, 0).unwrap();
        let got: Vec<usize> = (0..12).map(|i| per_axis.index(i)).collect();
        assert_eq!(got, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]);
        // 2 x 5 blocked along axis 1 by 2: scale shape 2 x 3.
        let blocked = ParamLayout::new(&[2, 5], &[2, 3], 1, 2).unwrap();
        let got: Vec<usize> = (0..10).map(|i| blocked.index(i)).collect();
        assert_eq!(got, [0, 0, 1, 1, 2, 3, 3, 4, 4, 5]);
        assert!(ParamLayout::new(&[2, 3], &[2], 1, 0).is_err());
        assert!(ParamLayout::new(&[2, 5], &[2, 2], 1, 2).is_err());
    }

    #[test]
    fn rounding_is_half_to_even_then_saturating() {
        let r = |q| saturate_round(q, 0, -128, 127);
        assert_eq!([r(0.5), r(1.5), r(2.5), r(-0.5), r(-1.5)], [0, 2, 2, 0, -2]);
        assert_eq!([r(1e9), r(-1e9), r(f32::NAN)], [127, -128, -128]);
        assert_eq!(saturate_round(250.5, 10, 0, 255), 255);
    }
}

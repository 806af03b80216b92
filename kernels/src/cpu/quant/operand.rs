//! Reading quantized operands and zero points, and requantizing `i32` accumulators.

use std::borrow::Cow;

use super::params::{int_range, saturate_round, values_f32};
use super::qgemm::Operand;
use crate::error::{KernelError, Result};
use crate::{DType, Tensor};

/// The row-major bytes of a uint8 or int8 tensor and whether it is int8.
pub(crate) fn bytes(t: &Tensor, index: usize) -> Result<(Cow<'_, [u8]>, bool)> {
    match t {
        Tensor::U8(a) => Ok((
            match a.as_slice() {
                Some(s) => Cow::Borrowed(s),
                None => Cow::Owned(a.iter().copied().collect()),
            },
            false,
        )),
        Tensor::I8(a) => Ok((Cow::Owned(a.iter().map(|&x| x as u8).collect()), true)),
        other => Err(KernelError::UnsupportedDType {
            index,
            dtype: other.dtype(),
        }),
    }
}

/// Borrows bytes read by [`bytes`] as a product operand.
pub(crate) fn operand<'a>((data, signed): &'a (Cow<'a, [u8]>, bool)) -> Operand<'a> {
    Operand {
        data,
        signed: *signed,
    }
}

/// A zero point's values (0 when absent), which must have the operand's type, and be one value
/// or `len` values.
pub(crate) fn zero_points(
    zp: Option<&Tensor>,
    operand: DType,
    len: usize,
    what: &str,
) -> Result<Vec<i32>> {
    let Some(z) = zp else {
        return Ok(vec![0]);
    };
    if z.dtype() != operand {
        return Err(KernelError::DTypeMismatch(format!(
            "{what} zero point is {}, its operand {operand}",
            z.dtype()
        )));
    }
    let v: Vec<i32> = z.to_i64_vec()?.into_iter().map(|x| x as i32).collect();
    if v.len() != 1 && v.len() != len {
        return Err(KernelError::Shape(format!(
            "{what} zero point has {} values; expected 1 or {len}",
            v.len()
        )));
    }
    Ok(v)
}

/// A scale's values, one or `len` of them.
pub(crate) fn scales(t: &Tensor, index: usize, len: usize, what: &str) -> Result<Vec<f32>> {
    let v = values_f32(t, index)?;
    if v.len() != 1 && v.len() != len {
        return Err(KernelError::Shape(format!(
            "{what} scale has {} values; expected 1 or {len}",
            v.len()
        )));
    }
    Ok(v)
}

/// The output side of a `QLinear*` op: `y = saturate(round(acc · multiplier) + zero_point)`,
/// with `multiplier = in_scale · w_scale / y_scale` computed in `f32` as ONNX Runtime does.
#[derive(Debug)]
pub(crate) struct Requant {
    /// Per output column (or one): `a_scale · b_scale / y_scale`.
    pub multipliers: Vec<f32>,
    /// The output zero point.
    pub zero_point: i32,
    /// The output type (uint8 or int8).
    pub dtype: DType,
}

impl Requant {
    /// `in_scale` one value; `w_scales` one or per output channel; `y_scale` and `y_zp` one.
    pub fn new(
        in_scale: f32,
        w_scales: &[f32],
        y_scale: &Tensor,
        y_zp: Option<&Tensor>,
        default: DType,
    ) -> Result<Requant> {
        let ys = values_f32(y_scale, 6)?;
        if ys.len() != 1 {
            return Err(KernelError::Shape("y_scale must be one value".into()));
        }
        let (dtype, zero_point) = match y_zp {
            Some(z) => {
                let v = z.to_i64_vec()?;
                if v.len() != 1 {
                    return Err(KernelError::Shape("y_zero_point must be one value".into()));
                }
                (z.dtype(), v[0] as i32)
            }
            None => (default, 0),
        };
        if !matches!(dtype, DType::U8 | DType::I8) {
            return Err(KernelError::UnsupportedDType { index: 7, dtype });
        }
        Ok(Requant {
            multipliers: w_scales.iter().map(|&w| in_scale * w / ys[0]).collect(),
            zero_point,
            dtype,
        })
    }

    /// Requantizes `acc`, whose element `i` belongs to output channel `channel(i)`.
    pub fn apply(&self, acc: &[i32], channel: impl Fn(usize) -> usize) -> Vec<i32> {
        let (lo, hi) = int_range(self.dtype).expect("uint8 or int8");
        let per_channel = self.multipliers.len() > 1;
        acc.iter()
            .enumerate()
            .map(|(i, &v)| {
                let m = self.multipliers[if per_channel { channel(i) } else { 0 }];
                saturate_round(v as f32 * m, self.zero_point, lo, hi)
            })
            .collect()
    }
}

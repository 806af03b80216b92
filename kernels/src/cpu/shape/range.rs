//! Range: `start, start + delta, …` up to (excluding) `limit`.

use half::{bf16, f16};

use super::util::{min_opset, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor};

/// Range (opset 11+).
#[derive(Debug)]
pub struct Range;

/// Builds [`Range`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 11)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(Range))
}

/// Reads a one-element input.
fn one<T: Copy>(v: Vec<T>, what: &str) -> Result<T> {
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(KernelError::Shape(format!("Range {what} must be a scalar"))),
    }
}

impl Kernel for Range {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (s, l, d) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
        let dt = s.dtype();
        if l.dtype() != dt || d.dtype() != dt {
            return Err(KernelError::DTypeMismatch(
                "Range inputs must share one type".into(),
            ));
        }
        if dt.is_int() {
            let (start, limit, delta) = (
                one(s.to_i64_vec()?, "start")?,
                one(l.to_i64_vec()?, "limit")?,
                one(d.to_i64_vec()?, "delta")?,
            );
            if delta == 0 {
                return Err(KernelError::InvalidValue("Range delta is 0".into()));
            }
            let span = limit as i128 - start as i128;
            let n = if (span > 0) == (delta > 0) && span != 0 {
                (span.abs() + delta.unsigned_abs() as i128 - 1) / delta.unsigned_abs() as i128
            } else {
                0
            };
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let n = crate::limits::checked_elements(&[n], dt.size_of())?;
            // Made in the output type directly (an i64 copy would take twice the limit). The
            // values lie between start and limit, so they fit the type they came in.
            let vals = (0..n as i64).map(|i| start.wrapping_add(i.wrapping_mul(delta)));
            let t = match dt {
                DType::I64 => tensor_from(&[n], vals.collect()),
                DType::I32 => tensor_from(&[n], vals.map(|v| v as i32).collect()),
                DType::I16 => tensor_from(&[n], vals.map(|v| v as i16).collect()),
                other => {
                    return Err(KernelError::UnsupportedDType {
                        index: 0,
                        dtype: other,
                    });
                }
            }?;
            return Ok(vec![t]);
        }
        if !dt.is_float() {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: dt,
            });
        }
        let (start, limit, delta) = (
            one(s.to_f64_vec()?, "start")?,
            one(l.to_f64_vec()?, "limit")?,
            one(d.to_f64_vec()?, "delta")?,
        );
        if delta == 0.0 || !delta.is_finite() || !start.is_finite() || !limit.is_finite() {
            return Err(KernelError::InvalidValue(format!(
                "Range({start}, {limit}, {delta}) is not a finite sequence"
            )));
        }
        // `as` saturates: a count past usize's range fails the limit below.
        let n = ((limit - start) / delta).ceil().max(0.0) as usize;
        let n = crate::limits::checked_elements(&[n], dt.size_of())?;
        let vals = (0..n).map(|i| start + i as f64 * delta);
        match dt {
            DType::F32 => tensor_from(&[n], vals.map(|v| v as f32).collect()),
            DType::F64 => tensor_from(&[n], vals.collect()),
            DType::F16 => tensor_from(&[n], vals.map(f16::from_f64).collect()),
            _ => tensor_from(&[n], vals.map(bf16::from_f64).collect()),
        }
        .map(|t| vec![t])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;

    fn run(s: Tensor, l: Tensor, d: Tensor) -> Result<Tensor> {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Range",
            domain: "",
            opset: 11,
            attrs: &attrs,
            num_inputs: 3,
            num_outputs: 1,
            options: Default::default(),
        };
        Ok(build(&spec)?
            .run(&[Some(&s), Some(&l), Some(&d)])?
            .remove(0))
    }

    #[test]
    fn range_values() {
        // np.arange(10, 6, -3, dtype=np.int32) == [10, 7]
        let out = run(
            Tensor::scalar(10i32),
            Tensor::scalar(6i32),
            Tensor::scalar(-3i32),
        )
        .unwrap();
        assert_eq!(out, Tensor::from_shape_vec(&[2], vec![10i32, 7]).unwrap());
        // np.arange(1, 5, 2, dtype=np.float32) == [1, 3]
        let out = run(
            Tensor::scalar(1.0f32),
            Tensor::scalar(5.0f32),
            Tensor::scalar(2.0f32),
        )
        .unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[2], vec![1.0f32, 3.0]).unwrap()
        );
        let out = run(
            Tensor::scalar(1i64),
            Tensor::scalar(0i64),
            Tensor::scalar(1i64),
        )
        .unwrap();
        assert_eq!(out.shape(), &[0]);
        assert!(matches!(
            run(
                Tensor::scalar(1i64),
                Tensor::scalar(3i64),
                Tensor::scalar(0i64)
            ),
            Err(KernelError::InvalidValue(_))
        ));
    }
}

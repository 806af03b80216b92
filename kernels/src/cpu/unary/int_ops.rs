//! The unary functions that are also defined on integers (Relu, Neg, Abs, Sign) and on
//! booleans (Not). Floating-point inputs go to [`float_ops`](super::float_ops).

use ndarray::{ArrayD, ArrayViewD};

use super::float_ops::{FloatOp, float_tensor};
use crate::Tensor;
use crate::cpu::binary::broadcast::unary_map;
use crate::cpu::binary::num::Arith;
use crate::error::{KernelError, Result};

fn int_map<T: Arith>(op: FloatOp, a: &ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
    let zero = T::ZERO;
    let one = T::from_f64(1.0);
    Ok(match op {
        FloatOp::Relu => unary_map(a, move |&x: &T| if x < zero { zero } else { x }),
        FloatOp::Neg => unary_map(a, move |&x: &T| zero.sub(x)),
        FloatOp::Abs => unary_map(a, move |&x: &T| if x < zero { zero.sub(x) } else { x }),
        FloatOp::Sign => unary_map(a, move |&x: &T| {
            if x > zero {
                one
            } else if x < zero {
                zero.sub(one)
            } else {
                zero
            }
        }),
        other => {
            return Err(KernelError::InvalidValue(format!(
                "{other:?} is not defined on integers"
            )));
        }
    })
}

/// `op` on a numeric tensor: floats through [`float_tensor`]; integers for Relu, Neg
/// (signed only), Abs and Sign.
pub fn numeric_tensor(op: FloatOp, x: &Tensor) -> Result<Tensor> {
    let signed_only = matches!(op, FloatOp::Relu | FloatOp::Neg);
    let unsupported = || KernelError::UnsupportedDType {
        index: 0,
        dtype: x.dtype(),
    };
    Ok(match x {
        Tensor::F32(_) | Tensor::F64(_) | Tensor::F16(_) | Tensor::BF16(_) => {
            return float_tensor(op, x);
        }
        Tensor::I8(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::I16(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::I32(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::I64(a) => Tensor::from(int_map(op, &a.view())?),
        _ if signed_only => return Err(unsupported()),
        Tensor::U8(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::U16(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::U32(a) => Tensor::from(int_map(op, &a.view())?),
        Tensor::U64(a) => Tensor::from(int_map(op, &a.view())?),
        _ => return Err(unsupported()),
    })
}

/// Logical not of a bool tensor.
pub fn not_tensor(x: &Tensor) -> Result<Tensor> {
    match x {
        Tensor::Bool(a) => Ok(Tensor::from(unary_map(&a.view(), |&v: &bool| !v))),
        other => Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: other.dtype(),
        }),
    }
}

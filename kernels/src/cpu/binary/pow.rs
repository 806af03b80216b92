//! Pow: base and exponent may have different numeric types (opset 12+); the output has
//! the base's type. `f32 ^ f32` computes in `f32`, everything else in `f64` and converts
//! back (truncating for integer bases, as `numpy.power(..).astype(base)` does).

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::broadcast::{unary_map, zip_map};
use super::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// The Pow kernel.
#[derive(Debug)]
pub struct PowKernel {
    /// Before opset 12 base and exponent must share a type.
    pub same_type: bool,
}

impl Kernel for PowKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        if self.same_type && a.dtype() != b.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "Pow before opset 12 needs equal types, got {} and {}",
                a.dtype(),
                b.dtype()
            )));
        }
        Ok(vec![pow(a, b)?])
    }
}

/// `a ^ b` elementwise with broadcasting.
pub fn pow(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    match (a, b) {
        // `x ^ 2` (T5's RMS norm squares this way) as `x · x`: the correctly rounded square,
        // vectorized, where `powf` is a call per element.
        (Tensor::F32(x), Tensor::F32(y))
            if y.len() == 1 && y.ndim() <= x.ndim() && y.iter().all(|&e| e == 2.0) =>
        {
            return Ok(Tensor::from(unary_map(&x.view(), |&p: &f32| p * p)));
        }
        (Tensor::F32(x), Tensor::F32(y)) => {
            return Ok(Tensor::from(zip_map(
                &x.view(),
                &y.view(),
                |p: &f32, q: &f32| p.powf(*q),
            )?));
        }
        (Tensor::F64(x), Tensor::F64(y)) => {
            return Ok(Tensor::from(zip_map(
                &x.view(),
                &y.view(),
                |p: &f64, q: &f64| p.powf(*q),
            )?));
        }
        _ => {}
    }
    let exp = b.to_f64_vec().map_err(|_| KernelError::UnsupportedDType {
        index: 1,
        dtype: b.dtype(),
    })?;
    let exp = ArrayD::from_shape_vec(IxDyn(b.shape()), exp)
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    dispatch_numeric!(a, x => Ok(Tensor::from(pow_f64(&x.view(), &exp.view())?)),
        other => Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))
}

fn pow_f64<T: Arith>(x: &ArrayViewD<'_, T>, e: &ArrayViewD<'_, f64>) -> Result<ArrayD<T>> {
    zip_map(x, e, |p: &T, q: &f64| T::from_f64(p.to_f64().powf(*q)))
}

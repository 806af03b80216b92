//! PRelu: `x < 0 ? slope * x : x`, `x` and `slope` broadcast together (ONNX says the slope
//! broadcasts to `x`; its reference implementation and ONNX Runtime accept both ways).

use ndarray::{ArrayD, ArrayViewD};

use super::broadcast::zip_map;
use super::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// The PRelu kernel.
#[derive(Debug)]
pub struct PReluKernel;

fn prelu<T: Arith>(x: &ArrayViewD<'_, T>, slope: &ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
    zip_map(
        x,
        slope,
        |v: &T, s: &T| if *v < T::ZERO { v.mul(*s) } else { *v },
    )
}

impl Kernel for PReluKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let slope = input(inputs, 1)?;
        if x.dtype() != slope.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "X is {} but slope is {}",
                x.dtype(),
                slope.dtype()
            )));
        }
        let out = dispatch_numeric!(x, a => Tensor::from(prelu(&a.view(), &slope.view()?)?),
            other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        Ok(vec![out])
    }
}

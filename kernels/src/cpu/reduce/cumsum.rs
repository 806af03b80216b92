//! CumSum and CumProd: running sums (products) along an axis given as a scalar input,
//! optionally exclusive (each output excludes its own element) and/or reversed.

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::axes::{blocked, normalize_axis};
use crate::cpu::binary::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// The CumSum (or CumProd) kernel.
#[derive(Debug)]
pub struct CumSumKernel {
    /// Running products (CumProd) instead of sums.
    pub product: bool,
    /// Exclude each element from its own sum.
    pub exclusive: bool,
    /// Sum from the end of the axis.
    pub reverse: bool,
}

impl CumSumKernel {
    fn cumsum<T: Arith>(&self, a: &ArrayViewD<'_, T>, axis: usize) -> ArrayD<T> {
        let b = blocked(a, &[axis]);
        let (outer, r, inner) = (b.outer, b.reduced, b.inner);
        let data = b.slice();
        let identity = if self.product {
            T::from_f64(1.0)
        } else {
            T::ZERO
        };
        let step_op = |acc: T, x: T| if self.product { acc.mul(x) } else { acc.add(x) };
        let mut out = vec![T::ZERO; data.len()];
        let mut running = vec![identity; inner];
        for o in 0..outer {
            running.fill(identity);
            for step in 0..r {
                let j = if self.reverse { r - 1 - step } else { step };
                let at = (o * r + j) * inner;
                let (src, dst) = (&data[at..at + inner], &mut out[at..at + inner]);
                for ((d, s), acc) in dst.iter_mut().zip(src).zip(running.iter_mut()) {
                    if self.exclusive {
                        *d = *acc;
                        *acc = step_op(*acc, *s);
                    } else {
                        *acc = step_op(*acc, *s);
                        *d = *acc;
                    }
                }
            }
        }
        ArrayD::from_shape_vec(IxDyn(a.shape()), out).expect("same size as the input")
    }
}

impl Kernel for CumSumKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let axis_t = input(inputs, 1)?;
        let axis = match axis_t.to_i64_vec()?.as_slice() {
            [a] => normalize_axis(*a, x.rank())?,
            _ => {
                return Err(KernelError::Shape(format!(
                    "the axis must be a scalar, got shape {:?}",
                    axis_t.shape()
                )));
            }
        };
        let out = dispatch_numeric!(x, a => Tensor::from(self.cumsum(&a.view(), axis)),
            other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        Ok(vec![out])
    }
}

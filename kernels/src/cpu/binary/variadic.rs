//! Max, Min, Sum and Mean: any number (≥ 1) of same-type inputs, broadcast together.

use ndarray::{ArrayD, ArrayViewD};

use super::broadcast::{unary_map, zip_map};
use super::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::Kernel;
use crate::{Element, Tensor, dispatch_numeric};

/// Which reduction across inputs a [`VariadicKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariadicOp {
    /// Elementwise maximum (NaN propagates).
    Max,
    /// Elementwise minimum (NaN propagates).
    Min,
    /// Elementwise sum.
    Sum,
    /// Elementwise mean (floating-point types only).
    Mean,
}

/// A variadic elementwise kernel.
#[derive(Debug)]
pub struct VariadicKernel {
    op: VariadicOp,
}

impl VariadicKernel {
    /// A kernel computing `op`.
    pub fn new(op: VariadicOp) -> Self {
        VariadicKernel { op }
    }
}

fn fold<T: Arith + Element>(op: VariadicOp, inputs: &[&Tensor]) -> Result<ArrayD<T>> {
    let views: Vec<ArrayViewD<'_, T>> = inputs
        .iter()
        .map(|t| t.view::<T>())
        .collect::<Result<_>>()?;
    let (first, rest) = views
        .split_first()
        .ok_or_else(|| KernelError::Arity("needs at least one input".into()))?;
    let mut acc: ArrayD<T> = first.to_owned();
    for v in rest {
        acc = match op {
            VariadicOp::Max => zip_map(&acc.view(), v, |x: &T, y: &T| x.max_nan(*y))?,
            VariadicOp::Min => zip_map(&acc.view(), v, |x: &T, y: &T| x.min_nan(*y))?,
            VariadicOp::Sum | VariadicOp::Mean => {
                zip_map(&acc.view(), v, |x: &T, y: &T| x.add(*y))?
            }
        };
    }
    if op == VariadicOp::Mean {
        let n = T::from_f64(views.len() as f64);
        acc = unary_map(&acc.view(), |x: &T| x.div(n));
    }
    Ok(acc)
}

impl Kernel for VariadicKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let present: Vec<&Tensor> = inputs
            .iter()
            .map(|t| {
                t.ok_or_else(|| KernelError::Arity("variadic inputs cannot be omitted".into()))
            })
            .collect::<Result<_>>()?;
        let first = present
            .first()
            .ok_or_else(|| KernelError::Arity("needs at least one input".into()))?;
        if let Some(t) = present.iter().find(|t| t.dtype() != first.dtype()) {
            return Err(KernelError::DTypeMismatch(format!(
                "inputs are {} and {}",
                first.dtype(),
                t.dtype()
            )));
        }
        if self.op == VariadicOp::Mean && !first.dtype().is_float() {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: first.dtype(),
            });
        }
        let out = dispatch_numeric!(*first, a => Tensor::from(fold_typed(self.op, &present, a)?),
            other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        Ok(vec![out])
    }
}

/// [`fold`] with the element type taken from `_witness`.
fn fold_typed<T: Arith + Element>(
    op: VariadicOp,
    inputs: &[&Tensor],
    _witness: &ndarray::ArcArray<T, ndarray::IxDyn>,
) -> Result<ArrayD<T>> {
    fold::<T>(op, inputs)
}

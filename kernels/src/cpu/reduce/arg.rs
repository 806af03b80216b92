//! ArgMax and ArgMin: the int64 index of the extreme value along one axis, the first
//! occurrence by default or the last with `select_last_index`.

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::axes::{blocked, normalize_axis, reduced_shape};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// An ArgMax / ArgMin kernel.
#[derive(Debug)]
pub struct ArgKernel {
    /// True for ArgMax, false for ArgMin.
    pub max: bool,
    /// The axis (may be negative).
    pub axis: i64,
    /// Keep the reduced axis as size 1.
    pub keepdims: bool,
    /// Report the last index among equal extremes.
    pub select_last: bool,
}

impl ArgKernel {
    fn arg<T: PartialOrd + Clone>(&self, a: &ArrayViewD<'_, T>) -> Result<ArrayD<i64>> {
        let axis = normalize_axis(self.axis, a.ndim())?;
        let b = blocked(a, &[axis]);
        let (outer, r, inner) = (b.outer, b.reduced, b.inner);
        if r == 0 && outer * inner > 0 {
            return Err(KernelError::InvalidValue(format!(
                "cannot take the arg{} of an empty axis",
                if self.max { "max" } else { "min" }
            )));
        }
        let data = b.slice();
        // `better(v, best)`: whether `v` replaces the current best.
        let better = |v: &T, best: &T| match (self.max, self.select_last) {
            (true, false) => v > best,
            (true, true) => v >= best,
            (false, false) => v < best,
            (false, true) => v <= best,
        };
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for k in 0..inner {
                let at = |j: usize| &data[(o * r + j) * inner + k];
                let mut best = 0usize;
                for j in 1..r {
                    if better(at(j), at(best)) {
                        best = j;
                    }
                }
                out.push(best as i64);
            }
        }
        let shape = reduced_shape(a.shape(), &[axis], self.keepdims);
        ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| KernelError::Shape(e.to_string()))
    }
}

impl Kernel for ArgKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = dispatch_numeric!(x, a => self.arg(&a.view())?,
            other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        Ok(vec![Tensor::from(out)])
    }
}

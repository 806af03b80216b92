//! ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
//! ReduceLogSum, ReduceLogSumExp and ReduceSumSquare.
//!
//! Floating-point and integer sums accumulate in `f64` and convert back (integers
//! truncate, like `numpy(..).astype`); Max and Min compare in the element type. An
//! empty reduced set gives the identity: 0 for sums, 1 for products, the lowest value
//! for Max, the highest for Min, and `-inf` for the logarithmic reductions.

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::axes::{blocked, normalize_axes, reduced_shape};
use super::engine::{Fold, reduce};
use crate::cpu::binary::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input, opt_input};
use crate::{Tensor, dispatch_numeric};

/// Which reduction a [`ReduceKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Sum of squares.
    SumSquare,
    /// Arithmetic mean.
    Mean,
    /// Product.
    Prod,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
    /// Sum of absolute values.
    L1,
    /// Square root of the sum of squares.
    L2,
    /// Natural log of the sum.
    LogSum,
    /// Natural log of the sum of exponentials.
    LogSumExp,
}

/// A Reduce* kernel.
#[derive(Debug)]
pub struct ReduceKernel {
    /// The reduction.
    pub op: ReduceOp,
    /// Axes from the attribute (older opsets); `None` when they come from input 1.
    pub attr_axes: Option<Vec<i64>>,
    /// Keep reduced dimensions as size 1.
    pub keepdims: bool,
    /// With no axes, reduce nothing instead of everything.
    pub noop_with_empty_axes: bool,
}

fn run_fold<T: Arith>(op: ReduceOp, b: &super::axes::Blocked<'_, T>) -> Vec<T> {
    let add = |a: f64, c: f64| a + c;
    let r = b.reduced as f64;
    macro_rules! sum_like {
        ($step:expr, $finish:expr) => {
            reduce(
                b,
                &Fold {
                    init: 0.0f64,
                    step: $step,
                    merge: add,
                    finish: $finish,
                },
            )
        };
    }
    match op {
        ReduceOp::Sum => sum_like!(|a, x: &T| a + x.to_f64(), T::from_f64),
        ReduceOp::SumSquare => sum_like!(|a, x: &T| a + x.to_f64() * x.to_f64(), T::from_f64),
        ReduceOp::Mean => sum_like!(|a, x: &T| a + x.to_f64(), |a| T::from_f64(a / r)),
        ReduceOp::L1 => sum_like!(|a, x: &T| a + x.to_f64().abs(), T::from_f64),
        ReduceOp::L2 => sum_like!(
            |a, x: &T| a + x.to_f64() * x.to_f64(),
            |a: f64| T::from_f64(a.sqrt())
        ),
        ReduceOp::LogSum => sum_like!(|a, x: &T| a + x.to_f64(), |a: f64| T::from_f64(a.ln())),
        ReduceOp::LogSumExp => sum_like!(|a, x: &T| a + x.to_f64().exp(), |a: f64| T::from_f64(
            a.ln()
        )),
        ReduceOp::Prod => reduce(
            b,
            &Fold {
                init: 1.0f64,
                step: |a, x: &T| a * x.to_f64(),
                merge: |a, c| a * c,
                finish: T::from_f64,
            },
        ),
        // `from_f64(∓inf)` is ∓inf for floats and saturates to MIN/MAX for integers.
        ReduceOp::Max => reduce(
            b,
            &Fold {
                init: T::from_f64(f64::NEG_INFINITY),
                step: |a: T, x: &T| a.max_nan(*x),
                merge: |a: T, c: T| a.max_nan(c),
                finish: |a| a,
            },
        ),
        ReduceOp::Min => reduce(
            b,
            &Fold {
                init: T::from_f64(f64::INFINITY),
                step: |a: T, x: &T| a.min_nan(*x),
                merge: |a: T, c: T| a.min_nan(c),
                finish: |a| a,
            },
        ),
    }
}

fn reduce_array<T: Arith>(
    op: ReduceOp,
    a: &ArrayViewD<'_, T>,
    axes: &[usize],
    keepdims: bool,
) -> ArrayD<T> {
    let shape = reduced_shape(a.shape(), axes, keepdims);
    let data = run_fold(op, &blocked(a, axes));
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("one value per output element")
}

fn reduce_bool(
    op: ReduceOp,
    a: &ArrayViewD<'_, bool>,
    axes: &[usize],
    keepdims: bool,
) -> Result<ArrayD<bool>> {
    let b = blocked(a, axes);
    let data = match op {
        ReduceOp::Max => reduce(
            &b,
            &Fold {
                init: false,
                step: |a, x: &bool| a | *x,
                merge: |a, c| a | c,
                finish: |a| a,
            },
        ),
        ReduceOp::Min => reduce(
            &b,
            &Fold {
                init: true,
                step: |a, x: &bool| a & *x,
                merge: |a, c| a & c,
                finish: |a| a,
            },
        ),
        _ => {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: crate::DType::Bool,
            });
        }
    };
    let shape = reduced_shape(a.shape(), axes, keepdims);
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), data).expect("one value per output element"))
}

impl Kernel for ReduceKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let axes = match &self.attr_axes {
            Some(a) => a.clone(),
            None => match opt_input(inputs, 1) {
                Some(t) => t.to_i64_vec()?,
                None => Vec::new(),
            },
        };
        let axes = if axes.is_empty() {
            if self.noop_with_empty_axes {
                Vec::new()
            } else {
                (0..x.rank()).collect()
            }
        } else {
            normalize_axes(&axes, x.rank())?
        };
        let out = match x {
            Tensor::Bool(a) => Tensor::from(reduce_bool(self.op, &a.view(), &axes, self.keepdims)?),
            _ => {
                dispatch_numeric!(x, a => Tensor::from(reduce_array(self.op, &a.view(), &axes, self.keepdims)),
                other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))
            }
        };
        Ok(vec![out])
    }
}

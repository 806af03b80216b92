//! Comparisons (Equal, Greater, GreaterOrEqual, Less, LessOrEqual) and the boolean
//! logic ops (And, Or, Xor). All produce `bool` tensors with broadcasting.

use ndarray::{ArrayD, ArrayViewD};

use super::broadcast::zip_map;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// Which comparison or logic operation a [`CompareKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b` (any element type, strings included).
    Equal,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterOrEqual,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessOrEqual,
    /// `a && b` (bool).
    And,
    /// `a || b` (bool).
    Or,
    /// `a != b` (bool).
    Xor,
}

/// A comparison or logic kernel.
#[derive(Debug)]
pub struct CompareKernel {
    op: CompareOp,
}

impl CompareKernel {
    /// A kernel computing `op`.
    pub fn new(op: CompareOp) -> Self {
        CompareKernel { op }
    }
}

fn compare<T: PartialOrd + Clone + Sync>(
    op: CompareOp,
    a: &ArrayViewD<'_, T>,
    b: &ArrayViewD<'_, T>,
) -> Result<ArrayD<bool>> {
    match op {
        CompareOp::Equal => zip_map(a, b, |x: &T, y: &T| x == y),
        CompareOp::Greater => zip_map(a, b, |x: &T, y: &T| x > y),
        CompareOp::GreaterOrEqual => zip_map(a, b, |x: &T, y: &T| x >= y),
        CompareOp::Less => zip_map(a, b, |x: &T, y: &T| x < y),
        CompareOp::LessOrEqual => zip_map(a, b, |x: &T, y: &T| x <= y),
        CompareOp::And | CompareOp::Or | CompareOp::Xor => {
            unreachable!("logic ops are dispatched to `logic`")
        }
    }
}

fn logic(
    op: CompareOp,
    a: &ArrayViewD<'_, bool>,
    b: &ArrayViewD<'_, bool>,
) -> Result<ArrayD<bool>> {
    match op {
        CompareOp::And => zip_map(a, b, |x: &bool, y: &bool| *x & *y),
        CompareOp::Or => zip_map(a, b, |x: &bool, y: &bool| *x | *y),
        _ => zip_map(a, b, |x: &bool, y: &bool| *x ^ *y),
    }
}

impl Kernel for CompareKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        if a.dtype() != b.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "operands are {} and {}",
                a.dtype(),
                b.dtype()
            )));
        }
        let out = match self.op {
            CompareOp::And | CompareOp::Or | CompareOp::Xor => match (a, b) {
                (Tensor::Bool(x), Tensor::Bool(y)) => logic(self.op, &x.view(), &y.view())?,
                _ => {
                    return Err(KernelError::UnsupportedDType {
                        index: 0,
                        dtype: a.dtype(),
                    });
                }
            },
            CompareOp::Equal => match a {
                Tensor::Bool(x) => compare(self.op, &x.view(), &b.view()?)?,
                Tensor::String(x) => compare(self.op, &x.view(), &b.view()?)?,
                // The low-precision types are not ONNX Equal types (and equal codes are not
                // equal values: NaN, ±0).
                _ => dispatch_numeric!(a, x => compare(self.op, &x.view(), &b.view()?)?,
                    other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() })),
            },
            _ => dispatch_numeric!(a, x => compare(self.op, &x.view(), &b.view()?)?,
                other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() })),
        };
        Ok(vec![Tensor::from(out)])
    }
}

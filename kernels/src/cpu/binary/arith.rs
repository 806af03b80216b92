//! Add, Sub, Mul, Div and Mod: same-type numeric inputs, broadcast, same-type output.

use ndarray::{ArrayD, ArrayViewD};

use super::broadcast::zip_map;
use super::num::Arith;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_numeric};

/// Which arithmetic operation a [`ArithKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integers truncate toward zero).
    Div,
    /// `Mod` with `fmod = 0`: sign of the divisor (integers only).
    ModFloor,
    /// `Mod` with `fmod = 1`: sign of the dividend.
    ModTrunc,
}

/// An elementwise arithmetic kernel with broadcasting.
#[derive(Debug)]
pub struct ArithKernel {
    op: ArithOp,
}

impl ArithKernel {
    /// A kernel computing `op`.
    pub fn new(op: ArithOp) -> Self {
        ArithKernel { op }
    }
}

/// `op` applied elementwise to two arrays of one numeric type.
pub fn arith<T: Arith>(
    op: ArithOp,
    a: &ArrayViewD<'_, T>,
    b: &ArrayViewD<'_, T>,
) -> Result<ArrayD<T>> {
    match op {
        ArithOp::Add => zip_map(a, b, |x: &T, y: &T| x.add(*y)),
        ArithOp::Sub => zip_map(a, b, |x: &T, y: &T| x.sub(*y)),
        ArithOp::Mul => zip_map(a, b, |x: &T, y: &T| x.mul(*y)),
        ArithOp::Div => zip_map(a, b, |x: &T, y: &T| x.div(*y)),
        ArithOp::ModFloor => zip_map(a, b, |x: &T, y: &T| x.rem_floor(*y)),
        ArithOp::ModTrunc => zip_map(a, b, |x: &T, y: &T| x.rem_trunc(*y)),
    }
}

/// Whether any element is zero (an integer divisor that ONNX leaves undefined).
fn has_zero<T: Arith>(a: &ArrayViewD<'_, T>) -> bool {
    a.iter().any(|v| *v == T::ZERO)
}

/// `op` on two tensors of the same numeric element type.
pub fn arith_tensors(op: ArithOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(KernelError::DTypeMismatch(format!(
            "operands are {} and {}",
            a.dtype(),
            b.dtype()
        )));
    }
    if op == ArithOp::ModFloor && a.dtype().is_float() {
        return Err(KernelError::BadAttribute {
            name: "fmod".into(),
            reason: "must be 1 for floating-point inputs".into(),
        });
    }
    let divides = matches!(op, ArithOp::Div | ArithOp::ModFloor | ArithOp::ModTrunc);
    dispatch_numeric!(a, x => {
        let y = b.view()?;
        if divides && !a.dtype().is_float() && has_zero(&y) {
            return Err(KernelError::InvalidValue("integer division by zero".into()));
        }
        Ok(Tensor::from(arith(op, &x.view(), &y)?))
    }, other => Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))
}

impl Kernel for ArithKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        Ok(vec![arith_tensors(self.op, a, b)?])
    }
}

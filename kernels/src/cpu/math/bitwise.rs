//! Bitwise operators on integer tensors: `BitwiseAnd`, `BitwiseOr`, `BitwiseXor` (any integer
//! type, with broadcasting), `BitwiseNot`, and `BitShift` (unsigned types; a shift by the
//! type's width or more gives 0, as numpy's does).

use ndarray::{ArrayD, ArrayViewD};

use super::check_inputs;
use crate::Tensor;
use crate::cpu::binary::broadcast::{unary_map, zip_map};
use crate::cpu::binary::check_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// Which bitwise operation a [`BitwiseKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a ^ b`.
    Xor,
    /// `!a`.
    Not,
    /// `a << b`.
    ShiftLeft,
    /// `a >> b`.
    ShiftRight,
}

/// A bitwise kernel.
#[derive(Debug)]
pub struct BitwiseKernel {
    op: BitOp,
}

/// Builds a bitwise kernel (`BitwiseAnd/Or/Xor/Not`, `BitShift`).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let op = match spec.op_type {
        "BitwiseAnd" => BitOp::And,
        "BitwiseOr" => BitOp::Or,
        "BitwiseXor" => BitOp::Xor,
        "BitwiseNot" => BitOp::Not,
        "BitShift" => {
            check_opset(spec, 11)?;
            spec.attrs.only(&["direction"])?;
            check_inputs(spec, 2)?;
            let op = match spec.attrs.string("direction", "")?.as_str() {
                "LEFT" => BitOp::ShiftLeft,
                "RIGHT" => BitOp::ShiftRight,
                other => {
                    return Err(KernelError::BadAttribute {
                        name: "direction".into(),
                        reason: format!("must be 'LEFT' or 'RIGHT', got '{other}'"),
                    });
                }
            };
            return Ok(Box::new(BitwiseKernel { op }));
        }
        other => {
            return Err(KernelError::UnsupportedOp {
                op_type: other.to_string(),
                domain: spec.domain.to_string(),
            });
        }
    };
    check_opset(spec, 18)?;
    spec.attrs.only(&[])?;
    check_inputs(spec, if op == BitOp::Not { 1 } else { 2 })?;
    Ok(Box::new(BitwiseKernel { op }))
}

/// The integer operations a bitwise kernel needs.
trait Bits:
    Copy
    + Send
    + Sync
    + 'static
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
    /// `self << by`, 0 when `by` is the width or more.
    fn shl(self, by: Self) -> Self;
    /// `self >> by`, 0 when `by` is the width or more.
    fn shr(self, by: Self) -> Self;
}

macro_rules! bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn shl(self, by: Self) -> Self {
                u32::try_from(by).ok().and_then(|b| self.checked_shl(b)).unwrap_or(0)
            }
            #[inline(always)]
            fn shr(self, by: Self) -> Self {
                u32::try_from(by).ok().and_then(|b| self.checked_shr(b)).unwrap_or(0)
            }
        }
    )*};
}
bits!(u8, u16, u32, u64, i8, i16, i32, i64);

fn binary<T: Bits>(op: BitOp, a: &ArrayViewD<'_, T>, b: &ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
    match op {
        BitOp::And => zip_map(a, b, |&x: &T, &y: &T| x & y),
        BitOp::Or => zip_map(a, b, |&x: &T, &y: &T| x | y),
        BitOp::Xor => zip_map(a, b, |&x: &T, &y: &T| x ^ y),
        BitOp::ShiftLeft => zip_map(a, b, |&x: &T, &y: &T| x.shl(y)),
        BitOp::ShiftRight => zip_map(a, b, |&x: &T, &y: &T| x.shr(y)),
        BitOp::Not => unreachable!("BitwiseNot takes one input"),
    }
}

impl Kernel for BitwiseKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let unsupported = || KernelError::UnsupportedDType {
            index: 0,
            dtype: a.dtype(),
        };
        if self.op == BitOp::Not {
            let out = match a {
                Tensor::U8(x) => Tensor::from(unary_map(&x.view(), |&v: &u8| !v)),
                Tensor::U16(x) => Tensor::from(unary_map(&x.view(), |&v: &u16| !v)),
                Tensor::U32(x) => Tensor::from(unary_map(&x.view(), |&v: &u32| !v)),
                Tensor::U64(x) => Tensor::from(unary_map(&x.view(), |&v: &u64| !v)),
                Tensor::I8(x) => Tensor::from(unary_map(&x.view(), |&v: &i8| !v)),
                Tensor::I16(x) => Tensor::from(unary_map(&x.view(), |&v: &i16| !v)),
                Tensor::I32(x) => Tensor::from(unary_map(&x.view(), |&v: &i32| !v)),
                Tensor::I64(x) => Tensor::from(unary_map(&x.view(), |&v: &i64| !v)),
                _ => return Err(unsupported()),
            };
            return Ok(vec![out]);
        }
        let b = input(inputs, 1)?;
        if a.dtype() != b.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "operands are {} and {}",
                a.dtype(),
                b.dtype()
            )));
        }
        let shift = matches!(self.op, BitOp::ShiftLeft | BitOp::ShiftRight);
        let op = self.op;
        let out = match a {
            Tensor::U8(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::U16(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::U32(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::U64(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            // BitShift is defined on the unsigned types only.
            _ if shift => return Err(unsupported()),
            Tensor::I8(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::I16(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::I32(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            Tensor::I64(x) => Tensor::from(binary(op, &x.view(), &b.view()?)?),
            _ => return Err(unsupported()),
        };
        Ok(vec![out])
    }
}

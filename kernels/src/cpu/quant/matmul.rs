//! `MatMulInteger` (opset 10) and `QLinearMatMul` (opsets 10, 21): batched integer products
//! with numpy broadcasting, zero points per tensor, per row of `A` or per column of `B`.

use super::operand::{Requant, bytes, operand, scales, zero_points};
use super::params::int_tensor;
use super::qgemm;
use crate::cpu::nn::matmul::{BatchPlan, plan};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// `MatMulInteger`: `(A - a_zero_point) · (B - b_zero_point)` in int32.
#[derive(Debug)]
pub struct MatMulInteger;

/// `QLinearMatMul`: the integer product requantized to the output's scale and zero point.
#[derive(Debug)]
pub struct QLinearMatMul;

/// Builds [`MatMulInteger`].
pub fn build_integer(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    crate::cpu::nn::common::min_opset(spec.opset, 10, spec.op_type)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(MatMulInteger))
}

/// Builds [`QLinearMatMul`].
pub fn build_qlinear(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    crate::cpu::nn::common::min_opset(spec.opset, 10, spec.op_type)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(QLinearMatMul))
}

/// The batched integer product of `a` and `b` with their zero points.
pub(crate) fn integer_product(
    a: &Tensor,
    za: Option<&Tensor>,
    b: &Tensor,
    zb: Option<&Tensor>,
) -> Result<(BatchPlan, Vec<i32>)> {
    let p = plan(a.shape(), b.shape())?;
    let (ab, bb) = (bytes(a, 0)?, bytes(b, 1)?);
    let za = zero_points(za, a.dtype(), p.m, "A")?;
    let zb = zero_points(zb, b.dtype(), p.n, "B")?;
    let (m, k, n) = (p.m, p.k, p.n);
    let mut c = vec![0i32; p.offsets.len() * m * n];
    for (&(oa, ob), c) in p.offsets.iter().zip(c.chunks_mut((m * n).max(1))) {
        let (a, b) = (operand(&ab), operand(&bb));
        let a = qgemm::Operand {
            data: &a.data[oa..],
            ..a
        };
        let b = qgemm::Operand {
            data: &b.data[ob..],
            ..b
        };
        qgemm::gemm((m, k, n), a, &za, b, &zb, c);
    }
    Ok((p, c))
}

impl Kernel for MatMulInteger {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
        let (p, c) = integer_product(a, opt_input(inputs, 2), b, opt_input(inputs, 3))?;
        Ok(vec![int_tensor(DType::I32, &p.out_shape, c)?])
    }
}

impl Kernel for QLinearMatMul {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let b = input(inputs, 3)?;
        let (p, c) = integer_product(a, opt_input(inputs, 2), b, opt_input(inputs, 5))?;
        let a_scale = scales(input(inputs, 1)?, 1, 1, "a")?;
        let b_scale = scales(input(inputs, 4)?, 4, p.n, "b")?;
        let rq = Requant::new(
            a_scale[0],
            &b_scale,
            input(inputs, 6)?,
            opt_input(inputs, 7),
            a.dtype(),
        )?;
        if rq.multipliers.len() > 1 && rq.multipliers.len() != p.n {
            return Err(KernelError::Shape("b scale per column mismatch".into()));
        }
        let n = p.n.max(1);
        let y = rq.apply(&c, |i| i % n);
        Ok(vec![int_tensor(rq.dtype, &p.out_shape, y)?])
    }
}

//! CPU kernels: quantization — `QuantizeLinear`, `DequantizeLinear`, `DynamicQuantizeLinear`,
//! the integer products `MatMulInteger` and `ConvInteger`, and the requantizing
//! `QLinearMatMul` and `QLinearConv`, all on the integer matrix product in [`qgemm`].

pub mod conv;
pub mod dynamic;
pub mod linear;
pub mod matmul;
mod operand;
mod params;
pub mod qgemm;

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "ConvInteger",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "QLinearConv",
    "QLinearMatMul",
    "QuantizeLinear",
];

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "QuantizeLinear" => linear::build_quantize(spec),
        "DequantizeLinear" => linear::build_dequantize(spec),
        "DynamicQuantizeLinear" => dynamic::build(spec),
        "MatMulInteger" => matmul::build_integer(spec),
        "QLinearMatMul" => matmul::build_qlinear(spec),
        "ConvInteger" | "QLinearConv" => conv::build(spec),
        _ => Err(KernelError::UnsupportedOp {
            op_type: spec.op_type.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}

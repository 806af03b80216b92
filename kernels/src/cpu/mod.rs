//! CPU kernels (ndarray + rayon), grouped by family.
//!
//! Each family module exposes `OPS` (the op types it implements) and `build`
//! (a [`Builder`] for any op in `OPS`).

pub(crate) mod aligned;
pub mod binary;
pub mod detection;
pub mod math;
pub mod nn;
pub mod quant;
pub mod reduce;
pub mod shape;
pub(crate) mod transpose_block;
pub mod unary;

#[cfg(test)]
mod low_precision_tests;

use crate::error::{KernelError, Result};
use crate::kernel::{Builder, Kernel, NodeSpec};

/// Every family: its op list and its builder.
const FAMILIES: &[(&[&str], Builder)] = &[
    (unary::OPS, unary::build),
    (binary::OPS, binary::build),
    (reduce::OPS, reduce::build),
    (nn::OPS, nn::build),
    (quant::OPS, quant::build),
    (shape::OPS, shape::build),
    (detection::OPS, detection::build),
    (math::OPS, math::build),
];

/// The op types the CPU implements in the default (`ai.onnx`) domain, sorted.
pub fn supported_ops() -> Vec<&'static str> {
    let mut ops: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|(ops, _)| ops.iter().copied())
        .collect();
    ops.sort_unstable();
    ops
}

/// The ops the CPU implements outside the default domain, as `(domain, op type)`: ONNX
/// Runtime's contrib ops that the graph passes produce.
pub const CONTRIB_OPS: &[(&str, &str)] = &[
    (nn::fused_conv::DOMAIN, "FusedConv"),
    (nn::SPILLWAY_DOMAIN, "MatMulBias"),
    (nn::SPILLWAY_DOMAIN, "RMSNormalization"),
    (nn::blocked::DOMAIN, "Conv"),
    (nn::blocked::DOMAIN, "MaxPool"),
    (nn::blocked::DOMAIN, "AveragePool"),
    (nn::blocked::DOMAIN, "GlobalAveragePool"),
    (nn::blocked::DOMAIN, "ReorderOutput"),
];

/// Builds the CPU kernel for a node, or explains why it cannot.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    if spec.domain == nn::fused_conv::DOMAIN && spec.op_type == "FusedConv" {
        return nn::fused_conv::build(spec);
    }
    if spec.domain == nn::SPILLWAY_DOMAIN {
        match spec.op_type {
            "MatMulBias" => return nn::matmul::build_with_bias(spec),
            "RMSNormalization" => return nn::layer_norm::build_rms(spec),
            _ => {}
        }
    }
    if spec.domain == nn::blocked::DOMAIN {
        return nn::blocked::build(spec);
    }
    let default_domain = spec.domain.is_empty() || spec.domain == "ai.onnx";
    let family = FAMILIES
        .iter()
        .find(|(ops, _)| default_domain && ops.contains(&spec.op_type));
    match family {
        Some((_, builder)) => builder(spec),
        None => Err(KernelError::UnsupportedOp {
            op_type: spec.op_type.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}

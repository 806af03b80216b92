//! CPU kernels: nn family — convolutions, matrix products, pooling, normalisation, Einsum, the
//! recurrent LSTM, GRU and RNN, and ONNX Runtime's `com.microsoft` `FusedConv`.

/// The domain of Spillway's own fused ops, which the graph passes make: `MatMulBias`
/// ([`matmul::build_with_bias`]) and `RMSNormalization` ([`layer_norm::build_rms`]).
pub const SPILLWAY_DOMAIN: &str = "spillway";

pub mod attention;
pub mod blocked;
pub mod common;
pub mod conv;
pub mod conv_transpose;
mod depthwise;
pub mod einsum;
pub mod epilogue;
mod epilogue_simd;
pub mod fused_conv;
pub mod gemm_op;
mod gemv;
pub mod group_norm;
pub mod im2col;
pub mod layer_norm;
pub mod loss;
pub mod lrn;
pub mod matmul;
pub mod matrix;
pub mod norm;
pub mod packed_gemm;
mod packed_weights;
mod phase_planes;
pub mod pool;
pub mod pool2d;
pub mod pool_same;
pub mod pool_stride2;
pub mod rnn;
pub mod rotary;
pub mod sample;
pub mod spatial;
pub mod unfold;
pub mod winograd;

#[cfg(test)]
mod tests;

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "AffineGrid",
    "Attention",
    "AveragePool",
    "BatchNormalization",
    "Col2Im",
    "Conv",
    "ConvTranspose",
    "Einsum",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "GRU",
    "GridSample",
    "GroupNormalization",
    "InstanceNormalization",
    "LRN",
    "LSTM",
    "LayerNormalization",
    "LpPool",
    "MatMul",
    "MaxPool",
    "MaxUnpool",
    "NegativeLogLikelihoodLoss",
    "RMSNormalization",
    "RNN",
    "RotaryEmbedding",
    "SoftmaxCrossEntropyLoss",
];

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "Attention" => attention::build(spec),
        "GridSample" => sample::build_grid_sample(spec),
        "AffineGrid" => sample::build_affine_grid(spec),
        "Col2Im" => unfold::build_col2im(spec),
        "MaxUnpool" => unfold::build_max_unpool(spec),
        "Conv" => conv::build(spec),
        "ConvTranspose" => conv_transpose::build(spec),
        "Gemm" => gemm_op::build(spec),
        "MatMul" => matmul::build(spec),
        "MaxPool" | "AveragePool" => pool::build(spec),
        "LpPool" => pool::build_lp(spec),
        "GlobalAveragePool" | "GlobalMaxPool" => pool::build_global(spec),
        "BatchNormalization" => norm::build_batch(spec),
        "InstanceNormalization" => norm::build_instance(spec),
        "LayerNormalization" => layer_norm::build(spec),
        "RMSNormalization" => layer_norm::build_onnx_rms(spec),
        "GroupNormalization" => group_norm::build(spec),
        "RotaryEmbedding" => rotary::build(spec),
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => loss::build(spec),
        "LRN" => lrn::build(spec),
        "Einsum" => einsum::build(spec),
        "LSTM" | "GRU" | "RNN" => rnn::build(spec),
        _ => Err(KernelError::UnsupportedOp {
            op_type: spec.op_type.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}

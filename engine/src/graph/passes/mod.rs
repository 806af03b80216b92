//! Graph rewrites that keep the model's outputs within tolerance. Each pass is its own file
//! and is tested on its own; [`optimize`] runs them all.

mod batchnorm;
mod blocked_layout;
mod constant_folding;
mod dead_code;
mod fold_pads;
mod fuse_activation;
mod fuse_gelu;
mod fuse_matmul_bias;
mod fuse_qdq;
mod fuse_rms_norm;
mod identity;
mod matching;

pub use batchnorm::fold_batchnorm_into_conv;
pub use blocked_layout::block_layouts;
pub(crate) use blocked_layout::blocked_shape;
pub use constant_folding::fold_constants;
pub use dead_code::remove_dead_nodes;
pub use fold_pads::fold_pads;
pub use fuse_activation::fuse_conv_activations;
pub use fuse_gelu::fuse_gelu;
pub use fuse_matmul_bias::fuse_matmul_bias;
pub use fuse_qdq::fuse_qdq;
pub use fuse_rms_norm::fuse_rms_norm;
pub use identity::{remove_identities, remove_identity_casts};

use crate::error::Result;
use crate::graph::{Graph, shape_inference};

/// Which rewrites [`optimize`] makes (ONNX Runtime's levels of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Rewrites that keep every node runnable on every device: identity, dropout and
    /// same-type `Cast` removal, shape inference, constant folding, BatchNorm folding,
    /// dead-node removal.
    Basic,
    /// `Basic`, then rewrites that only the CPU's kernels take: QDQ `Conv` and `MatMul`
    /// fused into `QLinearConv` and `QLinearMatMul` (before constant folding), zero `Pad`s
    /// folded into the
    /// padding of the `Conv` or `AveragePool` reading them (it may become asymmetric, which
    /// cuDNN does not take), fusions (`Conv` + activation → `com.microsoft` `FusedConv`; GELU
    /// written out op by op → `Gelu`; `MatMul` + bias `Add` → `spillway` `MatMulBias`; T5's RMS
    /// norm → `spillway` `RMSNormalization`) and, on
    /// CPUs with AVX-512 or AVX2, images in blocks of 16 channels
    /// (`spillway.nchw16c`).
    Extended,
}

/// Runs every pass of `level`, in subgraphs first.
pub fn optimize(graph: &mut Graph, level: Level) -> Result<()> {
    for node in &mut graph.nodes {
        for sub in &mut node.subgraphs {
            optimize(&mut sub.graph, level)?;
        }
    }
    remove_identities(graph);
    shape_inference::infer(graph);
    remove_identity_casts(graph);
    if level == Level::Extended {
        // Before constant folding, which would dequantize the weights.
        fuse_qdq(graph);
    }
    fold_constants(graph)?;
    fold_batchnorm_into_conv(graph);
    if level == Level::Extended {
        fold_pads(graph);
        fuse_conv_activations(graph);
        fuse_gelu(graph);
        fuse_matmul_bias(graph);
        fuse_rms_norm(graph);
        let wanted = std::env::var("SPILLWAY_BLOCKED").map_or(true, |v| v != "0");
        if wanted && spillway_kernels::cpu::nn::blocked::available() {
            // The layout follows each value's readers: the `Shape`s and `Pad`s that the passes
            // above left unread must not count (NASNet's stem and reduction cells kept planes
            // for them).
            remove_dead_nodes(graph);
            block_layouts(graph);
        }
    }
    remove_dead_nodes(graph);
    Ok(())
}

/// Replaces every node input reading `from` with `to`.
pub(crate) fn rewire(graph: &mut Graph, from: crate::graph::ValueId, to: crate::graph::ValueId) {
    for node in &mut graph.nodes {
        for v in node.inputs.iter_mut().flatten() {
            if *v == from {
                *v = to;
            }
        }
    }
}

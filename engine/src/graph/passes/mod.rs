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

/// What the passes may do beyond what their [`Level`] says.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassOptions {
    /// At [`Level::Extended`], moves chains of convolutions and pools into blocks of 16
    /// channels ([`block_layouts`]) where the CPU and the graph's
    /// [`kernel_options`](Graph::kernel_options) run the blocked kernels (default on).
    pub blocked_layout: bool,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            blocked_layout: true,
        }
    }
}

impl PassOptions {
    /// Sets [`PassOptions::blocked_layout`].
    pub fn with_blocked_layout(mut self, on: bool) -> Self {
        self.blocked_layout = on;
        self
    }
}

/// Runs every pass of `level` with the default [`PassOptions`], in subgraphs first.
#[cfg(feature = "internals")]
pub fn optimize(graph: &mut Graph, level: Level) -> Result<()> {
    optimize_with(graph, level, &PassOptions::default())
}

/// Runs every pass of `level` as `options` say, in subgraphs first.
pub fn optimize_with(graph: &mut Graph, level: Level, options: &PassOptions) -> Result<()> {
    for node in &mut graph.nodes {
        for sub in &mut node.subgraphs {
            optimize_with(&mut sub.graph, level, options)?;
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
        // The blocked kernels need the packed GEMM, on this CPU and with the graph's options.
        let runs_blocked = spillway_kernels::cpu::nn::blocked::available()
            && graph.kernel_options.gemm_isa().is_some();
        if options.blocked_layout && runs_blocked {
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

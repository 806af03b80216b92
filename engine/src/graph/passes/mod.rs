//! Graph rewrites that keep the model's outputs within tolerance. Each pass is its own file
//! and is tested on its own; [`optimize`] runs them all.

mod batchnorm;
mod constant_folding;
mod dead_code;
mod identity;

pub use batchnorm::fold_batchnorm_into_conv;
pub use constant_folding::fold_constants;
pub use dead_code::remove_dead_nodes;
pub use identity::remove_identities;

use crate::error::Result;
use crate::graph::{Graph, shape_inference};

/// Runs every pass: identity/dropout removal, shape inference, constant folding,
/// BatchNorm folding, dead-node removal.
pub fn optimize(graph: &mut Graph) -> Result<()> {
    for node in &mut graph.nodes {
        for sub in &mut node.subgraphs {
            optimize(&mut sub.graph)?;
        }
    }
    remove_identities(graph);
    shape_inference::infer(graph);
    fold_constants(graph)?;
    fold_batchnorm_into_conv(graph);
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

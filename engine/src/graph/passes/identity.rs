//! Removes `Identity` nodes and inference-mode `Dropout` nodes by wiring their consumers to
//! their input.

use crate::graph::Graph;

use super::rewire;

/// Removes Identity and Dropout (when its mask is unused and it cannot be in training mode).
/// A node whose output is a graph output is kept: removing it would rename the output.
pub fn remove_identities(graph: &mut Graph) {
    let mut keep = Vec::with_capacity(graph.nodes.len());
    let nodes = std::mem::take(&mut graph.nodes);
    let mut rewires = Vec::new();
    for node in nodes {
        let removable = match node.op_type.as_str() {
            "Identity" => true,
            // Inputs 1 (ratio) and 2 (training_mode) may only be absent: a training-mode input
            // could be true at run time.
            "Dropout" => node.inputs.len() <= 1 && node.outputs.iter().skip(1).all(Option::is_none),
            _ => false,
        };
        let (Some(Some(input)), Some(Some(output))) = (node.inputs.first(), node.outputs.first())
        else {
            keep.push(node);
            continue;
        };
        if removable && node.domain.is_empty() && !graph.outputs.contains(output) {
            rewires.push((*output, *input));
        } else {
            keep.push(node);
        }
    }
    graph.nodes = keep;
    for (from, to) in rewires.into_iter().rev() {
        rewire(graph, from, to);
    }
}

//! What the fusion passes ask of the nodes they match: plain default-domain nodes, and values
//! that a single node reads.

use crate::graph::{Graph, Node, ValueId};

/// Whether `node` is a default-domain `op` with `inputs` present inputs, one output and no
/// attributes.
pub(super) fn plain(node: &Node, op: &str, inputs: usize) -> bool {
    node.op_type == op
        && (node.domain.is_empty() || node.domain == "ai.onnx")
        && node.attrs.names().next().is_none()
        && node.inputs.len() == inputs
        && node.inputs.iter().all(Option::is_some)
        && node.outputs.len() == 1
        && node.subgraphs.is_empty()
}

/// The node's first output, when present.
pub(super) fn output_of(node: &Node) -> Option<ValueId> {
    node.outputs.first().copied().flatten()
}

/// The input of a two-input `node` other than `v` (`None` if `v` is not one of them, or both).
pub(super) fn other_input(node: &Node, v: ValueId) -> Option<ValueId> {
    match (node.inputs[0]?, node.inputs[1]?) {
        (l, r) if l == v && r != v => Some(r),
        (l, r) if r == v && l != v => Some(l),
        _ => None,
    }
}

/// For each value (by index), the node that reads it when that node's one input is its only
/// use and it is not a graph output: a value a fusion may absorb.
pub(super) fn sole_readers(graph: &Graph) -> Vec<Option<usize>> {
    let uses = graph.use_counts();
    let mut sole = vec![None; graph.values.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.present_inputs() {
            if uses[v.index()] == 1 {
                sole[v.index()] = Some(i);
            }
        }
    }
    sole
}

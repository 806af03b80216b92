//! What the fusion passes ask of the nodes they match (plain default-domain nodes, values that
//! a single node reads), and how they replace a matched chain with one node.

use spillway_kernels::Attributes;

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

/// How far a matched constant may be from the exact one (relative): exporters write `√2` and
/// `½` as `f32`, `1/√2` rounded either way.
const CONSTANT_TOLERANCE: f32 = 1e-6;

/// Whether `v` is a constant one-element `f32` tensor within [`CONSTANT_TOLERANCE`] of `c`.
pub(super) fn is_scalar(graph: &Graph, v: ValueId, c: f32) -> bool {
    graph
        .constant_f32_scalar(v)
        .is_some_and(|k| (k - c).abs() <= CONSTANT_TOLERANCE * c.abs())
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

/// A node that replaces a chain of nodes: `from`'s copy (its name) with a new op, attributes
/// and inputs, at the place of `last` (every input of the chain is computed before it),
/// writing `last`'s outputs.
pub(super) struct ChainFusion {
    pub from: usize,
    pub op_type: &'static str,
    pub domain: &'static str,
    pub opset: i64,
    pub attrs: Attributes,
    pub inputs: Vec<ValueId>,
    /// Every node of the chain, `last` included.
    pub nodes: Vec<usize>,
    pub last: usize,
}

/// Replaces every chain that `find` matches at a node (by index) with its fused node; chains
/// that share a node with one already fused are skipped. Returns how many it fused.
pub(super) fn fuse_chains(
    graph: &mut Graph,
    find: impl Fn(&Graph, usize) -> Option<ChainFusion>,
) -> usize {
    let mut remove = vec![false; graph.nodes.len()];
    let mut fused = 0;
    for i in 0..graph.nodes.len() {
        let Some(chain) = find(graph, i) else {
            continue;
        };
        if chain.nodes.iter().any(|&n| remove[n]) {
            continue;
        }
        let mut node = graph.nodes[chain.from].clone();
        node.op_type = chain.op_type.into();
        node.domain = chain.domain.into();
        node.opset = chain.opset;
        node.attrs = chain.attrs;
        node.declared_inputs = chain.inputs.len();
        node.inputs = chain.inputs.into_iter().map(Some).collect();
        node.outputs = graph.nodes[chain.last].outputs.clone();
        graph.nodes[chain.last] = node;
        for &n in &chain.nodes {
            remove[n] = n != chain.last;
        }
        fused += 1;
    }
    graph.remove_nodes(&remove);
    fused
}

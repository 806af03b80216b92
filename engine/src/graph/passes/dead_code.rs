//! Removes nodes whose outputs nothing reads.

use crate::graph::Graph;

/// Removes, back to front, every node none of whose outputs is read by a node or a graph output.
pub fn remove_dead_nodes(graph: &mut Graph) {
    let mut used = vec![false; graph.values.len()];
    for v in &graph.outputs {
        used[v.index()] = true;
    }
    let mut alive = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate().rev() {
        if node.present_outputs().any(|v| used[v.index()]) {
            alive[i] = true;
            for v in node.present_inputs() {
                used[v.index()] = true;
            }
        }
    }
    let mut i = 0;
    graph.nodes.retain(|_| {
        i += 1;
        alive[i - 1]
    });
    graph.constants.retain(|v, _| used[v.index()]);
}

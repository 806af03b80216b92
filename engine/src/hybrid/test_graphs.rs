//! Small hand-made graphs for the hybrid module's tests.

use crate::graph::{Graph, Node, ValueId, ValueInfo};
use spillway_kernels::Attributes;

/// A graph of `values` values named `v0`, `v1`, … and no node.
pub(super) fn graph_with(values: usize) -> Graph {
    let mut g = Graph::default();
    for i in 0..values {
        g.add_value(ValueInfo::named(format!("v{i}")));
    }
    g
}

/// A node of `op` reading and writing the values of the given indices.
pub(super) fn node(op: &str, inputs: &[usize], outputs: &[usize]) -> Node {
    Node {
        name: format!("{op}{:?}", outputs),
        op_type: op.into(),
        domain: String::new(),
        opset: 17,
        attrs: Attributes::new(),
        inputs: inputs.iter().map(|&i| Some(ValueId::new(i))).collect(),
        declared_inputs: inputs.len(),
        outputs: outputs.iter().map(|&i| Some(ValueId::new(i))).collect(),
        subgraphs: Vec::new(),
        type_attrs: Vec::new(),
    }
}

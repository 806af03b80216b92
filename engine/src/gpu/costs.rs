//! The cost graph the stream policies place from: each node's GPU time measured alone, and
//! the bytes on each edge.

use std::collections::BTreeMap;

use spillway_kernels::cuda::ops::TensorDesc;
use spillway_placement::{CostGraph, Edge, Op};

use crate::graph::Graph;
use crate::profile::boundness;

/// `graph` as a cost graph: node `i` costs `node_us[i]` on a GPU (at least 0.1 µs) and is
/// compute- or memory-bound by its op type; each edge carries its values' bytes.
pub fn cost_graph(graph: &Graph, node_us: &[f64], descs: &[Option<TensorDesc>]) -> CostGraph {
    let ops = graph
        .nodes
        .iter()
        .zip(node_us)
        .map(|(n, &us)| {
            let mut op = Op::gpu(n.name.clone(), us.max(0.1));
            op.kind = n.op_type.clone();
            op.bound = boundness(&n.op_type);
            op
        })
        .collect();
    let producers = graph.producers();
    let mut bytes: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for (dst, node) in graph.nodes.iter().enumerate() {
        for v in node.present_inputs() {
            if let Some(&src) = producers.get(&v) {
                let b = descs
                    .get(v.index())
                    .and_then(Option::as_ref)
                    .map_or(0, TensorDesc::bytes);
                *bytes.entry((src, dst)).or_default() += b as f64;
            }
        }
    }
    CostGraph {
        ops,
        edges: bytes
            .into_iter()
            .map(|((src, dst), bytes)| Edge { src, dst, bytes })
            .collect(),
        ..Default::default()
    }
}
